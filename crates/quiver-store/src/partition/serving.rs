//! How the serving paths take a partition's `state` lock — writers as an intent or
//! exclusively, readers shared — and the figures kept of their waits and holds.

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use parking_lot::{RwLockReadGuard, RwLockUpgradableReadGuard, RwLockWriteGuard};

use super::{PartState, Partition};

/// Figures of a partition's `state` lock on the serving paths (gets, plain writes, pipelines,
/// batches): how often writers took it (as an intent or exclusively), how often and how long
/// they waited for it, how long they held it and, of that, how long an intent's upgrade waited
/// for the readers inside and how long they held it exclusively — what a reader can wait for
/// (sampled: `HOLD_SAMPLE_EVERY`); how often and how long readers waited.
/// Maintenance's holds are `stalls`'s.
/// Writers update them holding the lock (no cache line is contended beyond the lock's own);
/// readers only when they had to wait.
#[derive(Default)]
pub(crate) struct LockFigures {
    write_locks: AtomicU64,
    write_waits: AtomicU64,
    write_wait_ns: AtomicU64,
    write_hold_ns: AtomicU64,
    upgrade_wait_ns: AtomicU64,
    exclusive_hold_ns: AtomicU64,
    read_waits: AtomicU64,
    read_wait_ns: AtomicU64,
}

/// Sums of [`LockFigures`] over partitions (`Store::stats`), in µs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LockStats {
    pub write_locks: u64,
    pub write_waits: u64,
    pub write_wait_us: u64,
    /// Writers' holds, intents included: what another writer waits for.
    pub write_hold_us: u64,
    /// Of those, intents' upgrades waiting for the readers inside (new readers wait too).
    pub upgrade_wait_us: u64,
    /// Of those, the exclusive part: appends and index updates, what a reader waits for.
    pub exclusive_hold_us: u64,
    pub read_waits: u64,
    pub read_wait_us: u64,
}

impl LockFigures {
    pub fn add_to(&self, sum: &mut LockStats) {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        sum.write_locks += get(&self.write_locks);
        sum.write_waits += get(&self.write_waits);
        sum.write_wait_us += get(&self.write_wait_ns) / 1000;
        sum.write_hold_us += get(&self.write_hold_ns) / 1000;
        sum.upgrade_wait_us += get(&self.upgrade_wait_ns) / 1000;
        sum.exclusive_hold_us += get(&self.exclusive_hold_ns) / 1000;
        sum.read_waits += get(&self.read_waits);
        sum.read_wait_us += get(&self.read_wait_ns) / 1000;
    }
}

/// Serving writers' holds timed: one in this many (the figure is scaled up), so that a short
/// hold does not pay two clock reads.
const HOLD_SAMPLE_EVERY: u64 = 16;

/// Times a serving writer's hold into its [`LockFigures`] when dropped, if it is a sampled
/// one: the whole hold, an upgrade's wait, and the part since it became exclusive.
struct HoldTimer<'a> {
    figures: &'a LockFigures,
    /// `None`: not sampled.
    since: Option<HoldTimes>,
}

/// When a hold was taken, its upgrade began, it became exclusive.
struct HoldTimes {
    taken: Instant,
    upgrading: Option<Instant>,
    exclusive: Option<Instant>,
}

impl HoldTimer<'_> {
    /// An upgrade begins: it waits for the readers inside.
    fn upgrading(&mut self) {
        if let Some(t) = &mut self.since {
            t.upgrading = Some(Instant::now());
        }
    }

    /// From now on the hold is exclusive.
    fn exclusive_from_now(&mut self) {
        if let Some(t) = &mut self.since {
            t.exclusive = Some(Instant::now());
        }
    }
}

impl Drop for HoldTimer<'_> {
    fn drop(&mut self) {
        let Some(t) = &self.since else {
            return;
        };
        let scaled = |d: std::time::Duration| d.as_nanos() as u64 * HOLD_SAMPLE_EVERY;
        let f = self.figures;
        f.write_hold_ns
            .fetch_add(scaled(t.taken.elapsed()), Ordering::Relaxed);
        if let Some(exclusive) = t.exclusive {
            f.exclusive_hold_ns
                .fetch_add(scaled(exclusive.elapsed()), Ordering::Relaxed);
            if let Some(upgrading) = t.upgrading {
                let waited = exclusive.saturating_duration_since(upgrading);
                f.upgrade_wait_ns
                    .fetch_add(scaled(waited), Ordering::Relaxed);
            }
        }
    }
}

/// A serving writer's exclusive hold of a partition's `state`.
pub(crate) struct WriteHold<'a> {
    guard: RwLockWriteGuard<'a, PartState>,
    _timer: HoldTimer<'a>,
}

impl Deref for WriteHold<'_> {
    type Target = PartState;
    fn deref(&self) -> &PartState {
        &self.guard
    }
}

impl DerefMut for WriteHold<'_> {
    fn deref_mut(&mut self) -> &mut PartState {
        &mut self.guard
    }
}

/// A serving writer's intent on a partition's `state` (an upgradable read lock): it shuts out
/// other writers and maintenance, not readers, while the writer looks its keys up, reads and
/// plans; [`WriteIntent::upgrade`] then holds the state exclusively for the appends and index
/// updates alone. Nothing but a writer changes the state, so what the writer found holds until
/// then. A writer holding an intent holds no other partition's lock: an upgrade waits for the
/// partition's readers, and a reader of several partitions may wait, holding this one, for a
/// higher one that a writer of several holds exclusively — taken in ascending order, write
/// locks cannot close that cycle; an upgrade of one of several, made holding a higher one,
/// could.
pub(crate) struct WriteIntent<'a> {
    guard: RwLockUpgradableReadGuard<'a, PartState>,
    timer: HoldTimer<'a>,
}

impl Deref for WriteIntent<'_> {
    type Target = PartState;
    fn deref(&self) -> &PartState {
        &self.guard
    }
}

impl<'a> WriteIntent<'a> {
    /// The exclusive hold: waits for the readers inside to leave (no new one enters).
    pub fn upgrade(self) -> WriteHold<'a> {
        let WriteIntent { guard, mut timer } = self;
        timer.upgrading();
        let guard = RwLockUpgradableReadGuard::upgrade(guard);
        timer.exclusive_from_now();
        WriteHold {
            guard,
            _timer: timer,
        }
    }
}

/// Lets go of the locks of several partitions (taken in ascending order) in descending order.
/// A writer that wants the same partitions waits on the first, so it is woken once, with the
/// others free; let go of in ascending order, each wake found the next lock still held, and a
/// waiter slept and was woken once per partition, holding the ones before (on 2 threads, an
/// MSET-32's hold per lock went from 31-35 to 27-29 µs, BENCHMARKS §37).
pub(crate) fn release_all<G>(mut guards: Vec<G>) {
    while let Some(g) = guards.pop() {
        drop(g);
    }
}

impl Partition {
    /// `state` held exclusively for a serving write (a plain vector, a batch of several
    /// partitions), timed.
    pub fn write_serving(&self) -> WriteHold<'_> {
        let guard = self.state.try_write();
        let f = &self.locks;
        let guard = guard
            .unwrap_or_else(|| waited(&f.write_waits, &f.write_wait_ns, || self.state.write()));
        self.timed(guard)
    }

    /// [`Partition::write_serving`] from a write lock of `state` already taken.
    pub fn timed<'a>(&'a self, guard: RwLockWriteGuard<'a, PartState>) -> WriteHold<'a> {
        let mut timer = self.hold_timer();
        timer.exclusive_from_now();
        WriteHold {
            guard,
            _timer: timer,
        }
    }

    /// `state` for a serving write on this partition alone (see [`WriteIntent`]), timed.
    pub fn intend_serving(&self) -> WriteIntent<'_> {
        let guard = self.state.try_upgradable_read();
        let f = &self.locks;
        let guard = guard.unwrap_or_else(|| {
            waited(&f.write_waits, &f.write_wait_ns, || {
                self.state.upgradable_read()
            })
        });
        self.intent(guard)
    }

    /// [`Partition::intend_serving`] from an upgradable lock of `state` already taken.
    fn intent<'a>(&'a self, guard: RwLockUpgradableReadGuard<'a, PartState>) -> WriteIntent<'a> {
        WriteIntent {
            guard,
            timer: self.hold_timer(),
        }
    }

    /// The timer of a writer's hold taken now, counted (sampled one in `HOLD_SAMPLE_EVERY`).
    fn hold_timer(&self) -> HoldTimer<'_> {
        let f = &self.locks;
        let n = f.write_locks.fetch_add(1, Ordering::Relaxed);
        HoldTimer {
            figures: f,
            since: (n % HOLD_SAMPLE_EVERY == 0).then(|| HoldTimes {
                taken: Instant::now(),
                upgrading: None,
                exclusive: None,
            }),
        }
    }

    /// [`Partition::intend_serving`], with the writer's lookups made first by `look` where that
    /// pays: if another writer holds `state` exclusively (or is upgrading), the writer would
    /// wait anyway, and looks up meanwhile under the read lock (`lookup::foresee`). Not where
    /// another holds only an intent: the read lock of those lookups would hold up its upgrade,
    /// which waits for the readers inside (at two threads, SET, looking first then cost 5% of
    /// the keys per CPU-second, BENCHMARKS §48); nor where no one holds it.
    pub fn intend_serving_after<T>(
        &self,
        look: impl FnOnce() -> T,
    ) -> (WriteIntent<'_>, Option<T>) {
        if let Some(g) = self.state.try_upgradable_read() {
            return (self.intent(g), None);
        }
        let looked = self.state.is_locked_exclusive().then(look);
        (self.intend_serving(), looked)
    }

    /// `state` for a serving read; a wait for it is counted.
    pub fn read_serving(&self) -> RwLockReadGuard<'_, PartState> {
        let f = &self.locks;
        self.state
            .try_read()
            .unwrap_or_else(|| waited(&f.read_waits, &f.read_wait_ns, || self.state.read()))
    }
}

/// A lock taken by `wait` after a try failed, the wait counted into `waits` and `wait_ns`.
fn waited<G>(waits: &AtomicU64, wait_ns: &AtomicU64, wait: impl FnOnce() -> G) -> G {
    let t = Instant::now();
    let g = wait();
    waits.fetch_add(1, Ordering::Relaxed);
    wait_ns.fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
    g
}
