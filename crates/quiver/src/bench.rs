//! `quiver bench local`, `quiver bench reopen`, `quiver bench net` and `quiver bench cluster`:
//! the CLI side (bars on stderr, one JSON object per line on stdout); the benchmarks
//! themselves are in `quiver-bench`.

use std::io::Write;
use std::path::Path;

use indicatif::ProgressBar;
use quiver_bench::cluster::{self, ClusterConfig, ClusterObserver, ClusterRecord};
use quiver_bench::load::LoadReport;
use quiver_bench::local::{self, LocalConfig, LocalResult, Observer};
use quiver_bench::net::{self, Mode, NetConfig, NetLoadReport, NetObserver, NetRecord, NetSample};
use quiver_bench::reopen::{self, ReopenConfig};
use quiver_bench::split::{self, SplitConfig};
use quiver_client::ClusterStats;

use crate::cli::{BenchClusterArgs, BenchLocalArgs, BenchNetArgs, BenchReopenArgs, BenchSplitArgs};
use crate::error::CliError;
use crate::progress::{self, LOAD_TEMPLATE, PERCENT_TEMPLATE};

struct CliObserver {
    bar: Option<ProgressBar>,
    /// The first stdout error (a closed pipe): later lines are not attempted.
    output_error: Option<std::io::Error>,
}

impl Observer for CliObserver {
    fn load_started(&mut self, total: u64) {
        self.bar = Some(load_bar(total));
    }

    fn load_progress(&mut self, done: u64) {
        advance(&self.bar, done);
    }

    fn load_finished(&mut self, r: &LoadReport) {
        if let Some(pb) = self.bar.take() {
            pb.finish_and_clear();
        }
        eprintln!(
            "quiver bench: loaded {} keys in {:.2} s ({:.0} keys/s, {:.1} MB/s; flush {:.2} s)",
            r.keys,
            r.seconds,
            r.keys_per_sec(),
            r.mb_per_sec(),
            r.flush_seconds
        );
    }

    fn result(&mut self, r: &LocalResult) {
        if self.output_error.is_none() {
            if let Err(e) = print_line(r) {
                self.output_error = Some(e);
            }
        }
    }
}

/// The progress bar of a load (`bench local`, `net`, `cluster`), on a terminal only.
fn load_bar(total: u64) -> indicatif::ProgressBar {
    let pb = progress::bar(total, LOAD_TEMPLATE);
    pb.set_message("loading");
    pb
}

fn advance(bar: &Option<indicatif::ProgressBar>, done: u64) {
    if let Some(pb) = bar {
        pb.set_position(done);
    }
}

fn print_line(v: &impl serde::Serialize) -> std::io::Result<()> {
    let line = serde_json::to_string(v)?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")?;
    out.flush()
}

pub fn local(dir: &Path, a: &BenchLocalArgs) -> Result<(), CliError> {
    let cfg = LocalConfig {
        keys: a.data.keys,
        key_size: a.data.key_size,
        value_size: a.data.value_size,
        widths: a.width.clone(),
        backends: a.backend.clone(),
        distributions: a.distribution.clone(),
        threads: a.threads,
        duration_s: a.duration_s,
        dir: dir.to_path_buf(),
        zipf_theta: a.zipf_theta,
        reuse: a.reuse,
        partitions: a.partitions,
        expire_s: a.expire_s,
    };
    let mut obs = CliObserver {
        bar: None,
        output_error: None,
    };
    let results = local::run(&cfg, &mut obs);
    if let Some(pb) = obs.bar.take() {
        pb.finish_and_clear();
    }
    let results = results?;
    if let Some(e) = obs.output_error {
        return Err(CliError::Output(e));
    }
    let misses: u64 = results.iter().map(|r| r.misses).sum();
    let wrong: u64 = results.iter().map(|r| r.wrong_values).sum();
    if misses + wrong > 0 {
        return Err(CliError::Negative(format!(
            "error: {misses} keys missing and {wrong} wrong values read back: \
             every key asked for was loaded, so this is an engine bug"
        )));
    }
    Ok(())
}

pub fn split(dir: &Path, a: &BenchSplitArgs) -> Result<(), CliError> {
    let cfg = SplitConfig {
        dir: dir.to_path_buf(),
        keys: a.data.keys,
        key_size: a.data.key_size,
        value_size: a.data.value_size,
        settle_s: a.settle,
    };
    let mut output_error = None;
    split::run(&cfg, &mut |r| {
        if output_error.is_none() {
            output_error = print_line(r).err();
        }
    })?;
    output_error.map_or(Ok(()), |e| Err(CliError::Output(e)))
}

pub fn reopen(dir: &Path, a: &BenchReopenArgs) -> Result<(), CliError> {
    let cfg = ReopenConfig {
        dir: dir.to_path_buf(),
        cold: a.cold,
    };
    let pb = progress::bar(0, PERCENT_TEMPLATE);
    let mut on_progress = |p: quiver_store::RecoveryProgress| {
        pb.set_length(p.partitions as u64);
        pb.set_position(p.partition as u64 + 1);
        pb.set_message(format!(
            "opening: partition {}/{}",
            p.partition + 1,
            p.partitions
        ));
    };
    let mut output_error = None;
    let res = reopen::run(&cfg, &mut on_progress, &mut |r| {
        pb.set_position(0);
        if output_error.is_none() {
            output_error = print_line(r).err();
        }
    });
    pb.finish_and_clear();
    res?;
    output_error.map_or(Ok(()), |e| Err(CliError::Output(e)))
}

/// Above this share of a core the client thread is (nearly) saturated.
const CLIENT_SATURATED_UTIL: f64 = 0.95;
/// Below this share of a core the server is not the bottleneck.
const SERVER_IDLE_UTIL: f64 = 0.9;
/// Open loop: a client whose p99 send lag exceeds this share of the p99 latency is a large
/// part of what was measured.
const CLIENT_LAG_SHARE_MAX: f64 = 0.25;

struct NetCliObserver<'a> {
    args: &'a BenchNetArgs,
    bar: Option<ProgressBar>,
    /// The first stdout or CSV error: later records are not attempted.
    output_error: Option<CliError>,
}

impl NetObserver for NetCliObserver<'_> {
    fn load_started(&mut self, present: u64, total: u64) {
        eprintln!("quiver bench: the server holds {present} keys; loading keys 0..{total}");
        self.bar = Some(load_bar(total));
    }

    fn load_progress(&mut self, done: u64) {
        advance(&self.bar, done);
    }

    fn load_finished(&mut self, r: &NetLoadReport) {
        if let Some(pb) = self.bar.take() {
            pb.finish_and_clear();
        }
        eprintln!(
            "quiver bench: loaded {} keys in {:.2} s ({:.0} keys/s; {})",
            r.keys,
            r.seconds,
            r.keys_per_sec(),
            r.requests()
        );
    }

    fn note(&mut self, message: &str) {
        eprintln!("quiver bench: {message}");
    }

    fn running(&mut self, what: &str) {
        if !self.args.json {
            eprintln!("quiver bench: {what}...");
        }
    }

    fn record(&mut self, r: &NetRecord) {
        if r.errors > 0 {
            eprintln!(
                "quiver bench: warning: {} errors ({} error replies, {} broken connections); \
                 first: {}",
                r.errors,
                r.error_replies,
                r.disconnects,
                r.first_error.as_deref().unwrap_or("?")
            );
        }
        // With deletes or expiring writes in the mix, reads of absent keys are expected.
        if r.misses > 0 && r.del_ratio == 0.0 && r.expire_ratio == 0.0 {
            eprintln!(
                "quiver bench: warning: {} reads found no value (is the data set loaded? \
                 see --load)",
                r.misses
            );
        }
        if let (Some(lag), Some(p99)) = (r.send_lag_p99_us, r.p99_us) {
            if lag > CLIENT_LAG_SHARE_MAX * p99 {
                eprintln!(
                    "quiver bench: warning: requests left up to {lag:.0} us late (p99) against \
                     a p99 latency of {p99:.0} us: the client fell behind the schedule, and \
                     its lag is part of the latencies"
                );
            }
        }
        if let (Some(c), Some(s), "closed") = (r.client_cpu_util, r.server_cpu_util, r.mode) {
            if c >= CLIENT_SATURATED_UTIL && s < SERVER_IDLE_UTIL {
                eprintln!(
                    "quiver bench: warning: the client thread was busy {:.0}% of the time and \
                     the server {:.0}%: the client, not the server, limits this run",
                    c * 100.0,
                    s * 100.0
                );
            }
        }
        if !self.args.json {
            eprintln!("quiver bench: {}", summary(r));
        }
        if self.output_error.is_some() {
            return;
        }
        if let Err(e) = print_line(r) {
            self.output_error = Some(CliError::Output(e));
            return;
        }
        if let Some(path) = &self.args.csv {
            if let Err(e) = net::record::append_csv(path, std::slice::from_ref(r)) {
                self.output_error = Some(e.into());
            }
        }
    }

    fn sample(&mut self, s: &NetSample) {
        if !self.args.json {
            eprintln!("quiver bench: {}", sample_summary(s));
        }
        if self.output_error.is_none() {
            if let Err(e) = print_line(s) {
                self.output_error = Some(CliError::Output(e));
            }
        }
    }
}

/// One line for a person watching a soak: time, tail latency, the server's footprint.
fn sample_summary(s: &NetSample) -> String {
    const MIB: f64 = (1u64 << 20) as f64;
    let mib = |v: Option<u64>| v.map_or("-".to_string(), |v| format!("{:.1}", v as f64 / MIB));
    format!(
        "t {:.0} s: {:.0} ops/s, p99 {} us; server RSS {} MiB, {} fds; disk {} MiB \
         (segments {} MiB, bound {} MiB); {} keys, garbage {}",
        s.t_s,
        s.ops_per_sec,
        s.p99_us.map_or("-".to_string(), |v| format!("{v:.0}")),
        mib(s.rss_bytes),
        s.fds.map_or("-".to_string(), |v| v.to_string()),
        mib(s.disk_bytes),
        mib(s.disk_segment_bytes),
        mib(s.disk_bound_bytes),
        s.info.keys.map_or("-".to_string(), |v| v.to_string()),
        s.info
            .garbage_ratio
            .map_or("-".to_string(), |v| format!("{v:.2}")),
    )
}

/// One line for a person: throughput, latency, server cost.
fn summary(r: &NetRecord) -> String {
    let us = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}"));
    let mut line = format!(
        "{} {} {}: {:.0} ops/s, {:.0} keys/s, p50 {} us, p99 {} us, p99.9 {} us",
        r.system,
        r.workload,
        r.mode,
        r.ops_per_sec,
        r.keys_per_sec,
        us(r.p50_us),
        us(r.p99_us),
        us(r.p999_us)
    );
    if let (Some(cpu), Some(k)) = (r.server_cpu_s, r.keys_per_server_cpu_s) {
        line.push_str(&format!(
            ", server {cpu:.2} CPU s ({:.0} keys per CPU s)",
            k
        ));
    }
    match (r.send_lag_p99_us, r.client_cpu_util) {
        (Some(lag), _) => line.push_str(&format!(", client send lag p99 {lag:.0} us")),
        (None, Some(c)) => line.push_str(&format!(", client {:.0}% of a core", c * 100.0)),
        (None, None) => {}
    }
    line
}

pub fn net(dir: Option<&Path>, a: &BenchNetArgs) -> Result<(), CliError> {
    if dir.is_some() {
        return Err(CliError::Usage(
            "--dir is for serve and the offline commands; bench net talks to a running server \
             (see --host and --port)"
                .into(),
        ));
    }
    let mode = match (&a.rate, &a.rate_sweep) {
        (Some(r), _) => Mode::Open {
            rates: vec![*r],
            max_outstanding: a.max_outstanding,
        },
        (None, Some(rates)) => Mode::Open {
            rates: rates.clone(),
            max_outstanding: a.max_outstanding,
        },
        (None, None) => Mode::Closed {
            depth: a.depth.unwrap_or(1),
        },
    };
    let cfg = NetConfig {
        host: a.host.clone(),
        port: a.port,
        password: a.password.clone(),
        keys: a.data.keys,
        key_size: a.data.key_size,
        value_size: a.data.value_size,
        distribution: a.distribution,
        zipf_theta: a.zipf_theta,
        value_size_max: a.value_size_max,
        get_ratio: a.get_ratio,
        del_ratio: a.del_ratio,
        expire_ratio: a.expire_ratio,
        ttl_ms: a.ttl_ms,
        width: a.width,
        hash: a
            .hash_fields
            .map(|fields| quiver_bench::net::spec::HashShape {
                fields,
                read_all: a.hgetall,
                insert_ratio: a.insert_ratio,
                read_modify_write: a.read_modify_write,
            }),
        connections: a.connections,
        mode,
        warmup_s: a.warmup_s,
        duration_s: a.duration_s,
        load: a.load,
        load_only: a.load_only,
        server_pid: a.server_pid,
        system: a.system.clone(),
        workload: a.workload.clone(),
        tags: a.tags.iter().cloned().collect(),
        seed: a.seed,
        sample_every_s: a.sample_every_s,
        server_dir: a.server_dir.clone(),
    };
    let mut obs = NetCliObserver {
        args: a,
        bar: None,
        output_error: None,
    };
    let res = net::run(&cfg, &mut obs);
    if let Some(pb) = obs.bar.take() {
        pb.finish_and_clear();
    }
    res?;
    obs.output_error.map_or(Ok(()), Err)
}

struct ClusterCliObserver {
    json: bool,
    bar: Option<ProgressBar>,
}

impl ClusterObserver for ClusterCliObserver {
    fn connected(&mut self, nodes: &[String]) {
        if !self.json {
            eprintln!(
                "quiver bench: {} nodes serve slots: {}",
                nodes.len(),
                nodes.join(", ")
            );
        }
    }

    fn load_started(&mut self, total: u64) {
        self.bar = Some(load_bar(total));
    }

    fn load_progress(&mut self, done: u64) {
        advance(&self.bar, done);
    }

    fn load_finished(&mut self, keys: u64, seconds: f64, s: &ClusterStats) {
        if let Some(pb) = self.bar.take() {
            pb.finish_and_clear();
        }
        eprintln!(
            "quiver bench: loaded {keys} keys in {seconds:.2} s ({:.0} keys/s; {} requests, \
             {} CROSSSLOT, {} MOVED, {} ASK, {} TRYAGAIN/CLUSTERDOWN, {} unreachable)",
            keys as f64 / seconds.max(f64::MIN_POSITIVE),
            s.requests,
            s.cross_slot,
            s.moved,
            s.asked,
            s.retries,
            s.node_failures
        );
    }

    fn note(&mut self, message: &str) {
        eprintln!("quiver bench: {message}");
    }

    fn running(&mut self, what: &str) {
        if !self.json {
            eprintln!("quiver bench: {what}...");
        }
    }
}

/// One line for a person: throughput, the width the nodes saw, the servers' cost.
fn cluster_summary(r: &ClusterRecord) -> String {
    let mut line = format!(
        "{} on {} nodes, width {}: {:.0} keys/s ({:.0} multigets/s), {:.2} requests per \
         multiget, {:.2} keys per request",
        r.system,
        r.nodes,
        r.width,
        r.keys_per_sec,
        r.multigets_per_sec,
        r.requests_per_multiget,
        r.mean_keys_per_request
    );
    if let (Some(cpu), Some(k)) = (r.server_cpu_s, r.keys_per_server_cpu_s) {
        line.push_str(&format!(
            ", servers {cpu:.2} CPU s ({k:.0} keys per server-CPU-second)"
        ));
    }
    if let Some(router) = &r.router {
        line.push_str(&format!(", through the router {}", router.addr));
        if let (Some(cpu), Some(k)) = (router.cpu_s, r.keys_per_server_cpu_s_with_router) {
            line.push_str(&format!(
                " ({cpu:.2} CPU s; {k:.0} keys per CPU-second of servers and router)"
            ));
        }
    }
    if let Some(c) = r.client_cpu_s {
        line.push_str(&format!(", client {c:.2} CPU s"));
    }
    line
}

pub fn cluster(dir: Option<&Path>, a: &BenchClusterArgs) -> Result<(), CliError> {
    if dir.is_some() {
        return Err(CliError::Usage(
            "--dir is for serve and the offline commands; bench cluster talks to a running \
             cluster (see --seeds)"
                .into(),
        ));
    }
    let cfg = ClusterConfig {
        seeds: a.seeds.clone(),
        router: a.router.clone(),
        router_pid: a.router_pid,
        keys: a.data.keys,
        key_size: a.data.key_size,
        value_size: a.data.value_size,
        width: a.width,
        op: cluster::Op::parse(&a.op)
            .ok_or_else(|| CliError::Usage(format!("--op {}: mget or mset", a.op)))?,
        read_from_replicas: a.read_from_replicas,
        threads: a.threads,
        warmup_s: a.warmup_s,
        duration_s: a.duration_s,
        load: a.load,
        load_only: a.load_only,
        server_pids: a.server_pids.clone(),
        label: a.label.clone(),
        tags: a.tags.iter().cloned().collect(),
        seed: a.seed,
    };
    let mut obs = ClusterCliObserver {
        json: a.json,
        bar: None,
    };
    let res = cluster::run(&cfg, &mut obs);
    if let Some(pb) = obs.bar.take() {
        pb.finish_and_clear();
    }
    let Some(record) = res? else {
        return Ok(());
    };
    if !a.json {
        eprintln!("quiver bench: {}", cluster_summary(&record));
    }
    print_line(&record)?;
    Ok(())
}
