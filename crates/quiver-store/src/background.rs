//! The maintenance thread: writes out `none`-mode buffers, resizes indexes (first the ones a
//! writer is waiting for), compacts partitions with enough garbage — any garbage at all when
//! the disk is short of space — takes the disk reserve back when there is room, and saves
//! periodic checkpoints. Writers never run maintenance themselves while this thread exists:
//! they ask for index room and wait (bounded) for the next resize.
//!
//! A failing pass is retried with exponential backoff; a compaction pass that dropped nothing
//! is not tried again until more records have died.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::checkpoint;
use crate::compact;
use crate::error::{Error, Result};
use crate::inner::StoreInner;
use crate::maintenance;
use crate::options::Durability;
use crate::partition::{MaintenanceState, Partition};
use crate::resize;
use crate::retry::WriteRetry;
use crate::stalls::Pacer;
use crate::sweep;

/// Longest sleep between two rounds of checks.
const TICK_MS_MAX: u64 = 100;
/// Backoff after a failed pass: doubling from the first to the last.
const BACKOFF_MS_FIRST: u64 = 100;
const BACKOFF_MS_MAX: u64 = 60_000;

/// The maintenance thread of an open store, if it has one (`Options::background`, and not
/// read-only).
pub(crate) struct BackgroundThread {
    handle: Option<JoinHandle<()>>,
}

impl BackgroundThread {
    pub fn start(inner: &Arc<StoreInner>) -> Result<BackgroundThread> {
        if !inner.ctx.opts.background || inner.ctx.opts.read_only {
            return Ok(BackgroundThread { handle: None });
        }
        let bg = inner.clone();
        let handle = std::thread::Builder::new()
            .name("quiver-maintenance".into())
            .spawn(move || run(&bg))
            .map_err(|e| Error::io("spawn maintenance thread", &inner.dir, e))?;
        Ok(BackgroundThread {
            handle: Some(handle),
        })
    }

    /// Whether the thread runs: writers then leave index resizes to it.
    pub fn is_running(&self) -> bool {
        self.handle.is_some()
    }

    /// Stops the thread after its current step and waits for it.
    pub fn stop(&mut self, inner: &StoreInner) {
        if let Some(h) = self.handle.take() {
            inner.background.stop();
            // A panic of the thread was reported by the panic hook; the store closes anyway.
            let _ = h.join();
        }
    }
}

fn run(inner: &StoreInner) {
    let ctx = &inner.ctx;
    let tick = Duration::from_millis(ctx.opts.flush_interval_ms.clamp(1, TICK_MS_MAX));
    let mut last_flush = Instant::now();
    let mut last_checkpoint = Instant::now();
    loop {
        {
            let mut stop = inner.background.stop.lock();
            if !*stop && !growth_due(inner) {
                inner.background.wake.wait_for(&mut stop, tick);
            }
            if *stop {
                return;
            }
        }
        if ctx.opts.durability == Durability::None
            && last_flush.elapsed() >= Duration::from_millis(ctx.opts.flush_interval_ms)
        {
            for part in inner.table().parts.iter() {
                note(inner, part.state.write().appender.flush());
            }
            last_flush = Instant::now();
        }
        inner.reserve.restore();
        resize_where_needed(inner);
        // The active expiry sweep, bounded per partition and tick.
        if ctx.opts.expire_sweep_keys_max > 0 && ctx.tuning.active_expire() {
            for part in inner.table().parts.iter() {
                let r = sweep::sweep_partition(ctx, part, ctx.opts.expire_sweep_keys_max);
                note(inner, r.map(drop));
            }
        }
        for part in inner.table().parts.iter() {
            compact_if_needed(inner, part);
            // Writers waiting for room come before the next partition's compaction.
            resize_where_needed(inner);
        }
        if ctx.opts.checkpoint_interval_ms > 0
            && last_checkpoint.elapsed() >= Duration::from_millis(ctx.opts.checkpoint_interval_ms)
        {
            for part in inner.table().parts.iter() {
                if part.state.read().dirty {
                    let mut pacer = Pacer::new(Some(ctx.tuning.compact_cpu_share()));
                    note(inner, checkpoint::save(ctx, part, &mut pacer));
                }
            }
            last_checkpoint = Instant::now();
        }
    }
}

fn note(inner: &StoreInner, r: Result<()>) {
    if let Err(e) = r {
        inner.background.note(&e);
    }
}

/// Whether a partition's index is to grow now: a writer waits for room, or it is past
/// `LOAD_GROW` and its maintenance is not backing off. Tested before every wait for the next
/// tick — a writer's wake-up comes only while the thread waits, and one that came while it
/// worked would otherwise leave the index to fill (and spill) for a whole tick.
fn growth_due(inner: &StoreInner) -> bool {
    inner.table().parts.iter().any(|p| {
        p.room_wanted.load(Ordering::Relaxed) > 0
            || (p.state.read().index.wants_growth()
                && p.maintenance.try_lock().is_some_and(|m| ready(&m)))
    })
}

/// Resizes every index that a writer waits for, or that is too full or too empty.
fn resize_where_needed(inner: &StoreInner) {
    for part in inner.table().parts.iter() {
        let asked = part.room_wanted.load(Ordering::Relaxed);
        let (due, room) = {
            let st = part.state.read();
            (maintenance::wants_resize(&st), st.index.has_room(asked))
        };
        if asked > 0 && !due && room {
            // Asked for before the last resize made the room: the writer tries again.
            part.room_wanted.store(0, Ordering::Relaxed);
            inner.background.resized(part);
            continue;
        }
        if asked == 0 && !due {
            continue;
        }
        let mut m = part.maintenance.lock();
        if !ready(&m) {
            if asked > 0 {
                // Let the waiting writer see that no room is coming (it gives up after a
                // bounded number of tries).
                part.room_wanted.store(0, Ordering::Relaxed);
                inner.background.resized(part);
            }
            continue;
        }
        let extra = part.room_wanted.swap(0, Ordering::Relaxed);
        let r = resize::resize(&inner.ctx, part, &mut m, extra);
        finish(inner, &mut m, r);
        inner.background.resized(part);
    }
}

/// One compaction pass on the partition if it has enough garbage: all of it when the disk
/// has room, else the next few segments of a sweep.
fn compact_if_needed(inner: &StoreInner, part: &Partition) {
    let ctx = &inner.ctx;
    let short = inner.reserve.is_short();
    let dead = {
        let st = part.state.read();
        let wanted = if short {
            st.counters.dead > 0
        } else {
            maintenance::wants_compaction(ctx, &st)
        };
        if !wanted {
            return;
        }
        st.counters.dead
    };
    let mut m = part.maintenance.lock();
    if !ready(&m) || dead < m.compact_when_dead {
        return;
    }
    // Bounded: a pass refused for space is tried again once the disk reserve is released
    // for it, at most `retry::RESERVE_RELEASES_MAX` times.
    let mut retry = WriteRetry::new(inner, true, true);
    let r = loop {
        let free = inner.reserve.fs_free_bytes().unwrap_or(u64::MAX);
        let budget = ctx.opts.compact_pass_bytes_max.min(free);
        match compact::compact_pass(ctx, part, &mut m, compact::Want::Background(budget), !short) {
            Err(e) => {
                if let Err(e) = retry.after_refusal(e) {
                    break Err(e);
                }
            }
            Ok(o) => break Ok(o),
        }
    };
    finish(inner, &mut m, r.map(drop));
    inner.reserve.restore();
}

/// Whether the partition's maintenance is out of its backoff.
fn ready(m: &MaintenanceState) -> bool {
    m.retry_at.is_none_or(|t| Instant::now() >= t)
}

/// Records a pass's outcome: on an error, notes it and backs off.
fn finish(inner: &StoreInner, m: &mut MaintenanceState, r: Result<()>) {
    match r {
        Ok(()) => {
            m.failures = 0;
            m.retry_at = None;
        }
        Err(e) => {
            inner.background.note(&e);
            let backoff = BACKOFF_MS_FIRST
                .saturating_mul(1 << m.failures.min(16))
                .min(BACKOFF_MS_MAX);
            m.failures += 1;
            m.retry_at = Some(Instant::now() + Duration::from_millis(backoff));
        }
    }
}
