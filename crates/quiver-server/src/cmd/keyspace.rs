//! Commands over the whole key space: SCAN, KEYS, DBSIZE, FLUSHDB, FLUSHALL — on the store,
//! or inside MULTI/EXEC on the store combined with the transaction's pending writes.

use std::collections::HashSet;

use bytes::Bytes;
use quiver_store::scan::glob_match;
use quiver_store::Store;

use crate::cmd::Cmd;
use crate::errors::{self, err, store_error};
use crate::exec::Ctx;
use crate::frame::string2ll;
use crate::reply::Reply;
use crate::txn::Txn;
use crate::watch::Watches;

/// Keys examined per engine call while walking the whole key space (KEYS, FLUSHDB).
const WALK_PAGE: usize = 4096;
/// SCAN's COUNT when none is given (Redis's default).
const SCAN_COUNT_DEFAULT: usize = 10;

pub fn run(ctx: &mut Ctx<'_>, cmd: Cmd, args: &[Bytes]) -> Reply {
    let store = &ctx.state.store;
    let result = match cmd {
        Cmd::Scan => match ScanArgs::parse(args) {
            Ok(a) => scan(store, &a).map(|(cursor, keys)| scan_reply(cursor, keys)),
            Err(e) => return e,
        },
        Cmd::Keys => keys(store, pattern(&args[1]))
            .map(|k| Reply::Array(k.into_iter().map(Reply::Bulk).collect())),
        Cmd::DbSize => Ok(Reply::Integer(store.len() as i64)),
        Cmd::FlushDb | Cmd::FlushAll => {
            if let Some(reply) = check_flush_args(args) {
                return reply;
            }
            flush_store(store, &ctx.state.watches).map(|()| Reply::OK)
        }
        other => unreachable!("{other:?} is not a keyspace command"),
    };
    result.unwrap_or_else(|e| store_error(&e))
}

/// The same commands inside EXEC: they see the writes queued before them.
pub fn run_in_txn(txn: &mut Txn<'_>, cmd: Cmd, args: &[Bytes]) -> quiver_store::Result<Reply> {
    let store = txn.store();
    match cmd {
        Cmd::FlushDb | Cmd::FlushAll => Ok(check_flush_args(args).unwrap_or_else(|| {
            txn.flush();
            Reply::OK
        })),
        Cmd::DbSize => {
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
        Cmd::Keys => {
            let p = pattern(&args[1]);
            let base = if txn.is_flushed() {
                Vec::new()
            } else {
                keys(store, p)?
            };
            let found = merge_overlay(txn, base, p, true);
            Ok(Reply::Array(found.into_iter().map(Reply::Bulk).collect()))
        }
        Cmd::Scan => {
            let a = match ScanArgs::parse(args) {
                Ok(a) => a,
                Err(e) => return Ok(e),
            };
            let (cursor, base) = if txn.is_flushed() {
                (0, Vec::new())
            } else {
                scan(store, &a)?
            };
            // Pending new keys are reported once, on the first page.
            let found = merge_overlay(txn, base, a.pattern, a.cursor == 0 && a.strings);
            Ok(scan_reply(cursor, found))
        }
        other => unreachable!("{other:?} is not a keyspace command"),
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

/// FLUSHDB / FLUSHALL take an optional ASYNC or SYNC (both mean the same here).
pub fn check_flush_args(args: &[Bytes]) -> Option<Reply> {
    match args {
        [_] => None,
        [_, mode] if mode.eq_ignore_ascii_case(b"async") || mode.eq_ignore_ascii_case(b"sync") => {
            None
        }
        _ => Some(err(errors::SYNTAX)),
    }
}

/// Deletes every key, walking the key space in hash order, and marks the watchers of the
/// keys deleted. Writes that run concurrently with the walk may survive it (Redis's FLUSHALL
/// is atomic; this one is not).
pub fn flush_store(store: &Store, watches: &Watches) -> quiver_store::Result<()> {
    let mut cursor = 0;
    loop {
        let page = store.scan(cursor, None, WALK_PAGE)?;
        if !page.keys.is_empty() {
            store.multi_delete(&page.keys)?;
            watches.touch(&page.keys);
        }
        if page.cursor == 0 {
            return Ok(());
        }
        cursor = page.cursor;
    }
}

/// `*` matches everything: no per-key test, as in Redis.
fn pattern(p: &[u8]) -> Option<&[u8]> {
    (p != b"*").then_some(p)
}

/// SCAN cursor [MATCH pattern] [COUNT count] [TYPE type].
struct ScanArgs<'a> {
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

fn scan(store: &Store, a: &ScanArgs<'_>) -> quiver_store::Result<(u64, Vec<Bytes>)> {
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
fn keys(store: &Store, pattern: Option<&[u8]>) -> quiver_store::Result<Vec<Bytes>> {
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
