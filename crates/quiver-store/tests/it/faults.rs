//! Injected I/O faults (`quiver_store::faults`), one kind at a time: what a write, a read or
//! an fsync that fails does to the store. Each test names the promise it checks:
//! - a failed write (EIO, a short write, a full disk) fails with a clear error and leaves no
//!   trace, now or after a reopen, and the next write works;
//! - an fdatasync that fails makes its partition refuse writes, with a clear error, and is
//!   never retried as if the data were safe; reads go on, other partitions go on, and a reopen
//!   recovers everything acknowledged from what is on disk;
//! - a read that fails is that read's error and changes nothing;
//! - a torn write (the process dies in the middle of it) loses nothing acknowledged.
//!
//! The random mix of all of them against a model is `fault_model`.

use std::path::Path;
use std::sync::{Arc, Mutex};

use quiver_store::faults::{self, Fault, FileOp, Injection};
use quiver_store::layout::partition_dir;
use quiver_store::slot::even_layout_partition;
use quiver_store::{BackendKind, Batch, Durability, Entry, Error, Options, Store};

use crate::common::small_options;

fn options(durability: Durability) -> Options {
    Options {
        durability,
        ..small_options(BackendKind::Pread)
    }
}

/// A key of partition `p` (of the 4 of `small_options`), the `n`-th such.
fn key_in(p: u32, n: u32) -> Vec<u8> {
    let partitions = small_options(BackendKind::Pread).partitions;
    (0..)
        .map(|i| format!("fk:{i}").into_bytes())
        .filter(|k| even_layout_partition(k, partitions) == p)
        .nth(n as usize)
        .unwrap()
}

/// Injects `fault` into the first `op` under `dir` (and nothing else); the operations seen
/// are recorded in the returned log.
fn once(dir: &Path, op: FileOp, fault: Fault) -> (Injection, Arc<Mutex<Vec<FileOp>>>) {
    first(dir, op, fault, 1)
}

/// Injects `fault` into the first `times` operations `op` under `dir`.
fn first(
    dir: &Path,
    op: FileOp,
    fault: Fault,
    mut times: usize,
) -> (Injection, Arc<Mutex<Vec<FileOp>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let injection = faults::inject(dir, move |o, _, _| {
        log.lock().unwrap().push(o);
        let fire = o == op && times > 0;
        times -= usize::from(fire);
        fire.then_some(fault)
    });
    (injection, seen)
}

fn get(s: &Store, k: &[u8]) -> Option<Vec<u8>> {
    s.get(k).unwrap().map(|v| v.to_vec())
}

/// A failed append of each kind: a clear error, no trace of it (now or after a reopen), and
/// the next write to the same partition works. Writes go on until the fault fires: an
/// allocation fault waits for the blocks reserved ahead to run out. A full disk at allocation
/// lasts (the store first gives back its disk reserve and tries again).
#[test]
fn a_failed_write_leaves_no_trace() {
    /// Writes of 15 KB: the 1 MiB reserved ahead runs out within this many.
    const WRITES_MAX: u32 = 200;
    for (op, fault, durability) in [
        (FileOp::Write, Fault::Eio, Durability::Os),
        (FileOp::Write, Fault::Short { keep: 40 }, Durability::Os),
        (FileOp::Write, Fault::NoSpace, Durability::Fsync),
        (FileOp::Allocate, Fault::NoSpace, Durability::Os),
        (FileOp::Allocate, Fault::Eio, Durability::Fsync),
    ] {
        let case = format!("{op:?} {fault:?} {durability}");
        let tmp = tempfile::tempdir().unwrap();
        let s = Store::open(tmp.path(), options(durability)).unwrap();
        let value = vec![7u8; 15_000];
        let times = if (op, fault) == (FileOp::Allocate, Fault::NoSpace) {
            usize::MAX
        } else {
            1
        };
        let (injection, _) = first(&partition_dir(tmp.path(), 1), op, fault, times);
        let mut acked = Vec::new();
        let failed = (0..WRITES_MAX)
            .map(|n| key_in(1, n))
            .find(|k| match s.put(k, &value) {
                Ok(()) => {
                    acked.push(k.clone());
                    false
                }
                Err(err) => {
                    assert!(
                        matches!(err, Error::Io { .. } | Error::NoSpace { .. }),
                        "{case}: {err}"
                    );
                    true
                }
            })
            .unwrap_or_else(|| panic!("{case}: the fault never fired"));
        assert!(injection.injected() >= 1, "{case}");
        drop(injection);
        assert_eq!(get(&s, &failed), None, "{case}");
        let after = key_in(1, WRITES_MAX);
        s.put(&after, b"after").unwrap();
        s.close().unwrap();
        let s = Store::open(tmp.path(), options(durability)).unwrap();
        assert_eq!(get(&s, &failed), None, "{case}");
        for k in &acked {
            assert_eq!(get(&s, k).as_deref(), Some(&value[..]), "{case}");
        }
        assert_eq!(get(&s, &after).as_deref(), Some(&b"after"[..]), "{case}");
        assert!(s.check().unwrap().is_ok(), "{case}");
        s.close().unwrap();
    }
}

/// A failed write whose clean-up fails too: the bytes it left cannot be taken back, so its
/// partition refuses writes (nothing may follow them) until the store is reopened.
#[test]
fn a_failed_write_that_cannot_be_taken_back_stops_its_partition() {
    let tmp = tempfile::tempdir().unwrap();
    let s = Store::open(tmp.path(), options(Durability::Os)).unwrap();
    let (a, b, other) = (key_in(2, 0), key_in(2, 1), key_in(3, 0));
    s.put(&a, b"old").unwrap();
    let mut writes = 0;
    let injection = faults::inject(&partition_dir(tmp.path(), 2), move |op, _, _| {
        if op != FileOp::Write {
            return None;
        }
        writes += 1;
        // The append takes a short write; its zeroing, EIO.
        match writes {
            1 => Some(Fault::Short { keep: 48 }),
            2 => Some(Fault::Eio),
            _ => None,
        }
    });
    let err = s.put(&a, b"new").unwrap_err();
    assert!(matches!(err, Error::PartitionFailed { .. }), "{err}");
    assert!(err.to_string().contains("outcome is unknown"), "{err}");
    drop(injection);
    let err = s.put(&b, b"refused").unwrap_err();
    assert!(matches!(err, Error::PartitionFailed { .. }), "{err}");
    // Reads and the other partitions go on.
    assert_eq!(get(&s, &a).as_deref(), Some(&b"old"[..]));
    s.put(&other, b"elsewhere").unwrap();
    s.simulate_crash();
    let s = Store::open(tmp.path(), options(Durability::Os)).unwrap();
    let a_now = get(&s, &a);
    assert!(
        a_now.as_deref() == Some(b"old") || a_now.as_deref() == Some(b"new"),
        "{a_now:?}"
    );
    assert_eq!(get(&s, &b), None);
    assert_eq!(get(&s, &other).as_deref(), Some(&b"elsewhere"[..]));
    s.put(&b, b"works").unwrap();
    assert!(s.check().unwrap().is_ok());
    s.close().unwrap();
}

/// fsync durability: the write whose fdatasync fails is not acknowledged; its partition
/// refuses writes from then on without calling fdatasync again (a later success would not
/// mean the earlier pages reached the disk); reads and the other partitions go on; a reopen
/// recovers every acknowledged write.
#[test]
fn an_fsync_failure_stops_writes_and_is_never_retried() {
    let tmp = tempfile::tempdir().unwrap();
    let s = Store::open(tmp.path(), options(Durability::Fsync)).unwrap();
    let (a, b, other) = (key_in(1, 0), key_in(1, 1), key_in(2, 0));
    s.put(&a, b"acknowledged").unwrap();
    let (injection, seen) = once(&partition_dir(tmp.path(), 1), FileOp::Sync, Fault::Eio);
    let err = s.put(&b, b"unacknowledged").unwrap_err();
    assert!(matches!(err, Error::Io { .. }), "{err}");
    assert!(err.to_string().contains("fdatasync"), "{err}");
    seen.lock().unwrap().clear();
    // Every later write to the partition is refused, and no fdatasync is tried for it.
    for attempt in 0..3 {
        let err = s
            .put(&a, format!("again {attempt}").as_bytes())
            .unwrap_err();
        assert!(
            matches!(
                err,
                Error::PartitionFailed { .. } | Error::SyncFailed { .. }
            ),
            "{err}"
        );
    }
    let mut batch = Batch::new();
    batch
        .put(a.clone(), "batched")
        .put(other.clone(), "batched");
    let err = s.apply(&batch).unwrap_err();
    assert!(matches!(err, Error::PartitionFailed { .. }), "{err}");
    let err = s.flush().unwrap_err();
    assert!(matches!(err, Error::SyncFailed { .. }), "{err}");
    assert!(s.checkpoint().is_err());
    assert!(
        !seen.lock().unwrap().contains(&FileOp::Sync),
        "an fdatasync was tried again after one failed: {:?}",
        seen.lock().unwrap()
    );
    let stats = s.stats();
    assert_eq!(stats.partitions_refusing_writes, 1);
    let because = stats.refusing_writes_because.unwrap();
    assert!(because.contains("partition 1: an fdatasync"), "{because}");
    drop(injection);
    // Reads go on; the other partitions take writes.
    assert_eq!(get(&s, &a).as_deref(), Some(&b"acknowledged"[..]));
    s.put(&other, b"elsewhere").unwrap();
    // A clean close cannot settle the failed partition; reopening starts from the disk.
    assert!(s.close().is_err());
    let s = Store::open(tmp.path(), options(Durability::Fsync)).unwrap();
    assert_eq!(get(&s, &a).as_deref(), Some(&b"acknowledged"[..]));
    assert_eq!(get(&s, &other).as_deref(), Some(&b"elsewhere"[..]));
    // The unacknowledged write's outcome is unknown: on disk or not, never torn.
    let b_now = get(&s, &b);
    assert!(b_now.is_none() || b_now.as_deref() == Some(b"unacknowledged"));
    s.put(&b, b"works again").unwrap();
    assert!(s.check().unwrap().is_ok());
    s.close().unwrap();
}

/// os durability: the fdatasync of a checkpoint fails. The writes acknowledged before it are
/// not known to be on disk any more, so the partition refuses writes; the store still reads,
/// and a reopen has them all (here the page cache kept them).
#[test]
fn an_fsync_failure_in_a_checkpoint_stops_writes() {
    let tmp = tempfile::tempdir().unwrap();
    let s = Store::open(tmp.path(), options(Durability::Os)).unwrap();
    let keys: Vec<Vec<u8>> = (0..20).map(|n| key_in(0, n)).collect();
    for k in &keys {
        s.put(k, k).unwrap();
    }
    let (injection, _) = once(&partition_dir(tmp.path(), 0), FileOp::Sync, Fault::Eio);
    assert!(s.checkpoint().is_err());
    assert_eq!(injection.injected(), 1);
    drop(injection);
    let err = s.put(&keys[0], b"refused").unwrap_err();
    assert!(matches!(err, Error::PartitionFailed { .. }), "{err}");
    assert!(err.to_string().contains("fdatasync"), "{err}");
    for k in &keys {
        assert_eq!(get(&s, k).as_deref(), Some(&k[..]));
    }
    s.put(&key_in(1, 0), b"elsewhere").unwrap();
    s.simulate_crash();
    let s = Store::open(tmp.path(), options(Durability::Os)).unwrap();
    for k in &keys {
        assert_eq!(get(&s, k).as_deref(), Some(&k[..]));
    }
    s.put(&keys[0], b"works").unwrap();
    s.close().unwrap();
}

/// A read that fails (the pread backend) is that read's error: nothing changes, and the next
/// read of the same key works.
#[test]
fn a_failed_read_is_that_reads_error() {
    let tmp = tempfile::tempdir().unwrap();
    let s = Store::open(tmp.path(), options(Durability::Os)).unwrap();
    let a = key_in(3, 0);
    s.put(&a, b"value").unwrap();
    let (injection, _) = first(&partition_dir(tmp.path(), 3), FileOp::Read, Fault::Eio, 2);
    let err = s.get(&a).unwrap_err();
    assert!(matches!(err, Error::Io { .. }), "{err}");
    let err = s.multi_get(&[&a]).unwrap_err();
    drop(injection);
    assert!(matches!(err, Error::Io { .. }), "{err:?}");
    assert_eq!(get(&s, &a).as_deref(), Some(&b"value"[..]));
    s.put(&a, b"written").unwrap();
    s.close().unwrap();
}

/// A torn write: the process dies with part of a batch's run in the file. Nothing
/// acknowledged is lost, and the batch is all there or not at all.
#[test]
fn a_torn_write_loses_nothing_acknowledged() {
    for keep in [0, 24, 100, 4000] {
        let tmp = tempfile::tempdir().unwrap();
        let s = Store::open(tmp.path(), options(Durability::Os)).unwrap();
        let (a, b) = (key_in(0, 0), key_in(1, 0));
        s.multi_put(&[(&a, b"old"), (&b, b"old")]).unwrap();
        let injection = faults::inject(tmp.path(), move |op, _, _| {
            (op == FileOp::Write).then_some(Fault::Torn { keep })
        });
        let mut batch = Batch::new();
        batch
            .put(a.clone(), vec![1u8; 3000])
            .put(b.clone(), vec![1u8; 3000]);
        assert!(s.apply(&batch).is_err());
        assert!(injection.dead());
        s.simulate_crash();
        drop(injection);
        let s = Store::open(tmp.path(), options(Durability::Os)).unwrap();
        let (va, vb) = (get(&s, &a), get(&s, &b));
        assert!(
            (va.as_deref(), vb.as_deref()) == (Some(b"old"), Some(b"old")),
            "keep {keep}: {:?} {:?}",
            va.map(|v| v.len()),
            vb.map(|v| v.len())
        );
        assert!(s.check().unwrap().is_ok());
        s.close().unwrap();
    }
}

/// A batch over two partitions whose last part (the one with the commit record) fails, and
/// whose clean-up fails too. Taking back zeroes each part's last record first, so a zeroing
/// cut short leaves whole records, one cut short and zeros — an uncommitted part at the log's
/// end, which the next open cuts off — never zeros (a clean end, as replay reads it) with
/// records behind them, which a later, shorter append would leave behind a gap (damage on the
/// open after). And if the last part itself cannot be taken back, its commit record may be in
/// the file: the other part then stays as well, and the next open decides, all or nothing.
#[test]
fn a_batch_that_cannot_be_taken_back_is_all_or_nothing_after_a_reopen() {
    // (fault of the last part's append, faults of its zeroing, fault of the first part's
    // zeroing); None: no fault.
    let cases = [
        // The last part writes nothing; the first part's zeroing is cut short.
        (Fault::Eio, None, Some(Fault::Short { keep: 8 })),
        (
            Fault::Short { keep: 100 },
            None,
            Some(Fault::Short { keep: 16 }),
        ),
        // The last part cannot be taken back (whole in the file, or a prefix of it).
        (Fault::Short { keep: 1 << 20 }, Some(Fault::Eio), None),
        (
            Fault::Short { keep: 200 },
            Some(Fault::Short { keep: 8 }),
            None,
        ),
    ];
    for (append, zero_last, zero_first) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let s = Store::open(tmp.path(), options(Durability::Os)).unwrap();
        let first: Vec<Vec<u8>> = (0..4).map(|n| key_in(0, n)).collect();
        let last: Vec<Vec<u8>> = (0..4).map(|n| key_in(1, n)).collect();
        for k in first.iter().chain(&last) {
            s.put(k, b"old").unwrap();
        }
        let (p0, p1) = (partition_dir(tmp.path(), 0), partition_dir(tmp.path(), 1));
        let mut writes = (0, 0);
        let injection = faults::inject(tmp.path(), move |op, path, _| {
            if op != FileOp::Write {
                return None;
            }
            if path.starts_with(&p1) {
                writes.1 += 1;
                return if writes.1 == 1 {
                    Some(append)
                } else {
                    zero_last
                };
            }
            if path.starts_with(&p0) {
                writes.0 += 1;
                // The part's own append is write 1; its zeroing begins at write 2.
                return if writes.0 == 2 { zero_first } else { None };
            }
            None
        });
        let mut batch = Batch::new();
        for k in first.iter().chain(&last) {
            batch.put(k.clone(), vec![7u8; 300]);
        }
        let err = s.apply(&batch).unwrap_err();
        drop(injection);
        let case = format!("{append:?} / {zero_last:?} / {zero_first:?}: {err}");
        if zero_last.is_some() {
            assert!(err.to_string().contains("outcome is unknown"), "{case}");
        }
        // Both partitions refuse writes until the store is reopened.
        assert!(s.put(&first[0], b"x").is_err(), "{case}");
        s.simulate_crash();
        let s = Store::open(tmp.path(), options(Durability::Os)).unwrap();
        let all: Vec<Vec<u8>> = first.iter().chain(&last).cloned().collect();
        let got: Vec<Option<Vec<u8>>> = all.iter().map(|k| get(&s, k)).collect();
        let old = got.iter().all(|v| v.as_deref() == Some(b"old"));
        let new = got.iter().all(|v| v.as_deref() == Some(&[7u8; 300][..]));
        assert!(old || new, "{case}: the batch is half there");
        if zero_last.is_none() {
            assert!(old, "{case}: a batch taken back came back");
        }
        // Short appends where the part was, a crash, and every one of them is there.
        for (n, k) in first.iter().enumerate() {
            s.put(k, format!("v{n}").as_bytes()).unwrap();
        }
        s.simulate_crash();
        let s = Store::open(tmp.path(), options(Durability::Os)).unwrap();
        assert!(s.recovery_report().damage.is_empty(), "{case}");
        for (n, k) in first.iter().enumerate() {
            assert_eq!(get(&s, k), Some(format!("v{n}").into_bytes()), "{case}");
        }
        assert!(s.check().unwrap().is_ok(), "{case}");
        s.close().unwrap();
    }
}

/// A pipeline whose share in one partition fails to append: that share's writes (and the
/// reads after them) get the error and leave no trace, the other partitions' shares are
/// applied and answered, now and after a crash; the next write to the failed partition works.
#[test]
fn a_pipeline_share_that_fails_is_that_shares_error() {
    use quiver_store::{Access, Answer};
    let tmp = tempfile::tempdir().unwrap();
    let s = Store::open(tmp.path(), options(Durability::Os)).unwrap();
    let (a0, a1, b0) = (key_in(0, 0), key_in(0, 1), key_in(1, 0));
    s.put(&a0, b"old").unwrap();
    let (injection, _) = once(&partition_dir(tmp.path(), 0), FileOp::Write, Fault::Eio);
    let db = s.db(0).unwrap();
    let got = db
        .pipeline(&[
            Access::Put(&a0, b"new"),
            Access::Put(&b0, b"fine"),
            Access::Get(&a0),
            Access::Delete(&a1),
            Access::Get(&b0),
        ])
        .unwrap();
    drop(injection);
    assert_eq!(got.failures.len(), 1, "{:?}", got.failures);
    let (e, stopped) = &got.failures[0];
    assert!(matches!(e, Error::Io { .. }), "{e}");
    // Partition 0's share failed: its put, and the read after it (which may have seen it).
    // The delete of an absent key took effect all the same (the key is absent).
    assert_eq!(stopped, &[0, 2]);
    assert!([0, 2].iter().all(|&i| got.answers[i].is_none()));
    assert_eq!(got.answers[3], Some(Answer::Written { existed: false }));
    // Partition 1's share is applied.
    assert_eq!(got.answers[1], Some(Answer::Written { existed: false }));
    assert_eq!(
        got.answers[4],
        Some(Answer::Value(Some(Entry::lasting("fine"))))
    );
    assert_eq!(get(&s, &a0).as_deref(), Some(&b"old"[..]));
    s.simulate_crash();
    let s = Store::open(tmp.path(), options(Durability::Os)).unwrap();
    assert_eq!(get(&s, &a0).as_deref(), Some(&b"old"[..]));
    assert_eq!(get(&s, &b0).as_deref(), Some(&b"fine"[..]));
    s.put(&a0, b"works").unwrap();
    assert!(s.check().unwrap().is_ok());
    s.close().unwrap();
}

/// Runs a future to its end on this thread (the store's waits wake it from its syncers).
fn block_on<F: std::future::Future>(f: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = std::task::Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = std::task::Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let std::task::Poll::Ready(out) = f.as_mut().poll(&mut cx) {
            return out;
        }
        std::thread::park();
    }
}

/// fsync durability with the waits deferred (`Store::deferring_sync`, as a server's serving
/// thread runs its engine calls): the writes return at once and what they wait for settles
/// once they are synced; outside `fsync` mode there is nothing to wait for.
#[test]
fn deferred_fsync_waits_settle_once_synced() {
    let tmp = tempfile::tempdir().unwrap();
    let s = Store::open(tmp.path(), options(Durability::Fsync)).unwrap();
    let (a, b) = (key_in(1, 0), key_in(2, 0));
    let (res, wait) = s.deferring_sync(|| {
        s.put(&a, b"one")?;
        s.multi_put(&[(&a[..], &b"two"[..]), (&b[..], &b"two"[..])])?;
        let mut batch = Batch::new();
        batch.put(a.clone(), "three").put(b.clone(), "three");
        s.apply(&batch).map(|_| ())
    });
    res.unwrap();
    assert!(
        !wait.is_empty(),
        "fsync writes deferred nothing to wait for"
    );
    block_on(wait.settle()).unwrap();
    assert_eq!(get(&s, &a).as_deref(), Some(&b"three"[..]));
    // Outside the scope, a write waits for itself again.
    s.put(&b, b"four").unwrap();
    s.close().unwrap();

    let tmp = tempfile::tempdir().unwrap();
    let s = Store::open(tmp.path(), options(Durability::Os)).unwrap();
    let (res, wait) = s.deferring_sync(|| s.put(&a, b"os"));
    res.unwrap();
    assert!(wait.is_empty());
    s.close().unwrap();
}

/// A deferred wait whose fdatasync fails: the write was applied (its call returned), the wait
/// settles with the fdatasync's error — the write is not to be acknowledged — and the
/// partition refuses writes from then on, as after a blocking wait that failed.
#[test]
fn a_deferred_fsync_failure_settles_with_its_error_and_stops_writes() {
    let tmp = tempfile::tempdir().unwrap();
    let s = Store::open(tmp.path(), options(Durability::Fsync)).unwrap();
    let (a, other) = (key_in(1, 0), key_in(2, 0));
    s.put(&a, b"acknowledged").unwrap();
    let (injection, _) = once(&partition_dir(tmp.path(), 1), FileOp::Sync, Fault::Eio);
    let (res, wait) = s.deferring_sync(|| s.put(&a, b"unacknowledged"));
    res.unwrap();
    let err = block_on(wait.settle()).unwrap_err();
    assert!(err.to_string().contains("fdatasync"), "{err}");
    assert_eq!(injection.injected(), 1);
    drop(injection);
    let err = s.put(&a, b"refused").unwrap_err();
    assert!(matches!(err, Error::PartitionFailed { .. }), "{err}");
    s.put(&other, b"elsewhere").unwrap();
    assert_eq!(s.stats().partitions_refusing_writes, 1);
    assert!(s.close().is_err());
}

/// A slow fdatasync of a log (a disk that takes 3 ms: the injector sleeps inside the timed
/// sync) is handed over as an `fdatasync` event with the maintenance holds, and only by the
/// store whose file it was.
#[test]
fn a_slow_fdatasync_is_a_stall_event_of_its_store() {
    let tmp = tempfile::tempdir().unwrap();
    let other = tempfile::tempdir().unwrap();
    let s = Store::open(tmp.path(), options(Durability::Fsync)).unwrap();
    let o = Store::open(other.path(), options(Durability::Fsync)).unwrap();
    // What opening synced (a loaded disk may take a millisecond) is not this test's.
    let _ = (s.take_stall_events(), o.take_stall_events());
    let _slow = faults::inject(tmp.path(), |op, _, _| {
        if op == FileOp::Sync {
            std::thread::sleep(std::time::Duration::from_millis(3));
        }
        None
    });
    s.put(b"k", b"v").unwrap();
    let syncs: Vec<_> = s
        .take_stall_events()
        .into_iter()
        .filter(|e| e.by == "fdatasync")
        .collect();
    assert!(!syncs.is_empty(), "no fdatasync event after a 3 ms sync");
    assert!(syncs.iter().all(|e| e.us >= 3_000), "{syncs:?}");
    // The other store synced nothing since: none of these syncs is handed to it.
    assert!(
        o.take_stall_events().iter().all(|e| e.by != "fdatasync"),
        "another store's sync handed over"
    );
    // Taken once.
    assert!(s.take_stall_events().iter().all(|e| e.by != "fdatasync"));
}
