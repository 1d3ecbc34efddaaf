//! Checkpoints taken while writers run. A checkpoint is a snapshot of a partition's index and
//! counters plus the log position they reflect; opening replays the log from that position.
//! If a checkpoint's index reflected a record past its position (or missed one before it),
//! reopening from it would disagree with rebuilding the index from the whole log: different
//! values, or different record counters.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

use quiver_store::{BackendKind, Batch, Durability, Options, Store};
use quiver_testkit::rng::Rng;

use crate::common::{checkpoint_files, scan_all, small_options, value};

const WRITERS: u64 = 3;
const ROUNDS: u64 = 2000;
const KEYS_PER_WRITER: u64 = 400;

fn writer_key(w: u64, i: u64) -> Vec<u8> {
    format!("w{w}:{i:05}").into_bytes()
}

/// One writer's mix of single puts, vectors, deletes and batches (spanning partitions) over
/// its own keys; returns what its keys hold at the end.
fn write_mix(store: &Store, w: u64) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut model = BTreeMap::new();
    let mut rng = Rng::new(w + 1);
    for round in 0..ROUNDS {
        match rng.below(4) {
            0 => {
                let i = rng.below(KEYS_PER_WRITER);
                let (k, v) = (writer_key(w, i), value(i, round));
                store.put(&k, &v).unwrap();
                model.insert(k, v);
            }
            1 => {
                let pairs: Vec<(Vec<u8>, Vec<u8>)> = (0..8)
                    .map(|_| {
                        let i = rng.below(KEYS_PER_WRITER);
                        (writer_key(w, i), value(i, round))
                    })
                    .collect();
                store.multi_put(&pairs).unwrap();
                model.extend(pairs);
            }
            2 => {
                let keys: Vec<Vec<u8>> = (0..4)
                    .map(|_| writer_key(w, rng.below(KEYS_PER_WRITER)))
                    .collect();
                store.multi_delete(&keys).unwrap();
                for k in keys {
                    model.remove(&k);
                }
            }
            _ => {
                let mut batch = Batch::new();
                let mut effects = Vec::new();
                for _ in 0..6 {
                    let i = rng.below(KEYS_PER_WRITER);
                    let k = writer_key(w, i);
                    if rng.below(3) == 0 {
                        batch.delete(k.clone());
                        effects.push((k, None));
                    } else {
                        let v = value(i, round);
                        batch.put(k.clone(), v.clone());
                        effects.push((k, Some(v)));
                    }
                }
                assert!(store.apply(&batch).unwrap().is_applied());
                for (k, v) in effects {
                    match v {
                        Some(v) => model.insert(k, v),
                        None => model.remove(&k),
                    };
                }
            }
        }
    }
    model
}

/// Every key of the store with its value, and the store's record counters.
fn contents(store: &Store) -> (BTreeMap<Vec<u8>, Vec<u8>>, u64, u64) {
    let all: BTreeMap<Vec<u8>, Vec<u8>> = scan_all(store, 256)
        .into_iter()
        .map(|k| {
            let v = store.get(&k).unwrap().unwrap().to_vec();
            (k, v)
        })
        .collect();
    let stats = store.stats();
    assert_eq!(stats.keys, all.len() as u64);
    (all, stats.records, stats.dead_records)
}

#[test]
fn checkpoints_taken_while_writers_run_reopen_correctly() {
    for durability in [Durability::Os, Durability::None] {
        let dir = tempfile::tempdir().unwrap();
        let opts = Options {
            durability,
            ..small_options(BackendKind::Pread)
        };
        let store = Arc::new(Store::open(dir.path(), opts.clone()).unwrap());
        let done = Arc::new(AtomicBool::new(false));
        let checkpointer = {
            let (store, done) = (store.clone(), done.clone());
            thread::spawn(move || {
                let mut saved = 0u64;
                while !done.load(Ordering::SeqCst) {
                    store.checkpoint().unwrap();
                    saved += 1;
                }
                saved
            })
        };
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let store = store.clone();
                thread::spawn(move || write_mix(&store, w))
            })
            .collect();
        let mut model = BTreeMap::new();
        for t in writers {
            model.extend(t.join().unwrap());
        }
        done.store(true, Ordering::SeqCst);
        let saved = checkpointer.join().unwrap();
        assert!(saved > 0);
        // The records reach the file (`none` mode buffers them), but no checkpoint is taken
        // after the writers: the last one is from while they ran.
        store.flush().unwrap();
        Arc::into_inner(store).unwrap().simulate_crash();

        let what = format!("{durability}: {saved} checkpoints");
        eprintln!("{what}");
        let s = Store::open(dir.path(), opts.clone()).unwrap();
        let r = s.recovery_report().clone();
        assert_eq!(r.partitions_from_checkpoint, 4, "{what}: {r:#?}");
        assert!(r.damage.is_empty(), "{what}: {r:#?}");
        let from_checkpoint = contents(&s);
        assert!(
            from_checkpoint.0 == model,
            "{what}: reopened from checkpoints"
        );
        s.simulate_crash();

        for f in checkpoint_files(dir.path()) {
            std::fs::remove_file(f).unwrap();
        }
        let s = Store::open(dir.path(), opts).unwrap();
        assert_eq!(s.recovery_report().partitions_rebuilt, 4, "{what}");
        let rebuilt = contents(&s);
        assert!(rebuilt.0 == model, "{what}: rebuilt from the log");
        assert_eq!(
            (from_checkpoint.1, from_checkpoint.2),
            (rebuilt.1, rebuilt.2),
            "{what}: records and dead records, from checkpoints vs rebuilt"
        );
        s.close().unwrap();
    }
}
