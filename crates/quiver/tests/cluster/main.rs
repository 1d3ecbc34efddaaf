//! A Quiver cluster as real processes: one etcd and `quiver serve --cluster` nodes, driven by
//! the clients people use against Redis Cluster (redis-cli -c, redis-py's RedisCluster,
//! redis-benchmark --cluster) and by Quiver's own `quiver_client::ClusterClient`. Here: those
//! clients, and the protocol they rely on (CLUSTER SLOTS / NODES / INFO / MYID, MOVED,
//! CROSSSLOT, SELECT, MULTI/EXEC). `outage`: etcd killed and restarted under load, a node
//! restarted while etcd is down. `moves`: slot ranges moved between nodes under load, kill -9
//! of a move's source or target during the copy, a hand-over whose answer is lost (a test-only
//! fault), nodes added, rebalanced and removed, and the cluster client's one request per node.
//! `chains`: chain replication — every member has every write, CRAQ reads from replicas,
//! a stopped tail holding writes and dirty reads, fencing by chain version, the cluster
//! client's multigets read from the fewest members (`read_from_replicas`).
//! `failover`: `quiver manager` repairing chains while a history is recorded — a node
//! killed, stopped past its lease, cut off from etcd (`proxy`: a TCP proxy that can be cut),
//! restarted; etcd restarted (`manager`: its processes); `fault_cycles`, their long run
//! (ignored). `kill_loop`: kill -9 and restart of a chain's head, middle or tail, cycle after
//! cycle under a writing load, every key checked on every member of its chain (issue 14).
//! `router`: `quiver router`, the front-end plain clients (quiver-client's `Connection`,
//! redis-cli without -c, redis-py's `redis.Redis`) talk to: a multiget across nodes as one
//! request per back-end, moves under load hidden from its clients, a back-end killed and
//! restarted, AUTH and malformed frames. `script`: scripts/cluster.sh up and down (and the
//! router it starts). `slots`: CLUSTER SLOTS and MOVED read for assertions (routing is the
//! cluster client's). `history`: a recorder of concurrent GET / SET / INCR / MSET histories
//! and their linearizability check by porcupine (`tools/lincheck`); `lincheck`: its tests on
//! one standalone node (linearizable, a stale read injected and found, a kill -9).
//!
//! The harness (`harness`) starts every process on free loopback ports in a temporary
//! directory and stops each by its PID; scripts/test_deps.sh installs etcd, redis-tools and
//! redis-py, and builds the checker.

// The helpers outside the tests unwrap too: a failure there is the test failing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod chains;
mod failover;
mod fault_cycles;
mod harness;
mod hashes;
mod history;
mod kill_loop;
mod lincheck;
mod manager;
mod moves;
mod outage;
mod partition;
mod proxy;
mod router;
mod script;
mod slots;
mod tools;

use std::collections::BTreeSet;
use std::process::Command;

use quiver_client::{ClusterClient, Connection, Error, Value};
use quiver_testkit::process::run;
use quiver_testkit::{tool, WAIT};

use harness::{text, Cluster};
use slots::cluster_slots;

/// The index of the node owning `key` in `cluster`, as `client`'s slot table says.
fn owner_of(cluster: &Cluster, client: &ClusterClient, key: &str) -> usize {
    let slot = quiver_store::slot::key_slot(key.as_bytes());
    let addr = client
        .slot_owner(slot)
        .unwrap_or_else(|| panic!("slot {slot} of {key} has no owner: {client:?}"));
    let port = addr.rsplit_once(':').and_then(|(_, p)| p.parse().ok());
    cluster.node_on(port.unwrap_or_else(|| panic!("an address: {addr}")))
}

/// CLUSTER KEYSLOT, asked of the server.
fn keyslot(c: &mut Connection, key: &str) -> u16 {
    match c
        .command(&[b"CLUSTER", b"KEYSLOT", key.as_bytes()])
        .unwrap()
    {
        Value::Integer(n) => u16::try_from(n).unwrap(),
        other => panic!("CLUSTER KEYSLOT {key}: {other:?}"),
    }
}

/// The text of an error reply, or a panic showing what came instead.
fn error_text(reply: quiver_client::Result<Value>) -> String {
    match reply {
        Err(Error::Server(text)) => text,
        other => panic!("an error reply expected, got {other:?}"),
    }
}

#[test]
fn redis_cli_follows_moved() {
    let cluster = Cluster::start(3);
    let cli = tool::require("redis-cli");
    let port1 = cluster.nodes[0].port.to_string();
    let client = cluster.client();
    let keys: Vec<String> = (0..30).map(|i| format!("cli:{i}")).collect();
    let owners: BTreeSet<usize> = keys
        .iter()
        .map(|k| owner_of(&cluster, &client, k))
        .collect();
    assert_eq!(owners.len(), 3, "the keys span every node");

    let redis_cli = |follow: bool, args: &[&str]| -> String {
        let mut cmd = Command::new(&cli);
        if follow {
            cmd.arg("-c");
        }
        let (status, out, err) = run(cmd.args(["-p", &port1]).args(args), "redis-cli", WAIT);
        assert!(status.success(), "redis-cli {args:?}: {status}: {err}");
        out.trim().to_string()
    };
    for (i, key) in keys.iter().enumerate() {
        assert_eq!(redis_cli(true, &["SET", key, &format!("value-{i}")]), "OK");
    }
    for (i, key) in keys.iter().enumerate() {
        assert_eq!(redis_cli(true, &["GET", key]), format!("value-{i}"));
    }
    // Each key was written on its owner: it answers without a redirect.
    for (i, key) in keys.iter().enumerate() {
        let owner = &cluster.nodes[owner_of(&cluster, &client, key)];
        let got = owner.conn().get(key).unwrap();
        assert_eq!(
            got.as_deref(),
            Some(format!("value-{i}").as_bytes()),
            "{key}"
        );
    }

    // Without -c, the wrong node answers MOVED with the key's slot and its owner's address.
    let mut c1 = cluster.nodes[0].conn();
    for key in keys.iter().filter(|k| owner_of(&cluster, &client, k) != 0) {
        let owner = &cluster.nodes[owner_of(&cluster, &client, key)];
        let slot = keyslot(&mut c1, key);
        let out = redis_cli(false, &["GET", key]);
        assert_eq!(
            out.trim_start_matches("(error) "),
            format!("MOVED {slot} 127.0.0.1:{}", owner.port),
            "{key}"
        );
    }
}

#[test]
fn redis_py_cluster() {
    let cluster = Cluster::start(3);
    tools::redis_py_cluster(&cluster, 1);
}

#[test]
fn redis_benchmark_cluster() {
    let cluster = Cluster::start(3);
    let port1 = cluster.nodes[0].port.to_string();
    let (status, out, err) = run(
        Command::new(tool::require("redis-benchmark"))
            .args(["--cluster", "-h", "127.0.0.1", "-p", &port1])
            .args(["-t", "set,get", "-n", "20000", "-q"]),
        "redis-benchmark --cluster",
        WAIT * 5,
    );
    let output = out + &err;
    assert!(status.success(), "redis-benchmark: {status}\n{output}");
    let lines = quiver_testkit::redis::benchmark_lines(&output);
    for line in &lines {
        assert!(
            !line.to_ascii_lowercase().contains("error") && !line.contains("ERR"),
            "redis-benchmark reported: {line}\n{output}"
        );
    }
    for test in ["SET:", "GET:"] {
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with(test) && l.contains("requests per second")),
            "no rate for {test}\n{output}"
        );
    }
    // Its clients are spread over the nodes, each writing keys of a slot its node owns.
    let mut sizes = Vec::new();
    for node in &cluster.nodes {
        match node.conn().command(&[b"DBSIZE"]).unwrap() {
            Value::Integer(n) => sizes.push(n),
            other => panic!("DBSIZE: {other:?}"),
        }
    }
    assert!(sizes.iter().sum::<i64>() > 0, "no key on any node");
    assert!(sizes.iter().all(|&n| n > 0), "keys per node: {sizes:?}");
}

#[test]
fn cluster_protocol() {
    let cluster = Cluster::start(3);
    let node1 = &cluster.nodes[0];
    let mut c = node1.conn();

    // CLUSTER SLOTS: every slot once, in ranges owned by the three nodes.
    let slots = cluster_slots(&mut c);
    let mut next = 0u32;
    for e in &slots {
        assert_eq!(u32::from(e.lo), next, "{slots:?}");
        next = u32::from(e.hi) + 1;
        assert_eq!(e.host, "127.0.0.1");
        let node = &cluster.nodes[cluster.node_on(e.port)];
        assert_eq!(e.id, node.id, "{slots:?}");
    }
    assert_eq!(next, quiver_store::slot::SLOTS, "{slots:?}");
    let ports: BTreeSet<u16> = slots.iter().map(|e| e.port).collect();
    let node_ports: BTreeSet<u16> = cluster.nodes.iter().map(|n| n.port).collect();
    assert_eq!(ports, node_ports);
    let client = cluster.client();

    // CLUSTER NODES: a line per node, this one flagged myself.
    let nodes = text(&c.command(&[b"CLUSTER", b"NODES"]).unwrap());
    let lines: Vec<&str> = nodes.lines().collect();
    assert_eq!(lines.len(), 3, "{nodes}");
    let myself: Vec<&&str> = lines.iter().filter(|l| l.contains("myself")).collect();
    assert_eq!(myself.len(), 1, "{nodes}");
    assert!(
        myself[0].starts_with(&format!("node-1 {}@", node1.addr())),
        "{nodes}"
    );

    // CLUSTER INFO and MYID.
    node1.info_has("cluster_state:ok").unwrap();
    node1.info_has("cluster_known_nodes:3").unwrap();
    let id = c.command(&[b"CLUSTER", b"MYID"]).unwrap();
    assert_eq!(text(&id), "node-1");

    // Keys of different slots, all node-1's: one MGET (and MSET) on node-1 is accepted, a
    // deliberate difference from Redis Cluster.
    let mut mine: Vec<(String, u16)> = Vec::new();
    for i in 0.. {
        let key = format!("proto:{i}");
        let slot = keyslot(&mut c, &key);
        if owner_of(&cluster, &client, &key) == 0 && mine.iter().all(|(_, s)| *s != slot) {
            mine.push((key, slot));
            if mine.len() == 3 {
                break;
            }
        }
    }
    let mut mset: Vec<&[u8]> = vec![b"MSET"];
    for (key, _) in &mine {
        mset.extend([key.as_bytes(), key.as_bytes()]);
    }
    assert_eq!(c.command(&mset).unwrap(), Value::Simple("OK".into()));
    let mut mget: Vec<&[u8]> = vec![b"MGET"];
    mget.extend(mine.iter().map(|(k, _)| k.as_bytes()));
    let want: Vec<Value> = mine
        .iter()
        .map(|(k, _)| Value::Bulk(k.clone().into_bytes().into()))
        .collect();
    assert_eq!(c.command(&mget).unwrap(), Value::Array(want));

    // Keys on two nodes: CROSSSLOT, and the MSET wrote nothing.
    let other = (0..)
        .map(|i| format!("other:{i}"))
        .find(|k| owner_of(&cluster, &client, k) != 0)
        .unwrap();
    let crossslot = "CROSSSLOT Keys in request don't hash to the same slot";
    let reply = c.command(&[b"MGET", mine[0].0.as_bytes(), other.as_bytes()]);
    assert_eq!(error_text(reply), crossslot);
    let reply = c.command(&[b"MSET", b"proto:x", b"1", other.as_bytes(), b"2"]);
    assert_eq!(error_text(reply), crossslot);
    let owner = &cluster.nodes[owner_of(&cluster, &client, &other)];
    assert_eq!(owner.conn().get(&other).unwrap(), None);

    // One database.
    let reply = c.command(&[b"SELECT", b"1"]);
    assert_eq!(
        error_text(reply),
        "ERR SELECT is not allowed in cluster mode"
    );
    assert_eq!(
        c.command(&[b"SELECT", b"0"]).unwrap(),
        Value::Simple("OK".into())
    );

    // A transaction on node-1's keys (of different slots).
    let (k1, k2) = (mine[0].0.as_bytes(), mine[1].0.as_bytes());
    assert_eq!(c.command(&[b"MULTI"]).unwrap(), Value::Simple("OK".into()));
    for k in [k1, k2] {
        let queued = c.command(&[b"SET", k, b"in-exec"]).unwrap();
        assert_eq!(queued, Value::Simple("QUEUED".into()));
    }
    let ok = Value::Simple("OK".into());
    assert_eq!(
        c.command(&[b"EXEC"]).unwrap(),
        Value::Array(vec![ok.clone(), ok])
    );
    for k in [k1, k2] {
        assert_eq!(c.get(k).unwrap().as_deref(), Some(&b"in-exec"[..]));
    }
}
