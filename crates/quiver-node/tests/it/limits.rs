//! The server's resource limits, each on its own server: `maxclients`, the idle `timeout`,
//! `client-query-buffer-limit`, `client-output-buffer-limit` and
//! `client-output-buffer-total-limit`. A client over a per-client limit is refused or
//! disconnected; a reply over the server-wide one is replaced by an error. Everyone else keeps
//! being served.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use quiver_node::testing::TestServer;

use crate::bad_input::{
    client, expect_closed, expect_reply, info_u64, multibulk, raw, read_bulk, read_line, show,
    wait_connected_clients, wait_until, Canary,
};

#[test]
fn maxclients_refuses_the_extra_connection_until_one_leaves() {
    let server = TestServer::start_with(|c| c.service.maxclients = 5);
    let mut admitted: Vec<_> = (0..5)
        .map(|_| {
            let mut s = raw(server.addr);
            s.write_all(b"PING\r\n").unwrap();
            expect_reply(&mut s, b"+PONG\r\n");
            s
        })
        .collect();

    // The sixth is told why, then closed, whatever it sends.
    let mut sixth = raw(server.addr);
    let _ = sixth.write_all(b"PING\r\n");
    expect_reply(&mut sixth, b"-ERR max number of clients reached\r\n");
    expect_closed(&mut sixth);

    // The five are unaffected.
    for s in &mut admitted {
        s.write_all(b"ECHO still\r\n").unwrap();
        expect_reply(s, b"$5\r\nstill\r\n");
    }

    // Once one leaves (and the server has noticed), a new connection is accepted.
    drop(admitted.pop());
    let mut refused = 0;
    let mut replacement = None;
    wait_until("a free client slot", || {
        let mut s = raw(server.addr);
        s.write_all(b"PING\r\n").unwrap();
        let line = read_line(&mut s);
        match &line[..] {
            b"+PONG\r\n" => {
                replacement = Some(s);
                true
            }
            b"-ERR max number of clients reached\r\n" => {
                refused += 1;
                false
            }
            other => panic!("unexpected reply {:?}", show(other)),
        }
    });
    let mut replacement = replacement.unwrap();
    replacement.write_all(b"INFO\r\n").unwrap();
    let info = String::from_utf8(read_bulk(&mut replacement)).unwrap();
    let field = |name: &str| -> u64 {
        info.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .unwrap_or_else(|| panic!("INFO has no {name}"))
            .trim()
            .parse()
            .unwrap()
    };
    assert!(field("rejected_connections") > refused);
    assert_eq!(field("maxclients"), 5);
    assert_eq!(field("connected_clients"), 5);
}

#[test]
fn idle_connections_are_closed_after_the_timeout() {
    let server = TestServer::start_with(|c| c.service.timeout = 1);
    let mut idle = raw(server.addr);
    idle.write_all(b"PING\r\n").unwrap();
    expect_reply(&mut idle, b"+PONG\r\n");

    // A connection that keeps talking is not idle: it outlives several timeouts.
    let mut busy = raw(server.addr);
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(2500) {
        busy.write_all(b"PING\r\n").unwrap();
        expect_reply(&mut busy, b"+PONG\r\n");
        std::thread::sleep(Duration::from_millis(100));
    }

    // The idle one was closed meanwhile (or is, within WAIT).
    expect_closed(&mut idle);
    busy.write_all(b"PING\r\n").unwrap();
    expect_reply(&mut busy, b"+PONG\r\n");
    let mut c = client(server.addr);
    assert!(info_u64(&mut c, "stats", "clients_closed_by_limit") >= 1);
}

#[test]
fn query_buffer_limit_closes_the_flooding_connection() {
    const MIB: usize = 1 << 20;
    let server = TestServer::start_with(|c| {
        c.service.client_query_buffer_limit = MIB;
        c.service.proto_max_bulk_len = MIB;
    });
    let canary = Canary::start(server.addr);

    // Requests well under the limit are fine, also back to back.
    let mut s = raw(server.addr);
    let half = vec![b'h'; MIB / 2];
    let mut two = multibulk(&[b"SET", b"half", &half]);
    two.extend(multibulk(&[b"STRLEN", b"half"]));
    s.write_all(&two).unwrap();
    expect_reply(&mut s, format!("+OK\r\n:{}\r\n", MIB / 2).as_bytes());

    // A multibulk that keeps accumulating arguments without ever completing: the buffered
    // request passes 1 MiB and the server drops the connection (without a reply).
    let mut flood = raw(server.addr);
    flood.write_all(b"*100000\r\n").unwrap();
    let bulk = {
        let mut b = b"$1024\r\n".to_vec();
        b.extend(vec![b'f'; 1024]);
        b.extend(b"\r\n");
        b
    };
    let mut sent = 0usize;
    let mut write_failed = false;
    // Up to 8 MiB: far more than the limit, far less than the declared request.
    while sent < 8 * MIB {
        match flood.write_all(&bulk) {
            Ok(()) => sent += bulk.len(),
            Err(e) => {
                assert!(
                    matches!(e.kind(), ErrorKind::BrokenPipe | ErrorKind::ConnectionReset),
                    "writing the flood failed with {e} (expected the server to close)"
                );
                write_failed = true;
                break;
            }
        }
    }
    if !write_failed {
        // Everything fit in the socket buffers; the server still has to close.
        expect_closed(&mut flood);
    }
    canary.wait_rounds(3);
    let mut c = client(server.addr);
    wait_until(
        "the flooding connection to be counted as closed by a limit",
        || info_u64(&mut c, "stats", "clients_closed_by_limit") >= 1,
    );
    assert_eq!(c.get("half").unwrap().map(|v| v.len()), Some(MIB / 2));
    s.write_all(b"PING\r\n").unwrap();
    expect_reply(&mut s, b"+PONG\r\n");
    canary.finish();
}

#[test]
fn output_buffer_limit_closes_the_greedy_connection() {
    const LIMIT: usize = 1 << 20;
    const VALUE: usize = 256 << 10;
    let server = TestServer::start_with(|c| c.service.client_output_buffer_limit = LIMIT);
    let canary = Canary::start(server.addr);
    let mut c = client(server.addr);
    let value = vec![b'o'; VALUE];
    let keys: Vec<String> = (0..8).map(|i| format!("large:{i}")).collect();
    for k in &keys {
        c.set(k, &value).unwrap();
    }
    // Replies under the limit are fine.
    assert_eq!(c.multi_get(&keys[..3]).unwrap().len(), 3);
    let mut mget: Vec<&[u8]> = vec![b"MGET"];
    mget.extend(keys.iter().map(|k| k.as_bytes()));

    // One MGET whose reply (2 MiB) exceeds the limit: closed, nothing sent.
    let mut greedy = raw(server.addr);
    greedy.write_all(&multibulk(&mget)).unwrap();
    expect_closed(&mut greedy);

    // The same through a pipelined run of GETs (one engine vector, 8 replies).
    let mut greedy = raw(server.addr);
    let mut run = Vec::new();
    for k in &keys {
        run.extend(multibulk(&[b"GET", k.as_bytes()]));
    }
    greedy.write_all(&run).unwrap();
    expect_closed(&mut greedy);

    // Everyone else is fine, the typed client included.
    canary.wait_rounds(3);
    assert_eq!(
        c.get(&keys[7]).unwrap().map(|v| v.len()),
        Some(VALUE),
        "a reply under the limit"
    );
    assert!(info_u64(&mut c, "stats", "clients_closed_by_limit") >= 2);
    wait_connected_clients(&mut c, 2);
    canary.finish();
}

/// `-ERR reply of <len> bytes not sent: ... (<limit> bytes)\r\n`, the error that replaces a reply
/// over client-output-buffer-total-limit.
fn total_limit_error(len: usize, limit: usize) -> Vec<u8> {
    format!(
        "-ERR reply of {len} bytes not sent: the server's buffered replies would exceed \
         client-output-buffer-total-limit ({limit} bytes)\r\n"
    )
    .into_bytes()
}

/// The RESP2 bulk reply of a value of `len` bytes, in bytes.
fn bulk_reply_len(len: usize) -> usize {
    len.to_string().len() + len + 5
}

#[test]
fn output_total_limit_replaces_a_reply_too_large_and_the_connection_goes_on() {
    const LIMIT: usize = 64 << 10;
    const VALUE: usize = 256 << 10;
    let server = TestServer::start_with(|c| c.service.client_output_buffer_total_limit = LIMIT);
    let mut c = client(server.addr);
    c.set("big", vec![b'b'; VALUE]).unwrap();
    c.set("small", "s").unwrap();

    // GET (the vector path) and MGET (its own vector): each reply is replaced by the error,
    // and the connection stays open for what follows.
    let mut s = raw(server.addr);
    s.write_all(&multibulk(&[b"GET", b"big"])).unwrap();
    expect_reply(&mut s, &total_limit_error(bulk_reply_len(VALUE), LIMIT));
    s.write_all(&multibulk(&[b"MGET", b"small", b"big"]))
        .unwrap();
    let mget_len = 4 + bulk_reply_len(1) + bulk_reply_len(VALUE);
    expect_reply(&mut s, &total_limit_error(mget_len, LIMIT));
    s.write_all(b"PING\r\n").unwrap();
    expect_reply(&mut s, b"+PONG\r\n");

    // In a pipelined run (one engine vector) only the reply that does not fit is replaced.
    let mut run = multibulk(&[b"GET", b"small"]);
    run.extend(multibulk(&[b"GET", b"big"]));
    run.extend(multibulk(&[b"GET", b"small"]));
    s.write_all(&run).unwrap();
    let mut expected = b"$1\r\ns\r\n".to_vec();
    expected.extend(total_limit_error(bulk_reply_len(VALUE), LIMIT));
    expected.extend(b"$1\r\ns\r\n");
    expect_reply(&mut s, &expected);

    // The general path (GETSET): the reply is refused, the write was made (the error says
    // the reply was not sent, nothing more).
    s.write_all(&multibulk(&[b"GETSET", b"big", b"replaced"]))
        .unwrap();
    expect_reply(&mut s, &total_limit_error(bulk_reply_len(VALUE), LIMIT));
    s.write_all(&multibulk(&[b"GET", b"big"])).unwrap();
    expect_reply(&mut s, b"$8\r\nreplaced\r\n");

    assert_eq!(
        info_u64(&mut c, "stats", "replies_refused_by_total_limit"),
        4
    );
    assert_eq!(
        info_u64(&mut c, "clients", "client_output_buffer_total_limit"),
        LIMIT as u64
    );
}

/// A client socket whose receive buffer is small, so that the server cannot hand a large reply
/// to the kernel: it stays in the server's buffer until the client reads it.
fn raw_small_window(addr: std::net::SocketAddr) -> TcpStream {
    let s = raw(addr);
    let size: libc::c_int = 64 << 10;
    // SAFETY: setsockopt reads `size` (a c_int, as SO_RCVBUF expects) from a live socket.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&size as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "setsockopt SO_RCVBUF");
    s
}

#[test]
fn output_total_limit_counts_every_connection_and_closed_ones_give_their_bytes_back() {
    // Far more than the socket buffers can take, so an unread reply stays in the server.
    const VALUE: usize = 16 << 20;
    const LIMIT: usize = 24 << 20;
    let server = TestServer::start_with(|c| c.service.client_output_buffer_total_limit = LIMIT);
    let mut c = client(server.addr);
    c.set("big", vec![b'b'; VALUE]).unwrap();
    let get_big = multibulk(&[b"GET", b"big"]);
    let reply_len = bulk_reply_len(VALUE);
    let total = |c: &mut quiver_client::Connection| {
        info_u64(c, "clients", "client_output_buffer_total_bytes")
    };
    assert_eq!(total(&mut c), 0);

    // A asks and does not read: its reply is held in the server's buffer.
    let mut a = raw_small_window(server.addr);
    a.write_all(&get_big).unwrap();
    wait_until("A's reply to be buffered", || {
        total(&mut c) == reply_len as u64
    });
    // B's reply would take the total past the limit: refused, B stays usable.
    let mut b = raw(server.addr);
    b.write_all(&get_big).unwrap();
    expect_reply(&mut b, &total_limit_error(reply_len, LIMIT));
    b.write_all(b"PING\r\n").unwrap();
    expect_reply(&mut b, b"+PONG\r\n");

    // Once A has read its reply, B's fits.
    let mut got = vec![0; reply_len];
    a.read_exact(&mut got).unwrap();
    assert!(got.starts_with(format!("${VALUE}\r\nbbb").as_bytes()));
    wait_until("A's bytes to be given back", || total(&mut c) == 0);
    b.write_all(&get_big).unwrap();
    assert_eq!(read_bulk(&mut b).len(), VALUE);

    // A connection that closes with its reply unread gives its bytes back too.
    let mut d = raw_small_window(server.addr);
    d.write_all(&get_big).unwrap();
    wait_until("D's reply to be buffered", || {
        total(&mut c) == reply_len as u64
    });
    drop(d);
    wait_until("D's bytes to be given back", || total(&mut c) == 0);
    drop((a, b));
    wait_connected_clients(&mut c, 1);
    assert_eq!(total(&mut c), 0);
}
