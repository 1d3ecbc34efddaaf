//! io_uring with O_DIRECT: the backend for device-resident data. A vector of reads becomes one
//! batch of `Read` SQEs handed to the kernel with a single `submit_and_wait` (the paper's
//! multiread), so the device sees the whole vector's queue depth at once and the page cache is
//! bypassed.
//!
//! O_DIRECT needs the buffer address, the file offset and the length aligned to the device's
//! logical block size; every read is widened to the 4 KiB-aligned range covering it (4096 is a
//! multiple of every common logical block size) and the requested bytes are copied out of it.
//!
//! Rings are not meant to be shared between threads, so the backend keeps a small pool of them:
//! a reading thread takes one (or creates one), uses it for its whole vector and puts it back.

use std::alloc::{self, Layout};
use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::ptr::NonNull;

use bytes::Bytes;
use io_uring::{opcode, types, IoUring, Probe};
use parking_lot::Mutex;

use super::{ReadBackend, ReadRequest};
use crate::error::{Error, Result};
use crate::log::segment::Segment;
use crate::options::BackendKind;

/// Submission-queue size of every ring; also the width of one submission (wider vectors are
/// read in chunks of this many requests).
const RING_ENTRIES: u32 = 256;
/// Alignment of O_DIRECT buffers, file offsets and lengths.
const ALIGN: usize = 4096;
/// Longest single `Read` SQE. The kernel caps one read at a little under 2 GiB anyway; anything
/// longer is finished synchronously like any other short read. A multiple of `ALIGN`.
const MAX_SQE_LEN: usize = 1 << 30;
/// `submit_and_wait` calls in a row that reap no completion (interrupted by signals, or
/// returning early) before a submission gives up: its unreaped reads then fail (or, if none
/// reached the kernel, are read synchronously) instead of the reader waiting for ever.
const RING_IDLE_WAITS_MAX: u32 = 1000;
/// Rings kept for reuse; rings freed beyond this (after a burst of concurrent readers) are
/// closed, so the pool does not hold descriptors and locked memory forever.
const MAX_POOLED_RINGS: usize = 64;

pub struct UringBackend {
    rings: Mutex<Vec<IoUring>>,
    /// Tests only: read through the buffered descriptor, as on a file system without O_DIRECT.
    buffered_only: bool,
}

impl UringBackend {
    /// Creates the backend, failing if this system cannot run it: io_uring missing (kernel
    /// older than 5.1, `kernel.io_uring_disabled`, a seccomp filter) or without `IORING_OP_READ`
    /// (kernel older than 5.6).
    pub fn new() -> Result<UringBackend> {
        let unavailable = |why: String| {
            Error::InvalidOptions(format!(
                "the io_uring backend is unavailable on this system: {why}; \
                 use the pread or mmap backend"
            ))
        };
        let ring = new_ring().map_err(|e| unavailable(format!("io_uring_setup failed: {e}")))?;
        let mut probe = Probe::new();
        ring.submitter()
            .register_probe(&mut probe)
            .map_err(|e| unavailable(format!("cannot probe io_uring opcodes: {e}")))?;
        if !probe.is_supported(opcode::Read::CODE) {
            return Err(unavailable("IORING_OP_READ is not supported".into()));
        }
        Ok(UringBackend {
            rings: Mutex::new(vec![ring]),
            buffered_only: false,
        })
    }

    /// A backend that never uses O_DIRECT, to test the fallback path on any file system.
    #[cfg(test)]
    fn buffered() -> Result<UringBackend> {
        Ok(UringBackend {
            buffered_only: true,
            ..UringBackend::new()?
        })
    }

    fn take_ring(&self) -> io::Result<IoUring> {
        // Pop in its own statement so the lock is released before a new ring is created.
        let pooled = self.rings.lock().pop();
        match pooled {
            Some(ring) => Ok(ring),
            None => new_ring(),
        }
    }

    /// Returns a ring to the pool. Only rings with an empty submission queue and nothing in
    /// flight may come back (`run_ring` succeeded on them).
    fn put_ring(&self, ring: IoUring) {
        let mut pool = self.rings.lock();
        if pool.len() < MAX_POOLED_RINGS {
            pool.push(ring);
        }
    }

    /// The descriptor to read `seg` through, memoised for one call in `cache` so a vector hitting
    /// one segment many times resolves it once.
    fn source<'a>(
        &self,
        seg: &'a Segment,
        cache: &mut HashMap<*const Segment, Source<'a>>,
    ) -> Result<Source<'a>> {
        let key: *const Segment = seg;
        if let Some(s) = cache.get(&key) {
            return Ok(*s);
        }
        let buffered = Source {
            file: seg.file(),
            direct: false,
        };
        let s = if self.buffered_only {
            buffered
        } else {
            match seg.direct() {
                Ok(file) => Source { file, direct: true },
                // File systems without O_DIRECT (tmpfs before Linux 6.6, some FUSE and network
                // file systems) refuse the open with EINVAL. Read through the ordinary buffered
                // descriptor instead: same io_uring batch, no alignment requirement, the page
                // cache in between.
                Err(Error::Io { source, .. }) if source.raw_os_error() == Some(libc::EINVAL) => {
                    buffered
                }
                Err(e) => return Err(e),
            }
        };
        cache.insert(key, s);
        Ok(s)
    }
}

const _: () = assert!(ALIGN.is_power_of_two() && MAX_SQE_LEN & (ALIGN - 1) == 0);
// An SQE's length is a u32.
const _: () = assert!(MAX_SQE_LEN <= u32::MAX as usize);

/// True if `n` is a multiple of ALIGN. (A mask rather than `is_multiple_of`, which is newer than
/// the workspace's rust-version.)
fn block_aligned(n: usize) -> bool {
    n & (ALIGN - 1) == 0
}

fn new_ring() -> io::Result<IoUring> {
    IoUring::new(RING_ENTRIES)
}

impl ReadBackend for UringBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Uring
    }

    /// O_DIRECT reads whole blocks anyway: the first round asks for the rest of the block the
    /// record starts in, so a record that fits there never needs a second device round trip.
    fn read_records(&self, reqs: &mut [ReadRequest<'_>]) {
        for r in reqs.iter_mut() {
            let block_end = (r.offset + r.len as u64).next_multiple_of(ALIGN as u64);
            r.len = (block_end.min(r.segment.header.segment_bytes) - r.offset) as usize;
        }
        super::read_records_in_two_rounds(self, reqs)
    }

    fn read_ranges<'a>(&self, reqs: &mut [ReadRequest<'a>]) {
        let mut cache: HashMap<*const Segment, Source<'a>> = HashMap::new();
        let mut ring: Option<IoUring> = None;
        let mut base = 0;
        for chunk in reqs.chunks_mut(RING_ENTRIES as usize) {
            let mut batch = Batch {
                base,
                plans: Vec::with_capacity(chunk.len()),
            };
            for r in chunk.iter_mut() {
                let seg: &'a Segment = r.segment;
                let plan = self
                    .source(seg, &mut cache)
                    .and_then(|src| Plan::new(seg, src, r.offset, r.len));
                match plan {
                    Ok(Some(p)) => batch.plans.push(Some(p)),
                    Ok(None) => {
                        r.result = Ok(Bytes::new());
                        batch.plans.push(None);
                    }
                    Err(e) => {
                        r.result = Err(e);
                        batch.plans.push(None);
                    }
                }
            }

            if batch.plans.iter().any(Option::is_some) {
                if ring.is_none() {
                    // A new ring can fail only for lack of resources (locked memory, file
                    // descriptors): the batch is then read synchronously below (every plan stays
                    // `Idle`), which is slower but returns the same bytes.
                    ring = self.take_ring().ok();
                }
                if let Some(r) = ring.as_mut() {
                    if let Err(e) = batch.run_ring(r) {
                        // Unsubmitted entries may sit in the ring's queue: it must never be
                        // reused, so it is closed here (which also discards those entries).
                        let in_flight = e.in_flight;
                        ring = None;
                        if in_flight {
                            // The kernel may still write into the buffers of the reads not
                            // reaped: fail them, and leak their buffers.
                            batch.fail_queued(&e.error);
                        } else {
                            // Nothing reached the kernel unreaped: read the rest synchronously.
                            batch.requeue_sync();
                        }
                    }
                }
            }

            for (r, slot) in chunk.iter_mut().zip(batch.plans.iter_mut()) {
                if let Some(p) = slot {
                    r.result = p.finish();
                }
            }
            base += chunk.len();
        }
        if let Some(r) = ring {
            self.put_ring(r);
        }
    }
}

/// Where to read one segment from.
#[derive(Clone, Copy)]
struct Source<'a> {
    file: &'a File,
    /// True for the O_DIRECT descriptor: reads must be `ALIGN`-aligned.
    direct: bool,
}

enum State {
    /// Not (or no longer) in a ring: no ring could be had, or it failed before the kernel saw
    /// the read. `finish` reads synchronously.
    Idle,
    /// Pushed to the ring's submission queue: the kernel may be writing into the buffer, which
    /// must be neither touched nor freed until the completion is reaped.
    Queued,
    /// The ring read this many bytes, fewer than asked and not provably at the end of the file:
    /// the rest is read synchronously.
    Partial(usize),
    /// This many bytes of the buffer are valid (fewer than its length only at the end of the
    /// file).
    Done(usize),
    Failed(io::Error),
}

/// One request's read: the (aligned, for O_DIRECT) file range and the buffer receiving it.
struct Plan<'a> {
    seg: &'a Segment,
    src: Source<'a>,
    /// File offset of `buf[0]`.
    start: u64,
    /// Position of the requested range in `buf`, and its length.
    skip: usize,
    want: usize,
    buf: AlignedBuf,
    state: State,
}

impl<'a> Plan<'a> {
    /// Plans reading `[offset, offset + len)` of `seg`, or `None` if nothing is to be read: an
    /// empty range, or one starting at or after the end of the segment (the file is exactly
    /// `segment_bytes` long, so the result is empty as for any read at EOF). Clamping at the
    /// segment's end also keeps a garbage length (a damaged record header) from allocating a
    /// buffer larger than the file.
    fn new(seg: &'a Segment, src: Source<'a>, offset: u64, len: usize) -> Result<Option<Plan<'a>>> {
        let cap = seg.header.segment_bytes;
        let end = offset.saturating_add(len as u64).min(cap);
        if offset >= end {
            return Ok(None);
        }
        let (start, read_end) = if src.direct {
            let align = ALIGN as u64;
            // Saturating: only a nonsensical `segment_bytes` near u64::MAX could overflow, and
            // the buffer size check below then rejects the range.
            let up = end.div_ceil(align).saturating_mul(align);
            (offset / align * align, up)
        } else {
            (offset, end)
        };
        // At least one byte (`offset < end`); `None` only for a range no allocation can hold.
        let buf = usize::try_from(read_end - start)
            .ok()
            .and_then(AlignedBuf::zeroed)
            .ok_or_else(|| {
                Error::io(
                    "plan io_uring read",
                    &seg.path,
                    io::Error::new(io::ErrorKind::InvalidInput, "read range exceeds memory"),
                )
            })?;
        // `offset >= start` and the difference is below one block (or zero).
        let skip = (offset - start) as usize;
        Ok(Some(Plan {
            seg,
            src,
            start,
            skip,
            want: (end - offset) as usize,
            buf,
            state: State::Idle,
        }))
    }

    /// Length of the `Read` SQE for this plan.
    fn sqe_len(&self) -> u32 {
        // No truncation: MAX_SQE_LEN fits in a u32 (asserted at compile time).
        self.buf.len().min(MAX_SQE_LEN) as u32
    }

    /// Records the result of this plan's completion.
    fn complete(&mut self, res: i32) {
        self.state = if res < 0 {
            match -res {
                // Not expected for regular files (io_uring retries internally), but harmless:
                // do the whole read synchronously.
                libc::EINTR | libc::EAGAIN => State::Partial(0),
                errno => State::Failed(io::Error::from_raw_os_error(errno)),
            }
        } else {
            let n = (res as usize).min(self.buf.len());
            self.after_read(n)
        };
    }

    /// The state after `n` bytes of the buffer have been filled.
    fn after_read(&self, n: usize) -> State {
        if n == self.buf.len() || n == 0 || (self.src.direct && !block_aligned(n)) {
            // Complete, or at the end of the file: a read returning nothing is at EOF, and an
            // O_DIRECT read only stops inside a block where the file ends.
            State::Done(n)
        } else {
            // Fewer bytes than asked: maybe the end of the file, maybe a partial read (or the
            // MAX_SQE_LEN cap). `finish` continues synchronously and finds out.
            State::Partial(n)
        }
    }

    /// Reads the rest of the buffer from `filled` on, synchronously, until it is full or the
    /// file ends. For O_DIRECT, `filled` is a multiple of ALIGN (see `after_read`), so the file
    /// offset, the buffer address and the remaining length all stay aligned.
    fn fill_sync(&mut self, mut filled: usize) -> State {
        while filled < self.buf.len() {
            let dst = &mut self.buf.as_mut_slice()[filled..];
            match self.src.file.read_at(dst, self.start + filled as u64) {
                Ok(0) => break,
                Ok(n) => {
                    filled += n;
                    if self.src.direct && !block_aligned(n) {
                        break; // Stopped inside a block: the end of the file.
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return State::Failed(e),
            }
        }
        State::Done(filled)
    }

    /// The request's result, once the ring is done with the buffer.
    fn finish(&mut self) -> Result<Bytes> {
        let state = std::mem::replace(&mut self.state, State::Idle);
        let state = match state {
            State::Idle => self.fill_sync(0),
            State::Partial(n) => self.fill_sync(n),
            other => other,
        };
        match state {
            State::Done(n) => {
                let from = self.skip.min(n);
                let to = (self.skip + self.want).min(n);
                Ok(Bytes::copy_from_slice(&self.buf.as_slice()[from..to]))
            }
            State::Failed(e) => {
                let op = if self.src.direct {
                    "read segment (io_uring, O_DIRECT)"
                } else {
                    "read segment (io_uring)"
                };
                Err(Error::io(op, &self.seg.path, e))
            }
            // `Queued` plans are turned into `Failed` by `fail_queued` before `finish` runs.
            State::Queued | State::Idle | State::Partial(_) => Err(Error::io(
                "read segment (io_uring)",
                &self.seg.path,
                io::Error::other("read was not completed"),
            )),
        }
    }
}

/// The plans of one submission. Owns their buffers; if it is dropped while reads are still
/// queued (a failed ring, or a panic between submission and reaping) it leaks their buffers
/// rather than free memory the kernel may still write into.
struct Batch<'a> {
    /// Index, in the caller's vector, of the request of `plans[0]`.
    base: usize,
    plans: Vec<Option<Plan<'a>>>,
}

impl Batch<'_> {
    /// Pushes every plan's read to `ring`, submits them all at once and reaps every completion.
    /// `user_data` carries the request's index in the caller's vector. On error, reads not
    /// reaped stay `Queued` and the ring must be discarded.
    fn run_ring(&mut self, ring: &mut IoUring) -> Result<(), RingError> {
        let base = self.base;
        let mut pushed = 0usize;
        {
            let mut sq = ring.submission();
            for (i, slot) in self.plans.iter_mut().enumerate() {
                let Some(p) = slot else { continue };
                let entry = opcode::Read::new(
                    types::Fd(p.src.file.as_raw_fd()),
                    p.buf.as_mut_ptr(),
                    p.sqe_len(),
                )
                .offset(p.start)
                .build()
                .user_data((base + i) as u64);
                // A full queue cannot happen (a batch has at most RING_ENTRIES plans and the
                // queue is empty between batches); if it did, the plan would stay `Idle` and be
                // read synchronously.
                //
                // SAFETY: the entry points at `p.buf`, a heap allocation of at least `sqe_len`
                // bytes owned by this batch. It stays alive and unmoved until the completion is
                // reaped: moving the `Plan` does not move the heap block, nothing reads or
                // writes the buffer while the plan is `Queued`, and if the completion is never
                // reaped (ring failure: `fail_queued`; panic: `Batch::drop`) the buffer is
                // leaked instead of freed. The descriptor belongs to the segment, borrowed for
                // longer than this call, and every completion is reaped before the call returns.
                if unsafe { sq.push(&entry) }.is_ok() {
                    p.state = State::Queued;
                    pushed += 1;
                }
            }
        }

        let mut reaped = 0usize;
        let mut idle_waits = 0;
        while reaped < pushed {
            // Normally one call: submits the whole batch and waits for all of it. It returns
            // early if the kernel stopped submitting at an entry it rejected (that entry gets an
            // error completion) or if a signal interrupted the wait; the loop then reaps what
            // completed and submits or waits for the rest.
            match ring.submit_and_wait(pushed - reaped) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                // Out of kernel resources with completions pending: reaping them frees some.
                Err(e)
                    if matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::EBUSY))
                        && !ring.completion().is_empty() => {}
                Err(error) => return Err(RingError::unreaped(ring, pushed - reaped, error)),
            }
            let before = reaped;
            for cqe in ring.completion() {
                let slot = (cqe.user_data() as usize)
                    .checked_sub(base)
                    .and_then(|i| self.plans.get_mut(i));
                match slot {
                    Some(Some(p)) if matches!(p.state, State::Queued) => {
                        p.complete(cqe.result());
                        reaped += 1;
                    }
                    // Not one of ours (impossible: only this batch uses the ring); ignore it.
                    _ => {}
                }
            }
            idle_waits = if reaped == before { idle_waits + 1 } else { 0 };
            if idle_waits == RING_IDLE_WAITS_MAX {
                let error = io::Error::other(format!(
                    "io_uring reaped no completion in {RING_IDLE_WAITS_MAX} waits in a row"
                ));
                return Err(RingError::unreaped(ring, pushed - reaped, error));
            }
        }
        Ok(())
    }

    /// After a ring failure: every read not reaped fails with `e`, and its buffer, which the
    /// kernel may still write into, is leaked rather than freed.
    fn fail_queued(&mut self, e: &io::Error) {
        for p in self.plans.iter_mut().flatten() {
            if matches!(p.state, State::Queued) {
                p.state = State::Failed(copy_io_error(e));
                p.buf.leak_on_drop = true;
            }
        }
    }

    /// After a ring failure with no read in flight (the ring closed, so queued entries can no
    /// longer be submitted): the reads not reaped are done synchronously by `finish`.
    fn requeue_sync(&mut self) {
        for p in self.plans.iter_mut().flatten() {
            if matches!(p.state, State::Queued) {
                p.state = State::Idle;
            }
        }
    }
}

/// A failed `io_uring_enter`, or a submission that stopped making progress.
struct RingError {
    error: io::Error,
    /// Whether reads may still be in flight (submitted to the kernel but not reaped).
    in_flight: bool,
}

impl RingError {
    /// The error of a submission that stops with `unreaped` reads not reaped: each is either
    /// still in the submission queue (never seen by the kernel) or in flight.
    fn unreaped(ring: &mut IoUring, unreaped: usize, error: io::Error) -> RingError {
        RingError {
            error,
            in_flight: unreaped > ring.submission().len(),
        }
    }
}

impl Drop for Batch<'_> {
    fn drop(&mut self) {
        for p in self.plans.iter_mut().flatten() {
            if matches!(p.state, State::Queued) {
                p.buf.leak_on_drop = true;
            }
        }
    }
}

fn copy_io_error(e: &io::Error) -> io::Error {
    match e.raw_os_error() {
        Some(code) => io::Error::from_raw_os_error(code),
        None => io::Error::new(e.kind(), e.to_string()),
    }
}

/// A zero-initialised heap buffer aligned to `ALIGN`, as O_DIRECT requires.
struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
    /// The layout `ptr` was allocated with (`len` bytes aligned to `ALIGN`).
    layout: Layout,
    /// Set when the kernel may still write into the buffer: dropping it then leaks the memory
    /// instead of returning it to the allocator.
    leak_on_drop: bool,
}

impl AlignedBuf {
    /// Allocates `len` zeroed bytes; `None` if `len` is 0 or too large for any allocation
    /// (rounded up to `ALIGN`, beyond `isize::MAX`). Zeroing means the buffer is always
    /// initialised, so slicing it is sound whatever the kernel wrote.
    fn zeroed(len: usize) -> Option<AlignedBuf> {
        if len == 0 {
            return None;
        }
        let layout = Layout::from_size_align(len, ALIGN).ok()?;
        // SAFETY: the layout has a non-zero size (checked above).
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            alloc::handle_alloc_error(layout)
        };
        Some(AlignedBuf {
            ptr,
            len,
            layout,
            leak_on_drop: false,
        })
    }

    fn len(&self) -> usize {
        self.len
    }

    fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` points at `len` initialised bytes owned by `self`; callers only slice
        // the buffer when no read into it is in flight.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`, and `&mut self` makes the slice unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if self.leak_on_drop {
            return;
        }
        // SAFETY: `ptr` was allocated in `zeroed` with exactly this layout and is freed once.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

#[cfg(test)]
mod tests;
