//! Error replies, timeouts, authentication and bad servers.

use std::io::Write;
use std::net::TcpListener;
use std::time::Duration;

use quiver_client::{ClientOptions, Connection, Error};
use quiver_testkit::port::free_port;

use crate::common::{read_exactly, FakeServer, TestServer};

#[test]
fn an_unknown_command_is_a_server_error_with_its_full_text() {
    let server = TestServer::start();
    let mut conn = server.connect();
    let err = conn.command(&[b"NOSUCHCOMMAND", b"arg"]).unwrap_err();
    let Error::Server(text) = &err else {
        panic!("expected Error::Server, got {err:?}");
    };
    assert!(text.starts_with("ERR unknown command"), "{text}");
    assert!(text.contains("NOSUCHCOMMAND"), "{text}");
    assert_eq!(err.server_code(), Some("ERR"));
    assert!(!err.is_connection_error());
    // An error reply leaves the connection in step.
    conn.ping().unwrap();
}

#[test]
fn a_server_that_never_answers_times_out() {
    // Never accepted: the kernel completes the handshake, nobody ever reads.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut options = ClientOptions::new(listener.local_addr().unwrap().to_string());
    options.read_timeout = Some(Duration::from_millis(200));
    options.reconnect = false;
    let mut conn = Connection::connect_with(options).unwrap();
    let err = conn.ping().unwrap_err();
    assert!(matches!(err, Error::Timeout), "{err:?}");
    // The reply may still come: the connection was dropped, not reused.
    assert!(!conn.is_connected());
    assert!(matches!(conn.ping().unwrap_err(), Error::NotConnected));
    drop(listener);
}

#[test]
fn an_accepted_silent_connection_times_out_too() {
    let server = FakeServer::start(1, |_, mut stream| {
        // Read the request and sit on it until the client hangs up.
        let _ = read_exactly(&mut stream, 1 << 20);
    });
    let mut options = ClientOptions::new(server.addr.clone());
    options.read_timeout = Some(Duration::from_millis(200));
    options.reconnect = false;
    let mut conn = Connection::connect_with(options).unwrap();
    assert!(matches!(conn.get("k").unwrap_err(), Error::Timeout));
    drop(conn);
    server.join();
}

#[test]
fn connection_refused_is_an_io_error() {
    let err = Connection::connect(&format!("127.0.0.1:{}", free_port())).unwrap_err();
    assert!(
        matches!(&err, Error::Io(e) if e.kind() == std::io::ErrorKind::ConnectionRefused),
        "{err:?}"
    );
}

#[test]
fn an_unresolvable_address_is_reported() {
    let err = Connection::connect("not an address").unwrap_err();
    assert!(matches!(err, Error::InvalidAddress { .. }), "{err:?}");
}

#[test]
fn auth_on_connect() {
    let server = TestServer::start_with_password("s3cret");
    // server.options() carries the password.
    let mut conn = server.connect();
    conn.set("k", "v").unwrap();

    let mut no_password = server.options();
    no_password.password = None;
    let mut conn = Connection::connect_with(no_password).unwrap();
    let err = conn.get("k").unwrap_err();
    assert!(matches!(err, Error::NoAuth(_)), "{err:?}");

    let mut wrong = server.options();
    wrong.password = Some("wrong".into());
    let err = Connection::connect_with(wrong).unwrap_err();
    assert!(matches!(err, Error::AuthFailed(_)), "{err:?}");
}

#[test]
fn malformed_replies_are_protocol_errors_and_drop_the_connection() {
    let server = FakeServer::start(1, |_, mut stream| {
        read_exactly(&mut stream, 14); // *1\r\n$4\r\nPING\r\n
        stream.write_all(b"+PONG\r\n").unwrap();
        read_exactly(&mut stream, 14);
        stream.write_all(b"?garbage\r\n").unwrap();
    });
    let mut options = ClientOptions::new(server.addr.clone());
    options.reconnect = false;
    let mut conn = Connection::connect_with(options).unwrap();
    conn.ping().unwrap();
    let err = conn.ping().unwrap_err();
    assert!(matches!(err, Error::Protocol(_)), "{err:?}");
    assert!(err.is_connection_error());
    assert!(!conn.is_connected());
    server.join();
}

#[test]
fn a_huge_declared_length_is_refused_not_allocated() {
    let server = FakeServer::start(1, |_, mut stream| {
        read_exactly(&mut stream, 20); // *2\r\n$3\r\nGET\r\n$1\r\nk\r\n
        stream.write_all(b"$1000000000000\r\n").unwrap();
        read_exactly(&mut stream, 23); // *2\r\n$4\r\nMGET\r\n$1\r\nk\r\n (never comes)
    });
    let mut options = ClientOptions::new(server.addr.clone());
    options.reconnect = false;
    options.read_timeout = Some(Duration::from_secs(5));
    let mut conn = Connection::connect_with(options).unwrap();
    let err = conn.get("k").unwrap_err();
    assert!(
        matches!(&err, Error::Protocol(m) if m.contains("exceeds the limit")),
        "{err:?}"
    );
    drop(conn);
    server.join();
}

#[test]
fn a_reply_of_the_wrong_shape_is_unexpected() {
    let server = FakeServer::start(1, |_, mut stream| {
        read_exactly(&mut stream, 20);
        stream.write_all(b":5\r\n").unwrap();
        read_exactly(&mut stream, 1);
    });
    let mut conn = Connection::connect(&server.addr).unwrap();
    let err = conn.get("k").unwrap_err();
    assert!(
        matches!(&err, Error::UnexpectedReply(m) if m.contains("GET")),
        "{err:?}"
    );
    drop(conn);
    server.join();
}
