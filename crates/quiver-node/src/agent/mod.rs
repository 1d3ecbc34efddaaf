//! A cluster node's agent: its link to etcd and the work the topology gives it.
//!
//! It takes a lease (the node's `cluster-node-timeout`), registers and announces the node
//! under it, reads the topology, watches it, and adopts each newer version
//! (`cluster::ClusterNode::adopt`). After each adoption, and every [`RECONCILE_EVERY`], it
//! reconciles the node with the topology: it starts the sender of every chain the node
//! forwards (`chain::sender`), a task for every move of a range away from this node
//! ([`moves`]) and for every node joining a chain this node is the tail of ([`join`]), drops
//! the ranges the node no longer holds, thaws ranges left frozen by a move or a join that
//! is over, and hands over the head of a chain, or splits a chain it heads, when the topology
//! wants it ([`drained`]).
//!
//! When etcd is unreachable (or the watch breaks) the node keeps serving what it has — the
//! ranges it owns at its last epoch — and tries again with a bounded backoff; nothing
//! changes ownership until etcd is back. In a replicated cluster the node serves only while
//! its lease holds (`cluster` explains why), so there an outage longer than the lease stops
//! it; each new session takes a new lease, and the node counts on it only once it has read
//! the topology after announcing itself under it (a repair that removed it is then seen),
//! and on each renewal only once it has seen the topology etcd held after it
//! (`ClusterNode::lease_renewed`). It also probes the node's successors in its chains and
//! reports those it cannot reach ([`probe`]), for the manager to expel.

pub mod drained;
pub mod join;
pub mod moves;
pub mod probe;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use quiver_cluster::follow;
use quiver_cluster::meta::{EtcdSettings, Meta, MetaError, TopologyWatch, Versioned};
use tokio::sync::watch;

use crate::cluster::ClusterNode;
use crate::state::SharedState;

/// How often the node is reconciled with its topology without a new version (a move that
/// failed is started again, a drop that failed is tried again).
pub const RECONCILE_EVERY: Duration = Duration::from_secs(1);

/// Runs until `shutdown` fires: connect, register, read, watch; on any failure wait and start
/// again.
pub async fn run(state: SharedState, etcd: EtcdSettings, mut shutdown: watch::Receiver<bool>) {
    let Some(node) = state.cluster.clone() else {
        return;
    };
    let dropping = Arc::new(AtomicBool::new(false));
    let (state, node, etcd, dropping) = (&state, &node, &etcd, &dropping);
    let ended = |n, outcome| {
        node.set_etcd_connected(false);
        follow::log_end("cluster", "serving the last topology", n, outcome);
    };
    let shutdown = async move {
        let _ = shutdown.wait_for(|&s| s).await;
    };
    follow::follow(|| session(state, node, etcd, dropping), ended, shutdown).await;
}

/// One connection's life: returns when the watch ends (Ok) or etcd fails (Err).
async fn session(
    state: &SharedState,
    node: &Arc<ClusterNode>,
    etcd: &EtcdSettings,
    dropping: &Arc<AtomicBool>,
) -> Result<(), MetaError> {
    let meta = etcd.connect().await?;
    let asked = Instant::now();
    let lease = meta.grant(state.config.cluster_node_timeout()).await?;
    meta.register(&node.me()).await?;
    meta.announce(&node.me(), lease).await?;
    let mut current = meta.topology().await?;
    // A member restarted on another address: clients must be sent to the new one.
    let moved = current.as_ref().is_some_and(|v| {
        v.topology
            .node(&node.id)
            .is_some_and(|n| n.addr != node.addr)
    });
    if moved {
        let t = meta
            .update(|t| t.with_address(&node.id, &node.addr))
            .await?;
        tracing::info!(addr = %node.addr, epoch = t.epoch, "cluster: this node's address changed in the topology");
        current = meta.topology().await?;
    }
    let after = current.as_ref().map(|v| v.revision);
    if let Some(v) = current {
        adopt(node, v);
    }
    let mut watch = meta.watch(after).await?;
    // The topology read after the announcement is adopted, and the watch goes on from it.
    node.lease_renewed(asked, lease.ttl, after.unwrap_or(0));
    node.set_etcd_connected(true);
    tracing::info!(endpoints = %etcd.endpoints, epoch = node.view().epoch(), lease = format_args!("{:x}", lease.id),
        "cluster: watching etcd");
    let keep = meta.keep(lease, |r| {
        // Not counted (a newer topology is on its way): the next renewal will be.
        node.lease_renewed(r.sent, r.ttl, r.topology_revision);
    });
    let follow = follow(state, node, etcd, dropping, &meta, &mut watch);
    let probe = probe::run(node, &meta, lease, state.config.cluster_node_timeout());
    tokio::select! {
        e = keep => Err(e),
        r = follow => r,
        e = probe => Err(e),
    }
}

/// Adopts every version the watch brings, and reconciles the node after each and every
/// [`RECONCILE_EVERY`].
async fn follow(
    state: &SharedState,
    node: &Arc<ClusterNode>,
    etcd: &EtcdSettings,
    dropping: &Arc<AtomicBool>,
    meta: &Meta,
    watch: &mut TopologyWatch,
) -> Result<(), MetaError> {
    let mut tick = tokio::time::interval(RECONCILE_EVERY);
    loop {
        reconcile(state, node, etcd, dropping);
        tokio::select! {
            v = watch.next() => match v? {
                Some(v) => adopt(node, v),
                None => return Ok(()),
            },
            _ = node.refresh.notified() => {
                if let Some(v) = meta.topology().await? {
                    adopt(node, v);
                }
            }
            _ = tick.tick() => {}
        }
    }
}

fn adopt(node: &ClusterNode, v: Versioned) {
    let epoch = v.topology.epoch;
    let adopted = node.adopt(v.topology);
    node.saw_topology(v.revision);
    match adopted {
        Ok(true) => tracing::info!(epoch, "cluster: adopted a new topology"),
        Ok(false) => {}
        Err(e) => {
            tracing::error!(error = %e, epoch, "cluster: adopted a topology but could not save it")
        }
    }
}

/// Brings the node in line with the topology it serves by (see the module documentation).
fn reconcile(
    state: &SharedState,
    node: &Arc<ClusterNode>,
    etcd: &EtcdSettings,
    dropping: &Arc<AtomicBool>,
) {
    let view = node.view();
    let Some(t) = &view.topology else {
        return;
    };
    for stream in node.chains.streams() {
        if stream.claim_sender() {
            let password = state.core.live.requirepass();
            tokio::spawn(crate::chain::sender::run(stream, password));
        }
    }
    let mine: Vec<_> = t.migrations_from(&node.id).cloned().collect();
    for m in &mine {
        if node.running_moves.lock().insert(m.slots) {
            moves::start(state.clone(), etcd.clone(), m.clone());
        }
    }
    // Only a member serving its chains (at the run the topology names, its lease held)
    // drives a join or changes a chain it heads: a restarted process may have lost what it
    // had applied (its streams start again at 0), and is about to leave its shared chains.
    let serving = node.not_serving(&view).is_none();
    for (slots, to, tail) in t.joins().filter(|_| serving) {
        if tail == node.id && node.running_joins.lock().insert(slots) {
            join::start(state.clone(), etcd.clone(), slots, to.to_string());
        }
    }
    let change = t
        .split_wanted(&node.id)
        .map(|(slots, at)| (slots, drained::Change::Split { at }))
        .or_else(|| {
            t.merge_wanted(&node.id)
                .map(|(slots, at)| (slots, drained::Change::Merge { at }))
        })
        .or_else(|| {
            t.head_handoff(&node.id)
                .map(|(slots, to)| (slots, drained::Change::Head { to }))
        });
    if let Some((slots, change)) = change.filter(|_| serving) {
        if node.running_handoffs.lock().insert(slots) {
            drained::start(state.clone(), etcd.clone(), slots, change);
        }
    }
    for range in node.frozen() {
        let moving = mine.iter().any(|m| m.slots == range)
            || node.running_moves.lock().contains(&range)
            || node.running_joins.lock().contains(&range)
            || node.running_handoffs.lock().contains(&range);
        if !moving {
            node.thaw(range);
        }
    }
    if !node.pending_drops().is_empty() && !dropping.swap(true, Ordering::SeqCst) {
        let state = state.clone();
        let dropping = dropping.clone();
        tokio::task::spawn_blocking(move || {
            drop_pending(&state);
            dropping.store(false, Ordering::SeqCst);
        });
    }
}

/// Deletes the ranges pending a drop: of each, the slots the node neither owns nor imports
/// when the drop runs (under `range_ops`, so no import of a slot runs meanwhile).
fn drop_pending(state: &SharedState) {
    let Some(node) = &state.cluster else {
        return;
    };
    for range in node.pending_drops() {
        let dropped: Result<u64, quiver_store::Error> = {
            let _ops = node.range_ops.lock();
            node.droppable(range)
                .into_iter()
                .try_fold(0, |n, part| Ok(n + state.store.drop_range(part)?))
        };
        match dropped {
            Ok(keys) => {
                tracing::info!(%range, keys, "cluster: dropped a range this node no longer holds");
                if let Err(e) = node.dropped(range) {
                    tracing::error!(error = %e, "cluster: could not save the state");
                }
            }
            Err(e) => {
                tracing::warn!(%range, error = %e, "cluster: dropping a range failed; will retry")
            }
        }
    }
}
