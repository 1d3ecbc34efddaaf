//! Index resizes while writers insert and overwrite: a rebuild replays what writers appended
//! during its scan in rounds without the partition's lock, then the last records under it
//! (`resize`). No key written meanwhile may be missing from, or stale in, the new index.

use std::sync::Arc;

use quiver_store::{BackendKind, Options, Store};

use crate::common::{key, small_options, value};

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
