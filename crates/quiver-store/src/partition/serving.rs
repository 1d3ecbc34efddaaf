//! A partition's `state` lock ([`StateLock`]), how the serving paths take it — writers as an
//! intent, then exclusively, readers shared — and the figures kept of their waits and holds.

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::{RwLock, RwLockReadGuard, RwLockUpgradableReadGuard, RwLockWriteGuard};

use super::{PartState, Partition};

/// A partition's `state` lock: parking_lot's `RwLock`, whose exclusive lock is always taken
/// as an intent (an upgradable read lock) first, then upgraded.
///
/// The rule that keeps the locks of several partitions free of deadlock: they are taken in
/// ascending id order, and a thread that holds a partition exclusively waits for nothing but
/// the readers of a higher partition whose intent it holds. So a writer of several takes
/// intents on all of them first, then upgrades them in ascending order ([`intend_all`],
/// [`upgrade_all`], [`write_all`]). Then every wait is for a partition higher than the
/// waiter's, or for the readers of one: a reader holding partition p waits only for a higher
/// one that a writer holds exclusively or is upgrading; that writer holds every intent it
/// needs, so it waits only for the readers of its next upgrade, higher still; a writer taking
/// intents waits for a higher partition's intent, whose holder is one of these two.
///
/// "A reader waits only for a writer holding the partition exclusively" holds only if no
/// thread ever waits in parking_lot's `write()`: a thread parked there stands in the queue
/// before the readers that came after it, and when the lock is let go only it is woken; if an
/// intent is taken before it gets the lock, it parks again, and the readers behind it stay
/// parked beside a lock they could share until the intent's holder lets go. A writer of
/// several holding that intent and upgrading a lower partition whose reader is one of them
/// never does (seen: a compaction's `write()`, two batches and a multi-get, stuck). Parked as
/// intents, writers are woken with every reader; so [`StateLock::write`] is an intent and
/// its upgrade, and `state` offers no other way to wait for the lock exclusively.
pub(crate) struct StateLock<T = PartState>(RwLock<T>);

impl<T> StateLock<T> {
    pub fn new(st: T) -> StateLock<T> {
        StateLock(RwLock::new(st))
    }

    pub fn read(&self) -> RwLockReadGuard<'_, T> {
        self.0.read()
    }

    pub fn try_read(&self) -> Option<RwLockReadGuard<'_, T>> {
        self.0.try_read()
    }

    pub fn upgradable_read(&self) -> RwLockUpgradableReadGuard<'_, T> {
        self.0.upgradable_read()
    }

    pub fn try_upgradable_read(&self) -> Option<RwLockUpgradableReadGuard<'_, T>> {
        self.0.try_upgradable_read()
    }

    /// The exclusive lock, waiting for it as an intent, then for the readers inside.
    pub fn write(&self) -> RwLockWriteGuard<'_, T> {
        RwLockUpgradableReadGuard::upgrade(self.0.upgradable_read())
    }

    #[cfg(test)]
    pub fn try_write(&self) -> Option<RwLockWriteGuard<'_, T>> {
        self.0.try_write()
    }

    /// Whether a writer holds it exclusively or is upgrading (readers wait).
    pub fn is_locked_exclusive(&self) -> bool {
        self.0.is_locked_exclusive()
    }
}

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
/// then. A writer of several partitions takes them as [`intend_all`] says.
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

/// The intents of a writer of several partitions (ascending ids), waiting for each; it then
/// upgrades them in that order ([`upgrade_all`]). See [`StateLock`] for why in that way.
pub(crate) fn intend_all<'p>(parts: &[&'p Arc<Partition>]) -> Vec<WriteIntent<'p>> {
    parts.iter().map(|p| p.intend_serving()).collect()
}

/// [`intend_all`], with the writer's lookups made first by `look` where that pays: as
/// [`Partition::intend_serving_after`] says for one partition, only if another writer holds
/// one of `parts` exclusively (or is upgrading it).
pub(crate) fn intend_all_after<'p, T>(
    parts: &[&'p Arc<Partition>],
    look: impl FnOnce() -> T,
) -> (Vec<WriteIntent<'p>>, Option<T>) {
    if let Some(intents) = try_intend_all(parts) {
        return (intents, None);
    }
    let contended = parts.iter().any(|p| p.state.is_locked_exclusive());
    let looked = contended.then(look);
    (intend_all(parts), looked)
}

/// The intents of `parts` (ascending ids) if no other writer holds any of them.
fn try_intend_all<'p>(parts: &[&'p Arc<Partition>]) -> Option<Vec<WriteIntent<'p>>> {
    let mut held = Vec::with_capacity(parts.len());
    for part in parts {
        match part.state.try_upgradable_read() {
            Some(g) => held.push(part.intent(g)),
            None => {
                release_all(held);
                return None;
            }
        }
    }
    Some(held)
}

/// The exclusive holds of a writer's intents (ascending ids), upgraded in that order: each
/// upgrade waits for its partition's readers (see [`intend_all`]).
pub(crate) fn upgrade_all(intents: Vec<WriteIntent<'_>>) -> Vec<WriteHold<'_>> {
    intents.into_iter().map(WriteIntent::upgrade).collect()
}

/// Maintenance's write locks of several partitions, untimed, in the order given, taken as a
/// serving writer of several takes them ([`StateLock`]): intents in ascending id order, then
/// upgrades. (A merge's sources come in slot order, which need not be id order: a partition
/// split off gets the largest id and the upper half of the range.)
pub(crate) fn write_all<'p>(
    parts: impl IntoIterator<Item = &'p Arc<Partition>>,
) -> Vec<RwLockWriteGuard<'p, PartState>> {
    let mut by_id: Vec<(usize, &Arc<Partition>)> = parts.into_iter().enumerate().collect();
    by_id.sort_unstable_by_key(|(_, p)| p.id);
    let intents: Vec<_> = by_id
        .into_iter()
        .map(|(at, p)| (at, p.state.upgradable_read()))
        .collect();
    let mut held: Vec<_> = intents
        .into_iter()
        .map(|(at, g)| (at, RwLockUpgradableReadGuard::upgrade(g)))
        .collect();
    held.sort_unstable_by_key(|&(at, _)| at);
    held.into_iter().map(|(_, g)| g).collect()
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

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::sync::Arc;
    use std::thread;
    use std::time::Duration;

    use super::{write_all, StateLock};
    use crate::{BackendKind, Options, Store};

    /// Two writers waiting for the lock, then a reader; the first writer to get it lets go
    /// and at once takes an intent: the reader must get in beside the intent. With parking_lot's
    /// `write()` that let-go woke only the second writer (the queue's head), which found the
    /// intent and parked again, and the reader stayed parked until the intent was let go —
    /// which a writer of several, upgrading a lower partition this reader holds, never does.
    #[test]
    fn a_reader_waiting_behind_writers_gets_in_beside_an_intent() {
        let lock = Arc::new(StateLock::new(0u32));
        let held = lock.write();
        let (intent_taken, taken) = mpsc::channel();
        let (let_go, release) = mpsc::channel::<()>();
        let first = {
            let lock = Arc::clone(&lock);
            thread::spawn(move || {
                let g = lock.write();
                drop(g);
                let intent = lock.upgradable_read();
                intent_taken.send(()).unwrap();
                release.recv().unwrap();
                drop(intent);
            })
        };
        // Each waiter is given time to park before the next comes (the queue's order): the
        // outcome does not depend on it, the old lock's failure did.
        let pause = || thread::sleep(Duration::from_millis(100));
        pause();
        let second = {
            let lock = Arc::clone(&lock);
            thread::spawn(move || *lock.write() += 1)
        };
        pause();
        let (tx, rx) = mpsc::channel();
        let reader = {
            let lock = Arc::clone(&lock);
            thread::spawn(move || tx.send(*lock.read()).unwrap())
        };
        pause();
        drop(held);
        taken.recv().unwrap();
        let read = rx.recv_timeout(Duration::from_secs(5));
        let_go.send(()).unwrap();
        for t in [first, second, reader] {
            t.join().unwrap();
        }
        assert!(read.is_ok(), "the reader stayed parked beside an intent");
        assert_eq!(*lock.read(), 1);
    }

    /// A merge's sources come in slot order, which after a split is not id order (the new
    /// partition, the largest id, takes the upper part of its source's range): `write_all`
    /// takes them in id order all the same, so it never holds a higher partition while it
    /// waits for a lower one that a writer of both holds. In slot order it held partition 2
    /// waiting for 1, while batches hold 1 waiting for 2.
    #[test]
    fn several_partitions_are_locked_in_id_order_whatever_order_they_come_in() {
        let dir = tempfile::tempdir().unwrap();
        let opts = Options {
            partitions: 2,
            background: false,
            backend: BackendKind::Pread,
            disk_reserve_bytes: 1 << 20,
            ..Options::default()
        };
        let s = Store::open(dir.path(), opts).unwrap();
        s.split(4096).unwrap();
        let table = s.inner().table();
        // Slot order: partition 0, the new 2, then 1.
        let (upper, lower) = (&table.parts[1], &table.parts[2]);
        assert_eq!((upper.id, lower.id), (2, 1));
        let intent = lower.state.upgradable_read();
        thread::scope(|scope| {
            let taker = scope.spawn(|| write_all([upper, lower]).len());
            thread::sleep(Duration::from_millis(100));
            // The taker waits for partition 1 holding nothing: a writer holding 1 can take 2.
            assert!(upper.state.try_upgradable_read().is_some());
            drop(intent);
            assert_eq!(taker.join().unwrap(), 2);
        });
        drop(table);
        s.close().unwrap();
    }
}
