//! `ClusterClient` against a real Redis Cluster: three `redis-server` processes in cluster
//! mode on free loopback ports, joined by `redis-cli --cluster create`, stopped by PID on
//! drop. Redis refuses keys of several slots in one request (`CROSSSLOT`), so these tests
//! also cover the client's one-request-per-slot fallback; a slot is migrated by hand to
//! exercise `ASK`, `TRYAGAIN` and `MOVED` as Redis sends them.

use std::process::Command;
use std::thread;
use std::time::Duration;

use bytes::Bytes;
use quiver_client::cluster::{key_slot, ClusterClient, ClusterOptions};
use quiver_client::{ClientOptions, Connection, Error, Value};
use quiver_testkit::redis::{cluster_port, RedisServer};
use quiver_testkit::tool;

use crate::common::TEST_READ_TIMEOUT;

/// Polls (every `POLL_INTERVAL`) for the cluster to be ok.
const POLLS_MAX: usize = 600;
const POLL_INTERVAL: Duration = Duration::from_millis(50);

/// Three Redis Cluster masters (and their replicas, if asked for), killed on drop.
struct RedisCluster {
    addrs: Vec<String>,
    ids: Vec<String>,
    servers: Vec<RedisServer>,
    dir: tempfile::TempDir,
}

impl RedisCluster {
    fn start() -> RedisCluster {
        RedisCluster::start_with_replicas(0)
    }

    /// Three masters with `replicas` replicas each (`redis-cli --cluster create
    /// --cluster-replicas`).
    fn start_with_replicas(replicas: usize) -> RedisCluster {
        let nodes = 3 * (1 + replicas);
        // Fails the test (never skips it) when a tool is missing.
        let cli = tool::require("redis-cli");
        let dir = tempfile::tempdir().unwrap();
        let mut cluster = RedisCluster {
            addrs: Vec::new(),
            ids: Vec::new(),
            servers: Vec::new(),
            dir,
        };
        for n in 0..nodes {
            let port = cluster_port();
            let dir = cluster.dir.path();
            // A directory per node: a replica's full sync writes the master's snapshot to
            // `dump.rdb` in its directory and loads it; in a shared one, replicas syncing at
            // once load each other's masters' data.
            let node_dir = dir.join(format!("node-{n}"));
            std::fs::create_dir_all(&node_dir).unwrap();
            let log = dir.join(format!("redis-{n}.log"));
            let server = RedisServer::spawn(port, &log, |cmd| {
                cmd.args(["--cluster-enabled", "yes", "--cluster-config-file"])
                    .arg(dir.join(format!("nodes-{n}.conf")))
                    .args(["--save", "", "--appendonly", "no", "--dir"])
                    .arg(&node_dir);
            });
            cluster.addrs.push(server.addr());
            cluster.servers.push(server);
        }
        for server in &mut cluster.servers {
            server.wait_ready();
        }
        let created = Command::new(cli)
            .args(["--cluster", "create"])
            .args(&cluster.addrs)
            .args(["--cluster-replicas", &replicas.to_string()])
            .arg("--cluster-yes")
            .output()
            .expect("run redis-cli --cluster create");
        assert!(
            created.status.success(),
            "redis-cli --cluster create failed:\n{}{}",
            String::from_utf8_lossy(&created.stdout),
            String::from_utf8_lossy(&created.stderr)
        );
        for n in 0..nodes {
            cluster.wait_until_ok(n);
            let id = cluster.node(n).command(&[b"CLUSTER", b"MYID"]).unwrap();
            let Value::Bulk(id) = id else {
                panic!("CLUSTER MYID: {id:?}")
            };
            cluster.ids.push(String::from_utf8(id.to_vec()).unwrap());
        }
        cluster
    }

    fn node(&self, n: usize) -> Connection {
        let mut options = ClientOptions::new(self.addrs[n].clone());
        options.read_timeout = Some(TEST_READ_TIMEOUT);
        Connection::connect_with(options).unwrap()
    }

    fn log(&self, n: usize) -> String {
        self.servers[n].log_text()
    }

    fn wait_until_ok(&self, n: usize) {
        let mut node = self.node(n);
        for _ in 0..POLLS_MAX {
            let info = node.command(&[b"CLUSTER", b"INFO"]).unwrap();
            let Value::Bulk(text) = info else {
                panic!("CLUSTER INFO: {info:?}")
            };
            if String::from_utf8_lossy(&text).contains("cluster_state:ok") {
                return;
            }
            thread::sleep(POLL_INTERVAL);
        }
        panic!("node {n} never reached cluster_state:ok:\n{}", self.log(n));
    }

    fn index_of(&self, addr: &str) -> usize {
        self.addrs.iter().position(|a| a == addr).unwrap()
    }

    fn client(&self) -> ClusterClient {
        let mut options = ClusterOptions::new([self.addrs[0].clone()]);
        options.connection.read_timeout = Some(TEST_READ_TIMEOUT);
        options.retry_delay = Duration::from_millis(1);
        ClusterClient::connect_with(options).unwrap()
    }

    /// `DBSIZE` of node `n`.
    fn dbsize(&self, n: usize) -> i64 {
        match self.node(n).command(&[b"DBSIZE"]).unwrap() {
            Value::Integer(n) => n,
            other => panic!("DBSIZE: {other:?}"),
        }
    }
}

fn run(conn: &mut Connection, args: &[&str]) -> Value {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    conn.command(&args)
        .unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

#[test]
fn redis_cluster_single_key_commands_land_on_the_slot_owner() {
    let redis = RedisCluster::start();
    let mut client = redis.client();
    assert_eq!(client.nodes().len(), 3);
    let mut nodes: Vec<Connection> = (0..3).map(|n| redis.node(n)).collect();
    let keys: Vec<String> = (0..200).map(|i| format!("single:{i}")).collect();
    for (i, k) in keys.iter().enumerate() {
        client.set(k, format!("v{i}")).unwrap();
    }
    for (i, k) in keys.iter().enumerate() {
        let slot = key_slot(k.as_bytes());
        let slot_of_redis = run(&mut nodes[0], &["CLUSTER", "KEYSLOT", k]);
        assert_eq!(slot_of_redis, Value::Integer(i64::from(slot)), "{k}");
        let owner = redis.index_of(client.slot_owner(slot).unwrap());
        for (n, node) in nodes.iter_mut().enumerate() {
            match node.get(k) {
                Ok(value) => {
                    assert_eq!(n, owner, "{k} answered by node {n}");
                    assert_eq!(value, Some(Bytes::from(format!("v{i}"))));
                }
                Err(Error::Server(text)) => {
                    assert_ne!(n, owner, "{k}: {text}");
                    let moved = format!("MOVED {slot} {}", redis.addrs[owner]);
                    assert_eq!(text, moved);
                }
                Err(e) => panic!("{k} on node {n}: {e}"),
            }
        }
        assert_eq!(client.get(k).unwrap(), Some(Bytes::from(format!("v{i}"))));
        assert!(client.exists(k).unwrap());
    }
    assert!((0..3).all(|n| redis.dbsize(n) > 0), "keys on every node");
    assert_eq!((0..3).map(|n| redis.dbsize(n)).sum::<i64>(), 200);
    assert_eq!(client.incr("single:counter").unwrap(), 1);
    assert_eq!(client.incr("single:counter").unwrap(), 2);
    let reply = client.command(&[b"STRLEN", b"single:7"], 1).unwrap();
    assert_eq!(reply, Value::Integer(2));
    assert!(client.delete("single:7").unwrap());
    assert!(!client.exists("single:7").unwrap());
    assert_eq!(client.get("single:7").unwrap(), None);
    let stats = client.stats();
    assert_eq!((stats.moved, stats.asked, stats.retries), (0, 0, 0));
}

#[test]
fn redis_cluster_multi_get_returns_values_in_order() {
    let redis = RedisCluster::start();
    let mut client = redis.client();
    let keys: Vec<String> = (0..1000).map(|i| format!("multi:{i}")).collect();
    let pairs: Vec<(&str, String)> = keys
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 3 != 0)
        .map(|(i, k)| (k.as_str(), format!("value-{i}")))
        .collect();
    client.multi_set(&pairs).unwrap();
    // Redis answered CROSSSLOT once per node, then took one MSET per slot.
    assert_eq!(client.stats().cross_slot, 3);
    assert!((0..3).all(|n| redis.dbsize(n) > 0), "keys on every node");
    assert_eq!((0..3).map(|n| redis.dbsize(n)).sum::<i64>(), 666);

    let values = client.multi_get(&keys).unwrap();
    assert_eq!(values.len(), 1000);
    for (i, value) in values.iter().enumerate() {
        let want = (i % 3 != 0).then(|| Bytes::from(format!("value-{i}")));
        assert_eq!(value, &want, "key {i}");
    }
    // Reversed, with duplicates: still the caller's order.
    let mut shuffled: Vec<&str> = keys.iter().rev().map(String::as_str).collect();
    shuffled.extend(["multi:1", "multi:1", "multi:3"]);
    let values = client.multi_get(&shuffled).unwrap();
    for (k, v) in shuffled.iter().zip(&values) {
        let i: usize = k["multi:".len()..].parse().unwrap();
        let want = (i % 3 != 0).then(|| Bytes::from(format!("value-{i}")));
        assert_eq!(v, &want, "{k}");
    }
    assert_eq!(
        client.stats().cross_slot,
        3,
        "no CROSSSLOT once a node is known"
    );
    // Every one of these was checked on the node that owns it by a plain connection.
    let mut nodes: Vec<Connection> = (0..3).map(|n| redis.node(n)).collect();
    for (i, k) in keys.iter().enumerate().step_by(37) {
        let owner = redis.index_of(client.slot_owner(key_slot(k.as_bytes())).unwrap());
        let want = (i % 3 != 0).then(|| Bytes::from(format!("value-{i}")));
        assert_eq!(nodes[owner].get(k).unwrap(), want, "{k}");
    }

    assert_eq!(client.multi_exists(&keys).unwrap(), 666);
    assert_eq!(client.multi_delete(&keys).unwrap(), 666);
    assert_eq!(client.multi_exists(&keys).unwrap(), 0);
    assert!(client.multi_get(&keys).unwrap().iter().all(Option::is_none));
    assert_eq!((0..3).map(|n| redis.dbsize(n)).sum::<i64>(), 0);
}

/// A slot migrated by hand, as `redis-cli --cluster reshard` does it: while it migrates, a key
/// that left is reached through `ASK` and a request split across the two nodes gets
/// `TRYAGAIN` until the bound; once it moved, `MOVED` updates the table.
#[test]
fn redis_cluster_slot_migration_is_followed_through_ask_and_moved() {
    let redis = RedisCluster::start();
    let mut client = redis.client();
    let mut stale = redis.client();
    let keys = ["{mig}:1", "{mig}:2", "{mig}:3"];
    let slot = key_slot(keys[0].as_bytes());
    let pairs: Vec<(&str, &str)> = keys.iter().map(|k| (*k, *k)).collect();
    client.multi_set(&pairs).unwrap();
    let source = redis.index_of(client.slot_owner(slot).unwrap());
    let target = (source + 1) % 3;
    let (mut src, mut dst) = (redis.node(source), redis.node(target));
    let target_port = redis.addrs[target].rsplit_once(':').unwrap().1.to_owned();
    let slot_text = slot.to_string();
    run(
        &mut dst,
        &[
            "CLUSTER",
            "SETSLOT",
            &slot_text,
            "IMPORTING",
            &redis.ids[source],
        ],
    );
    run(
        &mut src,
        &[
            "CLUSTER",
            "SETSLOT",
            &slot_text,
            "MIGRATING",
            &redis.ids[target],
        ],
    );
    let migrate = |src: &mut Connection, keys: &[&str]| {
        let mut args = vec![
            "MIGRATE",
            "127.0.0.1",
            &target_port,
            "",
            "0",
            "5000",
            "KEYS",
        ];
        args.extend(keys);
        run(src, &args);
    };
    migrate(&mut src, &keys[..1]);

    // The key that left: ASK, the table unchanged.
    assert_eq!(
        client.get(keys[0]).unwrap().as_deref(),
        Some(keys[0].as_bytes())
    );
    assert_eq!(client.stats().asked, 1);
    assert_eq!(client.slot_owner(slot), Some(redis.addrs[source].as_str()));
    // A key still there: served by the source.
    assert_eq!(
        client.get(keys[1]).unwrap().as_deref(),
        Some(keys[1].as_bytes())
    );
    assert_eq!(client.stats().asked, 1);
    // One request over keys on both sides: TRYAGAIN on every attempt, then the bound.
    let err = client.multi_get(&keys[..2]).unwrap_err();
    assert!(
        matches!(&err, Error::Redirects { last, .. } if last.starts_with("TRYAGAIN")),
        "{err:?}"
    );
    // All of them gone: the source answers ASK, the target takes ASKING + MGET.
    migrate(&mut src, &keys[1..]);
    let values = client.multi_get(&keys).unwrap();
    assert!(keys
        .iter()
        .zip(&values)
        .all(|(k, v)| v.as_deref() == Some(k.as_bytes())));
    assert_eq!(client.stats().asked, 2);
    assert_eq!(client.stats().moved, 0);

    // The slot moves for good: told to the target, the source, and the third node.
    for n in [target, source, 3 - target - source] {
        let mut node = redis.node(n);
        run(
            &mut node,
            &["CLUSTER", "SETSLOT", &slot_text, "NODE", &redis.ids[target]],
        );
    }
    assert_eq!(
        client.get(keys[2]).unwrap().as_deref(),
        Some(keys[2].as_bytes())
    );
    assert_eq!(client.stats().moved, 1);
    assert_eq!(client.slot_owner(slot), Some(redis.addrs[target].as_str()));
    // A client whose table predates the whole migration: MOVED in a multi-key call.
    assert_eq!(stale.slot_owner(slot), Some(redis.addrs[source].as_str()));
    let values = stale.multi_get(&keys).unwrap();
    assert!(keys
        .iter()
        .zip(&values)
        .all(|(k, v)| v.as_deref() == Some(k.as_bytes())));
    assert_eq!(stale.stats().moved, 1);
    assert_eq!(stale.slot_owner(slot), Some(redis.addrs[target].as_str()));
    assert_eq!(stale.multi_delete(&keys).unwrap(), 3);
    assert_eq!((0..3).map(|n| redis.dbsize(n)).sum::<i64>(), 0);
}

/// `read_from_replicas` against Redis: the replicas are read from `CLUSTER SLOTS`, `READONLY`
/// is taken by masters and replicas alike, and a multiget (one request per slot after
/// `CROSSSLOT`) returns every value. Each Redis replica holds one master's slots, so the
/// fewest nodes are three, one per range.
#[test]
fn redis_cluster_multi_get_with_read_from_replicas() {
    let redis = RedisCluster::start_with_replicas(1);
    let mut writer = redis.client();
    let keys: Vec<String> = (0..200).map(|i| format!("replicated:{i}")).collect();
    let pairs: Vec<(&str, String)> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| (k.as_str(), format!("value-{i}")))
        .collect();
    writer.multi_set(&pairs).unwrap();

    let mut options = ClusterOptions::new([redis.addrs[0].clone()]);
    options.connection.read_timeout = Some(TEST_READ_TIMEOUT);
    options.retry_delay = Duration::from_millis(1);
    options.read_from_replicas = true;
    let mut client = ClusterClient::connect_with(options).unwrap();
    assert_eq!(client.nodes().len(), 3, "three masters");
    // Redis lists a replica in CLUSTER SLOTS once it has replicated something (its offset,
    // gossiped, is not 0): until then the table is read again.
    let mut slots: Vec<u16> = keys.iter().map(|k| key_slot(k.as_bytes())).collect();
    slots.sort_unstable();
    slots.dedup();
    let listed = (0..POLLS_MAX).any(|_| {
        client.refresh().unwrap();
        let all = slots.iter().all(|&s| !client.slot_replicas(s).is_empty());
        if !all {
            thread::sleep(POLL_INTERVAL);
        }
        all
    });
    assert!(listed, "replicas never listed in CLUSTER SLOTS");
    // Redis replicates asynchronously: wait until each key is on its replica (read on a
    // READONLY connection, as the client's).
    for k in &keys {
        let slot = key_slot(k.as_bytes());
        let replicas = client.slot_replicas(slot);
        assert_eq!(replicas.len(), 1, "{k}: {replicas:?}");
        assert_ne!(Some(replicas[0]), client.slot_owner(slot));
        let mut options = ClientOptions::new(replicas[0]);
        options.read_timeout = Some(TEST_READ_TIMEOUT);
        options.readonly = true;
        let mut replica = Connection::connect_with(options).unwrap();
        let replicated = (0..POLLS_MAX).any(|_| {
            let there = replica.get(k).unwrap().is_some();
            if !there {
                thread::sleep(POLL_INTERVAL);
            }
            there
        });
        assert!(replicated, "{k} never reached {}", replicas[0]);
    }

    let values = client.multi_get(&keys).unwrap();
    for (i, value) in values.iter().enumerate() {
        assert_eq!(value, &Some(Bytes::from(format!("value-{i}"))), "key {i}");
    }
    let stats = client.stats();
    assert_eq!((stats.moved, stats.asked), (0, 0));
    assert_eq!(stats.multiget_keys, 200);
    // One refused request per node contacted, then one per slot.
    assert_eq!(stats.cross_slot, 3);
    assert_eq!(stats.multiget_requests, 3 + slots.len() as u64);
}
