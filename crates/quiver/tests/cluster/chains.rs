//! Chain replication (issue 12): every write reaches every member of its chain before its
//! client is answered; reads are served by any member (READONLY), a dirty key's only once its
//! write is committed; messages from another chain version are refused (fencing). The
//! cluster client reading multigets from replicas contacts the fewest members.

use std::sync::mpsc;

use bytes::Bytes;
use quiver_client::cluster::{key_slot, ClusterClient};
use quiver_client::{Connection, Value};
use quiver_testkit::wait_until;

use crate::harness::{cluster_options, text, Cluster, Node};
use crate::slots::cluster_slots;
use crate::{error_text, keyslot};

/// `command` on `c`, which must succeed.
fn ok(c: &mut Connection, args: &[&str]) -> Value {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    c.command(&args)
        .unwrap_or_else(|e| panic!("{:?}: {e}", String::from_utf8_lossy(args[0])))
}

/// A connection to `node` that may read replicas' keys.
fn readonly(node: &Node) -> Connection {
    let mut c = node.conn();
    assert_eq!(ok(&mut c, &["READONLY"]), Value::Simple("OK".into()));
    c
}

/// Per chain of `node` (CHAIN STATUS): slots, version, position, length, applied, committed.
fn chain_status(node: &Node) -> Vec<(String, Vec<i64>)> {
    let Value::Array(chains) = ok(&mut node.conn(), &["CHAIN", "STATUS"]) else {
        panic!("CHAIN STATUS: not an array");
    };
    chains
        .iter()
        .map(|c| {
            let Value::Array(fields) = c else {
                panic!("CHAIN STATUS entry {c:?}");
            };
            let numbers = fields[1..]
                .iter()
                .map(|f| match f {
                    Value::Integer(n) => *n,
                    other => panic!("CHAIN STATUS field {other:?}"),
                })
                .collect();
            (text(&fields[0]), numbers)
        })
        .collect()
}

/// The head, middle and tail (indices into `cluster.nodes`) of the chain serving `key`.
fn chain_of(cluster: &Cluster, c: &mut Connection, key: &str) -> Vec<usize> {
    let slot = keyslot(c, key);
    let slots = cluster_slots(c);
    let entry = slots
        .iter()
        .find(|e| e.lo <= slot && slot <= e.hi)
        .unwrap_or_else(|| panic!("no range of slot {slot}: {slots:?}"));
    entry
        .members
        .iter()
        .map(|(_, port)| cluster.node_on(*port))
        .collect()
}

#[test]
fn chains_replicate_every_write_to_every_member() {
    let cluster = Cluster::start_replicated(3, 3);
    let mut c = cluster.nodes[0].conn();

    // CLUSTER SLOTS: three ranges, each chain laid on the ring (node i heads range i, the
    // next two follow), so every node is a head once, a middle once and a tail once.
    let slots = cluster_slots(&mut c);
    assert_eq!(slots.len(), 3, "{slots:?}");
    for (i, e) in slots.iter().enumerate() {
        let chain: Vec<usize> = e.members.iter().map(|(_, p)| cluster.node_on(*p)).collect();
        assert_eq!(chain, vec![i, (i + 1) % 3, (i + 2) % 3], "{slots:?}");
    }

    // Writes of every kind through the heads (the cluster client sends each key to its
    // range's master).
    let mut client = cluster.client();
    let keys: Vec<String> = (0..60).map(|i| format!("chain:{i}")).collect();
    for (i, k) in keys.iter().enumerate() {
        client.set(k, format!("v{i}")).unwrap();
    }
    let pairs: Vec<(String, String)> = (0..10)
        .map(|i| (format!("{{t}}:m{i}"), format!("m{i}")))
        .collect();
    client.multi_set(&pairs).unwrap();
    for _ in 0..5 {
        client.incr("counter").unwrap();
    }
    client
        .command(&[b"SET", b"expiring", b"x", b"EX", b"1000"], 1)
        .unwrap();
    client.command(&[b"DEL", keys[0].as_bytes()], 1).unwrap();
    let head = chain_of(&cluster, &mut c, "{t}:m0")[0];
    let mut h = cluster.nodes[head].conn();
    ok(&mut h, &["MULTI"]);
    ok(&mut h, &["SET", "{t}:x", "in-exec"]);
    ok(&mut h, &["INCRBY", "{t}:n", "7"]);
    ok(&mut h, &["EXEC"]);

    // Every member has every write (READONLY: a replica serves its chain's reads), and the
    // expiry is the same absolute time everywhere.
    let mut expected: Vec<(String, Option<String>)> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| (k.clone(), (i > 0).then(|| format!("v{i}"))))
        .collect();
    expected.extend(pairs.iter().map(|(k, v)| (k.clone(), Some(v.clone()))));
    expected.push(("counter".into(), Some("5".into())));
    expected.push(("{t}:x".into(), Some("in-exec".into())));
    expected.push(("{t}:n".into(), Some("7".into())));
    let mut expire_times = Vec::new();
    for node in &cluster.nodes {
        let mut r = readonly(node);
        for (k, want) in &expected {
            let chain = chain_of(&cluster, &mut c, k);
            if !chain.contains(&cluster.node(&node.id)) {
                continue;
            }
            let got = r.get(k).unwrap();
            assert_eq!(
                got.as_deref(),
                want.as_ref().map(|v| v.as_bytes()),
                "{k} on {}",
                node.id
            );
        }
        match ok(&mut r, &["PEXPIRETIME", "expiring"]) {
            Value::Integer(t) => expire_times.push(t),
            other => panic!("PEXPIRETIME: {other:?}"),
        }
    }
    assert!(expire_times[0] > 0, "{expire_times:?}");
    assert!(
        expire_times.iter().all(|&t| t == expire_times[0]),
        "{expire_times:?}"
    );

    // Without READONLY a replica sends reads to the head; with it, writes still go there.
    let chain = chain_of(&cluster, &mut c, "counter");
    let slot = keyslot(&mut c, "counter");
    let moved = format!("MOVED {slot} {}", cluster.nodes[chain[0]].addr());
    let mut plain = cluster.nodes[chain[1]].conn();
    assert_eq!(error_text(plain.command(&[b"GET", b"counter"])), moved);
    let mut r = readonly(&cluster.nodes[chain[2]]);
    assert_eq!(error_text(r.command(&[b"INCR", b"counter"])), moved);

    // Every member has committed what it applied, at the same point of each chain.
    wait_until(
        "every chain committed everywhere",
        || cluster.logs(),
        || {
            let all: Vec<_> = cluster.nodes.iter().map(chain_status).collect();
            for (node, chains) in cluster.nodes.iter().zip(&all) {
                for (slots, f) in chains {
                    // version, position, length, applied, committed, waiting
                    if f[3] != f[4] || f[5] != 0 {
                        return Err(format!("{} {slots}: {f:?}", node.id));
                    }
                    let peers: Vec<i64> = all
                        .iter()
                        .flat_map(|c| c.iter().filter(|(s, _)| s == slots).map(|(_, f)| f[3]))
                        .collect();
                    if peers.len() != 3 || peers.iter().any(|&a| a != f[3]) {
                        return Err(format!("{slots}: applied {peers:?}"));
                    }
                }
            }
            Ok(())
        },
    );
}

/// Fencing and order: a member refuses a message at another version than its chain's, a
/// message past a gap, and any message for a chain it heads — and none of them writes.
#[test]
fn members_refuse_messages_of_another_version_or_order() {
    let cluster = Cluster::start_replicated(3, 3);
    let mut c = cluster.nodes[0].conn();
    let chain = chain_of(&cluster, &mut c, "fenced");
    let slots = cluster_slots(&mut c);
    let slot = keyslot(&mut c, "fenced");
    let range = slots
        .iter()
        .find(|e| e.lo <= slot && slot <= e.hi)
        .map(|e| format!("{}-{}", e.lo, e.hi))
        .unwrap();
    let mut middle = cluster.nodes[chain[1]].conn();
    let apply = |conn: &mut Connection, version: &str, seq: &str| {
        error_text(conn.command(&[
            b"CHAIN",
            b"APPLY",
            range.as_bytes(),
            version.as_bytes(),
            seq.as_bytes(),
            b"PLAIN",
            b"fenced",
            b"-1",
            b"intruder",
        ]))
    };
    let refused = apply(&mut middle, "0", "1");
    assert!(refused.starts_with("FENCED"), "{refused}");
    let refused = apply(&mut middle, "1", "5");
    assert!(refused.contains("gap"), "{refused}");
    let mut head = cluster.nodes[chain[0]].conn();
    let refused = apply(&mut head, "1", "1");
    assert!(refused.starts_with("FENCED"), "{refused}");
    for &i in &chain {
        let mut r = readonly(&cluster.nodes[i]);
        assert_eq!(r.get("fenced").unwrap(), None, "{}", cluster.nodes[i].id);
    }
}

/// The tail's answer releases the write: with the tail stopped, a write is applied at the
/// head and the middle but not answered, and a read of that (dirty) key waits too — while a
/// clean key is served by any member at once (CRAQ). Once the tail runs again, both answer.
#[test]
fn a_stopped_tail_holds_writes_and_dirty_reads_until_it_answers() {
    let cluster = Cluster::start_replicated(3, 3);
    let mut c = cluster.nodes[0].conn();
    let chain = chain_of(&cluster, &mut c, "dirty");
    assert_eq!(chain, chain_of(&cluster, &mut c, "clean"));
    let (head, middle, tail) = (chain[0], chain[1], chain[2]);
    ok(&mut cluster.nodes[head].conn(), &["SET", "clean", "c0"]);
    ok(&mut cluster.nodes[head].conn(), &["SET", "dirty", "d0"]);

    cluster.nodes[tail].pause(true);
    let (wrote, written) = mpsc::channel();
    let head_addr = cluster.nodes[head].addr();
    let writer = std::thread::spawn(move || {
        let mut w = crate::harness::connect(&head_addr).unwrap();
        let r = w.command(&[b"SET", b"dirty", b"d1"]);
        let _ = wrote.send(r.map(|v| format!("{v:?}")));
    });
    // The head and the middle apply it; nothing is committed while the tail is stopped.
    wait_until(
        "the write applied at the middle",
        || cluster.logs(),
        || {
            let s = chain_status(&cluster.nodes[middle]);
            let f = &s.iter().find(|(_, f)| f[1] == 1).ok_or("no middle role")?.1;
            if f[3] > f[4] {
                Ok(())
            } else {
                // An answer now would be a commit without the tail.
                if let Ok(answer) = written.try_recv() {
                    panic!("the write was answered with the tail stopped: {answer:?}");
                }
                Err(format!("{f:?}"))
            }
        },
    );
    let middle_addr = cluster.nodes[middle].addr();
    let (read, got) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut r = crate::harness::connect(&middle_addr).unwrap();
        r.command(&[b"READONLY"]).unwrap();
        let v = r.get("dirty").map(|v| v.map(|b| b.to_vec()));
        let _ = read.send(v);
    });
    // A clean key answers at once from the middle.
    let mut r = readonly(&cluster.nodes[middle]);
    assert_eq!(r.get("clean").unwrap().as_deref(), Some(&b"c0"[..]));
    // The write and the dirty read are still waiting: their commit needs the tail.
    let s = chain_status(&cluster.nodes[head]);
    let f = &s.iter().find(|(_, f)| f[1] == 0).unwrap().1;
    assert!(f[3] > f[4], "head applied {} committed {}", f[3], f[4]);
    assert!(
        written.try_recv().is_err(),
        "the write was answered before its commit"
    );
    assert!(
        got.try_recv().is_err(),
        "a dirty read answered before the commit"
    );

    cluster.nodes[tail].pause(false);
    let answer = written.recv_timeout(quiver_testkit::WAIT).unwrap();
    assert_eq!(answer.unwrap(), "Simple(\"OK\")");
    let value = got.recv_timeout(quiver_testkit::WAIT).unwrap().unwrap();
    assert_eq!(value.as_deref(), Some(&b"d1"[..]));
    writer.join().unwrap();
    reader.join().unwrap();
    let mut t = readonly(&cluster.nodes[tail]);
    assert_eq!(t.get("dirty").unwrap().as_deref(), Some(&b"d1"[..]));
}

/// redis-py's RedisCluster reading from replicas (`read_from_replicas=True`: READONLY
/// connections to every member, reads spread over them) sees every acknowledged write, and
/// finds two replicas per range in CLUSTER SLOTS.
#[test]
fn redis_py_reads_from_replicas() {
    let cluster = Cluster::start_replicated(3, 3);
    crate::tools::redis_py_cluster(&cluster, 3);
}

/// `ClusterClient` with `read_from_replicas` on a cluster of 3 nodes with chains of
/// `replicas`: a multiget of keys over every range contacts `want` nodes (the fewest holding
/// every key between them), 3 without the option (one per head); the values are those just
/// written through the heads (CRAQ: a replica's read is linearizable), also after the
/// client's connections were killed (its new ones send READONLY again).
fn multiget_reads_from_the_fewest_members(replicas: u8, want: u64) {
    let cluster = Cluster::start_replicated(3, replicas);
    let seeds: Vec<String> = cluster.nodes.iter().map(Node::addr).collect();
    let mut c = cluster.nodes[0].conn();
    let slots = cluster_slots(&mut c);
    assert_eq!(slots.len(), 3, "{slots:?}");

    let keys: Vec<String> = (0..90).map(|i| format!("width:{i}")).collect();
    for e in &slots {
        let in_range = |k: &String| (e.lo..=e.hi).contains(&key_slot(k.as_bytes()));
        assert!(keys.iter().any(in_range), "no key in {e:?}");
    }
    let mut writer = cluster.client();
    let values = |round: usize| -> Vec<(String, String)> {
        let value = |i: usize| format!("r{round}:v{i}");
        keys.iter()
            .enumerate()
            .map(|(i, k)| (k.clone(), value(i)))
            .collect()
    };
    let expected = |pairs: &[(String, String)]| -> Vec<Option<Bytes>> {
        pairs
            .iter()
            .map(|(_, v)| Some(Bytes::from(v.clone())))
            .collect()
    };
    let pairs = values(0);
    writer.multi_set(&pairs).unwrap();

    let mut options = cluster_options(&seeds);
    options.read_from_replicas = true;
    let mut client = ClusterClient::connect_with(options).unwrap();
    // The client knows each range's chain: its head as master, the rest as replicas.
    for e in &slots {
        // Members are (id, port); every node listens on the head's host (loopback).
        let chain: Vec<String> = e
            .members
            .iter()
            .map(|(_, port)| format!("{}:{port}", e.host))
            .collect();
        assert_eq!(chain.len(), usize::from(replicas), "{e:?}");
        assert_eq!(client.slot_owner(e.lo), Some(chain[0].as_str()));
        assert_eq!(client.slot_replicas(e.hi), chain[1..].to_vec(), "{e:?}");
    }

    let before = client.stats();
    assert_eq!(client.multi_get(&keys).unwrap(), expected(&pairs));
    let stats = client.stats();
    assert_eq!(stats.multiget_requests - before.multiget_requests, want);
    assert_eq!(stats.multiget_keys - before.multiget_keys, 90);
    // No MOVED: every member took its READONLY reads.
    assert_eq!((stats.moved, stats.retries, stats.node_failures), (0, 0, 0));

    // Without the option: one MGET per head.
    let mut plain = cluster.client();
    assert_eq!(plain.multi_get(&keys).unwrap(), expected(&pairs));
    assert_eq!(plain.stats().multiget_requests, 3);

    // A value written through the head is read back from whichever member serves it.
    for round in 1..=20 {
        // Every seventh key by SET, the others by MSET, through the heads.
        let pairs = values(round);
        let mut rest: Vec<(&str, &str)> = Vec::new();
        for (i, (k, v)) in pairs.iter().enumerate() {
            if i % 7 == 0 {
                writer.set(k, v).unwrap();
            } else {
                rest.push((k, v));
            }
        }
        writer.multi_set(&rest).unwrap();
        assert_eq!(
            client.multi_get(&keys).unwrap(),
            expected(&pairs),
            "round {round}"
        );
    }
    let stats = client.stats();
    assert_eq!(stats.multiget_requests, 21 * want);
    assert_eq!(stats.moved, 0);

    // Its connections killed, the client reconnects: READONLY again, or the replicas would
    // answer MOVED.
    for node in &cluster.nodes {
        let mut admin = node.conn();
        ok(
            &mut admin,
            &["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"],
        );
    }
    let pairs = values(21);
    writer.multi_set(&pairs).unwrap();
    let before = client.stats();
    assert_eq!(client.multi_get(&keys).unwrap(), expected(&pairs));
    let stats = client.stats();
    assert_eq!(stats.multiget_requests - before.multiget_requests, want);
    assert_eq!((stats.moved, stats.node_failures), (0, 0));
}

/// Chains of 3 on 3 nodes: every node holds every range, one MGET serves them all.
#[test]
fn cluster_client_multiget_reads_one_member_when_each_holds_every_range() {
    multiget_reads_from_the_fewest_members(3, 1);
}

/// Chains of 2 on 3 nodes ([1, 2], [2, 3], [3, 1]): two members hold every range.
#[test]
fn cluster_client_multiget_reads_two_members_of_chains_of_two() {
    multiget_reads_from_the_fewest_members(2, 2);
}

/// A node's keys of each range on every member, as `CLUSTER COUNTKEYSINRANGES` counts them
/// (the ranges of CLUSTER SLOTS, in order).
fn counts_per_range(cluster: &Cluster) -> Vec<Vec<i64>> {
    let slots = cluster_slots(&mut cluster.nodes[0].conn());
    cluster
        .nodes
        .iter()
        .map(|node| {
            let mut c = node.conn();
            slots
                .iter()
                .map(|e| {
                    let (lo, hi) = (e.lo.to_string(), e.hi.to_string());
                    let args: [&[u8]; 4] = [
                        b"CLUSTER",
                        b"COUNTKEYSINRANGES",
                        lo.as_bytes(),
                        hi.as_bytes(),
                    ];
                    match c.command(&args).unwrap() {
                        Value::Integer(n) => n,
                        other => panic!("COUNTKEYSINRANGES: {other:?}"),
                    }
                })
                .collect()
        })
        .collect()
}

/// FLUSHALL on a replicated cluster: sent to one node, it empties the range that node heads
/// on every member of its chain (one message down the chain) and nothing else; FLUSHDB the
/// same; sent to every node (the router does), everything. Writes after a flush replicate as
/// before; inside MULTI it is refused.
#[test]
fn flushall_empties_the_ranges_a_node_heads_on_every_member() {
    let cluster = Cluster::start_replicated(3, 3);
    let mut client = cluster.client();
    let keys: Vec<String> = (0..300).map(|i| format!("flush:{i}")).collect();
    for k in &keys {
        client.set(k, "v").unwrap();
    }
    let before = counts_per_range(&cluster);
    // Every member holds every range: the same counts on every node, 300 in all.
    assert!(before.iter().all(|c| *c == before[0]), "{before:?}");
    assert_eq!(before[0].iter().sum::<i64>(), 300);
    // node i heads range i (CLUSTER SLOTS order).
    let mut n0 = cluster.nodes[0].conn();
    ok(&mut n0, &["FLUSHALL"]);
    let after = counts_per_range(&cluster);
    for (node, counts) in after.iter().enumerate() {
        assert_eq!(counts[0], 0, "node {node}: range 0 flushed");
        assert_eq!(counts[1..], before[0][1..], "node {node}: the others kept");
    }
    let mut n1 = cluster.nodes[1].conn();
    ok(&mut n1, &["FLUSHDB", "SYNC"]);
    let after = counts_per_range(&cluster);
    for counts in &after {
        assert_eq!(counts[..2], [0, 0]);
        assert_eq!(counts[2], before[0][2]);
    }
    // Writes after the flush go down the chains as before.
    for k in &keys[..30] {
        client.set(k, "again").unwrap();
    }
    let rewritten = counts_per_range(&cluster);
    assert!(
        rewritten.iter().all(|c| *c == rewritten[0]),
        "{rewritten:?}"
    );
    for node in &cluster.nodes {
        let mut r = readonly(node);
        for k in &keys[..30] {
            let chain = chain_of(&cluster, &mut n0, k);
            if chain.contains(&cluster.node(&node.id)) {
                assert_eq!(r.get(k).unwrap().as_deref(), Some(&b"again"[..]), "{k}");
            }
        }
    }
    ok(&mut n0, &["MULTI"]);
    let refused = n0.command(&[b"FLUSHALL"]).unwrap_err().to_string();
    assert!(refused.contains("not supported inside MULTI"), "{refused}");
    n0.command(&[b"DISCARD"]).unwrap();
    for node in &cluster.nodes {
        ok(&mut node.conn(), &["FLUSHALL"]);
    }
    assert!(counts_per_range(&cluster).iter().flatten().all(|&n| n == 0));
    for node in &cluster.nodes {
        assert_eq!(node.store_keys().unwrap(), 0, "{}", node.id);
    }
}
