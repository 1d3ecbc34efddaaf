//! Key hashing: one xxh3-64 per key gives its partition, its place in the partition's index and
//! scan order, and its in-RAM key fragment.
//!
//! Bit use of the 64-bit hash `h`:
//! - partition = (h[32..64] * partitions) >> 32 — the top bits;
//! - order     = h[0..32] — home slot `(order * capacity) >> 32` and the SCAN cursor position;
//! - fragment  = h[32..48], moved off the reserved values 0 (empty) and 1 (tombstone).

/// Index fragment value of an empty slot.
pub const FRAG_EMPTY: u16 = 0;
/// Index fragment value of a deleted slot (probing continues past it).
pub const FRAG_TOMBSTONE: u16 = 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyHash(pub u64);

impl KeyHash {
    #[inline]
    pub fn of(key: &[u8]) -> KeyHash {
        KeyHash(xxhash_rust::xxh3::xxh3_64(key))
    }

    #[inline]
    pub fn partition(self, partitions: u32) -> u32 {
        (((self.0 >> 32) * partitions as u64) >> 32) as u32
    }

    /// Position within the partition: orders the index and SCAN.
    #[inline]
    pub fn order(self) -> u32 {
        self.0 as u32
    }

    #[inline]
    pub fn fragment(self) -> u16 {
        let f = (self.0 >> 32) as u16;
        if f <= FRAG_TOMBSTONE {
            f + 2
        } else {
            f
        }
    }
}
