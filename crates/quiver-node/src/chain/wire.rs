//! How keys' states travel between nodes, for a range's move (`RANGEIMPORT ITEMS`) and a
//! chain's messages (`CHAIN APPLY`): `key expire value` triples, expire `-1` for none, `-2`
//! for a delete (the value empty), else the absolute expiry time in ms — so a key expires at
//! the same instant on every node, whenever the message arrives. A hash's expire has an `H`
//! before it (`H-1`, `H1767225600000`) and its value is the packed fields (`fields::Fields`).
//!
//! ```text
//! CHAIN APPLY <lo-hi> <version> <seq> ATOMIC|PLAIN [<key> <expire> <value>] ...
//! CHAIN APPLY <lo-hi> <version> <seq> FLUSH
//! ```
//!
//! (FLUSH: every key of the range deleted at once, a FLUSHALL's share of the chain)
//!
//! answered `+OK` once the message is committed (see `chain`).

use bytes::{Bytes, BytesMut};
use quiver_store::slot::{key_slot, SlotRange};
use quiver_store::{RangeItem, ValueKind};

use crate::chain::Msg;
use quiver_service::errors::err;
use quiver_service::frame::string2ll;
use quiver_service::reply::Reply;

/// What comes before a hash's expire.
const HASH_MARK: &str = "H";

/// Appends `items` as triples to `args`.
pub fn push_items(args: &mut Vec<Bytes>, items: &[RangeItem]) {
    for item in items {
        match item {
            RangeItem::Put {
                key,
                value,
                expire_at,
                kind,
            } => {
                let kind = match kind {
                    ValueKind::String => "",
                    ValueKind::Hash => HASH_MARK,
                };
                let expire = expire_at.map_or("-1".to_string(), |t| t.to_string());
                args.push(key.clone());
                args.push(Bytes::from(format!("{kind}{expire}")));
                args.push(value.clone());
            }
            RangeItem::Delete { key } => {
                args.push(key.clone());
                args.push(Bytes::from_static(b"-2"));
                args.push(Bytes::new());
            }
        }
    }
}

/// `key expire value` triples, every key in `range`.
pub fn parse_items(range: SlotRange, args: &[Bytes]) -> Result<Vec<RangeItem>, Reply> {
    if args.len() % 3 != 0 {
        return Err(err(quiver_service::errors::SYNTAX));
    }
    args.chunks_exact(3)
        .map(|c| {
            let key = c[0].clone();
            if !range.contains(key_slot(&key)) {
                return Err(Reply::error(format!(
                    "ERR key of slot {} outside the range {range}",
                    key_slot(&key)
                )));
            }
            let (kind, expire) = match c[1].strip_prefix(HASH_MARK.as_bytes()) {
                Some(expire) => (ValueKind::Hash, expire),
                None => (ValueKind::String, &c[1][..]),
            };
            let expire_at = match string2ll(expire) {
                Some(-2) if kind == ValueKind::String => return Ok(RangeItem::Delete { key }),
                Some(-1) => None,
                Some(t) if t >= 0 => Some(t as u64),
                _ => return Err(err("ERR invalid expire time in a key's state")),
            };
            Ok(RangeItem::Put {
                key,
                value: c[2].clone(),
                expire_at,
                kind,
            })
        })
        .collect()
}

/// Encodes `msg` of the chain of `slots` at `version` as a `CHAIN APPLY` request.
pub fn encode_apply(out: &mut BytesMut, slots: SlotRange, version: u64, msg: &Msg) {
    let mut args: Vec<Bytes> = Vec::with_capacity(6 + msg.items.len() * 3);
    args.push(Bytes::from_static(b"CHAIN"));
    args.push(Bytes::from_static(b"APPLY"));
    args.push(Bytes::from(slots.to_string()));
    args.push(Bytes::from(version.to_string()));
    args.push(Bytes::from(msg.seq.to_string()));
    args.push(Bytes::from_static(if msg.flush {
        b"FLUSH"
    } else if msg.atomic {
        b"ATOMIC"
    } else {
        b"PLAIN"
    }));
    push_items(&mut args, &msg.items);
    let refs: Vec<&[u8]> = args.iter().map(|a| &a[..]).collect();
    quiver_resp::request::encode_command(out, &refs);
}

/// A parsed `CHAIN APPLY` (arguments after `APPLY`).
pub struct Apply {
    pub slots: SlotRange,
    pub version: u64,
    pub msg: Msg,
}

pub fn parse_apply(args: &[Bytes]) -> Result<Apply, Reply> {
    if args.len() < 4 {
        return Err(err(quiver_service::errors::SYNTAX));
    }
    let Some(slots) = std::str::from_utf8(&args[0])
        .ok()
        .and_then(SlotRange::parse)
    else {
        return Err(Reply::error(format!(
            "ERR invalid slot range '{}'",
            String::from_utf8_lossy(&args[0])
        )));
    };
    let number = |a: &Bytes, what: &str| {
        string2ll(a)
            .and_then(|n| u64::try_from(n).ok())
            .ok_or_else(|| Reply::error(format!("ERR invalid {what} in CHAIN APPLY")))
    };
    let version = number(&args[1], "version")?;
    let seq = number(&args[2], "sequence number")?;
    if seq == 0 {
        return Err(err("ERR invalid sequence number in CHAIN APPLY"));
    }
    let (atomic, flush) = match &args[3].to_ascii_uppercase()[..] {
        b"ATOMIC" => (true, false),
        b"PLAIN" => (false, false),
        b"FLUSH" if args.len() == 4 => (true, true),
        _ => return Err(err(quiver_service::errors::SYNTAX)),
    };
    let items = parse_items(slots, &args[4..])?;
    Ok(Apply {
        slots,
        version,
        msg: Msg {
            seq,
            items,
            atomic,
            flush,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The request's arguments after `CHAIN APPLY`.
    fn encoded_args(msg: &Msg) -> Vec<Bytes> {
        let mut out = BytesMut::new();
        encode_apply(&mut out, SlotRange::ALL, 7, msg);
        let mut parser = quiver_client::Parser::new();
        match parser.parse(&mut out).unwrap().unwrap() {
            quiver_client::Value::Array(v) => v[2..]
                .iter()
                .map(|a| match a {
                    quiver_client::Value::Bulk(b) => b.clone(),
                    other => panic!("{other:?}"),
                })
                .collect(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_flush_travels_without_items_and_takes_none() {
        let flush = Msg {
            seq: 3,
            items: Vec::new(),
            atomic: true,
            flush: true,
        };
        let args = encoded_args(&flush);
        assert_eq!(args[3], Bytes::from_static(b"FLUSH"));
        let back = parse_apply(&args).unwrap();
        assert!(back.msg.flush && back.msg.items.is_empty());
        assert_eq!((back.version, back.msg.seq), (7, 3));
        let mut with_items = args.clone();
        with_items.extend([&b"k"[..], b"-1", b"v"].map(Bytes::copy_from_slice));
        assert!(parse_apply(&with_items).is_err());
        let write = Msg::write(
            4,
            vec![RangeItem::Delete {
                key: Bytes::from_static(b"k"),
            }],
            false,
        );
        let back = parse_apply(&encoded_args(&write)).unwrap();
        assert!(!back.msg.flush && !back.msg.atomic && back.msg.items.len() == 1);
    }

    #[test]
    fn items_of_each_kind_travel_with_their_expiry() {
        let put = |key: &'static [u8], expire_at, kind| RangeItem::Put {
            key: Bytes::from_static(key),
            value: Bytes::from_static(b"\x01\x01f\x01v"),
            expire_at,
            kind,
        };
        let items = vec![
            put(b"s", None, ValueKind::String),
            put(b"t", Some(1_767_225_600_000), ValueKind::String),
            put(b"h", None, ValueKind::Hash),
            put(b"i", Some(1_767_225_600_000), ValueKind::Hash),
            RangeItem::Delete {
                key: Bytes::from_static(b"d"),
            },
        ];
        let mut args = Vec::new();
        push_items(&mut args, &items);
        assert_eq!(args[7], Bytes::from_static(b"H-1"));
        assert_eq!(args[10], Bytes::from_static(b"H1767225600000"));
        assert_eq!(parse_items(SlotRange::ALL, &args).unwrap(), items);
        // A hash is never a delete, and the mark is followed by a time.
        for bad in [&b"H-2"[..], b"H", b"h-1", b"-3"] {
            let args = [b"k", bad, b""].map(Bytes::copy_from_slice);
            assert!(parse_items(SlotRange::ALL, &args).is_err(), "{bad:?}");
        }
    }
}
