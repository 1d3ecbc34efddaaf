//! A pipeline of independent single-key accesses (`Db::pipeline`): each partition's share is
//! applied on its own, under that partition's lock alone, in the pipeline's order within the
//! partition; the shares one after another, in ascending partition order from that of the
//! first access (`run`). That is what a Redis pipeline of independent commands promises —
//! each command atomic, the pipeline not — and it never holds more than the partition it
//! appends to, so pipelines on many threads run in parallel wherever their partitions differ
//! (an atomic vector, `Store::write_plain_reading`, locks every partition it touches at
//! once).
//!
//! A partition's share follows the two phases of every plain write (`store`): room and space
//! settled, then the records appended and indexed; a get sees the writes before it on its key
//! (`write::read_among_writes`), which are in its partition. Each share succeeds or fails on
//! its own: the outcome says which accesses failed, and why. A share whose partition a split
//! or merge took away is routed again on the new layout (`RouteTries`).

use std::sync::Arc;

use crate::batch::Entry;

use crate::error::{Error, Result};
use crate::hash::KeyHash;
use crate::inner::{owns, StoreInner};
use crate::lookup::foresee::{foresee, Foreseen};
use crate::options::Durability;
use crate::partition::{Partition, StoreCtx, WriteIntent};
use crate::retry::WriteRetry;
use crate::route::{RouteTries, Routed};
use crate::write::{self, ReadAt, WriteOp};

/// What one access of a pipeline did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// A get's entry, of any kind (`None`: absent or expired).
    Value(Option<Entry>),
    /// A put or delete took effect; whether its key existed just before it.
    Written { existed: bool },
}

/// What a pipeline did: each access's answer, or `None` where it failed — each failure once,
/// with the accesses (their indices) it stopped. A failed write took no effect unless its
/// error says its outcome is unknown (its fdatasync failed, or its bytes could not be taken
/// back).
#[derive(Debug, Default)]
pub struct PipelineOutcome {
    pub answers: Vec<Option<Answer>>,
    pub failures: Vec<(Error, Vec<usize>)>,
}

/// One access, as the engine runs it: a get of a key, or a plain write.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Step<'a> {
    Read(&'a [u8]),
    Write(WriteOp<'a>),
}

impl<'a> Step<'a> {
    fn key(&self) -> &'a [u8] {
        match self {
            Step::Read(k) => k,
            Step::Write(op) => op.key,
        }
    }
}

/// How one partition's share ended.
enum Share {
    /// Applied (in part, if `failed`): its accesses' answers are in the outcome; the log
    /// position to make durable (`fsync` mode).
    Done {
        failed: Option<(Error, Vec<usize>)>,
        lsn: u64,
        /// The partition's index is past its growth threshold.
        grow: bool,
    },
    /// The partition no longer owns these keys: route them again.
    Rerouted,
    /// Nothing of it took effect.
    Failed(Error),
}

/// Runs `steps` of database `db` as a pipeline (see the module documentation).
/// `background`: whether the maintenance thread runs (a writer then waits for it to make
/// index room). `Err`: refused before anything was read or written.
pub(crate) fn run(
    inner: &StoreInner,
    background: bool,
    db: u32,
    steps: &mut [Step<'_>],
) -> Result<PipelineOutcome> {
    let frees_space = steps
        .iter()
        .all(|e| !matches!(e, Step::Write(op) if op.value.is_some()));
    if !frees_space {
        inner.reserve.admit_growth()?;
    }
    let mut outcome = PipelineOutcome {
        answers: vec![None; steps.len()],
        failures: Vec::new(),
    };
    // Bounded: see `retry` and `route`.
    let mut retry = WriteRetry::new(inner, background, frees_space);
    let mut tries = RouteTries::default();
    let mut pending: Vec<usize> = (0..steps.len()).collect();
    let fsync = inner.ctx.opts.durability == Durability::Fsync;
    // `fsync` mode, per partition written: its log position to make durable, and the writes
    // waiting on it.
    let mut durable: Vec<(std::sync::Arc<Partition>, u64, Vec<usize>)> = Vec::new();
    let mut grow = false;
    loop {
        let table = inner.table();
        let ns = table.dbs.ns(db);
        let hashes: Vec<KeyHash> = pending
            .iter()
            .map(|&i| {
                let hash = KeyHash::of_ns(ns, steps[i].key());
                if let Step::Write(op) = &mut steps[i] {
                    (op.ns, op.hash) = (ns, hash);
                }
                hash
            })
            .collect();
        let routed = Routed::new(
            table,
            pending
                .iter()
                .zip(hashes)
                .map(|(&i, h)| (steps[i].key(), h)),
        );
        // Pending accesses by partition (an index into `routed.order`), in pipeline order.
        let mut by_part: Vec<Vec<(usize, u16)>> = vec![Vec::new(); routed.order.len()];
        for (&i, &(g, slot)) in pending.iter().zip(&routed.of_key) {
            by_part[g].push((i, slot));
        }
        // Shares in ascending partition order from the partition of the first access, round
        // to the ones before it: a pipeline of a SET then a GET of another partition runs the
        // GET after the SET, as in Redis (in plain ascending order, that pipeline and another's
        // SET y then GET x could both miss the other's SET: the store-buffering litmus), and
        // pipelines on several threads still sweep the partitions in one direction, one behind
        // the other, where an order of first accesses had them meet (BENCHMARKS §48).
        let first = routed.of_key.first().map_or(0, |r| r.0);
        let shares = by_part
            .iter()
            .enumerate()
            .cycle()
            .skip(first)
            .take(by_part.len());
        let mut rerouted = Vec::new();
        for (g, share) in shares {
            let part = routed.part(g);
            let answers = &mut outcome.answers;
            match apply_share(inner, &mut retry, part, db, steps, share, answers) {
                Share::Done {
                    failed,
                    lsn,
                    grow: full,
                } => {
                    outcome.failures.extend(failed);
                    grow |= full;
                    if fsync {
                        let written: Vec<usize> = share
                            .iter()
                            .map(|&(i, _)| i)
                            .filter(|&i| matches!(steps[i], Step::Write(_)))
                            .filter(|&i| outcome.answers[i].is_some())
                            .collect();
                        if !written.is_empty() {
                            durable.push((part.clone(), lsn, written));
                        }
                    }
                }
                Share::Rerouted => rerouted.extend(share.iter().map(|&(i, _)| i)),
                Share::Failed(e) => outcome
                    .failures
                    .push((e, share.iter().map(|&(i, _)| i).collect())),
            }
        }
        if rerouted.is_empty() {
            break;
        }
        rerouted.sort_unstable();
        pending = rerouted;
        if let Err(e) = tries.again() {
            outcome.failures.push((e, pending));
            break;
        }
    }
    if grow {
        inner.background.wake();
    }
    inner.ctx.help_pages_ahead();
    if fsync {
        let waits: Vec<(&std::sync::Arc<Partition>, u64)> =
            durable.iter().map(|(p, lsn, _)| (p, *lsn)).collect();
        let results = crate::durable::acknowledge(&waits);
        for ((_, _, written), res) in durable.into_iter().zip(results) {
            if let Err(e) = res {
                // Applied but not known to be on disk: their outcome is unknown.
                for &i in &written {
                    outcome.answers[i] = None;
                }
                outcome.failures.push((e, written));
            }
        }
    }
    Ok(outcome)
}

/// One partition's share of a pipeline: the accesses `share` (index into `steps`, slot),
/// in order, under the partition's lock alone; their answers go to `answers`.
fn apply_share(
    inner: &StoreInner,
    retry: &mut WriteRetry<'_>,
    part: &Arc<Partition>,
    db: u32,
    steps: &mut [Step<'_>],
    share: &[(usize, u16)],
    answers: &mut [Option<Answer>],
) -> Share {
    let ctx = &inner.ctx;
    if share
        .iter()
        .all(|&(i, _)| matches!(steps[i], Step::Read(_)))
    {
        return read_share(inner, part, db, steps, share, answers);
    }
    loop {
        let (st, mut foreseen) = lock_share(ctx, part, steps, share);
        if !share.iter().all(|&(_, slot)| owns(&st, slot)) {
            return Share::Rerouted;
        }
        // The namespace as of now (a SWAPDB or FLUSHDB since the routing).
        let ns = st.dbs.ns(db);
        let mut ops: Vec<WriteOp<'_>> = Vec::with_capacity(share.len());
        let mut reads: Vec<ReadAt<'_>> = Vec::new();
        for &(i, _) in share {
            match &mut steps[i] {
                Step::Write(op) => {
                    if op.ns != ns {
                        op.ns = ns;
                        op.hash = KeyHash::of_ns(ns, op.key);
                        foreseen = None; // looked up under another namespace
                    }
                    ops.push(*op);
                }
                Step::Read(key) => reads.push(ReadAt {
                    key,
                    after: ops.len(),
                }),
            }
        }
        let need = write::inserts_needed(&ops);
        if !st.index.has_room(need) {
            drop(st);
            match retry.make_room(part.id, need) {
                Ok(()) => continue,
                Err(e) => return Share::Failed(e),
            }
        }
        let plan = match write::plan_plain(ctx, &st, &ops, foreseen) {
            Ok(plan) => plan,
            Err(e) => {
                drop(st);
                match retry.after_refusal(e) {
                    Ok(()) => continue,
                    Err(e) => return Share::Failed(e),
                }
            }
        };
        let values = if reads.is_empty() {
            Vec::new()
        } else {
            let hashes: Vec<KeyHash> = reads.iter().map(|r| KeyHash::of_ns(ns, r.key)).collect();
            let of_read = vec![(0, 0); reads.len()];
            match write::read_among_writes(ctx, &[&st], &of_read, ns, &reads, &hashes, &ops) {
                Ok(values) => values,
                // Nothing of the share is written.
                Err(e) => return Share::Failed(e),
            }
        };
        // Readers wait from here on: for the appends and the index updates alone.
        let mut st = st.upgrade();
        if let Err(e) = write::reserve_plain(ctx, part, &mut st, &plan) {
            drop(st);
            match retry.after_refusal(e) {
                Ok(()) => continue,
                Err(e) => return Share::Failed(e),
            }
        }
        let done = write::apply_plain(ctx, part, &mut st, plan, &ops);
        let (lsn, grow) = (st.appended_lsn, st.index.wants_growth());
        drop(st);
        return finish_share(share, steps, values, done, lsn, grow, answers);
    }
}

/// The intent on a share's partition (`WriteIntent`: other writers wait, readers do not), the
/// share's writes' keys looked up first where another writer holds it exclusively
/// (`Partition::intend_serving_after`), for `write::plan_plain` to keep what still holds.
fn lock_share<'p>(
    ctx: &StoreCtx,
    part: &'p Arc<Partition>,
    steps: &[Step<'_>],
    share: &[(usize, u16)],
) -> (WriteIntent<'p>, Option<Foreseen>) {
    part.intend_serving_after(|| {
        let items: Vec<_> = share
            .iter()
            .filter_map(|&(i, _)| match &steps[i] {
                Step::Write(op) => Some(op.lookup_key()),
                Step::Read(_) => None,
            })
            .collect();
        foresee(ctx, &[part], &items, false)
    })
}

/// A share of gets only: under the partition's read lock.
fn read_share(
    inner: &StoreInner,
    part: &Partition,
    db: u32,
    steps: &[Step<'_>],
    share: &[(usize, u16)],
    answers: &mut [Option<Answer>],
) -> Share {
    let st = part.read_serving();
    if !share.iter().all(|&(_, slot)| owns(&st, slot)) {
        return Share::Rerouted;
    }
    let ns = st.dbs.ns(db);
    let reads: Vec<ReadAt<'_>> = share
        .iter()
        .map(|&(i, _)| ReadAt {
            key: steps[i].key(),
            after: 0,
        })
        .collect();
    let hashes: Vec<KeyHash> = reads.iter().map(|r| KeyHash::of_ns(ns, r.key)).collect();
    let of_read = vec![(0, 0); reads.len()];
    match write::read_among_writes(&inner.ctx, &[&st], &of_read, ns, &reads, &hashes, &[]) {
        Ok(values) => {
            for (&(i, _), v) in share.iter().zip(values) {
                answers[i] = Some(Answer::Value(v));
            }
            Share::Done {
                failed: None,
                lsn: 0,
                grow: false,
            }
        }
        Err(e) => Share::Failed(e),
    }
}

/// The answers of a share from its reads' values and what its writes did.
fn finish_share(
    share: &[(usize, u16)],
    steps: &[Step<'_>],
    values: Vec<Option<Entry>>,
    done: write::PlainApplied,
    lsn: u64,
    grow: bool,
    answers: &mut [Option<Answer>],
) -> Share {
    let mut values = values.into_iter();
    // The share's writes, in order, as `done` lists them.
    let mut op = 0;
    let mut stopped = Vec::new();
    // A read after a write that did not take effect may have seen that write: it fails too.
    let mut failed_before = false;
    for &(i, _) in share {
        match steps[i] {
            Step::Read(_) => {
                let value = values.next().flatten();
                if failed_before {
                    stopped.push(i);
                } else {
                    answers[i] = Some(Answer::Value(value));
                }
            }
            Step::Write(_) => {
                let j = op;
                op += 1;
                if done.applied[j] {
                    let existed = done.existed[j];
                    answers[i] = Some(Answer::Written { existed });
                } else {
                    failed_before = true;
                    stopped.push(i);
                }
            }
        }
    }
    let failed = done.error.map(|e| (e, stopped));
    Share::Done { failed, lsn, grow }
}
