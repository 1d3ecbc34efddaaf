//! HGET, HMGET, HGETALL, HKEYS, HVALS, HLEN, HEXISTS, HSTRLEN: each reads its hash's one
//! record, so each is a vector operation of kind `Vector::Get` on its key — a pipeline's run
//! of them (and of GETs, MGETs) is one engine vector, one probe batch and one batch of reads
//! — and answers from what the read found ([`reply`]): the fields walked in place, the
//! replies sharing the record's buffer. A large hash's record holds its metadata: HLEN
//! answers from it, the others read the buckets they need ([`large_reply`]) in a
//! transaction. `cmd::get::hash_read` makes the vector operation.

use bytes::Bytes;
use quiver_store::large_hash::{HashValue, Meta};
use quiver_store::Entry;

use crate::cmd::common::bulk_or_null;
use crate::cmd::hash::large::Large;
use crate::store_errors::store_error;
use crate::txn::Txn;
use quiver_service::reply::Reply;

/// Which read of a hash a command is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HashRead {
    /// HGET: a field's value or nil.
    Field,
    /// HMGET: the fields' values or nils.
    Fields,
    /// HGETALL: every field and value (a map in RESP3).
    All,
    Keys,
    Vals,
    Len,
    Exists,
    StrLen,
}

/// What a read of a hash's key answers: the reply, or, for a large hash (whose fields are
/// not in the record), its metadata, from which [`large_reply`] reads the fields.
pub enum Found {
    Reply(Reply),
    Large(Meta),
}

/// The reply of `read` of `fields` from what the read of the key found: as for an empty
/// hash when it is absent, WRONGTYPE for a string.
pub fn reply(read: HashRead, fields: &[Bytes], found: Option<Entry>) -> Found {
    let Some(entry) = found else {
        return Found::Reply(match read {
            HashRead::Field => Reply::Null,
            HashRead::Fields => Reply::Array(vec![Reply::Null; fields.len()]),
            HashRead::All => Reply::Map(Vec::new()),
            HashRead::Keys | HashRead::Vals => Reply::Array(Vec::new()),
            HashRead::Len | HashRead::Exists | HashRead::StrLen => Reply::Integer(0),
        });
    };
    let hash = match entry.hash_value() {
        Ok(HashValue::Packed(hash)) => hash,
        Ok(HashValue::Large(meta)) if read == HashRead::Len => {
            return Found::Reply(Reply::Integer(meta.count as i64))
        }
        Ok(HashValue::Large(meta)) => return Found::Large(meta),
        Err(e) => return Found::Reply(store_error(&e)),
    };
    // Parts of the packed value, as replies sharing its buffer.
    let value_of = |f: &Bytes| hash.get(f).map(|v| entry.value.slice_ref(v));
    let pairs = hash
        .iter()
        .map(|(f, v)| (entry.value.slice_ref(f), entry.value.slice_ref(v)));
    Found::Reply(match read {
        HashRead::Field | HashRead::Fields | HashRead::Exists | HashRead::StrLen => {
            fields_reply(read, fields.iter().map(value_of))
        }
        HashRead::All | HashRead::Keys | HashRead::Vals => all_reply(read, pairs),
        HashRead::Len => Reply::Integer(hash.len() as i64),
    })
}

/// The reply of `read` of `fields` from the large hash `meta` describes: the buckets of the
/// fields named, or all of them, read through `txn`.
pub fn large_reply(
    txn: &mut Txn<'_>,
    meta: Meta,
    read: HashRead,
    fields: &[Bytes],
) -> quiver_store::Result<Reply> {
    let mut large = Large::new(meta);
    Ok(match read {
        HashRead::Field | HashRead::Fields | HashRead::Exists | HashRead::StrLen => {
            large.read_fields(txn, fields.iter().map(|f| &f[..]))?;
            let mut values = Vec::with_capacity(fields.len());
            for f in fields {
                values.push(large.get(txn, f)?);
            }
            fields_reply(read, values.into_iter())
        }
        HashRead::All | HashRead::Keys | HashRead::Vals => {
            all_reply(read, large.all(txn)?.into_iter())
        }
        HashRead::Len => Reply::Integer(meta.count as i64),
    })
}

/// HGET, HMGET, HEXISTS, HSTRLEN from the values of the fields named (`None`: absent).
fn fields_reply(read: HashRead, mut values: impl Iterator<Item = Option<Bytes>>) -> Reply {
    match read {
        HashRead::Fields => Reply::Array(values.map(bulk_or_null).collect()),
        HashRead::Exists => Reply::Integer(i64::from(values.next().flatten().is_some())),
        HashRead::StrLen => Reply::Integer(values.next().flatten().map_or(0, |v| v.len() as i64)),
        _ => bulk_or_null(values.next().flatten()),
    }
}

/// HGETALL, HKEYS, HVALS from every pair of the hash, in its order.
fn all_reply(read: HashRead, pairs: impl Iterator<Item = (Bytes, Bytes)>) -> Reply {
    match read {
        HashRead::Keys => Reply::Array(pairs.map(|(f, _)| Reply::Bulk(f)).collect()),
        HashRead::Vals => Reply::Array(pairs.map(|(_, v)| Reply::Bulk(v)).collect()),
        _ => Reply::Map(
            pairs
                .map(|(f, v)| (Reply::Bulk(f), Reply::Bulk(v)))
                .collect(),
        ),
    }
}
