//! OBJECT ENCODING | REFCOUNT | IDLETIME | FREQ key, and OBJECT HELP: what Redis 7 would
//! report for a string holding the value, with its default configuration.
//!
//! Quiver keeps no object header, so the answers follow from the value alone, by the rule
//! Redis applies when SET stores a value (`tryObjectEncoding`): `int` for a canonical 64-bit
//! integer of at most 20 bytes, `embstr` up to 44 bytes, `raw` beyond; an `int` from 0 to
//! 9999 is one of Redis's shared integers (reference count `INT_MAX`), anything else has one
//! reference. Redis differs for values written by APPEND, SETRANGE (always `raw`) and
//! INCRBYFLOAT (never `int`), and after COPY (a copied shared integer has one reference);
//! `tests/compat/quiver_deviations.json` lists the session that shows it. A hash is `listpack`
//! or `hashtable` by Redis's thresholds from the fields it holds (`hash::encoding`), one
//! reference. Quiver keeps no access data (docs/design.md "OBJECT IDLETIME and FREQ"): IDLETIME
//! is 0, FREQ Redis's refusal under a non-LFU policy.

use bytes::Bytes;

use crate::cmd::common::TxnCommand;
use crate::cmd::hash;
use crate::txn::Txn;
use quiver_service::errors::{err, unknown_subcommand, wrong_arity};
use quiver_service::frame::string2ll;
use quiver_service::reply::Reply;
use quiver_store::{Entry, ValueKind};

/// Redis's `OBJ_ENCODING_EMBSTR_SIZE_LIMIT`: longer strings are `raw`.
const EMBSTR_LEN_MAX: usize = 44;
/// Longest text Redis tries as an integer encoding.
const INT_TEXT_LEN_MAX: usize = 20;
/// Redis's shared integer objects are 0 to `OBJ_SHARED_INTEGERS - 1`.
const SHARED_INTEGERS: i64 = 10_000;
/// Their reference count (`OBJ_SHARED_REFCOUNT`, `INT_MAX`).
const SHARED_REFCOUNT: i64 = i32::MAX as i64;

const FREQ_NOT_TRACKED: &str = "ERR An LFU maxmemory policy is not selected, access frequency \
    not tracked. Please note that when switching between policies at runtime LRU and LFU data \
    will take some time to adjust.";

const HELP: &[&str] = &[
    "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "ENCODING <key>",
    "    Return the kind of internal representation used in order to store the value",
    "    associated with a <key>.",
    "FREQ <key>",
    "    Return the access frequency index of the <key>. The returned integer is",
    "    proportional to the logarithm of the recent access frequency of the key.",
    "IDLETIME <key>",
    "    Return the idle time of the <key>, that is the approximated number of",
    "    seconds elapsed since the last access to the key.",
    "REFCOUNT <key>",
    "    Return the number of references of the value associated with the specified",
    "    <key>.",
    "HELP",
    "    Prints this help.",
];

/// A parsed OBJECT request.
pub enum Object<'a> {
    Encoding(&'a Bytes),
    RefCount(&'a Bytes),
    IdleTime(&'a Bytes),
    Freq(&'a Bytes),
    Help,
    /// An unknown subcommand or a wrong number of arguments: Redis refuses it when it looks
    /// the subcommand up, so the executor counts it as a refusal (see `errors::refusal`).
    Refused(Reply),
}

impl<'a> Object<'a> {
    pub fn parse(args: &'a [Bytes]) -> Object<'a> {
        let sub = args[1].to_ascii_lowercase();
        let (name, arity) = match &sub[..] {
            b"encoding" => ("encoding", 3),
            b"refcount" => ("refcount", 3),
            b"idletime" => ("idletime", 3),
            b"freq" => ("freq", 3),
            b"help" => ("help", 2),
            _ => return Object::Refused(unknown_subcommand(&args[1], "OBJECT")),
        };
        if args.len() != arity {
            return Object::Refused(wrong_arity(&format!("object|{name}")));
        }
        match name {
            "encoding" => Object::Encoding(&args[2]),
            "refcount" => Object::RefCount(&args[2]),
            "idletime" => Object::IdleTime(&args[2]),
            "freq" => Object::Freq(&args[2]),
            _ => Object::Help,
        }
    }
}

impl TxnCommand for Object<'_> {
    fn apply(&self, txn: &mut Txn<'_>) -> quiver_store::Result<Reply> {
        let key = match self {
            Object::Help => {
                return Ok(Reply::Array(
                    HELP.iter().map(|l| Reply::simple(*l)).collect(),
                ))
            }
            Object::Refused(reply) => return Ok(reply.clone()),
            Object::Encoding(k) | Object::RefCount(k) | Object::IdleTime(k) | Object::Freq(k) => k,
        };
        let Some(entry) = txn.get_entry(key)? else {
            return Ok(Reply::Null);
        };
        Ok(match self {
            Object::Encoding(_) => {
                Reply::Bulk(Bytes::from_static(entry_encoding(&entry)?.as_bytes()))
            }
            Object::RefCount(_) => Reply::Integer(entry_refcount(&entry)),
            Object::IdleTime(_) => Reply::Integer(0),
            _ => err(FREQ_NOT_TRACKED),
        })
    }
}

/// OBJECT ENCODING of a key holding `entry` (DEBUG OBJECT's too).
pub fn entry_encoding(entry: &Entry) -> quiver_store::Result<&'static str> {
    Ok(match entry.kind {
        ValueKind::String => encoding(&entry.value),
        ValueKind::Hash => hash::encoding(&entry.hash_value()?),
    })
}

/// OBJECT REFCOUNT of a key holding `entry`.
pub fn entry_refcount(entry: &Entry) -> i64 {
    match entry.kind {
        ValueKind::String => refcount(&entry.value),
        ValueKind::Hash => 1,
    }
}

/// The integer Redis would store `value` as, if any (`string2l` on at most 20 bytes).
fn as_integer(value: &[u8]) -> Option<i64> {
    (value.len() <= INT_TEXT_LEN_MAX)
        .then(|| string2ll(value))
        .flatten()
}

/// Redis's encoding name for a string value stored by SET.
fn encoding(value: &[u8]) -> &'static str {
    if as_integer(value).is_some() {
        "int"
    } else if value.len() <= EMBSTR_LEN_MAX {
        "embstr"
    } else {
        "raw"
    }
}

fn refcount(value: &[u8]) -> i64 {
    match as_integer(value) {
        Some(n) if (0..SHARED_INTEGERS).contains(&n) => SHARED_REFCOUNT,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings_as_redis_names_them() {
        assert_eq!(encoding(b"12345"), "int");
        assert_eq!(encoding(b"-9223372036854775808"), "int");
        assert_eq!(encoding(b"9223372036854775808"), "embstr");
        assert_eq!(encoding(b"007"), "embstr");
        assert_eq!(encoding(b"+1"), "embstr");
        assert_eq!(encoding(b""), "embstr");
        assert_eq!(encoding(&[b'x'; 44]), "embstr");
        assert_eq!(encoding(&[b'x'; 45]), "raw");
        assert_eq!(refcount(b"0"), SHARED_REFCOUNT);
        assert_eq!(refcount(b"9999"), SHARED_REFCOUNT);
        assert_eq!(refcount(b"10000"), 1);
        assert_eq!(refcount(b"-1"), 1);
        assert_eq!(refcount(b"abc"), 1);
    }
}
