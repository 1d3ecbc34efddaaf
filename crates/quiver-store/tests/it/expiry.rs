//! Key expiry: expired keys are absent to every read, the summary survives checkpoints and
//! rebuilds, the sweep and compaction reclaim them, and — the tombstone problem — an expired
//! newer record never lets an older value of its key come back, whatever compaction, sweep,
//! restart or rebuild comes after. Time is a manual clock.

use std::collections::BTreeMap;
use std::path::Path;

use quiver_store::layout::{partition_dir, CHECKPOINT_FILE};
use quiver_store::{BackendKind, Batch, Clock, Entry, Error, Options, Precondition, Store, Ttl};
use quiver_testkit::rng::Rng;

use crate::common::{key, small_options, value};

const T0: u64 = 1_700_000_000_000;

fn options(clock: &Clock) -> Options {
    Options {
        clock: clock.clone(),
        ..small_options(BackendKind::Mmap)
    }
}

fn all_keys(store: &Store) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut cursor = 0;
    loop {
        let page = store.scan(cursor, None, 100).unwrap();
        out.extend(page.keys.iter().map(|k| k.to_vec()));
        if page.cursor == 0 {
            out.sort();
            return out;
        }
        cursor = page.cursor;
    }
}

/// Deletes every partition's checkpoint, so the next open rebuilds the index from the log.
fn drop_checkpoints(dir: &Path, partitions: u32) {
    for p in 0..partitions {
        let _ = std::fs::remove_file(partition_dir(dir, p).join(CHECKPOINT_FILE));
    }
}

#[test]
fn expired_keys_are_absent_to_every_read() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::manual(T0);
    let store = Store::open(dir.path(), options(&clock)).unwrap();
    store.put_expiring(b"soon", b"1", Some(T0 + 1000)).unwrap();
    store.put(b"never", b"2").unwrap();
    store
        .multi_put_expiring(&[(&b"later"[..], &b"3"[..], Some(T0 + 5000))])
        .unwrap();
    assert_eq!(store.ttl(b"soon").unwrap(), Ttl::At(T0 + 1000));
    assert_eq!(store.ttl(b"never").unwrap(), Ttl::Never);
    assert_eq!(store.ttl(b"nothing").unwrap(), Ttl::Absent);
    assert_eq!(store.len(), 3);
    let s = store.stats();
    assert_eq!((s.expiring_keys, s.avg_ttl_ms), (2, 3000));

    clock.advance(999);
    assert_eq!(store.get(b"soon").unwrap().as_deref(), Some(&b"1"[..]));
    clock.advance(1); // expiry at or before now: gone, as in Redis
    assert_eq!(store.get(b"soon").unwrap(), None);
    assert!(!store.exists(b"soon").unwrap());
    assert_eq!(store.ttl(b"soon").unwrap(), Ttl::Absent);
    assert_eq!(store.get_entry(b"soon").unwrap(), None);
    assert_eq!(store.multi_get(&[&b"soon"[..], b"never"]).unwrap()[0], None);
    assert_eq!(store.len(), 2);
    assert_eq!(all_keys(&store), vec![b"later".to_vec(), b"never".to_vec()]);
    let s = store.stats();
    assert_eq!((s.keys, s.expiring_keys, s.avg_ttl_ms), (2, 1, 4000));

    // A put on an expired key creates it anew; a delete of one reports it absent.
    store.put(b"soon", b"again").unwrap();
    assert_eq!(store.ttl(b"soon").unwrap(), Ttl::Never);
    clock.advance(10_000);
    assert!(!store.delete(b"later").unwrap());
    assert_eq!(store.len(), 2);
}

#[test]
fn set_expiry_persist_and_batches() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::manual(T0);
    let store = Store::open(dir.path(), options(&clock)).unwrap();
    store.put(b"k", b"v").unwrap();
    assert!(store.set_expiry(b"k", Some(T0 + 50)).unwrap());
    assert_eq!(
        store.get_entry(b"k").unwrap(),
        Some(Entry::string("v", Some(T0 + 50)))
    );
    assert!(store.persist(b"k").unwrap());
    assert!(!store.persist(b"k").unwrap());
    assert!(!store.set_expiry(b"missing", Some(T0)).unwrap());
    assert_eq!(store.ttl(b"k").unwrap(), Ttl::Never);

    // A batch put with an expiry; a snapshot precondition sees expiry changes.
    let snapshot = store.get_entry(b"k").unwrap();
    let mut b = Batch::new();
    b.put_expiring("k", "w", Some(T0 + 10), None).put("j", "x");
    assert!(store.apply(&b).unwrap().is_applied());
    assert_eq!(store.ttl(b"k").unwrap(), Ttl::At(T0 + 10));
    let mut check = Batch::new();
    check.check("k", Precondition::Unchanged(snapshot));
    assert!(!store.apply(&check).unwrap().is_applied());
    clock.advance(10);
    let mut absent = Batch::new();
    absent.check("k", Precondition::Absent);
    assert!(store.apply(&absent).unwrap().is_applied());
}

#[test]
fn expiries_survive_checkpoint_and_rebuild() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::manual(T0);
    let opts = options(&clock);
    let store = Store::open(dir.path(), opts.clone()).unwrap();
    for i in 0..500 {
        let at = (i % 2 == 0).then_some(T0 + 1000 + i);
        store.put_expiring(&key(i), &value(i, 0), at).unwrap();
    }
    let before = store.stats();
    assert_eq!(before.expiring_keys, 250);
    store.close().unwrap();

    for rebuild in [false, true] {
        if rebuild {
            drop_checkpoints(dir.path(), opts.partitions);
        }
        let store = Store::open(dir.path(), opts.clone()).unwrap();
        let s = store.stats();
        assert_eq!((s.expiring_keys, s.avg_ttl_ms), (250, before.avg_ttl_ms));
        assert_eq!(store.ttl(&key(10)).unwrap(), Ttl::At(T0 + 1010));
        assert_eq!(store.ttl(&key(11)).unwrap(), Ttl::Never);
        store.close().unwrap();
    }
}

#[test]
fn sweep_deletes_expired_keys_and_compaction_reclaims_them() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::manual(T0);
    let store = Store::open(dir.path(), options(&clock)).unwrap();
    for i in 0..1000 {
        store
            .put_expiring(&key(i), &value(i, 0), Some(T0 + 100))
            .unwrap();
    }
    store.put(b"stays", b"1").unwrap();
    clock.advance(100);
    assert_eq!(store.len(), 1);
    // Bounded per partition and call: several calls sweep everything.
    let mut swept = 0;
    for _ in 0..100 {
        let n = store.sweep_expired(64).unwrap();
        if n == 0 {
            break;
        }
        swept += n;
    }
    assert_eq!(swept, 1000);
    let s = store.stats();
    assert_eq!((s.keys, s.expiring_keys), (1, 0));
    let records_before = s.records;
    store.compact().unwrap();
    let s = store.stats();
    assert!(
        s.records < records_before / 10,
        "{} records left",
        s.records
    );
    assert_eq!(store.get(b"stays").unwrap().as_deref(), Some(&b"1"[..]));
}

/// The tombstone problem, deterministically: an old value copied by a first compaction pass
/// to the head of the log, then an expiring newer value in a later segment; the next pass
/// (of the sweep, so not a prefix of the log) compacts the newer one's segment while the old
/// value stays at the head; then restarts, with and without a rebuild from the log: the old
/// value must stay gone.
#[test]
fn an_expired_newer_record_never_lets_an_older_value_back() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::manual(T0);
    let opts = Options {
        partitions: 1,
        ..options(&clock)
    };
    let store = Store::open(dir.path(), opts.clone()).unwrap();
    store.put(b"victim", b"old").unwrap();
    // ~125 records of 1 KB fill a 128 KiB segment: these fill the first two and part of the
    // third.
    for i in 0..300 {
        store.put(&key(i), &[b'x'; 1000]).unwrap();
    }
    // The first pass of the sweep: the head segment, the old value still live, copied.
    let first = store.compact_step(1).unwrap();
    assert_eq!(first.segments_compacted, 1);
    store.put_expiring(b"victim", b"new", Some(T0 + 5)).unwrap();
    for i in 300..700 {
        store.put(&key(i), &[b'y'; 1000]).unwrap();
    }
    clock.advance(5);
    assert_eq!(store.get(b"victim").unwrap(), None);
    // The next passes: the second segment, then the third, which holds the expired record;
    // the old value's (dead) copy stays before them.
    for _ in 0..2 {
        let pass = store.compact_step(1).unwrap();
        assert_eq!(pass.segments_compacted, 1);
    }
    assert_eq!(store.get(b"victim").unwrap(), None);
    store.close().unwrap();
    for rebuild in [false, true] {
        if rebuild {
            drop_checkpoints(dir.path(), 1);
        }
        let store = Store::open(dir.path(), opts.clone()).unwrap();
        assert_eq!(store.get(b"victim").unwrap(), None, "rebuild: {rebuild}");
        store.close().unwrap();
    }
    // A whole compaction (a prefix) drops both for good.
    let store = Store::open(dir.path(), opts.clone()).unwrap();
    store.compact().unwrap();
    drop(store);
    drop_checkpoints(dir.path(), 1);
    let store = Store::open(dir.path(), opts).unwrap();
    assert_eq!(store.get(b"victim").unwrap(), None);
}

/// The model test: random puts (some expiring), deletes, clock moves, sweeps, compaction
/// steps and whole compactions, reopenings and rebuilds, checked against a map after every
/// step.
#[test]
fn expiry_model_never_resurrects() {
    for seed in [1u64, 2, 3] {
        run_model(seed, 1500);
    }
}

fn run_model(seed: u64, steps: usize) {
    const KEYS: u64 = 40;
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::manual(T0);
    let opts = Options {
        partitions: 2,
        segment_bytes: 128 << 10,
        ..options(&clock)
    };
    let mut rng = Rng::new(seed);
    // key -> (value, expire_at)
    let mut model: BTreeMap<Vec<u8>, (Vec<u8>, Option<u64>)> = BTreeMap::new();
    let mut store = Some(Store::open(dir.path(), opts.clone()).unwrap());
    for step in 0..steps {
        let s = store.as_ref().unwrap();
        let now = clock.now_ms();
        let k = key(rng.below(KEYS));
        match rng.below(100) {
            0..=39 => {
                let v = vec![b'a' + rng.below(26) as u8; rng.range(100, 3000) as usize];
                let at = (rng.below(2) == 0).then(|| now + rng.range(1, 50));
                s.put_expiring(&k, &v, at).unwrap();
                model.insert(k, (v, at));
            }
            40..=49 => {
                s.delete(&k).unwrap();
                model.remove(&k);
            }
            50..=69 => clock.advance(rng.range(1, 30)),
            70..=79 => {
                s.compact_step(rng.range(1, 256 << 10)).unwrap();
            }
            80..=84 => {
                s.sweep_expired(rng.range(1, 8) as usize).unwrap();
            }
            85..=87 => {
                s.compact().unwrap();
            }
            88..=91 => {
                let at = now + rng.range(0, 40);
                let live = model
                    .get(&k)
                    .is_some_and(|(_, e)| e.is_none_or(|e| e > now));
                assert_eq!(s.set_expiry(&k, Some(at)).unwrap(), live);
                if live {
                    model.get_mut(&k).unwrap().1 = Some(at);
                }
            }
            92..=95 => {
                store.take().unwrap().close().unwrap();
                if rng.below(2) == 0 {
                    drop_checkpoints(dir.path(), opts.partitions);
                }
                store = Some(Store::open(dir.path(), opts.clone()).unwrap());
            }
            _ => {
                store.take().unwrap().simulate_crash();
                store = Some(Store::open(dir.path(), opts.clone()).unwrap());
            }
        }
        let s = store.as_ref().unwrap();
        let now = clock.now_ms();
        let visible: BTreeMap<&Vec<u8>, &Vec<u8>> = model
            .iter()
            .filter(|(_, (_, e))| e.is_none_or(|e| e > now))
            .map(|(k, (v, _))| (k, v))
            .collect();
        for i in 0..KEYS {
            let k = key(i);
            let got = s.get(&k).unwrap();
            assert_eq!(
                got.as_deref(),
                visible.get(&k).map(|v| &v[..]),
                "seed {seed} step {step} key {i}"
            );
        }
        assert_eq!(s.len(), visible.len() as u64, "seed {seed} step {step}");
        let scanned = all_keys(s);
        let expected: Vec<Vec<u8>> = visible.keys().map(|k| (*k).clone()).collect();
        assert_eq!(scanned, expected, "seed {seed} step {step}");
    }
}

#[test]
fn a_version_1_store_is_refused_with_the_upgrade_named() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("QUIVER"),
        "quiver-store\nformat 1\npartitions 4\nsegment_bytes 131072\n",
    )
    .unwrap();
    let err = Store::open(dir.path(), small_options(BackendKind::Mmap))
        .err()
        .expect("a version-1 store does not open");
    assert!(matches!(err, Error::OldFormat { found: 1, .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains(&format!("quiver upgrade --dir {}", dir.path().display())),
        "{text}"
    );
}
