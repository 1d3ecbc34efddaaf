//! A node (N) joining a chain as its tail, driven by the chain's current tail (T), as a task
//! of its runtime — the same steps as a move (`agent::moves`), except that T keeps the range:
//!
//! 1. **Copy**: N drops whatever it has of the range (`RANGEIMPORT BEGIN`), then receives the
//!    engine's range export from T while the chain serves: a snapshot, then the keys written
//!    since, in rounds until few are left.
//! 2. **Freeze**: T's writes to the range wait (if T is also the head) and the chain's
//!    messages to T are refused with TRYAGAIN (its predecessor sends them again later), so T
//!    applies nothing more; the last keys written are sent, and `RANGEIMPORT SEQ` tells N the
//!    number of the last message its copy includes.
//! 3. **Join**: one etcd transaction appends N to the chain (a new chain version) and ends the
//!    join. T waits for the outcome as a move's source does (reading the topology again after
//!    a lost answer), has N adopt the new topology, adopts it, and thaws: from then on T
//!    forwards every message after that number to N, and N's answers commit them.
//!
//! Any failure before the transaction ends the join in etcd (the manager may start it again)
//! and thaws the range; N never served it, so what it received is simply dropped later. The
//! chain's acknowledged writes are all on T, which stays a member throughout: a crash of T, N
//! or the manager at any step loses none of them.

use quiver_cluster::meta::EtcdSettings;
use quiver_store::slot::SlotRange;

use crate::agent::moves::{copy, decide, export_step, MoveError, Step, Target};
use crate::state::SharedState;

/// Starts the join of node `to` to the chain of `slots` (this node is its tail) as a task of
/// the node's runtime; it removes itself from the node's running joins when it ends.
pub fn start(state: SharedState, etcd: EtcdSettings, slots: SlotRange, to: String) {
    tokio::spawn(async move {
        let Some(node) = state.cluster.clone() else {
            return;
        };
        tracing::info!(%slots, node = %to, "chain: a node joins as tail; copying the range to it");
        match drive(&state, &etcd, slots, &to).await {
            Ok(true) => tracing::info!(%slots, node = %to, "chain: the node joined as tail"),
            Ok(false) => tracing::warn!(%slots, node = %to, "chain: the join was ended"),
            Err(e) => {
                tracing::warn!(%slots, node = %to, error = %e, "chain: the join failed; ending it");
                end(&etcd, slots, &to).await;
            }
        }
        node.thaw(slots);
        node.running_joins.lock().remove(&slots);
    });
}

/// The steps of the module documentation; true when `to` joined.
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
    let view = node.view();
    let addr = view
        .topology
        .as_ref()
        .and_then(|t| t.node(to))
        .map(|n| n.addr.clone())
        .ok_or(MoveError::Gone(slots))?;
    let Some(stream) = node.chains.stream_of(slots) else {
        return Err(MoveError::Gone(slots));
    };
    let mut target = Target::connect(state, addr.into(), slots).await?;
    // 1. Copy.
    target.begin(&node.id).await?;
    let export = state.store.export_range(slots)?;
    let (export, snapshot, last_round) = copy(state, export, &mut target).await?;
    tracing::info!(%slots, snapshot, last_round, "chain: range copied to the joining node; freezing it");
    // 2. Freeze: no write and no message is applied here from now on.
    node.freeze(slots).await;
    let (export, _) = export_step(state, export, Step::Changes, &mut target).await?;
    drop(export);
    let (applied, ..) = stream.figures();
    let seq = applied.to_string();
    let range = slots.to_string();
    let last = [
        b"RANGEIMPORT".as_slice(),
        b"SEQ",
        range.as_bytes(),
        seq.as_bytes(),
    ];
    target.request(&last).await?;
    // 3. Join.
    let (joined, t) = decide(
        &meta,
        false,
        |t| t.joins().any(|(s, id, _)| s == slots && id == to),
        |t| t.with_join_ended(slots, to, true),
        |t| t.shards.iter().any(|s| s.slots == slots && s.tail() == to),
    )
    .await;
    if joined {
        target.end(t.epoch).await;
    }
    let _ = node.adopt(t);
    Ok(joined)
}

/// Ends the join of `to` to the chain of `slots` without it (best effort: if etcd cannot be
/// reached the join stays, and the agent starts it again).
async fn end(etcd: &EtcdSettings, slots: SlotRange, to: &str) {
    let ended = async {
        let meta = etcd.connect().await?;
        meta.update(|t| t.with_join_ended(slots, to, false)).await
    };
    if let Err(e) = ended.await {
        tracing::warn!(%slots, error = %e, "chain: could not end the join");
    }
}
