//! `quiver bench split`: how long a Split and a Merge of a loaded partition take, and what
//! they do to the latency of reads that run meanwhile.
//!
//! A store of one partition (all 16384 slots) is loaded with `keys` keys; a reader thread gets
//! random keys back to back, timing each get; after a quiet period the partition is split in
//! half (slots 8192..16383 move to a new partition), then after another the halves are merged
//! (into a third). One JSON line per step: its duration, the keys it copied, and the reads'
//! latency percentiles before it and while it ran.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use quiver_store::{Options, Store};
use serde::Serialize;

use crate::benchdir::holds_store;
use crate::error::{Error, Result};
use crate::keys::{check_key_params, key_for, value_for};
use crate::rng::WyRand;

/// Keys written per `multi_put` while loading.
const LOAD_BATCH: u64 = 1024;
/// Latencies kept per phase at most (the reader keeps the first ones of a long phase).
const SAMPLES_MAX: usize = 4_000_000;

#[derive(Clone, Debug)]
pub struct SplitConfig {
    pub dir: PathBuf,
    pub keys: u64,
    pub key_size: usize,
    pub value_size: usize,
    /// Reads timed before each step (a quiet period), in seconds.
    pub settle_s: f64,
}

/// One step: one JSON line of `quiver bench split`.
#[derive(Clone, Debug, Serialize)]
pub struct SplitResult {
    pub bench: &'static str,
    /// `split` or `merge`.
    pub step: &'static str,
    pub keys: u64,
    pub keys_copied: u64,
    pub keys_caught_up: u64,
    pub seconds: f64,
    pub reads_before: usize,
    pub read_p50_us_before: f64,
    pub read_p99_us_before: f64,
    pub read_max_us_before: f64,
    pub reads_during: usize,
    pub read_p50_us_during: f64,
    pub read_p99_us_during: f64,
    pub read_max_us_during: f64,
}

/// A step of the benchmark: a split or a merge of the store.
type Step = fn(&Store) -> quiver_store::Result<quiver_store::SplitReport>;

/// Which list the reader files its latencies under.
const PHASE_BEFORE: u8 = 0;
const PHASE_DURING: u8 = 1;
const PHASE_IDLE: u8 = 2;

pub fn run(cfg: &SplitConfig, emit: &mut dyn FnMut(&SplitResult)) -> Result<Vec<SplitResult>> {
    check_key_params(cfg.keys, cfg.key_size)?;
    if cfg.dir.exists() {
        // Only a store (of an earlier run) is replaced, never other data.
        if !holds_store(&cfg.dir) {
            return Err(Error::UnsafeDir {
                path: cfg.dir.clone(),
                reason: "exists and holds no store: bench split loads a new store there".into(),
            });
        }
        std::fs::remove_dir_all(&cfg.dir).map_err(|e| Error::io("remove", &cfg.dir, e))?;
    }
    let opts = Options {
        partitions: 1,
        expected_keys: cfg.keys,
        ..Options::default()
    };
    let store = Arc::new(Store::open(&cfg.dir, opts)?);
    let mut i = 0;
    while i < cfg.keys {
        let n = LOAD_BATCH.min(cfg.keys - i);
        let pairs: Vec<(Vec<u8>, Vec<u8>)> = (i..i + n)
            .map(|k| (key_for(k, cfg.key_size), value_for(k, cfg.value_size)))
            .collect();
        store.multi_put(&pairs)?;
        i += n;
    }
    store.checkpoint()?;

    let phase = Arc::new(AtomicU8::new(PHASE_IDLE));
    let stop = Arc::new(AtomicBool::new(false));
    let lat: Arc<[Mutex<Vec<f64>>; 2]> = Arc::new([Mutex::new(Vec::new()), Mutex::new(Vec::new())]);
    let reader = {
        let (store, phase, stop, lat) = (store.clone(), phase.clone(), stop.clone(), lat.clone());
        let (keys, key_size) = (cfg.keys, cfg.key_size);
        std::thread::spawn(move || -> Result<()> {
            let mut rng = WyRand::new(42);
            while !stop.load(Ordering::Relaxed) {
                let k = key_for(rng.below(keys), key_size);
                let t = Instant::now();
                let v = store.get(&k)?;
                let us = t.elapsed().as_secs_f64() * 1e6;
                if v.is_none() {
                    return Err(Error::Invalid(
                        "a loaded key was missing during a split".into(),
                    ));
                }
                let p = phase.load(Ordering::Relaxed);
                if p < PHASE_IDLE {
                    let mut l = locked(&lat[p as usize]);
                    if l.len() < SAMPLES_MAX {
                        l.push(us);
                    }
                }
            }
            Ok(())
        })
    };

    let mut out = Vec::new();
    let steps: [(&'static str, Step); 2] =
        [("split", |s| s.split(8192)), ("merge", |s| s.merge(8192))];
    let mut failure = None;
    for (step, f) in steps {
        locked(&lat[0]).clear();
        locked(&lat[1]).clear();
        phase.store(PHASE_BEFORE, Ordering::Relaxed);
        std::thread::sleep(Duration::from_secs_f64(cfg.settle_s));
        phase.store(PHASE_DURING, Ordering::Relaxed);
        let t = Instant::now();
        let rep = f(&store);
        let seconds = t.elapsed().as_secs_f64();
        phase.store(PHASE_IDLE, Ordering::Relaxed);
        let rep = match rep {
            Ok(r) => r,
            Err(e) => {
                failure = Some(e);
                break;
            }
        };
        let (before, during) = (summary(&locked(&lat[0])), summary(&locked(&lat[1])));
        let r = SplitResult {
            bench: "split",
            step,
            keys: cfg.keys,
            keys_copied: rep.keys_copied,
            keys_caught_up: rep.keys_caught_up,
            seconds,
            reads_before: before.0,
            read_p50_us_before: before.1,
            read_p99_us_before: before.2,
            read_max_us_before: before.3,
            reads_during: during.0,
            read_p50_us_during: during.1,
            read_p99_us_during: during.2,
            read_max_us_during: during.3,
        };
        emit(&r);
        out.push(r);
    }
    stop.store(true, Ordering::Relaxed);
    let read = reader
        .join()
        .map_err(|_| Error::Invalid("the reader thread panicked".into()))?;
    if let Some(e) = failure {
        return Err(e.into());
    }
    read?;
    match Arc::try_unwrap(store) {
        Ok(s) => s.close()?,
        Err(_) => return Err(Error::Invalid("the store is still shared".into())),
    }
    Ok(out)
}

/// (count, p50, p99, max) of latencies in µs.
fn summary(l: &[f64]) -> (usize, f64, f64, f64) {
    if l.is_empty() {
        return (0, 0.0, 0.0, 0.0);
    }
    let mut v = l.to_vec();
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    (v.len(), at(0.5), at(0.99), v[v.len() - 1])
}

/// The list, even if the reader panicked holding it (its samples are still whole).
fn locked(m: &Mutex<Vec<f64>>) -> MutexGuard<'_, Vec<f64>> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
