//! MEMORY USAGE / STATS / DOCTOR / MALLOC-STATS / PURGE / HELP, with Redis 7's replies and
//! Quiver's meaning: a key costs its record on disk (header, expiry and namespace, key,
//! value, padding) and its index slot in RAM; a large hash, its buckets' too (sampled). What
//! `redis-cli --memkeys` reads.

use bytes::Bytes;
use quiver_service::allocator::allocated_bytes;
use quiver_service::errors::{self, err, unknown_subcommand, wrong_arity};
use quiver_service::frame::string2ll;
use quiver_service::reply::Reply;
use quiver_store::index::{LOAD_AFTER_GROWTH, SLOT_BYTES};
use quiver_store::large_hash::{HashValue, Meta, BUCKETS_DB};
use quiver_store::log::format::record_len_ext;
use quiver_store::Entry;

use crate::cmd::ctx::Ctx;
use crate::state::ServerState;
use crate::store_errors::store_error;

/// Nested values MEMORY USAGE samples without SAMPLES (Redis's default).
const SAMPLES_DEFAULT: u64 = 5;
/// Below this much allocated, MEMORY DOCTOR says there is too little to judge (Redis's 5 MB).
const DOCTOR_MIN_BYTES: u64 = 5 << 20;

const HELP: &[&str] = &[
    "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DOCTOR",
    "    Return memory problems reports.",
    "MALLOC-STATS",
    "    Return internal statistics report from the memory allocator.",
    "PURGE",
    "    Attempt to purge dirty pages for reclamation by the allocator.",
    "STATS",
    "    Return information about the memory usage of the server.",
    "USAGE <key> [SAMPLES <count>]",
    "    Return memory in bytes used by <key> and its value. Nested values are",
    "    sampled up to <count> times (default: 5, 0 means sample all).",
    "HELP",
    "    Prints this help.",
];

/// MEMORY `args[1]` ... (MEMORY's own arity was checked).
pub fn run(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let sub = args[1].to_ascii_lowercase();
    let state = ctx.state;
    match (&sub[..], args.len()) {
        (b"usage", n) if n >= 3 => match samples(&args[3..]) {
            Ok(samples) => match usage(state, ctx.session.db, &args[2], samples) {
                Ok(Some(bytes)) => Reply::Integer(bytes as i64),
                Ok(None) => Reply::Null,
                Err(e) => store_error(&e),
            },
            Err(reply) => reply,
        },
        (b"stats", 2) => stats(state),
        (b"doctor", 2) => Reply::Verbatim {
            format: *b"txt",
            text: Bytes::from(doctor(state)),
        },
        (b"malloc-stats", 2) => Reply::Verbatim {
            format: *b"txt",
            text: Bytes::from_static(b"Stats not supported for the current allocator"),
        },
        (b"purge", 2) => Reply::OK,
        (b"help", 2) => Reply::Array(HELP.iter().map(|l| Reply::simple(*l)).collect()),
        (b"usage" | b"stats" | b"doctor" | b"malloc-stats" | b"purge" | b"help", _) => {
            wrong_arity(&format!("memory|{}", String::from_utf8_lossy(&sub)))
        }
        _ => unknown_subcommand(&args[1], "MEMORY"),
    }
}

/// `[SAMPLES count] ...` (the last one counts): how many nested values to sample, `None` for
/// all (0).
fn samples(opts: &[Bytes]) -> Result<Option<u64>, Reply> {
    let mut samples = Some(SAMPLES_DEFAULT);
    let mut rest = opts;
    while let [word, tail @ ..] = rest {
        let [count, tail @ ..] = tail else {
            return Err(err(errors::SYNTAX));
        };
        if !word.eq_ignore_ascii_case(b"samples") {
            return Err(err(errors::SYNTAX));
        }
        samples = match string2ll(count) {
            None => return Err(err(errors::NOT_INTEGER)),
            Some(n) if n < 0 => return Err(err(errors::SYNTAX)),
            Some(0) => None,
            Some(n) => Some(n as u64),
        };
        rest = tail;
    }
    Ok(samples)
}

/// RAM a key's index slot costs, on average: a slot at the index's load after it grows.
fn index_bytes_per_key() -> u64 {
    (SLOT_BYTES as f64 / LOAD_AFTER_GROWTH).round() as u64
}

/// The bytes of one record of `key` holding `entry` in a database other than 0 or not, and
/// its index slot.
fn entry_bytes(key_len: usize, entry: &Entry, namespaced: bool) -> u64 {
    let ext = if entry.expire_at.is_some() { 8 } else { 0 } + if namespaced { 4 } else { 0 };
    (record_len_ext(ext, key_len, entry.value.len()) as u64) + index_bytes_per_key()
}

/// MEMORY USAGE of `key` in database `db`: its record and slot, and a large hash's anchor and
/// buckets (`samples` of them read, the rest counted at their average; all for `None`).
fn usage(
    state: &ServerState,
    db: u32,
    key: &[u8],
    samples: Option<u64>,
) -> quiver_store::Result<Option<u64>> {
    let Some(entry) = state.store.db(db)?.get_entry(key)? else {
        return Ok(None);
    };
    let mut bytes = entry_bytes(key.len(), &entry, db != 0);
    if let Ok(HashValue::Large(meta)) = entry.hash_value() {
        bytes += large_hash_bytes(state, &meta, key, samples)?;
    }
    Ok(Some(bytes))
}

fn large_hash_bytes(
    state: &ServerState,
    meta: &Meta,
    parent: &[u8],
    samples: Option<u64>,
) -> quiver_store::Result<u64> {
    let anchor = Entry::string(meta.anchor(parent), None);
    let mut bytes = entry_bytes(meta.anchor_key().len(), &anchor, true);
    let buckets = u64::from(meta.buckets());
    let read = samples.map_or(buckets, |s| s.min(buckets));
    let store = state.store.db(BUCKETS_DB)?;
    let mut sampled = 0;
    for n in 0..read as u32 {
        let key = meta.bucket_key(n);
        if let Some(e) = store.get_entry(&key)? {
            sampled += entry_bytes(key.len(), &e, true);
        }
    }
    bytes += match read {
        0 => 0,
        _ => sampled * buckets / read,
    };
    Ok(bytes)
}

/// MEMORY STATS: Redis's fields where Quiver has the figure, then the store's.
fn stats(state: &ServerState) -> Reply {
    let s = state.store.stats();
    let allocated = allocated_bytes();
    let buffered = state.core.stats.output_buffered_bytes();
    let per_key = s.index_bytes / s.keys.max(1);
    let field = |name: &'static str, v: u64| (Reply::text(name), Reply::Integer(v as i64));
    Reply::Map(vec![
        field("peak.allocated", allocated),
        field("total.allocated", allocated),
        field("clients.normal", buffered),
        field("keys.count", s.keys),
        field("keys.bytes-per-key", per_key),
        field("dataset.bytes", s.disk_bytes),
        field("index.bytes", s.index_bytes),
        field("index.capacity", s.index_capacity),
        field("index.spilled-keys", s.index_spilled_keys),
        field("disk.bytes", s.disk_bytes),
        field("disk.records", s.records),
        field("disk.dead-records", s.dead_records),
    ])
}

/// MEMORY DOCTOR: Redis's words for a small instance and for one without issues; otherwise
/// what in the store's memory needs attention.
fn doctor(state: &ServerState) -> String {
    if allocated_bytes() < DOCTOR_MIN_BYTES {
        return "Hi Sam, this instance is empty or is using very little memory, my issues \
                detector can't be used in these conditions. Please, leave for your mission on \
                Earth and fill it with some data. The new Sam and I will be back to our \
                programming as soon as I finished rebooting.\n"
            .into();
    }
    let s = state.store.stats();
    let mut issues = Vec::new();
    if s.index_spilled_keys > 0 {
        issues.push(format!(
            "* {} keys wait in the indexes' spill for an index to grow: writes slow down until \
             it has (more partitions grow each index in smaller steps).",
            s.index_spilled_keys
        ));
    }
    if s.garbage_ratio > 0.5 {
        issues.push(format!(
            "* {:.0}% of the log's records are dead: the disk holds twice the data and reads \
             share the page cache with garbage until compaction catches up \
             (compaction-cpu-share).",
            s.garbage_ratio * 100.0
        ));
    }
    if issues.is_empty() {
        return "Hi Sam, I can't find any memory issue in your instance. I can only account for \
                what occurs on this base.\n"
            .into();
    }
    format!(
        "Sam, I detected a few issues in this Quiver instance memory implants:\n\n{}\n",
        issues.join("\n")
    )
}
