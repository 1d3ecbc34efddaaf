//! Range export, import and drop: a slot range copied from one store to another while a writer
//! keeps changing it (and keys outside it) ends up exactly equal once the writer stops and the
//! last changes are applied; a dropped range is gone and nothing else is.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use quiver_store::slot::{key_slot, SlotRange};
use quiver_store::{BackendKind, RangeItem, Store};

use crate::common::{key, small_options, value, Rng};

const KEYS: u64 = 3000;

/// The range under test: 10000 slots across partition boundaries, in every one of the 4
/// partitions (4096 slots each), and not all of any.
fn range() -> SlotRange {
    SlotRange::new(3000, 12999).unwrap()
}

#[test]
fn a_range_copied_while_written_ends_up_equal() {
    let src_dir = tempfile::tempdir().unwrap();
    let dst_dir = tempfile::tempdir().unwrap();
    let opts = small_options(BackendKind::Mmap);
    let src = Arc::new(Store::open(src_dir.path(), opts.clone()).unwrap());
    let dst = Store::open(dst_dir.path(), opts).unwrap();
    for i in 0..KEYS {
        src.put(&key(i), &value(i, 0)).unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (src, stop) = (src.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut rng = Rng::new(7);
            let mut round = 1;
            while !stop.load(Ordering::Relaxed) {
                let i = rng.below(KEYS);
                match rng.below(4) {
                    0 => {
                        src.delete(&key(i)).unwrap();
                    }
                    1 => src
                        .put_expiring(&key(i), &value(i, round), Some(u64::MAX / 2))
                        .unwrap(),
                    _ => src.put(&key(i), &value(i, round)).unwrap(),
                }
                round += 1;
            }
            round
        })
    };
    let mut export = src.export_range(range()).unwrap();
    let mut apply = |items: &[RangeItem]| dst.import(items);
    let snapshot = export.snapshot(&mut apply).unwrap();
    assert!(snapshot > 0);
    // Compaction leaves the exported partitions (all four) alone.
    assert_eq!(src.compact().unwrap().segments_compacted, 0);
    for _ in 0..3 {
        export.changes(&src, &mut apply).unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    let writes = writer.join().unwrap();
    assert!(writes > 100, "the writer ran ({writes} writes)");
    export.changes(&src, &mut apply).unwrap();
    drop(export);

    let mut inside = 0;
    for i in 0..KEYS {
        let k = key(i);
        if range().contains(key_slot(&k)) {
            inside += 1;
            assert_eq!(
                dst.get_entry(&k).unwrap(),
                src.get_entry(&k).unwrap(),
                "key {i}"
            );
        } else {
            assert_eq!(dst.get(&k).unwrap(), None, "key {i} is outside the range");
        }
    }
    assert!(inside > KEYS / 5);
    // Compaction works again once the export is gone.
    assert!(src.compact().unwrap().segments_compacted > 0);
}

#[test]
fn drop_range_deletes_the_range_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), small_options(BackendKind::Pread)).unwrap();
    for i in 0..KEYS {
        store.put(&key(i), &value(i, 0)).unwrap();
    }
    let inside = (0..KEYS)
        .filter(|&i| range().contains(key_slot(&key(i))))
        .count() as u64;
    assert_eq!(store.drop_range(range()).unwrap(), inside);
    assert_eq!(store.len(), KEYS - inside);
    for i in 0..KEYS {
        let k = key(i);
        assert_eq!(
            store.get(&k).unwrap().is_some(),
            !range().contains(key_slot(&k)),
            "key {i}"
        );
    }
}

#[test]
fn keys_in_a_slot_are_counted_and_listed() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), small_options(BackendKind::Mmap)).unwrap();
    // Hash tags put many keys in one slot.
    for i in 0..300 {
        store
            .put(format!("{{user7}}:{i}").as_bytes(), b"x")
            .unwrap();
        store.put(&key(i), b"y").unwrap();
    }
    let slot = key_slot(b"user7");
    let brute = (0..300).filter(|&i| key_slot(&key(i)) == slot).count() as u64;
    assert_eq!(store.count_keys_in_slot(slot).unwrap(), 300 + brute);
    let some = store.keys_in_slot(slot, 10).unwrap();
    assert_eq!(some.len(), 10);
    assert!(some.iter().all(|k| key_slot(k) == slot));
    assert!(store.keys_in_slot(slot, 0).unwrap().is_empty());
    let empty_slot = (0..16384u16)
        .find(|&s| (0..300).all(|i| key_slot(&key(i)) != s) && s != slot)
        .unwrap();
    assert_eq!(store.count_keys_in_slot(empty_slot).unwrap(), 0);
    assert!(store.keys_in_slot(empty_slot, 10).unwrap().is_empty());
}

/// FLUSHALL as one Truncate record per partition: everything goes at once, stays gone across
/// restarts, rebuilds and compaction (partial or whole), and what is written after it stays.
#[test]
fn drop_all_empties_the_store_for_good() {
    let dir = tempfile::tempdir().unwrap();
    let opts = small_options(BackendKind::Mmap);
    let store = Store::open(dir.path(), opts.clone()).unwrap();
    for i in 0..KEYS {
        store.put(&key(i), &value(i, 0)).unwrap();
    }
    assert_eq!(store.drop_all().unwrap(), KEYS);
    assert_eq!(store.len(), 0);
    assert_eq!(store.get(&key(1)).unwrap(), None);
    for i in 0..10 {
        store.put(&key(i), &value(i, 1)).unwrap();
    }
    store.close().unwrap();
    // Reopened from checkpoints, rebuilt from the logs (the Truncate records replayed), then
    // after a compaction and rebuilt again.
    for (rebuild, compact) in [(false, false), (true, false), (true, true)] {
        if rebuild {
            for p in 0..opts.partitions {
                let ckpt = quiver_store::layout::partition_dir(dir.path(), p)
                    .join(quiver_store::layout::CHECKPOINT_FILE);
                let _ = std::fs::remove_file(ckpt);
            }
        }
        let store = Store::open(dir.path(), opts.clone()).unwrap();
        if compact {
            store.compact().unwrap();
            let s = store.stats();
            assert!(s.records < 100, "{} records after compaction", s.records);
        }
        assert_eq!(store.len(), 10, "rebuild {rebuild}");
        for i in 0..KEYS {
            let expected = (i < 10).then(|| value(i, 1));
            assert_eq!(
                store.get(&key(i)).unwrap().map(|v| v.to_vec()),
                expected,
                "key {i}, rebuild {rebuild}"
            );
        }
        store.close().unwrap();
    }
}
