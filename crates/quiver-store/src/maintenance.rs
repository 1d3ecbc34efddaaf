//! Background maintenance of a partition, and what its two procedures share.
//!
//! - `resize` rebuilds the index at a size fitting the live keys (growth, shrinking, and
//!   clearing the tombstones that deletes leave in it);
//! - `compact` rewrites the live records of the oldest segments and frees them (FAWN-DS
//!   Compact), a few segments at a time when disk space is short;
//! - checkpoints (`checkpoint::save`) save the index so reopening replays only the log after
//!   them; a compaction pass ends with one.
//!
//! This module is the layer below both procedures: it knows neither (`compact` and `resize`
//! import it, never the reverse). The drivers of compaction — a pass with its checkpoint,
//! on-demand compaction, sweeps — live with compaction, in `compact`.
//!
//! Neither procedure replays the history of the log into a new index: a put record is kept
//! only if the partition's current index still points at it (a test on locations, no key
//! comparison, see [`scan_records`]). So a partition that once held many keys and deleted them
//! costs nothing more to maintain than one that never had them.

use std::sync::Arc;

use crate::builder::IndexBuilder;
use crate::error::{Error, Result};
use crate::hash::KeyHash;
use crate::index::CAPACITY_MIN;
use crate::log::format::{self, RecordHeader, SEGMENT_HEADER_LEN};
use crate::log::reader::{Scanner, Step};
use crate::log::segment::Segment;
use crate::options::DamagePolicy;
use crate::partition::{PartState, Partition, SegmentSet, StoreCtx};
use crate::stalls::Pacer;

/// Below this load (and above twice the minimum capacity) an index is rebuilt smaller.
pub const LOAD_SHRINK: f64 = 0.35;
/// Put records whose liveness is tested under one shared lock of the partition: long enough
/// to make the lock cheap per record, short enough that writers barely wait for it.
const LIVENESS_CHUNK_RECORDS: usize = 1024;
/// Record bytes a liveness chunk holds at most (compaction keeps the records it tests).
const LIVENESS_CHUNK_BYTES: usize = 1 << 20;

/// What one compaction pass (or several, added up) did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MaintenanceReport {
    pub segments_compacted: usize,
    pub segments_written: usize,
    pub records_copied: u64,
    pub records_dropped: u64,
    /// Damage skipped (only when the store was opened with `DamagePolicy::Salvage`).
    pub damage: Vec<String>,
}

impl MaintenanceReport {
    pub(crate) fn merge(&mut self, r: MaintenanceReport) {
        self.segments_compacted += r.segments_compacted;
        self.segments_written += r.segments_written;
        self.records_copied += r.records_copied;
        self.records_dropped += r.records_dropped;
        self.damage.extend(r.damage);
    }
}

/// Whether the partition's index should be resized now.
pub(crate) fn wants_resize(st: &PartState) -> bool {
    let cap = st.index.capacity();
    st.index.wants_growth()
        || (cap > 2 * CAPACITY_MIN && (st.index.live() as f64) < LOAD_SHRINK * cap as f64)
}

/// Whether the partition has enough garbage to compact: its garbage ratio is above the
/// trigger (and it has more than a token number of dead records).
pub(crate) fn wants_compaction(ctx: &StoreCtx, st: &PartState) -> bool {
    let c = st.counters;
    ctx.tuning.compact_garbage_ratio() > 0.0
        && c.dead >= ctx.opts.compact_min_dead_records.max(1)
        && c.dead as f64 > ctx.tuning.compact_garbage_ratio() * c.records as f64
}

/// A position in a partition's log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LogPos {
    pub file_id: u64,
    pub offset: u64,
}

impl LogPos {
    /// The end of the partition's log now.
    pub fn end_of(st: &PartState) -> LogPos {
        LogPos {
            file_id: st.segs.active().file_id(),
            offset: st.appender.end(),
        }
    }
}

/// A record read by [`scan_records`].
pub(crate) struct ScannedRecord<'a> {
    pub segment: &'a Arc<Segment>,
    pub offset: u64,
    pub loc: u32,
    pub header: RecordHeader,
    /// Puts only: the key's hash, and whether the partition's index pointed at this record
    /// when it was tested.
    pub hash: KeyHash,
    pub live: bool,
    /// The record's bytes (only when the scan keeps them).
    pub bytes: &'a [u8],
    /// Whether the value checksum matched (always true when values are not verified; with
    /// the bytes kept, only live records' values are verified: true for the others).
    pub value_ok: bool,
}

/// How [`scan_records`] reads.
#[derive(Clone, Copy)]
pub(crate) struct ScanMode {
    /// Keep the bytes of every record and hand over every record (compaction copies them);
    /// otherwise only puts, without their bytes (resizing needs their locations).
    pub keep_bytes: bool,
    /// Verify value checksums (with `keep_bytes`, of live records only).
    pub verify_values: bool,
    pub on_damage: DamagePolicy,
}

/// A record waiting in a chunk for the liveness test of its chunk's puts.
struct Held {
    segment: usize,
    offset: u64,
    loc: u32,
    header: RecordHeader,
    hash: KeyHash,
    bytes: std::ops::Range<usize>,
    value_ok: bool,
}

/// Reads `segs` in log order, up to `end` if it lies in one of them, and hands `on_record`
/// every record in order (with `keep_bytes`; else only the puts), each put marked live if
/// the partition's index still points at it — tested in chunks, each under one shared lock
/// of the partition, so writers barely wait. Returns the damage skipped: under
/// `DamagePolicy::Refuse` damage (bytes that are no record, a sealed segment whose rest is
/// unreadable) fails the scan with `Error::Corruption` instead, since a live record could
/// hide there and maintenance must not drop it silently.
pub(crate) fn scan_records(
    ctx: &StoreCtx,
    part: &Partition,
    segs: &[Arc<Segment>],
    end: Option<LogPos>,
    mode: ScanMode,
    mut on_record: impl FnMut(&ScannedRecord<'_>) -> Result<()>,
) -> Result<Vec<String>> {
    let mut skipped = Vec::new();
    // With the records' bytes kept, values are verified once liveness is known, and only the
    // live ones: a dead record's value is never used (its checksum was a sixth of a
    // compaction's time).
    let verify_live_only = mode.verify_values && mode.keep_bytes;
    let span = part.state.read().segs.clone();
    let mut held: Vec<Held> = Vec::with_capacity(LIVENESS_CHUNK_RECORDS);
    let mut chunk: Vec<u8> = Vec::new();
    let mut flush = |held: &mut Vec<Held>, chunk: &mut Vec<u8>| {
        let live: Vec<bool> = {
            let st = part.state.read();
            let _stall = ctx.stalls.hold("liveness tests");
            // The index probes are cache misses (they were most of a compaction's time):
            // each record's home slot is prefetched `index::PREFETCH_AHEAD` records ahead.
            held.iter()
                .enumerate()
                .map(|(i, h)| {
                    st.index.prefetch_ahead(held, i, |h| h.hash);
                    h.header.ty.is_put() && st.index.find_loc(h.hash, h.loc).is_some()
                })
                .collect()
        };
        for (h, live) in held.iter().zip(live) {
            let bytes = &chunk[h.bytes.clone()];
            on_record(&ScannedRecord {
                segment: &segs[h.segment],
                offset: h.offset,
                loc: h.loc,
                header: h.header,
                hash: h.hash,
                live,
                bytes,
                value_ok: match verify_live_only {
                    true => !live || format::value_checksum_ok(bytes, &h.header),
                    false => h.value_ok,
                },
            })?;
        }
        held.clear();
        chunk.clear();
        Ok::<(), Error>(())
    };
    for (i, seg) in segs.iter().enumerate() {
        let limit = match end {
            Some(e) if e.file_id == seg.file_id() => e.offset,
            _ => u64::MAX,
        };
        let mut sc = Scanner::new(
            seg,
            SEGMENT_HEADER_LEN as u64,
            limit,
            mode.verify_values && !verify_live_only,
        );
        loop {
            match sc.next_step()? {
                Step::Record {
                    offset,
                    header,
                    value_ok,
                } => {
                    if !mode.keep_bytes && !header.ty.is_put() {
                        continue;
                    }
                    let rec = sc.record();
                    let key = &rec[header.key_range()];
                    let namespace = header.ext(rec).namespace;
                    let at = chunk.len();
                    if mode.keep_bytes {
                        chunk.extend_from_slice(rec);
                    }
                    held.push(Held {
                        segment: i,
                        offset,
                        loc: span.loc(seg.slot(), offset),
                        header,
                        hash: KeyHash::of_ns(namespace, key),
                        bytes: at..chunk.len(),
                        value_ok,
                    });
                    if held.len() >= LIVENESS_CHUNK_RECORDS || chunk.len() >= LIVENESS_CHUNK_BYTES {
                        flush(&mut held, &mut chunk)?;
                    }
                }
                Step::Damaged {
                    offset,
                    resume_at,
                    reason,
                } => damage(
                    mode.on_damage,
                    seg,
                    offset,
                    format!("{reason}; {} bytes skipped", resume_at - offset),
                    &mut skipped,
                )?,
                Step::End { offset, torn } => {
                    if let Some(reason) = torn {
                        damage(
                            mode.on_damage,
                            seg,
                            offset,
                            format!("{reason}; the rest of the segment is unreadable"),
                            &mut skipped,
                        )?;
                    }
                    break;
                }
            }
        }
        if limit != u64::MAX {
            break;
        }
    }
    flush(&mut held, &mut chunk)?;
    Ok(skipped)
}

fn damage(
    policy: DamagePolicy,
    seg: &Segment,
    offset: u64,
    what: String,
    skipped: &mut Vec<String>,
) -> Result<()> {
    match policy {
        DamagePolicy::Refuse => Err(Error::corruption(&seg.path, offset, what)),
        DamagePolicy::Salvage => {
            skipped.push(format!("{} at offset {offset}: {what}", seg.path.display()));
            Ok(())
        }
    }
}

/// Calls `f` with every record of the log `segs` from `from` to `end`, in log order (segment,
/// offset, header, record bytes); damage is an error. `Ok(false)` if no segment of `segs` is
/// `from`'s (compaction replaced it).
pub(crate) fn records_between(
    segs: &[Arc<Segment>],
    from: LogPos,
    end: LogPos,
    mut f: impl FnMut(&Arc<Segment>, u64, &RecordHeader, &[u8]) -> Result<()>,
) -> Result<bool> {
    let Some(start) = segs.iter().position(|s| s.file_id() == from.file_id) else {
        return Ok(false);
    };
    for seg in &segs[start..] {
        let first = if seg.file_id() == from.file_id {
            from.offset
        } else {
            SEGMENT_HEADER_LEN as u64
        };
        let at_end = seg.file_id() == end.file_id;
        let limit = if at_end { end.offset } else { u64::MAX };
        let mut sc = Scanner::new(seg, first, limit, false);
        // Bounded by the segment: each step moves past a record or ends.
        loop {
            match sc.next_step()? {
                Step::Record { offset, header, .. } => f(seg, offset, &header, sc.record())?,
                Step::Damaged { offset, reason, .. } => {
                    return Err(Error::corruption(&seg.path, offset, reason))
                }
                Step::End { .. } => break,
            }
        }
        if at_end {
            break;
        }
    }
    Ok(true)
}

/// Replays the log from `from` to the partition's end into `b` (under the partition's
/// exclusive lock: the catch-up step of a resize). Batches are appended whole under that
/// lock, so a part ended by a BatchEnd at the end is committed, and members left without
/// their commit or end record belong to batches that failed: they are dropped.
// The snapshot's end segment is still in the log: the caller holds the partition's
// maintenance lock, so no compaction has replaced it, and nothing else removes segments.
pub(crate) fn catch_up(st: &PartState, from: LogPos, b: &mut IndexBuilder) -> Result<()> {
    // Under the partition's lock: never paced.
    replay_between(&st.segs, from, LogPos::end_of(st), b, &mut Pacer::new(None))?;
    b.finish_live(&st.segs)
}

/// Applies to `b` the records of `segs` from `from` to `end`, in log order: a round of a
/// catch-up done in several (`catch_up` ends it: a batch may end in a later round), `pacer`
/// told of each record.
pub(crate) fn replay_between(
    segs: &SegmentSet,
    from: LogPos,
    end: LogPos,
    b: &mut IndexBuilder,
    pacer: &mut Pacer,
) -> Result<()> {
    let found = records_between(&segs.ordered, from, end, |seg, offset, h, rec| {
        pacer.done(1);
        b.apply(segs, segs.loc(seg.slot(), offset), h, rec)
    })?;
    assert!(
        found,
        "maintenance is serialised: the snapshot's end segment is still there"
    );
    Ok(())
}
