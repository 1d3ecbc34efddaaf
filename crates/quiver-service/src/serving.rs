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
async fn meter_wakes(stalls: Arc<Stalls>, hand_off: fn() -> bool) {
    let mut quiet = QUIET_TICKS;
    loop {
        let runs = Stalls::runs_here();
        if quiet >= QUIET_TICKS {
            tokio::time::sleep(IDLE_TICK).await;
        } else {
            let due = Instant::now() + WAKE_TICK;
            tokio::time::sleep_until(due.into()).await;
            stalls
                .wakes
                .record(Instant::now().saturating_duration_since(due));
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

impl Drop for Serving {
    fn drop(&mut self) {
        self.stop();
    }
}
