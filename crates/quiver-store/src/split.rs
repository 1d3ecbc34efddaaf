//! Split and Merge (FAWN-DS, seed 001 ch. 4) while reads and writes go on: a range of hash
//! slots moves out of one partition (Split) or two adjacent partitions become one (Merge).
//! Both copy the moving keys into a **new** partition, so a partition's range only ever
//! shrinks: the records a split leaves behind in a log are of slots the partition will never
//! own again, and replay skips them (`IndexBuilder::for_range`); compaction drops them.
//!
//! 1. The new partition is created (a directory `QUIVER` does not list yet) and the sources'
//!    compaction paused (their logs must keep the positions the copy holds).
//! 2. Without the sources' locks: their live keys of the range are copied into it (as a range
//!    export's snapshot), then the keys written since, in rounds, until few are left.
//! 3. Under the exclusive locks of the sources and the new partition: the last keys written
//!    are copied; the new partition is made durable; `QUIVER` is rewritten with the new
//!    layout (temporary file, fsync, rename: **the commit point**); a split's source forgets
//!    the keys that moved (index entries, expiry summary); the new layout is installed.
//!    Operations that routed on the old layout find, once they hold a partition's lock, that
//!    it no longer owns their key, and route again.
//! 4. Checkpoints of the partitions changed; a merge's sources are retired and deleted.
//!
//! A crash before the commit point leaves the old layout, and opening deletes the new
//! partition's directory (it is not listed); after it, the new layout, with the split source's
//! left-behind records skipped by replay and the merge sources' directories deleted.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;

use crate::checkpoint;
use crate::error::{Error, Result};
use crate::hash::KeyHash;
use crate::index::Index;
use crate::inner::Table;
use crate::log::format::{SegmentOrder, ValueKind, SEGMENT_HEADER_LEN};
use crate::lookup::{self, Found};
use crate::maintenance::{self, LogPos};
use crate::meta::{self, Partitioner};
use crate::migrate::{self, keys_written_since, NsItem};
use crate::partition::{
    new_segment, partition_dir, release_all, write_all, PartState, Partition, StateLock, StoreCtx,
};
use crate::resize;
use crate::slot::SlotRange;
use crate::stalls::Pacer;
use crate::store::Store;
use crate::write::{self, Framing, WriteOp};

/// Marks a merge's sources `merging` for as long as it lives: from then on a compound batch
/// puts its commit record outside them when it touches another partition, so the seal before
/// the switch covers every BatchEnd part whose proof would leave with the sources.
struct Merging<'a>(&'a [Arc<Partition>]);

impl<'a> Merging<'a> {
    fn new(sources: &'a [Arc<Partition>]) -> Merging<'a> {
        for p in sources {
            p.state.write().merging = true;
        }
        Merging(sources)
    }
}

impl Drop for Merging<'_> {
    fn drop(&mut self) {
        for p in self.0 {
            p.state.write().merging = false;
        }
    }
}

/// Rounds of copying the keys written since the last round, before the final one under the
/// locks; fewer when a round finds at most [`CATCH_UP_KEYS_FINAL`] keys.
const CATCH_UP_ROUNDS_MAX: usize = 8;
const CATCH_UP_KEYS_FINAL: usize = 1024;

/// What a split or merge did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SplitReport {
    /// The partition made, and its range.
    pub partition: u32,
    pub range: SlotRange,
    /// Live keys of the range when the copy began, copied into it.
    pub keys_copied: u64,
    /// Keys written during the copy and copied again (a key once per round it was written
    /// in), of which `keys_final` under the final lock.
    pub keys_caught_up: u64,
    pub keys_final: u64,
}

impl Store {
    /// Splits the partition owning slot `at` into the slots before `at` and those from `at`
    /// on, which move to a new partition. `at` must not be the first slot of its partition.
    pub fn split(&self, at: u16) -> Result<SplitReport> {
        self.split_inside(at)?.ok_or_else(|| {
            Error::InvalidOptions(format!(
                "slot {at} is the first of its partition: nothing to split"
            ))
        })
    }

    /// Splits at `at` when it falls inside a partition, and answers `None` when a partition
    /// already begins there — checked under the layout lock, so that two callers aligning
    /// the store to the same edge at once (two chains' FLUSHALLs) do not race.
    pub(crate) fn split_inside(&self, at: u16) -> Result<Option<SplitReport>> {
        let inner = self.inner();
        let _one = inner.layout_change.lock();
        let table = inner.table();
        let pos = table_pos(&table, at)?;
        let r = table.partitioner.range(pos).ok_or(Error::NotSlotted)?;
        if r.lo == at {
            return Ok(None);
        }
        let source = table.parts[pos].clone();
        let moved = SlotRange { lo: at, hi: r.hi };
        let kept = SlotRange {
            lo: r.lo,
            hi: at - 1,
        };
        self.move_into_new(&table, &[source], moved, Some(kept))
            .map(Some)
    }

    /// Merges the partition owning slot `at` with the one before it (owning `at - 1`) into a
    /// new partition; `at` must be the first slot of its partition.
    pub fn merge(&self, at: u16) -> Result<SplitReport> {
        let inner = self.inner();
        let _one = inner.layout_change.lock();
        let table = inner.table();
        let pos = table_pos(&table, at)?;
        let r = table.partitioner.range(pos).ok_or(Error::NotSlotted)?;
        if r.lo != at || pos == 0 {
            return Err(Error::InvalidOptions(format!(
                "slot {at} does not start a partition after another: nothing to merge"
            )));
        }
        let before = table.partitioner.range(pos - 1).ok_or(Error::NotSlotted)?;
        let sources = [table.parts[pos - 1].clone(), table.parts[pos].clone()];
        let moved = SlotRange {
            lo: before.lo,
            hi: r.hi,
        };
        self.move_into_new(&table, &sources, moved, None)
    }

    /// Copies `moved` out of `sources` (adjacent, in range order) into a new partition; the
    /// single source of a split keeps `kept`, the sources of a merge (`kept: None`) retire.
    fn move_into_new(
        &self,
        table: &Table,
        sources: &[Arc<Partition>],
        moved: SlotRange,
        kept: Option<SlotRange>,
    ) -> Result<SplitReport> {
        let inner = self.inner();
        let ctx = &inner.ctx;
        if ctx.opts.read_only {
            return Err(Error::ReadOnly);
        }
        let id = inner.next_part_id.fetch_add(1, Ordering::SeqCst);
        let expected = sources.iter().map(|p| p.state.read().index.live()).sum();
        let new = Arc::new(create_partition(
            ctx, inner, id, moved, expected, &table.dbs,
        )?);
        // Every database's keys move (no SWAPDB or FLUSHDB meanwhile: they wait for
        // `layout_change`, which the caller holds).
        let nss = migrate::Namespaces::Live(&table.dbs);
        let _paused = migrate::PausedCompaction::new(sources.to_vec());
        let _merging = kept.is_none().then(|| Merging::new(sources));
        // 2. The copy, without the sources' locks.
        let mut positions = migrate::log_ends(sources)?;
        let mut snapshot_locs: Vec<(u32, KeyHash, u32)> = Vec::new();
        let mut copied = 0;
        let mut caught_up = 0;
        for (src, &end) in sources.iter().zip(&positions) {
            let locs = kept.is_some().then_some(&mut snapshot_locs);
            copied += migrate::snapshot_partition(ctx, src, moved, nss, end, locs, &mut |items| {
                write_items(ctx, &new, items)
            })?;
        }
        // Keys written during the copy, for the split source to forget at the switch.
        let mut written: Vec<(u32, Bytes)> = Vec::new();
        for _ in 0..CATCH_UP_ROUNDS_MAX {
            let mut round = 0;
            for (src, pos) in sources.iter().zip(positions.iter_mut()) {
                let (keys, end) = keys_written_since(src, moved, nss, *pos)?;
                *pos = end;
                for chunk in keys.chunks(migrate::EXPORT_BATCH_ITEMS) {
                    let st = src.state.read();
                    let items = current_items(ctx, &st, chunk)?;
                    drop(st);
                    write_items(ctx, &new, &items)?;
                }
                round += keys.len();
                written.extend(keys);
            }
            caught_up += round as u64;
            if round <= CATCH_UP_KEYS_FINAL {
                break;
            }
        }

        // The copy so far made durable before the locks are taken: under them, only the last
        // keys' bytes are left to sync.
        {
            let segs = {
                let mut st = new.state.write();
                st.appender.flush()?;
                st.segs.ordered.clone()
            };
            for seg in &segs {
                seg.sync_data()?;
            }
        }

        // Batch parts elsewhere whose commit record lies in a source are sealed: a merge's
        // sources are deleted. A batch committed since the sources were marked `merging`
        // has its commit record outside them, or all its parts in them (copied here).
        crate::seal::seal_parts(ctx)?;
        // 3. The switch, under the locks of the sources and the new partition.
        let mut held = write_all(sources.iter().chain([&new]));
        let (guards, new_st) = held.split_at_mut(sources.len());
        let new_st = &mut new_st[0];
        let mut last = 0;
        for (st, pos) in guards.iter_mut().zip(&positions) {
            st.appender.flush()?;
            let keys = migrate::tail_keys(&st.segs.ordered, moved, nss, *pos, LogPos::end_of(st))?;
            let items = current_items(ctx, st, &keys)?;
            write_items_locked(ctx, &new, new_st, &items)?;
            last += keys.len() as u64;
            written.extend(keys);
        }
        new_st.appender.flush()?;
        // Whatever the final copy added (the rest was synced before the locks).
        for seg in &new_st.segs.ordered {
            seg.sync_data()?;
        }
        let layout = next_layout(table, sources, &new, moved, kept);
        let listed: Vec<(u32, SlotRange)> = layout.iter().map(|(p, r)| (p.id, *r)).collect();
        meta::store_layout(&inner.dir, ctx.opts.segment_bytes, &listed, &table.dbs)?;
        // Committed: the new layout is the store's from here on.
        match kept {
            Some(kept) => {
                let st = &mut guards[0];
                forget(ctx, st, kept, &snapshot_locs, &written);
            }
            None => {
                for st in guards.iter_mut() {
                    retire(st);
                }
            }
        }
        new_st.dirty = true;
        *inner.table.write() = Arc::new(Table {
            partitioner: Partitioner::slots(layout.iter().map(|(_, r)| *r).collect()),
            parts: layout.into_iter().map(|(p, _)| p).collect(),
            dbs: table.dbs.clone(),
        });
        release_all(held);

        // 4. Checkpoints; a merge's sources leave.
        checkpoint::save(ctx, &new, &mut Pacer::new(None))?;
        match kept {
            Some(_) => checkpoint::save(ctx, &sources[0], &mut Pacer::new(None))?,
            None => {
                for src in sources {
                    // A compaction pass or a background save that began before the
                    // retirement may still be writing into the directory (paced, they take
                    // a while): they finish first; later ones find the partition retired.
                    let _pass = src.maintenance.lock();
                    let _saving = src.checkpointing.lock();
                    std::fs::remove_dir_all(&src.dir)
                        .map_err(|e| Error::io("remove a merged partition", &src.dir, e))?;
                }
                crate::log::segment::sync_dir(&inner.dir)?;
            }
        }
        Ok(SplitReport {
            partition: id,
            range: moved,
            keys_copied: copied,
            keys_caught_up: caught_up + last,
            keys_final: last,
        })
    }
}

/// The position of the partition owning `slot`.
fn table_pos(table: &Table, slot: u16) -> Result<usize> {
    if slot as u32 >= crate::slot::SLOTS {
        return Err(Error::InvalidOptions(format!("slot {slot} out of range")));
    }
    match &table.partitioner {
        Partitioner::Slots { .. } => table
            .partitioner
            .scan_partition(slot as u32)
            .ok_or(Error::NotSlotted),
        Partitioner::Hash { .. } => Err(Error::NotSlotted),
    }
}

/// A new, empty partition owning `range`, not yet in any layout.
fn create_partition(
    ctx: &StoreCtx,
    inner: &crate::inner::StoreInner,
    id: u32,
    range: SlotRange,
    expected_keys: usize,
    dbs: &Arc<crate::dbs::DbMap>,
) -> Result<Partition> {
    let dir = partition_dir(&inner.dir, id);
    std::fs::create_dir_all(&dir).map_err(|e| Error::io("create partition directory", &dir, e))?;
    let mut segs = crate::partition::SegmentSet::new(ctx.opts.segment_bytes);
    let first = SegmentOrder { major: 1, minor: 0 };
    segs.push(Arc::new(new_segment(ctx, id, &dir, 0, first)?));
    crate::log::segment::sync_dir(&dir)?;
    let appender = ctx.log_appender(segs.active().clone(), SEGMENT_HEADER_LEN as u64);
    Ok(Partition {
        id,
        dir,
        state: StateLock::new(PartState {
            index: Index::for_keys(expected_keys),
            segs,
            appender,
            counters: Default::default(),
            expiries: Default::default(),
            ns_keys: crate::key_counts::NsKeys::for_range(Some(range)),
            dbs: dbs.clone(),
            range: Some(range),
            retired: false,
            merging: false,
            failed: None,
            appended_lsn: 0,
            dirty: true,
        }),
        commit: Default::default(),
        maintenance: Mutex::new(Default::default()),
        room_wanted: Default::default(),
        resizes: Default::default(),
        checkpointing: Mutex::new(()),
        exports: Default::default(),
        unsealed: Default::default(),
        locks: Default::default(),
    })
}

/// The current state of `keys` in a (locked) source: a put with value and expiry, or a delete.
fn current_items(ctx: &StoreCtx, st: &PartState, keys: &[(u32, Bytes)]) -> Result<Vec<NsItem>> {
    let lookups: Vec<(u32, &[u8], KeyHash)> = keys
        .iter()
        .map(|(ns, k)| (*ns, &k[..], KeyHash::of_ns(*ns, k)))
        .collect();
    let found = lookup::lookup_one_partition(ctx, st, &lookups, true);
    keys.iter()
        .zip(found)
        .map(|((ns, k), f)| {
            // The split writes by namespace; the item's database is not read.
            Ok((
                *ns,
                migrate::RangeItem::of(k.clone(), lookup::into_entry(f)?),
            ))
        })
        .collect()
}

/// Writes items into the new partition (no one else writes it: it is in no layout yet).
fn write_items(ctx: &StoreCtx, new: &Partition, items: &[NsItem]) -> Result<()> {
    let puts = items.iter().filter(|(_, i)| i.entry.is_some()).count();
    if !new.state.read().index.has_room(puts) {
        let mut m = new.maintenance.lock();
        resize::resize(ctx, new, &mut m, puts)?;
    }
    let mut st = new.state.write();
    write_items_locked(ctx, new, &mut st, items)
}

fn write_items_locked(
    ctx: &StoreCtx,
    new: &Partition,
    st: &mut PartState,
    items: &[NsItem],
) -> Result<()> {
    let ops: Vec<WriteOp<'_>> = items
        .iter()
        .map(|(ns, i)| WriteOp {
            ns: *ns,
            key: &i.key,
            hash: KeyHash::of_ns(*ns, &i.key),
            value: i.entry.as_ref().map(|e| &e.value[..]),
            expire_at: i.entry.as_ref().and_then(|e| e.expire_at),
            kind: i.entry.as_ref().map_or(ValueKind::String, |e| e.kind),
        })
        .collect();
    if !st.index.has_room(write::inserts_needed(&ops)) {
        // Only under the final lock (`write_items` makes room before): the index is rebuilt
        // in place, larger.
        let mut b = crate::builder::IndexBuilder::for_range(
            Index::for_keys(st.index.live() + ops.len() * 2),
            st.range,
        );
        let segs = st.segs.clone();
        maintenance::catch_up(
            st,
            LogPos {
                file_id: segs.ordered[0].file_id(),
                offset: SEGMENT_HEADER_LEN as u64,
            },
            &mut b,
        )?;
        st.index = b.index;
    }
    let plan = write::plan_reserved(ctx, new, st, &ops)?;
    let (locs, res) = write::append_run(ctx, new, st, &plan.run, Framing::Plain);
    write::update_index(st, &ops, &plan.found, &locs);
    res
}

/// The split source keeps `kept` of its range and forgets the keys that moved: the index
/// entries of the snapshot's records (by location: no reads) and of the keys written during
/// the copy (looked up); the key counts of the slots that moved go with them.
fn forget(
    ctx: &StoreCtx,
    st: &mut PartState,
    kept: SlotRange,
    snapshot: &[(u32, KeyHash, u32)],
    written: &[(u32, Bytes)],
) {
    st.range = Some(kept);
    st.ns_keys.narrow(kept);
    // A key written in several rounds is looked up (and removed) once.
    let mut seen = std::collections::HashSet::new();
    let written: Vec<&(u32, Bytes)> = written.iter().filter(|k| seen.insert(*k)).collect();
    for &(_, hash, loc) in snapshot {
        if let Some(pos) = st.index.find_loc(hash, loc) {
            st.index.remove(pos);
            st.expiries.remove(hash.0);
            st.count_death(loc);
        }
    }
    for chunk in written.chunks(migrate::EXPORT_BATCH_ITEMS) {
        let lookups: Vec<(u32, &[u8], KeyHash)> = chunk
            .iter()
            .map(|(ns, k)| (*ns, &k[..], KeyHash::of_ns(*ns, k)))
            .collect();
        let found = lookup::lookup_one_partition(ctx, st, &lookups, false);
        // Positions first, removals after: a removal leaves a tombstone, never moves others.
        let hits: Vec<(usize, KeyHash)> = found
            .iter()
            .zip(&lookups)
            .filter_map(|(f, &(_, _, h))| match f {
                Found::Live { pos, .. } | Found::Expired { pos } => Some((*pos, h)),
                _ => None,
            })
            .collect();
        for (pos, h) in hits {
            if let Some(loc) = st.index.live_at(pos) {
                st.count_death(loc); // garbage here now
            }
            st.index.remove(pos);
            st.expiries.remove(h.0);
        }
    }
    st.dirty = true;
}

/// A merge source after the switch: it owns nothing, and has nothing to maintain.
fn retire(st: &mut PartState) {
    st.retired = true;
    st.expiries = Default::default();
    st.ns_keys.clear();
    st.dirty = false;
}

/// The layout after the move: the sources replaced (a split's source with its kept range)
/// by the new partition, in range order.
fn next_layout(
    table: &Table,
    sources: &[Arc<Partition>],
    new: &Arc<Partition>,
    moved: SlotRange,
    kept: Option<SlotRange>,
) -> Vec<(Arc<Partition>, SlotRange)> {
    let mut out: Vec<(Arc<Partition>, SlotRange)> = Vec::with_capacity(table.parts.len() + 1);
    for (pos, p) in table.parts.iter().enumerate() {
        let Some(r) = table.partitioner.range(pos) else {
            continue;
        };
        match sources.iter().position(|s| Arc::ptr_eq(s, p)) {
            None => out.push((p.clone(), r)),
            Some(_) => {
                if let Some(k) = kept {
                    out.push((p.clone(), k));
                }
            }
        }
    }
    out.push((new.clone(), moved));
    out.sort_by_key(|(_, r)| *r);
    out
}
