//! A write's bounded retries. A write that cannot go ahead has changed nothing (see the two
//! phases in `store`): it drops every partition lock, obtains what it lacked, and tries again
//! — a bounded number of times, after which it fails with a typed error:
//!
//! - **index room** in a partition: it asks the background thread for a resize of that
//!   partition's index and waits for it, at most `ROOM_WAIT` (without a background thread, it
//!   resizes the index itself). At most `ROOM_ATTEMPTS_MAX` times per partition, since
//!   concurrent writers may take the room of one resize first; then `Error::IndexFull`.
//! - **disk space**, for a write that frees space (deletes only) or a compaction pass: the
//!   disk reserve is released, at most `RESERVE_RELEASES_MAX` times; then the write's own
//!   `Error::NoSpace`. A write that adds data never takes the reserve.
//!
//! So a write touching `p` partitions tries at most
//! `p * ROOM_ATTEMPTS_MAX + RESERVE_RELEASES_MAX + 1` times.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::inner::StoreInner;
use crate::resize;

/// Times a writer asks for room in one partition's index before it gives up with
/// `Error::IndexFull` (concurrent writers may take the room of one resize first).
pub(crate) const ROOM_ATTEMPTS_MAX: usize = 8;
/// How long a writer waits for the background thread to make index room, per attempt.
pub(crate) const ROOM_WAIT: Duration = Duration::from_secs(10);
/// Times one write (or compaction pass) releases the disk reserve: once is all it can do.
pub(crate) const RESERVE_RELEASES_MAX: usize = 1;

/// The retries of one write.
pub(crate) struct WriteRetry<'s> {
    inner: &'s StoreInner,
    /// Whether the background thread runs (it makes index room); otherwise the writer resizes.
    background: bool,
    /// Whether the write may use the disk reserve: it only frees space.
    frees_space: bool,
    /// (partition, requests for index room made for it)
    room_requests: Vec<(u32, usize)>,
    reserve_releases: usize,
}

impl<'s> WriteRetry<'s> {
    pub fn new(inner: &'s StoreInner, background: bool, frees_space: bool) -> WriteRetry<'s> {
        WriteRetry {
            inner,
            background,
            frees_space,
            room_requests: Vec::new(),
            reserve_releases: 0,
        }
    }

    /// Makes room for `keys` more keys in partition `p`'s index (the caller holds no
    /// partition lock): asks the background thread and waits for its next resize, or, without
    /// a background thread, resizes here. `Error::IndexFull` once asked `ROOM_ATTEMPTS_MAX`
    /// times for this partition.
    pub fn make_room(&mut self, p: u32, keys: usize) -> Result<()> {
        let at = match self.room_requests.iter().position(|&(q, _)| q == p) {
            Some(at) => at,
            None => {
                self.room_requests.push((p, 0));
                self.room_requests.len() - 1
            }
        };
        let attempts = &mut self.room_requests[at].1;
        if *attempts >= ROOM_ATTEMPTS_MAX {
            return Err(Error::IndexFull { partition: p, keys });
        }
        *attempts += 1;
        let inner = self.inner;
        let table = inner.table();
        // A partition a split or merge retired: the write routes anew when it tries again.
        let Some(part) = table.by_id(p) else {
            return Ok(());
        };
        if !self.background {
            let mut m = part.maintenance.lock();
            return resize::resize(&inner.ctx, part, &mut m, keys);
        }
        part.room_wanted.fetch_max(keys, Ordering::Relaxed);
        inner
            .background
            .wait_for_resize(part, Instant::now() + ROOM_WAIT);
        Ok(())
    }

    /// After the write was refused with `e` (nothing written): `Ok` if it should try again
    /// because the disk reserve was just released for it; else `Err(e)`.
    pub fn after_refusal(&mut self, e: Error) -> Result<()> {
        if e.is_no_space()
            && self.frees_space
            && self.reserve_releases < RESERVE_RELEASES_MAX
            && self.inner.reserve.release()
        {
            self.reserve_releases += 1;
            return Ok(());
        }
        Err(e)
    }
}
