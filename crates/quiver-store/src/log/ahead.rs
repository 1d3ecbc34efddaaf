//! The pages of the log's reserved blocks faulted in ahead of the appender, on a thread of
//! the store's own.
//!
//! An append into the mapped active segment (`writer`) that is the first store to a page
//! takes a page fault: the kernel adds page-cache folios, zeroes them (the blocks are
//! fallocated but unwritten) and maps them writable. On this project's virtual machine that
//! costs ~2 µs per 4 KiB, and where the guest's memory was never touched before, runs of
//! tens of milliseconds at a time (BENCHMARKS §33 item 4, §36) — inside a serving thread's
//! run, holding every connection of the thread. Here a thread faults in the pages of the
//! blocks the appender has reserved ahead of its end (`MADV_POPULATE_WRITE`: the fault path a
//! store takes, a page at a time as the mapping is advised, without touching the bytes; see
//! `Segment::map_for_appends`), so the appender finds them
//! mapped writable, and the cost lands on a thread the scheduler can preempt.
//!
//! The thread shares its cores with the serving threads, and when they keep every core busy it
//! falls behind, so a writer helps: having let go of its locks, it faults in one step of a
//! queued region itself (`PagesAhead::help`). The cost is the same, but it is paid outside
//! the partition locks, which a batch holds on every partition it touches (the faults were a
//! third of an MSET's hold on one core, BENCHMARKS §37).
//!
//! Best effort: where the kernel lacks the call (before 5.14) or it fails, the appender
//! faults the pages in itself, as without this. Only in `os` durability: a page faulted in
//! ahead is dirty at once, and in `fsync` mode each fdatasync would write the zeros ahead
//! of the end too, then the same pages again once records fill them.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex};

/// Bytes faulted in per step. Between two steps the thread yields its core: woken after a
/// sleep, the scheduler would otherwise let it run on for tens of milliseconds (it is owed
/// the time it slept) while a serving thread on the same core waits — the stall this thread
/// is there to take away (BENCHMARKS §36). A step is also the longest a sealing appender
/// waits for the region's lock.
const STEP_BYTES: u64 = 64 << 10;
/// Bytes a writer faults in when it helps (`PagesAhead::help`): far more than a write vector
/// appends (an MSET of 32 small pairs: ~2.5 KiB), so helpers keep ahead, and a few pages, so
/// that a helper pays about what its own appends' faults would have cost it.
const HELP_BYTES: u64 = 16 << 10;
/// The page size the log's mappings are handled in (x86-64 and arm64 with 4 KiB pages).
pub(crate) const PAGE: u64 = 4096;

/// The thread and its queue of regions with pages to fault in.
pub struct PagesAhead {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

struct Shared {
    /// Regions with pages wanted; a region is queued once at a time (`Region::queued`), so
    /// the queue holds at most one entry per active segment.
    queue: Mutex<VecDeque<Arc<Region>>>,
    /// The queue's length, read by writers without the lock (`help`): a line written only
    /// when a region is queued or taken, once per megabyte or so of a partition's appends.
    queued: AtomicUsize,
    wake: Condvar,
    stop: AtomicBool,
}

/// An active segment's writable mapping, and how far its pages are faulted in.
pub struct Region {
    map: memmap2::MmapRaw,
    /// Pages are faulted in up to here (a page boundary).
    done: AtomicU64,
    /// Pages are wanted up to here: the blocks the appender has reserved.
    wanted: AtomicU64,
    queued: AtomicBool,
    /// Held while a step is faulted in; `true` once the segment is sealed (its blocks past
    /// the end are given back: no page there may be made dirty again) or a step failed.
    closed: Mutex<bool>,
}

impl Region {
    /// `map` covers the segment; the appender's end is `end`, below which nothing is wanted.
    pub fn new(map: memmap2::MmapRaw, end: u64) -> Region {
        let from = end / PAGE * PAGE;
        Region {
            map,
            done: AtomicU64::new(from),
            wanted: AtomicU64::new(from),
            queued: AtomicBool::new(false),
            closed: Mutex::new(false),
        }
    }

    pub fn map(&self) -> &memmap2::MmapRaw {
        &self.map
    }

    /// No more pages are faulted in, from the end of the step under way on.
    pub fn close(&self) {
        *self.closed.lock() = true;
    }

    /// Faults in the wanted pages, a step at a time.
    fn fault_in(&self) {
        while self.fault_step(STEP_BYTES) {
            std::thread::yield_now();
        }
    }

    /// Faults in the next `step` bytes of the wanted pages; whether more are wanted after them.
    fn fault_step(&self, step: u64) -> bool {
        let mut closed = self.closed.lock();
        if *closed {
            return false;
        }
        let from = self.done.load(Ordering::Relaxed);
        let wanted = self.wanted.load(Ordering::SeqCst) / PAGE * PAGE;
        let to = wanted.min(from + step).min(self.map.len() as u64);
        if to <= from {
            return false;
        }
        // SAFETY: `from..to` is a page-aligned range inside the mapping (which lives as long
        // as `self`). MADV_POPULATE_WRITE only faults the pages in writable; it changes no
        // byte, so the appender may be storing into the same pages meanwhile. The range lies
        // in blocks the appender reserved, so no fault there allocates.
        let r = unsafe {
            libc::madvise(
                self.map.as_mut_ptr().add(from as usize).cast(),
                (to - from) as usize,
                libc::MADV_POPULATE_WRITE,
            )
        };
        if r != 0 {
            // An old kernel (EINVAL), or a page that could not be made writable: the
            // appender's own stores fault them in, as without this.
            *closed = true;
            return false;
        }
        self.done.store(to, Ordering::Relaxed);
        to < wanted.min(self.map.len() as u64)
    }
}

impl PagesAhead {
    pub fn start() -> std::io::Result<PagesAhead> {
        let mut ahead = PagesAhead::idle();
        let s = ahead.shared.clone();
        let thread = std::thread::Builder::new()
            .name("quiver-pages".into())
            .spawn(move || run(&s))?;
        ahead.thread = Some(thread);
        Ok(ahead)
    }

    /// The queue without its thread: only helpers fault pages in (the thread is started by
    /// `start`; tests use it alone).
    fn idle() -> PagesAhead {
        PagesAhead {
            shared: Arc::new(Shared {
                queue: Mutex::new(VecDeque::new()),
                queued: AtomicUsize::new(0),
                wake: Condvar::new(),
                stop: AtomicBool::new(false),
            }),
            thread: None,
        }
    }

    /// The appender has reserved `region`'s blocks up to `to`: fault their pages in.
    pub fn want(&self, region: &Arc<Region>, to: u64) {
        // SeqCst here and in `run`/`fault_in`: either this finds the region still queued and
        // the thread's later read of `wanted` sees `to`, or it queues the region again.
        region.wanted.fetch_max(to, Ordering::SeqCst);
        if region.queued.swap(true, Ordering::SeqCst) {
            return;
        }
        let mut queue = self.shared.queue.lock();
        queue.push_back(region.clone());
        self.shared.queued.store(queue.len(), Ordering::Relaxed);
        drop(queue);
        self.shared.wake.notify_one();
    }

    /// A writer that has let go of its locks faults in one step of a queued region, if the
    /// thread has left one (it falls behind when the serving threads keep every core busy).
    /// Costs a read of a line that is rarely written when nothing is queued.
    pub fn help(&self) {
        if self.shared.queued.load(Ordering::Relaxed) == 0 {
            return;
        }
        let Some(region) = self.shared.take() else {
            return;
        };
        // As in `run`: cleared first, so that a request made meanwhile queues it again.
        region.queued.store(false, Ordering::SeqCst);
        if region.fault_step(HELP_BYTES) {
            self.want(&region, region.wanted.load(Ordering::SeqCst));
        }
    }
}

impl Shared {
    /// The region first in the queue, if any.
    fn take(&self) -> Option<Arc<Region>> {
        self.pop(&mut self.queue.lock())
    }

    /// The region first in `queue` (this queue, locked), keeping `queued` its length.
    fn pop(&self, queue: &mut VecDeque<Arc<Region>>) -> Option<Arc<Region>> {
        let region = queue.pop_front();
        self.queued.store(queue.len(), Ordering::Relaxed);
        region
    }
}

impl Drop for PagesAhead {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.wake.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(shared: &Shared) {
    loop {
        let region = {
            let mut queue = shared.queue.lock();
            loop {
                if shared.stop.load(Ordering::Acquire) {
                    return;
                }
                if let Some(r) = shared.pop(&mut queue) {
                    break r;
                }
                shared.wake.wait(&mut queue);
            }
        };
        // Cleared first: a request made while this one is served queues the region again.
        region.queued.store(false, Ordering::SeqCst);
        region.fault_in();
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    const MIB: u64 = 1 << 20;

    /// A mapped file of `len` zero bytes.
    fn mapped(dir: &std::path::Path, len: u64) -> (std::fs::File, memmap2::MmapRaw) {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(dir.join("segment"))
            .unwrap();
        file.set_len(len).unwrap();
        let map = memmap2::MmapOptions::new()
            .len(len as usize)
            .map_raw(&file)
            .unwrap();
        (file, map)
    }

    /// Which pages of `map`'s first `len` bytes are in the page cache.
    fn resident(map: &memmap2::MmapRaw, len: u64) -> Vec<bool> {
        let mut vec = vec![0u8; (len / PAGE) as usize];
        // SAFETY: the range lies inside the mapping, `vec` holds a byte per page.
        let r = unsafe { libc::mincore(map.as_mut_ptr().cast(), len as usize, vec.as_mut_ptr()) };
        assert_eq!(r, 0, "mincore: {}", std::io::Error::last_os_error());
        vec.iter().map(|b| b & 1 == 1).collect()
    }

    /// The pages wanted are brought in without a byte of the file changing;
    /// once the region is closed, no more are.
    #[test]
    fn wanted_pages_are_faulted_in_unchanged_and_none_once_closed() {
        let dir = tempfile::tempdir().unwrap();
        let (file, map) = mapped(dir.path(), 4 * MIB);
        let head: Vec<u8> = (0..PAGE).map(|i| (i % 251) as u8 + 1).collect();
        std::os::unix::fs::FileExt::write_all_at(&file, &head, 0).unwrap();
        let region = Arc::new(Region::new(map, 100));
        let ahead = PagesAhead::start().unwrap();
        ahead.want(&region, MIB + 10);
        let deadline = Instant::now() + Duration::from_secs(30);
        while region.done.load(Ordering::Relaxed) < MIB && !*region.closed.lock() {
            assert!(Instant::now() < deadline, "no progress faulting pages in");
            std::thread::sleep(Duration::from_millis(1));
        }
        if *region.closed.lock() {
            eprintln!("MADV_POPULATE_WRITE failed (a kernel before 5.14?): appends fault pages in themselves");
            return;
        }
        // Whole pages, up to the last one wanted whole.
        assert_eq!(region.done.load(Ordering::Relaxed), MIB);
        let pages = resident(region.map(), 2 * MIB);
        let wanted = (MIB / PAGE) as usize;
        assert!(
            pages[..wanted].iter().all(|&r| r),
            "a wanted page is not resident"
        );
        drop(ahead);

        let mut back = vec![0u8; (2 * MIB) as usize];
        std::os::unix::fs::FileExt::read_exact_at(&file, &mut back, 0).unwrap();
        assert_eq!(&back[..PAGE as usize], &head[..]);
        assert!(back[PAGE as usize..].iter().all(|&b| b == 0));

        region.close();
        region.wanted.store(3 * MIB, Ordering::SeqCst);
        region.fault_in();
        assert_eq!(region.done.load(Ordering::Relaxed), MIB);
    }

    /// Without the thread, writers' help faults the wanted pages in, a small step per call,
    /// the region queued again while pages are still wanted; with nothing queued, help does
    /// nothing.
    #[test]
    fn helpers_fault_in_a_step_each_until_nothing_is_wanted() {
        let dir = tempfile::tempdir().unwrap();
        let (_file, map) = mapped(dir.path(), MIB);
        let region = Arc::new(Region::new(map, 0));
        let ahead = PagesAhead::idle();
        ahead.help();
        assert_eq!(region.done.load(Ordering::Relaxed), 0);
        let wanted = 3 * HELP_BYTES + PAGE;
        ahead.want(&region, wanted + 10);
        ahead.help();
        if *region.closed.lock() {
            eprintln!("MADV_POPULATE_WRITE failed (a kernel before 5.14?): appends fault pages in themselves");
            return;
        }
        assert_eq!(region.done.load(Ordering::Relaxed), HELP_BYTES);
        assert!(
            region.queued.load(Ordering::SeqCst),
            "more is wanted: queued again"
        );
        let mut helps = 1;
        while ahead.shared.queued.load(Ordering::Relaxed) > 0 {
            ahead.help();
            helps += 1;
            assert!(
                helps <= 4,
                "a step each: four steps fault in three and a page"
            );
        }
        assert_eq!(helps, 4);
        assert_eq!(region.done.load(Ordering::Relaxed), wanted);
        assert!(!region.queued.load(Ordering::SeqCst));
        let pages = resident(region.map(), MIB);
        assert!(pages[..(wanted / PAGE) as usize].iter().all(|&r| r));
    }
}
