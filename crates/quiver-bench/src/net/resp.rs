//! The load generator's reply counting, on the shared RESP scanner (`quiver_resp::Scanner`):
//! replies are counted without being built.
//!
//! The scanner is a byte-driven state machine: it keeps no copy of a partial reply, so a reply
//! split across reads at any byte is resumed where it stopped, the read buffer is reused whole
//! on every read, and a bulk payload is skipped by arithmetic (never looked at). Per reply this
//! reports only what the benchmark counts: whether it holds an error, and how many nulls
//! (absent keys of a GET or MGET) it holds. Nothing is allocated while scanning.
//!
//! Every RESP2 and RESP3 reply shape is understood: simple strings, errors, integers, bulk
//! strings, RESP2 null bulk and null array, arrays, and RESP3 null, double, boolean, big
//! number, blob error, verbatim string, map, set, attribute and push. Attributes annotate the
//! value that follows them and push messages are out of band: neither counts as a reply.
//! Streamed (`$?`) strings and aggregates are not supported (Redis never sends them).
//!
//! Requests are encoded with `quiver_resp` too (`encode_command`, `put_header`).

use quiver_resp::limits::{MAX_AGGREGATE_LEN, MAX_BULK_LEN};
use quiver_resp::{AggregateType, BlobType, Event, LineType, ReplyLimits, Scanner};

pub use quiver_resp::ScanError;

/// Deepest aggregate nesting the scanner follows (replies to GET/MGET/SET/MSET nest at most
/// one level; a server nesting deeper than this is broken or hostile).
pub const NESTING_MAX: usize = 32;
/// Bytes of an error reply's text kept for the report (the rest is skipped).
pub const ERROR_TEXT_MAX: usize = 128;

/// What the load generator accepts: Redis's bulk and aggregate limits, [`NESTING_MAX`] levels,
/// lines of any length (they are never buffered).
const LIMITS: ReplyLimits = ReplyLimits {
    max_bulk_len: MAX_BULK_LEN,
    max_aggregate_len: MAX_AGGREGATE_LEN,
    max_depth: NESTING_MAX,
    max_line_len: usize::MAX,
};

/// What one complete top-level reply held.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reply {
    /// The reply is an error, or an aggregate holding one.
    pub error: bool,
    /// Null values in the reply (`$-1`, `*-1`, `_`): absent keys of a GET or an MGET.
    pub nulls: u32,
}

/// Counts replies in a byte stream; see the module documentation.
#[derive(Clone, Debug)]
pub struct ReplyScanner {
    scan: Scanner,
    /// What the current top-level reply held so far.
    current: Reply,
    /// The beginning of the error being scanned, then of the last complete one.
    error_text: [u8; ERROR_TEXT_MAX],
    /// Bytes of `error_text` from the error being scanned.
    error_len: usize,
    /// Bytes of `error_text` from the last complete error.
    error_kept: usize,
}

impl Default for ReplyScanner {
    fn default() -> Self {
        ReplyScanner::new()
    }
}

impl ReplyScanner {
    pub fn new() -> ReplyScanner {
        ReplyScanner {
            scan: Scanner::new(LIMITS),
            current: Reply::default(),
            error_text: [0; ERROR_TEXT_MAX],
            error_len: 0,
            error_kept: 0,
        }
    }

    /// Whether the scanner is between replies (nothing partial pending).
    pub fn is_idle(&self) -> bool {
        self.scan.is_idle()
    }

    /// Consumes `data`, calling `on_reply(reply, error_text)` for every top-level reply that
    /// completes in it; `error_text` is the beginning (at most [`ERROR_TEXT_MAX`] bytes) of
    /// the last error seen in that reply, empty if it holds none. After an error the stream
    /// cannot be resynchronized: the connection must be dropped.
    #[inline]
    pub fn feed<F: FnMut(Reply, &[u8])>(
        &mut self,
        mut data: &[u8],
        mut on_reply: F,
    ) -> Result<(), ScanError> {
        loop {
            let step = self.scan.step(data)?;
            if !step.error_text.is_empty() {
                self.keep_error_text(&data[step.error_text]);
            }
            data = &data[step.consumed..];
            let Some(event) = step.event else {
                return Ok(());
            };
            let complete = match event {
                Event::Line { ty, .. } => {
                    match ty {
                        LineType::Error => self.error_done(),
                        LineType::Null => self.current.nulls += 1,
                        _ => {}
                    }
                    self.scan.depth() == 0
                }
                Event::Blob { ty, .. } => {
                    if ty == BlobType::Error {
                        self.error_done();
                    }
                    self.scan.depth() == 0
                }
                // RESP2's null bulk string and null array.
                Event::Null { .. } => {
                    self.current.nulls += 1;
                    self.scan.depth() == 0
                }
                Event::Start { .. } => false,
                Event::End { ty } => match ty {
                    _ if self.scan.depth() > 0 => false,
                    // The annotated value follows: the attribute does not count.
                    AggregateType::Attribute => false,
                    // Out of band: not a reply to any request.
                    AggregateType::Push => {
                        self.current = Reply::default();
                        false
                    }
                    _ => true,
                },
            };
            if complete {
                let reply = std::mem::take(&mut self.current);
                let text = if reply.error {
                    &self.error_text[..self.error_kept]
                } else {
                    &[][..]
                };
                on_reply(reply, text);
            }
        }
    }

    fn keep_error_text(&mut self, bytes: &[u8]) {
        let n = bytes.len().min(ERROR_TEXT_MAX - self.error_len);
        self.error_text[self.error_len..self.error_len + n].copy_from_slice(&bytes[..n]);
        self.error_len += n;
    }

    /// An error value is complete: the reply holds an error, and this is its text.
    fn error_done(&mut self) {
        self.current.error = true;
        self.error_kept = self.error_len;
        self.error_len = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan_all(chunks: &[&[u8]]) -> Result<Vec<(Reply, Vec<u8>)>, ScanError> {
        let mut s = ReplyScanner::new();
        let mut out = Vec::new();
        for c in chunks {
            s.feed(c, |r, t| out.push((r, t.to_vec())))?;
        }
        Ok(out)
    }

    fn plain() -> Reply {
        Reply::default()
    }

    fn nulls(n: u32) -> Reply {
        Reply {
            error: false,
            nulls: n,
        }
    }

    fn error() -> Reply {
        Reply {
            error: true,
            nulls: 0,
        }
    }

    /// Every reply shape, with what the scanner must report for it.
    fn shapes() -> Vec<(&'static [u8], Vec<Reply>)> {
        vec![
            (b"+OK\r\n", vec![plain()]),
            (b"-ERR unknown command 'x'\r\n", vec![error()]),
            (b":42\r\n", vec![plain()]),
            (b":-7\r\n", vec![plain()]),
            (b"$5\r\nhello\r\n", vec![plain()]),
            (b"$0\r\n\r\n", vec![plain()]),
            // A payload holding CR LF and type bytes is skipped, not parsed.
            (b"$6\r\n\r\n*3\r\n\r\n", vec![plain()]),
            (b"$-1\r\n", vec![nulls(1)]),
            (b"*-1\r\n", vec![nulls(1)]),
            (b"*0\r\n", vec![plain()]),
            // An MGET reply: bulks and nulls.
            (
                b"*4\r\n$3\r\nabc\r\n$-1\r\n$1\r\nx\r\n$-1\r\n",
                vec![nulls(2)],
            ),
            (b"*2\r\n*1\r\n:1\r\n*0\r\n", vec![plain()]),
            (b"*2\r\n+OK\r\n-ERR inner\r\n", vec![error()]),
            // RESP3.
            (b"_\r\n", vec![nulls(1)]),
            (b",3.14\r\n", vec![plain()]),
            (b",-inf\r\n", vec![plain()]),
            (b"#t\r\n", vec![plain()]),
            (
                b"(3492890328409238509324850943850943825024385\r\n",
                vec![plain()],
            ),
            (b"!21\r\nSYNTAX invalid syntax\r\n", vec![error()]),
            (b"=15\r\ntxt:Some string\r\n", vec![plain()]),
            (b"%2\r\n+a\r\n:1\r\n+b\r\n_\r\n", vec![nulls(1)]),
            (b"~3\r\n:1\r\n:2\r\n:3\r\n", vec![plain()]),
            (b"%0\r\n", vec![plain()]),
            // An attribute annotates the reply that follows it: one reply, not two.
            (
                b"|1\r\n+key-popularity\r\n%1\r\n$1\r\na\r\n,0.19\r\n*2\r\n:1\r\n:2\r\n",
                vec![plain()],
            ),
            (b"|0\r\n+OK\r\n", vec![plain()]),
            // An attribute inside an aggregate does not count as one of its elements.
            (b"*2\r\n|1\r\n+a\r\n+b\r\n:1\r\n:2\r\n", vec![plain()]),
            // A push message is out of band: no reply at all, then the real reply.
            (
                b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$-1\r\n$3\r\nabc\r\n",
                vec![plain()],
            ),
            (b">0\r\n", vec![]),
            // Pipelined replies in one stream.
            (
                b"+OK\r\n$-1\r\n-WRONGTYPE x\r\n:1\r\n",
                vec![plain(), nulls(1), error(), plain()],
            ),
        ]
    }

    #[test]
    fn every_shape_whole() {
        for (bytes, want) in shapes() {
            let got: Vec<Reply> = scan_all(&[bytes])
                .unwrap_or_else(|e| panic!("{:?}: {e}", String::from_utf8_lossy(bytes)))
                .into_iter()
                .map(|(r, _)| r)
                .collect();
            assert_eq!(got, want, "{:?}", String::from_utf8_lossy(bytes));
        }
    }

    #[test]
    fn every_shape_split_at_every_byte() {
        for (bytes, want) in shapes() {
            let whole = scan_all(&[bytes]).unwrap();
            for at in 0..=bytes.len() {
                let (a, b) = bytes.split_at(at);
                assert_eq!(
                    scan_all(&[a, b]).unwrap(),
                    whole,
                    "{:?} split at {at}",
                    String::from_utf8_lossy(bytes)
                );
            }
            let singles: Vec<&[u8]> = bytes.chunks(1).collect();
            assert_eq!(scan_all(&singles).unwrap(), whole);
            assert_eq!(whole.len(), want.len());
        }
    }

    #[test]
    fn all_shapes_in_one_stream_split_everywhere() {
        let stream: Vec<u8> = shapes().iter().flat_map(|(b, _)| b.to_vec()).collect();
        let want: Vec<Reply> = shapes().into_iter().flat_map(|(_, w)| w).collect();
        for at in 0..=stream.len() {
            let (a, b) = stream.split_at(at);
            let got: Vec<Reply> = scan_all(&[a, b])
                .unwrap()
                .into_iter()
                .map(|(r, _)| r)
                .collect();
            assert_eq!(got, want, "split at {at}");
        }
    }

    #[test]
    fn error_text_is_kept_and_bounded() {
        let got = scan_all(&[b"-ERR no such key\r\n", b"!5\r\nOOPS!\r\n"]).unwrap();
        assert_eq!(got[0].1, b"ERR no such key");
        assert_eq!(got[1].1, b"OOPS!");
        let long = format!("-ERR {}\r\n", "x".repeat(1000));
        let got = scan_all(&[long.as_bytes(), b"+OK\r\n"]).unwrap();
        assert_eq!(got[0].1.len(), ERROR_TEXT_MAX);
        assert!(got[0].1.starts_with(b"ERR xxx"));
        assert!(got[1].1.is_empty());
        // Split inside the error text: kept whole.
        let got = scan_all(&[b"-ERR sp", b"lit\r\n"]).unwrap();
        assert_eq!(got[0].1, b"ERR split");
    }

    #[test]
    fn partial_replies_are_not_reported() {
        let mut s = ReplyScanner::new();
        let mut n = 0;
        s.feed(b"*2\r\n$3\r\nabc\r\n$3\r\nab", |_, _| n += 1)
            .unwrap();
        assert_eq!(n, 0);
        assert!(!s.is_idle());
        s.feed(b"c\r\n", |_, _| n += 1).unwrap();
        assert_eq!(n, 1);
        assert!(s.is_idle());
    }

    #[test]
    fn malformed_replies_are_errors() {
        let bad: &[(&[u8], ScanError)] = &[
            (b"?\r\n", ScanError::UnknownType(b'?')),
            (b"$x\r\n", ScanError::BadNumber),
            (b"$\r\n", ScanError::BadNumber),
            (b"$?\r\n", ScanError::BadNumber),
            (b"$--1\r\n", ScanError::BadNumber),
            (b"$-2\r\n", ScanError::BadLength(-2)),
            (b"%-1\r\n", ScanError::BadLength(-1)),
            (b"$99999999999\r\n", ScanError::BadLength(99_999_999_999)),
            (b"$12345678901234567890\r\n", ScanError::BadNumber),
            (b"+OK\rX", ScanError::BadLineEnd),
            (b"$2\r\nabXY", ScanError::BadLineEnd),
            (b"$2\r\nab\rX", ScanError::BadLineEnd),
            (b"*1\r:", ScanError::BadLineEnd),
        ];
        for (bytes, want) in bad {
            assert_eq!(
                scan_all(&[bytes]).unwrap_err(),
                *want,
                "{:?}",
                String::from_utf8_lossy(bytes)
            );
        }
        let deep = "*1\r\n".repeat(NESTING_MAX + 1);
        assert_eq!(
            scan_all(&[deep.as_bytes()]).unwrap_err(),
            ScanError::TooDeep
        );
        let ok = format!("{}:1\r\n", "*1\r\n".repeat(NESTING_MAX));
        assert_eq!(scan_all(&[ok.as_bytes()]).unwrap(), vec![(plain(), vec![])]);
    }
}
