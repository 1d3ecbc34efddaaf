//! GETRANGE (and its old name SUBSTR) and SETRANGE: a part of a string value, by byte offsets.
//! SETRANGE keeps the key's expiry.

use bytes::{Bytes, BytesMut};

use crate::cmd::common::{check_new_key, Limits, TxnCommand, STRING_TOO_LONG};
use crate::txn::Txn;
use quiver_service::errors::{self, err};
use quiver_service::frame::string2ll;
use quiver_service::reply::Reply;

/// GETRANGE key start end: bytes `start..=end` of the value; negative offsets count from the
/// end; an absent key is the empty string.
pub struct GetRange<'a> {
    key: &'a Bytes,
    start: i64,
    end: i64,
}

impl<'a> GetRange<'a> {
    pub fn parse(args: &'a [Bytes]) -> Result<GetRange<'a>, Reply> {
        let (Some(start), Some(end)) = (string2ll(&args[2]), string2ll(&args[3])) else {
            return Err(err(errors::NOT_INTEGER));
        };
        Ok(GetRange {
            key: &args[1],
            start,
            end,
        })
    }

    /// The byte range of a value of `len` bytes, as Redis 7's `getrangeCommand` computes it.
    fn range(&self, len: usize) -> Option<std::ops::Range<usize>> {
        let len = len as i64;
        let (mut start, mut end) = (self.start, self.end);
        if start < 0 && end < 0 && start > end {
            return None;
        }
        if start < 0 {
            start += len;
        }
        if end < 0 {
            end += len;
        }
        start = start.max(0);
        end = end.max(0).min(len - 1);
        (len > 0 && start <= end).then(|| start as usize..end as usize + 1)
    }
}

impl TxnCommand for GetRange<'_> {
    fn apply(&self, txn: &mut Txn<'_>) -> quiver_store::Result<Reply> {
        let value = txn.get(self.key)?.unwrap_or_default();
        Ok(Reply::Bulk(match self.range(value.len()) {
            Some(r) => value.slice(r),
            None => Bytes::new(),
        }))
    }
}

/// SETRANGE key offset value: writes `value` at `offset`, padding with zero bytes; the new
/// length.
pub struct SetRange<'a> {
    key: &'a Bytes,
    offset: usize,
    value: &'a Bytes,
}

impl<'a> SetRange<'a> {
    pub fn parse(args: &'a [Bytes], limits: &Limits) -> Result<SetRange<'a>, Reply> {
        let offset = match string2ll(&args[2]) {
            None => return Err(err(errors::NOT_INTEGER)),
            Some(n) if n < 0 => return Err(err("ERR offset is out of range")),
            Some(n) => usize::try_from(n).map_err(|_| err("ERR offset is out of range"))?,
        };
        let value = &args[3];
        // Redis checks the size only when there is something to write.
        if !value.is_empty() && offset.saturating_add(value.len()) > limits.value_len_max {
            return Err(err(STRING_TOO_LONG));
        }
        check_new_key(&args[1])?;
        Ok(SetRange {
            key: &args[1],
            offset,
            value,
        })
    }
}

impl TxnCommand for SetRange<'_> {
    fn apply(&self, txn: &mut Txn<'_>) -> quiver_store::Result<Reply> {
        let old = txn.get(self.key)?;
        let old_len = old.as_ref().map_or(0, |v| v.len());
        if self.value.is_empty() {
            // Nothing to write: an absent key stays absent.
            return Ok(Reply::Integer(old_len as i64));
        }
        let end = self.offset + self.value.len();
        let mut v = BytesMut::with_capacity(end.max(old_len));
        v.extend_from_slice(old.as_deref().unwrap_or_default());
        if v.len() < end {
            v.resize(end, 0);
        }
        v[self.offset..end].copy_from_slice(self.value);
        let len = v.len() as i64;
        txn.put_keep_ttl(self.key.clone(), v.freeze())?;
        Ok(Reply::Integer(len))
    }
}
