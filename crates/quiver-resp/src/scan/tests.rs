//! The scanner: every reply shape, whole, split at every byte and in random chunks; the byte
//! geometry of its events; malformed replies; limits; requests scanned back.

use proptest::prelude::*;

use super::*;
use crate::limits::{MAX_AGGREGATE_LEN, MAX_BULK_LEN, MAX_LINE_LEN};
use crate::request::encode_command;

/// One event as seen by a caller that kept every byte: the event, the depth after it, and the
/// item's bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Seen {
    event: Event,
    depth: usize,
    bytes: Vec<u8>,
}

/// What scanning a stream gave.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Outcome {
    seen: Vec<Seen>,
    /// The text of each error value, concatenated from `Step::error_text`.
    error_texts: Vec<Vec<u8>>,
    error: Option<ScanError>,
    idle: bool,
}

/// Scans `input` in pieces of the given sizes (the last one repeated), never passing the
/// scanner a byte twice.
fn scan_with(input: &[u8], limits: ReplyLimits, sizes: &[usize]) -> Outcome {
    let mut s = Scanner::new(limits);
    let mut out = Outcome {
        seen: Vec::new(),
        error_texts: Vec::new(),
        error: None,
        idle: true,
    };
    let mut text = Vec::new();
    let mut at = 0;
    let mut piece = 0;
    loop {
        let size = sizes[piece.min(sizes.len() - 1)].max(1);
        piece += 1;
        let end = (at + size).min(input.len());
        let mut chunk = &input[at..end];
        let mut pos = at;
        loop {
            let step = match s.step(chunk) {
                Ok(step) => step,
                Err(e) => {
                    out.error = Some(e);
                    return out;
                }
            };
            text.extend_from_slice(&chunk[step.error_text.clone()]);
            pos += step.consumed;
            chunk = &chunk[step.consumed..];
            let Some(event) = step.event else {
                assert!(chunk.is_empty(), "no event but input left");
                break;
            };
            let len = event.item_len();
            if matches!(
                event,
                Event::Line {
                    ty: LineType::Error,
                    ..
                } | Event::Blob {
                    ty: BlobType::Error,
                    ..
                }
            ) {
                out.error_texts.push(std::mem::take(&mut text));
            }
            out.seen.push(Seen {
                event,
                depth: s.depth(),
                bytes: input[pos - len..pos].to_vec(),
            });
        }
        at = end;
        if at == input.len() {
            break;
        }
    }
    out.idle = s.is_idle();
    out
}

/// Scans `input` whole, byte by byte, in 2-, 3- and 7-byte chunks and split in two at every
/// point; all must agree. Returns the whole-input outcome.
fn scan_every_way_with(input: &[u8], limits: ReplyLimits) -> Outcome {
    let whole = scan_with(input, limits, &[input.len()]);
    let mut ways: Vec<Vec<usize>> = vec![vec![1], vec![2], vec![3], vec![7]];
    if input.len() <= 400 {
        ways.extend((1..input.len()).map(|split| vec![split, input.len()]));
    }
    for sizes in ways {
        assert_eq!(
            scan_with(input, limits, &sizes),
            whole,
            "pieces {sizes:?} differ for {:?}",
            String::from_utf8_lossy(input)
        );
    }
    whole
}

fn scan_every_way(input: &[u8]) -> Outcome {
    scan_every_way_with(input, ReplyLimits::default())
}

/// The events of `input`, which must scan without error and end between items.
fn events(input: &[u8]) -> Vec<(Event, usize)> {
    let out = scan_every_way(input);
    assert_eq!(out.error, None, "{:?}", String::from_utf8_lossy(input));
    assert!(
        out.idle,
        "{:?} ends mid-item",
        String::from_utf8_lossy(input)
    );
    out.seen.into_iter().map(|s| (s.event, s.depth)).collect()
}

fn error_of(input: &[u8]) -> ScanError {
    error_with(input, ReplyLimits::default())
}

fn error_with(input: &[u8], limits: ReplyLimits) -> ScanError {
    scan_every_way_with(input, limits)
        .error
        .unwrap_or_else(|| panic!("no error for {:?}", String::from_utf8_lossy(input)))
}

fn line(ty: LineType, len: usize) -> Event {
    Event::Line { ty, len }
}

fn bulk(header: usize, len: usize) -> Event {
    Event::Blob {
        ty: BlobType::Bulk,
        header,
        len,
    }
}

fn start(ty: AggregateType, header: usize, values: usize) -> Event {
    Event::Start { ty, header, values }
}

fn end(ty: AggregateType) -> Event {
    Event::End { ty }
}

use AggregateType::{Array, Attribute, Map, Push, Set};

// ---- Shapes ---------------------------------------------------------------

#[test]
fn line_values() {
    for (wire, ty) in [
        (&b"+OK\r\n"[..], LineType::Simple),
        (b"-ERR unknown command 'x'\r\n", LineType::Error),
        (b":42\r\n", LineType::Integer),
        (b":-7\r\n", LineType::Integer),
        (b",3.14\r\n", LineType::Double),
        (b",-inf\r\n", LineType::Double),
        (b"#t\r\n", LineType::Boolean),
        (
            b"(3492890328409238509324850943850943825024385\r\n",
            LineType::BigNumber,
        ),
        (b"_\r\n", LineType::Null),
        (b"+\r\n", LineType::Simple),
    ] {
        assert_eq!(events(wire), [(line(ty, wire.len()), 0)]);
    }
    // The scanner does not judge a line's text: that is its caller's business.
    assert_eq!(events(b":12a\r\n"), [(line(LineType::Integer, 6), 0)]);
    assert_eq!(events(b"_x\r\n"), [(line(LineType::Null, 4), 0)]);
}

#[test]
fn bulks_and_nulls() {
    assert_eq!(events(b"$5\r\nhello\r\n"), [(bulk(4, 5), 0)]);
    assert_eq!(events(b"$0\r\n\r\n"), [(bulk(4, 0), 0)]);
    // A payload holding CR LF and type bytes is skipped, not parsed.
    assert_eq!(events(b"$6\r\n\r\n*3\r\n\r\n"), [(bulk(4, 6), 0)]);
    // Leading zeros in a length are accepted.
    assert_eq!(events(b"$03\r\nfoo\r\n"), [(bulk(5, 3), 0)]);
    assert_eq!(
        events(b"!21\r\nSYNTAX invalid syntax\r\n"),
        [(
            Event::Blob {
                ty: BlobType::Error,
                header: 5,
                len: 21
            },
            0
        )]
    );
    assert_eq!(
        events(b"=15\r\ntxt:Some string\r\n"),
        [(
            Event::Blob {
                ty: BlobType::Verbatim,
                header: 5,
                len: 15
            },
            0
        )]
    );
    assert_eq!(events(b"$-1\r\n"), [(Event::Null { len: 5 }, 0)]);
    assert_eq!(events(b"*-1\r\n"), [(Event::Null { len: 5 }, 0)]);
    // `-01` is -1 too.
    assert_eq!(events(b"$-01\r\n"), [(Event::Null { len: 6 }, 0)]);
}

#[test]
fn aggregates_nest_and_end() {
    assert_eq!(
        events(b"*0\r\n"),
        [(start(Array, 4, 0), 1), (end(Array), 0)]
    );
    // An MGET reply: bulks and nulls.
    assert_eq!(
        events(b"*3\r\n$3\r\nabc\r\n$-1\r\n$1\r\nx\r\n"),
        [
            (start(Array, 4, 3), 1),
            (bulk(4, 3), 1),
            (Event::Null { len: 5 }, 1),
            (bulk(4, 1), 1),
            (end(Array), 0),
        ]
    );
    assert_eq!(
        events(b"*2\r\n*1\r\n:1\r\n*0\r\n"),
        [
            (start(Array, 4, 2), 1),
            (start(Array, 4, 1), 2),
            (line(LineType::Integer, 4), 2),
            (end(Array), 1),
            (start(Array, 4, 0), 2),
            (end(Array), 1),
            (end(Array), 0),
        ]
    );
    // Maps and attributes declare pairs.
    assert_eq!(
        events(b"%1\r\n+a\r\n:1\r\n"),
        [
            (start(Map, 4, 2), 1),
            (line(LineType::Simple, 4), 1),
            (line(LineType::Integer, 4), 1),
            (end(Map), 0),
        ]
    );
    assert_eq!(
        events(b"~2\r\n:1\r\n:2\r\n"),
        [
            (start(Set, 4, 2), 1),
            (line(LineType::Integer, 4), 1),
            (line(LineType::Integer, 4), 1),
            (end(Set), 0),
        ]
    );
    assert_eq!(
        events(b">1\r\n$2\r\nhi\r\n"),
        [(start(Push, 4, 1), 1), (bulk(4, 2), 1), (end(Push), 0)]
    );
}

#[test]
fn attributes_take_no_slot_in_their_parent() {
    // Top level: the attribute ends at depth 0, then the value it annotates.
    assert_eq!(
        events(b"|1\r\n+ttl\r\n:3600\r\n:5\r\n"),
        [
            (start(Attribute, 4, 2), 1),
            (line(LineType::Simple, 6), 1),
            (line(LineType::Integer, 7), 1),
            (end(Attribute), 0),
            (line(LineType::Integer, 4), 0),
        ]
    );
    // Inside an array of two, the attribute is not one of the two.
    assert_eq!(
        events(b"*2\r\n:1\r\n|1\r\n+ttl\r\n:3600\r\n:2\r\n"),
        [
            (start(Array, 4, 2), 1),
            (line(LineType::Integer, 4), 1),
            (start(Attribute, 4, 2), 2),
            (line(LineType::Simple, 6), 2),
            (line(LineType::Integer, 7), 2),
            (end(Attribute), 1),
            (line(LineType::Integer, 4), 1),
            (end(Array), 0),
        ]
    );
    assert_eq!(
        events(b"|0\r\n+OK\r\n"),
        [
            (start(Attribute, 4, 0), 1),
            (end(Attribute), 0),
            (line(LineType::Simple, 5), 0),
        ]
    );
}

#[test]
fn item_bytes_are_where_the_events_say() {
    let wire = b"*4\r\n+OK\r\n$5\r\na\r\nbc\r\n!3\r\nbad\r\n%1\r\n:1\r\n$-1\r\n";
    let out = scan_every_way(wire);
    assert_eq!(out.error, None);
    let texts: Vec<&[u8]> = out
        .seen
        .iter()
        .map(|s| match s.event {
            Event::Line { len, .. } => &s.bytes[1..len - 2],
            Event::Blob { header, len, .. } => {
                assert_eq!(&s.bytes[header + len..], b"\r\n");
                &s.bytes[header..header + len]
            }
            Event::Null { .. } | Event::Start { .. } | Event::End { .. } => &s.bytes[..],
        })
        .collect();
    assert_eq!(
        texts,
        [
            &b"*4\r\n"[..],
            b"OK",
            b"a\r\nbc",
            b"bad",
            b"%1\r\n",
            b"1",
            b"$-1\r\n",
            b"",
            b"",
        ]
    );
    // Every byte belongs to exactly one item.
    let total: usize = out.seen.iter().map(|s| s.bytes.len()).sum();
    assert_eq!(total, wire.len());
}

#[test]
fn error_text_comes_in_pieces() {
    let out = scan_every_way(b"-ERR no such key\r\n!5\r\nOOPS!\r\n*2\r\n-A\r\n!1\r\nB\r\n+ok\r\n");
    assert_eq!(
        out.error_texts,
        [&b"ERR no such key"[..], b"OOPS!", b"A", b"B"]
    );
    // Text of other values is never reported as error text.
    assert!(scan_every_way(b"+ERR\r\n$3\r\nERR\r\n")
        .error_texts
        .is_empty());
}

#[test]
fn partial_items_wait_and_resume() {
    let mut s = Scanner::default();
    let step = s.step(b"*2\r\n$3\r\nab").unwrap();
    assert_eq!(step.event, Some(start(Array, 4, 2)));
    assert_eq!(step.consumed, 4);
    let step = s.step(b"$3\r\nab").unwrap();
    assert_eq!((step.consumed, step.event), (6, None));
    assert_eq!(s.scanned(), 6);
    assert!(!s.is_idle());
    let step = s.step(b"c\r\n:1\r\n").unwrap();
    assert_eq!((step.consumed, step.event), (3, Some(bulk(4, 3))));
    assert_eq!(s.scanned(), 0);
    let step = s.step(b":1\r\n").unwrap();
    assert_eq!(step.event, Some(line(LineType::Integer, 4)));
    // The array's end needs no bytes.
    let step = s.step(b"").unwrap();
    assert_eq!((step.consumed, step.event), (0, Some(end(Array))));
    assert_eq!(s.step(b"").unwrap().event, None);
    assert!(s.is_idle());
    // reset forgets a reply in progress.
    s.step(b"*3\r\n:1").unwrap();
    assert!(!s.is_idle());
    s.reset();
    assert!(s.is_idle());
    assert_eq!(
        s.step(b"+x\r\n").unwrap().event,
        Some(line(LineType::Simple, 4))
    );
}

#[test]
fn a_pipelined_stream_scans_the_same_split_anywhere() {
    let mut stream = Vec::new();
    for wire in [
        &b"+OK\r\n"[..],
        b"$-1\r\n",
        b"-WRONGTYPE x\r\n",
        b":1\r\n",
        b"*2\r\n$3\r\nabc\r\n_\r\n",
        b"|1\r\n+a\r\n%1\r\n$1\r\nb\r\n,0.19\r\n*2\r\n:1\r\n:2\r\n",
        b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$-1\r\n",
        b"=15\r\ntxt:Some string\r\n",
        b"~0\r\n",
    ] {
        stream.extend_from_slice(wire);
    }
    let out = scan_every_way(&stream);
    assert_eq!(out.error, None);
    assert!(out.idle);
    let top_level = out.seen.iter().filter(|s| s.depth == 0).count();
    // 9 replies, plus the top-level attribute's end.
    assert_eq!(top_level, 10);
}

// ---- Malformed replies ----------------------------------------------------

#[test]
fn malformed_replies_are_errors() {
    let bad: &[(&[u8], ScanError)] = &[
        (b"?\r\n", ScanError::UnknownType(b'?')),
        (b"\r\n", ScanError::UnknownType(b'\r')),
        (b"\n", ScanError::UnknownType(b'\n')),
        (b"*2\r\n:1\r\n?\r\n", ScanError::UnknownType(b'?')),
        (b"$x\r\n", ScanError::BadNumber),
        (b"$\r\n", ScanError::BadNumber),
        (b"$?\r\n", ScanError::BadNumber),
        (b"*?\r\n", ScanError::BadNumber),
        (b"$--1\r\n", ScanError::BadNumber),
        (b"$+3\r\n", ScanError::BadNumber),
        (b"$ 3\r\n", ScanError::BadNumber),
        (b"$3 \r\n", ScanError::BadNumber),
        (b"$-0\r\n", ScanError::BadNumber),
        (b"$-\r\n", ScanError::BadNumber),
        (b"$1.5\r\n", ScanError::BadNumber),
        (b"$-2\r\n", ScanError::BadLength(-2)),
        (b"*-2\r\n", ScanError::BadLength(-2)),
        // -1 is a null only for `$` and `*`.
        (b"%-1\r\n", ScanError::BadLength(-1)),
        (b"~-1\r\n", ScanError::BadLength(-1)),
        (b">-1\r\n", ScanError::BadLength(-1)),
        (b"|-1\r\n", ScanError::BadLength(-1)),
        (b"!-1\r\n", ScanError::BadLength(-1)),
        (b"=-1\r\n", ScanError::BadLength(-1)),
        (b"$99999999999\r\n", ScanError::BadLength(99_999_999_999)),
        (b"$12345678901234567890\r\n", ScanError::BadNumber),
        (b"+OK\rX", ScanError::BadLineEnd),
        (b"+OK\n", ScanError::BadLineEnd),
        (b"+a\nb\r\n", ScanError::BadLineEnd),
        (b"$2\r\nabXY", ScanError::BadLineEnd),
        (b"$2\r\nab\rX", ScanError::BadLineEnd),
        (b"$3\r\nfoo\n\r", ScanError::BadLineEnd),
        (b"*1\r:", ScanError::BadLineEnd),
        (b"$1\rx", ScanError::BadLineEnd),
    ];
    for (bytes, want) in bad {
        assert_eq!(
            error_of(bytes),
            *want,
            "{:?}",
            String::from_utf8_lossy(bytes)
        );
    }
}

#[test]
fn errors_read_well() {
    for (e, text) in [
        (ScanError::UnknownType(b'?'), "unknown reply type byte 0x3f"),
        (ScanError::BadNumber, "invalid length: not a decimal number"),
        (ScanError::BadLength(-2), "invalid length -2"),
        (
            ScanError::BadLength(1 << 40),
            "length 1099511627776 exceeds the limit",
        ),
        (ScanError::BadLineEnd, "a line or payload not ended by CRLF"),
        (
            ScanError::TooDeep,
            "reply nests deeper than the depth limit",
        ),
        (ScanError::LineTooLong(8), "line longer than 8 bytes"),
    ] {
        assert_eq!(e.to_string(), text);
    }
}

// ---- Limits ---------------------------------------------------------------

#[test]
fn lengths_are_checked_against_the_limits() {
    // At the limit: accepted, and the scanner waits for the payload without holding it.
    let at_limit = format!("${MAX_BULK_LEN}\r\nabc");
    let out = scan_with(at_limit.as_bytes(), ReplyLimits::default(), &[1 << 20]);
    assert_eq!((out.error, out.seen.len(), out.idle), (None, 0, false));
    let over = format!("${}\r\n", MAX_BULK_LEN + 1);
    assert_eq!(
        error_of(over.as_bytes()),
        ScanError::BadLength(MAX_BULK_LEN as i64 + 1)
    );
    let at_limit = format!("*{MAX_AGGREGATE_LEN}\r\n%{MAX_AGGREGATE_LEN}\r\n");
    let out = scan_with(at_limit.as_bytes(), ReplyLimits::default(), &[1 << 20]);
    assert_eq!(out.error, None);
    assert_eq!(
        out.seen.last().map(|s| s.event),
        Some(start(Map, 3 + 10, 2 * MAX_AGGREGATE_LEN))
    );
    let over = format!("~{}\r\n", MAX_AGGREGATE_LEN + 1);
    assert_eq!(
        error_of(over.as_bytes()),
        ScanError::BadLength(MAX_AGGREGATE_LEN as i64 + 1)
    );
    for wire in [
        &b"*1000000000000\r\n"[..],
        b"$1000000000000\r\n",
        b"%1000000000000\r\n",
        b"|1000000000000\r\n",
        b"!1000000000000\r\n",
        b"*1\r\n*1\r\n$1000000000000\r\n",
    ] {
        assert_eq!(error_of(wire), ScanError::BadLength(1_000_000_000_000));
    }
    let limits = ReplyLimits {
        max_bulk_len: 3,
        max_aggregate_len: 2,
        max_depth: 2,
        max_line_len: 64,
    };
    assert_eq!(scan_every_way_with(b"$3\r\nabc\r\n", limits).error, None);
    assert_eq!(
        error_with(b"=4\r\ntxt:\r\n", limits),
        ScanError::BadLength(4)
    );
    assert_eq!(error_with(b"*3\r\n", limits), ScanError::BadLength(3));
    // Two pairs are four values, but the limit counts what is declared.
    assert_eq!(
        scan_every_way_with(b"%2\r\n:1\r\n:2\r\n:3\r\n:4\r\n", limits).error,
        None
    );
}

#[test]
fn nesting_is_bounded() {
    let nested = |depth: usize| {
        let mut wire = b"*1\r\n".repeat(depth);
        wire.extend_from_slice(b":1\r\n");
        wire
    };
    let out = scan_with(&nested(MAX_DEPTH), ReplyLimits::default(), &[1 << 20]);
    assert_eq!(out.error, None);
    assert_eq!(out.seen.len(), 2 * MAX_DEPTH + 1);
    assert_eq!(out.seen.iter().map(|s| s.depth).max(), Some(MAX_DEPTH));
    assert_eq!(error_of(&nested(MAX_DEPTH + 1)), ScanError::TooDeep);
    // An empty aggregate is a level too.
    let mut wire = b"*1\r\n".repeat(MAX_DEPTH);
    wire.extend_from_slice(b"*0\r\n");
    assert_eq!(error_of(&wire), ScanError::TooDeep);
    // A million levels: refused at the limit.
    let out = scan_with(&nested(1_000_000), ReplyLimits::default(), &[1 << 20]);
    assert_eq!(out.error, Some(ScanError::TooDeep));
    // A custom limit.
    let limits = ReplyLimits {
        max_depth: 2,
        ..ReplyLimits::default()
    };
    assert_eq!(scan_every_way_with(&nested(2), limits).error, None);
    assert_eq!(error_with(&nested(3), limits), ScanError::TooDeep);
}

#[test]
fn scanning_never_grows_the_nesting_stack() {
    let mut s = Scanner::default();
    let capacity = s.frames.capacity();
    assert!(capacity >= MAX_DEPTH);
    let mut wire = b"*1\r\n".repeat(MAX_DEPTH);
    wire.extend_from_slice(b":1\r\n");
    let mut rest = &wire[..];
    loop {
        let step = s.step(rest).unwrap();
        rest = &rest[step.consumed..];
        if step.event.is_none() {
            break;
        }
    }
    assert!(s.is_idle());
    assert_eq!(s.frames.capacity(), capacity);
}

#[test]
fn lines_are_bounded() {
    let limits = ReplyLimits {
        max_line_len: 8,
        ..ReplyLimits::default()
    };
    // The type byte counts, the CRLF does not.
    assert_eq!(scan_every_way_with(b"+1234567\r\n", limits).error, None);
    assert_eq!(
        error_with(b"+12345678\r\n", limits),
        ScanError::LineTooLong(8)
    );
    // Without a line end in sight the limit still ends the wait.
    assert_eq!(error_with(b"+123456789", limits), ScanError::LineTooLong(8));
    // Length headers are lines too.
    assert_eq!(scan_every_way_with(b"$1234567\r\n", limits).error, None);
    assert_eq!(scan_every_way_with(b"*-1\r\n", limits).error, None);
    assert_eq!(
        error_with(b"$12345678\r\n", limits),
        ScanError::LineTooLong(8)
    );
    // Payloads are not.
    let long_payload = format!("$5\r\n{}\r\n", "x".repeat(5));
    let limits = ReplyLimits {
        max_line_len: 4,
        ..ReplyLimits::default()
    };
    assert_eq!(
        scan_every_way_with(long_payload.as_bytes(), limits).error,
        None
    );
    let mut endless = b"-".to_vec();
    endless.extend(std::iter::repeat_n(b'a', MAX_LINE_LEN + 10));
    assert_eq!(error_of(&endless), ScanError::LineTooLong(MAX_LINE_LEN));
    let mut longest = b"+".to_vec();
    longest.extend(std::iter::repeat_n(b'a', MAX_LINE_LEN - 1));
    longest.extend_from_slice(b"\r\n");
    assert_eq!(
        scan_with(&longest, ReplyLimits::default(), &[4096]).error,
        None
    );
}

// ---- Requests scanned back --------------------------------------------------

#[test]
fn encoded_commands_scan_back_to_their_arguments() {
    let big = vec![b'z'; 70_000];
    let cases: [&[&[u8]]; 4] = [
        &[b"PING"],
        &[b"SET", b"a\r\n\0", b""],
        &[b"MSET", b"k", b"v", b"key2", &big],
        &[],
    ];
    for args in cases {
        let mut wire = Vec::new();
        encode_command(&mut wire, args);
        let out = scan_every_way(&wire);
        assert_eq!(out.error, None);
        assert_eq!(out.seen[0].event, start(Array, 4, args.len()));
        let payloads: Vec<&[u8]> = out.seen[1..out.seen.len() - 1]
            .iter()
            .map(|s| match s.event {
                Event::Blob {
                    ty: BlobType::Bulk,
                    header,
                    len,
                } => &s.bytes[header..header + len],
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(payloads, args);
        assert_eq!(
            out.seen.last().map(|s| (s.event, s.depth)),
            Some((end(Array), 0))
        );
    }
}

// ---- Property tests -------------------------------------------------------

/// A reply tree, for encoding.
#[derive(Clone, Debug)]
enum Tree {
    Line(u8, String),
    Blob(u8, Vec<u8>),
    Null(u8),
    Aggregate(u8, Vec<Tree>),
}

fn encode_tree(tree: &Tree, out: &mut Vec<u8>) {
    match tree {
        Tree::Line(ty, text) => {
            out.push(*ty);
            out.extend_from_slice(text.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        Tree::Blob(ty, payload) => {
            out.extend_from_slice(crate::Header::new(*ty, payload.len()).as_bytes());
            out.extend_from_slice(payload);
            out.extend_from_slice(b"\r\n");
        }
        Tree::Null(ty) => {
            out.push(*ty);
            out.extend_from_slice(b"-1\r\n");
        }
        Tree::Aggregate(ty, items) => {
            let per = if matches!(ty, b'%' | b'|') { 2 } else { 1 };
            out.extend_from_slice(crate::Header::new(*ty, items.len() / per).as_bytes());
            for item in items {
                encode_tree(item, out);
            }
        }
    }
}

/// Events expected for `tree` at `depth` (attributes take no slot, which the counts of the
/// generated trees already reflect).
fn expected(tree: &Tree, depth: usize, out: &mut Vec<(Event, usize)>) {
    let mut wire = Vec::new();
    encode_tree(tree, &mut wire);
    match tree {
        Tree::Line(ty, _) => {
            let ty = match ty {
                b'+' => LineType::Simple,
                b'-' => LineType::Error,
                b':' => LineType::Integer,
                _ => LineType::Null,
            };
            out.push((line(ty, wire.len()), depth));
        }
        Tree::Blob(ty, payload) => {
            let ty = match ty {
                b'$' => BlobType::Bulk,
                b'!' => BlobType::Error,
                _ => BlobType::Verbatim,
            };
            let len = payload.len();
            out.push((
                Event::Blob {
                    ty,
                    header: wire.len() - len - 2,
                    len,
                },
                depth,
            ));
        }
        Tree::Null(_) => out.push((Event::Null { len: 5 }, depth)),
        Tree::Aggregate(ty, items) => {
            let ty = match ty {
                b'*' => Array,
                b'%' => Map,
                b'~' => Set,
                b'|' => Attribute,
                _ => Push,
            };
            let declared = if matches!(ty, Map | Attribute) {
                items.len() / 2
            } else {
                items.len()
            };
            let header = crate::int::header_len(declared);
            out.push((start(ty, header, items.len()), depth + 1));
            for item in items {
                expected(item, depth + 1, out);
            }
            out.push((end(ty), depth));
        }
    }
}

fn arb_tree() -> impl Strategy<Value = Tree> {
    let text = "[ -~]{0,12}"; // printable ASCII: no CR or LF
    let leaf = prop_oneof![
        (proptest::sample::select(b"+-:_".to_vec()), text).prop_map(|(t, s)| Tree::Line(t, s)),
        (
            proptest::sample::select(b"$!=".to_vec()),
            proptest::collection::vec(any::<u8>(), 0..40)
        )
            .prop_map(|(t, p)| Tree::Blob(t, p)),
        proptest::sample::select(b"$*".to_vec()).prop_map(Tree::Null),
    ];
    leaf.prop_recursive(4, 64, 6, |inner| {
        (
            proptest::sample::select(b"*%~>".to_vec()),
            proptest::collection::vec(inner, 0..6),
        )
            .prop_map(|(t, mut items)| {
                if t == b'%' && items.len() % 2 == 1 {
                    items.pop();
                }
                Tree::Aggregate(t, items)
            })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Any sequence of replies, split anywhere, scans to the events of its trees.
    #[test]
    fn encoded_trees_scan_back_in_random_chunks(
        trees in proptest::collection::vec(arb_tree(), 1..5),
        sizes in proptest::collection::vec(1usize..40, 1..50),
    ) {
        let mut wire = Vec::new();
        let mut want = Vec::new();
        for t in &trees {
            encode_tree(t, &mut wire);
            expected(t, 0, &mut want);
        }
        let out = scan_with(&wire, ReplyLimits::default(), &sizes);
        prop_assert_eq!(&out.error, &None);
        prop_assert!(out.idle);
        let got: Vec<(Event, usize)> = out.seen.iter().map(|s| (s.event, s.depth)).collect();
        prop_assert_eq!(got, want);
        prop_assert_eq!(out, scan_with(&wire, ReplyLimits::default(), &[wire.len()]));
    }

    /// Arbitrary bytes never panic, and scan the same whole as in pieces.
    #[test]
    fn arbitrary_bytes_never_panic(
        bytes in proptest::collection::vec(
            prop_oneof![
                3 => proptest::sample::select(b"+-:$*%~>|_,#!=(\r\n0123456789?tfx".to_vec()),
                1 => any::<u8>(),
            ],
            0..80,
        ),
        sizes in proptest::collection::vec(1usize..9, 1..20),
    ) {
        let limits = ReplyLimits { max_bulk_len: 50, max_aggregate_len: 50, max_depth: 8, max_line_len: 40 };
        let whole = scan_with(&bytes, limits, &[bytes.len()]);
        let chunked = scan_with(&bytes, limits, &sizes);
        prop_assert_eq!(whole, chunked);
    }
}
