use bytes::{Bytes, BytesMut};
use quiver_service::frame::{
    ARGV_PREALLOC, PROTO_INLINE_MAX_SIZE, PROTO_MAX_BULK_LEN, PROTO_MULTIBULK_MAX_LEN,
};
use quiver_service::{parse_request, parse_run, Limits, RequestParser, RunSize};

use crate::{parse_all, parse_every_way, Outcome};

const INVALID_MULTIBULK: &str = "ERR Protocol error: invalid multibulk length";
const INVALID_BULK: &str = "ERR Protocol error: invalid bulk length";

fn check(input: &[u8], expected: Outcome) {
    assert_eq!(parse_every_way(input, &Limits::default()), expected);
}

#[test]
fn default_limits_are_redis_7() {
    let l = Limits::default();
    assert_eq!(l.proto_max_bulk_len, 512 << 20);
    assert_eq!(l.multibulk_len_max, 2_147_483_647);
    assert_eq!(l.inline_max_bytes, 65536);
    assert_eq!(PROTO_MAX_BULK_LEN, 512 << 20);
    assert_eq!(PROTO_MULTIBULK_MAX_LEN, i32::MAX as usize);
    assert_eq!(PROTO_INLINE_MAX_SIZE, 64 << 10);
}

#[test]
fn multibulk_request() {
    check(
        b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n",
        Outcome::ok(&[&[b"SET", b"key", b"value"]], 0),
    );
}

#[test]
fn multibulk_args_are_zero_copy() {
    let mut buf = BytesMut::from(&b"*2\r\n$3\r\nGET\r\n$3\r\nkey\r\nrest"[..]);
    let range = buf.as_ptr() as usize..buf.as_ptr() as usize + buf.len();
    let args = parse_request(&mut buf, &Limits::default())
        .unwrap()
        .unwrap();
    assert_eq!(args, vec![Bytes::from("GET"), Bytes::from("key")]);
    for a in &args {
        assert!(
            range.contains(&(a.as_ptr() as usize)),
            "argument was copied"
        );
    }
    assert_eq!(&buf[..], b"rest");
}

#[test]
fn binary_payloads() {
    check(
        b"*2\r\n$4\r\n\r\n\r\n\r\n$5\r\na\0b\r\x00\r\n",
        Outcome::ok(&[&[b"\r\n\r\n", b"a\0b\r\0"]], 0),
    );
    let all: Vec<u8> = (0..=255).collect();
    let mut input = b"*1\r\n$256\r\n".to_vec();
    input.extend_from_slice(&all);
    input.extend_from_slice(b"\r\n");
    check(&input, Outcome::ok(&[&[&all]], 0));
}

#[test]
fn empty_bulk() {
    check(b"*1\r\n$0\r\n\r\n", Outcome::ok(&[&[b""]], 0));
    check(
        b"*3\r\n$0\r\n\r\n$1\r\nx\r\n$0\r\n\r\n",
        Outcome::ok(&[&[b"", b"x", b""]], 0),
    );
}

#[test]
fn zero_and_negative_counts_are_skipped() {
    for input in [
        &b"*0\r\n"[..],
        b"*-1\r\n",
        b"*-10\r\n",
        b"*-9223372036854775808\r\n",
    ] {
        check(input, Outcome::ok(&[], 0));
        let mut with_ping = input.to_vec();
        with_ping.extend_from_slice(b"PING\r\n");
        check(&with_ping, Outcome::ok(&[&[b"PING"]], 0));
    }
}

#[test]
fn invalid_multibulk_length() {
    for input in [
        &b"*abc\r\n"[..],
        b"*\r\n",
        b"*+1\r\n",
        b"*01\r\n",
        b"*-0\r\n",
        b"* 1\r\n",
        b"*1 \r\n",
        b"*-\r\n",
        b"*2147483648\r\n",
        b"*3000000000\r\n",
        b"*9223372036854775808\r\n",
    ] {
        check(input, Outcome::err(&[], INVALID_MULTIBULK));
    }
    // The limit is configurable; Redis 6 used 1024 * 1024.
    let limits = Limits {
        multibulk_len_max: 1024 * 1024,
        ..Limits::default()
    };
    assert_eq!(
        parse_every_way(b"*20000000\r\n", &limits),
        Outcome::err(&[], INVALID_MULTIBULK)
    );
    assert_eq!(
        parse_every_way(b"*1048576\r\n", &limits),
        Outcome::ok(&[], 10)
    );
}

#[test]
fn invalid_bulk_length() {
    for header in [
        &b"$-1"[..],
        b"$-10",
        b"$abc",
        b"$",
        b"$+3",
        b"$03",
        b"$3 ",
        b"$536870913",
        b"$9999999999",
        b"$18446744073709551616",
    ] {
        let mut input = b"*1\r\n".to_vec();
        input.extend_from_slice(header);
        input.extend_from_slice(b"\r\nfoo\r\n");
        check(&input, Outcome::err(&[], INVALID_BULK));
    }
    // The largest legal length is accepted and waits for its payload.
    check(b"*1\r\n$536870912\r\n", Outcome::ok(&[], 16));
    let limits = Limits {
        proto_max_bulk_len: 3,
        ..Limits::default()
    };
    assert_eq!(
        parse_every_way(b"*1\r\n$4\r\nfour\r\n", &limits),
        Outcome::err(&[], INVALID_BULK)
    );
    assert_eq!(
        parse_every_way(b"*1\r\n$3\r\nthr\r\n", &limits),
        Outcome::ok(&[&[b"thr"]], 0)
    );
}

#[test]
fn expected_dollar() {
    // From Redis's tests/unit/protocol.tcl.
    check(
        b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\nfooz\r\n",
        Outcome::err(&[], "ERR Protocol error: expected '$', got 'f'"),
    );
    for byte in 1..=255u8 {
        if byte == b'$' {
            continue;
        }
        let shown = if byte == b'\r' || byte == b'\n' {
            b' '
        } else {
            byte
        };
        let mut message = b"ERR Protocol error: expected '$', got '".to_vec();
        message.extend_from_slice(&[shown, b'\'']);
        let input = [b'*', b'1', b'\r', b'\n', byte, b'\r', b'\n'];
        let out = parse_every_way(&input, &Limits::default());
        assert_eq!(out.error, Some(message), "byte {byte}");
    }
}

#[test]
fn too_big_count_strings() {
    for (prefix, too_big, invalid) in [
        (
            &b"*"[..],
            "ERR Protocol error: too big mbulk count string",
            INVALID_MULTIBULK,
        ),
        (
            b"*1\r\n$",
            "ERR Protocol error: too big bulk count string",
            INVALID_BULK,
        ),
    ] {
        let start = if prefix.len() > 1 { 4 } else { 0 };
        // Exactly PROTO_INLINE_MAX_SIZE bytes buffered from the header start: wait.
        let mut large = prefix.to_vec();
        large.resize(start + PROTO_INLINE_MAX_SIZE, b'0');
        assert_eq!(parse_all(&large, &Limits::default()).error, None);
        assert_eq!(
            crate::parse_chunked(&large, &Limits::default(), 1, true).error,
            None
        );
        let mut over = large.clone();
        over.push(b'0');
        check(&over, Outcome::err(&[], too_big));
        let mut cr = large.clone();
        cr.push(b'\r');
        assert_eq!(parse_all(&cr, &Limits::default()).error, None);
        let mut line = large.clone();
        line.extend_from_slice(b"\r\n");
        assert_eq!(
            parse_all(&line, &Limits::default()),
            Outcome::err(&[], invalid)
        );
    }
}

#[test]
fn too_big_inline_request() {
    let line = vec![b'x'; PROTO_INLINE_MAX_SIZE];
    assert_eq!(
        parse_all(&line, &Limits::default()),
        Outcome::ok(&[], PROTO_INLINE_MAX_SIZE)
    );
    let mut over = line.clone();
    over.push(b'x');
    assert_eq!(
        parse_all(&over, &Limits::default()),
        Outcome::err(&[], "ERR Protocol error: too big inline request")
    );
    // Fed one byte at a time, the incremental parser stays linear.
    assert_eq!(
        crate::parse_chunked(&over, &Limits::default(), 1, true).error,
        Some(b"ERR Protocol error: too big inline request".to_vec())
    );
    // As in Redis, the limit only applies while no line end is buffered.
    let mut long_line = vec![b'y'; PROTO_INLINE_MAX_SIZE + 10];
    long_line.push(b'\n');
    let out = parse_all(&long_line, &Limits::default());
    assert_eq!(out.requests.len(), 1);
    assert_eq!(out.requests[0][0].len(), PROTO_INLINE_MAX_SIZE + 10);
}

#[test]
fn nul_hides_line_ends_like_strchr() {
    // Redis searches line ends with strchr(), which stops at NUL.
    check(b"PING\0\n", Outcome::ok(&[], 6));
    check(b"*1\r\n\0\r\n", Outcome::ok(&[], 7));
    check(b"*\0\r\n", Outcome::ok(&[], 4));
    // ...until more than PROTO_INLINE_MAX_SIZE bytes are buffered.
    let mut input = b"PING\0\n".to_vec();
    input.resize(PROTO_INLINE_MAX_SIZE + 1, b'x');
    assert_eq!(
        parse_all(&input, &Limits::default()),
        Outcome::err(&[], "ERR Protocol error: too big inline request")
    );
}

#[test]
fn line_end_bytes_after_cr_are_not_checked() {
    // Like Redis: the byte after a header's '\r' and the two bytes after a
    // payload are skipped unchecked.
    check(b"*1\rX$3\rYfooAB", Outcome::ok(&[&[b"foo"]], 0));
    check(b"*1\r\n$3\r\nfoo\r", Outcome::ok(&[], 12));
}

#[test]
fn every_prefix_is_incomplete_and_consumes_nothing() {
    let frame = b"*3\r\n$3\r\nSET\r\n$4\r\nk\r\n\0\r\n$0\r\n\r\n";
    for cut in 0..frame.len() {
        let mut buf = BytesMut::from(&frame[..cut]);
        assert_eq!(
            parse_request(&mut buf, &Limits::default()),
            Ok(None),
            "cut {cut}"
        );
        assert_eq!(buf.len(), cut);
    }
    check(frame, Outcome::ok(&[&[b"SET", b"k\r\n\0", b""]], 0));
}

#[test]
fn byte_at_a_time_corpus() {
    // parse_every_way asserts that whole, byte-by-byte (incremental and
    // stateless) and chunked parsing agree.
    let corpus: &[&[u8]] = &[
        b"*1\r\n$4\r\nPING\r\nPING\r\n*0\r\n\r\n*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\n",
        b"SET k \"v\\x41\"\r\nGET 'k'\n*1\r\n$1\r\nx\r\n*1\r\n!",
        b"*2\r\n$3\r\nGET\r\n$-5\r\n",
        b"GET \"unbalanced\r\nPING\r\n",
        b"*-3\r\n*1\r\n$3\r\nabc\r\n",
    ];
    for input in corpus {
        parse_every_way(input, &Limits::default());
    }
}

#[test]
fn pipelined_run_of_1000() {
    let mut input = Vec::new();
    let mut expected = Vec::new();
    for i in 0..1000 {
        let key = format!("key:{i}").into_bytes();
        let value = vec![b'a' + (i % 26) as u8; i % 50];
        if i % 10 == 9 {
            input.extend_from_slice(b"GET ");
            input.extend_from_slice(&key);
            input.extend_from_slice(b"\r\n");
            expected.push(vec![b"GET".to_vec(), key]);
        } else {
            input.extend_from_slice(&crate::encode_multibulk(&[&b"SET"[..], &key, &value]));
            expected.push(vec![b"SET".to_vec(), key, value]);
        }
    }
    input.extend_from_slice(b"*2\r\n$3\r\nGET"); // a partial request follows
    let mut buf = BytesMut::from(&input[..]);
    let run = parse_run(&mut buf, &Limits::default(), RunSize::UNBOUNDED);
    assert!(run.error.is_none() && !run.bounded);
    let run: Vec<Vec<Vec<u8>>> = run
        .requests
        .iter()
        .map(|r| r.iter().map(|a| a.to_vec()).collect())
        .collect();
    assert_eq!(run, expected);
    assert_eq!(&buf[..], b"*2\r\n$3\r\nGET");

    // A bound on requests ends a run; the rest stays buffered.
    let mut buf = BytesMut::from(&input[..]);
    let mut parser = RequestParser::new(Limits::default());
    let first = parser.parse_run(&mut buf, RunSize::requests(10));
    assert!(first.error.is_none() && first.bounded);
    assert_eq!(first.requests.len(), 10);
    let rest = parser.parse_run(&mut buf, RunSize::UNBOUNDED);
    assert!(rest.error.is_none() && !rest.bounded);
    assert_eq!(rest.requests.len(), 990);
    // The partial request at the end, left where the run stopped, completes when its bytes
    // come: the parser resumes it after the run's bytes were split off.
    buf.extend_from_slice(b"\r\n$1\r\nk\r\n*0\r\nPING\r\n");
    let last = parser.parse_run(&mut buf, RunSize::UNBOUNDED);
    assert!(last.error.is_none() && !last.bounded && buf.is_empty());
    assert_eq!(last.requests, [vec!["GET", "k"], vec!["PING"]]);
}

/// Runs of `bound` over `input` until it is used up: the number of requests in each.
fn run_lengths(input: &[u8], bound: RunSize) -> Vec<usize> {
    let mut buf = BytesMut::from(input);
    let mut parser = RequestParser::new(Limits::default());
    let mut lengths = Vec::new();
    loop {
        let run = parser.parse_run(&mut buf, bound);
        assert!(run.error.is_none());
        lengths.push(run.requests.len());
        if !run.bounded {
            return lengths;
        }
    }
}

#[test]
fn a_run_ends_at_its_bound_on_arguments_or_bytes_and_holds_one_request_at_least() {
    // Ten MSETs of 4 pairs (9 arguments, 4 x 10 value bytes + 4 x 2 key bytes + 4 = 52 bytes).
    let mut input = Vec::new();
    for i in 0..10u8 {
        let mut args: Vec<Vec<u8>> = vec![b"MSET".to_vec()];
        for k in 0..4u8 {
            args.push(vec![b'a' + i, b'0' + k]);
            args.push(vec![b'v'; 10]);
        }
        let args: Vec<&[u8]> = args.iter().map(|a| &a[..]).collect();
        input.extend_from_slice(&crate::encode_multibulk(&args));
    }
    let args = |n| RunSize {
        args: n,
        ..RunSize::UNBOUNDED
    };
    let bytes = |n| RunSize {
        bytes: n,
        ..RunSize::UNBOUNDED
    };
    // The request that reaches the bound is the run's last.
    assert_eq!(run_lengths(&input, args(27)), [3, 3, 3, 1]);
    assert_eq!(run_lengths(&input, args(28)), [4, 4, 2]);
    assert_eq!(run_lengths(&input, bytes(104)), [2, 2, 2, 2, 2, 0]);
    assert_eq!(run_lengths(&input, bytes(105)), [3, 3, 3, 1]);
    // A request larger than the bound still runs, alone.
    assert_eq!(
        run_lengths(&input, args(1)),
        [1; 10].iter().chain(&[0]).copied().collect::<Vec<_>>()
    );
    assert_eq!(run_lengths(&input, bytes(1)).len(), 11);
}

#[test]
fn run_returns_requests_before_the_error() {
    let mut buf = BytesMut::from(&b"PING\r\n*1\r\n$4\r\nPING\r\n*1\r\n$x\r\nPING\r\n"[..]);
    let run = parse_run(&mut buf, &Limits::default(), RunSize::UNBOUNDED);
    assert_eq!(run.requests.len(), 2);
    assert_eq!(&run.error.unwrap().message[..], INVALID_BULK.as_bytes());
}

#[test]
fn huge_declared_lengths_allocate_nothing() {
    let limits = Limits::default();
    // Over the limits: rejected outright.
    for input in [&b"*1\r\n$9999999999\r\n"[..], b"*1000000000000\r\n"] {
        let mut buf = BytesMut::with_capacity(64);
        buf.extend_from_slice(input);
        assert!(parse_request(&mut buf, &limits).is_err());
        assert_eq!(buf.capacity(), 64);
    }
    // Within the limits: accepted lazily, nothing reserved for them. Reserving
    // argv for 2^31 - 1 arguments (16 GiB of `Bytes`) or buffer room for
    // 512 MiB would abort or show in the capacity.
    for input in [
        &b"*1000000000\r\n"[..],
        b"*2147483647\r\n$3\r\nfoo\r\n$3\r\nbar\r\n",
        b"*1\r\n$536870912\r\nsome",
        b"*2\r\n$1\r\nx\r\n$536870912\r\n",
    ] {
        let mut buf = BytesMut::with_capacity(64);
        buf.extend_from_slice(input);
        let mut parser = RequestParser::new(limits);
        assert_eq!(parser.parse(&mut buf), Ok(None));
        assert_eq!(buf.len(), input.len());
        assert_eq!(buf.capacity(), 64);
        // Resuming after more bytes arrive still reserves nothing.
        buf.extend_from_slice(b"$2\r\nab\r\n");
        let _ = parser.parse(&mut buf);
        assert_eq!(buf.capacity(), 64);
    }
    assert_eq!(ARGV_PREALLOC, 1024);
}

#[test]
fn slow_large_bulk_is_not_rescanned() {
    // A 1 MiB payload arriving in 1-byte reads: the payload is never searched,
    // so even the stateless function stays linear-ish (it re-reads only the
    // two short header lines). This would take minutes if it were quadratic.
    let payload = vec![b'\r'; 1 << 20];
    let mut input = b"*1\r\n$1048576\r\n".to_vec();
    input.extend_from_slice(&payload);
    input.extend_from_slice(b"\r\n");
    let mut buf = BytesMut::new();
    let mut got = None;
    for &b in &input {
        buf.extend_from_slice(&[b]);
        if let Some(args) = parse_request(&mut buf, &Limits::default()).unwrap() {
            got = Some(args);
        }
    }
    assert_eq!(got.unwrap()[0].len(), 1 << 20);
    assert!(buf.is_empty());
}
