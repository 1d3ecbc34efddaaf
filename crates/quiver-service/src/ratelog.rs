//! Rate-limited log lines: a condition that can repeat thousands of times a second (every write
//! refused on a full disk, every reply refused at the output limit) is logged at most once per
//! interval, with how many times it happened since the previous line, so the log neither
//! floods nor hides how often it happened.

use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// See the module documentation. One per kind of event, usually a `static`.
pub struct LogLimiter {
    interval: Duration,
    state: Mutex<LimiterState>,
}

struct LimiterState {
    /// When the last line was allowed (`None`: never).
    last_line: Option<Instant>,
    /// Events since then, not yet reported in a line.
    unreported: u64,
}

impl LogLimiter {
    pub const fn new(interval: Duration) -> LogLimiter {
        LogLimiter {
            interval,
            state: parking_lot::const_mutex(LimiterState {
                last_line: None,
                unreported: 0,
            }),
        }
    }

    /// Records one event at `now` (the caller passes the clock, so tests need no waiting).
    /// Returns `Some(n)` when a line should be logged now, `n` being the events since the
    /// previous line, this one included; `None` while the interval since that line runs.
    pub fn event(&self, now: Instant) -> Option<u64> {
        let mut s = self.state.lock();
        s.unreported += 1;
        match s.last_line {
            Some(last) if now.saturating_duration_since(last) < self.interval => None,
            _ => {
                s.last_line = Some(now);
                Some(std::mem::take(&mut s.unreported))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_interval_with_the_count_since_the_last() {
        const INTERVAL: Duration = Duration::from_secs(1);
        let limiter = LogLimiter::new(INTERVAL);
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        // The first event is logged at once.
        assert_eq!(limiter.event(at(0)), Some(1));
        // A burst within the interval is held back...
        for ms in 1..=999 {
            assert_eq!(limiter.event(at(ms)), None, "at {ms} ms");
        }
        // ...and counted in the next line (999 held back + this one).
        assert_eq!(limiter.event(at(1000)), Some(1000));
        assert_eq!(limiter.event(at(1500)), None);
        // After a quiet spell the next event is logged at once, with what was held back.
        assert_eq!(limiter.event(at(60_000)), Some(2));
        assert_eq!(limiter.event(at(60_000)), None);
        // A clock that goes backwards (another thread's `now` taken earlier) logs nothing.
        assert_eq!(limiter.event(at(59_000)), None);
        assert_eq!(limiter.event(at(61_000)), Some(3));
    }

    #[test]
    fn a_static_limiter() {
        static LIMITER: LogLimiter = LogLimiter::new(Duration::from_secs(1));
        let now = Instant::now();
        assert_eq!(LIMITER.event(now), Some(1));
        assert_eq!(LIMITER.event(now), None);
    }
}
