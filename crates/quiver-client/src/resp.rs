//! The RESP wire format, client side: request encoding and reply parsing.
//!
//! Requests are always sent as RESP multibulks of bulk strings (the only form
//! that carries arbitrary bytes). Replies are parsed in RESP2 and RESP3 alike,
//! so the same parser serves connections that did or did not send `HELLO 3`.
//!
//! The parser is incremental: [`Parser::parse`] consumes what it can from the
//! front of a [`BytesMut`] and returns `Ok(None)` until a whole reply has
//! arrived, keeping the aggregates it has started. A reply that arrives in
//! many reads is therefore parsed once, not once per read.
//!
//! Every length the server declares is checked against [`Limits`] *before*
//! anything is reserved, and aggregates reserve at most
//! [`AGGREGATE_PREALLOC`] slots up front: memory grows only with the bytes
//! that actually arrive, so a server declaring a 10^12-element array or
//! bulk gets an error, not an allocation.
//!
//! Not supported (Redis never sends them): RESP3 streamed strings and
//! aggregates (`$?`, `*?`, ...). RESP3 attributes (`|`) are parsed and
//! dropped: they annotate the reply that follows them, which is returned.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::error::{Error, Result};

/// Largest bulk string accepted: Redis's `proto-max-bulk-len` (512 MiB).
pub const MAX_BULK_LEN: usize = 512 * 1024 * 1024;
/// Largest element count accepted for one aggregate (Redis's own limit for
/// a request's multibulk count).
pub const MAX_AGGREGATE_LEN: usize = i32::MAX as usize;
/// Deepest nesting accepted. Real replies nest a few levels; the bound keeps
/// a hostile reply from building a value whose recursive drop overflows the
/// stack.
pub const MAX_DEPTH: usize = 128;
/// Longest line accepted (simple string, error, number, or a length header;
/// type byte included, CRLF not), so a server that never sends `\r\n` cannot
/// make the buffer grow forever.
pub const MAX_LINE_LEN: usize = 64 * 1024;
/// Slots reserved when an aggregate header is read; more are added as the
/// elements arrive.
pub const AGGREGATE_PREALLOC: usize = 1024;

/// One reply, RESP2 or RESP3.
///
/// RESP2's null bulk (`$-1`) and null array (`*-1`) and RESP3's null (`_`)
/// all parse to [`Value::Null`]; RESP3's blob error (`!`) parses to
/// [`Value::Error`] like a simple error.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `+OK`. Invalid UTF-8 is replaced (status lines are ASCII in practice).
    Simple(String),
    /// `-ERR ...` or `!<len>`: the whole text after the type byte, e.g.
    /// `ERR unknown command 'x'`. Invalid UTF-8 is replaced.
    Error(String),
    /// `:42`
    Integer(i64),
    /// `$3\r\nfoo`: arbitrary bytes.
    Bulk(Bytes),
    /// `$-1`, `*-1` or `_`.
    Null,
    /// `*<n>`
    Array(Vec<Value>),
    /// `%<n>`: pairs in the order received.
    Map(Vec<(Value, Value)>),
    /// `~<n>`
    Set(Vec<Value>),
    /// `,3.14` (also `inf`, `-inf`, `nan`).
    Double(f64),
    /// `#t` / `#f`
    Boolean(bool),
    /// `=<len>\r\ntxt:...`: a three-character format and the text.
    Verbatim { format: String, text: Bytes },
    /// `(1234...`: the digits, as sent.
    BigNumber(String),
    /// `><n>`: an out-of-band message (RESP3 only).
    Push(Vec<Value>),
}

impl Value {
    /// A short name of the reply's type, for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Simple(_) => "simple string",
            Value::Error(_) => "error",
            Value::Integer(_) => "integer",
            Value::Bulk(_) => "bulk string",
            Value::Null => "null",
            Value::Array(_) => "array",
            Value::Map(_) => "map",
            Value::Set(_) => "set",
            Value::Double(_) => "double",
            Value::Boolean(_) => "boolean",
            Value::Verbatim { .. } => "verbatim string",
            Value::BigNumber(_) => "big number",
            Value::Push(_) => "push",
        }
    }

    /// The bytes of a string-like reply (bulk, simple, verbatim text).
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Value::Bulk(b) => Some(b),
            Value::Simple(s) => Some(s.as_bytes()),
            Value::Verbatim { text, .. } => Some(text),
            _ => None,
        }
    }
}

/// Protocol limits for parsing replies. [`Limits::default`] uses the named
/// constants of this module.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub max_bulk_len: usize,
    pub max_aggregate_len: usize,
    pub max_depth: usize,
    pub max_line_len: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bulk_len: MAX_BULK_LEN,
            max_aggregate_len: MAX_AGGREGATE_LEN,
            max_depth: MAX_DEPTH,
            max_line_len: MAX_LINE_LEN,
        }
    }
}

/// Appends one request to `out` as a RESP multibulk of bulk strings:
/// `*<n>\r\n` then `$<len>\r\n<bytes>\r\n` per argument.
pub fn encode_command(out: &mut BytesMut, args: &[&[u8]]) {
    let payload: usize = args.iter().map(|a| a.len()).sum();
    // Headers are at most 1 + 20 + 2 bytes each; one reservation per request.
    out.reserve(payload + (args.len() + 1) * 25);
    put_header(out, b'*', args.len());
    for arg in args {
        put_header(out, b'$', arg.len());
        out.put_slice(arg);
        out.put_slice(b"\r\n");
    }
}

/// `<kind><n>\r\n` without a heap allocation for the number.
fn put_header(out: &mut BytesMut, kind: u8, n: usize) {
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
    out.put_u8(kind);
    out.put_slice(&digits[at..]);
    out.put_slice(b"\r\n");
}

/// The aggregate types, while their elements are being collected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AggregateKind {
    Array,
    Map,
    Set,
    Push,
    /// RESP3 `|`: a map annotating the next value; dropped when complete.
    Attribute,
}

/// An aggregate whose header has been read but not all of its elements.
#[derive(Debug)]
struct Partial {
    kind: AggregateKind,
    /// Values still expected (for maps and attributes: twice the pairs).
    remaining: usize,
    items: Vec<Value>,
}

impl Partial {
    /// The finished aggregate, or `None` for an attribute (dropped).
    fn finish(self) -> Option<Value> {
        Some(match self.kind {
            AggregateKind::Array => Value::Array(self.items),
            AggregateKind::Set => Value::Set(self.items),
            AggregateKind::Push => Value::Push(self.items),
            AggregateKind::Map => Value::Map(pairs(self.items)),
            AggregateKind::Attribute => return None,
        })
    }
}

fn pairs(items: Vec<Value>) -> Vec<(Value, Value)> {
    let mut out = Vec::with_capacity(items.len() / 2);
    let mut it = items.into_iter();
    while let (Some(k), Some(v)) = (it.next(), it.next()) {
        out.push((k, v));
    }
    out
}

/// What one step of parsing found at the front of the buffer.
enum Item {
    /// A complete non-aggregate value.
    Value(Value),
    /// An aggregate header announcing `len` values (already doubled for maps).
    Start(AggregateKind, usize),
}

/// Incremental reply parser. One per connection: it keeps the aggregates of
/// a reply that has not fully arrived yet.
///
/// After an error the parser is reset, but the stream is out of step: the
/// connection must be dropped.
#[derive(Debug, Default)]
pub struct Parser {
    limits: Limits,
    stack: Vec<Partial>,
}

impl Parser {
    pub fn new() -> Self {
        Parser::default()
    }

    pub fn with_limits(limits: Limits) -> Self {
        Parser {
            limits,
            stack: Vec::new(),
        }
    }

    /// True while a reply has been started but not finished.
    pub fn in_progress(&self) -> bool {
        !self.stack.is_empty()
    }

    /// Forgets a partly parsed reply (after the connection was replaced).
    pub fn reset(&mut self) {
        self.stack.clear();
    }

    /// Parses one reply from the front of `buf`, consuming its bytes.
    ///
    /// Returns `Ok(None)` when the reply is incomplete: complete elements of
    /// an unfinished aggregate have been consumed and are kept here, the
    /// rest stays in `buf`. Call again with the same buffer once more bytes
    /// have been appended to it.
    pub fn parse(&mut self, buf: &mut BytesMut) -> Result<Option<Value>> {
        let result = self.parse_inner(buf);
        if result.is_err() {
            self.stack.clear();
        }
        result
    }

    fn parse_inner(&mut self, buf: &mut BytesMut) -> Result<Option<Value>> {
        loop {
            let mut value = match parse_item(buf, &self.limits)? {
                None => return Ok(None),
                Some(Item::Value(v)) => v,
                Some(Item::Start(kind, len)) => {
                    if self.stack.len() >= self.limits.max_depth {
                        return Err(protocol(format!(
                            "reply nests deeper than {} levels",
                            self.limits.max_depth
                        )));
                    }
                    let partial = Partial {
                        kind,
                        remaining: len,
                        items: Vec::with_capacity(len.min(AGGREGATE_PREALLOC)),
                    };
                    if len > 0 {
                        self.stack.push(partial);
                        continue;
                    }
                    match partial.finish() {
                        Some(v) => v,
                        None => continue, // an empty attribute
                    }
                }
            };
            // Hand the finished value up through every aggregate it completes.
            loop {
                let Some(top) = self.stack.last_mut() else {
                    return Ok(Some(value));
                };
                top.items.push(value);
                top.remaining -= 1;
                if top.remaining > 0 {
                    break;
                }
                let done = self.stack.pop().expect("stack top exists");
                match done.finish() {
                    Some(v) => value = v,
                    // An attribute annotates the next value: it takes no
                    // slot in its parent, so parsing simply goes on.
                    None => break,
                }
            }
        }
    }
}

fn protocol(message: impl Into<String>) -> Error {
    Error::Protocol(message.into())
}

/// Parses one value or aggregate header from the front of `buf`, consuming
/// it only when it is complete.
fn parse_item(buf: &mut BytesMut, limits: &Limits) -> Result<Option<Item>> {
    let Some(line_end) = find_line(buf, limits)? else {
        return Ok(None);
    };
    let kind = buf[0];
    let line = &buf[1..line_end];
    let header_len = line_end + 2;
    let item = match kind {
        b'+' => Item::Value(Value::Simple(lossy(line))),
        b'-' => Item::Value(Value::Error(lossy(line))),
        b':' => Item::Value(Value::Integer(parse_integer(line)?)),
        b',' => Item::Value(Value::Double(parse_double(line)?)),
        b'#' => Item::Value(Value::Boolean(match line {
            b"t" => true,
            b"f" => false,
            _ => return Err(protocol(format!("invalid boolean {:?}", lossy(line)))),
        })),
        b'(' => Item::Value(Value::BigNumber(parse_big_number(line)?)),
        b'_' => {
            if !line.is_empty() {
                return Err(protocol("null with a payload"));
            }
            Item::Value(Value::Null)
        }
        b'$' | b'!' | b'=' => {
            let Some(len) = parse_length(line, kind == b'$')? else {
                buf.advance(header_len);
                return Ok(Some(Item::Value(Value::Null)));
            };
            if len > limits.max_bulk_len {
                return Err(protocol(format!(
                    "bulk length {len} exceeds the limit {}",
                    limits.max_bulk_len
                )));
            }
            // Wait for the whole payload before touching it; the header is
            // re-read next time (a few bytes, unlike the payload). Nothing is
            // reserved on the server's word: the buffer grows as bytes arrive.
            let total = header_len + len + 2;
            if buf.len() < total {
                return Ok(None);
            }
            if &buf[total - 2..total] != b"\r\n" {
                return Err(protocol("bulk payload not followed by CRLF"));
            }
            buf.advance(header_len);
            let payload = buf.split_to(len).freeze();
            buf.advance(2);
            return Ok(Some(Item::Value(blob(kind, payload)?)));
        }
        b'*' | b'%' | b'~' | b'>' | b'|' => {
            let Some(count) = parse_length(line, kind == b'*')? else {
                buf.advance(header_len);
                return Ok(Some(Item::Value(Value::Null)));
            };
            if count > limits.max_aggregate_len {
                return Err(protocol(format!(
                    "aggregate length {count} exceeds the limit {}",
                    limits.max_aggregate_len
                )));
            }
            let (kind, values) = match kind {
                b'*' => (AggregateKind::Array, count),
                b'~' => (AggregateKind::Set, count),
                b'>' => (AggregateKind::Push, count),
                b'%' => (AggregateKind::Map, count * 2),
                _ => (AggregateKind::Attribute, count * 2),
            };
            Item::Start(kind, values)
        }
        _ => {
            return Err(protocol(format!(
                "unknown reply type byte {:?}",
                char::from(kind)
            )))
        }
    };
    buf.advance(header_len);
    Ok(Some(item))
}

/// The value of a length-prefixed reply (`$`, `!`, `=`).
fn blob(kind: u8, payload: Bytes) -> Result<Value> {
    Ok(match kind {
        b'$' => Value::Bulk(payload),
        b'!' => Value::Error(lossy(&payload)),
        _ => {
            // `=<len>\r\nfmt:text`: the format is exactly three bytes.
            if payload.len() < 4 || payload[3] != b':' {
                return Err(protocol("verbatim string without a `fmt:` prefix"));
            }
            Value::Verbatim {
                format: lossy(&payload[..3]),
                text: payload.slice(4..),
            }
        }
    })
}

/// The index of the `\r` ending the first line, once a whole line is there.
fn find_line(buf: &[u8], limits: &Limits) -> Result<Option<usize>> {
    // Only the first max_line_len + 2 bytes can hold a valid line's end.
    let window = &buf[..buf.len().min(limits.max_line_len + 2)];
    match window.iter().position(|&b| b == b'\n') {
        // A line needs at least its type byte before the CRLF.
        Some(0 | 1) => Err(protocol("line without a type byte")),
        Some(nl) if window[nl - 1] == b'\r' => Ok(Some(nl - 1)),
        Some(_) => Err(protocol("line ends in a bare LF")),
        // Room for the longest line and its CRLF, and still no LF.
        None if window.len() >= limits.max_line_len + 2 => Err(protocol(format!(
            "line longer than {} bytes",
            limits.max_line_len
        ))),
        None => Ok(None),
    }
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A declared length: decimal digits, or `-1` (null) where `null_ok`.
/// Overlong numbers are rejected before they can overflow.
fn parse_length(line: &[u8], null_ok: bool) -> Result<Option<usize>> {
    if line == b"-1" && null_ok {
        return Ok(None);
    }
    if line == b"?" {
        return Err(protocol("streamed RESP3 replies are not supported"));
    }
    let invalid = || protocol(format!("invalid length {:?}", lossy(line)));
    if line.is_empty() || line.len() > 19 || !line.iter().all(u8::is_ascii_digit) {
        return Err(invalid());
    }
    let n: u64 = std::str::from_utf8(line)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(invalid)?;
    usize::try_from(n).map(Some).map_err(|_| invalid())
}

fn parse_integer(line: &[u8]) -> Result<i64> {
    let invalid = || protocol(format!("invalid integer {:?}", lossy(line)));
    let digits = line.strip_prefix(b"-").unwrap_or(line);
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(invalid());
    }
    // Only ASCII digits and a sign remain; parse() rejects overflow.
    std::str::from_utf8(line)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(invalid)
}

fn parse_double(line: &[u8]) -> Result<f64> {
    // Rust's parser takes `inf`, `-inf` and `nan` too, which RESP3 uses.
    std::str::from_utf8(line)
        .ok()
        .filter(|s| !s.is_empty())
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| protocol(format!("invalid double {:?}", lossy(line))))
}

fn parse_big_number(line: &[u8]) -> Result<String> {
    let digits = line
        .strip_prefix(b"-")
        .or_else(|| line.strip_prefix(b"+"))
        .unwrap_or(line);
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(protocol(format!("invalid big number {:?}", lossy(line))));
    }
    Ok(lossy(line))
}

#[cfg(test)]
mod tests;
