//! Server statistics: counters and histograms shared by every connection, read by INFO and
//! the Prometheus endpoint. Everything is a relaxed atomic: figures are for humans and
//! dashboards, not for synchronisation.
//!
//! The counters every command or key moves (calls and time per command, hits and misses,
//! network bytes, vector widths, latencies) are kept per thread: each thread adds to a shard
//! of its own ([`SHARDS`] of them, each on its own cache lines), and readers sum the shards.
//! One counter written by every core would be a cache line every core fights for on each
//! command — a global critical section in all but name. The rare counters stay single.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;

use crate::table::{Flags, COMMANDS};

/// Distinct error codes INFO errorstats lists at most (Redis's limit too). Quiver's own codes
/// are a handful; the bound only matters if error texts ever start with client input.
pub const ERROR_CODES_MAX: usize = 128;
/// Bytes of an error reply searched for the space that ends its code (Redis's bound).
const ERROR_CODE_LEN_MAX: usize = 32;

/// Shards of the per-thread counters: threads beyond it share them (round-robin).
pub const SHARDS: usize = 64;

/// The shard of the calling thread, picked once per thread, round-robin.
fn shard_index() -> usize {
    use std::sync::atomic::AtomicUsize as Next;
    static NEXT: Next = Next::new(0);
    thread_local! {
        static SHARD: usize = NEXT.fetch_add(1, Relaxed) % SHARDS;
    }
    SHARD.with(|s| *s)
}

/// The counters one thread moves on every command (see the module documentation), aligned
/// so that no two shards share a cache line.
#[repr(align(128))]
struct Shard {
    /// Per command, indexed like [`COMMANDS`]: calls and microseconds.
    calls: Box<[AtomicU64]>,
    usec: Box<[AtomicU64]>,
    keyspace_hits: AtomicU64,
    keyspace_misses: AtomicU64,
    /// Calls of write commands: never reset (CONFIG RESETSTAT keeps it, as Redis keeps its
    /// count of changes since the last save).
    writes: AtomicU64,
    net_input_bytes: AtomicU64,
    net_output_bytes: AtomicU64,
    /// Reply bytes buffered by this thread's connections, added when a reply is buffered and
    /// taken away when it is written (wrapping: a connection of the shared runtime may add on
    /// one thread and take away on another; only the sum means anything).
    output_buffered_bytes: AtomicU64,
    vector_widths: Histogram,
    latency_us: Histogram,
    /// Per command, indexed like [`COMMANDS`]: each call's microseconds (LATENCY HISTOGRAM).
    command_usec: Box<[Histogram]>,
}

/// Unused counters after a shard's per-command arrays: 128 bytes, so that another shard's
/// allocation next to them never shares a cache line with a counter in use.
const SHARD_ARRAY_PAD: usize = 16;

impl Default for Shard {
    fn default() -> Self {
        let per_command = || {
            (0..COMMANDS.len() + SHARD_ARRAY_PAD)
                .map(|_| AtomicU64::new(0))
                .collect()
        };
        Shard {
            calls: per_command(),
            usec: per_command(),
            keyspace_hits: AtomicU64::new(0),
            keyspace_misses: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            net_input_bytes: AtomicU64::new(0),
            net_output_bytes: AtomicU64::new(0),
            output_buffered_bytes: AtomicU64::new(0),
            vector_widths: Histogram::default(),
            latency_us: Histogram::default(),
            command_usec: (0..COMMANDS.len()).map(|_| Histogram::default()).collect(),
        }
    }
}

/// Buckets of a [`Histogram`]: bucket `i` counts values in `(2^(i-1), 2^i]` (bucket 0: 0 and 1),
/// the last one everything larger.
pub const HISTOGRAM_BUCKETS: usize = 32;

/// A power-of-two histogram of non-negative integers.
pub struct Histogram {
    buckets: [AtomicU64; HISTOGRAM_BUCKETS],
    sum: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            sum: AtomicU64::new(0),
        }
    }
}

impl Histogram {
    pub fn record(&self, value: u64) {
        self.record_n(value, 1);
    }

    /// Records `n` samples of `value`.
    pub fn record_n(&self, value: u64, n: u64) {
        let b = bucket_of(value);
        self.buckets[b].fetch_add(n, Relaxed);
        self.sum.fetch_add(value.saturating_mul(n), Relaxed);
    }

    /// `(upper bound, count)` per bucket; the last bound is `u64::MAX`.
    pub fn buckets(&self) -> Vec<(u64, u64)> {
        self.buckets
            .iter()
            .enumerate()
            .map(|(i, c)| (upper_bound(i), c.load(Relaxed)))
            .collect()
    }

    pub fn count(&self) -> u64 {
        self.buckets.iter().map(|c| c.load(Relaxed)).sum()
    }

    pub fn sum(&self) -> u64 {
        self.sum.load(Relaxed)
    }

    fn reset(&self) {
        for b in &self.buckets {
            b.store(0, Relaxed);
        }
        self.sum.store(0, Relaxed);
    }

    /// Adds `other`'s counts into this one.
    fn add(&self, other: &Histogram) {
        for (mine, theirs) in self.buckets.iter().zip(&other.buckets) {
            mine.fetch_add(theirs.load(Relaxed), Relaxed);
        }
        self.sum.fetch_add(other.sum(), Relaxed);
    }
}

fn bucket_of(value: u64) -> usize {
    if value <= 1 {
        0
    } else {
        // ceil(log2(value))
        ((64 - (value - 1).leading_zeros()) as usize).min(HISTOGRAM_BUCKETS - 1)
    }
}

fn upper_bound(bucket: usize) -> u64 {
    if bucket == HISTOGRAM_BUCKETS - 1 {
        u64::MAX
    } else {
        1 << bucket
    }
}

/// Redis 7's error counts per command (its calls and time are per thread: `Stats::calls`).
#[derive(Default)]
pub struct CommandStat {
    /// Refused before running (wrong arity, NOAUTH, a subcommand's arity): not in `calls`.
    pub rejected_calls: AtomicU64,
    /// Ran and answered an error (in `calls` too).
    pub failed_calls: AtomicU64,
}

/// Every counter of the server.
pub struct Stats {
    pub started: Instant,
    /// Indexed like [`COMMANDS`].
    pub commands: Vec<CommandStat>,
    /// The per-thread counters (see the module documentation).
    shards: Box<[Shard]>,
    pub connections_received: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub connected_clients: AtomicUsize,
    pub protocol_errors: AtomicU64,
    pub unknown_commands: AtomicU64,
    pub transaction_retries: AtomicU64,
    /// Commands and EXECs given up after `txn::TXN_ATTEMPTS_MAX` attempts that all conflicted
    /// with concurrent writers (answered with an error; nothing applied).
    pub transactions_abandoned: AtomicU64,
    /// Replies refused because the server's buffered replies would have exceeded
    /// `client-output-buffer-total-limit` (each replaced by an error).
    pub replies_refused_by_total_limit: AtomicU64,
    /// Every error reply sent (Redis's `total_error_replies`), EXEC's inner ones included.
    pub error_replies: AtomicU64,
    /// Error replies by code, the error text's first word (INFO errorstats).
    pub error_codes: Mutex<BTreeMap<String, u64>>,
    /// Clients closed for exceeding a buffer limit or the idle timeout.
    pub clients_closed_by_limit: AtomicU64,
    /// How long serving threads went without getting back to their event loop.
    pub stalls: Arc<Stalls>,
}

/// How long serving threads (`serving`) were held from their other connections, three ways:
/// - **runs**: the time each connection's run (executing it; not the waits for its
///   fdatasyncs or replication after it) held its thread — what one connection can make the
///   others wait (a turn of a connection, bounded by `conn::TURN_BOUND`, is one run or a few);
/// - **wakes**: each thread's meter asks to be woken every millisecond and records how late
///   the wake came — what a connection made ready waits for its thread: runs of the
///   connections queued before it, or the thread kept off its core;
/// - **off its core**: at each of those wakes, how long the thread waited for a core,
///   runnable, since the one before (the kernel's count, `serving::RunDelay`) — the part of
///   the wakes' lateness that is not its own work. A sum over the interval: the longest single
///   wait is at most this.
#[derive(Default)]
pub struct Stalls {
    pub runs: Delays,
    pub wakes: Delays,
    pub offcore: Delays,
}

/// Counts of delays over 5 ms and over 25 ms, and the longest since the server started.
#[derive(Default)]
pub struct Delays {
    pub over_5ms: AtomicU64,
    pub over_25ms: AtomicU64,
    pub max_us: AtomicU64,
}

thread_local! {
    /// Runs recorded on this thread (`Stalls::run`): its wake meter ticks only while they move.
    static RUNS_HERE: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

impl Stalls {
    /// A connection's run held this thread for `took`.
    pub fn run(&self, took: std::time::Duration) {
        RUNS_HERE.with(|r| r.set(r.get() + 1));
        self.runs.record(took);
    }

    /// Runs recorded on the calling thread so far.
    pub fn runs_here() -> u64 {
        RUNS_HERE.with(|r| r.get())
    }
}

impl Delays {
    pub fn record(&self, delay: std::time::Duration) {
        let us = delay.as_micros() as u64;
        if us > 5_000 {
            self.over_5ms.fetch_add(1, Relaxed);
        }
        if us > 25_000 {
            self.over_25ms.fetch_add(1, Relaxed);
        }
        // Written only when passed: the line is read-mostly.
        if us > self.max_us.load(Relaxed) {
            self.max_us.fetch_max(us, Relaxed);
        }
    }
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            started: Instant::now(),
            commands: COMMANDS.iter().map(|_| CommandStat::default()).collect(),
            shards: (0..SHARDS).map(|_| Shard::default()).collect(),
            connections_received: AtomicU64::new(0),
            rejected_connections: AtomicU64::new(0),
            connected_clients: AtomicUsize::new(0),
            protocol_errors: AtomicU64::new(0),
            unknown_commands: AtomicU64::new(0),
            transaction_retries: AtomicU64::new(0),
            transactions_abandoned: AtomicU64::new(0),
            replies_refused_by_total_limit: AtomicU64::new(0),
            error_replies: AtomicU64::new(0),
            error_codes: Mutex::new(BTreeMap::new()),
            clients_closed_by_limit: AtomicU64::new(0),
            stalls: Arc::default(),
        }
    }
}

impl Stats {
    /// The calling thread's shard.
    fn shard(&self) -> &Shard {
        &self.shards[shard_index()]
    }

    /// The sum of one counter over the shards.
    fn sum(&self, counter: impl Fn(&Shard) -> &AtomicU64) -> u64 {
        self.shards.iter().map(|s| counter(s).load(Relaxed)).sum()
    }

    /// The sum of one histogram over the shards.
    fn sum_histogram(&self, histogram: impl Fn(&Shard) -> &Histogram) -> Histogram {
        let sum = Histogram::default();
        for s in self.shards.iter() {
            sum.add(histogram(s));
        }
        sum
    }

    /// `n` calls of command `index` that took `usec` microseconds in all.
    pub fn command(&self, index: usize, n: u64, usec: u64) {
        let s = self.shard();
        s.calls[index].fetch_add(n, Relaxed);
        s.usec[index].fetch_add(usec, Relaxed);
        s.command_usec[index].record_n(usec / n.max(1), n);
        if COMMANDS[index].flags.contains(Flags::WRITE) {
            s.writes.fetch_add(n, Relaxed);
        }
    }

    /// Command `index`'s calls by how many microseconds each took (its share of a vector).
    pub fn command_histogram(&self, index: usize) -> Histogram {
        self.sum_histogram(|s| &s.command_usec[index])
    }

    /// Calls of write commands since the start (what INFO's `rdb_changes_since_last_save`
    /// counts from).
    pub fn writes(&self) -> u64 {
        self.sum(|s| &s.writes)
    }

    /// CONFIG RESETSTAT: every counter INFO's stats and commandstats show starts again from
    /// 0, as Redis resets them; what is a state and not a count (connected clients, buffered
    /// replies, the writes since the last save) stays.
    pub fn reset(&self) {
        for s in self.shards.iter() {
            for c in s.calls.iter().chain(s.usec.iter()) {
                c.store(0, Relaxed);
            }
            for c in [
                &s.keyspace_hits,
                &s.keyspace_misses,
                &s.net_input_bytes,
                &s.net_output_bytes,
            ] {
                c.store(0, Relaxed);
            }
            s.vector_widths.reset();
            s.latency_us.reset();
            for h in s.command_usec.iter() {
                h.reset();
            }
        }
        for c in &self.commands {
            c.rejected_calls.store(0, Relaxed);
            c.failed_calls.store(0, Relaxed);
        }
        for c in [
            &self.connections_received,
            &self.rejected_connections,
            &self.protocol_errors,
            &self.unknown_commands,
            &self.transaction_retries,
            &self.transactions_abandoned,
            &self.replies_refused_by_total_limit,
            &self.error_replies,
            &self.clients_closed_by_limit,
        ] {
            c.store(0, Relaxed);
        }
        self.error_codes.lock().clear();
        for d in [&self.stalls.runs, &self.stalls.wakes, &self.stalls.offcore] {
            for c in [&d.over_5ms, &d.over_25ms, &d.max_us] {
                c.store(0, Relaxed);
            }
        }
    }

    /// Calls of command `index` so far, and their microseconds.
    pub fn calls(&self, index: usize) -> (u64, u64) {
        (self.sum(|s| &s.calls[index]), self.sum(|s| &s.usec[index]))
    }

    /// A vector of `width` keys reached the engine.
    pub fn vector_width(&self, width: u64) {
        self.shard().vector_widths.record(width);
    }

    /// Width of every vector that reached the engine (MGET keys, grouped GETs, ...).
    pub fn vector_widths(&self) -> Histogram {
        self.sum_histogram(|s| &s.vector_widths)
    }

    /// `n` commands answered `usec` microseconds after their run's execution began.
    pub fn latency(&self, usec: u64, n: u64) {
        self.shard().latency_us.record_n(usec, n);
    }

    /// Per command, microseconds from the start of its run's execution to its reply.
    pub fn latency_us(&self) -> Histogram {
        self.sum_histogram(|s| &s.latency_us)
    }

    pub fn net_input(&self, bytes: u64) {
        self.shard().net_input_bytes.fetch_add(bytes, Relaxed);
    }

    pub fn net_output(&self, bytes: u64) {
        self.shard().net_output_bytes.fetch_add(bytes, Relaxed);
    }

    /// `bytes` of replies buffered by a connection of this thread (see `output`).
    pub fn output_buffered(&self, bytes: u64) {
        self.shard().output_buffered_bytes.fetch_add(bytes, Relaxed);
    }

    /// `bytes` of replies written out (or dropped) by a connection of this thread.
    pub fn output_written(&self, bytes: u64) {
        self.shard().output_buffered_bytes.fetch_sub(bytes, Relaxed);
    }

    /// Reply bytes buffered by all connections now (INFO `client_output_buffer_total_bytes`).
    pub fn output_buffered_bytes(&self) -> u64 {
        self.shards.iter().fold(0u64, |sum, s| {
            sum.wrapping_add(s.output_buffered_bytes.load(Relaxed))
        })
    }

    pub fn net_input_bytes(&self) -> u64 {
        self.sum(|s| &s.net_input_bytes)
    }

    pub fn net_output_bytes(&self) -> u64 {
        self.sum(|s| &s.net_output_bytes)
    }

    pub fn keyspace_hits(&self) -> u64 {
        self.sum(|s| &s.keyspace_hits)
    }

    pub fn keyspace_misses(&self) -> u64 {
        self.sum(|s| &s.keyspace_misses)
    }

    /// Command `index` was refused before running (Redis's `rejected_calls`).
    pub fn rejected(&self, index: usize) {
        self.commands[index].rejected_calls.fetch_add(1, Relaxed);
    }

    /// `n` calls of command `index` ran and answered an error (Redis's `failed_calls`).
    pub fn failed(&self, index: usize, n: u64) {
        self.commands[index].failed_calls.fetch_add(n, Relaxed);
    }

    /// An error reply with text `text` (without the `-`) is sent: counted in
    /// `total_error_replies` and by its code, the text up to the first space, as Redis does.
    pub fn error_reply(&self, text: &[u8]) {
        self.error_replies.fetch_add(1, Relaxed);
        let searched = &text[..text.len().min(ERROR_CODE_LEN_MAX)];
        let code = match searched.iter().position(|&b| b == b' ') {
            Some(end) => String::from_utf8_lossy(&searched[..end]),
            // Redis counts an error without a code as ERR.
            None => "ERR".into(),
        };
        let mut codes = self.error_codes.lock();
        if let Some(count) = codes.get_mut(code.as_ref()) {
            *count += 1;
        } else if codes.len() < ERROR_CODES_MAX {
            codes.insert(code.into_owned(), 1);
        }
    }

    pub fn total_commands(&self) -> u64 {
        self.shards
            .iter()
            .flat_map(|s| s.calls.iter())
            .map(|c| c.load(Relaxed))
            .sum()
    }

    pub fn hit(&self, hit: bool) {
        let s = self.shard();
        if hit {
            s.keyspace_hits.fetch_add(1, Relaxed);
        } else {
            s.keyspace_misses.fetch_add(1, Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_powers_of_two() {
        let h = Histogram::default();
        for v in [0, 1, 2, 3, 4, 5, 32, 33, u64::MAX] {
            h.record(v);
        }
        let b = h.buckets();
        assert_eq!(b[0], (1, 2)); // 0 and 1
        assert_eq!(b[1], (2, 1)); // 2
        assert_eq!(b[2], (4, 2)); // 3, 4
        assert_eq!(b[3], (8, 1)); // 5
        assert_eq!(b[5], (32, 1));
        assert_eq!(b[6], (64, 1));
        assert_eq!(b[HISTOGRAM_BUCKETS - 1], (u64::MAX, 1));
        assert_eq!(h.count(), 9);
    }

    #[test]
    fn error_replies_are_counted_by_code() {
        let s = Stats::default();
        s.error_reply(b"ERR wrong number of arguments for 'get' command");
        s.error_reply(b"ERR value is not an integer or out of range");
        s.error_reply(b"NOAUTH Authentication required.");
        s.error_reply(b"NOCODE");
        assert_eq!(s.error_replies.load(Relaxed), 4);
        let codes = s.error_codes.lock().clone();
        assert_eq!(
            codes.into_iter().collect::<Vec<_>>(),
            [("ERR".to_string(), 3), ("NOAUTH".to_string(), 1)]
        );
        // Past the limit on distinct codes, new codes are counted in the total only.
        for i in 0..2 * ERROR_CODES_MAX {
            s.error_reply(format!("CODE{i} text").as_bytes());
        }
        assert_eq!(s.error_codes.lock().len(), ERROR_CODES_MAX);
        assert_eq!(
            s.error_replies.load(Relaxed),
            4 + 2 * ERROR_CODES_MAX as u64
        );
    }
}
