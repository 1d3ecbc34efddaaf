//! Commands over the whole key space of the selected database: SCAN, KEYS, RANDOMKEY, DBSIZE,
//! FLUSHDB (and FLUSHALL, of every database). They run against a transaction like every key
//! command: alone, the transaction is empty and they see the store; inside MULTI/EXEC they see
//! the store combined with the writes queued before them. On a cluster node DBSIZE counts the
//! keys of the slots it serves as Redis's tools see it (`Topology::counted_ranges`: a master's
//! headed ranges), not every copy it holds; the others see the whole store.

use std::collections::HashSet;

use bytes::Bytes;
use quiver_resp::glob_match;
use quiver_store::Db;

use crate::cmd::common::TxnCommand;
use crate::txn::{Txn, WALK_PAGE};
use quiver_service::errors::{self, err};
use quiver_service::frame::string2ll;
use quiver_service::reply::Reply;
use quiver_service::table::Cmd;

/// SCAN's COUNT when none is given (Redis's default).
const SCAN_COUNT_DEFAULT: usize = 10;
/// Keys RANDOMKEY picks one from (Redis's `dictGetFairRandomKey` samples 15 too).
const RANDOM_SAMPLE: usize = 15;

/// A parsed keyspace command.
pub enum Keyspace<'a> {
    Scan(ScanArgs<'a>),
    Keys(Option<&'a [u8]>),
    RandomKey,
    DbSize,
    /// FLUSHDB (`all`: false) or FLUSHALL.
    Flush {
        all: bool,
    },
}

impl<'a> Keyspace<'a> {
    pub fn parse(cmd: Cmd, args: &'a [Bytes]) -> Result<Keyspace<'a>, Reply> {
        Ok(match cmd {
            Cmd::Scan => Keyspace::Scan(ScanArgs::parse(args)?),
            Cmd::Keys => Keyspace::Keys(pattern(&args[1])),
            Cmd::RandomKey => Keyspace::RandomKey,
            Cmd::DbSize => Keyspace::DbSize,
            _ => {
                check_flush_args(args)?;
                Keyspace::Flush {
                    all: cmd == Cmd::FlushAll,
                }
            }
        })
    }
}

impl TxnCommand for Keyspace<'_> {
    fn apply(&self, txn: &mut Txn<'_>) -> quiver_store::Result<Reply> {
        let store = txn.store_db()?;
        match self {
            Keyspace::Flush { all: false } => {
                txn.flush();
                Ok(Reply::OK)
            }
            Keyspace::Flush { all: true } => {
                txn.flush_all();
                Ok(Reply::OK)
            }
            Keyspace::DbSize => {
                if let Some(ranges) = txn.counted_ranges() {
                    return Ok(Reply::Integer(crate::cmd::cluster::count_keys(
                        txn, &ranges,
                    )?));
                }
                let mut n = if txn.is_flushed() {
                    0
                } else {
                    store.len() as i64
                };
                let pending: Vec<(Bytes, bool)> = txn
                    .overlay()
                    .map(|(k, v)| (k.clone(), v.is_some()))
                    .collect();
                for (k, live) in pending {
                    match (txn.exists_in_store(&k)?, live) {
                        (false, true) => n += 1,
                        (true, false) => n -= 1,
                        _ => {}
                    }
                }
                Ok(Reply::Integer(n))
            }
            Keyspace::RandomKey => random_key(txn),
            Keyspace::Keys(p) => {
                let base = if txn.is_flushed() {
                    Vec::new()
                } else {
                    keys(&store, *p)?
                };
                let found = merge_overlay(txn, base, *p, true);
                Ok(Reply::Array(found.into_iter().map(Reply::Bulk).collect()))
            }
            Keyspace::Scan(a) => {
                let (cursor, base) = if txn.is_flushed() {
                    (0, Vec::new())
                } else {
                    scan(&store, a)?
                };
                // Pending new keys are reported once, on the first page.
                let found = merge_overlay(txn, base, a.pattern, a.cursor == 0 && a.strings);
                Ok(scan_reply(cursor, found))
            }
        }
    }
}

/// Store keys without those the transaction deleted or rewrote, then (if `add`) the
/// transaction's live keys that match `pattern`.
fn merge_overlay(txn: &Txn<'_>, base: Vec<Bytes>, pattern: Option<&[u8]>, add: bool) -> Vec<Bytes> {
    let pending: HashSet<&Bytes> = txn.overlay().map(|(k, _)| k).collect();
    let mut found: Vec<Bytes> = base.into_iter().filter(|k| !pending.contains(k)).collect();
    if add {
        found.extend(
            txn.overlay()
                .filter(|(k, v)| v.is_some() && pattern.is_none_or(|p| glob_match(p, k)))
                .map(|(k, _)| k.clone()),
        );
    }
    found
}

/// RANDOMKEY: one of up to [`RANDOM_SAMPLE`] keys that follow a random position in hash
/// order (wrapping around once), or of the keys this transaction wrote; nil when there is
/// none. As with Redis, close to uniform but not exactly: a sample after a wider stretch of
/// hash order comes more often.
fn random_key(txn: &Txn<'_>) -> quiver_store::Result<Reply> {
    let r = random_u64();
    let mut found: Vec<Bytes> = txn
        .overlay()
        .filter(|(_, v)| v.is_some())
        .map(|(k, _)| k.clone())
        .collect();
    if !txn.is_flushed() {
        let store = txn.store_db()?;
        // The overlay's keys are among `found` or deleted: not taken from the store.
        let pending: HashSet<&Bytes> = txn.overlay().map(|(k, _)| k).collect();
        let mut sample: Vec<Bytes> = Vec::new();
        let start = txn.store().random_cursor(r);
        let mut cursor = start;
        let mut wrapped = false;
        loop {
            let page = store.scan(cursor, None, RANDOM_SAMPLE - sample.len())?;
            for k in page.keys {
                if !pending.contains(&k) && !sample.contains(&k) {
                    sample.push(k);
                }
            }
            let walked = if page.cursor == 0 {
                wrapped || start == 0
            } else {
                wrapped && page.cursor >= start
            };
            if sample.len() >= RANDOM_SAMPLE || walked {
                break;
            }
            wrapped |= page.cursor == 0;
            cursor = page.cursor;
        }
        found.extend(sample);
    }
    if found.is_empty() {
        return Ok(Reply::Null);
    }
    let pick = (random_u64() % found.len() as u64) as usize;
    Ok(Reply::Bulk(found.swap_remove(pick)))
}

/// A random number: a fresh SipHash key each call (std's `RandomState`).
fn random_u64() -> u64 {
    use std::hash::BuildHasher;
    std::collections::hash_map::RandomState::new().hash_one(0u8)
}

/// FLUSHDB / FLUSHALL take an optional ASYNC or SYNC (both mean the same here).
fn check_flush_args(args: &[Bytes]) -> Result<(), Reply> {
    match args {
        [_] => Ok(()),
        [_, mode] if mode.eq_ignore_ascii_case(b"async") || mode.eq_ignore_ascii_case(b"sync") => {
            Ok(())
        }
        _ => Err(err(errors::SYNTAX)),
    }
}

/// `*` matches everything: no per-key test, as in Redis.
fn pattern(p: &[u8]) -> Option<&[u8]> {
    (p != b"*").then_some(p)
}

/// SCAN cursor [MATCH pattern] [COUNT count] [TYPE type].
pub struct ScanArgs<'a> {
    cursor: u64,
    pattern: Option<&'a [u8]>,
    count: usize,
    /// TYPE is absent or `string`; any other type matches nothing (all values are strings).
    strings: bool,
}

impl<'a> ScanArgs<'a> {
    fn parse(args: &'a [Bytes]) -> Result<ScanArgs<'a>, Reply> {
        // Redis's parseScanCursorOrReply: an unsigned decimal.
        let cursor = std::str::from_utf8(&args[1])
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| err("ERR invalid cursor"))?;
        let mut a = ScanArgs {
            cursor,
            pattern: None,
            count: SCAN_COUNT_DEFAULT,
            strings: true,
        };
        let mut j = 2;
        while j < args.len() {
            let Some(value) = args.get(j + 1) else {
                return Err(err(errors::SYNTAX));
            };
            let opt = &args[j];
            if opt.eq_ignore_ascii_case(b"count") {
                match string2ll(value) {
                    None => return Err(err(errors::NOT_INTEGER)),
                    Some(n) if n < 1 => return Err(err(errors::SYNTAX)),
                    Some(n) => a.count = n as usize,
                }
            } else if opt.eq_ignore_ascii_case(b"match") {
                a.pattern = pattern(value);
            } else if opt.eq_ignore_ascii_case(b"type") {
                a.strings = value.eq_ignore_ascii_case(b"string");
            } else {
                return Err(err(errors::SYNTAX));
            }
            j += 2;
        }
        Ok(a)
    }
}

fn scan(store: &Db<'_>, a: &ScanArgs<'_>) -> quiver_store::Result<(u64, Vec<Bytes>)> {
    let page = store.scan(a.cursor, a.pattern, a.count)?;
    // A scan for another type walks the key space and finds nothing.
    let keys = if a.strings { page.keys } else { Vec::new() };
    Ok((page.cursor, keys))
}

fn scan_reply(cursor: u64, keys: Vec<Bytes>) -> Reply {
    Reply::Array(vec![
        Reply::Bulk(Bytes::from(cursor.to_string())),
        Reply::Array(keys.into_iter().map(Reply::Bulk).collect()),
    ])
}

/// Every key matching `pattern`, once, in hash order.
fn keys(store: &Db<'_>, pattern: Option<&[u8]>) -> quiver_store::Result<Vec<Bytes>> {
    let mut seen = HashSet::new();
    let mut found = Vec::new();
    let mut cursor = 0;
    loop {
        let page = store.scan(cursor, pattern, WALK_PAGE)?;
        // A key can come twice if an index was resized between pages.
        for k in page.keys {
            if seen.insert(k.clone()) {
                found.push(k);
            }
        }
        if page.cursor == 0 {
            return Ok(found);
        }
        cursor = page.cursor;
    }
}
