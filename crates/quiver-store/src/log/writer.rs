//! The append point of a partition's log: the active segment, its end, and (in `none`
//! durability) the in-process tail buffer of records not yet written to the file.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::faults::{self, FileOp};
use crate::log::ahead::{PagesAhead, Region, PAGE};
use crate::log::format::{self, RECORD_HEADER_LEN};
use crate::log::segment::Segment;

/// Disk blocks allocated ahead of the log end at a time: one fallocate serves many appends.
/// The next are allocated once the end comes within half of it of the allocated end, so
/// there are always blocks ahead whose pages can be faulted in before the appender reaches
/// them (`log::ahead`).
const RESERVE_AHEAD_BYTES: u64 = 1 << 20;
/// Appended bytes the writable mapping keeps mapped behind the log end at most: past it, the
/// pages behind are unmapped (they stay in the page cache, dirty ones written out as usual),
/// so a segment's written pages do not pile up in the process's resident set.
const MAPPED_BEHIND_BYTES_MAX: u64 = 4 << 20;

pub struct Appender {
    pub segment: Arc<Segment>,
    /// Logical end of the log in this segment (buffered bytes included).
    end: u64,
    /// Disk blocks are allocated up to here (at least): writing below it cannot fail for space.
    allocated: u64,
    /// Every reservation so far really allocated blocks (the file system has fallocate):
    /// appends may then go through `map`, which must never meet a hole it cannot fill.
    blocks_known: bool,
    /// The segment mapped shared and writable (made on the first append; `Some(None)`: it
    /// cannot be mapped). Appends are copied into it: into the page cache, as a write puts
    /// them (a kill -9 after it loses nothing; fdatasync writes them out), without a system
    /// call — a pwrite per append was a tenth of a write-heavy server's time. Unmapped with
    /// the appender (and `ahead`'s hold on it), when the segment is sealed.
    map: Option<Option<Arc<Region>>>,
    /// Where the pages of the blocks reserved ahead are faulted in before appends reach them
    /// (`os` durability only: see `log::ahead`).
    ahead: Option<Arc<PagesAhead>>,
    /// Below this offset the mapping's pages have been unmapped (`MAPPED_BEHIND_BYTES_MAX`).
    unmapped_to: u64,
    /// Set while the store is short of disk space: no blocks are allocated ahead of need.
    frugal: Arc<AtomicBool>,
    /// End of what has been written to the file.
    written: u64,
    /// End of what a write may have put in the file (at or past `written`): a failed append
    /// whose bytes could not be zeroed, or a flush of the tail buffer that failed part-way.
    /// Taking records back zeroes up to here.
    attempted: u64,
    /// Records appended but not yet written (only in buffered mode).
    buffer: Vec<u8>,
    buffer_bytes_max: usize,
    buffered: bool,
    /// A failed append left bytes past the end that could not be zeroed (`append`): a later
    /// record must not follow them. Why, until `take_leftover` takes it.
    leftover: Option<String>,
    /// Blocks reserved ahead are written with zeros (`zeroing_ahead`).
    zero_ahead: bool,
}

/// Copies `src` (whole 8-byte words) to `dst` (8-byte aligned) a word at a time, front to
/// back, as volatile stores, which neither the compiler nor x86 reorders: a process killed in
/// the middle leaves a prefix of the run in the page cache — a torn tail, which replay cuts
/// off — as a write(2) does. `memcpy` may store the end of a run first, and then a kill can
/// leave a later record whole behind a damaged one: damage in the middle of the log, which
/// opening refuses.
///
/// # Safety
/// `dst` must be valid for writes of `src.len()` bytes, and aligned to 8.
unsafe fn copy_in_order(dst: *mut u8, src: &[u8]) {
    let dst = dst.cast::<u64>();
    for (i, word) in src.chunks_exact(8).enumerate() {
        let mut w = [0u8; 8];
        w.copy_from_slice(word);
        // SAFETY: word `i` lies within the `src.len()` bytes the caller vouches for.
        unsafe { dst.add(i).write_volatile(u64::from_ne_bytes(w)) };
    }
}

impl Appender {
    pub fn new(
        segment: Arc<Segment>,
        end: u64,
        buffered: bool,
        buffer_bytes_max: usize,
        frugal: Arc<AtomicBool>,
        ahead: Option<Arc<PagesAhead>>,
    ) -> Appender {
        Appender {
            segment,
            end,
            allocated: end,
            blocks_known: true,
            map: None,
            ahead,
            unmapped_to: 0,
            frugal,
            written: end,
            attempted: end,
            buffer: Vec::new(),
            buffer_bytes_max,
            buffered,
            leftover: None,
            zero_ahead: false,
        }
    }

    /// Writes zeros over the blocks it reserves ahead of the end, and starts writing them
    /// out, for a log whose every append is followed by an fdatasync (`fsync` durability).
    /// A block fallocated but never written is "unwritten" to the file system, and the first
    /// fdatasync of data in it also commits the change of its state to the journal: on this
    /// project's disk an fdatasync after a 4 KiB append took 171-182 µs in fallocated blocks
    /// and 94-119 µs in blocks written before (BENCHMARKS §54). Written once per
    /// `RESERVE_AHEAD_BYTES`, the zeros (past the end: the log's clean end to replay) make
    /// each group commit's fdatasync the data's alone.
    pub fn zeroing_ahead(mut self) -> Appender {
        self.zero_ahead = true;
        self
    }

    pub fn end(&self) -> u64 {
        self.end
    }

    pub fn capacity(&self) -> u64 {
        self.segment.header.segment_bytes
    }

    pub fn room(&self) -> u64 {
        self.capacity() - self.end
    }

    /// Allocates disk blocks for the next `len` bytes after the end (and, when the disk
    /// allows and the store is not short of space, up to `RESERVE_AHEAD_BYTES` more), so
    /// that appending them cannot fail for space. On `NoSpace` nothing has changed: a caller
    /// that reserves everything it is about to write before writing any of it fails whole,
    /// never half.
    pub fn reserve(&mut self, len: u64) -> Result<()> {
        let need_end = self.end + len;
        debug_assert!(need_end <= self.capacity());
        let ahead = if self.frugal.load(Ordering::Relaxed) {
            0
        } else {
            RESERVE_AHEAD_BYTES
        };
        let from = self.allocated.max(self.end);
        if need_end + ahead / 2 <= from {
            return Ok(());
        }
        let ahead_end = (need_end + ahead).min(self.capacity());
        if ahead_end <= from {
            // Allocated to the segment's end already.
            return Ok(());
        }
        let allocated = match self.segment.reserve(from, ahead_end - from) {
            Ok(allocated) => {
                self.allocated = ahead_end;
                allocated
            }
            // The margin does not fit: what is needed may be allocated already, or fit.
            Err(e) if e.is_no_space() && ahead_end > need_end => {
                if need_end <= from {
                    return Ok(());
                }
                let allocated = self.segment.reserve(from, need_end - from)?;
                self.allocated = need_end;
                allocated
            }
            Err(e) => return Err(e),
        };
        self.blocks_known &= allocated;
        if self.zero_ahead && allocated {
            self.segment.zero(from, self.allocated - from);
        }
        if let (Some(ahead), Some(Some(region))) = (&self.ahead, &self.map) {
            if self.blocks_known {
                ahead.want(region, self.allocated);
            }
        }
        Ok(())
    }

    /// Appends `bytes` (whole records) at the end and returns the offset they start at. On an
    /// error nothing is appended: the end does not move, and a partly written run is simply
    /// overwritten by the next append (and is a torn tail if the process dies first). Space
    /// is reserved first, so a full disk fails the append before any byte is written.
    pub fn append(&mut self, bytes: &[u8]) -> Result<u64> {
        debug_assert!(bytes.len() as u64 <= self.room());
        self.reserve(bytes.len() as u64)?;
        let at = self.end;
        if self.buffered {
            self.buffer.extend_from_slice(bytes);
            self.end += bytes.len() as u64;
            if self.buffer.len() >= self.buffer_bytes_max {
                if let Err(e) = self.flush() {
                    // Buffered records are accepted (that is `none` durability) and later
                    // flushes retry; but while writing out keeps failing the buffer may only
                    // grow so far: past twice its size, this run is refused and dropped.
                    if self.buffer.len() > 2 * self.buffer_bytes_max {
                        self.discard_from(at);
                        return Err(e);
                    }
                }
            }
        } else {
            let written = match self.mapped_room(at, bytes) {
                Some(dst) => {
                    if let Some(f) = faults::check(&self.segment.path, FileOp::Write, bytes.len()) {
                        let keep = &bytes[..f.keep / 8 * 8];
                        // SAFETY: `mapped_room` gave `bytes.len()` writable bytes at `dst`.
                        unsafe { copy_in_order(dst, keep) };
                        return self.failed_append(at, bytes, f.error);
                    }
                    // SAFETY: `mapped_room` gave `bytes.len()` writable bytes at `dst`.
                    unsafe { copy_in_order(dst, bytes) };
                    self.unmap_behind(at + bytes.len() as u64);
                    Ok(())
                }
                None => self.segment.write_at(bytes, at),
            };
            if let Err(e) = written {
                return Err(self.take_back_failed(at, bytes, e));
            }
            self.end += bytes.len() as u64;
            self.written = self.end;
            self.attempted = self.attempted.max(self.end);
        }
        Ok(at)
    }

    /// An injected failure of a copy into the mapping (`faults`), as the write's error.
    fn failed_append(&mut self, at: u64, bytes: &[u8], e: std::io::Error) -> Result<u64> {
        let e = Error::io("write segment", &self.segment.path, e);
        Err(self.take_back_failed(at, bytes, e))
    }

    /// After a failed append of `bytes` at `at`: a prefix of the run may have reached the
    /// file (a full disk takes what fits). It is zeroed (`zero_records`), so no record of a
    /// failed write comes back when the store is reopened, and no leftover follows a shorter
    /// next append. The run's blocks were reserved before it was written, so this does not
    /// fail for space. If even this fails, the bytes stay: `leftover` says so, and the
    /// partition refuses writes (the failed write may then come back on reopen, whole records
    /// of it: the error says its outcome is unknown).
    fn take_back_failed(&mut self, at: u64, bytes: &[u8], e: Error) -> Error {
        let to = at + bytes.len() as u64;
        match self.zero_records(at, bytes, to) {
            Ok(()) => e,
            Err(zeroing) => {
                self.attempted = self.attempted.max(to);
                let reason = format!(
                    "a write failed ({e}) and what it left in the log could not be zeroed \
                     ({zeroing}): its outcome is unknown"
                );
                self.leftover = Some(reason.clone());
                let path = &self.segment.path;
                Error::PartitionFailed {
                    dir: path
                        .parent()
                        .map_or_else(|| path.clone(), Path::to_path_buf),
                    reason,
                }
            }
        }
    }

    /// Zeroes the records of `run`, which lie in the file from `at`, up to `to`: one write per
    /// record, the last record first. Why that order: a zeroing that fails part-way then
    /// leaves whole records, one record with a zeroed prefix and zeros after it — a torn
    /// tail, which replay cuts off. Front to back, a failure would leave zeros (which replay
    /// takes for the clean end of the log) with whole records after them; a later, shorter
    /// append would not cover those, and the next open would find them behind a gap: damage
    /// in the middle of the log.
    fn zero_records(&self, at: u64, run: &[u8], to: u64) -> Result<()> {
        debug_assert!(to <= at + run.len() as u64);
        for span in format::record_spans(run).into_iter().rev() {
            let start = at + span.start as u64;
            if start >= to {
                continue;
            }
            let end = (at + span.end as u64).min(to);
            self.segment
                .write_at(&vec![0u8; (end - start) as usize], start)?;
        }
        Ok(())
    }

    /// Why a failed append left bytes it could not take back, if one did (see `leftover`).
    pub fn take_leftover(&mut self) -> Option<String> {
        self.leftover.take()
    }

    /// Where in the mapping `bytes` go at `at`, if appends may go through it: the file maps,
    /// the range's disk blocks are surely allocated (a store into a hole the file system
    /// cannot fill raises SIGBUS, where a write returns ENOSPC), and the run is whole 8-byte
    /// words at an 8-byte offset (records always are: `copy_in_order`).
    fn mapped_room(&mut self, at: u64, bytes: &[u8]) -> Option<*mut u8> {
        let aligned = at % 8 == 0 && bytes.len() % 8 == 0;
        if !aligned || !self.blocks_known || at + bytes.len() as u64 > self.allocated {
            return None;
        }
        let (segment, end) = (&self.segment, self.end);
        let map = self
            .map
            .get_or_insert_with(|| {
                let map = segment.map_for_appends()?;
                Some(Arc::new(Region::new(map, end)))
            })
            .as_ref()?
            .map();
        assert!(
            at as usize + bytes.len() <= map.len(),
            "an append past the segment's capacity"
        );
        // SAFETY: `at` lies inside the mapping (asserted), which covers the whole file
        // (segment files are never shortened while open). Only this appender writes there —
        // past the log end, under the partition's exclusive lock, where no reader looks.
        Some(unsafe { map.as_mut_ptr().add(at as usize) })
    }

    /// Unmaps the mapping's pages well behind `end` once there are `MAPPED_BEHIND_BYTES_MAX`
    /// of them (the page holding `end` stays: the next append writes there).
    fn unmap_behind(&mut self, end: u64) {
        let to = end / PAGE * PAGE;
        if to < self.unmapped_to + MAPPED_BEHIND_BYTES_MAX {
            return;
        }
        if let Some(Some(region)) = &self.map {
            let map = region.map();
            // SAFETY: MADV_DONTNEED on a shared file mapping only drops this process's page
            // table entries for `unmapped_to..to` (a page-aligned range inside the mapping):
            // the pages, dirty or not, stay in the page cache, and a later access would map
            // them again. No reference into that range is held.
            unsafe {
                libc::madvise(
                    map.as_mut_ptr().add(self.unmapped_to as usize).cast(),
                    (to - self.unmapped_to) as usize,
                    libc::MADV_DONTNEED,
                );
            }
        }
        self.unmapped_to = to;
    }

    /// Gives back the disk blocks allocated beyond the end (the segment is sealed: nothing
    /// will be appended there). Best effort: a file system that cannot punch holes keeps them.
    pub fn release_unused(&mut self) -> Result<()> {
        self.flush()?;
        // No page past the end may be faulted in (made dirty) once its blocks are released.
        if let Some(Some(region)) = &self.map {
            region.close();
        }
        if self.allocated > self.end {
            self.segment.release(self.end, self.allocated - self.end);
            self.allocated = self.end;
        }
        Ok(())
    }

    /// Writes the tail buffer to the file. On failure the buffer is kept for a later try.
    pub fn flush(&mut self) -> Result<()> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        // A failed write may leave any prefix of the buffer in the file.
        self.attempted = self.attempted.max(self.end);
        self.segment.write_at(&self.buffer, self.written)?;
        self.written = self.end;
        self.buffer.clear();
        Ok(())
    }

    /// Drops what was appended from `offset` on, if it is all still in the tail buffer: a run
    /// whose write-out failed must not reach the file later behind the caller's back. What a
    /// failed write-out may have put in the file from `offset` on is zeroed; if that fails,
    /// `leftover` says so.
    pub fn discard_from(&mut self, offset: u64) {
        if offset >= self.written && offset < self.end {
            let from = (offset - self.written) as usize;
            if offset < self.attempted {
                let run = self.buffer[from..].to_vec();
                if let Err(e) = self.zero_records(offset, &run, self.attempted) {
                    self.leftover = Some(format!(
                        "a write-out of buffered records failed part-way and what it left in \
                         the log could not be zeroed ({e}): its outcome is unknown"
                    ));
                } else {
                    self.attempted = offset;
                }
            }
            self.buffer.truncate(from);
            self.end = offset;
        }
    }

    /// Takes back `run`, appended at `offset` (in this segment) and everything after it:
    /// dropped from the tail buffer, zeroed in the file (`zero_records`) as far as a write may
    /// have reached, and the end moves back to `offset`. A part of a batch whose later part
    /// failed must never be followed by another record (replay would take that as proof the
    /// batch was written whole). `Ok` only if none of its bytes is left in the file; if
    /// zeroing fails the error comes back (the end still moves back).
    pub fn retract(&mut self, offset: u64, run: &[u8]) -> Result<()> {
        let reached = self.written.max(self.attempted);
        if offset >= self.end.max(reached) {
            return Ok(());
        }
        let res = if offset < reached {
            self.zero_records(offset, run, reached)
        } else {
            Ok(())
        };
        let keep = offset.saturating_sub(self.written) as usize;
        self.buffer.truncate(keep);
        self.written = self.written.min(offset);
        self.end = self.end.min(offset);
        if res.is_ok() {
            self.attempted = offset;
        }
        res
    }

    /// The record at `offset` if it is still only in the tail buffer: a copy of that record
    /// alone (not of the buffer after it, which a value handed out would otherwise keep alive).
    /// A damaged header yields just the header bytes, for the caller's checks to reject.
    pub fn buffered_record(&self, offset: u64) -> Option<Bytes> {
        if offset < self.written || offset >= self.end {
            return None;
        }
        let from = (offset - self.written) as usize;
        let head_end = (from + RECORD_HEADER_LEN).min(self.buffer.len());
        let len = format::parse_header(&self.buffer[from..head_end])
            .map_or(head_end - from, |h| h.record_len());
        let to = (from + len).min(self.buffer.len());
        Some(Bytes::copy_from_slice(&self.buffer[from..to]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::format::SEGMENT_HEADER_LEN;
    use crate::log::segment::{segment_file_name, test_header};

    /// Bytes of `file` in extents the file system reports unwritten (allocated, never
    /// written: FIEMAP's `FIEMAP_EXTENT_UNWRITTEN`), or `None` where it cannot say.
    fn unwritten_bytes(file: &std::fs::File) -> Option<u64> {
        use std::os::fd::AsRawFd;
        const FS_IOC_FIEMAP: libc::c_ulong = 0xC020_660B;
        const FIEMAP_FLAG_SYNC: u32 = 1;
        const FIEMAP_EXTENT_UNWRITTEN: u32 = 0x800;
        const EXTENTS: usize = 64;
        #[repr(C)]
        #[derive(Clone, Copy, Default)]
        struct Extent {
            logical: u64,
            physical: u64,
            length: u64,
            reserved64: [u64; 2],
            flags: u32,
            reserved: [u32; 3],
        }
        #[repr(C)]
        struct Fiemap {
            start: u64,
            length: u64,
            flags: u32,
            mapped_extents: u32,
            extent_count: u32,
            reserved: u32,
            extents: [Extent; EXTENTS],
        }
        let mut map = Fiemap {
            start: 0,
            length: u64::MAX,
            flags: FIEMAP_FLAG_SYNC,
            mapped_extents: 0,
            extent_count: EXTENTS as u32,
            reserved: 0,
            extents: [Extent::default(); EXTENTS],
        };
        // SAFETY: FS_IOC_FIEMAP fills `map`, whose layout is the kernel's `struct fiemap`
        // followed by room for `extent_count` extents.
        let r = unsafe { libc::ioctl(file.as_raw_fd(), FS_IOC_FIEMAP, &mut map) };
        (r == 0).then(|| {
            map.extents[..map.mapped_extents as usize]
                .iter()
                .filter(|e| e.flags & FIEMAP_EXTENT_UNWRITTEN != 0)
                .map(|e| e.length)
                .sum()
        })
    }

    /// `zeroing_ahead` (the log in `fsync` mode): the blocks reserved ahead of the end are
    /// written, so no fdatasync of an append also commits an unwritten block's change of
    /// state. Without it they stay unwritten (the check can tell them apart).
    #[test]
    fn a_log_zeroing_ahead_leaves_no_reserved_block_unwritten() {
        let dir = tempfile::tempdir().unwrap();
        let appended = |zeroing: bool, id: u64| {
            let path = dir.path().join(segment_file_name(id));
            let seg =
                Arc::new(Segment::create(path, test_header(id, 4 * RESERVE_AHEAD_BYTES)).unwrap());
            let a = Appender::new(
                seg.clone(),
                SEGMENT_HEADER_LEN as u64,
                false,
                0,
                Arc::new(AtomicBool::new(false)),
                None,
            );
            let mut a = if zeroing { a.zeroing_ahead() } else { a };
            a.append(&[7u8; 64]).unwrap();
            seg.sync_data().unwrap();
            let file = std::fs::File::open(&seg.path).unwrap();
            (unwritten_bytes(&file), a.allocated)
        };
        let (plain, reserved) = appended(false, 1);
        let Some(plain) = plain.filter(|&b| b > 0) else {
            eprintln!("skipped: this file system shows no unwritten extents ({plain:?})");
            return;
        };
        assert!(reserved > RESERVE_AHEAD_BYTES / 2, "{reserved}");
        assert!(plain >= RESERVE_AHEAD_BYTES / 2, "{plain}");
        assert_eq!(appended(true, 2).0, Some(0));
    }
}
