//! Handing this node's head role of a chain over to another member (`quiver_cluster`'s
//! `topology::heads` decides when, and to whom): the head balance that spreads the writes
//! again after restarts piled the heads onto a few nodes.
//!
//! 1. **Freeze** the chain's writes here (`cluster::ClusterNode::freeze` returns once none is
//!    in flight): from now on nothing new is numbered.
//! 2. **Drain**: wait until every message this node applied is committed (at most
//!    [`DRAIN_MAX`]): then every member holds every message, so any order of them is a valid
//!    chain.
//! 3. **Hand over**: one etcd transaction writes the chain with the new head first, at a new
//!    version (`Topology::with_head`), if the chain is as it was and the hand-over still
//!    wanted; its outcome is found out for sure (`moves::decide`).
//! 4. **Adopt, then thaw**: the waiting writes route anew, to the new head (`-MOVED`). This
//!    node numbers nothing at the old version after the freeze, so the new head's numbering
//!    follows on from the same last message everywhere.
//!
//! Reads go on throughout: every member's copy is committed up to the same message, and a
//! write at the new head commits only once every member (this one included) has taken the
//! new version. Any failure before the transaction leaves the chain as it was (thawed);
//! the next reconciliation may try again.

use std::time::{Duration, Instant};

use quiver_cluster::meta::EtcdSettings;
use quiver_store::slot::SlotRange;

use crate::agent::moves::{decide, MoveError};
use crate::state::SharedState;

/// Longest wait for the chain to commit what this node applied, writes frozen meanwhile.
pub const DRAIN_MAX: Duration = Duration::from_secs(5);

/// Starts the hand-over of the head of the chain of `slots` to `to` as a task of the node's
/// runtime; it removes itself from the node's running hand-overs when it ends.
pub fn start(state: SharedState, etcd: EtcdSettings, slots: SlotRange, to: String) {
    tokio::spawn(async move {
        let Some(node) = state.cluster.clone() else {
            return;
        };
        let started = Instant::now();
        match drive(&state, &etcd, slots, &to).await {
            Ok(true) => tracing::info!(%slots, %to, ms = started.elapsed().as_secs_f64() * 1e3,
                "cluster: head of the chain handed over"),
            Ok(false) => tracing::info!(%slots, %to, "cluster: head hand-over no longer wanted"),
            Err(e) => tracing::warn!(%slots, %to, error = %e, "cluster: head hand-over failed"),
        }
        node.thaw(slots);
        node.running_handoffs.lock().remove(&slots);
    });
}

/// The steps of the module documentation; true when the head role was handed over.
async fn drive(
    state: &SharedState,
    etcd: &EtcdSettings,
    slots: SlotRange,
    to: &str,
) -> Result<bool, MoveError> {
    let Some(node) = state.cluster.as_ref() else {
        return Ok(false);
    };
    let meta = etcd.connect().await?;
    let Some(stream) = node.chains.stream_of(slots) else {
        return Ok(false);
    };
    let version = stream.role().version;
    // 1. Freeze. 2. Drain.
    node.freeze(slots).await;
    let (applied, ..) = stream.figures();
    if !tokio::time::timeout(DRAIN_MAX, stream.committed(applied))
        .await
        .unwrap_or(false)
    {
        return Ok(false);
    }
    // 3. Hand over, if the chain is still the one drained and the hand-over still wanted.
    let me = node.id.clone();
    let (handed_over, t) = decide(
        &meta,
        false,
        |t| {
            t.shards
                .iter()
                .any(|s| s.slots == slots && s.version == version && s.owner() == me)
                && t.head_handoff(&me)
                    .is_some_and(|(s, m)| s == slots && m == to)
        },
        |t| t.with_head(slots, to),
        |t| t.shards.iter().any(|s| s.slots == slots && s.owner() == to),
    )
    .await;
    // 4. Adopt (the caller thaws).
    let _ = node.adopt(t);
    Ok(handed_over)
}
