//! A full file system: writes fail with `Error::NoSpace` and change nothing, the store stays
//! readable, reopens, and takes writes again once space is freed (by removing other files, or
//! by deleting keys and compacting).
//!
//! Runs on a 4 MiB tmpfs mounted for the test (needs root; without it the test says so and
//! passes without running).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use quiver_store::hash::KeyHash;
use quiver_store::{BackendKind, Batch, Error, Options, Store};

use crate::common::{mix64, Rng};

const TMPFS_SIZE: &str = "4m";
/// Two files of this size are written before the store fills the rest.
const FILLER_BYTES: usize = 512 << 10;

/// A tmpfs mounted on a fresh directory; unmounted (and the directory removed) on drop, also
/// when the test panics. Declare it before the store so the store is dropped first.
struct Tmpfs {
    path: PathBuf,
}

impl Tmpfs {
    fn mount(size: &str) -> Option<Tmpfs> {
        let path = tempfile::tempdir().unwrap().keep();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&path)
            .output();
        match out {
            Ok(o) if o.status.success() => Some(Tmpfs { path }),
            other => {
                let why = match other {
                    Ok(o) => String::from_utf8_lossy(&o.stderr).trim().to_string(),
                    Err(e) => e.to_string(),
                };
                eprintln!(
                    "SKIPPED full-disk test: cannot mount a tmpfs on {} ({why}); it needs root",
                    path.display()
                );
                let _ = std::fs::remove_dir(&path);
                None
            }
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let ok = Command::new("umount")
            .arg(&self.path)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            // Something still holds a file open (a leaked store): detach lazily.
            let _ = Command::new("umount").arg("-l").arg(&self.path).status();
        }
        let _ = std::fs::remove_dir(&self.path);
    }
}

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

fn full_disk_scenario(tmpfs: &Tmpfs, backend: BackendKind) {
    println!("full disk with the {backend} backend");
    let dir = tmpfs.path.join("store");
    let filler = [tmpfs.path.join("filler-1"), tmpfs.path.join("filler-2")];
    for f in &filler {
        write_filler(f);
    }
    let mut acked = Acked::new();
    let mut failed: Vec<Vec<u8>> = Vec::new();
    let mut next = 0u64;

    // 1. Fill the disk with single puts.
    let s = Store::open(&dir, options(backend)).unwrap();
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
    // A multi_put that does not fit: each pair is either applied or not, never damaged.
    let pairs: Vec<(Vec<u8>, Vec<u8>)> = (0..8).map(|j| (fkey(j), vec![j as u8; 9000])).collect();
    let r = s.multi_put(&pairs);
    assert!(is_no_space(&r), "multi_put on a full disk: {r:?}");
    for (k, v) in &pairs {
        match s.get(k).unwrap() {
            Some(got) if got[..] == v[..] => {
                acked.insert(k.clone(), v.clone());
            }
            got => assert!(
                got.as_deref() == Some(&acked[k][..]),
                "multi_put pair: {}",
                brief(got.as_deref())
            ),
        }
    }
    check_all(&s, &acked, &failed, "after failed overwrites");

    // 2. Reopen on the full disk.
    drop(s);
    let s = Store::open(&dir, options(backend))
        .unwrap_or_else(|e| panic!("reopen on a full disk failed: {e:?}"));
    let r = s.recovery_report().clone();
    assert!(r.damage.is_empty(), "{r:#?}");
    check_all(&s, &acked, &failed, "reopened on a full disk");
    let r = s.put(&fkey(next), &fvalue(next, 0));
    assert!(r.is_ok() || is_no_space(&r), "{r:?}");
    if r.is_ok() {
        acked.insert(fkey(next), fvalue(next, 0));
    }
    next += 1;

    // 3. Space freed elsewhere: writes succeed again.
    std::fs::remove_file(&filler[0]).unwrap();
    for _ in 0..50 {
        let (k, v) = (fkey(next), fvalue(next, 1));
        next += 1;
        s.put(&k, &v)
            .unwrap_or_else(|e| panic!("put after freeing space: {e:?}"));
        acked.insert(k, v);
    }
    check_all(&s, &acked, &failed, "after freeing space");

    // 4. A multi-partition batch on a full disk leaves nothing behind.
    fill(&s, &mut acked, &mut failed, &mut next, 2, "second fill");
    let mut batch = Batch::new();
    let mut batch_keys: Vec<Vec<u8>> = Vec::new();
    let mut parts = std::collections::HashSet::new();
    for j in 0..6u64 {
        let k = format!("batch:{j}").into_bytes();
        parts.insert(KeyHash::of(&k).partition(2));
        batch.put(k.clone(), vec![b'b'; 6000]);
        batch_keys.push(k);
    }
    // Existing keys too: they must keep their values.
    for k in acked.keys().take(4) {
        parts.insert(KeyHash::of(k).partition(2));
        batch.put(k.clone(), vec![b'B'; 6000]);
    }
    assert_eq!(parts.len(), 2, "the batch spans both partitions");
    let r = s.apply(&batch);
    assert!(is_no_space(&r), "batch on a full disk: {r:?}");
    for k in &batch_keys {
        assert_eq!(s.get(k).unwrap(), None, "part of a failed batch is visible");
    }
    check_all(&s, &acked, &failed, "after a failed batch");
    drop(s);
    let s = Store::open(&dir, options(backend))
        .unwrap_or_else(|e| panic!("reopen after a failed batch: {e:?}"));
    assert!(
        s.recovery_report().damage.is_empty(),
        "{:#?}",
        s.recovery_report()
    );
    for k in &batch_keys {
        assert_eq!(
            s.get(k).unwrap(),
            None,
            "part of a failed batch is visible after reopen"
        );
    }
    check_all(&s, &acked, &failed, "reopened after a failed batch");

    // 5. A compaction on the full disk fails for space and leaves the store as it was.
    let r = s.compact();
    assert!(
        r.is_ok() || is_no_space(&r),
        "compaction on a full disk: {r:?}"
    );
    check_all(&s, &acked, &failed, "after a compaction on a full disk");
    for p in 0..2 {
        for e in std::fs::read_dir(dir.join(format!("p{p:04}"))).unwrap() {
            let name = e.unwrap().file_name().into_string().unwrap();
            assert!(
                !name.ends_with(".seg.tmp") && name != "COMPACT",
                "{name} left behind"
            );
        }
    }

    // 6. Space freed by deleting keys and compacting. Deletes write tombstones, and compaction
    // writes all the live records of a partition before it frees its inputs, so they need some
    // room: the second filler.
    std::fs::remove_file(&filler[1]).unwrap();
    let doomed: Vec<Vec<u8>> = acked
        .keys()
        .enumerate()
        .filter(|(i, _)| i % 12 != 0)
        .map(|(_, k)| k.clone())
        .collect();
    for chunk in doomed.chunks(64) {
        let existed = s
            .multi_delete(chunk)
            .unwrap_or_else(|e| panic!("delete after freeing space: {e:?}"));
        assert!(existed.iter().all(|&e| e));
        for k in chunk {
            acked.remove(k);
        }
    }
    let before = s.stats().disk_bytes;
    let report = s.compact().unwrap_or_else(|e| panic!("compact: {e:?}"));
    let after = s.stats().disk_bytes;
    assert!(
        report.records_dropped > 0 && after < before,
        "{report:?}: {before} -> {after} bytes"
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
    assert!(n > 200, "only {n} keys fit after compaction");
    check_all(&s, &acked, &failed, "full again after compaction");
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
