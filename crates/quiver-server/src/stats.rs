//! Server statistics: counters and histograms shared by every connection, read by INFO and
//! the Prometheus endpoint. Everything is a relaxed atomic: figures are for humans and
//! dashboards, not for synchronisation.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::time::Instant;

use crate::cmd::COMMANDS;

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

/// Calls and time per command.
#[derive(Default)]
pub struct CommandStat {
    pub calls: AtomicU64,
    pub usec: AtomicU64,
}

/// Every counter of the server.
pub struct Stats {
    pub started: Instant,
    /// Indexed like [`COMMANDS`].
    pub commands: Vec<CommandStat>,
    /// Width of every vector that reached the engine (MGET keys, grouped GETs, ...).
    pub vector_widths: Histogram,
    /// Per command, microseconds from the start of its run's execution to its reply.
    pub latency_us: Histogram,
    pub connections_received: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub connected_clients: AtomicUsize,
    pub keyspace_hits: AtomicU64,
    pub keyspace_misses: AtomicU64,
    pub net_input_bytes: AtomicU64,
    pub net_output_bytes: AtomicU64,
    pub protocol_errors: AtomicU64,
    pub unknown_commands: AtomicU64,
    pub transaction_retries: AtomicU64,
    /// Commands and EXECs given up after `txn::TXN_ATTEMPTS_MAX` attempts that all conflicted
    /// with concurrent writers (answered with an error; nothing applied).
    pub transactions_abandoned: AtomicU64,
    /// Replies refused because the server's buffered replies would have exceeded
    /// `client-output-buffer-total-limit` (each replaced by an error).
    pub replies_refused_by_total_limit: AtomicU64,
    /// Clients closed for exceeding a buffer limit or the idle timeout.
    pub clients_closed_by_limit: AtomicU64,
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            started: Instant::now(),
            commands: COMMANDS.iter().map(|_| CommandStat::default()).collect(),
            vector_widths: Histogram::default(),
            latency_us: Histogram::default(),
            connections_received: AtomicU64::new(0),
            rejected_connections: AtomicU64::new(0),
            connected_clients: AtomicUsize::new(0),
            keyspace_hits: AtomicU64::new(0),
            keyspace_misses: AtomicU64::new(0),
            net_input_bytes: AtomicU64::new(0),
            net_output_bytes: AtomicU64::new(0),
            protocol_errors: AtomicU64::new(0),
            unknown_commands: AtomicU64::new(0),
            transaction_retries: AtomicU64::new(0),
            transactions_abandoned: AtomicU64::new(0),
            replies_refused_by_total_limit: AtomicU64::new(0),
            clients_closed_by_limit: AtomicU64::new(0),
        }
    }
}

impl Stats {
    /// `n` calls of command `index` that took `usec` microseconds in all.
    pub fn command(&self, index: usize, n: u64, usec: u64) {
        let c = &self.commands[index];
        c.calls.fetch_add(n, Relaxed);
        c.usec.fetch_add(usec, Relaxed);
    }

    pub fn total_commands(&self) -> u64 {
        self.commands.iter().map(|c| c.calls.load(Relaxed)).sum()
    }

    pub fn hit(&self, hit: bool) {
        if hit {
            self.keyspace_hits.fetch_add(1, Relaxed);
        } else {
            self.keyspace_misses.fetch_add(1, Relaxed);
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
}
