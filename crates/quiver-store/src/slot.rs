//! Redis Cluster hash slots: a key's slot is CRC16 (XMODEM) of the key — or of its `{hashtag}`
//! when it has a non-empty one — modulo 16384, exactly as Redis Cluster clients compute it.
//! The computation lives in `quiver_resp::slot` (one home, shared with the cluster client) and
//! is re-exported here, so `quiver_store::slot::key_slot` names it as before. Each partition
//! of a store owns a contiguous range of slots (recorded in `QUIVER`), so the ranges the
//! cluster moves between nodes are whole partitions, or splits of them.

use std::fmt;

pub use quiver_resp::slot::{crc16, hash_tag, key_slot, SLOTS};

/// A contiguous, inclusive range of slots, written `lo-hi` as Redis does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SlotRange {
    pub lo: u16,
    pub hi: u16,
}

impl SlotRange {
    pub const ALL: SlotRange = SlotRange {
        lo: 0,
        hi: (SLOTS - 1) as u16,
    };

    pub fn new(lo: u16, hi: u16) -> Option<SlotRange> {
        (lo <= hi && (hi as u32) < SLOTS).then_some(SlotRange { lo, hi })
    }

    pub fn contains(&self, slot: u16) -> bool {
        self.lo <= slot && slot <= self.hi
    }

    pub fn len(&self) -> u32 {
        (self.hi - self.lo) as u32 + 1
    }

    pub fn is_empty(&self) -> bool {
        false
    }

    /// `n` ranges of (nearly) equal size covering every slot in order: the layout of a new
    /// store with `n` partitions.
    pub fn even(n: u32) -> Vec<SlotRange> {
        let n = n.clamp(1, SLOTS);
        (0..n)
            .map(|i| SlotRange {
                lo: (i * SLOTS / n) as u16,
                hi: ((i + 1) * SLOTS / n - 1) as u16,
            })
            .collect()
    }

    /// Parses `lo-hi` (or a single slot).
    pub fn parse(s: &str) -> Option<SlotRange> {
        let (lo, hi) = match s.split_once('-') {
            Some((a, b)) => (a.parse().ok()?, b.parse().ok()?),
            None => {
                let v = s.parse().ok()?;
                (v, v)
            }
        };
        SlotRange::new(lo, hi)
    }
}

impl fmt::Display for SlotRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.lo, self.hi)
    }
}

/// The partition `key` belongs to in a store created with `partitions` partitions (each
/// owning one of [`SlotRange::even`]'s ranges).
pub fn even_layout_partition(key: &[u8], partitions: u32) -> u32 {
    let slot = key_slot(key) as u32;
    let n = partitions.clamp(1, SLOTS);
    // Range i starts at i * SLOTS / n: the last start at or before the slot.
    (0..n).rev().find(|&i| i * SLOTS / n <= slot).unwrap_or(0)
}

/// Whether `ranges`, in order, cover every slot exactly once.
pub fn covers_all(ranges: &[SlotRange]) -> bool {
    let mut next = 0u32;
    for r in ranges {
        if r.lo as u32 != next {
            return false;
        }
        next = r.hi as u32 + 1;
    }
    next == SLOTS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn even_layout_partition_is_the_range_holding_the_slot() {
        for n in [1, 3, 16, 1000] {
            let ranges = SlotRange::even(n);
            for k in 0..2000 {
                let key = format!("key:{k}");
                let p = even_layout_partition(key.as_bytes(), n);
                assert!(ranges[p as usize].contains(key_slot(key.as_bytes())));
            }
        }
    }

    #[test]
    fn even_ranges_cover_all_slots() {
        for n in [1, 2, 3, 7, 16, 1000, SLOTS] {
            let r = SlotRange::even(n);
            assert_eq!(r.len(), n as usize);
            assert!(covers_all(&r), "{n}");
        }
        assert_eq!(SlotRange::even(2)[1].to_string(), "8192-16383");
        assert_eq!(SlotRange::parse("8192-16383"), Some(SlotRange::even(2)[1]));
        assert_eq!(SlotRange::parse("5"), SlotRange::new(5, 5));
        assert_eq!(SlotRange::parse("9-3"), None);
        assert_eq!(SlotRange::parse("0-16384"), None);
    }
}
