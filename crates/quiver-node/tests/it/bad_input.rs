//! Malformed and hostile input over real sockets, byte for byte: every protocol error gets
//! Redis 7's exact reply and then the connection is closed by the server; the frames Redis
//! waits on keep their connection open without allocating for what they declare; oversize,
//! empty and extreme keys and values get their replies; a thousand half-sent requests do not
//! hold anyone up. Throughout each test a well-behaved client (a [`Canary`]) keeps doing
//! PING / SET / GET round trips on its own connection and must never fail.
//!
//! The helpers here (raw sockets, the canary, INFO fields) are shared with the `limits`,
//! `security` and `observability` modules.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use quiver_client::{ClientOptions, Connection};
use quiver_node::testing::TestServer;

/// Longest wait for anything a test expects the server to do (a generous liveness bound,
/// not a timing assertion).
pub const WAIT: Duration = Duration::from_secs(30);
/// How long "the server says nothing" is watched for when a frame should be waited on.
pub const QUIET: Duration = Duration::from_millis(300);

// ---------------------------------------------------------------------------------------------
// Shared helpers

/// Bytes shown with escapes, for assertion messages.
pub fn show(bytes: &[u8]) -> String {
    const SHOWN_MAX: usize = 300;
    let mut s = bytes[..bytes.len().min(SHOWN_MAX)]
        .escape_ascii()
        .to_string();
    if bytes.len() > SHOWN_MAX {
        s.push_str(&format!("... ({} bytes)", bytes.len()));
    }
    s
}

/// A plain socket to the server, with [`WAIT`] as read and write timeout.
pub fn raw(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connect to the test server");
    s.set_read_timeout(Some(WAIT)).unwrap();
    s.set_write_timeout(Some(WAIT)).unwrap();
    s.set_nodelay(true).unwrap();
    s
}

/// Reads exactly `expected.len()` bytes and checks they are `expected`.
pub fn expect_reply(s: &mut TcpStream, expected: &[u8]) {
    let mut got = vec![0; expected.len()];
    let mut n = 0;
    while n < got.len() {
        match s.read(&mut got[n..]) {
            Ok(0) => panic!(
                "the server closed the connection after {:?}; expected {:?}",
                show(&got[..n]),
                show(expected)
            ),
            Ok(k) => n += k,
            Err(e) => panic!(
                "reading the reply failed ({e}) after {:?}; expected {:?}",
                show(&got[..n]),
                show(expected)
            ),
        }
    }
    assert_eq!(show(&got), show(expected), "unexpected reply");
}

/// Reads one reply line (up to and including `\r\n`).
pub fn read_line(s: &mut TcpStream) -> Vec<u8> {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while !line.ends_with(b"\r\n") {
        match s.read(&mut byte) {
            Ok(0) => panic!("connection closed after {:?}", show(&line)),
            Ok(_) => line.push(byte[0]),
            Err(e) => panic!("reading a line failed ({e}) after {:?}", show(&line)),
        }
    }
    line
}

/// Reads one bulk-string reply (`$<n>\r\n<n bytes>\r\n`) and returns its payload.
pub fn read_bulk(s: &mut TcpStream) -> Vec<u8> {
    let header = read_line(s);
    let len: usize = std::str::from_utf8(&header[1..header.len() - 2])
        .ok()
        .filter(|_| header[0] == b'$')
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("expected a bulk string, got {:?}", show(&header)));
    let mut payload = vec![0; len + 2];
    s.read_exact(&mut payload).expect("read the bulk payload");
    assert_eq!(&payload[len..], b"\r\n");
    payload.truncate(len);
    payload
}

/// Expects the server to close the connection (read returns 0; a reset also counts, as
/// the kernel sends one when the server closes with bytes it did not read) and to send
/// nothing more before that.
pub fn expect_closed(s: &mut TcpStream) {
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => panic!(
                "expected the server to close the connection, got {:?}",
                show(&buf[..n])
            ),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                panic!("the server did not close the connection within {WAIT:?}")
            }
            Err(e) => panic!("expected a close, read failed: {e}"),
        }
    }
}

/// Expects the server to say nothing for [`QUIET`] and keep the connection open (it waits
/// for the rest of a request).
pub fn expect_waiting(s: &mut TcpStream) {
    s.set_read_timeout(Some(QUIET)).unwrap();
    let mut buf = [0u8; 4096];
    let r = s.read(&mut buf);
    s.set_read_timeout(Some(WAIT)).unwrap();
    match r {
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
        Ok(0) => panic!("the server closed a connection it should wait on"),
        Ok(n) => panic!(
            "the server answered a frame it should wait on: {:?}",
            show(&buf[..n])
        ),
        Err(e) => panic!("the connection failed while waiting: {e}"),
    }
}

/// Sends `input`, expects exactly `reply`, then the server's close.
pub fn expect_error_and_close(addr: SocketAddr, input: &[u8], reply: &[u8]) {
    let mut s = raw(addr);
    s.write_all(input).unwrap();
    expect_reply(&mut s, reply);
    expect_closed(&mut s);
}

/// A RESP multibulk request.
pub fn multibulk(args: &[&[u8]]) -> Vec<u8> {
    let mut out = BytesMut::new();
    quiver_client::encode_command(&mut out, args);
    out.to_vec()
}

/// A client connection that fails instead of hanging: no reconnect, [`WAIT`] timeouts.
pub fn client(addr: SocketAddr) -> Connection {
    client_with(addr, |_| {})
}

pub fn client_with(addr: SocketAddr, configure: impl FnOnce(&mut ClientOptions)) -> Connection {
    let mut options = ClientOptions::new(addr.to_string());
    options.reconnect = false;
    options.read_timeout = Some(WAIT);
    options.write_timeout = Some(WAIT);
    configure(&mut options);
    Connection::connect_with(options).expect("connect to the test server")
}

/// `name:value` of an INFO section, as text.
pub fn info_field(conn: &mut Connection, section: &str, name: &str) -> Option<String> {
    let text = conn.info(Some(section)).expect("INFO");
    let prefix = format!("{name}:");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix).map(|v| v.trim().to_string()))
}

pub fn info_u64(conn: &mut Connection, section: &str, name: &str) -> u64 {
    let v =
        info_field(conn, section, name).unwrap_or_else(|| panic!("INFO {section} has no {name}"));
    v.parse()
        .unwrap_or_else(|_| panic!("INFO {name}:{v} is not a number"))
}

/// Polls `done` until it holds, for at most [`WAIT`]; `what` names it in the failure.
pub fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !done() {
        assert!(Instant::now() < deadline, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Polls INFO until `connected_clients` is `n`.
pub fn wait_connected_clients(conn: &mut Connection, n: u64) {
    let mut last = 0;
    wait_until(&format!("connected_clients to be {n}"), || {
        last = info_u64(conn, "clients", "connected_clients");
        last == n
    });
}

/// A well-behaved client on its own connection and thread: PING, SET, GET (checking the
/// value) in a loop until [`Canary::finish`], which fails the test if any round failed.
pub struct Canary {
    stop: Arc<AtomicBool>,
    rounds: Arc<AtomicU64>,
    /// Request bytes written so far (counted before each request is sent).
    sent: Arc<AtomicU64>,
    thread: Option<JoinHandle<Result<u64, String>>>,
}

impl Canary {
    pub fn start(addr: SocketAddr) -> Canary {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        let stop = Arc::new(AtomicBool::new(false));
        let rounds = Arc::new(AtomicU64::new(0));
        let sent = Arc::new(AtomicU64::new(0));
        let (stop2, rounds2, sent2) = (stop.clone(), rounds.clone(), sent.clone());
        let thread = std::thread::spawn(move || -> Result<u64, String> {
            let mut conn = client(addr);
            let mut n = 0u64;
            while !stop2.load(Ordering::Relaxed) {
                let key = format!("canary:{id}:{}", n % 64);
                let value = format!("value {n} of canary {id}");
                let count = |args: &[&[u8]]| {
                    sent2.fetch_add(multibulk(args).len() as u64, Ordering::SeqCst);
                };
                count(&[b"PING"]);
                conn.ping().map_err(|e| format!("round {n}: PING: {e}"))?;
                count(&[b"SET", key.as_bytes(), value.as_bytes()]);
                conn.set(&key, &value)
                    .map_err(|e| format!("round {n}: SET: {e}"))?;
                count(&[b"GET", key.as_bytes()]);
                let got = conn.get(&key).map_err(|e| format!("round {n}: GET: {e}"))?;
                if got.as_deref() != Some(value.as_bytes()) {
                    return Err(format!("round {n}: GET {key} returned {got:?}"));
                }
                n += 1;
                rounds2.store(n, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(2));
            }
            Ok(n)
        });
        Canary {
            stop,
            rounds,
            sent,
            thread: Some(thread),
        }
    }

    /// Request bytes the canary has sent or is about to send: at least what the server has
    /// read from it.
    pub fn bytes_sent(&self) -> u64 {
        self.sent.load(Ordering::SeqCst)
    }

    /// Waits until the canary completes `n` more rounds: the server is serving right now.
    pub fn wait_rounds(&self, n: u64) {
        let target = self.rounds.load(Ordering::Relaxed) + n;
        let deadline = Instant::now() + WAIT;
        while self.rounds.load(Ordering::Relaxed) < target {
            if self.thread.as_ref().is_some_and(|t| t.is_finished()) {
                // Fails with the canary's own error.
                self.stop.store(true, Ordering::Relaxed);
                let r = self.rounds.load(Ordering::Relaxed);
                panic!("the well-behaved client stopped after {r} rounds (see finish())");
            }
            assert!(
                Instant::now() < deadline,
                "the well-behaved client made no progress for {WAIT:?}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Stops the canary; panics if any of its rounds failed. Returns the rounds done.
    pub fn finish(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        let result = self
            .thread
            .take()
            .expect("finish is called once")
            .join()
            .expect("the canary thread panicked");
        match result {
            Ok(n) => {
                assert!(n > 0, "the well-behaved client never completed a round");
                n
            }
            Err(e) => panic!("the well-behaved client failed: {e}"),
        }
    }
}

impl Drop for Canary {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let result = t.join();
            if !std::thread::panicking() {
                match result {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => panic!("the well-behaved client failed: {e}"),
                    Err(_) => panic!("the canary thread panicked"),
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Protocol errors

const INVALID_MULTIBULK: &[u8] = b"-ERR Protocol error: invalid multibulk length\r\n";
const INVALID_BULK: &[u8] = b"-ERR Protocol error: invalid bulk length\r\n";
const UNBALANCED: &[u8] = b"-ERR Protocol error: unbalanced quotes in request\r\n";

fn repeat(prefix: &[u8], byte: u8, times: usize) -> Vec<u8> {
    let mut v = prefix.to_vec();
    v.resize(prefix.len() + times, byte);
    v
}

#[test]
fn malformed_frames_get_redis_errors_and_are_closed() {
    let server = TestServer::start();
    let canary = Canary::start(server.addr);
    // (input, Redis 7's reply); after the reply the server closes the connection. A request
    // after the bad frame in the same write is never answered.
    let cases: Vec<(Vec<u8>, &[u8])> = vec![
        (b"*abc\r\nPING\r\n".to_vec(), INVALID_MULTIBULK),
        (b"*\r\nPING\r\n".to_vec(), INVALID_MULTIBULK),
        (b"*1x\r\n".to_vec(), INVALID_MULTIBULK),
        (b"*+1\r\n".to_vec(), INVALID_MULTIBULK),
        (b"*01\r\n".to_vec(), INVALID_MULTIBULK),
        (b"*3000000000\r\nPING\r\n".to_vec(), INVALID_MULTIBULK),
        (b"*99999999999999999999999\r\n".to_vec(), INVALID_MULTIBULK),
        (b"*1\r\n$-5\r\nPING\r\n".to_vec(), INVALID_BULK),
        (b"*1\r\n$-1\r\n".to_vec(), INVALID_BULK),
        (b"*1\r\n$abc\r\n".to_vec(), INVALID_BULK),
        (b"*1\r\n$\r\n".to_vec(), INVALID_BULK),
        (b"*1\r\n$999999999999\r\nPING\r\n".to_vec(), INVALID_BULK),
        // Just over the default proto-max-bulk-len (512 MiB).
        (
            b"*3\r\n$3\r\nSET\r\n$1\r\na\r\n$536870913\r\n".to_vec(),
            INVALID_BULK,
        ),
        (
            b"*1\r\nx\r\nPING\r\n".to_vec(),
            b"-ERR Protocol error: expected '$', got 'x'\r\n",
        ),
        (
            b"*1\r\n*1\r\n".to_vec(),
            b"-ERR Protocol error: expected '$', got '*'\r\n",
        ),
        (
            b"*2\r\n$4\r\nECHO\r\n:5\r\n".to_vec(),
            b"-ERR Protocol error: expected '$', got ':'\r\n",
        ),
        (b"SET a \"b\r\nPING\r\n".to_vec(), UNBALANCED),
        (b"SET a 'b\r\nPING\r\n".to_vec(), UNBALANCED),
        (b"SET a \"b\"c\r\n".to_vec(), UNBALANCED),
        (b"ECHO \"a\\\"\r\n".to_vec(), UNBALANCED),
        // No line end within 64 KiB.
        (
            repeat(b"", b'a', 70_000),
            b"-ERR Protocol error: too big inline request\r\n",
        ),
        (
            repeat(b"*", b'1', 70_000),
            b"-ERR Protocol error: too big mbulk count string\r\n",
        ),
        (
            repeat(b"*1\r\n$", b'1', 70_000),
            b"-ERR Protocol error: too big bulk count string\r\n",
        ),
    ];
    for (input, reply) in &cases {
        expect_error_and_close(server.addr, input, reply);
    }
    canary.wait_rounds(3);
    let mut c = client(server.addr);
    assert!(info_u64(&mut c, "stats", "total_error_replies_protocol") >= cases.len() as u64);
    canary.finish();
}

#[test]
fn requests_before_a_bad_frame_are_answered_first() {
    let server = TestServer::start();
    let canary = Canary::start(server.addr);
    expect_error_and_close(
        server.addr,
        b"PING\r\n*abc\r\nPING\r\n",
        b"+PONG\r\n-ERR Protocol error: invalid multibulk length\r\n",
    );
    // Vectorised SETs and GETs ahead of the bad frame run, in order, before the error.
    let mut input = Vec::new();
    for i in 0..10 {
        input.extend(multibulk(&[b"SET", format!("before:{i}").as_bytes(), b"v"]));
    }
    input.extend(multibulk(&[b"GET", b"before:3"]));
    input.extend(b"ECHO inline\r\n");
    input.extend(b"*1\r\n$-5\r\n");
    input.extend(multibulk(&[b"SET", b"after", b"never"]));
    let mut expected = b"+OK\r\n".repeat(10);
    expected.extend(b"$1\r\nv\r\n$6\r\ninline\r\n");
    expected.extend(INVALID_BULK);
    expect_error_and_close(server.addr, &input, &expected);
    let mut c = client(server.addr);
    assert_eq!(c.get("before:9").unwrap().as_deref(), Some(&b"v"[..]));
    assert_eq!(
        c.get("after").unwrap(),
        None,
        "a request after the bad frame ran"
    );
    canary.finish();
}

#[test]
fn frames_redis_waits_on_keep_the_connection_open() {
    let server = TestServer::start();
    let canary = Canary::start(server.addr);

    // Negative and zero counts are consumed without a command.
    for skipped in [&b"*-5\r\n"[..], b"*-1\r\n", b"*0\r\n", b"\r\n", b"   \r\n"] {
        let mut s = raw(server.addr);
        s.write_all(skipped).unwrap();
        s.write_all(b"PING\r\n").unwrap();
        expect_reply(&mut s, b"+PONG\r\n");
        let mut input = skipped.to_vec();
        input.extend(b"ECHO again\r\n");
        s.write_all(&input).unwrap();
        expect_reply(&mut s, b"$5\r\nagain\r\n");
    }

    // A partial bulk waits, keeps its progress, and completes.
    let mut s = raw(server.addr);
    s.write_all(b"*2\r\n$4\r\nECHO\r\n$5\r\nhel").unwrap();
    expect_waiting(&mut s);
    s.write_all(b"lo\r\n").unwrap();
    expect_reply(&mut s, b"$5\r\nhello\r\n");

    // `*1\r\nx` has no line end yet: Redis waits; once the line ends it is an error.
    let mut s = raw(server.addr);
    s.write_all(b"*1\r\nx").unwrap();
    expect_waiting(&mut s);
    s.write_all(b"\r\n").unwrap();
    expect_reply(&mut s, b"-ERR Protocol error: expected '$', got 'x'\r\n");
    expect_closed(&mut s);

    // A count within INT_MAX waits for its bulks.
    let mut s = raw(server.addr);
    s.write_all(b"*2000000000\r\n$4\r\nPING\r\n").unwrap();
    expect_waiting(&mut s);
    canary.wait_rounds(3);
    canary.finish();
}

/// Declared sizes cost nothing until the bytes arrive: connections declaring a 10^9-element
/// array or a 500 MB bulk that never comes leave the process's RSS where it was.
#[test]
fn huge_declared_lengths_allocate_nothing() {
    const CONNECTIONS: usize = 8;
    let server = TestServer::start();
    let canary = Canary::start(server.addr);
    let mut control = client(server.addr);
    control.set("k", "v").unwrap();
    canary.wait_rounds(1);
    let baseline_clients = info_u64(&mut control, "clients", "connected_clients");
    let rss_before = quiver_service::figures::process_rss_bytes();
    assert!(rss_before > 0, "process_rss_bytes reads /proc/self/statm");

    // Bytes the server reads from now on: the hostile frames, the control connection's own
    // requests (counted as they are sent) and the canary's (which counts its own).
    let input_before = info_u64(&mut control, "stats", "total_net_input_bytes");
    let canary_before = canary.bytes_sent();
    let mut sent = 0usize;
    let mut hostile = Vec::new();
    for i in 0..CONNECTIONS {
        let mut s = raw(server.addr);
        let mut array = b"*1000000000\r\n".to_vec();
        for _ in 0..3 {
            array.extend(b"$3\r\nGET\r\n");
        }
        s.write_all(&array).unwrap();
        sent += array.len();
        hostile.push(s);

        let mut s = raw(server.addr);
        let mut bulk = format!("*3\r\n$3\r\nSET\r\n$6\r\nhuge:{i}\r\n$500000000\r\n").into_bytes();
        bulk.extend(vec![b'z'; 4096]);
        s.write_all(&bulk).unwrap();
        sent += bulk.len();
        hostile.push(s);

        // The well-behaved client is served all along.
        let key = format!("between:{i}");
        control.set(&key, "ok").unwrap();
        sent += multibulk(&[b"SET", key.as_bytes(), b"ok"]).len();
        assert_eq!(control.get("k").unwrap().as_deref(), Some(&b"v"[..]));
        sent += multibulk(&[b"GET", b"k"]).len();
    }
    // Wait until the server has read every hostile byte. INFO counts the bytes read from
    // every connection (each INFO request included before it answers); the canary's count,
    // taken after the answer, bounds what the server had read from it. So once the total
    // reaches hostile + control + canary bytes, every hostile byte has been read.
    let info_request = multibulk(&[b"INFO", b"stats"]).len();
    wait_until("the server to read the hostile frames", || {
        sent += info_request;
        let read = info_u64(&mut control, "stats", "total_net_input_bytes") - input_before;
        let canary_sent = canary.bytes_sent() - canary_before;
        read >= sent as u64 + canary_sent
    });
    wait_connected_clients(&mut control, baseline_clients + hostile.len() as u64);
    let rss_after = quiver_service::figures::process_rss_bytes();
    let grown = rss_after.saturating_sub(rss_before);
    assert!(
        grown < 200 << 20,
        "RSS grew by {} MB for frames that only declare their size",
        grown >> 20
    );
    // None of them was answered; they are all still waiting.
    for s in &mut hostile {
        s.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 64];
        match s.read(&mut buf) {
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            other => panic!("a waiting connection got {other:?}"),
        }
    }
    assert_eq!(control.get("huge:0").unwrap(), None);
    drop(hostile);
    wait_connected_clients(&mut control, baseline_clients);
    assert_eq!(
        control.get("between:0").unwrap().as_deref(),
        Some(&b"ok"[..])
    );
    canary.finish();
}

// ---------------------------------------------------------------------------------------------
// Oversize, empty and extreme keys and values

#[test]
fn values_over_proto_max_bulk_len_are_protocol_errors() {
    const LIMIT: usize = 1 << 20;
    let server = TestServer::start_with(|c| c.service.proto_max_bulk_len = LIMIT);
    let canary = Canary::start(server.addr);

    // One byte over: refused at the header, before any payload is read.
    expect_error_and_close(
        server.addr,
        format!("*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n${}\r\n", LIMIT + 1).as_bytes(),
        INVALID_BULK,
    );
    // The same for any argument, not only values.
    expect_error_and_close(
        server.addr,
        format!("*2\r\n${}\r\n", LIMIT + 1).as_bytes(),
        INVALID_BULK,
    );
    // Exactly the limit is accepted.
    let mut s = raw(server.addr);
    let value = vec![b'x'; LIMIT];
    s.write_all(&multibulk(&[b"SET", b"big", &value])).unwrap();
    expect_reply(&mut s, b"+OK\r\n");
    s.write_all(&multibulk(&[b"STRLEN", b"big"])).unwrap();
    expect_reply(&mut s, format!(":{LIMIT}\r\n").as_bytes());
    s.write_all(&multibulk(&[b"GET", b"big"])).unwrap();
    let mut expected = format!("${LIMIT}\r\n").into_bytes();
    expected.extend(&value);
    expected.extend(b"\r\n");
    expect_reply(&mut s, &expected);
    // A string that would grow past the limit is refused in Redis's words, and unchanged.
    for grow in [
        &[&b"APPEND"[..], b"big", b"yy"][..],
        &[b"SETRANGE", b"big", b"1048575", b"yy"],
    ] {
        s.write_all(&multibulk(grow)).unwrap();
        expect_reply(
            &mut s,
            b"-ERR string exceeds maximum allowed size (proto-max-bulk-len)\r\n",
        );
    }
    s.write_all(&multibulk(&[b"STRLEN", b"big"])).unwrap();
    expect_reply(&mut s, format!(":{LIMIT}\r\n").as_bytes());
    // The engine's own value limit (512 MiB) equals the largest default proto-max-bulk-len:
    // reaching it would take sending half a gigabyte, which this suite does not do.
    canary.wait_rounds(3);
    canary.finish();
}

#[test]
fn empty_values_and_extreme_keys() {
    let server = TestServer::start();
    let canary = Canary::start(server.addr);
    let mut s = raw(server.addr);

    // Empty values are values.
    s.write_all(b"SET e1 \"\"\r\nGET e1\r\nSTRLEN e1\r\nEXISTS e1\r\n")
        .unwrap();
    expect_reply(&mut s, b"+OK\r\n$0\r\n\r\n:0\r\n:1\r\n");
    s.write_all(b"*3\r\n$3\r\nSET\r\n$2\r\ne2\r\n$0\r\n\r\n*2\r\n$3\r\nGET\r\n$2\r\ne2\r\n")
        .unwrap();
    expect_reply(&mut s, b"+OK\r\n$0\r\n\r\n");
    s.write_all(&multibulk(&[b"MSET", b"e3", b"", b"e4", b""]))
        .unwrap();
    expect_reply(&mut s, b"+OK\r\n");
    s.write_all(&multibulk(&[b"MGET", b"e3", b"e4"])).unwrap();
    expect_reply(&mut s, b"*2\r\n$0\r\n\r\n$0\r\n\r\n");

    // The empty key is a key, as in Redis, through every path: inline and multibulk, vectors
    // and transactions.
    s.write_all(b"SET \"\" v\r\nGET \"\"\r\n").unwrap();
    expect_reply(&mut s, b"+OK\r\n$1\r\nv\r\n");
    s.write_all(&multibulk(&[b"MSET", b"ok", b"1", b"", b"w"]))
        .unwrap();
    s.write_all(&multibulk(&[b"SETNX", b"", b"x"])).unwrap();
    s.write_all(&multibulk(&[b"APPEND", b"", b"!"])).unwrap();
    s.write_all(b"GET \"\"\r\nEXISTS \"\" ok\r\nDEL \"\"\r\nMGET \"\" ok\r\nINCR \"\"\r\n")
        .unwrap();
    expect_reply(
        &mut s,
        b"+OK\r\n:0\r\n:2\r\n$2\r\nw!\r\n:2\r\n:1\r\n*2\r\n$-1\r\n$1\r\n1\r\n:1\r\n",
    );

    // Keys: 65535 bytes is the longest accepted, 65536 is refused.
    let longest = vec![b'k'; 65_535];
    let too_long = vec![b'k'; 65_536];
    s.write_all(&multibulk(&[b"SET", &too_long, b"v"])).unwrap();
    let line = read_line(&mut s);
    assert!(line.starts_with(b"-ERR "), "{:?}", show(&line));
    s.write_all(&multibulk(&[b"GET", &too_long])).unwrap();
    expect_reply(&mut s, b"$-1\r\n");
    s.write_all(&multibulk(&[b"SET", &longest, b"longest"]))
        .unwrap();
    expect_reply(&mut s, b"+OK\r\n");
    s.write_all(&multibulk(&[b"GET", &longest])).unwrap();
    expect_reply(&mut s, b"$7\r\nlongest\r\n");
    s.write_all(&multibulk(&[b"GET", &too_long])).unwrap();
    expect_reply(&mut s, b"$-1\r\n");

    // Errors about keys are replies, not protocol errors: the connection carries on.
    s.write_all(b"PING\r\n").unwrap();
    expect_reply(&mut s, b"+PONG\r\n");
    canary.wait_rounds(3);
    canary.finish();
}

// ---------------------------------------------------------------------------------------------
// Many half-sent requests

#[test]
fn a_thousand_partial_frames_do_not_block_other_clients() {
    const PARTIAL: usize = 1000;
    let server = TestServer::start();
    let canary = Canary::start(server.addr);
    let mut control = client(server.addr);
    canary.wait_rounds(1);
    let baseline = info_u64(&mut control, "clients", "connected_clients");

    let mut partial = Vec::with_capacity(PARTIAL);
    for i in 0..PARTIAL {
        let mut s = raw(server.addr);
        s.write_all(b"*2\r\n$3\r\nGET\r\n$5\r\nab").unwrap();
        partial.push(s);
        if i % 50 == 0 {
            let key = format!("round:{i}");
            control.set(&key, i.to_string()).unwrap();
            assert_eq!(control.get(&key).unwrap(), Some(i.to_string().into()));
        }
    }
    wait_connected_clients(&mut control, baseline + PARTIAL as u64);
    for i in 0..100 {
        let key = format!("held:{i}");
        control.set(&key, format!("value {i}")).unwrap();
        assert_eq!(
            control.get(&key).unwrap().as_deref(),
            Some(format!("value {i}").as_bytes())
        );
    }
    canary.wait_rounds(5);
    // Nobody was answered; each is still waiting, and finishing a frame gets its answer.
    for s in &mut partial {
        s.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 16];
        match s.read(&mut buf) {
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            other => panic!("a partial frame was answered: {other:?}"),
        }
        s.set_nonblocking(false).unwrap();
    }
    control.set("abcde", "done").unwrap();
    for s in partial.iter_mut().step_by(100) {
        s.write_all(b"cde\r\n").unwrap();
        expect_reply(s, b"$4\r\ndone\r\n");
    }
    drop(partial);
    wait_connected_clients(&mut control, baseline);
    control.ping().unwrap();
    assert_eq!(
        control.get("held:99").unwrap().as_deref(),
        Some(&b"value 99"[..])
    );
    canary.finish();
}
