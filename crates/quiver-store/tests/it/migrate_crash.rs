//! Range import and drop across kill -9 (see `kill9`): a child process imports a range (or
//! drops one) in a loop while a writer puts fsync-acknowledged keys in the other slots of the
//! same partitions, and is killed at random moments. The store must open without damage, from
//! its checkpoints and rebuilt from its logs alike; every acknowledged write is there; each key
//! of the range is in a state the import or drop may leave it in (never a torn value, never an
//! older version than the drop began with); and running the import or drop again completes.
//!
//! 4 cycles each in CI. Long run, once (`QUIVER_MIGRATE_KILL9_CYCLES=100 cargo test --release
//! -p quiver-store --test it migrate_crash`): import, 100 cycles, all 100 kills mid-import,
//! each checking the 3 669 imported keys and the 2 331 keys outside the range (every one with
//! acknowledged writes): none lost, none torn; drop, 100 cycles (31 kills mid-drop, 6 with a
//! drop begun and none or all of its deletes done, 6 after a fill, 57 during the next fill),
//! each checking the 3 669 range keys and the 2 331 outside (all with acknowledged writes): none
//! lost, none resurrected, the 37 interrupted drops completed by dropping again.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use quiver_store::slot::key_slot;
use quiver_store::{BackendKind, Durability, Entry, Options, RangeItem, Store};
use quiver_testkit::rng::Rng;

use crate::common::{key, small_options};
use crate::kill9::{self, value_of, version_of, AckLog};
use crate::migrate::range;

const KEYS: u64 = 6000;
/// Items per import call (as an export's callback might hand over): many fsyncs per pass.
const IMPORT_BATCH: usize = 64;
/// An expiry time far in the future (2096).
const FAR: u64 = 4_000_000_000_000;

fn cycles() -> u64 {
    kill9::cycles("QUIVER_MIGRATE_KILL9_CYCLES", 4)
}

fn options(backend: BackendKind) -> Options {
    Options {
        // Acknowledged means durable: the ack files may only name what survives a kill.
        durability: Durability::Fsync,
        background: true,
        // Checkpoints and compactions at random moments of the imports and drops.
        checkpoint_interval_ms: 25,
        compact_garbage_ratio: 0.5,
        ..small_options(backend)
    }
}

fn inside(i: u64) -> bool {
    range().contains(key_slot(&key(i)))
}

fn keys_inside() -> Vec<u64> {
    (0..KEYS).filter(|&i| inside(i)).collect()
}

fn keys_outside() -> Vec<u64> {
    (0..KEYS).filter(|&i| !inside(i)).collect()
}

/// Puts every key of `keys` at version 0.
fn load(store: &Store, keys: &[u64]) {
    for chunk in keys.chunks(500) {
        let pairs: Vec<_> = chunk.iter().map(|&i| (key(i), value_of(i, 0))).collect();
        store.multi_put(&pairs).unwrap();
    }
}

/// What a range export of the source hands over, in batches: the snapshot (every key of the
/// range at version 1, some expiring), then the changes (a third of the keys deleted, a third
/// overwritten at version 2 with another expiry).
fn import_stream() -> Vec<Vec<RangeItem>> {
    let put = |i: u64, version, expire_at| {
        let entry = Entry::string(value_of(i, version), expire_at);
        RangeItem::of(key(i).into(), Some(entry))
    };
    let snapshot: Vec<RangeItem> = keys_inside()
        .into_iter()
        .map(|i| put(i, 1, (i % 4 == 0).then_some(FAR)))
        .collect();
    let changes: Vec<RangeItem> = keys_inside()
        .into_iter()
        .filter(|i| i % 3 != 2)
        .map(|i| match i % 3 {
            0 => RangeItem::of(key(i).into(), None),
            _ => put(i, 2, (i % 5 == 0).then_some(FAR + i)),
        })
        .collect();
    // A key appears once per batch (as in an export's).
    let mut batches: Vec<Vec<RangeItem>> =
        snapshot.chunks(IMPORT_BATCH).map(<[_]>::to_vec).collect();
    batches.extend(changes.chunks(IMPORT_BATCH).map(<[_]>::to_vec));
    batches
}

fn import_all(store: &Store, stream: &[Vec<RangeItem>]) {
    for batch in stream {
        store.import(batch).unwrap();
    }
}

/// The states the stream takes key `i` of the range through: absent, the snapshot's put, the
/// changes' put.
fn stream_states(i: u64) -> [Option<Entry>; 3] {
    let entry = |version, expire_at| Some(Entry::string(value_of(i, version), expire_at));
    let changed = (i % 3 == 1).then(|| entry(2, (i % 5 == 0).then_some(FAR + i)));
    [
        None,
        entry(1, (i % 4 == 0).then_some(FAR)),
        changed.flatten(),
    ]
}

/// The child of `imports_survive_kill_9`: imports the stream again and again (each pass after
/// the first changes nothing in the end) while a writer puts acknowledged keys outside the
/// range. Runs until killed.
#[test]
#[ignore = "the child process of imports_survive_kill_9"]
fn import_child() {
    let Some((dir, cycle)) = kill9::child_env() else {
        return;
    };
    let store = Arc::new(Store::open(dir.join("dst"), options(BackendKind::Mmap)).unwrap());
    let writer = kill9::spawn_acked_writer(store.clone(), dir.join("acks"), cycle, keys_outside());
    let stream = import_stream();
    let mut passes = AckLog::open(&dir.join("passes"));
    loop {
        import_all(&store, &stream);
        passes.ack("imported");
        assert!(!writer.is_finished(), "the writer stopped");
    }
}

/// kill -9 at random moments of a range import under acknowledged writes to the other slots.
#[test]
fn imports_survive_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let stream = import_stream();
    // The source: what the stream hands over, imported without a crash.
    let src = Store::open(dir.path().join("src"), small_options(BackendKind::Pread)).unwrap();
    import_all(&src, &stream);
    let inside = keys_inside();
    let outside = keys_outside();
    assert_eq!(
        src.len(),
        inside.iter().filter(|&&i| i % 3 != 0).count() as u64
    );
    {
        let dst = Store::open(dir.path().join("dst"), options(BackendKind::Mmap)).unwrap();
        load(&dst, &outside);
        dst.close().unwrap();
    }
    let mut rng = Rng::new(23);
    let mut acked = HashMap::new();
    let (mut mid_import, mut checked) = (0, 0);
    for cycle in 0..cycles() {
        kill9::run_and_kill(
            "migrate_crash::import_child",
            dir.path(),
            cycle,
            &mut rng,
            200,
            1200,
        );
        kill9::read_acked_versions(&dir.path().join("acks"), &mut acked);
        // Once a pass completed (in a child or after a kill below), no pass takes a key the
        // source has back to absent.
        let imported_once = cycle > 0 || !kill9::acked_lines(&dir.path().join("passes")).is_empty();
        let mut partial = false;
        for (path, how) in reopenings(dir.path(), "dst") {
            let when = format!("cycle {cycle}, {how}");
            let store = kill9::open_undamaged(&path, options(BackendKind::Mmap), &when);
            checked = kill9::check_acked(&store, &outside, &acked, &when);
            for &i in &inside {
                let got = store.get_entry(&key(i)).unwrap();
                let states = stream_states(i);
                assert!(
                    states.contains(&got) && (got.is_some() || !imported_once || i % 3 == 0),
                    "{when}: key {i} is {got:?}, not one of {states:?}"
                );
                partial |= got != src.get_entry(&key(i)).unwrap();
            }
            if how == REBUILT {
                store.close().unwrap();
                continue;
            }
            // Importing again from the start completes, and yields exactly the source's data;
            // so does starting over as a migration does: the target's range dropped, then a
            // new export of the source.
            if cycle % 2 == 0 {
                import_all(&store, &stream);
            } else {
                store.drop_range(range()).unwrap();
                let mut export = src.export_range(range()).unwrap();
                export.snapshot(&mut |items| store.import(items)).unwrap();
                export
                    .changes(&src, &mut |items| store.import(items))
                    .unwrap();
            }
            for &i in &inside {
                let want = src.get_entry(&key(i)).unwrap();
                assert_eq!(store.get_entry(&key(i)).unwrap(), want, "{when}: key {i}");
            }
            kill9::check_acked(&store, &outside, &acked, &when);
            assert_eq!(store.len(), src.len() + outside.len() as u64, "{when}");
            store.close().unwrap();
        }
        mid_import += partial as u64;
    }
    assert!(!acked.is_empty(), "the children wrote");
    // The kills came during imports (a kill between two passes sees the source's state).
    assert!(mid_import > 0, "no kill came during an import");
    eprintln!(
        "import: {} kill -9 cycles, {mid_import} mid-import, {checked} keys with acknowledged \
         writes checked, {} imported keys checked each cycle",
        cycles(),
        inside.len()
    );
}

const REBUILT: &str = "rebuilt from the logs";

/// The store `name` a kill left in `dir`, as it is (opened from its checkpoints) and as a copy
/// without checkpoints (rebuilt from the logs) — the copy is listed first, taken before the
/// store is opened.
fn reopenings(dir: &Path, name: &str) -> Vec<(std::path::PathBuf, &'static str)> {
    let copy = dir.join("copy");
    let _ = std::fs::remove_dir_all(&copy);
    kill9::copy_dir(&dir.join(name), &copy);
    kill9::drop_checkpoints(&copy);
    vec![(copy, REBUILT), (dir.join(name), "from checkpoints")]
}

/// Where a drop child is, by the last line of its range log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DropState {
    /// The range was filled at this version: every key there, at it or at a later fill's.
    Filled(u64),
    /// A drop of the range filled at this version began.
    Dropping(u64),
    /// That drop completed: every key absent, or at a later fill's version.
    Dropped(u64),
}

fn drop_state(lines: &[String]) -> DropState {
    let (what, version) = lines.last().unwrap().split_once(' ').unwrap();
    let version = version.parse().unwrap();
    match what {
        "filled" => DropState::Filled(version),
        "dropping" => DropState::Dropping(version),
        "dropped" => DropState::Dropped(version),
        _ => panic!("range log line {what} {version}"),
    }
}

/// The child of `drop_range_survives_kill_9`: fills the range, checkpoints (every other time),
/// drops it, again and again, while a writer puts acknowledged keys outside it. Runs until
/// killed.
#[test]
#[ignore = "the child process of drop_range_survives_kill_9"]
fn drop_child() {
    let Some((dir, cycle)) = kill9::child_env() else {
        return;
    };
    let store = Arc::new(Store::open(dir.join("store"), options(BackendKind::Pread)).unwrap());
    let writer = kill9::spawn_acked_writer(store.clone(), dir.join("acks"), cycle, keys_outside());
    let mut log = AckLog::open(&dir.join("range"));
    let inside = keys_inside();
    let mut version = kill9::first_version(cycle);
    loop {
        for chunk in inside.chunks(128) {
            let pairs: Vec<_> = chunk
                .iter()
                .map(|&i| (key(i), value_of(i, version)))
                .collect();
            store.multi_put(&pairs).unwrap();
        }
        log.ack(&format!("filled {version}"));
        if version % 2 == 0 {
            // The drop's deletes then follow a checkpoint that knows every key.
            store.checkpoint().unwrap();
        }
        log.ack(&format!("dropping {version}"));
        assert_eq!(store.drop_range(range()).unwrap(), inside.len() as u64);
        log.ack(&format!("dropped {version}"));
        version += 1;
        assert!(!writer.is_finished(), "the writer stopped");
    }
}

/// kill -9 at random moments of range drops under acknowledged writes to the other slots of
/// the same partitions.
#[test]
fn drop_range_survives_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let inside = keys_inside();
    let outside = keys_outside();
    {
        let store = Store::open(dir.path().join("store"), options(BackendKind::Pread)).unwrap();
        load(&store, &(0..KEYS).collect::<Vec<_>>());
        store.close().unwrap();
        AckLog::open(&dir.path().join("range")).ack("filled 0");
    }
    let mut rng = Rng::new(31);
    let mut acked = HashMap::new();
    let mut seen: HashMap<&str, u64> = HashMap::new();
    let mut checked = 0;
    for cycle in 0..cycles() {
        kill9::run_and_kill(
            "migrate_crash::drop_child",
            dir.path(),
            cycle,
            &mut rng,
            200,
            1200,
        );
        kill9::read_acked_versions(&dir.path().join("acks"), &mut acked);
        let state = drop_state(&kill9::acked_lines(&dir.path().join("range")));
        for (path, how) in reopenings(dir.path(), "store") {
            let when = format!("cycle {cycle}, {state:?}, {how}");
            let store = kill9::open_undamaged(&path, options(BackendKind::Pread), &when);
            checked = kill9::check_acked(&store, &outside, &acked, &when);
            let mut present = 0;
            for &i in &inside {
                let got = store.get(&key(i)).unwrap().map(|v| version_of(&v));
                let ok = match (state, got) {
                    (DropState::Filled(v), Some(g)) => g >= v,
                    (DropState::Filled(_), None) => false,
                    (DropState::Dropping(v), g) => g.is_none_or(|g| g == v),
                    (DropState::Dropped(v), g) => g.is_none_or(|g| g > v),
                };
                assert!(ok, "{when}: key {i} has version {got:?}");
                present += got.is_some() as u64;
            }
            let kind = match state {
                DropState::Dropping(_) if present > 0 && present < inside.len() as u64 => {
                    "mid-drop"
                }
                DropState::Dropping(_) => "dropping",
                DropState::Filled(_) => "filled",
                DropState::Dropped(_) => "dropped",
            };
            if how == REBUILT {
                *seen.entry(kind).or_insert(0) += 1;
                store.close().unwrap();
                continue;
            }
            // Dropping again completes the drop the kill interrupted.
            if let DropState::Dropping(v) = state {
                assert_eq!(store.drop_range(range()).unwrap(), present, "{when}");
                for &i in &inside {
                    assert_eq!(store.get(&key(i)).unwrap(), None, "{when}: key {i}");
                }
                kill9::check_acked(&store, &outside, &acked, &when);
                AckLog::open(&dir.path().join("range")).ack(&format!("dropped {v}"));
            }
            store.close().unwrap();
        }
    }
    assert!(!acked.is_empty(), "the children wrote");
    eprintln!(
        "drop: {} kill -9 cycles, states at the kills {seen:?}, {checked} keys with acknowledged \
         writes checked, {} range keys checked each cycle",
        cycles(),
        inside.len()
    );
}
