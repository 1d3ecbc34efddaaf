//! CLIENT PAUSE / UNPAUSE (`cmd::client`): for a while, every client's commands (ALL), or
//! those that write (WRITE), wait before they run — what an operator uses to switch clients
//! over to another server without a write landing on the old one meanwhile. A pause that
//! comes while one holds keeps the later end and the wider kind, as Redis's does; UNPAUSE, or
//! the end, lets the waiting commands run, in order per connection.
//!
//! Every run checks [`Pause::is_active`] (one atomic load) before each request; only while a
//! pause holds does it look further, and then it runs its requests one at a time.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::sync::Notify;

use bytes::Bytes;

use crate::names::Renames;
use crate::session::Session;
use crate::table::{Cmd, CommandSpec, Flags, COMMANDS};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PauseKind {
    /// Commands that write wait; reads run.
    Write,
    All,
}

#[derive(Default)]
pub struct Pause {
    active: AtomicBool,
    /// Until when, and what waits.
    state: Mutex<Option<(Instant, PauseKind)>>,
    /// Woken by UNPAUSE (a pause's end needs no wake: the waiters sleep until it).
    unpaused: Notify,
}

impl Pause {
    /// CLIENT PAUSE `for_` `kind`.
    pub fn pause(&self, for_: Duration, kind: PauseKind) {
        let end = Instant::now() + for_;
        let mut state = self.state.lock();
        *state = Some(match *state {
            Some((was, was_kind)) if was > Instant::now() => {
                let widest = if was_kind == PauseKind::All || kind == PauseKind::All {
                    PauseKind::All
                } else {
                    PauseKind::Write
                };
                (was.max(end), widest)
            }
            _ => (end, kind),
        });
        self.active.store(true, Relaxed);
    }

    /// CLIENT UNPAUSE.
    pub fn unpause(&self) {
        *self.state.lock() = None;
        self.active.store(false, Relaxed);
        self.unpaused.notify_waiters();
    }

    /// Whether a pause may hold (one atomic load: the runs' fast path).
    pub fn is_active(&self) -> bool {
        self.active.load(Relaxed)
    }

    /// The end of the pause a command (that writes: `write`) must wait for now, if any.
    fn holds(&self, write: bool) -> Option<Instant> {
        let mut state = self.state.lock();
        let (end, kind) = (*state)?;
        if end <= Instant::now() {
            *state = None;
            self.active.store(false, Relaxed);
            return None;
        }
        (kind == PauseKind::All || write).then_some(end)
    }

    /// Waits while a pause holds the request `args` of `session` (bounded by the pause's end):
    /// a write — a command flagged so, or an EXEC with one queued — waits for any pause.
    pub async fn wait(&self, renames: &Renames, session: &Session, args: &[Bytes]) {
        let Some(spec) = args.first().and_then(|name| renames.lookup(name)) else {
            return;
        };
        let write = writes(spec)
            || (spec.cmd == Cmd::Exec
                && session
                    .multi
                    .as_ref()
                    .is_some_and(|m| m.queued.iter().any(|(i, _)| writes(&COMMANDS[*i]))));
        loop {
            let unpaused = self.unpaused.notified();
            let Some(end) = self.holds(write) else {
                return;
            };
            tokio::select! {
                _ = tokio::time::sleep_until(end.into()) => {}
                _ = unpaused => {}
            }
        }
    }
}

fn writes(spec: &CommandSpec) -> bool {
    spec.flags.contains(Flags::WRITE)
}
