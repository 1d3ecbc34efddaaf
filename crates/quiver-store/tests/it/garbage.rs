//! Compaction by garbage: the background's passes take the ranges of the log with the most
//! dead records per record, so they copy far fewer live records than passes over the whole
//! log — and lose nothing, across reopens, deletes and crashes.

use std::collections::BTreeMap;

use quiver_store::{BackendKind, Options, Store};
use quiver_testkit::rng::Rng;

use crate::common::{key, small_options, value};

const KEYS: u64 = 4000;
/// Overwrites after the load: ten times the keys, uniform over them.
const ROUNDS: u64 = 40;
const WRITES_PER_ROUND: u64 = KEYS / 4;

fn options() -> Options {
    Options {
        partitions: 1,
        // A segment holds the whole test: only compaction seals the active segment.
        segment_bytes: 8 << 20,
        compact_garbage_ratio: 0.5,
        compact_min_dead_records: 64,
        ..small_options(BackendKind::Pread)
    }
}

/// Loads `KEYS` keys, overwrites them `ROUNDS` times a quarter of them at random (a few
/// deletes among them), running `compact` after each round; returns the model and the
/// records the passes copied per record written.
fn overwrite(s: &Store, seed: u64, compact: impl Fn(&Store)) -> (BTreeMap<Vec<u8>, Vec<u8>>, f64) {
    let mut model = BTreeMap::new();
    let pairs: Vec<(Vec<u8>, Vec<u8>)> = (0..KEYS).map(|i| (key(i), value(i, 0))).collect();
    s.multi_put(&pairs).unwrap();
    model.extend(pairs);
    let mut rng = Rng::new(seed);
    let mut written = 0u64;
    for round in 1..=ROUNDS {
        let mut pairs = Vec::new();
        let mut deletes = Vec::new();
        for _ in 0..WRITES_PER_ROUND {
            let i = rng.below(KEYS);
            if rng.below(50) == 0 {
                deletes.push(key(i));
            } else {
                pairs.push((key(i), value(i, round)));
            }
        }
        s.multi_put(&pairs).unwrap();
        s.multi_delete(&deletes).unwrap();
        model.extend(pairs);
        for k in &deletes {
            model.remove(k);
        }
        written += WRITES_PER_ROUND;
        compact(s);
    }
    let copied = s.stats().compaction_copied_records;
    (model, copied as f64 / written as f64)
}

fn assert_holds(s: &Store, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    assert_eq!(s.len(), model.len() as u64);
    for i in 0..KEYS {
        let k = key(i);
        assert_eq!(
            s.get(&k).unwrap().map(|v| v.to_vec()).as_ref(),
            model.get(&k),
            "key {i}"
        );
    }
    let check = s.check().unwrap();
    assert!(check.is_ok(), "{check:?}");
}

#[test]
fn passes_by_garbage_copy_far_less_than_passes_over_the_whole_log() {
    let seed = 7;
    // Passes over the whole log, whenever the garbage ratio passes the trigger.
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path(), options()).unwrap();
    let (model, whole) = overwrite(&s, seed, |s| {
        if s.stats().garbage_ratio > 0.5 {
            s.compact().unwrap();
        }
    });
    assert_holds(&s, &model);
    s.close().unwrap();

    // Passes by garbage, as the background thread runs them.
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path(), options()).unwrap();
    let (model, by_garbage) = overwrite(&s, seed, |s| {
        s.compact_garbage().unwrap();
    });
    let st = s.stats();
    assert!(st.compaction_dropped_records > 0, "{st:?}");
    // Several groups of segments: ranges were taken out of the middle of the log too.
    assert!(st.segments > 2, "{st:?}");
    assert!(
        by_garbage < 0.75 * whole,
        "copies per write: by garbage {by_garbage:.3}, whole log {whole:.3}"
    );
    assert_holds(&s, &model);
    s.close().unwrap();
    let s = Store::open(dir.path(), options()).unwrap();
    assert_holds(&s, &model);

    // Reopened, the old segments' counts are unknown: the first pass takes the whole log,
    // and the passes after it choose by garbage again.
    let (model, _) = overwrite(&s, seed + 1, |s| {
        s.compact_garbage().unwrap();
    });
    s.simulate_crash();
    let s = Store::open(dir.path(), options()).unwrap();
    assert_holds(&s, &model);
    s.close().unwrap();
}

/// Compaction's trigger changes while the store is open (a server's CONFIG SET
/// compaction-garbage-ratio): at 0 a partition full of garbage is left alone, set back it is
/// compacted; values out of range are refused and change nothing.
#[test]
fn the_garbage_trigger_changes_while_open() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path(), options()).unwrap();
    for round in 0..=3 {
        let again: Vec<(Vec<u8>, Vec<u8>)> = (0..KEYS).map(|i| (key(i), value(i, round))).collect();
        s.multi_put(&again).unwrap();
    }
    s.set_compaction(0.0, 1.0).unwrap();
    assert_eq!(
        s.compact_garbage().unwrap().records_dropped,
        0,
        "compacted with the trigger off"
    );
    assert!(s.set_compaction(1.0, 1.0).is_err());
    assert!(s.set_compaction(0.5, 0.0).is_err());
    assert_eq!(s.compaction(), (0.0, 1.0));
    s.set_compaction(0.5, 1.0).unwrap();
    assert!(
        s.compact_garbage().unwrap().records_dropped > 0,
        "not compacted with the trigger on"
    );
    for i in 0..KEYS {
        assert_eq!(
            s.get(&key(i)).unwrap().map(|v| v.to_vec()),
            Some(value(i, 3))
        );
    }
}
