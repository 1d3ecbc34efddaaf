//! Index checkpoints: one file per partition holding its index arrays, counters and the log
//! position they reflect, so reopening replays only the log after it.
//!
//! ```text
//! checkpoint := magic[8] "QUIVCKP2" | version u32 (3) | partition u32 | slot_lo u16 | slot_hi u16
//!             | capacity u64 | records u64
//!             | dead u64 | max_seq u64 | end_file_id u64 | end_offset u64 | segments u32
//!             | (file_id u64 | slot u32){segments} | frags u16{capacity} | locs u32{capacity}
//!             | expiring u64 | (hash u64 | expire_at u64 | namespace u32 | slot u16){expiring}
//!             | namespaces u32
//!             | (namespace u32 | live_keys u64 | slot_keys u32{slots}){namespaces}
//!             | crc32c u32 (of everything before it)
//! ```
//! `slots` is the number of slots of the partition's range (`slot_hi - slot_lo + 1`), or 0 in a
//! store of format 1 (keys by hash: no per-slot counts).
//! A checkpoint is valid only if the partition still has exactly the segments it lists (up to
//! the one holding `end`); compaction changes them, and the stale checkpoint is then ignored.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use parking_lot::RwLockWriteGuard;

use crate::error::Result;
use crate::expiry::Expiries;
use crate::index::Index;
use crate::key_counts::NsKeys;
use crate::layout::CHECKPOINT_FILE;
use crate::log::segment::{replace_file, sync_dir, Segment};
use crate::options::Durability;
use crate::partition::{Counters, Partition, SegmentSet, StoreCtx};
use crate::slot::SlotRange;
use crate::stalls::{Pacer, PAGE_STEP_BYTES};

const MAGIC: [u8; 8] = *b"QUIVCKP2";
/// 3: expiry entries carry their namespace; live keys per namespace follow them. 4: expiry
/// entries carry their key's hash slot, and each namespace its live keys per slot. (A
/// checkpoint of an older version is not used: opening replays the whole log.)
const VERSION: u32 = 4;
const CHECKPOINT_TMP_FILE: &str = "index.ckpt.tmp";
/// hash u64 | expire_at u64 | namespace u32 | slot u16
const EXPIRY_ENTRY_LEN: usize = 22;

/// A loaded checkpoint.
pub(crate) struct Checkpoint {
    pub index: Index,
    pub counters: Counters,
    pub expiries: Expiries,
    pub ns_keys: NsKeys,
    pub max_seq: u64,
    /// The log position the checkpoint reflects: the segment (by its place in the
    /// partition's log order) and the offset in it.
    pub end_segment: usize,
    pub end_offset: u64,
}

/// What a checkpoint records besides the index.
pub(crate) struct CheckpointMeta<'a> {
    pub partition: u32,
    /// The slot range the partition owned (all slots in a store of format 1).
    pub range: SlotRange,
    pub counters: Counters,
    pub max_seq: u64,
    pub end_file_id: u64,
    pub end_offset: u64,
    /// (file_id, slot) of every segment up to and including the end one, in log order.
    pub segments: &'a [(u64, u32)],
}

pub fn checkpoint_path(dir: &Path) -> PathBuf {
    dir.join(CHECKPOINT_FILE)
}

/// Writes the partition's checkpoint, without making readers wait for a disk sync.
///
/// The invariant (what makes a checkpoint usable): its index and counters are exactly what
/// replaying the log up to its position `(end_file_id, end_offset)` produces, and that prefix
/// of the log is durable before the checkpoint can be found. Opening loads the index and
/// replays the log from that position on. Replay is not idempotent — a record applied twice
/// counts twice in the counters, and a delete already reflected by the index would be
/// replayed onto it anyway — so the index must reflect no record past the position, and every
/// record before it. Hence the steps:
///
/// 1. Under the partition's exclusive lock: write out the tail buffer (`none` mode), so the
///    log end is in the file. Then the lock is *downgraded* to shared, with no writer in
///    between: the log end, the segment list, the counters and the index are read together
///    and the index is encoded. Writers append and index under the exclusive lock only, so
///    they cannot move any of these while the shared lock is held; readers go on meanwhile.
/// 2. Without any lock: fdatasync every segment up to the position (more may have been
///    appended since; syncing it too is harmless), so the checkpoint never refers to records
///    a power loss could take away.
/// 3. Without any lock: the file is written through a temporary file, fsync, rename and
///    directory fsync. A crash at any step leaves the old checkpoint or the new one, each a
///    valid description of a durable prefix of the log; replay covers the rest.
///
/// A compaction that swaps segments after step 1 makes this checkpoint list segments that
/// are gone: opening ignores it (see [`load`]), and the compaction saves its own afterwards.
///
/// Outside the lock the work goes a step at a time, `pacer` sleeping between steps (a
/// background save): touching the buffer's pages, the checksum, writing out the log's pages
/// and the file's. Done at once, a save of a partition of a million keys was tens of ms of
/// work on the core of a serving thread, much of it in system calls that a kernel without
/// preemption does not interrupt (BENCHMARKS §53).
pub(crate) fn save(ctx: &StoreCtx, part: &Partition, pacer: &mut Pacer) -> Result<()> {
    // Saves come from the background thread, from maintenance and on demand. Two at once
    // would share the temporary file, or let an older snapshot replace a newer one: each
    // partition's saves are serialised, from the snapshot to the rename. (Taken before the
    // partition's state lock, never while holding it.)
    let _saving = part.checkpointing.lock();
    // The buffer is allocated and its pages touched before the lock: the encoded index is 6
    // bytes a slot (megabytes), and faulting its pages in under the lock cost more than the
    // copy (checkpoint holds of up to 9.5 ms under writes before; none over 2 ms since).
    let len = {
        let st = part.state.read();
        encoded_len(st.segs.ordered.len(), &st.index, &st.expiries, &st.ns_keys)
    };
    let mut bytes = prefaulted(len, pacer);
    let segments = {
        let mut st = part.state.write();
        // Writers wait until the index is encoded (the guard is downgraded, not let go).
        let _stall = ctx.stalls.hold("checkpoint");
        // A partition a merge retired is being deleted: nothing of it is saved (the merge
        // waits for a save already past this point before it deletes the directory).
        if st.retired {
            return Ok(());
        }
        // A partition that refuses writes may have unknown bytes past its end, or an
        // unsynced log: nothing of it is to be made to look settled.
        st.writable()?;
        if st.index.has_spill() {
            // The format holds one table: the resize that folds the spill in comes first
            // (`dirty` stays set, so a later save takes the partition). The last checkpoint
            // stays valid meanwhile: it describes a prefix of the log.
            return Ok(());
        }
        st.appender.flush()?;
        // Cleared now: a write after the snapshot sets it again. Set back on failure below.
        st.dirty = false;
        let st = RwLockWriteGuard::downgrade(st);
        let segments: Vec<Arc<Segment>> = st.segs.ordered.clone();
        let list: Vec<(u64, u32)> = segments.iter().map(|s| (s.file_id(), s.slot())).collect();
        let meta = CheckpointMeta {
            partition: part.id,
            range: st.range.unwrap_or(SlotRange::ALL),
            counters: st.counters,
            // Sequence numbers are store-wide: any value at least the partition's largest
            // will do.
            max_seq: ctx.next_seq.load(Ordering::Relaxed),
            end_file_id: st.segs.active().file_id(),
            end_offset: st.appender.end(),
            segments: &list,
        };
        encode_unsealed(&mut bytes, &meta, &st.index, &st.expiries, &st.ns_keys);
        segments
    };
    append_checksum(&mut bytes, pacer);
    // Batch parts elsewhere whose commit record this checkpoint hides from replay are sealed
    // (see `seal`), before the checkpoint exists.
    let written = crate::seal::seal_parts(ctx)
        .and_then(|()| {
            segments.iter().try_for_each(|seg| {
                write_back_log(ctx, part, seg, pacer);
                part.sync_segment(seg)
            })
        })
        .and_then(|()| write(&part.dir, &bytes, pacer));
    if written.is_err() {
        // Not saved after all: the background thread must try again.
        part.state.write().dirty = true;
    }
    written
}

/// The length of a checkpoint of these parts.
fn encoded_len(segments: usize, index: &Index, expiries: &Expiries, ns_keys: &NsKeys) -> usize {
    96 + segments * 12
        + index.capacity() * 6
        + expiries.len() * EXPIRY_ENTRY_LEN
        + ns_keys.len() * (12 + ns_keys.slots() * 4)
}

/// An empty buffer of capacity `len` whose pages are already mapped, faulted in a step at a
/// time.
fn prefaulted(len: usize, pacer: &mut Pacer) -> Vec<u8> {
    let mut b = vec![0u8; len];
    crate::stalls::fault_in(&mut b, &mut || {
        pacer.step_done();
    });
    b.clear();
    b
}

/// Starts writing out the dirty pages of a segment the checkpoint covers, a step at a time
/// (`Segment::write_back`), so that the fdatasync that follows has little left to do. The
/// fdatasync takes the whole file, and the active segment's appends go on meanwhile: it is
/// written back up to where they are, twice (the second pass takes what came during the
/// first). A sealed segment is written back whole (past its end lie holes), the active one
/// not past its end (there lie the zero pages faulted in ahead of it). Not in `fsync` mode,
/// whose commits leave little unsynced, and where a page may wait for another file's sync.
fn write_back_log(ctx: &StoreCtx, part: &Partition, seg: &Arc<Segment>, pacer: &mut Pacer) {
    if ctx.opts.durability == Durability::Fsync {
        return;
    }
    for _ in 0..2 {
        let active_end = {
            let st = part.state.read();
            Arc::ptr_eq(&st.appender.segment, seg).then(|| st.appender.end())
        };
        seg.write_back(active_end.unwrap_or(seg.header.segment_bytes), || {
            pacer.step_done();
        });
        if active_end.is_none() {
            return; // sealed: written back whole at once
        }
    }
}

/// Serialises a checkpoint into `b` but for its checksum (`append_checksum`, which needs no
/// lock). Call with the partition locked, so the index is stable.
fn encode_unsealed(
    b: &mut Vec<u8>,
    meta: &CheckpointMeta<'_>,
    index: &Index,
    expiries: &Expiries,
    ns_keys: &NsKeys,
) {
    let cap = index.capacity();
    b.extend_from_slice(&MAGIC);
    b.extend_from_slice(&VERSION.to_le_bytes());
    b.extend_from_slice(&meta.partition.to_le_bytes());
    b.extend_from_slice(&meta.range.lo.to_le_bytes());
    b.extend_from_slice(&meta.range.hi.to_le_bytes());
    b.extend_from_slice(&(cap as u64).to_le_bytes());
    b.extend_from_slice(&meta.counters.records.to_le_bytes());
    b.extend_from_slice(&meta.counters.dead.to_le_bytes());
    b.extend_from_slice(&meta.max_seq.to_le_bytes());
    b.extend_from_slice(&meta.end_file_id.to_le_bytes());
    b.extend_from_slice(&meta.end_offset.to_le_bytes());
    b.extend_from_slice(&(meta.segments.len() as u32).to_le_bytes());
    for &(id, slot) in meta.segments {
        b.extend_from_slice(&id.to_le_bytes());
        b.extend_from_slice(&slot.to_le_bytes());
    }
    extend_le(b, index.frags(), u16::to_le_bytes);
    extend_le(b, index.locs(), u32::to_le_bytes);
    b.extend_from_slice(&(expiries.len() as u64).to_le_bytes());
    for (hash, at, ns, slot) in expiries.iter() {
        b.extend_from_slice(&hash.to_le_bytes());
        b.extend_from_slice(&at.to_le_bytes());
        b.extend_from_slice(&ns.to_le_bytes());
        b.extend_from_slice(&slot.to_le_bytes());
    }
    b.extend_from_slice(&(ns_keys.len() as u32).to_le_bytes());
    for (ns, n, per_slot) in ns_keys.iter() {
        b.extend_from_slice(&ns.to_le_bytes());
        b.extend_from_slice(&n.to_le_bytes());
        extend_le(b, per_slot, u32::to_le_bytes);
    }
}

/// Appends the checksum of everything before it, computed a step at a time.
fn append_checksum(b: &mut Vec<u8>, pacer: &mut Pacer) {
    let mut crc = 0;
    for step in b.chunks(PAGE_STEP_BYTES as usize) {
        crc = crate::crc::crc32c_append(crc, step);
        pacer.step_done();
    }
    b.extend_from_slice(&crc.to_le_bytes());
}

/// Appends `items` little-endian, in bulk: the index arrays are millions of entries, copied
/// under the partition's lock.
fn extend_le<T: Copy, const N: usize>(b: &mut Vec<u8>, items: &[T], to_le: fn(T) -> [u8; N]) {
    debug_assert_eq!(std::mem::size_of::<T>(), N);
    if cfg!(target_endian = "little") {
        // SAFETY: `T` is a plain integer of `N` bytes (`to_le` says so), whose in-memory
        // bytes on a little-endian machine are its little-endian encoding; the slice covers
        // exactly `items`.
        let raw =
            unsafe { std::slice::from_raw_parts(items.as_ptr().cast::<u8>(), items.len() * N) };
        b.extend_from_slice(raw);
    } else {
        for &x in items {
            b.extend_from_slice(&to_le(x));
        }
    }
}

/// Writes an encoded checkpoint durably: temp file, fsync, rename, fsync directory.
pub(crate) fn write(dir: &Path, bytes: &[u8], pacer: &mut Pacer) -> Result<()> {
    let path = checkpoint_path(dir);
    replace_file(
        &dir.join(CHECKPOINT_TMP_FILE),
        &path,
        bytes,
        "write checkpoint",
        || {
            pacer.step_done();
        },
    )?;
    sync_dir(dir)
}

/// Loads the partition's checkpoint if there is one and it is intact and matches `segs`.
/// `Err(reason)` says why a present checkpoint was not used.
pub(crate) fn load(
    dir: &Path,
    partition: u32,
    range: Option<SlotRange>,
    segs: &SegmentSet,
) -> std::result::Result<Option<Checkpoint>, String> {
    let path = checkpoint_path(dir);
    let b = match fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("unreadable: {e}")),
    };
    let present: Vec<(u64, u32)> = segs
        .ordered
        .iter()
        .map(|s| (s.file_id(), s.slot()))
        .collect();
    decode(&b, partition, range, &present).map(Some)
}

/// A checkpoint file's bytes `b`, checked against the partition it is for and its segments
/// now (`present`: (file id, slot) in log order). Any damage is an error naming it; nothing
/// in `b` can make this panic or allocate more than `b`'s length allows.
pub(crate) fn decode(
    b: &[u8],
    partition: u32,
    range: Option<SlotRange>,
    present: &[(u64, u32)],
) -> std::result::Result<Checkpoint, String> {
    let mut r = Reader { b, at: 0 };
    if b.len() < 72 || r.bytes(8) != MAGIC {
        return Err("bad magic".into());
    }
    let body = &b[..b.len() - 4];
    let crc = Reader { b, at: b.len() - 4 }.u32();
    if crate::crc::crc32c(body) != crc {
        return Err("checksum mismatch".into());
    }
    if r.u32() != VERSION {
        return Err("unsupported version".into());
    }
    if r.u32() != partition {
        return Err("belongs to another partition".into());
    }
    // Taken before the partition's range changed (a split or merge): its index may hold keys
    // the partition no longer owns, or lack some it now does.
    let (lo, hi) = (r.u16(), r.u16());
    if SlotRange::new(lo, hi) != Some(range.unwrap_or(SlotRange::ALL)) {
        return Err("taken for another slot range".into());
    }
    let cap = r.u64();
    let counters = Counters {
        records: r.u64(),
        dead: r.u64(),
    };
    let max_seq = r.u64();
    let end_file_id = r.u64();
    let end_offset = r.u64();
    let n = r.u32() as usize;
    // The capacity comes from the file: bounded before any arithmetic on it, so a damaged
    // one cannot overflow the size computed from it.
    if cap == 0 || cap > u64::from(u32::MAX) {
        return Err("length does not match its header".into());
    }
    let cap = cap as usize;
    let fixed = 72 + n * 12 + cap * 6;
    if body.len() < fixed + 8 {
        return Err("length does not match its header".into());
    }
    let m = Reader { b: body, at: fixed }.u64() as usize;
    let ns_at = m
        .checked_mul(EXPIRY_ENTRY_LEN)
        .and_then(|e| (fixed + 8).checked_add(e))
        .filter(|&at| at.checked_add(4).is_some_and(|end| end <= body.len()))
        .ok_or("length does not match its header")?;
    let k = Reader { b: body, at: ns_at }.u32() as usize;
    let slots = range.map_or(0, |r| r.len() as usize);
    if Some(body.len() - ns_at - 4) != k.checked_mul(12 + slots * 4) {
        return Err("length does not match its header".into());
    }
    let listed: Vec<(u64, u32)> = (0..n).map(|_| (r.u64(), r.u32())).collect();
    if listed[..] != present[..n.min(present.len())]
        || listed.last().map(|l| l.0) != Some(end_file_id)
    {
        return Err("segments changed since the checkpoint".into());
    }
    let mut frags: Vec<u16> = crate::index::zeroed_huge(cap);
    for f in frags.iter_mut() {
        *f = r.u16();
    }
    let mut locs: Vec<u32> = crate::index::zeroed_huge(cap);
    for l in locs.iter_mut() {
        *l = r.u32();
    }
    r.u64();
    let mut expiries = Expiries::default();
    for _ in 0..m {
        let (hash, at, ns, slot) = (r.u64(), r.u64(), r.u32(), r.u16());
        expiries.set(hash, ns, slot, Some(at));
    }
    r.u32();
    let mut ns_keys = NsKeys::for_range(range);
    for _ in 0..k {
        let (ns, n) = (r.u32(), r.u64());
        let per_slot = (0..slots).map(|_| r.u32()).collect();
        // The length was checked against the range above.
        ns_keys.load(ns, n, per_slot);
    }
    Ok(Checkpoint {
        index: Index::from_parts(frags, locs),
        counters,
        expiries,
        ns_keys,
        max_seq,
        // The listed segments are the partition's first `n`, the last of them the end one.
        end_segment: n - 1,
        end_offset,
    })
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn bytes(&mut self, n: usize) -> &'a [u8] {
        let s = &self.b[self.at..self.at + n];
        self.at += n;
        s
    }
    fn array<const N: usize>(&mut self) -> [u8; N] {
        let mut a = [0u8; N];
        a.copy_from_slice(self.bytes(N));
        a
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes(self.array())
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.array())
    }
    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.array())
    }
}
