//! HGET, HMGET, HGETALL, HKEYS, HVALS, HLEN, HEXISTS, HSTRLEN: each reads its hash's one
//! record, so each is a vector operation of kind `Vector::Get` on its key — a pipeline's run
//! of them (and of GETs, MGETs) is one engine vector, one probe batch and one batch of reads
//! — and answers from what the read found ([`reply`]): the fields walked in place, the
//! replies sharing the record's buffer. `cmd::get::hash_read` makes the vector operation.

use bytes::Bytes;
use quiver_store::Entry;

use crate::cmd::common::bulk_or_null;
use crate::store_errors::store_error;
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

/// The reply of `read` of `fields` from what the read of the key found: as for an empty
/// hash when it is absent, WRONGTYPE for a string.
pub fn reply(read: HashRead, fields: &[Bytes], found: Option<Entry>) -> Reply {
    let Some(entry) = found else {
        return match read {
            HashRead::Field => Reply::Null,
            HashRead::Fields => Reply::Array(vec![Reply::Null; fields.len()]),
            HashRead::All => Reply::Map(Vec::new()),
            HashRead::Keys | HashRead::Vals => Reply::Array(Vec::new()),
            HashRead::Len | HashRead::Exists | HashRead::StrLen => Reply::Integer(0),
        };
    };
    let hash = match entry.hash_fields() {
        Ok(hash) => hash,
        Err(e) => return store_error(&e),
    };
    // A part of the packed value, as a reply sharing its buffer.
    let bulk = |part: &[u8]| Reply::Bulk(entry.value.slice_ref(part));
    let value_of = |f: &Bytes| hash.get(f).map(|v| entry.value.slice_ref(v));
    let first = || fields.first().and_then(|f| hash.get(f));
    match read {
        HashRead::Field => bulk_or_null(fields.first().and_then(value_of)),
        HashRead::Fields => {
            Reply::Array(fields.iter().map(|f| bulk_or_null(value_of(f))).collect())
        }
        HashRead::All => Reply::Map(hash.iter().map(|(f, v)| (bulk(f), bulk(v))).collect()),
        HashRead::Keys => Reply::Array(hash.iter().map(|(f, _)| bulk(f)).collect()),
        HashRead::Vals => Reply::Array(hash.iter().map(|(_, v)| bulk(v)).collect()),
        HashRead::Len => Reply::Integer(hash.len() as i64),
        HashRead::Exists => Reply::Integer(i64::from(first().is_some())),
        HashRead::StrLen => Reply::Integer(first().map_or(0, |v| v.len() as i64)),
    }
}
