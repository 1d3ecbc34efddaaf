//! Index resizes while writers insert and overwrite: a rebuild replays what writers appended
//! during its scan in rounds without the partition's lock, then the last records under it
//! (`resize`). No key written meanwhile may be missing from, or stale in, the new index.

use std::collections::BTreeSet;
use std::sync::Arc;

use quiver_store::{BackendKind, Options, Store};

use crate::common::{key, scan_all, small_options, value};

const WRITERS: u64 = 4;
const KEYS_PER_WRITER: u64 = 40_000;
/// Keys per `multi_put`: big enough that writers outrun a rebuild's scan.
const BATCH: u64 = 64;

#[test]
fn indexes_grow_while_writers_insert_and_overwrite() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        // The background thread resizes ahead of need while the writers go on.
        background: true,
        segment_bytes: 4 << 20,
        ..small_options(BackendKind::Mmap)
    };
    let store = Arc::new(Store::open(dir.path(), opts.clone()).unwrap());
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let store = store.clone();
            std::thread::spawn(move || {
                let first = w * KEYS_PER_WRITER;
                for start in (first..first + KEYS_PER_WRITER).step_by(BATCH as usize) {
                    let pairs: Vec<_> = (start..start + BATCH)
                        .map(|i| (key(i), value(i, 0)))
                        .collect();
                    store.multi_put(&pairs).unwrap();
                    // Overwrite a key written earlier: its newest value must win in the rebuild.
                    let old = first + (start - first) / 2;
                    store.put(&key(old), &value(old, 1)).unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let expect = |i: u64| {
        let first = i / KEYS_PER_WRITER * KEYS_PER_WRITER;
        let overwritten = (first..first + KEYS_PER_WRITER)
            .step_by(BATCH as usize)
            .any(|start| first + (start - first) / 2 == i);
        value(i, u64::from(overwritten))
    };
    let verify = |store: &Store| {
        assert_eq!(store.len(), WRITERS * KEYS_PER_WRITER);
        for i in 0..WRITERS * KEYS_PER_WRITER {
            let got = store.get(&key(i)).unwrap();
            assert_eq!(got.as_deref(), Some(&expect(i)[..]), "key {i}");
        }
        let check = store.check().unwrap();
        assert!(check.is_ok(), "{check:?}");
    };
    verify(&store);
    assert!(store.stats().maintenance_runs > 0, "no index was resized");
    drop(store);
    verify(&Store::open(dir.path(), opts).unwrap());
}

/// A partition whose main index table is full takes keys in its spill: without a background
/// thread nothing resizes it until the spill is full too, when the writer resizes. Reads,
/// overwrites, deletes, SCAN, compaction, checkpoints and reopening see every spilled key,
/// and the writer's resize folds the spill back into one table.
#[test]
fn keys_in_an_index_spill_are_read_scanned_compacted_and_reopened() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        partitions: 1,
        ..small_options(BackendKind::Mmap)
    };
    let store = Store::open(dir.path(), opts.clone()).unwrap();
    let mut n = 0u64;
    while store.stats().index_spilled_keys < 200 {
        assert!(n < 100_000, "no spill after {n} keys");
        store.put(&key(n), &value(n, 0)).unwrap();
        n += 1;
    }
    for i in (0..n).step_by(3) {
        store.put(&key(i), &value(i, 1)).unwrap();
    }
    for i in (0..n).step_by(7) {
        assert!(store.delete(&key(i)).unwrap());
    }
    // Keys up to `first` were overwritten (every third) and deleted (every seventh).
    let first = n;
    let verify = |store: &Store, n: u64| {
        for i in 0..n {
            let deleted = i % 7 == 0 && i < first;
            let round = u64::from(i % 3 == 0 && i < first);
            let want = (!deleted).then(|| value(i, round));
            let got = store.get(&key(i)).unwrap();
            assert_eq!(got.as_deref(), want.as_deref(), "key {i}");
        }
        let want: BTreeSet<Vec<u8>> = (0..n)
            .filter(|i| i % 7 != 0 || *i >= first)
            .map(key)
            .collect();
        assert_eq!(scan_all(store, 50), want);
        let check = store.check().unwrap();
        assert!(check.is_ok(), "{check:?}");
    };
    verify(&store, n);
    // A checkpoint leaves the spilled partition to the log; compaction moves records of both
    // tables.
    store.checkpoint().unwrap();
    store.compact().unwrap();
    assert!(store.stats().index_spilled_keys > 0);
    verify(&store, n);
    drop(store);
    let store = Store::open(dir.path(), opts.clone()).unwrap();
    verify(&store, n);
    drop(store);

    // Spilling again until the writer must resize: one table after it.
    let store = Store::open(dir.path(), opts).unwrap();
    let mut spilled = false;
    for _ in 0..100_000 {
        store.put(&key(n), &value(n, 0)).unwrap();
        n += 1;
        let now = store.stats().index_spilled_keys;
        if spilled && now == 0 {
            break;
        }
        spilled |= now > 0;
    }
    assert!(spilled && store.stats().index_spilled_keys == 0);
    verify(&store, n);
}
