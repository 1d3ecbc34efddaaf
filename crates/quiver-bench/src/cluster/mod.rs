//! `quiver bench cluster`: a closed-loop load generator through `quiver_client::ClusterClient`,
//! the same code against a Quiver cluster and a Redis Cluster; or, with `--router`, through
//! plain connections to a `quiver router` in front of a Quiver cluster.
//!
//! T threads, each with its own client (one connection per node), each keeping one multiget
//! of W uniform random keys outstanding. The client sends a multiget as one request per node
//! (Quiver accepts keys of any slots a node owns) or, to a node that answered CROSSSLOT (Redis
//! Cluster), one request per slot; so the record's `requests_per_multiget` and
//! `mean_keys_per_request` are the vector width each back-end saw, to set beside `quiver sim
//! vector-width`'s expectation for random keys. Through a router, each thread has one
//! connection to it and sends each multiget whole (one MGET); the router splits it into one
//! sub-command per back-end, and its INFO (`router_backend_commands`, read at the window's
//! edges) gives the same two figures. The router's CPU seconds are counted apart from the
//! nodes' (`--router-pid`).
//!
//! - [`spec`]: the configuration and its limits;
//! - [`client`]: a thread's client, a cluster client or a connection to the router;
//! - [`worker`]: one thread's share of the load and its multiget loop;
//! - [`pids`]: which node each `--server-pids` process serves (its listening ports);
//! - [`record`]: the result, one JSON line.
//!
//! A run: connect every thread's client, match the server processes to nodes, load if asked
//! (every thread takes batches of keys in turn), then warm up for `warmup_s` (connections
//! opened, CROSSSLOT learned) and measure `duration_s`. CPU seconds of the servers and of this
//! process are read from `/proc` at the window's edges. Any error — a client error, a key with
//! no value or a wrong one — stops every thread and fails the run.

pub mod client;
pub mod pids;
pub mod record;
pub mod spec;
pub mod worker;

use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::ScopedJoinHandle;
use std::time::{Duration, Instant, SystemTime};

use quiver_client::{ClusterClient, ClusterOptions, ClusterStats};
use quiver_resp::slot::{key_slot, SLOTS};

use crate::error::{Error, Result};
use crate::keys::key_for;
use crate::net::procstat::process_cpu_s;
use crate::net::record::rfc3339_utc;
use client::{router_connection, router_counts, BenchClient, RouterCounts};
pub use record::ClusterRecord;
use record::{add_stats, Measured, RouterMeasured, ServerCpu};
pub use spec::{ClusterConfig, Op};
use worker::{LoadCursor, ThreadTally, Window};

/// Longest wait for one read or write of a request: a stalled node fails the run instead of
/// hanging it.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Most keys of the key space hashed to measure each node's share of it (evenly spaced
/// indexes beyond that: a sample of a million keys gives each share to a tenth of a per cent).
pub const SHARE_SAMPLE_MAX: u64 = 1 << 20;
/// How often the load's progress is reported.
const PROGRESS_EVERY: Duration = Duration::from_millis(100);
/// Mixed into each thread's seed (the 64-bit golden ratio), so threads draw different keys.
const SEED_STEP: u64 = 0x9e37_79b9_7f4a_7c15;

/// Progress hooks: the command line draws a bar and prints lines.
pub trait ClusterObserver {
    /// The slot table was read: the nodes serving slots.
    fn connected(&mut self, _nodes: &[String]) {}
    fn load_started(&mut self, _total: u64) {}
    fn load_progress(&mut self, _done: u64) {}
    /// The load is done; `stats` are the clients' (summed) over the load.
    fn load_finished(&mut self, _keys: u64, _seconds: f64, _stats: &ClusterStats) {}
    /// Something the user should know (how many threads failed).
    fn note(&mut self, _message: &str) {}
    /// The warm-up and the window are about to start.
    fn running(&mut self, _what: &str) {}
}

/// Loads if asked, then measures once; `None` with `load_only`.
pub fn run(cfg: &ClusterConfig, obs: &mut dyn ClusterObserver) -> Result<Option<ClusterRecord>> {
    cfg.validate()?;
    // The slot table (which node serves which keys), read by a cluster client whatever the
    // threads use.
    let layout = connect(cfg)?;
    let node_addrs: Vec<String> = layout.nodes().into_iter().map(String::from).collect();
    obs.connected(&node_addrs);
    // Before anything is written: a pid that is not one of the cluster's fails fast.
    let ports = cfg
        .server_pids
        .iter()
        .map(|&pid| pids::listening_ports(pid))
        .collect::<Result<Vec<_>>>()?;
    let pid_nodes = pids::match_nodes(&cfg.server_pids, &ports, &node_addrs)?;
    let shares = key_shares(cfg, &layout, &node_addrs);
    let mut clients = match &cfg.router {
        // The first thread's cluster client is the one that read the table.
        None => std::iter::once(Ok(BenchClient::Cluster(layout)))
            .chain((1..cfg.threads).map(|_| connect(cfg).map(BenchClient::Cluster)))
            .collect::<Result<Vec<_>>>()?,
        Some(addr) => (0..cfg.threads)
            .map(|_| {
                BenchClient::router(addr).map_err(|source| Error::Cluster {
                    what: format!("connecting to the router {addr}"),
                    source,
                })
            })
            .collect::<Result<Vec<_>>>()?,
    };
    if cfg.load || cfg.load_only {
        load(&mut clients, cfg, obs)?;
    }
    if cfg.load_only {
        return Ok(None);
    }
    obs.running(&format!(
        "{} threads, multigets of {} keys over {} nodes: {} s warm-up, {} s measured",
        cfg.threads,
        cfg.width,
        node_addrs.len(),
        cfg.warmup_s,
        cfg.duration_s
    ));
    let window = measure(&mut clients, cfg, obs)?;
    let servers = cfg
        .server_pids
        .iter()
        .zip(&pid_nodes)
        .zip(&window.server_cpu_s)
        .map(|((&pid, &node), &cpu_s)| ServerCpu {
            pid,
            node: node_addrs[node].clone(),
            cpu_s,
            key_share: shares[node],
        })
        .collect();
    let router = cfg.router.as_ref().map(|addr| RouterMeasured {
        addr: addr.clone(),
        pid: cfg.router_pid,
        cpu_s: window.router_cpu_s,
        backend: window.router_counts,
    });
    let m = Measured {
        node_addrs,
        measured_s: window.measured_s,
        multigets: window.tallies.iter().map(|t| t.multigets).sum(),
        window: sum_stats(window.tallies.iter().map(|t| t.window)),
        total: sum_stats(window.tallies.iter().map(|t| t.total)),
        servers,
        client_cpu_s: window.client_cpu_s,
        router,
        started_at: window.started_at,
    };
    Ok(Some(ClusterRecord::new(cfg, m)))
}

fn connect(cfg: &ClusterConfig) -> Result<ClusterClient> {
    let mut options = ClusterOptions::new(cfg.seeds.iter().cloned());
    options.read_from_replicas = cfg.read_from_replicas;
    options.connection.read_timeout = Some(REQUEST_TIMEOUT);
    options.connection.write_timeout = Some(REQUEST_TIMEOUT);
    ClusterClient::connect_with(options).map_err(|source| Error::Cluster {
        what: format!("reading the slot table from {}", cfg.seeds.join(", ")),
        source,
    })
}

fn sum_stats(stats: impl Iterator<Item = ClusterStats>) -> ClusterStats {
    stats.fold(ClusterStats::default(), add_stats)
}

/// Per node of `nodes`, the share of keys `0..keys` whose slot it serves (by the client's
/// table), from at most [`SHARE_SAMPLE_MAX`] evenly spaced keys.
fn key_shares(cfg: &ClusterConfig, client: &ClusterClient, nodes: &[String]) -> Vec<f64> {
    // Slots are below 2^14: `as u16` is exact.
    let owner: Vec<Option<usize>> = (0..SLOTS as u16)
        .map(|slot| {
            let addr = client.slot_owner(slot)?;
            nodes.iter().position(|n| n == addr)
        })
        .collect();
    let step = cfg.keys.div_ceil(SHARE_SAMPLE_MAX).max(1);
    let mut counts = vec![0u64; nodes.len()];
    let mut sampled = 0u64;
    for i in (0..cfg.keys).step_by(step as usize) {
        sampled += 1;
        if let Some(n) = owner[usize::from(key_slot(&key_for(i, cfg.key_size)))] {
            counts[n] += 1;
        }
    }
    counts
        .iter()
        .map(|&c| c as f64 / sampled.max(1) as f64)
        .collect()
}

/// Joins a scoped thread, its panic carried on.
fn join<T>(h: ScopedJoinHandle<'_, T>) -> T {
    h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))
}

/// The first error of `results`, after noting how many threads failed; else the values.
fn first_error<T>(results: Vec<Result<T>>, obs: &mut dyn ClusterObserver) -> Result<Vec<T>> {
    let failed = results.iter().filter(|r| r.is_err()).count();
    if failed > 1 {
        obs.note(&format!("{failed} of {} threads failed", results.len()));
    }
    results.into_iter().collect()
}

/// Every thread writes batches of keys until `0..keys` is written.
fn load(
    clients: &mut [BenchClient],
    cfg: &ClusterConfig,
    obs: &mut dyn ClusterObserver,
) -> Result<()> {
    obs.load_started(cfg.keys);
    let cursor = LoadCursor::default();
    let t0 = Instant::now();
    let results = std::thread::scope(|s| {
        let handles: Vec<_> = clients
            .iter_mut()
            .enumerate()
            .map(|(t, client)| {
                let cursor = &cursor;
                s.spawn(move || worker::load(client, cfg, cursor, t))
            })
            .collect();
        while !handles.iter().all(|h| h.is_finished()) {
            obs.load_progress(cursor.done.load(Ordering::Relaxed));
            std::thread::sleep(PROGRESS_EVERY);
        }
        handles.into_iter().map(join).collect::<Vec<_>>()
    });
    first_error(results, obs)?;
    let stats = sum_stats(clients.iter().map(BenchClient::stats));
    obs.load_finished(cfg.keys, t0.elapsed().as_secs_f64(), &stats);
    Ok(())
}

/// What the window gave.
struct WindowFigures {
    tallies: Vec<ThreadTally>,
    measured_s: f64,
    /// Per `--server-pids` process, in order.
    server_cpu_s: Vec<f64>,
    client_cpu_s: Option<f64>,
    /// The router's CPU seconds (`--router-pid`).
    router_cpu_s: Option<f64>,
    /// The change of the router's back-end counters (`--router`, when its INFO has them).
    router_counts: Option<RouterCounts>,
    started_at: String,
}

/// What is read at each edge of the window: the servers', this process's and the router's CPU
/// seconds, and the router's counters.
struct Edge {
    servers: Result<Vec<f64>>,
    client: Option<f64>,
    router: Result<Option<f64>>,
    counts: Result<Option<RouterCounts>>,
}

impl Edge {
    fn read(cfg: &ClusterConfig, me: u32, info: Option<&mut quiver_client::Connection>) -> Edge {
        Edge {
            servers: servers_cpu_s(&cfg.server_pids),
            client: process_cpu_s(me),
            router: router_cpu_s(cfg),
            counts: match info {
                None => Ok(None),
                Some(conn) => router_counts(conn).map_err(|source| Error::Cluster {
                    what: "reading the router's INFO".into(),
                    source,
                }),
            },
        }
    }
}

/// The router's CPU seconds now (`None` without `--router-pid`).
fn router_cpu_s(cfg: &ClusterConfig) -> Result<Option<f64>> {
    let Some(pid) = cfg.router_pid else {
        return Ok(None);
    };
    process_cpu_s(pid).map(Some).ok_or_else(|| {
        Error::Invalid(format!(
            "cannot read the CPU time of router pid {pid} (/proc/{pid}/stat): has it exited?"
        ))
    })
}

/// The servers' CPU seconds now.
fn servers_cpu_s(pids: &[u32]) -> Result<Vec<f64>> {
    pids.iter()
        .map(|&pid| {
            process_cpu_s(pid).ok_or_else(|| {
                Error::Invalid(format!(
                    "cannot read the CPU time of server pid {pid} (/proc/{pid}/stat): has it \
                     exited?"
                ))
            })
        })
        .collect()
}

/// Warm-up and window: every thread's loop; CPU seconds read at the window's edges.
fn measure(
    clients: &mut [BenchClient],
    cfg: &ClusterConfig,
    obs: &mut dyn ClusterObserver,
) -> Result<WindowFigures> {
    // INFO is asked of the router on a connection of its own, outside the threads' traffic.
    let mut info = match &cfg.router {
        None => None,
        Some(addr) => Some(router_connection(addr).map_err(|source| Error::Cluster {
            what: format!("connecting to the router {addr} for its INFO"),
            source,
        })?),
    };
    let stop = AtomicBool::new(false);
    let t0 = Instant::now();
    let start = t0 + Duration::from_secs_f64(cfg.warmup_s);
    let window = Window {
        start,
        end: start + Duration::from_secs_f64(cfg.duration_s),
    };
    let me = std::process::id();
    let (results, edges) = std::thread::scope(|s| {
        let stop = &stop;
        let handles: Vec<_> = clients
            .iter_mut()
            .enumerate()
            .map(|(t, client)| {
                let seed = cfg.seed ^ (t as u64 + 1).wrapping_mul(SEED_STEP);
                s.spawn(move || worker::measure(client, cfg, seed, window, stop, t))
            })
            .collect();
        std::thread::sleep(window.start.saturating_duration_since(Instant::now()));
        let started_at = rfc3339_utc(SystemTime::now());
        let before = Edge::read(cfg, me, info.as_mut());
        let results: Vec<_> = handles.into_iter().map(join).collect();
        let after = Edge::read(cfg, me, info.as_mut());
        (results, (started_at, before, after))
    });
    let tallies = first_error(results, obs)?;
    let (started_at, before, after) = edges;
    let server_cpu_s = before
        .servers?
        .iter()
        .zip(after.servers?)
        .map(|(a, b)| b - a)
        .collect();
    let router_cpu_s = before.router?.zip(after.router?).map(|(a, b)| b - a);
    let router_counts = before
        .counts?
        .zip(after.counts?)
        .map(|(a, b)| RouterCounts {
            backend_requests: b.backend_requests.saturating_sub(a.backend_requests),
            backend_commands: b.backend_commands.saturating_sub(a.backend_commands),
        });
    let last = tallies.iter().filter_map(|t| t.last_done).max();
    Ok(WindowFigures {
        measured_s: last.map_or(0.0, |l| l.duration_since(window.start).as_secs_f64()),
        tallies,
        server_cpu_s,
        client_cpu_s: before.client.zip(after.client).map(|(a, b)| b - a),
        router_cpu_s,
        router_counts,
        started_at,
    })
}
