//! A node (N) joining a chain as its tail, driven by the chain's current tail (T), on a thread
//! of its own — the same steps as a move (`agent::moves`), except that T keeps the range:
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

use quiver_store::slot::SlotRange;

use crate::agent::moves::{copy, decide, MoveError, Sender, Target};
use crate::state::SharedState;
use quiver_cluster::meta::EtcdSettings;

/// Starts the join of node `to` to the chain of `slots` (this node is its tail) on a thread of
/// its own; it removes itself from the node's running joins when it ends.
pub fn start(state: SharedState, etcd: EtcdSettings, slots: SlotRange, to: String) {
    let rt = tokio::runtime::Handle::current();
    let spawned = std::thread::Builder::new()
        .name("quiver-join".into())
        .spawn(move || {
            let Some(node) = state.cluster.clone() else {
                return;
            };
            tracing::info!(%slots, node = %to, "chain: a node joins as tail; copying the range to it");
            match drive(&state, &etcd, slots, &to, &rt) {
                Ok(true) => tracing::info!(%slots, node = %to, "chain: the node joined as tail"),
                Ok(false) => tracing::warn!(%slots, node = %to, "chain: the join was ended"),
                Err(e) => {
                    tracing::warn!(%slots, node = %to, error = %e, "chain: the join failed; ending it");
                    end(&etcd, slots, &to, &rt);
                }
            }
            node.thaw(slots);
            node.running_joins.lock().remove(&slots);
        });
    if let Err(e) = spawned {
        tracing::error!(error = %e, "chain: cannot start a join's thread");
    }
}

/// The steps of the module documentation; true when `to` joined.
fn drive(
    state: &SharedState,
    etcd: &EtcdSettings,
    slots: SlotRange,
    to: &str,
    rt: &tokio::runtime::Handle,
) -> Result<bool, MoveError> {
    let Some(node) = state.cluster.as_ref() else {
        return Ok(false);
    };
    let meta = rt.block_on(etcd.connect())?;
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
    let mut target = Target::connect(state, addr, slots)?;
    // 1. Copy.
    target.begin(&node.id)?;
    let mut export = state.store.export_range(slots)?;
    let mut sender = Sender::new(&mut target);
    let (snapshot, last_round) = copy(state, &mut export, &mut sender)?;
    tracing::info!(%slots, snapshot, last_round, "chain: range copied to the joining node; freezing it");
    // 2. Freeze: no write and no message is applied here from now on.
    node.freeze(slots);
    let last = export.changes(&state.store, &mut |items| sender.send(items));
    sender.result(last)?;
    drop(export);
    let (applied, ..) = stream.figures();
    let seq = applied.to_string();
    let range = slots.to_string();
    target.request(&[b"RANGEIMPORT", b"SEQ", range.as_bytes(), seq.as_bytes()])?;
    // 3. Join.
    let (joined, t) = decide(
        &meta,
        rt,
        false,
        |t| t.joins().any(|(s, id, _)| s == slots && id == to),
        |t| t.with_join_ended(slots, to, true),
        |t| t.shards.iter().any(|s| s.slots == slots && s.tail() == to),
    );
    if joined {
        target.end(t.epoch);
    }
    let _ = node.adopt(t);
    Ok(joined)
}

/// Ends the join of `to` to the chain of `slots` without it (best effort: if etcd cannot be
/// reached the join stays, and the agent starts it again).
fn end(etcd: &EtcdSettings, slots: SlotRange, to: &str, rt: &tokio::runtime::Handle) {
    let ended = rt.block_on(async {
        let meta = etcd.connect().await?;
        meta.update(|t| t.with_join_ended(slots, to, false)).await
    });
    if let Err(e) = ended {
        tracing::warn!(%slots, error = %e, "chain: could not end the join");
    }
}
