//! APPEND and STRLEN. APPEND keeps the key's expiry.

use bytes::{BufMut, Bytes, BytesMut};

use crate::cmd::common::{check_new_key, Limits, TxnCommand, STRING_TOO_LONG};
use crate::txn::Txn;
use quiver_service::errors::err;
use quiver_service::reply::Reply;

/// APPEND key value: the new length.
pub struct Append<'a> {
    key: &'a Bytes,
    value: &'a Bytes,
    /// The longest value (`proto-max-bulk-len`).
    value_len_max: usize,
}

impl<'a> Append<'a> {
    pub fn parse(args: &'a [Bytes], limits: &Limits) -> Result<Append<'a>, Reply> {
        check_new_key(&args[1])?;
        Ok(Append {
            key: &args[1],
            value: &args[2],
            value_len_max: limits.value_len_max,
        })
    }
}

impl TxnCommand for Append<'_> {
    fn apply(&self, txn: &mut Txn<'_>) -> quiver_store::Result<Reply> {
        let old = txn.get(self.key)?.unwrap_or_default();
        // Redis's check, in its words, before anything is built.
        if old.len().saturating_add(self.value.len()) > self.value_len_max {
            return Ok(err(STRING_TOO_LONG));
        }
        let mut v = BytesMut::with_capacity(old.len() + self.value.len());
        v.put_slice(&old);
        v.put_slice(self.value);
        let len = v.len() as i64;
        txn.put_keep_ttl(self.key.clone(), v.freeze())?;
        Ok(Reply::Integer(len))
    }
}

/// STRLEN key: the value's length, 0 when absent.
pub struct StrLen<'a> {
    key: &'a Bytes,
}

impl StrLen<'_> {
    pub fn parse(args: &[Bytes]) -> StrLen<'_> {
        StrLen { key: &args[1] }
    }
}

impl TxnCommand for StrLen<'_> {
    fn apply(&self, txn: &mut Txn<'_>) -> quiver_store::Result<Reply> {
        Ok(Reply::Integer(
            txn.get(self.key)?.map_or(0, |v| v.len() as i64),
        ))
    }
}
