//! SET, SETNX and GETSET. A plain `SET key value` is one put of the engine's `multi_put`
//! vector; with options (NX, XX, GET) it reads the key first, so it runs in a transaction.

use bytes::Bytes;

use crate::cmd::common::{bulk_or_null, check_new_key, check_value, key_value, Limits, TxnCommand};
use crate::cmd::parsed::Command;
use crate::cmd::vector::{Shape, VectorOp};
use crate::errors::{self, err};
use crate::frame::string2ll;
use crate::reply::Reply;
use crate::table::Cmd;
use crate::txn::Txn;

/// SET key value [NX | XX] [GET] [EX s | PX ms | EXAT t | PXAT t | KEEPTTL].
pub struct Set<'a> {
    key: &'a Bytes,
    value: &'a Bytes,
    nx: bool,
    xx: bool,
    get: bool,
}

impl<'a> Set<'a> {
    /// Parsed like Redis 7's `parseExtendedStringArgumentsOrReply`. Quiver keys do not expire
    /// (yet): a valid expiry option is refused with its own error, after the syntax checks
    /// Redis makes.
    pub fn parse(args: &'a [Bytes], limits: &Limits) -> Result<Command<'a>, Reply> {
        #[derive(PartialEq)]
        enum Expiry {
            None,
            KeepTtl,
            Timed(&'static str),
        }
        let mut set = Set {
            key: &args[1],
            value: &args[2],
            nx: false,
            xx: false,
            get: false,
        };
        let mut expiry = Expiry::None;
        let mut j = 3;
        while j < args.len() {
            let opt = args[j].to_ascii_uppercase();
            let has_next = j + 1 < args.len();
            match &opt[..] {
                b"NX" if !set.xx => set.nx = true,
                b"XX" if !set.nx => set.xx = true,
                b"GET" => set.get = true,
                b"KEEPTTL" if expiry == Expiry::None => expiry = Expiry::KeepTtl,
                b"EX" | b"PX" | b"EXAT" | b"PXAT" if expiry == Expiry::None && has_next => {
                    let name = match &opt[..] {
                        b"EX" => "EX",
                        b"PX" => "PX",
                        b"EXAT" => "EXAT",
                        _ => "PXAT",
                    };
                    j += 1;
                    match string2ll(&args[j]) {
                        None => return Err(err(errors::NOT_INTEGER)),
                        Some(t) if t <= 0 => {
                            return Err(err("ERR invalid expire time in 'set' command"))
                        }
                        Some(_) => expiry = Expiry::Timed(name),
                    }
                }
                _ => return Err(err(errors::SYNTAX)),
            }
            j += 1;
        }
        match expiry {
            Expiry::None => {}
            Expiry::KeepTtl => {
                return Err(err(
                    "ERR KEEPTTL is not supported: Quiver keys do not expire",
                ))
            }
            Expiry::Timed(name) => {
                return Err(Reply::error(format!(
                    "ERR {name} is not supported: Quiver keys do not expire"
                )))
            }
        }
        check_new_key(set.key)?;
        check_value(limits, set.value)?;
        if set.nx || set.xx || set.get {
            Ok(Command::Keys(Box::new(set)))
        } else {
            Ok(Command::Vector(VectorOp::new(
                Cmd::Set,
                &args[1..3],
                Shape::Ok,
            )))
        }
    }
}

impl TxnCommand for Set<'_> {
    fn apply(&self, txn: &mut Txn<'_>) -> quiver_store::Result<Reply> {
        let old = txn.get(self.key)?;
        let exists = old.is_some();
        let apply = !(self.nx && exists || self.xx && !exists);
        if apply {
            txn.put(self.key.clone(), self.value.clone());
        }
        Ok(match (self.get, apply) {
            (true, _) => bulk_or_null(old),
            (false, true) => Reply::OK,
            (false, false) => Reply::Null,
        })
    }
}

/// SETNX key value: 1 if the key was set, 0 if it existed.
pub struct SetNx<'a> {
    key: &'a Bytes,
    value: &'a Bytes,
}

impl<'a> SetNx<'a> {
    pub fn parse(args: &'a [Bytes], limits: &Limits) -> Result<SetNx<'a>, Reply> {
        let (key, value) = key_value(args, limits)?;
        Ok(SetNx { key, value })
    }
}

impl TxnCommand for SetNx<'_> {
    fn apply(&self, txn: &mut Txn<'_>) -> quiver_store::Result<Reply> {
        if txn.exists(self.key)? {
            return Ok(Reply::Integer(0));
        }
        txn.put(self.key.clone(), self.value.clone());
        Ok(Reply::Integer(1))
    }
}

/// GETSET key value: the old value, and the new one set.
pub struct GetSet<'a> {
    key: &'a Bytes,
    value: &'a Bytes,
}

impl<'a> GetSet<'a> {
    pub fn parse(args: &'a [Bytes], limits: &Limits) -> Result<GetSet<'a>, Reply> {
        let (key, value) = key_value(args, limits)?;
        Ok(GetSet { key, value })
    }
}

impl TxnCommand for GetSet<'_> {
    fn apply(&self, txn: &mut Txn<'_>) -> quiver_store::Result<Reply> {
        let old = txn.get(self.key)?;
        txn.put(self.key.clone(), self.value.clone());
        Ok(bulk_or_null(old))
    }
}
