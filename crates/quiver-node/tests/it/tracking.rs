//! CLIENT TRACKING between connections (issue 37): what one connection's writes send the
//! connections that track the keys — RESP3 pushes while the tracking connection is idle, to
//! a REDIRECT connection, per prefix in BCAST mode, none for NOLOOP's own writes, a null after
//! FLUSHALL — and what is forgotten (a key is invalidated once per read). One connection's
//! replies and pushes byte for byte are the compat goldens' (`cases_ops.json`, `tracking/`).

use std::io::{Read, Write};
use std::net::TcpStream;

use quiver_client::{Connection, Value};
use quiver_node::testing::TestServer;

use crate::bad_input::{client, expect_reply, expect_waiting, multibulk, raw, show};

/// `args` on `c`, its reply.
pub fn call(c: &mut Connection, args: &[&str]) -> Value {
    let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
    c.command(&a).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// Sends `args` on a raw connection.
pub fn send(s: &mut TcpStream, args: &[&str]) {
    let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
    s.write_all(&multibulk(&a)).unwrap();
}

/// Reads until the bytes read end with `end` (HELLO's map has the client id in it).
fn read_through(s: &mut TcpStream, end: &[u8]) {
    let mut got = Vec::new();
    let mut byte = [0u8; 1];
    while !got.ends_with(end) {
        match s.read(&mut byte) {
            Ok(1) => got.push(byte[0]),
            other => panic!(
                "{other:?} after {:?}, waiting for {:?}",
                show(&got),
                show(end)
            ),
        }
    }
}

/// CLIENT ID on a raw connection.
pub fn client_id(s: &mut TcpStream) -> String {
    send(s, &["CLIENT", "ID"]);
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while !line.ends_with(b"\r\n") {
        s.read_exact(&mut byte).unwrap();
        line.push(byte[0]);
    }
    assert_eq!(line[0], b':', "CLIENT ID: {}", show(&line));
    std::str::from_utf8(&line[1..line.len() - 2])
        .unwrap()
        .to_owned()
}

/// A raw connection in RESP3.
fn resp3(server: &TestServer) -> TcpStream {
    let mut s = raw(server.addr);
    s.write_all(b"HELLO 3\r\nPING\r\n").unwrap();
    read_through(&mut s, b"+PONG\r\n");
    s
}

/// The push invalidating `keys`.
fn invalidate(keys: &[&str]) -> Vec<u8> {
    let mut out = format!(">2\r\n$10\r\ninvalidate\r\n*{}\r\n", keys.len());
    for k in keys {
        out.push_str(&format!("${}\r\n{k}\r\n", k.len()));
    }
    out.into_bytes()
}

#[test]
fn another_connections_write_reaches_an_idle_reader() {
    let server = TestServer::start();
    let mut reader = resp3(&server);
    let mut writer = client(server.addr);
    send(&mut reader, &["CLIENT", "TRACKING", "ON"]);
    expect_reply(&mut reader, b"+OK\r\n");
    call(&mut writer, &["SET", "k", "v1"]);
    send(&mut reader, &["GET", "k"]);
    expect_reply(&mut reader, b"$2\r\nv1\r\n");
    // The reader sends nothing: the push comes while it waits.
    call(&mut writer, &["SET", "k", "v2"]);
    expect_reply(&mut reader, &invalidate(&["k"]));
    // Forgotten once sent: the next write sends nothing until the key is read again.
    call(&mut writer, &["SET", "k", "v3"]);
    expect_waiting(&mut reader);
    send(&mut reader, &["MGET", "k", "other"]);
    expect_reply(&mut reader, b"*2\r\n$2\r\nv3\r\n_\r\n");
    call(&mut writer, &["DEL", "k", "other"]);
    expect_reply(&mut reader, &invalidate(&["k"]));
    // A delete of a missing key changes nothing; FLUSHALL invalidates everything (a null).
    send(&mut reader, &["GET", "gone"]);
    expect_reply(&mut reader, b"_\r\n");
    call(&mut writer, &["FLUSHALL"]);
    expect_reply(&mut reader, b">2\r\n$10\r\ninvalidate\r\n_\r\n");
    // Writes of keys the reader never read send nothing.
    call(&mut writer, &["SET", "unread", "x"]);
    expect_waiting(&mut reader);
}

#[test]
fn invalidations_go_to_the_redirect_connection_until_it_is_gone() {
    let server = TestServer::start();
    let mut sink = resp3(&server);
    let id = client_id(&mut sink);
    let mut reader = client(server.addr);
    let mut writer = client(server.addr);
    call(&mut reader, &["CLIENT", "TRACKING", "ON", "REDIRECT", &id]);
    assert_eq!(
        call(&mut reader, &["CLIENT", "GETREDIR"]),
        Value::Integer(id.parse().unwrap())
    );
    call(&mut reader, &["GET", "a"]);
    call(&mut writer, &["SET", "a", "1"]);
    expect_reply(&mut sink, &invalidate(&["a"]));
    // The redirect connection closes: the reader (RESP2, no pushes) shows it as broken.
    drop(sink);
    call(&mut reader, &["GET", "a"]);
    call(&mut writer, &["SET", "a", "2"]);
    let info = call(&mut reader, &["CLIENT", "TRACKINGINFO"]);
    assert!(
        format!("{info:?}").contains("broken_redirect"),
        "TRACKINGINFO after the redirect connection closed: {info:?}"
    );
}

#[test]
fn bcast_sends_each_prefixs_keys_and_noloop_skips_its_own() {
    let server = TestServer::start();
    let mut watcher = resp3(&server);
    send(
        &mut watcher,
        &[
            "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "user:", "PREFIX", "job:",
        ],
    );
    expect_reply(&mut watcher, b"+OK\r\n");
    let mut writer = client(server.addr);
    // One message per prefix, its keys sorted; keys under no prefix are not sent.
    call(
        &mut writer,
        &[
            "MSET", "user:2", "x", "user:1", "y", "other", "z", "job:9", "w",
        ],
    );
    let mut got = vec![0u8; invalidate(&["job:9"]).len() + invalidate(&["user:1", "user:2"]).len()];
    watcher.read_exact(&mut got).unwrap();
    let mut expected = invalidate(&["job:9"]);
    expected.extend(invalidate(&["user:1", "user:2"]));
    assert_eq!(show(&got), show(&expected));
    // NOLOOP: a connection's own writes are not sent back to it; others' are.
    let mut own = resp3(&server);
    send(
        &mut own,
        &[
            "CLIENT", "TRACKING", "ON", "BCAST", "NOLOOP", "PREFIX", "user:",
        ],
    );
    expect_reply(&mut own, b"+OK\r\n");
    send(&mut own, &["SET", "user:3", "own"]);
    expect_reply(&mut own, b"+OK\r\n");
    expect_waiting(&mut own);
    expect_reply(&mut watcher, &invalidate(&["user:3"]));
    call(&mut writer, &["SET", "user:3", "theirs"]);
    expect_reply(&mut own, &invalidate(&["user:3"]));
}

#[test]
fn a_connection_that_tracks_nothing_more_gets_nothing() {
    let server = TestServer::start();
    let mut reader = resp3(&server);
    let mut writer = client(server.addr);
    send(&mut reader, &["CLIENT", "TRACKING", "ON"]);
    expect_reply(&mut reader, b"+OK\r\n");
    send(&mut reader, &["GET", "k"]);
    expect_reply(&mut reader, b"_\r\n");
    send(&mut reader, &["CLIENT", "TRACKING", "OFF"]);
    expect_reply(&mut reader, b"+OK\r\n");
    call(&mut writer, &["SET", "k", "v"]);
    expect_waiting(&mut reader);
    let info = call(&mut writer, &["INFO", "clients"]);
    assert!(
        format!("{info:?}").contains("tracking_clients:0"),
        "{info:?}"
    );
}

/// A key that expires is invalidated when the store's sweep deletes it, with no write from
/// anyone (Redis invalidates a key it deletes expired).
#[test]
fn an_expired_key_is_invalidated() {
    let server = TestServer::start();
    let mut reader = resp3(&server);
    let mut writer = client(server.addr);
    call(&mut writer, &["SET", "short", "lived", "PX", "200"]);
    send(&mut reader, &["CLIENT", "TRACKING", "ON"]);
    expect_reply(&mut reader, b"+OK\r\n");
    send(&mut reader, &["GET", "short"]);
    expect_reply(&mut reader, b"$5\r\nlived\r\n");
    expect_reply(&mut reader, &invalidate(&["short"]));
    send(&mut reader, &["GET", "short"]);
    expect_reply(&mut reader, b"_\r\n");
}

/// DEBUG SET-ACTIVE-EXPIRE 0 stops the sweep: an expired key is absent to reads but not
/// deleted, so no invalidation comes; 1 starts it again, and the invalidation comes.
#[test]
fn debug_set_active_expire_stops_and_starts_the_sweep() {
    use quiver_service::config::DebugCommand;
    let server = TestServer::start_with(|c| c.service.enable_debug_command = DebugCommand::Yes);
    let mut reader = resp3(&server);
    let mut admin = client(server.addr);
    call(&mut admin, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    call(&mut admin, &["SET", "short", "lived", "PX", "50"]);
    send(&mut reader, &["CLIENT", "TRACKING", "ON"]);
    expect_reply(&mut reader, b"+OK\r\n");
    send(&mut reader, &["GET", "short"]);
    expect_reply(&mut reader, b"$5\r\nlived\r\n");
    // Well past its expiry and several sweep ticks: nothing comes.
    std::thread::sleep(std::time::Duration::from_millis(300));
    expect_waiting(&mut reader);
    call(&mut admin, &["DEBUG", "SET-ACTIVE-EXPIRE", "1"]);
    expect_reply(&mut reader, &invalidate(&["short"]));
}
