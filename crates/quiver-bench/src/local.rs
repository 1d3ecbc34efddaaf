//! `quiver bench local`: the engine's in-process multiget throughput.
//!
//! Loads `keys` keys once (or reuses a previous load), then for every backend reopens the store
//! with it (the page-cache backends then read every key once, in order), and for every
//! distribution and width runs `threads` closed-loop threads each doing `multi_get` of `width`
//! keys for `duration_s` seconds after a short warm-up. Every value read is checked against
//! the key it was asked for: a miss or a wrong value is an engine bug, and is counted and
//! reported, never silently averaged in.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use quiver_store::{BackendKind, Durability, Options, Store};
use serde::Serialize;

use crate::benchdir::{self, LoadParams};
use crate::distribution::{Distribution, KeySampler};
use crate::error::{Error, Result};
use crate::keys::{check_key_params, value_matches, write_key};
use crate::load::{self, LoadReport, LoadSpec};
use crate::rng::WyRand;
use crate::sysinfo::rss_anon_bytes;

/// Widest multiget vector (the engine's default `vector_width_max`).
pub const WIDTH_MAX: usize = 65_536;
/// Most reader threads.
pub const THREADS_MAX: usize = 1024;
/// Longest measured run of one configuration.
pub const DURATION_S_MAX: f64 = 86_400.0;
/// Width of the load's `multi_put` vectors.
pub const LOAD_WIDTH: usize = 256;
/// Longest warm-up; shorter runs warm up for a fifth of their duration.
const WARMUP_S_MAX: f64 = 1.0;
/// Width of the sweep that reads every key once after a page-cache backend opens the store.
const SWEEP_WIDTH: usize = 1024;

#[derive(Clone, Debug)]
pub struct LocalConfig {
    pub keys: u64,
    pub key_size: usize,
    pub value_size: usize,
    pub widths: Vec<usize>,
    pub backends: Vec<BackendKind>,
    pub distributions: Vec<Distribution>,
    pub threads: usize,
    pub duration_s: f64,
    pub dir: PathBuf,
    pub zipf_theta: f64,
    /// Skip the load when `dir` holds a complete load with the same parameters.
    pub reuse: bool,
    /// Partitions of a newly loaded store.
    pub partitions: u32,
    /// Load every key with an expiry time this many seconds ahead (`None`: no expiry).
    pub expire_s: Option<u64>,
}

impl LocalConfig {
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::Invalid(m));
        if self.keys == 0 {
            return bad("--keys must be at least 1".into());
        }
        check_key_params(self.keys, self.key_size)?;
        LoadSpec {
            count: self.keys,
            key_size: self.key_size,
            value_size: self.value_size,
            width: LOAD_WIDTH,
            expire_after_ms: None,
        }
        .validate()?;
        if self.widths.is_empty() || self.backends.is_empty() || self.distributions.is_empty() {
            return bad("--width, --backend and --distribution need at least one value".into());
        }
        if let Some(w) = self.widths.iter().find(|w| !(1..=WIDTH_MAX).contains(*w)) {
            return bad(format!("width {w} outside 1..={WIDTH_MAX}"));
        }
        if !(1..=THREADS_MAX).contains(&self.threads) {
            return bad(format!(
                "threads {} outside 1..={THREADS_MAX}",
                self.threads
            ));
        }
        if !(self.duration_s > 0.0 && self.duration_s <= DURATION_S_MAX) {
            return bad(format!(
                "duration {} s outside (0, {DURATION_S_MAX}]",
                self.duration_s
            ));
        }
        if self
            .distributions
            .iter()
            .any(|d| *d != Distribution::Uniform)
        {
            crate::distribution::Zipf::new(1, self.zipf_theta)?;
        }
        Ok(())
    }

    fn params(&self, complete: bool) -> LoadParams {
        LoadParams {
            keys: self.keys,
            key_size: self.key_size,
            value_size: self.value_size,
            partitions: self.partitions,
            expiring: self.expire_s.is_some(),
            complete,
        }
    }
}

/// One configuration's figures: one JSON line of `quiver bench local`.
#[derive(Clone, Debug, Serialize)]
pub struct LocalResult {
    pub bench: &'static str,
    pub backend: &'static str,
    pub keys: u64,
    pub key_size: usize,
    pub value_size: usize,
    pub partitions: u32,
    /// Every key was loaded with an expiry time (`--expire-s`).
    pub expiring: bool,
    pub distribution: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zipf_theta: Option<f64>,
    pub width: usize,
    pub threads: usize,
    /// Measured seconds (mean over threads).
    pub duration_s: f64,
    pub multigets: u64,
    pub keys_per_sec: f64,
    /// Mean time of one multiget as one thread sees it.
    pub us_per_multiget: f64,
    /// Keys not found (a bug: every key asked for was loaded).
    pub misses: u64,
    /// Values that are not the key's (a bug).
    pub wrong_values: u64,
    /// `Stats::index_bytes / keys`.
    pub index_bytes_per_key: f64,
    /// The process's anonymous RSS (index + heap, not mmap'ed page cache) / keys.
    pub rss_bytes_per_key: f64,
    /// Seconds to open the store with this backend.
    pub open_s: f64,
    /// The load's put rate, on the configuration that followed a load.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load_keys_per_sec: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load_s: Option<f64>,
}

/// Progress and output hooks (the CLI draws bars and prints lines).
pub trait Observer {
    fn load_started(&mut self, _total: u64) {}
    fn load_progress(&mut self, _done: u64) {}
    fn load_finished(&mut self, _report: &LoadReport) {}
    /// A configuration is about to run (for a status line).
    fn running(&mut self, _what: &str) {}
    fn result(&mut self, result: &LocalResult);
}

/// Runs the grid; returns every configuration's result (also handed to `obs.result` as soon
/// as it is measured).
pub fn run(cfg: &LocalConfig, obs: &mut dyn Observer) -> Result<Vec<LocalResult>> {
    cfg.validate()?;
    let mut load_report = prepare_data(cfg, obs)?;
    let samplers: Vec<(Distribution, KeySampler)> = cfg
        .distributions
        .iter()
        .map(|&d| Ok((d, KeySampler::new(d, cfg.keys, cfg.zipf_theta)?)))
        .collect::<Result<_>>()?;

    let mut results = Vec::new();
    for &backend in &cfg.backends {
        let opts = Options {
            backend,
            expected_keys: cfg.keys,
            ..Options::default()
        };
        let open_start = Instant::now();
        let store = Store::open(&cfg.dir, opts)?;
        let open_s = open_start.elapsed().as_secs_f64();
        let stats = store.stats();
        if stats.keys != cfg.keys {
            return Err(Error::Invalid(format!(
                "{} holds {} keys, expected {}: the load or the engine lost keys",
                cfg.dir.display(),
                stats.keys,
                cfg.keys
            )));
        }
        if backend != BackendKind::Uring {
            sweep(&store, cfg)?;
        }
        for (dist, sampler) in &samplers {
            for &width in &cfg.widths {
                obs.running(&format!("{backend} {dist} width {width}"));
                let seed = (width as u64) << 32 ^ (*dist as u64) << 16 ^ backend as u64;
                let warmup = (cfg.duration_s / 5.0).min(WARMUP_S_MAX);
                run_phase(&store, sampler, cfg, width, warmup, seed ^ 0xdead_beef)?;
                let m = run_phase(&store, sampler, cfg, width, cfg.duration_s, seed)?;
                let rss = rss_anon_bytes().unwrap_or(0);
                let load = load_report.take();
                let r = LocalResult {
                    bench: "local",
                    backend: backend.name(),
                    keys: cfg.keys,
                    key_size: cfg.key_size,
                    value_size: cfg.value_size,
                    partitions: store.options().partitions,
                    expiring: cfg.expire_s.is_some(),
                    distribution: dist.name(),
                    zipf_theta: (*dist == Distribution::Zipf).then_some(cfg.zipf_theta),
                    width,
                    threads: cfg.threads,
                    duration_s: m.seconds,
                    multigets: m.multigets,
                    keys_per_sec: m.keys_per_sec,
                    us_per_multiget: m.seconds * cfg.threads as f64 / m.multigets.max(1) as f64
                        * 1e6,
                    misses: m.misses,
                    wrong_values: m.wrong,
                    index_bytes_per_key: stats.index_bytes as f64 / cfg.keys as f64,
                    rss_bytes_per_key: rss as f64 / cfg.keys as f64,
                    open_s,
                    load_keys_per_sec: load.as_ref().map(|l| l.keys_per_sec()),
                    load_s: load.as_ref().map(|l| l.seconds),
                };
                obs.result(&r);
                results.push(r);
            }
        }
        store.close()?;
    }
    Ok(results)
}

/// Loads the data set unless `--reuse` finds it in place. Returns the load's report if it ran.
fn prepare_data(cfg: &LocalConfig, obs: &mut dyn Observer) -> Result<Option<LoadReport>> {
    if cfg.reuse && benchdir::holds_store(&cfg.dir) {
        if let Some(p) = benchdir::read_params(&cfg.dir) {
            if p.complete && p.same_data(&cfg.params(true)) {
                return Ok(None);
            }
        }
    }
    benchdir::prepare_fresh(&cfg.dir)?;
    benchdir::write_params(&cfg.dir, &cfg.params(false))?;
    let opts = Options {
        partitions: cfg.partitions,
        durability: Durability::None,
        backend: BackendKind::Mmap,
        expected_keys: cfg.keys,
        ..Options::default()
    };
    let store = Store::open(&cfg.dir, opts)?;
    let spec = LoadSpec {
        count: cfg.keys,
        key_size: cfg.key_size,
        value_size: cfg.value_size,
        width: LOAD_WIDTH,
        expire_after_ms: cfg.expire_s.map(|s| s.saturating_mul(1000)),
    };
    obs.load_started(cfg.keys);
    let report = load::load(&store, &spec, &mut |done| obs.load_progress(done))?;
    store.close()?;
    obs.load_finished(&report);
    benchdir::write_params(&cfg.dir, &cfg.params(true))?;
    Ok(Some(report))
}

/// Reads every key once, in order, and checks it: the load is complete, and the page-cache
/// backends start measuring with every index slot touched and, for mmap, every page of the
/// segments mapped (a fresh mapping takes a minor fault per 4 KiB page on first touch, which
/// would otherwise be counted in the first configuration measured).
fn sweep(store: &Store, cfg: &LocalConfig) -> Result<()> {
    let mut keys: Vec<Vec<u8>> = Vec::with_capacity(SWEEP_WIDTH);
    let (mut missing, mut wrong) = (0u64, 0u64);
    let mut first = 0u64;
    while first < cfg.keys {
        let n = (cfg.keys - first).min(SWEEP_WIDTH as u64);
        keys.clear();
        keys.extend((first..first + n).map(|i| crate::keys::key_for(i, cfg.key_size)));
        for (j, v) in store.multi_get(&keys)?.iter().enumerate() {
            match v {
                None => missing += 1,
                Some(v) if !value_matches(first + j as u64, v, cfg.value_size) => wrong += 1,
                Some(_) => {}
            }
        }
        first += n;
    }
    if missing + wrong > 0 {
        return Err(Error::Invalid(format!(
            "reading every key of {} back: {missing} missing and {wrong} wrong values \
             (an engine bug: all {} keys were loaded)",
            cfg.dir.display(),
            cfg.keys
        )));
    }
    Ok(())
}

struct Measured {
    seconds: f64,
    multigets: u64,
    keys_per_sec: f64,
    misses: u64,
    wrong: u64,
}

#[derive(Default)]
struct ThreadCount {
    seconds: f64,
    multigets: u64,
    keys: u64,
    misses: u64,
    wrong: u64,
}

/// `cfg.threads` threads doing multigets of `width` keys for `seconds`.
fn run_phase(
    store: &Store,
    sampler: &KeySampler,
    cfg: &LocalConfig,
    width: usize,
    seconds: f64,
    seed: u64,
) -> Result<Measured> {
    let stop = AtomicBool::new(false);
    let barrier = Barrier::new(cfg.threads + 1);
    let counts: Vec<Result<ThreadCount>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..cfg.threads)
            .map(|t| {
                let (stop, barrier) = (&stop, &barrier);
                s.spawn(move || {
                    let mut rng = WyRand::new(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ t as u64);
                    let res = reader(store, sampler, cfg, width, &mut rng, stop, barrier);
                    if res.is_err() {
                        stop.store(true, Ordering::Relaxed);
                    }
                    res
                })
            })
            .collect();
        barrier.wait();
        let deadline = Instant::now() + Duration::from_secs_f64(seconds);
        while !stop.load(Ordering::Relaxed) {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            std::thread::sleep((deadline - now).min(Duration::from_millis(50)));
        }
        stop.store(true, Ordering::Relaxed);
        handles
            .into_iter()
            // Reader threads return their errors; a panic in one is passed on as it is.
            .map(|h| {
                h.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    });
    let mut m = Measured {
        seconds: 0.0,
        multigets: 0,
        keys_per_sec: 0.0,
        misses: 0,
        wrong: 0,
    };
    for c in counts {
        let c = c?;
        m.seconds += c.seconds / cfg.threads as f64;
        m.multigets += c.multigets;
        m.keys_per_sec += c.keys as f64 / c.seconds.max(1e-9);
        m.misses += c.misses;
        m.wrong += c.wrong;
    }
    Ok(m)
}

/// One reader thread's closed loop.
fn reader(
    store: &Store,
    sampler: &KeySampler,
    cfg: &LocalConfig,
    width: usize,
    rng: &mut WyRand,
    stop: &AtomicBool,
    barrier: &Barrier,
) -> Result<ThreadCount> {
    let mut keys: Vec<Vec<u8>> = vec![vec![0u8; cfg.key_size]; width];
    let mut idx: Vec<u64> = vec![0; width];
    let mut c = ThreadCount::default();
    barrier.wait();
    let start = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        for (k, i) in keys.iter_mut().zip(idx.iter_mut()) {
            *i = sampler.next(rng);
            write_key(*i, k);
        }
        let values = store.multi_get(&keys)?;
        for (v, &i) in values.iter().zip(&idx) {
            match v {
                None => c.misses += 1,
                Some(v) if !value_matches(i, v, cfg.value_size) => c.wrong += 1,
                Some(_) => {}
            }
        }
        c.multigets += 1;
        c.keys += width as u64;
    }
    c.seconds = start.elapsed().as_secs_f64();
    Ok(c)
}
