//! The store's `QUIVER` file: the layout fixed when the store was created — format version,
//! segment size, and the slot range each partition owns:
//!
//! ```text
//! quiver-store
//! format 2
//! segment_bytes 1073741824
//! partitions 2
//! partition 0 slots 0-8191
//! partition 1 slots 8192-16383
//! ```
//!
//! A version-1 file has no `partition` lines (keys were spread by hash); it is read only
//! with `Options::legacy_v1`, by `quiver upgrade`.

use std::fs;
use std::path::Path;
use std::sync::Arc;

use crate::dbs::DbMap;
use crate::error::{Error, Result};
use crate::hash::KeyHash;
use crate::log::format::{FORMAT_VERSION, FORMAT_VERSION_V1};
use crate::log::segment::{replace_file, sync_dir};
use crate::options::Options;
use crate::slot::{self, SlotRange, SLOTS};

pub const META_FILE: &str = "QUIVER";
/// Written first and renamed over `META_FILE` when a store is created.
pub const META_TMP_FILE: &str = "QUIVER.tmp";

/// Which partition a key belongs to. Partitions are numbered by *position* here: in the
/// order of their slot ranges (format 1: of their ids); `Layout::ids` names them.
#[derive(Clone)]
pub(crate) enum Partitioner {
    /// Format 2: the partition at position `i` owns `ranges[i]` of the Redis Cluster hash
    /// slots.
    Slots {
        ranges: Vec<SlotRange>,
        /// Slot -> position.
        of_slot: Box<[u16]>,
    },
    /// Format 1 (read by `quiver upgrade` only): the top bits of the key's xxh3 hash.
    Hash { partitions: u32 },
}

/// What `QUIVER` says about the partitions: how keys map to them, and their ids (directory
/// names), by position.
pub(crate) struct Layout {
    pub partitioner: Partitioner,
    pub ids: Vec<u32>,
    /// Which namespace each database reads (see `dbs`).
    pub dbs: Arc<DbMap>,
}

impl Partitioner {
    pub fn slots(ranges: Vec<SlotRange>) -> Partitioner {
        let mut of_slot = vec![0u16; SLOTS as usize].into_boxed_slice();
        for (p, r) in ranges.iter().enumerate() {
            for s in r.lo..=r.hi {
                of_slot[s as usize] = p as u16;
            }
        }
        Partitioner::Slots { ranges, of_slot }
    }

    /// The position of `key`'s partition (`hash` is its hash), and its slot.
    #[inline]
    pub fn route(&self, key: &[u8], hash: KeyHash) -> (usize, u16) {
        match self {
            Partitioner::Slots { of_slot, .. } => {
                let slot = slot::key_slot(key);
                (of_slot[slot as usize] as usize, slot)
            }
            Partitioner::Hash { partitions } => (hash.legacy_partition(*partitions) as usize, 0),
        }
    }

    /// The slot range of the partition at position `p` (`None` in format 1: every key).
    pub fn range(&self, p: usize) -> Option<SlotRange> {
        self.ranges().get(p).copied()
    }

    /// The partition a SCAN cursor's upper half names: the one owning that slot (format 1:
    /// the partition of that number); `None` past the last.
    pub fn scan_partition(&self, cursor_hi: u32) -> Option<usize> {
        match self {
            Partitioner::Slots { of_slot, .. } => {
                of_slot.get(cursor_hi as usize).map(|&p| p as usize)
            }
            Partitioner::Hash { partitions } => {
                (cursor_hi < *partitions).then_some(cursor_hi as usize)
            }
        }
    }

    /// The upper half of the SCAN cursor that starts partition `p`: the first slot of its
    /// range, so a cursor keeps meaning "this part of the key space" when ranges are split
    /// or merged between calls (format 1: the partition's number).
    pub fn scan_cursor_hi(&self, p: usize) -> u32 {
        match self {
            Partitioner::Slots { ranges, .. } => ranges[p].lo as u32,
            Partitioner::Hash { .. } => p as u32,
        }
    }

    /// Each partition's slot range (none in a version-1 store).
    pub fn ranges(&self) -> &[SlotRange] {
        match self {
            Partitioner::Slots { ranges, .. } => ranges,
            Partitioner::Hash { .. } => &[],
        }
    }
}

/// Reads the layout of an existing store into `opts` (partitions and segment size are fixed at
/// creation), or records `opts`' layout for a new one; returns how keys map to partitions.
pub(crate) fn load_or_create(dir: &Path, opts: &mut Options) -> Result<Layout> {
    let path = dir.join(META_FILE);
    match fs::read_to_string(&path) {
        Ok(text) => {
            let bad = |reason: &str| Error::Incompatible {
                path: path.clone(),
                reason: reason.to_string(),
            };
            let mut version = None;
            let mut listed: Vec<(u32, SlotRange)> = Vec::new();
            let (mut db_entries, mut next_ns) = (Vec::new(), 0u32);
            for line in text.lines() {
                let words: Vec<&str> = line.split_whitespace().collect();
                match words[..] {
                    ["format", v] => version = v.parse::<u32>().ok(),
                    ["partitions", v] => {
                        opts.partitions = v.parse().map_err(|_| bad("unreadable partitions"))?
                    }
                    ["segment_bytes", v] => {
                        opts.segment_bytes =
                            v.parse().map_err(|_| bad("unreadable segment_bytes"))?
                    }
                    ["next-namespace", n] => {
                        next_ns = n.parse().map_err(|_| bad("unreadable next-namespace"))?
                    }
                    ["database", db, "namespace", ns] => {
                        let (Ok(db), Ok(ns)) = (db.parse::<u32>(), ns.parse::<u32>()) else {
                            return Err(bad(&format!("unreadable database line {line:?}")));
                        };
                        db_entries.push((db, ns));
                    }
                    ["partition", id, "slots", range] => {
                        let range = SlotRange::parse(range)
                            .ok_or_else(|| bad(&format!("unreadable slot range {range:?}")))?;
                        let id = id
                            .parse::<u32>()
                            .map_err(|_| bad(&format!("unreadable partition id {id:?}")))?;
                        if listed.iter().any(|&(i, _)| i == id) {
                            return Err(bad(&format!("partition {id} listed twice")));
                        }
                        listed.push((id, range));
                    }
                    _ => {}
                }
            }
            listed.sort_by_key(|&(_, r)| r);
            let ranges: Vec<SlotRange> = listed.iter().map(|&(_, r)| r).collect();
            let dbs = Arc::new(
                DbMap::from_entries(&db_entries, next_ns)
                    .map_err(|e| bad(&format!("database mapping: {e}")))?,
            );
            let layout = match version {
                Some(FORMAT_VERSION) if opts.legacy_v1 => {
                    return Err(Error::AlreadyCurrent {
                        dir: dir.to_path_buf(),
                        version: FORMAT_VERSION,
                    })
                }
                Some(FORMAT_VERSION) => {
                    if ranges.len() != opts.partitions as usize || !slot::covers_all(&ranges) {
                        return Err(bad(
                            "the partitions' slot ranges do not cover every slot once",
                        ));
                    }
                    Layout {
                        partitioner: Partitioner::slots(ranges),
                        ids: listed.iter().map(|&(id, _)| id).collect(),
                        dbs,
                    }
                }
                Some(FORMAT_VERSION_V1) if opts.legacy_v1 => Layout {
                    partitioner: Partitioner::Hash {
                        partitions: opts.partitions,
                    },
                    ids: (0..opts.partitions).collect(),
                    dbs,
                },
                Some(found) if found < FORMAT_VERSION => {
                    return Err(Error::OldFormat {
                        dir: dir.to_path_buf(),
                        found,
                        expected: FORMAT_VERSION,
                    })
                }
                other => {
                    return Err(bad(&format!(
                        "format version {other:?}, expected {FORMAT_VERSION}"
                    )))
                }
            };
            // The store's segments bound the values it can hold: a larger limit asked for
            // (the default one, by a tool opening a store with small segments) is lowered.
            opts.value_len_max = opts
                .value_len_max
                .min(value_len_fitting(opts.segment_bytes));
            opts.validate()?;
            Ok(layout)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if opts.legacy_v1 {
                return Err(Error::io(
                    "read store metadata",
                    &path,
                    std::io::Error::from(std::io::ErrorKind::NotFound),
                ));
            }
            let ranges = SlotRange::even(opts.partitions);
            let ids: Vec<u32> = (0..opts.partitions).collect();
            let listed: Vec<(u32, SlotRange)> = ids.iter().copied().zip(ranges.clone()).collect();
            let dbs = Arc::new(DbMap::identity());
            store_layout(dir, opts.segment_bytes, &listed, &dbs)?;
            Ok(Layout {
                partitioner: Partitioner::slots(ranges),
                ids,
                dbs,
            })
        }
        Err(e) => Err(Error::io("read store metadata", &path, e)),
    }
}

/// Writes a format-2 `QUIVER` file listing `parts` (id, range) — at creation, and as the
/// commit point of a split or merge: written to a temporary file, fsynced and renamed, so it
/// is the old layout or the new one, whole.
pub(crate) fn store_layout(
    dir: &Path,
    segment_bytes: u64,
    parts: &[(u32, SlotRange)],
    dbs: &DbMap,
) -> Result<()> {
    let mut text = format!(
        "quiver-store\nformat {FORMAT_VERSION}\nsegment_bytes {segment_bytes}\npartitions {}\n",
        parts.len()
    );
    for (id, r) in parts {
        text.push_str(&format!("partition {id} slots {r}\n"));
    }
    text.push_str(&dbs.to_meta());
    let (path, tmp) = (dir.join(META_FILE), dir.join(META_TMP_FILE));
    replace_file(&tmp, &path, text.as_bytes(), "write store metadata", || {})?;
    sync_dir(dir)
}

/// Largest value whose record (with the longest key and `ext`) fits in a segment of
/// `segment_bytes`.
fn value_len_fitting(segment_bytes: u64) -> usize {
    use crate::log::format::{
        record_len_ext, RECORD_ALIGN, RECORD_EXT_LEN_MAX, SEGMENT_HEADER_LEN,
    };
    use crate::options::KEY_LEN_MAX;
    // `segment_bytes` may come from a damaged file: saturating, so a size too small for any
    // record gives 0 here and is refused by `Options::validate` after.
    let room = (segment_bytes as usize).saturating_sub(SEGMENT_HEADER_LEN);
    // record_len rounds up to RECORD_ALIGN: leave room for the padding.
    let fixed = record_len_ext(RECORD_EXT_LEN_MAX, KEY_LEN_MAX, 0) + RECORD_ALIGN;
    let v = room.saturating_sub(fixed);
    debug_assert!(room < fixed || record_len_ext(RECORD_EXT_LEN_MAX, KEY_LEN_MAX, v) <= room);
    v
}
