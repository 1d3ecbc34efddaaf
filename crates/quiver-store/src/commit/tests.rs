//! The commit protocol's failure paths, which need the engine's insides: an injected write
//! error in the middle of a batch, a compaction of the commit record's partition alone, and the
//! choice of the commit record's partition during a merge; and the lookups a batch or a plain
//! write makes before its write locks (`lookup::foresee`), with the store changed in between.

use std::sync::Arc;

use crate::commit::{Attempt, LookFirst};
use crate::compact::Pass;
use crate::faults::{Fault, FileOp};
use crate::hash::KeyHash;
use crate::log::format::ValueKind;
use crate::log::format::{self, RecordType, COMMIT_RECORD_LEN};
use crate::lookup::foresee::foresee;
use crate::options::{Durability, Options};
use crate::partition::Partition;
use crate::slot::even_layout_partition;
use crate::write::{self, WriteOp};
use crate::{BackendKind, Batch, Store};

const PARTITIONS: u32 = 2;

fn options() -> Options {
    Options {
        partitions: PARTITIONS,
        segment_bytes: 128 << 10,
        durability: Durability::Os,
        backend: BackendKind::Pread,
        value_len_max: 16 << 10,
        background: false,
        checkpoint_interval_ms: 0,
        compact_garbage_ratio: 0.0,
        disk_reserve_bytes: 1 << 20,
        ..Options::default()
    }
}

/// [`options`] in `fsync` mode.
fn fsync_options() -> Options {
    Options {
        durability: Durability::Fsync,
        ..options()
    }
}

/// A key of partition `p` (of the even layout), the `n`th such.
fn key_in(p: u32, n: u64) -> Vec<u8> {
    (0..)
        .map(|i| format!("k{p}.{n}.{i}").into_bytes())
        .find(|k| even_layout_partition(k, PARTITIONS) == p)
        .unwrap()
}

fn part(s: &Store, p: u32) -> Arc<Partition> {
    s.inner().table().parts[p as usize].clone()
}

/// The type of the last record appended to partition `p` (a part's end record, after a batch).
fn last_record_type(s: &Store, p: u32) -> RecordType {
    let part = part(s, p);
    let st = part.state.read();
    let end = st.appender.end() as usize;
    let bytes = std::fs::read(&st.appender.segment.path).unwrap();
    format::parse_header(&bytes[end - COMMIT_RECORD_LEN..end])
        .unwrap()
        .ty
}

fn batch_of(pairs: &[(&[u8], &[u8])]) -> Batch {
    let mut b = Batch::new();
    for &(k, v) in pairs {
        b.put(k.to_vec(), v.to_vec());
    }
    b
}

/// Applies a batch of puts that must succeed.
fn apply(s: &Store, pairs: &[(&[u8], &[u8])]) {
    assert!(s.apply(&batch_of(pairs)).unwrap().is_applied());
}

/// A store in `dir` where each of `keys` holds "old".
fn open_with_old(dir: &std::path::Path, keys: &[&[u8]]) -> Store {
    let s = Store::open(dir, options()).unwrap();
    for k in keys {
        s.put(k, b"old").unwrap();
    }
    s
}

/// Reopens the store after a crash; `want` are the values every key must hold.
fn reopen_and_check(dir: &std::path::Path, want: &[(&[u8], &[u8])]) -> Store {
    let s = Store::open(dir, options()).unwrap();
    let report = s.recovery_report().clone();
    assert_eq!(report.batches_aborted, 0, "{report:#?}");
    assert!(report.damage.is_empty(), "{report:#?}");
    for &(k, v) in want {
        assert_eq!(s.get(k).unwrap().as_deref(), Some(v), "{k:?}");
    }
    s
}

/// Partition 1's part (the last, with the commit record) fails to be written: the batch
/// fails whole, partition 0's part is taken back, and a later write to partition 0 (which
/// replay would otherwise take as proof that the part was committed) leaves the batch undone
/// across a crash.
#[test]
fn a_failed_batch_takes_its_parts_back() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, c) = (key_in(0, 0), key_in(1, 0), key_in(0, 1));
    let s = open_with_old(dir.path(), &[&a, &b]);
    let mut once = true;
    let injection = crate::faults::inject(&part(&s, 1).dir, move |op, _, _| {
        (op == FileOp::Write && std::mem::take(&mut once)).then_some(Fault::Eio)
    });
    let err = s
        .apply(&batch_of(&[(&a, b"new"), (&b, b"new")]))
        .unwrap_err();
    drop(injection);
    assert!(err.to_string().contains("Input/output error"), "{err}");
    assert_eq!(s.get(&a).unwrap().as_deref(), Some(&b"old"[..]));
    assert_eq!(s.get(&b).unwrap().as_deref(), Some(&b"old"[..]));
    s.put(&c, b"later").unwrap();
    s.simulate_crash();

    let s = reopen_and_check(dir.path(), &[(&a, b"old"), (&b, b"old"), (&c, b"later")]);
    s.close().unwrap();
}

/// `fsync` mode: the fdatasync of a batch's commit record (partition 1) fails. A later write to
/// partition 0 would prove the batch's part there committed at replay, so it must not become
/// durable before the commit record does (a power loss between the two would leave half the
/// batch): its fdatasync fails too, and partition 0 refuses writes from then on. After a crash
/// (the files whole: a process crash, not a power loss) the batch is there entirely.
#[test]
fn a_write_after_a_batch_part_is_not_durable_before_the_commit_record() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, c) = (key_in(0, 0), key_in(1, 0), key_in(0, 1));
    let opts = fsync_options();
    let s = Store::open(dir.path(), opts.clone()).unwrap();
    for k in [&a, &b] {
        s.put(k, b"old").unwrap();
    }
    let injection = crate::faults::inject(&part(&s, 1).dir, |op, _, _| {
        (op == FileOp::Sync).then_some(Fault::Eio)
    });
    let err = s
        .apply(&batch_of(&[(&a, b"new"), (&b, b"new")]))
        .unwrap_err();
    assert!(err.to_string().contains("Input/output error"), "{err}");
    assert_eq!(last_record_type(&s, 0), RecordType::BatchEnd);
    let err = s.put(&c, b"later").unwrap_err().to_string();
    assert!(err.contains("commit record in another partition"), "{err}");
    let err = s.put(&key_in(0, 2), b"refused").unwrap_err().to_string();
    assert!(err.contains("fdatasync"), "{err}");
    drop(injection);
    s.simulate_crash();

    let s = Store::open(dir.path(), opts).unwrap();
    assert_eq!(s.get(&a).unwrap().as_deref(), Some(&b"new"[..]));
    assert_eq!(s.get(&b).unwrap().as_deref(), Some(&b"new"[..]));
    s.close().unwrap();
}

/// `fsync` mode: a crash (of the process: the page cache kept everything) right after a batch,
/// its BatchEnd part ending partition 0's log. Opening repairs it with a commit record after
/// the part, which proves it committed on its own: the commit record it repeats (partition 1)
/// is synced before that repair is written.
#[test]
fn a_repaired_part_is_written_after_its_commit_record_is_durable() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (key_in(0, 0), key_in(1, 0));
    let opts = fsync_options();
    let s = Store::open(dir.path(), opts.clone()).unwrap();
    apply(&s, &[(&a, b"new"), (&b, b"new")]);
    let (p0, p1) = (part(&s, 0).dir.clone(), part(&s, 1).dir.clone());
    s.simulate_crash();

    let ops = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let seen = ops.clone();
    let injection = crate::faults::inject(dir.path(), move |op, path, _| {
        seen.lock().push((op, path.to_path_buf()));
        None
    });
    let s = Store::open(dir.path(), opts).unwrap();
    drop(injection);
    assert_eq!(s.recovery_report().batches_repaired, 1);
    let ops = ops.lock();
    let is_seg = |p: &std::path::Path, d: &std::path::Path| {
        p.starts_with(d) && p.extension().is_some_and(|e| e == "seg")
    };
    let repair = ops
        .iter()
        .position(|(op, p)| *op == FileOp::Write && is_seg(p, &p0))
        .expect("the repair's write");
    let synced = ops
        .iter()
        .position(|(op, p)| *op == FileOp::Sync && is_seg(p, &p1))
        .expect("a sync of the commit record's segment");
    assert!(synced < repair, "{ops:?}");
    assert_eq!(s.get(&a).unwrap().as_deref(), Some(&b"new"[..]));
    s.close().unwrap();
}

/// Partition `p`'s log, every segment in order: each record's type, and the members an end
/// record announces (0 for the others).
fn log_records(s: &Store, p: u32) -> Vec<(RecordType, u32)> {
    use crate::log::reader::{Scanner, Step};
    let part = part(s, p);
    let segs = part.state.read().segs.ordered.clone();
    let mut records = Vec::new();
    for seg in &segs {
        let start = format::SEGMENT_HEADER_LEN as u64;
        let mut sc = Scanner::new(seg, start, u64::MAX, false);
        loop {
            match sc.next_step().unwrap() {
                Step::Record { header, .. } => {
                    let announced = match header.ty.ends_part() {
                        true => format::commit_count(&sc.record()[header.value_range()]),
                        false => 0,
                    };
                    records.push((header.ty, announced));
                }
                Step::Damaged { offset, .. } => panic!("damage at {offset}"),
                Step::End { .. } => break,
            }
        }
    }
    records
}

/// Compaction turns the whole parts of committed batches into plain records and drops their
/// end records, in one reading of the range (`compact::copy::OpenPart`) — the commit record
/// that opening wrote apart from a crashed batch's part too, resolved with its part.
#[test]
fn compaction_resolves_whole_parts_into_plain_records() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, c) = (key_in(0, 0), key_in(1, 0), key_in(0, 1));
    // A batch repaired by opening, as in `a_repaired_part_is_written_after_...`.
    let s = Store::open(dir.path(), fsync_options()).unwrap();
    apply(&s, &[(&a, b"new"), (&b, b"new")]);
    s.simulate_crash();
    let s = Store::open(dir.path(), fsync_options()).unwrap();
    assert_eq!(s.recovery_report().batches_repaired, 1);
    // Batches after it: of partition 0 alone, and over both.
    apply(&s, &[(&c, b"one")]);
    apply(&s, &[(&a, b"newer"), (&b, b"newer")]);
    let before = log_records(&s, 0);
    let count = |records: &[(RecordType, u32)], f: fn(&(RecordType, u32)) -> bool| {
        records.iter().filter(|r| f(r)).count()
    };
    assert!(count(&before, |r| r.0.is_batch_member()) >= 3, "{before:?}");
    // The parts' end records and the repair's commit record.
    assert!(
        count(&before, |r| r.0.ends_part() && r.1 > 0) >= 4,
        "{before:?}"
    );
    s.compact().unwrap();
    for p in 0..PARTITIONS {
        let after = log_records(&s, p);
        // Only seals (end records of no member) may be left, written after the range.
        assert_eq!(count(&after, |r| r.0.is_batch_member()), 0, "{after:?}");
        assert_eq!(
            count(&after, |r| r.0.ends_part() && r.1 > 0),
            0,
            "{after:?}"
        );
    }
    s.simulate_crash();
    let want: [(&[u8], &[u8]); 3] = [(&a, b"newer"), (&b, b"newer"), (&c, b"one")];
    reopen_and_check(dir.path(), &want).close().unwrap();
}

/// A batch whose commit record is in partition 1, its BatchEnd part ending partition 0's log;
/// then partition 1 alone is compacted, which turns its part into plain records and drops the
/// commit record, and the store crashes before the checkpoint after the pass. Replay of
/// partition 0 (no checkpoint: from its log's start) finds its part
/// at the end of the log: the seal the compaction wrote first proves it committed.
#[test]
fn a_seal_keeps_a_part_committed_when_compaction_drops_the_commit_record() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (key_in(0, 0), key_in(1, 0));
    let s = open_with_old(dir.path(), &[&a, &b]);
    apply(&s, &[(&a, b"new"), (&b, b"new")]);
    assert_eq!(last_record_type(&s, 0), RecordType::BatchEnd);
    assert_eq!(last_record_type(&s, 1), RecordType::BatchCommit);
    // The pass alone: a crash comes before the checkpoint that follows it (which seals too).
    let p1 = part(&s, 1);
    let _m = p1.maintenance.lock();
    let pass = Pass::WHOLE;
    crate::compact::compact(
        &s.inner().ctx,
        &p1,
        pass,
        &mut crate::stalls::Pacer::new(None),
    )
    .unwrap();
    // The seal: a BatchCommit of no member after partition 0's part.
    assert_eq!(last_record_type(&s, 0), RecordType::BatchCommit);
    drop(_m);
    drop(p1);
    s.simulate_crash();

    let s = reopen_and_check(dir.path(), &[(&a, b"new"), (&b, b"new")]);
    s.close().unwrap();
}

/// While partition 1 is a merge's source (about to be deleted), a batch over both partitions
/// puts its commit record in partition 0; a batch of partition 1 alone keeps it there (its
/// part moves with the merge's copy).
#[test]
fn a_merging_partition_gets_the_commit_record_only_of_its_own_batches() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, b2) = (key_in(0, 0), key_in(1, 0), key_in(1, 1));
    let s = Store::open(dir.path(), options()).unwrap();
    part(&s, 1).state.write().merging = true;
    apply(&s, &[(&a, b"1"), (&b, b"1")]);
    assert_eq!(last_record_type(&s, 0), RecordType::BatchCommit);
    assert_eq!(last_record_type(&s, 1), RecordType::BatchEnd);
    apply(&s, &[(&b, b"2"), (&b2, b"2")]);
    assert_eq!(last_record_type(&s, 1), RecordType::BatchCommit);
    part(&s, 1).state.write().merging = false;
    apply(&s, &[(&a, b"3"), (&b, b"3")]);
    assert_eq!(last_record_type(&s, 0), RecordType::BatchEnd);
    assert_eq!(last_record_type(&s, 1), RecordType::BatchCommit);
    s.simulate_crash();

    let s = reopen_and_check(dir.path(), &[(&a, b"3"), (&b, b"3"), (&b2, b"2")]);
    s.close().unwrap();
}

/// A part that ends partition 0's log, committed by its commit record in partition 1, is
/// applied whole at opening although partition 0's index comes from a checkpoint taken before
/// the index grew to take the batch: replay finds no room there for the part's members, and
/// rebuilds the index larger instead of dropping the last of them (a server's kill -9 loop
/// once lost the last member of such parts).
#[test]
fn a_part_resolved_at_opening_fits_in_the_index_of_an_older_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        expected_keys: 512,
        ..options()
    };
    let s = Store::open(dir.path(), opts.clone()).unwrap();
    let room = |s: &Store| {
        let p = part(s, 0);
        let st = p.state.read();
        (0..).take_while(|&k| st.index.has_room(k + 1)).count()
    };
    // Partition 0's index filled to a few keys short of its limit (no background thread
    // grows it: only a write that finds no room does).
    let mut n = 0;
    while room(&s) > 3 {
        s.put(&key_in(0, n), b"plain").unwrap();
        n += 1;
    }
    s.checkpoint().unwrap();
    // More keys in partition 0 than it has room for: the index grows to take the batch.
    let mut keys: Vec<Vec<u8>> = (0..6).map(|i| key_in(0, n + i)).collect();
    keys.push(key_in(1, 0));
    let pairs: Vec<(&[u8], &[u8])> = keys.iter().map(|k| (&k[..], &b"batch"[..])).collect();
    apply(&s, &pairs);
    assert_eq!(last_record_type(&s, 0), RecordType::BatchEnd);
    s.simulate_crash();

    let s = Store::open(dir.path(), opts).unwrap();
    let report = s.recovery_report().clone();
    assert_eq!(report.batches_repaired, 1, "{report:#?}");
    assert!(report.damage.is_empty(), "{report:#?}");
    for k in &keys {
        assert_eq!(s.get(k).unwrap().as_deref(), Some(&b"batch"[..]), "{k:?}");
    }
    assert_eq!(
        s.get(&key_in(0, 0)).unwrap().as_deref(),
        Some(&b"plain"[..])
    );
    s.close().unwrap();
}

/// A part is encoded before its partition is locked, so a delete gets its tombstone even where
/// the key turns out to have no record: the tombstone shadows nothing and is dead from the
/// start. The batch applies whole, its tombstones count as dead records, and a crash and the
/// checker find the store as the batch left it.
#[test]
fn a_batch_deleting_an_absent_key_writes_a_dead_tombstone() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, gone) = (key_in(0, 0), key_in(1, 0), key_in(1, 1));
    let s = open_with_old(dir.path(), &[&a]);
    let dead_before = s.stats().dead_records;
    let mut batch = batch_of(&[(&a, b"new"), (&b, b"new")]);
    batch.delete(gone.clone());
    assert!(s.apply(&batch).unwrap().is_applied());
    // a's old record, the tombstone, and the two parts' end records.
    assert_eq!(s.stats().dead_records, dead_before + 4);
    assert_eq!(s.stats().keys, 2);
    assert_eq!(s.get(&gone).unwrap(), None);
    s.simulate_crash();

    let s = reopen_and_check(dir.path(), &[(&a, b"new"), (&b, b"new")]);
    assert_eq!(s.get(&gone).unwrap(), None);
    assert_eq!(s.stats().keys, 2);
    let report = s.check().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
    s.close().unwrap();
}

/// One try of batch `pairs`, with `meanwhile` run between its lookups and its write locks; it
/// must be applied.
fn apply_with(s: &Store, pairs: &[(&[u8], &[u8])], mut meanwhile: impl FnMut()) {
    match s.try_apply(&batch_of(pairs), LookFirst::Always(&mut meanwhile)) {
        Attempt::Done(Ok(outcome)) => assert!(outcome.is_applied()),
        _ => panic!("the batch was not applied"),
    }
}

/// Every key of `keys` holds `value`, the store counts them and no other, and deleting them
/// leaves nothing behind (an index entry the batch left stale would bring an old value back).
fn check_then_delete(s: &Store, keys: &[&[u8]], value: &[u8]) {
    for k in keys {
        assert_eq!(s.get(k).unwrap().as_deref(), Some(value), "{k:?}");
    }
    assert_eq!(s.len(), keys.len() as u64);
    for k in keys {
        assert!(s.delete(k).unwrap(), "{k:?}");
        assert_eq!(s.get(k).unwrap(), None, "{k:?}");
    }
    assert_eq!(s.len(), 0);
}

/// A batch's lookups before its locks (`lookup::foresee`) are kept only where nothing changed
/// since. Between them and the locks: a key the batch found absent is inserted, one it found
/// is rewritten (its slot holds a new location), one deleted (its slot emptied), one left
/// alone. Under the locks the batch must see each as it is then: one index entry per key,
/// the batch's values, and after a reopen the same.
#[test]
fn a_batch_looks_again_at_keys_written_since_it_looked() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, c, d) = (key_in(0, 0), key_in(1, 0), key_in(0, 1), key_in(1, 1));
    let s = open_with_old(dir.path(), &[&a, &c, &d]);
    let pairs: [(&[u8], &[u8]); 4] = [(&a, b"new"), (&b, b"new"), (&c, b"new"), (&d, b"new")];
    apply_with(&s, &pairs, || {
        s.put(&b, b"mid").unwrap();
        s.put(&a, b"mid").unwrap();
        assert!(s.delete(&c).unwrap());
    });
    s.close().unwrap();
    let s = reopen_and_check(dir.path(), &pairs);
    check_then_delete(&s, &[&a, &b, &c, &d], b"new");
    s.close().unwrap();
}

/// The same, where between the lookups and the locks partition 0 is compacted (its records
/// move, its old segments' slots are let go of) and partition 1's index is rebuilt (its
/// positions change): the batch looks every key up again.
#[test]
fn a_batch_looks_again_after_a_compaction_or_resize_since_it_looked() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, c) = (key_in(0, 0), key_in(1, 0), key_in(1, 1));
    let s = open_with_old(dir.path(), &[&a, &b]);
    for n in 0..200 {
        s.put(&key_in(0, 100 + n), b"garbage").unwrap();
        assert!(s.delete(&key_in(0, 100 + n)).unwrap());
    }
    let pairs: [(&[u8], &[u8]); 3] = [(&a, b"new"), (&b, b"new"), (&c, b"new")];
    apply_with(&s, &pairs, || {
        let p0 = part(&s, 0);
        let released = p0.state.read().segs.released();
        let _m = p0.maintenance.lock();
        let pass = Pass::WHOLE;
        crate::compact::compact(
            &s.inner().ctx,
            &p0,
            pass,
            &mut crate::stalls::Pacer::new(None),
        )
        .unwrap();
        assert!(
            p0.state.read().segs.released() > released,
            "no segment let go of"
        );
        let p1 = part(&s, 1);
        let index = p1.state.read().index.id();
        let mut m = p1.maintenance.lock();
        crate::resize::resize(&s.inner().ctx, &p1, &mut m, 10_000).unwrap();
        assert_ne!(
            p1.state.read().index.id(),
            index,
            "the index was not rebuilt"
        );
    });
    s.close().unwrap();
    let s = reopen_and_check(dir.path(), &pairs);
    check_then_delete(&s, &[&a, &b, &c], b"new");
    s.close().unwrap();
}

/// A pipeline's share that found its partition held looks its keys up first
/// (`pipeline::lock_share`), then plans its writes under its intent from what still holds
/// (`write::plan_plain`). Between the two, one of its keys is inserted, one rewritten, one
/// deleted: the share writes over what is there then, one index entry per key.
#[test]
fn a_plain_write_looks_again_at_keys_written_since_it_looked() {
    let dir = tempfile::tempdir().unwrap();
    let keys: Vec<Vec<u8>> = (0..4).map(|n| key_in(0, n)).collect();
    let [a, b, c, d] = [&keys[0], &keys[1], &keys[2], &keys[3]];
    let s = open_with_old(dir.path(), &[a, c, d]);
    let ctx = &s.inner().ctx;
    let p0 = part(&s, 0);
    let ns = p0.state.read().dbs.ns(0);
    let ops: Vec<WriteOp<'_>> = keys
        .iter()
        .map(|k| WriteOp {
            ns,
            key: k,
            hash: KeyHash::of_ns(ns, k),
            value: Some(b"new"),
            expire_at: None,
            kind: ValueKind::String,
        })
        .collect();
    let foreseen = foresee(ctx, &[&p0], &write::lookup_keys(&ops), false);
    s.put(b, b"mid").unwrap();
    s.put(a, b"mid").unwrap();
    assert!(s.delete(c).unwrap());
    {
        // Planned under an intent: readers of the partition are not shut out until the
        // upgrade, other writers are.
        let intent = p0.intend_serving();
        let plan = write::plan_plain(ctx, &intent, &ops, Some(foreseen)).unwrap();
        assert!(p0.state.try_read().is_some());
        assert!(p0.state.try_write().is_none() && p0.state.try_upgradable_read().is_none());
        let mut st = intent.upgrade();
        assert!(p0.state.try_read().is_none());
        write::reserve_plain(ctx, &p0, &mut st, &plan).unwrap();
        let done = write::apply_plain(ctx, &p0, &mut st, plan, &ops);
        assert!(done.error.is_none() && done.applied.iter().all(|&a| a));
        assert_eq!(done.existed, [true, true, false, true]);
    }
    drop(p0);
    let pairs: Vec<(&[u8], &[u8])> = keys.iter().map(|k| (&k[..], &b"new"[..])).collect();
    s.close().unwrap();
    let s = reopen_and_check(dir.path(), &pairs);
    check_then_delete(&s, &[a, b, c, d], b"new");
    s.close().unwrap();
}
