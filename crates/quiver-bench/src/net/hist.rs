//! Latency recording: an HDR histogram in microseconds (3 significant digits), plus the exact
//! sum and maximum in nanoseconds (the mean and the maximum need no bucketing).

use hdrhistogram::Histogram;
use serde::Serialize;

/// Largest latency the histogram resolves: one hour. Longer ones are recorded as one hour
/// (a request that late is a failed run anyway); the exact maximum is kept beside it.
pub const LATENCY_MAX_US: u64 = 3_600_000_000;
/// Significant decimal digits of the histogram: 0.1% relative error on every percentile.
pub const SIGNIFICANT_DIGITS: u8 = 3;

/// Records latencies; see the module documentation.
#[derive(Clone, Debug)]
pub struct LatencyRecorder {
    hist: Histogram<u64>,
    sum_ns: u128,
    max_ns: u64,
}

impl Default for LatencyRecorder {
    fn default() -> Self {
        LatencyRecorder::new()
    }
}

impl LatencyRecorder {
    // The bounds are constants that `Histogram::new_with_bounds` accepts (low >= 1,
    // high >= 2 * low, 0..=5 significant digits): it cannot fail, and every test builds one.
    #[allow(clippy::expect_used)]
    pub fn new() -> LatencyRecorder {
        LatencyRecorder {
            hist: Histogram::new_with_bounds(1, LATENCY_MAX_US, SIGNIFICANT_DIGITS)
                .expect("constant bounds are valid"),
            sum_ns: 0,
            max_ns: 0,
        }
    }

    /// Records one latency of `ns` nanoseconds (rounded to the nearest microsecond in the
    /// histogram).
    #[inline]
    pub fn record_ns(&mut self, ns: u64) {
        self.hist.saturating_record((ns + 500) / 1000);
        self.sum_ns += ns as u128;
        self.max_ns = self.max_ns.max(ns);
    }

    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    /// Percentiles, mean and maximum; `None` when nothing was recorded.
    pub fn summary(&self) -> Option<LatencySummary> {
        let n = self.hist.len();
        if n == 0 {
            return None;
        }
        let q = |q: f64| self.hist.value_at_quantile(q) as f64;
        Some(LatencySummary {
            count: n,
            p50_us: q(0.5),
            p90_us: q(0.9),
            p99_us: q(0.99),
            p999_us: q(0.999),
            max_us: self.max_ns as f64 / 1000.0,
            mean_us: (self.sum_ns as f64 / n as f64) / 1000.0,
        })
    }
}

/// A latency distribution's figures, in microseconds. A percentile is the highest value
/// within 0.1% of the recorded one at that rank (HDR's `value_at_quantile`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct LatencySummary {
    pub count: u64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
    pub mean_us: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_known_inputs() {
        let mut r = LatencyRecorder::new();
        assert!(r.summary().is_none());
        // 1..=1000 µs once each: below 2048 the histogram is exact to the microsecond.
        for us in 1..=1000u64 {
            r.record_ns(us * 1000);
        }
        let s = r.summary().unwrap();
        assert_eq!(s.count, 1000);
        assert_eq!(s.p50_us, 500.0);
        assert_eq!(s.p90_us, 900.0);
        assert_eq!(s.p99_us, 990.0);
        assert_eq!(s.p999_us, 999.0);
        assert_eq!(s.max_us, 1000.0);
        assert_eq!(s.mean_us, 500.5);
    }

    #[test]
    fn skewed_inputs_and_large_values_within_precision() {
        let mut r = LatencyRecorder::new();
        // 990 fast requests of 50 µs, 9 of 10 ms, one of 2.5 s.
        for _ in 0..990 {
            r.record_ns(50_000);
        }
        for _ in 0..9 {
            r.record_ns(10_000_000);
        }
        r.record_ns(2_500_000_123);
        let s = r.summary().unwrap();
        assert_eq!(s.p50_us, 50.0);
        assert_eq!(s.p90_us, 50.0);
        assert_eq!(s.p99_us, 50.0);
        // The 999th value is 10 ms, within 0.1%.
        assert!((s.p999_us - 10_000.0).abs() <= 10.0, "{}", s.p999_us);
        // The maximum is exact, not bucketed.
        assert_eq!(s.max_us, 2_500_000.123);
        let mean = (990.0 * 50.0 + 9.0 * 10_000.0 + 2_500_000.123) / 1000.0;
        assert!((s.mean_us - mean).abs() < 1e-6);
    }

    #[test]
    fn rounding_and_saturation() {
        let mut r = LatencyRecorder::new();
        r.record_ns(1_499); // 1 µs
        r.record_ns(1_500); // 2 µs
        r.record_ns(u64::MAX / 2); // beyond an hour: recorded as the histogram's top
        let s = r.summary().unwrap();
        assert_eq!(s.p50_us, 2.0);
        assert_eq!(r.hist.value_at_quantile(0.0), 1);
        assert!(s.p999_us >= LATENCY_MAX_US as f64 * 0.999);
        assert_eq!(s.max_us, (u64::MAX / 2) as f64 / 1000.0);
    }
}
