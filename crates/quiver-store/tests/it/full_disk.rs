//! A full file system: writes fail with `Error::NoSpace` and change nothing (a vector is
//! refused whole), the store stays readable and reopens; deletes still run (the disk reserve
//! is released for them), compaction frees space from inside the store, and writes resume
//! without a restart — as they do once space is freed outside it.
//!
//! Runs on an 8 MiB tmpfs mounted for the test (needs root; without it the test says so and
//! passes without running).

use std::collections::BTreeMap;
use std::path::Path;

use quiver_store::{BackendKind, Batch, Error, Options, Store};
use quiver_testkit::rng::{mix64, Rng};
use quiver_testkit::tmpfs::Tmpfs;

const TMPFS_SIZE: &str = "8m";
/// A file of this size is written before the store fills the rest (removed to free space).
const FILLER_BYTES: usize = 512 << 10;

fn options(backend: BackendKind) -> Options {
    Options {
        partitions: 2,
        ..crate::common::small_options(backend)
    }
}

fn fkey(i: u64) -> Vec<u8> {
    format!("fd:{i:06}").into_bytes()
}

/// 500..3500 bytes, a function of (key number, round).
fn fvalue(i: u64, round: u64) -> Vec<u8> {
    let s = mix64(i * 1_000_003 + round);
    let len = 500 + (s % 3000) as usize;
    let mut v = format!("{i}.{round}:").into_bytes();
    let mut rng = Rng::new(s);
    while v.len() < len {
        v.extend_from_slice(&rng.next_u64().to_le_bytes());
    }
    v.truncate(len);
    v
}

/// What the store must hold: every acknowledged key and its value.
type Acked = BTreeMap<Vec<u8>, Vec<u8>>;

/// A value for a failure message: its length and first bytes.
fn brief(v: Option<&[u8]>) -> String {
    match v {
        None => "nothing".into(),
        Some(v) => format!("{} bytes {:?}...", v.len(), &v[..v.len().min(12)]),
    }
}

/// Every acknowledged key holds its value, and no put that failed is visible.
fn check_all(s: &Store, acked: &Acked, failed: &[Vec<u8>], what: &str) {
    let keys: Vec<&Vec<u8>> = acked.keys().collect();
    for chunk in keys.chunks(256) {
        let got = s
            .multi_get(chunk)
            .unwrap_or_else(|e| panic!("{what}: multi_get failed: {e}"));
        for (k, g) in chunk.iter().zip(got) {
            assert!(
                g.as_deref() == Some(&acked[*k][..]),
                "{what}: key {} holds {}, not its acknowledged value {}",
                String::from_utf8_lossy(k),
                brief(g.as_deref()),
                brief(Some(&acked[*k]))
            );
        }
    }
    for k in keys.iter().step_by(17) {
        let got = s
            .get(k)
            .unwrap_or_else(|e| panic!("{what}: get failed: {e}"));
        assert!(
            got.as_deref() == Some(&acked[*k][..]),
            "{what}: get disagrees with multi_get"
        );
    }
    for k in failed.iter().filter(|k| !acked.contains_key(*k)) {
        let got = s
            .get(k)
            .unwrap_or_else(|e| panic!("{what}: get failed: {e}"));
        assert!(
            got.is_none(),
            "{what}: {} was never written, yet it holds {}",
            String::from_utf8_lossy(k),
            brief(got.as_deref())
        );
    }
    assert_eq!(s.len(), acked.len() as u64, "{what}: len");
}

/// Puts new keys from `*next` on until a put fails; the failure must be `NoSpace`. Then tries
/// a few more (smaller ones may still fit): each fails with `NoSpace` or is acknowledged.
/// Returns the number of keys written.
fn fill(
    s: &Store,
    acked: &mut Acked,
    failed: &mut Vec<Vec<u8>>,
    next: &mut u64,
    round: u64,
    what: &str,
) -> u64 {
    let mut written = 0;
    let mut failures = 0;
    while failures < 10 {
        let (k, v) = (fkey(*next), fvalue(*next, round));
        *next += 1;
        match s.put(&k, &v) {
            Ok(()) => {
                acked.insert(k, v);
                written += 1;
                assert!(written < 100_000, "{what}: the disk never filled");
            }
            Err(Error::NoSpace { .. }) => {
                failures += 1;
                assert_eq!(s.get(&k).unwrap(), None, "{what}: a failed put is visible");
                failed.push(k);
            }
            Err(e) => panic!("{what}: a put on a full disk failed with {e:?}, not NoSpace"),
        }
    }
    written
}

fn is_no_space<T: std::fmt::Debug>(r: &quiver_store::Result<T>) -> bool {
    matches!(r, Err(Error::NoSpace { .. }))
}

fn write_filler(path: &Path) {
    let data: Vec<u8> = (0..FILLER_BYTES).map(|i| (i * 31 % 251) as u8).collect();
    std::fs::write(path, data).unwrap();
}

#[test]
fn full_disk_fails_writes_cleanly_and_recovers() {
    for backend in BackendKind::ALL {
        let Some(tmpfs) = Tmpfs::mount(TMPFS_SIZE) else {
            return;
        };
        full_disk_scenario(&tmpfs, backend);
    }
}

/// Every key of `keys` exists, or none does.
fn assert_all_or_none(s: &Store, keys: &[Vec<u8>], what: &str) -> bool {
    let found = s.multi_exists(keys).unwrap();
    let n = found.iter().filter(|&&f| f).count();
    assert!(
        n == 0 || n == keys.len(),
        "{what}: {n} of {} keys exist: a refused vector was partly applied",
        keys.len()
    );
    n == keys.len()
}

fn full_disk_scenario(tmpfs: &Tmpfs, backend: BackendKind) {
    println!("full disk with the {backend} backend");
    let dir = tmpfs.path().join("store");
    let filler = tmpfs.path().join("filler");
    write_filler(&filler);
    let mut acked = Acked::new();
    let mut failed: Vec<Vec<u8>> = Vec::new();
    let mut next = 0u64;

    // 1. Fill the disk with single puts.
    let s = Store::open(&dir, options(backend)).unwrap();
    assert!(s.stats().disk_reserve_bytes > 0, "the reserve is held");
    let n = fill(&s, &mut acked, &mut failed, &mut next, 0, "first fill");
    assert!(n > 200, "only {n} keys fit");
    check_all(&s, &acked, &failed, "full disk");

    // An overwrite that does not fit leaves the old value.
    let victim = fkey(3);
    let big: Vec<u8> = vec![0xee; 12 << 10];
    let r = s.put(&victim, &big);
    assert!(is_no_space(&r), "overwrite on a full disk: {r:?}");
    assert_eq!(
        s.get(&victim).unwrap().as_deref(),
        Some(&acked[&victim][..])
    );
    // A multi_put that does not fit is refused whole.
    let pairs: Vec<(Vec<u8>, Vec<u8>)> = (0..8).map(|j| (fkey(j), vec![j as u8; 9000])).collect();
    let r = s.multi_put(&pairs);
    assert!(is_no_space(&r), "multi_put on a full disk: {r:?}");
    check_all(&s, &acked, &failed, "after failed overwrites");

    // A multi-partition batch on a full disk leaves nothing behind.
    let mut batch = Batch::new();
    let mut batch_keys: Vec<Vec<u8>> = Vec::new();
    let mut parts = std::collections::HashSet::new();
    for j in 0..6u64 {
        let k = format!("batch:{j}").into_bytes();
        parts.insert(quiver_store::slot::even_layout_partition(&k, 2));
        batch.put(k.clone(), vec![b'b'; 6000]);
        batch_keys.push(k);
    }
    for k in acked.keys().take(4) {
        parts.insert(quiver_store::slot::even_layout_partition(k, 2));
        batch.put(k.clone(), vec![b'B'; 6000]);
    }
    assert_eq!(parts.len(), 2, "the batch spans both partitions");
    let r = s.apply(&batch);
    assert!(is_no_space(&r), "batch on a full disk: {r:?}");
    for k in &batch_keys {
        assert_eq!(s.get(k).unwrap(), None, "part of a failed batch is visible");
    }
    check_all(&s, &acked, &failed, "after a failed batch");

    // 2. Reopen on the full disk.
    drop(s);
    let s = Store::open(&dir, options(backend))
        .unwrap_or_else(|e| panic!("reopen on a full disk failed: {e:?}"));
    let r = s.recovery_report().clone();
    assert!(r.damage.is_empty(), "{r:#?}");
    check_all(&s, &acked, &failed, "reopened on a full disk");
    for k in &batch_keys {
        assert_eq!(
            s.get(k).unwrap(),
            None,
            "part of a failed batch after reopen"
        );
    }

    // 3. Deletes run on the full disk (the reserve is released for them): most keys go, in
    // vectors spanning both partitions. Until compaction has made room, writes that add data
    // are refused.
    let doomed: Vec<Vec<u8>> = acked
        .keys()
        .enumerate()
        .filter(|(i, _)| i % 3 != 0)
        .map(|(_, k)| k.clone())
        .collect();
    for chunk in doomed.chunks(64) {
        let existed = s
            .multi_delete(chunk)
            .unwrap_or_else(|e| panic!("delete on a full disk: {e:?}"));
        assert!(existed.iter().all(|&e| e));
        for k in chunk {
            acked.remove(k);
        }
    }
    assert!(s.stats().short_of_space, "the reserve went to the deletes");
    let r = s.put(&fkey(next), b"small");
    assert!(is_no_space(&r), "a put while short of space: {r:?}");
    failed.push(fkey(next));
    next += 1;
    check_all(&s, &acked, &failed, "after deletes on a full disk");

    // 4. Compaction, from inside the store, makes room: writes work again, no restart.
    let before = s.stats().disk_bytes;
    let report = s.compact().unwrap_or_else(|e| panic!("compact: {e:?}"));
    let after = s.stats().disk_bytes;
    assert!(
        report.records_dropped > 0 && after < before,
        "{report:?}: {before} -> {after} bytes"
    );
    assert!(
        !s.stats().short_of_space,
        "the reserve is back after compaction"
    );
    check_all(&s, &acked, &failed, "after delete + compact");
    let n = fill(
        &s,
        &mut acked,
        &mut failed,
        &mut next,
        3,
        "fill after compaction",
    );
    assert!(n > 100, "only {n} keys fit after compaction");
    check_all(&s, &acked, &failed, "full again after compaction");

    // 5. Space freed elsewhere: writes succeed again.
    std::fs::remove_file(&filler).unwrap();
    for _ in 0..50 {
        let (k, v) = (fkey(next), fvalue(next, 1));
        next += 1;
        s.put(&k, &v)
            .unwrap_or_else(|e| panic!("put after freeing space: {e:?}"));
        acked.insert(k, v);
    }
    check_all(&s, &acked, &failed, "after freeing space");
    drop(s);

    let s = Store::open(&dir, options(backend)).unwrap_or_else(|e| panic!("final reopen: {e:?}"));
    assert!(
        s.recovery_report().damage.is_empty(),
        "{:#?}",
        s.recovery_report()
    );
    check_all(&s, &acked, &failed, "final reopen");
    drop(s);
}

/// Regression (issue 8, item 2): on a full disk `DEL k0 ... k99` answered "not applied" while
/// 24 of its keys were gone — the partitions were written one after the other. A vector of
/// deletes (or puts) is now refused whole when the disk has no room for it. (Without a
/// reserve: with one, the deletes would go through.)
#[test]
fn full_disk_refuses_a_vector_whole() {
    let Some(tmpfs) = Tmpfs::mount(TMPFS_SIZE) else {
        return;
    };
    let opts = Options {
        disk_reserve_bytes: 0,
        ..options(BackendKind::Mmap)
    };
    let dir = tmpfs.path().join("store");
    write_filler(&tmpfs.path().join("filler"));
    let s = Store::open(&dir, opts.clone()).unwrap();
    let (mut acked, mut failed, mut next) = (Acked::new(), Vec::new(), 0u64);
    fill(&s, &mut acked, &mut failed, &mut next, 0, "fill");
    // Squeeze out what small records still fit.
    let mut tiny = 0u64;
    loop {
        let k = format!("t{tiny}").into_bytes();
        if s.put(&k, b"").is_err() {
            break;
        }
        acked.insert(k, Vec::new());
        tiny += 1;
        assert!(tiny < 100_000, "the disk never filled");
    }
    let keys: Vec<Vec<u8>> = acked.keys().take(100).cloned().collect();
    let parts: std::collections::HashSet<u32> = keys
        .iter()
        .map(|k| quiver_store::slot::even_layout_partition(k, 2))
        .collect();
    assert_eq!(parts.len(), 2);
    for attempt in 0..3 {
        let r = s.multi_delete(&keys);
        assert!(is_no_space(&r), "attempt {attempt}: {r:?}");
        assert!(
            assert_all_or_none(&s, &keys, "multi_delete"),
            "the keys were deleted"
        );
    }
    let r = s.multi_put(
        &keys
            .iter()
            .map(|k| (k.clone(), b"x".to_vec()))
            .collect::<Vec<_>>(),
    );
    assert!(is_no_space(&r), "{r:?}");
    check_all(&s, &acked, &failed, "after refused vectors");
    drop(s);
    let s = Store::open(&dir, opts).unwrap();
    check_all(&s, &acked, &failed, "reopened");
}

/// With the background thread, nothing but deletes is needed: it compacts the partitions
/// while the disk is short of space, takes the reserve back, and writes resume.
#[test]
fn full_disk_recovers_by_itself_after_deletes() {
    let Some(tmpfs) = Tmpfs::mount(TMPFS_SIZE) else {
        return;
    };
    let opts = Options {
        background: true,
        compact_garbage_ratio: 0.5,
        ..options(BackendKind::Mmap)
    };
    let dir = tmpfs.path().join("store");
    write_filler(&tmpfs.path().join("filler"));
    let s = Store::open(&dir, opts).unwrap();
    let (mut acked, mut failed, mut next) = (Acked::new(), Vec::new(), 0u64);
    fill(&s, &mut acked, &mut failed, &mut next, 0, "fill");
    let half: Vec<Vec<u8>> = acked.keys().step_by(2).cloned().collect();
    for chunk in half.chunks(50) {
        s.multi_delete(chunk).unwrap();
        for k in chunk {
            acked.remove(k);
        }
    }
    // Writes are refused until the background thread has compacted; then they work again, and
    // half as many keys as were deleted fit as it frees segment after segment. (The bound only
    // guards against a hang.)
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let target = half.len() / 2;
    let mut refilled = 0;
    while refilled < target {
        let (k, v) = (fkey(next), fvalue(next, 9));
        match s.put(&k, &v) {
            Ok(()) => {
                acked.insert(k, v);
                next += 1;
                refilled += 1;
            }
            Err(Error::NoSpace { .. }) => {
                assert!(
                    std::time::Instant::now() < deadline,
                    "{refilled} of {target} keys fit again: {:?}",
                    s.stats()
                );
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(e) => panic!("{e:?}"),
        }
    }
    check_all(&s, &acked, &failed, "after the background compaction");
}
