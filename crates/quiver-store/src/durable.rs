//! Durability waits a caller takes over (`fsync` mode).
//!
//! A write in `fsync` mode returns once it is on stable storage: the engine call blocks until
//! its partitions' syncers (`group_commit`) have fdatasynced it. A server whose threads each
//! serve many connections must not block one on the disk, so it runs its engine calls inside
//! `Store::deferring_sync`: there the acknowledgement waits — those of plain vectors,
//! pipelines and compound batches, after their locks — ask the syncers as usual but are
//! not waited for; they are returned as a [`SyncWait`], which the caller awaits (as a task,
//! woken by the syncers) before it acknowledges anything. Waits inside a batch's commit
//! protocol (its parts before its commit record) still block: they are ordering, not
//! acknowledgement. The scope is the calling thread's, for the duration of the call only.

use std::cell::RefCell;
use std::future::poll_fn;
use std::sync::Arc;

use crate::error::Result;
use crate::partition::Partition;

thread_local! {
    /// The waits deferred by the `Store::deferring_sync` call running on this thread.
    static DEFERRED: RefCell<Option<SyncWait>> = const { RefCell::new(None) };
}

/// What acknowledged-to-be writes wait for: per partition, the log position to be synced.
#[derive(Clone, Default)]
pub struct SyncWait {
    positions: Vec<(Arc<Partition>, u64)>,
}

impl SyncWait {
    pub fn is_empty(&self) -> bool {
        self.positions.is_empty()
    }

    /// Adds `other`'s positions (a partition's highest one covers its lower ones).
    pub fn merge(&mut self, other: SyncWait) {
        for (part, lsn) in other.positions {
            self.add(part, lsn);
        }
    }

    fn add(&mut self, part: Arc<Partition>, lsn: u64) {
        match self
            .positions
            .iter_mut()
            .find(|(p, _)| Arc::ptr_eq(p, &part))
        {
            Some((_, at)) => *at = (*at).max(lsn),
            None => self.positions.push((part, lsn)),
        }
    }

    /// Until every position is durable (their fdatasyncs were asked for when the writes were
    /// made, so they run at once) or one failed: the first failure, and its partition refuses
    /// writes from then on, as after a blocking wait.
    pub async fn settle(self) -> Result<()> {
        for (part, lsn) in &self.positions {
            let res = poll_fn(|cx| part.commit.poll_synced(*lsn, cx)).await;
            part.note_sync(res)?;
        }
        Ok(())
    }
}

/// Runs `f` with its acknowledgement waits deferred (`Store::deferring_sync`).
pub(crate) fn scope<R>(f: impl FnOnce() -> R) -> (R, SyncWait) {
    let outer = DEFERRED.with(|d| d.borrow_mut().replace(SyncWait::default()));
    let r = f();
    let mine = DEFERRED.with(|d| std::mem::replace(&mut *d.borrow_mut(), outer));
    (r, mine.unwrap_or_default())
}

/// Before a write (vector, pipeline, batch) is acknowledged in `fsync` mode: its positions
/// made durable (`Partition::wait_all_durable`), or, inside [`scope`], asked for and left to
/// the caller. Per partition, its outcome.
pub(crate) fn acknowledge(parts: &[(&Arc<Partition>, u64)]) -> Vec<Result<()>> {
    let deferred = DEFERRED.with(|d| {
        let mut d = d.borrow_mut();
        let wait = d.as_mut()?;
        let asked: Vec<Result<()>> = parts
            .iter()
            .map(|&(p, lsn)| p.note_sync(p.ask_durable(lsn)))
            .collect();
        for (&(part, lsn), asked) in parts.iter().zip(&asked) {
            if asked.is_ok() {
                wait.add(part.clone(), lsn);
            }
        }
        Some(asked)
    });
    deferred.unwrap_or_else(|| Partition::wait_all_durable(parts))
}
