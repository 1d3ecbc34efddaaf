//! What one client thread does with its own client (a `ClusterClient`, or a connection to a
//! router): its share of the load, and the closed loop of multigets (one outstanding per
//! thread: a multiget is already one request to every node it touches, written before any
//! reply is read, by the cluster client or by the router).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use quiver_client::ClusterStats;

use crate::cluster::client::BenchClient;
use crate::cluster::record::sub_stats;
use crate::cluster::spec::{ClusterConfig, Op, LOAD_BATCH_KEYS};
use crate::error::{Error, Result};
use crate::keys::{key_for, value_matches, write_key, write_value};
use crate::rng::WyRand;

/// The load's shared state: the next batch's first key, and keys written so far.
#[derive(Debug, Default)]
pub struct LoadCursor {
    pub next: AtomicU64,
    pub done: AtomicU64,
    /// Set by a thread that failed: the others stop at their next batch.
    pub failed: AtomicBool,
}

/// Writes batches of [`LOAD_BATCH_KEYS`] pairs taken from `cursor` until `0..cfg.keys` is
/// exhausted (threads take batches in turn, so a slow node slows every thread alike).
pub fn load(
    client: &mut BenchClient,
    cfg: &ClusterConfig,
    cursor: &LoadCursor,
    thread: usize,
) -> Result<()> {
    let mut pairs: Vec<(Vec<u8>, Vec<u8>)> = Vec::with_capacity(LOAD_BATCH_KEYS);
    loop {
        if cursor.failed.load(Ordering::Relaxed) {
            return Ok(());
        }
        let first = cursor
            .next
            .fetch_add(LOAD_BATCH_KEYS as u64, Ordering::Relaxed);
        if first >= cfg.keys {
            return Ok(());
        }
        let end = (first + LOAD_BATCH_KEYS as u64).min(cfg.keys);
        pairs.resize_with((end - first) as usize, || {
            (vec![0; cfg.key_size], vec![0; cfg.value_size])
        });
        for (i, (k, v)) in (first..end).zip(pairs.iter_mut()) {
            write_key(i, k);
            write_value(i, v);
        }
        if let Err(source) = client.multi_set(&pairs) {
            cursor.failed.store(true, Ordering::Relaxed);
            return Err(Error::Cluster {
                what: format!("thread {thread}: loading keys {first}..{end} (MSET)"),
                source,
            });
        }
        cursor.done.fetch_add(end - first, Ordering::Relaxed);
    }
}

/// When a thread measures: multigets started in `[start, end)` count.
#[derive(Clone, Copy, Debug)]
pub struct Window {
    pub start: Instant,
    pub end: Instant,
}

/// What one thread counted.
#[derive(Clone, Copy, Debug, Default)]
pub struct ThreadTally {
    /// Multigets started in the window.
    pub multigets: u64,
    /// The client's stats' change over the window.
    pub window: ClusterStats,
    /// The client's stats at the end (warm-up included).
    pub total: ClusterStats,
    /// When the last measured multiget's reply came (`None`: none measured).
    pub last_done: Option<Instant>,
}

/// Multigets (or with `--op mset`, multisets) of `cfg.width` uniform random keys, one after
/// another, until `window.end` (or until `stop`, set by a thread that failed). Every value
/// read is checked to be its key's, every value written is its key's; a missing or wrong
/// value, or any client error, ends the thread with an error (and sets `stop`).
pub fn measure(
    client: &mut BenchClient,
    cfg: &ClusterConfig,
    seed: u64,
    window: Window,
    stop: &AtomicBool,
    thread: usize,
) -> Result<ThreadTally> {
    let result = run_loop(client, cfg, seed, window, stop, thread);
    if result.is_err() {
        stop.store(true, Ordering::Relaxed);
    }
    result
}

fn run_loop(
    client: &mut BenchClient,
    cfg: &ClusterConfig,
    seed: u64,
    window: Window,
    stop: &AtomicBool,
    thread: usize,
) -> Result<ThreadTally> {
    let mut rng = WyRand::new(seed);
    let mut indexes = vec![0u64; cfg.width];
    let mut keys: Vec<Vec<u8>> = vec![vec![0; cfg.key_size]; cfg.width];
    let mut pairs: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let mut tally = ThreadTally::default();
    let mut before: Option<ClusterStats> = None;
    loop {
        let now = Instant::now();
        if now >= window.end || stop.load(Ordering::Relaxed) {
            break;
        }
        if before.is_none() && now >= window.start {
            before = Some(client.stats());
        }
        for (i, k) in indexes.iter_mut().zip(keys.iter_mut()) {
            *i = rng.below(cfg.keys);
            write_key(*i, k);
        }
        if cfg.op == Op::MultiSet {
            pairs.resize_with(cfg.width, || {
                (vec![0; cfg.key_size], vec![0; cfg.value_size])
            });
            for (&i, (k, v)) in indexes.iter().zip(pairs.iter_mut()) {
                write_key(i, k);
                write_value(i, v);
            }
            client.multi_set(&pairs).map_err(|source| Error::Cluster {
                what: format!("thread {thread}: MSET of {} keys", cfg.width),
                source,
            })?;
            if before.is_some() {
                tally.multigets += 1;
                tally.last_done = Some(Instant::now());
            }
            continue;
        }
        let values = client.multi_get(&keys).map_err(|source| Error::Cluster {
            what: format!("thread {thread}: MGET of {} keys", cfg.width),
            source,
        })?;
        for (&i, v) in indexes.iter().zip(&values) {
            let ok = v
                .as_deref()
                .is_some_and(|v| value_matches(i, v, cfg.value_size));
            if !ok {
                return Err(bad_read(cfg, i, v.as_deref()));
            }
        }
        if before.is_some() {
            tally.multigets += 1;
            tally.last_done = Some(Instant::now());
        }
    }
    tally.total = client.stats();
    tally.window = sub_stats(tally.total, before.unwrap_or(tally.total));
    Ok(tally)
}

fn bad_read(cfg: &ClusterConfig, i: u64, got: Option<&[u8]>) -> Error {
    let key = String::from_utf8_lossy(&key_for(i, cfg.key_size)).into_owned();
    Error::BadRead(match got {
        None => format!(
            "key {key} (index {i}) has no value: load the data set first (--load), with the \
             same --keys and --key-size"
        ),
        Some(v) => format!(
            "key {key} (index {i}) read {} bytes that are not its value ({:?}...): a \
             different --value-size, or the cluster returned another key's value",
            v.len(),
            String::from_utf8_lossy(&v[..v.len().min(24)])
        ),
    })
}
