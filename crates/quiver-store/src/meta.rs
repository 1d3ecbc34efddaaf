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
