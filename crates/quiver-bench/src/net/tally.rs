//! What one run counts, shared by all of its connection tasks (they run on one thread, so a
//! `RefCell` suffices): the measured window, the latency histogram and the counters.

use crate::net::hist::LatencyRecorder;
use crate::net::resp::Reply;

/// The measured interval `[start_ns, end_ns)` on the monotonic clock. Before it is the
/// warm-up: replies then are not counted (their errors are).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    pub start_ns: u64,
    pub end_ns: u64,
}

impl Window {
    #[inline]
    pub fn contains(&self, t_ns: u64) -> bool {
        t_ns >= self.start_ns && t_ns < self.end_ns
    }
}

/// One run's counts; see the module documentation.
#[derive(Debug)]
pub struct Tally {
    pub window: Window,
    pub latency: LatencyRecorder,
    /// When the run is sampled: the latencies of the window's replies since the last sample
    /// (each sample takes them and leaves an empty recorder).
    pub recent: Option<LatencyRecorder>,
    /// Open loop: how late requests due in the window were written (send time - due time).
    pub send_lag: LatencyRecorder,
    /// Replies received in the window.
    pub ops: u64,
    /// Error replies during the run, warm-up included (an error is never warm-up noise).
    pub error_replies: u64,
    /// Connections that broke.
    pub disconnects: u64,
    /// Nulls read in the window.
    pub misses: u64,
    /// Open loop: requests unanswered at the end (see `NetRecord::unanswered`).
    pub unanswered: u64,
    pub first_error: Option<String>,
    /// Connections still running: when none is, the run ends early.
    pub live: usize,
}

impl Tally {
    pub fn new(window: Window, connections: usize) -> Tally {
        Tally {
            window,
            latency: LatencyRecorder::new(),
            recent: None,
            send_lag: LatencyRecorder::new(),
            ops: 0,
            error_replies: 0,
            disconnects: 0,
            misses: 0,
            unanswered: 0,
            first_error: None,
            live: connections,
        }
    }

    /// A reply arrived at `now_ns` to a request sent (closed loop) or due (open loop) at
    /// `since_ns`.
    #[inline]
    pub fn reply(&mut self, now_ns: u64, since_ns: u64, r: Reply, error_text: &[u8]) {
        if r.error {
            self.error_replies += 1;
            if self.first_error.is_none() {
                self.first_error = Some(String::from_utf8_lossy(error_text).into_owned());
            }
        }
        if !self.window.contains(now_ns) {
            return;
        }
        self.ops += 1;
        self.misses += r.nulls as u64;
        let ns = now_ns.saturating_sub(since_ns);
        self.latency.record_ns(ns);
        if let Some(recent) = &mut self.recent {
            recent.record_ns(ns);
        }
    }

    /// Open loop: a request due at `due_ns` is being written at `now_ns`.
    #[inline]
    pub fn sent_late(&mut self, now_ns: u64, due_ns: u64) {
        if self.window.contains(due_ns) {
            self.send_lag.record_ns(now_ns.saturating_sub(due_ns));
        }
    }

    /// A connection broke; returns whether it was the last one running.
    pub fn disconnect(&mut self, why: String) -> bool {
        self.disconnects += 1;
        if self.first_error.is_none() {
            self.first_error = Some(why);
        }
        self.finished()
    }

    /// A connection stopped; returns whether it was the last one running.
    pub fn finished(&mut self) -> bool {
        self.live = self.live.saturating_sub(1);
        self.live == 0
    }

    /// A request still unanswered at `at_ns`, due since `since_ns` (open loop).
    pub fn unanswered(&mut self, at_ns: u64, since_ns: u64) {
        self.unanswered += 1;
        self.latency.record_ns(at_ns.saturating_sub(since_ns));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_window_is_measured_but_every_error_counts() {
        let mut t = Tally::new(
            Window {
                start_ns: 100,
                end_ns: 200,
            },
            2,
        );
        let err = Reply {
            error: true,
            nulls: 0,
        };
        t.reply(50, 40, err, b"ERR warm");
        t.reply(100, 90, Reply::default(), b"");
        t.reply(
            150,
            100,
            Reply {
                error: false,
                nulls: 3,
            },
            b"",
        );
        t.reply(200, 100, Reply::default(), b"");
        assert_eq!(t.ops, 2);
        assert_eq!(t.misses, 3);
        assert_eq!(t.error_replies, 1);
        assert_eq!(t.first_error.as_deref(), Some("ERR warm"));
        assert_eq!(t.latency.count(), 2);
        // Sampled: the recent latencies too, from when sampling began.
        t.recent = Some(LatencyRecorder::new());
        t.reply(160, 100, Reply::default(), b"");
        assert_eq!(t.latency.count(), 3);
        assert_eq!(t.recent.as_ref().map(LatencyRecorder::count), Some(1));
        assert!(!t.disconnect("reset".into()));
        assert!(t.finished());
        assert_eq!(t.first_error.as_deref(), Some("ERR warm"));
    }
}
