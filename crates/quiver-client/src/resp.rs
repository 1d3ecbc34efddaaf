//! The RESP wire format, client side: request encoding and reply parsing,
//! on the shared codec (`quiver-resp`).
//!
//! Requests are always sent as RESP multibulks of bulk strings (the only form
//! that carries arbitrary bytes): [`encode_command`]. Replies are parsed in
//! RESP2 and RESP3 alike, so the same parser serves connections that did or
//! did not send `HELLO 3`.
//!
//! The parser is incremental: [`Parser::parse`] consumes what it can from the
//! front of a [`BytesMut`] and returns `Ok(None)` until a whole reply has
//! arrived, keeping the aggregates it has started. Framing is the shared
//! [`Scanner`]'s, which resumes where it stopped: a reply that arrives in
//! many reads is scanned once, not once per read. This module builds the
//! [`Value`] on the scanner's items, bulks as zero-copy slices of the buffer,
//! and checks what the scanner leaves to it: the text of integers, doubles,
//! booleans, big numbers and nulls, and the `fmt:` of verbatim strings.
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

use bytes::{Buf, Bytes, BytesMut};
use quiver_resp::{AggregateType, BlobType, Event, LineType, ScanError, Scanner};

use crate::error::{Error, Result};

pub use quiver_resp::encode_command;
pub use quiver_resp::limits::{
    AGGREGATE_PREALLOC, MAX_AGGREGATE_LEN, MAX_BULK_LEN, MAX_DEPTH, MAX_LINE_LEN,
};
/// Protocol limits for parsing replies. [`Limits::default`] uses the named
/// constants of this module (re-exported from `quiver_resp::limits`).
pub use quiver_resp::ReplyLimits as Limits;

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

/// An aggregate whose header has been read but not all of its elements.
#[derive(Debug)]
struct Partial {
    kind: AggregateType,
    items: Vec<Value>,
}

impl Partial {
    /// The finished aggregate, or `None` for an attribute (dropped).
    fn finish(self) -> Option<Value> {
        Some(match self.kind {
            AggregateType::Array => Value::Array(self.items),
            AggregateType::Set => Value::Set(self.items),
            AggregateType::Push => Value::Push(self.items),
            AggregateType::Map => Value::Map(pairs(self.items)),
            AggregateType::Attribute => return None,
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

/// Incremental reply parser. One per connection: it keeps the aggregates of
/// a reply that has not fully arrived yet.
///
/// Between calls the buffer may only be appended to, or consumed by the
/// parser; [`Parser::reset`] forgets a partial reply.
///
/// After an error the parser is reset, but the stream is out of step: the
/// connection must be dropped.
#[derive(Debug, Default)]
pub struct Parser {
    scanner: Scanner,
    /// The aggregates being built, innermost last (one per open aggregate of
    /// the scanner).
    stack: Vec<Partial>,
}

impl Parser {
    pub fn new() -> Self {
        Parser::default()
    }

    pub fn with_limits(limits: Limits) -> Self {
        Parser {
            scanner: Scanner::new(limits),
            stack: Vec::new(),
        }
    }

    /// True while a reply has been started but not finished.
    pub fn in_progress(&self) -> bool {
        !self.stack.is_empty()
    }

    /// Forgets a partly parsed reply (after the connection was replaced).
    pub fn reset(&mut self) {
        self.scanner.reset();
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
            self.reset();
        }
        result
    }

    fn parse_inner(&mut self, buf: &mut BytesMut) -> Result<Option<Value>> {
        loop {
            // The item in progress starts at the front of `buf`; the scanner
            // has seen its first `scanned()` bytes.
            let from = self.scanner.scanned();
            if from > buf.len() {
                return Err(protocol("the reply buffer lost bytes being parsed"));
            }
            let step = self.scanner.step(&buf[from..]).map_err(scan_error)?;
            let Some(event) = step.event else {
                return Ok(None);
            };
            let value = match event {
                Event::Line { ty, len } => {
                    let value = line_value(ty, &buf[1..len - 2])?;
                    buf.advance(len);
                    value
                }
                Event::Blob { ty, header, len } => {
                    buf.advance(header);
                    let payload = buf.split_to(len).freeze();
                    buf.advance(2);
                    blob(ty, payload)?
                }
                Event::Null { len } => {
                    buf.advance(len);
                    Value::Null
                }
                Event::Start { ty, header, values } => {
                    buf.advance(header);
                    self.stack.push(Partial {
                        kind: ty,
                        items: Vec::with_capacity(values.min(AGGREGATE_PREALLOC)),
                    });
                    continue;
                }
                Event::End { .. } => {
                    let Some(done) = self.stack.pop() else {
                        return Err(protocol("an aggregate ended that never started"));
                    };
                    match done.finish() {
                        Some(v) => v,
                        // An attribute annotates the next value: it takes no
                        // slot in its parent, so parsing simply goes on.
                        None => continue,
                    }
                }
            };
            match self.stack.last_mut() {
                Some(top) => top.items.push(value),
                None => return Ok(Some(value)),
            }
        }
    }
}

fn protocol(message: impl Into<String>) -> Error {
    Error::Protocol(message.into())
}

fn scan_error(e: ScanError) -> Error {
    protocol(e.to_string())
}

/// The value of a line reply: its text checked for its type.
fn line_value(ty: LineType, line: &[u8]) -> Result<Value> {
    Ok(match ty {
        LineType::Simple => Value::Simple(lossy(line)),
        LineType::Error => Value::Error(lossy(line)),
        LineType::Integer => Value::Integer(
            quiver_resp::parse_integer(line)
                .ok_or_else(|| protocol(format!("invalid integer {:?}", lossy(line))))?,
        ),
        LineType::Double => Value::Double(parse_double(line)?),
        LineType::Boolean => Value::Boolean(match line {
            b"t" => true,
            b"f" => false,
            _ => return Err(protocol(format!("invalid boolean {:?}", lossy(line)))),
        }),
        LineType::BigNumber => Value::BigNumber(parse_big_number(line)?),
        LineType::Null => {
            if !line.is_empty() {
                return Err(protocol("null with a payload"));
            }
            Value::Null
        }
    })
}

/// The value of a length-prefixed reply (`$`, `!`, `=`).
fn blob(ty: BlobType, payload: Bytes) -> Result<Value> {
    Ok(match ty {
        BlobType::Bulk => Value::Bulk(payload),
        BlobType::Error => Value::Error(lossy(&payload)),
        BlobType::Verbatim => {
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

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
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
