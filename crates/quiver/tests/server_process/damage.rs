//! Regression (issue 8, item 3): MSET 100 keys to old values, MSET them to new values,
//! kill -9, flip one key byte of a record of the second MSET in the first partition's
//! segment, restart: 22 keys answered their old values without an error (the damage was logged
//! at INFO only). Now the server refuses to start, naming the file, the offset and the keys
//! that may hold older values; `quiver check` lists the damage and changes nothing; `quiver
//! check --repair` keeps what is intact, reports what was lost, and the server starts again.

use quiver_store::log::format::{RECORD_HEADER_LEN, SEGMENT_HEADER_LEN};
use quiver_store::log::reader::{Scanner, Step};
use quiver_store::log::segment::Segment;

use super::*;

const KEYS: u64 = 100;

fn key(i: u64) -> String {
    format!("mset:{i:03}")
}

/// A record of the second MSET in partition 0: (segment file, offset, key).
fn second_mset_record(dir: &Path) -> (PathBuf, u64, String) {
    let pdir = quiver_store::layout::partition_dir(dir, 0);
    let mut segs: Vec<PathBuf> = std::fs::read_dir(&pdir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "seg"))
        .collect();
    segs.sort();
    for path in segs.iter().rev() {
        let seg = Segment::open(path.clone(), true).unwrap();
        let mut sc = Scanner::new(&seg, SEGMENT_HEADER_LEN as u64, u64::MAX, false);
        while let Step::Record { offset, header, .. } = sc.next_step().unwrap() {
            let rec = sc.record();
            let k = RECORD_HEADER_LEN + header.key_len as usize;
            if rec[k..].starts_with(b"new:") {
                let key = String::from_utf8_lossy(&rec[RECORD_HEADER_LEN..k]).into_owned();
                return (path.clone(), offset, key);
            }
        }
    }
    panic!("no record of the second MSET in {}", pdir.display());
}

fn files_of(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut v = Vec::new();
    for p in std::fs::read_dir(dir).unwrap().flatten() {
        if p.path().is_dir() {
            for f in std::fs::read_dir(p.path()).unwrap().flatten() {
                v.push((f.path(), std::fs::read(f.path()).unwrap()));
            }
        }
    }
    v.sort();
    v
}

#[test]
fn a_damaged_log_is_refused_checked_and_repaired() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, logs) = (tmp.path().join("store"), tmp.path().join("logs"));
    let mut server = serve(&dir, &logs, &[]);
    let mut c = server.client();
    for round in ["old", "new"] {
        let pairs: Vec<(String, String)> = (0..KEYS)
            .map(|i| (key(i), format!("{round}:{i}")))
            .collect();
        c.multi_set(&pairs).unwrap();
    }
    drop(c);
    server.kill_9();

    let (seg, offset, victim) = second_mset_record(&dir);
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&seg)
            .unwrap();
        let at = offset + RECORD_HEADER_LEN as u64;
        let mut b = [0u8; 1];
        f.read_exact_at(&mut b, at).unwrap();
        f.write_all_at(&[b[0] ^ 0x5a], at).unwrap();
    }

    // The server refuses to start, naming the file, the offset, and the keys at risk.
    let (mut child, stderr_path, _stdout) = spawn_serve(&dir, &logs, &[]);
    let status = wait_exit(&mut child, "quiver serve on a damaged store");
    let log = read_log(&stderr_path);
    assert!(
        !status.success(),
        "a damaged store was served; stderr:\n{log}"
    );
    assert!(log.contains("the store is damaged"), "{log}");
    assert!(log.contains(&seg.display().to_string()), "{log}");
    assert!(log.contains(&format!("at offset {offset}")), "{log}");
    assert!(log.contains("may hold older values"), "{log}");
    assert!(log.contains("quiver check --repair"), "{log}");

    // `quiver check` lists the damage and changes nothing.
    let before = files_of(&dir);
    let (status, out, err) = quiver(&dir, &["check"]);
    assert_eq!(status.code(), Some(1), "quiver check: {out}{err}");
    assert!(out.contains(&format!("at offset {offset}")), "{out}");
    assert_eq!(files_of(&dir), before, "quiver check changed files");

    // `quiver check --repair` reports what was lost.
    let (status, out, err) = quiver(&dir, &["check", "--repair"]);
    assert!(
        status.success(),
        "quiver check --repair: {status}\n{out}{err}"
    );
    let lost_line = out
        .lines()
        .find(|l| l.contains("may hold older values"))
        .unwrap_or_else(|| panic!("the repair names no keys at risk: {out}"));
    let (status, out, err) = quiver(&dir, &["check"]);
    assert!(status.success(), "check after the repair: {out}{err}");

    // The server starts; every key holds its new value, or its old one and was named.
    let server = serve(&dir, &logs, &[]);
    let mut c = server.client();
    let keys: Vec<String> = (0..KEYS).map(key).collect();
    let got = c.multi_get(&keys).unwrap();
    let mut old = 0;
    for (i, g) in got.iter().enumerate() {
        let g = String::from_utf8_lossy(g.as_deref().expect("every key has a value"));
        if g == format!("old:{i}") {
            old += 1;
            assert!(
                keys[i] == victim || lost_line.contains(&keys[i]),
                "{} rolled back to its old value without being named",
                keys[i]
            );
        } else {
            assert_eq!(g, format!("new:{i}"), "{}", keys[i]);
        }
    }
    assert!(old > 0, "the damaged part held new values");
    drop(c);
    server.stop_with(libc::SIGTERM);
}
