//! Group commit (`fsync` durability): each partition has a syncer thread, started at the
//! first wait, that fdatasyncs the partition's log whenever a writer waits for a position not
//! yet on stable storage. A writer asks ([`GroupCommit::ask`]) and then waits
//! ([`GroupCommit::wait`], or as a task: [`GroupCommit::poll_synced`], see `durable`);
//! everyone waiting on the partition meanwhile shares that fdatasync. A vector that wrote several partitions asks all of them before it waits for any,
//! so their fdatasyncs run at once (and the file system's journal can commit them together)
//! instead of one after another — a pipelined run of SETs or a batch's parts.
//!
//! The syncer never takes the partition's lock (a batch waits for its parts' fdatasyncs while
//! holding their locks): a writer names the segment to sync with its position. A segment that
//! is no longer the active one was synced when it was sealed, so syncing the newest segment
//! asked for covers every position asked for. A failed fdatasync is never tried again
//! (`Segment::sync_data`): every wait from then on fails, and the waiter marks the partition
//! as refusing writes (it may hold the lock; the syncer does not).

use std::path::PathBuf;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use parking_lot::{Condvar, Mutex};

use crate::error::{Error, Result};
use crate::log::segment::Segment;

/// One partition's group commit; see the module documentation.
#[derive(Default)]
pub(crate) struct GroupCommit {
    state: Mutex<SyncState>,
    /// Signalled when the syncer finished an fdatasync (or met a failure).
    done: Condvar,
    /// Signalled when a writer asks for a position beyond what is synced, or on stop.
    asked: Condvar,
}

#[derive(Default)]
struct SyncState {
    synced_lsn: u64,
    /// The highest position asked for, and the segment holding it.
    wanted: Option<(u64, Arc<Segment>)>,
    /// An fdatasync failed: the segment, its OS error code (if it had one) and why; every
    /// later wait fails.
    failed: Option<(PathBuf, Option<i32>, String)>,
    /// Tasks waiting without a thread (`poll_synced`): woken after every fdatasync.
    wakers: Vec<Waker>,
    /// The syncer thread runs.
    running: bool,
    stop: bool,
}

impl SyncState {
    /// The error every wait gets once an fdatasync failed: the fdatasync's own, as its caller
    /// would have seen it.
    fn failure(&self) -> Option<Error> {
        let (path, code, reason) = self.failed.as_ref()?;
        Some(match code {
            Some(code) => Error::io(
                "fdatasync segment",
                path,
                std::io::Error::from_raw_os_error(*code),
            ),
            None => Error::SyncFailed {
                path: path.clone(),
                reason: reason.clone(),
            },
        })
    }
}

impl GroupCommit {
    /// Asks for everything up to `lsn` (in `seg`, the active segment when it was appended)
    /// to be made durable; returns at once. The syncer thread of partition `part` is started
    /// on the first ask.
    pub fn ask(self: &Arc<Self>, lsn: u64, seg: &Arc<Segment>, part: u32) -> Result<()> {
        let mut g = self.state.lock();
        if g.synced_lsn >= lsn || g.failed.is_some() {
            return Ok(());
        }
        if g.wanted.as_ref().is_none_or(|(at, _)| *at < lsn) {
            g.wanted = Some((lsn, seg.clone()));
        }
        if !g.running {
            let me = self.clone();
            std::thread::Builder::new()
                .name(format!("quiver-sync-{part}"))
                .spawn(move || me.serve())
                .map_err(|e| Error::io("start the syncer thread", &seg.path, e))?;
            g.running = true;
        }
        self.asked.notify_one();
        Ok(())
    }

    /// Blocks until everything up to `lsn` is durable (`ask` first), or an fdatasync failed.
    pub fn wait(&self, lsn: u64) -> Result<()> {
        let mut g = self.state.lock();
        loop {
            if g.synced_lsn >= lsn {
                return Ok(());
            }
            if let Some(e) = g.failure() {
                return Err(e);
            }
            self.done.wait(&mut g);
        }
    }

    /// [`GroupCommit::wait`] for a task (`ask` first): ready once everything up to `lsn` is
    /// durable or an fdatasync failed; else `cx`'s waker is woken after the next fdatasync.
    pub fn poll_synced(&self, lsn: u64, cx: &mut Context<'_>) -> Poll<Result<()>> {
        let mut g = self.state.lock();
        if g.synced_lsn >= lsn {
            return Poll::Ready(Ok(()));
        }
        if let Some(e) = g.failure() {
            return Poll::Ready(Err(e));
        }
        // A task waits on one partition at a time (`durable::SyncWait`) and is woken only by
        // it, which empties this list: one entry per waiting task.
        g.wakers.push(cx.waker().clone());
        Poll::Pending
    }

    /// Stops the syncer (the partition is gone).
    pub fn stop(&self) {
        self.state.lock().stop = true;
        self.asked.notify_all();
    }

    /// The syncer thread: an fdatasync whenever more is asked for than is synced.
    fn serve(&self) {
        loop {
            let (target, seg) = {
                let mut g = self.state.lock();
                loop {
                    if g.stop || g.failed.is_some() {
                        g.running = false;
                        return;
                    }
                    match &g.wanted {
                        Some((at, seg)) if *at > g.synced_lsn => break (*at, seg.clone()),
                        _ => self.asked.wait(&mut g),
                    }
                }
            };
            let res = seg.sync_data();
            let mut g = self.state.lock();
            match res {
                Ok(()) => g.synced_lsn = g.synced_lsn.max(target),
                Err(e) => {
                    let code = match &e {
                        Error::Io { source, .. } => source.raw_os_error(),
                        _ => None,
                    };
                    g.failed = Some((seg.path.clone(), code, e.to_string()));
                }
            }
            let wakers = std::mem::take(&mut g.wakers);
            drop(g);
            self.done.notify_all();
            // Each waiting task looks again (one whose position is not yet synced asks to be
            // woken after the next fdatasync).
            for w in wakers {
                w.wake();
            }
        }
    }
}
