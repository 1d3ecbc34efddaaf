//! Databases (SELECT): keys of different databases are different keys; SWAPDB and FLUSHDB are
//! one metadata write each, atomic for readers and across reopen and crash; flushed records
//! never come back and compaction reclaims them; split and merge move every database's keys.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use quiver_store::layout::CHECKPOINT_FILE;
use quiver_store::{BackendKind, Batch, Error, Options, Store};

use crate::common::{key, small_options};

const KEYS: u64 = 2_000;

fn opts() -> Options {
    Options {
        partitions: 4,
        ..small_options(BackendKind::Mmap)
    }
}

fn drop_checkpoints(dir: &std::path::Path) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let _ = std::fs::remove_file(entry.unwrap().path().join(CHECKPOINT_FILE));
    }
}

/// Fills databases 0..3 with the same keys, each with values naming its database.
fn fill(store: &Store) {
    for db in 0..3u32 {
        let pairs: Vec<(Vec<u8>, Vec<u8>)> = (0..KEYS)
            .map(|i| (key(i), format!("db{db}:{i}").into_bytes()))
            .collect();
        store.db(db).unwrap().multi_put(&pairs).unwrap();
    }
}

/// Every key of database `db` holds the value written for database `origin`, or (`None`)
/// the database is empty.
fn assert_db(store: &Store, db: u32, origin: Option<u32>) {
    let d = store.db(db).unwrap();
    let keys: Vec<Vec<u8>> = (0..KEYS).map(key).collect();
    let got = d.multi_get(&keys).unwrap();
    for (i, v) in got.iter().enumerate() {
        let want = origin.map(|o| format!("db{o}:{i}").into_bytes());
        assert_eq!(v.as_deref(), want.as_deref(), "db {db} key {i}");
    }
    let n = if origin.is_some() { KEYS } else { 0 };
    assert_eq!(d.len(), n, "db {db} len");
    let mut cursor = 0;
    let mut seen = 0;
    loop {
        let page = d.scan(cursor, None, 500).unwrap();
        seen += page.keys.len() as u64;
        cursor = page.cursor;
        if cursor == 0 {
            break;
        }
    }
    assert_eq!(seen, n, "db {db} scan");
}

#[test]
fn databases_are_separate_key_spaces() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), opts()).unwrap();
    fill(&store);
    for db in 0..3 {
        assert_db(&store, db, Some(db));
    }
    assert_db(&store, 3, None);
    assert_eq!(store.stats().keys, 3 * KEYS);
    let counts: Vec<(u32, u64)> = store.db_stats().iter().map(|s| (s.db, s.keys)).collect();
    assert_eq!(counts, vec![(0, KEYS), (1, KEYS), (2, KEYS)]);
    // A delete in one database leaves the others.
    assert!(store.db(1).unwrap().delete(&key(7)).unwrap());
    assert_eq!(store.db(1).unwrap().get(&key(7)).unwrap(), None);
    assert!(store.db(0).unwrap().exists(&key(7)).unwrap());
    assert!(store.db(2).unwrap().exists(&key(7)).unwrap());
    // Expiry is per database too.
    let far = store.now_ms() + 100_000;
    store.db(2).unwrap().set_expiry(&key(1), Some(far)).unwrap();
    let stats = store.db_stats();
    assert_eq!((stats[2].expiring_keys, stats[0].expiring_keys), (1, 0));
    assert!(matches!(
        store.db(16),
        Err(Error::NoSuchDatabase { db: 16, .. })
    ));
    store.close().unwrap();
}

#[test]
fn a_batch_spans_databases_atomically() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), opts()).unwrap();
    store.db(1).unwrap().put(b"k", b"v").unwrap();
    // MOVE k from 1 to 2: delete in one database, put in the other, both or neither.
    let mut batch = Batch::new();
    batch
        .in_db(1)
        .delete_if("k", quiver_store::Precondition::Exists)
        .in_db(2)
        .put_if("k", "v", quiver_store::Precondition::Absent);
    assert!(store.apply(&batch).unwrap().is_applied());
    assert_eq!(store.db(1).unwrap().get(b"k").unwrap(), None);
    assert_eq!(
        store.db(2).unwrap().get(b"k").unwrap().as_deref(),
        Some(&b"v"[..])
    );
    // Again: the precondition in database 1 fails, nothing changes.
    assert!(!store.apply(&batch).unwrap().is_applied());
    assert_eq!(
        store.db(2).unwrap().get(b"k").unwrap().as_deref(),
        Some(&b"v"[..])
    );
    store.simulate_crash();
    let store = Store::open(dir.path(), opts()).unwrap();
    assert_eq!(store.db(1).unwrap().get(b"k").unwrap(), None);
    assert_eq!(
        store.db(2).unwrap().get(b"k").unwrap().as_deref(),
        Some(&b"v"[..])
    );
    store.close().unwrap();
}

/// SWAPDB and FLUSHDB hold across a clean reopen, a crash, and a rebuild without checkpoints;
/// the flushed records never come back, and compaction removes them from disk and RAM.
#[test]
fn swap_and_flush_survive_reopen_and_crash() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), opts()).unwrap();
    fill(&store);
    store.swap_dbs(0, 1).unwrap();
    assert_db(&store, 0, Some(1));
    assert_db(&store, 1, Some(0));
    assert_eq!(store.flush_db(2).unwrap(), KEYS);
    assert_db(&store, 2, None);
    // Written after the flush: only these are database 2's.
    store.db(2).unwrap().put(&key(5), b"new").unwrap();
    let check = |store: &Store| {
        assert_db(store, 0, Some(1));
        assert_db(store, 1, Some(0));
        assert_eq!(store.db(2).unwrap().len(), 1);
        assert_eq!(
            store.db(2).unwrap().get(&key(5)).unwrap().as_deref(),
            Some(&b"new"[..])
        );
        assert_eq!(store.db(2).unwrap().get(&key(6)).unwrap(), None);
    };
    check(&store);
    store.close().unwrap();
    let store = Store::open(dir.path(), opts()).unwrap();
    check(&store);
    store.simulate_crash();
    drop_checkpoints(dir.path());
    let store = Store::open(dir.path(), opts()).unwrap();
    check(&store);
    // Compaction drops the flushed records: the records left are the live keys' (and
    // nothing of the flushed database is indexed any more).
    store.compact().unwrap();
    check(&store);
    let s = store.stats();
    assert_eq!(s.keys, 2 * KEYS + 1);
    assert!(s.records < 2 * KEYS + 1 + 100, "{} records left", s.records);
    store.close().unwrap();
    let store = Store::open(dir.path(), opts()).unwrap();
    check(&store);
    store.close().unwrap();
}

/// A FLUSHDB whose records still sit in the index and the log (no compaction yet), then a
/// checkpoint and reopen: the flushed keys stay gone, and writing the same keys anew works.
#[test]
fn flushed_keys_never_return_through_a_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), opts()).unwrap();
    fill(&store);
    store.flush_db(0).unwrap();
    store.checkpoint().unwrap();
    store.close().unwrap();
    let store = Store::open(dir.path(), opts()).unwrap();
    assert_db(&store, 0, None);
    assert_db(&store, 1, Some(1));
    store.db(0).unwrap().put(&key(3), b"again").unwrap();
    assert_eq!(store.db(0).unwrap().len(), 1);
    store.close().unwrap();
    let store = Store::open(dir.path(), opts()).unwrap();
    assert_eq!(
        store.db(0).unwrap().get(&key(3)).unwrap().as_deref(),
        Some(&b"again"[..])
    );
    assert_eq!(store.db(0).unwrap().get(&key(4)).unwrap(), None);
    store.close().unwrap();
}

/// Readers of a database read two keys at once while SWAPDB runs in a loop: each read sees
/// one database, never a key from each.
#[test]
fn swapdb_is_atomic_for_readers() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(dir.path(), opts()).unwrap());
    // Keys in different partitions (different slots).
    let keys = [b"alpha".to_vec(), b"omega".to_vec(), b"{x}1".to_vec()];
    for db in 0..2u32 {
        let pairs: Vec<(&[u8], Vec<u8>)> = keys
            .iter()
            .map(|k| (&k[..], format!("{db}").into_bytes()))
            .collect();
        store.db(db).unwrap().multi_put(&pairs).unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (store, stop, keys) = (store.clone(), stop.clone(), keys.clone());
            std::thread::spawn(move || {
                let mut reads = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let got = store.db(0).unwrap().multi_get(&keys).unwrap();
                    assert!(got.iter().all(|v| v == &got[0]), "mixed read {got:?}");
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    for _ in 0..200 {
        store.swap_dbs(0, 1).unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
    // An even number of swaps: back where it started.
    assert_eq!(
        store.db(0).unwrap().get(b"alpha").unwrap().as_deref(),
        Some(&b"0"[..])
    );
}

/// A split and a merge move every database's keys, and the mapping survives them.
#[test]
fn split_and_merge_move_every_database() {
    let dir = tempfile::tempdir().unwrap();
    let o = Options {
        partitions: 1,
        ..opts()
    };
    let store = Store::open(dir.path(), o.clone()).unwrap();
    fill(&store);
    store.swap_dbs(1, 2).unwrap();
    store.split(8192).unwrap();
    assert_db(&store, 0, Some(0));
    assert_db(&store, 1, Some(2));
    assert_db(&store, 2, Some(1));
    store.flush_db(0).unwrap();
    store.merge(8192).unwrap();
    assert_db(&store, 0, None);
    assert_db(&store, 1, Some(2));
    store.close().unwrap();
    let store = Store::open(dir.path(), o).unwrap();
    assert_db(&store, 0, None);
    assert_db(&store, 1, Some(2));
    assert_db(&store, 2, Some(1));
    store.close().unwrap();
}
