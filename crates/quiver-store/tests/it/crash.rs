//! Crash safety under `kill -9`: the engine's crash loop.
//!
//! A child process (this test binary, re-executed to run the ignored `child_writer` test)
//! writes single keys (plain, and with an expiry time near or far), multi_puts, deletes,
//! set_expiry and persist, and multi-partition batches in `Durability::Os` mode, with
//! background maintenance on (flushes, checkpoints, compaction, the expiry sweep) and
//! explicit compactions, checkpoints, splits and merges in between. Before each write it prints
//! `QBEGIN <version> ...`, after the call returns `QACK <version>`. The parent kills it with
//! SIGKILL at a random moment, reopens the store (one cycle in five a copy of it, leaving the
//! store as the kill left it to the next child) and checks every key and batch group that
//! children write:
//! - every acknowledged write is there (or a later one that was in flight) with its expiry
//!   time — or is gone because that time has come, never showing an older value instead,
//! - every batch is all-or-nothing,
//! - the layout is the last acknowledged split or merge's (or the one in flight),
//! - no value is corrupt and no read fails, the counts agree with the reads, the recovery
//!   report shows no damage and `Store::check` finds every record and index entry intact.
//!
//! Every value names its version and is otherwise a function of (key, version), so a read tells
//! exactly which write it came from and whether its bytes are intact. Batches always write all
//! the keys of one *group* with one version, so a group whose keys disagree is a torn batch;
//! a batch of an odd version writes its keys as hashes (the value packed as one field,
//! [`group_entry`]), so a key's kind (docs/design.md, "Hashes") goes through every kill,
//! compaction, checkpoint, split and merge too, and a read checks it.
//!
//! CI runs [`CI_CYCLES`] cycles; `kill_9_a_thousand_cycles` (ignored) runs the same loop for
//! `QUIVER_CRASH_CYCLES` cycles (docs/testing.md, "Crash loops", has a run's figures). Both
//! end with the line `crash test: N cycles, A acknowledged operations checked, L lost, W wrong,
//! ...`; the first cycle with anything lost or wrong prints it and fails.
//! Reproduce a failure with `QUIVER_CRASH_SEED=<seed printed by the test>`.

mod model;
mod verify;

use std::collections::HashMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use quiver_store::clock::system_now_ms;
use quiver_store::fields::Fields;
use quiver_store::slot::{key_slot, SlotRange};
use quiver_store::{BackendKind, Batch, Durability, Entry, Options, Store, ValueKind};
use quiver_testkit::process::{lines_of, Guard};
use quiver_testkit::rng::{mix64, seed_from_env, Rng};

use model::{format_ranges, parse_ranges, Model, ReadTime, Tally, Target};

const CHILD_DIR_ENV: &str = "QUIVER_CRASH_CHILD_DIR";
const CHILD_SEED_ENV: &str = "QUIVER_CRASH_CHILD_SEED";
const CHILD_BASE_ENV: &str = "QUIVER_CRASH_CHILD_VERSION_BASE";
const SEED_ENV: &str = "QUIVER_CRASH_SEED";

/// Kill cycles of the CI test on one store directory (about 20 s on 2 cores: a cycle is
/// ~0.2 s, its check included).
const CI_CYCLES: u64 = 100;
/// Kill cycles of the long run, unless `CYCLES_ENV` says otherwise.
const LONG_CYCLES: u64 = 1000;
const CYCLES_ENV: &str = "QUIVER_CRASH_CYCLES";
/// One cycle in this many checks a copy of the store the kill left (see `crash_loop`).
const CHECK_COPY_ONE_IN: u64 = 5;
/// Acknowledged writes per cycle, on average, below which the run did too little to mean much.
const ACKS_PER_CYCLE_MIN: u64 = 20;

const PARTITIONS: u32 = 4;
/// Splits stop at this many partitions (merges take them back down).
const PARTITIONS_MAX: usize = 8;
/// No merge joins the partitions on either side of this slot (a boundary of the first
/// layout): every batch group has keys on both sides, so every batch spans partitions.
const GROUP_BOUNDARY_SLOT: u16 = 8192;
/// Keys written by put, multi_put, delete, set_expiry and persist.
const SINGLE_KEYS: u64 = 300;
/// Batch groups; group `g` has 3..=6 keys spread over at least two partitions.
const GROUPS: u64 = 40;
/// Operations a child performs before closing cleanly (it is normally killed long before).
const CHILD_OPS_MAX: u64 = 5_000;
/// Versions of cycle `c` are `(c + 1) * VERSION_STRIDE + op`.
const VERSION_STRIDE: u64 = 1_000_000;
/// How long one cycle may take before the test gives up on the child.
const CYCLE_TIMEOUT: Duration = Duration::from_secs(30);

/// Near expiry times, from the write on (ms): many pass inside the child, between the kill and
/// the check, or between two checks.
const SHORT_TTL_MS: (u64, u64) = (1, 2_000);
/// Far expiry times (ms): none passes during a run, so these keys must all be there.
const LONG_TTL_MS: (u64, u64) = (3_600_000, 86_400_000);
/// One multi_put or batch in this many writes a far expiry time.
const EXPIRING_VECTOR_ONE_IN: u64 = 4;

/// The child's operations.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Put,
    PutNearExpiry,
    PutFarExpiry,
    MultiPut,
    Delete,
    SetExpiry,
    Persist,
    Batch,
    Checkpoint,
    Compact,
    SplitOrMerge,
}

/// The child's mix: each operation's share, per mille.
const OP_MIX: [(Op, u64); 11] = [
    (Op::Put, 220),
    (Op::PutNearExpiry, 50),
    (Op::PutFarExpiry, 40),
    (Op::MultiPut, 160),
    (Op::Delete, 60),
    (Op::SetExpiry, 40),
    (Op::Persist, 20),
    (Op::Batch, 380),
    (Op::Checkpoint, 10),
    (Op::Compact, 10),
    (Op::SplitOrMerge, 10),
];

fn pick_op(rng: &mut Rng) -> Op {
    let total: u64 = OP_MIX.iter().map(|m| m.1).sum();
    let mut r = rng.below(total);
    for (op, share) in OP_MIX {
        if r < share {
            return op;
        }
        r -= share;
    }
    unreachable!("the shares add up to the total")
}

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

/// The keys of batch group `g`: 3..=6 keys, the first before [`GROUP_BOUNDARY_SLOT`], the
/// second from it on (in another partition, whatever splits and merges do).
fn group_keys(g: u64) -> Vec<Vec<u8>> {
    let n = 3 + g % 4;
    let mut keys: Vec<Vec<u8>> = Vec::new();
    for j in 0..n {
        let mut salt = 0;
        loop {
            let k = format!("group:{g:03}.{j}.{salt}").into_bytes();
            let low = key_slot(&k) < GROUP_BOUNDARY_SLOT;
            if j > 1 || low == (j == 0) {
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

/// The field a group key's hash keeps its value in.
const HASH_FIELD: &[u8] = b"v";

/// What kind a key holds at `version`: a group's keys are hashes at odd versions (a batch
/// writes them), everything else is a string.
fn kind_of(key: &[u8], version: u64) -> ValueKind {
    if key.starts_with(b"group:") && version % 2 == 1 {
        ValueKind::Hash
    } else {
        ValueKind::String
    }
}

/// What a batch writes to group key `key` at `version`: [`make_value`], as a string or as the
/// one field of a hash ([`kind_of`]).
fn group_entry(key: &[u8], version: u64, expire_at: Option<u64>) -> Entry {
    let value = make_value(key, version);
    let (value, kind) = match kind_of(key, version) {
        ValueKind::String => (value.into(), ValueKind::String),
        ValueKind::Hash => {
            let mut fields = Fields::default();
            fields.set(HASH_FIELD, &value);
            (fields.encode(), ValueKind::Hash)
        }
    };
    Entry {
        value,
        expire_at,
        kind,
    }
}

/// The version a stored entry holds, after checking every byte of it and its kind; `Err`: the
/// claimed version (0: none) and what is wrong.
fn decode_entry(key: &[u8], entry: &Entry) -> Result<u64, (u64, String)> {
    let value = match entry.kind {
        ValueKind::String => entry.value.clone(),
        ValueKind::Hash => Fields::decode(&entry.value)
            .ok()
            .and_then(|f| f.get(HASH_FIELD).map(|v| entry.value.slice_ref(v)))
            .ok_or_else(|| (0, format!("hash of {} has no field v", show(key))))?,
    };
    let version = decode_value(key, &value)?;
    if kind_of(key, version) != entry.kind {
        return Err((
            version,
            format!("{} (version {version}) is a {:?}", show(key), entry.kind),
        ));
    }
    Ok(version)
}

/// The version a value's prefix claims (`None`: it has none).
fn claimed_version(value: &[u8]) -> Option<u64> {
    let colon = value.iter().position(|&b| b == b':')?;
    std::str::from_utf8(&value[..colon]).ok()?.parse().ok()
}

/// The version a stored value claims, after checking every byte of it; `Err`: the claimed
/// version (0: none) and what is wrong.
fn decode_value(key: &[u8], value: &[u8]) -> Result<u64, (u64, String)> {
    let Some(version) = claimed_version(value) else {
        return Err((0, format!("value of {} has no version prefix", show(key))));
    };
    if make_value(key, version) != value {
        return Err((
            version,
            format!(
                "value of {} (version {version}, {} bytes) is corrupt",
                show(key),
                value.len()
            ),
        ));
    }
    Ok(version)
}

fn show(key: &[u8]) -> String {
    String::from_utf8_lossy(key).into_owned()
}

/// An expiry time on a line of the child's output: the time, or `-` for never.
fn format_expiry(t: Option<u64>) -> String {
    t.map_or_else(|| "-".to_string(), |t| t.to_string())
}

fn parse_expiry(s: &str) -> Option<u64> {
    (s != "-").then(|| s.parse().unwrap_or_else(|_| panic!("bad expiry {s:?}")))
}

fn deadline(rng: &mut Rng, (lo, hi): (u64, u64)) -> u64 {
    system_now_ms() + rng.range(lo, hi + 1)
}

/// A split of a random partition at a random slot, or a merge of two neighbours (not across
/// [`GROUP_BOUNDARY_SLOT`]): its kind, its slot and the layout after it.
fn layout_change(ranges: &[SlotRange], rng: &mut Rng) -> (&'static str, u16, Vec<SlotRange>) {
    let mergeable: Vec<usize> = (1..ranges.len())
        .filter(|&i| ranges[i].lo != GROUP_BOUNDARY_SLOT)
        .collect();
    let splittable: Vec<usize> = (0..ranges.len()).filter(|&i| ranges[i].len() > 1).collect();
    let mut next = ranges.to_vec();
    if ranges.len() < PARTITIONS_MAX && (mergeable.is_empty() || rng.below(2) == 0) {
        let i = splittable[rng.below(splittable.len() as u64) as usize];
        let r = ranges[i];
        let at = r.lo + 1 + rng.below(u64::from(r.hi - r.lo)) as u16;
        next.splice(
            i..=i,
            [
                SlotRange {
                    lo: r.lo,
                    hi: at - 1,
                },
                SlotRange { lo: at, hi: r.hi },
            ],
        );
        ("split", at, next)
    } else {
        let i = mergeable[rng.below(mergeable.len() as u64) as usize];
        let merged = SlotRange {
            lo: ranges[i - 1].lo,
            hi: ranges[i].hi,
        };
        next.splice(i - 1..=i, [merged]);
        ("merge", ranges[i].lo, next)
    }
}

// ---------------------------------------------------------------------------------------------
// The child.

/// The writer process. Does nothing unless started by the crash loop.
#[test]
#[ignore = "child process of the crash loop (crash::kill_9_*)"]
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
    say(format!("QLAYOUT {}", format_ranges(&store.slot_ranges())));
    let groups: Vec<Vec<Vec<u8>>> = (0..GROUPS).map(group_keys).collect();
    for n in 0..CHILD_OPS_MAX {
        let version = base + n + 1;
        let op = pick_op(&mut rng);
        match op {
            Op::Put | Op::PutNearExpiry | Op::PutFarExpiry => {
                let k = single_key(rng.below(SINGLE_KEYS));
                let expire_at = match op {
                    Op::PutNearExpiry => Some(deadline(&mut rng, SHORT_TTL_MS)),
                    Op::PutFarExpiry => Some(deadline(&mut rng, LONG_TTL_MS)),
                    _ => None,
                };
                let exp = format_expiry(expire_at);
                say(format!("QBEGIN {version} put {exp} {}", show(&k)));
                let v = make_value(&k, version);
                store
                    .put_expiring(&k, &v, expire_at)
                    .unwrap_or_else(|e| fail("put", e));
                say(format!("QACK {version}"));
            }
            Op::MultiPut => {
                let mut idx: Vec<u64> = (0..rng.range(2, 9))
                    .map(|_| rng.below(SINGLE_KEYS))
                    .collect();
                idx.sort_unstable();
                idx.dedup();
                let keys: Vec<Vec<u8>> = idx.into_iter().map(single_key).collect();
                let names: Vec<String> = keys.iter().map(|k| show(k)).collect();
                let expire_at = (rng.below(EXPIRING_VECTOR_ONE_IN) == 0)
                    .then(|| deadline(&mut rng, LONG_TTL_MS));
                let exp = format_expiry(expire_at);
                say(format!("QBEGIN {version} mput {exp} {}", names.join(" ")));
                let items: Vec<(Vec<u8>, Vec<u8>, Option<u64>)> = keys
                    .iter()
                    .map(|k| (k.clone(), make_value(k, version), expire_at))
                    .collect();
                store
                    .multi_put_expiring(&items)
                    .unwrap_or_else(|e| fail("multi_put", e));
                say(format!("QACK {version}"));
            }
            Op::Delete => {
                let k = single_key(rng.below(SINGLE_KEYS));
                say(format!("QBEGIN {version} del {}", show(&k)));
                store.delete(&k).unwrap_or_else(|e| fail("delete", e));
                say(format!("QACK {version}"));
            }
            Op::SetExpiry | Op::Persist => {
                // The value it keeps is read first (this child is the only writer; the sweep
                // deletes only keys whose time has come, which set_expiry then reports absent).
                let k = single_key(rng.below(SINGLE_KEYS));
                let read_at = system_now_ms();
                let entry = store.get_entry(&k).unwrap_or_else(|e| fail("get_entry", e));
                let Some(entry) = entry else { continue };
                if op == Op::Persist && entry.expire_at.is_none() {
                    continue;
                }
                let new = match (op, rng.below(2)) {
                    (Op::Persist, _) => None,
                    (_, 0) => Some(deadline(&mut rng, SHORT_TTL_MS)),
                    _ => Some(deadline(&mut rng, LONG_TTL_MS)),
                };
                let value = claimed_version(&entry.value).expect("values name their version");
                say(format!(
                    "QBEGIN {version} expire {value} {} {} {read_at} {}",
                    format_expiry(entry.expire_at),
                    format_expiry(new),
                    show(&k)
                ));
                let changed = match new {
                    None => store.persist(&k),
                    Some(t) => store.set_expiry(&k, Some(t)),
                }
                .unwrap_or_else(|e| fail("set_expiry", e));
                say(format!(
                    "{} {version}",
                    if changed { "QACK" } else { "QNOOP" }
                ));
            }
            Op::Batch => {
                let g = rng.below(GROUPS);
                let expire_at = (rng.below(EXPIRING_VECTOR_ONE_IN) == 0)
                    .then(|| deadline(&mut rng, LONG_TTL_MS));
                let exp = format_expiry(expire_at);
                say(format!("QBEGIN {version} batch {g} {exp}"));
                let mut batch = Batch::new();
                for k in &groups[g as usize] {
                    batch.put_entry(k.clone(), group_entry(k, version, expire_at), None);
                }
                let outcome = store.apply(&batch).unwrap_or_else(|e| fail("apply", e));
                assert!(outcome.is_applied());
                say(format!("QACK {version}"));
            }
            Op::Checkpoint => {
                say("QMAINT begin checkpoint".into());
                store.checkpoint().unwrap_or_else(|e| fail("checkpoint", e));
                say("QMAINT end checkpoint".into());
            }
            Op::Compact => {
                say("QMAINT begin compact".into());
                store.compact().unwrap_or_else(|e| fail("compact", e));
                say("QMAINT end compact".into());
            }
            Op::SplitOrMerge => {
                let (kind, at, next) = layout_change(&store.slot_ranges(), &mut rng);
                say(format!("QMAINT begin {kind} {}", format_ranges(&next)));
                match kind {
                    "split" => store.split(at).map(drop),
                    _ => store.merge(at).map(drop),
                }
                .unwrap_or_else(|e| fail(kind, e));
                say(format!("QMAINT end {kind}"));
                say(format!("QLAYOUT {}", format_ranges(&store.slot_ranges())));
            }
        }
    }
    store.close().unwrap_or_else(|e| fail("close", e));
    say("QDONE".into());
}

// ---------------------------------------------------------------------------------------------
// The parent.

/// The crash loop with CI's bounded number of cycles.
#[test]
fn kill_9_at_random_moments() {
    crash_loop(CI_CYCLES);
}

/// The long run: `QUIVER_CRASH_CYCLES` cycles (default [`LONG_CYCLES`]).
#[test]
#[ignore = "long run (by hand): QUIVER_CRASH_CYCLES cycles of the crash loop"]
fn kill_9_a_thousand_cycles() {
    crash_loop(crate::kill9::cycles(CYCLES_ENV, LONG_CYCLES));
}

fn crash_loop(cycles: u64) {
    let seed = seed_from_env(SEED_ENV);
    println!("crash test: {cycles} cycles");
    let started = Instant::now();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    let mut rng = Rng::new(seed);
    let mut model = Model::new();
    let mut tally = Tally::default();

    for cycle in 0..cycles {
        let ctx = format!("seed {seed}, cycle {cycle}");
        let (lines, status) = run_child(&dir, seed, cycle, &mut rng, &ctx);
        replay(&lines, &mut model, &mut tally, &ctx);
        if lines.iter().any(|l| l == "QDONE") {
            assert!(
                status.success(),
                "{ctx}: child finished but exited with {status}"
            );
        }
        tally.cycles += 1;
        // Usually reopen and check the store itself; one cycle in `CHECK_COPY_ONE_IN` check a
        // copy and leave the store as the kill left it to the next child, so that kills also
        // land in the recovery of a killed child's store (the copy's recovery finds what the
        // store's will: the same bytes). The last cycle checks the store itself.
        if cycle + 1 == cycles || rng.below(CHECK_COPY_ONE_IN) != 0 {
            verify::verify(&dir, &mut model, &mut tally, &mut rng, &ctx);
        } else {
            let copy = tmp.path().join("copy");
            copy_store(&dir, &copy);
            verify::verify(&copy, &mut model, &mut tally, &mut rng, &ctx);
            std::fs::remove_dir_all(&copy).unwrap();
            tally.copies_verified += 1;
        }
        tally.fail_if_any(started.elapsed(), &ctx);
        tally.checked_all();
    }

    println!("{}", tally.summary(started.elapsed()));
    assert!(
        tally.acks > cycles * ACKS_PER_CYCLE_MIN,
        "too little work was done: {} acks",
        tally.acks
    );
    // The mix did what it is for: layouts changed, and expiring writes were checked both ways.
    assert!(tally.splits > 0 && tally.merges > 0, "no split or no merge");
    assert!(tally.expiring_present > 0 && tally.expired_absent > 0);
}

/// Copies a killed store's directory, but for its disk reserve (a large file of nothing: the
/// copy's opening makes its own). A child killed before it made the directory leaves nothing
/// to copy: the copy is empty, as that store is.
fn copy_store(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    let entries = match std::fs::read_dir(from) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
        Err(e) => panic!("read {}: {e}", from.display()),
    };
    for entry in entries {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            crate::kill9::copy_dir(&entry.path(), &target);
        } else if entry.file_name() != quiver_store::layout::RESERVE_FILE {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// Runs one child on `dir` and kills it: after a random delay from the start (possibly inside
/// open and recovery), or a short random delay after the n-th acknowledgement. Returns what it
/// printed and how it ended.
fn run_child(
    dir: &std::path::Path,
    seed: u64,
    cycle: u64,
    rng: &mut Rng,
    ctx: &str,
) -> (Vec<String>, std::process::ExitStatus) {
    let child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "crash::child_writer",
            "--ignored",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD_DIR_ENV, dir)
        .env(CHILD_SEED_ENV, mix64(seed ^ cycle).to_string())
        .env(CHILD_BASE_ENV, ((cycle + 1) * VERSION_STRIDE).to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    // Killed and reaped however the test ends.
    let mut child = Guard::new(child);
    let rx = lines_of(child.child().stdout.take().unwrap());

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
                Err(_) => break,
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
    let status = child.kill9();
    // The lines still in the pipe: the reader ends at its end.
    lines.extend(rx.iter());
    (lines, status)
}

/// Replays the child's account of what it did into the model; what it read (the value a
/// set_expiry keeps, the layout it opened) is checked against the model on the way.
fn replay(lines: &[String], model: &mut Model, tally: &mut Tally, ctx: &str) {
    let mut begun: HashMap<u64, Target> = HashMap::new();
    let mut maint: Option<&'static str> = None;
    let mut ready = false;
    let mut layout_seen = false;
    for line in lines {
        let mut it = line.split_whitespace();
        match it.next() {
            Some("QREADY") => ready = true,
            Some("QLAYOUT") => {
                // The first is the layout the child opened (after the last kill); later ones
                // follow its own splits and merges.
                let layout = parse_ranges(it.next().unwrap());
                let what = format!("{ctx}: the child's store");
                model.layout.observe(&layout, !layout_seen, &what, tally);
                layout_seen = true;
            }
            Some("QBEGIN") => {
                let version: u64 = it.next().unwrap().parse().unwrap();
                let kind = it.next().unwrap();
                let mut next = || it.next().unwrap();
                let target = match kind {
                    "put" | "mput" => Target::Keys {
                        expire_at: parse_expiry(next()),
                        keys: it.map(|k| k.as_bytes().to_vec()).collect(),
                        value: true,
                    },
                    "del" => Target::Keys {
                        keys: it.map(|k| k.as_bytes().to_vec()).collect(),
                        value: false,
                        expire_at: None,
                    },
                    "expire" => {
                        let value: u64 = next().parse().unwrap();
                        let old = parse_expiry(next());
                        let new = parse_expiry(next());
                        let read_at: u64 = next().parse().unwrap();
                        let key = next().as_bytes().to_vec();
                        // The child's read: checked like the parent's (but not counted:
                        // it may follow the write in the same process).
                        let at = ReadTime {
                            before: read_at,
                            after: read_at,
                        };
                        let what = format!("{ctx}: key {} read by the child", show(&key));
                        model
                            .single(&key)
                            .observe(Some((value, old)), at, false, &what, tally);
                        Target::Expiry {
                            key,
                            value,
                            expire_at: new,
                        }
                    }
                    "batch" => Target::Group {
                        g: next().parse().unwrap(),
                        expire_at: parse_expiry(next()),
                    },
                    other => panic!("{ctx}: unknown write kind {other}"),
                };
                begun.insert(version, target);
            }
            Some("QACK") => {
                let version: u64 = it.next().unwrap().parse().unwrap();
                let target = begun.remove(&version).expect("ack of a write begun");
                model.apply(&target, version, true);
                tally.ack();
            }
            Some("QNOOP") => {
                // set_expiry or persist found the key gone (its time came): nothing written.
                let version: u64 = it.next().unwrap().parse().unwrap();
                begun.remove(&version).expect("no-op of a write begun");
                tally.noops += 1;
            }
            Some("QMAINT") => {
                let (phase, what) = (it.next().unwrap(), it.next().unwrap());
                let what: &'static str = match what {
                    "checkpoint" => "checkpoint",
                    "compact" => "compact",
                    "split" => "split",
                    "merge" => "merge",
                    other => panic!("{ctx}: unknown maintenance {other}"),
                };
                let layout_change = matches!(what, "split" | "merge");
                match phase {
                    "begin" if layout_change => {
                        let next = parse_ranges(it.next().unwrap());
                        model.layout.pending.push(next);
                    }
                    "end" if layout_change => {
                        let next = model.layout.pending.pop().expect("a change begun");
                        model.layout.ack(next);
                        tally.ack();
                        *if what == "split" {
                            &mut tally.splits
                        } else {
                            &mut tally.merges
                        } += 1;
                    }
                    _ => {}
                }
                maint = (phase == "begin").then_some(what);
            }
            Some("QERR") => panic!("{ctx}: the child failed: {line}"),
            Some("QDONE") => tally.child_done += 1,
            _ => {}
        }
    }
    tally.inflight_at_kill += begun.len() as u64;
    for (version, target) in begun {
        model.apply(&target, version, false);
    }
    if let Some(what) = maint {
        *tally.killed_in.entry(what).or_default() += 1;
    }
    if !ready {
        tally.killed_before_ready += 1;
    }
}
