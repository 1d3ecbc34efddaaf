//! The typed commands against a live server.

use std::collections::BTreeSet;

use bytes::Bytes;
use quiver_client::{Error, Value};

use crate::common::TestServer;
use crate::key;

#[test]
fn set_then_get_and_missing_keys() {
    let server = TestServer::start();
    let mut conn = server.connect();
    let k = key("set_get", "a");
    assert_eq!(conn.get(&k).unwrap(), None);
    conn.set(&k, "value").unwrap();
    assert_eq!(conn.get(&k).unwrap(), Some(Bytes::from_static(b"value")));
    conn.set(&k, "overwritten").unwrap();
    assert_eq!(conn.get(&k).unwrap().as_deref(), Some(&b"overwritten"[..]));
}

#[test]
fn binary_keys_and_values_with_crlf_and_nul() {
    let server = TestServer::start();
    let mut conn = server.connect();
    let pairs: Vec<(Vec<u8>, Vec<u8>)> = vec![
        (b"k\r\n1".to_vec(), b"v\r\nalue\r\n".to_vec()),
        (b"\0key\0".to_vec(), b"\0\0\0".to_vec()),
        (b"\r\n".to_vec(), b"$3\r\nfoo\r\n*1\r\n".to_vec()),
        ((0..=255).collect(), (0..=255).rev().collect()),
    ];
    for (k, v) in &pairs {
        conn.set(k, v).unwrap();
        assert_eq!(conn.get(k).unwrap().as_deref(), Some(v.as_slice()));
    }
    let keys: Vec<&[u8]> = pairs.iter().map(|(k, _)| k.as_slice()).collect();
    let values = conn.multi_get(&keys).unwrap();
    for ((_, v), got) in pairs.iter().zip(values) {
        assert_eq!(got.as_deref(), Some(v.as_slice()));
    }
}

#[test]
fn empty_values_are_not_missing() {
    let server = TestServer::start();
    let mut conn = server.connect();
    let k = key("empty", "a");
    conn.set(&k, b"").unwrap();
    assert_eq!(conn.get(&k).unwrap(), Some(Bytes::new()));
    assert!(conn.exists(&k).unwrap());
    conn.multi_set(&[(key("empty", "b"), b"".as_slice())])
        .unwrap();
    assert_eq!(
        conn.multi_get(&[key("empty", "b"), key("empty", "none")])
            .unwrap(),
        vec![Some(Bytes::new()), None]
    );
}

#[test]
fn large_values_round_trip() {
    let server = TestServer::start();
    let mut conn = server.connect();
    let value: Vec<u8> = (0..4 * 1024 * 1024).map(|i| (i * 31 % 251) as u8).collect();
    conn.set("large", &value).unwrap();
    assert_eq!(
        conn.get("large").unwrap().as_deref(),
        Some(value.as_slice())
    );
}

#[test]
fn multi_set_multi_get_and_multi_delete() {
    let server = TestServer::start();
    let mut conn = server.connect();
    let pairs: Vec<(String, String)> = (0..50)
        .map(|i| (format!("m:{i}"), format!("v{i}")))
        .collect();
    conn.multi_set(&pairs).unwrap();

    let mut keys: Vec<String> = pairs.iter().map(|(k, _)| k.clone()).collect();
    keys.insert(10, "m:missing".into());
    let values = conn.multi_get(&keys).unwrap();
    assert_eq!(values.len(), 51);
    assert_eq!(values[10], None);
    assert_eq!(values[0].as_deref(), Some(&b"v0"[..]));
    assert_eq!(values[50].as_deref(), Some(&b"v49"[..]));

    assert_eq!(conn.multi_delete(&keys[..20]).unwrap(), 19);
    assert_eq!(conn.multi_delete(&keys[..20]).unwrap(), 0);
    assert_eq!(conn.multi_delete(&keys).unwrap(), 31);

    // Empty inputs make no round trip and succeed.
    let none: [&[u8]; 0] = [];
    assert_eq!(conn.multi_get(&none).unwrap(), vec![]);
    assert_eq!(conn.multi_delete(&none).unwrap(), 0);
    conn.multi_set::<&[u8], &[u8]>(&[]).unwrap();
}

#[test]
fn delete_and_exists() {
    let server = TestServer::start();
    let mut conn = server.connect();
    assert!(!conn.exists("d").unwrap());
    assert!(!conn.delete("d").unwrap());
    conn.set("d", "1").unwrap();
    assert!(conn.exists("d").unwrap());
    assert!(conn.delete("d").unwrap());
    assert!(!conn.exists("d").unwrap());
}

#[test]
fn incr_counts_and_refuses_non_integers() {
    let server = TestServer::start();
    let mut conn = server.connect();
    assert_eq!(conn.incr("counter").unwrap(), 1);
    assert_eq!(conn.incr("counter").unwrap(), 2);
    conn.set("counter", "41").unwrap();
    assert_eq!(conn.incr("counter").unwrap(), 42);
    conn.set("text", "abc").unwrap();
    match conn.incr("text") {
        Err(Error::Server(text)) => assert!(text.starts_with("ERR "), "{text}"),
        other => panic!("expected a server error, got {other:?}"),
    }
    // The error reply left the connection usable.
    assert_eq!(conn.incr("counter").unwrap(), 43);
}

#[test]
fn scan_visits_every_matching_key() {
    let server = TestServer::start();
    let mut conn = server.connect();
    let wanted: BTreeSet<Vec<u8>> = (0..300).map(|i| format!("scan:{i}").into_bytes()).collect();
    let pairs: Vec<(&[u8], &[u8])> = wanted.iter().map(|k| (k.as_slice(), &b"x"[..])).collect();
    conn.multi_set(&pairs).unwrap();
    conn.multi_set(&[("other:1", "x"), ("other:2", "x")])
        .unwrap();

    let mut seen = BTreeSet::new();
    let mut cursor = 0;
    let mut pages = 0;
    loop {
        let (next, keys) = conn.scan(cursor, Some(&b"scan:*"[..]), Some(50)).unwrap();
        seen.extend(keys.into_iter().map(|k| k.to_vec()));
        pages += 1;
        assert!(pages < 1000, "scan does not end");
        if next == 0 {
            break;
        }
        cursor = next;
    }
    assert_eq!(seen, wanted);

    // No pattern, no count: every key.
    let mut all = BTreeSet::new();
    let mut cursor = 0;
    loop {
        let (next, keys) = conn.scan(cursor, None, None).unwrap();
        all.extend(keys);
        if next == 0 {
            break;
        }
        cursor = next;
    }
    assert_eq!(all.len(), 302);
}

#[test]
fn info_and_ping() {
    let server = TestServer::start();
    let mut conn = server.connect();
    conn.ping().unwrap();
    let info = conn.info(None).unwrap();
    assert!(!info.is_empty());
    let server_section = conn.info(Some("server")).unwrap();
    assert!(!server_section.is_empty());
}

#[test]
fn raw_command_returns_the_reply_value() {
    let server = TestServer::start();
    let mut conn = server.connect();
    assert_eq!(
        conn.command(&[b"SET", b"raw", b"1"]).unwrap(),
        Value::Simple("OK".into())
    );
    assert_eq!(
        conn.command(&[b"GET", b"raw"]).unwrap(),
        Value::Bulk(Bytes::from_static(b"1"))
    );
    assert_eq!(conn.command(&[b"GET", b"nothing"]).unwrap(), Value::Null);
    assert_eq!(
        conn.command(&[b"EXISTS", b"raw", b"raw"]).unwrap(),
        Value::Integer(2)
    );
}
