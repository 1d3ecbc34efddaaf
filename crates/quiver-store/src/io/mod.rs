//! Storage backends: how record bytes get from segment files into memory. Every backend reads a
//! whole vector of requests per call (the paper's multiread); the partition layer never issues
//! a read one key at a time.

use bytes::Bytes;

use crate::error::Result;
use crate::log::format::{self, RECORD_HEADER_LEN};
use crate::log::segment::Segment;
use crate::options::BackendKind;

pub mod mmap;
pub mod pread;
pub mod uring;

/// One read of a vector.
pub struct ReadRequest<'a> {
    pub segment: &'a Segment,
    pub offset: u64,
    pub len: usize,
    /// Filled by the backend: the bytes read (shorter than `len` at the end of the file).
    pub result: Result<Bytes>,
}

impl<'a> ReadRequest<'a> {
    pub fn new(segment: &'a Segment, offset: u64, len: usize) -> ReadRequest<'a> {
        ReadRequest {
            segment,
            offset,
            len,
            result: Ok(Bytes::new()),
        }
    }
}

pub trait ReadBackend: Send + Sync {
    fn kind(&self) -> BackendKind;

    /// Reads every request's byte range, as one batch where the backend can.
    fn read_ranges(&self, reqs: &mut [ReadRequest<'_>]);

    /// Reads the whole record starting at each request's offset; `len` is a first guess of its
    /// length. Records longer than the guess get a second batched round.
    fn read_records(&self, reqs: &mut [ReadRequest<'_>]) {
        read_records_in_two_rounds(self, reqs)
    }
}

/// The usual `read_records`: one batched round of `len` bytes each, then a second batched round
/// for the records whose header says they are longer.
pub fn read_records_in_two_rounds<B: ReadBackend + ?Sized>(
    backend: &B,
    reqs: &mut [ReadRequest<'_>],
) {
    backend.read_ranges(reqs);
    let mut again: Vec<usize> = Vec::new();
    for (i, r) in reqs.iter_mut().enumerate() {
        if let Ok(b) = &r.result {
            if let Some(h) = format::parse_header(b) {
                if h.record_len() > b.len() {
                    r.len = h.record_len();
                    again.push(i);
                }
            }
        }
    }
    if again.is_empty() {
        return;
    }
    let mut second: Vec<ReadRequest<'_>> = again
        .iter()
        .map(|&i| ReadRequest::new(reqs[i].segment, reqs[i].offset, reqs[i].len))
        .collect();
    backend.read_ranges(&mut second);
    for (&i, r) in again.iter().zip(second) {
        reqs[i].result = r.result;
    }
}

/// Builds the backend of the given kind.
pub fn backend(kind: BackendKind) -> Result<Box<dyn ReadBackend>> {
    Ok(match kind {
        BackendKind::Mmap => Box::new(mmap::MmapBackend),
        BackendKind::Pread => Box::new(pread::PreadBackend),
        BackendKind::Uring => Box::new(uring::UringBackend::new()?),
    })
}

/// First-round read length for a record whose key is `key_len` bytes: header + key + a typical
/// value, so most records arrive in one read.
pub fn record_read_hint(key_len: usize, typical_value_len: usize) -> usize {
    RECORD_HEADER_LEN + key_len + typical_value_len
}
