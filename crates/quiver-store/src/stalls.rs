//! How maintenance shares the serving threads' time: how long it keeps writers waiting
//! (every hold of a partition's lock by a maintenance task, timed: INFO
//! `maintenance_stall_max_us`, `_by`, `_total_us`, `maintenance_stalls`), the pacing of a
//! compaction pass to a share of the core (`Pacer`), and new memory faulted in by steps
//! (`fault_in`).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// CPU time a paced pass spends between two sleeps. A pass sharing a core with a serving
/// thread takes the core for about this long each time it wakes, so it is what a serving
/// thread's requests wait for: 2 ms slices made closed-loop write p99s of 3-5 ms on one core,
/// 100 µs ones 0.6-1.2 ms (BENCHMARKS §51).
const PACE_SLICE: Duration = Duration::from_micros(100);

/// CPU time a yielding pass (`Pacer::yielding`) runs before it hands its core over. A serving
/// thread hands its core over as often while one runs (`yielding_pass_running`), so beside a
/// busy one the pass gets about half the core, what the scheduler gave it, in slices of this
/// instead of ticks.
const YIELD_SLICE: Duration = Duration::from_millis(1);

/// Bytes of pages handled per step of maintenance's kernel work (`Segment::retire`,
/// `Segment::write_back`, `replace_file`, `fault_in`): 256 pages, about a pacing slice of
/// kernel work, so maintenance that lets pages go, writes them out or faults them in can
/// sleep between steps.
pub const PAGE_STEP_BYTES: u64 = 1 << 20;

/// Units of work (records) between two looks at the clock (~20 µs of a pass's work).
const PACE_CHECK_EVERY: u32 = 64;

/// Keeps a compaction pass to a share of the core (`Options::compact_cpu_share`, or
/// `URGENT_CPU_SHARE` when urgent): after each `PACE_SLICE` of the thread's CPU time it
/// sleeps `slice * (1 - share) / share`. CPU time, not wall time: on a core it shares, a pass
/// waiting to run has done no work, and counted by the clock it would get less than its
/// share. Called only where the pass holds no partition lock: a sleep must never keep writers
/// waiting.
///
/// A pass that must not be slowed (an index resize: writers fill the old index's spill
/// meanwhile) is not paced but *yields* (`Pacer::yielding`): after each `YIELD_SLICE` of CPU
/// time it hands its core to a thread waiting for it (`sched_yield`). Left to the scheduler, a
/// thread that never blocks keeps a core it shares with a serving thread until a timer tick —
/// 4-5 ms at a time on this project's machines (BENCHMARKS §55).
pub(crate) struct Pacer {
    pace: Pace,
    slice_start: Duration,
    since_check: u32,
}

/// How a pass shares its core.
#[derive(Clone, Copy)]
enum Pace {
    Unpaced,
    /// Sleeps after each `PACE_SLICE` to keep to this share of a core.
    Share(f64),
    /// Not slowed, but yielding the core after each `YIELD_SLICE` (`Pacer::yielding`).
    Yielding,
}

impl Pacer {
    pub fn new(share: Option<f64>) -> Pacer {
        match share.filter(|s| *s < 1.0) {
            Some(share) => Pacer::started(Pace::Share(share)),
            None => Pacer {
                pace: Pace::Unpaced,
                slice_start: Duration::ZERO,
                since_check: 0,
            },
        }
    }

    /// Unpaced, but yielding its core after each `YIELD_SLICE` of CPU time; while it lives,
    /// [`yielding_pass_running`] says so.
    pub fn yielding() -> Pacer {
        YIELDING_PASSES.fetch_add(1, Ordering::Relaxed);
        Pacer::started(Pace::Yielding)
    }

    /// A pacer whose first slice starts now.
    fn started(pace: Pace) -> Pacer {
        Pacer {
            pace,
            slice_start: thread_cpu_time(),
            since_check: 0,
        }
    }

    /// `units` of work (records) done; sleeps (or yields) if the slice is used up (and says
    /// so).
    pub fn done(&mut self, units: usize) -> bool {
        if let Pace::Unpaced = self.pace {
            return false;
        }
        self.since_check = self.since_check.saturating_add(units as u32);
        if self.since_check < PACE_CHECK_EVERY {
            return false;
        }
        self.pace()
    }

    /// A step of work large enough to look at the clock after each (a megabyte of I/O or of
    /// memory touched) is done; sleeps if the slice is used up (and says so).
    pub fn step_done(&mut self) -> bool {
        self.pace()
    }

    fn pace(&mut self) -> bool {
        let slice = match self.pace {
            Pace::Unpaced => return false,
            Pace::Share(_) => PACE_SLICE,
            Pace::Yielding => YIELD_SLICE,
        };
        self.since_check = 0;
        let worked = thread_cpu_time().saturating_sub(self.slice_start);
        if worked < slice {
            return false;
        }
        match self.pace {
            Pace::Share(share) => std::thread::sleep(worked.mul_f64((1.0 - share) / share)),
            _ => std::thread::yield_now(),
        }
        self.slice_start = thread_cpu_time();
        true
    }
}

impl Drop for Pacer {
    fn drop(&mut self) {
        if let Pace::Yielding = self.pace {
            YIELDING_PASSES.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// Yielding passes (`Pacer::yielding`) running in the process.
static YIELDING_PASSES: AtomicUsize = AtomicUsize::new(0);

/// Whether a pass that yields its core every `YIELD_SLICE` runs in this process (a store's
/// index resize): a serving thread then yields its own about as often, so that the two share a
/// core in turns of about a millisecond rather than a timer tick's 4-5 ms (BENCHMARKS §55).
/// Read by the serving threads' wake meters, about once a millisecond each; written twice a
/// resize.
pub fn yielding_pass_running() -> bool {
    YIELDING_PASSES.load(Ordering::Relaxed) > 0
}

/// Faults in every page of `v` (a store of the value already there: a buffer just allocated,
/// zeroed or not, is left as it was), `step_done` after each `PAGE_STEP_BYTES` of them: the
/// kernel's work of mapping new memory, a step at a time (a checkpoint's buffer, a spare
/// index spill).
pub(crate) fn fault_in<T: Copy>(v: &mut [T], step_done: &mut impl FnMut()) {
    const PAGE_BYTES: usize = 4096;
    let per_page = (PAGE_BYTES / std::mem::size_of::<T>()).max(1);
    let per_step = PAGE_STEP_BYTES as usize / PAGE_BYTES;
    for (i, at) in (0..v.len()).step_by(per_page).enumerate() {
        let p: *mut T = &mut v[at];
        // SAFETY: `p` points at an element of `v`, which this function borrows mutably; a
        // volatile store so the write (of the value already there) is not elided.
        unsafe { std::ptr::write_volatile(p, std::ptr::read(p)) };
        if (i + 1) % per_step == 0 {
            step_done();
        }
    }
}

/// The CPU time the calling thread has used (`CLOCK_THREAD_CPUTIME_ID`).
fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec for the call to fill; this clock always exists on
    // Linux, and a failure leaves it at zero (the pass is then paced by nothing).
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// How long maintenance (compaction, checkpoints, index resizes, the expiry sweep) kept a
/// partition's writers waiting: every hold of the partition's lock that excludes them, timed
/// from when it was taken to when it was let go. Writers of that partition wait that long at
/// most (INFO `maintenance_stall_max_us`, and which task held it): the measure of pacing,
/// kept since the store opened.
#[derive(Default)]
pub(crate) struct Stalls {
    max_us: AtomicU64,
    total_us: AtomicU64,
    holds: AtomicU64,
    /// The task of the longest hold.
    max_by: parking_lot::Mutex<&'static str>,
    /// Holds of at least [`STALL_EVENT_MIN_US`], until taken (`Store::take_stall_events`).
    events: parking_lot::Mutex<std::collections::VecDeque<StallEvent>>,
}

/// Holds this long or longer are kept as events (a server's latency monitor names them).
pub const STALL_EVENT_MIN_US: u64 = 1_000;
/// Events kept until taken; past it the oldest go.
pub const STALL_EVENTS_MAX: usize = 1024;

/// Long fdatasyncs of the logs (at least [`STALL_EVENT_MIN_US`]), each with the file's path,
/// as events named `fdatasync` (`Store::take_stall_events` hands over those under its
/// directory with its holds). Kept for the process, not in a store: the sync happens where no
/// store is at hand (`Segment::sync_data`).
static FDATASYNCS: parking_lot::Mutex<std::collections::VecDeque<(PathBuf, StallEvent)>> =
    parking_lot::Mutex::new(std::collections::VecDeque::new());

/// An fdatasync of `path` that began at `since` has ended: a long one is an event.
pub(crate) fn note_fdatasync(path: &Path, since: Instant) {
    let us = since.elapsed().as_micros() as u64;
    if us < STALL_EVENT_MIN_US {
        return;
    }
    let event = StallEvent {
        by: "fdatasync",
        us,
        unix_secs: crate::clock::system_now_ms() / 1000,
    };
    let mut syncs = FDATASYNCS.lock();
    if syncs.len() >= STALL_EVENTS_MAX {
        syncs.pop_front();
    }
    syncs.push_back((path.to_path_buf(), event));
}

/// Keeps `event`, the oldest going past [`STALL_EVENTS_MAX`].
fn push_event(events: &mut std::collections::VecDeque<StallEvent>, event: StallEvent) {
    if events.len() >= STALL_EVENTS_MAX {
        events.pop_front();
    }
    events.push_back(event);
}

/// One long hold of a partition's lock by maintenance, or one long fdatasync.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StallEvent {
    /// The task ("checkpoint", "compaction range", ...).
    pub by: &'static str,
    pub us: u64,
    /// Unix time it ended, seconds.
    pub unix_secs: u64,
}

impl Stalls {
    /// Starts timing a hold by task `by` (a name: "compaction", "checkpoint"...); taken right
    /// after the lock, dropped before it (declare it after the guard, so it drops first).
    pub fn hold(&self, by: &'static str) -> StallTimer<'_> {
        StallTimer {
            stalls: self,
            by,
            since: Instant::now(),
        }
    }

    /// The long holds, and the long fdatasyncs of files under `dir`, since the last call,
    /// oldest first.
    pub fn take_events(&self, dir: &Path) -> Vec<StallEvent> {
        let mut events: Vec<StallEvent> = self.events.lock().drain(..).collect();
        FDATASYNCS.lock().retain(|(path, e)| {
            let ours = path.starts_with(dir);
            if ours {
                events.push(*e);
            }
            !ours
        });
        // Each list is in order; together, by when they ended (a stable sort keeps ties).
        events.sort_by_key(|e| e.unix_secs);
        events
    }

    /// (longest hold and its task, all holds' total, holds), in microseconds.
    pub fn figures(&self) -> (u64, &'static str, u64, u64) {
        (
            self.max_us.load(Ordering::Relaxed),
            *self.max_by.lock(),
            self.total_us.load(Ordering::Relaxed),
            self.holds.load(Ordering::Relaxed),
        )
    }
}

/// One timed hold of a partition's lock (`Stalls::hold`).
pub(crate) struct StallTimer<'a> {
    stalls: &'a Stalls,
    by: &'static str,
    since: Instant,
}

impl Drop for StallTimer<'_> {
    fn drop(&mut self) {
        let us = self.since.elapsed().as_micros() as u64;
        let s = self.stalls;
        if s.max_us.fetch_max(us, Ordering::Relaxed) < us {
            *s.max_by.lock() = self.by;
        }
        s.total_us.fetch_add(us, Ordering::Relaxed);
        s.holds.fetch_add(1, Ordering::Relaxed);
        if us >= STALL_EVENT_MIN_US {
            let unix_secs = crate::clock::system_now_ms() / 1000;
            let event = StallEvent {
                by: self.by,
                us,
                unix_secs,
            };
            push_event(&mut s.events.lock(), event);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::{
        thread_cpu_time, yielding_pass_running, Pacer, PACE_CHECK_EVERY, PACE_SLICE, YIELD_SLICE,
    };

    /// A pass is paced by the CPU it uses, not by the clock: one that waits (as it does for a
    /// core a serving thread holds) has used no slice, and one that works has.
    #[test]
    fn a_pass_is_paced_by_its_cpu_time_not_by_the_clock() {
        let units = PACE_CHECK_EVERY as usize;
        let mut waiting = Pacer::new(Some(0.5));
        // The wait is 20 slices of the clock (a pacer by the clock would sleep after it) and
        // under one of CPU: 20-45 µs here (a wake-up in this virtual machine costs that much
        // of the thread's CPU time, so a few waits in a row could add up to a slice).
        std::thread::sleep(PACE_SLICE * 20);
        assert!(
            !waiting.done(units),
            "a pass that only waited was made to sleep"
        );
        let mut working = Pacer::new(Some(0.5));
        let mut slept = false;
        // Bounded: 20 slices of work at most before the first sleep is due.
        let until = Instant::now() + PACE_SLICE * 20 + Duration::from_secs(1);
        while !slept && Instant::now() < until {
            let spin = Instant::now();
            while spin.elapsed() < PACE_SLICE {
                std::hint::spin_loop();
            }
            slept = working.done(units);
        }
        assert!(slept, "a pass that worked its slice was not paced");
        assert!(!Pacer::new(None).done(units));
    }

    /// A yielding pass is never slowed, but gives its core up once it has used a slice of CPU
    /// time since it last did, and says it runs while it lives.
    #[test]
    fn a_yielding_pass_gives_its_core_up_after_a_slice_of_cpu_time() {
        let units = PACE_CHECK_EVERY as usize;
        let mut pacer = Pacer::yielding();
        // The serving threads are told, so they yield back (other tests may run one too: only
        // this side is certain).
        assert!(yielding_pass_running());
        let start = thread_cpu_time();
        let mut gave_up = 0;
        // Bounded: ten slices of the thread's CPU time.
        while thread_cpu_time() - start < YIELD_SLICE * 10 {
            std::hint::spin_loop();
            if pacer.done(units) {
                gave_up += 1;
            }
        }
        assert!(
            (5..=10).contains(&gave_up),
            "gave the core up {gave_up} times in ten slices"
        );
    }
}
