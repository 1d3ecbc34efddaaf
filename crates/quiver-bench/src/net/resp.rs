//! The load generator's own RESP: request encoding into a reused buffer, and a reply scanner
//! that counts replies without building them.
//!
//! The scanner is a byte-driven state machine: it keeps no copy of a partial reply, so a reply
//! split across reads at any byte is resumed where it stopped, the read buffer is reused whole
//! on every read, and a bulk payload is skipped by arithmetic (never looked at). Per reply it
//! reports only what the benchmark counts: whether it holds an error, and how many nulls
//! (absent keys of a GET or MGET) it holds. It allocates nothing, ever.
//!
//! Every RESP2 and RESP3 reply shape is understood: simple strings, errors, integers, bulk
//! strings, RESP2 null bulk and null array, arrays, and RESP3 null, double, boolean, big
//! number, blob error, verbatim string, map, set, attribute and push. Attributes annotate the
//! value that follows them and push messages are out of band: neither counts as a reply.
//! Streamed (`$?`) strings and aggregates are not supported (Redis never sends them).

use std::fmt;

/// Deepest aggregate nesting the scanner follows (replies to GET/MGET/SET/MSET nest at most
/// one level; a server nesting deeper than this is broken or hostile).
pub const NESTING_MAX: usize = 32;
/// Bytes of an error reply's text kept for the report (the rest is skipped).
pub const ERROR_TEXT_MAX: usize = 128;
/// Largest bulk length accepted: Redis's `proto-max-bulk-len` (512 MiB).
pub const BULK_LEN_MAX: u64 = 512 << 20;
/// Largest aggregate element count accepted (Redis's multibulk limit).
pub const AGGREGATE_LEN_MAX: u64 = i32::MAX as u64;
/// Digits of a length header: 19 keeps the value within an `i64`.
const NUMBER_DIGITS_MAX: u8 = 19;

/// What one complete top-level reply held.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reply {
    /// The reply is an error, or an aggregate holding one.
    pub error: bool,
    /// Null values in the reply (`$-1`, `*-1`, `_`): absent keys of a GET or an MGET.
    pub nulls: u32,
}

/// Why the bytes are not a RESP reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScanError {
    /// A byte that starts no RESP type.
    UnknownType(u8),
    /// A length header that is not a (possibly negative) decimal number.
    BadNumber,
    /// A negative length other than the null `-1`, or a length above the limits.
    BadLength(i64),
    /// CR not followed by LF, or a bulk payload not followed by CRLF.
    BadLineEnd,
    /// Aggregates nested deeper than [`NESTING_MAX`].
    TooDeep,
}

impl fmt::Display for ScanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScanError::UnknownType(b) => write!(f, "unknown reply type byte 0x{b:02x}"),
            ScanError::BadNumber => f.write_str("a length that is not a number"),
            ScanError::BadLength(n) => write!(f, "length {n} out of range"),
            ScanError::BadLineEnd => f.write_str("a line not ended by CRLF"),
            ScanError::TooDeep => write!(f, "aggregates nested deeper than {NESTING_MAX}"),
        }
    }
}

impl std::error::Error for ScanError {}

/// The kind of a line-shaped value (the whole value is one line after the type byte).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LineKind {
    /// `+`, `:`, `,`, `#`, `(`: counted as a plain value.
    Plain,
    /// `-`: an error; its text is kept.
    Error,
    /// `_`: the RESP3 null.
    Null,
}

/// What a length header introduces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum HeaderKind {
    /// `$` and `=`: a payload of that many bytes.
    Bulk,
    /// `!`: a blob error.
    BlobError,
    /// `*`, `~`: that many values.
    Array,
    /// `%`: that many key-value pairs.
    Map,
    /// `|`: pairs annotating the next value; not a value itself.
    Attribute,
    /// `>`: an out-of-band message.
    Push,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Expecting a type byte.
    Type,
    /// Inside a line value, before its CR.
    Line(LineKind),
    /// A line value's CR was seen.
    LineLf,
    /// Inside a length header.
    Number {
        kind: HeaderKind,
        negative: bool,
        digits: u8,
        value: u64,
    },
    /// A length header's CR was seen.
    NumberLf { kind: HeaderKind, value: i64 },
    /// Skipping a bulk payload; `error` keeps its text (a blob error).
    Payload { remaining: u64, error: bool },
    /// Expecting the CR after a payload.
    PayloadCr,
    /// Expecting the LF after a payload.
    PayloadLf,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FrameKind {
    Value,
    Attribute,
    /// A push message at the top level: discarded when complete.
    Push,
}

#[derive(Clone, Copy, Debug)]
struct Frame {
    remaining: u64,
    kind: FrameKind,
}

/// Counts replies in a byte stream; see the module documentation.
#[derive(Clone, Debug)]
pub struct ReplyScanner {
    state: State,
    stack: [Frame; NESTING_MAX],
    depth: usize,
    /// What the current top-level reply held so far.
    current: Reply,
    error_text: [u8; ERROR_TEXT_MAX],
    error_len: usize,
}

impl Default for ReplyScanner {
    fn default() -> Self {
        ReplyScanner::new()
    }
}

impl ReplyScanner {
    pub fn new() -> ReplyScanner {
        ReplyScanner {
            state: State::Type,
            stack: [Frame {
                remaining: 0,
                kind: FrameKind::Value,
            }; NESTING_MAX],
            depth: 0,
            current: Reply::default(),
            error_text: [0; ERROR_TEXT_MAX],
            error_len: 0,
        }
    }

    /// Whether the scanner is between replies (nothing partial pending).
    pub fn is_idle(&self) -> bool {
        self.state == State::Type && self.depth == 0
    }

    /// Consumes `data`, calling `on_reply(reply, error_text)` for every top-level reply that
    /// completes in it; `error_text` is the beginning (at most [`ERROR_TEXT_MAX`] bytes) of
    /// the last error seen in that reply, empty if it holds none. After an error the stream
    /// cannot be resynchronized: the connection must be dropped.
    pub fn feed<F: FnMut(Reply, &[u8])>(
        &mut self,
        data: &[u8],
        mut on_reply: F,
    ) -> Result<(), ScanError> {
        let mut i = 0;
        while i < data.len() {
            match self.state {
                State::Type => {
                    let b = data[i];
                    i += 1;
                    self.state = match b {
                        b'+' | b':' | b',' | b'#' | b'(' => State::Line(LineKind::Plain),
                        b'-' => {
                            self.current.error = true;
                            self.error_len = 0;
                            State::Line(LineKind::Error)
                        }
                        b'_' => State::Line(LineKind::Null),
                        b'$' | b'=' => number(HeaderKind::Bulk),
                        b'!' => number(HeaderKind::BlobError),
                        b'*' | b'~' => number(HeaderKind::Array),
                        b'%' => number(HeaderKind::Map),
                        b'|' => number(HeaderKind::Attribute),
                        b'>' => number(HeaderKind::Push),
                        other => return Err(ScanError::UnknownType(other)),
                    };
                }
                State::Line(kind) => {
                    let rest = &data[i..];
                    let (n, found) = match rest.iter().position(|&b| b == b'\r') {
                        Some(p) => (p, true),
                        None => (rest.len(), false),
                    };
                    if kind == LineKind::Error {
                        self.keep_error_text(&rest[..n]);
                    }
                    i += n;
                    if found {
                        i += 1;
                        if kind == LineKind::Null {
                            self.current.nulls += 1;
                        }
                        self.state = State::LineLf;
                    }
                }
                State::LineLf => {
                    if data[i] != b'\n' {
                        return Err(ScanError::BadLineEnd);
                    }
                    i += 1;
                    self.state = State::Type;
                    self.value_done(&mut on_reply);
                }
                State::Number {
                    kind,
                    negative,
                    digits,
                    value,
                } => {
                    let b = data[i];
                    i += 1;
                    match b {
                        b'-' if digits == 0 && !negative => {
                            self.state = State::Number {
                                kind,
                                negative: true,
                                digits,
                                value,
                            }
                        }
                        b'0'..=b'9' if digits < NUMBER_DIGITS_MAX => {
                            self.state = State::Number {
                                kind,
                                negative,
                                digits: digits + 1,
                                value: value * 10 + (b - b'0') as u64,
                            }
                        }
                        b'\r' if digits > 0 => {
                            // 19 digits may exceed i64::MAX: the length checks reject those.
                            let v = value.min(i64::MAX as u64) as i64;
                            self.state = State::NumberLf {
                                kind,
                                value: if negative { -v } else { v },
                            }
                        }
                        _ => return Err(ScanError::BadNumber),
                    }
                }
                State::NumberLf { kind, value } => {
                    if data[i] != b'\n' {
                        return Err(ScanError::BadLineEnd);
                    }
                    i += 1;
                    self.header_done(kind, value, &mut on_reply)?;
                }
                State::Payload { remaining, error } => {
                    let take = remaining.min((data.len() - i) as u64) as usize;
                    if error {
                        self.keep_error_text(&data[i..i + take]);
                    }
                    i += take;
                    let remaining = remaining - take as u64;
                    self.state = if remaining == 0 {
                        State::PayloadCr
                    } else {
                        State::Payload { remaining, error }
                    };
                }
                State::PayloadCr => {
                    if data[i] != b'\r' {
                        return Err(ScanError::BadLineEnd);
                    }
                    i += 1;
                    self.state = State::PayloadLf;
                }
                State::PayloadLf => {
                    if data[i] != b'\n' {
                        return Err(ScanError::BadLineEnd);
                    }
                    i += 1;
                    self.state = State::Type;
                    self.value_done(&mut on_reply);
                }
            }
        }
        Ok(())
    }

    fn keep_error_text(&mut self, bytes: &[u8]) {
        let n = bytes.len().min(ERROR_TEXT_MAX - self.error_len);
        self.error_text[self.error_len..self.error_len + n].copy_from_slice(&bytes[..n]);
        self.error_len += n;
    }

    /// A length header is complete: start the payload or the aggregate it announces.
    fn header_done<F: FnMut(Reply, &[u8])>(
        &mut self,
        kind: HeaderKind,
        value: i64,
        on_reply: &mut F,
    ) -> Result<(), ScanError> {
        self.state = State::Type;
        if value == -1 && matches!(kind, HeaderKind::Bulk | HeaderKind::Array) {
            // RESP2's null bulk string and null array.
            self.current.nulls += 1;
            self.value_done(on_reply);
            return Ok(());
        }
        if value < 0 {
            return Err(ScanError::BadLength(value));
        }
        let n = value as u64;
        match kind {
            HeaderKind::Bulk | HeaderKind::BlobError => {
                if n > BULK_LEN_MAX {
                    return Err(ScanError::BadLength(value));
                }
                let error = kind == HeaderKind::BlobError;
                if error {
                    self.current.error = true;
                    self.error_len = 0;
                }
                self.state = State::Payload {
                    remaining: n,
                    error,
                };
            }
            HeaderKind::Array | HeaderKind::Map | HeaderKind::Attribute | HeaderKind::Push => {
                if n > AGGREGATE_LEN_MAX {
                    return Err(ScanError::BadLength(value));
                }
                let elements = if matches!(kind, HeaderKind::Map | HeaderKind::Attribute) {
                    n * 2
                } else {
                    n
                };
                let frame_kind = match kind {
                    HeaderKind::Attribute => FrameKind::Attribute,
                    HeaderKind::Push if self.depth == 0 => FrameKind::Push,
                    _ => FrameKind::Value,
                };
                if elements == 0 {
                    // An empty attribute annotates nothing; an empty aggregate is a value.
                    if frame_kind == FrameKind::Value {
                        self.value_done(on_reply);
                    } else if frame_kind == FrameKind::Push {
                        self.current = Reply::default();
                    }
                    return Ok(());
                }
                if self.depth == NESTING_MAX {
                    return Err(ScanError::TooDeep);
                }
                self.stack[self.depth] = Frame {
                    remaining: elements,
                    kind: frame_kind,
                };
                self.depth += 1;
            }
        }
        Ok(())
    }

    /// A value is complete: it is one element of the innermost aggregate, or a whole reply.
    #[inline]
    fn value_done<F: FnMut(Reply, &[u8])>(&mut self, on_reply: &mut F) {
        loop {
            if self.depth == 0 {
                let reply = std::mem::take(&mut self.current);
                let text = if reply.error {
                    &self.error_text[..self.error_len]
                } else {
                    &[][..]
                };
                on_reply(reply, text);
                return;
            }
            let top = &mut self.stack[self.depth - 1];
            top.remaining -= 1;
            if top.remaining > 0 {
                return;
            }
            let kind = top.kind;
            self.depth -= 1;
            match kind {
                // The aggregate is itself one element of its parent (or the whole reply).
                FrameKind::Value => continue,
                // The annotated value follows: the attribute does not count.
                FrameKind::Attribute => return,
                // Out of band: not a reply to any request.
                FrameKind::Push => {
                    self.current = Reply::default();
                    return;
                }
            }
        }
    }
}

fn number(kind: HeaderKind) -> State {
    State::Number {
        kind,
        negative: false,
        digits: 0,
        value: 0,
    }
}

/// `<kind><n>\r\n`, the number in decimal without allocating.
#[inline]
pub fn put_header(out: &mut Vec<u8>, kind: u8, n: usize) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut n = n;
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.push(kind);
    out.extend_from_slice(&digits[at..]);
    out.extend_from_slice(b"\r\n");
}

/// Appends `$<len>\r\n<bytes>\r\n`.
#[inline]
pub fn put_bulk(out: &mut Vec<u8>, bytes: &[u8]) {
    put_header(out, b'$', bytes.len());
    out.extend_from_slice(bytes);
    out.extend_from_slice(b"\r\n");
}

/// Appends one request: a multibulk of bulk strings (the only request form carrying any bytes).
pub fn encode_command(out: &mut Vec<u8>, args: &[&[u8]]) {
    put_header(out, b'*', args.len());
    for a in args {
        put_bulk(out, a);
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

    #[test]
    fn commands_encode_byte_for_byte() {
        let mut out = Vec::new();
        encode_command(&mut out, &[b"GET", b"k"]);
        assert_eq!(out, b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
        out.clear();
        encode_command(&mut out, &[b"SET", b"", b"0123456789"]);
        assert_eq!(out, b"*3\r\n$3\r\nSET\r\n$0\r\n\r\n$10\r\n0123456789\r\n");
        out.clear();
        put_header(&mut out, b'*', 0);
        put_header(&mut out, b'$', usize::MAX);
        assert_eq!(out, b"*0\r\n$18446744073709551615\r\n");
    }
}
