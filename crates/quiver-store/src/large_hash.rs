//! A large hash (docs/design.md, "Hashes: the layout"): the record at its key holds a
//! [`Meta`] — a generation, the field count, the fields' bytes and the shape of its buckets —
//! and its fields live in **buckets**, records of the hidden database [`BUCKETS_DB`] keyed by
//! [`Meta::bucket_key`], each holding the fields whose hash lands in it, packed as a small
//! hash is (`fields`). The buckets grow by linear hashing ([`Meta::split_next`]): one bucket
//! splits in two at a time, so a write rewrites a bounded number of them.
//!
//! ```text
//! meta := 0x00 version:u8 generation:u64 slot:u16 count:u64 bytes:u64 level:u8 split:u32
//! bucket key := '{' tag[2] '}' generation:u64be number:u32be
//! anchor key := '{' tag[2] '}' generation:u64be     anchor := buckets:u32 slot:u16 parent
//! ```
//!
//! Each large hash also has an **anchor** (database [`ANCHORS_DB`]): its generation, how many
//! buckets it has, and the key of its metadata. A hash that is gone — deleted, expired,
//! overwritten, flushed — leaves its anchor and buckets behind; the node's reclaimer finds
//! anchors whose key holds no metadata of their generation in any database and deletes them
//! with their buckets.
//!
//! A meta value starts with a zero byte, which no packed hash does (its first byte is its
//! field count, at least 1): a hash record's first byte tells the two encodings apart.
//! The bucket key's `{tag}` is two bytes whose CRC16 is the hash's slot (Redis Cluster hashes
//! only what is between the braces), so every bucket routes where its hash does — same
//! partition, same cluster range, same chain — through the one `key_slot` every path uses.

use std::sync::OnceLock;

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::dbs::DATABASES_MAX;
use crate::fields::{FieldsError, Packed};
use crate::slot::{crc16, SLOTS};

/// The database buckets are kept in: past every database a client can SELECT, so SCAN, KEYS,
/// DBSIZE, RANDOMKEY and INFO keyspace never see them.
pub const BUCKETS_DB: u32 = DATABASES_MAX - 1;
/// The database of the anchors ([`Anchor`]): one record per large hash, which the node's
/// reclaimer walks to find the buckets of hashes that are gone.
pub const ANCHORS_DB: u32 = DATABASES_MAX - 2;
/// Most databases a client can SELECT (`databases`): the hidden ones come after.
pub const USER_DATABASES_MAX: u32 = ANCHORS_DB;
/// Average bytes of fields and values per bucket past which the hash splits one. Small: a
/// read of one field checksums, checks and walks its whole bucket, and a write rewrites it
/// (HGET of a ~1M-field hash 0.32x Redis with 2 KiB buckets, 0.48x with these; HSET 0.08x
/// and 0.26x: docs/BENCHMARKS.md), while an index slot per ~10 fields keeps RAM under a byte
/// per field, and a bucket stays one disk read.
pub const BUCKET_BYTES_TARGET: u64 = 256;
/// Fewest fields per bucket, on average, before a split (a hash of a few huge values is not
/// spread over buckets of one field each).
pub const BUCKET_FIELDS_MIN: u64 = 4;
/// Most buckets a hash has: 2^31 (bucket numbers are u32, `level` at most 31).
const LEVEL_MAX: u8 = 31;
const META_MARK: u8 = 0;
const META_VERSION: u8 = 1;
/// Bytes of a meta value.
pub const META_LEN: usize = 2 + 8 + 2 + 8 + 8 + 1 + 4;
/// Seed of the fields' hash (xxh3), unrelated to the keys' hash.
const FIELD_SEED: u64 = 0x5155_4956_4552_4831;

/// The metadata of a large hash: the value of the record at its key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meta {
    /// Which buckets are this hash's: random, so never reused by another hash (a deleted
    /// hash's buckets cannot be read as a new one's).
    pub generation: u64,
    /// The slot its buckets route by: the key's when it became large.
    pub slot: u16,
    /// Fields (HLEN).
    pub count: u64,
    /// Bytes of its fields and values, which decide when a bucket splits.
    pub bytes: u64,
    /// Linear hashing: `2^level + split` buckets, those below `split` already split.
    pub level: u8,
    pub split: u32,
}

/// What a hash record's value holds.
#[derive(Clone, Copy, Debug)]
pub enum HashValue<'a> {
    /// Every field, packed in the record (a small hash).
    Packed(Packed<'a>),
    /// The metadata of a large hash.
    Large(Meta),
}

impl<'a> HashValue<'a> {
    /// The value of a hash record, its structure checked.
    pub fn of(value: &'a [u8]) -> Result<HashValue<'a>, FieldsError> {
        if value.first() == Some(&META_MARK) {
            Meta::decode(value).map(HashValue::Large)
        } else {
            Packed::new(value).map(HashValue::Packed)
        }
    }

    /// As [`HashValue::of`], and no field twice in a packed one (the checker's verification).
    pub fn check(value: &'a [u8]) -> Result<HashValue<'a>, FieldsError> {
        if value.first() == Some(&META_MARK) {
            Meta::decode(value).map(HashValue::Large)
        } else {
            Packed::check(value).map(HashValue::Packed)
        }
    }
}

impl Meta {
    /// A new large hash of `count` fields of `bytes` bytes at a key of `slot`, with as many
    /// buckets (a power of two) as its bytes need.
    pub fn new(generation: u64, slot: u16, count: u64, bytes: u64) -> Meta {
        let want = bytes
            .div_ceil(BUCKET_BYTES_TARGET)
            .min(count / BUCKET_FIELDS_MIN)
            .max(1);
        let level = (64 - (want - 1).leading_zeros()).min(u32::from(LEVEL_MAX)) as u8;
        Meta {
            generation,
            slot,
            count,
            bytes,
            level,
            split: 0,
        }
    }

    pub fn encode(&self) -> Bytes {
        let mut out = BytesMut::with_capacity(META_LEN);
        out.put_u8(META_MARK);
        out.put_u8(META_VERSION);
        out.put_u64_le(self.generation);
        out.put_u16_le(self.slot);
        out.put_u64_le(self.count);
        out.put_u64_le(self.bytes);
        out.put_u8(self.level);
        out.put_u32_le(self.split);
        out.freeze()
    }

    pub fn decode(value: &[u8]) -> Result<Meta, FieldsError> {
        if value.len() != META_LEN || value[0] != META_MARK || value[1] != META_VERSION {
            return Err(FieldsError::BadMeta);
        }
        let mut at = &value[2..];
        let meta = Meta {
            generation: at.get_u64_le(),
            slot: at.get_u16_le(),
            count: at.get_u64_le(),
            bytes: at.get_u64_le(),
            level: at.get_u8(),
            split: at.get_u32_le(),
        };
        let shape_ok = meta.level <= LEVEL_MAX && u64::from(meta.split) < 1u64 << meta.level;
        if !shape_ok || u32::from(meta.slot) >= SLOTS || meta.count == 0 {
            return Err(FieldsError::BadMeta);
        }
        Ok(meta)
    }

    /// How many buckets the hash has (numbered from 0).
    pub fn buckets(&self) -> u32 {
        ((1u64 << self.level) + u64::from(self.split)) as u32
    }

    /// The bucket `field` belongs in.
    pub fn bucket_of(&self, field: &[u8]) -> u32 {
        bucket_at(field_hash(field), self.level, self.split)
    }

    /// The key of bucket `n` (in [`BUCKETS_DB`]).
    pub fn bucket_key(&self, n: u32) -> Bytes {
        bucket_key(self.slot, self.generation, n)
    }

    /// The key of the hash's anchor (in [`ANCHORS_DB`]).
    pub fn anchor_key(&self) -> Bytes {
        tagged_key(self.slot, self.generation).freeze()
    }

    /// The hash's anchor, its metadata at `parent`.
    pub fn anchor(&self, parent: &[u8]) -> Bytes {
        let mut value = BytesMut::with_capacity(6 + parent.len());
        value.put_u32_le(self.buckets());
        value.put_u16_le(self.slot);
        value.put_slice(parent);
        value.freeze()
    }

    /// Whether the hash wants another bucket: more bytes and fields per bucket, on average,
    /// than the targets.
    pub fn wants_split(&self) -> bool {
        let n = u64::from(self.buckets());
        self.level < LEVEL_MAX
            && self.bytes > BUCKET_BYTES_TARGET * n
            && self.count > BUCKET_FIELDS_MIN * n
    }

    /// Adds a bucket: returns `(from, to)`, the bucket whose fields are now divided between
    /// itself and the new bucket `to` (each field goes where [`Meta::bucket_of`] now says).
    /// Fields only ever move to a higher bucket, which keeps HSCAN's promise.
    pub fn split_next(&mut self) -> (u32, u32) {
        let from = self.split;
        let to = ((1u64 << self.level) + u64::from(from)) as u32;
        self.split += 1;
        if u64::from(self.split) == 1u64 << self.level {
            self.level += 1;
            self.split = 0;
        }
        (from, to)
    }
}

impl crate::batch::Entry {
    /// What a hash's value holds (its fields, or a large hash's metadata), read in place;
    /// [`crate::Error::WrongType`] for a string.
    pub fn hash_value(&self) -> crate::Result<HashValue<'_>> {
        if self.kind != crate::batch::ValueKind::Hash {
            return Err(crate::Error::WrongType);
        }
        Ok(HashValue::of(&self.value)?)
    }
}

/// A large hash's anchor as the reclaimer reads it ([`Meta::anchor`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Anchor {
    pub generation: u64,
    pub slot: u16,
    /// How many buckets the hash had at its last change of shape (its buckets are below).
    pub buckets: u32,
    /// The key of its metadata (in whichever database holds it).
    pub parent: Bytes,
}

impl Anchor {
    /// The anchor of `key` holding `value`; `None` for what no anchor looks like.
    pub fn decode(key: &[u8], value: &Bytes) -> Option<Anchor> {
        let generation = u64::from_be_bytes(key.get(4..12)?.try_into().ok()?);
        let mut at = value.get(..6)?;
        let (buckets, slot) = (at.get_u32_le(), at.get_u16_le());
        (key.len() == 12 && u32::from(slot) < SLOTS).then(|| Anchor {
            generation,
            slot,
            buckets,
            parent: value.slice(6..),
        })
    }

    pub fn bucket_key(&self, n: u32) -> Bytes {
        bucket_key(self.slot, self.generation, n)
    }
}

/// `{tag}` (the two bytes whose CRC16 is `slot`) and the generation.
fn tagged_key(slot: u16, generation: u64) -> BytesMut {
    let tag = slot_tags()[usize::from(slot)];
    let mut key = BytesMut::with_capacity(4 + 8 + 4);
    key.put_u8(b'{');
    key.put_slice(&tag);
    key.put_u8(b'}');
    key.put_u64(generation);
    key
}

fn bucket_key(slot: u16, generation: u64, n: u32) -> Bytes {
    let mut key = tagged_key(slot, generation);
    key.put_u32(n);
    key.freeze()
}

/// The size a pair counts for in [`Meta::bytes`].
pub fn pair_bytes(field: &[u8], value: &[u8]) -> u64 {
    (field.len() + value.len()) as u64
}

fn field_hash(field: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64_with_seed(field, FIELD_SEED)
}

/// Linear hashing's bucket of hash `h` among `2^level + split` buckets.
fn bucket_at(h: u64, level: u8, split: u32) -> u32 {
    let low = h & ((1u64 << level) - 1);
    if low < u64::from(split) {
        (h & ((1u64 << (level + 1)) - 1)) as u32
    } else {
        low as u32
    }
}

/// For each slot, two bytes without a `}` whose CRC16 lands in it.
fn slot_tags() -> &'static [[u8; 2]] {
    static TAGS: OnceLock<Vec<[u8; 2]>> = OnceLock::new();
    TAGS.get_or_init(|| {
        let mut tags = vec![None; SLOTS as usize];
        for a in 0..=255u8 {
            for b in 0..=255u8 {
                let slot = usize::from(crc16(&[a, b]) % SLOTS as u16);
                if a != b'}' && b != b'}' && tags[slot].is_none() {
                    tags[slot] = Some([a, b]);
                }
            }
        }
        // CRC16 is a bijection on two-byte strings: each slot has 4, few with a `}` (the test
        // `every_bucket_routes_by_its_hash_slot` checks that none is missing).
        tags.into_iter().map(Option::unwrap_or_default).collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slot::key_slot;

    #[test]
    fn every_bucket_routes_by_its_hash_slot() {
        for slot in 0..SLOTS as u16 {
            let meta = Meta::new(0x7d7d_7b7b_7d7b_7d7d, slot, 1, 1);
            for n in [0, 1, 0x7d, 0x7d7b_7d7d] {
                assert_eq!(
                    key_slot(&meta.bucket_key(n)),
                    slot,
                    "slot {slot} bucket {n}"
                );
            }
        }
    }

    #[test]
    fn an_anchor_names_its_hash_and_its_buckets() {
        let meta = Meta::new(0x7d7d, 4242, 1000, 100_000);
        let anchor = Anchor::decode(&meta.anchor_key(), &meta.anchor(b"user:1")).unwrap();
        assert_eq!(anchor.generation, 0x7d7d);
        assert_eq!(anchor.buckets, meta.buckets());
        assert_eq!(&anchor.parent[..], b"user:1");
        assert_eq!(anchor.bucket_key(7), meta.bucket_key(7));
        assert_eq!(key_slot(&meta.anchor_key()), 4242);
        assert_eq!(
            Anchor::decode(&meta.bucket_key(0), &meta.anchor(b"k")),
            None
        );
        assert_eq!(
            Anchor::decode(&meta.anchor_key(), &Bytes::from_static(b"abc")),
            None
        );
    }

    #[test]
    fn meta_round_trips_and_damage_is_refused() {
        // 100,000 bytes want 391 buckets of 256; 1000 fields allow 250 of 4: 256 buckets.
        let mut meta = Meta::new(42, 16383, 1000, 100_000);
        assert_eq!(meta.buckets(), 256);
        meta.split_next();
        let bytes = meta.encode();
        assert_eq!(bytes.len(), META_LEN);
        assert_eq!(Meta::decode(&bytes), Ok(meta));
        assert!(matches!(HashValue::of(&bytes), Ok(HashValue::Large(m)) if m == meta));
        for cut in 0..META_LEN {
            assert!(Meta::decode(&bytes[..cut]).is_err());
        }
        let mut bad = bytes.to_vec();
        bad[28] = 40;
        assert_eq!(Meta::decode(&bad), Err(FieldsError::BadMeta));
    }

    #[test]
    fn linear_hashing_moves_fields_only_to_the_new_bucket() {
        let mut meta = Meta::new(1, 0, 1, 1);
        let fields: Vec<Vec<u8>> = (0..2000).map(|i| format!("f{i}").into_bytes()).collect();
        for _ in 0..300 {
            let before: Vec<u32> = fields.iter().map(|f| meta.bucket_of(f)).collect();
            let (from, to) = meta.split_next();
            for (f, b) in fields.iter().zip(before) {
                let now = meta.bucket_of(f);
                assert!(now < meta.buckets());
                assert!(now == b || (b == from && now == to), "{b} -> {now}");
            }
        }
        assert_eq!(meta.buckets(), 301);
    }

    #[test]
    fn a_new_hash_gets_buckets_for_its_bytes() {
        // 10,260 bytes want 41 buckets: the next power of two.
        assert_eq!(Meta::new(1, 0, 513, 513 * 20).buckets(), 64);
        assert_eq!(Meta::new(1, 0, 3, 3_000_000).buckets(), 1);
        let m = Meta::new(1, 0, 100, 100 * 100);
        assert!(!m.wants_split());
    }
}
