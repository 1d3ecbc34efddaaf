//! Crash safety under `kill -9`.
//!
//! A child process (this test binary, re-executed to run the ignored `child_writer` test) writes
//! single keys, multi_puts, deletes and multi-partition batches in `Durability::Os` mode, with
//! background maintenance on and explicit compactions and checkpoints in between. Before each
//! write it prints `QBEGIN <version> ...`, after the call returns `QACK <version>`. The parent
//! kills it with SIGKILL at a random moment, reopens the store and checks that
//! - every acknowledged write is there (or a later write that was in flight),
//! - every batch is all-or-nothing,
//! - no value is corrupt and no read fails, and the recovery report shows no damage.
//!
//! Every value names its version and is otherwise a function of (key, version), so a read tells
//! exactly which write it came from and whether its bytes are intact. Batches always write all
//! the keys of one *group* with one version, so a group whose keys disagree is a torn batch.
//!
//! Reproduce a failure with `QUIVER_CRASH_SEED=<seed printed by the test>`.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use quiver_store::{BackendKind, Batch, Durability, Options, Store};

use crate::common::{mix64, seed_from_env, Rng};

const CHILD_DIR_ENV: &str = "QUIVER_CRASH_CHILD_DIR";
const CHILD_SEED_ENV: &str = "QUIVER_CRASH_CHILD_SEED";
const CHILD_BASE_ENV: &str = "QUIVER_CRASH_CHILD_VERSION_BASE";
const SEED_ENV: &str = "QUIVER_CRASH_SEED";

/// Kill cycles on one store directory.
const CYCLES: u64 = 120;
const PARTITIONS: u32 = 4;
/// Keys written by put, multi_put and delete.
const SINGLE_KEYS: u64 = 300;
/// Batch groups; group `g` has 3..=6 keys spread over at least two partitions.
const GROUPS: u64 = 40;
/// Operations a child performs before closing cleanly (it is normally killed long before).
const CHILD_OPS_MAX: u64 = 5_000;
/// Versions of cycle `c` are `(c + 1) * VERSION_STRIDE + op`.
const VERSION_STRIDE: u64 = 1_000_000;
/// How long one cycle may take before the test gives up on the child.
const CYCLE_TIMEOUT: Duration = Duration::from_secs(30);

fn crash_options(background: bool) -> Options {
    Options {
        partitions: PARTITIONS,
        segment_bytes: 128 << 10,
        durability: Durability::Os,
        backend: BackendKind::Mmap,
        value_len_max: 16 << 10,
        background,
        flush_interval_ms: 20,
        checkpoint_interval_ms: 100,
        compact_garbage_ratio: 0.3,
        compact_min_dead_records: 64,
        ..Options::default()
    }
}

fn single_key(i: u64) -> Vec<u8> {
    format!("single:{i:05}").into_bytes()
}

/// The keys of batch group `g`: 3..=6 keys, the second in another partition than the first.
fn group_keys(g: u64) -> Vec<Vec<u8>> {
    let n = 3 + g % 4;
    let mut keys: Vec<Vec<u8>> = Vec::new();
    for j in 0..n {
        let mut salt = 0;
        loop {
            let k = format!("group:{g:03}.{j}.{salt}").into_bytes();
            let p = quiver_store::slot::even_layout_partition(&k, PARTITIONS);
            let first = keys
                .first()
                .map(|k0| quiver_store::slot::even_layout_partition(k0, PARTITIONS));
            if j != 1 || first != Some(p) {
                keys.push(k);
                break;
            }
            salt += 1;
        }
    }
    keys
}

/// The value written to `key` by the write of `version`: `"<version>:"` then filler bytes that
/// depend on (key, version). One in ten values is 4-12 KiB (records spanning pages), the rest
/// under 1.5 KiB.
fn make_value(key: &[u8], version: u64) -> Vec<u8> {
    let s = mix64(xxhash_rust::xxh3::xxh3_64(key) ^ version.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let len = if s % 10 == 0 {
        4000 + (s >> 8) % 8000
    } else {
        (s >> 8) % 1500
    } as usize;
    let mut v = format!("{version}:").into_bytes();
    let mut rng = Rng::new(s);
    while v.len() < len {
        v.extend_from_slice(&rng.next_u64().to_le_bytes());
    }
    v
}

/// The version a stored value claims, after checking every byte of it.
fn decode_value(key: &[u8], value: &[u8], ctx: &str) -> u64 {
    let colon = value
        .iter()
        .position(|&b| b == b':')
        .unwrap_or_else(|| panic!("{ctx}: value of {} has no version prefix", show(key)));
    let version: u64 = std::str::from_utf8(&value[..colon])
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{ctx}: value of {} has a bad version prefix", show(key)));
    assert!(
        make_value(key, version) == value,
        "{ctx}: value of {} (version {version}, {} bytes) is corrupt",
        show(key),
        value.len()
    );
    version
}

fn show(key: &[u8]) -> String {
    String::from_utf8_lossy(key).into_owned()
}

// ---------------------------------------------------------------------------------------------
// The child.

/// The writer process. Does nothing unless started by `kill_9_at_random_moments`.
#[test]
#[ignore = "child process of crash::kill_9_at_random_moments"]
fn child_writer() {
    let Ok(dir) = std::env::var(CHILD_DIR_ENV) else {
        return;
    };
    let env_u64 = |name: &str| -> u64 { std::env::var(name).unwrap().parse().unwrap() };
    let mut rng = Rng::new(env_u64(CHILD_SEED_ENV));
    let base = env_u64(CHILD_BASE_ENV);
    let mut out = std::io::stdout().lock();
    let mut say = |line: String| {
        writeln!(out, "{line}").unwrap();
        out.flush().unwrap();
    };
    let fail = |what: &str, e: quiver_store::Error| -> ! {
        let mut o = std::io::stdout().lock();
        let _ = writeln!(o, "QERR {what}: {e}");
        let _ = o.flush();
        panic!("{what}: {e}");
    };
    // The test harness has printed "test crash::child_writer ... " without a newline.
    say(String::new());
    let store = Store::open(&dir, crash_options(true)).unwrap_or_else(|e| fail("open", e));
    say("QREADY".into());
    let groups: Vec<Vec<Vec<u8>>> = (0..GROUPS).map(group_keys).collect();
    for n in 0..CHILD_OPS_MAX {
        let version = base + n + 1;
        match rng.below(100) {
            0..=29 => {
                let k = single_key(rng.below(SINGLE_KEYS));
                say(format!("QBEGIN {version} put {}", show(&k)));
                let v = make_value(&k, version);
                store.put(&k, &v).unwrap_or_else(|e| fail("put", e));
                say(format!("QACK {version}"));
            }
            30..=49 => {
                let mut idx: Vec<u64> = (0..rng.range(2, 9))
                    .map(|_| rng.below(SINGLE_KEYS))
                    .collect();
                idx.sort_unstable();
                idx.dedup();
                let keys: Vec<Vec<u8>> = idx.into_iter().map(single_key).collect();
                let names: Vec<String> = keys.iter().map(|k| show(k)).collect();
                say(format!("QBEGIN {version} mput {}", names.join(" ")));
                let pairs: Vec<(Vec<u8>, Vec<u8>)> = keys
                    .iter()
                    .map(|k| (k.clone(), make_value(k, version)))
                    .collect();
                store
                    .multi_put(&pairs)
                    .unwrap_or_else(|e| fail("multi_put", e));
                say(format!("QACK {version}"));
            }
            50..=56 => {
                let k = single_key(rng.below(SINGLE_KEYS));
                say(format!("QBEGIN {version} del {}", show(&k)));
                store.delete(&k).unwrap_or_else(|e| fail("delete", e));
                say(format!("QACK {version}"));
            }
            57..=97 => {
                let g = rng.below(GROUPS);
                say(format!("QBEGIN {version} batch {g}"));
                let mut batch = Batch::new();
                for k in &groups[g as usize] {
                    batch.put(k.clone(), make_value(k, version));
                }
                let outcome = store.apply(&batch).unwrap_or_else(|e| fail("apply", e));
                assert!(outcome.is_applied());
                say(format!("QACK {version}"));
            }
            98 => {
                say("QMAINT begin checkpoint".into());
                store.checkpoint().unwrap_or_else(|e| fail("checkpoint", e));
                say("QMAINT end checkpoint".into());
            }
            _ => {
                say("QMAINT begin compact".into());
                store.compact().unwrap_or_else(|e| fail("compact", e));
                say("QMAINT end compact".into());
            }
        }
    }
    store.close().unwrap_or_else(|e| fail("close", e));
    say("QDONE".into());
}

// ---------------------------------------------------------------------------------------------
// The parent.

/// What a key (or a batch group) may hold: its last acknowledged state, or the state of a
/// later write that was in flight when a child was killed.
#[derive(Clone, Debug, Default)]
struct Possible {
    /// (version, present) of the last acknowledged write, or of the state last observed.
    /// Version 0 / absent: never written.
    acked: (u64, bool),
    /// Writes begun and never acknowledged, newer than `acked`.
    inflight: Vec<(u64, bool)>,
}

impl Possible {
    fn ack(&mut self, version: u64, present: bool) {
        self.acked = (version, present);
        self.inflight.retain(|&(v, _)| v > version);
    }

    /// Checks an observed state (`Some(version)` or absent) and makes it the known state.
    fn observe(&mut self, observed: Option<u64>, what: &str, ctx: &str) {
        let matches = |(v, present): (u64, bool)| match observed {
            Some(o) => present && o == v,
            None => !present,
        };
        let newer: Vec<(u64, bool)> = self
            .inflight
            .iter()
            .copied()
            .filter(|&(v, _)| v > self.acked.0)
            .collect();
        let state = if matches(self.acked) {
            self.acked
        } else if let Some(&s) = newer.iter().find(|&&s| matches(s)) {
            s
        } else {
            panic!(
                "{ctx}: {what} holds {observed:?}, but the last acknowledged write is {:?} \
                 (version, present) and the writes in flight were {newer:?}",
                self.acked
            );
        };
        self.acked = state;
        self.inflight.clear();
    }
}

/// A write the child began.
enum Target {
    Keys(Vec<Vec<u8>>, bool),
    Group(u64),
}

struct Model {
    singles: HashMap<Vec<u8>, Possible>,
    groups: Vec<Possible>,
    group_keys: Vec<Vec<Vec<u8>>>,
}

impl Model {
    fn new() -> Model {
        Model {
            singles: (0..SINGLE_KEYS)
                .map(|i| (single_key(i), Possible::default()))
                .collect(),
            groups: vec![Possible::default(); GROUPS as usize],
            group_keys: (0..GROUPS).map(group_keys).collect(),
        }
    }

    fn apply(&mut self, target: &Target, version: u64, acked: bool) {
        let one = |p: &mut Possible, present: bool| {
            if acked {
                p.ack(version, present);
            } else {
                p.inflight.push((version, present));
            }
        };
        match target {
            Target::Keys(keys, present) => {
                for k in keys {
                    one(self.singles.get_mut(k).expect("known key"), *present);
                }
            }
            Target::Group(g) => one(&mut self.groups[*g as usize], true),
        }
    }
}

/// Kills and reaps the child however the test ends.
struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What happened in one cycle, for the summary.
#[derive(Default)]
struct Tally {
    acks: u64,
    killed_in_compact: u64,
    killed_in_checkpoint: u64,
    killed_before_ready: u64,
    inflight_at_kill: u64,
    torn_tails: u64,
    batches_repaired: u64,
    batches_aborted: u64,
    checkpoints_ignored: u64,
    verified: u64,
    child_done: u64,
}

#[test]
fn kill_9_at_random_moments() {
    let seed = seed_from_env(SEED_ENV);
    println!("crash test seed {seed} (rerun with {SEED_ENV}={seed})");
    let started = Instant::now();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    let exe = std::env::current_exe().unwrap();
    let mut rng = Rng::new(seed);
    let mut model = Model::new();
    let mut tally = Tally::default();

    for cycle in 0..CYCLES {
        let ctx = format!("seed {seed}, cycle {cycle}");
        let child = Command::new(&exe)
            .args([
                "--exact",
                "crash::child_writer",
                "--ignored",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env(CHILD_DIR_ENV, &dir)
            .env(CHILD_SEED_ENV, mix64(seed ^ cycle).to_string())
            .env(CHILD_BASE_ENV, ((cycle + 1) * VERSION_STRIDE).to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut child = ChildGuard(child);
        let stdout = child.0.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel::<String>();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });

        // When to kill: after a random delay from the start (possibly inside open and
        // recovery), or a short random delay after the n-th acknowledgement.
        let by_time = rng.below(4) == 0;
        let delay = Duration::from_micros(match (by_time, rng.below(3)) {
            (true, 0) => rng.below(20_000),
            (true, _) => rng.below(300_000),
            (false, 0) => 0,
            (false, 1) => rng.below(200),
            (false, _) => rng.below(3_000),
        });
        let kill_after_acks = rng.range(1, 400);
        let deadline = Instant::now() + CYCLE_TIMEOUT;
        let spawned = Instant::now();
        let mut lines: Vec<String> = Vec::new();
        let mut acks = 0;
        loop {
            if by_time {
                let wait = delay.saturating_sub(spawned.elapsed());
                if wait.is_zero() {
                    break;
                }
                match rx.recv_timeout(wait) {
                    Ok(line) => lines.push(line),
                    Err(mpsc::RecvTimeoutError::Timeout) => break,
                    Err(mpsc::RecvTimeoutError::Disconnected) => break,
                }
            } else {
                let wait = deadline.saturating_duration_since(Instant::now());
                match rx.recv_timeout(wait) {
                    Ok(line) => {
                        let is_ack = line.starts_with("QACK ");
                        lines.push(line);
                        if is_ack {
                            acks += 1;
                            if acks >= kill_after_acks {
                                if !delay.is_zero() {
                                    std::thread::sleep(delay);
                                }
                                break;
                            }
                        }
                    }
                    Err(mpsc::RecvTimeoutError::Timeout) => {
                        panic!("{ctx}: the child made no progress for {CYCLE_TIMEOUT:?}")
                    }
                    Err(mpsc::RecvTimeoutError::Disconnected) => break,
                }
            }
        }
        let _ = child.0.kill();
        let status = child.0.wait().unwrap();
        reader.join().unwrap();
        lines.extend(rx.try_iter());

        // Replay the child's account of what it did into the model.
        let mut begun: HashMap<u64, Target> = HashMap::new();
        let mut maint: Option<String> = None;
        let mut ready = false;
        for line in &lines {
            let mut it = line.split_whitespace();
            match it.next() {
                Some("QREADY") => ready = true,
                Some("QBEGIN") => {
                    let version: u64 = it.next().unwrap().parse().unwrap();
                    let kind = it.next().unwrap();
                    let target = match kind {
                        "put" | "mput" => {
                            Target::Keys(it.map(|k| k.as_bytes().to_vec()).collect(), true)
                        }
                        "del" => Target::Keys(it.map(|k| k.as_bytes().to_vec()).collect(), false),
                        "batch" => Target::Group(it.next().unwrap().parse().unwrap()),
                        other => panic!("{ctx}: unknown write kind {other}"),
                    };
                    begun.insert(version, target);
                }
                Some("QACK") => {
                    let version: u64 = it.next().unwrap().parse().unwrap();
                    let target = begun.remove(&version).expect("ack of a write begun");
                    model.apply(&target, version, true);
                    tally.acks += 1;
                }
                Some("QMAINT") => {
                    let (phase, what) = (it.next().unwrap(), it.next().unwrap());
                    maint = (phase == "begin").then(|| what.to_string());
                }
                Some("QERR") => panic!("{ctx}: the child failed: {line}"),
                Some("QDONE") => tally.child_done += 1,
                _ => {}
            }
        }
        if lines.iter().any(|l| l == "QDONE") {
            assert!(
                status.success(),
                "{ctx}: child finished but exited with {status}"
            );
        }
        tally.inflight_at_kill += begun.len() as u64;
        for (version, target) in begun {
            model.apply(&target, version, false);
        }
        match maint.as_deref() {
            Some("compact") => tally.killed_in_compact += 1,
            Some("checkpoint") => tally.killed_in_checkpoint += 1,
            _ => {}
        }
        if !ready {
            tally.killed_before_ready += 1;
        }

        // Usually reopen and check here; sometimes leave the crashed store to the next child,
        // so kills also land in a child's recovery. Always check after the last cycle.
        if cycle + 1 == CYCLES || rng.below(5) != 0 {
            verify(&dir, &mut model, &mut tally, &mut rng, &ctx);
        }
    }

    println!(
        "crash test: {CYCLES} kills in {:.1?}; {} writes acknowledged, {} in flight at a kill; \
         killed {} times inside compact(), {} inside checkpoint(), {} before the store was open; \
         {} children finished; {} verifications: {} torn tails, {} batches repaired, \
         {} aborted, {} checkpoints ignored",
        started.elapsed(),
        tally.acks,
        tally.inflight_at_kill,
        tally.killed_in_compact,
        tally.killed_in_checkpoint,
        tally.killed_before_ready,
        tally.child_done,
        tally.verified,
        tally.torn_tails,
        tally.batches_repaired,
        tally.batches_aborted,
        tally.checkpoints_ignored,
    );
    assert!(
        tally.acks > CYCLES * 20,
        "too little work was done: {} acks",
        tally.acks
    );
}

/// Reopens the store after a kill and checks it against the model (then makes what it saw the
/// model's known state).
fn verify(dir: &Path, model: &mut Model, tally: &mut Tally, rng: &mut Rng, ctx: &str) {
    let store = Store::open(dir, crash_options(false))
        .unwrap_or_else(|e| panic!("{ctx}: reopening after kill -9 failed: {e}"));
    let report = store.recovery_report().clone();
    assert!(
        report.damage.is_empty(),
        "{ctx}: recovery found damage: {report:#?}"
    );
    for reason in &report.checkpoints_ignored {
        assert!(
            reason.contains("segments changed"),
            "{ctx}: a checkpoint was unusable after a process crash: {report:#?}"
        );
    }
    tally.verified += 1;
    tally.torn_tails += report.torn_tails.len() as u64;
    tally.batches_repaired += report.batches_repaired;
    tally.batches_aborted += report.batches_aborted;
    tally.checkpoints_ignored += report.checkpoints_ignored.len() as u64;

    let mut present = 0u64;
    // Single keys: one vector read, and a sample read one by one.
    let keys: Vec<Vec<u8>> = (0..SINGLE_KEYS).map(single_key).collect();
    let got = store
        .multi_get(&keys)
        .unwrap_or_else(|e| panic!("{ctx}: multi_get failed after recovery: {e}\n{report:#?}"));
    for (k, g) in keys.iter().zip(&got) {
        let observed = g.as_ref().map(|v| decode_value(k, v, ctx));
        present += observed.is_some() as u64;
        model
            .singles
            .get_mut(k)
            .unwrap()
            .observe(observed, &format!("key {}", show(k)), ctx);
    }
    for _ in 0..30 {
        let i = rng.below(SINGLE_KEYS) as usize;
        let one = store
            .get(&keys[i])
            .unwrap_or_else(|e| panic!("{ctx}: get failed after recovery: {e}"));
        assert_eq!(
            one,
            got[i],
            "{ctx}: get and multi_get disagree on {}",
            show(&keys[i])
        );
    }
    // Batch groups: every key of a group carries the same version, or none exists.
    for g in 0..GROUPS as usize {
        let gkeys = &model.group_keys[g];
        let got = store
            .multi_get(gkeys)
            .unwrap_or_else(|e| panic!("{ctx}: multi_get of group {g} failed: {e}\n{report:#?}"));
        let versions: Vec<Option<u64>> = gkeys
            .iter()
            .zip(&got)
            .map(|(k, v)| v.as_ref().map(|v| decode_value(k, v, ctx)))
            .collect();
        assert!(
            versions.iter().all(|v| *v == versions[0]),
            "{ctx}: batch group {g} is torn: versions {versions:?}\n{report:#?}"
        );
        present += versions.iter().filter(|v| v.is_some()).count() as u64;
        model.groups[g].observe(versions[0], &format!("batch group {g}"), ctx);
    }
    assert_eq!(
        store.len(),
        present,
        "{ctx}: len() disagrees with the keys found"
    );

    // Leave the store closed cleanly or as a crash would (the next child then replays).
    if rng.below(2) == 0 {
        store
            .close()
            .unwrap_or_else(|e| panic!("{ctx}: close failed: {e}"));
    } else {
        store.simulate_crash();
    }
}
