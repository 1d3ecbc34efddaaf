//! The store's `QUIVER` file: the layout fixed when the store was created.

use std::fs;
use std::path::Path;

use crate::error::{Error, Result};
use crate::log::format::FORMAT_VERSION;
use crate::log::segment::sync_dir;
use crate::options::Options;

pub const META_FILE: &str = "QUIVER";
/// Written first and renamed over `META_FILE` when a store is created.
pub const META_TMP_FILE: &str = "QUIVER.tmp";

/// Reads the layout of an existing store into `opts` (partitions and segment size are fixed at
/// creation), or records `opts`' layout for a new one.
pub(crate) fn load_or_create(dir: &Path, opts: &mut Options) -> Result<()> {
    let path = dir.join(META_FILE);
    match fs::read_to_string(&path) {
        Ok(text) => {
            let bad = |reason: &str| Error::Incompatible {
                path: path.clone(),
                reason: reason.to_string(),
            };
            let mut version = None;
            for line in text.lines() {
                let mut it = line.split_whitespace();
                match (it.next(), it.next()) {
                    (Some("format"), Some(v)) => version = v.parse::<u32>().ok(),
                    (Some("partitions"), Some(v)) => {
                        opts.partitions = v.parse().map_err(|_| bad("unreadable partitions"))?
                    }
                    (Some("segment_bytes"), Some(v)) => {
                        opts.segment_bytes =
                            v.parse().map_err(|_| bad("unreadable segment_bytes"))?
                    }
                    _ => {}
                }
            }
            if version != Some(FORMAT_VERSION) {
                return Err(bad(&format!(
                    "format version {version:?}, expected {FORMAT_VERSION}"
                )));
            }
            // The store's segments bound the values it can hold: a larger limit asked for
            // (the default one, by a tool opening a store with small segments) is lowered.
            opts.value_len_max = opts
                .value_len_max
                .min(value_len_fitting(opts.segment_bytes));
            opts.validate()
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let text = format!(
                "quiver-store\nformat {FORMAT_VERSION}\npartitions {}\nsegment_bytes {}\n",
                opts.partitions, opts.segment_bytes
            );
            let tmp = dir.join(META_TMP_FILE);
            fs::write(&tmp, text)
                .and_then(|_| fs::File::open(&tmp)?.sync_all())
                .and_then(|_| fs::rename(&tmp, &path))
                .map_err(|e| Error::io("write store metadata", &path, e))?;
            sync_dir(dir)
        }
        Err(e) => Err(Error::io("read store metadata", &path, e)),
    }
}

/// Largest value whose record (with the longest key) fits in a segment of `segment_bytes`.
fn value_len_fitting(segment_bytes: u64) -> usize {
    use crate::log::format::{record_len, RECORD_ALIGN, SEGMENT_HEADER_LEN};
    let room = segment_bytes as usize - SEGMENT_HEADER_LEN;
    // record_len rounds up to RECORD_ALIGN: leave room for the padding.
    let v = room.saturating_sub(record_len(crate::options::KEY_LEN_MAX, 0) + RECORD_ALIGN);
    debug_assert!(record_len(crate::options::KEY_LEN_MAX, v) <= room);
    v
}
