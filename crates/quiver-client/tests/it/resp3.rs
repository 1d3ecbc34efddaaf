//! The same commands over a RESP3 connection (`HELLO 3` on connect).

use bytes::Bytes;
use quiver_client::Value;

use crate::common::TestServer;

#[test]
fn commands_work_over_resp3() {
    let server = TestServer::start();
    let mut options = server.options();
    options.resp3 = true;
    let mut conn = quiver_client::Connection::connect_with(options).unwrap();
    conn.ping().unwrap();
    assert_eq!(conn.get("missing").unwrap(), None); // `_` in RESP3
    conn.set("k", "v\r\n").unwrap();
    assert_eq!(conn.get("k").unwrap(), Some(Bytes::from_static(b"v\r\n")));
    assert_eq!(
        conn.multi_get(&["k", "missing"]).unwrap(),
        vec![Some(Bytes::from_static(b"v\r\n")), None]
    );
    assert!(conn.exists("k").unwrap());
    assert!(!conn.info(None).unwrap().is_empty());
    let mut pipeline = conn.pipeline();
    pipeline
        .command(&[b"GET", b"k"])
        .command(&[b"GET", b"missing"]);
    let replies = pipeline.execute().unwrap();
    assert_eq!(replies[1].as_ref().unwrap(), &Value::Null);
}
