//! The public engine: [`Store`]. Splits every vector by partition, takes the partitions' locks
//! in ascending order, and hands each partition its share as one vector.
//!
//! Every write follows the same two phases while it holds the locks of all the partitions it
//! touches: first everything that can fail for want of room (index room, log space, disk
//! blocks) is settled for every partition, then the records are appended and indexed. So a
//! write refused for room or space has changed nothing, and readers (who lock the same way)
//! see a vector's writes all or none. A write refused for room retries within the bounds of
//! `retry`. Compound batches follow the commit protocol of `commit`; maintenance runs in the
//! background thread (`background`) or on demand (`compact`).

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::background::BackgroundThread;
use crate::batch::{Batch, BatchAction, BatchOutcome, Entry};
use crate::checkpoint;
use crate::commit::{self, Attempt, LookFirst};
use crate::compact;
use crate::durable::{self, SyncWait};
use crate::error::{Error, Result};
use crate::hash::KeyHash;
use crate::inner::StoreInner;
use crate::maintenance::MaintenanceReport;
use crate::options::{Durability, Options, KEY_LEN_MAX};
use crate::partition::{intend_all, release_all, LockStats, PartState, Partition};
use crate::pipeline;
use crate::recovery::{RecoveryProgress, RecoveryReport};
use crate::retry::WriteRetry;
use crate::route::{RouteTries, Routed};
use crate::scan::ScanPage;
use crate::slot::SlotRange;
use crate::stalls::{Pacer, StallEvent};
use crate::sweep;
use crate::write::{self, read_among_writes, ReadAt, WriteOp};

/// A key's expiry, as [`Store::ttl`] reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ttl {
    /// No such key (or it has expired).
    Absent,
    /// The key never expires.
    Never,
    /// The key expires at this time (ms since the Unix epoch).
    At(u64),
}

/// A Quiver store: a directory of partitions.
pub struct Store {
    inner: Arc<StoreInner>,
    background: BackgroundThread,
    report: RecoveryReport,
}

/// Figures about a store.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stats {
    pub partitions: u32,
    /// Live keys of every database.
    pub keys: u64,
    /// Live keys with an expiry time, and their average time to live (ms).
    pub expiring_keys: u64,
    pub avg_ttl_ms: u64,
    /// RAM held by the hash indexes.
    pub index_bytes: u64,
    /// Slots of the indexes' main tables.
    pub index_capacity: u64,
    /// Keys in index spills: inserted while a main table was full, until the resize under
    /// way folds them in (`index`).
    pub index_spilled_keys: u64,
    pub segments: u64,
    /// Disk space the segment files occupy (allocated blocks).
    pub disk_bytes: u64,
    pub records: u64,
    pub dead_records: u64,
    /// dead_records / records.
    pub garbage_ratio: f64,
    pub last_background_error: Option<String>,
    /// Compactions and index resizes completed since the store was opened.
    pub maintenance_runs: u64,
    /// Records compaction copied and dropped since the store was opened.
    pub compaction_copied_records: u64,
    pub compaction_dropped_records: u64,
    /// The longest time maintenance kept a partition's writers waiting, the sum of all such
    /// holds, and their number, since the store was opened (`stalls::Stalls`).
    pub maintenance_stall_max_us: u64,
    /// The task of the longest hold ("checkpoint", "compaction index moves"...; "" if none).
    pub maintenance_stall_max_by: &'static str,
    pub maintenance_stall_total_us: u64,
    pub maintenance_stalls: u64,
    /// Disk space held in reserve for deletes and compaction (the `RESERVE` file).
    pub disk_reserve_bytes: u64,
    /// The reserve is released because the disk filled: writes that add data are refused
    /// until compaction has made room to take it back.
    pub short_of_space: bool,
    /// Partitions that refuse writes until the store is reopened (a failed fdatasync, or
    /// bytes a failed write left that could not be taken back), and the first one's reason.
    pub partitions_refusing_writes: u32,
    pub refusing_writes_because: Option<String>,
    /// The partitions' locks on the serving paths, since the store was opened (a partition
    /// a split or merge retired takes its figures with it).
    pub locks: LockStats,
}

impl Store {
    /// Opens (or creates) the store in `dir`.
    pub fn open(dir: impl AsRef<Path>, opts: Options) -> Result<Store> {
        Store::open_with_progress(dir, opts, &mut |_| {})
    }

    /// Opens the store, reporting index-rebuild progress.
    pub fn open_with_progress(
        dir: impl AsRef<Path>,
        opts: Options,
        progress: &mut (dyn FnMut(RecoveryProgress) + Send),
    ) -> Result<Store> {
        let (inner, report) = crate::open::open(dir.as_ref(), opts, progress)?;
        let background = BackgroundThread::start(&inner)?;
        Ok(Store {
            inner,
            background,
            report,
        })
    }

    /// What opening the store found (torn tails, damage, repaired batches).
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.report
    }

    /// Now on the store's clock ([`Options::clock`]), in ms since the Unix epoch: what
    /// expiry times are compared with.
    pub fn now_ms(&self) -> u64 {
        self.inner.ctx.now_ms()
    }

    /// The open store, for the other homes of the public API (`migrate`).
    pub(crate) fn inner(&self) -> &Arc<StoreInner> {
        &self.inner
    }

    pub fn options(&self) -> &Options {
        &self.inner.ctx.opts
    }

    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    // ---- writes ----

    /// Writes plain ops of database `db` (see the module documentation for the two phases);
    /// returns per op whether the key existed before it. Each try gives the ops their
    /// namespace and hash from the layout it routes on.
    pub(crate) fn write_plain(&self, db: u32, ops: &mut [WriteOp<'_>]) -> Result<Vec<bool>> {
        self.write_plain_reading(db, ops, &[])
            .and_then(|(_, written)| written)
    }

    /// [`Store::write_plain`] with reads among the writes: `reads[j]` reads its key after the
    /// first `reads[j].after` ops, so it sees them (the latest of them on its key gives its
    /// value) and not the later ones. The reads are looked up under the same locks, after
    /// phase 1 and before anything is appended: the whole vector takes effect at one instant,
    /// as if its reads and writes ran one by one in order (a pipeline's GETs and SETs as one
    /// vector). `Err`: nothing was read or written (a refusal, or a read that failed);
    /// `Ok((values, written))`: each read's entry (`None`: absent or expired), and what the
    /// writes did (an error of theirs after the reads, as `write_plain` returns it).
    #[allow(clippy::type_complexity)]
    pub(crate) fn write_plain_reading(
        &self,
        db: u32,
        ops: &mut [WriteOp<'_>],
        reads: &[ReadAt<'_>],
    ) -> Result<(Vec<Option<Entry>>, Result<Vec<bool>>)> {
        self.check_writable()?;
        let frees_space = ops.iter().all(|o| o.value.is_none());
        if !frees_space {
            self.inner.reserve.admit_growth()?;
        }
        let ctx = &self.inner.ctx;
        // Bounded: see `retry` (each try that cannot go ahead uses up one of its retries) and
        // `route` (each try on a new layout uses up one of its tries).
        let mut retry = WriteRetry::new(&self.inner, self.background.is_running(), frees_space);
        let mut tries = RouteTries::default();
        loop {
            let table = self.inner.table();
            let ns = table.dbs.ns(db);
            for op in ops.iter_mut() {
                op.ns = ns;
                op.hash = KeyHash::of_ns(ns, op.key);
            }
            let ops = &*ops;
            let mut read_hashes: Vec<KeyHash> =
                reads.iter().map(|r| KeyHash::of_ns(ns, r.key)).collect();
            let routed = Routed::new(
                table,
                ops.iter()
                    .map(|o| (o.key, o.hash))
                    .chain(reads.iter().zip(&read_hashes).map(|(r, &h)| (r.key, h))),
            );
            let mut order: Vec<(usize, usize)> = routed.of_key[..ops.len()]
                .iter()
                .enumerate()
                .map(|(i, &(g, _))| (g, i))
                .collect();
            order.sort_unstable();
            // (partition: index into `routed.parts`, range of `order`)
            let mut groups: Vec<(usize, std::ops::Range<usize>)> = Vec::new();
            for (at, &(p, _)) in order.iter().enumerate() {
                match groups.last_mut() {
                    Some((q, r)) if *q == p => r.end = at + 1,
                    _ => groups.push((p, at..at + 1)),
                }
            }
            let mut group_ops: Vec<Vec<WriteOp<'_>>> = groups
                .iter()
                .map(|(_, r)| order[r.clone()].iter().map(|&(_, i)| ops[i]).collect())
                .collect();
            // Intents first: the lookups, encoding and reads shut no reader out; upgraded for
            // the space reservations, appends and index updates (`partition::intend_all`).
            let parts: Vec<&Arc<Partition>> = routed.parts().collect();
            let guards = intend_all(&parts);
            if !routed.owned(&guards) {
                drop(guards);
                tries.again()?;
                continue;
            }
            // The mapping as of now (see `inner::Table::dbs`).
            let mut read_ns = ns;
            if let Some(now) = guards.first().map(|st| st.dbs.ns(db)).filter(|&n| n != ns) {
                for op in group_ops.iter_mut().flatten() {
                    op.ns = now;
                    op.hash = KeyHash::of_ns(now, op.key);
                }
                for (h, r) in read_hashes.iter_mut().zip(reads) {
                    *h = KeyHash::of_ns(now, r.key);
                }
                read_ns = now;
            }
            // Phase 1: index room, lookups, encoding and log space for every partition
            // (`write::plan_groups`). `groups[gi].0` is the partition's place in `routed` and
            // `guards` (a partition only reads touch has no group).
            if let Some((gi, need)) = group_ops.iter().enumerate().find_map(|(gi, g)| {
                let need = write::inserts_needed(g);
                (!guards[groups[gi].0].index.has_room(need)).then_some((gi, need))
            }) {
                drop(guards);
                retry.make_room(routed.part(groups[gi].0).id, need)?;
                continue;
            }
            // The reads, on the state as it was before the vector (nothing changes it while
            // the intents are held).
            let values = if reads.is_empty() {
                Vec::new()
            } else {
                let states: Vec<&PartState> = guards.iter().map(|g| &**g).collect();
                let of_read = &routed.of_key[ops.len()..];
                // A failed read: nothing is written (the guards go with the return).
                read_among_writes(ctx, &states, of_read, read_ns, reads, &read_hashes, ops)?
            };
            let (plans, mut guards) =
                match write::plan_groups(ctx, &parts, guards, &groups, &group_ops) {
                    Ok(planned) => planned,
                    Err(e) => {
                        retry.after_refusal(e)?;
                        continue;
                    }
                };

            // Phase 2: append and index.
            let mut existed = vec![false; ops.len()];
            let mut applied = vec![true; ops.len()];
            let mut failure = None;
            // Whether any record reached the log (a delete of an absent key writes none).
            let mut wrote = false;
            let mut lsns = Vec::with_capacity(groups.len());
            let mut grow = false;
            for (gi, plan) in plans.into_iter().enumerate() {
                let part = routed.part(groups[gi].0);
                let st = &mut guards[groups[gi].0];
                let idx = &order[groups[gi].1.clone()];
                if failure.is_some() {
                    // Nothing of this partition's run was written: what each op really did.
                    for &(_, i) in idx {
                        applied[i] = false;
                    }
                    let at = |j: usize| idx[j].1;
                    let run = &plan.run;
                    write::settle_failed_run(run, &group_ops[gi], at, &mut applied, &mut existed);
                    continue;
                }
                let done = write::apply_plain(ctx, part, st, plan, &group_ops[gi]);
                for (j, &(_, i)) in idx.iter().enumerate() {
                    existed[i] = done.existed[j];
                    applied[i] = done.applied[j];
                }
                wrote |= done.wrote;
                lsns.push((part, st.appended_lsn));
                grow |= st.index.wants_growth();
                failure = done.error;
            }
            release_all(guards);
            if grow {
                self.inner.background.wake();
            }
            ctx.help_pages_ahead();
            if let Some(e) = failure {
                return Ok((
                    values,
                    Err(if !wrote {
                        e
                    } else {
                        Error::PartlyApplied {
                            applied,
                            existed,
                            source: Box::new(e),
                        }
                    }),
                ));
            }
            if ctx.opts.durability == Durability::Fsync {
                if let Some(e) = durable::acknowledge(&lsns)
                    .into_iter()
                    .find_map(Result::err)
                {
                    return Ok((values, Err(e)));
                }
            }
            return Ok((values, Ok(existed)));
        }
    }

    /// Runs `f` (engine calls of this store, on this thread) with its acknowledgement waits
    /// deferred: returns `f`'s result and what its writes wait for before they may be
    /// acknowledged, for the caller to await (see `durable`). Outside `fsync` mode the wait
    /// is empty.
    pub fn deferring_sync<R>(&self, f: impl FnOnce() -> R) -> (R, SyncWait) {
        durable::scope(f)
    }

    /// Runs a pipeline of independent accesses of database `db` (`Db::pipeline`).
    pub(crate) fn run_pipeline(
        &self,
        db: u32,
        steps: &mut [pipeline::Step<'_>],
    ) -> Result<pipeline::PipelineOutcome> {
        if steps.iter().any(|s| matches!(s, pipeline::Step::Write(_))) {
            self.check_writable()?;
        }
        pipeline::run(&self.inner, self.background.is_running(), db, steps)
    }

    /// Applies a compound batch all-or-nothing: preconditions are checked and every write is
    /// appended and indexed while all the partitions involved are locked, so readers see all
    /// of it or none, and a crash never leaves part of it (see docs/design.md).
    pub fn apply(&self, batch: &Batch) -> Result<BatchOutcome> {
        self.check_width(batch.len())?;
        self.check_writable()?;
        for op in &batch.ops {
            check_key(&op.key)?;
            self.db(op.db)?;
            if let BatchAction::Put(v) = &op.action {
                self.check_value(v)?;
            }
        }
        let frees_space = !batch
            .ops
            .iter()
            .any(|op| matches!(op.action, BatchAction::Put(_)));
        if !frees_space {
            self.inner.reserve.admit_growth()?;
        }
        // Bounded: see `retry` (each try that cannot go ahead uses up one of its retries) and
        // `route`.
        let mut retry = WriteRetry::new(&self.inner, self.background.is_running(), frees_space);
        let mut tries = RouteTries::default();
        loop {
            match self.try_apply(batch, LookFirst::IfContended) {
                Attempt::Done(r) => return r,
                Attempt::Rerouted => tries.again()?,
                Attempt::NeedRoom { partition, keys } => retry.make_room(partition, keys)?,
                Attempt::NoSpace(e) => retry.after_refusal(e)?,
            }
        }
    }

    /// One try of [`Store::apply`]: the involved partitions locked (ascending ids; the batch's
    /// keys looked up before as `look_first` says), then the batch's preconditions and commit
    /// protocol (`commit::try_batch`).
    pub(crate) fn try_apply(&self, batch: &Batch, look_first: LookFirst<'_>) -> Attempt {
        let table = self.inner.table();
        let hash_all = |dbs: &crate::dbs::DbMap| -> Vec<(u32, KeyHash)> {
            batch
                .ops
                .iter()
                .map(|op| {
                    let ns = dbs.ns(op.db);
                    (ns, KeyHash::of_ns(ns, &op.key))
                })
                .collect()
        };
        let mut hashed = hash_all(&table.dbs);
        let keys = batch
            .ops
            .iter()
            .zip(&hashed)
            .map(|(op, &(_, h))| (&op.key[..], h));
        let routed = Routed::new(table, keys);
        let parts: Vec<&Arc<Partition>> = routed.parts().collect();
        let guard_of: Vec<usize> = routed.of_key.iter().map(|&(g, _)| g).collect();
        let ctx = &self.inner.ctx;
        let mut prepared = commit::prepare(ctx, batch, &hashed, &guard_of, parts.len());
        let mut items = commit::lookup_keys(batch, &hashed, &guard_of);
        let (guards, mut foreseen) = commit::lock_parts(ctx, &parts, batch, &items, look_first);
        if !routed.owned(&guards) {
            return Attempt::Rerouted;
        }
        // The mapping as of now (see `inner::Table::dbs`): the records name the namespaces.
        if let Some(st) = guards
            .first()
            .filter(|st| !Arc::ptr_eq(&st.dbs, &routed.table.dbs))
        {
            hashed = hash_all(&st.dbs);
            prepared = commit::prepare(ctx, batch, &hashed, &guard_of, parts.len());
            items = commit::lookup_keys(batch, &hashed, &guard_of);
            foreseen = None; // the keys' hashes changed
        }
        commit::try_batch(
            ctx,
            &self.inner.background,
            &parts,
            guards,
            batch,
            prepared,
            foreseen,
            &items,
        )
    }

    // ---- iteration and figures ----

    /// Database 0's [`Db::scan`].
    pub fn scan(&self, cursor: u64, pattern: Option<&[u8]>, count: usize) -> Result<ScanPage> {
        self.db0().scan(cursor, pattern, count)
    }

    /// A SCAN cursor at the place in the key space that the random number `r` picks: the
    /// partition owning the slot its top bits choose, the position in hash order its low 32
    /// bits give. A scan from there finds a random key (RANDOMKEY).
    pub fn random_cursor(&self, r: u64) -> u64 {
        let slot = ((r >> 32) * crate::slot::SLOTS as u64) >> 32;
        (slot << 32) | (r & u64::from(u32::MAX))
    }

    /// Deletes keys whose expiry time has come (at most `max_per_partition` in each
    /// partition); returns how many. The background thread runs it every tick; reads treat
    /// such keys as absent meanwhile.
    pub fn sweep_expired(&self, max_per_partition: usize) -> Result<u64> {
        self.check_writable()?;
        let mut n = 0;
        for part in self.inner.table().parts.iter() {
            n += sweep::sweep_partition(&self.inner.ctx, part, max_per_partition)?;
        }
        Ok(n)
    }

    /// Sets compaction's trigger (`Options::compact_garbage_ratio`, 0: no background
    /// compaction) and pacing (`Options::compact_cpu_share`) while the store is open: the
    /// next passes follow them. Checked as at opening; nothing changes on an error.
    pub fn set_compaction(&self, garbage_ratio: f64, cpu_share: f64) -> Result<()> {
        self.inner
            .ctx
            .tuning
            .set_compaction(garbage_ratio, cpu_share)
    }

    /// Whether the background thread's expiry sweep runs (on at opening); reads treat expired
    /// keys as absent either way (Redis's DEBUG SET-ACTIVE-EXPIRE).
    pub fn set_active_expire(&self, on: bool) {
        self.inner.ctx.tuning.set_active_expire(on);
    }

    /// Compaction's trigger and pacing as set now (`set_compaction`).
    pub fn compaction(&self) -> (f64, f64) {
        let t = &self.inner.ctx.tuning;
        (t.compact_garbage_ratio(), t.compact_cpu_share())
    }

    /// The partitions' slot ranges, in partition order (empty for a store of format 1).
    pub fn slot_ranges(&self) -> Vec<SlotRange> {
        self.inner.table().partitioner.ranges().to_vec()
    }

    pub fn stats(&self) -> Stats {
        use std::os::unix::fs::MetadataExt;
        let mut s = Stats {
            partitions: self.inner.table().parts.len() as u32,
            ..Default::default()
        };
        let mut all = crate::dbs::Figures::default();
        for f in self
            .db_figures(|d| d < crate::large_hash::ANCHORS_DB)
            .into_values()
        {
            all.add(f);
        }
        (s.keys, s.expiring_keys, s.avg_ttl_ms) = (all.keys, all.expiring_keys, all.avg_ttl_ms());
        for part in self.inner.table().parts.iter() {
            part.locks.add_to(&mut s.locks);
            let st = part.state.read();
            s.index_bytes += st.index.bytes() as u64;
            s.index_capacity += st.index.capacity() as u64;
            s.index_spilled_keys += st.index.spilled() as u64;
            s.segments += st.segs.ordered.len() as u64;
            s.records += st.counters.records;
            s.dead_records += st.counters.dead;
            if let Some(reason) = &st.failed {
                s.partitions_refusing_writes += 1;
                s.refusing_writes_because
                    .get_or_insert_with(|| format!("partition {}: {reason}", part.id));
            }
            for seg in &st.segs.ordered {
                s.disk_bytes += seg.file().metadata().map(|m| m.blocks() * 512).unwrap_or(0);
            }
        }
        s.garbage_ratio = if s.records == 0 {
            0.0
        } else {
            s.dead_records as f64 / s.records as f64
        };
        s.last_background_error = self.inner.background.last_error();
        s.maintenance_runs = self.inner.ctx.maintenance_runs.load(Ordering::Relaxed);
        s.compaction_copied_records = self.inner.ctx.compaction_copied.load(Ordering::Relaxed);
        s.compaction_dropped_records = self.inner.ctx.compaction_dropped.load(Ordering::Relaxed);
        (
            s.maintenance_stall_max_us,
            s.maintenance_stall_max_by,
            s.maintenance_stall_total_us,
            s.maintenance_stalls,
        ) = self.inner.ctx.stalls.figures();
        s.disk_reserve_bytes = self.inner.reserve.held_bytes();
        s.short_of_space = self.inner.reserve.is_short();
        s
    }

    /// Verifies every record and every index entry; see [`CheckReport`].
    pub fn check(&self) -> Result<crate::CheckReport> {
        let mut report = crate::CheckReport::default();
        for part in self.inner.table().parts.iter() {
            crate::check::check_partition(part, &mut report)?;
        }
        Ok(report)
    }

    // ---- durability and maintenance ----

    /// The holds of a partition's lock by maintenance, and the fdatasyncs of its logs, of at
    /// least 1 ms since the last call (at most the last 1,024 of each), oldest first: what a
    /// server's latency monitor names.
    pub fn take_stall_events(&self) -> Vec<StallEvent> {
        self.inner.ctx.stalls.take_events(self.dir())
    }

    /// Whether the names of the keys the expiry sweep deletes are kept for
    /// [`Store::take_expired`] (at most `swept::EXPIRED_KEPT_MAX` between two takes); off, the
    /// sweep keeps none.
    pub fn report_expired(&self, on: bool) {
        self.inner.ctx.expired.set_wanted(on);
    }

    /// The keys the expiry sweep deleted since the last call (any database), and whether
    /// some went unreported (too many between two calls).
    pub fn take_expired(&self) -> (Vec<Vec<u8>>, bool) {
        self.inner.ctx.expired.take()
    }

    /// Writes buffered records to the OS and fdatasyncs every partition's log.
    pub fn flush(&self) -> Result<()> {
        if self.inner.ctx.opts.read_only {
            return Ok(());
        }
        for part in self.inner.table().parts.iter() {
            let seg = {
                let mut st = part.state.write();
                st.appender.flush()?;
                st.appender.segment.clone()
            };
            part.sync_segment(&seg)?;
        }
        Ok(())
    }

    /// Writes the index checkpoint of every partition changed since its last one (the others'
    /// checkpoints on disk are current).
    pub fn checkpoint(&self) -> Result<()> {
        if self.inner.ctx.opts.read_only {
            return Ok(());
        }
        // Seals first (each save would write them anyway): a seal appended to a partition
        // after its own checkpoint would leave it a record to replay.
        crate::seal::seal_parts(&self.inner.ctx)?;
        for part in self.inner.table().parts.iter() {
            if part.state.read().dirty {
                checkpoint::save(&self.inner.ctx, part, &mut Pacer::new(None))?;
            }
        }
        Ok(())
    }

    /// Compacts every partition now (reads and writes go on meanwhile): all of each
    /// partition's log in one pass when the disk has room for its live records; otherwise
    /// (the disk reserve released) a few segments at a time, the oldest first.
    pub fn compact(&self) -> Result<MaintenanceReport> {
        self.check_writable()?;
        let mut total = MaintenanceReport::default();
        for part in self.inner.table().parts.iter() {
            total.merge(compact::compact_partition(
                &self.inner.ctx,
                &self.inner.reserve,
                part,
            )?);
        }
        Ok(total)
    }

    /// Compaction as the background thread runs it, once: in each partition whose garbage
    /// ratio is past `compact_garbage_ratio`, a pass over the range of its log with the most
    /// garbage (or the next step of a sweep under way). Unpaced.
    pub fn compact_garbage(&self) -> Result<MaintenanceReport> {
        self.check_writable()?;
        let ctx = &self.inner.ctx;
        let mut total = MaintenanceReport::default();
        for part in self.inner.table().parts.iter() {
            if !crate::maintenance::wants_compaction(ctx, &part.state.read()) {
                continue;
            }
            let budget_bytes = ctx.opts.compact_pass_bytes_max;
            let want = compact::Want::Background(budget_bytes);
            total.merge(compact::compact_locked(ctx, part, want)?.report);
        }
        self.inner.reserve.restore();
        Ok(total)
    }

    /// One step of incremental compaction: in each partition, the next pass of its sweep
    /// over at most `budget_bytes` of segments (at least one group), as the background thread
    /// runs when the disk has no room for a whole partition's live records. Bounded work.
    pub fn compact_step(&self, budget_bytes: u64) -> Result<MaintenanceReport> {
        self.check_writable()?;
        let mut total = MaintenanceReport::default();
        for part in self.inner.table().parts.iter() {
            let pass = compact::compact_locked(
                &self.inner.ctx,
                part,
                compact::Want::SweepStep(budget_bytes),
            )?;
            total.merge(pass.report);
        }
        self.inner.reserve.restore();
        Ok(total)
    }

    /// Flushes, checkpoints and releases the store. A checkpoint that does not fit on a full
    /// disk is skipped (the log holds everything; the next open replays more of it).
    pub fn close(mut self) -> Result<()> {
        self.stop_background();
        let res = self.flush().and_then(|()| match self.checkpoint() {
            Err(e) if e.is_no_space() => Ok(()),
            other => other,
        });
        self.inner.closed.store(true, Ordering::SeqCst);
        res
    }

    /// [`Store::close`] without the checkpoint (a server's SHUTDOWN NOSAVE): every record is
    /// written out and synced, and the next open replays what its last checkpoints miss.
    pub fn close_without_checkpoint(mut self) -> Result<()> {
        self.stop_background();
        let res = self.flush();
        self.inner.closed.store(true, Ordering::SeqCst);
        res
    }

    /// Drops the store as a crash would: no flush of `none`-mode buffers, no checkpoint.
    /// For tests of recovery.
    #[doc(hidden)]
    pub fn simulate_crash(mut self) {
        self.inner.closed.store(true, Ordering::SeqCst);
        self.stop_background();
    }

    fn stop_background(&mut self) {
        self.background.stop(&self.inner);
    }

    fn check_writable(&self) -> Result<()> {
        if self.inner.ctx.opts.read_only {
            return Err(Error::ReadOnly);
        }
        Ok(())
    }

    pub(crate) fn check_width(&self, n: usize) -> Result<()> {
        let max = self.inner.ctx.opts.vector_width_max;
        if n > max {
            return Err(Error::VectorTooWide { len: n, max });
        }
        Ok(())
    }

    pub(crate) fn check_value(&self, v: &[u8]) -> Result<()> {
        let max = self.inner.ctx.opts.value_len_max;
        if v.len() > max {
            return Err(Error::ValueTooLarge { len: v.len(), max });
        }
        Ok(())
    }
}

pub(crate) fn check_key(k: &[u8]) -> Result<()> {
    // The empty key is a key (Redis accepts it); only the header's u16 bounds a key.
    if k.len() > KEY_LEN_MAX {
        return Err(Error::KeyLength {
            len: k.len(),
            max: KEY_LEN_MAX,
        });
    }
    Ok(())
}

impl Drop for Store {
    fn drop(&mut self) {
        self.stop_background();
        if !self.inner.closed.swap(true, Ordering::SeqCst) {
            let _ = self.flush();
            let _ = self.checkpoint();
        }
    }
}
