//! Commands over the whole key space of the selected database: SCAN, KEYS, RANDOMKEY, DBSIZE,
//! FLUSHDB (and FLUSHALL, of every database). They run against a transaction like every key
//! command: alone, the transaction is empty and they see the store; inside MULTI/EXEC they see
//! the store combined with the writes queued before them. On a cluster node DBSIZE counts the
//! keys of the slots it serves as Redis's tools see it (`Topology::counted_ranges`: a master's
//! headed ranges), not every copy it holds; the others see the whole store.

use std::collections::HashSet;

use bytes::Bytes;
use quiver_resp::glob_match;
use quiver_store::{Db, ValueKind};

use crate::cmd::common::{random_u64, TxnCommand};
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
                let found = merge_overlay(txn, base, *p, Some(KindFilter::Any));
                Ok(Reply::Array(found.into_iter().map(Reply::Bulk).collect()))
            }
            Keyspace::Scan(a) => {
                let (cursor, base) = if txn.is_flushed() {
                    (0, Vec::new())
                } else {
                    scan(&store, a)?
                };
                // Pending new keys are reported once, on the first page.
                let added = (a.cursor == 0).then_some(a.kind);
                let found = merge_overlay(txn, base, a.pattern, added);
                Ok(scan_reply(cursor, found))
            }
        }
    }
}

/// Store keys without those the transaction deleted or rewrote, then (if `add` says which
/// kinds) the transaction's live keys that match `pattern`.
fn merge_overlay(
    txn: &Txn<'_>,
    base: Vec<Bytes>,
    pattern: Option<&[u8]>,
    add: Option<KindFilter>,
) -> Vec<Bytes> {
    let pending: HashSet<&Bytes> = txn.overlay().map(|(k, _)| k).collect();
    let mut found: Vec<Bytes> = base.into_iter().filter(|k| !pending.contains(k)).collect();
    if let Some(kinds) = add {
        found.extend(
            txn.overlay()
                .filter(|(k, v)| {
                    v.is_some_and(|e| kinds.wants(e.kind))
                        && pattern.is_none_or(|p| glob_match(p, k))
                })
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

/// SCAN's TYPE: which kinds of key a scan returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KindFilter {
    Any,
    Only(ValueKind),
    /// A type Quiver holds no key of (`list`, `set`, ...): matches nothing.
    Nothing,
}

impl KindFilter {
    fn parse(name: &[u8]) -> KindFilter {
        if name.eq_ignore_ascii_case(b"string") {
            KindFilter::Only(ValueKind::String)
        } else if name.eq_ignore_ascii_case(b"hash") {
            KindFilter::Only(ValueKind::Hash)
        } else {
            KindFilter::Nothing
        }
    }

    fn wants(self, kind: ValueKind) -> bool {
        match self {
            KindFilter::Any => true,
            KindFilter::Only(k) => k == kind,
            KindFilter::Nothing => false,
        }
    }
}

/// A scan's cursor as Redis reads it (`parseScanCursorOrReply`: `strtoull`): decimal digits
/// after an optional sign, a negative one wrapping around (`-1` is the largest cursor); no
/// blanks, nothing after the digits, nothing above 64 bits.
pub fn parse_cursor(arg: &[u8]) -> Result<u64, Reply> {
    let invalid = || err("ERR invalid cursor");
    if arg.is_empty() {
        // `strtoull` reads nothing and stops at the end: cursor 0.
        return Ok(0);
    }
    let (negative, digits) = match arg.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        _ => (false, arg),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(invalid());
    }
    let n: u64 = std::str::from_utf8(digits)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(invalid)?;
    Ok(if negative { n.wrapping_neg() } else { n })
}

/// SCAN cursor [MATCH pattern] [COUNT count] [TYPE type] (HSCAN's options too, without TYPE).
pub struct ScanArgs<'a> {
    pub cursor: u64,
    pub pattern: Option<&'a [u8]>,
    pub count: usize,
    pub kind: KindFilter,
}

impl<'a> ScanArgs<'a> {
    fn parse(args: &'a [Bytes]) -> Result<ScanArgs<'a>, Reply> {
        ScanArgs::options(parse_cursor(&args[1])?, &args[2..], true)
    }

    /// The options after the cursor; TYPE only where `types` (SCAN, not HSCAN).
    pub fn options(cursor: u64, opts: &'a [Bytes], types: bool) -> Result<ScanArgs<'a>, Reply> {
        let mut a = ScanArgs {
            cursor,
            pattern: None,
            count: SCAN_COUNT_DEFAULT,
            kind: KindFilter::Any,
        };
        for pair in opts.chunks(2) {
            let [opt, value] = pair else {
                return Err(err(errors::SYNTAX));
            };
            if opt.eq_ignore_ascii_case(b"count") {
                match string2ll(value) {
                    None => return Err(err(errors::NOT_INTEGER)),
                    Some(n) if n < 1 => return Err(err(errors::SYNTAX)),
                    Some(n) => a.count = n as usize,
                }
            } else if opt.eq_ignore_ascii_case(b"match") {
                a.pattern = pattern(value);
            } else if types && opt.eq_ignore_ascii_case(b"type") {
                a.kind = KindFilter::parse(value);
            } else {
                return Err(err(errors::SYNTAX));
            }
        }
        Ok(a)
    }
}

fn scan(store: &Db<'_>, a: &ScanArgs<'_>) -> quiver_store::Result<(u64, Vec<Bytes>)> {
    let page = store.scan(a.cursor, a.pattern, a.count)?;
    let keys = match a.kind {
        KindFilter::Any => page.keys,
        KindFilter::Nothing => Vec::new(),
        KindFilter::Only(kind) => {
            // The kinds of the page's keys, from their record headers.
            let mut kinds = Vec::with_capacity(page.keys.len());
            for chunk in page.keys.chunks(WALK_PAGE) {
                kinds.extend(store.multi_kinds(chunk)?);
            }
            page.keys
                .into_iter()
                .zip(kinds)
                .filter(|(_, k)| *k == Some(kind))
                .map(|(key, _)| key)
                .collect()
        }
    };
    Ok((page.cursor, keys))
}

pub fn scan_reply(cursor: u64, keys: Vec<Bytes>) -> Reply {
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
