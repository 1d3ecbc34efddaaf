use bytes::{Bytes, BytesMut};
use quiver_service::{parse_request, Limits, Reply};

fn enc(r: &Reply, resp3: bool) -> Vec<u8> {
    let mut out = BytesMut::new();
    r.encode(&mut out, resp3);
    out.to_vec()
}

fn both(r: Reply, resp2: &[u8], resp3: &[u8]) {
    assert_eq!(enc(&r, false), resp2, "RESP2 {r:?}");
    assert_eq!(enc(&r, true), resp3, "RESP3 {r:?}");
    assert_eq!(&r.to_bytes(true)[..], resp3);
    // The size the output budget is checked with is the size encoded.
    assert_eq!(r.encoded_len(false), resp2.len(), "RESP2 length of {r:?}");
    assert_eq!(r.encoded_len(true), resp3.len(), "RESP3 length of {r:?}");
}

#[test]
fn scalars() {
    both(Reply::OK, b"+OK\r\n", b"+OK\r\n");
    both(
        Reply::simple(String::from("PONG")),
        b"+PONG\r\n",
        b"+PONG\r\n",
    );
    both(
        Reply::error("ERR unknown command"),
        b"-ERR unknown command\r\n",
        b"-ERR unknown command\r\n",
    );
    both(Reply::Integer(0), b":0\r\n", b":0\r\n");
    both(
        Reply::Integer(i64::MIN),
        b":-9223372036854775808\r\n",
        b":-9223372036854775808\r\n",
    );
    both(
        Reply::Bulk(Bytes::from_static(b"a\r\n\0")),
        b"$4\r\na\r\n\0\r\n",
        b"$4\r\na\r\n\0\r\n",
    );
    both(Reply::Bulk(Bytes::new()), b"$0\r\n\r\n", b"$0\r\n\r\n");
    both(Reply::Null, b"$-1\r\n", b"_\r\n");
    both(Reply::NullArray, b"*-1\r\n", b"_\r\n");
    both(Reply::Boolean(true), b":1\r\n", b"#t\r\n");
    both(Reply::Boolean(false), b":0\r\n", b"#f\r\n");
}

#[test]
fn doubles() {
    both(Reply::Double(1.5), b"$3\r\n1.5\r\n", b",1.5\r\n");
    both(Reply::Double(3.0), b"$1\r\n3\r\n", b",3\r\n");
    both(Reply::Double(-0.1), b"$4\r\n-0.1\r\n", b",-0.1\r\n");
    both(Reply::Double(f64::INFINITY), b"$3\r\ninf\r\n", b",inf\r\n");
    both(
        Reply::Double(f64::NEG_INFINITY),
        b"$4\r\n-inf\r\n",
        b",-inf\r\n",
    );
    both(Reply::Double(f64::NAN), b"$3\r\nnan\r\n", b",nan\r\n");
}

#[test]
fn verbatim() {
    both(
        Reply::Verbatim {
            format: *b"txt",
            text: Bytes::from_static(b"Some string"),
        },
        b"$11\r\nSome string\r\n",
        b"=15\r\ntxt:Some string\r\n",
    );
}

#[test]
fn aggregates() {
    both(Reply::Array(vec![]), b"*0\r\n", b"*0\r\n");
    both(
        Reply::Array(vec![
            Reply::Integer(1),
            Reply::Null,
            Reply::Bulk("x".into()),
        ]),
        b"*3\r\n:1\r\n$-1\r\n$1\r\nx\r\n",
        b"*3\r\n:1\r\n_\r\n$1\r\nx\r\n",
    );
    both(
        Reply::Set(vec![Reply::Bulk("a".into()), Reply::Bulk("b".into())]),
        b"*2\r\n$1\r\na\r\n$1\r\nb\r\n",
        b"~2\r\n$1\r\na\r\n$1\r\nb\r\n",
    );
    both(
        Reply::Map(vec![
            (Reply::simple("proto"), Reply::Integer(3)),
            (Reply::Bulk("ok".into()), Reply::Boolean(true)),
        ]),
        b"*4\r\n+proto\r\n:3\r\n$2\r\nok\r\n:1\r\n",
        b"%2\r\n+proto\r\n:3\r\n$2\r\nok\r\n#t\r\n",
    );
    both(Reply::Map(vec![]), b"*0\r\n", b"%0\r\n");
    // Nested: downgrades apply at every level.
    both(
        Reply::Array(vec![
            Reply::Map(vec![(
                Reply::Double(2.5),
                Reply::Set(vec![Reply::NullArray]),
            )]),
            Reply::Array(vec![]),
        ]),
        b"*2\r\n*2\r\n$3\r\n2.5\r\n*1\r\n*-1\r\n*0\r\n",
        b"*2\r\n%1\r\n,2.5\r\n~1\r\n_\r\n*0\r\n",
    );
}

#[test]
fn protocol_error_reply() {
    let mut buf = BytesMut::from(&b"*1\r\n\xff\r\n"[..]);
    let err = parse_request(&mut buf, &Limits::default()).unwrap_err();
    assert_eq!(
        enc(&Reply::from(err), false),
        b"-ERR Protocol error: expected '$', got '\xff'\r\n"
    );
}

#[test]
fn encode_bulks_matches_an_array_of_bulks() {
    let values = vec![
        Some(Bytes::from_static(b"a\r\nb")),
        None,
        Some(Bytes::new()),
    ];
    for resp3 in [false, true] {
        let mut direct = BytesMut::new();
        quiver_service::reply::encode_bulks(&mut direct, &values, resp3);
        let tree = Reply::Array(
            values
                .iter()
                .map(|v| v.clone().map_or(Reply::Null, Reply::Bulk))
                .collect(),
        );
        assert_eq!(
            quiver_service::reply::bulks_encoded_len(&values, resp3),
            direct.len()
        );
        assert_eq!(direct.freeze(), tree.to_bytes(resp3));
    }
}

#[test]
fn encoded_len_matches_at_digit_boundaries() {
    let mut cases = Vec::new();
    for n in [9i64, 10, 99, 100, -1, -9, -10, i64::MAX, i64::MIN + 1] {
        cases.push(Reply::Integer(n));
    }
    for len in [0usize, 9, 10, 99, 100, 1000] {
        cases.push(Reply::Bulk(Bytes::from(vec![b'v'; len])));
        cases.push(Reply::Verbatim {
            format: *b"txt",
            text: Bytes::from(vec![b't'; len]),
        });
        cases.push(Reply::Array(vec![Reply::Null; len]));
        cases.push(Reply::Map(vec![(Reply::Integer(1), Reply::NullArray); len]));
    }
    for r in &cases {
        for resp3 in [false, true] {
            assert_eq!(
                r.encoded_len(resp3),
                enc(r, resp3).len(),
                "{r:?} resp3 {resp3}"
            );
        }
    }
}
