//! Pipelines (`Db::pipeline`) under concurrency: what the per-partition write path must never
//! do, checked while writers run on many threads at once.
//!
//! - A pipeline's writes on one key apply in order: after it, the key holds the pipeline's last
//!   value, and a reader polling the key never sees its version go back.
//! - Pipelines never make a compound batch look half-applied: a reader's `multi_get` of a
//!   batch's keys (one in every partition) always finds one version in all of them, while
//!   pipelines write other keys of the same partitions from every thread.
//! - Batches and pipelines racing on the same keys leave one index entry per key: a batch that
//!   looked its keys up before its locks acts on them as they are under the locks.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use std::collections::BTreeMap;

use quiver_store::{Access, Answer, BackendKind, Batch, Options, Store};
use quiver_testkit::rng::{seed_from_env, Rng};

use crate::common::small_options;

/// Pipelines per pipeline writer; batches per batch writer.
const ROUNDS: u64 = 400;
/// Writes of the hot key in each pipeline.
const HOT_WRITES: u64 = 4;

fn version_of(value: &[u8]) -> u64 {
    let text = std::str::from_utf8(value).expect("a version");
    text.rsplit(':').next().unwrap().parse().expect("a version")
}

/// Writer `w`'s hot key, and `n` other keys of it (spread over every partition).
fn keys_of(w: usize, n: usize) -> (Vec<u8>, Vec<Vec<u8>>) {
    let hot = format!("hot:{w}").into_bytes();
    let others = (0..n)
        .map(|i| format!("cold:{w}:{i}").into_bytes())
        .collect();
    (hot, others)
}

/// Pipelines of writer `w`: each writes its hot key `HOT_WRITES` times (increasing versions),
/// other keys around them, reads the hot key in the middle; checks what it reads and that
/// the hot key ends at the pipeline's last version.
fn pipeline_writer(store: &Store, w: usize) {
    let db = store.db(0).unwrap();
    let (hot, cold) = keys_of(w, 24);
    let mut version = 0u64;
    for round in 0..ROUNDS {
        let values: Vec<Vec<u8>> = (0..HOT_WRITES)
            .map(|j| format!("v:{}", version + j + 1).into_bytes())
            .collect();
        let filler = format!("round {round}").into_bytes();
        let mut accesses = Vec::new();
        for (j, v) in values.iter().enumerate() {
            accesses.push(Access::Put(&hot, v));
            for k in cold.iter().skip(j * 6).take(6) {
                accesses.push(Access::Put(k, &filler));
            }
            if j == 1 {
                accesses.push(Access::Get(&hot));
            }
        }
        let got = db.pipeline(&accesses).expect("a pipeline");
        assert!(got.failures.is_empty(), "{:?}", got.failures);
        // The get after the second write of the hot key sees that write.
        let read = got
            .answers
            .iter()
            .find_map(|a| match a {
                Some(Answer::Value(v)) => Some(v.clone().map(|e| e.value)),
                _ => None,
            })
            .flatten()
            .expect("the hot key's value");
        assert_eq!(version_of(&read), version + 2, "writer {w}, round {round}");
        version += HOT_WRITES;
        let now = store.get(&hot).unwrap().expect("the hot key");
        assert_eq!(
            version_of(&now),
            version,
            "writer {w}: writes applied out of order"
        );
    }
}

/// Batches over `group` (a key in every partition), each one version in all of them.
fn batch_writer(store: &Store, group: &[Vec<u8>]) {
    for version in 1..=ROUNDS {
        let mut batch = Batch::new();
        for k in group {
            batch.put(k.clone(), format!("b:{version}").into_bytes());
        }
        assert!(store.apply(&batch).unwrap().is_applied());
    }
}

/// Reads every hot key (its version never goes back) and the batch group (one version in all
/// of its keys) until told to stop.
fn reader(store: &Store, writers: usize, group: &[Vec<u8>], stop: &AtomicBool) -> u64 {
    let mut seen = vec![0u64; writers];
    let mut reads = 0;
    while !stop.load(Ordering::Relaxed) {
        for (w, last) in seen.iter_mut().enumerate() {
            let (hot, _) = keys_of(w, 0);
            if let Some(v) = store.get(&hot).unwrap() {
                let now = version_of(&v);
                assert!(now >= *last, "hot key {w} went back from {last} to {now}");
                *last = now;
            }
        }
        let got = store.multi_get(group).unwrap();
        let versions: Vec<Option<u64>> = got.iter().map(|v| v.as_deref().map(version_of)).collect();
        assert!(
            versions.windows(2).all(|p| p[0] == p[1]),
            "a batch seen half-applied: {versions:?}"
        );
        reads += 1;
    }
    reads
}

#[test]
fn pipelines_apply_in_order_and_never_tear_a_batch() {
    let tmp = tempfile::tempdir().unwrap();
    let opts = quiver_store::Options {
        partitions: 8,
        segment_bytes: 1 << 20,
        ..small_options(BackendKind::Pread)
    };
    let store = Arc::new(Store::open(tmp.path(), opts).unwrap());
    // One key of the group in every partition.
    let group: Vec<Vec<u8>> = {
        let mut by_part = std::collections::BTreeMap::new();
        for i in 0.. {
            let k = format!("group:{i}").into_bytes();
            let p = quiver_store::slot::even_layout_partition(&k, 8);
            by_part.entry(p).or_insert(k);
            if by_part.len() == 8 {
                break;
            }
        }
        by_part.into_values().collect()
    };
    let threads = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .max(4);
    let writers = threads;
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let readers: Vec<_> = (0..2)
            .map(|_| scope.spawn(|| reader(&store, writers, &group, &stop)))
            .collect();
        let batches: Vec<_> = (0..2)
            .map(|_| scope.spawn(|| batch_writer(&store, &group)))
            .collect();
        let pipelines: Vec<_> = (0..writers)
            .map(|w| {
                let store = &store;
                scope.spawn(move || pipeline_writer(store, w))
            })
            .collect();
        for t in pipelines.into_iter().chain(batches) {
            t.join().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        for r in readers {
            assert!(r.join().unwrap() > 0, "a reader read nothing");
        }
    });
}

/// Keys every racer writes.
const SHARED_KEYS: u64 = 24;
/// Threads racing: a third write batches, the others pipelines.
const RACERS: u64 = 6;
/// Batches or pipelines per racer.
const RACE_ROUNDS: u64 = 600;

fn shared_key(i: u64) -> Vec<u8> {
    format!("shared:{i}").into_bytes()
}

/// Batches of a dozen shared keys (now and then deleting one), racer `r`'s values.
fn batch_racer(store: &Store, r: u64, rng: &mut Rng) {
    for round in 0..RACE_ROUNDS {
        let mut batch = Batch::new();
        for j in 0..12 {
            let key = shared_key(rng.below(SHARED_KEYS));
            match (round + j) % 16 {
                0 => batch.delete(key),
                _ => batch.put(key, format!("batch {r}:{round}").into_bytes()),
            };
        }
        assert!(store.apply(&batch).unwrap().is_applied());
    }
}

/// Pipelines of puts and deletes of shared keys.
fn pipeline_racer(store: &Store, r: u64, rng: &mut Rng) {
    let db = store.db(0).unwrap();
    for round in 0..RACE_ROUNDS {
        let keys: Vec<Vec<u8>> = (0..8).map(|_| shared_key(rng.below(SHARED_KEYS))).collect();
        let value = format!("pipeline {r}:{round}").into_bytes();
        let accesses: Vec<Access<'_>> = keys
            .iter()
            .map(|k| match rng.below(4) {
                0 => Access::Delete(k),
                _ => Access::Put(k, &value),
            })
            .collect();
        let got = db.pipeline(&accesses).unwrap();
        assert!(got.failures.is_empty(), "{:?}", got.failures);
    }
}

/// What every shared key holds; the store must count exactly these keys.
fn shared_contents(store: &Store) -> BTreeMap<u64, Vec<u8>> {
    let contents: BTreeMap<u64, Vec<u8>> = (0..SHARED_KEYS)
        .filter_map(|i| Some((i, store.get(&shared_key(i)).unwrap()?.to_vec())))
        .collect();
    assert_eq!(store.len(), contents.len() as u64, "keys counted twice");
    contents
}

/// Batches and pipelines racing on the same few keys from every thread, compaction and
/// growth running: a batch or a share that looked its keys up before its write locks
/// (`lookup::foresee`, when another holds one of its partitions) must act on each key as it is
/// under its locks — a key inserted, rewritten or deleted meanwhile looked up again. After the race the store
/// counts exactly the keys it finds (a second index entry for a key counts it twice), a
/// reopen finds the same values, and deleting every key leaves nothing behind.
#[test]
fn batches_racing_pipelines_on_the_same_keys_keep_one_entry_per_key() {
    let seed = seed_from_env("QUIVER_RACE_SEED");
    let tmp = tempfile::tempdir().unwrap();
    let opts = Options {
        partitions: 8,
        background: true,
        compact_garbage_ratio: 0.2,
        ..small_options(BackendKind::Pread)
    };
    let store = Store::open(tmp.path(), opts.clone()).unwrap();
    std::thread::scope(|scope| {
        for r in 0..RACERS {
            let store = &store;
            let mut rng = Rng::new(seed ^ r.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            scope.spawn(move || match r % 3 {
                0 => batch_racer(store, r, &mut rng),
                _ => pipeline_racer(store, r, &mut rng),
            });
        }
    });
    let before = shared_contents(&store);
    store.close().unwrap();
    let store = Store::open(tmp.path(), opts).unwrap();
    assert_eq!(shared_contents(&store), before, "seed {seed}");
    for i in 0..SHARED_KEYS {
        store.delete(&shared_key(i)).unwrap();
    }
    assert_eq!(store.len(), 0, "seed {seed}: a key left behind");
    assert!(shared_contents(&store).is_empty(), "seed {seed}");
    store.close().unwrap();
}
