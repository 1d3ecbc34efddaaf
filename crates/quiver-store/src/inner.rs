//! The shared state of an open store (`StoreInner`: the partitions, their context, the
//! directory lock, the disk reserve) and the controls of its maintenance thread
//! (`Background`). `Store` wraps it; the modules that work on a whole store (`retry`,
//! `background`, `open`) take it by reference, so none of them depends on `store`.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use parking_lot::{Condvar, Mutex};

use crate::error::Error;
use crate::lockfile::DirLock;
use crate::partition::{Partition, StoreCtx};
use crate::reserve::DiskReserve;

/// What an open store is, shared by `Store`, its maintenance thread and a write's retries.
pub(crate) struct StoreInner {
    pub ctx: StoreCtx,
    pub parts: Vec<Partition>,
    pub dir: PathBuf,
    pub _lock: DirLock,
    /// Set once closed (or crashed): no more checkpoints or flushes from drop.
    pub closed: AtomicBool,
    pub reserve: DiskReserve,
    pub background: Background,
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
