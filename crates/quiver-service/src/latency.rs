//! The latency monitor (LATENCY, `cmd::server`): per event, the last [`SAMPLES_MAX`] samples
//! of at least `latency-monitor-threshold` milliseconds (0: the monitor is off), as Redis 7
//! keeps them — one per second at most (a later one in the same second keeps the larger) —
//! and the largest ever. Events: `command` (a step of a run — a command, or a vector of them —
//! that took that long), and on a node the store's maintenance holds of a partition's lock
//! (`checkpoint`, `compaction-range`, `index-resize-snapshot`, ...: what kept writers
//! waiting), so that a stall has a name.

use std::collections::{BTreeMap, VecDeque};

use parking_lot::Mutex;

use crate::settings::Live;

/// Samples kept per event (Redis's `LATENCY_TS_LEN`).
pub const SAMPLES_MAX: usize = 160;
/// Distinct events kept at most (Quiver's are a dozen; the bound only guards the map).
pub const EVENTS_MAX: usize = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    /// Unix time, seconds.
    pub time: u64,
    pub ms: u64,
}

#[derive(Default)]
struct Event {
    samples: VecDeque<Sample>,
    max_ms: u64,
}

#[derive(Default)]
pub struct LatencyMonitor {
    events: Mutex<BTreeMap<String, Event>>,
}

/// What LATENCY LATEST shows of an event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Latest {
    pub event: String,
    pub time: u64,
    pub ms: u64,
    pub max_ms: u64,
}

impl LatencyMonitor {
    /// Records that `event` took `ms` at Unix time `time`, if the threshold says so.
    pub fn add(&self, live: &Live, event: &str, ms: u64, time: u64) {
        let threshold = live.latency_monitor_threshold();
        if threshold == 0 || ms < threshold {
            return;
        }
        let mut events = self.events.lock();
        if !events.contains_key(event) && events.len() >= EVENTS_MAX {
            return;
        }
        let e = events.entry(event.to_string()).or_default();
        e.max_ms = e.max_ms.max(ms);
        match e.samples.back_mut() {
            Some(last) if last.time == time => last.ms = last.ms.max(ms),
            _ => {
                e.samples.push_back(Sample { time, ms });
                if e.samples.len() > SAMPLES_MAX {
                    e.samples.pop_front();
                }
            }
        }
    }

    /// Each event's latest sample and largest latency, by name.
    pub fn latest(&self) -> Vec<Latest> {
        self.events
            .lock()
            .iter()
            .filter_map(|(name, e)| {
                e.samples.back().map(|s| Latest {
                    event: name.clone(),
                    time: s.time,
                    ms: s.ms,
                    max_ms: e.max_ms,
                })
            })
            .collect()
    }

    /// `event`'s samples, oldest first (none for an unknown event).
    pub fn history(&self, event: &str) -> Vec<Sample> {
        self.events
            .lock()
            .get(event)
            .map_or_else(Vec::new, |e| e.samples.iter().copied().collect())
    }

    /// Forgets `events` (every one when empty); how many there were.
    pub fn reset(&self, events: &[String]) -> usize {
        let mut all = self.events.lock();
        if events.is_empty() {
            let n = all.len();
            all.clear();
            return n;
        }
        events.iter().filter(|e| all.remove(*e).is_some()).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::settings::Change;

    #[test]
    fn samples_follow_the_threshold_one_per_second() {
        let live = Live::of(&Config::default());
        let m = LatencyMonitor::default();
        m.add(&live, "command", 500, 10);
        assert!(m.latest().is_empty(), "off by default");
        live.set(&Change::LatencyMonitorThreshold(5));
        m.add(&live, "command", 4, 10);
        m.add(&live, "command", 7, 10);
        m.add(&live, "command", 6, 10);
        m.add(&live, "command", 9, 11);
        m.add(&live, "checkpoint", 20, 11);
        assert_eq!(
            m.history("command"),
            [Sample { time: 10, ms: 7 }, Sample { time: 11, ms: 9 }]
        );
        let latest = m.latest();
        assert_eq!(latest.len(), 2);
        assert_eq!(
            (latest[1].event.as_str(), latest[1].ms, latest[1].max_ms),
            ("command", 9, 9)
        );
        for t in 0..SAMPLES_MAX as u64 + 10 {
            m.add(&live, "command", 5, 100 + t);
        }
        assert_eq!(m.history("command").len(), SAMPLES_MAX);
        assert_eq!(m.reset(&["nosuch".into(), "checkpoint".into()]), 1);
        assert_eq!(m.reset(&[]), 1);
        assert!(m.latest().is_empty());
    }
}
