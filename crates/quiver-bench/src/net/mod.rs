//! `quiver bench net`: a load generator for any server that speaks RESP (Quiver,
//! redis-server), with the same code for all of them.
//!
//! One OS thread drives every connection (a tokio current-thread runtime on epoll), so that
//! the client costs one core, pinned apart from the server's, and its cost is measured
//! (`client_cpu_s`). Requests are encoded into reused buffers and replies are counted by a
//! scanner that builds nothing ([`resp`]): the hot path allocates nothing.
//!
//! - [`spec`]: the configuration and its limits;
//! - [`workload`]: the operation mix and request encoding (keys and values from [`crate::keys`],
//!   key choice from [`crate::distribution`]);
//! - [`resp`]: the reply counter, on `quiver-resp`'s scanner (requests are encoded with
//!   `quiver-resp` too);
//! - [`closed`]: C connections x pipeline depth D;
//! - [`open`] and [`token_bucket`]: requests on a schedule, latency from intended send times;
//! - [`timer`]: sleeps to the nanosecond deadline (timerfd);
//! - [`tally`] and [`hist`]: what a run counts; latency histograms (HDR);
//! - [`preload`]: the load phase (pipelined MSET vectors);
//! - [`procstat`]: server and client CPU time, server RSS and descriptors, from `/proc`;
//! - [`record`]: the result of a run, as JSON and CSV;
//! - [`sample`]: with `sample_every_s`, the run's samples (latency per interval, the
//!   server's memory, descriptors, disk and keys), for soak runs.
//!
//! A run: connect (and AUTH) every connection, start them, warm up for `warmup_s`, measure for
//! `duration_s` (the window), stop. Replies are counted when they arrive inside the window.

pub mod closed;
pub mod conn;
pub mod hist;
pub mod open;
pub mod preload;
pub mod procstat;
pub mod record;
pub mod resp;
pub mod sample;
pub mod spec;
pub mod tally;
pub mod timer;
pub mod token_bucket;
pub mod workload;

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::SystemTime;

use tokio::net::TcpStream;
use tokio::sync::Notify;

use crate::distribution::Distribution;
use crate::error::{Error, Result};
pub use preload::NetLoadReport;
pub use record::NetRecord;
pub use sample::NetSample;
pub use spec::{Mode, NetConfig};
use tally::{Tally, Window};
use timer::PreciseTimer;
use token_bucket::monotonic_ns;
use workload::{Inserts, RequestGen};

/// Nanoseconds per second.
const NS_PER_S: f64 = 1e9;
/// Mixed into each connection's seed (the 64-bit golden ratio), so connections draw different
/// keys.
const SEED_STEP: u64 = 0x9e37_79b9_7f4a_7c15;

/// Progress and output hooks: the command line draws a bar and prints lines.
pub trait NetObserver {
    /// The load begins: the server holds `present` keys, `total` are to be written.
    fn load_started(&mut self, _present: u64, _total: u64) {}
    fn load_progress(&mut self, _done: u64) {}
    fn load_finished(&mut self, _report: &NetLoadReport) {}
    /// Something the user should know (the load was skipped, the data set looks incomplete).
    fn note(&mut self, _message: &str) {}
    /// A run is about to start (for a status line).
    fn running(&mut self, _what: &str) {}
    /// A run's result, as soon as it is measured.
    fn record(&mut self, record: &NetRecord);
    /// A sample of a run's window (`sample_every_s`), as soon as it is taken.
    fn sample(&mut self, _sample: &NetSample) {}
}

/// Loads if asked, then runs the closed loop once or the open loop once per rate. Returns
/// every record (also handed to `obs.record` as soon as measured).
pub fn run(cfg: &NetConfig, obs: &mut dyn NetObserver) -> Result<Vec<NetRecord>> {
    cfg.validate()?;
    let display = cfg.addr();
    let addr = conn::resolve(&cfg.host, cfg.port, &display)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Net {
            addr: display.clone(),
            what: "starting the client runtime",
            source: e,
        })?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, run_async(cfg, addr, &display, obs))
}

async fn run_async(
    cfg: &NetConfig,
    addr: SocketAddr,
    display: &str,
    obs: &mut dyn NetObserver,
) -> Result<Vec<NetRecord>> {
    let mut setup = conn::connect(addr, display, cfg.password.as_deref()).await?;
    let system = match &cfg.system {
        Some(s) => s.clone(),
        None => conn::detect_system(&mut setup, display).await?,
    };
    let loading = cfg.load || cfg.load_only;
    let present = match conn::dbsize(&mut setup, display).await {
        Ok(n) => Some(n),
        // Only the load needs the key count; a server refusing DBSIZE can still be measured.
        Err(e @ Error::ServerReply { .. }) if !loading => {
            obs.note(&format!("{e}: cannot tell whether the data set is loaded"));
            None
        }
        Err(e) => return Err(e),
    };
    match present {
        Some(present) if loading => {
            if present >= cfg.keys {
                obs.note(&format!(
                    "the server holds {present} keys (>= {}): not loading",
                    cfg.keys
                ));
            } else {
                obs.load_started(present, cfg.keys);
                let report = preload::load(&mut setup, cfg, display, present, &mut |done| {
                    obs.load_progress(done)
                })
                .await?;
                obs.load_finished(&report);
            }
        }
        Some(present) if present < cfg.keys => obs.note(&format!(
            "the server holds {present} keys, fewer than --keys {}: reads of absent keys \
             count as misses (--load writes them)",
            cfg.keys
        )),
        _ => {}
    }
    drop(setup);
    if cfg.load_only {
        return Ok(Vec::new());
    }
    let mut records = Vec::new();
    let runs: Vec<Option<f64>> = match &cfg.mode {
        Mode::Closed { .. } => vec![None],
        Mode::Open { rates, .. } => rates.iter().map(|&r| Some(r)).collect(),
    };
    for (i, rate) in runs.into_iter().enumerate() {
        obs.running(&match rate {
            None => format!("closed loop, {} connections", cfg.connections),
            Some(r) => format!("open loop at {r} ops/s"),
        });
        let r = measure(cfg, addr, display, &system, rate, i as u64, obs).await?;
        obs.record(&r);
        records.push(r);
    }
    Ok(records)
}

/// CPU and wall-clock figures at one edge of the window.
struct Snapshot {
    at_ns: u64,
    server_cpu_s: Option<f64>,
    client_cpu_s: Option<f64>,
}

impl Snapshot {
    fn take(server_pid: Option<u32>) -> Snapshot {
        Snapshot {
            at_ns: monotonic_ns(),
            server_cpu_s: server_pid.and_then(procstat::process_cpu_s),
            client_cpu_s: procstat::this_thread_cpu_s(),
        }
    }
}

/// One measured run: the closed loop (`rate` `None`) or the open loop at `rate`; its samples
/// go to `obs` as they are taken.
async fn measure(
    cfg: &NetConfig,
    addr: SocketAddr,
    display: &str,
    system: &str,
    rate: Option<f64>,
    run_index: u64,
    obs: &mut dyn NetObserver,
) -> Result<NetRecord> {
    let mut streams: Vec<TcpStream> = Vec::with_capacity(cfg.connections);
    for _ in 0..cfg.connections {
        streams.push(conn::connect(addr, display, cfg.password.as_deref()).await?);
    }
    let timer = PreciseTimer::new().map_err(|e| Error::Net {
        addr: display.to_string(),
        what: "timerfd",
        source: e,
    })?;
    let t0 = monotonic_ns();
    let start_ns = t0 + (cfg.warmup_s * NS_PER_S) as u64;
    let window = Window {
        start_ns,
        end_ns: start_ns + (cfg.duration_s * NS_PER_S) as u64,
    };
    let mut sampler = match cfg.sample_every_s {
        Some(every) => {
            let mut s =
                sample::Sampler::connect(cfg, addr, display, system, every, start_ns).await?;
            s.set_rate(rate);
            Some(s)
        }
        None => None,
    };
    let tally = Rc::new(RefCell::new(Tally::new(window, cfg.connections)));
    let all_done = Rc::new(Notify::new());
    let mut gens = Vec::with_capacity(cfg.connections);
    let inserts = Inserts::default();
    for i in 0..cfg.connections {
        let seed = cfg.seed ^ (i as u64 + 1).wrapping_mul(SEED_STEP) ^ run_index << 48;
        gens.push(RequestGen::new(cfg, seed, &inserts)?);
    }
    let mut closed_tasks = Vec::new();
    let mut open_run = None;
    match (&cfg.mode, rate) {
        (Mode::Closed { depth }, _) => {
            for (stream, gen) in streams.into_iter().zip(gens) {
                closed_tasks.push(closed::spawn(
                    stream,
                    gen,
                    *depth,
                    tally.clone(),
                    all_done.clone(),
                ));
            }
        }
        (
            Mode::Open {
                max_outstanding, ..
            },
            Some(rate),
        ) => {
            open_run = Some(open::OpenRun::start(
                rate,
                t0,
                streams.into_iter().zip(gens).collect(),
                *max_outstanding,
                &tally,
                &all_done,
            )?);
        }
        (Mode::Open { .. }, None) => unreachable!("an open-loop run has a rate"),
    }

    let timer_error = |e| Error::Net {
        addr: display.to_string(),
        what: "timerfd",
        source: e,
    };
    // The window's edges. If every connection breaks first, the run ends there.
    let mut ended_early = false;
    tokio::select! {
        r = timer.sleep_until(window.start_ns) => r.map_err(timer_error)?,
        _ = all_done.notified() => ended_early = true,
    }
    let first = Snapshot::take(cfg.server_pid);
    let started_at = record::rfc3339_utc(SystemTime::now());
    // Until the window's end, or until every connection broke: the samples on their schedule.
    // One sample per pass: at most duration / sample_every_s + 1 passes (validated).
    while !ended_early {
        let due = sampler
            .as_ref()
            .map_or(window.end_ns, |s| s.next_due_ns().min(window.end_ns));
        tokio::select! {
            r = timer.sleep_until(due) => r.map_err(timer_error)?,
            _ = all_done.notified() => ended_early = true,
        }
        if ended_early || due >= window.end_ns {
            break;
        }
        if let Some(s) = &mut sampler {
            // A timer that woke late (a loaded machine) must not date a sample past the
            // window's end, where the last one goes.
            obs.sample(&s.sample(monotonic_ns().min(window.end_ns), &tally).await);
        }
    }
    let last = Snapshot::take(cfg.server_pid);
    // The last sample closes the window, before the connections stop.
    if let Some(s) = &mut sampler {
        let at = last.at_ns.min(window.end_ns);
        obs.sample(&s.sample(at, &tally).await);
    }
    let rss_bytes = cfg.server_pid.and_then(procstat::process_rss_bytes);

    for h in &closed_tasks {
        h.abort();
    }
    if let Some(run) = &open_run {
        run.abort();
    }
    let stop_ns = last.at_ns.min(window.end_ns);
    if let Some(run) = &open_run {
        open::finish(run, &mut tally.borrow_mut(), stop_ns);
    }
    // Let the aborted tasks drop their sockets before the next run connects.
    for h in closed_tasks {
        let _ = h.await;
    }
    if let Some(run) = open_run {
        run.join().await;
    }

    let t = tally.borrow();
    let measured_s = stop_ns.saturating_sub(window.start_ns) as f64 / NS_PER_S;
    Ok(build_record(
        cfg,
        system,
        rate,
        &t,
        measured_s,
        Edges {
            first: &first,
            last: &last,
        },
        rss_bytes,
        started_at,
    ))
}

struct Edges<'a> {
    first: &'a Snapshot,
    last: &'a Snapshot,
}

#[allow(clippy::too_many_arguments)]
fn build_record(
    cfg: &NetConfig,
    system: &str,
    rate: Option<f64>,
    t: &Tally,
    measured_s: f64,
    edges: Edges<'_>,
    rss_bytes: Option<u64>,
    started_at: String,
) -> NetRecord {
    let per_s = |n: f64| {
        if measured_s > 0.0 {
            n / measured_s
        } else {
            0.0
        }
    };
    let width = cfg.width as u64;
    let ops_per_sec = per_s(t.ops as f64);
    let diff = |a: Option<f64>, b: Option<f64>| Some((b? - a?).max(0.0));
    let server_cpu_s = diff(edges.first.server_cpu_s, edges.last.server_cpu_s);
    let client_cpu_s = diff(edges.first.client_cpu_s, edges.last.client_cpu_s);
    let util = |cpu: Option<f64>| cpu.filter(|_| measured_s > 0.0).map(|c| c / measured_s);
    let keys_read_written = t.ops * width;
    let lat = t.latency.summary();
    let lag = t.send_lag.summary();
    let (open, closed_depth) = match &cfg.mode {
        Mode::Closed { depth } => (None, Some(*depth)),
        Mode::Open {
            max_outstanding, ..
        } => (Some(*max_outstanding), None),
    };
    NetRecord {
        bench: "net",
        system: system.to_string(),
        workload: cfg.workload_name(),
        mode: cfg.mode.name(),
        host: cfg.host.clone(),
        port: cfg.port,
        connections: cfg.connections,
        depth: closed_depth,
        width: cfg.width,
        rate_target: rate,
        max_outstanding: open,
        keys: cfg.keys,
        key_size: cfg.key_size,
        value_size: cfg.value_size,
        value_size_max: cfg.value_size_max,
        distribution: cfg.distribution.name(),
        zipf_theta: (cfg.distribution != Distribution::Uniform).then_some(cfg.zipf_theta),
        get_ratio: cfg.get_ratio,
        del_ratio: cfg.del_ratio,
        expire_ratio: cfg.expire_ratio,
        ttl_ms_min: (cfg.expire_ratio > 0.0).then_some(cfg.ttl_ms.0),
        ttl_ms_max: (cfg.expire_ratio > 0.0).then_some(cfg.ttl_ms.1),
        warmup_s: cfg.warmup_s,
        duration_s: cfg.duration_s,
        measured_s,
        ops: t.ops,
        keys_read_written,
        errors: t.error_replies + t.disconnects,
        error_replies: t.error_replies,
        disconnects: t.disconnects,
        first_error: t.first_error.clone(),
        misses: t.misses,
        unanswered: open.map(|_| t.unanswered),
        ops_per_sec,
        keys_per_sec: ops_per_sec * cfg.width as f64,
        p50_us: lat.map(|l| l.p50_us),
        p90_us: lat.map(|l| l.p90_us),
        p99_us: lat.map(|l| l.p99_us),
        p999_us: lat.map(|l| l.p999_us),
        max_us: lat.map(|l| l.max_us),
        mean_us: lat.map(|l| l.mean_us),
        send_lag_p50_us: lag.map(|l| l.p50_us),
        send_lag_p99_us: lag.map(|l| l.p99_us),
        send_lag_max_us: lag.map(|l| l.max_us),
        server_cpu_s,
        server_cpu_util: util(server_cpu_s),
        keys_per_server_cpu_s: server_cpu_s
            .filter(|&c| c > 0.0)
            .map(|c| keys_read_written as f64 / c),
        rss_bytes,
        rss_bytes_per_key: rss_bytes.map(|b| b as f64 / cfg.keys as f64),
        client_cpu_s,
        client_cpu_util: util(client_cpu_s),
        tags: cfg.tags.clone(),
        started_at,
    }
}
