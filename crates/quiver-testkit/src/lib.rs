//! What Quiver's tests share, one home each (a dev-dependency of every crate with tests):
//!
//! - [`port`]: free loopback ports, never handed out twice in one test process;
//! - [`tmpfs`]: a small tmpfs mounted for a full-disk test, unmounted on drop (skipped without
//!   root);
//! - [`process`]: child processes killed by PID on drop, bounded waits, programs run to their
//!   end, a child's stdout line by line;
//! - [`serve`]: `quiver serve` started and its `quiver listening on ADDR` line read;
//! - [`etcd`] and [`redis`]: etcd and redis-server instances on free ports, stopped by PID;
//! - [`tool`]: programs found on the PATH;
//! - [`rng`]: the seeded PRNG, its seed printed and taken from an environment variable;
//! - [`acked`]: what the kill loops share: writes acknowledged or in flight when a process
//!   died, and the verdict on a key that shows neither.
//!
//! A test kit fails the test that uses it: its helpers panic with what went wrong.

// A failure in a helper is the test failing: the kit unwraps, as the tests do.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod acked;
pub mod etcd;
pub mod port;
pub mod process;
pub mod redis;
pub mod rng;
pub mod serve;
pub mod tmpfs;
pub mod tool;

use std::time::Duration;

/// Generous bound on anything a process should do soon (liveness, not timing).
pub const WAIT: Duration = Duration::from_secs(60);

/// Pause between two checks of a condition being waited for.
const POLL: Duration = Duration::from_millis(50);

/// Calls `check` until it succeeds, at most [`WAIT`]; then panics with `what`, the last
/// failure and `logs()`.
pub fn wait_until(
    what: &str,
    logs: impl Fn() -> String,
    mut check: impl FnMut() -> Result<(), String>,
) {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        match check() {
            Ok(()) => return,
            Err(last) if std::time::Instant::now() > deadline => {
                panic!("{what}: not within {WAIT:?} (last: {last})\n{}", logs())
            }
            Err(_) => std::thread::sleep(POLL),
        }
    }
}
