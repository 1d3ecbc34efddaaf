//! Compound batches ([`crate::Store::apply`]): the preconditions, then the commit protocol
//! that makes a batch all or nothing, in memory and across a crash. The members of a batch
//! share one seq (its identity) and take effect only together with a BatchCommit record:
//!
//! - **one partition**: the members and the commit record are one run, one append. A torn
//!   write loses the commit record (it is last), and replay discards the members.
//! - **several partitions**: every part (that partition's members) is appended and made
//!   durable as the durability mode requires, then a commit record is appended to each
//!   partition. From the first commit record on, the batch is committed: if a crash comes
//!   before the others are written, opening applies the parts of every batch that has a commit
//!   record in *any* partition (`recovery::resolve_batches`) and writes the missing records
//!   ([`append_missing_commit`]).
//!
//! Log space for every part and its commit record is reserved before anything is written, so
//! a full disk refuses a batch whole. The caller holds the write locks of every partition
//! involved, taken in ascending order, from the precondition checks to the index updates.

use std::path::Path;

use parking_lot::RwLockWriteGuard;

use crate::batch::{self, Batch, BatchAction, BatchOutcome};
use crate::error::{Error, Result};
use crate::hash::KeyHash;
use crate::log::format::{self, COMMIT_RECORD_LEN};
use crate::lookup::{self, Found, LookupKey};
use crate::options::Durability;
use crate::partition::{PartState, Partition, StoreCtx};
use crate::write::{append_run, check_found, encode, update_index, Framing, Run, WriteOp};

/// How one try of a batch ended.
pub(crate) enum Attempt {
    Done(Result<BatchOutcome>),
    /// A split or merge moved a key's slot to another partition since the routing: nothing
    /// was written; route again.
    Rerouted,
    /// A partition's index lacks room: the caller makes some, then tries again.
    NeedRoom {
        partition: u32,
        keys: usize,
    },
    /// The disk is full; nothing was written.
    NoSpace(Error),
}

/// One try of a batch. `guards[i]` is the write lock of `parts[i]` (ascending ids; they hold
/// the partition of every op); op `i` has namespace and hash `hashed[i]` and its partition is
/// `parts[guard_of[i]]`. Every index must have room for the batch's puts, every precondition
/// must hold against the state before the batch; then the batch is written and indexed, the
/// locks are released and, in `fsync` mode, the try waits for group commit.
pub(crate) fn try_batch(
    ctx: &StoreCtx,
    parts: &[&Partition],
    mut guards: Vec<RwLockWriteGuard<'_, PartState>>,
    batch: &Batch,
    hashed: &[(u32, KeyHash)],
    guard_of: &[usize],
) -> Attempt {
    // Room in every index for the puts.
    for (gi, p) in parts.iter().map(|p| p.id).enumerate() {
        let puts = batch
            .ops
            .iter()
            .zip(guard_of)
            .filter(|&(op, &g)| g == gi && matches!(op.action, BatchAction::Put(_)))
            .count();
        if !guards[gi].index.has_room(puts) {
            return Attempt::NeedRoom {
                partition: p,
                keys: puts,
            };
        }
    }
    // Preconditions, against the state before the batch.
    let needs_value = batch
        .ops
        .iter()
        .any(|op| op.condition.as_ref().is_some_and(batch::needs_value));
    let items: Vec<LookupKey<'_>> = batch
        .ops
        .iter()
        .zip(hashed)
        .zip(guard_of)
        .map(|((op, &(ns, hash)), &state)| LookupKey {
            state,
            ns,
            key: &op.key,
            hash,
        })
        .collect();
    let mut found = {
        let states: Vec<&PartState> = guards.iter().map(|g| &**g).collect();
        lookup::lookup(ctx, &states, &items, needs_value)
    };
    for (i, op) in batch.ops.iter().enumerate() {
        if let Some(cond) = &op.condition {
            if let Some(e) = found[i].take_error() {
                return Attempt::Done(Err(e));
            }
            let current = found[i].value();
            let current = current.as_deref().map(|v| (v, found[i].expire_at()));
            if !batch::holds(cond, current) {
                return Attempt::Done(Ok(BatchOutcome::ConditionFailed {
                    op: i,
                    condition: cond.clone(),
                }));
            }
        }
    }
    if let Err(e) = check_found(&mut found) {
        return Attempt::Done(Err(e));
    }

    // Each partition's share of the writes.
    let mut shares: Vec<Share<'_>> = Vec::new();
    for (gi, part) in parts.iter().enumerate() {
        let mut ops = Vec::new();
        let mut f = Vec::new();
        for (i, op) in batch.ops.iter().enumerate() {
            if guard_of[i] != gi {
                continue;
            }
            let value = match &op.action {
                BatchAction::Put(v) => Some(&v[..]),
                BatchAction::Delete => None,
                BatchAction::Check => continue,
            };
            ops.push(WriteOp {
                ns: hashed[i].0,
                key: &op.key,
                hash: hashed[i].1,
                value,
                expire_at: op.expire_at,
            });
            f.push(std::mem::replace(&mut found[i], Found::Absent));
        }
        if !ops.is_empty() {
            shares.push(Share {
                guard: gi,
                partition: part,
                ops,
                found: f,
            });
        }
    }
    let result = write_batch(ctx, &mut guards, &shares);
    let lsns: Vec<(&Partition, u64)> = shares
        .iter()
        .map(|s| (s.partition, guards[s.guard].appended_lsn))
        .collect();
    drop(guards);
    match result {
        Ok(None) => {}
        Ok(Some(late)) => return Attempt::Done(Err(late)),
        Err(e) if e.is_no_space() => return Attempt::NoSpace(e),
        Err(e) => return Attempt::Done(Err(e)),
    }
    if ctx.opts.durability == Durability::Fsync {
        for (part, lsn) in lsns {
            if let Err(e) = part.wait_durable(lsn) {
                return Attempt::Done(Err(e));
            }
        }
    }
    Attempt::Done(Ok(BatchOutcome::Applied))
}

/// A partition's share of a compound batch.
struct Share<'a> {
    /// Index of the partition's guard in the caller's guard vector.
    pub guard: usize,
    pub partition: &'a Partition,
    pub ops: Vec<WriteOp<'a>>,
    /// Each op's lookup before the batch.
    pub found: Vec<Found>,
}

/// Writes a compound batch whose preconditions hold, every partition of it locked. One
/// partition: its members and the commit record as one append. Several: every part, then
/// every commit record (see [`write_parts`]). `Err`: nothing was applied. `Ok(Some(e))`: the
/// batch is applied, but a step after its commit failed (the error goes to the caller).
fn write_batch(
    ctx: &StoreCtx,
    guards: &mut [RwLockWriteGuard<'_, PartState>],
    shares: &[Share<'_>],
) -> Result<Option<Error>> {
    let seq = ctx.alloc_seq();
    let inline = shares.len() == 1;
    let framing = Framing::Batch {
        seq,
        inline_commit: inline,
    };
    let runs: Vec<Run> = shares
        .iter()
        .map(|s| encode(ctx, &s.ops, &s.found, framing))
        .collect();
    let writing: Vec<usize> = (0..shares.len()).filter(|&s| runs[s].members > 0).collect();
    if writing.is_empty() {
        return Ok(None);
    }
    if inline {
        let s = &shares[0];
        let st = &mut guards[s.guard];
        let (locs, res) = append_run(ctx, s.partition, st, &runs[0], framing);
        res?;
        update_index(st, &s.ops, &s.found, &locs);
        st.counters.records += 1;
        st.counters.dead += 1; // the commit record
        return Ok(None);
    }
    let mut all_locs = Vec::with_capacity(writing.len());
    let late = write_parts(ctx, guards, shares, &runs, &writing, seq, &mut all_locs)?;
    for (&s, locs) in writing.iter().zip(&all_locs) {
        let share = &shares[s];
        let st = &mut guards[share.guard];
        update_index(st, &share.ops, &share.found, locs);
        st.counters.records += 1;
        st.counters.dead += 1; // the commit record
    }
    Ok(late)
}

/// Multi-partition batch: every part (made durable as the mode requires), then every commit
/// record. Space for a part and its commit record is reserved before anything is written, so
/// once the first commit record is written the rest do not fail for space. `Err`: nothing
/// was committed. `Ok(Some(e))`: committed, but a later step failed.
fn write_parts(
    ctx: &StoreCtx,
    guards: &mut [RwLockWriteGuard<'_, PartState>],
    shares: &[Share<'_>],
    runs: &[Run],
    writing: &[usize],
    seq: u64,
    all_locs: &mut Vec<Vec<Option<u32>>>,
) -> Result<Option<Error>> {
    let framing = Framing::Batch {
        seq,
        inline_commit: false,
    };
    for &s in writing {
        let share = &shares[s];
        let part = share.partition;
        let need = (runs[s].bytes.len() + COMMIT_RECORD_LEN) as u64;
        let st = &mut guards[share.guard];
        st.ensure_room(ctx, part.id, &part.dir, need)?;
        st.appender.reserve(need)?;
    }
    for &s in writing {
        let share = &shares[s];
        let st = &mut guards[share.guard];
        let start = st.appender.end();
        let (locs, res) = append_run(ctx, share.partition, st, &runs[s], framing);
        if let Err(e) = res.and_then(|()| st.appender.flush()) {
            // No commit record exists yet: the batch is not applied. (What reached the
            // file is an orphaned part, discarded by replay.)
            st.appender.discard_from(start);
            return Err(e);
        }
        if ctx.opts.durability == Durability::Fsync {
            st.appender.segment.sync_data()?;
        }
        all_locs.push(locs);
    }
    // From the first commit record written on, the batch is committed (replay completes it
    // in every partition), so the caller must apply it to the indexes even if a later step
    // fails; the space reservation above makes such a failure an I/O error, not a full disk.
    let mut committed = false;
    let mut failure = None;
    for &s in writing {
        let st = &mut guards[shares[s].guard];
        let start = st.appender.end();
        let mut buf = Vec::with_capacity(COMMIT_RECORD_LEN);
        format::encode_commit(&mut buf, seq, runs[s].members);
        match st.append(&buf).and_then(|_| st.appender.flush()) {
            Ok(()) => committed = true,
            Err(e) => {
                st.appender.discard_from(start);
                if !committed {
                    return Err(e);
                }
                failure.get_or_insert(e);
            }
        }
    }
    if ctx.opts.durability == Durability::Fsync {
        for &s in writing {
            if let Err(e) = guards[shares[s].guard].appender.segment.sync_data() {
                failure.get_or_insert(e);
            }
        }
    }
    Ok(failure)
}

/// Appends the commit record of batch `seq` (with `members` members in this partition) that
/// a crash kept from being written: opening found the batch committed in another partition
/// and applied this partition's part (see `recovery::resolve_batches`).
pub(crate) fn append_missing_commit(
    ctx: &StoreCtx,
    part: u32,
    dir: &Path,
    st: &mut PartState,
    seq: u64,
    members: u32,
) -> Result<()> {
    let mut buf = Vec::with_capacity(COMMIT_RECORD_LEN);
    format::encode_commit(&mut buf, seq, members);
    st.ensure_room(ctx, part, dir, buf.len() as u64)?;
    st.append(&buf)?;
    st.counters.records += 1;
    st.counters.dead += 1; // a commit record is never live
    Ok(())
}
