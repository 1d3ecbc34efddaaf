use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use quiver_cluster::topology::Node;
use quiver_cluster::Topology;
use quiver_resp::slot::{key_slot, SlotRange};
use tokio::io::AsyncWriteExt;

use super::plan::{plan, Shape};
use super::table::SlotTable;
use quiver_peer::PeerConn;
use quiver_service::reply::Reply;
use quiver_service::table::lookup;

fn table(n: usize) -> SlotTable {
    table_replicated(n, 1)
}

/// Nodes `n0`.. at `127.0.0.1:7000`...
fn nodes(n: usize) -> Vec<Node> {
    (0..n)
        .map(|i| Node {
            id: format!("n{i}"),
            addr: format!("127.0.0.1:{}", 7000 + i),
            run: 0,
        })
        .collect()
}

/// `n` nodes, chains of `replicas` laid on the ring.
fn table_replicated(n: usize, replicas: u8) -> SlotTable {
    SlotTable::of(&Topology::create(nodes(n), replicas).unwrap())
}

fn args(words: &[&str]) -> Vec<Bytes> {
    words
        .iter()
        .map(|w| Bytes::copy_from_slice(w.as_bytes()))
        .collect()
}

/// `MGET keys...`.
fn mget_args(keys: &[String]) -> Vec<Bytes> {
    let mut words = vec!["MGET"];
    words.extend(keys.iter().map(String::as_str));
    args(&words)
}

/// A key the 3-node table gives to `node` (slots split evenly in order).
fn key_on(t: &SlotTable, node: usize, i: usize) -> String {
    (0..)
        .map(|j| format!("k{j}"))
        .filter(|k| t.node_of(k.as_bytes()) == Some(node))
        .nth(i)
        .unwrap()
}

fn encoded(f: &super::plan::Forward<'_>) -> Vec<Bytes> {
    f.parts
        .iter()
        .map(|p| {
            let mut b = BytesMut::new();
            p.encode(&mut b, f.pairs());
            b.freeze()
        })
        .collect()
}

#[test]
fn an_mget_over_three_nodes_is_one_command_per_node_in_key_order() {
    let t = table(3);
    let keys = [
        key_on(&t, 2, 0),
        key_on(&t, 0, 0),
        key_on(&t, 2, 1),
        key_on(&t, 1, 0),
        key_on(&t, 0, 1),
    ];
    let a = mget_args(&keys);
    let f = plan(lookup(b"mget").unwrap(), &a, &t).unwrap();
    assert_eq!(f.parts.len(), 3);
    // Parts in the order their nodes first appear; each carries its keys in the caller's order.
    let addrs: Vec<&str> = f.parts.iter().map(|p| &*p.addr).collect();
    assert_eq!(
        addrs,
        ["127.0.0.1:7002", "127.0.0.1:7000", "127.0.0.1:7001"]
    );
    let cmd = |ks: &[&String]| {
        let mut b = BytesMut::new();
        let mut all: Vec<&[u8]> = vec![b"MGET"];
        all.extend(ks.iter().map(|k| k.as_bytes()));
        quiver_resp::request::encode_command(&mut b, &all);
        b.freeze()
    };
    assert_eq!(
        encoded(&f),
        [
            cmd(&[&keys[0], &keys[2]]),
            cmd(&[&keys[1], &keys[4]]),
            cmd(&[&keys[3]])
        ]
    );
    let Shape::Values(order) = &f.shape else {
        panic!("{:?}", f.shape)
    };
    assert_eq!(order, &[(0, 0), (1, 0), (0, 1), (2, 0), (1, 1)]);
}

/// With replicas an MGET asks the fewest nodes that together hold its keys (the multiget
/// planner), each key from the tail of its chain where that node is asked; values come back
/// in the caller's order. GET and writes still go to the head.
#[test]
fn an_mget_over_replicas_asks_the_fewest_nodes() {
    // 3 nodes, chains of 3: every node holds every key. Chains [n0 n1 n2] [n1 n2 n0] [n2 n0 n1].
    let t = table_replicated(3, 3);
    let keys = [
        key_on(&t, 2, 0),
        key_on(&t, 0, 0),
        key_on(&t, 1, 0),
        key_on(&t, 0, 1),
    ];
    let a = mget_args(&keys);
    let f = plan(lookup(b"mget").unwrap(), &a, &t).unwrap();
    assert_eq!(f.parts.len(), 1, "one node holds them all");
    assert_eq!(f.parts[0].keys.as_deref(), Some(&[1, 2, 3, 4][..]));
    let Shape::Values(order) = &f.shape else {
        panic!("{:?}", f.shape)
    };
    assert_eq!(order, &[(0, 0), (0, 1), (0, 2), (0, 3)]);

    // Chains of 2: [n0 n1] [n1 n2] [n2 n0]; keys of all three chains need two nodes.
    let t = table_replicated(3, 2);
    let keys = [key_on(&t, 0, 0), key_on(&t, 1, 0), key_on(&t, 2, 0)];
    let a = mget_args(&keys);
    let f = plan(lookup(b"mget").unwrap(), &a, &t).unwrap();
    assert_eq!(f.parts.len(), 2);
    let Shape::Values(order) = &f.shape else {
        panic!("{:?}", f.shape)
    };
    // Every key once, each from a node of its chain.
    let mut seen = Vec::new();
    for (key, &(p, j)) in keys.iter().zip(order) {
        let part = &f.parts[p as usize];
        let at = part.keys.as_ref().unwrap()[j as usize] as usize;
        assert_eq!(a[at], key.as_bytes(), "{order:?}");
        let node = t.readers_of(key.as_bytes());
        let addr_of = |n: u16| format!("127.0.0.1:{}", 7000 + n);
        assert!(node.iter().any(|&n| addr_of(n) == *part.addr), "{key}");
        seen.push(at);
    }
    seen.sort_unstable();
    assert_eq!(seen, [1, 2, 3]);

    // A GET goes to the head; keys of one head go whole.
    let get = args(&["GET", &keys[1]]);
    let f = plan(lookup(b"get").unwrap(), &get, &t).unwrap();
    assert_eq!(&*f.parts[0].addr, "127.0.0.1:7001");
}

#[test]
fn an_mset_splits_pairs_and_del_sums() {
    let t = table(2);
    let (a0, b1) = (key_on(&t, 0, 0), key_on(&t, 1, 0));
    let a = args(&["MSET", &b1, "v1", &a0, "v0"]);
    let f = plan(lookup(b"mset").unwrap(), &a, &t).unwrap();
    assert!(matches!(f.shape, Shape::AllOk));
    let mut want = BytesMut::new();
    quiver_resp::request::encode_command(&mut want, &[b"MSET", b1.as_bytes(), b"v1"]);
    assert_eq!(encoded(&f)[0], want);
    assert_eq!(f.parts[1].to_args(true), args(&["MSET", &a0, "v0"]));
    let d = args(&["DEL", &a0, &b1]);
    let f = plan(lookup(b"del").unwrap(), &d, &t).unwrap();
    assert!(matches!(f.shape, Shape::Sum));
}

#[test]
fn keys_of_one_node_go_whole_and_other_commands_across_nodes_are_refused() {
    let t = table(3);
    let (a, b) = (key_on(&t, 1, 0), key_on(&t, 1, 1));
    let same = args(&["RENAME", &a, &b]);
    let f = plan(lookup(b"rename").unwrap(), &same, &t).unwrap();
    assert!(matches!(f.shape, Shape::Whole));
    assert_eq!(&*f.parts[0].addr, "127.0.0.1:7001");
    assert!(f.parts[0].keys.is_none());
    let across = args(&["RENAME", &a, &key_on(&t, 2, 0)]);
    let e = plan(lookup(b"rename").unwrap(), &across, &t).unwrap_err();
    assert!(
        matches!(&e, Reply::Error(t) if t.starts_with(b"CROSSSLOT")),
        "{e:?}"
    );
    let batch = args(&["BATCH", "PUT", &a, "1", "PUT", &key_on(&t, 0, 0), "2"]);
    let e = plan(lookup(b"batch").unwrap(), &batch, &t).unwrap_err();
    assert!(
        matches!(&e, Reply::Error(t) if t.starts_with(b"CROSSSLOT")),
        "{e:?}"
    );
}

/// 3 nodes, chains of 3, node 0 heading the first two chains (as after a failover and a
/// restart): chains [n0 n1 n2] [n0 n2 n1] [n2 n0 n1].
fn table_one_head_of_two() -> SlotTable {
    let mut t = Topology::create(nodes(3), 3).unwrap();
    t.shards[1].chain = vec!["n0".into(), "n2".into(), "n1".into()];
    SlotTable::of(&t)
}

/// The `i`th key of chain `chain` (the table's shards, in slot order).
fn key_in_chain(t: &SlotTable, chain: usize, i: usize) -> String {
    (0..)
        .map(|j| format!("k{j}"))
        .filter(|k| {
            let (unit, _) = t.route_of(k.as_bytes(), true).unwrap();
            unit == chain
        })
        .nth(i)
        .unwrap()
}

/// With replicas a node refuses a write whose keys lie in two of its chains: the router
/// splits a splittable write per chain (both parts to the one head, in one batch) and
/// refuses any other write across chains itself; reads across chains of one node go whole.
#[test]
fn a_write_over_two_chains_of_one_head_is_split_per_chain() {
    let t = table_one_head_of_two();
    let (a, b) = (key_in_chain(&t, 0, 0), key_in_chain(&t, 1, 0));
    assert_eq!(t.node_of(a.as_bytes()), Some(0));
    assert_eq!(t.node_of(b.as_bytes()), Some(0));
    let mset = args(&["MSET", &a, "1", &b, "2"]);
    let f = plan(lookup(b"mset").unwrap(), &mset, &t).unwrap();
    assert_eq!(f.parts.len(), 2, "one part per chain");
    assert!(f.parts.iter().all(|p| &*p.addr == "127.0.0.1:7000"));
    assert_eq!(f.parts[0].to_args(true), args(&["MSET", &a, "1"]));
    assert_eq!(f.parts[1].to_args(true), args(&["MSET", &b, "2"]));
    let del = args(&["DEL", &a, &b]);
    let f = plan(lookup(b"del").unwrap(), &del, &t).unwrap();
    assert_eq!((f.parts.len(), matches!(f.shape, Shape::Sum)), (2, true));
    for refused in [
        args(&["RENAME", &a, &b]),
        args(&["BATCH", "PUT", &a, "1", "PUT", &b, "2"]),
    ] {
        let spec = lookup(&refused[0].to_ascii_lowercase()).unwrap();
        let e = plan(spec, &refused, &t).unwrap_err();
        assert!(
            matches!(&e, Reply::Error(t) if t.starts_with(b"CROSSSLOT")),
            "{e:?}"
        );
    }
    // A read may span the chains of its node: it goes whole.
    let read = args(&["LCS", &a, &b]);
    let f = plan(lookup(b"lcs").unwrap(), &read, &t).unwrap();
    assert!(matches!(f.shape, Shape::Whole));
    // Keys of one chain go whole, writes too.
    let one = args(&["MSET", &a, "1", &key_in_chain(&t, 0, 1), "2"]);
    let f = plan(lookup(b"mset").unwrap(), &one, &t).unwrap();
    assert!(matches!(f.shape, Shape::Whole));
}

/// Each key is answered for by one node when every node is asked (the tail of its chain),
/// and each node's copies of other chains are not counted again.
#[test]
fn each_key_has_one_answering_node() {
    let t = table_one_head_of_two();
    // Tails: n2, n1, n1.
    assert_eq!(t.answering(), [1, 2]);
    for i in 0..50 {
        let k = format!("key{i}");
        let answering: Vec<usize> = (0..3).filter(|&n| t.answers_for(n, k.as_bytes())).collect();
        assert_eq!(answering.len(), 1, "{k}");
        assert!((0..3).all(|n| t.is_member_for(n, k.as_bytes())), "{k}");
    }
    // The ranges each answering node counts for DBSIZE cover every slot once, and are the
    // slots of the keys it answers for.
    let ranges = t.answered_ranges();
    assert_eq!(
        ranges.iter().map(|e| e.0).collect::<Vec<_>>(),
        t.answering()
    );
    let mut all: Vec<SlotRange> = ranges.iter().flat_map(|e| e.1.clone()).collect();
    all.sort();
    assert!(quiver_resp::slot::covers_all(&all), "{all:?}");
    for i in 0..50 {
        let k = format!("key{i}");
        let slot = key_slot(k.as_bytes());
        for (node, rs) in &ranges {
            let counted = rs.iter().any(|r| r.contains(slot));
            assert_eq!(counted, t.answers_for(*node, k.as_bytes()), "{k}");
        }
    }
    // FLUSHALL goes to the heads: n0 heads two chains, n2 one, n1 none.
    assert_eq!(t.flushing(), [0, 2]);
    let plain = table(3);
    assert_eq!(plain.answering(), [0, 1, 2]);
    assert_eq!(plain.flushing(), [0, 1, 2]);
    assert_eq!(
        plain
            .answered_ranges()
            .iter()
            .map(|e| e.1.len())
            .collect::<Vec<_>>(),
        [1, 1, 1]
    );
    let k = key_on(&plain, 1, 0);
    assert!(plain.answers_for(1, k.as_bytes()) && !plain.answers_for(0, k.as_bytes()));
    assert!(!plain.is_member_for(0, k.as_bytes()));
}

/// A node whose ranges have another member may be failed over (its requests: TRYAGAIN);
/// without replicas its ranges wait for it (CLUSTERDOWN).
#[test]
fn a_node_has_others_only_when_each_of_its_chains_does() {
    assert!((0..3).all(|n| table_one_head_of_two().has_others(n)));
    assert!((0..3).all(|n| !table(3).has_others(n)));
}

#[test]
fn without_a_topology_keyed_commands_are_clusterdown() {
    let t = SlotTable::default();
    let a = args(&["GET", "x"]);
    let e = plan(lookup(b"get").unwrap(), &a, &t).unwrap_err();
    assert!(
        matches!(&e, Reply::Error(t) if t.starts_with(b"CLUSTERDOWN")),
        "{e:?}"
    );
    assert_eq!(key_slot(b"x") as usize, key_slot(b"{x}y") as usize);
}

/// Replies framed from bytes that arrive a few at a time: arrays of scalars keep their
/// elements, nested and empty aggregates do not confuse the count.
#[tokio::test]
async fn replies_are_framed_whatever_the_chunks() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: Arc<str> = Arc::from(listener.local_addr().unwrap().to_string());
    // READONLY's OK (the connection's setup), then the batch's 6 replies.
    let replies: &[u8] = b"+OK\r\n+OK\r\n*3\r\n$1\r\na\r\n$-1\r\n:7\r\n*0\r\n*2\r\n$1\r\n0\r\n*1\r\n$1\r\nk\r\n-MOVED 1 h:1\r\n$-1\r\n";
    let server = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        for chunk in replies.chunks(3) {
            s.write_all(chunk).await.unwrap();
            s.flush().await.unwrap();
            tokio::task::yield_now().await;
        }
        s
    });
    let mut conn = PeerConn::connect(addr, false).await.unwrap();
    let r = conn.send(b"", 6).await.unwrap();
    let _keep_open = server.await.unwrap();
    assert_eq!(r.replies.len(), 6);
    assert_eq!(r.bytes(0), b"+OK\r\n");
    let elements: Vec<&[u8]> = r
        .element_ranges(1)
        .unwrap()
        .iter()
        .map(|e| &r.buf[e.clone()])
        .collect();
    assert_eq!(elements, [&b"$1\r\na\r\n"[..], b"$-1\r\n", b":7\r\n"]);
    assert_eq!(r.element_ranges(2).unwrap().len(), 0);
    assert!(
        r.element_ranges(3).is_none(),
        "a nested array has no flat elements"
    );
    assert_eq!(r.error(4), Some(&b"MOVED 1 h:1"[..]));
    assert_eq!(r.bytes(5), b"$-1\r\n");
}
