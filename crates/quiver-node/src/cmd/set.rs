//! SET, SETNX, GETSET, SETEX and PSETEX, and the expiry options SET shares with GETEX
//! ([`StringOptions`], [`ExpireTime`]). A plain `SET key value` is one put of the engine's
//! `multi_put` vector; with options (NX, XX, GET, an expiry, KEEPTTL) it runs in a
//! transaction. Every write here but `SET ... KEEPTTL` clears the key's old expiry, as in Redis.

use bytes::Bytes;

use crate::cmd::common::{bulk_or_null, check_new_key, check_value, key_value, Limits, TxnCommand};
use crate::cmd::parsed::Command;
use crate::cmd::vector::{Shape, VectorOp};
use crate::txn::Txn;
use quiver_service::errors::{self, err};
use quiver_service::frame::string2ll;
use quiver_service::reply::Reply;
use quiver_service::table::Cmd;

/// `ERR invalid expire time in '<name>' command` (Redis's `addReplyErrorExpireTime`).
pub fn invalid_expire_time(name: &str) -> Reply {
    Reply::error(format!("ERR invalid expire time in '{name}' command"))
}

/// How an expiry option gives its time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeKind {
    /// EX: seconds from now.
    Ex,
    /// PX: milliseconds from now.
    Px,
    /// EXAT: a Unix time in seconds.
    ExAt,
    /// PXAT: a Unix time in milliseconds.
    PxAt,
}

impl TimeKind {
    fn in_seconds(self) -> bool {
        matches!(self, TimeKind::Ex | TimeKind::ExAt)
    }

    /// EX and PX count from now; EXAT and PXAT are absolute.
    pub fn is_relative(self) -> bool {
        matches!(self, TimeKind::Ex | TimeKind::Px)
    }
}

/// A valid expiry time of SET, SETEX, PSETEX or GETEX, in milliseconds: checked as Redis's
/// `getExpireMillisecondsOrReply` checks it, except for the overflow of adding now to a
/// relative time, which [`ExpireTime::at`] finds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExpireTime {
    /// Positive.
    ms: i64,
    relative: bool,
}

impl ExpireTime {
    /// The time in `arg`: not an integer is `ERR value is not an integer or out of range`;
    /// zero, negative, or seconds that overflow as milliseconds is the invalid expire time
    /// error of command `name`.
    pub fn parse(arg: &[u8], kind: TimeKind, name: &str) -> Result<ExpireTime, Reply> {
        let Some(t) = string2ll(arg) else {
            return Err(err(errors::NOT_INTEGER));
        };
        let ms = if kind.in_seconds() {
            t.checked_mul(1000)
        } else {
            Some(t)
        };
        match ms {
            Some(ms) if t > 0 => Ok(ExpireTime {
                ms,
                relative: kind.is_relative(),
            }),
            _ => Err(invalid_expire_time(name)),
        }
    }

    /// The absolute expiry time (ms since the Unix epoch) for a command run at `now`; a
    /// relative time whose sum with now passes `i64::MAX` is the invalid expire time error.
    pub fn at(&self, now: u64, name: &str) -> Result<u64, Reply> {
        let at = if self.relative {
            i64::try_from(now)
                .ok()
                .and_then(|now| self.ms.checked_add(now))
        } else {
            Some(self.ms)
        };
        at.map(|t| t as u64)
            .ok_or_else(|| invalid_expire_time(name))
    }
}

/// The expiry option of a SET or a GETEX.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExpiryOption<'a> {
    /// None given: SET clears the key's expiry, GETEX leaves it.
    None,
    /// SET ... KEEPTTL: the key keeps its expiry.
    KeepTtl,
    /// GETEX ... PERSIST: the expiry is removed.
    Persist,
    /// EX / PX / EXAT / PXAT and the argument after it (checked when the command runs: GETEX
    /// looks the key up first).
    Time(TimeKind, &'a Bytes),
}

/// Options of SET (from `args[3]`) or GETEX (from `args[2]`), parsed as Redis 7's
/// `parseExtendedStringArgumentsOrReply`: an option may repeat (the last time given wins),
/// expiry options exclude each other, NX and XX exclude each other; anything else, or an
/// expiry option without its argument, is `ERR syntax error`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StringOptions<'a> {
    pub nx: bool,
    pub xx: bool,
    pub get: bool,
    pub expiry: ExpiryOption<'a>,
}

impl<'a> StringOptions<'a> {
    /// `set`: SET's options (NX, XX, GET, KEEPTTL and the times); otherwise GETEX's
    /// (PERSIST and the times).
    pub fn parse(args: &'a [Bytes], set: bool) -> Result<StringOptions<'a>, Reply> {
        let mut o = StringOptions {
            nx: false,
            xx: false,
            get: false,
            expiry: ExpiryOption::None,
        };
        let mut j = if set { 3 } else { 2 };
        while j < args.len() {
            let opt = args[j].to_ascii_uppercase();
            let next = args.get(j + 1);
            let time = match &opt[..] {
                b"EX" => Some(TimeKind::Ex),
                b"PX" => Some(TimeKind::Px),
                b"EXAT" => Some(TimeKind::ExAt),
                b"PXAT" => Some(TimeKind::PxAt),
                _ => None,
            };
            match (&opt[..], time, next) {
                (b"NX", ..) if set && !o.xx => o.nx = true,
                (b"XX", ..) if set && !o.nx => o.xx = true,
                (b"GET", ..) if set => o.get = true,
                (b"KEEPTTL", ..) if set && o.may_take(ExpiryOption::KeepTtl) => {
                    o.expiry = ExpiryOption::KeepTtl;
                }
                (b"PERSIST", ..) if !set && o.may_take(ExpiryOption::Persist) => {
                    o.expiry = ExpiryOption::Persist;
                }
                (_, Some(kind), Some(arg)) if o.may_take(ExpiryOption::Time(kind, arg)) => {
                    o.expiry = ExpiryOption::Time(kind, arg);
                    j += 1;
                }
                _ => return Err(err(errors::SYNTAX)),
            }
            j += 1;
        }
        Ok(o)
    }

    /// Whether expiry option `new` may come now: when no other expiry option came before
    /// (the same one repeated replaces itself).
    fn may_take(&self, new: ExpiryOption<'_>) -> bool {
        use ExpiryOption::{KeepTtl, None, Persist, Time};
        match (self.expiry, new) {
            (None, _) | (KeepTtl, KeepTtl) | (Persist, Persist) => true,
            (Time(a, _), Time(b, _)) => a == b,
            _ => false,
        }
    }
}

/// What a SET does to the key's expiry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SetExpiry {
    /// Cleared (no expiry option).
    Clear,
    /// KEEPTTL.
    Keep,
    /// EX / PX / EXAT / PXAT.
    At(ExpireTime),
}

/// SET key value [NX | XX] [GET] [EX s | PX ms | EXAT t | PXAT t | KEEPTTL], and SETEX /
/// PSETEX (SET with EX / PX, under their own names in errors).
pub struct Set<'a> {
    key: &'a Bytes,
    value: &'a Bytes,
    nx: bool,
    xx: bool,
    get: bool,
    expiry: SetExpiry,
    /// For the invalid expire time error.
    name: &'static str,
}

impl<'a> Set<'a> {
    /// Syntax first (Redis's `parseExtendedStringArgumentsOrReply`), then the expiry time
    /// (`getExpireMillisecondsOrReply`), then Quiver's key and value limits.
    pub fn parse(args: &'a [Bytes], limits: &Limits) -> Result<Command<'a>, Reply> {
        let o = StringOptions::parse(args, true)?;
        let expiry = match o.expiry {
            ExpiryOption::None | ExpiryOption::Persist => SetExpiry::Clear,
            ExpiryOption::KeepTtl => SetExpiry::Keep,
            ExpiryOption::Time(kind, arg) => SetExpiry::At(ExpireTime::parse(arg, kind, "set")?),
        };
        check_new_key(&args[1])?;
        check_value(limits, &args[2])?;
        if !o.nx && !o.xx && !o.get && expiry == SetExpiry::Clear {
            return Ok(Command::Vector(VectorOp::new(
                Cmd::Set,
                &args[1..3],
                Shape::Ok,
            )));
        }
        Ok(Command::Keys(Box::new(Set {
            key: &args[1],
            value: &args[2],
            nx: o.nx,
            xx: o.xx,
            get: o.get,
            expiry,
            name: "set",
        })))
    }

    /// SETEX key seconds value / PSETEX key milliseconds value.
    pub fn parse_setex(cmd: Cmd, args: &'a [Bytes], limits: &Limits) -> Result<Set<'a>, Reply> {
        let (kind, name) = if cmd == Cmd::PSetEx {
            (TimeKind::Px, "psetex")
        } else {
            (TimeKind::Ex, "setex")
        };
        let at = ExpireTime::parse(&args[2], kind, name)?;
        check_new_key(&args[1])?;
        check_value(limits, &args[3])?;
        Ok(Set {
            key: &args[1],
            value: &args[3],
            nx: false,
            xx: false,
            get: false,
            expiry: SetExpiry::At(at),
            name,
        })
    }
}

impl TxnCommand for Set<'_> {
    fn apply(&self, txn: &mut Txn<'_>) -> quiver_store::Result<Reply> {
        let now = txn.now_ms();
        let expire_at = match self.expiry {
            SetExpiry::At(t) => match t.at(now, self.name) {
                Ok(at) => Some(at),
                Err(reply) => return Ok(reply),
            },
            SetExpiry::Clear | SetExpiry::Keep => None,
        };
        // A SET that neither tests nor returns the old value, nor keeps its expiry, does not
        // read it (SETEX, SET ... EX).
        let reads = self.nx || self.xx || self.get || self.expiry == SetExpiry::Keep;
        // SET ... GET reads a string (WRONGTYPE for another kind, nothing set); otherwise
        // a SET replaces a key of any kind.
        let old = match (reads, self.get) {
            (true, true) => txn.get_string_entry(self.key)?,
            (true, false) => txn.get_entry(self.key)?,
            (false, _) => None,
        };
        let exists = old.is_some();
        let apply = !(self.nx && exists || self.xx && !exists);
        if apply {
            let (key, value) = (self.key.clone(), self.value.clone());
            match expire_at {
                // Already past (EXAT / PXAT): Redis sets the key, which is expired at once.
                Some(at) if at <= now => txn.delete(key),
                Some(at) => txn.put_expiring(key, value, Some(at)),
                None if self.expiry == SetExpiry::Keep => {
                    let keep = old.as_ref().and_then(|e| e.expire_at);
                    txn.put_expiring(key, value, keep);
                }
                None => txn.put(key, value),
            }
        }
        Ok(match (self.get, apply) {
            (true, _) => bulk_or_null(old.map(|e| e.value)),
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

/// GETSET key value: the old value, and the new one set (without expiry).
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
