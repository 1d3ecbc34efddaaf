//! Compaction (FAWN-DS Compact): the live records of a range of sealed segments are copied
//! into new segments, the index entries that pointed at them move to the copies, and the old
//! segments are deleted — while reads and writes go on.
//!
//! A pass takes a range of whole groups of sealed segments (a group: segments sharing a major
//! order, i.e. the outputs of one earlier pass or one sealed active segment; `choose` says
//! which), and its outputs take the range's place in log order (`SegmentOrder`). Which
//! records survive:
//! - a put the index points at: copied (a committed batch member becomes a plain put) —
//!   unless its expiry time has come: then it is dropped like a deleted key, and a tombstone
//!   takes its place unless the range is a prefix of the log (an older copy of its key may
//!   lie before the range, and must not come back);
//! - any other put: dropped;
//! - a tombstone: dropped if the range is a prefix of the log (every put it shadows is in the
//!   range, and dead), else kept — an older copy of its key may lie before the range;
//! - a batch's members and commit record: resolved like plain records when the whole part and
//!   its end record (written with it, right after it) are in the range; otherwise kept
//!   exactly as they are (replay must still find the part whole when it meets the commit
//!   record).
//!
//! The background thread's passes take the range with the most garbage per record (old
//! segments, mostly), sealing the active segment for the passes to come; on-demand
//! compaction takes the whole log. When the disk has no room for that, passes of a few
//! segments sweep the log from a cursor, so that each frees its own garbage before the next
//! needs room, and none copies the same records twice in a sweep.
//! The drivers live here too: `compact_pass` (a pass, the sweep's cursor moved on in the
//! partition's `MaintenanceState`, then a checkpoint), `compact_locked`, and on-demand
//! compaction (`compact_partition`: one pass, or a sweep on a full disk).
//!
//! 1. Under the partition lock: choose the range (sealing the active segment if the range
//!    reaches it).
//! 2. Without the lock: copy what survives (values verified; a batch's part held until the
//!    record after it says whether it is whole, `copy::OpenPart`) into `*.seg.tmp` outputs;
//!    fsync them.
//! 3. Commit on disk: `COMPACT` (inputs, outputs) is written to a temp file, fsynced and
//!    renamed; the outputs are renamed to `*.seg`.
//! 4. Under the lock, in chunks: each index entry that still points at an input record moves
//!    to its copy (a writer that replaced the key meanwhile made the copy dead; nothing to
//!    do). With the last chunk the inputs leave the segment list.
//! 5. The inputs and `COMPACT` are deleted.
//!
//! Opening a store finishes step 5 if `COMPACT` exists, and otherwise deletes `*.seg.tmp`.
//! The index never points at an output before step 3, so a crash before it loses nothing.

use std::collections::HashSet;
use std::fs;
use std::path::Path;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use crate::checkpoint;
use crate::dbs::DbMap;
use crate::error::{Error, Result};
use crate::hash::KeyHash;
use crate::log::format::CompactionManifest;
use crate::log::segment::{
    segment_file_name, sync_dir, tmp_segment_file_name, Segment, SEGMENT_SUFFIX, SEGMENT_TMP_SUFFIX,
};
use crate::maintenance::{self, MaintenanceReport, ScanMode};
use crate::partition::{MaintenanceState, PartState, Partition, SegmentSet, StoreCtx};
use crate::reserve::DiskReserve;
use crate::stalls::Pacer;

mod choose;
mod copy;
mod outputs;
use choose::Choice;
pub(crate) use choose::Pass;
use copy::{Copied, Copy};
use outputs::Outputs;

const MANIFEST_FILE: &str = "COMPACT";
const MANIFEST_TMP_FILE: &str = "COMPACT.tmp";
/// Output buffer of a compaction: records are written in runs of this size.
const COMPACTION_WRITE_BYTES: usize = 1 << 20;
/// Index entries moved to their copies under one hold of the partition's exclusive lock:
/// writers and readers wait at most this many probes (prefetched: a fraction of a
/// millisecond).
const REMAP_CHUNK_ENTRIES: usize = 8 * 1024;

/// What a pass covered, for a sweep's cursor.
#[derive(Debug, Default)]
pub(crate) struct PassOutcome {
    pub report: MaintenanceReport,
    /// Major order of the last group compacted (`None`: nothing to compact).
    pub last_major: Option<u64>,
    /// The range reached the end of the log (the active segment, if it held anything, was
    /// sealed into it).
    pub reached_end: bool,
    /// The range was chosen by garbage (no sweep goes on after it).
    pub by_garbage: bool,
}

/// What a caller of [`compact_pass`] asks for.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Want {
    /// The whole log (on-demand compaction).
    Whole,
    /// The next pass of the partition's sweep, reading at most this many bytes (on-demand
    /// compaction on a full disk, `Store::compact_step`).
    SweepStep(u64),
    /// What the partition's garbage calls for, reading at most this many bytes (the
    /// background thread): a pass by garbage, or the next step of a sweep under way.
    Background(u64),
}

impl MaintenanceState {
    /// The pass that `want` means for this partition now.
    pub fn next_pass(&self, want: Want) -> Pass {
        match want {
            Want::Whole => Pass::WHOLE,
            Want::Background(budget_bytes) if self.sweep_cursor.is_none() => {
                Pass::Garbage { budget_bytes }
            }
            Want::SweepStep(budget_bytes) | Want::Background(budget_bytes) => Pass::Sweep {
                budget_bytes,
                start_after: self.sweep_cursor,
            },
        }
    }

    /// Moves the sweep on after a pass. A sweep (or pass by garbage) that reached its end
    /// having dropped nothing waits for `min_dead` more dead records (the partition had `dead`
    /// before the pass).
    pub fn after_pass(&mut self, o: &PassOutcome, dead: u64, min_dead: u64) {
        self.sweep_dropped += o.report.records_dropped;
        if o.by_garbage || o.reached_end || o.last_major.is_none() {
            if self.sweep_dropped == 0 {
                self.compact_when_dead = dead + min_dead.max(1);
            }
            self.sweep_cursor = None;
            self.sweep_dropped = 0;
        } else {
            self.sweep_cursor = o.last_major;
        }
    }
}

/// An index entry to move from an input record to its copy.
struct Remap {
    hash: KeyHash,
    from: u32,
    to: u32,
}

/// Runs one compaction pass on the partition. The caller holds its maintenance lock.
pub(crate) fn compact(
    ctx: &StoreCtx,
    part: &Partition,
    pass: Pass,
    pacer: &mut Pacer,
) -> Result<PassOutcome> {
    // 1. The range.
    let Taken {
        snapshot,
        inputs,
        choice,
        dbs,
    } = take_range(ctx, part, pass)?;
    let mut outcome = PassOutcome {
        report: MaintenanceReport {
            segments_compacted: inputs.len(),
            ..Default::default()
        },
        last_major: inputs.last().map(|s| s.header.order.major),
        reached_end: choice.reaches_end,
        by_garbage: choice.by_garbage,
    };
    let Some(last_input) = inputs.last().map(|s| s.header.order) else {
        return Ok(outcome);
    };
    let report = &mut outcome.report;

    // 2. Copy what survives.
    let mut out = Outputs::new(&snapshot, last_input);
    let mode = ScanMode {
        keep_bytes: true,
        verify_values: true,
        on_damage: ctx.opts.on_damage,
    };
    let mut copy = Copy {
        ctx,
        part,
        out: &mut out,
        report,
        dbs: &dbs,
        prefix: choice.start == 0,
        now: ctx.now_ms(),
        copied: Copied::default(),
        open: Default::default(),
        resolved: Default::default(),
    };
    let scanned = maintenance::scan_records(ctx, part, &inputs, None, mode, |r| {
        pacer.done(1);
        copy.record(r)
    })
    .and_then(|skipped| copy.finish().map(|()| skipped));
    let copied = copy.copied;
    let skipped = match scanned.and_then(|skipped| out.finish(pacer).map(|()| skipped)) {
        Ok(s) => s,
        Err(e) => {
            out.abandon(part);
            return Err(e);
        }
    };
    report.records_copied = copied.remaps.len() as u64 + copied.kept_dead + copied.tombstones;
    report.records_dropped = copied.gone();
    report.damage.extend(skipped);

    // 3. Commit on disk (batch parts whose commit record the pass drops sealed first).
    if let Err(e) = crate::seal::seal_parts(ctx).and_then(|()| out.commit(&part.dir, &inputs)) {
        out.abandon(part);
        return Err(e);
    }
    let outputs = match out.install(&part.dir) {
        Ok(o) => o,
        Err(e) => {
            // Committed on disk, not finished: the files stay as they are for the next open
            // to finish the compaction, and the partition refuses writes (and so checkpoints
            // and compactions, which would overwrite the manifest) until then.
            part.state.write().fail_writes(|| {
                format!("a compaction could not be finished ({e}); reopening finishes it")
            });
            return Err(e);
        }
    };
    report.segments_written = outputs.len();

    // 4. Move the index entries, then the segment list.
    move_index(ctx, part, &copied, pacer, &inputs, &outputs);

    // 5. Retire the inputs.
    for seg in &inputs {
        let _ = fs::remove_file(&seg.path);
    }
    let _ = fs::remove_file(part.dir.join(MANIFEST_FILE));
    sync_dir(&part.dir)?;
    // Their pages go a step at a time, paced: freed by the last drop, all at once, they were
    // tens of ms of kernel work in one system call (`Segment::retire`). A reader that still
    // holds one (it looked a location up before the index moved) drops it when done.
    drop((out, snapshot));
    for seg in inputs {
        if let Ok(seg) = Arc::try_unwrap(seg) {
            seg.retire(|| {
                pacer.step_done();
            });
        }
    }
    Ok(outcome)
}

/// What a pass works from (step 1).
struct Taken {
    /// The partition's segment list when the range was chosen.
    snapshot: SegmentSet,
    /// The range's segments.
    inputs: Vec<Arc<Segment>>,
    choice: Choice,
    /// Which namespaces the databases read then.
    dbs: Arc<DbMap>,
}

/// Step 1: the range, chosen under the partition's write lock (the active segment sealed into
/// it when the choice says so), and what the pass works from.
fn take_range(ctx: &StoreCtx, part: &Partition, pass: Pass) -> Result<Taken> {
    let mut was_active = None;
    let taken = {
        let mut st = part.state.write();
        let _stall = ctx.stalls.hold("compaction range");
        // Bytes of a failed write may lie past the log's end: sealing the active segment must
        // not make them part of the log (reopening cuts them off); and after a failed
        // fdatasync nothing new is to be made to look durable.
        st.writable()?;
        st.appender.flush()?;
        let c = choose::choose(ctx, &st, pass);
        if c.seal_active {
            was_active = Some(st.rotate(ctx, part.id, &part.dir)?);
        }
        Taken {
            snapshot: st.segs.clone(),
            inputs: st.segs.ordered[c.start..c.start + c.len].to_vec(),
            choice: c,
            dbs: st.dbs.clone(),
        }
    };
    // Its unused tail given back without the lock (see `PartState::rotate`).
    if let Some(mut appender) = was_active {
        appender.release_unused()?;
    }
    Ok(taken)
}

/// Step 4: the copied records' index entries moved to their copies, in chunks of
/// `REMAP_CHUNK_ENTRIES` under the write lock (a paced pass sleeps between them); with the
/// last chunk, what the pass drops taken out of the index and the counters, and the outputs
/// swapped in for the inputs.
fn move_index(
    ctx: &StoreCtx,
    part: &Partition,
    copied: &Copied,
    pacer: &mut Pacer,
    inputs: &[Arc<Segment>],
    outputs: &[Arc<Segment>],
) {
    let mut chunks = copied.remaps.chunks(REMAP_CHUNK_ENTRIES).peekable();
    loop {
        let chunk = chunks.next().unwrap_or(&[]);
        pacer.done(chunk.len()); // before the lock: a paced pass sleeps between chunks
        let mut st = part.state.write();
        let _stall = ctx.stalls.hold("compaction index moves");
        for (i, r) in chunk.iter().enumerate() {
            // The probes are cache misses, taken under the write lock: prefetched ahead.
            st.index.prefetch_ahead(chunk, i, |r| r.hash);
            match st.index.find_loc(r.hash, r.from) {
                Some(pos) => st.index.set_loc(pos, r.to),
                // A writer replaced the key since it was copied: the copy is dead.
                None => {
                    if let Some(seg) = st.segs.of_loc(r.to) {
                        seg.count(0, 1);
                    }
                }
            }
        }
        st.dirty = true;
        if chunks.peek().is_none() {
            drop_gone(&mut st, copied);
            swap_segments(&mut st, inputs, outputs);
            return;
        }
    }
}

/// The records the pass drops leave the index and the counters. All were dead (counted in
/// `dead` when they died) but the damaged, expired and flushed live ones dropped here.
fn drop_gone(st: &mut PartState, copied: &Copied) {
    let mut gone_dead = copied.dropped + copied.flushed.len() as u64;
    for &(hash, loc) in &copied.flushed {
        if let Some(pos) = st.index.find_loc(hash, loc) {
            st.index.remove(pos);
            st.expiries.remove(hash.0);
        }
    }
    for d in copied.lost.iter().chain(&copied.expired) {
        match st.index.find_loc(d.hash, d.loc) {
            Some(pos) => {
                st.index.remove(pos);
                st.ns_keys.sub(d.ns, d.slot);
                st.expiries.remove(d.hash.0);
            }
            None => gone_dead += 1,
        }
    }
    let c = &mut st.counters;
    c.records = c.records.saturating_sub(copied.gone()) + copied.tombstones;
    c.dead = c.dead.saturating_sub(gone_dead) + copied.tombstones;
}

/// The share of a core an urgent background pass takes (at least `compact_cpu_share`). Paced
/// all the same, in short slices: unpaced, a pass on a serving thread's core took it for the
/// scheduler's slices of milliseconds, and those were the serving thread's write tails (MSET-32
/// p99 4.7 ms on one core against 1.2 ms paced, BENCHMARKS §51). Half a core is what an
/// unpaced pass got there from the scheduler beside a busy serving thread; where the core is
/// idle, an urgent pass now takes half of it instead of all.
const URGENT_CPU_SHARE: f64 = 0.5;

/// One compaction pass — over the whole log (`budget_bytes: None`, the active segment sealed
/// into it) or the next pass of the partition's sweep — then a checkpoint (the old one names
/// the retired segments; on a full disk it is skipped: the next open is only slower). The
/// caller holds the partition's maintenance lock, `m`. `paced`: a background pass, kept to
/// `compact_cpu_share` of the core, or `URGENT_CPU_SHARE` when the partition's garbage makes
/// it urgent.
pub(crate) fn compact_pass(
    ctx: &StoreCtx,
    part: &Partition,
    m: &mut MaintenanceState,
    want: Want,
    paced: bool,
) -> Result<PassOutcome> {
    let (dead, records, retired) = {
        let st = part.state.read();
        (st.counters.dead, st.counters.records, st.retired)
    };
    // Urgent past halfway from the trigger to all garbage: the pass then takes more.
    let urgent = dead as f64 > (1.0 + ctx.tuning.compact_garbage_ratio()) / 2.0 * records as f64;
    let share = match urgent {
        true => URGENT_CPU_SHARE.max(ctx.tuning.compact_cpu_share()),
        false => ctx.tuning.compact_cpu_share(),
    };
    let mut pacer = Pacer::new(paced.then_some(share));
    // A range export or split holds positions in this log: no records move until it ends. A
    // merged partition has nothing to keep (its directory is being deleted).
    if retired || part.exports.load(std::sync::atomic::Ordering::SeqCst) > 0 {
        return Ok(PassOutcome::default());
    }
    let o = compact(ctx, part, m.next_pass(want), &mut pacer)?;
    m.after_pass(&o, dead, ctx.opts.compact_min_dead_records);
    ctx.maintenance_runs.fetch_add(1, Relaxed);
    ctx.compaction_copied
        .fetch_add(o.report.records_copied, Relaxed);
    ctx.compaction_dropped
        .fetch_add(o.report.records_dropped, Relaxed);
    match checkpoint::save(ctx, part, &mut pacer) {
        Err(e) if e.is_no_space() => {}
        other => other?,
    }
    Ok(o)
}

/// Compacts a partition on demand (`Store::compact`): one pass over its whole log when the
/// disk has room for its live records, else a sweep of passes sized to the free space.
pub(crate) fn compact_partition(
    ctx: &StoreCtx,
    reserve: &DiskReserve,
    part: &Partition,
) -> Result<MaintenanceReport> {
    let r = match compact_locked(ctx, part, Want::Whole) {
        Err(e) if e.is_no_space() => compact_sweep(ctx, reserve, part),
        r => r.map(|o| o.report),
    };
    reserve.restore();
    r
}

/// Compacts a partition in passes of a few segments, on a disk without room for all its
/// live records: each pass needs room for its own range only and frees it before the next.
fn compact_sweep(
    ctx: &StoreCtx,
    reserve: &DiskReserve,
    part: &Partition,
) -> Result<MaintenanceReport> {
    reserve.release();
    let mut total = MaintenanceReport::default();
    // Bounded by the partition's segment groups: each pass takes at least one, so the sweep
    // reaches the end of the log after this many.
    let groups = part.state.read().segs.ordered.len();
    for _ in 0..groups {
        let free = reserve.fs_free_bytes().unwrap_or(0);
        let o = compact_locked(ctx, part, Want::SweepStep(free))?;
        total.merge(o.report);
        if o.reached_end || o.last_major.is_none() {
            break;
        }
    }
    Ok(total)
}

/// One compaction pass (see [`compact_pass`]) under the partition's maintenance lock.
pub(crate) fn compact_locked(ctx: &StoreCtx, part: &Partition, want: Want) -> Result<PassOutcome> {
    let mut m = part.maintenance.lock();
    compact_pass(ctx, part, &mut m, want, false)
}

/// Replaces `inputs` (a contiguous range of the log) by `outputs`, in the segment list and
/// the slot table.
// The inputs are in the log: the caller holds the partition's maintenance lock, so no other
// pass has replaced them since they were chosen, and nothing else removes segments.
#[allow(clippy::expect_used)]
fn swap_segments(st: &mut PartState, inputs: &[Arc<Segment>], outputs: &[Arc<Segment>]) {
    let at = st
        .segs
        .ordered
        .iter()
        .position(|s| Arc::ptr_eq(s, &inputs[0]))
        .expect("maintenance is serialised: the inputs are still in the log");
    debug_assert!(inputs
        .iter()
        .zip(&st.segs.ordered[at..])
        .all(|(a, b)| Arc::ptr_eq(a, b)));
    for seg in inputs {
        st.segs.unregister(seg.slot());
    }
    for seg in outputs {
        // The .tmp handle registered while writing: its counts go on under the final name.
        if let Some(tmp) = st.segs.slot(seg.slot()) {
            seg.take_counts(tmp);
        }
        st.segs.unregister(seg.slot());
        st.segs.register(seg.clone());
    }
    st.segs
        .ordered
        .splice(at..at + inputs.len(), outputs.iter().cloned());
}

fn read_manifest(dir: &Path) -> Result<Option<CompactionManifest>> {
    let path = dir.join(MANIFEST_FILE);
    match fs::read_to_string(&path) {
        Ok(text) => CompactionManifest::decode(&text)
            .map(Some)
            .map_err(|reason| Error::corruption(&path, 0, reason)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io("read compaction manifest", &path, e)),
    }
}

/// The segment files of a partition directory, as a crash left them.
pub(crate) struct SegmentFiles {
    /// Files to open as segments: `*.seg` files and, if a committed compaction was
    /// interrupted, its outputs still named `*.seg.tmp` (read-only opening only; a read-write
    /// opening renames them first).
    pub paths: Vec<std::path::PathBuf>,
    /// Largest file id seen, in any file name.
    pub max_file_id: u64,
}

/// Completes a compaction interrupted by a crash (or, `read_only`, only works out which files
/// it leaves in the log) and lists the partition's segment files.
pub(crate) fn finish_interrupted(dir: &Path, read_only: bool) -> Result<SegmentFiles> {
    let manifest = read_manifest(dir)?;
    let (inputs, outputs): (HashSet<u64>, HashSet<u64>) = match &manifest {
        Some(m) => (
            m.inputs.iter().copied().collect(),
            m.outputs.iter().copied().collect(),
        ),
        None => Default::default(),
    };
    if !read_only {
        if manifest.is_some() {
            for &id in &outputs {
                let tmp = dir.join(tmp_segment_file_name(id));
                if tmp.exists() {
                    let to = dir.join(segment_file_name(id));
                    fs::rename(&tmp, &to)
                        .map_err(|e| Error::io("finish compaction rename", &to, e))?;
                }
            }
            for &id in &inputs {
                let p = dir.join(segment_file_name(id));
                match fs::remove_file(&p) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(Error::io("finish compaction delete", &p, e)),
                }
            }
            sync_dir(dir)?;
            let path = dir.join(MANIFEST_FILE);
            fs::remove_file(&path)
                .map_err(|e| Error::io("remove compaction manifest", &path, e))?;
        }
        let _ = fs::remove_file(dir.join(MANIFEST_TMP_FILE));
    }
    let mut files = SegmentFiles {
        paths: Vec::new(),
        max_file_id: inputs.iter().chain(&outputs).copied().max().unwrap_or(0),
    };
    let entries = fs::read_dir(dir).map_err(|e| Error::io("list partition directory", dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io("list partition directory", dir, e))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let (id, tmp) = if let Some(stem) = name.strip_suffix(SEGMENT_TMP_SUFFIX) {
            (stem, true)
        } else if let Some(stem) = name.strip_suffix(SEGMENT_SUFFIX) {
            (stem, false)
        } else {
            continue;
        };
        let Ok(id) = u64::from_str_radix(id, 16) else {
            continue;
        };
        files.max_file_id = files.max_file_id.max(id);
        let in_log = if tmp {
            // An uncommitted output: deleted (read-write), or ignored (read-only).
            if !read_only {
                let _ = fs::remove_file(entry.path());
            }
            read_only && outputs.contains(&id)
        } else {
            // In a read-only view of an interrupted compaction, its inputs are gone.
            !(read_only && inputs.contains(&id))
        };
        if in_log {
            files.paths.push(entry.path());
        }
    }
    files.paths.sort();
    Ok(files)
}
