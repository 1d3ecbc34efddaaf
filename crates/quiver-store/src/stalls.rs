//! How long maintenance keeps writers waiting: every hold of a partition's lock by a
//! maintenance task, timed (INFO `maintenance_stall_max_us`, `_by`, `_total_us`,
//! `maintenance_stalls`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// How long maintenance (compaction, checkpoints, index resizes, the expiry sweep) kept a
/// partition's writers waiting: every hold of the partition's lock that excludes them, timed
/// from when it was taken to when it was let go. Writers of that partition wait that long at
/// most (INFO `maintenance_stall_max_us`, and which task held it): the measure of pacing,
/// kept since the store opened.
#[derive(Default)]
pub(crate) struct Stalls {
    max_us: AtomicU64,
    total_us: AtomicU64,
    holds: AtomicU64,
    /// The task of the longest hold.
    max_by: parking_lot::Mutex<&'static str>,
}

impl Stalls {
    /// Starts timing a hold by task `by` (a name: "compaction", "checkpoint"...); taken right
    /// after the lock, dropped before it (declare it after the guard, so it drops first).
    pub fn hold(&self, by: &'static str) -> StallTimer<'_> {
        StallTimer {
            stalls: self,
            by,
            since: Instant::now(),
        }
    }

    /// (longest hold and its task, all holds' total, holds), in microseconds.
    pub fn figures(&self) -> (u64, &'static str, u64, u64) {
        (
            self.max_us.load(Ordering::Relaxed),
            *self.max_by.lock(),
            self.total_us.load(Ordering::Relaxed),
            self.holds.load(Ordering::Relaxed),
        )
    }
}

/// One timed hold of a partition's lock (`Stalls::hold`).
pub(crate) struct StallTimer<'a> {
    stalls: &'a Stalls,
    by: &'static str,
    since: Instant,
}

impl Drop for StallTimer<'_> {
    fn drop(&mut self) {
        let us = self.since.elapsed().as_micros() as u64;
        let s = self.stalls;
        if s.max_us.fetch_max(us, Ordering::Relaxed) < us {
            *s.max_by.lock() = self.by;
        }
        s.total_us.fetch_add(us, Ordering::Relaxed);
        s.holds.fetch_add(1, Ordering::Relaxed);
    }
}
