//! Slot ranges moved between nodes while they serve (docs/cluster.md, "Moving a range"):
//! nothing acknowledged is lost and nothing deleted comes back, under load and across kill -9
//! of the move's source or target during the copy; a hand-over whose answer is lost (a
//! test-only fault) is resolved before the source takes a write again; nodes join, the slots
//! are rebalanced, a node leaves; and the cluster client sends a multiget as one request per
//! node. Every move is `quiver cluster move-slots` (a process), every check the cluster's own
//! view: `status --json`, DBSIZE, CLUSTER INFO, the nodes' logs.

pub mod load;

use std::collections::BTreeSet;
use std::fs::File;
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::Arc;

use quiver_client::Value;
use quiver_store::slot::key_slot;
use quiver_testkit::process::{tail, Guard};
use quiver_testkit::wait_until;

use crate::harness::{cluster_client, Cluster, Env, Node};
use load::{Known, Kv, Load, Report};

/// Keys per MSET while loading, and per MGET while reading back.
const CHUNK: usize = 1000;
/// Keys loaded into the moving range when the move must take a while (kill -9 during the
/// copy): enough that the copy is still running when the test acts on its first sign.
const BIG_RANGE_KEYS: usize = 150_000;
/// Operations every load thread completes between two moves (a count: the test waits for
/// work done, never for a time).
const PROGRESS_OPS: usize = 200;
/// The test-only fault of `agent::moves`: the first hand-over's answer is treated as lost.
const LOSE_HANDOVER_ANSWER: &str = "QUIVER_TEST_LOSE_HANDOVER_ANSWER";

/// `n` pairs (`PREFIX-i`, a value naming the key) whose keys' slots are in `lo..=hi`.
pub fn pairs_in(prefix: &str, lo: u16, hi: u16, n: usize) -> Vec<(String, String)> {
    (0..)
        .map(|i| format!("{prefix}-{i}"))
        .filter(|k| (lo..=hi).contains(&key_slot(k.as_bytes())))
        .take(n)
        .map(|k| {
            let v = format!("value-of-{k}");
            (k, v)
        })
        .collect()
}

/// Writes `pairs` through a cluster client, [`CHUNK`] keys per multi_set.
fn load(cluster: &Cluster, pairs: &[(String, String)]) {
    let mut client = cluster.client();
    for chunk in pairs.chunks(CHUNK) {
        client
            .multi_set(chunk)
            .unwrap_or_else(|e| panic!("MSET: {e}\n{}", cluster.logs()));
    }
}

/// What every key must hold after a load without failures: the fixed pairs, and each writer's
/// keys in their last acknowledged state (`None`: deleted).
pub fn expected_after(
    fixed: &[(String, String)],
    reports: &[Report],
) -> Vec<(String, Option<String>)> {
    let mut expected: Vec<(String, Option<String>)> = fixed
        .iter()
        .map(|(k, v)| (k.clone(), Some(v.clone())))
        .collect();
    for r in reports {
        for (k, known) in &r.model {
            let Known::Value(v) = known else {
                unreachable!("no operation failed")
            };
            expected.push((k.clone(), v.clone()));
        }
    }
    expected
}

/// Reads every key of `expected` through a fresh cluster client: each must hold its value
/// (`None`: must not exist).
pub fn read_back(cluster: &Cluster, expected: &[(String, Option<String>)]) {
    read_back_via(
        &mut cluster.client(),
        "the cluster client",
        cluster,
        expected,
    );
}

/// [`read_back`] through `kv` (a cluster client, or a connection to a router), named `via`.
pub fn read_back_via(
    kv: &mut impl Kv,
    via: &str,
    cluster: &Cluster,
    expected: &[(String, Option<String>)],
) {
    for chunk in expected.chunks(CHUNK) {
        let keys: Vec<&str> = chunk.iter().map(|(k, _)| k.as_str()).collect();
        let values = kv
            .multi_get(&keys)
            .unwrap_or_else(|e| panic!("MGET through {via}: {e}\n{}", cluster.logs()));
        for ((k, want), got) in chunk.iter().zip(values) {
            assert_eq!(
                got.as_deref(),
                want.as_deref().map(str::as_bytes),
                "{k} through {via}: lost, stale or resurrected"
            );
        }
    }
}

/// Reads `pairs` with MGETs sent straight to `node` (no redirect followed): it holds them.
fn on_node(node: &Node, pairs: &[(String, String)]) {
    let mut c = node.conn();
    for chunk in pairs.chunks(CHUNK) {
        let mut args: Vec<&[u8]> = vec![b"MGET"];
        args.extend(chunk.iter().map(|(k, _)| k.as_bytes()));
        let reply = c.command(&args);
        let Ok(Value::Array(values)) = reply else {
            panic!("MGET on {}: {reply:?}\n{}", node.id, tail(&node.log()))
        };
        for ((k, v), got) in chunk.iter().zip(&values) {
            assert_eq!(got.as_bytes(), Some(v.as_bytes()), "{k} on {}", node.id);
        }
    }
}

/// `lo-hi` parsed.
pub fn range(text: &str) -> (u16, u16) {
    let (lo, hi) = text.split_once('-').unwrap_or((text, text));
    (lo.parse().unwrap(), hi.parse().unwrap())
}

/// The owners (chain heads) of the shards of a `status --json` overlapping `lo..=hi`.
pub fn owners(status: &serde_json::Value, lo: u16, hi: u16) -> BTreeSet<String> {
    let shards = status["topology"]["shards"].as_array().unwrap();
    shards
        .iter()
        .filter(|s| {
            let (a, b) = range(s["slots"].as_str().unwrap());
            a <= hi && lo <= b
        })
        .map(|s| s["chain"][0].as_str().unwrap().to_string())
        .collect()
}

/// Waits until the topology in etcd has no migration and every member serves its epoch;
/// returns that `status --json`.
pub fn wait_settled(cluster: &Cluster) -> serde_json::Value {
    let mut settled = serde_json::Value::Null;
    wait_until(
        "no migration, every member at the topology's epoch",
        || cluster.logs(),
        || {
            let status = cluster.try_status()?;
            let epoch = status["topology"]["epoch"].as_u64();
            let migrations = &status["topology"]["migrations"];
            if migrations.as_array().is_some_and(|m| !m.is_empty()) {
                return Err(format!("migrations: {migrations}"));
            }
            for n in status["nodes"].as_array().unwrap() {
                if n["epoch"].as_u64() != epoch {
                    return Err(format!(
                        "{} serves epoch {}, not {epoch:?}",
                        n["id"], n["epoch"]
                    ));
                }
            }
            settled = status;
            Ok(())
        },
    );
    settled
}

/// Waits until node `i`'s store holds `want` keys (a drop is asynchronous).
pub fn wait_store_keys(cluster: &Cluster, i: usize, want: u64, what: &str) {
    let node = &cluster.nodes[i];
    wait_until(
        &format!("{}: {what}", node.id),
        || cluster.logs(),
        || match node.store_keys()? {
            n if n == want => Ok(()),
            n => Err(format!("{} keys, wanted {want}", n)),
        },
    );
}

/// How many lines of `text` contain `what`.
fn count_lines(text: &str, what: &str) -> usize {
    text.lines().filter(|l| l.contains(what)).count()
}

/// `quiver cluster move-slots` in the background, its output in a file of the cluster's
/// directory; killed (by PID) if the test ends before it does.
struct Mover {
    process: Option<Guard>,
    log: PathBuf,
}

impl Mover {
    fn start(cluster: &Cluster, slots: &str, to: &str) -> Mover {
        let log = cluster.dir.path().join(format!("move-{slots}-to-{to}.log"));
        let out = File::create(&log).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_quiver"))
            .args(["cluster", "move-slots", "--slots", slots, "--to", to])
            .args(["--etcd", &cluster.etcd.url()])
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("quiver cluster move-slots starts");
        Mover {
            process: Some(Guard::new(child)),
            log,
        }
    }

    /// Waits for its exit (bounded by [`quiver_testkit::WAIT`]).
    fn wait(&mut self, cluster: &Cluster) -> ExitStatus {
        let child = self.process.as_mut().expect("the mover runs").child();
        let mut exited = None;
        wait_until(
            "the mover's exit",
            || format!("--- mover:\n{}\n{}", tail(&self.log), cluster.logs()),
            || match child.try_wait().map_err(|e| e.to_string())? {
                Some(status) => {
                    exited = Some(status);
                    Ok(())
                }
                None => Err("still running".into()),
            },
        );
        self.process = None;
        exited.unwrap()
    }

    fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// Fails the test with every load thread's failures, if any.
pub fn assert_no_failures(cluster: &Cluster, reports: &[Report]) {
    let failed: usize = reports.iter().map(|r| r.failed).sum();
    if failed > 0 {
        let firsts: Vec<&String> = reports.iter().flat_map(|r| &r.failures).collect();
        panic!(
            "{failed} operations failed, the first: {firsts:#?}\n{}",
            cluster.logs()
        );
    }
}

#[test]
fn move_under_load_loses_nothing() {
    let cluster = Cluster::start(3);
    let fixed = Arc::new(pairs_in("fixed", 0, 16383, 20_000));
    load(&cluster, &fixed);
    let load = Load::start(&cluster, 3, (0, 16383), fixed.clone());
    // node-1 owns 0-5460, node-2 5461-10922, node-3 10923-16383. Ranges go and come back;
    // 5000-5999 spans node-1 and node-2 (two runs, one per owner), then leaves node-3 whole.
    let moves = [
        ("1000-2999", "node-2"),
        ("1000-2999", "node-1"),
        ("5000-5999", "node-3"),
        ("12000-12999", "node-1"),
        ("5000-5999", "node-2"),
    ];
    for (slots, to) in moves {
        load.wait_progress(&cluster, PROGRESS_OPS, &format!("before moving {slots}"));
        cluster.quiver_ok(&["move-slots", "--slots", slots, "--to", to]);
    }
    load.wait_progress(&cluster, PROGRESS_OPS, "after the last move");
    let reports = load.finish();
    assert_no_failures(&cluster, &reports);
    let moved: u64 = reports.iter().map(|r| r.stats.moved).sum();
    assert!(
        moved > 0,
        "no client was redirected: nothing moved under it"
    );

    let status = wait_settled(&cluster);
    for (slots, owner) in [
        ("1000-2999", "node-1"),
        ("5000-5999", "node-2"),
        ("12000-12999", "node-1"),
    ] {
        let (lo, hi) = range(slots);
        let want = BTreeSet::from([owner.to_string()]);
        assert_eq!(owners(&status, lo, hi), want, "{slots}: {status}");
    }

    // Every acknowledged write reads back, every acknowledged DEL stays deleted.
    let expected = expected_after(&fixed, &reports);
    read_back(&cluster, &expected);

    // Once the drops are done, the nodes hold the live keys and nothing else.
    let live = expected.iter().filter(|(_, v)| v.is_some()).count() as u64;
    wait_until(
        "the nodes' keys summed are the live keys (every drop done)",
        || cluster.logs(),
        || {
            let sizes = cluster
                .nodes
                .iter()
                .map(Node::store_keys)
                .collect::<Result<Vec<u64>, String>>()?;
            match sizes.iter().sum::<u64>() {
                n if n == live => Ok(()),
                _ => Err(format!("DBSIZEs {sizes:?}, live keys {live}")),
            }
        },
    );
}

#[test]
fn kill9_source_during_move_resumes() {
    // node-1 owns 0-8191, node-2 8192-16383; 0-4095 moves from node-1 to node-2.
    let mut cluster = Cluster::start(2);
    let pairs = pairs_in("resume", 0, 4095, BIG_RANGE_KEYS);
    load(&cluster, &pairs);
    let source = cluster.node("node-1");
    let mut mover = Mover::start(&cluster, "0-4095", "node-2");
    wait_until(
        "node-1 starts the move",
        || cluster.logs(),
        || match cluster.nodes[source]
            .log_text()
            .contains("cluster: moving slots")
        {
            true => Ok(()),
            false => Err("not yet".into()),
        },
    );
    cluster.nodes[source].kill9();
    let before_restart = cluster.nodes[source].log_text();
    assert_eq!(
        count_lines(&before_restart, "cluster: range copied"),
        0,
        "the copy ended before the kill: the range needs more keys for this test\n{}",
        cluster.logs()
    );
    cluster.nodes[source].restart();

    let status = mover.wait(&cluster);
    assert!(
        status.success(),
        "the resumed move: {status}\n{}\n{}",
        mover.output(),
        cluster.logs()
    );
    let log = cluster.nodes[source].log_text();
    assert!(
        count_lines(&log[before_restart.len()..], "cluster: moving slots") >= 1,
        "the restarted source did not move the range again\n{}",
        cluster.logs()
    );
    let status = wait_settled(&cluster);
    let want = BTreeSet::from(["node-2".to_string()]);
    assert_eq!(owners(&status, 0, 4095), want, "{status}");
    on_node(&cluster.nodes[cluster.node("node-2")], &pairs);
    wait_store_keys(&cluster, source, 0, "the source drops its copy");
    wait_store_keys(
        &cluster,
        cluster.node("node-2"),
        pairs.len() as u64,
        "the target holds the range once",
    );
}

#[test]
fn kill9_target_during_move_aborts() {
    let mut cluster = Cluster::start(2);
    let pairs = pairs_in("abort", 0, 4095, BIG_RANGE_KEYS);
    load(&cluster, &pairs);
    // The target's own keys, which its drop of the partial copy must leave alone.
    let own = pairs_in("own", 8192, 16383, 500);
    load(&cluster, &own);
    let target = cluster.node("node-2");
    let before = cluster.nodes[target].store_keys().unwrap();
    assert_eq!(before, own.len() as u64);
    let mut mover = Mover::start(&cluster, "0-4095", "node-2");
    wait_until(
        "the copy reaches node-2",
        || cluster.logs(),
        || match cluster.nodes[target].store_keys()? {
            n if n > before => Ok(()),
            n => Err(format!("{n} keys")),
        },
    );
    cluster.nodes[target].kill9();
    let source_log = cluster.nodes[cluster.node("node-1")].log_text();
    assert_eq!(
        count_lines(&source_log, "cluster: range copied"),
        0,
        "the copy ended before the kill: the range needs more keys for this test\n{}",
        cluster.logs()
    );

    let status = mover.wait(&cluster);
    assert!(
        !status.success(),
        "the move succeeded with its target killed during the copy\n{}\n{}",
        mover.output(),
        cluster.logs()
    );
    let source_log = cluster.nodes[cluster.node("node-1")].log_text();
    assert!(
        source_log.contains("the move failed; aborting it"),
        "{}",
        cluster.logs()
    );
    // The range stays node-1's, whole; node-1 serves it while node-2 is down.
    let status = cluster.status();
    assert_eq!(
        status["topology"]["migrations"].as_array().map(Vec::len),
        Some(0),
        "{status}"
    );
    let want = BTreeSet::from(["node-1".to_string()]);
    assert_eq!(owners(&status, 0, 4095), want, "{status}");
    let seed = [cluster.nodes[cluster.node("node-1")].addr()];
    let mut client = cluster_client(&seed);
    for chunk in pairs.chunks(CHUNK) {
        let keys: Vec<&str> = chunk.iter().map(|(k, _)| k.as_str()).collect();
        let values = client
            .multi_get(&keys)
            .unwrap_or_else(|e| panic!("MGET: {e}\n{}", cluster.logs()));
        for ((k, v), got) in chunk.iter().zip(values) {
            assert_eq!(got.as_deref(), Some(v.as_bytes()), "{k}");
        }
    }
    on_node(&cluster.nodes[cluster.node("node-1")], &pairs);

    // Restarted, node-2 drops its partial copy and keeps its own keys.
    cluster.nodes[target].restart();
    wait_store_keys(&cluster, target, before, "the partial copy dropped");
    on_node(&cluster.nodes[target], &own);
    wait_settled(&cluster);
}

#[test]
fn lost_handover_answer_is_resolved() {
    let fault: Env = vec![(LOSE_HANDOVER_ANSWER.to_string(), "1".to_string())];
    let cluster = Cluster::start_with_env(2, |id| match id {
        "node-1" => fault.clone(),
        _ => Env::new(),
    });
    let source = cluster.node("node-1");
    let target = cluster.node("node-2");
    let pairs = pairs_in("lost", 0, 4095, 2000);
    load(&cluster, &pairs);
    // One writer on keys of the moving range (and a reader of `pairs`), across the move.
    let writers = Load::start(&cluster, 1, (0, 4095), Arc::new(pairs.clone()));
    writers.wait_progress(&cluster, PROGRESS_OPS, "before the move");
    cluster.quiver_ok(&["move-slots", "--slots", "0-4095", "--to", "node-2"]);
    writers.wait_progress(&cluster, PROGRESS_OPS, "after the move");
    let reports = writers.finish();
    assert_no_failures(&cluster, &reports);
    assert!(
        reports[0].stats.moved > 0,
        "the writer was never redirected: it did not write across the hand-over"
    );
    // The source logs the hand-over once it has resolved it and told the target, which may
    // come after the mover and the writer saw it in etcd.
    wait_until(
        "node-1 logs the fault once, then the hand-over",
        || cluster.logs(),
        || {
            let log = cluster.nodes[source].log_text();
            let fault = count_lines(&log, "test fault");
            let handed = count_lines(&log, "cluster: slots handed over");
            match (fault, handed) {
                (1, 1) => Ok(()),
                _ => Err(format!("{fault} fault lines, {handed} hand-over lines")),
            }
        },
    );

    let status = wait_settled(&cluster);
    let want = BTreeSet::from(["node-2".to_string()]);
    assert_eq!(owners(&status, 0, 4095), want, "{status}");
    // Every acknowledged write of the range is on the target...
    on_node(&cluster.nodes[target], &pairs);
    let mut written = Vec::new();
    let mut deleted = Vec::new();
    for (k, known) in &reports[0].model {
        match known {
            Known::Value(Some(v)) => written.push((k.clone(), v.clone())),
            Known::Value(None) => deleted.push(k.clone()),
            Known::Unknown => unreachable!("no operation failed"),
        }
    }
    assert!(!written.is_empty(), "the writer left nothing written");
    on_node(&cluster.nodes[target], &written);
    let deleted: Vec<(String, Option<String>)> = deleted.into_iter().map(|k| (k, None)).collect();
    read_back(&cluster, &deleted);
    // ... and the source took none after the hand-over: once its copy is dropped it holds
    // nothing (it owned only keys of the range), although the writer went on past the move.
    wait_store_keys(&cluster, source, 0, "the source's copy dropped");
}

#[test]
fn node_membership() {
    let mut cluster = Cluster::start(3);
    let pairs = pairs_in("member", 0, 16383, 3000);
    load(&cluster, &pairs);
    let expected: Vec<(String, Option<String>)> = pairs
        .iter()
        .map(|(k, v)| (k.clone(), Some(v.clone())))
        .collect();

    cluster.start_node("node-4");
    cluster.quiver_ok(&["add-node", "--node", "node-4"]);
    cluster.quiver_ok(&["rebalance"]);
    let status = wait_settled(&cluster);
    let nodes = status["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 4, "{status}");
    for n in nodes {
        let slots = n["slots"].as_u64().unwrap();
        assert!(
            (4095..=4097).contains(&slots),
            "{}: {slots} slots\n{status}",
            n["id"]
        );
    }
    read_back(&cluster, &expected);

    cluster.quiver_ok(&["remove-node", "--node", "node-1"]);
    let status = wait_settled(&cluster);
    let members: BTreeSet<&str> = status["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        members,
        BTreeSet::from(["node-2", "node-3", "node-4"]),
        "{status}"
    );
    assert!(
        !owners(&status, 0, 16383).contains("node-1"),
        "node-1 still owns slots: {status}"
    );
    for id in ["node-2", "node-3", "node-4"] {
        let node = &cluster.nodes[cluster.node(id)];
        wait_until(
            &format!("{id} knows 3 nodes"),
            || cluster.logs(),
            || node.info_has("cluster_known_nodes:3"),
        );
    }
    wait_store_keys(&cluster, cluster.node("node-1"), 0, "its ranges dropped");
    let mut client = cluster_client(&cluster.addrs_of(&["node-2", "node-3", "node-4"]));
    for chunk in pairs.chunks(CHUNK) {
        let keys: Vec<&str> = chunk.iter().map(|(k, _)| k.as_str()).collect();
        let values = client.multi_get(&keys).unwrap();
        for ((k, v), got) in chunk.iter().zip(values) {
            assert_eq!(got.as_deref(), Some(v.as_bytes()), "{k}");
        }
    }
    assert!(
        client.nodes().iter().all(|a| *a != cluster.nodes[0].addr()),
        "the client still routes to node-1: {client:?}"
    );
}

/// `node_membership` on chains of 2: `add-node` and `rebalance` give node-4 its share of
/// the heads and of the copies (it ends up in 2 chains, heading a quarter of the slots),
/// `move-slots` moves a range to the chain node-2 heads, `remove-node` takes node-1 out;
/// every chain keeps 2 members, every key stays readable, and the stores hold each key
/// exactly twice once the dropped copies are gone.
#[test]
fn node_membership_with_replicas() {
    let mut cluster = Cluster::start_failover(3, 2, 1);
    let pairs = pairs_in("rmember", 0, 16383, 3000);
    load(&cluster, &pairs);
    let expected: Vec<(String, Option<String>)> = pairs
        .iter()
        .map(|(k, v)| (k.clone(), Some(v.clone())))
        .collect();
    let copies_held = |cluster: &Cluster, want: u64| {
        wait_until(
            &format!("each key held {want} times"),
            || cluster.logs(),
            || {
                let held: u64 = cluster
                    .nodes
                    .iter()
                    .map(|n| n.store_keys())
                    .sum::<Result<u64, String>>()?;
                (held == want * pairs.len() as u64)
                    .then_some(())
                    .ok_or(format!("{held} copies"))
            },
        )
    };

    cluster.start_node("node-4");
    cluster.quiver_ok(&["add-node", "--node", "node-4"]);
    let out = cluster.quiver_ok(&["rebalance"]);
    assert!(out.contains("moved"), "{out}");
    let chains = cluster.chains().unwrap();
    assert!(chains.iter().all(|c| c.members.len() == 2), "{chains:?}");
    let in_chains = chains
        .iter()
        .filter(|c| c.members.iter().any(|m| m == "node-4"))
        .count();
    assert!(in_chains >= 2, "node-4 in {in_chains} chains: {chains:?}");
    let status = wait_settled(&cluster);
    for n in status["nodes"].as_array().unwrap() {
        let slots = n["slots"].as_u64().unwrap();
        assert!(
            (4090..=4100).contains(&slots),
            "{}: {slots}\n{status}",
            n["id"]
        );
    }
    read_back(&cluster, &expected);
    copies_held(&cluster, 2);
    assert!(cluster
        .quiver_ok(&["rebalance"])
        .contains("balanced already"));

    // A range in the middle of node-1's chain moves to the chain node-2 heads.
    cluster.quiver_ok(&["move-slots", "--slots", "100-199", "--to", "node-2"]);
    let chains = cluster.chains().unwrap();
    let of_150 = chains
        .iter()
        .find(|c| {
            c.slots.split_once('-').is_some_and(|(lo, hi)| {
                (lo.parse::<u16>().unwrap()..=hi.parse::<u16>().unwrap()).contains(&150)
            })
        })
        .unwrap();
    assert_eq!(of_150.members[0], "node-2", "{chains:?}");
    read_back(&cluster, &expected);

    cluster.quiver_ok(&["remove-node", "--node", "node-1"]);
    let chains = cluster.chains().unwrap();
    assert!(
        chains
            .iter()
            .all(|c| c.members.len() == 2 && !c.members.iter().any(|m| m == "node-1")),
        "{chains:?}"
    );
    wait_store_keys(&cluster, cluster.node("node-1"), 0, "its copies dropped");
    read_back_via(
        &mut cluster_client(&cluster.addrs_of(&["node-2", "node-3", "node-4"])),
        "a client of the nodes left",
        &cluster,
        &expected,
    );
    copies_held(&cluster, 2);
}

#[test]
fn cross_node_multiget_is_one_request_per_node() {
    let cluster = Cluster::start(3);
    let mut client = cluster.client();
    let keys: Vec<String> = (0..300).map(|i| format!("mget-{i}")).collect();
    // Every third key is left missing: its place in the answer is `None`.
    let pairs: Vec<(&str, String)> = keys
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 3 != 0)
        .map(|(i, k)| (k.as_str(), format!("value-{i}")))
        .collect();
    client.multi_set(&pairs).unwrap();
    let owners: BTreeSet<&str> = keys
        .iter()
        .map(|k| client.slot_owner(key_slot(k.as_bytes())).unwrap())
        .collect();
    assert_eq!(owners.len(), 3, "the keys span every node");

    let before = client.stats();
    let values = client.multi_get(&keys).unwrap();
    let after = client.stats();
    assert_eq!(values.len(), keys.len());
    for (i, got) in values.iter().enumerate() {
        let want = (i % 3 != 0).then(|| format!("value-{i}"));
        assert_eq!(
            got.as_deref(),
            want.as_deref().map(str::as_bytes),
            "{}",
            keys[i]
        );
    }
    assert_eq!(
        after.requests - before.requests,
        3,
        "one MGET per node: {before:?} -> {after:?}"
    );
    assert_eq!(
        after.cross_slot, 0,
        "Quiver nodes accept keys of many slots"
    );
    assert_eq!((after.moved, after.retries), (0, 0), "{after:?}");
}
