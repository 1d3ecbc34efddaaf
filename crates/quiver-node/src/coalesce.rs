//! The intermediate queue (the paper's Sec. 5.3.2), on when `coalesce = "adaptive"`: GETs
//! from every connection wait in one queue, and a storage thread takes whatever is queued —
//! up to `max-vector-width` keys — as one engine `multi_get`. Under light load a vector holds
//! one request; as load grows, requests pile up while the engine works and the next vector is
//! wider: the width adapts to the load without a timer.

use std::collections::VecDeque;

use bytes::Bytes;
use parking_lot::{Condvar, Mutex};
use quiver_store::{Entry, Store};
use tokio::sync::oneshot;

use crate::store_errors::store_error;
use quiver_service::errors::err;
use quiver_service::reply::Reply;
use quiver_service::stats::Stats;

/// Requests the queue holds at most. Each connection waits for its own before sending another,
/// so `maxclients` bounds the queue already; this bound says so, and refuses rather than grows
/// if that ever changes.
pub const QUEUE_REQUESTS_MAX: usize = 65_536;

/// What one connection's keys hold (of any kind), or the error reply for all of them.
pub type GetResult = Result<Vec<Option<Entry>>, Reply>;

struct Pending {
    keys: Vec<Bytes>,
    reply: oneshot::Sender<GetResult>,
}

#[derive(Default)]
struct Queue {
    pending: VecDeque<Pending>,
    closed: bool,
}

/// The queue shared by the connections and the storage thread.
#[derive(Default)]
pub struct Coalescer {
    queue: Mutex<Queue>,
    ready: Condvar,
}

impl Coalescer {
    /// Queues `keys` and waits for their values.
    pub async fn get(&self, keys: Vec<Bytes>) -> GetResult {
        let (tx, rx) = oneshot::channel();
        {
            let mut q = self.queue.lock();
            if q.closed {
                return Err(err("ERR server is shutting down"));
            }
            if q.pending.len() >= QUEUE_REQUESTS_MAX {
                return Err(err("ERR the intermediate queue is full: try again"));
            }
            q.pending.push_back(Pending { keys, reply: tx });
        }
        self.ready.notify_one();
        rx.await
            .unwrap_or_else(|_| Err(err("ERR server is shutting down")))
    }

    /// Stops the storage thread once the queue is empty.
    pub fn close(&self) {
        self.queue.lock().closed = true;
        self.ready.notify_all();
    }

    /// The storage thread's loop: serves the queue from `store` until [`Coalescer::close`],
    /// at most `width_max()` keys per engine call (`max-vector-width`, as set now), recording
    /// each call's width in `stats`.
    pub fn serve(&self, store: &Store, stats: &Stats, width_max: impl Fn() -> usize) {
        let c = self;
        loop {
            // Take every queued request up to the width limit (at least one).
            let batch: Vec<Pending> = {
                let mut q = c.queue.lock();
                while q.pending.is_empty() && !q.closed {
                    c.ready.wait(&mut q);
                }
                if q.pending.is_empty() {
                    return;
                }
                let (mut keys, width_max) = (0, width_max());
                let mut batch = Vec::new();
                while let Some(p) = q.pending.front() {
                    if !batch.is_empty() && keys + p.keys.len() > width_max {
                        break;
                    }
                    keys += p.keys.len();
                    let Some(p) = q.pending.pop_front() else {
                        break;
                    };
                    batch.push(p);
                }
                batch
            };
            let keys: Vec<&Bytes> = batch.iter().flat_map(|p| &p.keys).collect();
            stats.vector_width(keys.len() as u64);
            match store.multi_get_entries(&keys) {
                Ok(values) => {
                    let mut values = values.into_iter();
                    for p in batch {
                        let mine: Vec<Option<Entry>> = values.by_ref().take(p.keys.len()).collect();
                        // The connection may have gone away meanwhile: nothing to do then.
                        let _ = p.reply.send(Ok(mine));
                    }
                }
                Err(e) => {
                    let reply = store_error(&e);
                    for p in batch {
                        let _ = p.reply.send(Err(reply.clone()));
                    }
                }
            }
        }
    }
}
