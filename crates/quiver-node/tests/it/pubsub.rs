//! Pub/Sub between connections (issue 37): PUBLISH reaches RESP2 subscribers (arrays, in
//! subscribed mode) and RESP3 ones (pushes, beside their replies), by channel and by pattern,
//! and counts them; an unsubscribed or closed connection gets nothing more; CLIENT TRACKING
//! REDIRECT to a RESP2 connection subscribed to `__redis__:invalidate` sends it the
//! invalidations as messages of that channel. One connection's replies byte for byte are the
//! compat goldens' (`cases_ops.json`, `pubsub/`).

use std::io::Read;

use quiver_client::Value;
use quiver_node::testing::TestServer;

use crate::bad_input::{client, expect_reply, expect_waiting, raw, show};
use crate::tracking::{call, client_id, send};

/// RESP2 `message` array (or RESP3 push, `kind` b'>').
fn message(kind: u8, channel: &str, payload: &str) -> Vec<u8> {
    format!(
        "{}3\r\n$7\r\nmessage\r\n${}\r\n{channel}\r\n${}\r\n{payload}\r\n",
        kind as char,
        channel.len(),
        payload.len()
    )
    .into_bytes()
}

#[test]
fn publish_reaches_subscribers_by_channel_and_pattern() {
    let server = TestServer::start();
    let mut sub = raw(server.addr);
    send(&mut sub, &["SUBSCRIBE", "news"]);
    expect_reply(&mut sub, b"*3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n");
    let mut psub = raw(server.addr);
    send(&mut psub, &["HELLO", "3"]);
    let mut hello = [0u8; 1];
    psub.read_exact(&mut hello).unwrap();
    assert_eq!(&hello, b"%");
    send(&mut psub, &["PSUBSCRIBE", "n*"]);
    // The rest of HELLO's map, then the confirmation: read up to it.
    let confirmation = b">3\r\n$10\r\npsubscribe\r\n$2\r\nn*\r\n:1\r\n";
    let mut got = Vec::new();
    let mut byte = [0u8; 1];
    while !got.ends_with(confirmation) {
        psub.read_exact(&mut byte).unwrap();
        got.push(byte[0]);
    }
    let mut publisher = client(server.addr);
    assert_eq!(
        call(&mut publisher, &["PUBLISH", "news", "hi"]),
        Value::Integer(2)
    );
    expect_reply(&mut sub, &message(b'*', "news", "hi"));
    expect_reply(
        &mut psub,
        b">4\r\n$8\r\npmessage\r\n$2\r\nn*\r\n$4\r\nnews\r\n$2\r\nhi\r\n",
    );
    assert_eq!(
        call(&mut publisher, &["PUBLISH", "other", "x"]),
        Value::Integer(0)
    );
    // A RESP3 subscriber runs any command; its replies and the messages interleave.
    send(&mut psub, &["SET", "k", "v"]);
    expect_reply(&mut psub, b"+OK\r\n");
    assert_eq!(
        call(&mut publisher, &["PUBSUB", "NUMSUB", "news", "n*"]),
        Value::Array(vec![
            Value::Bulk(b"news".to_vec().into()),
            Value::Integer(1),
            Value::Bulk(b"n*".to_vec().into()),
            Value::Integer(0),
        ])
    );
    // Unsubscribed, and closed: nobody is counted.
    send(&mut sub, &["UNSUBSCRIBE"]);
    expect_reply(
        &mut sub,
        b"*3\r\n$11\r\nunsubscribe\r\n$4\r\nnews\r\n:0\r\n",
    );
    drop(psub);
    crate::bad_input::wait_until("the pattern subscriber's close", || {
        call(&mut publisher, &["PUBSUB", "NUMPAT"]) == Value::Integer(0)
    });
    assert_eq!(
        call(&mut publisher, &["PUBLISH", "news", "late"]),
        Value::Integer(0)
    );
    expect_waiting(&mut sub);
}

#[test]
fn tracking_redirects_to_a_resp2_subscriber_of_the_invalidate_channel() {
    let server = TestServer::start();
    let mut sink = raw(server.addr);
    let id = client_id(&mut sink);
    send(&mut sink, &["SUBSCRIBE", "__redis__:invalidate"]);
    expect_reply(
        &mut sink,
        b"*3\r\n$9\r\nsubscribe\r\n$20\r\n__redis__:invalidate\r\n:1\r\n",
    );
    let mut reader = client(server.addr);
    let mut writer = client(server.addr);
    call(&mut reader, &["CLIENT", "TRACKING", "ON", "REDIRECT", &id]);
    call(&mut reader, &["GET", "k"]);
    call(&mut writer, &["SET", "k", "v"]);
    expect_reply(
        &mut sink,
        b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n*1\r\n$1\r\nk\r\n",
    );
    call(&mut writer, &["FLUSHALL"]);
    let flushed = b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n$-1\r\n";
    let mut got = vec![0u8; flushed.len()];
    sink.read_exact(&mut got).unwrap();
    assert_eq!(show(&got), show(flushed));
}
