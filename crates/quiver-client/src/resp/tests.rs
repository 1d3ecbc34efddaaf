//! Reply parser and request encoder: every type, RESP2 and RESP3, fed whole,
//! byte by byte, at every split point and in random chunks; malformed
//! replies; declared lengths far beyond the limits.

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;

use super::*;

/// What a byte stream parses to: the replies, then the error (if any).
/// Compared through `Debug`, so that `NaN` equals itself.
#[derive(Debug)]
struct Outcome {
    values: Vec<Value>,
    error: Option<String>,
    /// Bytes left unconsumed at the end (meaningless after an error).
    left: usize,
    /// Whether the parser holds a started reply at the end.
    in_progress: bool,
}

impl Outcome {
    fn key(&self) -> String {
        format!("{self:?}")
    }
}

/// Feeds `input` in pieces of the given sizes (the last one repeated),
/// draining complete replies after each piece.
fn feed(input: &[u8], limits: Limits, sizes: &[usize]) -> Outcome {
    let mut parser = Parser::with_limits(limits);
    let mut buf = BytesMut::new();
    let mut values = Vec::new();
    let mut at = 0;
    let mut piece = 0;
    while at < input.len() {
        let size = sizes[piece.min(sizes.len() - 1)].max(1);
        piece += 1;
        let end = (at + size).min(input.len());
        buf.extend_from_slice(&input[at..end]);
        at = end;
        loop {
            match parser.parse(&mut buf) {
                Ok(Some(v)) => values.push(v),
                Ok(None) => break,
                Err(e) => {
                    assert!(!parser.in_progress(), "parser not reset after an error");
                    return Outcome {
                        values,
                        error: Some(e.to_string()),
                        left: 0,
                        in_progress: false,
                    };
                }
            }
        }
    }
    Outcome {
        values,
        error: None,
        left: buf.len(),
        in_progress: parser.in_progress(),
    }
}

/// Parses `input` whole, byte by byte, in 2-, 3- and 7-byte chunks and (for
/// short inputs) split in two at every point; all must agree. Returns the
/// whole-input outcome.
fn parse_every_way_with(input: &[u8], limits: Limits) -> Outcome {
    let whole = feed(input, limits, &[input.len()]);
    let mut ways: Vec<Vec<usize>> = vec![vec![1], vec![2], vec![3], vec![7]];
    if input.len() <= 300 {
        ways.extend((1..input.len()).map(|split| vec![split, input.len()]));
    }
    for sizes in ways {
        let other = feed(input, limits, &sizes);
        assert_eq!(
            other.key(),
            whole.key(),
            "pieces {sizes:?} differ for {:?}",
            String::from_utf8_lossy(input)
        );
    }
    whole
}

fn parse_every_way(input: &[u8]) -> Outcome {
    parse_every_way_with(input, Limits::default())
}

/// The single complete reply `input` holds, checked every way.
fn one(input: &[u8]) -> Value {
    let out = parse_every_way(input);
    assert_eq!(out.error, None, "{:?}", String::from_utf8_lossy(input));
    assert_eq!(out.left, 0, "bytes left over");
    assert!(!out.in_progress);
    assert_eq!(out.values.len(), 1, "{:?}", out.values);
    out.values.into_iter().next().unwrap()
}

/// The protocol error `input` produces, checked every way.
fn error_of(input: &[u8]) -> String {
    error_with(input, Limits::default())
}

fn error_with(input: &[u8], limits: Limits) -> String {
    let out = parse_every_way_with(input, limits);
    let error = out
        .error
        .unwrap_or_else(|| panic!("no error for {:?}", String::from_utf8_lossy(input)));
    assert!(error.starts_with("protocol error: "), "{error}");
    error
}

fn bulk(b: &[u8]) -> Value {
    Value::Bulk(Bytes::copy_from_slice(b))
}

// ---- RESP2 ----------------------------------------------------------------

#[test]
fn simple_strings() {
    assert_eq!(one(b"+OK\r\n"), Value::Simple("OK".into()));
    assert_eq!(one(b"+\r\n"), Value::Simple(String::new()));
    assert_eq!(
        one(b"+with spaces: and \x01\r\n"),
        Value::Simple("with spaces: and \x01".into())
    );
    // Invalid UTF-8 is replaced rather than refused.
    assert_eq!(one(b"+\xff\r\n"), Value::Simple("\u{fffd}".into()));
}

#[test]
fn simple_errors_keep_their_full_text() {
    assert_eq!(
        one(b"-ERR unknown command 'FOO', with args beginning with: \r\n"),
        Value::Error("ERR unknown command 'FOO', with args beginning with: ".into())
    );
    assert_eq!(
        one(b"-WRONGTYPE Operation\r\n"),
        Value::Error("WRONGTYPE Operation".into())
    );
}

#[test]
fn integers() {
    for (wire, n) in [
        (&b":0\r\n"[..], 0),
        (b":42\r\n", 42),
        (b":-7\r\n", -7),
        (b":9223372036854775807\r\n", i64::MAX),
        (b":-9223372036854775808\r\n", i64::MIN),
    ] {
        assert_eq!(one(wire), Value::Integer(n));
    }
}

#[test]
fn bulk_strings_including_binary_and_empty() {
    assert_eq!(one(b"$3\r\nfoo\r\n"), bulk(b"foo"));
    assert_eq!(one(b"$0\r\n\r\n"), bulk(b""));
    assert_eq!(one(b"$6\r\na\r\n\0\nb\r\n"), bulk(b"a\r\n\0\nb"));
    assert_eq!(one(b"$2\r\n\r\n\r\n"), bulk(b"\r\n"));
    let big = vec![b'x'; 100_000];
    let mut wire = format!("${}\r\n", big.len()).into_bytes();
    wire.extend_from_slice(&big);
    wire.extend_from_slice(b"\r\n");
    assert_eq!(
        feed(&wire, Limits::default(), &[wire.len()]).values,
        [bulk(&big)]
    );
    assert_eq!(feed(&wire, Limits::default(), &[4096]).values, [bulk(&big)]);
}

#[test]
fn nulls_of_both_protocols() {
    assert_eq!(one(b"$-1\r\n"), Value::Null);
    assert_eq!(one(b"*-1\r\n"), Value::Null);
    assert_eq!(one(b"_\r\n"), Value::Null);
}

#[test]
fn arrays_flat_nested_empty_and_mixed() {
    assert_eq!(one(b"*0\r\n"), Value::Array(vec![]));
    assert_eq!(
        one(b"*3\r\n:1\r\n$-1\r\n$2\r\nhi\r\n"),
        Value::Array(vec![Value::Integer(1), Value::Null, bulk(b"hi")])
    );
    assert_eq!(
        one(b"*2\r\n*2\r\n+a\r\n*0\r\n*1\r\n-ERR x\r\n"),
        Value::Array(vec![
            Value::Array(vec![Value::Simple("a".into()), Value::Array(vec![])]),
            Value::Array(vec![Value::Error("ERR x".into())]),
        ])
    );
    // A SCAN reply.
    assert_eq!(
        one(b"*2\r\n$2\r\n17\r\n*2\r\n$1\r\na\r\n$1\r\nb\r\n"),
        Value::Array(vec![
            bulk(b"17"),
            Value::Array(vec![bulk(b"a"), bulk(b"b")])
        ])
    );
}

#[test]
fn pipelined_replies_come_out_in_order() {
    let out = parse_every_way(b"+OK\r\n:1\r\n$1\r\nx\r\n*1\r\n_\r\n-ERR e\r\n");
    assert_eq!(
        out.values,
        [
            Value::Simple("OK".into()),
            Value::Integer(1),
            bulk(b"x"),
            Value::Array(vec![Value::Null]),
            Value::Error("ERR e".into()),
        ]
    );
    assert_eq!(out.error, None);
}

#[test]
fn incomplete_input_waits_and_keeps_its_bytes() {
    let wire = b"*2\r\n$5\r\nhello\r\n:12\r\n";
    for cut in 0..wire.len() {
        let out = feed(&wire[..cut], Limits::default(), &[cut.max(1)]);
        assert!(out.values.is_empty() && out.error.is_none(), "cut {cut}");
    }
    // A bulk is not consumed until its payload and CRLF are all there.
    let mut parser = Parser::new();
    let mut buf = BytesMut::from(&b"$5\r\nhel"[..]);
    assert_eq!(parser.parse(&mut buf).unwrap(), None);
    assert_eq!(&buf[..], b"$5\r\nhel");
    buf.extend_from_slice(b"lo\r");
    assert_eq!(parser.parse(&mut buf).unwrap(), None);
    buf.extend_from_slice(b"\n+next");
    assert_eq!(parser.parse(&mut buf).unwrap(), Some(bulk(b"hello")));
    assert_eq!(&buf[..], b"+next");
}

// ---- RESP3 ----------------------------------------------------------------

#[test]
fn doubles() {
    assert_eq!(one(b",1.5\r\n"), Value::Double(1.5));
    assert_eq!(one(b",-0.25\r\n"), Value::Double(-0.25));
    assert_eq!(one(b",10\r\n"), Value::Double(10.0));
    assert_eq!(one(b",1e300\r\n"), Value::Double(1e300));
    assert_eq!(one(b",inf\r\n"), Value::Double(f64::INFINITY));
    assert_eq!(one(b",-inf\r\n"), Value::Double(f64::NEG_INFINITY));
    assert!(matches!(one(b",nan\r\n"), Value::Double(d) if d.is_nan()));
}

#[test]
fn booleans() {
    assert_eq!(one(b"#t\r\n"), Value::Boolean(true));
    assert_eq!(one(b"#f\r\n"), Value::Boolean(false));
}

#[test]
fn blob_errors() {
    assert_eq!(
        one(b"!21\r\nSYNTAX invalid syntax\r\n"),
        Value::Error("SYNTAX invalid syntax".into())
    );
    assert_eq!(one(b"!4\r\na\r\nb\r\n"), Value::Error("a\r\nb".into()));
}

#[test]
fn verbatim_strings() {
    assert_eq!(
        one(b"=15\r\ntxt:Some string\r\n"),
        Value::Verbatim {
            format: "txt".into(),
            text: Bytes::from_static(b"Some string"),
        }
    );
    assert_eq!(
        one(b"=4\r\nmkd:\r\n"),
        Value::Verbatim {
            format: "mkd".into(),
            text: Bytes::new(),
        }
    );
}

#[test]
fn big_numbers() {
    let digits = "3492890328409238509324850943850943825024385";
    assert_eq!(
        one(format!("({digits}\r\n").as_bytes()),
        Value::BigNumber(digits.into())
    );
    assert_eq!(one(b"(-12\r\n"), Value::BigNumber("-12".into()));
}

#[test]
fn maps_sets_and_pushes() {
    assert_eq!(
        one(b"%2\r\n+first\r\n:1\r\n$6\r\nsecond\r\n*1\r\n#t\r\n"),
        Value::Map(vec![
            (Value::Simple("first".into()), Value::Integer(1)),
            (bulk(b"second"), Value::Array(vec![Value::Boolean(true)])),
        ])
    );
    assert_eq!(one(b"%0\r\n"), Value::Map(vec![]));
    assert_eq!(
        one(b"~3\r\n+a\r\n:2\r\n,3.5\r\n"),
        Value::Set(vec![
            Value::Simple("a".into()),
            Value::Integer(2),
            Value::Double(3.5)
        ])
    );
    assert_eq!(
        one(b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n"),
        Value::Push(vec![bulk(b"message"), bulk(b"ch"), bulk(b"hi")])
    );
    // A map inside a map inside an array.
    assert_eq!(
        one(b"*1\r\n%1\r\n+k\r\n%1\r\n+k2\r\n_\r\n"),
        Value::Array(vec![Value::Map(vec![(
            Value::Simple("k".into()),
            Value::Map(vec![(Value::Simple("k2".into()), Value::Null)])
        )])])
    );
}

#[test]
fn attributes_are_dropped_and_the_annotated_value_returned() {
    // Top level: the attribute, then the reply it annotates.
    assert_eq!(
        one(b"|1\r\n+key-popularity\r\n%1\r\n$1\r\na\r\n,0.19\r\n*2\r\n:2039123\r\n:9543892\r\n"),
        Value::Array(vec![Value::Integer(2039123), Value::Integer(9543892)])
    );
    // Inside an aggregate it takes no slot.
    assert_eq!(
        one(b"*2\r\n:1\r\n|1\r\n+ttl\r\n:3600\r\n:2\r\n"),
        Value::Array(vec![Value::Integer(1), Value::Integer(2)])
    );
    assert_eq!(one(b"|0\r\n:5\r\n"), Value::Integer(5));
}

#[test]
fn hello_3_reply_of_redis() {
    let wire = b"%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$6\r\n7.0.15\r\n\
        $5\r\nproto\r\n:3\r\n$2\r\nid\r\n:5\r\n$4\r\nmode\r\n$10\r\nstandalone\r\n\
        $4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*0\r\n";
    let Value::Map(pairs) = one(wire) else {
        panic!("not a map")
    };
    assert_eq!(pairs.len(), 7);
    assert_eq!(pairs[2], (bulk(b"proto"), Value::Integer(3)));
}

// ---- Malformed replies ----------------------------------------------------

#[test]
fn malformed_replies_are_protocol_errors() {
    for wire in [
        &b"?what\r\n"[..],
        b"\r\n",
        b"\n",
        b"+OK\n",
        b"+OK\rX\n",
        b":\r\n",
        b":-\r\n",
        b":12a\r\n",
        b": 1\r\n",
        b":+1\r\n",
        b":--1\r\n",
        b":9223372036854775808\r\n",
        b":1.5\r\n",
        b"$\r\n",
        b"$-2\r\n",
        b"$+3\r\nfoo\r\n",
        b"$abc\r\n",
        b"$ 3\r\nfoo\r\n",
        b"$3\r\nfooXY",
        b"$3\r\nfoo\n\r",
        b"$3\r\nfoobar\r\n",
        b"*-2\r\n",
        b"*x\r\n",
        b"%-1\r\n",
        b"~-1\r\n",
        b">-1\r\n",
        b"!-1\r\n",
        b"=-1\r\n",
        b",\r\n",
        b",abc\r\n",
        b"#\r\n",
        b"#x\r\n",
        b"#true\r\n",
        b"_x\r\n",
        b"(\r\n",
        b"(12x\r\n",
        b"=3\r\nabc\r\n",
        b"=5\r\ntxt-a\r\n",
        b"$?\r\n",
        b"*?\r\n",
        b"*2\r\n:1\r\n?\r\n",
    ] {
        error_of(wire);
    }
}

#[test]
fn replies_before_a_malformed_one_are_still_returned() {
    let out = parse_every_way(b"+OK\r\n:1\r\n:x\r\n+never\r\n");
    assert_eq!(out.values, [Value::Simple("OK".into()), Value::Integer(1)]);
    assert!(out.error.is_some());
}

// ---- Limits: checked before anything is reserved --------------------------

#[test]
fn huge_declared_lengths_are_refused_without_allocating() {
    for wire in [
        &b"*1000000000000\r\n"[..],
        b"$1000000000000\r\n",
        b"%1000000000000\r\n",
        b"~1000000000000\r\n",
        b">1000000000000\r\n",
        b"|1000000000000\r\n",
        b"!1000000000000\r\n",
        b"=1000000000000\r\n",
        b"*99999999999999999999999999\r\n",
        b"$18446744073709551616\r\n",
        b"*1\r\n*1\r\n$1000000000000\r\n",
    ] {
        let error = error_of(wire);
        assert!(
            error.contains("exceeds the limit") || error.contains("invalid length"),
            "{error}"
        );
    }
    let just_over = format!("${}\r\n", MAX_BULK_LEN + 1);
    error_of(just_over.as_bytes());
    let just_over = format!("*{}\r\n", MAX_AGGREGATE_LEN + 1);
    error_of(just_over.as_bytes());
}

#[test]
fn lengths_at_the_limit_wait_for_their_bytes_without_reserving_them() {
    let mut parser = Parser::new();
    let mut buf = BytesMut::from(format!("${MAX_BULK_LEN}\r\nabc").as_bytes());
    assert_eq!(parser.parse(&mut buf).unwrap(), None);
    assert!(buf.capacity() < 1024 * 1024, "reserved {}", buf.capacity());

    let mut parser = Parser::new();
    let mut buf =
        BytesMut::from(format!("*{MAX_AGGREGATE_LEN}\r\n%{MAX_AGGREGATE_LEN}\r\n").as_bytes());
    assert_eq!(parser.parse(&mut buf).unwrap(), None);
    assert_eq!(parser.stack.len(), 2);
    for partial in &parser.stack {
        assert!(partial.items.capacity() <= AGGREGATE_PREALLOC);
    }
}

#[test]
fn nesting_deeper_than_the_limit_is_refused() {
    let nested = |depth: usize| {
        let mut wire = b"*1\r\n".repeat(depth);
        wire.extend_from_slice(b":1\r\n");
        wire
    };
    let mut value = one(&nested(MAX_DEPTH));
    for _ in 0..MAX_DEPTH {
        let Value::Array(mut items) = value else {
            panic!("not an array")
        };
        value = items.pop().unwrap();
    }
    assert_eq!(value, Value::Integer(1));
    let error = error_of(&nested(MAX_DEPTH + 1));
    assert!(error.contains("nests deeper"), "{error}");
    // A million levels: refused at level MAX_DEPTH, no stack overflow.
    let out = feed(&nested(1_000_000), Limits::default(), &[1 << 20]);
    assert!(out.error.is_some());
}

#[test]
fn lines_longer_than_the_limit_are_refused() {
    let limits = Limits {
        max_line_len: 8,
        ..Limits::default()
    };
    // The type byte counts, the CRLF does not.
    assert_eq!(
        parse_every_way_with(b"+1234567\r\n", limits).values,
        [Value::Simple("1234567".into())]
    );
    error_with(b"+12345678\r\n", limits);
    // Without a newline in sight the limit still ends the wait.
    error_with(b"+123456789", limits);
    let mut endless = b"+".to_vec();
    endless.extend(std::iter::repeat_n(b'a', MAX_LINE_LEN + 10));
    error_of(&endless);
}

#[test]
fn custom_limits_apply() {
    let limits = Limits {
        max_bulk_len: 3,
        max_aggregate_len: 2,
        max_depth: 2,
        max_line_len: 64,
    };
    assert_eq!(
        parse_every_way_with(b"$3\r\nabc\r\n", limits).values,
        [bulk(b"abc")]
    );
    error_with(b"$4\r\nabcd\r\n", limits);
    error_with(b"!4\r\nabcd\r\n", limits);
    error_with(b"*3\r\n:1\r\n:2\r\n:3\r\n", limits);
    error_with(b"%3\r\n", limits);
    assert_eq!(
        parse_every_way_with(b"*1\r\n*1\r\n:1\r\n", limits)
            .values
            .len(),
        1
    );
    error_with(b"*1\r\n*1\r\n*1\r\n:1\r\n", limits);
}

// Request encoding is quiver-resp's (`encode_command`), tested there.

// ---- Property tests -------------------------------------------------------

/// The RESP encoding of `value`: RESP3 types as RESP3, and `Null` as one of
/// its three forms picked by `null_form`.
fn encode(value: &Value, null_form: usize, out: &mut Vec<u8>) {
    let header = |out: &mut Vec<u8>, kind: char, n: usize| {
        out.extend_from_slice(format!("{kind}{n}\r\n").as_bytes())
    };
    match value {
        Value::Simple(s) => out.extend_from_slice(format!("+{s}\r\n").as_bytes()),
        Value::Error(s) => out.extend_from_slice(format!("-{s}\r\n").as_bytes()),
        Value::Integer(n) => out.extend_from_slice(format!(":{n}\r\n").as_bytes()),
        Value::Bulk(b) => {
            header(out, '$', b.len());
            out.extend_from_slice(b);
            out.extend_from_slice(b"\r\n");
        }
        Value::Null => {
            out.extend_from_slice([&b"_\r\n"[..], b"$-1\r\n", b"*-1\r\n"][null_form % 3])
        }
        Value::Array(items) | Value::Set(items) | Value::Push(items) => {
            let kind = match value {
                Value::Array(_) => '*',
                Value::Set(_) => '~',
                _ => '>',
            };
            header(out, kind, items.len());
            for item in items {
                encode(item, null_form, out);
            }
        }
        Value::Map(pairs) => {
            header(out, '%', pairs.len());
            for (k, v) in pairs {
                encode(k, null_form, out);
                encode(v, null_form, out);
            }
        }
        Value::Double(d) => out.extend_from_slice(format!(",{d:?}\r\n").as_bytes()),
        Value::Boolean(b) => out.extend_from_slice(if *b { b"#t\r\n" } else { b"#f\r\n" }),
        Value::Verbatim { format, text } => {
            header(out, '=', text.len() + 4);
            out.extend_from_slice(format.as_bytes());
            out.push(b':');
            out.extend_from_slice(text);
            out.extend_from_slice(b"\r\n");
        }
        Value::BigNumber(n) => out.extend_from_slice(format!("({n}\r\n").as_bytes()),
    }
}

fn arb_value() -> impl Strategy<Value = Value> {
    let line = "[ -~]{0,12}"; // printable ASCII: no CR or LF
    let leaf = prop_oneof![
        line.prop_map(Value::Simple),
        line.prop_map(Value::Error),
        any::<i64>().prop_map(Value::Integer),
        proptest::collection::vec(any::<u8>(), 0..40).prop_map(|b| Value::Bulk(b.into())),
        Just(Value::Null),
        // Finite doubles: `NaN != NaN` would fail the comparison (nan has its own test).
        any::<f64>()
            .prop_filter("finite", |d| d.is_finite())
            .prop_map(Value::Double),
        any::<bool>().prop_map(Value::Boolean),
        ("[a-z]{3}", proptest::collection::vec(any::<u8>(), 0..20)).prop_map(|(format, text)| {
            Value::Verbatim {
                format,
                text: text.into(),
            }
        }),
        "-?[0-9]{1,60}".prop_map(Value::BigNumber),
    ];
    leaf.prop_recursive(4, 64, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Set),
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Push),
            proptest::collection::vec((inner.clone(), inner), 0..4).prop_map(Value::Map),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Any sequence of replies, split anywhere, parses back to itself.
    #[test]
    fn encoded_values_parse_back_in_random_chunks(
        values in proptest::collection::vec(arb_value(), 1..5),
        null_form in 0usize..3,
        sizes in proptest::collection::vec(1usize..40, 1..50),
    ) {
        let mut wire = Vec::new();
        for v in &values {
            encode(v, null_form, &mut wire);
        }
        let out = feed(&wire, Limits::default(), &sizes);
        prop_assert_eq!(out.error, None);
        prop_assert_eq!(out.left, 0);
        prop_assert!(!out.in_progress);
        prop_assert_eq!(out.values, values);
    }

    /// Arbitrary bytes never panic, and parse the same whole as byte by byte.
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
        let limits = Limits { max_bulk_len: 50, max_aggregate_len: 50, max_depth: 8, max_line_len: 40 };
        let whole = feed(&bytes, limits, &[bytes.len()]);
        let chunked = feed(&bytes, limits, &sizes);
        prop_assert_eq!(whole.key(), chunked.key());
    }
}
