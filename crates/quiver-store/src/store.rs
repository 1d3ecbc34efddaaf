//! The public engine: [`Store`]. Splits every vector by partition, takes the partitions' locks
//! in ascending order, and hands each partition its share as one vector.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::{Condvar, Mutex, RwLock, RwLockWriteGuard};

use crate::batch::{self, Batch, BatchAction, BatchOutcome};
use crate::error::{Error, Result};
use crate::hash::KeyHash;
use crate::index::LOAD_GROW;
use crate::io;
use crate::lockfile::DirLock;
use crate::log::format::{self, SegmentOrder, SEGMENT_HEADER_LEN};
use crate::log::writer::Appender;
use crate::lookup::{self, Found, LookupKey};
use crate::maintenance::{self, MaintenanceReport, Mode};
use crate::meta;
use crate::options::{Durability, Options, KEY_LEN_MAX};
use crate::partition::{new_segment, partition_dir, PartState, Partition, StoreCtx};
use crate::recovery::{self, RecoveryProgress, RecoveryReport};
use crate::scan::{self, ScanPage};
use crate::write::{self, Framing, WriteOp};

/// A Quiver store: a directory of partitions.
pub struct Store {
    inner: Arc<Inner>,
    background: Option<JoinHandle<()>>,
    report: RecoveryReport,
}

struct Inner {
    ctx: StoreCtx,
    parts: Vec<Partition>,
    dir: PathBuf,
    _lock: DirLock,
    /// Set once closed (or crashed): no more checkpoints or flushes from drop.
    closed: AtomicBool,
    wake: Mutex<bool>,
    wake_cv: Condvar,
    last_background_error: Mutex<Option<String>>,
}

/// Figures about a store.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stats {
    pub partitions: u32,
    pub keys: u64,
    /// RAM held by the hash indexes.
    pub index_bytes: u64,
    pub index_capacity: u64,
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
}

/// First segment of a new partition.
const FIRST_ORDER: SegmentOrder = SegmentOrder { major: 1, minor: 0 };
/// Background thread's longest sleep between checks.
const BACKGROUND_TICK_MS_MAX: u64 = 100;

impl Store {
    /// Opens (or creates) the store in `dir`.
    pub fn open(dir: impl AsRef<Path>, opts: Options) -> Result<Store> {
        Store::open_with_progress(dir, opts, &mut |_| {})
    }

    /// Opens the store, reporting index-rebuild progress.
    pub fn open_with_progress(
        dir: impl AsRef<Path>,
        mut opts: Options,
        progress: &mut (dyn FnMut(RecoveryProgress) + Send),
    ) -> Result<Store> {
        opts.validate()?;
        let dir = dir.as_ref().to_path_buf();
        std::fs::create_dir_all(&dir).map_err(|e| Error::io("create store directory", &dir, e))?;
        let lock = DirLock::acquire(&dir)?;
        meta::load_or_create(&dir, &mut opts)?;
        let ctx = StoreCtx {
            backend: io::backend(opts.backend)?,
            opts,
            next_file_id: AtomicU64::new(1),
            next_seq: AtomicU64::new(1),
            value_len_estimate: AtomicUsize::new(64),
            maintenance_runs: AtomicU64::new(0),
        };
        let (recovered, mut report) = recover_partitions(&ctx, &dir, progress)?;
        let max_seq = recovered
            .iter()
            .map(|r| r.builder.max_seq)
            .max()
            .unwrap_or(0);
        let max_file = recovered.iter().map(|r| r.max_file_id).max().unwrap_or(0);
        ctx.next_seq.store(max_seq + 1, Ordering::Relaxed);
        ctx.next_file_id.store(max_file + 1, Ordering::Relaxed);

        // A batch is committed if any partition holds its commit record.
        let committed: HashSet<u64> = recovered
            .iter()
            .flat_map(|r| r.builder.commits.iter().copied())
            .collect();
        let mut repaired: HashSet<u64> = HashSet::new();
        let mut aborted: HashSet<u64> = HashSet::new();
        let mut parts = Vec::with_capacity(recovered.len());
        for (p, rec) in recovered.into_iter().enumerate() {
            let p = p as u32;
            let pdir = partition_dir(&dir, p);
            let clean = rec.clean && !rec.segs.ordered.is_empty();
            let mut b = rec.builder;
            let mut segs = rec.segs;
            let mut repairs = Vec::new();
            let pending: BTreeMap<u64, _> = rec.pending.into_iter().collect();
            for (seq, members) in pending {
                if committed.contains(&seq) {
                    b.apply_members(&segs, &members)?;
                    repairs.push((seq, members.len() as u32));
                    repaired.insert(seq);
                } else {
                    b.discard_members(members.len());
                    aborted.insert(seq);
                }
            }
            if segs.ordered.is_empty() {
                segs.push(Arc::new(new_segment(&ctx, p, &pdir, 0, FIRST_ORDER)?));
            }
            let end = rec.end_offset.unwrap_or(SEGMENT_HEADER_LEN as u64);
            let appender = Appender::new(
                segs.active().clone(),
                end,
                ctx.opts.durability == Durability::None,
                ctx.opts.write_buffer_bytes_max,
            );
            let mut st = PartState {
                index: b.index,
                segs,
                appender,
                counters: b.counters,
                appended_lsn: 0,
                dirty: !clean,
            };
            for (seq, members) in repairs {
                let mut buf = Vec::new();
                write::encode_commit(&mut buf, seq, members);
                st.ensure_room(&ctx, p, &pdir, buf.len() as u64)?;
                st.append(&buf)?;
                st.counters.records += 1;
                st.counters.dead += 1;
            }
            st.appender.flush()?;
            parts.push(Partition {
                id: p,
                dir: pdir,
                state: RwLock::new(st),
                commit: Default::default(),
                maintenance: Mutex::new(()),
            });
        }
        report.batches_repaired = repaired.len() as u64;
        report.batches_aborted = aborted.len() as u64;

        let inner = Arc::new(Inner {
            ctx,
            parts,
            dir,
            _lock: lock,
            closed: AtomicBool::new(false),
            wake: Mutex::new(false),
            wake_cv: Condvar::new(),
            last_background_error: Mutex::new(None),
        });
        // Checkpoint what had to be rebuilt or replayed, so the next open is fast. Only an
        // optimisation: on a full disk the store opens anyway (the log holds everything).
        for part in inner.parts.iter().filter(|p| p.state.read().dirty) {
            match maintenance::save_checkpoint(&inner.ctx, part) {
                Err(e @ Error::NoSpace { .. }) => {
                    *inner.last_background_error.lock() = Some(e.to_string())
                }
                r => r?,
            }
        }
        let background = if inner.ctx.opts.background {
            let bg = inner.clone();
            Some(
                std::thread::Builder::new()
                    .name("quiver-maintenance".into())
                    .spawn(move || background_loop(&bg))
                    .map_err(|e| Error::io("spawn maintenance thread", &inner.dir, e))?,
            )
        } else {
            None
        };
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

    pub fn options(&self) -> &Options {
        &self.inner.ctx.opts
    }

    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    // ---- reads ----

    pub fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        check_key(key)?;
        let hash = KeyHash::of(key);
        let part = &self.inner.parts[hash.partition(self.inner.ctx.opts.partitions) as usize];
        let st = part.state.read();
        let found = lookup::lookup_one_partition(&self.inner.ctx, &st, &[(key, hash)], true);
        drop(st);
        lookup::into_value(found.into_iter().next().expect("one key, one result"))
    }

    /// Gets many keys as one vector: all index probes, then one batch of reads. The keys'
    /// partitions are locked together, so the result is one consistent state of the store.
    pub fn multi_get<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<Option<Bytes>>> {
        self.lookup_vector(keys, true)?
            .into_iter()
            .map(lookup::into_value)
            .collect()
    }

    pub fn exists(&self, key: &[u8]) -> Result<bool> {
        Ok(self.multi_exists(&[key])?[0])
    }

    pub fn multi_exists<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<bool>> {
        self.lookup_vector(keys, false)?
            .into_iter()
            .map(|f| match f {
                Found::Absent => Ok(false),
                Found::Live { .. } => Ok(true),
                Found::Failed(e) => Err(e),
            })
            .collect()
    }

    fn lookup_vector<K: AsRef<[u8]>>(&self, keys: &[K], verify_values: bool) -> Result<Vec<Found>> {
        self.check_width(keys.len())?;
        let n_parts = self.inner.ctx.opts.partitions;
        let mut hashed = Vec::with_capacity(keys.len());
        for k in keys {
            let k = k.as_ref();
            check_key(k)?;
            let h = KeyHash::of(k);
            hashed.push((k, h, h.partition(n_parts)));
        }
        let mut involved: Vec<u32> = hashed.iter().map(|x| x.2).collect();
        involved.sort_unstable();
        involved.dedup();
        let guards: Vec<_> = involved
            .iter()
            .map(|&p| self.inner.parts[p as usize].state.read())
            .collect();
        let states: Vec<&PartState> = guards.iter().map(|g| &**g).collect();
        let items: Vec<LookupKey<'_>> = hashed
            .iter()
            .map(|&(key, hash, p)| LookupKey {
                state: involved.binary_search(&p).expect("collected above"),
                key,
                hash,
            })
            .collect();
        Ok(lookup::lookup(
            &self.inner.ctx,
            &states,
            &items,
            verify_values,
        ))
    }

    // ---- writes ----

    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.multi_put(&[(key, value)])
    }

    /// Puts many pairs: each partition's share is appended as one run with one write (and, in
    /// fsync mode, made durable by one group-committed fdatasync). Not atomic across
    /// partitions — use [`Store::apply`] for that.
    pub fn multi_put<K: AsRef<[u8]>, V: AsRef<[u8]>>(&self, pairs: &[(K, V)]) -> Result<()> {
        self.check_width(pairs.len())?;
        let mut ops = Vec::with_capacity(pairs.len());
        for (k, v) in pairs {
            let (k, v) = (k.as_ref(), v.as_ref());
            check_key(k)?;
            self.check_value(v)?;
            ops.push(WriteOp {
                key: k,
                hash: KeyHash::of(k),
                value: Some(v),
            });
        }
        self.write_plain(&ops).map(|_| ())
    }

    /// Deletes a key; true if it existed.
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        Ok(self.multi_delete(&[key])?[0])
    }

    /// Deletes many keys; per key, whether it existed.
    pub fn multi_delete<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<bool>> {
        self.check_width(keys.len())?;
        let mut ops = Vec::with_capacity(keys.len());
        for k in keys {
            let k = k.as_ref();
            check_key(k)?;
            ops.push(WriteOp {
                key: k,
                hash: KeyHash::of(k),
                value: None,
            });
        }
        self.write_plain(&ops)
    }

    /// Writes plain ops grouped by partition; returns per op whether the key existed before.
    fn write_plain(&self, ops: &[WriteOp<'_>]) -> Result<Vec<bool>> {
        let n_parts = self.inner.ctx.opts.partitions;
        let mut order: Vec<(u32, usize)> = ops
            .iter()
            .enumerate()
            .map(|(i, o)| (o.hash.partition(n_parts), i))
            .collect();
        order.sort_unstable();
        let mut existed = vec![false; ops.len()];
        let mut lsns: Vec<(u32, u64)> = Vec::new();
        let mut start = 0;
        while start < order.len() {
            let p = order[start].0;
            let end = start + order[start..].iter().take_while(|x| x.0 == p).count();
            let group: Vec<WriteOp<'_>> = order[start..end].iter().map(|&(_, i)| ops[i]).collect();
            let part = &self.inner.parts[p as usize];
            let mut st = self.lock_with_room(p, write::inserts_needed(&group))?;
            let res = write::write_plain(&self.inner.ctx, part, &mut st, &group);
            let lsn = st.appended_lsn;
            let grow = st.index.load() > LOAD_GROW;
            drop(st);
            if grow {
                self.wake_background();
            }
            for (&(_, i), e) in order[start..end].iter().zip(res?) {
                existed[i] = e;
            }
            lsns.push((p, lsn));
            start = end;
        }
        if self.inner.ctx.opts.durability == Durability::Fsync {
            for (p, lsn) in lsns {
                self.inner.parts[p as usize].wait_durable(lsn)?;
            }
        }
        Ok(existed)
    }

    /// Locks partition `p` exclusively once its index has room for `inserts` more keys,
    /// growing the index first if needed (the readers keep being served meanwhile).
    fn lock_with_room(&self, p: u32, inserts: usize) -> Result<RwLockWriteGuard<'_, PartState>> {
        let part = &self.inner.parts[p as usize];
        loop {
            let st = part.state.write();
            if st.index.has_room(inserts) {
                return Ok(st);
            }
            drop(st);
            maintenance::run(&self.inner.ctx, part, Mode::Resize, inserts)?;
        }
    }

    /// Applies a compound batch all-or-nothing: preconditions are checked and every write is
    /// appended and indexed while all the partitions involved are locked, so readers see all
    /// of it or none, and a crash never leaves part of it (see docs/design.md).
    pub fn apply(&self, batch: &Batch) -> Result<BatchOutcome> {
        self.check_width(batch.len())?;
        let n_parts = self.inner.ctx.opts.partitions;
        let mut hashed = Vec::with_capacity(batch.len());
        for op in &batch.ops {
            check_key(&op.key)?;
            if let BatchAction::Put(v) = &op.action {
                self.check_value(v)?;
            }
            let h = KeyHash::of(&op.key);
            hashed.push((h, h.partition(n_parts)));
        }
        let mut involved: Vec<u32> = hashed.iter().map(|x| x.1).collect();
        involved.sort_unstable();
        involved.dedup();
        let slot_of = |p: u32| involved.binary_search(&p).expect("collected above");

        'retry: loop {
            let mut guards: Vec<RwLockWriteGuard<'_, PartState>> = involved
                .iter()
                .map(|&p| self.inner.parts[p as usize].state.write())
                .collect();
            // Room in every index for the puts.
            for (gi, &p) in involved.iter().enumerate() {
                let puts = batch
                    .ops
                    .iter()
                    .zip(&hashed)
                    .filter(|(op, h)| h.1 == p && matches!(op.action, BatchAction::Put(_)))
                    .count();
                if !guards[gi].index.has_room(puts) {
                    drop(guards);
                    maintenance::run(
                        &self.inner.ctx,
                        &self.inner.parts[p as usize],
                        Mode::Resize,
                        puts,
                    )?;
                    continue 'retry;
                }
            }
            // Preconditions, against the state before the batch.
            let needs_value = batch
                .ops
                .iter()
                .any(|op| op.condition.as_ref().is_some_and(batch::needs_value));
            let items: Vec<LookupKey<'_>> = batch
                .ops
                .iter()
                .zip(&hashed)
                .map(|(op, &(hash, p))| LookupKey {
                    state: slot_of(p),
                    key: &op.key,
                    hash,
                })
                .collect();
            let mut found = {
                let states: Vec<&PartState> = guards.iter().map(|g| &**g).collect();
                lookup::lookup(&self.inner.ctx, &states, &items, needs_value)
            };
            for (i, op) in batch.ops.iter().enumerate() {
                if let Some(cond) = &op.condition {
                    if let Some(e) = found[i].take_error() {
                        return Err(e);
                    }
                    let current = found[i].value();
                    if !batch::holds(cond, current.as_deref()) {
                        return Ok(BatchOutcome::ConditionFailed {
                            op: i,
                            condition: cond.clone(),
                        });
                    }
                }
            }
            write::check_found(&mut found)?;

            // Each partition's share of the writes.
            let seq = self.inner.ctx.alloc_seq();
            let mut shares: Vec<(usize, Vec<WriteOp<'_>>, Vec<Found>)> = Vec::new();
            for (gi, &p) in involved.iter().enumerate() {
                let mut ops = Vec::new();
                let mut f = Vec::new();
                for (i, op) in batch.ops.iter().enumerate() {
                    if hashed[i].1 != p {
                        continue;
                    }
                    let value = match &op.action {
                        BatchAction::Put(v) => Some(&v[..]),
                        BatchAction::Delete => None,
                        BatchAction::Check => continue,
                    };
                    ops.push(WriteOp {
                        key: &op.key,
                        hash: hashed[i].0,
                        value,
                    });
                    f.push(std::mem::replace(&mut found[i], Found::Absent));
                }
                if !ops.is_empty() {
                    shares.push((gi, ops, f));
                }
            }
            let inline = shares.len() == 1;
            let framing = Framing::Batch {
                seq,
                inline_commit: inline,
            };
            let runs: Vec<write::Run> = shares
                .iter()
                .map(|(_, ops, f)| write::encode(&self.inner.ctx, ops, f, framing))
                .collect();
            let writing: Vec<usize> = (0..shares.len()).filter(|&s| runs[s].members > 0).collect();
            if writing.is_empty() {
                return Ok(BatchOutcome::Applied);
            }
            if inline {
                let (gi, ops, f) = &shares[0];
                let part = &self.inner.parts[involved[*gi] as usize];
                let st = &mut guards[*gi];
                let (locs, res) = write::append_run(&self.inner.ctx, part, st, &runs[0], framing);
                res?;
                write::update_index(st, ops, f, &locs);
                st.counters.records += 1;
                st.counters.dead += 1; // the commit record
                let lsn = st.appended_lsn;
                drop(guards);
                if self.inner.ctx.opts.durability == Durability::Fsync {
                    part.wait_durable(lsn)?;
                }
                return Ok(BatchOutcome::Applied);
            }
            let mut all_locs = Vec::with_capacity(writing.len());
            let late_failure = self.write_parts(
                &involved,
                &mut guards,
                &shares,
                &runs,
                &writing,
                framing,
                &mut all_locs,
            )?;
            for (&s, locs) in writing.iter().zip(&all_locs) {
                let (gi, ops, f) = &shares[s];
                let st = &mut guards[*gi];
                write::update_index(st, ops, f, locs);
                st.counters.records += 1;
                st.counters.dead += 1;
            }
            return match late_failure {
                None => Ok(BatchOutcome::Applied),
                Some(e) => Err(e),
            };
        }
    }

    /// Multi-partition batch: every part (made durable as the mode requires), then every
    /// commit record. Space for a part and its commit record is reserved before anything is
    /// written, so once the first commit record is written the rest do not fail for space.
    /// `Err`: nothing was committed. `Ok(Some(e))`: committed, but a later step failed (the
    /// indexes must still be updated; the error goes to the caller).
    #[allow(clippy::too_many_arguments)]
    fn write_parts(
        &self,
        involved: &[u32],
        guards: &mut [RwLockWriteGuard<'_, PartState>],
        shares: &[(usize, Vec<WriteOp<'_>>, Vec<Found>)],
        runs: &[write::Run],
        writing: &[usize],
        framing: Framing,
        all_locs: &mut Vec<Vec<Option<u32>>>,
    ) -> Result<Option<Error>> {
        let ctx = &self.inner.ctx;
        let Framing::Batch { seq, .. } = framing else {
            unreachable!("write_parts writes batches")
        };
        let commit_len = format::record_len(0, 4) as u64;
        for &s in writing {
            let gi = shares[s].0;
            let part = &self.inner.parts[involved[gi] as usize];
            let st = &mut guards[gi];
            let need = runs[s].bytes.len() as u64 + commit_len;
            st.ensure_room(ctx, part.id, &part.dir, need)?;
            let end = st.appender.end();
            st.appender.segment.reserve(end, need)?;
        }
        for &s in writing {
            let gi = shares[s].0;
            let part = &self.inner.parts[involved[gi] as usize];
            let st = &mut guards[gi];
            let start = st.appender.end();
            let (locs, res) = write::append_run(ctx, part, st, &runs[s], framing);
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
        // From the first commit record written on, the batch is committed (replay completes
        // it in every partition), so the caller must apply it to the indexes even if a later
        // step fails; the space reservation above makes such a failure an I/O error, not a
        // full disk.
        let mut committed = false;
        let mut failure = None;
        for &s in writing {
            let st = &mut guards[shares[s].0];
            let start = st.appender.end();
            let mut buf = Vec::with_capacity(commit_len as usize);
            write::encode_commit(&mut buf, seq, runs[s].members);
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
                if let Err(e) = guards[shares[s].0].appender.segment.sync_data() {
                    failure.get_or_insert(e);
                }
            }
        }
        Ok(failure)
    }

    // ---- iteration and figures ----

    /// One page of a SCAN (Redis semantics): start with cursor 0, stop when it comes back 0.
    pub fn scan(&self, cursor: u64, pattern: Option<&[u8]>, count: usize) -> Result<ScanPage> {
        scan::scan(&self.inner.ctx, &self.inner.parts, cursor, pattern, count)
    }

    /// Number of live keys.
    pub fn len(&self) -> u64 {
        self.inner
            .parts
            .iter()
            .map(|p| p.state.read().index.live() as u64)
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn stats(&self) -> Stats {
        use std::os::unix::fs::MetadataExt;
        let mut s = Stats {
            partitions: self.inner.ctx.opts.partitions,
            ..Default::default()
        };
        for part in &self.inner.parts {
            let st = part.state.read();
            s.keys += st.index.live() as u64;
            s.index_bytes += st.index.bytes() as u64;
            s.index_capacity += st.index.capacity() as u64;
            s.segments += st.segs.ordered.len() as u64;
            s.records += st.counters.records;
            s.dead_records += st.counters.dead;
            for seg in &st.segs.ordered {
                s.disk_bytes += seg.file().metadata().map(|m| m.blocks() * 512).unwrap_or(0);
            }
        }
        s.garbage_ratio = if s.records == 0 {
            0.0
        } else {
            s.dead_records as f64 / s.records as f64
        };
        s.last_background_error = self.inner.last_background_error.lock().clone();
        s.maintenance_runs = self.inner.ctx.maintenance_runs.load(Ordering::Relaxed);
        s
    }

    /// Verifies every record and every index entry; see [`CheckReport`].
    pub fn check(&self) -> Result<crate::CheckReport> {
        let mut report = crate::CheckReport::default();
        for part in &self.inner.parts {
            crate::check::check_partition(part, &mut report)?;
        }
        Ok(report)
    }

    // ---- durability and maintenance ----

    /// Writes buffered records to the OS and fdatasyncs every partition's log.
    pub fn flush(&self) -> Result<()> {
        for part in &self.inner.parts {
            let seg = {
                let mut st = part.state.write();
                st.appender.flush()?;
                st.appender.segment.clone()
            };
            seg.sync_data()?;
        }
        Ok(())
    }

    /// Writes the index checkpoint of every partition changed since its last one (the others'
    /// checkpoints on disk are current).
    pub fn checkpoint(&self) -> Result<()> {
        for part in &self.inner.parts {
            if part.state.read().dirty {
                maintenance::save_checkpoint(&self.inner.ctx, part)?;
            }
        }
        Ok(())
    }

    /// Compacts every partition now (reads and writes go on meanwhile).
    pub fn compact(&self) -> Result<MaintenanceReport> {
        let mut total = MaintenanceReport::default();
        for part in &self.inner.parts {
            let r = maintenance::run(&self.inner.ctx, part, Mode::Compact, 0)?;
            total.segments_compacted += r.segments_compacted;
            total.segments_written += r.segments_written;
            total.records_copied += r.records_copied;
            total.records_dropped += r.records_dropped;
            total.index_capacity_before += r.index_capacity_before;
            total.index_capacity_after += r.index_capacity_after;
        }
        Ok(total)
    }

    /// Flushes, checkpoints and releases the store.
    pub fn close(mut self) -> Result<()> {
        self.stop_background();
        let res = self.flush().and_then(|()| self.checkpoint());
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
        if let Some(h) = self.background.take() {
            *self.inner.wake.lock() = true;
            self.inner.wake_cv.notify_all();
            let _ = h.join();
        }
    }

    fn wake_background(&self) {
        self.inner.wake_cv.notify_all();
    }

    fn check_width(&self, n: usize) -> Result<()> {
        let max = self.inner.ctx.opts.vector_width_max;
        if n > max {
            return Err(Error::VectorTooWide { len: n, max });
        }
        Ok(())
    }

    fn check_value(&self, v: &[u8]) -> Result<()> {
        let max = self.inner.ctx.opts.value_len_max;
        if v.len() > max {
            return Err(Error::ValueTooLarge { len: v.len(), max });
        }
        Ok(())
    }
}

fn check_key(k: &[u8]) -> Result<()> {
    if k.is_empty() || k.len() > KEY_LEN_MAX {
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

/// Recovers every partition, on as many threads as there are cores (partitions are
/// independent until their batches are resolved). Returns them in partition order.
fn recover_partitions(
    ctx: &StoreCtx,
    dir: &Path,
    progress: &mut (dyn FnMut(RecoveryProgress) + Send),
) -> Result<(Vec<recovery::Recovered>, RecoveryReport)> {
    let n = ctx.opts.partitions as usize;
    let threads = std::thread::available_parallelism()
        .map_or(1, |t| t.get())
        .clamp(1, n);
    let progress = Mutex::new(progress);
    let results: Vec<Result<Vec<(u32, recovery::Recovered, RecoveryReport)>>> =
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let progress = &progress;
                    scope.spawn(move || {
                        let mut done = Vec::new();
                        for p in (t..n).step_by(threads).map(|p| p as u32) {
                            let mut report = RecoveryReport::default();
                            let mut prog = |x: RecoveryProgress| (progress.lock())(x);
                            let rec = recovery::recover_partition(
                                ctx,
                                p,
                                &partition_dir(dir, p),
                                &mut report,
                                &mut prog,
                            )?;
                            done.push((p, rec, report));
                        }
                        Ok(done)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                })
                .collect()
        });
    let mut all = Vec::with_capacity(n);
    for r in results {
        all.extend(r?);
    }
    all.sort_by_key(|(p, ..)| *p);
    let mut report = RecoveryReport::default();
    let mut recovered = Vec::with_capacity(n);
    for (_, rec, r) in all {
        report.merge(r);
        recovered.push(rec);
    }
    Ok((recovered, report))
}

/// The maintenance thread: flushes `none`-mode buffers, grows or shrinks indexes, compacts
/// partitions with enough garbage, and writes periodic checkpoints.
fn background_loop(inner: &Inner) {
    let ctx = &inner.ctx;
    let tick = Duration::from_millis(ctx.opts.flush_interval_ms.clamp(1, BACKGROUND_TICK_MS_MAX));
    let mut last_flush = Instant::now();
    let mut last_checkpoint = Instant::now();
    loop {
        {
            let mut stop = inner.wake.lock();
            if *stop {
                return;
            }
            inner.wake_cv.wait_for(&mut stop, tick);
            if *stop {
                return;
            }
        }
        let note = |r: Result<()>| {
            if let Err(e) = r {
                *inner.last_background_error.lock() = Some(e.to_string());
            }
        };
        if ctx.opts.durability == Durability::None
            && last_flush.elapsed() >= Duration::from_millis(ctx.opts.flush_interval_ms)
        {
            for part in &inner.parts {
                note(part.state.write().appender.flush());
            }
            last_flush = Instant::now();
        }
        for part in &inner.parts {
            let (resize, compact) = {
                let st = part.state.read();
                (
                    maintenance::wants_resize(&st),
                    maintenance::wants_compaction(ctx, &st),
                )
            };
            if compact {
                note(maintenance::run(ctx, part, Mode::Compact, 0).map(|_| ()));
            } else if resize {
                note(maintenance::run(ctx, part, Mode::Resize, 0).map(|_| ()));
            }
        }
        if ctx.opts.checkpoint_interval_ms > 0
            && last_checkpoint.elapsed() >= Duration::from_millis(ctx.opts.checkpoint_interval_ms)
        {
            for part in &inner.parts {
                if part.state.read().dirty {
                    note(maintenance::save_checkpoint(ctx, part));
                }
            }
            last_checkpoint = Instant::now();
        }
    }
}
