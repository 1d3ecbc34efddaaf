//! Write paths on one locked partition: encode a vector of operations as one run of records,
//! append it (one write per segment touched), then update the index.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use bytes::Bytes;

use crate::batch::Entry;
use crate::error::Result;
use crate::hash::KeyHash;
use crate::log::format::{self, RecordExt, RecordType, ValueKind};
use crate::lookup::foresee::{self, Foreseen};
use crate::lookup::{self, Found, LookupKey};
use crate::partition::{upgrade_all, PartState, Partition, StoreCtx, WriteHold, WriteIntent};
use crate::slot::key_slot;

/// One put (`value: Some`) or delete (`value: None`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct WriteOp<'a> {
    /// The key's namespace (its database's; see `dbs`).
    pub ns: u32,
    pub key: &'a [u8],
    pub hash: KeyHash,
    pub value: Option<&'a [u8]>,
    /// A put's expiry time (ms since the Unix epoch); `None`: it never expires.
    pub expire_at: Option<u64>,
    /// What a put's value is.
    pub kind: ValueKind,
}

impl<'a> WriteOp<'a> {
    /// The lookup of the op's key, in a lookup of one partition.
    pub(crate) fn lookup_key(&self) -> LookupKey<'a> {
        LookupKey {
            state: 0,
            ns: self.ns,
            key: self.key,
            hash: self.hash,
        }
    }
}

/// A key of a run, in the maps of what the run's earlier ops did to it: hashed by the
/// `KeyHash` it already has, not hashed again (SipHash over the keys was a tenth of the
/// server's time under MSET).
#[derive(PartialEq, Eq)]
struct RunKey<'a> {
    ns: u32,
    key: &'a [u8],
    hash: u64,
}

impl<'a> RunKey<'a> {
    fn of(op: &WriteOp<'a>) -> RunKey<'a> {
        RunKey {
            ns: op.ns,
            key: op.key,
            hash: op.hash.0,
        }
    }
}

impl Hash for RunKey<'_> {
    fn hash<H: Hasher>(&self, h: &mut H) {
        h.write_u64(self.hash);
    }
}

/// Per key of a run: what its earlier ops left.
type RunMap<'a, V> = HashMap<RunKey<'a>, V, foldhash::fast::RandomState>;

/// An empty map for a run of `n` ops (sized once: growing it showed in profiles); none for a
/// single op, which never asks it.
fn run_map<'a, V>(n: usize) -> RunMap<'a, V> {
    let n = if n > 1 { n } else { 0 };
    RunMap::with_capacity_and_hasher(n, Default::default())
}

/// After a run of plain writes failed part-way (`applied[at(j)]` says whether op `j`'s record
/// reached the log): what each op really did. A delete that wrote no record found its key
/// absent at its place in the run — perhaps only because an earlier op of the run deleted it,
/// and that op may have failed: it took effect only if the key really is absent there. Each
/// op's `existed` becomes the key's real state before it. `at(j)`: op `j`'s place in `applied`
/// and `existed`. Only on the failure path: it hashes every key again.
pub(crate) fn settle_failed_run(
    run: &Run,
    ops: &[WriteOp<'_>],
    at: impl Fn(usize) -> usize,
    applied: &mut [bool],
    existed: &mut [bool],
) {
    let mut exists: HashMap<&[u8], bool> = HashMap::new();
    for (j, op) in ops.iter().enumerate() {
        let i = at(j);
        let now = *exists.entry(op.key).or_insert(run.existed[j]);
        existed[i] = now;
        match run.records[j] {
            Some(_) if applied[i] => {
                exists.insert(op.key, op.value.is_some());
            }
            Some(_) => {}
            None => applied[i] = !now,
        }
    }
}

/// How a run's records are framed.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Framing {
    /// Independent Put / Delete records; the run may be split across segments.
    Plain,
    /// A batch's members in one partition (`encode_part`), contiguous in one segment, one
    /// write (the caller ends the run with the part's end record: see `commit::write_batch`).
    Batch,
}

/// A run of encoded records.
pub(crate) struct Run {
    pub bytes: Vec<u8>,
    /// Per op: (offset in `bytes`, length) of its record, if it has one.
    pub records: Vec<Option<(usize, usize)>>,
    /// Per op: whether the key existed just before the op (earlier ops of the run included);
    /// empty for a batch's part (`encode_part`).
    pub existed: Vec<bool>,
    /// Member records in the run (batch framing).
    pub members: u32,
}

/// Encodes `ops` as plain records. `found` is each key's lookup before the run. Deletes of
/// keys without a record write nothing; a delete of an expired key writes its tombstone (but
/// the key did not exist).
pub(crate) fn encode(ctx: &StoreCtx, ops: &[WriteOp<'_>], found: &[Found]) -> Run {
    let mut bytes = Vec::with_capacity(run_len(ops));
    let mut records = Vec::with_capacity(ops.len());
    let mut existed = Vec::with_capacity(ops.len());
    // Per key written earlier in the run: (exists, has a record).
    let mut latest: RunMap<'_, (bool, bool)> = run_map(ops.len());
    for (i, op) in ops.iter().enumerate() {
        let (before, has_record) = match latest.get(&RunKey::of(op)) {
            Some(&e) => e,
            None => (found[i].is_live(), found[i].has_record()),
        };
        existed.push(before);
        if op.value.is_none() && !has_record {
            if ops.len() > 1 {
                latest.insert(RunKey::of(op), (false, false));
            }
            records.push(None);
            continue;
        }
        if ops.len() > 1 {
            latest.insert(RunKey::of(op), (op.value.is_some(), op.value.is_some()));
        }
        let ty = match op.value {
            Some(_) => RecordType::Put,
            None => RecordType::Delete,
        };
        records.push(Some(push_record(ctx, &mut bytes, op, ty, ctx.plain_seq())));
    }
    Run {
        bytes,
        records,
        existed,
        members: 0,
    }
}

/// Encodes `ops` as the members of batch `seq`'s part in one partition, before its lock is
/// taken: every op gets a record, a delete its tombstone even where its key turns out to have
/// none (harmless: it shadows nothing, and is dead from the start). The records then depend on
/// nothing the lock guards, and the part costs its holder only the append. `existed` is left
/// empty: what a batch's ops found is its lookup's, under the locks.
pub(crate) fn encode_part(ctx: &StoreCtx, ops: &[WriteOp<'_>], seq: u64) -> Run {
    let mut bytes = Vec::with_capacity(run_len(ops));
    let records = ops
        .iter()
        .map(|op| {
            let ty = match op.value {
                Some(_) => RecordType::BatchPut,
                None => RecordType::BatchDelete,
            };
            Some(push_record(ctx, &mut bytes, op, ty, seq))
        })
        .collect();
    Run {
        bytes,
        records,
        existed: Vec::new(),
        members: ops.len() as u32,
    }
}

/// The bytes a run of `ops` may take: every record, and room for a batch part's end record
/// (appended by `commit::write_batch`).
fn run_len(ops: &[WriteOp<'_>]) -> usize {
    ops.iter()
        .map(|o| format::record_len_ext(8, o.key.len(), o.value.map_or(0, |v| v.len())))
        .sum::<usize>()
        + format::COMMIT_RECORD_LEN
}

/// Appends `op`'s record of type `ty` and seq `seq` to `bytes`: (offset, length) of it.
fn push_record(
    ctx: &StoreCtx,
    bytes: &mut Vec<u8>,
    op: &WriteOp<'_>,
    ty: RecordType,
    seq: u64,
) -> (usize, usize) {
    if let Some(v) = op.value {
        ctx.observe_value_len(v.len());
    }
    let at = bytes.len();
    let ext = RecordExt {
        expire_at: op.value.and(op.expire_at),
        namespace: op.ns,
        kind: if op.value.is_some() {
            op.kind
        } else {
            ValueKind::String
        },
    };
    format::encode_record(bytes, ty, seq, ext, op.key, op.value.unwrap_or(b""));
    (at, bytes.len() - at)
}

/// Appends a run and returns each op's index location. Plain runs are cut at segment ends;
/// batch runs go to one segment whole. On an error, the locations of the records that did get
/// appended (a prefix of a plain run) come back with it, so the index can still reflect them.
pub(crate) fn append_run(
    ctx: &StoreCtx,
    part: &Partition,
    st: &mut PartState,
    run: &Run,
    framing: Framing,
) -> (Vec<Option<u32>>, Result<()>) {
    let mut locs = vec![None; run.records.len()];
    let res = append_run_into(ctx, part, st, run, framing, &mut locs);
    (locs, res)
}

fn append_run_into(
    ctx: &StoreCtx,
    part: &Partition,
    st: &mut PartState,
    run: &Run,
    framing: Framing,
    locs: &mut [Option<u32>],
) -> Result<()> {
    if run.bytes.is_empty() {
        return Ok(());
    }
    match framing {
        Framing::Batch => {
            st.ensure_room(ctx, part.id, &part.dir, run.bytes.len() as u64)?;
            let base = st.append(&run.bytes)?;
            let slot = st.appender.segment.slot();
            for (l, r) in locs.iter_mut().zip(&run.records) {
                *l = r.map(|(at, _)| st.segs.loc(slot, base + at as u64));
            }
            // The segment's count of its records, once per run (deaths: `update_index`).
            st.appender
                .segment
                .count(locs.iter().flatten().count() as u64, 0);
        }
        Framing::Plain => {
            // Records in run order with their op index.
            let recs: Vec<(usize, usize, usize)> = run
                .records
                .iter()
                .enumerate()
                .filter_map(|(i, r)| r.map(|(at, len)| (i, at, len)))
                .collect();
            let mut next = 0;
            while next < recs.len() {
                st.ensure_room(ctx, part.id, &part.dir, recs[next].2 as u64)?;
                let room = st.appender.room() as usize;
                let start = recs[next].1;
                let mut end = next;
                while end < recs.len() && recs[end].1 + recs[end].2 - start <= room {
                    end += 1;
                }
                let stop = recs[end - 1].1 + recs[end - 1].2;
                let base = st.append(&run.bytes[start..stop])?;
                let slot = st.appender.segment.slot();
                for &(i, at, _) in &recs[next..end] {
                    locs[i] = Some(st.segs.loc(slot, base + (at - start) as u64));
                }
                // The segment's count of its records, once per piece (deaths: `update_index`).
                st.appender.segment.count((end - next) as u64, 0);
                next = end;
            }
        }
    }
    Ok(())
}

/// Applies appended ops to the index, in order.
pub(crate) fn update_index(
    st: &mut PartState,
    ops: &[WriteOp<'_>],
    found: &[Found],
    locs: &[Option<u32>],
) {
    let mut latest: RunMap<'_, Option<usize>> = run_map(ops.len());
    for (i, op) in ops.iter().enumerate() {
        let cur = match latest.get(&RunKey::of(op)) {
            Some(&p) => p,
            None => found[i].pos(),
        };
        let Some(loc) = locs[i] else {
            // Nothing written for this op (a delete of an absent key, or an append that
            // failed): the key stays as it was.
            if ops.len() > 1 {
                latest.insert(RunKey::of(op), cur);
            }
            continue;
        };
        // The key's slot, only where it is needed: an overwrite without an expiry (the
        // common write) needs none.
        let slot = || key_slot(op.key);
        match (op.value, op.expire_at) {
            (Some(_), Some(at)) => st.expiries.set(op.hash.0, op.ns, slot(), Some(at)),
            _ => st.expiries.remove(op.hash.0),
        }
        // The record replaced or deleted dies (in its segment's counts too; `append_run`
        // counted the new record in its segment), and a tombstone is dead from the start.
        st.counters.records += 1;
        if let Some(old) = cur.and_then(|pos| st.index.live_at(pos)) {
            st.count_death(old);
        }
        if op.value.is_none() {
            st.count_death(loc);
        }
        let after = match (op.value, cur) {
            (Some(_), Some(pos)) => {
                st.index.set_loc(pos, loc);
                Some(pos)
            }
            (Some(_), None) => {
                st.ns_keys.add(op.ns, slot());
                Some(st.index.insert(op.hash, loc))
            }
            (None, Some(pos)) => {
                st.index.remove(pos);
                st.ns_keys.sub(op.ns, slot());
                None
            }
            (None, None) => None,
        };
        if ops.len() > 1 {
            latest.insert(RunKey::of(op), after);
        }
    }
}

/// The lookups of `ops`, all in one partition.
pub(crate) fn lookup_keys<'a>(ops: &[WriteOp<'a>]) -> Vec<LookupKey<'a>> {
    ops.iter().map(WriteOp::lookup_key).collect()
}

/// Number of index slots `ops` may need.
pub(crate) fn inserts_needed(ops: &[WriteOp<'_>]) -> usize {
    ops.iter().filter(|o| o.value.is_some()).count()
}

/// A lookup result usable by a write: corruption on a candidate only means the key will be
/// written anew; an I/O error stops the write.
pub(crate) fn check_found(found: &mut [Found]) -> Result<()> {
    for f in found.iter_mut() {
        match f.take_error() {
            Some(e) if !e.is_corruption() => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

/// A partition's share of a plain vector, ready to append: its keys' lookups and its encoded
/// run.
pub(crate) struct PlainPlan {
    pub found: Vec<Found>,
    pub run: Run,
}

/// Phase 1 of a plain vector on one partition that no other writer can change (held
/// exclusively, or as a `WriteIntent`): look the keys up (keeping what `foreseen`, the
/// lookups of `ops` before the lock, still holds) and encode the run. Nothing is written.
pub(crate) fn plan_plain(
    ctx: &StoreCtx,
    st: &PartState,
    ops: &[WriteOp<'_>],
    foreseen: Option<Foreseen>,
) -> Result<PlainPlan> {
    let keys = lookup_keys(ops);
    let mut found = foresee::confirm(ctx, &[st], foreseen, &keys, false);
    check_found(&mut found)?;
    let run = encode(ctx, ops, &found);
    Ok(PlainPlan { found, run })
}

/// Between the phases, on the partition held exclusively: makes sure appending `plan`'s run
/// cannot fail for space. A full disk (or a partition refusing writes) fails here, before
/// anything is written.
pub(crate) fn reserve_plain(
    ctx: &StoreCtx,
    part: &Partition,
    st: &mut PartState,
    plan: &PlainPlan,
) -> Result<()> {
    st.prepare_append(ctx, part.id, &part.dir, plan.run.bytes.len() as u64)
}

/// Phase 1 of a plain vector over several partitions held as intents (`guards[i]` holds
/// `parts[i]`; the ops `group_ops[g]` lie in partition `groups[g].0`): each group's lookups and
/// encoding beside the partitions' readers; then the holds upgraded (in ascending order, see
/// `partition::StateLock`) and each group's log space reserved. `Err`: nothing was written,
/// and the holds are let go.
pub(crate) fn plan_groups<'g>(
    ctx: &StoreCtx,
    parts: &[&'g Arc<Partition>],
    guards: Vec<WriteIntent<'g>>,
    groups: &[(usize, std::ops::Range<usize>)],
    group_ops: &[Vec<WriteOp<'_>>],
) -> Result<(Vec<PlainPlan>, Vec<WriteHold<'g>>)> {
    let plans = group_ops
        .iter()
        .zip(groups)
        .map(|(ops, &(p, _))| plan_plain(ctx, &guards[p], ops, None))
        .collect::<Result<Vec<_>>>()?;
    let mut guards = upgrade_all(guards);
    for (plan, &(p, _)) in plans.iter().zip(groups) {
        reserve_plain(ctx, parts[p], &mut guards[p], plan)?;
    }
    Ok((plans, guards))
}

/// Phase 1 of a plain vector on one exclusively locked partition, with nothing looked up
/// before the lock: [`plan_plain`], then [`reserve_plain`].
pub(crate) fn plan_reserved(
    ctx: &StoreCtx,
    part: &Partition,
    st: &mut PartState,
    ops: &[WriteOp<'_>],
) -> Result<PlainPlan> {
    let plan = plan_plain(ctx, st, ops, None)?;
    reserve_plain(ctx, part, st, &plan)?;
    Ok(plan)
}

/// Phase 2 of a plain vector on one exclusively locked partition, planned by [`plan_plain`]:
/// what each of its ops did.
pub(crate) struct PlainApplied {
    /// Per op (in `ops` order): whether it took effect, and whether its key existed just
    /// before it (settled by [`settle_failed_run`] after a failure).
    pub applied: Vec<bool>,
    pub existed: Vec<bool>,
    /// Whether any record reached the log (a delete of an absent key writes none).
    pub wrote: bool,
    /// The append's error, if it failed part-way.
    pub error: Option<crate::error::Error>,
}

/// Appends `plan`'s run and updates the index: phase 2 of a plain vector on one partition.
pub(crate) fn apply_plain(
    ctx: &StoreCtx,
    part: &Partition,
    st: &mut PartState,
    mut plan: PlainPlan,
    ops: &[WriteOp<'_>],
) -> PlainApplied {
    let (locs, res) = append_run(ctx, part, st, &plan.run, Framing::Plain);
    update_index(st, ops, &plan.found, &locs);
    let mut applied: Vec<bool> = (0..ops.len())
        .map(|j| plan.run.records[j].is_none() || locs[j].is_some())
        .collect();
    let wrote = locs.iter().any(Option::is_some);
    let error = res.err();
    let existed = if error.is_some() {
        // What each op really did reads the run's own view of each key.
        let mut existed = plan.run.existed.clone();
        settle_failed_run(&plan.run, ops, |j| j, &mut applied, &mut existed);
        existed
    } else {
        std::mem::take(&mut plan.run.existed)
    };
    PlainApplied {
        applied,
        existed,
        wrote,
        error,
    }
}

/// Writes among which a read's key is looked for by a scan back (`read_among_writes`);
/// past it, through a map.
const LINEAR_SCAN_OPS_MAX: usize = 16;

/// A read inside a vector of writes (`Store::write_plain_reading`): its key, read after the
/// vector's first `after` ops (reads come in vector order: `after` never decreases).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ReadAt<'a> {
    pub key: &'a [u8],
    pub after: usize,
}

/// The values of `reads` among `ops`, on the locked `states` before any op is applied: a read
/// of a key an earlier op wrote gets that op's value (a delete's: none); the others are
/// looked up as one vector (in namespace `ns`, where read `j`'s key hashes to `hashes[j]`;
/// `of_read[j].0`: its place in `states`). `Err`: a lookup failed.
#[allow(clippy::too_many_arguments)]
pub(crate) fn read_among_writes(
    ctx: &StoreCtx,
    states: &[&PartState],
    of_read: &[(usize, u16)],
    ns: u32,
    reads: &[ReadAt<'_>],
    hashes: &[KeyHash],
    ops: &[WriteOp<'_>],
) -> Result<Vec<Option<Entry>>> {
    // Per read, the latest op on its key before it (one database: the bytes name the key).
    let written_by: Vec<Option<usize>> = if ops.len() <= LINEAR_SCAN_OPS_MAX {
        // A pipeline's share of one partition: a scan back costs less than a map.
        reads
            .iter()
            .map(|r| {
                (0..r.after.min(ops.len()))
                    .rev()
                    .find(|&i| ops[i].key == r.key)
            })
            .collect()
    } else {
        let mut latest: HashMap<&[u8], usize, foldhash::fast::RandomState> =
            HashMap::with_capacity_and_hasher(ops.len(), Default::default());
        let mut next_op = 0;
        reads
            .iter()
            .map(|r| {
                while next_op < r.after.min(ops.len()) {
                    latest.insert(ops[next_op].key, next_op);
                    next_op += 1;
                }
                latest.get(r.key).copied()
            })
            .collect()
    };
    let keys: Vec<LookupKey<'_>> = reads
        .iter()
        .zip(of_read)
        .zip(hashes)
        .zip(&written_by)
        .filter(|(_, w)| w.is_none())
        .map(|(((r, &(state, _)), &hash), _)| LookupKey {
            state,
            ns,
            key: r.key,
            hash,
        })
        .collect();
    let mut found = lookup::lookup(ctx, states, &keys, true).into_iter();
    // Read from the clock only if a write the reads see has an expiry time.
    let now = written_by
        .iter()
        .flatten()
        .any(|&i| ops[i].expire_at.is_some())
        .then(|| ctx.now_ms());
    written_by
        .iter()
        .map(|w| match w {
            Some(i) => {
                let op = &ops[*i];
                let expired = matches!((op.expire_at, now), (Some(at), Some(now)) if at <= now);
                Ok(op.value.filter(|_| !expired).map(|v| Entry {
                    value: Bytes::copy_from_slice(v),
                    expire_at: op.expire_at,
                    kind: op.kind,
                }))
            }
            None => lookup::into_entry(found.next().unwrap_or(Found::Absent)),
        })
        .collect()
}
