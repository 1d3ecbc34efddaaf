//! HGETALL, HKEYS, HVALS, HLEN, HEXISTS, HSTRLEN: one read of the hash, its fields walked in
//! place (the replies share the record's buffer). HGET and HMGET are vector operations
//! (`cmd::get`), read as GETs are.

use bytes::Bytes;

use crate::cmd::common::TxnCommand;
use crate::cmd::hash::read_hash;
use crate::txn::Txn;
use quiver_service::reply::Reply;
use quiver_service::table::Cmd;

/// A command that reads a hash: which one, and its fields.
pub struct HRead<'a> {
    what: What,
    key: &'a Bytes,
    /// The field named (HEXISTS, HSTRLEN).
    fields: &'a [Bytes],
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum What {
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
        let named = || self.fields.first().and_then(|f| fields.get(f));
        Ok(match self.what {
            What::GetAll => Reply::Map(fields.iter().map(|(f, v)| (bulk(f), bulk(v))).collect()),
            What::Keys => Reply::Array(fields.iter().map(|(f, _)| bulk(f)).collect()),
            What::Vals => Reply::Array(fields.iter().map(|(_, v)| bulk(v)).collect()),
            What::Len => Reply::Integer(fields.len() as i64),
            What::Exists => Reply::Integer(i64::from(named().is_some())),
            What::StrLen => Reply::Integer(named().map_or(0, |v| v.len() as i64)),
        })
    }
}
