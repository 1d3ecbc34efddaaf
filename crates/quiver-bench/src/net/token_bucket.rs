//! The open loop's schedule: a token bucket that gives every request an *intended* send time.
//!
//! Token `k` is due at `start + k / rate`, whatever happens: a client that falls behind (the
//! server stalled, the socket was full, the client was descheduled) later takes the tokens it
//! missed with their original due times, so the time it spent behind is counted in the
//! latency of those requests instead of being forgotten (no coordinated omission). Nothing is
//! ever dropped. `burst` bounds how many tokens one [`TokenBucket::take`] hands out, so
//! catching up after a stall is a series of bounded batches rather than one unbounded write.
//!
//! The type is pure: time is a number of nanoseconds passed in by the caller, so tests drive
//! it in simulated time and the driver drives it with [`Clock`].

use crate::error::{Error, Result};

/// Highest rate one bucket accepts (requests per second).
pub const RATE_MAX: f64 = 1e9;
/// Lowest rate: the rate is kept in thousandths of a request per second.
pub const RATE_MIN: f64 = 0.001;
/// The rate is kept as an integer number of millirequests per second, and due times are
/// computed from it exactly (`k * 10^12 / rate_milli` ns): a period rounded to any unit would
/// drift by its rounding error times the token count (at 3 ops/s, 1/3 ns per token).
const MILLI: f64 = 1000.0;
/// Nanoseconds per second times [`MILLI`].
const NS_MILLI_PER_S: u128 = 1_000_000_000_000;

/// A source of monotonic nanoseconds. The open loop's driver uses [`MonotonicClock`];
/// anything that wants simulated time implements this over a counter.
pub trait Clock {
    fn now_ns(&self) -> u64;
}

/// `CLOCK_MONOTONIC` in nanoseconds: the clock `timerfd` sleeps on, so a deadline computed
/// from it can be armed as is.
#[derive(Clone, Copy, Debug, Default)]
pub struct MonotonicClock;

impl Clock for MonotonicClock {
    #[inline]
    fn now_ns(&self) -> u64 {
        monotonic_ns()
    }
}

/// `CLOCK_MONOTONIC` now, in nanoseconds (the vDSO: no system call).
#[inline]
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A run of consecutive tokens: `first..first + count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tokens {
    pub first: u64,
    pub count: u64,
}

impl Tokens {
    pub fn indexes(self) -> std::ops::Range<u64> {
        self.first..self.first + self.count
    }
}

/// The schedule; see the module documentation.
#[derive(Clone, Debug)]
pub struct TokenBucket {
    start_ns: u64,
    rate_milli: u64,
    /// Tokens handed out so far: the next token is this one.
    taken: u64,
    burst: u64,
}

impl TokenBucket {
    /// `rate` tokens per second, token 0 due at `start_ns`, at most `burst` per `take`.
    pub fn new(rate: f64, start_ns: u64, burst: u64) -> Result<TokenBucket> {
        if !(RATE_MIN..=RATE_MAX).contains(&rate) {
            return Err(Error::Invalid(format!(
                "rate {rate} outside [{RATE_MIN}, {RATE_MAX}] requests/s"
            )));
        }
        if burst == 0 {
            return Err(Error::Invalid("a token bucket's burst must be >= 1".into()));
        }
        Ok(TokenBucket {
            start_ns,
            rate_milli: (rate * MILLI).round() as u64,
            taken: 0,
            burst,
        })
    }

    /// When token `k` is due (its request's intended send time). Exact for any `k`: computed
    /// from the start, never accumulated, so the schedule does not drift.
    #[inline]
    pub fn due_ns(&self, k: u64) -> u64 {
        self.start_ns + (k as u128 * NS_MILLI_PER_S / self.rate_milli as u128) as u64
    }

    /// When the next token is due.
    #[inline]
    pub fn next_due_ns(&self) -> u64 {
        self.due_ns(self.taken)
    }

    /// Tokens handed out so far.
    pub fn taken(&self) -> u64 {
        self.taken
    }

    /// Tokens due at `now_ns` (inclusive) and not yet taken: how far behind the taker is.
    pub fn due_count(&self, now_ns: u64) -> u64 {
        if now_ns < self.start_ns {
            return 0;
        }
        // Token k is due at or before now iff floor(k * 10^12 / m) <= now - start, i.e.
        // k * 10^12 < (now - start + 1) * m: the first ceil((now - start + 1) * m / 10^12).
        let span = (now_ns - self.start_ns + 1) as u128 * self.rate_milli as u128;
        let due_total = span.div_ceil(NS_MILLI_PER_S).min(u64::MAX as u128) as u64;
        due_total.saturating_sub(self.taken)
    }

    /// Takes the tokens due at `now_ns`, at most `burst` and at most `limit` of them (the
    /// caller's room for outstanding requests). Their due times are `due_ns(k)` for `k` in
    /// the returned run; none is skipped, however late the caller is.
    pub fn take(&mut self, now_ns: u64, limit: u64) -> Tokens {
        let count = self.due_count(now_ns).min(self.burst).min(limit);
        let first = self.taken;
        self.taken += count;
        Tokens { first, count }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// Simulated time: advanced by the test, read by the code under test.
    struct SimClock(Cell<u64>);

    impl Clock for SimClock {
        fn now_ns(&self) -> u64 {
            self.0.get()
        }
    }

    impl SimClock {
        fn advance(&self, ns: u64) {
            self.0.set(self.0.get() + ns);
        }
    }

    const S: u64 = 1_000_000_000;

    #[test]
    fn hands_out_rate_tokens_per_second_on_schedule() {
        let clock = SimClock(Cell::new(5 * S));
        let mut b = TokenBucket::new(1000.0, clock.now_ns(), 1).unwrap();
        let mut got = Vec::new();
        // Poll every 100 µs for one simulated second (exclusive of its end).
        while clock.now_ns() < 6 * S {
            for k in b.take(clock.now_ns(), u64::MAX).indexes() {
                got.push((k, b.due_ns(k), clock.now_ns()));
            }
            clock.advance(100_000);
        }
        assert_eq!(got.len(), 1000);
        for (j, &(k, due, taken_at)) in got.iter().enumerate() {
            assert_eq!(k, j as u64);
            assert_eq!(due, 5 * S + k * 1_000_000);
            // Never early, and late by less than one polling step.
            assert!(taken_at >= due && taken_at - due < 100_000);
        }
    }

    #[test]
    fn nothing_before_the_start_and_token_zero_at_it() {
        let mut b = TokenBucket::new(10.0, 1000, 8).unwrap();
        assert_eq!(b.due_count(0), 0);
        assert_eq!(b.take(999, 100).count, 0);
        assert_eq!(b.take(1000, 100), Tokens { first: 0, count: 1 });
        assert_eq!(b.next_due_ns(), 1000 + S / 10);
        assert_eq!(b.take(1000 + S / 10 - 1, 100).count, 0);
        assert_eq!(b.take(1000 + S / 10, 100), Tokens { first: 1, count: 1 });
    }

    #[test]
    fn burst_bounds_each_take_and_catch_up_keeps_the_schedule() {
        let clock = SimClock(Cell::new(0));
        let mut b = TokenBucket::new(1_000_000.0, 0, 16).unwrap(); // one token per µs
        assert_eq!(b.take(0, u64::MAX).count, 1);
        // The taker stalls for 1 ms: 1000 tokens fall due meanwhile.
        clock.advance(1_000_000);
        assert_eq!(b.due_count(clock.now_ns()), 1000);
        let mut caught_up = Vec::new();
        loop {
            let t = b.take(clock.now_ns(), u64::MAX);
            if t.count == 0 {
                break;
            }
            assert!(t.count <= 16);
            caught_up.extend(t.indexes().map(|k| b.due_ns(k)));
        }
        // Every missed token comes out, each with its original due time, none dropped.
        assert_eq!(caught_up.len(), 1000);
        for (j, due) in caught_up.iter().enumerate() {
            assert_eq!(*due, (j as u64 + 1) * 1000);
        }
        // Then the schedule continues where it was, not from the end of the stall.
        assert_eq!(b.next_due_ns(), 1_001_000);
        clock.advance(1000);
        assert_eq!(
            b.take(clock.now_ns(), u64::MAX),
            Tokens {
                first: 1001,
                count: 1
            }
        );
    }

    #[test]
    fn limit_holds_tokens_back_without_losing_them() {
        let mut b = TokenBucket::new(1000.0, 0, 100).unwrap();
        let now = 50 * 1_000_000; // tokens 0..=50 due
        assert_eq!(
            b.take(now, 10),
            Tokens {
                first: 0,
                count: 10
            }
        );
        assert_eq!(b.take(now, 0).count, 0);
        assert_eq!(b.due_count(now), 41);
        assert_eq!(
            b.take(now, 1000),
            Tokens {
                first: 10,
                count: 41
            }
        );
    }

    #[test]
    fn fractional_rates_do_not_drift() {
        let b = TokenBucket::new(3.0, 0, 1).unwrap();
        // 1e9 tokens at 3/s: due at exactly k / 3 s, to the nanosecond.
        let k = 1_000_000_000u64;
        assert_eq!(b.due_ns(k), k * S / 3);
        assert_eq!(b.due_ns(3), S);
        let b = TokenBucket::new(7_777.7, 0, 1).unwrap();
        let k = 77_777_000u64; // 10^4 simulated seconds
        assert_eq!(b.due_ns(k), 10_000 * S);
        // due_count agrees with due_ns at every boundary.
        for k in [0u64, 1, 2, 999, 123_456] {
            let due = b.due_ns(k);
            assert_eq!(b.due_count(due), k + 1, "token {k}");
            if due > 0 {
                assert_eq!(b.due_count(due - 1), k, "token {k}");
            }
        }
    }

    #[test]
    fn bad_parameters() {
        for rate in [0.0, 0.0001, -1.0, f64::NAN, f64::INFINITY, 2e9] {
            assert!(TokenBucket::new(rate, 0, 1).is_err(), "{rate}");
        }
        assert!(TokenBucket::new(1.0, 0, 0).is_err());
    }
}
