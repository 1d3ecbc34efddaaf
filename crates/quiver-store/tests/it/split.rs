//! Split and Merge while readers and writers run, then across restarts (with checkpoints and
//! rebuilt from the logs) and crashes: every acknowledged write is there, no deleted key comes
//! back, and each partition serves exactly its range.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use quiver_store::layout::partition_dir;
use quiver_store::slot::SlotRange;
use quiver_store::{BackendKind, Options, Store};
use quiver_testkit::rng::Rng;

use crate::common::{key, small_options};
use crate::kill9::{self, drop_checkpoints, value_of};

const KEYS: u64 = 20_000;

/// Writers put and delete while the test splits and merges; readers check that every value
/// they see is one written for that key. The model holds the last acknowledged state.
#[test]
fn split_and_merge_while_serving() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        partitions: 2,
        ..small_options(BackendKind::Mmap)
    };
    let store = Arc::new(Store::open(dir.path(), opts.clone()).unwrap());
    let model: Arc<Mutex<HashMap<u64, Option<u64>>>> = Arc::new(Mutex::new(HashMap::new()));
    for i in 0..KEYS {
        store.put(&key(i), &value_of(i, 0)).unwrap();
        model.lock().insert(i, Some(0));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    for w in 0..2u64 {
        let (store, model, stop) = (store.clone(), model.clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            let mut rng = Rng::new(w + 1);
            let mut version = 1;
            while !stop.load(Ordering::Relaxed) {
                // Writer w owns the keys i with i % 2 == w: the model stays exact.
                let i = rng.below(KEYS / 2) * 2 + w;
                let mut m = model.lock();
                if rng.below(5) == 0 {
                    store.delete(&key(i)).unwrap();
                    m.insert(i, None);
                } else {
                    let pairs = [
                        (key(i), value_of(i, version)),
                        (key(i ^ 2), value_of(i ^ 2, version)),
                    ];
                    store.multi_put(&pairs).unwrap();
                    m.insert(i, Some(version));
                    m.insert(i ^ 2, Some(version));
                }
                version += 1;
            }
        }));
    }
    {
        let (store, stop) = (store.clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            let mut rng = Rng::new(99);
            while !stop.load(Ordering::Relaxed) {
                let ids: Vec<u64> = (0..16).map(|_| rng.below(KEYS)).collect();
                let keys: Vec<Vec<u8>> = ids.iter().map(|&i| key(i)).collect();
                for (i, v) in ids.iter().zip(store.multi_get(&keys).unwrap()) {
                    if let Some(v) = v {
                        let text = String::from_utf8(v.to_vec()).unwrap();
                        assert!(text.starts_with(&format!("{i}:")), "key {i} read {text}");
                    }
                }
            }
        }));
    }
    // Each step after the others have run a while, so that the copies race with them.
    let pause = || std::thread::sleep(std::time::Duration::from_millis(50));
    pause();
    let first = store.split(4096).unwrap();
    pause();
    assert_eq!(first.range, SlotRange::new(4096, 8191).unwrap());
    let second = store.split(12000).unwrap();
    pause();
    assert_eq!(second.range, SlotRange::new(12000, 16383).unwrap());
    assert_eq!(store.slot_ranges().len(), 4);
    let merged = store.merge(4096).unwrap();
    pause();
    assert_eq!(merged.range, SlotRange::new(0, 8191).unwrap());
    assert_eq!(store.slot_ranges().len(), 3);
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    // The writers wrote while the splits copied: keys were copied again after the snapshot.
    let caught_up = first.keys_caught_up + second.keys_caught_up + merged.keys_caught_up;
    assert!(caught_up > 0, "{first:?} {second:?} {merged:?}");
    let model = model.lock().clone();
    let check = |store: &Store, when: &str| {
        let mut live = 0;
        for i in 0..KEYS {
            let expected = model[&i].map(|v| value_of(i, v));
            assert_eq!(
                store.get(&key(i)).unwrap().map(|v| v.to_vec()),
                expected,
                "key {i} {when}"
            );
            live += expected.is_some() as u64;
        }
        assert_eq!(store.len(), live, "{when}");
        let mut scanned = 0;
        let mut cursor = 0;
        loop {
            let page = store.scan(cursor, None, 500).unwrap();
            scanned += page.keys.len() as u64;
            if page.cursor == 0 {
                break;
            }
            cursor = page.cursor;
        }
        assert_eq!(
            scanned, live,
            "{when}: a quiet store's SCAN returns each key once"
        );
    };
    check(&store, "after the split and merge");
    let ranges = store.slot_ranges();
    drop(threads_done(store));

    let store = Store::open(dir.path(), opts.clone()).unwrap();
    assert_eq!(store.slot_ranges(), ranges);
    check(&store, "after a reopen");
    store.close().unwrap();
    drop_checkpoints(dir.path());
    let store = Store::open(dir.path(), opts.clone()).unwrap();
    check(&store, "after a rebuild from the logs");
    store.simulate_crash();
    let store = Store::open(dir.path(), opts).unwrap();
    check(&store, "after a crash");
    // Only the listed partitions' directories remain.
    let dirs = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with('p')
        })
        .count();
    assert_eq!(dirs, 3);
}

fn threads_done(store: Arc<Store>) -> Store {
    Arc::try_unwrap(store).ok().expect("the threads are done")
}

/// Keys deleted after they moved must not come back from the records the split left in the
/// source's log, however the index is rebuilt.
#[test]
fn left_behind_records_never_come_back() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        partitions: 1,
        ..small_options(BackendKind::Pread)
    };
    let store = Store::open(dir.path(), opts.clone()).unwrap();
    for i in 0..1000 {
        store.put(&key(i), &value_of(i, 0)).unwrap();
    }
    store.split(8192).unwrap();
    let moved: Vec<u64> = (0..1000)
        .filter(|&i| quiver_store::slot::key_slot(&key(i)) >= 8192)
        .collect();
    assert!(moved.len() > 300);
    for &i in &moved {
        store.delete(&key(i)).unwrap();
    }
    assert_eq!(store.len(), 1000 - moved.len() as u64);
    store.close().unwrap();
    for rebuild in [false, true] {
        if rebuild {
            drop_checkpoints(dir.path());
        }
        let store = Store::open(dir.path(), opts.clone()).unwrap();
        assert_eq!(store.len(), 1000 - moved.len() as u64, "rebuild {rebuild}");
        for &i in &moved {
            assert_eq!(
                store.get(&key(i)).unwrap(),
                None,
                "key {i}, rebuild {rebuild}"
            );
        }
        // Compaction drops the left-behind records.
        store.compact().unwrap();
        assert_eq!(store.len(), 1000 - moved.len() as u64);
        store.close().unwrap();
    }
    // Merging back builds a new partition: the old records stay garbage.
    let store = Store::open(dir.path(), opts.clone()).unwrap();
    store.merge(8192).unwrap();
    assert_eq!(store.slot_ranges(), vec![SlotRange::ALL]);
    store.close().unwrap();
    drop_checkpoints(dir.path());
    let store = Store::open(dir.path(), opts).unwrap();
    assert_eq!(store.len(), 1000 - moved.len() as u64);
    for &i in &moved {
        assert_eq!(store.get(&key(i)).unwrap(), None);
    }
}

/// What a split that crashed before its commit leaves — a partition directory `QUIVER` does
/// not list — is removed by the next opening, and the store is as before.
#[test]
fn an_uncommitted_split_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let opts = small_options(BackendKind::Mmap);
    let store = Store::open(dir.path(), opts.clone()).unwrap();
    for i in 0..100 {
        store.put(&key(i), &value_of(i, 0)).unwrap();
    }
    store.close().unwrap();
    let orphan = partition_dir(dir.path(), 7);
    std::fs::create_dir_all(&orphan).unwrap();
    std::fs::write(orphan.join("0000000000000099.seg"), b"half a split").unwrap();
    let store = Store::open(dir.path(), opts).unwrap();
    assert!(!orphan.exists());
    assert_eq!(store.len(), 100);
    // Bad requests are refused with a reason.
    assert!(store.split(0).is_err());
    assert!(store.merge(100).is_err());
}

const KILL9_KEYS: u64 = 20_000;

fn kill9_options() -> Options {
    Options {
        partitions: 2,
        // Acknowledged means durable: the ack file may only name what survives a kill.
        durability: quiver_store::Durability::Fsync,
        background: true,
        ..small_options(BackendKind::Mmap)
    }
}

/// The child: splits and merges in a loop while a writer overwrites keys; after each write
/// returns, it appends "key version" to the ack file. Runs until killed.
#[test]
#[ignore = "the child process of splits_and_merges_survive_kill_9"]
fn kill9_child() {
    let Some((dir, cycle)) = kill9::child_env() else {
        return;
    };
    let store = Arc::new(Store::open(dir.join("store"), kill9_options()).unwrap());
    let writer = kill9::spawn_acked_writer(
        store.clone(),
        dir.join("acks"),
        cycle,
        (0..KILL9_KEYS).collect(),
    );
    // Split at a slot inside the first partition's range and merge back, forever.
    loop {
        let ranges = store.slot_ranges();
        if ranges.len() < 4 {
            let widest = ranges.iter().max_by_key(|r| r.len()).unwrap();
            store
                .split(widest.lo + (widest.hi - widest.lo) / 2 + 1)
                .unwrap();
        } else {
            store.merge(ranges[1].lo).unwrap();
        }
        if writer.is_finished() {
            panic!("the writer stopped");
        }
    }
}

/// kill -9 at random moments of splits and merges under writes: the store opens without
/// damage, every key is there, and none is older than its last acknowledged write.
#[test]
fn splits_and_merges_survive_kill_9() {
    let cycles = kill9::cycles("QUIVER_SPLIT_KILL9_CYCLES", 6);
    let dir = tempfile::tempdir().unwrap();
    {
        let store = Store::open(dir.path().join("store"), kill9_options()).unwrap();
        let pairs: Vec<(Vec<u8>, Vec<u8>)> =
            (0..KILL9_KEYS).map(|i| (key(i), value_of(i, 0))).collect();
        for chunk in pairs.chunks(1000) {
            store.multi_put(chunk).unwrap();
        }
        store.close().unwrap();
    }
    let mut rng = Rng::new(11);
    let mut acked: HashMap<u64, u64> = HashMap::new();
    let mut layouts: std::collections::HashSet<Vec<SlotRange>> = std::collections::HashSet::new();
    let all: Vec<u64> = (0..KILL9_KEYS).collect();
    // A loaded machine may let every kill of the first cycles land before the child's first
    // split: a few more cycles then (bounded), until the kills have seen two layouts.
    let cycles_max = cycles * 4;
    let mut cycle = 0;
    while cycle < cycles || (layouts.len() < 2 && cycle < cycles_max) {
        kill9::run_and_kill("split::kill9_child", dir.path(), cycle, &mut rng, 200, 1000);
        kill9::read_acked_versions(&dir.path().join("acks"), &mut acked);
        let store = Store::open(dir.path().join("store"), kill9_options())
            .unwrap_or_else(|e| panic!("cycle {cycle}: {e}"));
        let ranges = store.slot_ranges();
        assert!(
            quiver_store::slot::covers_all(&ranges),
            "cycle {cycle}: {ranges:?}"
        );
        layouts.insert(ranges.clone());
        assert_eq!(store.len(), KILL9_KEYS, "cycle {cycle}");
        kill9::check_acked(&store, &all, &acked, &format!("cycle {cycle}"));
        store.close().unwrap();
        cycle += 1;
    }
    assert!(!acked.is_empty(), "the children wrote");
    // The kills found the store in different layouts: they came during splits and merges.
    assert!(layouts.len() > 1, "{layouts:?}");
    eprintln!(
        "{cycle} kill -9 cycles, {} layouts seen, {} keys with acknowledged writes checked",
        layouts.len(),
        acked.len()
    );
}
