//! The engine's settings that may change while it serves (a server's CONFIG SET): compaction's
//! trigger and pacing, and whether the expiry sweep runs (a server's DEBUG SET-ACTIVE-EXPIRE). Each is read where it is used, on every use (one atomic load); the rest
//! of [`crate::Options`] is fixed at opening.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

use crate::error::{Error, Result};
use crate::options::Options;

/// An `f64` read and written whole.
struct AtomicF64(AtomicU64);

impl AtomicF64 {
    fn new(v: f64) -> AtomicF64 {
        AtomicF64(AtomicU64::new(v.to_bits()))
    }

    fn get(&self) -> f64 {
        f64::from_bits(self.0.load(Relaxed))
    }

    fn set(&self, v: f64) {
        self.0.store(v.to_bits(), Relaxed);
    }
}

pub(crate) struct Tuning {
    compact_garbage_ratio: AtomicF64,
    compact_cpu_share: AtomicF64,
    /// The background thread's expiry sweep runs (reads treat expired keys as absent anyway).
    active_expire: AtomicBool,
}

impl Tuning {
    pub(crate) fn of(opts: &Options) -> Tuning {
        Tuning {
            compact_garbage_ratio: AtomicF64::new(opts.compact_garbage_ratio),
            compact_cpu_share: AtomicF64::new(opts.compact_cpu_share),
            active_expire: AtomicBool::new(true),
        }
    }

    pub(crate) fn active_expire(&self) -> bool {
        self.active_expire.load(Relaxed)
    }

    pub(crate) fn set_active_expire(&self, on: bool) {
        self.active_expire.store(on, Relaxed);
    }

    /// `Options::compact_garbage_ratio`, as set now.
    pub(crate) fn compact_garbage_ratio(&self) -> f64 {
        self.compact_garbage_ratio.get()
    }

    /// `Options::compact_cpu_share`, as set now.
    pub(crate) fn compact_cpu_share(&self) -> f64 {
        self.compact_cpu_share.get()
    }

    /// Sets compaction's trigger (0: background compaction off) and its share of a core,
    /// checked as at opening (`Options::validate`); nothing changes on an error.
    pub(crate) fn set_compaction(&self, garbage_ratio: f64, cpu_share: f64) -> Result<()> {
        if !(0.0..1.0).contains(&garbage_ratio) {
            return Err(Error::InvalidOptions(format!(
                "compact_garbage_ratio {garbage_ratio} outside [0, 1)"
            )));
        }
        if !(cpu_share > 0.0 && cpu_share <= 1.0) {
            return Err(Error::InvalidOptions(format!(
                "compact_cpu_share {cpu_share} outside (0, 1]"
            )));
        }
        self.compact_garbage_ratio.set(garbage_ratio);
        self.compact_cpu_share.set(cpu_share);
        Ok(())
    }
}
