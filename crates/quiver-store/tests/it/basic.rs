//! Basic behaviour of every API call, on every backend.

use quiver_store::{BackendKind, Batch, BatchOutcome, Entry, Error, Precondition, Store};

use crate::common::{key, small_options, value};

fn each_backend(f: impl Fn(BackendKind)) {
    for b in BackendKind::ALL {
        f(b);
    }
}

#[test]
fn put_get_delete_round_trip() {
    each_backend(|b| {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(dir.path(), small_options(b)).unwrap();
        assert_eq!(s.get(b"missing").unwrap(), None);
        s.put(b"k", b"v1").unwrap();
        assert_eq!(s.get(b"k").unwrap().as_deref(), Some(&b"v1"[..]));
        s.put(b"k", b"v2").unwrap();
        assert_eq!(s.get(b"k").unwrap().as_deref(), Some(&b"v2"[..]));
        assert!(s.exists(b"k").unwrap());
        assert!(s.delete(b"k").unwrap());
        assert!(!s.delete(b"k").unwrap());
        assert_eq!(s.get(b"k").unwrap(), None);
        assert!(!s.exists(b"k").unwrap());
        s.put(b"empty", b"").unwrap();
        assert_eq!(s.get(b"empty").unwrap().as_deref(), Some(&b""[..]));
        assert_eq!(s.len(), 1);
    });
}

/// The empty key is a key, as in Redis: written, read, scanned, expired, batched, deleted, in
/// every database, across a rebuild without checkpoints, a checkpoint and a compaction; its
/// tombstone keeps an older value from coming back.
#[test]
fn the_empty_key_is_a_key() {
    each_backend(|b| {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(dir.path(), small_options(b)).unwrap();
        s.put(b"", b"zero").unwrap();
        s.db(1).unwrap().put(b"", b"one").unwrap();
        assert_eq!(s.get(b"").unwrap().as_deref(), Some(&b"zero"[..]));
        assert_eq!(s.multi_exists(&[&b""[..], b"x"]).unwrap(), [true, false]);
        let page = s.scan(0, None, 100).unwrap();
        assert_eq!(page.keys, [bytes::Bytes::new()]);
        let mut batch = Batch::new();
        batch.put_if("", "zero2", Precondition::ValueEquals("zero".into()));
        assert_eq!(s.apply(&batch).unwrap(), BatchOutcome::Applied);
        s.put_expiring(b"", b"old", Some(1)).unwrap();
        assert_eq!(s.get(b"").unwrap(), None, "expired at once");
        s.put(b"", b"live").unwrap();
        drop(s);
        // Replayed from the log alone.
        let s = Store::open(dir.path(), small_options(b)).unwrap();
        assert_eq!(s.get(b"").unwrap().as_deref(), Some(&b"live"[..]));
        assert_eq!(
            s.db(1).unwrap().get(b"").unwrap().as_deref(),
            Some(&b"one"[..])
        );
        assert!(s.delete(b"").unwrap());
        s.compact().unwrap();
        s.checkpoint().unwrap();
        drop(s);
        let s = Store::open(dir.path(), small_options(b)).unwrap();
        assert_eq!(s.get(b"").unwrap(), None, "the tombstone holds");
        assert_eq!(s.len(), 0);
        assert_eq!(s.db(1).unwrap().len(), 1);
        let check = s.check().unwrap();
        assert!(check.is_ok(), "{check:?}");
    });
}

#[test]
fn vectors_across_rotation_growth_and_reopen() {
    each_backend(|b| {
        let dir = tempfile::tempdir().unwrap();
        let n = 5000u64;
        {
            let s = Store::open(dir.path(), small_options(b)).unwrap();
            let pairs: Vec<(Vec<u8>, Vec<u8>)> = (0..n).map(|i| (key(i), value(i, 0))).collect();
            for chunk in pairs.chunks(100) {
                s.multi_put(chunk).unwrap();
            }
            let keys: Vec<Vec<u8>> = (0..n).map(key).collect();
            let got = s.multi_get(&keys).unwrap();
            for (i, g) in got.iter().enumerate() {
                assert_eq!(g.as_deref(), Some(&value(i as u64, 0)[..]), "{b} key {i}");
            }
            assert_eq!(s.len(), n);
            let gone = s.multi_delete(&keys[..10]).unwrap();
            assert!(gone.iter().all(|&x| x));
            s.close().unwrap();
        }
        let s = Store::open(dir.path(), small_options(b)).unwrap();
        assert_eq!(s.len(), n - 10);
        assert_eq!(s.recovery_report().partitions_from_checkpoint, 4);
        assert_eq!(s.get(&key(5)).unwrap(), None);
        assert_eq!(s.get(&key(50)).unwrap().as_deref(), Some(&value(50, 0)[..]));
    });
}

#[test]
fn rebuild_without_checkpoint_matches() {
    let dir = tempfile::tempdir().unwrap();
    let n = 3000u64;
    {
        let s = Store::open(dir.path(), small_options(BackendKind::Mmap)).unwrap();
        for round in 0..3 {
            let pairs: Vec<(Vec<u8>, Vec<u8>)> =
                (0..n).map(|i| (key(i), value(i, round))).collect();
            s.multi_put(&pairs).unwrap();
        }
        s.simulate_crash();
    }
    // First from the checkpoint written when the store was created, plus the log after it...
    let s = Store::open(dir.path(), small_options(BackendKind::Mmap)).unwrap();
    assert_eq!(s.recovery_report().partitions_from_checkpoint, 4);
    assert!(s.recovery_report().records_replayed > 0);
    assert_eq!(s.len(), n);
    s.simulate_crash();
    // ...then from the logs alone.
    for p in 0..4 {
        std::fs::remove_file(dir.path().join(format!("p{p:04}/index.ckpt"))).unwrap();
    }
    let s = Store::open(dir.path(), small_options(BackendKind::Mmap)).unwrap();
    assert_eq!(s.recovery_report().partitions_rebuilt, 4);
    assert_eq!(s.len(), n);
    for i in (0..n).step_by(7) {
        assert_eq!(s.get(&key(i)).unwrap().as_deref(), Some(&value(i, 2)[..]));
    }
}

#[test]
fn batches_apply_all_or_nothing() {
    each_backend(|b| {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(dir.path(), small_options(b)).unwrap();
        s.put(b"a", b"1").unwrap();
        let mut batch = Batch::new();
        batch
            .put_if("a", "2", Precondition::ValueEquals("1".into()))
            .put_if("b", "new", Precondition::Absent)
            .delete("zzz");
        for i in 0..20 {
            batch.put(format!("many{i}"), format!("{i}"));
        }
        assert_eq!(s.apply(&batch).unwrap(), BatchOutcome::Applied);
        assert_eq!(s.get(b"a").unwrap().as_deref(), Some(&b"2"[..]));
        assert_eq!(s.get(b"b").unwrap().as_deref(), Some(&b"new"[..]));
        let mut failing = Batch::new();
        failing.put("c", "3").put_if("b", "x", Precondition::Absent);
        assert_eq!(
            s.apply(&failing).unwrap(),
            BatchOutcome::ConditionFailed {
                op: 1,
                condition: Precondition::Absent
            }
        );
        assert_eq!(s.get(b"c").unwrap(), None);
        let mut check = Batch::new();
        check
            .check("a", Precondition::Unchanged(Some(Entry::lasting("2"))))
            .delete("many3");
        assert!(s.apply(&check).unwrap().is_applied());
        assert_eq!(s.get(b"many3").unwrap(), None);
        drop(s);
        let s = Store::open(dir.path(), small_options(b)).unwrap();
        assert_eq!(s.get(b"many4").unwrap().as_deref(), Some(&b"4"[..]));
        assert_eq!(s.get(b"many3").unwrap(), None);
    });
}

#[test]
fn scan_returns_every_key_once_per_full_pass() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path(), small_options(BackendKind::Mmap)).unwrap();
    let n = 2000u64;
    let pairs: Vec<(Vec<u8>, Vec<u8>)> = (0..n).map(|i| (key(i), value(i, 0))).collect();
    s.multi_put(&pairs).unwrap();
    let mut seen = std::collections::BTreeSet::new();
    let mut cursor = 0;
    let mut calls = 0;
    loop {
        let page = s.scan(cursor, None, 37).unwrap();
        for k in page.keys {
            assert!(seen.insert(k.to_vec()), "key returned twice");
        }
        calls += 1;
        cursor = page.cursor;
        if cursor == 0 {
            break;
        }
    }
    assert_eq!(seen.len() as u64, n);
    assert!(calls > 10);
    let page = s.scan(0, Some(b"key:0000001*"), 100_000).unwrap();
    assert_eq!(page.cursor, 0);
    assert_eq!(page.keys.len(), 10);
}

#[test]
fn limits_have_named_errors() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path(), small_options(BackendKind::Pread)).unwrap();
    let long = vec![b'k'; 65_536];
    assert!(matches!(
        s.put(&long, b"v"),
        Err(Error::KeyLength { len: 65_536, .. })
    ));
    let big = vec![0u8; (16 << 10) + 1];
    assert!(matches!(
        s.put(b"k", &big),
        Err(Error::ValueTooLarge { .. })
    ));
    let max_key = vec![b'k'; 65_535];
    s.put(&max_key, b"ok").unwrap();
    assert_eq!(s.get(&max_key).unwrap().as_deref(), Some(&b"ok"[..]));
    assert!(matches!(
        Store::open(dir.path(), small_options(BackendKind::Pread)),
        Err(Error::Locked { .. })
    ));
}

#[test]
fn compaction_reclaims_and_keeps_data() {
    each_backend(|b| {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(dir.path(), small_options(b)).unwrap();
        let n = 1000u64;
        for round in 0..5 {
            let pairs: Vec<(Vec<u8>, Vec<u8>)> =
                (0..n).map(|i| (key(i), value(i, round))).collect();
            s.multi_put(&pairs).unwrap();
        }
        let keys: Vec<Vec<u8>> = (0..n / 2).map(key).collect();
        s.multi_delete(&keys).unwrap();
        let before = s.stats();
        let r = s.compact().unwrap();
        assert!(r.records_dropped > 0);
        let after = s.stats();
        // The pass held each partition's lock a few times (its range, the index moves, its
        // checkpoint): each hold is counted, the longest within their total.
        assert!(
            after.maintenance_stalls >= before.maintenance_stalls + 2 * 4,
            "{before:?} -> {after:?}"
        );
        assert!(after.maintenance_stall_max_us <= after.maintenance_stall_total_us);
        assert!(
            after.disk_bytes < before.disk_bytes,
            "{before:?} -> {after:?}"
        );
        assert_eq!(s.len(), n / 2);
        let check = s.check().unwrap();
        assert!(check.is_ok(), "{check:?}");
        assert_eq!(check.index_entries, n / 2);
        for i in 0..n {
            let want = (i >= n / 2).then(|| value(i, 4));
            assert_eq!(s.get(&key(i)).unwrap().map(|v| v.to_vec()), want);
        }
        drop(s);
        let s = Store::open(dir.path(), small_options(b)).unwrap();
        assert_eq!(s.len(), n / 2);
        assert_eq!(
            s.get(&key(n - 1)).unwrap().as_deref(),
            Some(&value(n - 1, 4)[..])
        );
    });
}

/// A crash between a multi-partition batch's parts and its commit records leaves orphaned
/// parts: recovery discards them, and so does every later replay of the log (index growth,
/// compaction, reopen).
#[test]
fn batch_without_commit_records_stays_aborted_through_growth_and_compaction() {
    use crate::common::{scan_segment, segment_files, write_bytes_at};
    let dir = tempfile::tempdir().unwrap();
    let opts = || small_options(BackendKind::Mmap);
    {
        let s = Store::open(dir.path(), opts()).unwrap();
        s.put(b"before", b"1").unwrap();
        let mut batch = Batch::new();
        for i in 0..8 {
            batch.put(format!("batch{i}"), "x");
        }
        assert!(s.apply(&batch).unwrap().is_applied());
        s.simulate_crash();
    }
    // Erase every commit record: as if the process died right after writing the parts.
    let mut erased = 0;
    for p in 0..4 {
        let last = segment_files(dir.path(), p).pop().unwrap();
        let (records, _) = scan_segment(&last);
        for r in records
            .iter()
            .filter(|r| r.key.is_empty() && r.value_len == 4)
        {
            write_bytes_at(&last, r.offset, &vec![0u8; r.len as usize]);
            erased += 1;
        }
    }
    assert!(
        erased >= 2,
        "the batch must span partitions ({erased} commit records)"
    );
    let s = Store::open(dir.path(), opts()).unwrap();
    assert_eq!(s.recovery_report().batches_aborted, 1);
    assert_eq!(s.get(b"batch0").unwrap(), None);
    assert_eq!(s.get(b"before").unwrap().as_deref(), Some(&b"1"[..]));
    // Grow every index (a replay of the whole log) and compact.
    let pairs: Vec<(Vec<u8>, Vec<u8>)> = (0..6000).map(|i| (key(i), value(i, 0))).collect();
    s.multi_put(&pairs).unwrap();
    for i in 0..8 {
        assert_eq!(s.get(format!("batch{i}").as_bytes()).unwrap(), None);
    }
    s.compact().unwrap();
    assert_eq!(s.len(), 6001);
    assert!(s.check().unwrap().is_ok());
    drop(s);
    let s = Store::open(dir.path(), opts()).unwrap();
    assert_eq!(s.get(b"batch7").unwrap(), None);
    assert_eq!(s.len(), 6001);
}
