//! Background maintenance of a partition: compaction (FAWN-DS Compact), index resizing, and
//! checkpoints. All three run while readers and writers go on.
//!
//! Compaction and resizing are one procedure: snapshot the log end, replay the log into a new
//! index — copying the live records of the compacted segments into new output segments on the
//! way — then take the partition lock briefly to replay the tail written meanwhile and swap.
//! Compaction outputs become part of the store atomically through a manifest file:
//! 1. outputs are written as `*.seg.tmp` and fsynced;
//! 2. `COMPACT` (inputs and outputs) is written to a temp file, fsynced and renamed: the commit;
//! 3. outputs are renamed to `*.seg`, the in-memory state is swapped, inputs are deleted, and
//!    `COMPACT` is removed.
//!
//! Opening a store finishes step 3 if `COMPACT` exists, and otherwise deletes `*.seg.tmp`.

use std::fs;
use std::path::Path;
use std::sync::Arc;

use crate::builder::IndexBuilder;
use crate::checkpoint::{self, CheckpointMeta};
use crate::error::{Error, Result};
use crate::hash::KeyHash;
use crate::index::{Index, CAPACITY_MIN, LOAD_GROW};
use crate::log::format::{self, RecordType, SegmentOrder, RECORD_HEADER_LEN, SEGMENT_HEADER_LEN};
use crate::log::reader::{Scanner, Step};
use crate::log::segment::{
    segment_file_name, sync_dir, tmp_segment_file_name, Segment, SEGMENT_SUFFIX, SEGMENT_TMP_SUFFIX,
};
use crate::log::writer::Appender;
use crate::partition::{new_segment_at, PartState, Partition, SegmentSet, StoreCtx};

const MANIFEST_FILE: &str = "COMPACT";
const MANIFEST_TMP_FILE: &str = "COMPACT.tmp";
/// Below this load (and above twice the minimum capacity) an index is rebuilt smaller.
pub const LOAD_SHRINK: f64 = 0.35;
/// How many times maintenance retries with a larger index when writers outran its estimate.
const RESIZE_ATTEMPTS_MAX: usize = 4;
/// Output buffer of a compaction: records are written in runs of this size.
const COMPACTION_WRITE_BYTES: usize = 1 << 20;

/// What one maintenance pass did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MaintenanceReport {
    pub segments_compacted: usize,
    pub segments_written: usize,
    pub records_copied: u64,
    pub records_dropped: u64,
    pub index_capacity_before: usize,
    pub index_capacity_after: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Rewrite live records of every segment but a fresh active one; rebuild the index.
    Compact,
    /// Rebuild the index at a size fitting its live keys; the log is untouched.
    Resize,
}

/// Whether the partition's index should be resized now.
pub(crate) fn wants_resize(st: &PartState) -> bool {
    let cap = st.index.capacity();
    st.index.load() > LOAD_GROW
        || (cap > 2 * CAPACITY_MIN && (st.index.live() as f64) < LOAD_SHRINK * cap as f64)
}

/// Whether the partition has enough garbage to compact.
pub(crate) fn wants_compaction(ctx: &StoreCtx, st: &PartState) -> bool {
    let c = st.counters;
    ctx.opts.compact_garbage_ratio > 0.0
        && c.dead >= ctx.opts.compact_min_dead_records
        && c.dead as f64 > ctx.opts.compact_garbage_ratio * c.records as f64
}

/// Compacts or resizes the partition. The new index has room for `extra_keys` keys beyond
/// the live ones (a writer waiting to insert that many).
pub(crate) fn run(
    ctx: &StoreCtx,
    part: &Partition,
    mode: Mode,
    extra_keys: usize,
) -> Result<MaintenanceReport> {
    let _serial = part.maintenance.lock();
    let mut extra = extra_keys;
    for _ in 0..RESIZE_ATTEMPTS_MAX {
        match attempt(ctx, part, mode, extra)? {
            Some(report) => {
                ctx.maintenance_runs
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if mode == Mode::Compact {
                    // The old checkpoint names the retired segments: without a new one the
                    // next open would rebuild this partition from its logs.
                    save_checkpoint(ctx, part)?;
                }
                return Ok(report);
            }
            None => extra = extra * 2 + part.state.read().index.live() + 1024,
        }
    }
    Err(Error::InvalidOptions(format!(
        "partition {}: writers kept outgrowing the rebuilt index",
        part.id
    )))
}

/// One pass; `Ok(None)` if the new index turned out too small (retry larger).
fn attempt(
    ctx: &StoreCtx,
    part: &Partition,
    mode: Mode,
    extra_keys: usize,
) -> Result<Option<MaintenanceReport>> {
    // 1. Snapshot: which segments to compact, where the log ends.
    let (snapshot, inputs, end_file_id, end_offset, live, cap_before) = {
        let mut st = part.state.write();
        st.appender.flush()?;
        if mode == Mode::Compact && st.appender.end() > SEGMENT_HEADER_LEN as u64 {
            st.rotate(ctx, part.id, &part.dir)?;
        }
        let n = st.segs.ordered.len();
        let inputs: Vec<Arc<Segment>> = match mode {
            Mode::Compact => st.segs.ordered[..n - 1].to_vec(),
            Mode::Resize => Vec::new(),
        };
        (
            st.segs.clone(),
            inputs,
            st.segs.active().file_id(),
            st.appender.end(),
            st.index.live(),
            st.index.capacity(),
        )
    };
    let mut report = MaintenanceReport {
        segments_compacted: inputs.len(),
        index_capacity_before: cap_before,
        ..Default::default()
    };
    let mut b = IndexBuilder::new(Index::for_keys(live + extra_keys));
    let mut out = Outputs::new(&snapshot, inputs.last().map(|s| s.header.order));

    // 2. Copy the live records of the inputs.
    let copied = copy_live(ctx, part, &inputs, &mut b, &mut out, &mut report);
    let copied = copied.and_then(|()| out.finish());
    if let Err(e) = copied {
        out.abandon(part);
        return Err(e);
    }

    // 3. Replay the rest of the log up to the snapshot end, in place.
    let mut view = snapshot.clone();
    for seg in &out.segments {
        view.register(seg.clone());
    }
    let rest: Vec<Arc<Segment>> = snapshot.ordered[inputs.len()..].to_vec();
    let replayed = replay_range(
        &view,
        &rest,
        SEGMENT_HEADER_LEN as u64,
        end_file_id,
        end_offset,
        &mut b,
    );
    if let Err(e) = replayed {
        out.abandon(part);
        return Err(e);
    }

    // 4. Catch up with the tail and swap, under the partition lock.
    let mut st = part.state.write();
    if let Err(e) = st.appender.flush() {
        drop(st);
        out.abandon(part);
        return Err(e);
    }
    let tail_start = st
        .segs
        .ordered
        .iter()
        .position(|s| s.file_id() == end_file_id)
        .expect("maintenance is serialised: the snapshot's end segment is still there");
    let tail: Vec<Arc<Segment>> = st.segs.ordered[tail_start..].to_vec();
    let (tail_file_id, tail_end) = (st.segs.active().file_id(), st.appender.end());
    let caught_up = replay_range(&st.segs, &tail, end_offset, tail_file_id, tail_end, &mut b);
    if let Err(e) = caught_up {
        drop(st);
        out.abandon(part);
        return Err(e);
    }
    // Batches are appended whole under the partition lock, so members still waiting for a
    // commit record belong to batches aborted by a crash or a failed write: never applied.
    let aborted: usize = b.take_pending().values().map(Vec::len).sum();
    b.discard_members(aborted);
    if b.too_full() {
        drop(st);
        out.abandon(part);
        return Ok(None);
    }
    let outputs = if inputs.is_empty() {
        Vec::new()
    } else {
        match out.commit(&part.dir, &inputs) {
            Ok(o) => o,
            Err(e) => {
                drop(st);
                out.abandon(part);
                return Err(e);
            }
        }
    };
    report.segments_written = outputs.len();
    swap_segments(&mut st, &inputs, &outputs);
    report.index_capacity_after = b.index.capacity();
    st.index = b.index;
    st.counters = b.counters;
    st.dirty = true;
    drop(st);

    // 5. Retire the inputs.
    if !inputs.is_empty() {
        for seg in &inputs {
            let _ = fs::remove_file(&seg.path);
        }
        let _ = fs::remove_file(part.dir.join(MANIFEST_FILE));
        sync_dir(&part.dir)?;
    }
    Ok(Some(report))
}

/// Copies every live put of `inputs` to the outputs and indexes it there.
fn copy_live(
    ctx: &StoreCtx,
    part: &Partition,
    inputs: &[Arc<Segment>],
    b: &mut IndexBuilder,
    out: &mut Outputs,
    report: &mut MaintenanceReport,
) -> Result<()> {
    for seg in inputs {
        let mut sc = Scanner::new(seg, SEGMENT_HEADER_LEN as u64, u64::MAX, false);
        loop {
            match sc.next_step()? {
                Step::Record { offset, header, .. } => {
                    let rec = sc.record();
                    if !header.ty.is_put() {
                        report.records_dropped += 1;
                        continue;
                    }
                    let key = &rec[RECORD_HEADER_LEN..RECORD_HEADER_LEN + header.key_len as usize];
                    let hash = KeyHash::of(key);
                    let loc = out.snapshot_loc(seg.slot(), offset);
                    let live = part.state.read().index.find_loc(hash, loc).is_some();
                    if !live {
                        report.records_dropped += 1;
                        continue;
                    }
                    let new_loc = out.append(ctx, part, rec, header.ty)?;
                    b.insert_new(hash, new_loc);
                    b.counters.records += 1;
                    b.max_seq = b.max_seq.max(header.seq);
                    report.records_copied += 1;
                }
                Step::Damaged { .. } => {}
                Step::End { .. } => break,
            }
        }
    }
    Ok(())
}

/// Replays `segs` in place from `from` (first segment) up to (`end_file_id`, `end_offset`).
fn replay_range(
    view: &SegmentSet,
    segs: &[Arc<Segment>],
    from: u64,
    end_file_id: u64,
    end_offset: u64,
    b: &mut IndexBuilder,
) -> Result<()> {
    for (i, seg) in segs.iter().enumerate() {
        let start = if i == 0 {
            from
        } else {
            SEGMENT_HEADER_LEN as u64
        };
        let limit = if seg.file_id() == end_file_id {
            end_offset
        } else {
            u64::MAX
        };
        let mut sc = Scanner::new(seg, start, limit, false);
        loop {
            match sc.next_step()? {
                Step::Record { offset, header, .. } => {
                    b.apply(view, view.loc(seg.slot(), offset), &header, sc.record())?
                }
                Step::Damaged { .. } => {}
                Step::End { .. } => break,
            }
        }
        if seg.file_id() == end_file_id {
            break;
        }
    }
    Ok(())
}

/// Replaces `inputs` (a prefix of the log) by `outputs`.
fn swap_segments(st: &mut PartState, inputs: &[Arc<Segment>], outputs: &[Arc<Segment>]) {
    for seg in inputs {
        st.segs.unregister(seg.slot());
    }
    let rest: Vec<Arc<Segment>> = st.segs.ordered[inputs.len()..].to_vec();
    for seg in outputs {
        st.segs.unregister(seg.slot()); // the .tmp handle registered while writing
    }
    st.segs.ordered.clear();
    for seg in outputs.iter().chain(rest.iter()) {
        if st.segs.slot(seg.slot()).is_none() {
            st.segs.register(seg.clone());
        }
        st.segs.ordered.push(seg.clone());
    }
}

/// Compaction output segments being written.
struct Outputs {
    /// Addressing of the snapshot (input locations).
    span_set: SegmentSet,
    /// Order of the last input: outputs take `(major, minor + i)`.
    last_input: Option<SegmentOrder>,
    segments: Vec<Arc<Segment>>,
    appender: Option<Appender>,
}

impl Outputs {
    fn new(snapshot: &SegmentSet, last_input: Option<SegmentOrder>) -> Outputs {
        Outputs {
            span_set: snapshot.clone(),
            last_input,
            segments: Vec::new(),
            appender: None,
        }
    }

    fn snapshot_loc(&self, slot: u32, offset: u64) -> u32 {
        self.span_set.loc(slot, offset)
    }

    /// Appends a copy of a live record; returns its new location.
    fn append(
        &mut self,
        ctx: &StoreCtx,
        part: &Partition,
        rec: &[u8],
        ty: RecordType,
    ) -> Result<u32> {
        let need = rec.len() as u64;
        if self.appender.as_ref().is_none_or(|a| a.room() < need) {
            if let Some(a) = self.appender.as_mut() {
                a.flush()?;
            }
            let last = self
                .last_input
                .expect("outputs exist only when there are inputs");
            let order = SegmentOrder {
                major: last.major,
                minor: last.minor + 1 + self.segments.len() as u32,
            };
            let seg = {
                let mut st = part.state.write();
                let slot = st.segs.free_slot(part.id)?;
                let file_id = ctx.alloc_file_id();
                let seg = Arc::new(new_segment_at(
                    ctx,
                    part.id,
                    &part.dir.join(tmp_segment_file_name(file_id)),
                    file_id,
                    slot,
                    order,
                )?);
                st.segs.register(seg.clone());
                seg
            };
            self.segments.push(seg.clone());
            self.appender = Some(Appender::new(
                seg,
                SEGMENT_HEADER_LEN as u64,
                true,
                COMPACTION_WRITE_BYTES,
            ));
        }
        let a = self.appender.as_mut().expect("made above");
        let mut copy = rec.to_vec();
        if ty == RecordType::BatchPut {
            // The batch is committed (its member is live): keep it as a plain record.
            format::retype_record(&mut copy, RecordType::Put);
        }
        let at = a.append(&copy)?;
        Ok(self.span_set.loc(a.segment.slot(), at))
    }

    /// Writes out buffered records and makes the outputs durable.
    fn finish(&mut self) -> Result<()> {
        if let Some(a) = self.appender.as_mut() {
            a.flush()?;
        }
        for seg in &self.segments {
            seg.sync_data()?;
        }
        Ok(())
    }

    /// Commits the compaction on disk: manifest, then renames. Returns the outputs reopened
    /// under their final names.
    fn commit(&self, dir: &Path, inputs: &[Arc<Segment>]) -> Result<Vec<Arc<Segment>>> {
        let ids = |v: &[Arc<Segment>]| {
            v.iter()
                .map(|s| format!("{:016x}", s.file_id()))
                .collect::<Vec<_>>()
                .join(",")
        };
        let manifest = format!(
            "quiver-compaction v1\ninputs {}\noutputs {}\n",
            ids(inputs),
            ids(&self.segments)
        );
        let tmp = dir.join(MANIFEST_TMP_FILE);
        fs::write(&tmp, manifest)
            .and_then(|_| fs::File::open(&tmp)?.sync_all())
            .map_err(|e| Error::io("write compaction manifest", &tmp, e))?;
        let path = dir.join(MANIFEST_FILE);
        fs::rename(&tmp, &path).map_err(|e| Error::io("commit compaction manifest", &path, e))?;
        sync_dir(dir)?;
        let mut reopened = Vec::with_capacity(self.segments.len());
        for seg in &self.segments {
            let to = dir.join(segment_file_name(seg.file_id()));
            fs::rename(&seg.path, &to)
                .map_err(|e| Error::io("rename compaction output", &to, e))?;
            reopened.push(Arc::new(Segment::open(to)?));
        }
        sync_dir(dir)?;
        Ok(reopened)
    }

    /// Drops unfinished outputs: frees their slots and deletes their files.
    fn abandon(self, part: &Partition) {
        let mut st = part.state.write();
        for seg in &self.segments {
            st.segs.unregister(seg.slot());
            let _ = fs::remove_file(&seg.path);
        }
    }
}

/// Completes or rolls back a compaction interrupted by a crash. Returns the largest file id
/// seen in the files it handled.
pub(crate) fn finish_interrupted(dir: &Path) -> Result<u64> {
    let mut max_id = 0;
    let manifest = dir.join(MANIFEST_FILE);
    match fs::read_to_string(&manifest) {
        Ok(text) => {
            let list = |prefix: &str| -> Vec<u64> {
                text.lines()
                    .find_map(|l| l.strip_prefix(prefix))
                    .map(|l| {
                        l.split(',')
                            .filter_map(|x| u64::from_str_radix(x.trim(), 16).ok())
                            .collect()
                    })
                    .unwrap_or_default()
            };
            for id in list("outputs ") {
                max_id = max_id.max(id);
                let tmp = dir.join(tmp_segment_file_name(id));
                if tmp.exists() {
                    let to = dir.join(segment_file_name(id));
                    fs::rename(&tmp, &to)
                        .map_err(|e| Error::io("finish compaction rename", &to, e))?;
                }
            }
            for id in list("inputs ") {
                max_id = max_id.max(id);
                let p = dir.join(segment_file_name(id));
                match fs::remove_file(&p) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(Error::io("finish compaction delete", &p, e)),
                }
            }
            sync_dir(dir)?;
            fs::remove_file(&manifest)
                .map_err(|e| Error::io("remove compaction manifest", &manifest, e))?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io("read compaction manifest", &manifest, e)),
    }
    let _ = fs::remove_file(dir.join(MANIFEST_TMP_FILE));
    if let Ok(entries) = fs::read_dir(dir) {
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if let Some(stem) = name.strip_suffix(SEGMENT_TMP_SUFFIX) {
                if let Ok(id) = u64::from_str_radix(stem, 16) {
                    max_id = max_id.max(id);
                }
                let _ = fs::remove_file(entry.path());
            } else if let Some(stem) = name.strip_suffix(SEGMENT_SUFFIX) {
                if let Ok(id) = u64::from_str_radix(stem, 16) {
                    max_id = max_id.max(id);
                }
            }
        }
    }
    Ok(max_id)
}

/// Writes the partition's checkpoint. The log it refers to is made durable first, so the
/// checkpoint never points at records a power loss could take away.
pub(crate) fn save_checkpoint(ctx: &StoreCtx, part: &Partition) -> Result<()> {
    // Checkpoints are saved from the background thread, from maintenance and on demand; two
    // saves at once would share the partition's temporary file (one rename fails) or let an
    // older snapshot replace a newer one. Encoding and writing are serialised (checkpoints are
    // rare; the lock is taken before any partition lock, so it cannot deadlock).
    static SAVING: parking_lot::Mutex<()> = parking_lot::Mutex::new(());
    let _saving = SAVING.lock();
    let sealed: Vec<Arc<Segment>> = {
        let mut st = part.state.write();
        st.appender.flush()?;
        let n = st.segs.ordered.len();
        st.segs.ordered[..n - 1].to_vec()
    };
    for seg in &sealed {
        seg.sync_data()?;
    }
    let bytes = {
        let mut st = part.state.write();
        st.appender.flush()?;
        // Segments rotated in since the first pass are synced here, with the active one.
        for seg in st
            .segs
            .ordered
            .iter()
            .filter(|s| !sealed.iter().any(|x| Arc::ptr_eq(x, s)))
        {
            seg.sync_data()?;
        }
        let list: Vec<(u64, u32)> = st
            .segs
            .ordered
            .iter()
            .map(|s| (s.file_id(), s.slot()))
            .collect();
        let meta = CheckpointMeta {
            partition: part.id,
            counters: st.counters,
            // Sequence numbers are store-wide: any value at least the partition's largest will do.
            max_seq: ctx.next_seq.load(std::sync::atomic::Ordering::Relaxed),
            end_file_id: st.segs.active().file_id(),
            end_offset: st.appender.end(),
            segments: &list,
        };
        let bytes = checkpoint::encode(&meta, &st.index);
        st.dirty = false;
        bytes
    };
    let written = checkpoint::write(&part.dir, &bytes);
    if written.is_err() {
        // Not saved after all: the background thread must try again.
        part.state.write().dirty = true;
    }
    written
}
