//! The history recorder and the linearizability checker (`history`, `tools/lincheck`) against
//! one standalone `quiver serve`: a history of concurrent clients is linearizable, a violation
//! injected into a real history is found (the check is not vacuous), and a kill -9 in the
//! middle of the recording loses no acknowledged write (its unknown outcomes are allowed to
//! have happened or not).

use std::time::{Duration, Instant};

use quiver_testkit::process::tail;

use crate::harness::{connect, Node};
use crate::history::{
    assert_linearizable, check, run_clients, write_history, Counts, KeySpace, Kind, Load, Op,
    Outcome, Recorder, Returned, Verdict,
};

/// The clients' random mix: fixed, so a failure replays the same choices (not the same
/// interleaving).
const SEED: u64 = 0x5EED_0012;
/// Concurrent clients of each test.
const CLIENTS: usize = 8;
/// Operations of each client.
const OPS_PER_CLIENT: usize = 300;
/// Key groups (hash tags), and registers and counters per group: 10 keys.
const GROUPS: usize = 2;
const REGISTERS: usize = 3;
const COUNTERS: usize = 2;
/// The kill comes once this many operations are recorded: a tenth of the load, so that the
/// clients are mid-way through it at the kill however fast the load runs (a third, seen by a
/// 50-ms poll, let a fast machine finish all of it first).
const KILL_AFTER_OPS: usize = CLIENTS * OPS_PER_CLIENT / 10;
/// How often the test looks at the recorder while it waits for the moment of the kill, and
/// the longest it waits.
const KILL_POLL: Duration = Duration::from_millis(1);
const KILL_WAIT_MAX: Duration = Duration::from_secs(60);
/// How long the killed node stays down (its clients' connection attempts fail meanwhile).
const DOWN_TIME: Duration = Duration::from_millis(300);

fn key_space() -> KeySpace {
    KeySpace::new("lin", GROUPS, REGISTERS, COUNTERS)
}

fn load() -> Load {
    Load {
        clients: CLIENTS,
        ops_per_client: OPS_PER_CLIENT,
        deadline: None,
        seed: SEED,
    }
}

/// Records `load` against `node`, every client on a connection of its own.
fn record(node: &Node, load: &Load) -> Recorder {
    let recorder = Recorder::new(key_space());
    let addr = node.addr();
    run_clients(&recorder, load, |_| connect(&addr));
    recorder
}

#[test]
fn history_of_a_single_node_is_linearizable() {
    let dir = tempfile::tempdir().unwrap();
    let node = Node::standalone(&dir.path().join("node"), "standalone", &[]);
    let recorder = record(&node, &load());
    let counts = recorder.counts();
    let expected = Counts {
        ok: CLIENTS * OPS_PER_CLIENT,
        fail: 0,
        unknown: 0,
    };
    assert_eq!(counts, expected, "\n{}", tail(&node.log()));
    let summary = assert_linearizable(&recorder, dir.path(), "single_node");
    eprintln!("single node: {counts:?}, {summary:?}");
    assert_eq!(summary.keys, GROUPS * (REGISTERS + COUNTERS), "{summary:?}");
}

/// A write of `key` (SET or MSET) acknowledged: its value, invoke and return times.
fn acknowledged_writes(ops: &[Op], key: &str) -> Vec<(String, u64, u64)> {
    ops.iter()
        .filter(|op| matches!(op.kind, Kind::Set | Kind::Mset))
        .filter(|op| matches!(op.outcome, Outcome::Ok(_)))
        .filter_map(|op| {
            let i = op.keys.iter().position(|k| k == key)?;
            Some((op.args[i].clone(), op.invoke, op.ret))
        })
        .collect()
}

#[test]
fn checker_finds_a_stale_read() {
    let dir = tempfile::tempdir().unwrap();
    let node = Node::standalone(&dir.path().join("node"), "standalone", &[]);
    let recorder = record(&node, &load());
    assert_linearizable(&recorder, dir.path(), "before_injection");

    // A register with an acknowledged write `old` that returned before another acknowledged
    // write was invoked: `old` is overwritten in every linearization, for good (every value
    // is written once).
    let ops = recorder.ops();
    let (key, old) = recorder
        .keys
        .all()
        .into_iter()
        .find_map(|key| {
            let writes = acknowledged_writes(&ops, &key);
            let (old, _, old_ret) = writes.iter().min_by_key(|w| w.2)?.clone();
            writes.iter().any(|w| w.1 > old_ret).then_some((key, old))
        })
        .expect("a register written twice, one write after the other");

    // A GET invoked after everything returned, reading `old`: a stale read.
    let invoke = recorder.now();
    recorder.push(Op {
        client: CLIENTS,
        kind: Kind::Get,
        keys: vec![key.clone()],
        args: vec![],
        invoke,
        ret: recorder.now(),
        outcome: Outcome::Ok(Returned::Value(Some(old.clone()))),
    });
    let path = dir.path().join("stale_read.jsonl");
    write_history(&recorder.ops(), &path);
    let summary = check(&path);
    assert_eq!(
        summary.result,
        Verdict::Illegal,
        "GET {key} -> {old}: {summary:?}"
    );
    assert_eq!(summary.illegal_keys, vec![key.clone()], "{summary:?}");
    assert_eq!(summary.ops, CLIENTS * OPS_PER_CLIENT + 1, "{summary:?}");
    eprintln!("stale read: GET {key} -> {old}: {summary:?}");
}

#[test]
fn history_survives_a_kill9() {
    let dir = tempfile::tempdir().unwrap();
    // Every acknowledged write synced before its reply (Redis's appendfsync always).
    let mut node = Node::standalone(
        &dir.path().join("node"),
        "kill9",
        &["--durability", "fsync"],
    );
    let recorder = Recorder::new(key_space());
    let addr = node.addr();
    let log = node.log();
    let mut restarted_at = 0;
    std::thread::scope(|s| {
        s.spawn(|| run_clients(&recorder, &load(), |_| connect(&addr)));
        let give_up = Instant::now() + KILL_WAIT_MAX;
        while recorder.len() < KILL_AFTER_OPS {
            assert!(
                Instant::now() < give_up,
                "{} of {KILL_AFTER_OPS} operations recorded before the kill\n{}",
                recorder.len(),
                tail(&log)
            );
            std::thread::sleep(KILL_POLL);
        }
        node.kill9();
        std::thread::sleep(DOWN_TIME);
        node.restart();
        restarted_at = recorder.now();
    });

    let counts = recorder.counts();
    assert_eq!(counts.total(), CLIENTS * OPS_PER_CLIENT, "{counts:?}");
    assert_eq!(counts.fail, 0, "{counts:?}");
    // Every client with operations left had a connection to the killed process.
    assert!(counts.unknown >= 1, "no operation met the kill: {counts:?}");
    let after_restart = recorder
        .ops()
        .iter()
        .filter(|op| op.invoke > restarted_at && matches!(op.outcome, Outcome::Ok(_)))
        .count();
    assert!(
        after_restart > 0,
        "no operation after the restart: {counts:?}"
    );
    let summary = assert_linearizable(&recorder, dir.path(), "kill9");
    eprintln!("kill -9: {counts:?}, {after_restart} ok after the restart, {summary:?}");
}
