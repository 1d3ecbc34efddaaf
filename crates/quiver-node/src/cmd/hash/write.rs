//! HSET, HMSET, HSETNX, HDEL, HINCRBY, HINCRBYFLOAT: the hash read (a large one: the
//! buckets of the fields named), changed and written back, keeping its expiry time. A command that changes nothing writes nothing (HSETNX of a
//! field there, HDEL of none, a failed increment), so a WATCH of the key is not broken by it,
//! as in Redis.

use bytes::Bytes;
use quiver_store::Entry;

use crate::cmd::common::{check_new_key, TxnCommand};
use crate::cmd::float::{NAN_OR_INFINITY, NOT_A_FLOAT};
use crate::cmd::hash::{read_hash, Hash};
use crate::float80::{self, Float80, Parsed};
use crate::txn::Txn;
use quiver_service::errors::{self, err, wrong_arity};
use quiver_service::frame::string2ll;
use quiver_service::reply::Reply;
use quiver_service::table::Cmd;

const HASH_VALUE_NOT_INTEGER: &str = "ERR hash value is not an integer";
const HASH_VALUE_NOT_FLOAT: &str = "ERR hash value is not a float";
/// HINCRBYFLOAT's answer to an increment of `inf` (INCRBYFLOAT's words differ).
const INCREMENT_NAN_OR_INFINITY: &str = "ERR value is NaN or Infinity";

/// HSET / HMSET key field value [field value ...]: HSET answers how many fields are new,
/// HMSET `OK`. A field named twice takes its last value.
pub struct HSet<'a> {
    key: &'a Bytes,
    pairs: &'a [Bytes],
    count_new: bool,
}

impl<'a> HSet<'a> {
    pub fn parse(cmd: Cmd, args: &'a [Bytes]) -> Result<HSet<'a>, Reply> {
        // The arity (-4) lets through a field without its value.
        if args.len() % 2 != 0 {
            return Err(wrong_arity(cmd.spec().name));
        }
        check_new_key(&args[1])?;
        Ok(HSet {
            key: &args[1],
            pairs: &args[2..],
            count_new: cmd == Cmd::HSet,
        })
    }
}

impl TxnCommand for HSet<'_> {
    fn apply(&self, txn: &mut Txn<'_>) -> quiver_store::Result<Reply> {
        let entry = read_hash(txn, self.key)?;
        let named = self.pairs.iter().step_by(2).map(|f| &f[..]);
        let mut hash = Hash::of(txn, entry.as_ref(), named)?;
        let mut added = 0;
        for pair in self.pairs.chunks_exact(2) {
            added += i64::from(hash.set(txn, &pair[0], &pair[1])?);
        }
        hash.write(txn, self.key, expire_at(&entry))?;
        Ok(if self.count_new {
            Reply::Integer(added)
        } else {
            Reply::OK
        })
    }
}

/// HSETNX key field value: 1 if the field was set, 0 if the hash has it.
pub struct HSetNx<'a> {
    key: &'a Bytes,
    field: &'a Bytes,
    value: &'a Bytes,
}

impl<'a> HSetNx<'a> {
    pub fn parse(args: &'a [Bytes]) -> Result<HSetNx<'a>, Reply> {
        check_new_key(&args[1])?;
        Ok(HSetNx {
            key: &args[1],
            field: &args[2],
            value: &args[3],
        })
    }
}

impl TxnCommand for HSetNx<'_> {
    fn apply(&self, txn: &mut Txn<'_>) -> quiver_store::Result<Reply> {
        let entry = read_hash(txn, self.key)?;
        let mut hash = Hash::of(txn, entry.as_ref(), [&self.field[..]].into_iter())?;
        if hash.get(txn, self.field)?.is_some() {
            return Ok(Reply::Integer(0));
        }
        hash.set(txn, self.field, self.value)?;
        hash.write(txn, self.key, expire_at(&entry))?;
        Ok(Reply::Integer(1))
    }
}

/// HDEL key field [field ...]: how many of the fields the hash had (the key is gone with its
/// last field).
pub struct HDel<'a> {
    key: &'a Bytes,
    fields: &'a [Bytes],
}

impl<'a> HDel<'a> {
    pub fn parse(args: &'a [Bytes]) -> HDel<'a> {
        HDel {
            key: &args[1],
            fields: &args[2..],
        }
    }
}

impl TxnCommand for HDel<'_> {
    fn apply(&self, txn: &mut Txn<'_>) -> quiver_store::Result<Reply> {
        let entry = read_hash(txn, self.key)?;
        let mut hash = Hash::of(txn, entry.as_ref(), self.fields.iter().map(|f| &f[..]))?;
        let mut removed = 0;
        for f in self.fields {
            removed += usize::from(hash.remove(txn, f)?);
        }
        if removed > 0 {
            hash.write(txn, self.key, expire_at(&entry))?;
        }
        Ok(Reply::Integer(removed as i64))
    }
}

/// A change keeps the hash's expiry time (none for a new hash).
fn expire_at(entry: &Option<Entry>) -> Option<u64> {
    entry.as_ref().and_then(|e| e.expire_at)
}

/// What HINCRBY / HINCRBYFLOAT add.
enum Increment {
    Integer(i64),
    Float(Float80),
}

/// HINCRBY / HINCRBYFLOAT key field increment: the field's new value (an absent field is 0).
pub struct HIncr<'a> {
    key: &'a Bytes,
    field: &'a Bytes,
    by: Increment,
}

impl<'a> HIncr<'a> {
    /// The increment is checked before the key is looked at, as in Redis.
    pub fn parse(cmd: Cmd, args: &'a [Bytes]) -> Result<HIncr<'a>, Reply> {
        let by = if cmd == Cmd::HIncrBy {
            Increment::Integer(string2ll(&args[3]).ok_or_else(|| err(errors::NOT_INTEGER))?)
        } else {
            match float80::parse(&args[3]) {
                None => return Err(err(NOT_A_FLOAT)),
                Some(Parsed::Infinite) => return Err(err(INCREMENT_NAN_OR_INFINITY)),
                Some(Parsed::Finite(x)) => Increment::Float(x),
            }
        };
        check_new_key(&args[1])?;
        Ok(HIncr {
            key: &args[1],
            field: &args[2],
            by,
        })
    }

    /// The field's new value as text, or the error reply (nothing is written then).
    fn next(&self, current: Option<&[u8]>) -> Result<(Bytes, Reply), Reply> {
        match self.by {
            Increment::Integer(by) => {
                let n = match current {
                    None => 0,
                    Some(v) => string2ll(v).ok_or_else(|| err(HASH_VALUE_NOT_INTEGER))?,
                };
                let sum = n.checked_add(by).ok_or_else(|| err(errors::OVERFLOW))?;
                Ok((Bytes::from(sum.to_string()), Reply::Integer(sum)))
            }
            Increment::Float(by) => {
                let x = match current.map(float80::parse) {
                    None => Parsed::Finite(Float80::ZERO),
                    Some(Some(x)) => x,
                    Some(None) => return Err(err(HASH_VALUE_NOT_FLOAT)),
                };
                let sum = match x {
                    Parsed::Finite(x) => float80::add(x, by),
                    Parsed::Infinite => None,
                };
                let sum = sum.ok_or_else(|| err(NAN_OR_INFINITY))?;
                let text = Bytes::from(float80::format_human(sum));
                Ok((text.clone(), Reply::Bulk(text)))
            }
        }
    }
}

impl TxnCommand for HIncr<'_> {
    fn apply(&self, txn: &mut Txn<'_>) -> quiver_store::Result<Reply> {
        let entry = read_hash(txn, self.key)?;
        let mut hash = Hash::of(txn, entry.as_ref(), [&self.field[..]].into_iter())?;
        let (value, reply) = match self.next(hash.get(txn, self.field)?.as_deref()) {
            Ok(next) => next,
            Err(reply) => return Ok(reply),
        };
        hash.set(txn, self.field, &value)?;
        hash.write(txn, self.key, expire_at(&entry))?;
        Ok(reply)
    }
}
