//! What grouping and concurrency must never change: pipelined replies in request order with
//! read-your-writes, atomic MSET / INCR / MULTI-EXEC under concurrent clients, WATCH, BATCH,
//! and the adaptive intermediate queue answering every GET correctly.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

use quiver_client::{Batch, BatchOutcome, Condition, Connection, Value};
use quiver_node::node_config::{Coalesce, ServeConfig};
use quiver_node::testing::TestServer;

use crate::encode_multibulk;

fn connect(server: &TestServer) -> Connection {
    Connection::connect(&server.addr.to_string()).expect("connect")
}

/// Sends `requests` in one write and reads until `expected` bytes arrived.
fn exchange(server: &TestServer, requests: &[&[&[u8]]], expected: &[u8]) {
    let mut s = TcpStream::connect(server.addr).unwrap();
    let mut wire = Vec::new();
    for r in requests {
        wire.extend_from_slice(&encode_multibulk(r));
    }
    s.write_all(&wire).unwrap();
    let mut got = vec![0u8; expected.len()];
    s.read_exact(&mut got).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(expected)
    );
}

#[test]
fn a_pipelined_run_keeps_order_and_reads_its_own_writes() {
    let server = TestServer::start();
    exchange(
        &server,
        &[
            &[b"GET", b"k"],
            &[b"SET", b"k", b"1"],
            &[b"SET", b"j", b"2"],
            &[b"GET", b"k"],
            &[b"GET", b"j"],
            &[b"DEL", b"k", b"k"],
            &[b"EXISTS", b"k", b"j", b"j"],
            &[b"SET", b"k", b"3"],
            &[b"GET", b"k"],
            &[b"INCR", b"k"],
            &[b"GET", b"k"],
        ],
        b"$-1\r\n+OK\r\n+OK\r\n$1\r\n1\r\n$1\r\n2\r\n:1\r\n:2\r\n+OK\r\n$1\r\n3\r\n:4\r\n$1\r\n4\r\n",
    );
}

/// A pipeline alternating GETs and SETs reaches the engine as one vector, and still runs as
/// if one by one: two clients on two server threads each set one key and then get the
/// other's (the store-buffering litmus test) — never do both miss the other's write, as they
/// could if a vector ran its GETs before its SETs or let another client in between. (It runs
/// as an engine pipeline, partition by partition: this holds because the partitions' shares
/// run in the order of their first accesses, `pipeline::run`.)
#[test]
fn mixed_get_set_pipelines_run_as_if_one_by_one() {
    let server = TestServer::start_with(|c| c.service.threads = 2);
    const ROUNDS: usize = 400;
    let barrier = Arc::new(std::sync::Barrier::new(2));
    let side = |mine: &'static str, theirs: &'static str| {
        let mut c = connect(&server);
        let barrier = barrier.clone();
        thread::spawn(move || {
            let mut missed = Vec::with_capacity(ROUNDS);
            for i in 0..ROUNDS {
                let (mine, theirs) = (format!("{mine}{i}"), format!("{theirs}{i}"));
                barrier.wait();
                let mut p = c.pipeline();
                p.command(&[b"SET", mine.as_bytes(), b"1"]);
                p.command(&[b"GET", theirs.as_bytes()]);
                let replies = p.execute().unwrap();
                missed.push(replies[1].as_ref().unwrap().as_bytes().is_none());
            }
            missed
        })
    };
    let (a, b) = (side("x", "y"), side("y", "x"));
    let (a, b) = (a.join().unwrap(), b.join().unwrap());
    let both = a.iter().zip(&b).filter(|(&a, &b)| a && b).count();
    assert_eq!(both, 0, "rounds where both GETs missed the other's SET");
    let mut c = connect(&server);
    let info = c.info(Some("vectors")).unwrap();
    assert!(info.contains("vector_width_le_2:"), "{info}");
}

/// The reads of one hash (HGET, HMGET, HGETALL, HLEN, ...) join the vectors of GETs (and of
/// SETs, where those mix): a pipelined run of strings and hashes answers each by its kind —
/// a hash's fields, WRONGTYPE for the other kind, nil in an MGET — on every path a run of
/// reads takes: the engine vector, the per-partition pipeline (SETs among one-key reads), the
/// mixed vector, and the intermediate queue.
#[test]
fn hash_reads_join_get_vectors_and_answer_by_kind() {
    const WRONGTYPE: &str =
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
    let setup: &[&[&[u8]]] = &[
        &[b"HSET", b"h", b"f", b"1", b"g", b"2"],
        &[b"SET", b"s", b"v"],
    ];
    let reads: &[&[&[u8]]] = &[
        &[b"HGET", b"h", b"f"],
        &[b"GET", b"s"],
        &[b"HMGET", b"h", b"g", b"x", b"f"],
        &[b"GET", b"h"],
        &[b"HGET", b"s", b"f"],
        &[b"HMGET", b"nokey", b"f", b"g"],
        &[b"HGET", b"h", b"nofield"],
        &[b"HLEN", b"h"],
        &[b"HGETALL", b"s"],
        &[b"HEXISTS", b"h", b"g"],
        &[b"HGETALL", b"h"],
    ];
    let read_replies = format!(
        "$1\r\n1\r\n$1\r\nv\r\n*3\r\n$1\r\n2\r\n$-1\r\n$1\r\n1\r\n{WRONGTYPE}{WRONGTYPE}\
         *2\r\n$-1\r\n$-1\r\n$-1\r\n:2\r\n{WRONGTYPE}:1\r\n\
         *4\r\n$1\r\nf\r\n$1\r\n1\r\n$1\r\ng\r\n$1\r\n2\r\n"
    );
    let configs: [fn(&mut ServeConfig); 2] = [|_| {}, |c| c.node.coalesce = Coalesce::Adaptive];
    for config in configs {
        let server = TestServer::start_with(config);
        exchange(&server, setup, b":2\r\n+OK\r\n");
        // Reads alone: one engine vector (or the intermediate queue).
        exchange(&server, reads, read_replies.as_bytes());
        // With a SET of one key among them: the per-partition pipeline.
        let mut with_set = reads.to_vec();
        with_set.insert(3, &[b"SET", b"t", b"1"]);
        let mut want = read_replies.clone();
        let third = "*3\r\n$1\r\n2\r\n$-1\r\n$1\r\n1\r\n";
        let at = want.find(third).unwrap() + third.len();
        want.insert_str(at, "+OK\r\n");
        exchange(&server, &with_set, want.as_bytes());
        // With an MGET of both kinds: the mixed vector.
        with_set.push(&[b"MGET", b"s", b"h", b"t"]);
        want.push_str("*3\r\n$1\r\nv\r\n$-1\r\n$1\r\n1\r\n");
        exchange(&server, &with_set, want.as_bytes());
    }
}

#[test]
fn wide_pipelines_are_split_at_the_vector_width() {
    let server = TestServer::start_with(|c| c.node.max_vector_width = 4);
    let mut conn = connect(&server);
    let mut p = conn.pipeline();
    for i in 0..50 {
        p.command(&[
            b"SET",
            format!("k{i}").as_bytes(),
            format!("v{i}").as_bytes(),
        ]);
    }
    for i in 0..50 {
        p.command(&[b"GET", format!("k{i}").as_bytes()]);
    }
    let replies = p.execute().unwrap();
    for (i, r) in replies[50..].iter().enumerate() {
        assert_eq!(
            r.as_ref().unwrap().as_bytes(),
            Some(format!("v{i}").as_bytes())
        );
    }
    let info = conn.info(Some("vectors")).unwrap();
    assert!(info.contains("vector_width_le_4:"), "{info}");
    assert!(!info.contains("vector_width_le_8:"), "{info}");
}

#[test]
fn concurrent_incr_loses_no_update() {
    let server = TestServer::start();
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let mut c = connect(&server);
            thread::spawn(move || {
                for _ in 0..250 {
                    c.incr("counter").unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(
        connect(&server).get("counter").unwrap().as_deref(),
        Some(&b"1000"[..])
    );
}

#[test]
fn concurrent_incrbyfloat_loses_no_update() {
    let server = TestServer::start();
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let mut c = connect(&server);
            thread::spawn(move || {
                for _ in 0..100 {
                    c.command(&[b"INCRBYFLOAT", b"f", b"0.25"]).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(
        connect(&server).get("f").unwrap().as_deref(),
        Some(&b"100"[..])
    );
}

#[test]
fn randomkey_finds_every_key_and_only_live_ones() {
    let server = TestServer::start();
    let mut c = connect(&server);
    for i in 0..40 {
        c.set(format!("k{i}"), "v").unwrap();
    }
    c.command(&[b"DEL", b"k0", b"k1"]).unwrap();
    let mut seen = std::collections::HashSet::new();
    for _ in 0..2000 {
        match c.command(&[b"RANDOMKEY"]).unwrap() {
            Value::Bulk(k) => {
                assert!(k != "k0" && k != "k1", "a deleted key: {k:?}");
                seen.insert(k);
            }
            other => panic!("RANDOMKEY answered {other:?}"),
        }
    }
    // 38 keys, 2000 draws of a fair-enough pick: every one comes up.
    assert_eq!(seen.len(), 38);
    c.command(&[b"FLUSHALL"]).unwrap();
    assert_eq!(c.command(&[b"RANDOMKEY"]).unwrap(), Value::Null);
}

#[test]
fn mset_is_seen_whole_or_not_at_all() {
    let server = TestServer::start();
    let keys: Vec<String> = (0..16).map(|i| format!("key:{i}")).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let mut c = connect(&server);
        let keys = keys.clone();
        let stop = stop.clone();
        thread::spawn(move || {
            let mut checked = 0;
            while !stop.load(Ordering::Relaxed) || checked == 0 {
                let values = c.multi_get(&keys).unwrap();
                let first = values[0].clone();
                assert!(
                    values.iter().all(|v| *v == first),
                    "MGET saw a partial MSET: {values:?}"
                );
                checked += 1;
            }
        })
    };
    let mut w = connect(&server);
    for round in 0..200 {
        let v = format!("round-{round}");
        let pairs: Vec<(&String, &String)> = keys.iter().map(|k| (k, &v)).collect();
        w.multi_set(&pairs).unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    reader.join().unwrap();
}

#[test]
fn watch_aborts_exec_after_another_clients_write_and_retries_succeed() {
    let server = TestServer::start();
    let mut a = connect(&server);
    let mut b = connect(&server);
    a.set("w", "1").unwrap();
    a.command(&[b"WATCH", b"w"]).unwrap();
    b.set("w", "1").unwrap(); // same value: still a change for WATCH
    a.command(&[b"MULTI"]).unwrap();
    a.command(&[b"SET", b"w", b"2"]).unwrap();
    assert_eq!(a.command(&[b"EXEC"]).unwrap(), Value::Null);
    assert_eq!(a.get("w").unwrap().as_deref(), Some(&b"1"[..]));

    // Optimistic increments from several clients: each retries until its EXEC applies.
    let threads: Vec<_> = (0..3)
        .map(|_| {
            let mut c = connect(&server);
            thread::spawn(move || {
                for _ in 0..40 {
                    loop {
                        c.command(&[b"WATCH", b"n"]).unwrap();
                        let n: i64 = c
                            .get("n")
                            .unwrap()
                            .map_or(0, |v| std::str::from_utf8(&v).unwrap().parse().unwrap());
                        c.command(&[b"MULTI"]).unwrap();
                        c.command(&[b"SET", b"n", (n + 1).to_string().as_bytes()])
                            .unwrap();
                        if c.command(&[b"EXEC"]).unwrap() != Value::Null {
                            break;
                        }
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(a.get("n").unwrap().as_deref(), Some(&b"120"[..]));
}

#[test]
fn exec_is_all_or_nothing_and_isolated() {
    let server = TestServer::start();
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let mut c = connect(&server);
        let stop = stop.clone();
        thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let v = c.multi_get(&["from", "to"]).unwrap();
                let total: i64 = v
                    .iter()
                    .map(|x| {
                        x.as_ref()
                            .map_or(0, |b| std::str::from_utf8(b).unwrap().parse().unwrap())
                    })
                    .sum();
                assert_eq!(total, 0, "a transfer was seen half done: {v:?}");
            }
        })
    };
    let mut c = connect(&server);
    for _ in 0..200 {
        c.command(&[b"MULTI"]).unwrap();
        c.command(&[b"DECRBY", b"from", b"5"]).unwrap();
        c.command(&[b"INCRBY", b"to", b"5"]).unwrap();
        let r = c.command(&[b"EXEC"]).unwrap();
        assert!(matches!(r, Value::Array(ref a) if a.len() == 2), "{r:?}");
    }
    stop.store(true, Ordering::Relaxed);
    reader.join().unwrap();
    assert_eq!(c.get("to").unwrap().as_deref(), Some(&b"1000"[..]));
}

#[test]
fn batch_applies_all_or_nothing() {
    let server = TestServer::start();
    let mut c = connect(&server);
    c.set("a", "1").unwrap();
    let applied = Batch::new()
        .put_if("a", "2", Condition::equals("1"))
        .put_if("b", "x", Condition::Absent)
        .delete("c")
        .execute(&mut c)
        .unwrap();
    assert_eq!(applied, BatchOutcome::Applied);
    let failed = Batch::new()
        .put("a", "3")
        .check("b", Condition::Absent)
        .execute(&mut c)
        .unwrap();
    assert_eq!(
        failed,
        BatchOutcome::ConditionFailed {
            op: 1,
            condition: "ABSENT".into()
        }
    );
    assert_eq!(
        c.multi_get(&["a", "b"]).unwrap(),
        vec![Some("2".into()), Some("x".into())]
    );
    assert!(matches!(
        c.command(&[b"BATCH", b"PUT", b"k"]),
        Err(quiver_client::Error::Server(e)) if e == "ERR syntax error"
    ));
}

/// A hash key in a BATCH: it exists, equals no string (not even its packed bytes), a PUT
/// replaces it with a string and a DEL deletes it — a large hash too.
#[test]
fn batch_takes_hash_keys() {
    let server = TestServer::start();
    let mut c = connect(&server);
    let mut hset: Vec<Vec<u8>> = vec![b"HSET".to_vec(), b"big".to_vec()];
    for i in 0..600 {
        hset.extend([format!("f{i}").into_bytes(), format!("v{i}").into_bytes()]);
    }
    let args: Vec<&[u8]> = hset.iter().map(Vec::as_slice).collect();
    assert_eq!(c.command(&args).unwrap(), Value::Integer(600));
    c.command(&[b"HSET", b"small", b"f", b"v"]).unwrap();
    let outcome = Batch::new()
        .check("big", Condition::Exists)
        .check("small", Condition::Exists)
        .execute(&mut c)
        .unwrap();
    assert_eq!(outcome, BatchOutcome::Applied);
    let outcome = Batch::new()
        .put_if("small", "x", Condition::equals("\u{1}\u{1}f\u{1}v"))
        .execute(&mut c)
        .unwrap();
    assert!(matches!(
        outcome,
        BatchOutcome::ConditionFailed { op: 0, .. }
    ));
    let outcome = Batch::new()
        .put_if("small", "now a string", Condition::Exists)
        .delete("big")
        .check("big", Condition::Exists)
        .execute(&mut c)
        .unwrap();
    assert_eq!(outcome, BatchOutcome::Applied);
    assert_eq!(
        c.get("small").unwrap().as_deref(),
        Some(&b"now a string"[..])
    );
    assert_eq!(c.command(&[b"EXISTS", b"big"]).unwrap(), Value::Integer(0));
    assert_eq!(c.command(&[b"HLEN", b"big"]).unwrap(), Value::Integer(0));
}

#[test]
fn the_intermediate_queue_answers_every_get() {
    let server = TestServer::start_with(|c| {
        c.node.coalesce = Coalesce::Adaptive;
        c.node.max_vector_width = 8;
    });
    let mut w = connect(&server);
    let pairs: Vec<(String, String)> = (0..200)
        .map(|i| (format!("k{i}"), format!("v{i}")))
        .collect();
    w.multi_set(&pairs).unwrap();
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let mut c = connect(&server);
            thread::spawn(move || {
                for round in 0..100 {
                    let i = (t * 37 + round * 11) % 250;
                    let want = (i < 200).then(|| format!("v{i}"));
                    let got = c.get(format!("k{i}")).unwrap();
                    assert_eq!(got.as_deref(), want.as_deref().map(str::as_bytes));
                }
                // A pipelined run goes through the queue as one request of several keys.
                let mut p = c.pipeline();
                for i in 0..20 {
                    p.command(&[b"GET", format!("k{i}").as_bytes()]);
                }
                for (i, r) in p.execute().unwrap().into_iter().enumerate() {
                    assert_eq!(r.unwrap().as_bytes(), Some(format!("v{i}").as_bytes()));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let info = w.info(Some("vectors")).unwrap();
    assert!(info.contains("vectors:"), "{info}");
}

#[test]
fn unix_socket_serves_the_same_protocol() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("quiver.sock");
    let sock = path.clone();
    let mut server = TestServer::start_with(move |c| c.service.unixsocket = Some(sock));
    let mut s = std::os::unix::net::UnixStream::connect(&path).unwrap();
    s.write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nu\r\n$1\r\nx\r\nHELLO 3\r\nGET nothing\r\n")
        .unwrap();
    let mut got = Vec::new();
    let want_tail = b"_\r\n"; // RESP3 null after HELLO 3
    let mut buf = [0u8; 4096];
    while !got.ends_with(want_tail) {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "closed early: {:?}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    assert!(
        got.starts_with(b"+OK\r\n%7\r\n"),
        "{:?}",
        String::from_utf8_lossy(&got)
    );
    server.stop().unwrap();
    assert!(!path.exists(), "the socket file is removed at shutdown");
}

/// An MGET, EXISTS or DEL wider than `max-multikey-width` is split into engine calls, not
/// refused: every key is answered, and concurrent MSETs are still seen whole by the MGET
/// (its reads are checked unchanged before it answers).
#[test]
fn commands_wider_than_an_engine_call_are_split_and_mget_stays_one_state() {
    let server = TestServer::start_with(|c| c.node.max_multikey_width = 3);
    let keys: Vec<String> = (0..16).map(|i| format!("wide:{i}")).collect();
    let mut c = connect(&server);
    let pairs: Vec<(&String, &String)> = keys.iter().map(|k| (k, k)).collect();
    c.multi_set(&pairs).unwrap();
    let mut with_missing = keys.clone();
    with_missing.push("wide:absent".into());
    let values = c.multi_get(&with_missing).unwrap();
    for (k, v) in keys.iter().zip(&values) {
        assert_eq!(v.as_deref(), Some(k.as_bytes()));
    }
    assert_eq!(values[16], None);
    let mut exists: Vec<&[u8]> = vec![b"EXISTS"];
    exists.extend(with_missing.iter().map(|k| k.as_bytes()));
    assert_eq!(c.command(&exists).unwrap(), Value::Integer(16));

    let start = "start".to_string();
    let pairs: Vec<(&String, &String)> = keys.iter().map(|k| (k, &start)).collect();
    c.multi_set(&pairs).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let mut w = connect(&server);
        let keys = keys.clone();
        let stop = stop.clone();
        thread::spawn(move || {
            let mut round = 0;
            while !stop.load(Ordering::Relaxed) {
                let v = format!("round-{round}");
                let pairs: Vec<(&String, &String)> = keys.iter().map(|k| (k, &v)).collect();
                w.multi_set(&pairs).unwrap();
                round += 1;
            }
        })
    };
    for _ in 0..1000 {
        let values = c.multi_get(&keys).unwrap();
        assert!(
            values.iter().all(|v| *v == values[0]),
            "a split MGET saw a partial MSET: {values:?}"
        );
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();

    let mut del: Vec<&[u8]> = vec![b"DEL"];
    del.extend(with_missing.iter().map(|k| k.as_bytes()));
    assert_eq!(c.command(&del).unwrap(), Value::Integer(16));
    assert_eq!(c.command(&[b"DBSIZE"]).unwrap(), Value::Integer(0));
}

/// GETs, MGETs and DEL / UNLINK share engine vectors, but each command is counted under its
/// own name, and GET and MGET replies interleave in request order.
#[test]
fn grouped_commands_are_counted_under_their_own_names() {
    let server = TestServer::start();
    exchange(
        &server,
        &[
            &[b"SET", b"a", b"1"],
            &[b"SET", b"b", b"2"],
            &[b"GET", b"a"],
            &[b"MGET", b"a", b"b", b"c"],
            &[b"GET", b"b"],
            &[b"UNLINK", b"a"],
            &[b"DEL", b"b", b"c"],
        ],
        b"+OK\r\n+OK\r\n$1\r\n1\r\n*3\r\n$1\r\n1\r\n$1\r\n2\r\n$-1\r\n$1\r\n2\r\n:1\r\n:1\r\n",
    );
    let stats = connect(&server).info(Some("commandstats")).unwrap();
    let calls = |name: &str| {
        stats
            .lines()
            .find_map(|l| l.strip_prefix(&format!("cmdstat_{name}:calls=")))
            .and_then(|rest| rest.split(',').next())
            .map(|n| n.to_string())
    };
    assert_eq!(calls("get").as_deref(), Some("2"), "{stats}");
    assert_eq!(calls("mget").as_deref(), Some("1"), "{stats}");
    assert_eq!(calls("unlink").as_deref(), Some("1"), "{stats}");
    assert_eq!(calls("del").as_deref(), Some("1"), "{stats}");
}

/// The many-core litmus test over the network: while writers on every serving thread commit
/// versions of a group of keys spread over the partitions — as MSET, as MULTI/EXEC, and as
/// pipelines of independent SETs on other keys beside them — readers' MGETs of the group
/// never see two versions at once (a batch is never half-applied to a reader), and each
/// writer's pipeline of SETs and INCRs on one key applies in request order.
#[test]
fn readers_never_see_half_a_batch_and_pipelines_apply_in_order() {
    const WRITES: usize = 400;
    const GROUP: usize = 8;
    let server = TestServer::start_with(|c| c.service.threads = 2);
    let group: Vec<String> = (0..GROUP).map(|i| format!("litmus:{i}")).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = |w: usize| {
        let (mut c, group) = (connect(&server), group.clone());
        thread::spawn(move || {
            for n in 0..WRITES {
                let version = format!("w{w}:{n}");
                // A batch of the group: MSET, or EXEC of SETs, by turns.
                let mut p = c.pipeline();
                if n % 2 == 0 {
                    let mut mset: Vec<&[u8]> = vec![b"MSET"];
                    for k in &group {
                        mset.extend([k.as_bytes(), version.as_bytes()]);
                    }
                    p.command(&mset);
                } else {
                    p.command(&[b"MULTI"]);
                    for k in &group {
                        p.command(&[b"SET", k.as_bytes(), version.as_bytes()]);
                    }
                    p.command(&[b"EXEC"]);
                }
                // Beside it, independent writes on this writer's own key, in order.
                let own = format!("own:{w}");
                for i in 0..8 {
                    p.command(&[b"SET", own.as_bytes(), format!("{n}:{i}").as_bytes()]);
                    p.command(&[b"SET", format!("noise:{w}:{i}").as_bytes(), b"x"]);
                }
                p.command(&[b"INCR", format!("count:{w}").as_bytes()]);
                p.command(&[b"GET", own.as_bytes()]);
                let replies = p.execute().unwrap();
                for r in &replies {
                    assert!(r.is_ok(), "writer {w}, write {n}: {r:?}");
                }
                let last = replies.len() - 1;
                assert_eq!(
                    replies[last - 1].as_ref().unwrap(),
                    &Value::Integer(n as i64 + 1),
                    "writer {w}: INCRs out of order"
                );
                assert_eq!(
                    replies[last].as_ref().unwrap().as_bytes(),
                    Some(format!("{n}:7").as_bytes()),
                    "writer {w}: its pipelined SETs of one key applied out of order"
                );
            }
        })
    };
    let reader = || {
        let (mut c, group, stop) = (connect(&server), group.clone(), stop.clone());
        thread::spawn(move || {
            let mut reads = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let values = c.multi_get(&group).unwrap();
                let first = values[0].clone();
                assert!(
                    values.iter().all(|v| *v == first),
                    "an MGET saw two versions of the group: {values:?}"
                );
                reads += 1;
            }
            reads
        })
    };
    let readers: Vec<_> = (0..2).map(|_| reader()).collect();
    let writers: Vec<_> = (0..3).map(writer).collect();
    for w in writers {
        w.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    let reads: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
    assert!(reads > 0);
    let mut c = connect(&server);
    let group_values = c.multi_get(&group).unwrap();
    assert!(group_values.iter().all(|v| *v == group_values[0]));
    for w in 0..3 {
        let last = format!("{}:7", WRITES - 1);
        assert_eq!(
            c.get(format!("own:{w}")).unwrap().as_deref(),
            Some(last.as_bytes())
        );
    }
}
