//! Sequential reading of a segment: recovery, index rebuilds, compaction and `check` walk the
//! log with this scanner. It tells a clean end, a torn tail and damage in the middle apart.

use crate::error::Result;
use crate::log::format::{self, RecordHeader, RECORD_ALIGN, RECORD_HEADER_LEN, SEGMENT_HEADER_LEN};
use crate::log::segment::Segment;

/// How much of a segment the scanner reads per call. A read is one system call, which a
/// kernel without preemption does not interrupt: a megabyte read into new page-cache pages
/// was a 2.5 ms run of a compaction on a serving thread's core (BENCHMARKS §53).
const READ_CHUNK_BYTES: usize = 256 << 10;

/// One step of a scan.
#[derive(Debug)]
pub enum Step {
    /// A record whose header and key verified; `scanner.record()` holds its bytes.
    Record {
        offset: u64,
        header: RecordHeader,
        /// With `verify_values`, whether the value checksum matched; otherwise true.
        value_ok: bool,
    },
    /// Bytes at `offset` are not a valid record, but a valid record follows at `resume_at`:
    /// damage in the middle of the log. The records in between are lost.
    Damaged {
        offset: u64,
        resume_at: u64,
        reason: &'static str,
    },
    /// The log ends at `offset`. `torn` says whether invalid bytes (a torn write) follow.
    End {
        offset: u64,
        torn: Option<&'static str>,
    },
}

pub struct Scanner<'a> {
    segment: &'a Segment,
    /// Stop here even if the file goes on (a snapshot's end).
    limit: u64,
    verify_values: bool,
    buf: Vec<u8>,
    /// File offset of `buf[0]`.
    buf_start: u64,
    pos: u64,
    /// Range of the current record within `buf`.
    current: std::ops::Range<usize>,
}

impl<'a> Scanner<'a> {
    /// Scans `segment` from `start` (at least the first record) up to `limit` bytes.
    pub fn new(segment: &'a Segment, start: u64, limit: u64, verify_values: bool) -> Scanner<'a> {
        let limit = limit.min(segment.header.segment_bytes);
        Scanner {
            segment,
            limit,
            verify_values,
            buf: Vec::new(),
            buf_start: start.max(SEGMENT_HEADER_LEN as u64),
            pos: start.max(SEGMENT_HEADER_LEN as u64),
            current: 0..0,
        }
    }

    /// Bytes of the record returned by the last `Step::Record`.
    pub fn record(&self) -> &[u8] {
        &self.buf[self.current.clone()]
    }

    /// Makes `buf` hold `[pos, pos + len)` (or as much of it as the file has). Returns how many
    /// bytes from `pos` are available.
    fn fill(&mut self, pos: u64, len: usize) -> Result<usize> {
        let have_from = pos.checked_sub(self.buf_start).map(|d| d as usize);
        if let Some(from) = have_from {
            if from + len <= self.buf.len() {
                return Ok(len);
            }
        }
        let want = len
            .max(READ_CHUNK_BYTES)
            .min((self.limit.saturating_sub(pos)) as usize);
        self.buf.resize(want, 0);
        let n = self.segment.read_at(&mut self.buf[..want], pos)?;
        self.buf.truncate(n);
        self.buf_start = pos;
        Ok(n.min(len))
    }

    pub fn next_step(&mut self) -> Result<Step> {
        let at = self.pos;
        if at + RECORD_HEADER_LEN as u64 > self.limit {
            return Ok(Step::End {
                offset: at,
                torn: None,
            });
        }
        let n = self.fill(at, RECORD_HEADER_LEN)?;
        if n < RECORD_HEADER_LEN {
            return Ok(Step::End {
                offset: at,
                torn: None,
            });
        }
        let rel = (at - self.buf_start) as usize;
        if format::is_zero_header(&self.buf[rel..]) {
            return Ok(Step::End {
                offset: at,
                torn: None,
            });
        }
        match self.try_record(at)? {
            Ok((header, value_ok)) => {
                self.pos = at + header.record_len() as u64;
                Ok(Step::Record {
                    offset: at,
                    header,
                    value_ok,
                })
            }
            Err(reason) => match self.resync(at + RECORD_ALIGN as u64)? {
                Some(resume_at) => {
                    self.pos = resume_at;
                    Ok(Step::Damaged {
                        offset: at,
                        resume_at,
                        reason,
                    })
                }
                None => Ok(Step::End {
                    offset: at,
                    torn: Some(reason),
                }),
            },
        }
    }

    /// Verifies the record at `at`; on success `current` covers it.
    fn try_record(&mut self, at: u64) -> Result<Result<(RecordHeader, bool), &'static str>> {
        let rel = (at - self.buf_start) as usize;
        let Some(h) = format::parse_header(&self.buf[rel..]) else {
            return Ok(Err("invalid record header"));
        };
        let len = h.record_len();
        if at + len as u64 > self.limit {
            return Ok(Err("record runs past the end of the segment"));
        }
        if self.fill(at, len)? < len {
            return Ok(Err("record runs past the end of the file"));
        }
        let rel = (at - self.buf_start) as usize;
        let bytes = &self.buf[rel..rel + len];
        let checked = match format::check_header(bytes) {
            Ok(checked) => checked,
            Err(reason) => return Ok(Err(reason)),
        };
        let value_ok = !self.verify_values || format::value_checksum_ok(bytes, &checked);
        self.current = rel..rel + len;
        Ok(Ok((h, value_ok)))
    }

    /// Finds the next aligned offset at or after `from` where a valid record starts.
    fn resync(&mut self, from: u64) -> Result<Option<u64>> {
        let mut at = from;
        while at + RECORD_HEADER_LEN as u64 <= self.limit {
            if self.fill(at, RECORD_HEADER_LEN)? < RECORD_HEADER_LEN {
                return Ok(None);
            }
            let rel = (at - self.buf_start) as usize;
            if format::parse_header(&self.buf[rel..]).is_some() && self.try_record(at)?.is_ok() {
                return Ok(Some(at));
            }
            at += RECORD_ALIGN as u64;
        }
        Ok(None)
    }
}
