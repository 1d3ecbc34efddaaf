//! Moving a range of slots from this node (A) to another (B), driven by A, as a task of the
//! node's runtime (the engine's export runs on the blocking pool, the target is a peer
//! connection). The steps (the target's side is `cmd::rangeimport`):
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

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use quiver_cluster::meta::{EtcdSettings, Meta, MetaError};
use quiver_cluster::{Migration, Topology};
use quiver_peer::{PeerConn, PeerError};
use quiver_store::slot::SlotRange;
use quiver_store::{RangeExport, RangeItem};

use crate::state::SharedState;

/// Rounds of "send the keys written since the last round" before the range is frozen
/// anyway.
pub const CATCH_UP_ROUNDS_MAX: usize = 16;
/// Few enough keys written during a round that the range can be frozen for the last one.
pub const CATCH_UP_FEW: u64 = 1000;
/// Batches of a range export read ahead of the target's acknowledgements (the reading runs
/// on the blocking pool, the sending on the runtime; this bounds the memory between them).
const EXPORT_AHEAD_MAX: usize = 4;
/// Attempts of `RANGEIMPORT BEGIN` while the target has not yet seen the migration.
const BEGIN_ATTEMPTS_MAX: usize = 100;
const BEGIN_RETRY: Duration = Duration::from_millis(100);
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
    #[error("the target: {0}")]
    Target(#[from] PeerError),
    #[error("target {addr} refused: {text}")]
    Refused { addr: String, text: String },
    #[error("the migration of {0} is no longer in the topology")]
    Gone(SlotRange),
    #[error("the range export stopped: {0}")]
    Export(#[from] tokio::task::JoinError),
}

/// Starts the move of `m` as a task of the node's runtime; it removes itself from the node's
/// running moves when it ends.
pub fn start(state: SharedState, etcd: EtcdSettings, m: Migration) {
    tokio::spawn(async move {
        let Some(node) = state.cluster.clone() else {
            return;
        };
        tracing::info!(slots = %m.slots, to = %m.to, "cluster: moving slots");
        match drive(&state, &etcd, &m).await {
            Ok(true) => tracing::info!(slots = %m.slots, to = %m.to, "cluster: slots handed over"),
            Ok(false) => tracing::warn!(slots = %m.slots, "cluster: the move was aborted"),
            Err(e) => {
                tracing::warn!(slots = %m.slots, error = %e, "cluster: the move failed; aborting it");
                abort(&etcd, &m).await;
                // Frozen or not, the range stays this node's: the abort changed the
                // topology, or nothing was sent that could hand it over.
                node.thaw(m.slots);
            }
        }
        node.running_moves.lock().remove(&m.slots);
    });
}

/// The steps of the module documentation; true when the range was handed over.
async fn drive(state: &SharedState, etcd: &EtcdSettings, m: &Migration) -> Result<bool, MoveError> {
    let Some(node) = state.cluster.as_ref() else {
        return Ok(false);
    };
    let meta = etcd.connect().await?;
    // 1. Attempt.
    let t = match meta.update(|t| t.with_migration_attempt(m.slots)).await {
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
    let mut target = Target::connect(state, addr.into(), m.slots).await?;
    // 2. Copy.
    target.begin(&node.id).await?;
    let export = state.store.export_range(m.slots)?;
    let (export, snapshot, last_round) = copy(state, export, &mut target).await?;
    tracing::info!(slots = %m.slots, snapshot, last_round, "cluster: range copied; freezing it");
    // 3. Freeze.
    let freezing = std::time::Instant::now();
    node.freeze(m.slots).await;
    let drained = freezing.elapsed();
    let (export, _) = export_step(state, export, Step::Changes, &mut target).await?;
    drop(export);
    // 4. Hand over.
    node.freeze_reads(m.slots);
    let handing = std::time::Instant::now();
    let (handed_over, t) = hand_over(&meta, m).await;
    let decided = handing.elapsed();
    if handed_over {
        // The target adopts first, so that clients this node sends there are served.
        target.end(t.epoch).await;
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
/// (at most [`CATCH_UP_ROUNDS_MAX`]); the export, and the keys of the snapshot and of the
/// last round.
pub(crate) async fn copy(
    state: &SharedState,
    export: RangeExport,
    target: &mut Target,
) -> Result<(RangeExport, u64, u64), MoveError> {
    let (mut export, snapshot) = export_step(state, export, Step::Snapshot, target).await?;
    let mut last_round = 0;
    for _ in 0..CATCH_UP_ROUNDS_MAX {
        (export, last_round) = export_step(state, export, Step::Changes, target).await?;
        if last_round <= CATCH_UP_FEW {
            break;
        }
    }
    Ok((export, snapshot, last_round))
}

/// Which part of a range export a step hands over.
#[derive(Clone, Copy)]
pub(crate) enum Step {
    /// Every live key of the range as of the export's start.
    Snapshot,
    /// The keys written since the snapshot's start or the last step.
    Changes,
}

/// Runs one step of `export` on the blocking pool (it reads the disk) and sends its batches to
/// the target as they come, at most [`EXPORT_AHEAD_MAX`] ahead. Returns the export and how
/// many keys the step handed over, once the target acknowledged every batch; the target's
/// error first (the export sees only that the sending stopped).
pub(crate) async fn export_step(
    state: &SharedState,
    mut export: RangeExport,
    step: Step,
    target: &mut Target,
) -> Result<(RangeExport, u64), MoveError> {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<RangeItem>>(EXPORT_AHEAD_MAX);
    let state = state.clone();
    let reading = tokio::task::spawn_blocking(move || {
        let mut out = |items: &[RangeItem]| {
            tx.blocking_send(items.to_vec()).map_err(|_| {
                quiver_store::Error::InvalidOptions("sending to the target stopped".into())
            })
        };
        let n = match step {
            Step::Snapshot => export.snapshot(&mut out),
            Step::Changes => export.changes(&state.store, &mut out),
        };
        (export, n)
    });
    let mut sent = Ok(());
    while let Some(items) = rx.recv().await {
        sent = target.items(&items).await;
        if sent.is_err() {
            break;
        }
    }
    // The reading stops at its next batch if the sending did.
    drop(rx);
    let (export, n) = reading.await?;
    sent?;
    Ok((export, n?))
}

/// Ends the migration in etcd giving the range to its target, and finds out for sure whether
/// it was (reading the topology again after an unknown outcome, as long as it takes).
/// Returns whether the range was handed over, and the topology that says so.
async fn hand_over(meta: &Meta, m: &Migration) -> (bool, Topology) {
    let lose_answer = std::env::var_os(LOSE_HANDOVER_ANSWER_ENV).is_some();
    decide(
        meta,
        lose_answer,
        |t| {
            t.migrations
                .iter()
                .any(|x| x.slots == m.slots && x.to == m.to)
        },
        |t| t.with_migration_ended(m.slots, true),
        |t| t.owner_of_range(m.slots) == Some(m.to.as_str()),
    )
    .await
}

/// Writes the change `next` computes from the topology while `pending` holds of it, and
/// finds out for sure whether it was written (reading the topology again after an unknown
/// outcome, as long as it takes); once `pending` no longer holds, `done` says whether the
/// change took effect (this node's transaction whose answer was lost, or another's that
/// ended it). Returns that and the topology that says so. `lose_answer`: a test-only fault,
/// the first answer is treated as lost.
pub(crate) async fn decide(
    meta: &Meta,
    mut lose_answer: bool,
    pending: impl Fn(&Topology) -> bool,
    next: impl Fn(&Topology) -> Result<Topology, quiver_cluster::TopologyError>,
    done: impl Fn(&Topology) -> bool,
) -> (bool, Topology) {
    let mut delay = UNKNOWN_RETRY_MIN;
    loop {
        match meta.topology().await {
            Ok(Some(v)) => {
                if !pending(&v.topology) {
                    return (done(&v.topology), v.topology);
                }
                match next(&v.topology) {
                    Ok(next) => {
                        match meta.replace(&v, &next).await {
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
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(UNKNOWN_RETRY_MAX);
    }
}

/// Ends the migration of `m` without moving the range (best effort: if etcd cannot be
/// reached the migration stays, and the agent starts it again).
async fn abort(etcd: &EtcdSettings, m: &Migration) {
    let ended = async {
        let meta = etcd.connect().await?;
        meta.update(|t| t.with_migration_ended(m.slots, false))
            .await
    };
    if let Err(e) = ended.await {
        tracing::warn!(slots = %m.slots, error = %e, "cluster: could not abort the migration");
    }
}

/// The connection to the node receiving the range: one request at a time, each answered
/// within the peer transport's reply timeout. It is never sent again on another connection:
/// a request that may have reached the target ends the move if unanswered.
pub(crate) struct Target {
    conn: PeerConn,
    range: String,
}

impl Target {
    /// Connects to `addr` (and authenticates as this node's clients do).
    pub(crate) async fn connect(
        state: &SharedState,
        addr: Arc<str>,
        range: SlotRange,
    ) -> Result<Target, MoveError> {
        let conn = PeerConn::open(addr).await?;
        let mut target = Target {
            conn,
            range: range.to_string(),
        };
        if let Some(password) = &state.core.live.requirepass() {
            target.request(&[b"AUTH", password.as_bytes()]).await?;
        }
        Ok(target)
    }

    /// Sends one command; an error reply is [`MoveError::Refused`].
    pub(crate) async fn request(&mut self, args: &[&[u8]]) -> Result<(), MoveError> {
        let mut out = BytesMut::new();
        quiver_resp::request::encode_command(&mut out, args);
        let replies = self.conn.send(&out, 1).await?;
        match replies.error(0) {
            Some(text) => Err(MoveError::Refused {
                addr: self.conn.addr.to_string(),
                text: String::from_utf8_lossy(text).into_owned(),
            }),
            None => Ok(()),
        }
    }

    /// RANGEIMPORT BEGIN, retried while the target has not seen the migration yet.
    pub(crate) async fn begin(&mut self, from: &str) -> Result<(), MoveError> {
        let range = self.range.clone();
        for attempt in 1.. {
            let begin = [
                b"RANGEIMPORT".as_slice(),
                b"BEGIN",
                range.as_bytes(),
                from.as_bytes(),
            ];
            match self.request(&begin).await {
                Err(MoveError::Refused { text, .. })
                    if text.starts_with("TRYAGAIN") && attempt < BEGIN_ATTEMPTS_MAX =>
                {
                    tokio::time::sleep(BEGIN_RETRY).await
                }
                other => return other,
            }
        }
        Ok(())
    }

    /// RANGEIMPORT ITEMS: `key expire value` triples (expire: `-1` none, `-2` a delete, else
    /// the absolute time in ms).
    async fn items(&mut self, items: &[RangeItem]) -> Result<(), MoveError> {
        let mut args: Vec<Bytes> = Vec::with_capacity(3 + items.len() * 3);
        args.push(Bytes::from_static(b"RANGEIMPORT"));
        args.push(Bytes::from_static(b"ITEMS"));
        args.push(Bytes::from(self.range.clone()));
        crate::chain::wire::push_items(&mut args, items);
        let refs: Vec<&[u8]> = args.iter().map(|a| &a[..]).collect();
        self.request(&refs).await
    }

    /// RANGEIMPORT END: the target adopts the topology of `epoch` (or a later one) before it
    /// answers, boundedly (best effort: its watch brings the new version anyway).
    pub(crate) async fn end(&mut self, epoch: u64) {
        let range = self.range.clone();
        let epoch = epoch.to_string();
        let end = [
            b"RANGEIMPORT".as_slice(),
            b"END",
            range.as_bytes(),
            epoch.as_bytes(),
        ];
        if let Err(e) = self.request(&end).await {
            tracing::warn!(error = %e, "cluster: the target did not take the end of the move");
        }
    }
}
