//! Issue 35, the reshape crash loop: a cluster of chains of 3 grows from 3 nodes to 4
//! (`add-node`, `rebalance`) and shrinks back (`remove-node` of a member picked at random),
//! cycle after cycle, under the chain crash loop's writers (their hash tags spread over the
//! whole slot space, so that ranges that change chains hold some), with a kill -9 and
//! immediate restart of a participant at a random moment of each change: the node added or
//! removed, another node, or the elected manager (or nobody). Whatever step it hits — a chain
//! split, a join, a head hand-over, a splice — the change must still complete, and once the
//! cluster has settled (every chain of 3, no target, nobody leaving, every node serving the
//! topology) every key is read from every member of its chain and checked against the
//! writers' models as in the chain crash loop: nothing acknowledged lost, nothing wrong.
//!
//! ```text
//! QUIVER_RESHAPE_KILL_CYCLES=200 cargo test -p quiver --release --test cluster -- --ignored \
//!     reshape_crash_loop_long --nocapture
//! ```

use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use quiver_store::slot::{key_slot, SLOTS};
use quiver_testkit::rng::{seed_from_env_or, Rng};
use quiver_testkit::wait_until;

use super::tally::median_max;
use super::{verify, Writer, GROUPS, MANAGERS, REPLICAS, WRITERS};
use crate::harness::Cluster;

/// Nodes before each grow (after each shrink).
const NODES: usize = 3;
/// Cycles of the CI test (grow, shrink, ...).
const CI_CYCLES: usize = 6;
/// The long run's cycles: `QUIVER_RESHAPE_KILL_CYCLES`, by default `LONG_CYCLES_DEFAULT`.
const CYCLES_ENV: &str = "QUIVER_RESHAPE_KILL_CYCLES";
const LONG_CYCLES_DEFAULT: usize = 200;
/// The kills' choices (fixed: `QUIVER_RESHAPE_KILL_SEED` for another).
const SEED: u64 = 0x2E5A_9E35;
const SEED_ENV: &str = "QUIVER_RESHAPE_KILL_SEED";
/// The load runs this long before the change starts.
const LOAD_BEFORE: Duration = Duration::from_millis(300);
/// The kill comes up to this long into the change (a change takes 0.5-2 s unhindered).
const KILL_WITHIN_MS: u64 = 1500;

#[test]
fn reshape_crash_loop() {
    run(CI_CYCLES);
}

#[test]
#[ignore = "long: 200 grow/shrink cycles with kills; run by hand in release"]
fn reshape_crash_loop_long() {
    let cycles = std::env::var(CYCLES_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(LONG_CYCLES_DEFAULT);
    run(cycles);
}

/// Who a cycle kills.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Victim {
    Nobody,
    /// The node added or removed.
    Moving,
    /// Another member.
    Staying,
    Manager,
}

const VICTIMS: [Victim; 4] = [
    Victim::Nobody,
    Victim::Moving,
    Victim::Staying,
    Victim::Manager,
];

#[derive(Default)]
struct Tally {
    cycles: usize,
    acked: u64,
    in_flight: u64,
    /// How long each change took (the CLI's run), by kind.
    grows: Vec<Duration>,
    shrinks: Vec<Duration>,
    /// Kills by [`VICTIMS`] index.
    kills: [usize; 4],
    /// The most chains a cycle ended with (merged: it does not grow with the cycles).
    chains_most: usize,
}

fn run(cycles: usize) {
    let started = Instant::now();
    let seed = seed_from_env_or(SEED_ENV, SEED);
    let mut cluster = Cluster::start_failover(NODES, REPLICAS as u8, MANAGERS);
    let mut writers: Vec<Writer> = (0..WRITERS)
        .map(|id| Writer::new(id, seed, &spread_tags(id)))
        .collect();
    let mut rng = Rng::new(seed);
    let mut tally = Tally::default();
    let mut next_id = NODES + 1;
    eprintln!("reshape crash loop: {cycles} cycles");
    for cycle in 0..cycles {
        reshape_cycle(
            &mut cluster,
            &mut writers,
            &mut rng,
            cycle,
            &mut next_id,
            &mut tally,
        );
        tally.cycles += 1;
    }
    assert!(tally.acked > 0, "nothing acknowledged\n{}", cluster.logs());
    let (grow_median, grow_max) = median_max(&tally.grows);
    let (shrink_median, shrink_max) = median_max(&tally.shrinks);
    eprintln!(
        "reshape crash loop: {} cycles ({} grows, {} shrinks), {} acknowledged operations \
         checked, 0 lost, 0 wrong, {} in flight at kills; grow {grow_median:.2}/{grow_max:.2} s, \
         shrink {shrink_median:.2}/{shrink_max:.2} s (median/max); kills: {} none, {} of the \
         node added or removed, {} of another node, {} of the elected manager; at most {} \
         chains at a cycle's end ({:.1} minutes)",
        tally.cycles,
        tally.grows.len(),
        tally.shrinks.len(),
        tally.acked,
        tally.in_flight,
        tally.kills[0],
        tally.kills[1],
        tally.kills[2],
        tally.kills[3],
        tally.chains_most,
        started.elapsed().as_secs_f64() / 60.0
    );
}

/// Writer `writer`'s hash tags: tag `g` in the `writer * GROUPS + g`-th of `WRITERS * GROUPS`
/// equal parts of the slot space, so that the tags cover it evenly.
fn spread_tags(writer: usize) -> Vec<String> {
    let parts = (WRITERS * GROUPS) as u32;
    (0..GROUPS)
        .map(|g| {
            let part = (writer * GROUPS + g) as u32;
            let (lo, hi) = (part * SLOTS / parts, (part + 1) * SLOTS / parts);
            (0..)
                .map(|i| format!("rs{writer}.{g}.{i}"))
                .find(|tag| {
                    let slot = u32::from(key_slot(tag.as_bytes()));
                    (lo..hi).contains(&slot)
                })
                .unwrap()
        })
        .collect()
}

/// The members of the topology now.
fn members(cluster: &Cluster) -> Vec<String> {
    cluster.status()["topology"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["id"].as_str().map(str::to_string))
        .collect()
}

/// One cycle: the load, the change (a grow with 3 members, else a shrink), a kill at a random
/// moment of it, the wait until the cluster settled, the check.
fn reshape_cycle(
    cluster: &mut Cluster,
    writers: &mut [Writer],
    rng: &mut Rng,
    cycle: usize,
    next_id: &mut usize,
    tally: &mut Tally,
) {
    let before = members(cluster);
    let grow = before.len() == NODES;
    let moving = if grow {
        let id = format!("node-{next_id}");
        *next_id += 1;
        cluster.start_node(&id);
        id
    } else {
        before[rng.index(before.len())].clone()
    };
    let steps: Vec<Vec<String>> = if grow {
        vec![
            vec!["add-node".into(), "--node".into(), moving.clone()],
            vec!["rebalance".into()],
        ]
    } else {
        vec![vec!["remove-node".into(), "--node".into(), moving.clone()]]
    };
    let victim = VICTIMS[rng.index(VICTIMS.len())];
    let victim_node = match victim {
        Victim::Moving => Some(cluster.node(&moving)),
        Victim::Staying => {
            let others: Vec<&String> = before.iter().filter(|m| **m != moving).collect();
            Some(cluster.node(others[rng.index(others.len())]))
        }
        Victim::Nobody | Victim::Manager => None,
    };
    let kill_at = Duration::from_millis(rng.below(KILL_WITHIN_MS + 1));
    let seeds = cluster.addrs_of(&before);
    let etcd = cluster.etcd.url();
    let stop = AtomicBool::new(false);
    let (took, chains) = std::thread::scope(|s| {
        let _stop = super::StopOnDrop(&stop);
        for w in writers.iter_mut() {
            let (seeds, stop) = (&seeds, &stop);
            s.spawn(move || w.write_until(seeds, stop));
        }
        std::thread::sleep(LOAD_BEFORE);
        let cli = s.spawn(|| {
            let started = Instant::now();
            for args in &steps {
                let (status, out, err) = quiver_testkit::process::run(
                    std::process::Command::new(env!("CARGO_BIN_EXE_quiver"))
                        .arg("cluster")
                        .args(args)
                        .args(["--etcd", &etcd]),
                    &format!("quiver cluster {}", args.join(" ")),
                    quiver_testkit::WAIT * 3,
                );
                if !status.success() {
                    return Err(format!("{args:?}: {status}\n{out}{err}"));
                }
            }
            Ok(started.elapsed())
        });
        std::thread::sleep(kill_at);
        match (victim, victim_node) {
            (_, Some(i)) => {
                cluster.nodes[i].kill9();
                cluster.nodes[i].restart();
            }
            (Victim::Manager, _) => {
                if let Some(m) = cluster.elected_manager() {
                    cluster.managers[m].kill9();
                    cluster.managers[m].restart();
                }
            }
            _ => {}
        }
        let took = cli.join().unwrap();
        let took = took.unwrap_or_else(|e| panic!("cycle {cycle}: {e}\n{}", cluster.logs()));
        wait_settled(cluster, cycle);
        // Still under the load: the parts a grow split merge again once the cluster is whole.
        (took, cluster.wait_chains_merged())
    });
    if !grow {
        let removed = cluster.node(&moving);
        cluster.nodes[removed].kill9();
    }
    let (mut acked, mut unknown) = (0, 0);
    for w in writers.iter_mut() {
        if let Some(f) = w.finding.take() {
            super::fail(cluster, cycle, &f);
        }
        acked += std::mem::take(&mut w.acked);
        unknown += std::mem::take(&mut w.unknown);
        // Counted by the chain crash loop only.
        (w.refused, w.hash_acked, w.hash_unknown) = (0, 0, 0);
    }
    if let Err(f) = verify(cluster, writers) {
        super::fail(cluster, cycle, &f);
    }
    tally.acked += acked;
    tally.in_flight += unknown;
    tally.kills[VICTIMS.iter().position(|v| *v == victim).unwrap()] += 1;
    tally.chains_most = tally.chains_most.max(chains);
    if grow {
        tally.grows.push(took);
    } else {
        tally.shrinks.push(took);
    }
    eprintln!(
        "cycle {cycle}: {} {moving}, kill -9 of {victim:?} {kill_at:?} into it: {acked} \
         acknowledged, {unknown} in flight; took {:.2} s, {chains} chains once merged",
        if grow { "grow by" } else { "shrink by" },
        took.as_secs_f64()
    );
}

/// Waits until every chain has [`REPLICAS`] members and no join, no target is left, nobody
/// is leaving, and every member is alive at its run, serving the topology's epoch (after
/// [`Cluster::wait_members_serving`]: a restarted node's repair is seen first).
fn wait_settled(cluster: &Cluster, cycle: usize) {
    cluster.wait_members_serving();
    wait_until(
        &format!("cycle {cycle}: the cluster settled"),
        || cluster.logs(),
        || {
            let status = cluster.try_status()?;
            let topology = &status["topology"];
            let epoch = topology["epoch"].as_u64().ok_or("no epoch")?;
            for busy in ["targets", "leaving", "migrations"] {
                if topology[busy].as_array().is_some_and(|a| !a.is_empty()) {
                    return Err(format!("{busy}: {}", topology[busy]));
                }
            }
            for shard in topology["shards"].as_array().ok_or("no shards")? {
                let members = shard["chain"].as_array().map_or(0, Vec::len);
                if members != REPLICAS || !shard["joining"].is_null() {
                    return Err(format!("{shard}"));
                }
            }
            for node in status["nodes"].as_array().ok_or("no nodes")? {
                let serving = node["alive"] == true
                    && node["restarted"] == false
                    && node["expelled"] == false
                    && node["epoch"].as_u64() == Some(epoch);
                if !serving {
                    return Err(format!("{node} (epoch {epoch})"));
                }
            }
            Ok(())
        },
    );
}
