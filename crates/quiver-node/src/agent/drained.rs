//! Changes a chain's head makes once every member holds every message of the chain
//! (`quiver_cluster`'s `topology::heads` and `topology::reshape` decide when): handing its
//! head role over to another member (the head balance that spreads the writes again after
//! restarts, a leaving head, a range on its way to a target), splitting the chain in two
//! at a target's edge, and merging it with the next chain of the same members once the
//! cluster is whole again (the parts a grow split).
//!
//! 1. **Freeze** the chain's writes here (`cluster::ClusterNode::freeze` returns once none is
//!    in flight; a merge freezes both chains): from now on nothing new is numbered.
//! 2. **Drain**: wait until every message this node applied is committed (at most
//!    [`DRAIN_MAX`]): then every member holds every message, so any order of them is a valid
//!    chain, any cut of its range, and any union with a drained neighbour of the same members.
//! 3. **Change**: one etcd transaction writes the chain with the new head first
//!    (`Topology::with_head`), as two chains (`Topology::with_split`) or the two as one
//!    (`Topology::with_merged`), at a new version, if the chains are as they were and the
//!    change still wanted; its outcome is found out for sure (`moves::decide`).
//! 4. **Adopt, then thaw**: the waiting writes route anew (to the new head: `-MOVED`; to the
//!    new chains, whose streams start again at 0 on every member). This node numbers nothing
//!    at the old versions after the freeze, so whatever follows starts from the same last
//!    message everywhere.
//!
//! Reads go on throughout: every member's copy is committed up to the same message, and a
//! write under the new version commits only once every member (this one included) has taken
//! it. Any failure before the transaction leaves the chain as it was (thawed); the next
//! reconciliation may try again.

use std::time::{Duration, Instant};

use quiver_cluster::meta::EtcdSettings;
use quiver_cluster::topology::{Topology, TopologyError};
use quiver_store::slot::SlotRange;

use crate::agent::moves::{decide, MoveError};
use crate::state::SharedState;

/// Longest wait for the chain to commit what this node applied, writes frozen meanwhile.
pub const DRAIN_MAX: Duration = Duration::from_secs(5);

/// What the head changes of its drained chain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// Its head role goes to member `to`.
    Head { to: String },
    /// Two chains of the same members: the slots before `at`, and those from `at` on.
    Split { at: u16 },
    /// One chain of the two (the same members) that meet at `at`: the slots changed are
    /// both chains'.
    Merge { at: u16 },
}

impl Change {
    /// Whether `t` (as this head, `me`, finds it) still wants this change of the chain of
    /// `slots`.
    fn wanted(&self, t: &Topology, me: &str, slots: SlotRange) -> bool {
        match self {
            Change::Head { to } => t
                .head_handoff(me)
                .is_some_and(|(s, m)| s == slots && m == *to),
            Change::Split { at } => t.split_wanted(me) == Some((slots, *at)),
            Change::Merge { at } => t.merge_wanted(me) == Some((slots, *at)),
        }
    }

    /// The chains drained for the change of `slots`: the one chain, or a merge's two.
    fn drained(&self, slots: SlotRange) -> Vec<SlotRange> {
        match self {
            Change::Merge { at } => vec![
                SlotRange {
                    lo: slots.lo,
                    hi: at - 1,
                },
                SlotRange {
                    lo: *at,
                    hi: slots.hi,
                },
            ],
            Change::Head { .. } | Change::Split { .. } => vec![slots],
        }
    }

    fn apply(&self, t: &Topology, slots: SlotRange) -> Result<Topology, TopologyError> {
        match self {
            Change::Head { to } => t.with_head(slots, to),
            Change::Split { at } => t.with_split(slots, *at),
            Change::Merge { at } => t.with_merged(slots, *at),
        }
    }

    /// Whether `t` shows the change made.
    fn made(&self, t: &Topology, slots: SlotRange) -> bool {
        match self {
            Change::Head { to } => t.shards.iter().any(|s| s.slots == slots && s.owner() == to),
            Change::Split { at } => t
                .shards
                .iter()
                .any(|s| s.slots.lo == *at && slots.contains(*at)),
            Change::Merge { .. } => t.shards.iter().any(|s| s.slots == slots),
        }
    }
}

/// Starts `change` of the chain of `slots` (this node heads it) as a task of the node's
/// runtime; it removes itself from the node's running hand-overs when it ends.
pub fn start(state: SharedState, etcd: EtcdSettings, slots: SlotRange, change: Change) {
    tokio::spawn(async move {
        let Some(node) = state.cluster.clone() else {
            return;
        };
        let started = Instant::now();
        match drive(&state, &etcd, slots, &change).await {
            Ok(true) => tracing::info!(%slots, ?change, ms = started.elapsed().as_secs_f64() * 1e3,
                "cluster: chain changed by its head"),
            Ok(false) => tracing::info!(%slots, ?change, "cluster: chain change no longer wanted"),
            Err(e) => tracing::warn!(%slots, ?change, error = %e, "cluster: chain change failed"),
        }
        node.thaw(slots);
        node.running_handoffs.lock().remove(&slots);
    });
}

/// The steps of the module documentation; true when the change was made.
async fn drive(
    state: &SharedState,
    etcd: &EtcdSettings,
    slots: SlotRange,
    change: &Change,
) -> Result<bool, MoveError> {
    let Some(node) = state.cluster.as_ref() else {
        return Ok(false);
    };
    let meta = etcd.connect().await?;
    let mut chains = Vec::new();
    for part in change.drained(slots) {
        let Some(stream) = node.chains.stream_of(part) else {
            return Ok(false);
        };
        let version = stream.role().version;
        chains.push((part, version, stream));
    }
    // 1. Freeze. 2. Drain.
    node.freeze(slots).await;
    let drained = async {
        for (_, _, stream) in &chains {
            let (applied, ..) = stream.figures();
            if !stream.committed(applied).await {
                return false;
            }
        }
        true
    };
    if !tokio::time::timeout(DRAIN_MAX, drained)
        .await
        .unwrap_or(false)
    {
        return Ok(false);
    }
    // 3. Change, if the chains are still the ones drained and the change still wanted.
    let me = node.id.clone();
    let (changed, t) = decide(
        &meta,
        false,
        |t| {
            chains.iter().all(|(part, version, _)| {
                t.shards
                    .iter()
                    .any(|s| s.slots == *part && s.version == *version && s.owner() == me)
            }) && change.wanted(t, &me, slots)
        },
        |t| change.apply(t, slots),
        |t| change.made(t, slots),
    )
    .await;
    // 4. Adopt (the caller thaws).
    let _ = node.adopt(t);
    Ok(changed)
}
