//! INCR, DECR, INCRBY and DECRBY: the value must be a decimal 64-bit integer (absent is 0);
//! the key keeps its expiry.

use bytes::Bytes;

use crate::cmd::common::{check_new_key, TxnCommand};
use crate::txn::Txn;
use quiver_service::errors::{self, err};
use quiver_service::frame::string2ll;
use quiver_service::reply::Reply;
use quiver_service::table::Cmd;

/// Adds `delta` to the integer at `key`.
pub struct IncrBy<'a> {
    key: &'a Bytes,
    delta: i64,
}

impl<'a> IncrBy<'a> {
    pub fn parse(cmd: Cmd, args: &'a [Bytes]) -> Result<IncrBy<'a>, Reply> {
        check_new_key(&args[1])?;
        let delta = match cmd {
            Cmd::Incr => 1,
            Cmd::Decr => -1,
            _ => {
                let Some(n) = string2ll(&args[2]) else {
                    return Err(err(errors::NOT_INTEGER));
                };
                if cmd == Cmd::IncrBy {
                    n
                } else if n == i64::MIN {
                    return Err(err("ERR decrement would overflow"));
                } else {
                    -n
                }
            }
        };
        Ok(IncrBy {
            key: &args[1],
            delta,
        })
    }
}

impl TxnCommand for IncrBy<'_> {
    fn apply(&self, txn: &mut Txn<'_>) -> quiver_store::Result<Reply> {
        let current = match txn.get(self.key)? {
            None => 0,
            Some(v) => match string2ll(&v) {
                Some(n) => n,
                None => return Ok(err(errors::NOT_INTEGER)),
            },
        };
        let Some(next) = current.checked_add(self.delta) else {
            return Ok(err(errors::OVERFLOW));
        };
        // The key keeps its expiry (Redis overwrites the value in place).
        txn.put_keep_ttl(self.key.clone(), Bytes::from(next.to_string()))?;
        Ok(Reply::Integer(next))
    }
}
