//! The store's clock for key expiry: the system's wall clock (milliseconds since the Unix
//! epoch, as Redis's expiry times are), or a manual clock that tests move by hand.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// Where a store reads the time. `Clock::default()` is the system clock.
#[derive(Clone, Default)]
pub struct Clock {
    /// `None`: the system clock.
    manual: Option<Arc<AtomicU64>>,
}

impl Clock {
    pub fn system() -> Clock {
        Clock::default()
    }

    /// A clock that stands at `now_ms` until moved ([`Clock::advance`], [`Clock::set`]);
    /// clones share it.
    pub fn manual(now_ms: u64) -> Clock {
        Clock {
            manual: Some(Arc::new(AtomicU64::new(now_ms))),
        }
    }

    /// Milliseconds since the Unix epoch.
    pub fn now_ms(&self) -> u64 {
        match &self.manual {
            Some(t) => t.load(Ordering::Relaxed),
            None => system_now_ms(),
        }
    }

    /// Moves a manual clock on (no effect on the system clock).
    pub fn advance(&self, ms: u64) {
        if let Some(t) = &self.manual {
            t.fetch_add(ms, Ordering::Relaxed);
        }
    }

    /// Sets a manual clock (no effect on the system clock).
    pub fn set(&self, now_ms: u64) {
        if let Some(t) = &self.manual {
            t.store(now_ms, Ordering::Relaxed);
        }
    }
}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.manual {
            Some(t) => write!(f, "Clock::manual({})", t.load(Ordering::Relaxed)),
            None => f.write_str("Clock::system"),
        }
    }
}

/// The system clock in milliseconds since the Unix epoch (0 for a clock set before 1970).
pub fn system_now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
