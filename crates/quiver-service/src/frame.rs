//! Parsing client requests exactly like Redis 7 (`processInputBuffer`,
//! `processMultibulkBuffer`, `processInlineBuffer` in `networking.c` and
//! `sdssplitargs` in `sds.c`).
//!
//! A request is either
//!
//! * a RESP **multibulk**: `*<n>\r\n` followed by `n` bulk strings
//!   `$<len>\r\n<len bytes>\r\n` (chosen when the first byte is `*`), or
//! * an **inline** command: one line of arguments separated by blanks,
//!   ending in `\n` or `\r\n`, split with `sdssplitargs` quoting rules.
//!
//! Redis quirks reproduced on purpose, so that clients see the same thing as
//! with a real Redis 7 server:
//!
//! * Line ends are found like `strchr()`, which stops at a NUL byte: a NUL
//!   before the `\r` of a header (or the `\n` of an inline line) means "no line
//!   yet", so the request stays incomplete until the buffered bytes exceed
//!   [`Limits::inline_max_bytes`] and the matching "too big" error fires.
//! * The byte after a header's `\r` and the two bytes after a bulk payload are
//!   skipped without checking that they are `\n` / `\r\n`.
//! * The "too big ... string" / "too big inline request" checks apply only
//!   while no line end has been found, and they compare the number of buffered
//!   bytes from the start of the element (not the line length) with the limit.
//! * `*0` and negative counts (`*-1`) are consumed without producing a command,
//!   as is an inline line with no arguments (`\r\n`, blanks only). Inline
//!   arguments may be empty (`""`).
//! * Numbers follow `string2ll`: optional `-`, no `+`, no leading zeros, no
//!   blanks, at most 20 characters.
//!
//! Redis 7's extra limits for a client that has yet to authenticate (when a
//! password is required) apply after [`RequestParser::set_unauthenticated`]:
//! at most [`UNAUTHENTICATED_MULTIBULK_MAX`] arguments and bulks of at most
//! [`UNAUTHENTICATED_BULK_MAX`] bytes, so an anonymous client cannot make
//! the server buffer much.
//!
//! Memory: limits are checked before anything is reserved. The argument list
//! of a multibulk grows with the bulks that actually arrive (at most
//! [`ARGV_PREALLOC`] slots are reserved up front), and the parser never
//! reserves room in the caller's buffer for a declared bulk length; the
//! connection's read loop decides how much to read ahead.
//!
//! Completed arguments of a multibulk are zero-copy [`Bytes`] slices of the
//! consumed part of the buffer. Inline arguments are copied (they may contain
//! escapes).

use std::fmt;

use bytes::{Bytes, BytesMut};
use quiver_resp::limits;

/// Redis's integer parsing (`string2ll`), from the shared codec; the commands reach it here.
pub use quiver_resp::string2ll;

/// Redis `proto-max-bulk-len` default: 512 MiB.
pub const PROTO_MAX_BULK_LEN: usize = limits::MAX_BULK_LEN;
/// Largest multibulk count Redis 7 accepts (`ll > INT_MAX` is rejected).
/// Redis before 7 used `1024 * 1024`.
pub const PROTO_MULTIBULK_MAX_LEN: usize = limits::MAX_AGGREGATE_LEN;
/// Redis `PROTO_INLINE_MAX_SIZE`: 64 KiB.
pub const PROTO_INLINE_MAX_SIZE: usize = limits::MAX_LINE_LEN;
/// Largest multibulk count from a client that must still authenticate.
pub const UNAUTHENTICATED_MULTIBULK_MAX: usize = 10;
/// Largest bulk from a client that must still authenticate.
pub const UNAUTHENTICATED_BULK_MAX: usize = 16 * 1024;
/// Argument slots reserved when a multibulk header is read; more are added as
/// bulks arrive (Redis 7 does the same with `argv_len = min(count, 1024)`).
pub const ARGV_PREALLOC: usize = limits::AGGREGATE_PREALLOC;

/// Protocol limits, checked before any memory is reserved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest accepted bulk length (`proto-max-bulk-len`).
    pub proto_max_bulk_len: usize,
    /// Largest accepted multibulk count.
    pub multibulk_len_max: usize,
    /// Bytes that may be buffered without finding a line end
    /// (`PROTO_INLINE_MAX_SIZE`).
    pub inline_max_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            proto_max_bulk_len: PROTO_MAX_BULK_LEN,
            multibulk_len_max: PROTO_MULTIBULK_MAX_LEN,
            inline_max_bytes: PROTO_INLINE_MAX_SIZE,
        }
    }
}

/// A malformed request. Reply `-<message>\r\n`, then close the connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProtocolError {
    /// The error text after `-`, e.g. `ERR Protocol error: invalid bulk
    /// length`. Bytes rather than a `String` because Redis echoes the
    /// offending byte raw in "expected '$', got '%c'".
    pub message: Bytes,
}

impl ProtocolError {
    fn new(message: &'static str) -> Self {
        Self {
            message: Bytes::from_static(message.as_bytes()),
        }
    }

    fn expected_dollar(got: u8) -> Self {
        // addReplyErrorFormat replaces '\r' and '\n' with spaces.
        let got = if got == b'\r' || got == b'\n' {
            b' '
        } else {
            got
        };
        let mut m = b"ERR Protocol error: expected '$', got '".to_vec();
        m.push(got);
        m.push(b'\'');
        Self { message: m.into() }
    }

    /// The message as text (lossy for non-UTF-8 bytes).
    pub fn message_lossy(&self) -> String {
        String::from_utf8_lossy(&self.message).into_owned()
    }
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&String::from_utf8_lossy(&self.message))
    }
}

impl std::error::Error for ProtocolError {}

const INVALID_MULTIBULK: &str = "ERR Protocol error: invalid multibulk length";
const INVALID_BULK: &str = "ERR Protocol error: invalid bulk length";
const TOO_BIG_MBULK: &str = "ERR Protocol error: too big mbulk count string";
const TOO_BIG_BULK: &str = "ERR Protocol error: too big bulk count string";
const TOO_BIG_INLINE: &str = "ERR Protocol error: too big inline request";
const UNBALANCED: &str = "ERR Protocol error: unbalanced quotes in request";
const UNAUTH_MULTIBULK: &str = "ERR Protocol error: unauthenticated multibulk length";
const UNAUTH_BULK: &str = "ERR Protocol error: unauthenticated bulk length";

/// Parses one request from the front of `buf`.
///
/// Returns `Ok(Some(args))` and consumes exactly that request, `Ok(None)` when
/// more bytes are needed (a partial request is left in `buf`; requests that
/// yield no command, such as `*0\r\n` or an empty line, are consumed), or the
/// error to reply before closing the connection (`buf` is then left as is).
///
/// This is stateless: when a request is incomplete, the next call re-reads
/// its header lines, but never re-scans bulk payloads. A connection should
/// prefer [`RequestParser`], which resumes where it stopped.
pub fn parse_request(
    buf: &mut BytesMut,
    limits: &Limits,
) -> Result<Option<Vec<Bytes>>, ProtocolError> {
    RequestParser::new(*limits).parse(buf)
}

/// The size of a run of requests, or a bound on it: a run ends at whichever bound it reaches
/// first, so the bound of a connection's turn caps its work however its requests are shaped
/// (many small ones, a few with many keys, a few with large values).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunSize {
    pub requests: usize,
    /// Arguments of all the run's requests (a run's work grows with its keys).
    pub args: usize,
    /// Bytes of all the run's arguments (its copies and checksums grow with them).
    pub bytes: usize,
}

impl RunSize {
    pub const UNBOUNDED: RunSize = RunSize::requests(usize::MAX);

    /// At most `n` requests, of any size.
    pub const fn requests(n: usize) -> RunSize {
        RunSize {
            requests: n,
            args: usize::MAX,
            bytes: usize::MAX,
        }
    }

    /// What is left of this bound once `used` has run.
    pub fn less(self, used: RunSize) -> RunSize {
        RunSize {
            requests: self.requests.saturating_sub(used.requests),
            args: self.args.saturating_sub(used.args),
            bytes: self.bytes.saturating_sub(used.bytes),
        }
    }

    /// The size of this run and `other` together.
    pub fn plus(self, other: RunSize) -> RunSize {
        RunSize {
            requests: self.requests + other.requests,
            args: self.args + other.args,
            bytes: self.bytes + other.bytes,
        }
    }

    /// The size of one request.
    fn of(request: &[Bytes]) -> RunSize {
        RunSize {
            requests: 1,
            args: request.len(),
            bytes: request.iter().map(Bytes::len).sum(),
        }
    }

    /// Whether a run of this size has reached `bound`.
    fn reached(&self, bound: RunSize) -> bool {
        self.requests >= bound.requests || self.args >= bound.args || self.bytes >= bound.bytes
    }
}

/// A run of pipelined requests parsed from the front of a buffer.
#[derive(Debug, Default)]
pub struct Run {
    pub requests: Vec<Vec<Bytes>>,
    pub size: RunSize,
    /// The protocol error that ended the run: the requests before it are executed (as Redis
    /// does), then the connection is closed.
    pub error: Option<ProtocolError>,
    /// The run ended at its bound: more complete requests may be buffered.
    pub bounded: bool,
}

/// Parses the complete requests at the front of `buf` up to `bound` (a pipelined run). Stops
/// at the first protocol error and returns it alongside the requests before it.
pub fn parse_run(buf: &mut BytesMut, limits: &Limits, bound: RunSize) -> Run {
    RequestParser::new(*limits).parse_run(buf, bound)
}

/// Incremental request parser for one connection.
///
/// Between calls the caller may only *append* to the buffer (or consume what
/// the parser returned); the parser remembers how far it got in the current
/// request, so bytes arriving one at a time cost linear time overall.
/// Call [`RequestParser::reset`] if the buffer is changed in any other way.
#[derive(Debug, Default)]
pub struct RequestParser {
    limits: Limits,
    /// The client must still authenticate: Redis's tighter limits apply.
    unauthenticated: bool,
    st: State,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Kind {
    #[default]
    Unknown,
    Inline,
    Multibulk,
}

/// Progress inside the (unconsumed) request at the front of the buffer.
#[derive(Debug, Default)]
struct State {
    kind: Kind,
    /// Offset of the next element (bulk header or payload) of a multibulk.
    pos: usize,
    /// Line-end search resumes here: no `\r`/`\n`/NUL lies in `pos..scan`.
    scan: usize,
    /// Bulks still expected; 0 until the multibulk header has been read.
    remaining: usize,
    /// Length of the bulk at `pos`, once its `$<len>` line has been read.
    bulk_len: Option<usize>,
    /// (offset, length) of each complete bulk.
    args: Vec<(usize, usize)>,
}

/// A complete request of a run, before the run's bytes are split off the buffer.
enum Parsed {
    /// A multibulk: the range of its arguments' spans.
    Spans(std::ops::Range<usize>),
    /// An inline request: its arguments, already copied out.
    Inline(Vec<Bytes>),
}

enum Step {
    Incomplete,
    /// Consume this many bytes; no command.
    Skip(usize),
    /// A multibulk of this many bytes is complete; args in `State::args`.
    Multibulk(usize),
    /// An inline request of this many bytes.
    Inline(usize, Vec<Bytes>),
}

impl RequestParser {
    pub fn new(limits: Limits) -> Self {
        Self {
            limits,
            unauthenticated: false,
            st: State::default(),
        }
    }

    /// Applies (or lifts) the limits for a client that has not authenticated yet.
    pub fn set_unauthenticated(&mut self, unauthenticated: bool) {
        self.unauthenticated = unauthenticated;
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// CONFIG SET proto-max-bulk-len: requests from now on are held to `n`.
    pub fn set_proto_max_bulk_len(&mut self, n: usize) {
        self.limits.proto_max_bulk_len = n;
    }

    /// Forgets any progress in a partially received request. The room for a request's
    /// argument spans is kept for the next one, unless a large request grew it.
    pub fn reset(&mut self) {
        let mut args = std::mem::take(&mut self.st.args);
        args.clear();
        if args.capacity() > ARGV_PREALLOC {
            args = Vec::new();
        }
        self.st = State {
            args,
            ..State::default()
        };
    }

    /// See [`parse_request`]; resumes a partial request instead of re-reading
    /// it.
    pub fn parse(&mut self, buf: &mut BytesMut) -> Result<Option<Vec<Bytes>>, ProtocolError> {
        let mut run = self.parse_run(buf, RunSize::requests(1));
        match run.error {
            Some(e) => Err(e),
            None => Ok(run.requests.pop()),
        }
    }

    /// See [`parse_run`]. A bound already reached gives an empty run.
    ///
    /// The run's bytes are split off the buffer once, and every argument is a slice of them:
    /// a split per request cost a reference count taken and dropped (an atomic operation)
    /// and an allocation per request.
    pub fn parse_run(&mut self, buf: &mut BytesMut, bound: RunSize) -> Run {
        if self.st.pos > buf.len() || self.st.scan > buf.len() {
            // The buffer was not only appended to; start over.
            self.reset();
        }
        let mut run = Run::default();
        let mut parsed: Vec<Parsed> = Vec::new();
        // Every multibulk argument's (offset, length) in the run's bytes.
        let mut spans: Vec<(usize, usize)> = Vec::new();
        let mut consumed = 0;
        loop {
            if run.size.reached(bound) {
                run.bounded = true;
                break;
            }
            let step = match self.step(&buf[consumed..]) {
                Ok(step) => step,
                Err(e) => {
                    self.reset();
                    run.error = Some(e);
                    break;
                }
            };
            match step {
                Step::Incomplete => break,
                Step::Skip(n) => consumed += n,
                Step::Multibulk(n) => {
                    let first = spans.len();
                    spans.extend(self.st.args.iter().map(|&(off, len)| (consumed + off, len)));
                    run.size = run.size.plus(RunSize {
                        requests: 1,
                        args: self.st.args.len(),
                        bytes: self.st.args.iter().map(|&(_, len)| len).sum(),
                    });
                    parsed.push(Parsed::Spans(first..spans.len()));
                    consumed += n;
                }
                Step::Inline(n, args) => {
                    run.size = run.size.plus(RunSize::of(&args));
                    parsed.push(Parsed::Inline(args));
                    consumed += n;
                }
            }
            self.reset();
        }
        let frame = buf.split_to(consumed).freeze();
        run.requests = parsed
            .into_iter()
            .map(|p| match p {
                Parsed::Spans(range) => spans[range]
                    .iter()
                    .map(|&(off, len)| frame.slice(off..off + len))
                    .collect(),
                Parsed::Inline(args) => args,
            })
            .collect();
        run
    }

    fn step(&mut self, buf: &[u8]) -> Result<Step, ProtocolError> {
        if self.st.kind == Kind::Unknown {
            match buf.first() {
                None => return Ok(Step::Incomplete),
                Some(b'*') => self.st.kind = Kind::Multibulk,
                Some(_) => self.st.kind = Kind::Inline,
            }
        }
        match self.st.kind {
            Kind::Inline => self.inline(buf),
            _ => self.multibulk(buf),
        }
    }

    fn inline(&mut self, buf: &[u8]) -> Result<Step, ProtocolError> {
        let Some(nl) = find_line_end(buf, 0, &mut self.st.scan, b'\n') else {
            if buf.len() > self.limits.inline_max_bytes {
                return Err(ProtocolError::new(TOO_BIG_INLINE));
            }
            return Ok(Step::Incomplete);
        };
        let end = if nl > 0 && buf[nl - 1] == b'\r' {
            nl - 1
        } else {
            nl
        };
        let args = split_args(&buf[..end]).ok_or_else(|| ProtocolError::new(UNBALANCED))?;
        Ok(if args.is_empty() {
            Step::Skip(nl + 1)
        } else {
            Step::Inline(nl + 1, args)
        })
    }

    fn multibulk(&mut self, buf: &[u8]) -> Result<Step, ProtocolError> {
        let limits = self.limits;
        let unauthenticated = self.unauthenticated;
        let st = &mut self.st;
        if st.remaining == 0 {
            let Some(cr) = find_line_end(buf, 0, &mut st.scan, b'\r') else {
                if buf.len() > limits.inline_max_bytes {
                    return Err(ProtocolError::new(TOO_BIG_MBULK));
                }
                return Ok(Step::Incomplete);
            };
            if cr + 2 > buf.len() {
                return Ok(Step::Incomplete);
            }
            let count = match string2ll(&buf[1..cr]) {
                Some(n) if n > 0 && n as u64 > limits.multibulk_len_max as u64 => {
                    return Err(ProtocolError::new(INVALID_MULTIBULK))
                }
                Some(n) if unauthenticated && n > UNAUTHENTICATED_MULTIBULK_MAX as i64 => {
                    return Err(ProtocolError::new(UNAUTH_MULTIBULK))
                }
                Some(n) if n <= 0 => return Ok(Step::Skip(cr + 2)),
                Some(n) => n as usize,
                None => return Err(ProtocolError::new(INVALID_MULTIBULK)),
            };
            st.remaining = count;
            st.args.reserve(count.min(ARGV_PREALLOC));
            st.pos = cr + 2;
        }
        while st.remaining > 0 {
            let len = match st.bulk_len {
                Some(len) => len,
                None => {
                    let Some(cr) = find_line_end(buf, st.pos, &mut st.scan, b'\r') else {
                        if buf.len() - st.pos > limits.inline_max_bytes {
                            return Err(ProtocolError::new(TOO_BIG_BULK));
                        }
                        return Ok(Step::Incomplete);
                    };
                    if cr + 2 > buf.len() {
                        return Ok(Step::Incomplete);
                    }
                    if buf[st.pos] != b'$' {
                        return Err(ProtocolError::expected_dollar(buf[st.pos]));
                    }
                    let len = match string2ll(&buf[st.pos + 1..cr]) {
                        Some(n) if n >= 0 && n as u64 <= limits.proto_max_bulk_len as u64 => {
                            n as usize
                        }
                        _ => return Err(ProtocolError::new(INVALID_BULK)),
                    };
                    if unauthenticated && len > UNAUTHENTICATED_BULK_MAX {
                        return Err(ProtocolError::new(UNAUTH_BULK));
                    }
                    st.pos = cr + 2;
                    st.bulk_len = Some(len);
                    len
                }
            };
            // Payload plus its (unchecked) trailing "\r\n"; never scanned.
            if buf.len() - st.pos < len.saturating_add(2) {
                return Ok(Step::Incomplete);
            }
            st.args.push((st.pos, len));
            st.pos += len + 2;
            st.scan = st.pos;
            st.remaining -= 1;
            st.bulk_len = None;
        }
        Ok(Step::Multibulk(st.pos))
    }
}

/// `strchr(buf + from, target)`: the first `target` at or after `from`, unless
/// a NUL comes first (then `None`, as C string functions stop there).
/// `scan` caches how far a previous call looked, so nothing is searched twice.
fn find_line_end(buf: &[u8], from: usize, scan: &mut usize, target: u8) -> Option<usize> {
    let start = (*scan).max(from);
    match buf[start..].iter().position(|&b| b == target || b == 0) {
        Some(off) => {
            let i = start + off;
            *scan = i;
            (buf[i] == target).then_some(i)
        }
        None => {
            *scan = buf.len();
            None
        }
    }
}

/// C `isspace` in the "C" locale.
fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

fn hex_value(c: u8) -> u8 {
    match c {
        b'0'..=b'9' => c - b'0',
        b'a'..=b'f' => c - b'a' + 10,
        _ => c - b'A' + 10,
    }
}

/// Redis `sdssplitargs`: splits an inline line into arguments, or `None` on
/// unbalanced quotes (including a closing quote not followed by a blank).
/// The line is treated as a C string: it ends at its first NUL.
pub fn split_args(line: &[u8]) -> Option<Vec<Bytes>> {
    let at = |i: usize| line.get(i).copied().unwrap_or(0);
    let mut args = Vec::new();
    let mut p = 0;
    loop {
        while at(p) != 0 && is_space(at(p)) {
            p += 1;
        }
        if at(p) == 0 {
            return Some(args);
        }
        let (mut in_dq, mut in_sq, mut done) = (false, false, false);
        let mut cur = Vec::new();
        while !done {
            let c = at(p);
            if in_dq {
                if c == b'\\'
                    && at(p + 1) == b'x'
                    && at(p + 2).is_ascii_hexdigit()
                    && at(p + 3).is_ascii_hexdigit()
                {
                    cur.push(hex_value(at(p + 2)) * 16 + hex_value(at(p + 3)));
                    p += 3;
                } else if c == b'\\' && at(p + 1) != 0 {
                    p += 1;
                    cur.push(match at(p) {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 0x08,
                        b'a' => 0x07,
                        other => other,
                    });
                } else if c == b'"' {
                    // The closing quote must be followed by a blank or the end.
                    if at(p + 1) != 0 && !is_space(at(p + 1)) {
                        return None;
                    }
                    done = true;
                } else if c == 0 {
                    return None;
                } else {
                    cur.push(c);
                }
            } else if in_sq {
                if c == b'\\' && at(p + 1) == b'\'' {
                    p += 1;
                    cur.push(b'\'');
                } else if c == b'\'' {
                    if at(p + 1) != 0 && !is_space(at(p + 1)) {
                        return None;
                    }
                    done = true;
                } else if c == 0 {
                    return None;
                } else {
                    cur.push(c);
                }
            } else {
                match c {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => done = true,
                    b'"' => in_dq = true,
                    b'\'' => in_sq = true,
                    _ => cur.push(c),
                }
            }
            if at(p) != 0 {
                p += 1;
            }
        }
        args.push(Bytes::from(cur));
    }
}
