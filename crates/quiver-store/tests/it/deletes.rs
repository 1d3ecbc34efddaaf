//! Delete-heavy workloads: an index full of tombstones must always make room again.
//!
//! Regression (issue 8, item 1): after 12k keys were written and deleted, an index resize
//! replayed the whole history into an index sized for the few live keys; the replay's own
//! tombstones filled it, the resize "succeeded" without room, and the writer retried forever
//! (100% CPU, no reply, SIGTERM ignored).

use std::sync::mpsc;
use std::time::Duration;

use quiver_store::{BackendKind, Batch, Options, Store};

use crate::common::small_options;

/// Runs `f` on a thread; a hang is reported as a failure instead of hanging the test binary.
/// (Generous: this guards against livelock, it does not measure speed.)
fn without_hanging(what: &str, f: impl FnOnce() + Send + 'static) {
    const HANG_GUARD: Duration = Duration::from_secs(300);
    let (tx, rx) = mpsc::channel();
    let h = std::thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    match rx.recv_timeout(HANG_GUARD) {
        Ok(()) => h.join().unwrap(),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            // The thread panicked: re-raise its panic.
            if let Err(p) = h.join() {
                std::panic::resume_unwind(p);
            }
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("{what}: still running after {HANG_GUARD:?}: hung")
        }
    }
}

fn keys(prefix: &str, range: std::ops::Range<u64>) -> Vec<Vec<u8>> {
    range
        .map(|i| format!("{prefix}:{i}").into_bytes())
        .collect()
}

/// The sequence of the report: MSETs of 10k + 2k keys, DEL of all of them, MSETs again.
fn mset_delete_mset(opts: Options) {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path(), opts).unwrap();
    let mset = |ks: &[Vec<u8>]| {
        let mut b = Batch::new();
        for k in ks {
            b.put(k.clone(), b"v".to_vec());
        }
        assert!(s.apply(&b).unwrap().is_applied());
    };
    for j in 0..10 {
        mset(&keys("a", j * 1000..(j + 1) * 1000));
    }
    mset(&keys("b", 0..2000));
    for j in 0..10 {
        let gone = s
            .multi_delete(&keys("a", j * 1000..(j + 1) * 1000))
            .unwrap();
        assert!(gone.iter().all(|&g| g));
    }
    std::thread::sleep(Duration::from_millis(200)); // let a background resize shrink the index
    s.multi_delete(&keys("b", 0..2000)).unwrap();
    assert_eq!(s.len(), 0);
    for j in 0..10 {
        mset(&keys("a", j * 1000..(j + 1) * 1000));
    }
    assert_eq!(s.len(), 10_000);
    let got = s.multi_get(&keys("a", 0..10_000)).unwrap();
    assert!(got.iter().all(|v| v.as_deref() == Some(&b"v"[..])));
    assert!(s
        .multi_get(&keys("b", 0..2000))
        .unwrap()
        .iter()
        .all(Option::is_none));
    s.close().unwrap();
}

#[test]
fn writes_after_mass_deletes_make_room_with_background_maintenance() {
    without_hanging("background maintenance", || {
        mset_delete_mset(Options {
            partitions: 4,
            ..Options::default()
        })
    });
}

#[test]
fn writes_after_mass_deletes_make_room_inline() {
    without_hanging("inline maintenance", || {
        mset_delete_mset(Options {
            partitions: 4,
            background: false,
            ..Options::default()
        })
    });
}

/// Churn: keys written and deleted over and over, far more than the index ever holds at
/// once; the index must neither grow without bound nor run out of room.
#[test]
fn churn_keeps_the_index_small() {
    without_hanging("churn", || {
        for backend in [BackendKind::Mmap, BackendKind::Pread] {
            let dir = tempfile::tempdir().unwrap();
            let s = Store::open(dir.path(), small_options(backend)).unwrap();
            let mut next = 0u64;
            for round in 0..40u64 {
                let ks = keys("churn", next..next + 700);
                next += 700;
                let pairs: Vec<(&Vec<u8>, &[u8])> = ks.iter().map(|k| (k, &b"x"[..])).collect();
                s.multi_put(&pairs).unwrap();
                assert!(
                    s.multi_delete(&ks).unwrap().iter().all(|&g| g),
                    "round {round}"
                );
            }
            // 28k keys went through the store; at most a few hundred slots per partition remain.
            let st = s.stats();
            assert_eq!(st.keys, 0);
            assert!(
                st.index_capacity <= 4 * 4096,
                "{backend}: index kept {} slots for no keys",
                st.index_capacity
            );
            s.close().unwrap();
        }
    });
}
