//! The MSETs of every connection of a serving thread committed as one compound batch.
//!
//! A group of MSETs (`Vector::AtomicPut`) is a compound batch: all or nothing, every partition
//! it touches locked for its whole commit, and in `fsync` mode its parts fdatasynced (under
//! those locks) before its commit record. A batch per connection made those costs per
//! connection: one thread serving eight connections of pipelined MSETs committed their
//! batches one after another, each waiting for two rounds of fdatasyncs; and with several
//! serving threads, MSETs over uniform keys take every partition's write lock in turn, one
//! batch at a time, each lock and the lines it guards handed from core to core per batch
//! (BENCHMARKS §37: a batch held each lock 51-65 µs on 8 cores, 21-24 µs on one). Redis with
//! `appendfsync always` syncs once per turn of its event loop for all its clients; here, the
//! groups that a serving thread's connections hand over in one turn go to the engine as one
//! batch (where `applies`). The first connection to hand one over leads: it yields once, so that every
//! connection ready on the thread runs up to its own group, then commits what was handed over
//! (batches of at most [`COMBINED_KEYS_MAX`] keys, one database each) and gives each
//! connection its batch's outcome and what its replies wait for (`SyncWait`).
//!
//! Each MSET stays atomic (the batch is), and a connection's later commands still see its
//! MSETs (it waits for the outcome before going on). A key that two connections set keeps the
//! value of the later hand-over, as if that MSET ran second: both were in flight at once.
//! A failed batch fails every MSET in it, as a failed batch of one connection's group does.

use std::cell::RefCell;

use std::collections::HashMap;

use bytes::Bytes;
use quiver_store::{Batch, BatchAction, SyncWait};
use tokio::sync::oneshot;

use crate::state::ServerState;
use crate::store_errors::store_error;
use quiver_service::errors::err;
use quiver_service::reply::Reply;

/// Most keys of one combined batch: it holds its partitions' locks for its whole commit (about
/// a microsecond a key on one core), so about a millisecond at most. A group wider than this
/// goes alone (it is never split).
pub const COMBINED_KEYS_MAX: usize = 1024;

/// How a handed-over group ended: the batch's outcome (an error answers each of its MSETs),
/// and, in `fsync` mode, the positions its replies wait for.
pub struct Outcome {
    pub result: Result<(), Reply>,
    pub durable: SyncWait,
}

/// A group handed over: its database, its pairs, and where its outcome goes.
struct Handed {
    db: u32,
    pairs: Vec<(Bytes, Bytes)>,
    outcome: oneshot::Sender<Outcome>,
}

/// This thread's groups waiting for the leader of the turn.
#[derive(Default)]
struct Turn {
    handed: Vec<Handed>,
    /// A connection leads this turn (it commits what is handed over).
    leading: bool,
}

thread_local! {
    static TURN: RefCell<Turn> = RefCell::default();
}

/// Whether groups of MSETs are combined (see the module documentation): in `fsync` mode, or
/// with several serving threads — not on one thread in `os` or `none` mode, where it saved
/// nothing measurable and makes every MSET of a turn wait for the whole turn (BENCHMARKS
/// §31, §46); only on a serving thread (the turn is the thread's) whose engine calls do not
/// block, of a node that is no member of a cluster (a cluster node checks and replicates
/// each connection's writes itself).
pub fn applies(state: &ServerState) -> bool {
    (state.fsync() || state.serving_threads > 1)
        && !state.blocking()
        && quiver_service::serving::on_serving_thread()
        && state.cluster.is_none()
}

/// Commits `pairs` (a group of MSETs of database `db`) with the groups the thread's other
/// connections hand over in this turn; see the module documentation. Only where [`applies`].
pub async fn commit(state: &ServerState, db: u32, pairs: Vec<(Bytes, Bytes)>) -> Outcome {
    let (tx, rx) = oneshot::channel();
    let lead = TURN.with(|t| {
        let mut t = t.borrow_mut();
        t.handed.push(Handed {
            db,
            pairs,
            outcome: tx,
        });
        !std::mem::replace(&mut t.leading, true)
    });
    if lead {
        let _leading = Leading;
        tokio::task::yield_now().await;
        commit_handed(state);
    }
    rx.await.unwrap_or_else(|_| Outcome {
        result: Err(err("ERR server is shutting down")),
        durable: SyncWait::default(),
    })
}

/// The leader's hold on the turn: let go when it has committed, or if its task is dropped
/// before (the runtime stops), the groups still waiting answered with an error.
struct Leading;

impl Drop for Leading {
    fn drop(&mut self) {
        let _ = TURN.try_with(|t| {
            let mut t = t.borrow_mut();
            t.leading = false;
            t.handed.clear();
        });
    }
}

/// Commits every group handed over so far, a batch at a time, and sends each its outcome.
fn commit_handed(state: &ServerState) {
    while let Some(groups) = TURN.with(|t| next_batch(&mut t.borrow_mut().handed)) {
        let db = groups[0].db;
        let batch = atomic_batch(
            db,
            groups.iter().map(|g| g.pairs.len()).sum(),
            groups
                .iter()
                .flat_map(|g| g.pairs.iter().map(|(k, v)| (k, v))),
        );
        state.core.stats.vector_width(batch.len() as u64);
        // `applies` holds: the batch's fdatasyncs are each connection's to await.
        let (result, durable) = state.store.deferring_sync(|| state.store.apply(&batch));
        let result = result.map(|_| ()).map_err(|e| store_error(&e));
        for g in groups {
            // A receiver gone (its connection's task dropped) needs nothing.
            let _ = g.outcome.send(Outcome {
                result: result.clone(),
                durable: durable.clone(),
            });
        }
    }
}

/// The next batch's groups, taken from `handed`: the first group's database, in order of
/// hand-over, up to `COMBINED_KEYS_MAX` keys (at least one group). `None`: nothing is left.
fn next_batch(handed: &mut Vec<Handed>) -> Option<Vec<Handed>> {
    let db = handed.first()?.db;
    let mut keys = 0;
    let mut taken = Vec::new();
    let mut left = Vec::new();
    for g in handed.drain(..) {
        let fits = taken.is_empty() || keys + g.pairs.len() <= COMBINED_KEYS_MAX;
        if g.db == db && fits && left.is_empty() {
            keys += g.pairs.len();
            taken.push(g);
        } else {
            left.push(g);
        }
    }
    *handed = left;
    Some(taken)
}

/// The compound batch of MSETs in database `db` (one group, or several combined): every
/// pair, in order, without preconditions (one batch: all or nothing, each MSET with it); a key
/// given twice keeps its last value, as if the MSETs ran one by one. `n`: how many pairs.
pub fn atomic_batch<'a>(
    db: u32,
    n: usize,
    pairs: impl Iterator<Item = (&'a Bytes, &'a Bytes)>,
) -> Batch {
    let mut batch = Batch::new();
    batch.in_db(db);
    // Sized once: grown pair by pair, the map and the ops reallocated several times a batch.
    batch.ops.reserve(n);
    let mut at: HashMap<&Bytes, usize, foldhash::fast::RandomState> =
        HashMap::with_capacity_and_hasher(n, Default::default());
    for (k, v) in pairs {
        match at.get(k) {
            Some(&i) => batch.ops[i].action = BatchAction::Put(v.clone()),
            None => {
                at.insert(k, batch.ops.len());
                batch.put(k.clone(), v.clone());
            }
        }
    }
    batch
}
