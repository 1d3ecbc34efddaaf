//! Write paths on one locked partition: encode a vector of operations as one run of records,
//! append it (one write per segment touched), then update the index.

use std::collections::HashMap;

use parking_lot::RwLockWriteGuard;

use crate::error::{Error, Result};
use crate::hash::KeyHash;
use crate::log::format::{self, RecordType};
use crate::lookup::Found;
use crate::options::Durability;
use crate::partition::{PartState, Partition, StoreCtx};

/// One put (`value: Some`) or delete (`value: None`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct WriteOp<'a> {
    pub key: &'a [u8],
    pub hash: KeyHash,
    pub value: Option<&'a [u8]>,
}

/// How a run's records are framed.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Framing {
    /// Independent Put / Delete records; the run may be split across segments.
    Plain,
    /// Members of batch `seq`, contiguous in one segment; `inline_commit` appends the commit
    /// record in the same write (single-partition batch).
    Batch { seq: u64, inline_commit: bool },
}

/// A run of encoded records.
pub(crate) struct Run {
    pub bytes: Vec<u8>,
    /// Per op: (offset in `bytes`, length) of its record, if it has one.
    pub records: Vec<Option<(usize, usize)>>,
    /// Per op: whether the key existed just before the op (earlier ops of the run included).
    pub existed: Vec<bool>,
    /// Member records in the run (batch framing).
    pub members: u32,
}

/// Encodes `ops`. `found` is each key's lookup before the run. Deletes of absent keys write
/// nothing.
pub(crate) fn encode(
    ctx: &StoreCtx,
    ops: &[WriteOp<'_>],
    found: &[Found],
    framing: Framing,
) -> Run {
    let mut bytes = Vec::with_capacity(
        ops.iter()
            .map(|o| format::record_len(o.key.len(), o.value.map_or(0, |v| v.len())))
            .sum::<usize>()
            + 32,
    );
    let mut records = Vec::with_capacity(ops.len());
    let mut existed = Vec::with_capacity(ops.len());
    let mut latest: HashMap<&[u8], bool> = HashMap::new();
    let mut members = 0;
    for (i, op) in ops.iter().enumerate() {
        let before = match latest.get(op.key) {
            Some(&e) => e,
            None => matches!(found[i], Found::Live { .. }),
        };
        existed.push(before);
        if ops.len() > 1 {
            latest.insert(op.key, op.value.is_some());
        }
        if op.value.is_none() && !before {
            records.push(None);
            continue;
        }
        let (ty, seq) = match (framing, op.value.is_some()) {
            (Framing::Plain, true) => (RecordType::Put, ctx.alloc_seq()),
            (Framing::Plain, false) => (RecordType::Delete, ctx.alloc_seq()),
            (Framing::Batch { seq, .. }, true) => (RecordType::BatchPut, seq),
            (Framing::Batch { seq, .. }, false) => (RecordType::BatchDelete, seq),
        };
        if let Some(v) = op.value {
            ctx.observe_value_len(v.len());
        }
        let at = bytes.len();
        format::encode_record(&mut bytes, ty, seq, op.key, op.value.unwrap_or(b""));
        records.push(Some((at, bytes.len() - at)));
        if matches!(framing, Framing::Batch { .. }) {
            members += 1;
        }
    }
    if let Framing::Batch {
        seq,
        inline_commit: true,
    } = framing
    {
        encode_commit(&mut bytes, seq, members);
    }
    Run {
        bytes,
        records,
        existed,
        members,
    }
}

pub(crate) fn encode_commit(out: &mut Vec<u8>, seq: u64, members: u32) {
    format::encode_record(
        out,
        RecordType::BatchCommit,
        seq,
        b"",
        &members.to_le_bytes(),
    );
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
        Framing::Batch { .. } => {
            st.ensure_room(ctx, part.id, &part.dir, run.bytes.len() as u64)?;
            let base = st.append(&run.bytes)?;
            let slot = st.appender.segment.slot();
            for (l, r) in locs.iter_mut().zip(&run.records) {
                *l = r.map(|(at, _)| st.segs.loc(slot, base + at as u64));
            }
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
    let mut latest: HashMap<&[u8], Option<usize>> = HashMap::new();
    for (i, op) in ops.iter().enumerate() {
        let cur = match latest.get(op.key) {
            Some(&p) => p,
            None => found[i].pos(),
        };
        let Some(loc) = locs[i] else {
            // Nothing written for this op (a delete of an absent key, or an append that
            // failed): the key stays as it was.
            if ops.len() > 1 {
                latest.insert(op.key, cur);
            }
            continue;
        };
        let after = match op.value {
            Some(_) => {
                st.counters.records += 1;
                Some(match cur {
                    Some(pos) => {
                        st.index.set_loc(pos, loc);
                        st.counters.dead += 1;
                        pos
                    }
                    None => st.index.insert(op.hash, loc),
                })
            }
            None => {
                st.counters.records += 1;
                st.counters.dead += 1; // the tombstone
                if let Some(pos) = cur {
                    st.index.remove(pos);
                    st.counters.dead += 1;
                }
                None
            }
        };
        if ops.len() > 1 {
            latest.insert(op.key, after);
        }
    }
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
/// run, with log space reserved for the run.
pub(crate) struct PlainPlan {
    pub found: Vec<Found>,
    pub run: Run,
}

/// Phase 1 of a plain vector on one exclusively locked partition: look the keys up, encode
/// the run and make sure appending it cannot fail for space. Nothing is written.
pub(crate) fn plan_plain(
    ctx: &StoreCtx,
    part: &Partition,
    st: &mut PartState,
    ops: &[WriteOp<'_>],
) -> Result<PlainPlan> {
    let keys: Vec<(&[u8], KeyHash)> = ops.iter().map(|o| (o.key, o.hash)).collect();
    let mut found = crate::lookup::lookup_one_partition(ctx, st, &keys, false);
    check_found(&mut found)?;
    let run = encode(ctx, ops, &found, Framing::Plain);
    st.prepare_append(ctx, part.id, &part.dir, run.bytes.len() as u64)?;
    Ok(PlainPlan { found, run })
}

/// A partition's share of a compound batch.
pub(crate) struct Share<'a> {
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
pub(crate) fn write_batch(
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
    let commit_len = format::record_len(0, 4) as u64;
    for &s in writing {
        let share = &shares[s];
        let part = share.partition;
        let need = runs[s].bytes.len() as u64 + commit_len;
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
        let mut buf = Vec::with_capacity(commit_len as usize);
        encode_commit(&mut buf, seq, runs[s].members);
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
