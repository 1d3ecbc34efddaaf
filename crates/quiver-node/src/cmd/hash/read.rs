//! HGET, HMGET, HGETALL, HKEYS, HVALS, HLEN, HEXISTS, HSTRLEN: one read of the hash, its
//! fields walked in place (the replies share the record's buffer).

use bytes::Bytes;

use crate::cmd::common::{bulk_or_null, TxnCommand};
use crate::cmd::hash::read_hash;
use crate::txn::Txn;
use quiver_service::reply::Reply;
use quiver_service::table::Cmd;

/// A command that reads a hash: which one, and its fields.
pub struct HRead<'a> {
    what: What,
    key: &'a Bytes,
    /// The fields named (HGET, HMGET, HEXISTS, HSTRLEN: one or more).
    fields: &'a [Bytes],
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum What {
    Get,
    MGet,
    GetAll,
    Keys,
    Vals,
    Len,
    Exists,
    StrLen,
}

impl<'a> HRead<'a> {
    /// `cmd`'s arity was checked: every argument after the key is a field.
    pub fn parse(cmd: Cmd, args: &'a [Bytes]) -> HRead<'a> {
        let what = match cmd {
            Cmd::HGet => What::Get,
            Cmd::HMGet => What::MGet,
            Cmd::HGetAll => What::GetAll,
            Cmd::HKeys => What::Keys,
            Cmd::HVals => What::Vals,
            Cmd::HLen => What::Len,
            Cmd::HExists => What::Exists,
            _ => What::StrLen,
        };
        HRead {
            what,
            key: &args[1],
            fields: &args[2..],
        }
    }

    /// The reply for a key that holds no hash.
    fn absent(&self) -> Reply {
        match self.what {
            What::Get => Reply::Null,
            What::MGet => Reply::Array(vec![Reply::Null; self.fields.len()]),
            What::GetAll => Reply::Map(Vec::new()),
            What::Keys | What::Vals => Reply::Array(Vec::new()),
            What::Len | What::Exists | What::StrLen => Reply::Integer(0),
        }
    }
}

impl TxnCommand for HRead<'_> {
    fn apply(&self, txn: &mut Txn<'_>) -> quiver_store::Result<Reply> {
        let Some(entry) = read_hash(txn, self.key)? else {
            return Ok(self.absent());
        };
        let fields = entry.hash_fields()?;
        // A part of the packed value, as a reply sharing its buffer.
        let bulk = |part: &[u8]| Reply::Bulk(entry.value.slice_ref(part));
        let named = || self.fields.iter().map(|f| fields.get(f));
        Ok(match self.what {
            What::Get | What::MGet => {
                let values: Vec<Reply> = named()
                    .map(|v| bulk_or_null(v.map(|v| entry.value.slice_ref(v))))
                    .collect();
                match self.what {
                    What::Get => values.into_iter().next().unwrap_or(Reply::Null),
                    _ => Reply::Array(values),
                }
            }
            What::GetAll => Reply::Map(fields.iter().map(|(f, v)| (bulk(f), bulk(v))).collect()),
            What::Keys => Reply::Array(fields.iter().map(|(f, _)| bulk(f)).collect()),
            What::Vals => Reply::Array(fields.iter().map(|(_, v)| bulk(v)).collect()),
            What::Len => Reply::Integer(fields.len() as i64),
            What::Exists => Reply::Integer(i64::from(named().next().flatten().is_some())),
            What::StrLen => Reply::Integer(named().next().flatten().map_or(0, |v| v.len() as i64)),
        })
    }
}
