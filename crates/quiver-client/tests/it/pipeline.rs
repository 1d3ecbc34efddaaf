//! Pipelining: many commands in one write, replies in order.

use quiver_client::{Error, Value};

use crate::common::TestServer;

#[test]
fn a_thousand_commands_in_one_pipeline() {
    let server = TestServer::start();
    let mut conn = server.connect();
    let keys: Vec<String> = (0..500).map(|i| format!("p:{i}")).collect();
    let values: Vec<String> = (0..500).map(|i| format!("value {i}\r\n")).collect();

    let mut pipeline = conn.pipeline();
    for (k, v) in keys.iter().zip(&values) {
        pipeline.command(&[b"SET", k.as_bytes(), v.as_bytes()]);
    }
    for k in &keys {
        pipeline.command(&[b"GET", k.as_bytes()]);
    }
    assert_eq!(pipeline.len(), 1000);
    let replies = pipeline.execute().unwrap();
    assert_eq!(replies.len(), 1000);
    for reply in &replies[..500] {
        assert_eq!(reply.as_ref().unwrap(), &Value::Simple("OK".into()));
    }
    for (reply, v) in replies[500..].iter().zip(&values) {
        assert_eq!(reply.as_ref().unwrap().as_bytes(), Some(v.as_bytes()));
    }
    // The connection is in step afterwards.
    assert_eq!(
        conn.get("p:499").unwrap().as_deref(),
        Some(&b"value 499\r\n"[..])
    );
}

#[test]
fn error_replies_do_not_stop_the_pipeline() {
    let server = TestServer::start();
    let mut conn = server.connect();
    conn.set("text", "abc").unwrap();
    let mut pipeline = conn.pipeline();
    pipeline
        .command(&[b"INCR", b"n"])
        .command(&[b"INCR", b"text"])
        .command(&[b"NOSUCHCOMMAND"])
        .command(&[b"INCR", b"n"]);
    let replies = pipeline.execute().unwrap();
    assert_eq!(replies.len(), 4);
    assert_eq!(replies[0].as_ref().unwrap(), &Value::Integer(1));
    assert!(matches!(&replies[1], Err(Error::Server(t)) if t.starts_with("ERR ")));
    assert!(matches!(&replies[2], Err(Error::Server(t)) if t.starts_with("ERR unknown command")));
    assert_eq!(replies[3].as_ref().unwrap(), &Value::Integer(2));
}

#[test]
fn an_empty_pipeline_makes_no_round_trip() {
    let server = TestServer::start();
    let mut conn = server.connect();
    let pipeline = conn.pipeline();
    assert!(pipeline.is_empty());
    assert!(pipeline.execute().unwrap().is_empty());
    conn.ping().unwrap();
}
