//! The reconnect rule: reconnect when nothing of the request can have
//! reached the server, never after.

use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use quiver_client::{ClientOptions, Connection, Error};

use crate::common::{read_exactly, FakeServer, TestServer};

#[test]
fn reconnects_after_the_server_closed_an_idle_connection() {
    let server = TestServer::start();
    let mut conn = server.connect();
    conn.set("survives", "yes").unwrap();
    server.drop_connections();
    // The peek before writing sees the close: a new connection is used.
    conn.ping().unwrap();
    assert_eq!(conn.get("survives").unwrap().as_deref(), Some(&b"yes"[..]));
    // Again, with a write.
    server.drop_connections();
    assert_eq!(conn.incr("n").unwrap(), 1);
    assert_eq!(conn.incr("n").unwrap(), 2);
}

#[test]
fn reconnects_after_a_server_restart() {
    let mut server = TestServer::start();
    let mut conn = server.connect();
    conn.ping().unwrap();
    server.restart();
    conn.ping().unwrap();
    conn.set("k", "v").unwrap();
    assert_eq!(conn.get("k").unwrap().as_deref(), Some(&b"v"[..]));
}

#[test]
fn reconnects_with_auth() {
    let server = TestServer::start_with_password("pw");
    let mut conn = server.connect();
    conn.set("k", "v").unwrap();
    server.drop_connections();
    assert_eq!(conn.get("k").unwrap().as_deref(), Some(&b"v"[..]));
}

#[test]
fn without_reconnect_a_closed_connection_is_an_error() {
    let server = TestServer::start();
    let mut options = server.options();
    options.reconnect = false;
    let mut conn = Connection::connect_with(options).unwrap();
    conn.ping().unwrap();
    server.drop_connections();
    let err = conn.ping().unwrap_err();
    assert!(err.is_connection_error(), "{err:?}");
    assert!(
        matches!(err, Error::ConnectionClosed | Error::Io(_)),
        "{err:?}"
    );
    assert!(matches!(conn.ping().unwrap_err(), Error::NotConnected));
}

/// The server reads the request and hangs up without answering: it may
/// have applied it, so the client must report the failure, not resend.
#[test]
fn a_request_that_reached_the_server_is_never_resent() {
    let requests = Arc::new(AtomicUsize::new(0));
    let seen = requests.clone();
    let server = FakeServer::start(2, move |index, mut stream| {
        if index == 0 {
            // INCR counter: *2\r\n$4\r\nINCR\r\n$7\r\ncounter\r\n
            let got = read_exactly(&mut stream, 27);
            assert_eq!(got, b"*2\r\n$4\r\nINCR\r\n$7\r\ncounter\r\n");
            seen.fetch_add(1, Ordering::SeqCst);
            // Dropping the stream closes it without a reply.
        } else {
            let got = read_exactly(&mut stream, 14);
            assert_eq!(got, b"*1\r\n$4\r\nPING\r\n");
            stream.write_all(b"+PONG\r\n").unwrap();
            read_exactly(&mut stream, 1);
        }
    });
    let mut options = ClientOptions::new(server.addr.clone());
    options.read_timeout = Some(Duration::from_secs(10));
    assert!(options.reconnect);
    let mut conn = Connection::connect_with(options).unwrap();
    let err = conn.incr("counter").unwrap_err();
    assert!(
        matches!(err, Error::ConnectionClosed | Error::Io(_)),
        "{err:?}"
    );
    assert_eq!(requests.load(Ordering::SeqCst), 1);
    // The next call reconnects (to the fake server's second connection);
    // the INCR was not replayed on it.
    conn.ping().unwrap();
    drop(conn);
    server.join();
    assert_eq!(requests.load(Ordering::SeqCst), 1);
}
