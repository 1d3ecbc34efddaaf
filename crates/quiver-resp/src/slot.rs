//! Redis Cluster hash slots: a key's slot is CRC16 (XMODEM) of the key — or of its `{hashtag}`
//! when it has a non-empty one — modulo 16384, exactly as Redis Cluster clients compute it.
//!
//! One home for the computation and for ranges of slots ([`SlotRange`]): the engine routes keys
//! to partitions by them (`quiver-store` re-exports this module as `quiver_store::slot`), the
//! server answers `CLUSTER KEYSLOT` with it, the cluster's metadata maps ranges to nodes and the
//! cluster client routes requests to nodes by it. It lives in this dependency-light crate so
//! neither the client nor the cluster's metadata needs the engine to compute a slot.

use std::fmt;

/// Number of hash slots (Redis Cluster's).
pub const SLOTS: u32 = 16384;

/// The hash slot of `key`.
pub fn key_slot(key: &[u8]) -> u16 {
    crc16(hash_tag(key)) % SLOTS as u16
}

/// The part of `key` that is hashed: the bytes between the first `{` and the first `}` after
/// it, when that is not empty; otherwise the whole key (Redis's `keyHashSlot`).
pub fn hash_tag(key: &[u8]) -> &[u8] {
    if let Some(open) = find_open_brace(key) {
        if let Some(len) = key[open + 1..].iter().position(|&b| b == b'}') {
            if len > 0 {
                return &key[open + 1..open + 1 + len];
            }
        }
    }
    key
}

/// The position of the first `{` in `key`, eight bytes a step: every key of every request is
/// scanned for a hash tag, and a bytewise scan of a 16-byte key cost as much as its CRC. A
/// byte equal to `{` becomes zero after the XOR; `(x - 0x01..) & !x & 0x80..` flags the
/// lowest zero byte exactly (a borrow can only flag bytes above it), and little-endian
/// loading puts the first byte lowest.
fn find_open_brace(key: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    const BRACES: u64 = ONES * b'{' as u64;
    let mut chunks = key.chunks_exact(8);
    let mut at = 0;
    for c in &mut chunks {
        let x = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]) ^ BRACES;
        let flagged = x.wrapping_sub(ONES) & !x & HIGHS;
        if flagged != 0 {
            return Some(at + (flagged.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    chunks
        .remainder()
        .iter()
        .position(|&b| b == b'{')
        .map(|p| at + p)
}

/// CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0), Redis's `crc16`. Eight bytes at
/// a time by slicing: `CRC16_TABLES[k][x]` is the CRC of byte `x` followed by `k` zero bytes,
/// and CRC is linear, so the eight lookups of a step are independent (every key of every
/// request is hashed here: the bytewise loop cost a tenth of a multiget).
pub fn crc16(bytes: &[u8]) -> u16 {
    let t = &CRC16_TABLES;
    let mut crc: u16 = 0;
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        crc = t[7][((crc >> 8) as u8 ^ c[0]) as usize]
            ^ t[6][(crc as u8 ^ c[1]) as usize]
            ^ t[5][c[2] as usize]
            ^ t[4][c[3] as usize]
            ^ t[3][c[4] as usize]
            ^ t[2][c[5] as usize]
            ^ t[1][c[6] as usize]
            ^ t[0][c[7] as usize];
    }
    for &b in chunks.remainder() {
        crc = (crc << 8) ^ t[0][(((crc >> 8) as u8) ^ b) as usize];
    }
    crc
}

static CRC16_TABLES: [[u16; 256]; 8] = crc16_tables();

const fn crc16_tables() -> [[u16; 256]; 8] {
    let mut t = [[0u16; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut c = (i as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            c = if c & 0x8000 != 0 {
                (c << 1) ^ 0x1021
            } else {
                c << 1
            };
            bit += 1;
        }
        t[0][i] = c;
        i += 1;
    }
    let mut k = 1;
    while k < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = t[k - 1][i];
            t[k][i] = (prev << 8) ^ t[0][(prev >> 8) as usize];
            i += 1;
        }
        k += 1;
    }
    t
}

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

    /// Whether the two ranges share a slot.
    pub fn overlaps(&self, other: &SlotRange) -> bool {
        self.lo <= other.hi && other.lo <= self.hi
    }

    /// Whether every slot of `other` is in this range.
    pub fn covers(&self, other: &SlotRange) -> bool {
        self.lo <= other.lo && other.hi <= self.hi
    }

    /// The slots in both ranges, if any.
    pub fn intersection(&self, other: &SlotRange) -> Option<SlotRange> {
        self.overlaps(other).then(|| SlotRange {
            lo: self.lo.max(other.lo),
            hi: self.hi.min(other.hi),
        })
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

    /// Values from the Redis Cluster specification and `redis-cli CLUSTER KEYSLOT`.
    #[test]
    fn slots_match_redis_cluster() {
        assert_eq!(crc16(b"123456789"), 0x31c3);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"bar"), 5061);
        assert_eq!(key_slot(b"key"), 12539);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"foo{}{bar}"), key_slot(b"foo{}{bar}"));
        assert_eq!(hash_tag(b"foo{}{bar}"), b"foo{}{bar}");
        assert_eq!(hash_tag(b"foo{{bar}}zap"), b"{bar");
        assert_eq!(hash_tag(b"foo{bar}{zap}"), b"bar");
        assert_eq!(hash_tag(b"{"), b"{");
    }

    /// The sliced CRC equals the bytewise definition for every length and many inputs.
    #[test]
    fn sliced_crc16_equals_bytewise() {
        fn bytewise(bytes: &[u8]) -> u16 {
            let mut crc: u16 = 0;
            for &b in bytes {
                crc ^= (b as u16) << 8;
                for _ in 0..8 {
                    crc = if crc & 0x8000 != 0 {
                        (crc << 1) ^ 0x1021
                    } else {
                        crc << 1
                    };
                }
            }
            crc
        }
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for len in 0..100 {
            for _ in 0..20 {
                let v: Vec<u8> = (0..len)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        x as u8
                    })
                    .collect();
                assert_eq!(crc16(&v), bytewise(&v), "{v:?}");
            }
        }
    }

    /// The word-at-a-time search finds the first `{` wherever it is, among bytes one off it
    /// (`z`, `|`), with its high bit set (0xfb) and zero, where a borrow could mislead it.
    #[test]
    fn open_brace_search_equals_bytewise() {
        let fillers = [b'a', b'z', b'|', 0xfb, 0x00, 0xff, b'}'];
        for len in 0..40 {
            for &fill in &fillers {
                for first in (0..len).map(Some).chain([None]) {
                    let mut key = vec![fill; len];
                    if let Some(i) = first {
                        key[i] = b'{';
                        // A second brace later must not win.
                        if i + 3 < len {
                            key[i + 3] = b'{';
                        }
                    }
                    let want = key.iter().position(|&b| b == b'{');
                    assert_eq!(find_open_brace(&key), want, "{key:?}");
                }
            }
        }
    }

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
