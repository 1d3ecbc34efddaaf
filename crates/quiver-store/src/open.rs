//! Opening a store: lock the directory, read its layout, recover every partition (in
//! parallel), refuse damage unless told to salvage, resolve multi-partition batches (decided
//! by `recovery::resolve_batches`, missing commit records written by `commit`), take the disk
//! reserve, and checkpoint what had to be replayed.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use crate::checkpoint;
use crate::error::{Error, Result};
use crate::inner::{Background, StoreInner, Table};
use crate::io;
use crate::lockfile::DirLock;
use crate::log::ahead::PagesAhead;
use crate::log::format::{SegmentOrder, SEGMENT_HEADER_LEN};
use crate::meta::{self, Layout};
use crate::options::{DamagePolicy, Durability, Options};
use crate::partition::{new_segment, partition_dir, PartState, Partition, StateLock, StoreCtx};
use crate::recovery::{self, RecoveryProgress, RecoveryReport};
use crate::reserve::DiskReserve;
use crate::seal;
use crate::stalls::Pacer;

/// First segment of a new partition.
const FIRST_ORDER: SegmentOrder = SegmentOrder { major: 1, minor: 0 };

pub(crate) fn open(
    dir: &Path,
    mut opts: Options,
    progress: &mut (dyn FnMut(RecoveryProgress) + Send),
) -> Result<(Arc<StoreInner>, RecoveryReport)> {
    opts.validate()?;
    let dir = dir.to_path_buf();
    let read_only = opts.read_only;
    if read_only {
        if !crate::layout::is_store(&dir) {
            return Err(Error::Incompatible {
                path: dir,
                reason: "no Quiver store here (opening read-only never creates one)".into(),
            });
        }
    } else {
        std::fs::create_dir_all(&dir).map_err(|e| Error::io("create store directory", &dir, e))?;
    }
    let lock = DirLock::acquire(&dir)?;
    let layout = meta::load_or_create(&dir, &mut opts)?;
    let pages_ahead = match opts.durability == Durability::Os && !read_only {
        true => Some(Arc::new(PagesAhead::start().map_err(|e| {
            Error::io("spawn the thread faulting in log pages", &dir, e)
        })?)),
        false => None,
    };
    let ctx = StoreCtx {
        id: crate::partition::new_store_id(),
        backend: io::backend(opts.backend)?,
        tuning: crate::tuning::Tuning::of(&opts),
        opts,
        next_file_id: AtomicU64::new(1),
        next_seq: AtomicU64::new(1),
        value_len_estimate: AtomicUsize::new(64),
        maintenance_runs: AtomicU64::new(0),
        compaction_copied: AtomicU64::new(0),
        compaction_dropped: AtomicU64::new(0),
        stalls: Default::default(),
        expired: Default::default(),
        space_short: Arc::new(AtomicBool::new(false)),
        unsealed: Mutex::new(Vec::new()),
        pages_ahead,
    };
    let (mut recovered, mut report) = recover_partitions(&ctx, &dir, &layout, progress)?;
    if ctx.opts.on_damage == DamagePolicy::Refuse && !report.damage.is_empty() {
        return Err(Error::Damaged {
            places: report.damage,
        });
    }
    let max_seq = recovered
        .iter()
        .map(|r| r.builder.max_seq)
        .max()
        .unwrap_or(0);
    let max_file = recovered.iter().map(|r| r.max_file_id).max().unwrap_or(0);
    ctx.next_seq.store(max_seq + 1, Ordering::Relaxed);
    ctx.next_file_id.store(max_file + 1, Ordering::Relaxed);

    // A batch is committed if any partition holds its commit record.
    recovery::resolve_batches(&mut recovered, &mut report, read_only)?;
    if !read_only && ctx.opts.durability == Durability::Fsync {
        sync_commit_records(&recovered)?;
    }
    let mut parts = Vec::with_capacity(recovered.len());
    for (pos, rec) in recovered.into_iter().enumerate() {
        let p = rec.partition;
        let pdir = partition_dir(&dir, p);
        let clean = rec.clean && !rec.segs.ordered.is_empty();
        let b = rec.builder;
        let mut segs = rec.segs;
        if segs.ordered.is_empty() {
            if read_only {
                return Err(Error::Incompatible {
                    path: pdir,
                    reason: "partition has no segment (opening read-only never creates one)".into(),
                });
            }
            segs.push(Arc::new(new_segment(&ctx, p, &pdir, 0, FIRST_ORDER)?));
        }
        let end = rec.end_offset.unwrap_or(SEGMENT_HEADER_LEN as u64);
        let appender = ctx.log_appender(segs.active().clone(), end);
        let mut st = PartState {
            index: b.index,
            segs,
            appender,
            counters: b.counters,
            expiries: b.expiries,
            ns_keys: b.ns_keys,
            dbs: layout.dbs.clone(),
            range: layout.partitioner.range(pos),
            retired: false,
            merging: false,
            failed: None,
            appended_lsn: 0,
            dirty: !clean,
        };
        // Batches applied by `resolve_batches` in memory; their commit records make them so
        // on disk too. (Read-only: the next read-write opening writes them.)
        for &(seq, members) in rec.missing_commits.iter().filter(|_| !read_only) {
            seal::append_commit_record(&ctx, p, &pdir, &mut st, seq, members)?;
        }
        if !read_only {
            st.appender.flush()?;
        }
        parts.push(Arc::new(Partition {
            id: p,
            dir: pdir,
            state: StateLock::new(st),
            commit: Default::default(),
            maintenance: Mutex::new(Default::default()),
            room_wanted: AtomicUsize::new(0),
            resizes: AtomicU64::new(0),
            checkpointing: Mutex::new(()),
            exports: AtomicUsize::new(0),
            unsealed: AtomicBool::new(false),
            locks: Default::default(),
        }));
    }

    let reserve = if read_only {
        DiskReserve::none(&dir, ctx.space_short.clone())
    } else {
        DiskReserve::open(&dir, ctx.opts.disk_reserve_bytes, ctx.space_short.clone())?
    };
    if !read_only {
        remove_unlisted_partitions(&dir, &layout.ids)?;
    }
    let next_part_id = layout.ids.iter().max().map_or(0, |m| m + 1);
    let inner = Arc::new(StoreInner {
        ctx,
        table: RwLock::new(Arc::new(Table {
            partitioner: layout.partitioner,
            parts,
            dbs: layout.dbs,
        })),
        next_part_id: AtomicU32::new(next_part_id),
        layout_change: Mutex::new(()),
        dir,
        _lock: lock,
        closed: AtomicBool::new(false),
        reserve,
        background: Background::new(),
    });
    // Checkpoint what had to be rebuilt or replayed, so the next open is fast. Only an
    // optimisation: on a full disk the store opens anyway (the log holds everything).
    if !read_only {
        for part in inner.table().parts.iter().filter(|p| p.state.read().dirty) {
            match checkpoint::save(&inner.ctx, part, &mut Pacer::new(None)) {
                Err(e) if e.is_no_space() => inner.background.note(&e),
                r => r?,
            }
        }
    }
    Ok((inner, report))
}

/// Recovers every partition, on as many threads as there are cores (partitions are
/// independent until their batches are resolved). Returns them in partition order.
fn recover_partitions(
    ctx: &StoreCtx,
    dir: &Path,
    layout: &Layout,
    progress: &mut (dyn FnMut(RecoveryProgress) + Send),
) -> Result<(Vec<recovery::Recovered>, RecoveryReport)> {
    let n = layout.ids.len();
    let threads = std::thread::available_parallelism()
        .map_or(1, |t| t.get())
        .clamp(1, n);
    let progress = Mutex::new(progress);
    let results: Vec<Result<Vec<(usize, recovery::Recovered, RecoveryReport)>>> =
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let progress = &progress;
                    scope.spawn(move || {
                        let mut done = Vec::new();
                        for pos in (t..n).step_by(threads) {
                            let mut report = RecoveryReport::default();
                            let mut prog = |x: RecoveryProgress| (progress.lock())(x);
                            let id = layout.ids[pos];
                            let rec = recovery::recover_partition(
                                ctx,
                                id,
                                layout.partitioner.range(pos),
                                &layout.dbs,
                                &partition_dir(dir, id),
                                &mut report,
                                &mut prog,
                            )?;
                            done.push((pos, rec, report));
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

/// Removes partition directories `QUIVER` does not list: what a split or merge that did not
/// reach its commit (the rename of `QUIVER`) was building, or what one that did left to
/// delete (the partitions it replaced).
fn remove_unlisted_partitions(dir: &Path, ids: &[u32]) -> Result<()> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io("list store directory", dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io("list store directory", dir, e))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if !crate::layout::is_partition_dir_name(name) {
            continue;
        }
        let listed = name[1..].parse::<u32>().is_ok_and(|id| ids.contains(&id));
        if !listed {
            let path = entry.path();
            std::fs::remove_dir_all(&path)
                .map_err(|e| Error::io("remove an unlisted partition", &path, e))?;
        }
    }
    crate::log::segment::sync_dir(dir)
}

/// `fsync` mode, before opening writes the commit records a crash kept from being written
/// (`missing_commits`): the commit records found elsewhere are made durable first. The crash
/// may have been a process's, leaving them in the page cache only; a written commit record
/// makes its part committed on its own, and must not reach the disk before the proof it
/// repeats (see `commit::commit_record_first`). Every segment is synced, not only the last
/// ones: the process may have run in `os` mode, which does not sync a segment it seals
/// (a segment with nothing unsynced costs little).
fn sync_commit_records(recovered: &[recovery::Recovered]) -> Result<()> {
    if recovered.iter().all(|r| r.missing_commits.is_empty()) {
        return Ok(());
    }
    recovered
        .iter()
        .flat_map(|r| r.segs.ordered.iter())
        .try_for_each(|seg| seg.sync_data())
}
