//! Multi-partition batches in format 2: one append per partition, the part with the commit
//! record last, the others ended by a BatchEnd (see `seal` and docs/log_format.md, "Batches").
//! The crash cases this format adds: a part that ends its log while the commit record's
//! partition is compacted and checkpointed, and a part whose batch never committed, which must
//! stay uncommitted after later writes follow it.

use quiver_store::slot::even_layout_partition;
use quiver_store::{BackendKind, Batch, Options, Store};

use crate::common::{find_record, segment_files, small_options, write_bytes_at};

const PARTITIONS: u32 = 2;

fn options() -> Options {
    Options {
        partitions: PARTITIONS,
        ..small_options(BackendKind::Pread)
    }
}

/// A key of partition `p` (of the even layout), the `n`th such.
fn key_in(p: u32, n: u64) -> Vec<u8> {
    (0..)
        .map(|i| format!("k{p}.{n}.{i}").into_bytes())
        .find(|k| even_layout_partition(k, PARTITIONS) == p)
        .unwrap()
}

/// A store in `dir` where `a` and `b` (of partitions 0 and 1) were put "old", then "new" by one
/// batch over both: its part in partition 0 ends with a BatchEnd, partition 1's holds the
/// commit record.
fn old_then_new(dir: &std::path::Path, a: &[u8], b: &[u8]) -> Store {
    let s = Store::open(dir, options()).unwrap();
    s.put(a, b"old").unwrap();
    s.put(b, b"old").unwrap();
    let mut batch = Batch::new();
    batch
        .put(a.to_vec(), &b"new"[..])
        .put(b.to_vec(), &b"new"[..]);
    assert!(s.apply(&batch).unwrap().is_applied());
    s
}

/// A batch over both partitions; its part in partition 0 ends with a BatchEnd, the commit
/// record is in partition 1 (the last part written). Partition 1's checkpoint hides the commit
/// record from replay (as a compaction dropping it would); with partition 0's checkpoint gone
/// (a crash between the two saves), replay of partition 0 finds its part at the end of the
/// log and no commit record anywhere: only the seal written before the checkpoint proves it
/// committed.
#[test]
fn a_part_ending_its_log_survives_a_checkpoint_of_the_commit_partition() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (key_in(0, 0), key_in(1, 0));
    let s = old_then_new(dir.path(), &a, &b);
    s.checkpoint().unwrap();
    s.simulate_crash();
    std::fs::remove_file(quiver_store::layout::partition_dir(dir.path(), 0).join("index.ckpt"))
        .unwrap();

    let s = Store::open(dir.path(), options()).unwrap();
    let report = s.recovery_report().clone();
    assert_eq!(report.batches_aborted, 0, "{report:#?}");
    assert_eq!(s.get(&a).unwrap().as_deref(), Some(&b"new"[..]));
    assert_eq!(s.get(&b).unwrap().as_deref(), Some(&b"new"[..]));
    s.close().unwrap();
}

/// A crash after partition 0's part was written but before partition 1's (with the commit
/// record): the batch is aborted and its part cut off the log, so that a write after the
/// reopen does not follow it (which replay would take as proof of a commit).
#[test]
fn a_part_of_an_uncommitted_batch_is_cut_off_and_stays_uncommitted() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (key_in(0, 0), key_in(1, 0));
    let s = old_then_new(dir.path(), &a, &b);
    s.simulate_crash();
    // Partition 1's part (its member and the commit record after it) never reached the file.
    let seg = segment_files(dir.path(), 1).pop().unwrap();
    let bytes = std::fs::read(&seg).unwrap();
    let at = find_record(&bytes, &b).unwrap();
    write_bytes_at(&seg, at, &[0u8; 128]);

    let s = Store::open(dir.path(), options()).unwrap();
    let report = s.recovery_report().clone();
    assert_eq!(report.batches_aborted, 1, "{report:#?}");
    assert!(
        report
            .torn_tails
            .iter()
            .any(|t| t.contains("not committed")),
        "{report:#?}"
    );
    assert_eq!(s.get(&a).unwrap().as_deref(), Some(&b"old"[..]));
    assert_eq!(s.get(&b).unwrap().as_deref(), Some(&b"old"[..]));
    // A later write to partition 0 lands where the part was.
    s.put(&key_in(0, 1), b"later").unwrap();
    s.simulate_crash();

    let s = Store::open(dir.path(), options()).unwrap();
    let report = s.recovery_report().clone();
    assert_eq!(report.batches_aborted, 0, "{report:#?}");
    assert_eq!(s.get(&a).unwrap().as_deref(), Some(&b"old"[..]));
    assert_eq!(
        s.get(&key_in(0, 1)).unwrap().as_deref(),
        Some(&b"later"[..])
    );
    s.close().unwrap();
}

/// A part followed by later writes in its partition, its commit record's partition
/// checkpointed: replay applies it when the next record comes, in log order (a later write
/// of one of its keys wins).
#[test]
fn a_part_followed_by_later_writes_is_applied_in_log_order() {
    let dir = tempfile::tempdir().unwrap();
    let (a, a2, b) = (key_in(0, 0), key_in(0, 1), key_in(1, 0));
    let s = Store::open(dir.path(), options()).unwrap();
    let mut batch = Batch::new();
    batch
        .put(a.clone(), &b"batch"[..])
        .put(a2.clone(), &b"batch"[..])
        .put(b.clone(), &b"batch"[..]);
    assert!(s.apply(&batch).unwrap().is_applied());
    s.put(&a, b"later").unwrap();
    s.simulate_crash();

    let s = Store::open(dir.path(), options()).unwrap();
    let report = s.recovery_report().clone();
    assert_eq!(
        report.batches_aborted + report.batches_repaired,
        0,
        "{report:#?}"
    );
    assert_eq!(s.get(&a).unwrap().as_deref(), Some(&b"later"[..]));
    assert_eq!(s.get(&a2).unwrap().as_deref(), Some(&b"batch"[..]));
    assert_eq!(s.get(&b).unwrap().as_deref(), Some(&b"batch"[..]));
    s.close().unwrap();
}

/// Closing seals every BatchEnd part before it checkpoints the partitions, so a seal never
/// lands after its partition's checkpoint: the reopen replays nothing.
#[test]
fn a_store_closed_after_batches_reopens_with_nothing_to_replay() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path(), options()).unwrap();
    for n in 0..20 {
        let mut batch = Batch::new();
        batch
            .put(key_in(0, n), &b"v"[..])
            .put(key_in(1, n), &b"v"[..]);
        assert!(s.apply(&batch).unwrap().is_applied());
    }
    s.close().unwrap();

    let s = Store::open(dir.path(), options()).unwrap();
    let report = s.recovery_report().clone();
    assert_eq!(report.records_replayed, 0, "{report:#?}");
    assert_eq!(report.partitions_from_checkpoint, PARTITIONS, "{report:#?}");
    for n in 0..20 {
        assert_eq!(s.get(&key_in(0, n)).unwrap().as_deref(), Some(&b"v"[..]));
        assert_eq!(s.get(&key_in(1, n)).unwrap().as_deref(), Some(&b"v"[..]));
    }
    s.close().unwrap();
}
