//! What Redis's own tools see of a Quiver cluster (docs/cluster.md, "What Redis tools see"):
//! `redis-cli --cluster check` and `--cluster info` against clusters with replicas 1, 2 and
//! 3 report every slot covered, the nodes agreeing, and the true key count (each node's
//! DBSIZE counts the slots it serves as a master); ROLE, INFO replication, CLUSTER NODES and
//! CLUSTER REPLICAS agree on each node's role; WAIT counts the other members of a write's
//! chain; redis-py's RedisCluster works against each. A restarted node rejoins its chains as
//! their tail, heading none (a replica, in Redis's terms) until the head balance gives it one
//! back: then the tools see three masters again, and the true key count throughout.

use std::process::Command;

use quiver_client::{Connection, Value};
use quiver_testkit::process::run;
use quiver_testkit::{tool, WAIT};

use super::harness::{text, Cluster};

/// Keys written before the tools look.
const KEYS: usize = 300;

fn cluster_of(replicas: u8) -> Cluster {
    if replicas == 1 {
        return Cluster::start(3);
    }
    let cluster = Cluster::start_failover(3, replicas, 1);
    cluster.wait_chains_full(replicas as usize);
    cluster
}

/// `redis-cli --cluster <what> 127.0.0.1:<port>`'s output; it must succeed.
fn redis_cli_cluster(what: &str, port: u16) -> String {
    let addr = format!("127.0.0.1:{port}");
    let (status, out, err) = run(
        Command::new(tool::require("redis-cli")).args(["--cluster", what, &addr]),
        "redis-cli --cluster",
        WAIT,
    );
    let output = out + &err;
    assert!(
        status.success(),
        "redis-cli --cluster {what}: {status}\n{output}"
    );
    output
}

/// The checks `redis-cli --cluster check` and `info` make pass, with the key count and the
/// masters and replicas they report.
fn tools_report(cluster: &Cluster, keys: i64, masters: usize, replicas: usize) {
    for node in &cluster.nodes {
        let check = redis_cli_cluster("check", node.port);
        for ok in [
            "[OK] All nodes agree about slots configuration.",
            "[OK] All 16384 slots covered.",
        ] {
            assert!(
                check.contains(ok),
                "check from {}: no {ok}\n{check}",
                node.id
            );
        }
        assert!(!check.contains("[ERR]"), "check from {}:\n{check}", node.id);
        // A master's line: `127.0.0.1:PORT (ID...) -> K keys | S slots | R slaves.`
        let lines: Vec<&str> = check.lines().filter(|l| l.ends_with(" slaves.")).collect();
        assert_eq!(lines.len(), masters, "masters listed by check\n{check}");
        let replica_count: usize = lines
            .iter()
            .filter_map(|l| l.rsplit(" | ").next()?.strip_suffix(" slaves."))
            .map(|n| n.parse::<usize>().unwrap())
            .sum();
        assert_eq!(
            replica_count, replicas,
            "replicas counted by check\n{check}"
        );
        let info = redis_cli_cluster("info", node.port);
        let want = format!("[OK] {keys} keys in {masters} masters.");
        assert!(
            info.contains(&want),
            "info from {}: no {want}\n{info}",
            node.id
        );
    }
}

/// ROLE and INFO replication of every node agree with CLUSTER NODES.
fn roles_agree(cluster: &Cluster) {
    let nodes = text(
        &cluster.nodes[0]
            .conn()
            .command(&[b"CLUSTER", b"NODES"])
            .unwrap(),
    );
    for node in &cluster.nodes {
        let line = nodes
            .lines()
            .find(|l| l.starts_with(&format!("{} ", node.id)))
            .unwrap_or_else(|| panic!("{} not in CLUSTER NODES:\n{nodes}", node.id));
        let flags: Vec<&str> = line.split(' ').collect();
        let mut c = node.conn();
        let role = match c.command(&[b"ROLE"]).unwrap() {
            Value::Array(v) => text(&v[0]),
            other => panic!("ROLE: {other:?}"),
        };
        let info = text(&c.command(&[b"INFO", b"replication"]).unwrap());
        if flags[2].contains("slave") {
            assert_eq!(role, "slave", "{line}");
            assert!(info.contains("role:slave"), "{info}");
            // Its master lists it among its replicas.
            let master = flags[3];
            let listed = c
                .command(&[b"CLUSTER", b"REPLICAS", master.as_bytes()])
                .unwrap();
            let Value::Array(lines) = listed else {
                panic!("CLUSTER REPLICAS: {listed:?}");
            };
            assert!(
                lines.iter().any(|l| text(l).starts_with(&node.id)),
                "{master}'s replicas: {lines:?}"
            );
        } else {
            assert_eq!(role, "master", "{line}");
            assert!(info.contains("role:master"), "{info}");
            let replicas = c
                .command(&[b"CLUSTER", b"REPLICAS", node.id.as_bytes()])
                .unwrap();
            assert!(matches!(replicas, Value::Array(_)), "{replicas:?}");
        }
    }
}

/// Writes [`KEYS`] keys through the router; WAIT there and on a head counts the other
/// members of the write's chain.
fn write_and_wait(cluster: &mut Cluster, replicas: u8) -> Connection {
    let r = cluster.start_router();
    cluster.wait_router_current(r);
    let mut c = cluster.routers[r].conn();
    let keys: Vec<String> = (0..KEYS).map(|i| format!("tools-{i}")).collect();
    let pairs: Vec<(&str, &str)> = keys.iter().map(|k| (k.as_str(), "v")).collect();
    for chunk in pairs.chunks(50) {
        c.multi_set(chunk).unwrap();
    }
    let others = i64::from(replicas) - 1;
    assert_eq!(
        c.command(&[b"WAIT", b"5", b"100"]).unwrap(),
        Value::Integer(others),
        "WAIT through the router"
    );
    // On the head of a key: a write, then WAIT.
    let head = cluster
        .nodes
        .iter()
        .find(|n| {
            // Another member answers MOVED (an error).
            let set = n.conn().command(&[b"SET", b"tools-wait", b"1"]);
            matches!(set, Ok(Value::Simple(ref s)) if s == "OK")
        })
        .expect("some node heads the key's chain");
    let mut hc = head.conn();
    assert_eq!(
        hc.command(&[b"SET", b"tools-wait", b"2"]).unwrap(),
        Value::Simple("OK".into())
    );
    assert_eq!(
        hc.command(&[b"WAIT", b"1", b"0"]).unwrap(),
        Value::Integer(others)
    );
    assert_eq!(
        c.command(&[b"DEL", b"tools-wait"]).unwrap(),
        Value::Integer(1)
    );
    c
}

fn tools_see_the_cluster(replicas: u8) {
    let mut cluster = cluster_of(replicas);
    let mut router = write_and_wait(&mut cluster, replicas);
    assert_eq!(
        router.command(&[b"DBSIZE"]).unwrap(),
        Value::Integer(KEYS as i64)
    );
    // Every node heads one chain: three masters, none a replica in Redis's terms.
    tools_report(&cluster, KEYS as i64, 3, 0);
    roles_agree(&cluster);
    redis_py_cluster(&cluster, replicas);
    if replicas < 3 {
        return;
    }
    let keys = match router.command(&[b"DBSIZE"]).unwrap() {
        Value::Integer(n) => n,
        other => panic!("DBSIZE: {other:?}"),
    };
    // A restarted node rejoins its chains as their tail; the head balance gives it a chain
    // to head again, and the tools see three masters with the true key count.
    let id = cluster.nodes[0].id.clone();
    cluster.nodes[0].kill9();
    cluster.wait_out_of_chains(&id);
    cluster.nodes[0].restart();
    cluster.wait_readmitted(&id);
    cluster.wait_in_every_chain(&id);
    cluster.wait_heads_spread();
    tools_report(&cluster, keys, 3, 0);
    roles_agree(&cluster);
}

/// redis-py's RedisCluster against the cluster (`redis_py_cluster.py`: its keys spread over
/// the masters, reads from every member with replicas).
pub fn redis_py_cluster(cluster: &Cluster, replicas: u8) {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/cluster/redis_py_cluster.py"
    );
    let (status, out, err) = run(
        Command::new(tool::require("python3"))
            .arg(script)
            .arg(cluster.nodes[0].port.to_string())
            .arg(replicas.to_string()),
        "redis_py_cluster.py",
        WAIT * 3,
    );
    assert!(
        status.success(),
        "redis_py_cluster.py: {status}\n{out}{err}\n{}",
        cluster.logs()
    );
}

#[test]
fn redis_tools_see_a_cluster_without_replicas() {
    tools_see_the_cluster(1);
}

#[test]
fn redis_tools_see_a_cluster_with_replicas_2() {
    tools_see_the_cluster(2);
}

#[test]
fn redis_tools_see_a_cluster_with_replicas_3_and_after_a_restart() {
    tools_see_the_cluster(3);
}
