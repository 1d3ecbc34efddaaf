//! The server's resource limits, each on its own server: `maxclients`, the idle `timeout`,
//! `client-query-buffer-limit` and `client-output-buffer-limit`. A client over a limit is
//! refused or disconnected; everyone else keeps being served.

use std::io::{ErrorKind, Write};
use std::time::{Duration, Instant};

use quiver_server::testing::TestServer;

use crate::bad_input::{
    client, expect_closed, expect_reply, info_u64, multibulk, raw, read_bulk, read_line, show,
    wait_connected_clients, wait_until, Canary,
};

#[test]
fn maxclients_refuses_the_extra_connection_until_one_leaves() {
    let server = TestServer::start_with(|c| c.maxclients = 5);
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
    let server = TestServer::start_with(|c| c.timeout = 1);
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
        c.client_query_buffer_limit = MIB;
        c.proto_max_bulk_len = MIB;
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
    let server = TestServer::start_with(|c| c.client_output_buffer_limit = LIMIT);
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
