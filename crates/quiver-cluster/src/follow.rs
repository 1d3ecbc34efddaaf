//! Following etcd through its outages: a node's agent, a router and a manager each run
//! sessions with etcd (one connection's life: connect, read, watch or campaign), one after
//! another until they are shut down, with the same waits between them ([`follow`]) and the
//! same restraint in their logs ([`log_end`]).

use std::future::Future;
use std::time::Duration;

use crate::meta::Result;

/// First wait after a session with etcd ended; doubled after each end up to
/// [`RETRY_DELAY_MAX`].
pub const RETRY_DELAY_MIN: Duration = Duration::from_millis(100);
/// Longest wait between two sessions with etcd.
pub const RETRY_DELAY_MAX: Duration = Duration::from_secs(2);
/// Of a run of sessions that end, every this many is logged (and the first).
const LOG_EVERY: u64 = 16;

/// Runs `session()` again and again until `shutdown` completes — at once, in the middle of a
/// session or of a wait. After the `n`th end (from 1; an error, or `Ok` for a watch that
/// ended), `ended(n, outcome)` is told, then the next session starts after a wait that begins
/// at [`RETRY_DELAY_MIN`] and doubles up to [`RETRY_DELAY_MAX`].
pub async fn follow<F>(
    mut session: impl FnMut() -> F,
    mut ended: impl FnMut(u64, Result<()>),
    shutdown: impl Future<Output = ()>,
) where
    F: Future<Output = Result<()>>,
{
    tokio::pin!(shutdown);
    let mut delay = RETRY_DELAY_MIN;
    let mut ends: u64 = 0;
    // Bounded by `shutdown`: a follower lives as long as its process wants it.
    loop {
        let outcome = tokio::select! {
            r = session() => r,
            _ = &mut shutdown => return,
        };
        ends += 1;
        ended(ends, outcome);
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = &mut shutdown => return,
        }
        delay = (delay * 2).min(RETRY_DELAY_MAX);
    }
}

/// Whether the `n`th end of a run of sessions is worth a log line: the first and every 16th,
/// so that a long outage does not flood the log.
fn worth_logging(n: u64) -> bool {
    n == 1 || n % LOG_EVERY == 0
}

/// Logs the `n`th end of a watching follower's sessions (`who`: "cluster", "router"), if
/// worth it: etcd unreachable, and what goes on meanwhile (`meanwhile`), or the watch ended.
pub fn log_end(who: &str, meanwhile: &str, n: u64, outcome: Result<()>) {
    match outcome {
        Err(e) if worth_logging(n) => {
            tracing::warn!(error = %e, failures = n, "{who}: etcd unreachable; {meanwhile}")
        }
        Err(_) => {}
        Ok(()) => tracing::warn!("{who}: the topology watch ended; reconnecting"),
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;
    use crate::meta::MetaError;

    fn failure() -> Result<()> {
        Err(MetaError::Timeout {
            endpoints: "http://127.0.0.1:1".into(),
            what: "connect",
            timeout: Duration::from_secs(5),
        })
    }

    /// Three sessions fail, the fourth is shut down while it runs: `ended` hears of the three
    /// ends in order, and `follow` returns.
    #[test]
    fn sessions_follow_one_another_until_shutdown() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let started = RefCell::new(0u64);
        let stop = tokio::sync::Notify::new();
        let mut ends = Vec::new();
        rt.block_on(follow(
            || {
                *started.borrow_mut() += 1;
                let n = *started.borrow();
                let stop = &stop;
                async move {
                    if n <= 3 {
                        return failure();
                    }
                    stop.notify_one();
                    std::future::pending().await
                }
            },
            |n, outcome| ends.push((n, outcome.is_err())),
            stop.notified(),
        ));
        assert_eq!(ends, [(1, true), (2, true), (3, true)]);
        assert_eq!(*started.borrow(), 4);
    }

    #[test]
    fn the_first_end_and_every_sixteenth_are_logged() {
        let logged: Vec<u64> = (1..=40).filter(|&n| worth_logging(n)).collect();
        assert_eq!(logged, [1, 16, 32]);
    }
}
