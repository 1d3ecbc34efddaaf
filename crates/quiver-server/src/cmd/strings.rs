//! Commands on keys and their string values. Each is written against a [`Txn`]: it reads
//! through it and buffers its writes in it, so the caller decides whether the command commits
//! on its own (an atomic read-modify-write) or as part of MULTI/EXEC.
//!
//! A write of a key the engine refuses (empty, over 64 KiB) is answered with an error before
//! anything is read or written; reading such a key finds nothing.

use bytes::{BufMut, Bytes, BytesMut};
use quiver_store::Result;

use crate::cmd::Cmd;
use crate::errors::{self, err, store_error};
use crate::frame::string2ll;
use crate::reply::Reply;
use crate::stats::Stats;
use crate::txn::{valid_key, Txn};

/// Runs `cmd`; `args` passed the arity check. Engine failures come back as `Err`.
pub fn run(txn: &mut Txn<'_>, stats: &Stats, cmd: Cmd, args: &[Bytes]) -> Result<Reply> {
    if let Some(reply) = check_keys(cmd, args) {
        return Ok(reply);
    }
    match cmd {
        Cmd::Get => {
            let v = txn.get(&args[1])?;
            stats.hit(v.is_some());
            Ok(bulk_or_null(v))
        }
        Cmd::Set => set(txn, args),
        Cmd::SetNx => {
            if txn.exists(&args[1])? {
                return Ok(Reply::Integer(0));
            }
            txn.put(args[1].clone(), args[2].clone());
            Ok(Reply::Integer(1))
        }
        Cmd::GetSet => {
            let old = txn.get(&args[1])?;
            txn.put(args[1].clone(), args[2].clone());
            Ok(bulk_or_null(old))
        }
        Cmd::GetDel => {
            let old = txn.get(&args[1])?;
            if old.is_some() {
                txn.delete(args[1].clone());
            }
            Ok(bulk_or_null(old))
        }
        Cmd::MGet => {
            let mut values = Vec::with_capacity(args.len() - 1);
            for k in &args[1..] {
                let v = txn.get(k)?;
                stats.hit(v.is_some());
                values.push(bulk_or_null(v));
            }
            Ok(Reply::Array(values))
        }
        Cmd::MSet | Cmd::MSetNx => {
            if args.len() % 2 == 0 {
                return Ok(errors::wrong_arity(if cmd == Cmd::MSet {
                    "mset"
                } else {
                    "msetnx"
                }));
            }
            if cmd == Cmd::MSetNx {
                for pair in args[1..].chunks(2) {
                    if txn.exists(&pair[0])? {
                        return Ok(Reply::Integer(0));
                    }
                }
            }
            for pair in args[1..].chunks(2) {
                txn.put(pair[0].clone(), pair[1].clone());
            }
            Ok(if cmd == Cmd::MSet {
                Reply::OK
            } else {
                Reply::Integer(1)
            })
        }
        Cmd::Del | Cmd::Unlink => {
            let mut deleted = 0;
            for k in &args[1..] {
                if txn.exists(k)? {
                    txn.delete(k.clone());
                    deleted += 1;
                }
            }
            Ok(Reply::Integer(deleted))
        }
        Cmd::Exists => {
            let mut found = 0;
            for k in &args[1..] {
                found += i64::from(txn.exists(k)?);
            }
            Ok(Reply::Integer(found))
        }
        Cmd::StrLen => Ok(Reply::Integer(
            txn.get(&args[1])?.map_or(0, |v| v.len() as i64),
        )),
        Cmd::Append => {
            let old = txn.get(&args[1])?.unwrap_or_default();
            let mut v = BytesMut::with_capacity(old.len() + args[2].len());
            v.put_slice(&old);
            v.put_slice(&args[2]);
            let len = v.len() as i64;
            txn.put(args[1].clone(), v.freeze());
            Ok(Reply::Integer(len))
        }
        Cmd::Incr => incr_by(txn, &args[1], 1),
        Cmd::Decr => incr_by(txn, &args[1], -1),
        Cmd::IncrBy | Cmd::DecrBy => {
            let Some(n) = string2ll(&args[2]) else {
                return Ok(err(errors::NOT_INTEGER));
            };
            let delta = if cmd == Cmd::IncrBy {
                n
            } else if n == i64::MIN {
                return Ok(err("ERR decrement would overflow"));
            } else {
                -n
            };
            incr_by(txn, &args[1], delta)
        }
        Cmd::Type => Ok(Reply::simple(if txn.exists(&args[1])? {
            "string"
        } else {
            "none"
        })),
        Cmd::Batch => batch(txn, args),
        other => unreachable!("{other:?} is not a key/value command"),
    }
}

/// For a command that creates keys, the error for the first key the engine would refuse.
/// (Such a key can never exist, so reading or deleting it simply finds nothing.)
fn check_keys(cmd: Cmd, args: &[Bytes]) -> Option<Reply> {
    let keys = match cmd {
        Cmd::MSet | Cmd::MSetNx => &args[1..],
        Cmd::Set
        | Cmd::SetNx
        | Cmd::GetSet
        | Cmd::Append
        | Cmd::Incr
        | Cmd::IncrBy
        | Cmd::Decr
        | Cmd::DecrBy => &args[1..2],
        _ => return None,
    };
    keys.iter().step_by(2).find_map(|k| {
        (!valid_key(k)).then(|| {
            store_error(&quiver_store::Error::KeyLength {
                len: k.len(),
                max: quiver_store::options::KEY_LEN_MAX,
            })
        })
    })
}

fn bulk_or_null(v: Option<Bytes>) -> Reply {
    v.map_or(Reply::Null, Reply::Bulk)
}

/// SET key value [NX | XX] [GET] [EX s | PX ms | EXAT t | PXAT t | KEEPTTL], parsed like
/// Redis 7's `parseExtendedStringArgumentsOrReply`. Quiver keys do not expire: a valid expiry
/// option is refused with its own error, after the syntax checks Redis makes.
fn set(txn: &mut Txn<'_>, args: &[Bytes]) -> Result<Reply> {
    #[derive(PartialEq)]
    enum Expiry {
        None,
        KeepTtl,
        Timed(&'static str),
    }
    let (mut nx, mut xx, mut get) = (false, false, false);
    let mut expiry = Expiry::None;
    let mut j = 3;
    while j < args.len() {
        let opt = args[j].to_ascii_uppercase();
        let has_next = j + 1 < args.len();
        match &opt[..] {
            b"NX" if !xx => nx = true,
            b"XX" if !nx => xx = true,
            b"GET" => get = true,
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
                    None => return Ok(err(errors::NOT_INTEGER)),
                    Some(t) if t <= 0 => {
                        return Ok(err("ERR invalid expire time in 'set' command"))
                    }
                    Some(_) => expiry = Expiry::Timed(name),
                }
            }
            _ => return Ok(err(errors::SYNTAX)),
        }
        j += 1;
    }
    match expiry {
        Expiry::None => {}
        Expiry::KeepTtl => {
            return Ok(err(
                "ERR KEEPTTL is not supported: Quiver keys do not expire",
            ))
        }
        Expiry::Timed(name) => {
            return Ok(Reply::error(format!(
                "ERR {name} is not supported: Quiver keys do not expire"
            )))
        }
    }
    let old = if get || nx || xx {
        Some(txn.get(&args[1])?)
    } else {
        None
    };
    let exists = old.as_ref().is_some_and(|v| v.is_some());
    let apply = !(nx && exists || xx && !exists);
    if apply {
        txn.put(args[1].clone(), args[2].clone());
    }
    Ok(match (get, apply) {
        (true, _) => bulk_or_null(old.flatten()),
        (false, true) => Reply::OK,
        (false, false) => Reply::Null,
    })
}

/// INCR / DECR / INCRBY / DECRBY: the value must be a decimal 64-bit integer (absent is 0).
fn incr_by(txn: &mut Txn<'_>, key: &Bytes, delta: i64) -> Result<Reply> {
    let current = match txn.get(key)? {
        None => 0,
        Some(v) => match string2ll(&v) {
            Some(n) => n,
            None => return Ok(err(errors::NOT_INTEGER)),
        },
    };
    let Some(next) = current.checked_add(delta) else {
        return Ok(err(errors::OVERFLOW));
    };
    txn.put(key.clone(), Bytes::from(next.to_string()));
    Ok(Reply::Integer(next))
}

/// A condition of Quiver's BATCH command.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Condition {
    Exists,
    Absent,
    Equals(Bytes),
}

impl Condition {
    fn name(&self) -> &'static str {
        match self {
            Condition::Exists => "EXISTS",
            Condition::Absent => "ABSENT",
            Condition::Equals(_) => "EQUALS",
        }
    }

    fn holds(&self, current: Option<&Bytes>) -> bool {
        match self {
            Condition::Exists => current.is_some(),
            Condition::Absent => current.is_none(),
            Condition::Equals(v) => current == Some(v),
        }
    }
}

enum BatchOp {
    Put(Bytes, Bytes),
    Del(Bytes),
    Check(Bytes),
}

/// `BATCH <op> [<op> ...]` with `<op>` = `PUT key value [IF cond]` | `DEL key [IF cond]` |
/// `CHECK key IF cond` and `cond` = `EXISTS` | `ABSENT` | `EQUALS value`.
///
/// Every condition is evaluated against the state before the batch; if all hold, every write
/// is applied (atomically, with the transaction's commit), else nothing is and the reply is
/// `-CONDITION op <i> failed: <cond>`.
fn batch(txn: &mut Txn<'_>, args: &[Bytes]) -> Result<Reply> {
    let mut ops: Vec<(BatchOp, Option<Condition>)> = Vec::new();
    let mut j = 1;
    let arg = |j: usize| args.get(j);
    while j < args.len() {
        let word = args[j].to_ascii_uppercase();
        let (op, used) = match (&word[..], arg(j + 1), arg(j + 2)) {
            (b"PUT", Some(k), Some(v)) => (BatchOp::Put(k.clone(), v.clone()), 3),
            (b"DEL", Some(k), _) => (BatchOp::Del(k.clone()), 2),
            (b"CHECK", Some(k), _) => (BatchOp::Check(k.clone()), 2),
            _ => return Ok(err(errors::SYNTAX)),
        };
        j += used;
        let mut condition = None;
        if arg(j).is_some_and(|w| w.eq_ignore_ascii_case(b"IF")) {
            let c = match arg(j + 1).map(|w| w.to_ascii_uppercase()) {
                Some(w) if w == b"EXISTS" => Condition::Exists,
                Some(w) if w == b"ABSENT" => Condition::Absent,
                Some(w) if w == b"EQUALS" => match arg(j + 2) {
                    Some(v) => {
                        j += 1;
                        Condition::Equals(v.clone())
                    }
                    None => return Ok(err(errors::SYNTAX)),
                },
                _ => return Ok(err(errors::SYNTAX)),
            };
            j += 2;
            condition = Some(c);
        }
        if matches!(op, BatchOp::Check(_)) && condition.is_none() {
            return Ok(err(errors::SYNTAX));
        }
        ops.push((op, condition));
    }
    for (op, _) in &ops {
        if let BatchOp::Put(key, _) = op {
            if valid_key(key) {
                continue;
            }
            return Ok(store_error(&quiver_store::Error::KeyLength {
                len: key.len(),
                max: quiver_store::options::KEY_LEN_MAX,
            }));
        }
    }
    // Conditions see the state before the batch: evaluate them all before any write.
    for (i, (op, condition)) in ops.iter().enumerate() {
        if let Some(c) = condition {
            let key = match op {
                BatchOp::Put(k, _) | BatchOp::Del(k) | BatchOp::Check(k) => k,
            };
            if !c.holds(txn.get(key)?.as_ref()) {
                return Ok(Reply::error(format!(
                    "CONDITION op {i} failed: {}",
                    c.name()
                )));
            }
        }
    }
    for (op, _) in ops {
        match op {
            BatchOp::Put(k, v) => txn.put(k, v),
            BatchOp::Del(k) => txn.delete(k),
            BatchOp::Check(_) => {}
        }
    }
    Ok(Reply::OK)
}
