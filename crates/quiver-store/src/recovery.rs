//! Opening a partition: finish an interrupted compaction, open its segments, load the index
//! checkpoint and replay the log after it (or rebuild the index from the whole log), truncate a
//! torn tail, and hand back batches whose fate depends on other partitions; then, over all
//! partitions, deciding those batches (`resolve_batches`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs;
use std::path::Path;
use std::sync::Arc;

use crate::builder::{IndexBuilder, Member};
use crate::checkpoint;
use crate::dbs::DbMap;
use crate::error::{Error, Result};
use crate::index::{Index, LOAD_AFTER_REBUILD};
use crate::log::format::{FORMAT_VERSION, FORMAT_VERSION_V1, SEGMENT_HEADER_LEN};
use crate::log::reader::{Scanner, Step};
use crate::log::segment::Segment;
use crate::partition::{SegmentSet, StoreCtx};
use crate::slot::SlotRange;

/// What opening the store found and did.
#[derive(Clone, Debug, Default)]
pub struct RecoveryReport {
    pub partitions_from_checkpoint: u32,
    pub partitions_rebuilt: u32,
    /// Records replayed from the logs.
    pub records_replayed: u64,
    /// Torn tails truncated (file and offset).
    pub torn_tails: Vec<String>,
    /// Damage found in the middle of logs or in files: each names a file, an offset and what
    /// may be affected. Opening with `DamagePolicy::Refuse` fails when there is any; with
    /// `Salvage`, the store opens without it (never returning it as data).
    pub damage: Vec<String>,
    /// Segment files that could not be used at all (unreadable header, another store's
    /// layout, a slot taken twice): skipped, and listed in `damage` too.
    pub unusable_files: Vec<std::path::PathBuf>,
    /// Checkpoints not used, and why.
    pub checkpoints_ignored: Vec<String>,
    /// Multi-partition batches completed by writing their missing commit records.
    pub batches_repaired: u64,
    /// Batches interrupted before any commit record: discarded.
    pub batches_aborted: u64,
}

impl RecoveryReport {
    /// Adds another partition's findings to this report.
    pub(crate) fn merge(&mut self, other: RecoveryReport) {
        self.partitions_from_checkpoint += other.partitions_from_checkpoint;
        self.partitions_rebuilt += other.partitions_rebuilt;
        self.records_replayed += other.records_replayed;
        self.torn_tails.extend(other.torn_tails);
        self.damage.extend(other.damage);
        self.unusable_files.extend(other.unusable_files);
        self.checkpoints_ignored.extend(other.checkpoints_ignored);
        self.batches_repaired += other.batches_repaired;
        self.batches_aborted += other.batches_aborted;
    }
}

/// Progress of index rebuilding, for the CLI's progress bar.
#[derive(Clone, Copy, Debug)]
pub struct RecoveryProgress {
    pub partition: u32,
    pub partitions: u32,
    pub bytes_done: u64,
    pub bytes_total: u64,
}

/// A partition after replay, before cross-partition batch resolution.
pub(crate) struct Recovered {
    /// The partition's id.
    pub partition: u32,
    pub segs: SegmentSet,
    pub builder: IndexBuilder,
    /// End of the log in the last segment (None: the partition has no segment yet).
    pub end_offset: Option<u64>,
    /// Batch parts replayed without their commit record: `resolve_batches` decides.
    pub pending: HashMap<u64, Vec<Member>>,
    /// (seq, members) of the batches `resolve_batches` applied here whose commit record this
    /// partition lacks: opening writes them.
    pub missing_commits: Vec<(u64, u32)>,
    /// The batch whose part ends the log (see `IndexBuilder::tail_batch`).
    pub tail_batch: Option<u64>,
    pub max_file_id: u64,
    /// Loaded from a checkpoint that already describes the whole log: nothing to checkpoint.
    pub clean: bool,
}

pub(crate) fn recover_partition(
    ctx: &StoreCtx,
    part: u32,
    range: Option<SlotRange>,
    dbs: &Arc<DbMap>,
    dir: &Path,
    report: &mut RecoveryReport,
    progress: &mut dyn FnMut(RecoveryProgress),
) -> Result<Recovered> {
    let read_only = ctx.opts.read_only;
    if !read_only {
        fs::create_dir_all(dir).map_err(|e| Error::io("create partition directory", dir, e))?;
    }
    let files = crate::compact::finish_interrupted(dir, read_only)?;
    let mut max_file_id = files.max_file_id;
    let segs = open_segments(ctx, part, &files.paths, report, &mut max_file_id)?;
    let bytes_total: u64 = segs
        .ordered
        .iter()
        .map(|s| {
            use std::os::unix::fs::MetadataExt;
            s.file().metadata().map(|m| m.blocks() * 512).unwrap_or(0)
        })
        .sum();
    let mut prog = |done: u64| {
        progress(RecoveryProgress {
            partition: part,
            partitions: ctx.opts.partitions,
            bytes_done: done,
            bytes_total,
        })
    };

    let ckpt = match checkpoint::load(dir, part, range, &segs) {
        Ok(c) => c,
        Err(reason) => {
            report.checkpoints_ignored.push(format!(
                "{}: {reason}",
                checkpoint::checkpoint_path(dir).display()
            ));
            None
        }
    };
    if let Some(ck) = ckpt {
        let mut b = IndexBuilder::for_range(ck.index, range).with_dbs(dbs.clone());
        b.counters = ck.counters;
        b.expiries = ck.expiries;
        b.ns_keys = ck.ns_keys;
        b.max_seq = ck.max_seq;
        let start = ck.end_segment;
        // Damage this attempt finds is found again by the rebuild if it is not kept. (A torn
        // tail it truncated stays reported: the rebuild will not see it again.)
        let before = report.clone();
        let end = replay(ctx, &segs, start, ck.end_offset, &mut b, report, &mut prog)?;
        if !b.too_full() {
            report.partitions_from_checkpoint += 1;
            let clean = report.records_replayed == before.records_replayed
                && report.torn_tails.len() == before.torn_tails.len()
                && end == Some(ck.end_offset);
            report.damage.append(&mut b.problems);
            return Ok(finish(part, segs, b, end, max_file_id, clean));
        }
        report.damage.truncate(before.damage.len());
        report.records_replayed = before.records_replayed;
    }

    // No usable checkpoint: rebuild from the whole log, sized by counting records first.
    report.partitions_rebuilt += 1;
    let puts = count_puts(&segs)?;
    let mut capacity_keys =
        (puts as usize).max((ctx.opts.expected_keys / ctx.opts.partitions as u64) as usize);
    // Sized by every put of the log, the first rebuild has room (each insert takes at most
    // one slot); the bound only guards that reasoning.
    for _ in 0..REBUILD_ATTEMPTS_MAX {
        let mut b =
            IndexBuilder::for_range(Index::for_keys_at(capacity_keys, LOAD_AFTER_REBUILD), range)
                .with_dbs(dbs.clone());
        let end = replay(
            ctx,
            &segs,
            0,
            SEGMENT_HEADER_LEN as u64,
            &mut b,
            report,
            &mut prog,
        )?;
        if !b.too_full() {
            report.damage.append(&mut b.problems);
            return Ok(finish(part, segs, b, end, max_file_id, false));
        }
        capacity_keys = capacity_keys * 2 + 1024;
    }
    Err(Error::corruption(
        dir,
        0,
        format!(
            "the index rebuilt from {puts} put records overflowed {REBUILD_ATTEMPTS_MAX} times"
        ),
    ))
}

/// Index rebuilds from the whole log tried before giving up (see `recover_partition`).
const REBUILD_ATTEMPTS_MAX: usize = 4;

fn finish(
    partition: u32,
    segs: SegmentSet,
    mut b: IndexBuilder,
    end: Option<u64>,
    max_file_id: u64,
    clean: bool,
) -> Recovered {
    let pending = b.take_pending();
    let tail_batch = b.tail_batch;
    Recovered {
        partition,
        tail_batch,
        clean: clean && pending.is_empty(),
        segs,
        builder: b,
        end_offset: end,
        pending,
        missing_commits: Vec::new(),
        max_file_id,
    }
}

/// Decides the fate of the batches whose parts partitions hold without a commit record and
/// without a record after them: a crash came while a multi-partition batch was being written,
/// or right after. A batch is committed if *any* partition holds its commit record (written
/// in one append with its last part, once every other part was written and, in `fsync` mode,
/// synced; see `commit`): its part is then applied here, and a commit record noted to write
/// after it (`Recovered::missing_commits`), which seals it. Otherwise its members are
/// discarded, and a part that ends the log is cut off (unless `read_only`), so that no
/// record written later follows it (replay would take that as proof it is committed).
pub(crate) fn resolve_batches(
    recovered: &mut [Recovered],
    report: &mut RecoveryReport,
    read_only: bool,
) -> Result<()> {
    let committed: HashSet<u64> = recovered
        .iter()
        .flat_map(|r| r.builder.commits.iter().copied())
        .collect();
    let mut repaired: HashSet<u64> = HashSet::new();
    let mut aborted: HashSet<u64> = HashSet::new();
    for rec in recovered.iter_mut() {
        // In seq order, as the batches were written.
        let pending: BTreeMap<u64, Vec<Member>> =
            std::mem::take(&mut rec.pending).into_iter().collect();
        for (seq, members) in pending {
            if committed.contains(&seq) {
                rec.builder.apply_members(&rec.segs, &members)?;
                // Replay left room for every pending member (`IndexBuilder::too_full`): a
                // member that did not fit would be a committed key lost.
                if rec.builder.too_full() {
                    return Err(Error::IndexFull {
                        partition: rec.partition,
                        keys: members.len(),
                    });
                }
                rec.missing_commits.push((seq, members.len() as u32));
                repaired.insert(seq);
                continue;
            }
            rec.builder.discard_members(members.len());
            aborted.insert(seq);
            if rec.tail_batch == Some(seq) && !read_only {
                cut_part(rec, &members, report)?;
            }
        }
    }
    report.batches_repaired = repaired.len() as u64;
    report.batches_aborted = aborted.len() as u64;
    Ok(())
}

/// Cuts an uncommitted part that ends the log off it (in the last segment, from its first
/// member on).
fn cut_part(rec: &mut Recovered, members: &[Member], report: &mut RecoveryReport) -> Result<()> {
    let (Some(first), Some(last), Some(end)) =
        (members.first(), rec.segs.ordered.last(), rec.end_offset)
    else {
        return Ok(());
    };
    let (seg, offset) = rec.segs.resolve(first.loc)?;
    if !Arc::ptr_eq(seg, last) || offset >= end {
        return Ok(());
    }
    seg.zero_from(offset)?;
    report.torn_tails.push(format!(
        "{} at offset {offset}: part of a batch that was not committed; truncated",
        seg.path.display()
    ));
    rec.end_offset = Some(offset);
    rec.clean = false;
    Ok(())
}

fn open_segments(
    ctx: &StoreCtx,
    part: u32,
    paths: &[std::path::PathBuf],
    report: &mut RecoveryReport,
    max_file_id: &mut u64,
) -> Result<SegmentSet> {
    let read_only = ctx.opts.read_only;
    let mut found: Vec<Segment> = Vec::new();
    for path in paths {
        match Segment::open(path.clone(), read_only) {
            Ok(seg) => {
                *max_file_id = (*max_file_id).max(seg.file_id());
                let h = seg.header;
                let version = if ctx.opts.legacy_v1 {
                    FORMAT_VERSION_V1
                } else {
                    FORMAT_VERSION
                };
                if h.partition != part
                    || h.version != version
                    || h.segment_bytes != ctx.opts.segment_bytes
                {
                    report.damage.push(format!(
                        "{}: segment belongs to another layout (partition {}, format {}, {} \
                         bytes); skipped",
                        seg.path.display(),
                        h.partition,
                        h.version,
                        h.segment_bytes
                    ));
                    report.unusable_files.push(seg.path.clone());
                    continue;
                }
                found.push(seg);
            }
            Err(_) if creation_interrupted(path) => {
                if !read_only {
                    fs::remove_file(path)
                        .map_err(|e| Error::io("remove unfinished segment", path, e))?;
                }
                report.torn_tails.push(format!(
                    "{}: empty segment file (a crash interrupted its creation); removed",
                    path.display()
                ));
            }
            Err(e) => {
                report.damage.push(format!("{e}; segment skipped"));
                report.unusable_files.push(path.clone());
            }
        }
    }
    found.sort_by_key(|s| s.header.order);
    let mut segs = SegmentSet::new(ctx.opts.segment_bytes);
    for seg in found {
        if segs.slot(seg.slot()).is_some() {
            report.damage.push(format!(
                "{}: slot {} used twice; segment skipped",
                seg.path.display(),
                seg.slot()
            ));
            report.unusable_files.push(seg.path.clone());
            continue;
        }
        if !read_only {
            seg.ensure_full_length()?;
        }
        segs.push(Arc::new(seg));
    }
    Ok(segs)
}

/// Whether a segment file that does not open is shorter than its header and holds only zeros:
/// a crash came between creating the file and writing its header, so it never held a record.
fn creation_interrupted(path: &Path) -> bool {
    match fs::metadata(path) {
        Ok(m) if m.len() < SEGMENT_HEADER_LEN as u64 => {
            fs::read(path).is_ok_and(|b| b.iter().all(|&x| x == 0))
        }
        _ => false,
    }
}

/// Counts put records (an upper bound of live keys) to size a rebuilt index.
fn count_puts(segs: &SegmentSet) -> Result<u64> {
    let mut puts = 0;
    for seg in &segs.ordered {
        let mut sc = Scanner::new(seg, SEGMENT_HEADER_LEN as u64, u64::MAX, false);
        loop {
            match sc.next_step()? {
                Step::Record { header, .. } => puts += header.ty.is_put() as u64,
                Step::Damaged { .. } => {}
                Step::End { .. } => break,
            }
        }
    }
    Ok(puts)
}

/// Replays segments `start..` (the first from `offset`) into `b`; truncates a torn tail in the
/// last segment. Returns the log end in the last segment.
fn replay(
    ctx: &StoreCtx,
    segs: &SegmentSet,
    start: usize,
    offset: u64,
    b: &mut IndexBuilder,
    report: &mut RecoveryReport,
    prog: &mut dyn FnMut(u64),
) -> Result<Option<u64>> {
    let mut end = None;
    let mut done = 0u64;
    let last = segs.ordered.len().saturating_sub(1);
    for (i, seg) in segs.ordered.iter().enumerate().skip(start) {
        let from = if i == start {
            offset
        } else {
            SEGMENT_HEADER_LEN as u64
        };
        // Values are verified in the last segment: a write cut short there (a crash, a full
        // disk) can leave a whole header and key before a partial value. Such a record is held
        // back: if it is the last one, it is the torn tail (the key keeps its previous value);
        // if records follow, it is damage in the middle: it is indexed, so a read of its key
        // reports it, and it is reported here.
        let mut sc = Scanner::new(seg, from, u64::MAX, i == last);
        let mut held: Option<(u64, crate::log::format::RecordHeader, Vec<u8>)> = None;
        loop {
            let step = sc.next_step()?;
            if !matches!(step, Step::End { .. }) {
                if let Some((offset, header, rec)) = held.take() {
                    report.damage.push(format!(
                        "{} at offset {offset}: record value checksum mismatch; reads of key {} \
                         report the damage",
                        seg.path.display(),
                        crate::error::show_key(crate::log::format::record_key(&rec))
                    ));
                    b.apply(segs, segs.loc(seg.slot(), offset), &header, &rec)?;
                    report.records_replayed += 1;
                }
            }
            match step {
                Step::Record {
                    offset,
                    header,
                    value_ok: false,
                } => held = Some((offset, header, sc.record().to_vec())),
                Step::Record { offset, header, .. } => {
                    let loc = segs.loc(seg.slot(), offset);
                    b.apply(segs, loc, &header, sc.record())?;
                    report.records_replayed += 1;
                }
                Step::Damaged {
                    offset,
                    resume_at,
                    reason,
                } => report.damage.push(format!(
                    "{} at offset {offset}: {reason}; {} bytes up to the next valid record are \
                     unreadable (the newest values of the keys written there are lost; older \
                     ones would show)",
                    seg.path.display(),
                    resume_at - offset
                )),
                Step::End { offset, torn } => {
                    let (offset, torn) = match held.take() {
                        Some((at, ..)) => {
                            (at, Some("record value checksum mismatch (value cut short)"))
                        }
                        None => (offset, torn),
                    };
                    if let Some(reason) = torn {
                        if i == last {
                            // Read-only: the tail is only ignored (the log ends before it).
                            if !ctx.opts.read_only {
                                seg.zero_from(offset)?;
                            }
                            report.torn_tails.push(format!(
                                "{} at offset {offset}: {reason}; truncated",
                                seg.path.display()
                            ));
                        } else {
                            report.damage.push(format!(
                                "{} at offset {offset}: {reason}; the rest of the segment is \
                                 unreadable (the newest values of the keys written there are \
                                 lost; older ones would show)",
                                seg.path.display()
                            ));
                        }
                    }
                    end = Some(offset);
                    done += offset;
                    prog(done);
                    break;
                }
            }
        }
    }
    Ok(end)
}
