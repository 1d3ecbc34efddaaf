//! Where connections run: serving threads, one event loop each.
//!
//! A node serves its connections on `threads` serving threads, each running a single-threaded
//! runtime of its own (thread per core, as Redis's event loop, Dragonfly's and Seastar's
//! shards): an accepted connection is dealt to the thread serving the fewest and stays there.
//! Why not the work-stealing runtime the rest of the server runs on: its per-thread run queue
//! holds 256 tasks, and a task woken while it is full waits in a shared queue that a worker
//! looks at only every few dozen polls — with 400 connections on one thread, a connection in
//! that queue waited ~45 ms while the others were served every ~2 ms (p99 45 ms against
//! Redis's 6 ms). A single-threaded runtime's queue is unbounded and first in, first out:
//! every connection that is ready is served once before any is served twice, so the tail
//! follows the load (see docs/design.md, "Many cores").
//!
//! A server whose engine calls block on the disk (the io_uring backend; `fsync` on a cluster
//! node: `ServerState::blocking`) and the router keep their connections on the work-stealing
//! runtime, whose `block_in_place` moves a blocked thread's other connections to another
//! thread ([`Serving::Shared`]). In `fsync` mode otherwise a connection awaits its writes'
//! fdatasyncs itself (`ServerState::defers_sync`).

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::runtime::Handle;
use tokio::sync::oneshot;

use crate::stats::Stalls;

/// The threads connections are served on.
pub enum Serving {
    /// On the runtime the server was started on (work stealing).
    Shared(Handle),
    /// On serving threads of their own.
    Threads(Vec<ServingThread>),
}

thread_local! {
    /// Set on a serving thread: its tasks never move to another thread.
    static SERVING_HERE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the calling thread is a serving thread (a single-threaded runtime: a task that
/// awaits resumes on this thread, so thread-local state is the thread's connections').
pub fn on_serving_thread() -> bool {
    SERVING_HERE.get()
}

/// One serving thread: its runtime's handle, the connections it serves, and how to stop it.
pub struct ServingThread {
    handle: Handle,
    connections: Arc<AtomicUsize>,
    stop: Mutex<Option<oneshot::Sender<()>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Serving {
    /// `threads` serving threads, each running its own single-threaded runtime until
    /// [`Serving::stop`], and on it a meter of its wakes (into `stalls`) that hands the core to
    /// a thread waiting for it while `hand_off` says so (`meter_wakes`).
    pub fn start(
        threads: usize,
        stalls: &Arc<Stalls>,
        hand_off: fn() -> bool,
    ) -> std::io::Result<Serving> {
        let mut started = Vec::with_capacity(threads);
        for i in 0..threads {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let handle = runtime.handle().clone();
            let connections = Arc::new(AtomicUsize::new(0));
            handle.spawn(meter_wakes(stalls.clone(), hand_off));
            let (stop, stopped) = oneshot::channel::<()>();
            let thread = std::thread::Builder::new()
                .name(format!("quiver-serve-{i}"))
                .spawn(move || {
                    SERVING_HERE.set(true);
                    // The runtime polls the connections dealt to it until told to stop; its
                    // drop then cancels what is left (shutdown has waited for them already).
                    let _ = runtime.block_on(stopped);
                })?;
            started.push(ServingThread {
                handle,
                connections,
                stop: Mutex::new(Some(stop)),
                thread: Mutex::new(Some(thread)),
            });
        }
        Ok(Serving::Threads(started))
    }

    /// Runs `connection` (a connection's whole life) on the serving thread with the fewest
    /// connections, or on the shared runtime. The future registers its socket with the
    /// runtime it runs on (`from_std`), so it is made there.
    pub fn spawn<F>(&self, connection: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        match self {
            Serving::Shared(handle) => {
                handle.spawn(connection);
            }
            Serving::Threads(threads) => {
                let Some(t) = threads.iter().min_by_key(|t| t.connections.load(Relaxed)) else {
                    return;
                };
                let count = t.connections.clone();
                count.fetch_add(1, Relaxed);
                t.handle.spawn(async move {
                    connection.await;
                    count.fetch_sub(1, Relaxed);
                });
            }
        }
    }

    /// Stops the serving threads (their remaining tasks are dropped) and joins them.
    pub fn stop(&self) {
        if let Serving::Threads(threads) = self {
            for t in threads {
                if let Some(stop) = t.stop.lock().take() {
                    let _ = stop.send(());
                }
            }
            for t in threads {
                if let Some(thread) = t.thread.lock().take() {
                    let _ = thread.join();
                }
            }
        }
    }
}

/// How often a wake meter asks to be woken while its thread runs requests, and while it has
/// run none for [`QUIET_TICKS`] ticks (it then only looks for the next run).
const WAKE_TICK: Duration = Duration::from_millis(1);
const IDLE_TICK: Duration = Duration::from_millis(100);
const QUIET_TICKS: u32 = 100;

/// A serving thread's wake meter: asks to be woken every [`WAKE_TICK`] and records how late
/// the wake came (tokio's timer rounds up to the next millisecond, so up to ~1 ms of that is
/// the timer's own; `Delays` counts from 5 ms). A woken task joins the back of the queue, so
/// this is what a connection made ready waits: the runs queued before it, or a stall. A thread
/// with no runs for [`QUIET_TICKS`] (idle connections, or none) is not woken a thousand times
/// a second for nothing: the meter then looks every [`IDLE_TICK`].
///
/// At each wake it also records how long the thread waited for a core since the wake before
/// (`RunDelay`; in the idle ticks only looked at): what of the lateness was the thread kept off
/// its core rather than running the connections queued before the meter.
async fn meter_wakes(stalls: Arc<Stalls>, hand_off: fn() -> bool) {
    // Opened here, on the serving thread: `thread-self` is the thread that opens it.
    let mut off_core = RunDelay::of_this_thread();
    let mut quiet = QUIET_TICKS;
    loop {
        let runs = Stalls::runs_here();
        if quiet >= QUIET_TICKS {
            tokio::time::sleep(IDLE_TICK).await;
            off_core.since_last();
        } else {
            let due = Instant::now() + WAKE_TICK;
            tokio::time::sleep_until(due.into()).await;
            stalls
                .wakes
                .record(Instant::now().saturating_duration_since(due));
            if let Some(waited) = off_core.since_last() {
                stalls.offcore.record(waited);
            }
            // The thread has been running requests: while `hand_off` says a thread that yields
            // back as often may be waiting for its core (a store's index resize), it hands the
            // core over; the scheduler would let that thread in only at a timer tick, and then
            // for a whole tick, 4-5 ms, while the requests wait (BENCHMARKS §55). With none
            // waiting this is one cheap system call.
            if hand_off() {
                std::thread::yield_now();
            }
        }
        quiet = if Stalls::runs_here() == runs {
            quiet.saturating_add(1)
        } else {
            0
        };
    }
}

/// How long the thread that made it has waited for a core, runnable, since the last look: the
/// kernel's count of the thread's run-queue delay (`/proc/thread-self/schedstat`, its second
/// field, in ns; one `pread` a look). Nothing where the kernel keeps no such count.
struct RunDelay {
    file: Option<std::fs::File>,
    last: u64,
}

/// Bytes of a schedstat line read at most (three decimal counts).
const SCHEDSTAT_BYTES_MAX: usize = 96;

impl RunDelay {
    fn of_this_thread() -> RunDelay {
        let mut delay = RunDelay {
            file: std::fs::File::open("/proc/thread-self/schedstat").ok(),
            last: 0,
        };
        delay.last = delay.read().unwrap_or(0);
        delay
    }

    /// The thread's run-queue delay so far, ns.
    fn read(&self) -> Option<u64> {
        use std::os::unix::fs::FileExt;
        let mut buf = [0u8; SCHEDSTAT_BYTES_MAX];
        let n = self.file.as_ref()?.read_at(&mut buf, 0).ok()?;
        let line = std::str::from_utf8(&buf[..n]).ok()?;
        line.split_ascii_whitespace().nth(1)?.parse().ok()
    }

    /// The wait for a core since the last call (or since it was made).
    fn since_last(&mut self) -> Option<Duration> {
        let now = self.read()?;
        let waited = now.saturating_sub(self.last);
        self.last = now;
        Some(Duration::from_nanos(waited))
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};

    use super::RunDelay;

    /// Pins the calling thread to the first CPU it may run on.
    fn pin_to_one_cpu() {
        // SAFETY: `set` is a plain bit set the calls fill and read; the calls act on the
        // calling thread (pid 0) only.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            assert_eq!(
                libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set),
                0
            );
            let first = (0..libc::CPU_SETSIZE as usize)
                .find(|&c| libc::CPU_ISSET(c, &set))
                .expect("a CPU to run on");
            libc::CPU_ZERO(&mut set);
            libc::CPU_SET(first, &mut set);
            assert_eq!(
                libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set),
                0
            );
        }
    }

    /// A thread that shares its core with another busy thread waits for it, and its meter's
    /// look at the kernel's count says so.
    #[test]
    fn a_thread_sharing_its_core_is_seen_waiting_for_it() {
        pin_to_one_cpu();
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                pin_to_one_cpu();
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            });
            let mut delay = RunDelay::of_this_thread();
            // Bounded: 200 ms of the clock, both threads busy on one core meanwhile.
            let until = Instant::now() + Duration::from_millis(200);
            while Instant::now() < until {
                std::hint::spin_loop();
            }
            stop.store(true, Ordering::Relaxed);
            let waited = delay.since_last().expect("the kernel's schedstat");
            assert!(waited > Duration::ZERO, "no wait for a shared core seen");
        });
    }
}
