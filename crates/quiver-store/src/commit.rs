//! Compound batches ([`crate::Store::apply`]): the preconditions, then the commit protocol
//! that makes a batch all or nothing, in memory and across a crash. The members of a batch
//! share one seq (its identity). Each partition's part is one run, one append: its members,
//! then a BatchEnd, or, for the last part written, the batch's only BatchCommit:
//!
//! - **one partition**: members and commit record in one append. A torn write loses the
//!   commit record (it is last), and replay discards the members.
//! - **several partitions**: every other part is appended (and synced in `fsync` mode), then
//!   the last part with the commit record. A BatchEnd part counts as committed once any record
//!   follows it in its partition, or when the commit record exists in another partition
//!   (`recovery::resolve_batches`); `seal` keeps that second proof from vanishing. A batch that
//!   fails takes back the parts it wrote, so that nothing follows them.
//!
//! Log space for every part is reserved before anything is written, so a full disk refuses a
//! batch whole. The caller holds every partition involved, taken in ascending order, from the
//! precondition checks to the index updates: as intents (lookups and preconditions beside its
//! readers), upgraded in ascending order for the appends and index updates
//! (`partition::intend_all`).

use std::sync::Arc;

use crate::batch::{self, Batch, BatchAction, BatchOutcome};
use crate::error::{Error, Result};
use crate::hash::KeyHash;
use crate::inner::Background;
use crate::log::format;
use crate::log::segment::{Segment, SyncFirst};
use crate::lookup::foresee::{self, foresee, Foreseen};
use crate::lookup::{Found, LookupKey};
use crate::options::Durability;
use crate::partition::{
    intend_all, intend_all_after, release_all, upgrade_all, PartState, Partition, StoreCtx,
    WriteHold, WriteIntent,
};
use crate::seal;
use crate::write::{
    append_run, check_found, encode_part, inserts_needed, update_index, Framing, Run, WriteOp,
};

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

/// A batch's writes grouped by partition and encoded before any lock is taken ([`prepare`]):
/// its holder then only appends them. Encoding was a sixth of a batch's hold, and a batch holds
/// every partition it touches (BENCHMARKS §37).
pub(crate) struct Prepared<'a> {
    /// The batch's identity, in every record of it.
    seq: u64,
    /// Per partition of the try (guard order): its share's writes; `None` where it has none.
    parts: Vec<Option<PreparedPart<'a>>>,
}

struct PreparedPart<'a> {
    /// Each write's place in the batch.
    at: Vec<usize>,
    ops: Vec<WriteOp<'a>>,
    /// The part's member records, without its end record.
    run: Run,
}

/// Groups `batch`'s writes by the partition of the try they fall in (op `i` has namespace and
/// hash `hashed[i]` and lies in partition `guard_of[i]` of `parts`) and encodes each group as
/// a part of batch `seq`.
pub(crate) fn prepare<'a>(
    ctx: &StoreCtx,
    batch: &'a Batch,
    hashed: &[(u32, KeyHash)],
    guard_of: &[usize],
    parts: usize,
) -> Prepared<'a> {
    let seq = ctx.alloc_seq();
    let mut grouped: Vec<(Vec<usize>, Vec<WriteOp<'a>>)> = vec![(Vec::new(), Vec::new()); parts];
    for (i, op) in batch.ops.iter().enumerate() {
        let value = match &op.action {
            BatchAction::Put(v) => Some(&v[..]),
            BatchAction::Delete => None,
            BatchAction::Check => continue,
        };
        let (at, ops) = &mut grouped[guard_of[i]];
        at.push(i);
        ops.push(WriteOp {
            ns: hashed[i].0,
            key: &op.key,
            hash: hashed[i].1,
            value,
            expire_at: op.expire_at,
            kind: op.kind,
        });
    }
    let parts = grouped
        .into_iter()
        .map(|(at, ops)| {
            (!ops.is_empty()).then(|| PreparedPart {
                run: encode_part(ctx, &ops, seq),
                at,
                ops,
            })
        })
        .collect();
    Prepared { seq, parts }
}

/// When a batch looks its keys up before it takes its write locks (`lookup::foresee`).
pub(crate) enum LookFirst<'a> {
    /// Only if another holds one of its partitions: then it would wait anyway, and every
    /// microsecond it holds them others wait. Where no one does (one serving thread), the
    /// lookups under the write locks cost less: looking first always cost one core about 5%
    /// of its MSETs (BENCHMARKS §38).
    IfContended,
    /// Always, running the closure in between (tests change the store there).
    #[cfg_attr(not(test), allow(dead_code))]
    Always(&'a mut dyn FnMut()),
}

/// The intents on `parts` (ascending ids, as they come) for `batch`, whose ops' lookups are
/// `items` ([`lookup_keys`]), with those lookups made before the locks as `look_first` says
/// (`IfContended`: as `partition::intend_all_after` says).
pub(crate) fn lock_parts<'p>(
    ctx: &StoreCtx,
    parts: &[&'p Arc<Partition>],
    batch: &Batch,
    items: &[LookupKey<'_>],
    look_first: LookFirst<'_>,
) -> (Vec<WriteIntent<'p>>, Option<Foreseen>) {
    let look = || foresee(ctx, parts, items, needs_values(batch));
    if let LookFirst::IfContended = look_first {
        return intend_all_after(parts, look);
    }
    let foreseen = look();
    if let LookFirst::Always(meanwhile) = look_first {
        meanwhile();
    }
    (intend_all(parts), Some(foreseen))
}

/// The lookup of each op of `batch` (op `i` has namespace and hash `hashed[i]` and lies in
/// the partition at `guard_of[i]`).
pub(crate) fn lookup_keys<'b>(
    batch: &'b Batch,
    hashed: &[(u32, KeyHash)],
    guard_of: &[usize],
) -> Vec<LookupKey<'b>> {
    batch
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
        .collect()
}

/// Whether some precondition of `batch` compares values (its lookups must read them).
fn needs_values(batch: &Batch) -> bool {
    batch
        .ops
        .iter()
        .any(|op| op.condition.as_ref().is_some_and(batch::needs_value))
}

/// One try of a batch, prepared by [`prepare`]. `guards[i]` is the hold of `parts[i]`
/// (ascending ids; they hold the partition of every op); op `i`'s lookup is `items[i]`
/// ([`lookup_keys`]: its namespace, hash and place in `parts`), and `foreseen` what
/// [`lock_parts`] found of them before the locks. Every index must have room for the batch's
/// puts, every precondition must hold against the state before the batch; then the batch is
/// written and indexed, the locks are released and, in `fsync` mode, the try waits for group
/// commit.
#[allow(clippy::too_many_arguments)]
pub(crate) fn try_batch(
    ctx: &StoreCtx,
    background: &Background,
    parts: &[&Arc<Partition>],
    guards: Vec<WriteIntent<'_>>,
    batch: &Batch,
    prepared: Prepared<'_>,
    foreseen: Option<Foreseen>,
    items: &[LookupKey<'_>],
) -> Attempt {
    // Room in every index for the puts.
    for (gi, part) in prepared.parts.iter().enumerate() {
        let puts = part.as_ref().map_or(0, |part| inserts_needed(&part.ops));
        if !guards[gi].index.has_room(puts) {
            return Attempt::NeedRoom {
                partition: parts[gi].id,
                keys: puts,
            };
        }
    }
    // Preconditions, against the state before the batch.
    let needs_value = needs_values(batch);
    let mut found = {
        let states: Vec<&PartState> = guards.iter().map(|g| &**g).collect();
        foresee::confirm(ctx, &states, foreseen, items, needs_value)
    };
    for (i, op) in batch.ops.iter().enumerate() {
        if let Some(cond) = &op.condition {
            if let Some(e) = found[i].take_error() {
                return Attempt::Done(Err(e));
            }
            if !batch::holds(cond, found[i].current()) {
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
    let mut guards = upgrade_all(guards);

    // Each partition's share of the writes.
    let mut shares: Vec<Share<'_>> = Vec::new();
    let mut runs: Vec<Run> = Vec::new();
    for (gi, part) in prepared.parts.into_iter().enumerate() {
        let Some(part) = part else { continue };
        let found = part
            .at
            .iter()
            .map(|&i| std::mem::replace(&mut found[i], Found::Absent))
            .collect();
        shares.push(Share {
            guard: gi,
            partition: parts[gi],
            ops: part.ops,
            found,
        });
        runs.push(part.run);
    }
    let result = write_batch(ctx, parts, &mut guards, &shares, runs, prepared.seq);
    let lsns: Vec<(&Arc<Partition>, u64)> = shares
        .iter()
        .map(|s| (parts[s.guard], guards[s.guard].appended_lsn))
        .collect();
    let grow = guards.iter().any(|g| g.index.wants_growth());
    release_all(guards);
    if grow {
        background.wake();
    }
    ctx.help_pages_ahead();
    match result {
        Ok(()) => {}
        Err(e) if e.is_no_space() => return Attempt::NoSpace(e),
        Err(e) => return Attempt::Done(Err(e)),
    }
    if ctx.opts.durability == Durability::Fsync {
        if let Some(e) = crate::durable::acknowledge(&lsns)
            .into_iter()
            .find_map(Result::err)
        {
            return Attempt::Done(Err(e));
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

/// Writes a compound batch whose preconditions hold, every partition of it locked: one
/// append per partition, the part with the commit record last (see [`write_parts`]); `runs[s]`
/// holds share `s`'s members, encoded as batch `seq`. `Err`: nothing was applied. Durability
/// (`fsync` mode) is the caller's wait, after the locks.
fn write_batch(
    ctx: &StoreCtx,
    parts: &[&Arc<Partition>],
    guards: &mut [WriteHold<'_>],
    shares: &[Share<'_>],
    mut runs: Vec<Run>,
    seq: u64,
) -> Result<()> {
    let mut writing: Vec<usize> = (0..shares.len()).filter(|&s| runs[s].members > 0).collect();
    // The commit record goes to a partition that no merge is about to delete, if the batch
    // has one: a merge seals the parts whose proof lies in its sources once, before its
    // switch, so no new such part may appear after that (see `split::move_into_new`).
    if let Some(k) = writing
        .iter()
        .rposition(|&s| !guards[shares[s].guard].merging)
    {
        let s = writing.remove(k);
        writing.push(s);
    }
    let Some(&last) = writing.last() else {
        return Ok(());
    };
    // Each part's end record: the batch's commit record ends the last one written.
    for &s in &writing {
        let run = &mut runs[s];
        if s == last {
            format::encode_commit(&mut run.bytes, seq, run.members);
        } else {
            format::encode_end(&mut run.bytes, seq, run.members);
        }
    }
    let mut all_locs = Vec::with_capacity(writing.len());
    write_parts(ctx, guards, shares, &runs, &writing, &mut all_locs)?;
    let carrier = shares[last].guard;
    let commit_at = (
        parts[carrier],
        guards[carrier].appender.segment.clone(),
        guards[carrier].appended_lsn,
    );
    for (&s, locs) in writing.iter().zip(&all_locs) {
        let share = &shares[s];
        let st = &mut guards[share.guard];
        update_index(st, &share.ops, &share.found, locs);
        st.count_appended_dead_here(); // the BatchEnd or commit record
        if s != last {
            seal::note_unsealed(ctx, parts[share.guard]);
            if ctx.opts.durability == Durability::Fsync {
                let (part, seg, lsn) = &commit_at;
                st.appender
                    .segment
                    .sync_first(commit_record_first(part, seg, *lsn));
            }
        }
    }
    Ok(())
}

/// `fsync` mode: what a BatchEnd part's segment must make durable before its next fdatasync —
/// the batch's commit record, at `lsn` in `part`'s segment `seg`. The part itself is durable
/// (its sync came before the commit record was written), but the records that follow it once
/// the locks are let go would prove it committed at replay: were one of them on disk and the
/// commit record not (a power loss between the two partitions' fdatasyncs), replay would apply
/// this part and not the others. Asking `part`'s syncer and waiting never deadlocks: a sync
/// waits only on commit records written after its own partition's parts were synced (see
/// docs/design.md, "apply(Batch)"). A partition or segment gone since was synced before it
/// went.
fn commit_record_first(part: &Arc<Partition>, seg: &Arc<Segment>, lsn: u64) -> SyncFirst {
    let (commit, seg, id) = (Arc::downgrade(&part.commit), Arc::downgrade(seg), part.id);
    Box::new(move || {
        let (Some(commit), Some(seg)) = (commit.upgrade(), seg.upgrade()) else {
            return Ok(());
        };
        commit.ask(lsn, &seg, id)?;
        commit.wait(lsn)
    })
}

/// Every part, one append each, the one with the commit record last: the commit record
/// exists only once every other part is written (and, in `fsync` mode, synced). Log space for
/// every part is reserved first, so a full disk refuses the batch whole. If a part fails,
/// the parts written are taken back (`take_back_parts`): a part must never be followed by
/// another record unless its batch is committed. `Err`: nothing was committed, or (the error
/// says so) the outcome is unknown. The last part is made durable by the caller's
/// group-commit wait, like a plain write.
fn write_parts(
    ctx: &StoreCtx,
    guards: &mut [WriteHold<'_>],
    shares: &[Share<'_>],
    runs: &[Run],
    writing: &[usize],
    all_locs: &mut Vec<Vec<Option<u32>>>,
) -> Result<()> {
    let fsync = ctx.opts.durability == Durability::Fsync;
    for &s in writing {
        let share = &shares[s];
        let part = share.partition;
        let need = runs[s].bytes.len() as u64;
        let st = &mut guards[share.guard];
        st.ensure_room(ctx, part.id, &part.dir, need)?;
        st.appender.reserve(need)?;
    }
    let single = writing.len() == 1;
    let mut written: Vec<WrittenPart<'_>> = Vec::with_capacity(writing.len());
    for (n, &s) in writing.iter().enumerate() {
        let share = &shares[s];
        let last = n + 1 == writing.len();
        // In `fsync` mode every other part is durable before the commit record is written:
        // all their writes first, then their fdatasyncs at once (each partition's syncer,
        // which needs none of the locks held here).
        let res = if fsync && last && !single {
            sync_parts(guards, &written)
        } else {
            Ok(())
        };
        let st = &mut guards[share.guard];
        let start = st.appender.end();
        let (locs, res) = match res {
            Ok(()) => append_run(ctx, share.partition, st, &runs[s], Framing::Batch),
            Err(e) => (Vec::new(), Err(e)),
        };
        // A lone part needs no flush here: the tail buffer (`none` mode) keeps its order.
        let res = res.and_then(|()| if single { Ok(()) } else { st.appender.flush() });
        let part = WrittenPart {
            guard: share.guard,
            start,
            partition: share.partition,
            share: s,
        };
        if let Err(e) = res {
            return Err(take_back_parts(guards, runs, &written, part, last, e));
        }
        written.push(part);
        all_locs.push(locs);
    }
    Ok(())
}

/// A part of a batch written to its partition: its guard (index into the caller's guards),
/// where it starts in the log, and its share (index into the runs).
#[derive(Clone, Copy)]
struct WrittenPart<'a> {
    guard: usize,
    start: u64,
    partition: &'a Partition,
    share: usize,
}

/// `fsync` mode: makes the batch's parts written so far durable, their partitions' fdatasyncs
/// asked for all at once and then waited for (`group_commit`). A failure is its partition's:
/// it refuses writes from then on.
fn sync_parts(guards: &mut [WriteHold<'_>], written: &[WrittenPart<'_>]) -> Result<()> {
    for w in written {
        let st = &guards[w.guard];
        let part = w.partition;
        part.commit
            .ask(st.appended_lsn, &st.appender.segment, part.id)?;
    }
    for w in written {
        let st = &mut guards[w.guard];
        if let Err(e) = w.partition.commit.wait(st.appended_lsn) {
            st.fail_writes(|| format!("an fdatasync of its log failed: {e}"));
            return Err(e);
        }
    }
    Ok(())
}

/// After a batch failed while its part `failed` was written (`carrier`: the part with the
/// commit record): takes back that part first, then the parts written before it. A partition
/// where taking back fails refuses writes until the store is reopened, as nothing may follow
/// the part there (replay cuts an uncommitted part off the log's end). If the carrier's own
/// part cannot be taken back, its commit record may be whole in the file and the batch
/// committed: then the other parts must stay too (without them a committed batch would be
/// half there), their partitions refuse writes as well, and the error says the outcome is
/// unknown — the next open's replay decides it, all or nothing. The returned error is the
/// batch's.
fn take_back_parts(
    guards: &mut [WriteHold<'_>],
    runs: &[Run],
    written: &[WrittenPart<'_>],
    failed: WrittenPart<'_>,
    carrier: bool,
    cause: Error,
) -> Error {
    // Takes back part `p`; if that fails, its partition refuses writes for the reason given
    // (with `unknown`: "its outcome is unknown"), which comes back.
    let retract = |guards: &mut [WriteHold<'_>], p: WrittenPart<'_>, unknown: bool| {
        let st = &mut guards[p.guard];
        let res = st.appender.retract(p.start, &runs[p.share].bytes);
        res.map_err(|e| {
            let unknown = if unknown {
                ": its outcome is unknown"
            } else {
                ""
            };
            let reason = format!(
                "a batch failed ({cause}) and its part could not be taken back ({e}){unknown}"
            );
            st.fail_writes(|| reason.clone());
            reason
        })
    };
    if let Err(reason) = retract(guards, failed, carrier) {
        if carrier {
            for w in written {
                guards[w.guard].fail_writes(|| reason.clone());
            }
            return Error::PartitionFailed {
                dir: failed.partition.dir.clone(),
                reason,
            };
        }
    }
    for &w in written {
        // A part that stays leaves its partition refusing writes (`retract` above).
        let _ = retract(guards, w, false);
    }
    cause
}

#[cfg(test)]
mod tests;
