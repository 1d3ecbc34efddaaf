//! Helpers of the kill -9 tests. A child process — this test binary re-executing one of its
//! ignored tests, told where to work by an environment variable — works on a store and writes
//! down each write it got acknowledged (one line per write, written after the write returned);
//! the parent kills it at a random moment, reads what was acknowledged and checks the
//! reopened store.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use quiver_store::layout::CHECKPOINT_FILE;
use quiver_store::Store;
use quiver_testkit::acked::check_version;
use quiver_testkit::process::Guard;
use quiver_testkit::rng::Rng;

use crate::common::key;

/// Where a child works (set only in children).
const DIR_ENV: &str = "QUIVER_KILL9_DIR";
/// The child's cycle: its versions start above every earlier child's.
const CYCLE_ENV: &str = "QUIVER_KILL9_CYCLE";

/// The value of key `i` at `version`: names both, so a read tells which write it sees.
pub fn value_of(i: u64, version: u64) -> Vec<u8> {
    format!("{i}:{version}:")
        .repeat(1 + (i % 5) as usize)
        .into_bytes()
}

/// The version a [`value_of`] value names.
pub fn version_of(value: &[u8]) -> u64 {
    let text = std::str::from_utf8(value).unwrap();
    text.split(':').nth(1).unwrap().parse().unwrap()
}

/// The first version a child of `cycle` writes: above everything earlier children wrote.
pub fn first_version(cycle: u64) -> u64 {
    (cycle + 1) * 1_000_000_000
}

/// Cycles to run: the environment variable `var` if set (a long run), else `default`.
pub fn cycles(var: &str, default: u64) -> u64 {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// In a child: its directory and cycle. `None` in a plain test run (the ignored child test
/// then does nothing).
pub fn child_env() -> Option<(PathBuf, u64)> {
    let dir = std::env::var(DIR_ENV).ok()?;
    let cycle = std::env::var(CYCLE_ENV).unwrap().parse().unwrap();
    Some((PathBuf::from(dir), cycle))
}

/// Runs the ignored test `test` (its path in this binary, e.g. `split::kill9_child`) as a
/// child working in `dir`, and kills it (SIGKILL) after `min_ms` to `max_ms`. The child must
/// still be running then: one that ended early (a panic) fails the test.
pub fn run_and_kill(test: &str, dir: &Path, cycle: u64, rng: &mut Rng, min_ms: u64, max_ms: u64) {
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", test, "--nocapture"])
        .env(DIR_ENV, dir)
        .env(CYCLE_ENV, cycle.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .unwrap();
    let mut child = Guard::new(child);
    std::thread::sleep(std::time::Duration::from_millis(rng.range(min_ms, max_ms)));
    if let Some(status) = child.child().try_wait().unwrap() {
        panic!("cycle {cycle}: the child {test} ended before the kill: {status}");
    }
    child.kill9();
}

/// A file of acknowledgements, one line each. A line is one `write` of an `O_APPEND` file
/// (threads may share the file); a line without its newline was torn by the kill and is not
/// an acknowledgement.
pub struct AckLog(std::fs::File);

impl AckLog {
    pub fn open(path: &Path) -> AckLog {
        let f = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(path)
            .unwrap();
        AckLog(f)
    }

    /// Writes `line` down (after the write it acknowledges returned).
    pub fn ack(&mut self, line: &str) {
        self.0.write_all(format!("{line}\n").as_bytes()).unwrap();
    }
}

/// The complete lines of an ack file (none if it does not exist yet).
pub fn acked_lines(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let complete = text.rfind('\n').map_or("", |end| &text[..end]);
    complete
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Adds the "key version" lines of an ack file to `acked`: the last acknowledged version of
/// each key.
pub fn read_acked_versions(path: &Path, acked: &mut HashMap<u64, u64>) {
    for line in acked_lines(path) {
        let (i, v) = line.split_once(' ').unwrap();
        let (i, v): (u64, u64) = (i.parse().unwrap(), v.parse().unwrap());
        let e = acked.entry(i).or_insert(0);
        *e = (*e).max(v);
    }
}

/// A thread that overwrites random keys of `keys` until the process is killed, each put
/// acknowledged as "key version" in the ack file `acks` once it returned (`fsync` durability
/// makes that mean durable).
pub fn spawn_acked_writer(
    store: Arc<Store>,
    acks: PathBuf,
    cycle: u64,
    keys: Vec<u64>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut log = AckLog::open(&acks);
        let mut rng = Rng::new(std::process::id() as u64 ^ (cycle << 32));
        let mut version = first_version(cycle);
        loop {
            let i = keys[rng.below(keys.len() as u64) as usize];
            store.put(&key(i), &value_of(i, version)).unwrap();
            log.ack(&format!("{i} {version}"));
            version += 1;
        }
    })
}

/// Every key of `keys` is present with a version at least its last acknowledged one (0: the
/// parent's initial load; a later one was in flight); returns how many had acknowledged writes.
pub fn check_acked(store: &Store, keys: &[u64], acked: &HashMap<u64, u64>, when: &str) -> u64 {
    let mut checked = 0;
    for &i in keys {
        let version = store.get(&key(i)).unwrap().map(|v| version_of(&v));
        let want = acked.get(&i).copied().unwrap_or(0);
        let verdict = check_version(version, want);
        assert!(
            verdict.is_ok(),
            "{when}: key {i} {verdict:?}: version {version:?}, acknowledged {want}"
        );
        checked += acked.contains_key(&i) as u64;
    }
    checked
}

/// Removes every partition's checkpoint: the next opening rebuilds the indexes from the logs.
pub fn drop_checkpoints(store_dir: &Path) {
    for entry in std::fs::read_dir(store_dir).unwrap() {
        let p = entry.unwrap().path().join(CHECKPOINT_FILE);
        let _ = std::fs::remove_file(p);
    }
}

/// Copies a (closed or killed) store's directory tree: the same crash state opened twice.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// Opens the store a kill left in `dir`: without damage (a torn tail is no damage), and
/// intact by [`Store::check`].
pub fn open_undamaged(dir: &Path, opts: quiver_store::Options, when: &str) -> Store {
    let store = Store::open(dir, opts).unwrap_or_else(|e| panic!("{when}: {e}"));
    let report = store.recovery_report();
    assert!(report.damage.is_empty(), "{when}: {:?}", report.damage);
    let check = store.check().unwrap();
    assert!(check.is_ok(), "{when}: {:?}", check.problems);
    store
}
