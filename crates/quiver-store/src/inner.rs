//! The shared state of an open store (`StoreInner`: the partitions, their context, the
//! directory lock, the disk reserve) and the controls of its maintenance thread
//! (`Background`). `Store` wraps it; the modules that work on a whole store (`retry`,
//! `background`, `open`) take it by reference, so none of them depends on `store`.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Condvar, Mutex, RwLock};

use crate::dbs::DbMap;
use crate::error::Error;
use crate::hash::KeyHash;
use crate::lockfile::DirLock;
use crate::meta::Partitioner;
use crate::partition::{PartState, Partition, StoreCtx};
use crate::reserve::DiskReserve;

/// The partitions and which keys each owns: one version of the store's layout. A split or
/// merge installs a new one; operations work on the version they read (an `Arc`), and check
/// after locking their partitions that each still owns their keys (`owns`), starting again
/// on the new version if not.
pub(crate) struct Table {
    pub partitioner: Partitioner,
    /// By position (the partitioner's numbering: range order).
    pub parts: Vec<Arc<Partition>>,
    /// Which namespace each database reads (SWAPDB and FLUSHDB install a new one). An
    /// operation hashes its keys with it, then takes the namespace again from a partition it
    /// has locked (`PartState::dbs`, the same in every partition while any is locked) and
    /// hashes again in the rare case it changed: routing depends on the slot only.
    pub dbs: Arc<DbMap>,
}

impl Table {
    /// The position of `key`'s partition, and the key's slot.
    #[inline]
    pub fn route(&self, key: &[u8], hash: KeyHash) -> (usize, u16) {
        self.partitioner.route(key, hash)
    }

    /// Every partition, in lock order (ascending id), for an operation on all of them.
    pub fn in_lock_order(&self) -> Vec<&Arc<Partition>> {
        let mut parts: Vec<&Arc<Partition>> = self.parts.iter().collect();
        parts.sort_unstable_by_key(|p| p.id);
        parts
    }

    pub fn by_id(&self, id: u32) -> Option<&Arc<Partition>> {
        self.parts.iter().find(|p| p.id == id)
    }
}

/// Whether a partition, locked, still owns a key of `slot` (it does not after a split or
/// merge moved the slot away since the caller read the table).
#[inline]
pub(crate) fn owns(st: &PartState, slot: u16) -> bool {
    !st.retired && st.range.is_none_or(|r| r.contains(slot))
}

/// What an open store is, shared by `Store`, its maintenance thread and a write's retries.
pub(crate) struct StoreInner {
    pub ctx: StoreCtx,
    /// The current layout (see [`Table`]); its lock is held only to read or swap the `Arc`.
    pub table: RwLock<Arc<Table>>,
    /// The id the next partition made by a split or merge gets.
    pub next_part_id: AtomicU32,
    /// Held by a split or merge: one at a time.
    pub layout_change: Mutex<()>,
    pub dir: PathBuf,
    pub _lock: DirLock,
    /// Set once closed (or crashed): no more checkpoints or flushes from drop.
    pub closed: AtomicBool,
    pub reserve: DiskReserve,
    pub background: Background,
}

impl StoreInner {
    /// The current layout.
    pub fn table(&self) -> Arc<Table> {
        self.table.read().clone()
    }
}

/// The maintenance thread's controls (see `background`), shared with the store.
pub(crate) struct Background {
    pub stop: Mutex<bool>,
    pub wake: Condvar,
    /// Signalled after every index resize (or failed one); a writer waiting for room watches
    /// its partition's `Partition::resizes`.
    resizes: Mutex<()>,
    resized: Condvar,
    last_error: Mutex<Option<String>>,
}

impl Background {
    pub fn new() -> Background {
        Background {
            stop: Mutex::new(false),
            wake: Condvar::new(),
            resizes: Mutex::new(()),
            resized: Condvar::new(),
            last_error: Mutex::new(None),
        }
    }

    pub fn wake(&self) {
        self.wake.notify_all();
    }

    pub fn stop(&self) {
        *self.stop.lock() = true;
        self.wake.notify_all();
    }

    pub fn last_error(&self) -> Option<String> {
        self.last_error.lock().clone()
    }

    pub fn note(&self, e: &Error) {
        *self.last_error.lock() = Some(e.to_string());
    }

    /// Waits until the thread has finished its next resize of `part`'s index, or until
    /// `deadline`.
    pub fn wait_for_resize(&self, part: &Partition, deadline: Instant) {
        let mut g = self.resizes.lock();
        let start = part.resizes.load(Ordering::SeqCst);
        self.wake();
        while part.resizes.load(Ordering::SeqCst) == start {
            if self.resized.wait_until(&mut g, deadline).timed_out() {
                break;
            }
        }
    }

    pub fn resized(&self, part: &Partition) {
        let _g = self.resizes.lock();
        part.resizes.fetch_add(1, Ordering::SeqCst);
        self.resized.notify_all();
    }
}
