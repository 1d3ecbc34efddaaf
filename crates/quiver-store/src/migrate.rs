//! Moving a range of hash slots out of a store and into another: what the cluster's migrations
//! (and a partition's split) are made of.
//!
//! - [`RangeExport`]: `snapshot` hands over every live key of the range as of the moment the
//!   export began (each partition's log end then); `changes` hands over every key of the range
//!   written since the last call, as its state now (a put, or a delete when it is gone), and
//!   moves the export's positions to the end of the logs. A migration runs `snapshot`, then
//!   `changes` until little is left, then stops writes to the range and runs `changes` once
//!   more: the target then holds exactly the source's state of the range. A split or merge of
//!   the partitions it reads makes it fail (start again): keys of the range would be in a
//!   partition it does not read.
//! - [`crate::Store::import`]: applies such items. Applying them again changes nothing, so an
//!   import a crash interrupted is completed by applying the same items again; a migration
//!   that starts over with a new export drops the range on the target first (a new snapshot
//!   does not name the keys the source deleted meanwhile).
//! - [`crate::Store::drop_range`]: deletes every key of a range once it has moved.
//!
//! Why the snapshot is consistent: a record is handed over if the index still points at it
//! when its chunk is read; one replaced or deleted after the export began is not, and its key
//! is among the writes `changes` reports. While a partition is read, its maintenance lock is
//! held (no compaction or resize moves records under the scan).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;

use crate::batch::Entry;
use crate::dbs::DbMap;
use crate::error::{Error, Result};
use crate::inner::{StoreInner, Table};
use crate::large_hash::{ANCHORS_DB, BUCKETS_DB};
use crate::log::format::RecordType;
use crate::maintenance::{self, LogPos, ScanMode};
use crate::partition::{write_all, Partition, StoreCtx};
use crate::slot::{key_slot, SlotRange, SLOTS};
use crate::store::Store;

/// Items handed to the callback at a time.
pub const EXPORT_BATCH_ITEMS: usize = 1024;

/// The databases a range export reads and an import writes: a cluster node's keys are all
/// in database 0, and a large hash keeps its buckets and anchor in the hidden databases
/// (`large_hash`), under keys of its own slot, so they move and replicate with it.
pub const RANGE_DATABASES: [u32; 3] = [0, ANCHORS_DB, BUCKETS_DB];

/// A key's state, as a range export hands it over and a chain carries it: its entry, or
/// `None` when it is absent (a delete).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RangeItem {
    /// Its database (one of [`RANGE_DATABASES`] in a cluster).
    pub db: u32,
    pub key: Bytes,
    pub entry: Option<Entry>,
}

impl RangeItem {
    /// `key` of database 0 in state `entry`.
    pub fn of(key: Bytes, entry: Option<Entry>) -> RangeItem {
        RangeItem::in_db(0, key, entry)
    }

    pub fn in_db(db: u32, key: Bytes, entry: Option<Entry>) -> RangeItem {
        RangeItem { db, key, entry }
    }
}

/// The snapshot of every partition a range export reads: where its log ended.
pub(crate) fn log_ends(parts: &[Arc<Partition>]) -> Result<Vec<LogPos>> {
    parts
        .iter()
        .map(|p| {
            let mut st = p.state.write();
            st.appender.flush()?;
            Ok(LogPos::end_of(&st))
        })
        .collect()
}

/// A key's state with its namespace (a split moves every database's keys).
pub(crate) type NsItem = (u32, RangeItem);

/// Which keys a range export reads: those of some databases ([`RANGE_DATABASES`], for a
/// migration), or of every live namespace (a split, which moves whole slots).
#[derive(Clone, Copy)]
pub(crate) enum Namespaces<'a> {
    Of(&'a DbMap, &'a [u32]),
    Live(&'a DbMap),
}

impl Namespaces<'_> {
    /// The database of namespace `ns` if its keys are wanted.
    fn db_of(&self, ns: u32) -> Option<u32> {
        match self {
            Namespaces::Of(dbs, wanted) => dbs.db_of(ns).filter(|db| wanted.contains(db)),
            Namespaces::Live(dbs) => dbs.db_of(ns),
        }
    }

    fn wants(&self, ns: u32) -> bool {
        self.db_of(ns).is_some()
    }
}

/// Hands every live, unexpired key of `range` and `nss` in `part` whose record precedes `end`
/// to `out` with its namespace, [`EXPORT_BATCH_ITEMS`] at a time; returns how many.
/// `locs` (a split's) also collects the namespace, hash and index location of each live
/// record of the range, the expired ones too (none of them may stay behind).
pub(crate) fn snapshot_partition(
    ctx: &StoreCtx,
    part: &Partition,
    range: SlotRange,
    nss: Namespaces<'_>,
    end: LogPos,
    mut locs: Option<&mut Vec<(u32, crate::hash::KeyHash, u32)>>,
    out: &mut dyn FnMut(&[NsItem]) -> Result<()>,
) -> Result<u64> {
    let _maintenance = part.maintenance.lock();
    let segs = part.state.read().segs.ordered.clone();
    let now = ctx.now_ms();
    let mode = ScanMode {
        keep_bytes: true,
        verify_values: true,
        on_damage: ctx.opts.on_damage,
    };
    let mut items = Vec::with_capacity(EXPORT_BATCH_ITEMS);
    let mut n = 0;
    maintenance::scan_records(ctx, part, &segs, Some(end), mode, |r| {
        if !r.live {
            return Ok(());
        }
        let key = &r.bytes[r.header.key_range()];
        let ext = r.header.ext(r.bytes);
        let Some(db) = nss.db_of(ext.namespace) else {
            return Ok(());
        };
        if !range.contains(key_slot(key)) {
            return Ok(());
        }
        // An expired key is not copied, but a split source forgets it too: its index entry
        // and its expiry entry leave with the slots.
        if let Some(l) = locs.as_mut() {
            l.push((ext.namespace, r.hash, r.loc));
        }
        if ext.expired_at(now) {
            return Ok(());
        }
        if !r.value_ok {
            return Err(Error::corruption(
                &r.segment.path,
                r.offset,
                "record value checksum mismatch",
            ));
        }
        let entry = Entry {
            value: Bytes::copy_from_slice(&r.bytes[r.header.value_range()]),
            expire_at: ext.expire_at,
            kind: ext.kind,
        };
        items.push((
            ext.namespace,
            RangeItem::in_db(db, Bytes::copy_from_slice(key), Some(entry)),
        ));
        n += 1;
        if items.len() >= EXPORT_BATCH_ITEMS {
            out(&items)?;
            items.clear();
        }
        Ok(())
    })?;
    if !items.is_empty() {
        out(&items)?;
    }
    Ok(n)
}

/// The keys of `range` and `nss` that records in `part`'s log from `from` on name (in log
/// order, each once), and the log's end now: the keys written since `from`.
pub(crate) fn keys_written_since(
    part: &Partition,
    range: SlotRange,
    nss: Namespaces<'_>,
    from: LogPos,
) -> Result<(Vec<(u32, Bytes)>, LogPos)> {
    let _maintenance = part.maintenance.lock();
    let (segs, end) = {
        let mut st = part.state.write();
        st.appender.flush()?;
        (st.segs.ordered.clone(), LogPos::end_of(&st))
    };
    Ok((tail_keys(&segs, range, nss, from, end)?, end))
}

/// The keys (with their namespaces) of `range` and `nss` that the records of the log `segs`
/// from `from` to `end` name, in log order, each once.
pub(crate) fn tail_keys(
    segs: &[Arc<crate::log::segment::Segment>],
    range: SlotRange,
    nss: Namespaces<'_>,
    from: LogPos,
    end: LogPos,
) -> Result<Vec<(u32, Bytes)>> {
    let mut seen = std::collections::HashSet::new();
    let mut keys = Vec::new();
    let found = maintenance::records_between(segs, from, end, |_, _, header, rec| {
        if header.ty == RecordType::Truncate {
            // Every key of the range went at once: no list of keys says so.
            return Err(Error::InvalidOptions(
                "range export: the store was flushed (FLUSHALL) meanwhile; start again".into(),
            ));
        }
        if header.key_len > 0 {
            let key = &rec[header.key_range()];
            let ns = header.ext(rec).namespace;
            if nss.wants(ns) && range.contains(key_slot(key)) && seen.insert((ns, key.to_vec())) {
                keys.push((ns, Bytes::copy_from_slice(key)));
            }
        }
        Ok(())
    })?;
    if !found {
        return Err(Error::InvalidOptions(
            "range export: its position is no longer in the log".into(),
        ));
    }
    Ok(keys)
}

/// Compaction of some partitions paused while this lives (a range export's or a split's:
/// they hold positions in those logs). Counted before the caller notes the positions: no
/// compaction pass starts on them from then on (one already running holds the maintenance
/// lock, which the reads wait for).
pub(crate) struct PausedCompaction(Vec<Arc<Partition>>);

impl PausedCompaction {
    pub fn new(parts: Vec<Arc<Partition>>) -> PausedCompaction {
        for p in &parts {
            p.exports.fetch_add(1, Ordering::SeqCst);
        }
        PausedCompaction(parts)
    }

    pub fn parts(&self) -> &[Arc<Partition>] {
        &self.0
    }
}

impl Drop for PausedCompaction {
    fn drop(&mut self) {
        for p in &self.0 {
            p.exports.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// The partitions of `table` whose slots overlap `range` (all of them in a store not slotted).
fn overlapping(table: &Table, range: SlotRange) -> Vec<Arc<Partition>> {
    (0..table.parts.len())
        .filter(|&p| {
            table
                .partitioner
                .range(p)
                .is_none_or(|r| r.overlaps(&range))
        })
        .map(|p| table.parts[p].clone())
        .collect()
}

/// A range export in progress (see the module documentation). While it exists, compaction
/// leaves the partitions it reads alone (their logs must keep the positions it holds).
pub struct RangeExport {
    inner: Arc<StoreInner>,
    range: SlotRange,
    /// The partitions overlapping the range, and the log position each was read up to.
    paused: PausedCompaction,
    positions: Vec<LogPos>,
    snapshot_taken: bool,
}

impl RangeExport {
    pub fn range(&self) -> SlotRange {
        self.range
    }

    /// Hands every live key of the range, as of the export's start, to `out` (in batches);
    /// returns how many. Once per export.
    pub fn snapshot(&mut self, out: &mut dyn FnMut(&[RangeItem]) -> Result<()>) -> Result<u64> {
        if std::mem::replace(&mut self.snapshot_taken, true) {
            return Err(Error::InvalidOptions(
                "range export: the snapshot was taken already".into(),
            ));
        }
        let mut n = 0;
        let table = self.inner.table();
        let nss = Namespaces::Of(&table.dbs, &RANGE_DATABASES);
        let mut strip =
            |items: &[NsItem]| out(&items.iter().map(|(_, i)| i.clone()).collect::<Vec<_>>());
        for (p, end) in self.paused.parts().iter().zip(&self.positions) {
            n += snapshot_partition(&self.inner.ctx, p, self.range, nss, *end, None, &mut strip)?;
        }
        self.check_layout()?;
        Ok(n)
    }

    /// Hands every key of the range written since the snapshot's start (or the last call) to
    /// `out`, as its state now; returns how many.
    pub fn changes(
        &mut self,
        store: &Store,
        out: &mut dyn FnMut(&[RangeItem]) -> Result<()>,
    ) -> Result<u64> {
        let mut n = 0;
        let table = self.inner.table();
        let nss = Namespaces::Of(&table.dbs, &RANGE_DATABASES);
        for (p, pos) in self.paused.parts().iter().zip(self.positions.iter_mut()) {
            let (keys, end) = keys_written_since(p, self.range, nss, *pos)?;
            for chunk in keys.chunks(EXPORT_BATCH_ITEMS) {
                out(&current_items(store, nss, chunk)?)?;
            }
            n += keys.len() as u64;
            *pos = end;
        }
        self.check_layout()?;
        Ok(n)
    }

    /// Fails if a split or merge since the export began moved keys of the range into a
    /// partition the export does not read. Without this check the export would miss them
    /// silently: its snapshot (a split's source forgets the keys that moved, so their records
    /// are no longer live) and its changes (the keys are written to the new partition from
    /// then on). Checked after each read: the switch to a new layout is made at once with the
    /// source's index change, under its lock, so a switch a read did not see is seen here.
    fn check_layout(&self) -> Result<()> {
        let now = overlapping(&self.inner.table(), self.range);
        let parts = self.paused.parts();
        if now.len() == parts.len() && now.iter().zip(parts).all(|(a, b)| Arc::ptr_eq(a, b)) {
            return Ok(());
        }
        Err(Error::InvalidOptions(
            "range export: a split or merge moved part of the range meanwhile; start again".into(),
        ))
    }
}

/// The state now of `keys` (namespace, key), each in its database of `nss`.
fn current_items(
    store: &Store,
    nss: Namespaces<'_>,
    keys: &[(u32, Bytes)],
) -> Result<Vec<RangeItem>> {
    let mut items = Vec::with_capacity(keys.len());
    for db in RANGE_DATABASES {
        let of_db: Vec<&Bytes> = keys
            .iter()
            .filter(|(ns, _)| nss.db_of(*ns) == Some(db))
            .map(|(_, k)| k)
            .collect();
        if of_db.is_empty() {
            continue;
        }
        let entries = store.db(db)?.multi_get_entries(&of_db)?;
        items.extend(
            of_db
                .into_iter()
                .zip(entries)
                .map(|(k, e)| RangeItem::in_db(db, k.clone(), e)),
        );
    }
    Ok(items)
}

impl Store {
    /// Starts exporting the keys of a slot range (see [`RangeExport`]).
    pub fn export_range(&self, range: SlotRange) -> Result<RangeExport> {
        let inner = self.inner().clone();
        let paused = PausedCompaction::new(overlapping(&inner.table(), range));
        let positions = log_ends(paused.parts())?;
        Ok(RangeExport {
            inner,
            range,
            paused,
            positions,
            snapshot_taken: false,
        })
    }

    /// Applies items of a range export: puts (with their expiry) and deletes, a vector at a
    /// time. Not atomic as a whole; each item is, and applying the same items again changes
    /// nothing.
    pub fn import(&self, items: &[RangeItem]) -> Result<()> {
        for chunk in items.chunks(EXPORT_BATCH_ITEMS) {
            let mut dbs: Vec<u32> = chunk.iter().map(|i| i.db).collect();
            dbs.sort_unstable();
            dbs.dedup();
            for db in dbs {
                self.import_db(db, chunk.iter().filter(|i| i.db == db))?;
            }
        }
        Ok(())
    }

    /// [`Store::import`] of items of database `db` (at most [`EXPORT_BATCH_ITEMS`]).
    fn import_db<'a>(&self, db: u32, items: impl Iterator<Item = &'a RangeItem>) -> Result<()> {
        let store = self.db(db)?;
        let mut puts = Vec::new();
        let mut deletes: Vec<&[u8]> = Vec::new();
        for item in items {
            match &item.entry {
                Some(e) => puts.push(store.put_op(&item.key, &e.value, e.expire_at, e.kind)?),
                None => deletes.push(&item.key),
            }
        }
        // Within a chunk a key appears once (an export hands each key over once per call),
        // so the order of puts and deletes does not matter.
        if !puts.is_empty() {
            self.check_width(puts.len())?;
            self.write_plain(db, &mut puts)?;
        }
        if !deletes.is_empty() {
            store.multi_delete(&deletes)?;
        }
        Ok(())
    }

    /// Deletes every key of a slot range (once it has moved elsewhere); returns how many.
    /// Keys written to the range meanwhile may survive: stop writes to it first. Fails if a
    /// split or merge moves part of the range meanwhile (drop again: it completes the drop).
    pub fn drop_range(&self, range: SlotRange) -> Result<u64> {
        let mut export = self.export_range(range)?;
        let mut n = 0;
        export.snapshot(&mut |items| {
            for db in RANGE_DATABASES {
                let keys: Vec<&Bytes> = items
                    .iter()
                    .filter(|i| i.db == db)
                    .map(|i| &i.key)
                    .collect();
                if keys.is_empty() {
                    continue;
                }
                let deleted = self.db(db)?.multi_delete(&keys)?;
                // The hidden databases' keys are part of the hashes counted.
                if db == 0 {
                    n += deleted.iter().filter(|&&e| e).count() as u64;
                }
            }
            Ok(())
        })?;
        Ok(n)
    }

    /// Deletes every key of every database at once (Redis's FLUSHALL): all partitions locked, one Truncate
    /// record appended to each (everything before it in the log is dead) and their indexes
    /// emptied; returns how many keys there were. Readers see all keys or none. (A crash
    /// while the records are written may leave some partitions flushed and not others.)
    pub fn drop_all(&self) -> Result<u64> {
        let inner = self.inner();
        if inner.ctx.opts.read_only {
            return Err(Error::ReadOnly);
        }
        // No split or merge changes the partitions meanwhile.
        let _layout = inner.layout_change.lock();
        let table = inner.table();
        truncate(inner, &table, table.in_lock_order())
    }

    /// Splits the partitions that straddle an edge of one of `ranges` there, so that each
    /// range is a run of whole partitions ([`Store::drop_ranges`] then truncates them). A
    /// split copies the keys that move; an edge already between partitions costs nothing.
    pub fn align_to(&self, ranges: &[SlotRange]) -> Result<()> {
        for r in ranges {
            let edges = [Some(r.lo), r.hi.checked_add(1)];
            for at in edges
                .into_iter()
                .flatten()
                .filter(|&s| u32::from(s) < SLOTS)
            {
                self.split_inside(at)?;
            }
        }
        Ok(())
    }

    /// Deletes every key of the slots of `ranges`, of every database, at once, as
    /// [`Store::drop_all`] deletes all (a cluster chain's FLUSHALL): the ranges are aligned
    /// to partitions ([`Store::align_to`]), then those partitions are locked together and
    /// truncated — readers see all of their keys or none. Returns how many keys there were.
    pub fn drop_ranges(&self, ranges: &[SlotRange]) -> Result<u64> {
        let inner = self.inner();
        if inner.ctx.opts.read_only {
            return Err(Error::ReadOnly);
        }
        let slots: u32 = ranges.iter().map(SlotRange::len).sum();
        // A split or merge between the alignment and the lock (none is made by the store on
        // its own) sends it round again.
        for _ in 0..crate::route::ROUTE_ATTEMPTS_MAX {
            self.align_to(ranges)?;
            let _layout = inner.layout_change.lock();
            let table = inner.table();
            let inside = |p: &SlotRange| ranges.iter().any(|r| r.covers(p));
            let covered: u32 = self
                .slot_ranges()
                .iter()
                .filter(|p| inside(p))
                .map(SlotRange::len)
                .sum();
            if covered != slots {
                continue;
            }
            let parts = table
                .in_lock_order()
                .into_iter()
                .filter(|p| p.state.read().range.as_ref().is_some_and(inside))
                .collect();
            return truncate(inner, &table, parts);
        }
        Err(Error::InvalidOptions(format!(
            "the partitions kept changing while slots {ranges:?} were dropped"
        )))
    }
}

/// Empties `parts` (of `table`, every one locked at once, in lock order: readers see all of
/// their keys or none) with one Truncate record each; returns how many keys they had. The
/// caller holds the store's `layout_change`.
fn truncate(inner: &StoreInner, table: &Table, parts: Vec<&Arc<Partition>>) -> Result<u64> {
    let ctx = &inner.ctx;
    let now = ctx.now_ms();
    let mut guards = write_all(parts.iter().copied());
    let mut record = Vec::with_capacity(crate::log::format::RECORD_HEADER_LEN);
    crate::log::format::encode_record(
        &mut record,
        RecordType::Truncate,
        ctx.alloc_seq(),
        crate::log::format::RecordExt::NONE,
        b"",
        b"",
    );
    // Room first in every partition, so that a full disk refuses the whole flush.
    for (p, st) in parts.iter().zip(guards.iter_mut()) {
        st.prepare_append(ctx, p.id, &p.dir, record.len() as u64)?;
    }
    let mut n = 0;
    let mut lsns = Vec::with_capacity(parts.len());
    for (p, st) in parts.iter().zip(guards.iter_mut()) {
        st.append(&record)?;
        n += st.live_keys_all(&table.dbs, now);
        st.index = crate::index::Index::for_keys(0);
        st.ns_keys.clear();
        st.counters.records += 1;
        st.counters.dead = st.counters.records;
        st.expiries = Default::default();
        st.dirty = true;
        lsns.push((*p, st.appended_lsn));
    }
    drop(guards);
    if ctx.opts.durability == crate::options::Durability::Fsync {
        for (p, lsn) in lsns {
            p.wait_durable(lsn)?;
        }
    }
    inner.background.wake();
    Ok(n)
}

impl Store {
    /// Up to `count` keys of hash slot `slot` (Redis's CLUSTER GETKEYSINSLOT).
    pub fn keys_in_slot(&self, slot: u16, count: usize) -> Result<Vec<Bytes>> {
        let mut keys = Vec::new();
        if count == 0 {
            return Ok(keys);
        }
        self.walk_slot(slot, &mut |k| {
            keys.push(k.clone());
            keys.len() < count
        })?;
        Ok(keys)
    }

    /// Number of database 0's keys in hash slot `slot` (Redis's CLUSTER COUNTKEYSINSLOT).
    pub fn count_keys_in_slot(&self, slot: u16) -> Result<u64> {
        let range = SlotRange::new(slot, slot)
            .ok_or_else(|| Error::InvalidOptions(format!("slot {slot} out of range")))?;
        Ok(self.count_keys_in_ranges(&[range]))
    }

    /// Number of database 0's keys in the slots of `ranges` (a cluster chain's share of
    /// DBSIZE): O(partitions + slots) from the per-slot counts, no key read. Keys whose time
    /// to live has passed are not counted, swept or not (as DBSIZE).
    pub fn count_keys_in_ranges(&self, ranges: &[SlotRange]) -> u64 {
        let inner = self.inner();
        let now = inner.ctx.now_ms();
        let table = inner.table();
        let ns = table.dbs.ns(0);
        table
            .parts
            .iter()
            .map(|p| {
                let st = p.state.read();
                ranges
                    .iter()
                    .map(|&r| st.live_keys_in(ns, r, now))
                    .sum::<u64>()
            })
            .sum()
    }

    /// Calls `f` with every key of `slot` until it returns false: a SCAN of the partition
    /// that owns the slot, filtered.
    fn walk_slot(&self, slot: u16, f: &mut dyn FnMut(&Bytes) -> bool) -> Result<()> {
        let Some(r) = self.slot_ranges().into_iter().find(|r| r.contains(slot)) else {
            return Err(Error::InvalidOptions(format!("slot {slot} out of range")));
        };
        let start = (r.lo as u64) << 32;
        let mut cursor = start;
        // Bounded: each page moves the cursor on within the partition, which ends the walk.
        loop {
            let page = self.scan(cursor, None, EXPORT_BATCH_ITEMS)?;
            for k in page.keys.iter().filter(|k| key_slot(k) == slot) {
                if !f(k) {
                    return Ok(());
                }
            }
            if page.cursor == 0 || page.cursor >> 32 != start >> 32 {
                return Ok(());
            }
            cursor = page.cursor;
        }
    }
}
