//! Issue 14, the cluster's crash loop: a 3-node cluster with chains of 3 (every node in every
//! chain), 2-s leases and two `quiver manager`s, through cycles of kill -9 and restart of a node
//! under a writing load, every key checked on every member of its chain after each
//! (`chain_crash_loop` in CI, the long run `chain_crash_loop_long`).
//!
//! Each cycle: [`WRITERS`] threads write through the cluster client — SET, MSET of registers
//! of one hash tag, INCR, HSET, HDEL and HINCRBY of hashes (`hash`), DEL — each on keys of its
//! own, one operation at a time, keeping every outcome (`model`). After a random moment a node
//! is killed with SIGKILL: the head, the middle or the tail (in turn) of a chain picked at
//! random; some cycles kill the elected manager with it, some restart the node only once the
//! manager has taken it out of its chains (its lease lapsed) rather than at once; some send
//! FLUSHALL to every node while the writers wait, the kill following within a few milliseconds
//! (before, during or after its replies). The node restarts on its data directory; the manager
//! takes it out of every chain (a new run) and it rejoins each as tail, streamed the range.
//! Once every chain is whole again (every node alive at its run, serving the topology's epoch),
//! the writers stop and every key is read (READONLY; GET, HGETALL of a hash) from every member
//! of its chain:
//!
//! - every acknowledged write is there, on every member; of the writes in flight at the kill
//!   (their connection broke), any may have taken effect after the last acknowledged one —
//!   nothing older shows, nothing never written; a counter lies between its acknowledged value
//!   and that plus the INCRs in flight after it; a hash shows its fields (in insertion order
//!   while it is small; one HSET in six or so makes it large, `hash`),
//!   as its acknowledged writes and any of the in-flight ones after them leave them; replies
//!   (INCR's value, DEL's count, HSET's and HDEL's counts, HINCRBY's sum) fit too;
//! - the members agree (a hash: the same fields, in the same order while small), an MSET in flight shows on
//!   all its keys or on none, and a FLUSHALL in flight on every key of a range or on none (an
//!   acknowledged one on every key, hashes included).
//!
//! What the members show is where the next cycle starts. The first finding fails the test with
//! the cycle, key, member, what was expected and found, and the processes' log tails.
//!
//! ```text
//! QUIVER_CHAIN_KILL_CYCLES=1000 cargo test -p quiver --release --test cluster -- --ignored \
//!     chain_crash_loop_long --nocapture
//! ```

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use quiver_client::{ClusterClient, Connection, Error, Value};
use quiver_testkit::acked::{Finding, Verdict};
use quiver_testkit::rng::{seed_from_env_or, Rng};
use quiver_testkit::wait_until;

use crate::harness::{cluster_client, connect, Cluster};
use crate::history::{outcome_of_error, Outcome as Recorded, REFUSALS};
use crate::manager::{chain_of, Chain};

mod hash;
mod model;
mod reshape;
mod tally;

use hash::{Fields, HashWrite};
use model::{
    agree, flush_whole, mset_whole, value, FlushedKey, Held, KeyKind, KeyModel, MsetInFlight,
    Outcome, Write,
};
use tally::Tally;

/// Nodes, chain length, managers: every node in every chain, a manager to take over.
const NODES: usize = 3;
const REPLICAS: usize = 3;
const MANAGERS: usize = 2;
/// Threads writing, each through a cluster client of its own, on keys of its own.
const WRITERS: usize = 4;
/// Each writer's hash tags (spread over the chains: tag `g` in chain `g % chains`), and each
/// tag's registers, counters and hashes (its keys, in this order).
const GROUPS: usize = 3;
const REGISTERS: usize = 3;
const COUNTERS: usize = 1;
const HASHES: usize = 1;
const GROUP_KEYS: usize = REGISTERS + COUNTERS + HASHES;
/// Most keys of one MSET (at least 2, at most [`REGISTERS`]).
const MSET_KEYS_MAX: u64 = 3;
/// The load's mix, in percent (the rest: DEL of any key of a group, a hash one time in
/// [`GROUP_KEYS`]).
const SET_PERCENT: u64 = 25;
const MSET_PERCENT: u64 = 15;
const INCR_PERCENT: u64 = 20;
const HSET_PERCENT: u64 = 12;
const HDEL_PERCENT: u64 = 8;
const HINCRBY_PERCENT: u64 = 8;
const _: () = assert!(
    SET_PERCENT + MSET_PERCENT + INCR_PERCENT + HSET_PERCENT + HDEL_PERCENT + HINCRBY_PERCENT < 100
);
/// Most filler bytes after a value's name.
const PAD_MAX: u64 = 64;
/// The kill comes this long after the load starts, plus up to the spread (uniform).
const LOAD_BEFORE_KILL_MIN_MS: u64 = 200;
const LOAD_BEFORE_KILL_SPREAD_MS: u64 = 800;
/// One cycle in this many kills the elected manager too (the other one takes over).
const MANAGER_KILL_ONE_IN: u64 = 4;
/// One cycle in this many restarts the node only once it is out of its chains (its lease ran
/// out), the others at once (the manager sees its new run).
const LATE_RESTART_ONE_IN: u64 = 6;
/// One cycle in this many sends FLUSHALL to every node once the writers stopped, the kill
/// following it by up to the spread (uniform), so that it lands before, during or after the
/// flush; the writers start again after it.
const FLUSH_ONE_IN: u64 = 4;
const FLUSH_KILL_SPREAD_MS: u64 = 4;
/// The kills' choices and the writers' mixes (fixed: `QUIVER_CHAIN_KILL_SEED` for another).
const SEED: u64 = 0xC4A1_4B11;
const SEED_ENV: &str = "QUIVER_CHAIN_KILL_SEED";
/// Cycles of the CI test.
const CI_CYCLES: usize = 12;
/// The long run's cycles: `QUIVER_CHAIN_KILL_CYCLES`, by default `LONG_CYCLES_DEFAULT`.
const CYCLES_ENV: &str = "QUIVER_CHAIN_KILL_CYCLES";
const LONG_CYCLES_DEFAULT: usize = 1_000;
/// Pause between two reads of a member that refused one (not serving the new epoch yet).
const READ_RETRY_PAUSE: Duration = Duration::from_millis(20);

/// What a kill aims at: a chain's head, middle or tail (in turn, so each comes a third of the
/// time).
const ROLES: [&str; 3] = ["head", "middle", "tail"];

#[test]
fn chain_crash_loop() {
    run(CI_CYCLES);
}

#[test]
#[ignore = "long: 1000 kill cycles of a 3-node chain; run by hand in release"]
fn chain_crash_loop_long() {
    let cycles = std::env::var(CYCLES_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(LONG_CYCLES_DEFAULT);
    run(cycles);
}

/// One writer: its keys (group `g`'s at `g * GROUP_KEYS`), what they may hold, and this
/// cycle's outcomes.
struct Writer {
    id: usize,
    rng: Rng,
    next_op: u64,
    keys: Vec<KeyModel>,
    /// The MSETs in flight this cycle (checked whole, then forgotten).
    msets: Vec<MsetInFlight>,
    /// This cycle's FLUSHALL, when in flight: its write number, and which keys could not be
    /// absent before it (checked whole by range, then forgotten).
    flush: Option<(u64, Vec<bool>)>,
    /// A reply no state of its key explains.
    finding: Option<Finding>,
    acked: u64,
    unknown: u64,
    refused: u64,
    /// Of `acked` and `unknown`, the operations on hash keys.
    hash_acked: u64,
    hash_unknown: u64,
    /// Why operations ended unknown (the error's text, the number of times).
    reasons: BTreeMap<String, u64>,
}

/// The commands of the load.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Command {
    Set,
    Mset,
    Incr,
    Del,
    /// HSET, HDEL or HINCRBY.
    Hash(HashWrite),
}

impl Writer {
    /// Writer `id` with hash tags `tags` (one per group).
    fn new(id: usize, seed: u64, tags: &[String]) -> Writer {
        let mut keys = Vec::new();
        for tag in tags {
            for r in 0..REGISTERS {
                keys.push(KeyModel::new(format!("{{{tag}}}r{r}"), KeyKind::Register));
            }
            for n in 0..COUNTERS {
                keys.push(KeyModel::new(format!("{{{tag}}}n{n}"), KeyKind::Counter));
            }
            for h in 0..HASHES {
                keys.push(KeyModel::new(format!("{{{tag}}}h{h}"), KeyKind::Hash));
            }
        }
        Writer {
            id,
            rng: Rng::new(seed ^ (id as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
            next_op: 1,
            keys,
            msets: Vec::new(),
            flush: None,
            finding: None,
            acked: 0,
            unknown: 0,
            refused: 0,
            hash_acked: 0,
            hash_unknown: 0,
            reasons: BTreeMap::new(),
        }
    }

    /// Writes until `stop` (or a reply the model cannot explain).
    fn write_until(&mut self, seeds: &[String], stop: &AtomicBool) {
        let mut client = cluster_client(seeds);
        while !stop.load(Ordering::Relaxed) && self.finding.is_none() {
            self.step(&mut client);
        }
    }

    /// One operation: chosen, sent, its outcome applied to its keys' models.
    fn step(&mut self, client: &mut ClusterClient) {
        let group = self.rng.index(GROUPS) * GROUP_KEYS;
        let op = self.next_op;
        self.next_op += 1;
        let value = value(self.id, op, self.rng.below(PAD_MAX + 1) as usize);
        let hash = group + REGISTERS + COUNTERS + self.rng.index(HASHES);
        let roll = self.rng.below(100);
        // Each command's share of the mix in turn: the roll falls in one (or in the rest).
        let mut bound = 0;
        let mut falls_in = |share: u64| {
            bound += share;
            roll < bound
        };
        let (command, keys) = if falls_in(SET_PERCENT) {
            (Command::Set, vec![group + self.rng.index(REGISTERS)])
        } else if falls_in(MSET_PERCENT) {
            // 2 or more distinct registers: a random rotation of the group's.
            let n = 2 + self.rng.below(MSET_KEYS_MAX - 1) as usize;
            let first = self.rng.index(REGISTERS);
            let keys = (0..n).map(|j| group + (first + j) % REGISTERS).collect();
            (Command::Mset, keys)
        } else if falls_in(INCR_PERCENT) {
            let counter = group + REGISTERS + self.rng.index(COUNTERS);
            (Command::Incr, vec![counter])
        } else if falls_in(HSET_PERCENT) {
            // The value is this write's: each field it sets names it.
            let write = HashWrite::set(&mut self.rng, value.clone());
            (Command::Hash(write), vec![hash])
        } else if falls_in(HDEL_PERCENT) {
            (Command::Hash(HashWrite::del(&mut self.rng)), vec![hash])
        } else if falls_in(HINCRBY_PERCENT) {
            (Command::Hash(HashWrite::incr_by(&mut self.rng)), vec![hash])
        } else {
            (Command::Del, vec![group + self.rng.index(GROUP_KEYS)])
        };
        let name = match &command {
            Command::Set => "SET",
            Command::Mset => "MSET",
            Command::Incr => "INCR",
            Command::Del => "DEL",
            Command::Hash(w) => w.command(),
        };
        let hash_args = match &command {
            Command::Hash(w) => w.args(),
            _ => Vec::new(),
        };
        let mut args: Vec<&[u8]> = vec![name.as_bytes()];
        for &k in &keys {
            args.push(self.keys[k].name.as_bytes());
            if matches!(command, Command::Set | Command::Mset) {
                args.push(value.as_bytes());
            }
        }
        args.extend(hash_args.iter().map(|a| a.as_bytes()));
        let reply = client.command(&args, 1);
        let outcome = match self.outcome(&command, reply) {
            Ok(outcome) => outcome,
            Err(found) => {
                let key = &self.keys[keys[0]];
                self.finding = Some(Finding {
                    verdict: Verdict::Wrong,
                    key: key.name.clone(),
                    member: format!("the reply to {name} (write {op})"),
                    expected: key.expected(),
                    found,
                });
                return;
            }
        };
        let on_hash = u64::from(self.keys[keys[0]].kind == KeyKind::Hash);
        match outcome {
            Outcome::Refused => self.refused += 1,
            Outcome::Unknown => {
                self.unknown += 1;
                self.hash_unknown += on_hash;
            }
            _ => {
                self.acked += 1;
                self.hash_acked += on_hash;
            }
        }
        if command == Command::Mset && outcome == Outcome::Unknown {
            self.msets.push(MsetInFlight {
                op,
                keys: keys.clone(),
            });
        }
        let write = match command {
            Command::Set | Command::Mset => Write::Set(value),
            Command::Incr => Write::Incr,
            Command::Del => Write::Del,
            Command::Hash(w) => Write::Hash(w),
        };
        for k in keys {
            if let Err(f) = self.keys[k].apply(op, &write, &outcome) {
                self.finding = Some(f);
                return;
            }
        }
    }

    /// A FLUSHALL (sent while this writer waited) ended with `outcome`: the next write of
    /// every key.
    fn flushed(&mut self, outcome: &Outcome) {
        let op = self.next_op;
        self.next_op += 1;
        let telling: Vec<bool> = self.keys.iter().map(|k| !k.may_be_absent()).collect();
        for key in &mut self.keys {
            if let Err(f) = key.apply(op, &Write::Flush, outcome) {
                self.finding.get_or_insert(f);
            }
        }
        if *outcome == Outcome::Unknown {
            self.flush = Some((op, telling));
        }
    }

    /// The outcome of `command`'s reply; `Err`: a reply of the wrong shape.
    fn outcome(
        &mut self,
        command: &Command,
        reply: quiver_client::Result<Value>,
    ) -> Result<Outcome, String> {
        let e = match reply {
            Ok(Value::Simple(s))
                if s == "OK" && matches!(command, Command::Set | Command::Mset) =>
            {
                return Ok(Outcome::Ok)
            }
            Ok(Value::Integer(n)) if *command == Command::Del => return Ok(Outcome::Deleted(n)),
            Ok(Value::Integer(n)) if *command == Command::Incr => {
                return Ok(Outcome::Incremented(n))
            }
            Ok(Value::Integer(n)) if matches!(command, Command::Hash(_)) => {
                return Ok(Outcome::Answered(n))
            }
            Ok(other) => return Err(format!("the reply {other:?}")),
            Err(e) => e,
        };
        // A refused connection sent nothing (a broken one is a connection reset or closed):
        // the cluster client returns it once its retries on other nodes ran out.
        if let Error::Io(io) = &e {
            if io.kind() == std::io::ErrorKind::ConnectionRefused {
                return Ok(Outcome::Refused);
            }
        }
        Ok(match outcome_of_error(&e) {
            Recorded::Fail(_) => Outcome::Refused,
            Recorded::Unknown(why) => {
                *self.reasons.entry(why).or_default() += 1;
                Outcome::Unknown
            }
            Recorded::Ok(_) => unreachable!("an error is not an ok outcome"),
        })
    }
}

/// Sets the flag when dropped: the writers stop even when the cycle fails (a panic), so the
/// scope they run in can end.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// The chains in etcd now (by `quiver cluster status`).
fn chains(cluster: &Cluster) -> Vec<Chain> {
    cluster
        .chains()
        .unwrap_or_else(|e| panic!("the chains: {e}\n{}", cluster.logs()))
}

/// A hash tag per group of each writer, group `g` in the chain `g % chains` (so that every
/// writer writes to every chain).
fn tags(chains: &[Chain], writer: usize) -> Vec<String> {
    (0..GROUPS)
        .map(|g| {
            let chain = &chains[g % chains.len()];
            (0..)
                .map(|i| format!("kl{writer}.{g}.{i}"))
                .find(|tag| std::ptr::eq(chain_of(chains, &format!("{{{tag}}}")), chain))
                .unwrap()
        })
        .collect()
}

/// `cycles` kill cycles; prints the tally.
fn run(cycles: usize) {
    let started = Instant::now();
    let seed = seed_from_env_or(SEED_ENV, SEED);
    let mut cluster = Cluster::start_failover(NODES, REPLICAS as u8, MANAGERS);
    let first = chains(&cluster);
    let mut writers: Vec<Writer> = (0..WRITERS)
        .map(|id| Writer::new(id, seed, &tags(&first, id)))
        .collect();
    let mut rng = Rng::new(seed);
    let mut tally = Tally::default();
    eprintln!("chain crash loop: {cycles} cycles");
    for cycle in 0..cycles {
        kill_cycle(&mut cluster, &mut writers, &mut rng, cycle, &mut tally);
        tally.cycles += 1;
    }
    for w in &writers {
        for (why, n) in &w.reasons {
            *tally.reasons.entry(why.clone()).or_default() += n;
        }
    }
    assert!(tally.acked > 0, "nothing acknowledged\n{}", cluster.logs());
    eprintln!("{}", tally.line());
    eprintln!("{}", tally.details());
    eprintln!("({:.1} minutes)", started.elapsed().as_secs_f64() / 60.0);
}

/// One cycle: the load, a kill at a random moment, the restart, the wait until every chain
/// is whole, the check.
fn kill_cycle(
    cluster: &mut Cluster,
    writers: &mut [Writer],
    rng: &mut Rng,
    cycle: usize,
    tally: &mut Tally,
) {
    let before = chains(cluster);
    let role = cycle % ROLES.len();
    let chain = &before[rng.index(before.len())];
    let victim_id = match role {
        0 => chain.members[0].clone(),
        1 => chain.members[chain.members.len() / 2].clone(),
        _ => chain.members[chain.members.len() - 1].clone(),
    };
    let positions: Vec<&str> = before
        .iter()
        .map(|c| match c.members.iter().position(|m| *m == victim_id) {
            Some(0) => "head",
            Some(p) if p + 1 == c.members.len() => "tail",
            Some(_) => "middle",
            None => "out",
        })
        .collect();
    let victim = cluster.node(&victim_id);
    let kill_manager = rng.below(MANAGER_KILL_ONE_IN) == 0;
    let late = rng.below(LATE_RESTART_ONE_IN) == 0;
    let load_for =
        Duration::from_millis(LOAD_BEFORE_KILL_MIN_MS + rng.below(LOAD_BEFORE_KILL_SPREAD_MS + 1));
    let flush = (rng.below(FLUSH_ONE_IN) == 0)
        .then(|| Duration::from_millis(rng.below(FLUSH_KILL_SPREAD_MS + 1)));
    let manager = kill_manager.then(|| elected_manager(cluster));
    let kill = |cluster: &mut Cluster| {
        if let Some(m) = manager {
            cluster.managers[m].kill9();
        }
        cluster.nodes[victim].kill9();
        Instant::now()
    };
    // A flush cycle stops the load before the FLUSHALL and the kill, and starts it again
    // after; the others kill under the load.
    let mut flushed = None;
    let mut killed = None;
    if let Some(delay) = flush {
        loaded(cluster, writers, |_| std::thread::sleep(load_for));
        let (outcome, at) = flush_all(cluster, delay, kill);
        for w in writers.iter_mut() {
            w.flushed(&outcome);
        }
        flushed = Some(outcome);
        killed = Some(at);
    }
    let (whole, spread) = loaded(cluster, writers, |cluster| {
        let killed = killed.unwrap_or_else(|| {
            std::thread::sleep(load_for);
            kill(cluster)
        });
        if late {
            cluster.wait_out_of_chains(&victim_id);
        }
        cluster.nodes[victim].restart();
        if let Some(m) = manager {
            cluster.managers[m].restart();
        }
        wait_whole(cluster, &victim_id, &before);
        (killed.elapsed(), cluster.wait_heads_spread())
    });
    let (mut acked, mut unknown, mut refused) = (0, 0, 0);
    for w in writers.iter_mut() {
        if let Some(f) = w.finding.take() {
            fail(cluster, cycle, &f);
        }
        acked += std::mem::take(&mut w.acked);
        unknown += std::mem::take(&mut w.unknown);
        refused += std::mem::take(&mut w.refused);
        tally.hash_acked += std::mem::take(&mut w.hash_acked);
        tally.hash_in_flight += std::mem::take(&mut w.hash_unknown);
    }
    if let Err(f) = verify(cluster, writers) {
        fail(cluster, cycle, &f);
    }
    tally.large_hashes += writers
        .iter()
        .flat_map(|w| &w.keys)
        .filter(|k| k.holds_large_hash())
        .count() as u64;
    tally.acked += acked;
    tally.in_flight += unknown;
    tally.refused += refused;
    tally.wholes.push(whole);
    tally.spreads.push(spread);
    tally.same_position += usize::from(positions.iter().all(|p| *p == positions[0]));
    tally.head_of_all += usize::from(positions.iter().all(|p| *p == "head"));
    tally.roles[role] += 1;
    tally.heads += usize::from(positions.contains(&"head"));
    tally.manager_kills += usize::from(kill_manager);
    tally.late_restarts += usize::from(late);
    tally.flushes_acked += usize::from(flushed == Some(Outcome::Ok));
    tally.flushes_in_flight += usize::from(flushed == Some(Outcome::Unknown));
    eprintln!(
        "cycle {cycle}: kill -9 of {victim_id} (aimed at a {}; {} in the chains){}{}{}: {acked} \
         acknowledged, {unknown} in flight, {refused} refused; whole after {:.2} s, heads \
         spread {:.2} s later",
        ROLES[role],
        positions.join("/"),
        if kill_manager {
            ", with the elected manager"
        } else {
            ""
        },
        if late { ", restarted once out" } else { "" },
        match flushed {
            Some(Outcome::Ok) => ", after a FLUSHALL acknowledged",
            Some(_) => ", with a FLUSHALL in flight",
            None => "",
        },
        whole.as_secs_f64(),
        spread.as_secs_f64()
    );
}

/// Runs `f` under the writers' load; they stop when it returns (or panics).
fn loaded<T>(
    cluster: &mut Cluster,
    writers: &mut [Writer],
    f: impl FnOnce(&mut Cluster) -> T,
) -> T {
    let seeds: Vec<String> = cluster.nodes.iter().map(|n| n.addr()).collect();
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let _stop = StopOnDrop(&stop);
        for w in writers.iter_mut() {
            let (seeds, stop) = (&seeds, &stop);
            s.spawn(move || w.write_until(seeds, stop));
        }
        f(cluster)
    })
}

/// FLUSHALL sent to every node at once (each empties the chains it heads, as a cluster
/// client's FLUSHALL does), `kill` called `delay` after; its outcome: `Ok` when every node
/// answered OK, else `Unknown` (a flush refused by one node may have emptied the ranges of
/// another), and the kill's instant.
fn flush_all(
    cluster: &mut Cluster,
    delay: Duration,
    kill: impl FnOnce(&mut Cluster) -> Instant,
) -> (Outcome, Instant) {
    let conns: Vec<Connection> = cluster
        .nodes
        .iter()
        .map(|n| connect(&n.addr()).unwrap_or_else(|e| panic!("{}: {e}", n.addr())))
        .collect();
    std::thread::scope(|s| {
        let replies: Vec<_> = conns
            .into_iter()
            .map(|mut c| s.spawn(move || c.command(&[b"FLUSHALL"])))
            .collect();
        std::thread::sleep(delay);
        let killed = kill(cluster);
        let all_ok = replies
            .into_iter()
            .map(|r| r.join().expect("a FLUSHALL thread panicked"))
            .all(|r| matches!(r, Ok(Value::Simple(s)) if s == "OK"));
        let outcome = if all_ok {
            Outcome::Ok
        } else {
            Outcome::Unknown
        };
        (outcome, killed)
    })
}

/// The index of the elected manager, once one is.
fn elected_manager(cluster: &Cluster) -> usize {
    let mut elected = None;
    wait_until(
        "a manager elected",
        || cluster.logs(),
        || {
            elected = cluster.elected_manager();
            elected.map(|_| ()).ok_or_else(|| "none".to_string())
        },
    );
    elected.unwrap()
}

/// Waits until every chain is whole again after the kill of `victim`: each changed since
/// `before` (the victim left it and rejoined), of [`REPLICAS`] members, the victim among them;
/// every node alive at the run the topology names, serving its epoch, in every chain.
fn wait_whole(cluster: &Cluster, victim: &str, before: &[Chain]) {
    wait_until(
        &format!("every chain whole again, {victim} back"),
        || cluster.logs(),
        || {
            let status = cluster.try_status()?;
            let topology = &status["topology"];
            let epoch = topology["epoch"].as_u64().ok_or("no epoch")?;
            let shards = topology["shards"].as_array().ok_or("no shards")?;
            for shard in shards {
                let members: Vec<&str> = shard["chain"]
                    .as_array()
                    .ok_or("no chain")?
                    .iter()
                    .filter_map(|m| m.as_str())
                    .collect();
                let version = shard["version"].as_u64().unwrap_or(0);
                let was = before
                    .iter()
                    .find(|c| shard["slots"] == c.slots.as_str())
                    .map_or(0, |c| c.version);
                if members.len() < REPLICAS || !members.contains(&victim) || version <= was {
                    return Err(format!("{shard} (version {was} before the kill)"));
                }
            }
            for node in status["nodes"].as_array().ok_or("no nodes")? {
                let serving = node["alive"] == true
                    && node["restarted"] == false
                    && node["expelled"] == false
                    && node["epoch"].as_u64() == Some(epoch)
                    && node["chains"].as_array().map_or(0, Vec::len) == shards.len();
                if !serving {
                    return Err(format!("{node} (epoch {epoch})"));
                }
            }
            Ok(())
        },
    );
}

/// Every key of every writer, read from every member of its chain, against its model; then
/// what was read is where the next cycle starts.
fn verify(cluster: &Cluster, writers: &mut [Writer]) -> Result<(), Finding> {
    let chains = chains(cluster);
    let mut conns: BTreeMap<String, Connection> = BTreeMap::new();
    let mut origins = Vec::with_capacity(writers.len());
    let mut found = Vec::with_capacity(writers.len());
    for w in writers.iter() {
        let (o, f) = read_keys(cluster, &chains, &mut conns, &w.keys)?;
        origins.push(o);
        found.push(f);
    }
    for (w, origins) in writers.iter_mut().zip(&origins) {
        for mset in w.msets.drain(..) {
            mset_whole(&mset, &w.keys, origins)?;
        }
    }
    // A FLUSHALL in flight: the writers' keys by the range (chain) they lie in.
    let mut ranges: BTreeMap<&str, Vec<FlushedKey>> = BTreeMap::new();
    for (w, origins) in writers.iter().zip(&origins) {
        let Some((flush_op, telling)) = &w.flush else {
            continue;
        };
        for (k, key) in w.keys.iter().enumerate() {
            let chain = chain_of(&chains, &key.name);
            ranges.entry(&chain.slots).or_default().push(FlushedKey {
                key,
                flush_op: *flush_op,
                origin: origins[k],
                telling: telling[k],
            });
        }
    }
    for range in ranges.values() {
        flush_whole(range)?;
    }
    for ((w, origins), found) in writers.iter_mut().zip(origins).zip(found) {
        w.flush = None;
        for ((key, origin), value) in w.keys.iter_mut().zip(origins).zip(found) {
            key.settle(origin, value);
        }
    }
    Ok(())
}

/// `keys` read from every member of their chains: the write each one's value came from, and
/// the value (the members must agree).
fn read_keys(
    cluster: &Cluster,
    chains: &[Chain],
    conns: &mut BTreeMap<String, Connection>,
    keys: &[KeyModel],
) -> Result<(Vec<u64>, Vec<Option<Held>>), Finding> {
    let mut origins = vec![0; keys.len()];
    let mut found = vec![None; keys.len()];
    for (k, key) in keys.iter().enumerate() {
        let chain = chain_of(chains, &key.name);
        assert_eq!(chain.members.len(), REPLICAS, "{}: short", chain.slots);
        let mut seen: Vec<(&str, Option<Held>)> = Vec::new();
        for member in &chain.members {
            let value = read(cluster, conns, member, key);
            origins[k] = key.explain(member, &value)?;
            seen.push((member, value));
        }
        agree(key, &seen)?;
        found[k] = seen.pop().and_then(|(_, v)| v);
    }
    Ok((origins, found))
}

/// GET `key` (HGETALL of a hash) on `member` (a READONLY connection, kept in `conns`): a
/// refusal (the member not serving the new epoch yet) is tried again, a broken connection made
/// again, within the harness's bound.
fn read(
    cluster: &Cluster,
    conns: &mut BTreeMap<String, Connection>,
    member: &str,
    key: &KeyModel,
) -> Option<Held> {
    let addr = cluster.nodes[cluster.node(member)].addr();
    let command = match key.kind {
        KeyKind::Hash => "HGETALL",
        KeyKind::Register | KeyKind::Counter => "GET",
    };
    let key = &key.name;
    let mut got = None;
    wait_until(
        &format!("{command} {key} on {member}"),
        || cluster.logs(),
        || {
            let conn = match conns.entry(member.to_string()) {
                std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::btree_map::Entry::Vacant(e) => {
                    let mut c = connect(&addr).map_err(|e| e.to_string())?;
                    c.command(&[b"READONLY"]).map_err(|e| e.to_string())?;
                    e.insert(c)
                }
            };
            match conn.command(&[command.as_bytes(), key.as_bytes()]) {
                Ok(Value::Null) => got = Some(None),
                Ok(Value::Bulk(b)) => {
                    got = Some(Some(Held::Text(String::from_utf8_lossy(&b).into_owned())))
                }
                Ok(Value::Array(items)) => {
                    let fields = Fields::from_reply(&items)
                        .unwrap_or_else(|e| panic!("{command} {key} on {member}: {e}"));
                    got = Some(fields.map(Held::Hash));
                }
                Ok(other) => panic!("{command} {key} on {member}: {other:?}"),
                Err(e) if e.server_code().is_some_and(|c| REFUSALS.contains(&c)) => {
                    std::thread::sleep(READ_RETRY_PAUSE);
                    return Err(e.to_string());
                }
                Err(e) if e.is_connection_error() => {
                    conns.remove(member);
                    return Err(e.to_string());
                }
                Err(e) => panic!("{command} {key} on {member}: {e}\n{}", cluster.logs()),
            }
            Ok(())
        },
    );
    got.unwrap()
}

/// Fails the test on `finding` in `cycle`, with every process's log tail.
fn fail(cluster: &Cluster, cycle: usize, finding: &Finding) -> ! {
    panic!("cycle {cycle}: {finding}\n{}", cluster.logs())
}
