//! The reply scanner: RESP2 and RESP3 replies framed byte by byte.
//!
//! [`Scanner::step`] reads bytes until the next *item* is complete and reports it as an
//! [`Event`]: a line value (`+OK`, `-ERR x`, `:1`, `,1.5`, `#t`, `(123`, `_`), a bulk (`$`,
//! `!`, `=`), a RESP2 null (`$-1`, `*-1`), the header of an aggregate (`*`, `%`, `~`, `|`,
//! `>`), or the end of an aggregate once its last element has been scanned. Each event gives
//! the item's byte geometry (where a line's text or a bulk's payload lies), so a caller that
//! keeps the bytes can slice them, and a caller that does not can ignore them.
//!
//! The scanner keeps no bytes: it is a state machine that resumes at any byte, so a reply split
//! across reads anywhere is picked up where it stopped, nothing is scanned twice, and a bulk
//! payload is skipped by arithmetic (never looked at). It allocates nothing while scanning (the
//! nesting stack is reserved up front, up to [`MAX_DEPTH`] levels).
//!
//! What it checks, before anything is reserved: type bytes, CRLF after every line and payload
//! (a bare CR or LF in a line is an error), lengths (decimal, at most [`MAX_LENGTH_DIGITS`]
//! digits, `-1` only for the null bulk and null array) against [`ReplyLimits`], line lengths
//! and nesting depth. What it leaves to its caller: the text of a line (whether `:12a` is an
//! integer, `#x` a boolean) and the inside of a verbatim string.
//!
//! Nesting: an aggregate's `Start` is followed by its elements and its `End`. An attribute
//! (`|`) annotates the value after it and takes no slot in its parent; a push (`>`) at the top
//! level is out of band. [`Scanner::depth`] says how deep the last event was: a value or an
//! `End` at depth 0 completes a top-level item.
//!
//! Not supported (Redis never sends them): streamed strings and aggregates (`$?`, `*?`).
//!
//! Users: the client builds its values on it (`quiver_client::resp::Parser`), the load
//! generator counts replies and their nulls without keeping their bytes
//! (`quiver_bench::net::resp::ReplyScanner`).

use std::fmt;
use std::ops::Range;

use crate::limits::{ReplyLimits, MAX_DEPTH, MAX_LENGTH_DIGITS};

/// A value that is one line after its type byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineType {
    /// `+`
    Simple,
    /// `-`
    Error,
    /// `:`
    Integer,
    /// `,` (RESP3)
    Double,
    /// `#` (RESP3)
    Boolean,
    /// `(` (RESP3)
    BigNumber,
    /// `_`: the RESP3 null.
    Null,
}

/// A value whose header declares its length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlobType {
    /// `$`: a bulk string.
    Bulk,
    /// `!`: a blob error (RESP3).
    Error,
    /// `=`: a verbatim string, `fmt:text` (RESP3).
    Verbatim,
}

/// An aggregate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AggregateType {
    /// `*`
    Array,
    /// `%`: key-value pairs (RESP3).
    Map,
    /// `~` (RESP3)
    Set,
    /// `|`: pairs annotating the value that follows (RESP3).
    Attribute,
    /// `>`: an out-of-band message (RESP3).
    Push,
}

impl AggregateType {
    /// Values per declared element: maps and attributes declare pairs.
    #[inline]
    fn values_per_element(self) -> usize {
        match self {
            AggregateType::Map | AggregateType::Attribute => 2,
            _ => 1,
        }
    }
}

/// A complete item; lengths are in bytes from the item's type byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A line value of `len` bytes: type byte, text, CRLF (the text is bytes `1..len - 2`).
    Line { ty: LineType, len: usize },
    /// A bulk: a `header` of `header` bytes, then `len` bytes of payload, then CRLF (the payload
    /// is bytes `header..header + len`; the item is `header + len + 2` bytes).
    Blob {
        ty: BlobType,
        header: usize,
        len: usize,
    },
    /// RESP2's null bulk string (`$-1`) or null array (`*-1`), `len` bytes.
    Null { len: usize },
    /// An aggregate's header (`header` bytes), announcing `values` values (twice the declared
    /// count for maps and attributes). Its elements follow, then its [`Event::End`].
    Start {
        ty: AggregateType,
        header: usize,
        values: usize,
    },
    /// The innermost aggregate's last value has been scanned (at once, if it was empty). No
    /// bytes.
    End { ty: AggregateType },
}

impl Event {
    /// Bytes of the item (0 for [`Event::End`]).
    #[inline]
    pub fn item_len(&self) -> usize {
        match *self {
            Event::Line { len, .. } | Event::Null { len } => len,
            Event::Blob { header, len, .. } => header + len + 2,
            Event::Start { header, .. } => header,
            Event::End { .. } => 0,
        }
    }
}

/// What one [`Scanner::step`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// Bytes of the input consumed (all of it when `event` is `None`).
    pub consumed: usize,
    /// The item completed, or `None`: the input is used up and the item in progress (if any)
    /// continues in the next input.
    pub event: Option<Event>,
    /// The bytes of the input (`input[error_text]`) that are error text: part of a `-` line's
    /// text or of a `!` payload. Empty otherwise. An error's text may come in several steps.
    pub error_text: Range<usize>,
}

/// Why the bytes are not a RESP reply. After one, the stream cannot be resynchronized: the
/// connection must be dropped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScanError {
    /// A byte that starts no RESP type.
    UnknownType(u8),
    /// A length header that is not a decimal number (of at most [`MAX_LENGTH_DIGITS`] digits,
    /// optionally negative); streamed lengths (`?`) included.
    BadNumber,
    /// A negative length other than the null `-1`, or a length above the limits.
    BadLength(i64),
    /// CR not followed by LF, LF not preceded by CR, or a payload not followed by CRLF.
    BadLineEnd,
    /// Aggregates nested deeper than [`ReplyLimits::max_depth`].
    TooDeep,
    /// A line longer than this many bytes ([`ReplyLimits::max_line_len`]).
    LineTooLong(usize),
}

impl fmt::Display for ScanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScanError::UnknownType(b) => write!(f, "unknown reply type byte 0x{b:02x}"),
            ScanError::BadNumber => f.write_str("invalid length: not a decimal number"),
            ScanError::BadLength(n) if *n < 0 => write!(f, "invalid length {n}"),
            ScanError::BadLength(n) => write!(f, "length {n} exceeds the limit"),
            ScanError::BadLineEnd => f.write_str("a line or payload not ended by CRLF"),
            ScanError::TooDeep => f.write_str("reply nests deeper than the depth limit"),
            ScanError::LineTooLong(max) => write!(f, "line longer than {max} bytes"),
        }
    }
}

impl std::error::Error for ScanError {}

/// What a length header introduces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Prefixed {
    Blob(BlobType),
    Aggregate(AggregateType),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Expecting a type byte.
    Type,
    /// Inside a line value, before its CR.
    Line(LineType),
    /// A line value's CR was seen.
    LineLf(LineType),
    /// Inside a length header.
    Number {
        kind: Prefixed,
        negative: bool,
        digits: u8,
        value: u64,
    },
    /// A length header's CR was seen.
    NumberLf { kind: Prefixed, value: i64 },
    /// Skipping a payload of `len` bytes, `remaining` still to come.
    Payload {
        ty: BlobType,
        len: usize,
        remaining: usize,
    },
    /// Expecting the CR after a payload.
    PayloadCr { ty: BlobType, len: usize },
    /// Expecting the LF after a payload.
    PayloadLf { ty: BlobType, len: usize },
}

/// An aggregate whose values are still being scanned.
#[derive(Clone, Copy, Debug)]
struct Frame {
    ty: AggregateType,
    /// Values still expected.
    remaining: usize,
}

/// The reply scanner; see the module documentation.
#[derive(Clone, Debug)]
pub struct Scanner {
    limits: ReplyLimits,
    state: State,
    /// Bytes of the item in progress scanned by earlier calls.
    item: usize,
    /// Open aggregates, innermost last.
    frames: Vec<Frame>,
    /// The innermost aggregate has all its values: its `End` comes next.
    closing: bool,
}

impl Default for Scanner {
    fn default() -> Self {
        Scanner::new(ReplyLimits::default())
    }
}

impl Scanner {
    /// A scanner between replies. Reserves the nesting stack (up to [`MAX_DEPTH`] levels), so
    /// that scanning allocates nothing.
    pub fn new(limits: ReplyLimits) -> Scanner {
        Scanner {
            limits,
            state: State::Type,
            item: 0,
            frames: Vec::with_capacity(limits.max_depth.min(MAX_DEPTH)),
            closing: false,
        }
    }

    pub fn limits(&self) -> &ReplyLimits {
        &self.limits
    }

    /// Forgets a reply in progress.
    pub fn reset(&mut self) {
        self.state = State::Type;
        self.item = 0;
        self.frames.clear();
        self.closing = false;
    }

    /// Whether the scanner is between top-level items (nothing partial pending).
    #[inline]
    pub fn is_idle(&self) -> bool {
        self.state == State::Type && self.item == 0 && self.frames.is_empty() && !self.closing
    }

    /// Open aggregates: after a value event, the depth of that value (0: a top-level value);
    /// after an [`Event::End`], the depth of the aggregate that ended.
    #[inline]
    pub fn depth(&self) -> usize {
        self.frames.len()
    }

    /// Bytes of the unfinished item already scanned: a caller that keeps its bytes passes the
    /// bytes after these to the next [`Scanner::step`].
    #[inline]
    pub fn scanned(&self) -> usize {
        self.item
    }

    /// Scans `input` (the bytes that follow those already scanned) up to the end of the next
    /// item; see [`Step`]. Returns `event: None` only once all of `input` is consumed with no
    /// item complete, so a caller loops until then.
    #[inline]
    pub fn step(&mut self, input: &[u8]) -> Result<Step, ScanError> {
        if self.closing {
            self.closing = false;
            if let Some(frame) = self.frames.pop() {
                if frame.ty != AggregateType::Attribute {
                    self.value_done();
                }
                return Ok(Step {
                    consumed: 0,
                    event: Some(Event::End { ty: frame.ty }),
                    error_text: 0..0,
                });
            }
        }
        let mut i = 0;
        let mut error_text = 0..0;
        while i < input.len() {
            match self.state {
                State::Type => {
                    self.state = type_state(input[i])?;
                    i += 1;
                }
                State::Line(ty) => {
                    let rest = &input[i..];
                    let end = rest.iter().position(|&b| b == b'\r' || b == b'\n');
                    let n = end.unwrap_or(rest.len());
                    // The line so far: type byte and text, earlier inputs' bytes included.
                    if self.item + i + n > self.limits.max_line_len {
                        return Err(ScanError::LineTooLong(self.limits.max_line_len));
                    }
                    if ty == LineType::Error {
                        error_text = i..i + n;
                    }
                    i += n;
                    if let Some(p) = end {
                        if rest[p] != b'\r' {
                            return Err(ScanError::BadLineEnd);
                        }
                        i += 1;
                        self.state = State::LineLf(ty);
                    }
                }
                State::LineLf(ty) => {
                    if input[i] != b'\n' {
                        return Err(ScanError::BadLineEnd);
                    }
                    i += 1;
                    let len = self.item_done(i);
                    self.value_done();
                    return Ok(Step {
                        consumed: i,
                        event: Some(Event::Line { ty, len }),
                        error_text,
                    });
                }
                State::Number {
                    kind,
                    negative,
                    digits,
                    value,
                } => {
                    let b = input[i];
                    i += 1;
                    self.state = number_state(kind, negative, digits, value, b)?;
                    // Type byte, sign and digits (the CR not counted).
                    if self.item + i - usize::from(b == b'\r') > self.limits.max_line_len {
                        return Err(ScanError::LineTooLong(self.limits.max_line_len));
                    }
                }
                State::NumberLf { kind, value } => {
                    if input[i] != b'\n' {
                        return Err(ScanError::BadLineEnd);
                    }
                    i += 1;
                    if let Some(step) = self.length_read(kind, value, i, &error_text)? {
                        return Ok(step);
                    }
                }
                State::Payload { ty, len, remaining } => {
                    let take = remaining.min(input.len() - i);
                    if ty == BlobType::Error {
                        error_text = i..i + take;
                    }
                    i += take;
                    self.state = if take == remaining {
                        State::PayloadCr { ty, len }
                    } else {
                        State::Payload {
                            ty,
                            len,
                            remaining: remaining - take,
                        }
                    };
                }
                State::PayloadCr { ty, len } => {
                    if input[i] != b'\r' {
                        return Err(ScanError::BadLineEnd);
                    }
                    i += 1;
                    self.state = State::PayloadLf { ty, len };
                }
                State::PayloadLf { ty, len } => {
                    if input[i] != b'\n' {
                        return Err(ScanError::BadLineEnd);
                    }
                    i += 1;
                    let total = self.item_done(i);
                    self.value_done();
                    return Ok(Step {
                        consumed: i,
                        event: Some(Event::Blob {
                            ty,
                            header: total - len - 2,
                            len,
                        }),
                        error_text,
                    });
                }
            }
        }
        self.item += i;
        Ok(Step {
            consumed: i,
            event: None,
            error_text,
        })
    }

    /// A length read (`$`, `*`, ...: its line ended at `input[..i]`): a blob's payload comes
    /// next, or a null or an aggregate's start is the step's event.
    #[inline]
    fn length_read(
        &mut self,
        kind: Prefixed,
        value: i64,
        i: usize,
        error_text: &Range<usize>,
    ) -> Result<Option<Step>, ScanError> {
        match kind {
            Prefixed::Blob(ty) => {
                if value == -1 && ty == BlobType::Bulk {
                    return Ok(Some(self.null(i, error_text.clone())));
                }
                let len = checked_len(value, self.limits.max_bulk_len)?;
                self.state = State::Payload {
                    ty,
                    len,
                    remaining: len,
                };
                Ok(None)
            }
            Prefixed::Aggregate(ty) => {
                if value == -1 && ty == AggregateType::Array {
                    return Ok(Some(self.null(i, error_text.clone())));
                }
                let count = checked_len(value, self.limits.max_aggregate_len)?;
                if self.frames.len() >= self.limits.max_depth {
                    return Err(ScanError::TooDeep);
                }
                let values = count.saturating_mul(ty.values_per_element());
                let header = self.item_done(i);
                self.frames.push(Frame {
                    ty,
                    remaining: values,
                });
                self.closing = values == 0;
                Ok(Some(Step {
                    consumed: i,
                    event: Some(Event::Start { ty, header, values }),
                    error_text: error_text.clone(),
                }))
            }
        }
    }

    /// The item ends at `input[..end]`: its length, and the scanner ready for the next one.
    #[inline]
    fn item_done(&mut self, end: usize) -> usize {
        let len = self.item + end;
        self.item = 0;
        self.state = State::Type;
        len
    }

    /// A RESP2 null (`$-1`, `*-1`) ends at `input[..end]`.
    fn null(&mut self, end: usize, error_text: Range<usize>) -> Step {
        let len = self.item_done(end);
        self.value_done();
        Step {
            consumed: end,
            event: Some(Event::Null { len }),
            error_text,
        }
    }

    /// A value is complete: one fewer for the innermost aggregate, which may now be complete.
    #[inline]
    fn value_done(&mut self) {
        if let Some(top) = self.frames.last_mut() {
            // Never 0 here: a frame that reaches 0 is closed before anything else is scanned.
            top.remaining -= 1;
            self.closing = top.remaining == 0;
        }
    }
}

fn number(kind: Prefixed) -> State {
    State::Number {
        kind,
        negative: false,
        digits: 0,
        value: 0,
    }
}

/// The state a reply's type byte starts.
#[inline]
fn type_state(b: u8) -> Result<State, ScanError> {
    Ok(match b {
        b'+' => State::Line(LineType::Simple),
        b'-' => State::Line(LineType::Error),
        b':' => State::Line(LineType::Integer),
        b',' => State::Line(LineType::Double),
        b'#' => State::Line(LineType::Boolean),
        b'(' => State::Line(LineType::BigNumber),
        b'_' => State::Line(LineType::Null),
        b'$' => number(Prefixed::Blob(BlobType::Bulk)),
        b'!' => number(Prefixed::Blob(BlobType::Error)),
        b'=' => number(Prefixed::Blob(BlobType::Verbatim)),
        b'*' => number(Prefixed::Aggregate(AggregateType::Array)),
        b'%' => number(Prefixed::Aggregate(AggregateType::Map)),
        b'~' => number(Prefixed::Aggregate(AggregateType::Set)),
        b'|' => number(Prefixed::Aggregate(AggregateType::Attribute)),
        b'>' => number(Prefixed::Aggregate(AggregateType::Push)),
        other => return Err(ScanError::UnknownType(other)),
    })
}

/// The state after byte `b` of a length (a sign, a digit, or the CR that ends it).
#[inline]
fn number_state(
    kind: Prefixed,
    negative: bool,
    digits: u8,
    value: u64,
    b: u8,
) -> Result<State, ScanError> {
    Ok(match b {
        b'-' if digits == 0 && !negative => State::Number {
            kind,
            negative: true,
            digits,
            value,
        },
        b'0'..=b'9' if usize::from(digits) < MAX_LENGTH_DIGITS => State::Number {
            kind,
            negative,
            digits: digits + 1,
            value: value * 10 + u64::from(b - b'0'),
        },
        // `-0` is no length.
        b'\r' if digits > 0 && !(negative && value == 0) => {
            // 19 digits may exceed i64::MAX: the length checks reject those.
            let v = i64::try_from(value).unwrap_or(i64::MAX);
            State::NumberLf {
                kind,
                value: if negative { -v } else { v },
            }
        }
        _ => return Err(ScanError::BadNumber),
    })
}

/// A declared length within `0..=max`.
#[inline]
fn checked_len(value: i64, max: usize) -> Result<usize, ScanError> {
    match usize::try_from(value) {
        Ok(n) if n <= max => Ok(n),
        _ => Err(ScanError::BadLength(value)),
    }
}

#[cfg(test)]
mod tests;
