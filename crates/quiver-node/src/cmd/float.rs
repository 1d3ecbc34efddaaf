//! INCRBYFLOAT key increment: the value and the increment read as C `long double`s, added,
//! and the sum stored and answered as Redis writes it (`float80`: the same 80-bit arithmetic,
//! so the same text, `0.1 + 0.2` is `0.3`). An absent key is 0.

use bytes::Bytes;

use crate::cmd::common::{check_new_key, TxnCommand};
use crate::float80::{self, Float80, Parsed};
use crate::txn::Txn;
use quiver_service::errors::err;
use quiver_service::reply::Reply;

pub(crate) const NOT_A_FLOAT: &str = "ERR value is not a valid float";
pub(crate) const NAN_OR_INFINITY: &str = "ERR increment would produce NaN or Infinity";

/// What the increment was read as.
enum Increment {
    Finite(Float80),
    /// `inf`: Redis reads it, and refuses any sum with it (after reading the value).
    Infinite,
}

pub struct IncrByFloat<'a> {
    key: &'a Bytes,
    by: Increment,
}

impl<'a> IncrByFloat<'a> {
    pub fn parse(args: &'a [Bytes]) -> Result<IncrByFloat<'a>, Reply> {
        let by = match float80::parse(&args[2]) {
            None => return Err(err(NOT_A_FLOAT)),
            Some(Parsed::Finite(x)) => Increment::Finite(x),
            Some(Parsed::Infinite) => Increment::Infinite,
        };
        check_new_key(&args[1])?;
        Ok(IncrByFloat { key: &args[1], by })
    }
}

impl TxnCommand for IncrByFloat<'_> {
    fn apply(&self, txn: &mut Txn<'_>) -> quiver_store::Result<Reply> {
        let value = match txn.get(self.key)? {
            None => Parsed::Finite(Float80::ZERO),
            Some(v) => match float80::parse(&v) {
                Some(x) => x,
                None => return Ok(err(NOT_A_FLOAT)),
            },
        };
        let sum = match (value, &self.by) {
            (Parsed::Finite(a), Increment::Finite(b)) => float80::add(a, *b),
            _ => None,
        };
        let Some(sum) = sum else {
            return Ok(err(NAN_OR_INFINITY));
        };
        let text = Bytes::from(float80::format_human(sum));
        // Like INCR, INCRBYFLOAT keeps the key's expiry time.
        txn.put_keep_ttl(self.key.clone(), text.clone())?;
        Ok(Reply::Bulk(text))
    }
}
