//! A segment file: one piece of a partition's append-only log.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::faults::{self, FileOp};
use crate::log::format::{SegmentHeader, SEGMENT_HEADER_LEN};
use crate::stalls::PAGE_STEP_BYTES;

/// File-name suffix of a live segment.
pub const SEGMENT_SUFFIX: &str = ".seg";
/// File-name suffix of a compaction output that has not been committed yet.
pub const SEGMENT_TMP_SUFFIX: &str = ".seg.tmp";

/// A segment file and the handles the read backends use on it. Shared by `Arc`: a reader that
/// looked a location up keeps the file (and its mapping) alive even if compaction retires it.
pub struct Segment {
    pub header: SegmentHeader,
    pub path: PathBuf,
    file: File,
    /// Mapping of the whole segment capacity (mmap backend), made on first use, owned by a
    /// `Bytes` so reads hand out slices of it without copying. A value slice keeps the mapping
    /// alive on its own, even after the segment is retired and its file deleted.
    map: OnceLock<ReadMap>,
    /// A second descriptor opened with O_DIRECT (io_uring backend), made on first use; `None`
    /// remembers that the file system refused O_DIRECT (EINVAL), so it is not asked again.
    direct: OnceLock<Option<File>>,
    /// Records appended to the segment, and records of it that died (overwritten, deleted,
    /// tombstones, commit records): what compaction weighs ranges of the log by. Known
    /// (`counted`) for a segment this process created; one opened from disk has seen only the
    /// deaths since (compaction then takes the whole log, whose outputs are counted).
    records: AtomicU64,
    dead: AtomicU64,
    counted: AtomicBool,
    /// Why an fdatasync of this file failed, once one has: what was written to it may never
    /// reach the disk (the kernel may have dropped the dirty pages and reported it once), so
    /// no later fdatasync of it is trusted — `sync_data` refuses without trying (PostgreSQL's
    /// "fsyncgate"). Reopening the store starts again from what is on disk.
    sync_failed: OnceLock<String>,
    /// What must be durable before this file's next fdatasync (`fsync` mode): the commit
    /// records, in other partitions, of batches whose BatchEnd parts this file holds (see
    /// `commit::commit_record_first`). Replay takes a part followed by any record as
    /// committed, so no record after a part may reach the disk before its batch's commit
    /// record does. Held for the whole of `sync_data`, so that an fdatasync already running
    /// finishes before a new one is added.
    sync_first: Mutex<Vec<SyncFirst>>,
    /// `write_back` has started writing out the pages below this offset (whole steps).
    written_back: AtomicU64,
}

/// A segment's read mapping (`Segment::map`).
struct ReadMap {
    bytes: Bytes,
    /// The mapping, also held by `bytes` (as its owner, `SharedMap`) while `bytes` or any
    /// slice of it is alive: so once `bytes` is dropped, a count of one says no reader holds
    /// a slice (`Segment::retire`).
    owner: Arc<memmap2::Mmap>,
}

/// The owner of a read mapping's `Bytes`.
struct SharedMap(Arc<memmap2::Mmap>);

impl AsRef<[u8]> for SharedMap {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

/// Makes something in another file durable first (see `Segment::sync_first`).
pub type SyncFirst = Box<dyn FnOnce() -> Result<()> + Send>;

pub fn segment_file_name(file_id: u64) -> String {
    format!("{file_id:016x}{SEGMENT_SUFFIX}")
}

pub fn tmp_segment_file_name(file_id: u64) -> String {
    format!("{file_id:016x}{SEGMENT_TMP_SUFFIX}")
}

impl Segment {
    /// Creates a new segment file (sparse, `segment_bytes` long) and writes its header.
    pub fn create(path: PathBuf, header: SegmentHeader) -> Result<Segment> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| Error::io("create segment", &path, e))?;
        let init = (|| -> io::Result<()> {
            let head = header.encode();
            if let Some(f) = faults::check(&path, FileOp::Write, head.len()) {
                return Err(faults::partial_write(f, &head, |b| file.write_all_at(b, 0)));
            }
            file.write_all_at(&head, 0)?;
            file.set_len(header.segment_bytes)
        })();
        if let Err(e) = init {
            let _ = std::fs::remove_file(&path);
            return Err(Error::io("initialise segment", &path, e));
        }
        let seg = Segment::from_parts(path, file, header);
        seg.counted.store(true, Ordering::Relaxed); // empty: every record appended is seen
        Ok(seg)
    }

    /// Opens an existing segment and verifies its header (`read_only`: without write access,
    /// for a store opened read-only).
    pub fn open(path: PathBuf, read_only: bool) -> Result<Segment> {
        let file = OpenOptions::new()
            .read(true)
            .write(!read_only)
            .open(&path)
            .map_err(|e| Error::io("open segment", &path, e))?;
        let mut buf = [0u8; SEGMENT_HEADER_LEN];
        file.read_exact_at(&mut buf, 0)
            .map_err(|e| Error::corruption(&path, 0, format!("segment header unreadable: {e}")))?;
        let header = SegmentHeader::decode(&buf).map_err(|r| Error::corruption(&path, 0, r))?;
        Ok(Segment::from_parts(path, file, header))
    }

    fn from_parts(path: PathBuf, file: File, header: SegmentHeader) -> Segment {
        Segment {
            header,
            path,
            file,
            map: OnceLock::new(),
            direct: OnceLock::new(),
            records: AtomicU64::new(0),
            dead: AtomicU64::new(0),
            counted: AtomicBool::new(false),
            sync_failed: OnceLock::new(),
            sync_first: Mutex::new(Vec::new()),
            written_back: AtomicU64::new(0),
        }
    }

    /// Counts `records` more records in the segment and `dead` more dead ones (see `records`).
    #[inline]
    pub fn count(&self, records: u64, dead: u64) {
        // Relaxed: the counts only weigh choices; writers update them under the partition's
        // lock, and a stale read costs at most a less good compaction range.
        if records > 0 {
            self.records.fetch_add(records, Ordering::Relaxed);
        }
        if dead > 0 {
            self.dead.fetch_add(dead, Ordering::Relaxed);
        }
    }

    /// (records, dead records) if the segment's counts are known (see `records`).
    pub fn counts(&self) -> Option<(u64, u64)> {
        self.counted.load(Ordering::Relaxed).then(|| {
            (
                self.records.load(Ordering::Relaxed),
                self.dead.load(Ordering::Relaxed),
            )
        })
    }

    /// Takes over the counts of `from` (a compaction output reopened under its final name).
    pub fn take_counts(&self, from: &Segment) {
        self.records
            .store(from.records.load(Ordering::Relaxed), Ordering::Relaxed);
        self.dead
            .store(from.dead.load(Ordering::Relaxed), Ordering::Relaxed);
        self.counted
            .store(from.counted.load(Ordering::Relaxed), Ordering::Relaxed);
    }

    pub fn file(&self) -> &File {
        &self.file
    }

    pub fn file_id(&self) -> u64 {
        self.header.file_id
    }

    pub fn slot(&self) -> u32 {
        self.header.slot
    }

    /// The mapping of the segment's whole capacity (the file is always that long), as `Bytes`:
    /// `slice` it to read without copying.
    pub fn map(&self) -> Result<&Bytes> {
        if let Some(m) = self.map.get() {
            return Ok(&m.bytes);
        }
        // A file shorter than its capacity (damage, found by a read-only open, which does not
        // extend it) would raise SIGBUS on a read past its end: refused instead.
        let len = self
            .file
            .metadata()
            .map_err(|e| Error::io("stat segment", &self.path, e))?
            .len();
        if len < self.header.segment_bytes {
            return Err(Error::corruption(
                &self.path,
                len,
                format!(
                    "segment file is {len} bytes, shorter than its capacity of {}",
                    self.header.segment_bytes
                ),
            ));
        }
        // SAFETY: segment files are append-only: bytes below the log end never change while
        // mapped (a torn tail is cut before the store is opened for reads), files are never
        // shortened while open, and the engine never reads a mapped offset beyond the log end.
        let m = unsafe {
            memmap2::MmapOptions::new()
                .len(self.header.segment_bytes as usize)
                .map(&self.file)
        }
        .map_err(|e| Error::io("mmap segment", &self.path, e))?;
        // Another reader may have mapped it meanwhile: the first mapping stays, this one goes.
        let m = self.map.get_or_init(|| {
            let owner = Arc::new(m);
            ReadMap {
                bytes: Bytes::from_owner(SharedMap(owner.clone())),
                owner,
            }
        });
        Ok(&m.bytes)
    }

    /// An O_DIRECT descriptor on the same file. EINVAL means the file system has no O_DIRECT.
    pub fn direct(&self) -> Result<&File> {
        let unsupported = || {
            Err(Error::io(
                "open segment O_DIRECT",
                &self.path,
                io::Error::from_raw_os_error(libc::EINVAL),
            ))
        };
        if let Some(f) = self.direct.get() {
            return f.as_ref().map_or_else(unsupported, Ok);
        }
        let opened = match OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(&self.path)
        {
            Ok(f) => Some(f),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => None,
            Err(e) => return Err(Error::io("open segment O_DIRECT", &self.path, e)),
        };
        // Another reader may have opened it meanwhile: the first descriptor stays.
        match self.direct.get_or_init(|| opened) {
            Some(f) => Ok(f),
            None => unsupported(),
        }
    }

    pub fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        if let Some(f) = faults::check(&self.path, FileOp::Read, buf.len()) {
            return Err(Error::io("read segment", &self.path, f.error));
        }
        let mut done = 0;
        while done < buf.len() {
            match self.file.read_at(&mut buf[done..], offset + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::io("read segment", &self.path, e)),
            }
        }
        Ok(done)
    }

    /// The `len` bytes at `offset` (fewer at the end of the file): a slice of the mapping, or,
    /// where the file cannot be mapped, read into `buf`.
    pub fn bytes_at<'a>(
        &'a self,
        buf: &'a mut Vec<u8>,
        offset: u64,
        len: usize,
    ) -> Result<&'a [u8]> {
        if let Ok(map) = self.map() {
            let start = (offset as usize).min(map.len());
            return Ok(&map[start..(start + len).min(map.len())]);
        }
        buf.resize(len, 0);
        let n = self.read_at(buf, offset)?;
        Ok(&buf[..n])
    }

    /// Lets go of a segment compaction retired (its file deleted, and this the last handle),
    /// a step at a time (`PAGE_STEP_BYTES`), calling `between` after each: its read
    /// mapping's page-table entries (MADV_DONTNEED), then its pages and blocks, by cutting
    /// the file short from its end. Dropped at once instead, the last handle's unmapping and
    /// close made the kernel free them all in one system call — 40 ms of kernel work for a
    /// retired segment here, which a kernel without preemption let no serving thread
    /// interrupt (BENCHMARKS §53). Not while a reader still holds a slice of the mapping: it
    /// reads the file's bytes, which then go with its slice, at once. Best effort.
    pub fn retire(mut self, mut between: impl FnMut()) {
        if let Some(ReadMap { bytes, owner }) = self.map.take() {
            drop(bytes);
            match Arc::try_unwrap(owner) {
                Ok(map) => unmap_in_steps(&map, &mut between),
                // A reader's slice still reads the file: its bytes stay, and go with it.
                Err(_) => return,
            }
        }
        // Past the data only holes are left (`release`), and the data is written from the
        // start without gaps: the blocks allocated say where the first cut goes. (Asking the
        // file system where the data ends, SEEK_HOLE, walked the page cache: 2.5 ms.)
        use std::os::unix::fs::MetadataExt;
        let allocated = self.file.metadata().map_or(u64::MAX, |m| m.blocks() * 512);
        let mut len = allocated
            .min(self.header.segment_bytes)
            .next_multiple_of(PAGE_STEP_BYTES);
        while len > 0 {
            len = len.saturating_sub(PAGE_STEP_BYTES);
            if self.file.set_len(len).is_err() {
                return;
            }
            between();
        }
    }

    /// Writes zeros over `[offset, offset + len)`, past the log's end, and starts writing
    /// them out (`Appender::zeroing_ahead`). Best effort: zeros past the end are what the
    /// file holds there anyway; a failure only leaves the blocks unwritten.
    pub fn zero(&self, offset: u64, len: u64) {
        static ZEROS: [u8; 64 << 10] = [0; 64 << 10];
        let end = offset + len;
        let mut at = offset;
        while at < end {
            let n = (end - at).min(ZEROS.len() as u64) as usize;
            if self.file.write_all_at(&ZEROS[..n], at).is_err() {
                return;
            }
            at += n as u64;
        }
        start_write_back(&self.file, offset, len);
    }

    /// Starts writing out the file's dirty pages below `to`, from where the last call reached,
    /// a step at a time (`PAGE_STEP_BYTES`, SYNC_FILE_RANGE_WRITE), calling `between` after
    /// each: a later fdatasync then has little left to write. An fdatasync writes a file's
    /// dirty pages out in one system call (a checkpoint's, a second of a busy log's appends:
    /// tens of ms of kernel work on the core of a serving thread, BENCHMARKS §53). Best
    /// effort, and no promise: only a later `sync_data` makes anything durable, and it
    /// reports what failed. Not where `sync_first` applies (`fsync` mode): there no page may
    /// reach the disk before what it waits for.
    pub fn write_back(&self, to: u64, mut between: impl FnMut()) {
        let to = to.min(self.header.segment_bytes) / PAGE_STEP_BYTES * PAGE_STEP_BYTES;
        let from = self.written_back.fetch_max(to, Ordering::Relaxed);
        for at in (from..to).step_by(PAGE_STEP_BYTES as usize) {
            start_write_back(&self.file, at, PAGE_STEP_BYTES);
            between();
        }
    }

    /// A shared writable mapping of the whole capacity, for the appender (see
    /// `Appender::append`); `None` if the file cannot be mapped.
    ///
    /// Advised `MADV_RANDOM`: a fault there (an append's, or `log::ahead`'s) then adds one
    /// page to the page cache instead of reading around it in a large folio. Such a folio
    /// is an allocation of high order, and finding one can mean compacting memory: on this
    /// project's virtual machine the faulting thread then ran 15-17 ms at a time, which a
    /// kernel without preemption lets no serving thread interrupt (BENCHMARKS §47). The
    /// appends write every page anyway, so reading around gains nothing. Best effort.
    pub fn map_for_appends(&self) -> Option<memmap2::MmapRaw> {
        let map = memmap2::MmapOptions::new()
            .len(self.header.segment_bytes as usize)
            .map_raw(&self.file)
            .ok()?;
        let _ = map.advise(memmap2::Advice::Random);
        Some(map)
    }

    pub fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        if let Some(f) = faults::check(&self.path, FileOp::Write, buf.len()) {
            let e = faults::partial_write(f, buf, |b| self.file.write_all_at(b, offset));
            return Err(Error::io("write segment", &self.path, e));
        }
        self.file
            .write_all_at(buf, offset)
            .map_err(|e| Error::io("write segment", &self.path, e))
    }

    /// Allocates disk blocks for `[offset, offset + len)` so a later write there cannot fail
    /// for space. File systems without fallocate are trusted to have room: `Ok(false)`, the
    /// blocks are not known to be allocated.
    pub fn reserve(&self, offset: u64, len: u64) -> Result<bool> {
        use std::os::fd::AsRawFd;
        if let Some(f) = faults::check(&self.path, FileOp::Allocate, len as usize) {
            return Err(Error::io("reserve segment space", &self.path, f.error));
        }
        // SAFETY: fallocate on a descriptor we own; mode 0 only allocates blocks.
        let rc = unsafe {
            libc::fallocate(
                self.file.as_raw_fd(),
                0,
                offset as libc::off_t,
                len as libc::off_t,
            )
        };
        if rc == 0 {
            return Ok(true);
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) => Ok(false),
            _ => Err(Error::io("reserve segment space", &self.path, err)),
        }
    }

    /// Frees the disk blocks of `[offset, offset + len)` (which must hold no record: it reads
    /// back as zeros, the clean end of the log). Best effort.
    pub fn release(&self, offset: u64, len: u64) {
        use std::os::fd::AsRawFd;
        // SAFETY: fallocate on a descriptor we own; PUNCH_HOLE|KEEP_SIZE only deallocates
        // the range (it reads as zeros afterwards) and keeps the file's length.
        unsafe {
            libc::fallocate(
                self.file.as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                offset as libc::off_t,
                len as libc::off_t,
            );
        }
    }

    /// fdatasync. After a failure every later call fails too, without trying (`sync_failed`).
    pub fn sync_data(&self) -> Result<()> {
        if let Some(reason) = self.sync_failed.get() {
            return Err(Error::SyncFailed {
                path: self.path.clone(),
                reason: reason.clone(),
            });
        }
        let mut first = self.sync_first.lock();
        for settle in first.drain(..) {
            if let Err(e) = settle() {
                let reason = format!(
                    "a batch's commit record in another partition could not be made durable \
                     before this file ({e})"
                );
                let _ = self.sync_failed.set(reason.clone());
                return Err(Error::SyncFailed {
                    path: self.path.clone(),
                    reason,
                });
            }
        }
        let started = std::time::Instant::now();
        let res = match faults::check(&self.path, FileOp::Sync, 0) {
            Some(f) => Err(f.error),
            None => self.file.sync_data(),
        };
        crate::stalls::note_fdatasync(&self.path, started);
        drop(first);
        res.map_err(|e| {
            let _ = self.sync_failed.set(e.to_string());
            Error::io("fdatasync segment", &self.path, e)
        })
    }

    /// Makes `settle` run before this file's next fdatasync (see `sync_first`). Waits for an
    /// fdatasync of the file already running.
    pub fn sync_first(&self, settle: SyncFirst) {
        self.sync_first.lock().push(settle);
    }

    /// Whether an fdatasync of this file has failed (see `sync_failed`).
    pub fn sync_has_failed(&self) -> bool {
        self.sync_failed.get().is_some()
    }

    /// Cuts the file at `len` and extends it again (sparse) to its capacity, so whatever lay
    /// beyond `len` (a torn write) reads back as zeros: the clean end of the log.
    pub fn zero_from(&self, len: u64) -> Result<()> {
        self.file
            .set_len(len)
            .and_then(|_| self.file.set_len(self.header.segment_bytes))
            .map_err(|e| Error::io("truncate segment tail", &self.path, e))
    }

    /// Segment files are always exactly their capacity long (sparse beyond the log end), so a
    /// mapping or a read never runs past the end of the file. A file found shorter (a crash
    /// while creating it, or damage) is extended back with zeros.
    pub fn ensure_full_length(&self) -> Result<()> {
        let len = self
            .file
            .metadata()
            .map_err(|e| Error::io("stat segment", &self.path, e))?
            .len();
        if len != self.header.segment_bytes {
            self.file
                .set_len(self.header.segment_bytes)
                .map_err(|e| Error::io("extend segment", &self.path, e))?;
        }
        Ok(())
    }
}

/// Replaces the small file `path` by `bytes` as one step a crash cannot tear: written to
/// `tmp`, fsynced, renamed over `path` (the caller fsyncs the directory, `sync_dir`). `op`
/// names the step in errors ("write checkpoint", ...). Written a step at a time
/// (`PAGE_STEP_BYTES`), each step's writeback started at once, with `between` called after
/// each, and the replaced file's cached pages let go of the same way before the rename frees
/// them: so the fsync and the rename leave little work in one system call (a checkpoint's
/// megabytes: BENCHMARKS §53).
pub fn replace_file(
    tmp: &Path,
    path: &Path,
    bytes: &[u8],
    op: &'static str,
    mut between: impl FnMut(),
) -> Result<()> {
    let mut write = || -> io::Result<()> {
        let f = File::create(tmp)?;
        if let Some(fault) = faults::check(tmp, FileOp::Write, bytes.len()) {
            return Err(faults::partial_write(fault, bytes, |b| {
                f.write_all_at(b, 0)
            }));
        }
        for (i, step) in bytes.chunks(PAGE_STEP_BYTES as usize).enumerate() {
            let at = i as u64 * PAGE_STEP_BYTES;
            f.write_all_at(step, at)?;
            start_write_back(&f, at, step.len() as u64);
            between();
        }
        if let Some(fault) = faults::check(tmp, FileOp::Sync, 0) {
            return Err(fault.error);
        }
        f.sync_all()
    };
    write().map_err(|e| Error::io(op, tmp, e))?;
    if let Ok(old) = File::open(path) {
        let len = old.metadata().map_or(0, |m| m.len());
        for at in (0..len).step_by(PAGE_STEP_BYTES as usize) {
            drop_cached(&old, at, PAGE_STEP_BYTES);
            between();
        }
    }
    std::fs::rename(tmp, path).map_err(|e| Error::io(op, path, e))
}

/// Drops a mapping's page-table entries a step at a time (`PAGE_STEP_BYTES`), calling
/// `between` after each, so that unmapping it is cheap.
fn unmap_in_steps(map: &memmap2::Mmap, between: &mut impl FnMut()) {
    for at in (0..map.len()).step_by(PAGE_STEP_BYTES as usize) {
        let len = (PAGE_STEP_BYTES as usize).min(map.len() - at);
        // SAFETY: `at..at + len` lies inside the mapping, at a page boundary, and nothing
        // refers into it (the caller holds the mapping's only handle). MADV_DONTNEED on a
        // shared file mapping only drops this process's page-table entries.
        unsafe {
            libc::madvise(
                map.as_ptr().add(at).cast_mut().cast(),
                len,
                libc::MADV_DONTNEED,
            )
        };
        between();
    }
}

/// Asks the kernel to start writing out `file`'s dirty pages in `[at, at + len)`
/// (SYNC_FILE_RANGE_WRITE). Best effort and no promise: only an fdatasync makes them durable,
/// and it reports what failed.
fn start_write_back(file: &File, at: u64, len: u64) {
    use std::os::fd::AsRawFd;
    // SAFETY: a request about a range of an open descriptor; it changes no byte of the file.
    unsafe {
        libc::sync_file_range(
            file.as_raw_fd(),
            at as libc::off64_t,
            len as libc::off64_t,
            libc::SYNC_FILE_RANGE_WRITE,
        );
    }
}

/// Drops `file`'s clean cached pages in `[at, at + len)` (POSIX_FADV_DONTNEED; pages mapped
/// or dirty stay). Best effort: it changes no byte of the file.
fn drop_cached(file: &File, at: u64, len: u64) {
    use std::os::fd::AsRawFd;
    // SAFETY: advice about a range of an open descriptor.
    unsafe {
        libc::posix_fadvise(
            file.as_raw_fd(),
            at as libc::off_t,
            len as libc::off_t,
            libc::POSIX_FADV_DONTNEED,
        );
    }
}

/// fsyncs a directory so renames and creations in it are durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    if let Some(f) = faults::check(dir, FileOp::Sync, 0) {
        return Err(Error::io("fsync directory", dir, f.error));
    }
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io("fsync directory", dir, e))
}

/// A header for tests: segment `file_id` of partition 0 in slot `file_id`, `segment_bytes`
/// long.
#[cfg(test)]
pub(crate) fn test_header(file_id: u64, segment_bytes: u64) -> SegmentHeader {
    use crate::log::format::{SegmentOrder, FORMAT_VERSION};
    SegmentHeader {
        partition: 0,
        version: FORMAT_VERSION,
        slot: file_id as u32,
        file_id,
        order: SegmentOrder {
            major: file_id,
            minor: 0,
        },
        segment_bytes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CAP: u64 = 1 << 20;

    /// A file cut short (damage a read-only open leaves as it is) is never mapped — a read
    /// past the end of a mapped file raises SIGBUS — and `bytes_at` reads it instead.
    #[test]
    fn a_file_shorter_than_its_capacity_is_read_not_mapped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(segment_file_name(1));
        let seg = Segment::create(path.clone(), test_header(1, CAP)).unwrap();
        seg.write_at(b"record bytes", 4096).unwrap();
        let mut buf = Vec::new();
        assert_eq!(seg.bytes_at(&mut buf, 4096, 6).unwrap(), b"record");
        assert!(
            buf.is_empty(),
            "a full-length file is read through its mapping"
        );
        drop(seg);

        File::options()
            .write(true)
            .open(&path)
            .and_then(|f| f.set_len(4100))
            .unwrap();
        let seg = Segment::open(path, true).unwrap();
        let err = seg.map().unwrap_err();
        assert!(err.is_corruption(), "{err}");
        assert!(
            err.to_string().contains("shorter than its capacity"),
            "{err}"
        );
        assert_eq!(seg.bytes_at(&mut buf, 4096, 64).unwrap(), b"reco");
    }

    /// The appender's mapping is advised random (`map_for_appends`): the kernel shows it as
    /// the mapping's `rr` flag in /proc/self/smaps.
    #[test]
    fn the_append_mapping_faults_in_a_page_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let seg =
            Segment::create(dir.path().join(segment_file_name(1)), test_header(1, CAP)).unwrap();
        let map = seg.map_for_appends().expect("the segment maps");
        let start = format!("{:x}-", map.as_ptr() as usize);
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        // Each mapping's entry: its address range, then fields, the last `VmFlags`.
        let entry = smaps
            .lines()
            .skip_while(|l| !l.starts_with(&start))
            .find(|l| l.starts_with("VmFlags:"))
            .expect("the mapping and its flags are listed");
        assert!(
            entry.split_whitespace().any(|f| f == "rr"),
            "not advised random: {entry}"
        );
    }

    /// A retired segment goes a step at a time (`retire`): with no slice of its mapping left,
    /// its page-table entries a step per call of `between`, then its file cut short a step per
    /// call down to nothing; while a reader holds a slice, the file stays whole (the slice
    /// reads it) and nothing is done.
    #[test]
    fn a_retired_segment_is_cut_short_in_steps_unless_a_reader_holds_a_slice() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(segment_file_name(1));
        let cap = 4 * PAGE_STEP_BYTES;
        let seg = Segment::create(path.clone(), test_header(1, cap)).unwrap();
        seg.write_at(&vec![7u8; 3 * PAGE_STEP_BYTES as usize], 4096)
            .unwrap();
        let slice = seg.map().unwrap().slice(4096..4104);
        seg.retire(|| panic!("nothing is let go while a reader holds a slice"));
        assert_eq!(std::fs::metadata(&path).unwrap().len(), cap);
        assert_eq!(&slice[..], &[7u8; 8]);
        drop(slice);

        let seg = Segment::open(path.clone(), false).unwrap();
        assert_eq!(seg.map().unwrap()[4096], 7);
        let mut lens = Vec::new();
        seg.retire(|| lens.push(std::fs::metadata(&path).unwrap().len()));
        let unmapped = (cap / PAGE_STEP_BYTES) as usize;
        assert!(lens[..unmapped].iter().all(|&l| l == cap), "{lens:?}");
        let cut = &lens[unmapped..];
        assert_eq!(cut.last(), Some(&0), "{lens:?}");
        assert!(
            cut.windows(2).all(|w| w[0] - w[1] == PAGE_STEP_BYTES),
            "one step at a time: {lens:?}"
        );
    }

    /// `write_back` goes a step at a time from where the last call reached: a second call up
    /// to the same offset has nothing to do.
    #[test]
    fn write_back_goes_in_steps_from_where_it_left_off() {
        let dir = tempfile::tempdir().unwrap();
        let cap = 4 * PAGE_STEP_BYTES;
        let seg =
            Segment::create(dir.path().join(segment_file_name(1)), test_header(1, cap)).unwrap();
        seg.write_at(&vec![7u8; 3 * PAGE_STEP_BYTES as usize], 4096)
            .unwrap();
        let mut steps = 0;
        seg.write_back(2 * PAGE_STEP_BYTES + 100, || steps += 1);
        assert_eq!(steps, 2);
        seg.write_back(2 * PAGE_STEP_BYTES, || panic!("already written back"));
        seg.write_back(cap, || steps += 1);
        assert_eq!(steps, 4);
        seg.sync_data().unwrap();
    }

    /// `replace_file` writes the new file a step at a time, and lets the old one's pages go
    /// a step at a time, calling `between` after each.
    #[test]
    fn replace_file_goes_in_steps() {
        let dir = tempfile::tempdir().unwrap();
        let (path, tmp) = (dir.path().join("f"), dir.path().join("f.tmp"));
        let old = vec![1u8; PAGE_STEP_BYTES as usize + 1];
        replace_file(&tmp, &path, &old, "test", || {}).unwrap();
        let new = vec![2u8; 2 * PAGE_STEP_BYTES as usize + 1];
        let mut steps = 0;
        replace_file(&tmp, &path, &new, "test", || steps += 1).unwrap();
        assert_eq!(
            steps,
            3 + 2,
            "three steps written, two of the old file let go"
        );
        assert_eq!(std::fs::read(&path).unwrap(), new);
        assert!(!tmp.exists());
    }
}
