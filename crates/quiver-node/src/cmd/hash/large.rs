//! A large hash (`quiver_store::large_hash`) as one command reads or changes it, through the
//! transaction: the metadata from the key's record, then the buckets the command needs as one
//! vector (`Txn::prefetch`), and a change written back as the buckets it touched plus the
//! metadata, in the transaction's one batch. A command that reads the metadata and then its
//! buckets (two engine calls) still answers from one state of the store: the commit checks
//! every read unchanged, and runs the command again if one changed.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use quiver_store::fields::{encode_pairs, Packed};
use quiver_store::large_hash::{pair_bytes, Meta, ANCHORS_DB, BUCKETS_DB};
use quiver_store::slot::key_slot;
use quiver_store::{Entry, ValueKind};

use crate::cmd::common::random_u64;
use crate::txn::Txn;

/// A bucket's pairs in their order.
type Pairs = Vec<(Bytes, Bytes)>;

/// Bucket splits a write makes at most, beyond one per [`FIELDS_PER_SPLIT`] fields it adds:
/// a growing hash keeps its buckets near their size, and a write's cost stays bounded.
const SPLITS_PER_WRITE: usize = 2;
const FIELDS_PER_SPLIT: usize = 8;
/// Buckets one engine read of [`Large::walk`] takes at most.
const WALK_BUCKETS_PER_READ: u64 = 64;

/// A bucket as read: its packed value, shared with the record (empty: no record), read in
/// place; decoded into pairs only once a change needs them (a read of one field walks the
/// bytes and allocates nothing).
#[derive(Default)]
struct Bucket {
    read: Bytes,
    pairs: Option<Pairs>,
}

impl Bucket {
    fn packed(&self) -> quiver_store::Result<Packed<'_>> {
        Ok(Packed::new(&self.read)?)
    }

    fn get(&self, field: &[u8]) -> quiver_store::Result<Option<Bytes>> {
        if let Some(pairs) = &self.pairs {
            return Ok(pairs
                .iter()
                .find(|(f, _)| f == field)
                .map(|(_, v)| v.clone()));
        }
        if self.read.is_empty() {
            return Ok(None);
        }
        Ok(self.packed()?.get(field).map(|v| self.read.slice_ref(v)))
    }

    /// Hands each pair to `each`, in order; returns how many.
    fn each(&self, each: &mut impl FnMut(&Bytes, &Bytes)) -> quiver_store::Result<u64> {
        if let Some(pairs) = &self.pairs {
            pairs.iter().for_each(|(f, v)| each(f, v));
            return Ok(pairs.len() as u64);
        }
        if self.read.is_empty() {
            return Ok(0);
        }
        let packed = self.packed()?;
        for (f, v) in packed.iter() {
            each(&self.read.slice_ref(f), &self.read.slice_ref(v));
        }
        Ok(packed.len() as u64)
    }

    /// The pairs to change, decoded from the record on the first change.
    fn pairs_mut(&mut self) -> quiver_store::Result<&mut Pairs> {
        if self.pairs.is_none() {
            let mut pairs = Pairs::new();
            self.each(&mut |f, v| pairs.push((f.clone(), v.clone())))?;
            self.pairs = Some(pairs);
        }
        Ok(self.pairs.get_or_insert_with(Pairs::new))
    }
}

/// A large hash: its metadata and the buckets read so far.
pub(crate) struct Large {
    pub meta: Meta,
    buckets: BTreeMap<u32, Bucket>,
    /// Buckets to write back (an emptied one is deleted).
    changed: BTreeSet<u32>,
    /// Fields added by this command (they decide how many splits it may make).
    added: usize,
    /// The buckets its anchor counts (`None`: a new hash, no anchor yet): the anchor is
    /// written again when they change.
    anchored: Option<u32>,
}

impl Large {
    pub fn new(meta: Meta) -> Large {
        Large {
            meta,
            buckets: BTreeMap::new(),
            changed: BTreeSet::new(),
            added: 0,
            anchored: Some(meta.buckets()),
        }
    }

    /// The large hash `pairs` (a small hash at `key` that outgrew one record) become, at a
    /// new generation: every bucket that gets a field is written.
    pub fn from_pairs<'p>(key: &[u8], pairs: impl Iterator<Item = (&'p [u8], &'p [u8])>) -> Large {
        let pairs: Vec<(&[u8], &[u8])> = pairs.collect();
        let bytes = pairs.iter().map(|(f, v)| pair_bytes(f, v)).sum();
        let meta = Meta::new(random_u64(), key_slot(key), pairs.len() as u64, bytes);
        let mut large = Large::new(meta);
        large.anchored = None;
        for (f, v) in pairs {
            let n = meta.bucket_of(f);
            let bucket = large.buckets.entry(n).or_default();
            let pair = (Bytes::copy_from_slice(f), Bytes::copy_from_slice(v));
            bucket.pairs.get_or_insert_with(Pairs::new).push(pair);
            large.changed.insert(n);
        }
        large
    }

    /// Reads the buckets `numbers` not read yet, as one vector.
    pub fn read(
        &mut self,
        txn: &mut Txn<'_>,
        numbers: impl IntoIterator<Item = u32>,
    ) -> quiver_store::Result<()> {
        let wanted: BTreeSet<u32> = numbers
            .into_iter()
            .filter(|n| !self.buckets.contains_key(n))
            .collect();
        let keys: Vec<Bytes> = wanted.iter().map(|&n| self.meta.bucket_key(n)).collect();
        if keys.len() > 1 {
            txn.prefetch(BUCKETS_DB, keys.iter())?;
        }
        for (n, key) in wanted.into_iter().zip(keys) {
            // A bucket is a hash record; anything else is damage, refused as such.
            let read = match txn.get_entry_in(BUCKETS_DB, &key)? {
                Some(entry) => entry.of_kind(ValueKind::Hash)?.value,
                None => Bytes::new(),
            };
            self.buckets.insert(n, Bucket { read, pairs: None });
        }
        Ok(())
    }

    /// Reads the buckets of `fields`.
    pub fn read_fields<'f>(
        &mut self,
        txn: &mut Txn<'_>,
        fields: impl Iterator<Item = &'f [u8]>,
    ) -> quiver_store::Result<()> {
        let meta = self.meta;
        self.read(txn, fields.map(|f| meta.bucket_of(f)))
    }

    /// The bucket `field` belongs in, read if it was not.
    fn bucket_of(&mut self, txn: &mut Txn<'_>, field: &[u8]) -> quiver_store::Result<u32> {
        let n = self.meta.bucket_of(field);
        if !self.buckets.contains_key(&n) {
            self.read(txn, [n])?;
        }
        Ok(n)
    }

    /// The pairs of bucket `n` to change (read if it was not).
    fn pairs_mut(&mut self, txn: &mut Txn<'_>, n: u32) -> quiver_store::Result<&mut Pairs> {
        self.read(txn, [n])?;
        self.buckets.entry(n).or_default().pairs_mut()
    }

    /// Reads the buckets `start`, `start + 1`, ... (at most `positions` of them, past the
    /// last back to bucket 0) in vectors sized by the fields still wanted (at most
    /// [`WALK_BUCKETS_PER_READ`] buckets each), handing each pair to `each`, until `wanted`
    /// pairs were handed or the positions are used up; returns how many buckets it read
    /// (HSCAN's page, HRANDFIELD's sample, HGETALL and COPY's whole hash: reads in
    /// proportion to what they return).
    pub fn walk(
        &mut self,
        txn: &mut Txn<'_>,
        start: u32,
        positions: u32,
        wanted: u64,
        mut each: impl FnMut(&Bytes, &Bytes),
    ) -> quiver_store::Result<u32> {
        let buckets = u64::from(self.meta.buckets());
        let per_bucket = (self.meta.count / buckets).max(1);
        let (mut done, mut handed) = (0u32, 0u64);
        while done < positions && handed < wanted {
            let want = (wanted - handed)
                .div_ceil(per_bucket)
                .min(WALK_BUCKETS_PER_READ);
            let take = (want as u32).min(positions - done);
            let numbers: Vec<u32> = (done..done + take)
                .map(|i| ((u64::from(start) + u64::from(i)) % buckets) as u32)
                .collect();
            self.read(txn, numbers.iter().copied())?;
            for n in &numbers {
                if let Some(bucket) = self.buckets.get(n) {
                    handed += bucket.each(&mut each)?;
                }
            }
            done += take;
        }
        Ok(done)
    }

    /// Every pair, in bucket order.
    pub fn all(&mut self, txn: &mut Txn<'_>) -> quiver_store::Result<Pairs> {
        let mut pairs = Vec::with_capacity(self.meta.count as usize);
        let buckets = self.meta.buckets();
        self.walk(txn, 0, buckets, u64::MAX, |f, v| {
            pairs.push((f.clone(), v.clone()));
        })?;
        Ok(pairs)
    }

    pub fn get(&mut self, txn: &mut Txn<'_>, field: &[u8]) -> quiver_store::Result<Option<Bytes>> {
        let n = self.bucket_of(txn, field)?;
        match self.buckets.get(&n) {
            Some(bucket) => bucket.get(field),
            None => Ok(None),
        }
    }

    /// Sets `field` to `value` (in its place when the hash has it); whether it is new.
    pub fn set(
        &mut self,
        txn: &mut Txn<'_>,
        field: &[u8],
        value: &[u8],
    ) -> quiver_store::Result<bool> {
        let n = self.meta.bucket_of(field);
        let value = Bytes::copy_from_slice(value);
        let bucket = self.pairs_mut(txn, n)?;
        let added = match bucket.iter_mut().find(|(f, _)| f == field) {
            Some(pair) => {
                let old = std::mem::replace(&mut pair.1, value.clone());
                self.meta.bytes = self.meta.bytes - old.len() as u64 + value.len() as u64;
                false
            }
            None => {
                bucket.push((Bytes::copy_from_slice(field), value.clone()));
                self.meta.bytes += pair_bytes(field, &value);
                self.meta.count += 1;
                self.added += 1;
                true
            }
        };
        self.changed.insert(n);
        Ok(added)
    }

    /// Removes `field`; whether the hash had it.
    pub fn remove(&mut self, txn: &mut Txn<'_>, field: &[u8]) -> quiver_store::Result<bool> {
        let n = self.meta.bucket_of(field);
        let bucket = self.pairs_mut(txn, n)?;
        let Some(at) = bucket.iter().position(|(f, _)| f == field) else {
            return Ok(false);
        };
        let (f, v) = bucket.remove(at);
        self.meta.bytes -= pair_bytes(&f, &v);
        self.meta.count -= 1;
        self.changed.insert(n);
        Ok(true)
    }

    /// Splits buckets while the hash wants more of them, as many as this command may.
    fn grow(&mut self, txn: &mut Txn<'_>) -> quiver_store::Result<()> {
        let most = SPLITS_PER_WRITE + self.added / FIELDS_PER_SPLIT;
        for _ in 0..most {
            if !self.meta.wants_split() {
                break;
            }
            let pairs = std::mem::take(self.pairs_mut(txn, self.meta.split)?);
            let (from, to) = self.meta.split_next();
            let meta = self.meta;
            let (moved, kept): (Pairs, Pairs) = pairs
                .into_iter()
                .partition(|(f, _)| meta.bucket_of(f) == to);
            if !moved.is_empty() {
                self.changed.insert(from);
                self.changed.insert(to);
            }
            let bucket = |pairs| Bucket {
                read: Bytes::new(),
                pairs: Some(pairs),
            };
            self.buckets.insert(from, bucket(kept));
            self.buckets.insert(to, bucket(moved));
        }
        Ok(())
    }

    /// Writes the change: the buckets it touched and the metadata (expiring at `expire_at`),
    /// or, when the last field is gone, deletes the key as Redis does.
    pub fn write(
        self,
        txn: &mut Txn<'_>,
        key: &Bytes,
        expire_at: Option<u64>,
    ) -> quiver_store::Result<()> {
        let db = txn.db();
        self.write_in(txn, db, key, expire_at)
    }

    /// [`Large::write`] of the hash at `key` of database `db` (COPY ... DB).
    fn write_in(
        mut self,
        txn: &mut Txn<'_>,
        db: u32,
        key: &Bytes,
        expire_at: Option<u64>,
    ) -> quiver_store::Result<()> {
        if self.meta.count > 0 {
            self.grow(txn)?;
        }
        for &n in &self.changed {
            let key = self.meta.bucket_key(n);
            match self.buckets.get(&n).and_then(|b| b.pairs.as_ref()) {
                Some(pairs) if !pairs.is_empty() => {
                    let entry = Entry {
                        value: encode_pairs(pairs),
                        expire_at: None,
                        kind: ValueKind::Hash,
                    };
                    txn.put_entry_in(BUCKETS_DB, key, entry);
                }
                _ => txn.delete_in(BUCKETS_DB, key),
            }
        }
        if self.meta.count == 0 {
            // Its buckets are empty, so deleted: nothing is left to reclaim.
            txn.delete_in(ANCHORS_DB, self.meta.anchor_key());
            txn.delete_in(db, key.clone());
        } else {
            if self.anchored != Some(self.meta.buckets()) {
                anchor(txn, &self.meta, key);
            }
            let entry = Entry {
                value: self.meta.encode(),
                expire_at,
                kind: ValueKind::Hash,
            };
            txn.put_entry_in(db, key.clone(), entry);
        }
        Ok(())
    }
}

/// Writes the anchor of the hash `meta` describes, at `parent` (RENAME: its new key).
pub(crate) fn anchor(txn: &mut Txn<'_>, meta: &Meta, parent: &[u8]) {
    let entry = Entry::string(meta.anchor(parent), None);
    txn.put_entry_in(ANCHORS_DB, meta.anchor_key(), entry);
}

/// COPY of the large hash `meta` describes to `to` in database `db`, expiring at
/// `expire_at`: its own buckets, at a new generation (two hashes never share a bucket, so a
/// change of one is not seen in the other). Reads and writes every bucket, as Redis's COPY
/// copies every field.
pub(crate) fn copy(
    txn: &mut Txn<'_>,
    meta: Meta,
    db: u32,
    to: &Bytes,
    expire_at: Option<u64>,
) -> quiver_store::Result<()> {
    let pairs = Large::new(meta).all(txn)?;
    let pairs = pairs.iter().map(|(f, v)| (&f[..], &v[..]));
    Large::from_pairs(to, pairs).write_in(txn, db, to, expire_at)
}
