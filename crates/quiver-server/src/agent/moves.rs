//! Moving a range of slots from this node (A) to another (B), driven by A, on a thread of its
//! own. The steps (the target's side is `cmd::rangeimport`):
//!
//! 1. **Attempt**: the migration's attempt counter is raised in etcd. Any hand-over
//!    transaction a previous run of A computed (and may have sent before crashing) compares
//!    an older revision, so it can no longer apply; only now may writes that a restart froze
//!    run again.
//! 2. **Copy**: B drops whatever it has of the range (`RANGEIMPORT BEGIN`), then receives the
//!    engine's range export: a consistent snapshot, then the keys written since, in rounds
//!    until few are left (`RANGEIMPORT ITEMS`, each acknowledged once B applied it).
//! 3. **Freeze**: writes to the range on A wait (`cluster::ClusterNode::freeze` returns once
//!    none is in flight); the last keys written are sent.
//! 4. **Hand over**: one etcd transaction ends the migration and gives the range to B. A
//!    does not let a write to the range run until it knows the outcome: a lost answer (the
//!    kvrocks bug where both nodes took writes for a slot) is resolved by reading the
//!    topology again, as long as it takes; reads of the range wait too from the moment the
//!    transaction may commit (B may be serving the range then). Handed over, A has B adopt
//!    the new topology (`RANGEIMPORT END`, bounded), adopts it itself (the waiting requests
//!    now get MOVED to B, which serves them), and drops the range (through the pending drops).
//!
//! Any failure before the hand-over aborts the migration in etcd (the range stays A's, with
//! everything acknowledged) and B drops what it received. A crash of A, B or the mover at
//! any step leaves the range with exactly one owner holding every acknowledged write: A
//! until the hand-over committed, B from then on.

use std::time::Duration;

use bytes::Bytes;
use quiver_client::{ClientOptions, Connection, Value};
use quiver_cluster::meta::{Meta, MetaError};
use quiver_cluster::{Migration, Topology};
use quiver_store::slot::SlotRange;
use quiver_store::{RangeExport, RangeItem};

use crate::state::SharedState;
use quiver_cluster::meta::EtcdSettings;

/// Rounds of "send the keys written since the last round" before the range is frozen
/// anyway.
pub const CATCH_UP_ROUNDS_MAX: usize = 16;
/// Few enough keys written during a round that the range can be frozen for the last one.
pub const CATCH_UP_FEW: u64 = 1000;
/// Attempts of `RANGEIMPORT BEGIN` while the target has not yet seen the migration.
const BEGIN_ATTEMPTS_MAX: usize = 100;
const BEGIN_RETRY: Duration = Duration::from_millis(100);
/// Longest wait for the target's answer to one request.
const TARGET_TIMEOUT: Duration = Duration::from_secs(30);
/// Waits between readings of the topology while a hand-over's outcome is unknown.
const UNKNOWN_RETRY_MIN: Duration = Duration::from_millis(50);
const UNKNOWN_RETRY_MAX: Duration = Duration::from_secs(2);
/// Test-only fault: the first hand-over transaction that commits is treated as if its answer
/// had been lost (set by the tests of the lost-acknowledgement case).
pub const LOSE_HANDOVER_ANSWER_ENV: &str = "QUIVER_TEST_LOSE_HANDOVER_ANSWER";

#[derive(Debug, thiserror::Error)]
pub enum MoveError {
    #[error(transparent)]
    Meta(#[from] MetaError),
    #[error("the store: {0}")]
    Store(#[from] quiver_store::Error),
    #[error("target {addr}: {source}")]
    Target {
        addr: String,
        source: quiver_client::Error,
    },
    #[error("target {addr} refused: {text}")]
    Refused { addr: String, text: String },
    #[error("the migration of {0} is no longer in the topology")]
    Gone(SlotRange),
}

/// Starts the move of `m` on a thread of its own; it removes itself from the node's running
/// moves when it ends.
pub fn start(state: SharedState, etcd: EtcdSettings, m: Migration) {
    let rt = tokio::runtime::Handle::current();
    let spawned = std::thread::Builder::new()
        .name("quiver-move".into())
        .spawn(move || {
            let Some(node) = state.cluster.clone() else {
                return;
            };
            tracing::info!(slots = %m.slots, to = %m.to, "cluster: moving slots");
            match drive(&state, &etcd, &m, &rt) {
                Ok(true) => tracing::info!(slots = %m.slots, to = %m.to, "cluster: slots handed over"),
                Ok(false) => tracing::warn!(slots = %m.slots, "cluster: the move was aborted"),
                Err(e) => {
                    tracing::warn!(slots = %m.slots, error = %e, "cluster: the move failed; aborting it");
                    abort(&etcd, &m, &rt);
                    // Frozen or not, the range stays this node's: the abort changed the
                    // topology, or nothing was sent that could hand it over.
                    node.thaw(m.slots);
                }
            }
            node.running_moves.lock().remove(&m.slots);
        });
    if let Err(e) = spawned {
        tracing::error!(error = %e, "cluster: cannot start a move's thread");
    }
}

/// The steps of the module documentation; true when the range was handed over.
fn drive(
    state: &SharedState,
    etcd: &EtcdSettings,
    m: &Migration,
    rt: &tokio::runtime::Handle,
) -> Result<bool, MoveError> {
    let Some(node) = state.cluster.as_ref() else {
        return Ok(false);
    };
    let meta = rt.block_on(etcd.connect())?;
    // 1. Attempt.
    let t = match rt.block_on(meta.update(|t| t.with_migration_attempt(m.slots))) {
        Ok(t) => t,
        Err(MetaError::Topology(_)) => return Err(MoveError::Gone(m.slots)),
        Err(e) => return Err(e.into()),
    };
    let _ = node.adopt(t.clone());
    node.thaw(m.slots);
    let addr = t
        .node(&m.to)
        .map(|n| n.addr.clone())
        .ok_or(MoveError::Gone(m.slots))?;
    let mut target = Target::connect(state, addr, m.slots)?;
    // 2. Copy.
    target.begin(&node.id)?;
    let mut export = state.store.export_range(m.slots)?;
    let mut sender = Sender::new(&mut target);
    let (snapshot, last_round) = copy(state, &mut export, &mut sender)?;
    tracing::info!(slots = %m.slots, snapshot, last_round, "cluster: range copied; freezing it");
    // 3. Freeze.
    let freezing = std::time::Instant::now();
    node.freeze(m.slots);
    let drained = freezing.elapsed();
    let last = export.changes(&state.store, &mut |items| sender.send(items));
    sender.result(last)?;
    drop(export);
    // 4. Hand over.
    node.freeze_reads(m.slots);
    let handing = std::time::Instant::now();
    let (handed_over, t) = hand_over(&meta, m, rt);
    let decided = handing.elapsed();
    if handed_over {
        // The target adopts first, so that clients this node sends there are served.
        target.end(t.epoch);
    }
    let _ = node.adopt(t);
    node.thaw(m.slots);
    // Where the time writes to the range waited went: draining the runs in flight, the last
    // keys, etcd's transaction, the target's adoption.
    tracing::info!(
        slots = %m.slots,
        frozen_ms = freezing.elapsed().as_secs_f64() * 1e3,
        drain_ms = drained.as_secs_f64() * 1e3,
        last_keys_ms = (handing - freezing - drained).as_secs_f64() * 1e3,
        etcd_ms = decided.as_secs_f64() * 1e3,
        target_adoption_ms = (handing.elapsed() - decided).as_secs_f64() * 1e3,
        "cluster: range thawed"
    );
    Ok(handed_over)
}

/// Sends the export's snapshot, then the keys written since, in rounds until few are left
/// (at most [`CATCH_UP_ROUNDS_MAX`]); the keys of the snapshot and of the last round.
pub(crate) fn copy(
    state: &SharedState,
    export: &mut RangeExport,
    sender: &mut Sender<'_>,
) -> Result<(u64, u64), MoveError> {
    let copied = export.snapshot(&mut |items| sender.send(items));
    let snapshot = sender.result(copied)?;
    let mut last_round = 0;
    for _ in 0..CATCH_UP_ROUNDS_MAX {
        let since = export.changes(&state.store, &mut |items| sender.send(items));
        last_round = sender.result(since)?;
        if last_round <= CATCH_UP_FEW {
            break;
        }
    }
    Ok((snapshot, last_round))
}

/// Ends the migration in etcd giving the range to its target, and finds out for sure whether
/// it was (reading the topology again after an unknown outcome, as long as it takes).
/// Returns whether the range was handed over, and the topology that says so.
fn hand_over(meta: &Meta, m: &Migration, rt: &tokio::runtime::Handle) -> (bool, Topology) {
    let lose_answer = std::env::var_os(LOSE_HANDOVER_ANSWER_ENV).is_some();
    decide(
        meta,
        rt,
        lose_answer,
        |t| {
            t.migrations
                .iter()
                .any(|x| x.slots == m.slots && x.to == m.to)
        },
        |t| t.with_migration_ended(m.slots, true),
        |t| t.owner_of_range(m.slots) == Some(m.to.as_str()),
    )
}

/// Writes the change `next` computes from the topology while `pending` holds of it, and
/// finds out for sure whether it was written (reading the topology again after an unknown
/// outcome, as long as it takes); once `pending` no longer holds, `done` says whether the
/// change took effect (this node's transaction whose answer was lost, or another's that
/// ended it). Returns that and the topology that says so. `lose_answer`: a test-only fault,
/// the first answer is treated as lost.
pub(crate) fn decide(
    meta: &Meta,
    rt: &tokio::runtime::Handle,
    mut lose_answer: bool,
    pending: impl Fn(&Topology) -> bool,
    next: impl Fn(&Topology) -> Result<Topology, quiver_cluster::TopologyError>,
    done: impl Fn(&Topology) -> bool,
) -> (bool, Topology) {
    let mut delay = UNKNOWN_RETRY_MIN;
    loop {
        match rt.block_on(meta.topology()) {
            Ok(Some(v)) => {
                if !pending(&v.topology) {
                    return (done(&v.topology), v.topology);
                }
                match next(&v.topology) {
                    Ok(next) => {
                        match rt.block_on(meta.replace(&v, &next)) {
                            Ok(true) if !lose_answer => return (true, next),
                            Ok(true) => {
                                lose_answer = false;
                                tracing::warn!("cluster: test fault: the hand-over's answer is treated as lost");
                            }
                            // Another change came first: read again after the shortest
                            // wait (every round of this loop waits, so it is paced).
                            Ok(false) => delay = UNKNOWN_RETRY_MIN,
                            Err(e) => {
                                tracing::warn!(error = %e, "cluster: the hand-over's outcome is unknown; reading the topology again")
                            }
                        }
                    }
                    Err(e) => tracing::error!(error = %e, "cluster: cannot compute the hand-over"),
                }
            }
            Ok(None) => tracing::error!("cluster: the topology is gone from etcd"),
            Err(e) => {
                tracing::warn!(error = %e, "cluster: etcd unreachable during a hand-over; the range stays frozen")
            }
        }
        std::thread::sleep(delay);
        delay = (delay * 2).min(UNKNOWN_RETRY_MAX);
    }
}

/// Ends the migration of `m` without moving the range (best effort: if etcd cannot be
/// reached the migration stays, and the agent starts it again).
fn abort(etcd: &EtcdSettings, m: &Migration, rt: &tokio::runtime::Handle) {
    let ended = rt.block_on(async {
        let meta = etcd.connect().await?;
        meta.update(|t| t.with_migration_ended(m.slots, false))
            .await
    });
    if let Err(e) = ended {
        tracing::warn!(slots = %m.slots, error = %e, "cluster: could not abort the migration");
    }
}

/// Hands a range export's items to the target, keeping the target's error (the export sees
/// only that sending failed).
pub(crate) struct Sender<'t> {
    target: &'t mut Target,
    error: Option<MoveError>,
}

impl<'t> Sender<'t> {
    pub(crate) fn new(target: &'t mut Target) -> Sender<'t> {
        Sender {
            target,
            error: None,
        }
    }

    pub(crate) fn send(&mut self, items: &[RangeItem]) -> quiver_store::Result<()> {
        self.target.items(items).map_err(|e| {
            self.error = Some(e);
            quiver_store::Error::InvalidOptions("sending to the target failed".into())
        })
    }

    /// An export step's outcome, the target's error first.
    pub(crate) fn result(&mut self, r: quiver_store::Result<u64>) -> Result<u64, MoveError> {
        match (self.error.take(), r) {
            (Some(e), _) => Err(e),
            (None, r) => Ok(r?),
        }
    }
}

/// The connection to the node receiving the range.
pub(crate) struct Target {
    conn: Connection,
    addr: String,
    range: String,
}

impl Target {
    pub(crate) fn connect(
        state: &SharedState,
        addr: String,
        range: SlotRange,
    ) -> Result<Target, MoveError> {
        let mut options = ClientOptions::new(addr.clone());
        options.read_timeout = Some(TARGET_TIMEOUT);
        options.write_timeout = Some(TARGET_TIMEOUT);
        // A request that may have reached the target is never silently sent again.
        options.reconnect = false;
        options.password = state.core.config.requirepass.clone();
        let conn = Connection::connect_with(options).map_err(|source| MoveError::Target {
            addr: addr.clone(),
            source,
        })?;
        Ok(Target {
            conn,
            addr,
            range: range.to_string(),
        })
    }

    pub(crate) fn request(&mut self, args: &[&[u8]]) -> Result<Value, MoveError> {
        self.conn.command(args).map_err(|source| match source {
            quiver_client::Error::Server(text) => MoveError::Refused {
                addr: self.addr.clone(),
                text,
            },
            source => MoveError::Target {
                addr: self.addr.clone(),
                source,
            },
        })
    }

    /// RANGEIMPORT BEGIN, retried while the target has not seen the migration yet.
    pub(crate) fn begin(&mut self, from: &str) -> Result<(), MoveError> {
        let range = self.range.clone();
        for attempt in 1.. {
            match self.request(&[b"RANGEIMPORT", b"BEGIN", range.as_bytes(), from.as_bytes()]) {
                Err(MoveError::Refused { text, .. })
                    if text.starts_with("TRYAGAIN") && attempt < BEGIN_ATTEMPTS_MAX =>
                {
                    std::thread::sleep(BEGIN_RETRY)
                }
                other => return other.map(|_| ()),
            }
        }
        Ok(())
    }

    /// RANGEIMPORT ITEMS: `key expire value` triples (expire: `-1` none, `-2` a delete, else
    /// the absolute time in ms).
    fn items(&mut self, items: &[RangeItem]) -> Result<(), MoveError> {
        let mut args: Vec<Bytes> = Vec::with_capacity(3 + items.len() * 3);
        args.push(Bytes::from_static(b"RANGEIMPORT"));
        args.push(Bytes::from_static(b"ITEMS"));
        args.push(Bytes::from(self.range.clone()));
        crate::chain::wire::push_items(&mut args, items);
        let refs: Vec<&[u8]> = args.iter().map(|a| &a[..]).collect();
        self.request(&refs).map(|_| ())
    }

    /// RANGEIMPORT END: the target adopts the topology of `epoch` (or a later one) before it
    /// answers, boundedly (best effort: its watch brings the new version anyway).
    pub(crate) fn end(&mut self, epoch: u64) {
        let range = self.range.clone();
        let epoch = epoch.to_string();
        if let Err(e) = self.request(&[b"RANGEIMPORT", b"END", range.as_bytes(), epoch.as_bytes()])
        {
            tracing::warn!(error = %e, "cluster: the target did not take the end of the move");
        }
    }
}
