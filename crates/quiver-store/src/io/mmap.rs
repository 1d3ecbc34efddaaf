//! Memory-mapped segments: for page-cache-resident data. A vector read first prefetches every
//! record's first cache line, then hands out each record as a slice of the mapping — no copy
//! (Killer-Microsecond recipe: issue all the misses, then consume).

use super::{ReadBackend, ReadRequest};
use crate::log::format::{self, RECORD_HEADER_LEN};
use crate::options::BackendKind;

pub struct MmapBackend;

impl MmapBackend {
    /// A slice of the mapping: no copy, no allocation.
    fn slice(r: &mut ReadRequest<'_>, whole_record: bool) {
        r.result = r.segment.map().map(|map| {
            let start = (r.offset as usize).min(map.len());
            let mut len = r.len;
            if whole_record {
                let head_end = (start + RECORD_HEADER_LEN).min(map.len());
                if let Some(h) = format::parse_header(&map[start..head_end]) {
                    len = h.record_len();
                }
            }
            let end = (start + len).min(map.len());
            map.slice(start..end)
        });
    }

    /// Prefetches the cache lines of each record's expected extent (`len` is the first-round
    /// guess: header, key and a typical value), so the misses of the whole vector overlap.
    fn prefetch(reqs: &[ReadRequest<'_>]) {
        /// Lines prefetched per record at most.
        const PREFETCH_LINES_MAX: usize = 4;
        for r in reqs {
            if let Ok(map) = r.segment.map() {
                let start = r.offset as usize;
                let end = (start + r.len.max(1)).min(map.len());
                let mut line = start & !63;
                for _ in 0..PREFETCH_LINES_MAX {
                    if line >= end {
                        break;
                    }
                    prefetch_read(map[line..].as_ptr());
                    line += 64;
                }
            }
        }
    }
}

impl ReadBackend for MmapBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Mmap
    }

    fn read_ranges(&self, reqs: &mut [ReadRequest<'_>]) {
        Self::prefetch(reqs);
        for r in reqs {
            Self::slice(r, false);
        }
    }

    fn read_records(&self, reqs: &mut [ReadRequest<'_>]) {
        Self::prefetch(reqs);
        for r in reqs {
            Self::slice(r, true);
        }
    }
}

#[inline]
fn prefetch_read(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetch is a hint; it never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch(p as *const i8, std::arch::x86_64::_MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
