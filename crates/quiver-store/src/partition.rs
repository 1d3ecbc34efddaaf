//! One partition: a FAWN-DS datastore — its segments, its append point, its index — and the
//! locks that guard them.
//!
//! Locking model (see ARCHITECTURE.md): `state` is a reader-writer lock. Readers hold it shared
//! from index probe to the end of their value reads, so a vector sees one state of the
//! partition; writers hold it exclusive while they append and update the index — a writer of
//! this partition alone looks up, reads and plans under an intent first, which shuts out
//! other writers but not readers (`serving`). Operations that span partitions take the locks
//! in ascending partition order. `maintenance` serialises
//! index growth and compaction of the partition; they work mostly without `state` and take it
//! exclusive only to catch up with the log tail and swap.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::dbs::DbMap;
use crate::error::{Error, Result};
use crate::expiry::Expiries;
use crate::group_commit::GroupCommit;
use crate::index::Index;
use crate::io::ReadBackend;
use crate::key_counts::NsKeys;
use crate::log::ahead::PagesAhead;
use crate::log::format::{
    SegmentHeader, SegmentOrder, FORMAT_VERSION, RECORD_ALIGN, SEGMENT_HEADER_LEN,
};
use crate::log::segment::{segment_file_name, sync_dir, Segment};
use crate::log::writer::Appender;
use crate::options::{Durability, Options};

mod serving;

pub use serving::LockStats;
pub(crate) use serving::{
    intend_all, intend_all_after, release_all, upgrade_all, write_all, LockFigures, StateLock,
    WriteHold, WriteIntent,
};

/// Seqs a thread takes from `StoreCtx::next_seq` at once for its plain records
/// (`StoreCtx::plain_seq`).
const PLAIN_SEQ_BLOCK: u64 = 1024;

/// Tells stores apart in `PLAIN_SEQS` (a thread may write to several stores of one process).
static NEXT_STORE_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// This thread's block of plain-record seqs: (store id, next, end).
    static PLAIN_SEQS: std::cell::Cell<(u64, u64, u64)> = const { std::cell::Cell::new((0, 0, 0)) };
}

/// A store id for `StoreCtx::id`, unique in the process.
pub(crate) fn new_store_id() -> u64 {
    NEXT_STORE_ID.fetch_add(1, Ordering::Relaxed)
}

/// State shared by all partitions of a store.
pub(crate) struct StoreCtx {
    /// Unique in the process (`new_store_id`).
    pub id: u64,
    pub opts: Options,
    /// What of `opts` may change while the store is open (compaction's trigger and pacing).
    pub tuning: crate::tuning::Tuning,
    pub backend: Box<dyn ReadBackend>,
    /// Next segment file number (unique across the store's life).
    pub next_file_id: AtomicU64,
    /// Next record sequence number.
    pub next_seq: AtomicU64,
    /// Running estimate of value length, for first-round read sizes.
    pub value_len_estimate: AtomicUsize,
    /// Completed compactions and index resizes (for monitoring).
    pub maintenance_runs: AtomicU64,
    /// Records compaction copied and dropped (for monitoring: copies per record written are
    /// what compaction costs).
    pub compaction_copied: AtomicU64,
    pub compaction_dropped: AtomicU64,
    /// Maintenance's holds of partitions' locks that keep writers waiting.
    pub stalls: crate::stalls::Stalls,
    /// The keys the expiry sweep deleted, kept while someone asks (`Store::report_expired`).
    pub expired: crate::swept::ExpiredKeys,
    /// Set while the disk reserve is released (see `reserve`): appenders then allocate no
    /// disk blocks ahead of need.
    pub space_short: Arc<AtomicBool>,
    /// Partitions whose log holds batch parts ended by a BatchEnd and not yet sealed (see
    /// `commit::seal_parts`).
    pub unsealed: Mutex<Vec<Arc<Partition>>>,
    /// Faults in the pages of the partitions' reserved log blocks ahead of their appends
    /// (`log::ahead`); `os` durability, writable stores.
    pub pages_ahead: Option<Arc<PagesAhead>>,
}

impl StoreCtx {
    /// The appender of a partition's log, in `segment` from `end`.
    pub fn log_appender(&self, segment: Arc<Segment>, end: u64) -> Appender {
        let appender = Appender::new(
            segment,
            end,
            self.opts.durability == Durability::None,
            self.opts.write_buffer_bytes_max,
            self.space_short.clone(),
            self.pages_ahead.clone(),
        );
        match self.opts.durability {
            Durability::Fsync => appender.zeroing_ahead(),
            _ => appender,
        }
    }

    /// After a write has let go of its partition locks: a step of the log pages the
    /// `quiver-pages` thread has left queued (`PagesAhead::help`).
    pub fn help_pages_ahead(&self) {
        if let Some(ahead) = &self.pages_ahead {
            ahead.help();
        }
    }

    pub fn alloc_file_id(&self) -> u64 {
        self.next_file_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Now, for key expiry (milliseconds since the Unix epoch).
    #[inline]
    pub fn now_ms(&self) -> u64 {
        self.opts.clock.now_ms()
    }

    /// A seq from the store-wide counter: for batches (whose seqs also order the batches
    /// replay completes, `recovery::resolve_batches`), seals and migrations.
    pub fn alloc_seq(&self) -> u64 {
        self.next_seq.fetch_add(1, Ordering::Relaxed)
    }

    /// A seq for a plain record, from this thread's block of `PLAIN_SEQ_BLOCK`: the
    /// store-wide counter is a cache line every core would write for every key written. A
    /// plain record's seq need only be unique and below `next_seq` (what checkpoints and
    /// opening take as the largest): replay orders records by their place in the log, never by
    /// seq, and only a batch's seq identifies anything.
    pub fn plain_seq(&self) -> u64 {
        PLAIN_SEQS.with(|block| {
            let (store, next, end) = block.get();
            if store == self.id && next < end {
                block.set((store, next + 1, end));
                return next;
            }
            let start = self.next_seq.fetch_add(PLAIN_SEQ_BLOCK, Ordering::Relaxed);
            block.set((self.id, start + 1, start + PLAIN_SEQ_BLOCK));
            start
        })
    }

    /// Records the length of a value written, keeping a cheap running estimate.
    pub fn observe_value_len(&self, len: usize) {
        let old = self.value_len_estimate.load(Ordering::Relaxed);
        let new = (old * 7 + len) / 8;
        if new != old {
            self.value_len_estimate.store(new, Ordering::Relaxed);
        }
    }

    /// Value length a first-round read allows for: the running estimate when the value is
    /// wanted, else none. Read once per vector, not per key.
    pub fn value_len_guess(&self, with_value: bool) -> usize {
        if with_value {
            self.value_len_estimate.load(Ordering::Relaxed)
        } else {
            0
        }
    }
}

/// First-round read length for a record with a `key_len`-byte key and a value of about
/// `value_len_guess` bytes.
pub(crate) fn first_read_len(key_len: usize, value_len_guess: usize) -> usize {
    /// Upper bound of a first-round read: larger records take a second round.
    const FIRST_READ_BYTES_MAX: usize = 4096;
    crate::io::record_read_hint(key_len, value_len_guess)
        .next_multiple_of(RECORD_ALIGN)
        .min(FIRST_READ_BYTES_MAX)
}

/// The segments of a partition: in log order, and by addressing slot.
#[derive(Clone)]
pub(crate) struct SegmentSet {
    /// Log order; the last one is the active (appended-to) segment.
    pub ordered: Vec<Arc<Segment>>,
    /// Slot -> segment. Also holds compaction outputs not yet in `ordered`.
    by_slot: Vec<Option<Arc<Segment>>>,
    /// 8-byte units per slot: `segment_bytes / 8`.
    span: u64,
    slots_max: u64,
    /// Slots let go of so far (`unregister`): a location names the same record later only
    /// while no slot was let go of (a slot is taken again by a new segment).
    released: u64,
}

impl SegmentSet {
    pub fn new(segment_bytes: u64) -> SegmentSet {
        let span = segment_bytes / RECORD_ALIGN as u64;
        SegmentSet {
            ordered: Vec::new(),
            by_slot: Vec::new(),
            span,
            slots_max: (1u64 << 32) / span,
            released: 0,
        }
    }

    pub fn slot(&self, slot: u32) -> Option<&Arc<Segment>> {
        self.by_slot.get(slot as usize).and_then(|s| s.as_ref())
    }

    /// Index location of `offset` in the segment at `slot`.
    #[inline]
    pub fn loc(&self, slot: u32, offset: u64) -> u32 {
        debug_assert_eq!(offset % RECORD_ALIGN as u64, 0);
        (slot as u64 * self.span + offset / RECORD_ALIGN as u64) as u32
    }

    /// (slot, offset) of an index location.
    #[inline]
    pub fn locate(&self, loc: u32) -> (u32, u64) {
        let loc = loc as u64;
        (
            (loc / self.span) as u32,
            (loc % self.span) * RECORD_ALIGN as u64,
        )
    }

    /// The segment a location lies in, if any (a cheap lookup for counting: no offset check).
    #[inline]
    pub fn of_loc(&self, loc: u32) -> Option<&Arc<Segment>> {
        self.slot(self.locate(loc).0)
    }

    /// Segment and offset of a location; an error if no segment has that slot (which only a
    /// damaged checkpoint could cause).
    pub fn resolve(&self, loc: u32) -> Result<(&Arc<Segment>, u64)> {
        let (slot, offset) = self.locate(loc);
        match self.slot(slot) {
            Some(seg) if offset >= SEGMENT_HEADER_LEN as u64 => Ok((seg, offset)),
            _ => Err(Error::corruption(
                PathBuf::from(format!("<slot {slot}>")),
                offset,
                "index location names no segment",
            )),
        }
    }

    /// Smallest free slot.
    pub fn free_slot(&self, partition: u32) -> Result<u32> {
        if let Some(i) = self.by_slot.iter().position(|s| s.is_none()) {
            return Ok(i as u32);
        }
        if (self.by_slot.len() as u64) < self.slots_max {
            return Ok(self.by_slot.len() as u32);
        }
        Err(Error::PartitionFull { partition })
    }

    /// Slots no segment holds.
    pub fn free_slots(&self) -> usize {
        let used = self.by_slot.iter().filter(|s| s.is_some()).count();
        (self.slots_max as usize).saturating_sub(used)
    }

    /// Registers a segment under its slot (not in log order).
    pub fn register(&mut self, seg: Arc<Segment>) {
        let slot = seg.slot() as usize;
        if self.by_slot.len() <= slot {
            self.by_slot.resize(slot + 1, None);
        }
        debug_assert!(self.by_slot[slot].is_none(), "slot {slot} taken twice");
        self.by_slot[slot] = Some(seg);
    }

    pub fn unregister(&mut self, slot: u32) {
        if let Some(s) = self.by_slot.get_mut(slot as usize) {
            if s.take().is_some() {
                self.released += 1;
            }
        }
    }

    /// Slots let go of so far.
    pub fn released(&self) -> u64 {
        self.released
    }

    /// Registers and appends to log order.
    pub fn push(&mut self, seg: Arc<Segment>) {
        self.register(seg.clone());
        self.ordered.push(seg);
    }

    // Never empty: opening gives every partition a segment, rotation adds one before the
    // active segment is sealed, and compaction only replaces sealed ones.
    #[allow(clippy::expect_used)]
    pub fn active(&self) -> &Arc<Segment> {
        self.ordered
            .last()
            .expect("a partition always has an active segment")
    }
}

/// Per-partition counters kept with the index.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Counters {
    /// Records in the log (all types).
    pub records: u64,
    /// Records no longer needed: overwritten or deleted values, tombstones, commit records.
    pub dead: u64,
}

pub(crate) struct PartState {
    pub index: Index,
    pub segs: SegmentSet,
    pub appender: Appender,
    pub counters: Counters,
    /// The keys with an expiry time (see `expiry`).
    pub expiries: Expiries,
    /// Live index entries per namespace (DBSIZE of each database) and per slot.
    pub ns_keys: NsKeys,
    /// Which namespace each database reads: the store's mapping, given to every partition
    /// under its lock when it changes (see `dbs`).
    pub dbs: Arc<DbMap>,
    /// The hash slots whose keys this partition holds (`None` in a store of format 1: every
    /// key). Its log may hold records of other keys, left behind when a split moved them
    /// away: they are garbage (replay skips them).
    pub range: Option<crate::slot::SlotRange>,
    /// Merged into another partition: it owns no key any more (its directory is deleted).
    pub retired: bool,
    /// Bytes ever appended (monotonic), the position group commit waits on.
    pub appended_lsn: u64,
    /// Changed since the last checkpoint.
    pub dirty: bool,
    /// A merge is about to delete this partition: a compound batch puts its commit record
    /// elsewhere when it can (see `split::move_into_new`).
    pub merging: bool,
    /// Why this partition refuses writes (`fail_writes`): bytes a failed write left in its
    /// log could not be taken back, and a record appended after them would make replay take
    /// them as written whole; or an fdatasync of its log failed, and nothing written since
    /// the last good one is known to be on disk. Reads go on; reopening recovers from what is
    /// on disk.
    pub failed: Option<String>,
}

pub(crate) struct Partition {
    pub id: u32,
    pub dir: PathBuf,
    pub state: StateLock,
    pub commit: Arc<GroupCommit>,
    /// Held for a whole resize or compaction pass (one at a time per partition); it also
    /// keeps the background thread's memory of past passes.
    pub maintenance: Mutex<MaintenanceState>,
    /// Keys a writer waits to insert: the background thread resizes the index for them.
    pub room_wanted: AtomicUsize,
    /// Resizes of the index by the background thread (a waiting writer watches it move).
    pub resizes: AtomicU64,
    /// Held by a checkpoint save from its snapshot to its rename (see `checkpoint::save`).
    pub checkpointing: Mutex<()>,
    /// Range exports reading this partition: compaction waits until there are none (they hold
    /// positions in its log).
    pub exports: AtomicUsize,
    /// Its log holds batch parts ended by a BatchEnd with no seal after them (it is then in
    /// `StoreCtx::unsealed`; see `commit::seal_parts`).
    pub unsealed: AtomicBool,
    /// How the serving paths wait for and hold `state` (`intend_serving`, `read_serving`).
    pub locks: LockFigures,
}

/// What the background thread remembers about a partition's maintenance.
#[derive(Debug, Default)]
pub(crate) struct MaintenanceState {
    /// Failed passes in a row, and when to try again.
    pub failures: u32,
    pub retry_at: Option<std::time::Instant>,
    /// A sweep of compaction passes that dropped nothing is not tried again before the
    /// partition's dead records reach this (no pass after pass copying live records for
    /// nothing).
    pub compact_when_dead: u64,
    /// Where the next pass of a sweep starts (after this major order; `None`: the head), and
    /// what the sweep dropped so far.
    pub sweep_cursor: Option<u64>,
    pub sweep_dropped: u64,
    /// Keys the writers inserted while the last index resize ran, per key it rebuilt: the
    /// next resize makes room for as many more (a bulk load's pace; see `resize`).
    pub resize_pace: f64,
}

pub use crate::layout::partition_dir;

/// What the index positions and log locations found in a partition mean. While its shape is
/// the same, a position that still holds the location it held holds the same key's record: a
/// location names one record until its segment's slot is let go of, and a position one slot
/// until the index is replaced (a resize, a split). Removals and inserts keep the shape.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Shape {
    index: u64,
    released: u64,
}

impl PartState {
    /// The partition's shape now.
    pub fn shape(&self) -> Shape {
        Shape {
            index: self.index.id(),
            released: self.segs.released(),
        }
    }

    /// Live keys of namespace `ns` at `now`: its index entries but those whose expiry time
    /// has come (swept or not).
    pub fn live_keys(&self, ns: u32, now: u64) -> u64 {
        self.ns_keys
            .get(ns)
            .saturating_sub(self.expiries.due_count(ns, now) as u64)
    }

    /// Live keys of every namespace `dbs` says is live, at `now`.
    pub fn live_keys_all(&self, dbs: &DbMap, now: u64) -> u64 {
        self.ns_keys
            .iter()
            .filter(|&(ns, _, _)| dbs.is_live(ns))
            .map(|(ns, _, _)| self.live_keys(ns, now))
            .sum()
    }

    /// Live keys of namespace `ns` in the slots of `range` that this partition owns, at `now`.
    pub fn live_keys_in(&self, ns: u32, range: crate::slot::SlotRange, now: u64) -> u64 {
        self.ns_keys
            .in_range(ns, range)
            .saturating_sub(self.expiries.due_in_range(ns, range, now) as u64)
    }

    /// Counts the death of the record at `loc` (overwritten, deleted, moved away).
    #[inline]
    pub fn count_death(&mut self, loc: u32) {
        self.counters.dead += 1;
        if let Some(seg) = self.segs.of_loc(loc) {
            seg.count(0, 1);
        }
    }

    /// Counts a dead record (a commit or BatchEnd record) just appended to the active segment.
    pub fn count_appended_dead_here(&mut self) {
        self.counters.records += 1;
        self.counters.dead += 1;
        self.appender.segment.count(1, 1);
    }

    /// `Err` if the partition refuses writes (see `failed`).
    pub fn writable(&self) -> Result<()> {
        match &self.failed {
            None => Ok(()),
            Some(reason) => {
                let seg = &self.appender.segment.path;
                Err(Error::PartitionFailed {
                    dir: seg.parent().map_or_else(|| seg.clone(), Path::to_path_buf),
                    reason: reason.clone(),
                })
            }
        }
    }

    /// The partition refuses writes from now on (the first reason given stays).
    pub fn fail_writes(&mut self, reason: impl FnOnce() -> String) {
        if self.failed.is_none() {
            self.failed = Some(reason());
        }
    }

    /// fdatasync of the active segment, the lock held. A failure is the partition's: it
    /// refuses writes from then on (see `Segment::sync_data`).
    pub fn sync_active(&mut self) -> Result<()> {
        let res = self.appender.segment.sync_data();
        if let Err(e) = &res {
            self.fail_writes(|| format!("an fdatasync of its log failed: {e}"));
        }
        res
    }

    /// Makes room for `len` more bytes in the active segment, starting a new segment if needed.
    pub fn ensure_room(&mut self, ctx: &StoreCtx, part: u32, dir: &Path, len: u64) -> Result<()> {
        self.writable()?;
        let capacity = ctx.opts.segment_bytes - SEGMENT_HEADER_LEN as u64;
        if len > capacity {
            return Err(Error::BatchTooLarge {
                bytes: len,
                max: capacity,
            });
        }
        if self.appender.room() >= len {
            return Ok(());
        }
        // A writer seals a full segment only (once per `segment_bytes` written): its unused
        // tail is small, and given back here.
        self.rotate(ctx, part, dir)?.release_unused()
    }

    /// Makes appending `len` more bytes unable to fail for space: room in the active segment
    /// (a fresh one if the run does not fit this one) and disk blocks reserved. A full disk
    /// fails here, before anything is written. (A run longer than a segment is split by the
    /// write path and reserves piece by piece.)
    pub fn prepare_append(
        &mut self,
        ctx: &StoreCtx,
        part: u32,
        dir: &Path,
        len: u64,
    ) -> Result<()> {
        if len > ctx.opts.segment_bytes - SEGMENT_HEADER_LEN as u64 {
            return Ok(());
        }
        self.ensure_room(ctx, part, dir, len)?;
        self.appender.reserve(len)
    }

    /// Seals the active segment and starts a new one. Returns the sealed segment's appender:
    /// the caller gives back its unused tail (`Appender::release_unused`), after letting go of
    /// the partition's lock if it can — punching a hole waits on the file system's journal,
    /// for milliseconds under heavy writeback.
    #[must_use = "the sealed segment's unused tail is to be released"]
    pub fn rotate(&mut self, ctx: &StoreCtx, part: u32, dir: &Path) -> Result<Appender> {
        // Buffered records (`none` mode) reach the file before the appender that holds them
        // stops being the one readers look in.
        self.appender.flush()?;
        if ctx.opts.durability == Durability::Fsync {
            // Synced positions must stay monotonic across segments: the group-commit syncer
            // only syncs the active segment.
            self.sync_active()?;
        }
        let last = self.segs.active().header.order;
        let seg = new_segment(
            ctx,
            part,
            dir,
            self.segs.free_slot(part)?,
            SegmentOrder {
                major: last.major + 1,
                minor: 0,
            },
        )?;
        if ctx.opts.durability == Durability::Fsync {
            sync_dir(dir)?;
        }
        let seg = Arc::new(seg);
        self.segs.push(seg.clone());
        let next = ctx.log_appender(seg, SEGMENT_HEADER_LEN as u64);
        Ok(std::mem::replace(&mut self.appender, next))
    }

    /// Appends whole records; returns their start offset in the active segment.
    pub fn append(&mut self, bytes: &[u8]) -> Result<u64> {
        self.writable()?;
        let at = self.appender.append(bytes).inspect_err(|_| {
            if let Some(reason) = self.appender.take_leftover() {
                self.fail_writes(|| reason);
            }
        })?;
        self.appended_lsn += bytes.len() as u64;
        self.dirty = true;
        Ok(at)
    }
}

/// Creates a segment file for partition `part` (not yet registered anywhere).
pub(crate) fn new_segment(
    ctx: &StoreCtx,
    part: u32,
    dir: &Path,
    slot: u32,
    order: SegmentOrder,
) -> Result<Segment> {
    let file_id = ctx.alloc_file_id();
    new_segment_at(
        ctx,
        part,
        &dir.join(segment_file_name(file_id)),
        file_id,
        slot,
        order,
    )
}

/// Creates a segment file at `path`.
pub(crate) fn new_segment_at(
    ctx: &StoreCtx,
    part: u32,
    path: &Path,
    file_id: u64,
    slot: u32,
    order: SegmentOrder,
) -> Result<Segment> {
    Segment::create(
        path.to_path_buf(),
        SegmentHeader {
            version: FORMAT_VERSION,
            partition: part,
            slot,
            file_id,
            order,
            segment_bytes: ctx.opts.segment_bytes,
        },
    )
}

impl Partition {
    /// Blocks until everything appended up to `lsn` is on stable storage (fsync durability).
    /// Concurrent callers share one fdatasync (`group_commit`).
    pub fn wait_durable(&self, lsn: u64) -> Result<()> {
        self.note_sync(self.ask_durable(lsn).and_then(|()| self.commit.wait(lsn)))
    }

    /// Asks this partition's syncer to make everything up to `lsn` durable; returns at once.
    pub(crate) fn ask_durable(&self, lsn: u64) -> Result<()> {
        let seg = self.state.read().appender.segment.clone();
        self.commit.ask(lsn, &seg, self.id)
    }

    /// [`Partition::wait_durable`] for several partitions (what a write vector, pipeline or
    /// batch wrote, before acknowledging it): every one asked before any is waited for, so
    /// their fdatasyncs run at once. Per partition, its outcome.
    pub fn wait_all_durable(parts: &[(&Arc<Partition>, u64)]) -> Vec<Result<()>> {
        let asked: Vec<Result<()>> = parts.iter().map(|&(p, lsn)| p.ask_durable(lsn)).collect();
        parts
            .iter()
            .zip(asked)
            .map(|(&(p, lsn), asked)| p.note_sync(asked.and_then(|()| p.commit.wait(lsn))))
            .collect()
    }

    /// fdatasync of `seg` (one of this partition's), its lock not held. A failure is the
    /// partition's: it refuses writes from then on (see `Segment::sync_data`).
    pub fn sync_segment(&self, seg: &Segment) -> Result<()> {
        self.note_sync(seg.sync_data())
    }

    /// After an fdatasync without the lock held: a failure makes the partition refuse writes.
    pub(crate) fn note_sync(&self, res: Result<()>) -> Result<()> {
        if let Err(e) = &res {
            self.state
                .write()
                .fail_writes(|| format!("an fdatasync of its log failed: {e}"));
        }
        res
    }
}

impl Drop for Partition {
    /// Its syncer thread, if it runs, ends too.
    fn drop(&mut self) {
        self.commit.stop();
    }
}
