//! Key expiry, as Redis 7.0's `expire.c` and `getexCommand`: EXPIRE, PEXPIRE, EXPIREAT and
//! PEXPIREAT (with NX, XX, GT, LT), TTL, PTTL, EXPIRETIME, PEXPIRETIME, PERSIST and GETEX.
//! SET's expiry options, SETEX and PSETEX are in `set`.
//!
//! Times are milliseconds since the Unix epoch on the store's clock, read once per
//! transaction (`Txn::now_ms`): a relative time is added to it, never to the system clock,
//! so tests move time by hand. A key whose expiry time has come is absent for every command;
//! an expiry set in the past deletes the key at once (Redis's `checkAlreadyExpired`).

use bytes::{BufMut, Bytes, BytesMut};

use crate::cmd::common::TxnCommand;
use crate::cmd::set::{invalid_expire_time, ExpireTime, ExpiryOption, StringOptions};
use crate::txn::Txn;
use quiver_service::errors::{self, err, sanitize};
use quiver_service::frame::string2ll;
use quiver_service::reply::Reply;
use quiver_service::table::Cmd;
use quiver_store::Entry;

/// EXPIRE's conditions on the key's current expiry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Conditions {
    /// NX: only when the key has no expiry.
    nx: bool,
    /// XX: only when it has one.
    xx: bool,
    /// GT: only when the new time is later (no expiry counts as infinite).
    gt: bool,
    /// LT: only when the new time is earlier (no expiry counts as infinite).
    lt: bool,
}

impl Conditions {
    /// Redis's `parseExtendedExpireArgumentsOrReply` over `args[3..]`.
    fn parse(args: &[Bytes]) -> Result<Conditions, Reply> {
        let mut c = Conditions::default();
        for opt in &args[3..] {
            let upper = opt.to_ascii_uppercase();
            match &upper[..] {
                b"NX" => c.nx = true,
                b"XX" => c.xx = true,
                b"GT" => c.gt = true,
                b"LT" => c.lt = true,
                _ => return Err(unsupported_option(opt)),
            }
        }
        if c.nx && (c.xx || c.gt || c.lt) {
            return Err(err(
                "ERR NX and XX, GT or LT options at the same time are not compatible",
            ));
        }
        if c.gt && c.lt {
            return Err(err(
                "ERR GT and LT options at the same time are not compatible",
            ));
        }
        Ok(c)
    }

    /// Whether a key whose expiry is `current` (`None`: never) takes the new time `when`.
    fn allow(&self, current: Option<i64>, when: i64) -> bool {
        if self.nx && current.is_some() || self.xx && current.is_none() {
            return false;
        }
        if self.gt && current.is_none_or(|c| when <= c) {
            return false;
        }
        if self.lt && current.is_some_and(|c| when >= c) {
            return false;
        }
        true
    }
}

/// `ERR Unsupported option <opt>`, as Redis's `addReplyErrorFormat` prints it: the option
/// as a C string (up to its first NUL byte), line breaks at the end trimmed and the others
/// made blanks.
fn unsupported_option(opt: &[u8]) -> Reply {
    let mut end = opt.iter().position(|&b| b == 0).unwrap_or(opt.len());
    while end > 0 && matches!(opt[end - 1], b'\r' | b'\n') {
        end -= 1;
    }
    let mut m = BytesMut::from(&b"ERR Unsupported option "[..]);
    m.put_slice(&opt[..end]);
    Reply::Error(sanitize(m))
}

/// EXPIRE / PEXPIRE / EXPIREAT / PEXPIREAT key time [NX | XX | GT | LT]: 1 if the expiry was
/// set (or the key deleted, the time being past), 0 if the key is absent or a condition
/// failed.
pub struct Expire<'a> {
    key: &'a Bytes,
    /// The time in milliseconds (relative or absolute); may be negative.
    ms: i64,
    /// EXPIRE, PEXPIRE: counted from now.
    relative: bool,
    conditions: Conditions,
    /// For the invalid expire time error.
    name: &'static str,
}

impl<'a> Expire<'a> {
    /// Options first, then the time (Redis's order of errors).
    pub fn parse(cmd: Cmd, args: &'a [Bytes]) -> Result<Expire<'a>, Reply> {
        let conditions = Conditions::parse(args)?;
        let (name, seconds, relative) = match cmd {
            Cmd::Expire => ("expire", true, true),
            Cmd::PExpire => ("pexpire", false, true),
            Cmd::ExpireAt => ("expireat", true, false),
            _ => ("pexpireat", false, false),
        };
        let Some(t) = string2ll(&args[2]) else {
            return Err(err(errors::NOT_INTEGER));
        };
        let ms = if seconds {
            t.checked_mul(1000)
                .ok_or_else(|| invalid_expire_time(name))?
        } else {
            t
        };
        Ok(Expire {
            key: &args[1],
            ms,
            relative,
            conditions,
            name,
        })
    }
}

impl TxnCommand for Expire<'_> {
    fn apply(&self, txn: &mut Txn<'_>) -> quiver_store::Result<Reply> {
        let now = i64::try_from(txn.now_ms()).unwrap_or(i64::MAX);
        let when = if self.relative {
            match self.ms.checked_add(now) {
                Some(when) => when,
                None => return Ok(invalid_expire_time(self.name)),
            }
        } else {
            self.ms
        };
        let Some(entry) = txn.get_entry(self.key)? else {
            return Ok(Reply::Integer(0));
        };
        let current = entry
            .expire_at
            .map(|at| i64::try_from(at).unwrap_or(i64::MAX));
        if !self.conditions.allow(current, when) {
            return Ok(Reply::Integer(0));
        }
        if when <= now {
            txn.delete(self.key.clone());
        } else {
            let entry = Entry {
                expire_at: Some(when as u64),
                ..entry
            };
            txn.put_entry(self.key.clone(), entry);
        }
        Ok(Reply::Integer(1))
    }
}

/// TTL / PTTL / EXPIRETIME / PEXPIRETIME key: -2 if the key is absent, -1 if it has no
/// expiry, else the time left (TTL, PTTL) or the expiry time (EXPIRETIME, PEXPIRETIME), in
/// seconds (rounded to the nearest) or milliseconds.
pub struct Ttl<'a> {
    key: &'a Bytes,
    ms: bool,
    absolute: bool,
}

impl<'a> Ttl<'a> {
    pub fn parse(cmd: Cmd, args: &'a [Bytes]) -> Ttl<'a> {
        Ttl {
            key: &args[1],
            ms: matches!(cmd, Cmd::PTtl | Cmd::PExpireTime),
            absolute: matches!(cmd, Cmd::ExpireTime | Cmd::PExpireTime),
        }
    }
}

impl TxnCommand for Ttl<'_> {
    fn apply(&self, txn: &mut Txn<'_>) -> quiver_store::Result<Reply> {
        let Some(entry) = txn.get_entry(self.key)? else {
            return Ok(Reply::Integer(-2));
        };
        let Some(at) = entry.expire_at else {
            return Ok(Reply::Integer(-1));
        };
        let at = i64::try_from(at).unwrap_or(i64::MAX);
        let now = i64::try_from(txn.now_ms()).unwrap_or(i64::MAX);
        let t = if self.absolute { at } else { at - now }.max(0);
        Ok(Reply::Integer(if self.ms {
            t
        } else {
            t.saturating_add(500) / 1000
        }))
    }
}

/// PERSIST key: 1 if the key's expiry was removed, 0 if it is absent or has none.
pub struct Persist<'a> {
    key: &'a Bytes,
}

impl<'a> Persist<'a> {
    pub fn parse(args: &'a [Bytes]) -> Persist<'a> {
        Persist { key: &args[1] }
    }
}

impl TxnCommand for Persist<'_> {
    fn apply(&self, txn: &mut Txn<'_>) -> quiver_store::Result<Reply> {
        match txn.get_entry(self.key)? {
            Some(entry) if entry.expire_at.is_some() => {
                let entry = Entry {
                    expire_at: None,
                    ..entry
                };
                txn.put_entry(self.key.clone(), entry);
                Ok(Reply::Integer(1))
            }
            _ => Ok(Reply::Integer(0)),
        }
    }
}

/// GETEX key [EX s | PX ms | EXAT t | PXAT t | PERSIST]: the value (nil if absent), and the
/// key's expiry set or removed. Without an option it is GET.
pub struct GetEx<'a> {
    key: &'a Bytes,
    expiry: ExpiryOption<'a>,
}

impl<'a> GetEx<'a> {
    /// Only the syntax: the time is checked when the command runs, after the key is found
    /// (Redis answers nil for an absent key whatever the time).
    pub fn parse(args: &'a [Bytes]) -> Result<GetEx<'a>, Reply> {
        let o = StringOptions::parse(args, false)?;
        Ok(GetEx {
            key: &args[1],
            expiry: o.expiry,
        })
    }
}

impl TxnCommand for GetEx<'_> {
    fn apply(&self, txn: &mut Txn<'_>) -> quiver_store::Result<Reply> {
        let Some(entry) = txn.get_string_entry(self.key)? else {
            return Ok(Reply::Null);
        };
        let now = txn.now_ms();
        match self.expiry {
            ExpiryOption::Time(kind, arg) => {
                let at =
                    match ExpireTime::parse(arg, kind, "getex").and_then(|t| t.at(now, "getex")) {
                        Ok(at) => at,
                        Err(reply) => return Ok(reply),
                    };
                // Only an absolute time can be past (a relative one is at least 1 ms ahead).
                if at <= now {
                    txn.delete(self.key.clone());
                } else {
                    txn.put_expiring(self.key.clone(), entry.value.clone(), Some(at));
                }
            }
            ExpiryOption::Persist if entry.expire_at.is_some() => {
                txn.put(self.key.clone(), entry.value.clone());
            }
            ExpiryOption::Persist | ExpiryOption::None | ExpiryOption::KeepTtl => {}
        }
        Ok(Reply::Bulk(entry.value))
    }
}

#[cfg(test)]
mod tests {
    use quiver_store::Clock;

    use super::*;
    use crate::state::ServerState;

    fn args(line: &str) -> Vec<Bytes> {
        line.split(' ')
            .map(|w| Bytes::from(w.to_string()))
            .collect()
    }

    /// A transaction reads the clock once: a value it wrote with an expiry stays live for its
    /// later commands, one written already past is absent, and the store's clock moving
    /// meanwhile changes neither.
    #[test]
    fn a_transaction_measures_expiry_at_one_instant() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Clock::manual(1_000_000);
        let state = ServerState::for_tests_with_clock(dir.path(), clock.clone());
        state
            .store
            .put_expiring(b"k", b"v", Some(1_000_010))
            .unwrap();
        let mut txn = Txn::new(&state, 0);
        let ttl = args("PTTL k");
        assert_eq!(
            Ttl::parse(Cmd::PTtl, &ttl).apply(&mut txn).unwrap(),
            Reply::Integer(10)
        );
        clock.advance(10);
        // The store now finds it expired; the transaction still measures at its start.
        assert_eq!(state.store.get(b"k").unwrap(), None);
        assert_eq!(
            Ttl::parse(Cmd::PTtl, &ttl).apply(&mut txn).unwrap(),
            Reply::Integer(10)
        );
        let past = args("PEXPIREAT j 1000000");
        txn.put(Bytes::from_static(b"j"), Bytes::from_static(b"x"));
        assert_eq!(
            Expire::parse(Cmd::PExpireAt, &past)
                .unwrap()
                .apply(&mut txn)
                .unwrap(),
            Reply::Integer(1)
        );
        assert_eq!(txn.get(&Bytes::from_static(b"j")).unwrap(), None);
        assert_eq!(txn.now_ms(), 1_000_000);
    }

    #[test]
    fn expire_options_and_times_are_checked_before_anything_runs() {
        let parse = |line: &str| Expire::parse(Cmd::Expire, &args(line)).err();
        assert_eq!(parse("EXPIRE k 10 NX"), None);
        assert_eq!(
            parse("EXPIRE k x FOO"),
            Some(err("ERR Unsupported option FOO")),
            "options come before the time"
        );
        assert_eq!(parse("EXPIRE k x"), Some(err(errors::NOT_INTEGER)));
        assert_eq!(
            parse("EXPIRE k 9223372036854776"),
            Some(invalid_expire_time("expire"))
        );
        assert_eq!(parse("EXPIRE k -9223372036854775"), None);
        assert_eq!(
            parse("EXPIRE k -9223372036854776"),
            Some(invalid_expire_time("expire"))
        );
    }
}
