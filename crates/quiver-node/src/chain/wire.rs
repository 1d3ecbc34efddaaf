//! How keys' states travel between nodes, for a range's move (`RANGEIMPORT ITEMS`) and a
//! chain's messages (`CHAIN APPLY`): `key expire value` triples, expire `-1` for none, `-2`
//! for a delete (the value empty), else the absolute expiry time in ms — so a key expires at
//! the same instant on every node, whenever the message arrives. A hash's expire has an `H`
//! before it (`H-1`, `H1767225600000`) and its value is the packed fields (`fields::Fields`)
//! or a large hash's metadata. A key of another database than 0 — a large hash's bucket or
//! anchor (`quiver_store::large_hash`) — has the database and a colon first (`1023:H-1`,
//! `1022:-2`).
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
use quiver_store::migrate::RANGE_DATABASES;
use quiver_store::slot::{key_slot, SlotRange};
use quiver_store::{Entry, RangeItem, ValueKind};

use crate::chain::Msg;
use quiver_service::errors::err;
use quiver_service::frame::string2ll;
use quiver_service::reply::Reply;

/// What comes before a hash's expire.
const HASH_MARK: &str = "H";

/// Appends `items` as triples to `args`.
pub fn push_items(args: &mut Vec<Bytes>, items: &[RangeItem]) {
    for item in items {
        let db = match item.db {
            0 => String::new(),
            db => format!("{db}:"),
        };
        let (state, value) = match &item.entry {
            Some(e) => {
                let kind = match e.kind {
                    ValueKind::String => "",
                    ValueKind::Hash => HASH_MARK,
                };
                let expire = e.expire_at.map_or("-1".to_string(), |t| t.to_string());
                (format!("{db}{kind}{expire}"), e.value.clone())
            }
            None => (format!("{db}-2"), Bytes::new()),
        };
        args.push(item.key.clone());
        args.push(Bytes::from(state));
        args.push(value);
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
            let (db, state) = parse_db(&c[1])?;
            let (kind, expire) = match state.strip_prefix(HASH_MARK.as_bytes()) {
                Some(expire) => (ValueKind::Hash, expire),
                None => (ValueKind::String, state),
            };
            let expire_at = match string2ll(expire) {
                Some(-2) if kind == ValueKind::String => {
                    return Ok(RangeItem::in_db(db, key, None))
                }
                Some(-1) => None,
                Some(t) if t >= 0 => Some(t as u64),
                _ => return Err(err("ERR invalid expire time in a key's state")),
            };
            let entry = Entry {
                value: c[2].clone(),
                expire_at,
                kind,
            };
            Ok(RangeItem::in_db(db, key, Some(entry)))
        })
        .collect()
}

/// The database before a key's state (0 when none is written), and the rest of it; only the
/// databases a range holds keys of (`RANGE_DATABASES`) are accepted.
fn parse_db(state: &[u8]) -> Result<(u32, &[u8]), Reply> {
    let Some(colon) = state.iter().position(|&b| b == b':') else {
        return Ok((0, state));
    };
    match string2ll(&state[..colon]).and_then(|db| u32::try_from(db).ok()) {
        Some(db) if db != 0 && RANGE_DATABASES.contains(&db) => Ok((db, &state[colon + 1..])),
        _ => Err(err("ERR invalid database in a key's state")),
    }
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
    use quiver_store::large_hash::{ANCHORS_DB, BUCKETS_DB};

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
            vec![RangeItem::of(Bytes::from_static(b"k"), None)],
            false,
        );
        let back = parse_apply(&encoded_args(&write)).unwrap();
        assert!(!back.msg.flush && !back.msg.atomic && back.msg.items.len() == 1);
    }

    #[test]
    fn items_of_each_kind_travel_with_their_expiry_and_database() {
        let put = |db, key: &'static [u8], expire_at, kind| {
            let entry = Entry {
                value: Bytes::from_static(b"\x01\x01f\x01v"),
                expire_at,
                kind,
            };
            RangeItem::in_db(db, Bytes::from_static(key), Some(entry))
        };
        let items = vec![
            put(0, b"s", None, ValueKind::String),
            put(0, b"t", Some(1_767_225_600_000), ValueKind::String),
            put(0, b"h", None, ValueKind::Hash),
            put(0, b"i", Some(1_767_225_600_000), ValueKind::Hash),
            RangeItem::of(Bytes::from_static(b"d"), None),
            put(BUCKETS_DB, b"b", Some(1_767_225_600_000), ValueKind::Hash),
            put(ANCHORS_DB, b"a", None, ValueKind::String),
            RangeItem::in_db(BUCKETS_DB, Bytes::from_static(b"c"), None),
        ];
        let mut args = Vec::new();
        push_items(&mut args, &items);
        assert_eq!(args[7], Bytes::from_static(b"H-1"));
        assert_eq!(args[10], Bytes::from_static(b"H1767225600000"));
        assert_eq!(args[16], Bytes::from_static(b"1023:H1767225600000"));
        assert_eq!(args[19], Bytes::from_static(b"1022:-1"));
        assert_eq!(args[22], Bytes::from_static(b"1023:-2"));
        assert_eq!(parse_items(SlotRange::ALL, &args).unwrap(), items);
        // A hash is never a delete, the mark is followed by a time, and a database is one a
        // range holds keys of, written only when not 0.
        for bad in [
            &b"H-2"[..],
            b"H",
            b"h-1",
            b"-3",
            b"7:-1",
            b"0:-1",
            b":-1",
            b"1023:",
            b"x:-1",
            b"1023:1023:-1",
        ] {
            let args = [b"k", bad, b""].map(Bytes::copy_from_slice);
            assert!(parse_items(SlotRange::ALL, &args).is_err(), "{bad:?}");
        }
    }
}
