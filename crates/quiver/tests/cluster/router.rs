//! `quiver router`, the front-end for clients that know nothing of clusters: plain
//! connections (quiver-client's `Connection`, `redis-cli` without `-c`, redis-py's
//! `redis.Redis`) to one router that routes every command by slot. A multiget across nodes is
//! one request per back-end and a pipeline one batch per back-end (the router's INFO counts
//! them); MULTI/EXEC and WATCH run on one node and are refused (CROSSSLOT) across nodes, as
//! are the multi-key commands it does not split; keyless commands (DBSIZE, KEYS, SCAN,
//! RANDOMKEY, FLUSHALL) cover every node; the router follows moves under load without its
//! clients seeing a redirect; a back-end killed and restarted costs its own keys only, and only
//! while it is down; `--requirepass` and malformed frames are handled as `quiver serve` handles
//! them.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::sync::Arc;

use bytes::Bytes;

use quiver_client::{Connection, Error, Value};
use quiver_testkit::process::run;
use quiver_testkit::{tool, wait_until, WAIT};

use crate::harness::{connect, connect_options, Cluster};
use crate::manager::Chain;
use crate::moves::load::{Kv, Load};
use crate::moves::{
    assert_no_failures, expected_after, owners, pairs_in, range, read_back, read_back_via,
    wait_settled,
};
use crate::{error_text, owner_of};

/// Pairs per MSET and keys per MGET when loading and reading back through the router.
const CHUNK: usize = 500;
/// Operations every load thread completes before, between and after the moves (a count: the
/// test waits for work done, never for a time).
const PROGRESS_OPS: usize = 200;

/// `n` keys `PREFIX-i`, with the index of the node owning each (by the cluster client's
/// table); the keys span every node of `cluster`.
fn keys_over_nodes(cluster: &Cluster, prefix: &str, n: usize) -> (Vec<String>, Vec<usize>) {
    let client = cluster.client();
    let keys: Vec<String> = (0..n).map(|i| format!("{prefix}-{i}")).collect();
    let owners: Vec<usize> = keys.iter().map(|k| owner_of(cluster, &client, k)).collect();
    let spanned: BTreeSet<usize> = owners.iter().copied().collect();
    assert_eq!(
        spanned.len(),
        cluster.nodes.len(),
        "the keys {prefix}-* span every node: {owners:?}"
    );
    (keys, owners)
}

/// An integer reply, or a panic showing what came instead.
fn integer(reply: quiver_client::Result<Value>, what: &str) -> i64 {
    match reply {
        Ok(Value::Integer(n)) => n,
        other => panic!("{what}: an integer expected, got {other:?}"),
    }
}

/// `COMMAND key...` through `c`.
fn keys_command(c: &mut Connection, command: &str, keys: &[&str]) -> quiver_client::Result<Value> {
    let mut args: Vec<&[u8]> = vec![command.as_bytes()];
    args.extend(keys.iter().map(|k| k.as_bytes()));
    c.command(&args)
}

/// The router's (`router_backend_requests`, `router_backend_commands`) now.
fn backend_counts(cluster: &Cluster, r: usize) -> (u64, u64) {
    let router = &cluster.routers[r];
    (
        router.info_field("router_backend_requests"),
        router.info_field("router_backend_commands"),
    )
}

/// With replicas the router reads an MGET's keys from replicas too, asking the fewest nodes
/// that together hold them (the multiget planner): chains of 3 on 3 nodes, one node; chains
/// of 2, two. Every value is the one just written through the heads (a replica answers a key
/// once its write is committed).
#[test]
fn router_mget_over_replicas_asks_the_fewest_nodes() {
    for (replicas, nodes_asked) in [(3u8, 1u64), (2, 2)] {
        let mut cluster = Cluster::start_replicated(3, replicas);
        let r = cluster.start_router();
        let (keys, _) = keys_over_nodes(&cluster, "rrep", 30);
        let mut c = cluster.routers[r].conn();
        let pairs: Vec<(&str, String)> = keys
            .iter()
            .enumerate()
            .map(|(i, k)| (k.as_str(), format!("v{replicas}-{i}")))
            .collect();
        c.multi_set(&pairs).unwrap();
        let router = &cluster.routers[r];
        let before = backend_counts(&cluster, r);
        let width_before = (
            router.info_field("router_mget_keys"),
            router.info_field("router_mget_parts"),
        );
        let values = c.multi_get(&keys).unwrap();
        let after = backend_counts(&cluster, r);
        for (i, got) in values.iter().enumerate() {
            let want = format!("v{replicas}-{i}");
            assert_eq!(got.as_deref(), Some(want.as_bytes()), "{}", keys[i]);
        }
        assert_eq!(
            (after.0 - before.0, after.1 - before.1),
            (nodes_asked, nodes_asked),
            "(backend requests, backend commands) of one MGET over chains of {replicas}: {before:?} -> {after:?}\n{}",
            cluster.logs()
        );
        let width_after = (
            router.info_field("router_mget_keys"),
            router.info_field("router_mget_parts"),
        );
        assert_eq!(
            (
                width_after.0 - width_before.0,
                width_after.1 - width_before.1
            ),
            (30, nodes_asked),
            "INFO's MGET keys and parts"
        );
    }
}

/// Every key a SCAN through `c` returns, `count` at a time, in the order returned (a key as
/// often as it came).
fn scan_all(c: &mut Connection, count: &[u8]) -> Vec<String> {
    let mut scanned = Vec::new();
    let mut cursor = b"0".to_vec();
    for round in 0.. {
        assert!(round < 10_000, "SCAN did not end");
        let reply = c.command(&[b"SCAN", &cursor, b"COUNT", count]).unwrap();
        let Value::Array(page) = reply else {
            panic!("SCAN: {reply:?}")
        };
        cursor = page[0].as_bytes().unwrap().to_vec();
        let Value::Array(found) = &page[1] else {
            panic!("SCAN: {page:?}")
        };
        scanned.extend(found.iter().map(|k| reply_text(Ok(k.clone()), "a key")));
        if cursor == b"0" {
            return scanned;
        }
    }
    unreachable!("the loop returns or fails")
}

/// Keys of the chain over slots `lo-hi` (as `Cluster::chains` writes them).
fn keys_in_slots(slots: &str, prefix: &str, n: usize) -> Vec<String> {
    let (lo, hi) = slots.split_once('-').unwrap();
    let (lo, hi): (u16, u16) = (lo.parse().unwrap(), hi.parse().unwrap());
    (0..)
        .map(|i| format!("{prefix}-{i}"))
        .filter(|k| (lo..=hi).contains(&quiver_store::slot::key_slot(k.as_bytes())))
        .take(n)
        .collect()
}

/// With chains of 3 every node holds every key: the router lists each key once (KEYS, SCAN,
/// from the chains' tails) and RANDOMKEY gives one of them. A node killed answers TRYAGAIN
/// through the router until it is expelled (nothing reached it: clients send again); then
/// one node heads two chains, and a write over both is split per chain — answered at once,
/// with no redirect — as the node refuses one write spanning two of its chains.
#[test]
fn router_over_replicas_lists_each_key_once_and_splits_writes_per_chain() {
    let mut cluster = Cluster::start_failover(3, 3, 1);
    let r = cluster.start_router();
    cluster.wait_router_current(r);
    let mut c = cluster.routers[r].conn();
    let (keys, owners) = keys_over_nodes(&cluster, "rchain", 30);
    let pairs: Vec<(&str, &str)> = keys.iter().map(|k| (k.as_str(), "v")).collect();
    c.multi_set(&pairs).unwrap();
    let listed = match c.command(&[b"KEYS", b"rchain-*"]).unwrap() {
        Value::Array(v) => v,
        other => panic!("KEYS: {other:?}"),
    };
    let all: BTreeSet<String> = listed
        .iter()
        .map(|k| reply_text(Ok(k.clone()), "a key"))
        .collect();
    assert_eq!(
        (listed.len(), all.len()),
        (30, 30),
        "KEYS lists each key once"
    );
    let mut scanned = scan_all(&mut c, b"5");
    scanned.sort();
    assert_eq!(
        scanned,
        all.iter().cloned().collect::<Vec<_>>(),
        "SCAN lists each key once"
    );
    let random = reply_text(c.command(&[b"RANDOMKEY"]), "RANDOMKEY");
    assert!(all.contains(&random), "RANDOMKEY {random}");
    assert_eq!(
        integer(c.command(&[b"DBSIZE"]), "DBSIZE"),
        30,
        "DBSIZE counts each key once"
    );

    // A node down: TRYAGAIN for its keys, until the manager expels it.
    let dead = 0;
    let key = &keys[owners.iter().position(|&o| o == dead).unwrap()];
    cluster.nodes[dead].kill9();
    assert_error(
        c.command(&[b"GET", key.as_bytes()]),
        "TRYAGAIN",
        "a GET of a key the killed node heads",
    );
    let dead_id = cluster.nodes[dead].id.clone();
    cluster.wait_out_of_chains(&dead_id);
    cluster.wait_router_current(r);
    let chains = cluster.chains().unwrap();
    let head_of_two = chains
        .iter()
        .map(|ch| ch.members[0].clone())
        .find(|h| chains.iter().filter(|ch| &ch.members[0] == h).count() >= 2)
        .expect("with one node gone, one of the two left heads two chains");
    let two: Vec<&Chain> = chains
        .iter()
        .filter(|ch| ch.members[0] == head_of_two)
        .collect();
    let (a, b) = (
        keys_in_slots(&two[0].slots, "split", 1).remove(0),
        keys_in_slots(&two[1].slots, "split", 1).remove(0),
    );
    let redirects = cluster.routers[r].info_field("router_redirects");
    assert_eq!(
        c.command(&[b"MSET", a.as_bytes(), b"1", b.as_bytes(), b"2"])
            .unwrap(),
        ok()
    );
    assert_eq!(
        c.multi_get(&[a.clone(), b.clone()]).unwrap(),
        [
            Some(Bytes::from_static(b"1")),
            Some(Bytes::from_static(b"2"))
        ]
    );
    assert_eq!(
        integer(c.command(&[b"DEL", a.as_bytes(), b.as_bytes()]), "DEL"),
        2
    );
    assert_error(
        c.command(&[b"RENAME", a.as_bytes(), b.as_bytes()]),
        "CROSSSLOT",
        "a write over two chains that cannot be split",
    );
    assert_eq!(
        cluster.routers[r].info_field("router_redirects"),
        redirects,
        "nothing was routed again: the router split the writes itself"
    );
    // FLUSHALL through the router: every node flushes the chains it heads, each down its
    // chain (one of them heads two now), so no copy is left anywhere.
    assert_eq!(c.command(&[b"FLUSHALL"]).unwrap(), ok());
    assert_eq!(integer(c.command(&[b"DBSIZE"]), "DBSIZE"), 0);
    for node in cluster.nodes.iter().filter(|n| n.id != dead_id) {
        assert_eq!(node.store_keys().unwrap(), 0, "{} after FLUSHALL", node.id);
    }
}

#[test]
fn router_cross_node_mget_is_one_request_per_backend() {
    let mut cluster = Cluster::start(3);
    let r = cluster.start_router();
    let (keys, owners) = keys_over_nodes(&cluster, "rmget", 30);
    let want = |i: usize| (!i.is_multiple_of(3)).then(|| format!("value-{i}"));
    let mut c = cluster.routers[r].conn();

    // One MSET across the nodes (every third key left out): each node holds its own keys.
    let pairs: Vec<(&str, String)> = keys
        .iter()
        .enumerate()
        .filter_map(|(i, k)| want(i).map(|v| (k.as_str(), v)))
        .collect();
    let written: BTreeSet<usize> = (0..keys.len())
        .filter(|&i| want(i).is_some())
        .map(|i| owners[i])
        .collect();
    assert_eq!(written.len(), 3, "the MSET spans every node");
    c.multi_set(&pairs).unwrap();
    for (i, key) in keys.iter().enumerate() {
        let node = &cluster.nodes[owners[i]];
        let got = node.conn().get(key).unwrap();
        assert_eq!(
            got.as_deref(),
            want(i).as_deref().map(str::as_bytes),
            "{key} read on its owner {}",
            node.id
        );
    }

    // The MGET of the 30 keys over 3 nodes: in key order, a null for each missing key, and
    // one sub-command (one request) per back-end.
    let before = backend_counts(&cluster, r);
    let values = c.multi_get(&keys).unwrap();
    let after = backend_counts(&cluster, r);
    assert_eq!(values.len(), keys.len());
    for (i, got) in values.iter().enumerate() {
        assert_eq!(
            got.as_deref(),
            want(i).as_deref().map(str::as_bytes),
            "{}",
            keys[i]
        );
    }
    assert_eq!(
        (after.0 - before.0, after.1 - before.1),
        (3, 3),
        "(backend requests, backend commands) of one MGET over 3 nodes: {before:?} -> {after:?}\n{}",
        cluster.logs()
    );

    // Keys of one node: one request to that node alone.
    let node1_keys: Vec<&str> = keys
        .iter()
        .zip(&owners)
        .filter(|(_, &o)| o == 0)
        .map(|(k, _)| k.as_str())
        .collect();
    let before = backend_counts(&cluster, r);
    let values = c.multi_get(&node1_keys).unwrap();
    let after = backend_counts(&cluster, r);
    assert_eq!(values.len(), node1_keys.len());
    assert_eq!(
        (after.0 - before.0, after.1 - before.1),
        (1, 1),
        "an MGET of one node's keys: {before:?} -> {after:?}"
    );

    // EXISTS, TOUCH, DEL and UNLINK across the nodes: the nodes' answers summed (a key named
    // twice counts twice in EXISTS, as in Redis).
    let all: Vec<&str> = keys.iter().map(String::as_str).collect();
    let present = pairs.len() as i64;
    assert_eq!(
        integer(keys_command(&mut c, "EXISTS", &all), "EXISTS"),
        present
    );
    let twice = [all[1], all[1], all[2], "rmget-absent"];
    assert_eq!(integer(keys_command(&mut c, "EXISTS", &twice), "EXISTS"), 3);
    assert_eq!(
        integer(keys_command(&mut c, "TOUCH", &all), "TOUCH"),
        present
    );
    let (first, rest) = all.split_at(15);
    let present_in = |ks: &[&str]| {
        ks.iter()
            .filter(|k| want(keys.iter().position(|x| x == *k).unwrap()).is_some())
            .count() as i64
    };
    let deleted = integer(keys_command(&mut c, "DEL", first), "DEL");
    assert_eq!(deleted, present_in(first));
    assert_eq!(
        integer(keys_command(&mut c, "EXISTS", &all), "EXISTS"),
        present - deleted
    );
    let unlinked = integer(keys_command(&mut c, "UNLINK", rest), "UNLINK");
    assert_eq!(unlinked, present_in(rest));
    assert_eq!(integer(keys_command(&mut c, "EXISTS", &all), "EXISTS"), 0);
    assert!(c.multi_get(&keys).unwrap().iter().all(Option::is_none));
    assert_eq!(integer(c.command(&[b"DBSIZE"]), "DBSIZE"), 0);
    for node in &cluster.nodes {
        assert_eq!(
            node.store_keys().unwrap(),
            0,
            "{} after DEL and UNLINK",
            node.id
        );
    }
}

/// A command in RESP, as `redis-cli --pipe` wants its input.
fn resp(args: &[&str]) -> String {
    let mut out = format!("*{}\r\n", args.len());
    for a in args {
        out.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    out
}

#[test]
fn redis_cli_through_router() {
    let mut cluster = Cluster::start(3);
    let r = cluster.start_router();
    let cli = tool::require("redis-cli");
    let port = cluster.routers[r].port.to_string();
    let redis_cli = |args: &[&str]| -> String {
        let (status, out, err) = run(
            Command::new(&cli).args(["-p", &port]).args(args),
            "redis-cli",
            WAIT,
        );
        assert!(status.success(), "redis-cli {args:?}: {status}: {err}");
        out.trim_end_matches('\n').to_string()
    };
    let (keys, _) = keys_over_nodes(&cluster, "cli", 30);
    for (i, key) in keys.iter().enumerate() {
        assert_eq!(
            redis_cli(&["SET", key, &format!("value-{i}")]),
            "OK",
            "{key}"
        );
    }
    for (i, key) in keys.iter().enumerate() {
        assert_eq!(redis_cli(&["GET", key]), format!("value-{i}"), "{key}");
    }
    // MGET across the nodes: one line per key in order, an empty one for the missing key.
    let mut mget = vec!["MGET", "cli-absent"];
    mget.extend(keys.iter().map(String::as_str));
    let mut want = vec![String::new()];
    want.extend((0..keys.len()).map(|i| format!("value-{i}")));
    assert_eq!(redis_cli(&mget), want.join("\n"));

    // Counters on every node, twice each.
    let (counters, _) = keys_over_nodes(&cluster, "cli-counter", 12);
    for round in 1..=2 {
        for c in &counters {
            assert_eq!(redis_cli(&["INCR", c]), round.to_string(), "INCR {c}");
        }
    }
    // DEL across the nodes: the keys that existed, summed.
    let del = ["DEL", &keys[0], &keys[1], &keys[2], "cli-absent"];
    assert_eq!(redis_cli(&del), "3");

    // redis-cli --pipe: 1000 SETs in one stream (and its closing ECHO), no error.
    let pipe_keys: Vec<String> = (0..1000).map(|i| format!("cli-pipe-{i}")).collect();
    let mut input = String::new();
    for (i, k) in pipe_keys.iter().enumerate() {
        input.push_str(&resp(&["SET", k, &format!("piped-{i}")]));
    }
    let (status, out, err) = quiver_testkit::process::run_with_input(
        Command::new(&cli).args(["-p", &port, "--pipe"]),
        input.into_bytes(),
        "redis-cli --pipe",
        WAIT,
    );
    assert!(status.success(), "redis-cli --pipe: {status}\n{out}{err}");
    assert!(
        out.contains("errors: 0, replies: 1000"),
        "redis-cli --pipe: {out}{err}\n{}",
        cluster.logs()
    );
    let mut c = cluster.routers[r].conn();
    for (n, chunk) in pipe_keys.chunks(CHUNK).enumerate() {
        let values = c.multi_get(chunk).unwrap();
        for (j, got) in values.iter().enumerate() {
            let i = n * CHUNK + j;
            assert_eq!(got.as_deref(), Some(format!("piped-{i}").as_bytes()));
        }
    }

    // Many commands on one redis-cli connection (read from stdin, one a line).
    let mut lines = String::new();
    for (i, k) in pipe_keys.iter().take(100).enumerate() {
        lines.push_str(&format!("GET {k}\nAPPEND {k} +{i}\n"));
    }
    let (status, out, err) = quiver_testkit::process::run_with_input(
        Command::new(&cli).args(["-p", &port]),
        lines.into_bytes(),
        "redis-cli reading commands from stdin",
        WAIT,
    );
    assert!(status.success(), "redis-cli: {status}\n{out}{err}");
    let replies: Vec<&str> = out.lines().collect();
    assert_eq!(replies.len(), 200, "{out}");
    for i in 0..100 {
        let value = format!("piped-{i}");
        assert_eq!(replies[2 * i], value);
        assert_eq!(
            replies[2 * i + 1],
            (value.len() + format!("+{i}").len()).to_string()
        );
    }

    // DBSIZE: the nodes' keys summed; KEYS *: every key, from every node.
    let sizes: u64 = cluster.nodes.iter().map(|n| n.store_keys().unwrap()).sum();
    assert_eq!(redis_cli(&["DBSIZE"]), sizes.to_string());
    let mut expected: BTreeSet<String> = keys[3..].iter().cloned().collect();
    expected.extend(counters.iter().cloned());
    expected.extend(pipe_keys.iter().cloned());
    assert_eq!(sizes, expected.len() as u64);
    let listed: Vec<String> = redis_cli(&["KEYS", "*"])
        .lines()
        .map(String::from)
        .collect();
    assert_eq!(listed.len(), expected.len(), "KEYS * lists each key once");
    assert_eq!(listed.into_iter().collect::<BTreeSet<_>>(), expected);
}

#[test]
fn redis_py_through_router() {
    let mut cluster = Cluster::start(3);
    let r = cluster.start_router();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/cluster/redis_py_router.py"
    );
    let mut cmd = Command::new(tool::require("python3"));
    cmd.arg(script).arg(cluster.routers[r].port.to_string());
    cmd.args(cluster.nodes.iter().map(|n| n.port.to_string()));
    let (status, out, err) = run(&mut cmd, "redis_py_router.py", WAIT * 3);
    assert!(
        status.success(),
        "redis_py_router.py: {status}\n{out}{err}\n{}",
        cluster.logs()
    );
}

#[test]
fn router_follows_moves_under_load() {
    let mut cluster = Cluster::start(3);
    let r = cluster.start_router();
    let router_addr = cluster.routers[r].addr();
    // Keys nobody changes, loaded through the router (MSETs split per node).
    let fixed = Arc::new(pairs_in("rfixed", 0, 16383, 10_000));
    let mut c = cluster.routers[r].conn();
    for chunk in fixed.chunks(CHUNK) {
        c.multi_set(chunk)
            .unwrap_or_else(|e| panic!("MSET through the router: {e}\n{}", cluster.logs()));
    }
    let epoch_before = cluster.routers[r].info_field("router_epoch");
    let redirects_before = cluster.routers[r].info_field("router_redirects");

    // Three writers and a reader (multigets, and the same keys as pipelined GETs), each on its
    // own plain connection to the router.
    let connect_router = || -> Box<dyn Kv> {
        Box::new(
            connect(&router_addr)
                .unwrap_or_else(|e| panic!("connect to the router {router_addr}: {e}")),
        )
    };
    let load = Load::start_with(3, (0, 16383), fixed.clone(), true, connect_router);
    // node-1 owns 0-5460, node-2 5461-10922, node-3 10923-16383.
    let moves = [("1000-2999", "node-2"), ("12000-12999", "node-1")];
    for (slots, to) in moves {
        load.wait_progress(&cluster, PROGRESS_OPS, &format!("before moving {slots}"));
        cluster.quiver_ok(&["move-slots", "--slots", slots, "--to", to]);
    }
    load.wait_progress(&cluster, PROGRESS_OPS, "after the last move");
    let reports = load.finish();
    // No client error at all: the router followed every redirect itself.
    assert_no_failures(&cluster, &reports);

    let status = wait_settled(&cluster);
    for (slots, owner) in moves {
        let (lo, hi) = range(slots);
        let want = BTreeSet::from([owner.to_string()]);
        assert_eq!(owners(&status, lo, hi), want, "{slots}: {status}");
    }
    cluster.wait_router_current(r);
    let epoch_after = cluster.routers[r].info_field("router_epoch");
    let redirects = cluster.routers[r].info_field("router_redirects") - redirects_before;
    assert!(
        epoch_after > epoch_before,
        "the router's epoch did not advance over two moves: {epoch_before} -> {epoch_after}"
    );
    eprintln!(
        "router_follows_moves_under_load: router epoch {epoch_before} -> {epoch_after}, \
         {redirects} redirects followed"
    );

    // Every acknowledged write reads back, every acknowledged DEL stays deleted: through the
    // router, and through a cluster client straight from the nodes.
    let expected = expected_after(&fixed, &reports);
    read_back_via(&mut c, "the router", &cluster, &expected);
    read_back(&cluster, &expected);
}

#[test]
fn router_survives_a_backend_restart() {
    let mut cluster = Cluster::start(3);
    let r = cluster.start_router();
    let (keys, owners) = keys_over_nodes(&cluster, "surv", 60);
    let value = |i: usize| format!("value-{i}");
    let mut c = cluster.routers[r].conn();
    for (i, k) in keys.iter().enumerate() {
        c.set(k, value(i)).unwrap();
    }
    let victim = cluster.node("node-2");
    let errors_before = cluster.routers[r].info_field("router_backend_errors");
    cluster.nodes[victim].kill9();

    // The dead node's keys: an error reply (not a hang: the connection's reads are bounded,
    // and a timeout or a closed connection is a failure here), on the same connection as the
    // rest.
    let (dead, live): (Vec<usize>, Vec<usize>) =
        (0..keys.len()).partition(|&i| owners[i] == victim);
    for &i in dead.iter().take(3) {
        match c.get(&keys[i]) {
            Err(e) if !e.is_connection_error() => {}
            other => panic!(
                "GET {} of the killed node: an error reply expected, got {other:?}\n{}",
                keys[i],
                cluster.logs()
            ),
        }
        match c.set(&keys[i], "while-down") {
            Err(e) if !e.is_connection_error() => {}
            other => panic!("SET {} of the killed node: {other:?}", keys[i]),
        }
    }
    // An MGET touching it fails whole (no partial answer passed off as missing keys).
    match c.multi_get(&keys) {
        Err(e) if !e.is_connection_error() => {}
        other => panic!("an MGET touching the killed node: an error reply expected, got {other:?}"),
    }
    // The other nodes' keys are served as before, one by one and as a multiget.
    for &i in &live {
        assert_eq!(
            c.get(&keys[i]).unwrap().as_deref(),
            Some(value(i).as_bytes()),
            "{} while {} is down",
            keys[i],
            cluster.nodes[victim].id
        );
    }
    let live_keys: Vec<&str> = live.iter().map(|&i| keys[i].as_str()).collect();
    let values = c.multi_get(&live_keys).unwrap();
    for (&i, got) in live.iter().zip(&values) {
        assert_eq!(got.as_deref(), Some(value(i).as_bytes()), "{}", keys[i]);
    }
    let errors = cluster.routers[r].info_field("router_backend_errors");
    assert!(
        errors > errors_before,
        "router_backend_errors {errors_before} -> {errors} with a back-end killed"
    );

    // Restarted, the node's keys are served through the router again (the failed SETs wrote
    // nothing), on the same client connection.
    cluster.nodes[victim].restart();
    let probe = &keys[dead[0]];
    wait_until(
        &format!("{probe} served through the router after the restart"),
        || cluster.logs(),
        || match c.get(probe) {
            Ok(Some(v)) if v.as_ref() == value(dead[0]).as_bytes() => Ok(()),
            Err(e) if e.is_connection_error() => panic!("the router's connection failed: {e}"),
            other => Err(format!("{other:?}")),
        },
    );
    let values = c.multi_get(&keys).unwrap();
    for (i, got) in values.iter().enumerate() {
        assert_eq!(got.as_deref(), Some(value(i).as_bytes()), "{}", keys[i]);
    }
    c.set(probe, "after-restart").unwrap();
    let got = cluster.nodes[victim].conn().get(probe).unwrap();
    assert_eq!(got.as_deref(), Some(&b"after-restart"[..]));

    // The router itself killed and restarted: it holds no data, its clients reconnect and
    // find everything.
    cluster.routers[r].kill9();
    cluster.routers[r].restart();
    cluster.wait_router_current(r);
    let values = cluster.routers[r].conn().multi_get(&keys).unwrap();
    for (i, got) in values.iter().enumerate() {
        let want = if i == dead[0] {
            "after-restart".to_string()
        } else {
            value(i)
        };
        assert_eq!(got.as_deref(), Some(want.as_bytes()), "{}", keys[i]);
    }
}

/// Writes `bytes` on a fresh TCP connection to `addr` and reads until the peer closes it
/// (bounded by `WAIT`: a connection left open fails the test); what was read.
fn send_until_closed(addr: &str, bytes: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(WAIT)).unwrap();
    s.set_write_timeout(Some(WAIT)).unwrap();
    s.write_all(bytes).unwrap();
    let mut out = Vec::new();
    match s.read_to_end(&mut out) {
        Ok(_) => out,
        // A reset after the reply (bytes we sent were left unread) is a close too.
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => out,
        Err(e) => panic!(
            "{addr} did not close the connection after {:?} ({e}); it sent {:?}",
            String::from_utf8_lossy(bytes),
            String::from_utf8_lossy(&out)
        ),
    }
}

#[test]
fn router_auth_and_limits() {
    let mut cluster = Cluster::start(2);
    let r = cluster.start_router_with(&["--requirepass", "sesame"]);
    let addr = cluster.routers[r].addr();

    // Before AUTH: NOAUTH, for keyed commands and for what the router answers itself.
    let mut c = Connection::connect_with(connect_options(&addr)).unwrap();
    assert!(
        matches!(c.get("k"), Err(Error::NoAuth(_))),
        "GET before AUTH"
    );
    assert!(
        matches!(c.set("k", "v"), Err(Error::NoAuth(_))),
        "SET before AUTH"
    );
    assert!(
        matches!(c.multi_get(&["k", "j"]), Err(Error::NoAuth(_))),
        "MGET before AUTH"
    );
    assert!(
        matches!(c.command(&[b"DBSIZE"]), Err(Error::NoAuth(_))),
        "DBSIZE before AUTH"
    );
    // A wrong password is refused; the right one lets everything through.
    assert!(
        matches!(c.command(&[b"AUTH", b"wrong"]), Err(Error::AuthFailed(_))),
        "AUTH with a wrong password"
    );
    assert!(
        matches!(c.get("k"), Err(Error::NoAuth(_))),
        "GET after a failed AUTH"
    );
    assert_eq!(
        c.command(&[b"AUTH", b"sesame"]).unwrap(),
        Value::Simple("OK".into())
    );
    let (keys, _) = keys_over_nodes(&cluster, "auth", 10);
    let pairs: Vec<(&str, &str)> = keys.iter().map(|k| (k.as_str(), k.as_str())).collect();
    c.multi_set(&pairs).unwrap();
    let values = c.multi_get(&keys).unwrap();
    for (k, got) in keys.iter().zip(values) {
        assert_eq!(got.as_deref(), Some(k.as_bytes()));
    }
    // ACL rules as a node checks them (`admission::check`): a subcommand denied, a key
    // pattern that permits reads only.
    let rules: [&[u8]; 7] = [
        b"ACL",
        b"SETUSER",
        b"ro",
        b"on",
        b"nopass",
        b"%R~auth*",
        b"+@all",
    ];
    c.command(&rules).unwrap();
    c.command(&[b"ACL", b"SETUSER", b"ro", b"-config|set"])
        .unwrap();
    let mut ro = Connection::connect_with(connect_options(&addr)).unwrap();
    ro.command(&[b"AUTH", b"ro", b"x"]).unwrap();
    assert_eq!(
        ro.get(&keys[0]).unwrap().as_deref(),
        Some(keys[0].as_bytes())
    );
    let refused = error_text(ro.command(&[b"SET", keys[0].as_bytes(), b"x"]));
    assert!(refused.contains("access one of the keys"), "{refused}");
    let refused = error_text(ro.command(&[b"CONFIG", b"SET", b"maxclients", b"10"]));
    assert!(
        refused.contains("run the 'config|set' command"),
        "{refused}"
    );
    c.command(&[b"ACL", b"DELUSER", b"ro"]).unwrap();
    // A client given the password (AUTH on connect).
    let mut c2 = cluster.routers[r].conn();
    assert_eq!(
        c2.get(&keys[0]).unwrap().as_deref(),
        Some(keys[0].as_bytes())
    );

    // A malformed frame: the commands before it run, then `-ERR Protocol error...` and the
    // connection closes, as `quiver serve` does.
    let mut frame = b"*2\r\n$4\r\nAUTH\r\n$6\r\nsesame\r\n".to_vec();
    frame.extend_from_slice(b"*3\r\n$3\r\nSET\r\n$8\r\nbad-then\r\n$1\r\n1\r\n");
    frame.extend_from_slice(b"*2\r\n$3\r\nGET\r\n$x\r\n");
    let got = send_until_closed(&addr, &frame);
    assert_eq!(
        String::from_utf8_lossy(&got),
        "+OK\r\n+OK\r\n-ERR Protocol error: invalid bulk length\r\n",
        "{}",
        cluster.logs()
    );
    assert_eq!(c2.get("bad-then").unwrap().as_deref(), Some(&b"1"[..]));
    // Unauthenticated, the tighter limits: more than 10 arguments is refused at its header.
    let got = send_until_closed(&addr, b"*11\r\n");
    assert_eq!(
        String::from_utf8_lossy(&got),
        "-ERR Protocol error: unauthenticated multibulk length\r\n"
    );
    let got = send_until_closed(&addr, b"*1\r\n$100000\r\n");
    assert_eq!(
        String::from_utf8_lossy(&got),
        "-ERR Protocol error: unauthenticated bulk length\r\n"
    );
    // The router still serves its other clients.
    assert_eq!(
        c.get(&keys[1]).unwrap().as_deref(),
        Some(keys[1].as_bytes())
    );
    let reply = c.command(&[b"SELECT", b"1"]);
    assert!(error_text(reply).starts_with("ERR"), "SELECT 1 is refused");
    assert_eq!(
        c.command(&[b"SELECT", b"0"]).unwrap(),
        Value::Simple("OK".into())
    );

    // SIGTERM stops it (a clean exit); restarted on its port, it wants the password again.
    let status = cluster.routers[r].stop();
    assert!(status.success(), "the router after SIGTERM: {status}");
    cluster.routers[r].restart();
    cluster.wait_router_current(r);
    let mut c = Connection::connect_with(connect_options(&addr)).unwrap();
    assert!(
        matches!(c.get(&keys[0]), Err(Error::NoAuth(_))),
        "GET before AUTH"
    );
    let mut c = cluster.routers[r].conn();
    assert_eq!(
        c.get(&keys[0]).unwrap().as_deref(),
        Some(keys[0].as_bytes())
    );
}

/// The text of a simple or bulk reply, or a panic showing what came instead.
fn reply_text(reply: quiver_client::Result<Value>, what: &str) -> String {
    match reply {
        Ok(v) => match v.as_bytes() {
            Some(b) => String::from_utf8_lossy(b).into_owned(),
            None => panic!("{what}: a string reply expected, got {v:?}"),
        },
        Err(e) => panic!("{what}: {e}"),
    }
}

/// An error reply whose text starts with `code`, or a panic showing what came instead.
fn assert_error(reply: quiver_client::Result<Value>, code: &str, what: &str) {
    let text = error_text(reply);
    assert!(
        text.starts_with(code),
        "{what}: an error {code}... expected, got {text:?}"
    );
}

#[test]
fn router_transactions_and_keyless_commands() {
    let mut cluster = Cluster::start(3);
    let r = cluster.start_router();
    let (keys, owners) = keys_over_nodes(&cluster, "tx", 60);
    let on = |node: usize| -> Vec<&str> {
        keys.iter()
            .zip(&owners)
            .filter(|(_, &o)| o == node)
            .map(|(k, _)| k.as_str())
            .collect()
    };
    let (mine, other) = (on(0), on(1));
    let (a, a2, b) = (mine[0], mine[1], other[0]);
    let mut c = cluster.routers[r].conn();
    let pairs: Vec<(&str, &str)> = keys.iter().map(|k| (k.as_str(), k.as_str())).collect();
    c.multi_set(&pairs).unwrap();

    pipelined_gets_one_batch_per_node(&cluster, r, &mut c, &keys);
    let fresh0 = multi_key_commands_across_nodes(&cluster, &mut c, (a, a2, b));
    transactions_on_one_node(&mut c, (a, a2, b), fresh0[2].as_bytes());
    watches_on_one_node(&cluster, r, &mut c, (a, a2, b));
    commands_the_router_answers(&mut c);
    keyless_commands_over_every_node(&cluster, &mut c, &keys);
}

/// The error prefix of a command refused across nodes.
const CROSSSLOT_ERROR: &str = "CROSSSLOT";

fn ok() -> Value {
    Value::Simple("OK".into())
}

/// A pipeline of 100 GETs over the 3 nodes: one batch per back-end, the replies in order.
fn pipelined_gets_one_batch_per_node(
    cluster: &Cluster,
    r: usize,
    c: &mut Connection,
    keys: &[String],
) {
    let before = backend_counts(cluster, r);
    let mut p = c.pipeline();
    for i in 0..100 {
        p.command(&[b"GET", keys[i % keys.len()].as_bytes()]);
    }
    let replies = p.execute().unwrap();
    let after = backend_counts(cluster, r);
    for (i, reply) in replies.into_iter().enumerate() {
        let want = keys[i % keys.len()].as_str();
        assert_eq!(reply_text(reply, "a pipelined GET"), want);
    }
    assert_eq!(
        (after.0 - before.0, after.1 - before.1),
        (3, 100),
        "(backend requests, backend commands) of a pipeline of 100 GETs over 3 nodes"
    );
}

/// Multi-key commands other than the split ones: on one node they run, across nodes they are
/// refused with CROSSSLOT and change nothing. Returns three fresh keys of node 0 (two written).
fn multi_key_commands_across_nodes(
    cluster: &Cluster,
    c: &mut Connection,
    (a, a2, b): (&str, &str, &str),
) -> Vec<String> {
    assert_error(
        c.command(&[b"RENAME", a.as_bytes(), b.as_bytes()]),
        CROSSSLOT_ERROR,
        "RENAME",
    );
    assert_error(
        c.command(&[b"COPY", a.as_bytes(), b.as_bytes()]),
        CROSSSLOT_ERROR,
        "COPY",
    );
    assert_error(
        c.command(&[b"LCS", a.as_bytes(), b.as_bytes()]),
        CROSSSLOT_ERROR,
        "LCS",
    );
    let fresh = |node: usize, n: usize| -> Vec<String> {
        let client = cluster.client();
        (0..)
            .map(|i| format!("tx-fresh-{i}"))
            .filter(|k| owner_of(cluster, &client, k) == node)
            .take(n)
            .collect()
    };
    let (fresh0, fresh1) = (fresh(0, 3), fresh(1, 1));
    let msetnx = |k1: &str, k2: &str| {
        [
            b"MSETNX".as_slice(),
            k1.as_bytes(),
            b"1",
            k2.as_bytes(),
            b"2",
        ]
        .into_iter()
        .map(<[u8]>::to_vec)
        .collect::<Vec<_>>()
    };
    let args = msetnx(&fresh0[0], &fresh1[0]);
    let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
    assert_error(c.command(&args), CROSSSLOT_ERROR, "MSETNX across nodes");
    assert!(!c.exists(&fresh0[0]).unwrap() && !c.exists(&fresh1[0]).unwrap());
    let args = msetnx(&fresh0[0], &fresh0[1]);
    let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
    assert_eq!(integer(c.command(&args), "MSETNX on one node"), 1);
    let batch = quiver_client::Batch::new()
        .put(a, "batched")
        .put(b, "batched");
    assert_error(
        c.command(&batch.args()),
        CROSSSLOT_ERROR,
        "BATCH across nodes",
    );
    assert_eq!(c.get(a).unwrap().as_deref(), Some(a.as_bytes()));
    assert_eq!(c.get(b).unwrap().as_deref(), Some(b.as_bytes()));
    let batch = quiver_client::Batch::new()
        .put(a, "batched")
        .put(a2, "batched");
    assert!(batch.execute(c).unwrap().is_applied(), "BATCH on one node");
    assert_eq!(c.get(a2).unwrap().as_deref(), Some(&b"batched"[..]));
    fresh0
}

/// MULTI/EXEC through the router: on one node (keys of different slots) queued here, run there;
/// across nodes refused; what spans every node refused inside MULTI; DISCARD.
fn transactions_on_one_node(c: &mut Connection, (a, a2, b): (&str, &str, &str), counter: &[u8]) {
    // MULTI/EXEC on one node (keys of different slots): queued here, run there.
    assert_eq!(c.command(&[b"MULTI"]).unwrap(), ok());
    for k in [a, a2] {
        let queued = c.command(&[b"SET", k.as_bytes(), b"in-exec"]).unwrap();
        assert_eq!(queued, Value::Simple("QUEUED".into()));
    }
    let queued = c.command(&[b"INCR", counter]).unwrap();
    assert_eq!(queued, Value::Simple("QUEUED".into()));
    assert_eq!(
        c.command(&[b"EXEC"]).unwrap(),
        Value::Array(vec![ok(), ok(), Value::Integer(1)])
    );
    assert_eq!(c.get(a2).unwrap().as_deref(), Some(&b"in-exec"[..]));

    // Across nodes: the command that leaves the transaction's node is refused (CROSSSLOT),
    // EXEC answers EXECABORT, nothing is written.
    assert_eq!(c.command(&[b"MULTI"]).unwrap(), ok());
    let queued = c.command(&[b"SET", a.as_bytes(), b"cross"]).unwrap();
    assert_eq!(queued, Value::Simple("QUEUED".into()));
    assert_error(
        c.command(&[b"SET", b.as_bytes(), b"cross"]),
        CROSSSLOT_ERROR,
        "SET on another node in MULTI",
    );
    assert_error(
        c.command(&[b"EXEC"]),
        "EXECABORT",
        "EXEC after a refused command",
    );
    assert_eq!(c.get(a).unwrap().as_deref(), Some(&b"in-exec"[..]));
    assert_eq!(c.get(b).unwrap().as_deref(), Some(b.as_bytes()));
    // What the router answers from every node is refused in a transaction (it would run on
    // the transaction's node only): a FLUSHALL there must not flush a third of the keys.
    for cmd in ["FLUSHALL", "DBSIZE", "RANDOMKEY"] {
        assert_eq!(c.command(&[b"MULTI"]).unwrap(), ok());
        assert_error(
            c.command(&[cmd.as_bytes()]),
            &format!("ERR {cmd} inside MULTI is not supported by the router"),
            "a command over every node inside MULTI",
        );
        assert_error(c.command(&[b"EXEC"]), "EXECABORT", "EXEC after it");
    }
    assert_eq!(c.get(a).unwrap().as_deref(), Some(&b"in-exec"[..]));
    assert_eq!(c.get(b).unwrap().as_deref(), Some(b.as_bytes()));
    // DISCARD drops a queue.
    assert_eq!(c.command(&[b"MULTI"]).unwrap(), ok());
    c.command(&[b"SET", a.as_bytes(), b"discarded"]).unwrap();
    assert_eq!(c.command(&[b"DISCARD"]).unwrap(), ok());
    assert_eq!(c.get(a).unwrap().as_deref(), Some(&b"in-exec"[..]));
}

/// WATCH: keys on one node; a write by another client makes EXEC fail, unchanged it applies,
/// EXEC on another node is an error, UNWATCH releases the node.
fn watches_on_one_node(
    cluster: &Cluster,
    r: usize,
    c: &mut Connection,
    (a, a2, b): (&str, &str, &str),
) {
    // WATCH: keys on one node; a write by another client makes EXEC fail (null reply).
    assert_error(
        c.command(&[b"WATCH", a.as_bytes(), b.as_bytes()]),
        CROSSSLOT_ERROR,
        "WATCH across nodes",
    );
    assert_eq!(
        c.command(&[b"WATCH", a.as_bytes(), a2.as_bytes()]).unwrap(),
        ok()
    );
    cluster.routers[r].conn().set(a, "changed").unwrap();
    assert_eq!(c.command(&[b"MULTI"]).unwrap(), ok());
    c.command(&[b"SET", a.as_bytes(), b"lost-race"]).unwrap();
    assert_eq!(
        c.command(&[b"EXEC"]).unwrap(),
        Value::Null,
        "EXEC after a watched write"
    );
    assert_eq!(c.get(a).unwrap().as_deref(), Some(&b"changed"[..]));
    // Unchanged, it applies.
    assert_eq!(c.command(&[b"WATCH", a.as_bytes()]).unwrap(), ok());
    assert_eq!(c.command(&[b"MULTI"]).unwrap(), ok());
    c.command(&[b"SET", a.as_bytes(), b"won"]).unwrap();
    assert_eq!(c.command(&[b"EXEC"]).unwrap(), Value::Array(vec![ok()]));
    // EXEC on another node than the watched one is an error, and writes nothing.
    assert_eq!(c.command(&[b"WATCH", a.as_bytes()]).unwrap(), ok());
    assert_eq!(c.command(&[b"MULTI"]).unwrap(), ok());
    let queued = c.command(&[b"SET", b.as_bytes(), b"elsewhere"]);
    let exec = c.command(&[b"EXEC"]);
    assert!(
        queued.is_err() || exec.is_err(),
        "a transaction on {b} while {a} (another node) is watched: {queued:?}, {exec:?}"
    );
    assert!(exec.is_err(), "EXEC: {exec:?}");
    assert_eq!(c.get(b).unwrap().as_deref(), Some(b.as_bytes()));
    // UNWATCH releases the node: a transaction on another node runs.
    assert_eq!(c.command(&[b"WATCH", a.as_bytes()]).unwrap(), ok());
    assert_eq!(c.command(&[b"UNWATCH"]).unwrap(), ok());
    assert_eq!(c.command(&[b"MULTI"]).unwrap(), ok());
    c.command(&[b"SET", b.as_bytes(), b"after-unwatch"])
        .unwrap();
    assert_eq!(c.command(&[b"EXEC"]).unwrap(), Value::Array(vec![ok()]));
    assert_eq!(c.get(b).unwrap().as_deref(), Some(&b"after-unwatch"[..]));
}

/// What the router answers itself: a plain Redis.
fn commands_the_router_answers(c: &mut Connection) {
    assert_eq!(c.command(&[b"PING"]).unwrap(), Value::Simple("PONG".into()));
    assert_eq!(reply_text(c.command(&[b"ECHO", b"hi"]), "ECHO"), "hi");
    let info = reply_text(c.command(&[b"INFO"]), "INFO");
    assert!(info.contains("redis_mode:standalone"), "{info}");
    assert!(info.contains("# Router"), "INFO's default sections: {info}");
    let info = reply_text(c.command(&[b"INFO", b"all"]), "INFO all");
    assert!(info.contains("router_backend_commands:"), "{info}");
    assert_eq!(
        c.command(&[b"CLIENT", b"SETNAME", b"router-test"]).unwrap(),
        ok()
    );
    assert_eq!(
        reply_text(c.command(&[b"CLIENT", b"GETNAME"]), "CLIENT GETNAME"),
        "router-test"
    );
    match c.command(&[b"CONFIG", b"GET", b"maxclients"]).unwrap() {
        Value::Array(v) => assert_eq!(v.len(), 2, "CONFIG GET maxclients: {v:?}"),
        other => panic!("CONFIG GET: {other:?}"),
    }
}

/// Keyless commands over every node: DBSIZE summed, KEYS and SCAN gathered, RANDOMKEY one of
/// them, FLUSHALL on every node.
fn keyless_commands_over_every_node(cluster: &Cluster, c: &mut Connection, keys: &[String]) {
    let sizes: u64 = cluster.nodes.iter().map(|n| n.store_keys().unwrap()).sum();
    assert_eq!(integer(c.command(&[b"DBSIZE"]), "DBSIZE") as u64, sizes);
    let all: BTreeSet<String> = match c.command(&[b"KEYS", b"*"]).unwrap() {
        Value::Array(v) => v
            .iter()
            .map(|k| reply_text(Ok(k.clone()), "a key"))
            .collect(),
        other => panic!("KEYS: {other:?}"),
    };
    assert_eq!(all.len() as u64, sizes, "KEYS * lists each key once");
    assert!(keys.iter().all(|k| all.contains(k)));
    let scanned: BTreeSet<String> = scan_all(c, b"7").into_iter().collect();
    assert_eq!(scanned, all, "SCAN across the nodes");
    let random = reply_text(c.command(&[b"RANDOMKEY"]), "RANDOMKEY");
    assert!(all.contains(&random), "RANDOMKEY {random}");
    assert_eq!(c.command(&[b"FLUSHALL"]).unwrap(), ok());
    for node in &cluster.nodes {
        assert_eq!(node.store_keys().unwrap(), 0, "{} after FLUSHALL", node.id);
    }
    assert_eq!(integer(c.command(&[b"DBSIZE"]), "DBSIZE"), 0);
    assert_eq!(c.command(&[b"RANDOMKEY"]).unwrap(), Value::Null);
}

/// Keys per MGET in [`mget_width_over_replicas_next_to_the_simulation`] (the paper's 32).
const WIDTH_KEYS: usize = 32;
/// MGETs measured per replication factor.
const WIDTH_MGETS: usize = 1000;
/// Keys written first (each MGET picks `WIDTH_KEYS` distinct ones at random).
const WIDTH_KEY_SPACE: usize = 20_000;

/// The width per back-end the router's multiget planner reaches with chains of 1, 2 and 3 on
/// `QUIVER_WIDTH_NODES` nodes (6 unless told), next to `quiver sim vector-width`'s figures
/// for the same cluster size (whose model places each key's replicas on random distinct
/// servers, where chains lie on consecutive nodes of the ring). By hand:
/// `QUIVER_WIDTH_NODES=6 cargo test -p quiver --test cluster -- --ignored mget_width --nocapture`
/// (docs/BENCHMARKS.md has the table).
#[test]
#[ignore = "a measurement (three clusters of 6 nodes, about a minute); run by hand"]
fn mget_width_over_replicas_next_to_the_simulation() {
    let nodes: usize = std::env::var("QUIVER_WIDTH_NODES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6);
    let mut rows = Vec::new();
    for replicas in 1..=3u8 {
        let mut cluster = Cluster::start_replicated(nodes, replicas);
        let r = cluster.start_router();
        let mut c = cluster.routers[r].conn();
        let keys: Vec<String> = (0..WIDTH_KEY_SPACE).map(|i| format!("w{i}")).collect();
        for chunk in keys.chunks(CHUNK) {
            let pairs: Vec<(&str, &str)> = chunk.iter().map(|k| (k.as_str(), k.as_str())).collect();
            c.multi_set(&pairs).unwrap();
        }
        // The same random multigets for every replication factor (wyrand, fixed seed).
        let mut state: u64 = 0x5EED;
        let mut next = |n: usize| {
            state = state.wrapping_add(0xa076_1d64_78bd_642f);
            let t = u128::from(state) * u128::from(state ^ 0xe703_7ed1_a0b4_28db);
            (((t >> 64) as u64 ^ t as u64) % n as u64) as usize
        };
        let router = &cluster.routers[r];
        let (mut keys_total, mut parts_total, mut widths) = (0u64, 0u64, 0f64);
        for _ in 0..WIDTH_MGETS {
            let mut picked: Vec<&str> = Vec::with_capacity(WIDTH_KEYS);
            while picked.len() < WIDTH_KEYS {
                let k = keys[next(keys.len())].as_str();
                if !picked.contains(&k) {
                    picked.push(k);
                }
            }
            let before = router.info_field("router_mget_parts");
            let values = c.multi_get(&picked).unwrap();
            let parts = router.info_field("router_mget_parts") - before;
            for (k, v) in picked.iter().zip(&values) {
                assert_eq!(v.as_deref(), Some(k.as_bytes()), "{k}");
            }
            keys_total += WIDTH_KEYS as u64;
            parts_total += parts;
            widths += WIDTH_KEYS as f64 / parts as f64;
        }
        let sim = quiver_plan::sim::simulate_cell(WIDTH_KEYS, nodes, replicas as usize, 10_000, 1);
        rows.push(format!(
            "| {nodes} | {replicas} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
            parts_total as f64 / WIDTH_MGETS as f64,
            keys_total as f64 / parts_total as f64,
            widths / WIDTH_MGETS as f64,
            sim.mean_servers_contacted_exact,
            sim.width_of_mean_exact,
        ));
    }
    eprintln!(
        "| nodes | replicas | router: nodes per MGET | router: keys / node (K/E[X]) | router: E[K/X] | sim: nodes per MGET | sim: K/E[X] |"
    );
    eprintln!("|---|---|---|---|---|---|---|");
    for row in rows {
        eprintln!("{row}");
    }
}

/// The router's listener has the node's defences (the same connection code): an HTTP request
/// runs nothing and is closed, with Redis's warning in the log; protected mode refuses clients
/// from a non-loopback address while the default user has no password (and serves them once
/// it has one); its metrics endpoint closes a stalled request and caps its connections.
#[test]
fn router_refuses_http_requests_and_outside_clients_and_bounds_metrics() {
    let mut cluster = Cluster::start(1);
    let metrics = format!("127.0.0.1:{}", quiver_testkit::port::free_port());
    let r = cluster.start_router_with(&["--bind", "0.0.0.0", "--metrics-addr", &metrics]);
    let addr = cluster.routers[r].addr();

    let got = send_until_closed(
        &addr,
        b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 13\r\n\r\nSET pwned 1\r\n",
    );
    assert!(got.is_empty(), "{}", String::from_utf8_lossy(&got));
    let mut c = cluster.routers[r].conn();
    assert_eq!(c.get("pwned").unwrap(), None);
    let log = cluster.routers[r].log();
    let log_text = || std::fs::read_to_string(&log).unwrap_or_default();
    wait_until("the router's warning", log_text, || {
        log_text()
            .contains("Possible SECURITY ATTACK detected")
            .then_some(())
            .ok_or_else(|| "not yet".to_string())
    });

    match quiver_node::testing::non_loopback_ipv4() {
        None => eprintln!("SKIPPED protected mode: this machine has no non-loopback address"),
        Some(ip) => {
            let outside = format!("{ip}:{}", cluster.routers[r].port);
            let got = send_until_closed(&outside, b"PING\r\n");
            assert!(
                got.starts_with(b"-DENIED Quiver is running in protected mode"),
                "{}",
                String::from_utf8_lossy(&got)
            );
            c.command(&[b"ACL", b"SETUSER", b"default", b">pw"])
                .unwrap();
            let got = send_until_closed(&outside, b"AUTH pw\r\nPING\r\nQUIT\r\n");
            assert_eq!(String::from_utf8_lossy(&got), "+OK\r\n+PONG\r\n+OK\r\n");
        }
    }

    // Metrics: the bound's worth of stalled requests, one more closed at once; the stalled
    // ones closed without an answer; then a scrape works.
    let stalled: Vec<TcpStream> = (0..quiver_service::metrics::CONNECTIONS_MAX)
        .map(|_| {
            let mut s = TcpStream::connect(&metrics).unwrap();
            s.set_read_timeout(Some(WAIT)).unwrap();
            s.write_all(b"GET /metr").unwrap();
            s
        })
        .collect();
    let got = send_until_closed(&metrics, b"GET /metrics HTTP/1.1\r\n\r\n");
    assert!(got.is_empty(), "{}", String::from_utf8_lossy(&got));
    for mut s in stalled {
        let mut got = Vec::new();
        s.read_to_end(&mut got)
            .expect("a stalled request is closed");
        assert!(got.is_empty(), "{}", String::from_utf8_lossy(&got));
    }
    let got = send_until_closed(&metrics, b"GET /metrics HTTP/1.1\r\n\r\n");
    assert!(
        String::from_utf8_lossy(&got).starts_with("HTTP/1.1 200 OK"),
        "{}",
        String::from_utf8_lossy(&got)
    );
}
