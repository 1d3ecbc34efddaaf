//! CLIENT TRACKING and expiry: a key the store's expiry sweep deletes is invalidated for the
//! connections that cache it, as Redis invalidates a key when it deletes it expired. While
//! some connection tracks, the store keeps the names it sweeps (`Store::report_expired`) and
//! this task hands them to the tracking table every [`EXPIRED_POLL`]; when the store had to
//! drop some (more than it keeps between two polls), every tracking connection is told to
//! forget everything, as after FLUSHALL, rather than keep a value that expired.

use std::time::Duration;

use tokio::sync::watch;

use super::SharedState;

/// How often the swept keys are handed over (the sweep itself runs on the store's tick).
pub const EXPIRED_POLL: Duration = Duration::from_millis(100);

pub async fn run(state: SharedState, mut shutdown: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(EXPIRED_POLL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.changed() => return,
        }
        let tracking = &state.core.tracking;
        let on = tracking.on();
        state.store.report_expired(on);
        if !on {
            continue;
        }
        let (keys, lost) = state.store.take_expired();
        if lost {
            tracking.flush();
        } else if !keys.is_empty() {
            tracking.invalidate(keys.iter().map(|k| &k[..]));
        }
    }
}
