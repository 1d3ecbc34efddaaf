//! The hash commands, Redis 7's: [`write`] (HSET, HMSET, HSETNX, HDEL, HINCRBY,
//! HINCRBYFLOAT), [`read`] (HGET, HMGET, HGETALL, HKEYS, HVALS, HLEN, HEXISTS, HSTRLEN: vector
//! reads of the hash's key, as GET is), [`random`] (HRANDFIELD) and [`scan`] (HSCAN).
//!
//! A hash is one record at its key whose value is the fields packed (`quiver_store::fields`,
//! docs/design.md "Hashes: the layout"): a read is one engine read of it, a change a
//! read-modify-write of the whole record through the transaction, as APPEND's is — so a hash
//! command is atomic, runs inside MULTI/EXEC, and a WATCH of the key sees every change. A key
//! holding a string answers WRONGTYPE; a hash whose last field is deleted is gone, and a
//! change keeps the key's expiry time (Redis changes a hash in place).

pub mod random;
pub mod read;
pub mod scan;
pub mod write;

use bytes::Bytes;
use quiver_store::fields::{Fields, Packed};
use quiver_store::{Entry, ValueKind};

use crate::txn::Txn;

/// The hash at `key` as `txn` sees it (`None`: absent); WRONGTYPE for a string.
pub(crate) fn read_hash(txn: &mut Txn<'_>, key: &Bytes) -> quiver_store::Result<Option<Entry>> {
    txn.get_of_kind(key, ValueKind::Hash)
}

/// The fields of `hash` (read with [`read_hash`]) for a change: none for an absent key.
fn fields_of(hash: Option<&Entry>) -> quiver_store::Result<Fields<'_>> {
    Ok(match hash {
        Some(e) => Fields::decode(&e.value)?,
        None => Fields::default(),
    })
}

/// Writes `fields` as the hash at `key`, expiring at `expire_at`; no fields at all delete the
/// key, as Redis removes a hash with its last field.
fn write_hash(txn: &mut Txn<'_>, key: &Bytes, fields: &Fields<'_>, expire_at: Option<u64>) {
    if fields.is_empty() {
        txn.delete(key.clone());
        return;
    }
    let entry = Entry {
        value: fields.encode(),
        expire_at,
        kind: ValueKind::Hash,
    };
    txn.put_entry(key.clone(), entry);
}

/// OBJECT ENCODING of a hash: the name Redis gives a hash of these fields by its thresholds
/// (`hash-max-listpack-entries`, `hash-max-listpack-value`).
pub fn encoding(fields: &Packed<'_>) -> &'static str {
    if fields.fits_packed() {
        "listpack"
    } else {
        "hashtable"
    }
}
