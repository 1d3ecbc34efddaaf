//! A key's kind (string or hash, docs/design.md "Hashes: the layout") travels with its value
//! through every path that reads, rewrites or moves records: reads answer it, a string read
//! of a hash is refused (GET) or nil (MGET), preconditions compare it, and expiry changes,
//! compaction, reopening, checkpoints, splits, merges and range exports keep it.

use bytes::Bytes;
use quiver_store::fields::Fields;
use quiver_store::slot::SlotRange;
use quiver_store::{
    Access, Answer, BackendKind, Batch, Entry, Error, Options, Precondition, RangeItem, Store,
    ValueKind,
};

use crate::common::{key, small_options};

const KEYS: u64 = 400;

/// Every third key is a hash; the others are strings.
fn is_hash(i: u64) -> bool {
    i % 3 == 0
}

/// Key `i`'s entry at `round`: a hash of three fields, or a string.
fn entry(i: u64, round: u64) -> Entry {
    if !is_hash(i) {
        return Entry::string(format!("s{i}.{round}"), None);
    }
    let pairs: Vec<(String, String)> = (0..3)
        .map(|f| (format!("f{f}"), format!("v{i}.{round}.{f}")))
        .collect();
    let mut fields = Fields::default();
    for (f, v) in &pairs {
        fields.set(f.as_bytes(), v.as_bytes());
    }
    Entry {
        value: fields.encode(),
        expire_at: None,
        kind: ValueKind::Hash,
    }
}

fn write_all(store: &Store, round: u64) {
    for chunk in (0..KEYS).collect::<Vec<_>>().chunks(50) {
        let mut batch = Batch::new();
        for &i in chunk {
            batch.put_entry(key(i), entry(i, round), None);
        }
        assert!(store.apply(&batch).unwrap().is_applied());
    }
}

/// Every key holds its entry of `round`, and the string reads answer by kind.
fn check_all(store: &Store, round: u64, what: &str) {
    let keys: Vec<Vec<u8>> = (0..KEYS).map(key).collect();
    let entries = store.multi_get_entries(&keys).unwrap();
    let strings = store.multi_get(&keys).unwrap();
    for i in 0..KEYS {
        let want = entry(i, round);
        assert_eq!(entries[i as usize].as_ref(), Some(&want), "{what}: key {i}");
        let got = store.get(&keys[i as usize]);
        if is_hash(i) {
            assert!(
                matches!(got, Err(Error::WrongType)),
                "{what}: GET of hash {i}"
            );
            assert_eq!(strings[i as usize], None, "{what}: MGET of hash {i}");
        } else {
            assert_eq!(got.unwrap(), Some(want.value.clone()), "{what}: key {i}");
            assert_eq!(strings[i as usize], Some(want.value), "{what}: key {i}");
        }
    }
    let report = store.check().unwrap();
    assert!(report.problems.is_empty(), "{what}: {:?}", report.problems);
}

fn options() -> Options {
    Options {
        checkpoint_interval_ms: 0,
        ..small_options(BackendKind::Mmap)
    }
}

#[test]
fn kinds_survive_compaction_reopening_checkpoints_splits_and_merges() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), options()).unwrap();
    write_all(&store, 0);
    // Garbage for compaction to copy the live records past.
    write_all(&store, 1);
    check_all(&store, 1, "written");
    store.compact().unwrap();
    check_all(&store, 1, "compacted");
    store.close().unwrap();

    let store = Store::open(dir.path(), options()).unwrap();
    check_all(&store, 1, "reopened");
    store.checkpoint().unwrap();
    write_all(&store, 2);
    store.simulate_crash();

    let store = Store::open(dir.path(), options()).unwrap();
    check_all(&store, 2, "after a checkpoint and a crash");
    store.split(1000).unwrap();
    check_all(&store, 2, "split");
    store.merge(1000).unwrap();
    check_all(&store, 2, "merged");
}

#[test]
fn expiry_changes_keep_the_kind() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), options()).unwrap();
    write_all(&store, 0);
    let k = key(0);
    assert!(store.set_expiry(&k, Some(u64::MAX / 2)).unwrap());
    let got = store.get_entry(&k).unwrap().unwrap();
    assert_eq!(
        (got.kind, got.expire_at),
        (ValueKind::Hash, Some(u64::MAX / 2))
    );
    assert!(store.persist(&k).unwrap());
    assert_eq!(store.get_entry(&k).unwrap(), Some(entry(0, 0)));
}

#[test]
fn preconditions_and_vectors_see_the_kind() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), options()).unwrap();
    let hash = entry(0, 0);
    let mut batch = Batch::new();
    batch.put_entry("h", hash.clone(), None);
    assert!(store.apply(&batch).unwrap().is_applied());

    // A hash never equals a string, even one of the same bytes.
    let mut batch = Batch::new();
    batch.put_if("h", "x", Precondition::ValueEquals(hash.value.clone()));
    assert!(!store.apply(&batch).unwrap().is_applied());
    let as_string = Entry::string(hash.value.clone(), None);
    let mut batch = Batch::new();
    batch.put_if("h", "x", Precondition::Unchanged(Some(as_string)));
    assert!(!store.apply(&batch).unwrap().is_applied());
    let mut batch = Batch::new();
    batch.put_if("h", "x", Precondition::Unchanged(Some(hash.clone())));
    assert!(store.apply(&batch).unwrap().is_applied());
    // The put of a string replaced the hash, as SET does.
    assert_eq!(store.get(b"h").unwrap(), Some(Bytes::from_static(b"x")));

    let mut batch = Batch::new();
    batch.put_entry("h", hash.clone(), None);
    assert!(store.apply(&batch).unwrap().is_applied());
    // Mixed vectors and pipelines answer entries of any kind; a put among them is a string's.
    let db = store.db(0).unwrap();
    let accesses = [
        Access::Get(b"h"),
        Access::Put(b"s", b"1"),
        Access::Get(b"s"),
    ];
    let (values, written) = db.multi_get_put(&accesses).unwrap();
    written.unwrap();
    assert_eq!(values, [Some(hash.clone()), Some(Entry::lasting("1"))]);
    let got = db.pipeline(&accesses).unwrap();
    assert_eq!(got.answers[0], Some(Answer::Value(Some(hash))));
    assert_eq!(
        got.answers[2],
        Some(Answer::Value(Some(Entry::lasting("1"))))
    );
}

#[test]
fn a_range_export_carries_the_kind() {
    let src_dir = tempfile::tempdir().unwrap();
    let dst_dir = tempfile::tempdir().unwrap();
    let src = Store::open(src_dir.path(), options()).unwrap();
    let dst = Store::open(dst_dir.path(), options()).unwrap();
    write_all(&src, 0);
    let mut export = src.export_range(SlotRange::ALL).unwrap();
    let mut hashes = 0;
    let mut apply = |items: &[RangeItem]| {
        hashes += items
            .iter()
            .filter(|i| i.entry.as_ref().is_some_and(|e| e.kind == ValueKind::Hash))
            .count();
        dst.import(items)
    };
    export.snapshot(&mut apply).unwrap();
    // Hashes changed since the snapshot travel as changes.
    let mut batch = Batch::new();
    batch.put_entry(key(3), entry(3, 1), None);
    assert!(src.apply(&batch).unwrap().is_applied());
    export.changes(&src, &mut apply).unwrap();
    drop(export);
    assert_eq!(hashes as u64, KEYS.div_ceil(3) + 1);
    let mut want = entry(3, 1);
    assert_eq!(dst.get_entry(&key(3)).unwrap().as_ref(), Some(&want));
    for i in (0..KEYS).filter(|&i| i != 3) {
        want = entry(i, 0);
        assert_eq!(dst.get_entry(&key(i)).unwrap(), Some(want), "key {i}");
    }
}
