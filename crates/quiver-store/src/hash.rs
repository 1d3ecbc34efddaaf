//! Key hashing: one xxh3-64 per key gives its partition, its place in the partition's index and
//! scan order, and its in-RAM key fragment.
//!
//! (A key's partition comes from its Redis Cluster hash slot, `slot`; stores of format 1 took
//! it from the top bits, `legacy_partition`.)
//!
//! Bit use of the 64-bit hash `h`:
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

    /// The hash of `key` in namespace `ns` (a database of SELECT): the namespace seeds the
    /// hash, so equal keys of different databases are different keys; namespace 0 is
    /// [`KeyHash::of`].
    #[inline]
    pub fn of_ns(ns: u32, key: &[u8]) -> KeyHash {
        if ns == 0 {
            KeyHash::of(key)
        } else {
            KeyHash(xxhash_rust::xxh3::xxh3_64_with_seed(key, ns as u64))
        }
    }

    /// The partition of format 1: `(h[32..64] * partitions) >> 32`, the top bits.
    #[inline]
    pub fn legacy_partition(self, partitions: u32) -> u32 {
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
