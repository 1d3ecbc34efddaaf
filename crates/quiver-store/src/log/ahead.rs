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
//! store takes, large folios and all, without touching the bytes), so the appender finds them
//! mapped writable, and the cost lands on a thread the scheduler can preempt.
//!
//! Best effort: where the kernel lacks the call (before 5.14) or it fails, the appender
//! faults the pages in itself, as without this. Only in `os` durability: a page faulted in
//! ahead is dirty at once, and in `fsync` mode each fdatasync would write the zeros ahead
//! of the end too, then the same pages again once records fill them.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex};

/// Bytes faulted in per step. Between two steps the thread yields its core: woken after a
/// sleep, the scheduler would otherwise let it run on for tens of milliseconds (it is owed
/// the time it slept) while a serving thread on the same core waits — the stall this thread
/// is there to take away (BENCHMARKS §36). A step is also the longest a sealing appender
/// waits for the region's lock.
const STEP_BYTES: u64 = 64 << 10;
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
        loop {
            let mut closed = self.closed.lock();
            if *closed {
                return;
            }
            let from = self.done.load(Ordering::Relaxed);
            let wanted = self.wanted.load(Ordering::SeqCst) / PAGE * PAGE;
            let to = wanted.min(from + STEP_BYTES).min(self.map.len() as u64);
            if to <= from {
                return;
            }
            // SAFETY: `from..to` is a page-aligned range inside the mapping (which lives as
            // long as `self`). MADV_POPULATE_WRITE only faults the pages in writable; it
            // changes no byte, so the appender may be storing into the same pages meanwhile.
            // The range lies in blocks the appender reserved, so no fault there allocates.
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
                return;
            }
            self.done.store(to, Ordering::Relaxed);
            drop(closed);
            std::thread::yield_now();
        }
    }
}

impl PagesAhead {
    pub fn start() -> std::io::Result<PagesAhead> {
        let shared = Arc::new(Shared {
            queue: Mutex::new(VecDeque::new()),
            wake: Condvar::new(),
            stop: AtomicBool::new(false),
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("quiver-pages".into())
            .spawn(move || run(&s))?;
        Ok(PagesAhead {
            shared,
            thread: Some(thread),
        })
    }

    /// The appender has reserved `region`'s blocks up to `to`: fault their pages in.
    pub fn want(&self, region: &Arc<Region>, to: u64) {
        // SeqCst here and in `run`/`fault_in`: either this finds the region still queued and
        // the thread's later read of `wanted` sees `to`, or it queues the region again.
        region.wanted.fetch_max(to, Ordering::SeqCst);
        if region.queued.swap(true, Ordering::SeqCst) {
            return;
        }
        self.shared.queue.lock().push_back(region.clone());
        self.shared.wake.notify_one();
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
                if let Some(r) = queue.pop_front() {
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
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(dir.path().join("segment"))
            .unwrap();
        file.set_len(4 * MIB).unwrap();
        let head: Vec<u8> = (0..PAGE).map(|i| (i % 251) as u8 + 1).collect();
        std::os::unix::fs::FileExt::write_all_at(&file, &head, 0).unwrap();
        let map = memmap2::MmapOptions::new()
            .len(4 * MIB as usize)
            .map_raw(&file)
            .unwrap();
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
}
