//! The hash commands, Redis 7's: [`write`] (HSET, HMSET, HSETNX, HDEL, HINCRBY,
//! HINCRBYFLOAT), [`read`] (HGET, HMGET, HGETALL, HKEYS, HVALS, HLEN, HEXISTS, HSTRLEN: vector
//! reads of the hash's key, as GET is), [`random`] (HRANDFIELD) and [`scan`] (HSCAN).
//!
//! A hash is small or large (`quiver_store::large_hash`, docs/design.md "Hashes: the
//! layout"). A small hash is one record at its key whose value is the fields packed
//! (`quiver_store::fields`): a read is one engine read of it, a change a read-modify-write
//! of the whole record through the transaction, as APPEND's is. A hash past Redis's listpack
//! thresholds becomes large ([`large`]): its key holds metadata, its fields live in buckets,
//! and a command reads and writes the buckets it needs. Either way a hash command is atomic,
//! runs inside MULTI/EXEC, and a WATCH of the key sees every change. A key holding a string
//! answers WRONGTYPE; a hash whose last field is deleted is gone, and a change keeps the
//! key's expiry time (Redis changes a hash in place). As in Redis, a large hash stays large
//! while it exists.

pub(crate) mod large;
pub mod random;
pub mod read;
pub mod reclaim;
pub mod scan;
pub mod write;

use std::borrow::Cow;

use bytes::Bytes;
use quiver_store::fields::Fields;
use quiver_store::large_hash::HashValue;
use quiver_store::{Entry, ValueKind};

use crate::cmd::hash::large::Large;
use crate::txn::Txn;

/// The hash at `key` as `txn` sees it (`None`: absent); WRONGTYPE for a string.
pub(crate) fn read_hash(txn: &mut Txn<'_>, key: &Bytes) -> quiver_store::Result<Option<Entry>> {
    txn.get_of_kind(key, ValueKind::Hash)
}

/// A hash as a change sees it.
pub(crate) enum Hash<'e> {
    /// Its fields, packed in one record (or none yet: a new hash).
    Small(Fields<'e>),
    Large(Large),
}

impl<'e> Hash<'e> {
    /// The hash `entry` holds (read with [`read_hash`]; none: a new, empty hash); of a
    /// large one, the buckets of `fields` are read (as one vector).
    pub fn of<'f>(
        txn: &mut Txn<'_>,
        entry: Option<&'e Entry>,
        fields: impl Iterator<Item = &'f [u8]>,
    ) -> quiver_store::Result<Hash<'e>> {
        let Some(entry) = entry else {
            return Ok(Hash::Small(Fields::default()));
        };
        Ok(match entry.hash_value()? {
            HashValue::Packed(_) => Hash::Small(Fields::decode(&entry.value)?),
            HashValue::Large(meta) => {
                let mut large = Large::new(meta);
                large.read_fields(txn, fields)?;
                Hash::Large(large)
            }
        })
    }

    pub fn get(
        &mut self,
        txn: &mut Txn<'_>,
        field: &[u8],
    ) -> quiver_store::Result<Option<Cow<'e, [u8]>>> {
        Ok(match self {
            Hash::Small(fields) => fields.get(field).map(Cow::Borrowed),
            Hash::Large(large) => large.get(txn, field)?.map(|v| Cow::Owned(v.to_vec())),
        })
    }

    /// Sets `field` to `value`; whether the field is new.
    pub fn set(
        &mut self,
        txn: &mut Txn<'_>,
        field: &'e [u8],
        value: &'e [u8],
    ) -> quiver_store::Result<bool> {
        match self {
            Hash::Small(fields) => Ok(fields.set(field, value)),
            Hash::Large(large) => large.set(txn, field, value),
        }
    }

    /// Removes `field`; whether the hash had it.
    pub fn remove(&mut self, txn: &mut Txn<'_>, field: &[u8]) -> quiver_store::Result<bool> {
        match self {
            Hash::Small(fields) => Ok(fields.remove(field)),
            Hash::Large(large) => large.remove(txn, field),
        }
    }

    /// Writes the hash back as the hash at `key`, expiring at `expire_at`: no fields at all
    /// delete the key, as Redis removes a hash with its last field; a small hash past Redis's
    /// listpack thresholds becomes large.
    pub fn write(
        self,
        txn: &mut Txn<'_>,
        key: &Bytes,
        expire_at: Option<u64>,
    ) -> quiver_store::Result<()> {
        match self {
            Hash::Small(fields) if fields.is_empty() => txn.delete(key.clone()),
            Hash::Small(fields) if fields.fits_packed() => {
                let entry = Entry {
                    value: fields.encode(),
                    expire_at,
                    kind: ValueKind::Hash,
                };
                txn.put_entry(key.clone(), entry);
            }
            Hash::Small(fields) => {
                Large::from_pairs(key, fields.iter()).write(txn, key, expire_at)?
            }
            Hash::Large(large) => large.write(txn, key, expire_at)?,
        }
        Ok(())
    }
}

/// OBJECT ENCODING of a hash: the name Redis gives a hash of these fields by its thresholds
/// (`hash-max-listpack-entries`, `hash-max-listpack-value`).
pub fn encoding(hash: &HashValue<'_>) -> &'static str {
    match hash {
        HashValue::Packed(fields) if fields.fits_packed() => "listpack",
        _ => "hashtable",
    }
}
