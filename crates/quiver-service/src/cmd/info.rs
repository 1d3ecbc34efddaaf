//! INFO [section ...]: the state and statistics of a RESP service in Redis's format. The
//! service's own figures come from its `Core`; what serves adds its lines and sections
//! (`InfoParts`, from `Service::info_parts`: a node's store, a router's routing).

use std::fmt::Write as _;
use std::sync::atomic::Ordering::Relaxed;

use bytes::Bytes;

use crate::cmd::connection::REDIS_COMPAT_VERSION;
use crate::figures;
use crate::reply::Reply;
use crate::service::{line, Core, InfoParts, Line, Section, Service};
use crate::table::COMMANDS;

/// INFO for `service`.
pub fn run<S: Service>(service: &S, args: &[Bytes]) -> Reply {
    let asked = asked_sections(args);
    Reply::Verbatim {
        format: *b"txt",
        text: Bytes::from(report(service.core(), service.info_parts(), &asked)),
    }
}

/// The sections asked for by INFO's arguments.
pub fn asked_sections(args: &[Bytes]) -> Vec<String> {
    args[1..]
        .iter()
        .map(|a| String::from_utf8_lossy(a).to_ascii_lowercase())
        .collect()
}

/// Sections INFO prints without arguments (and with `default`): Redis 7's defaults that Quiver
/// has, plus `vectors`. `commandstats` comes only with `all` / `everything` or by name.
const DEFAULT_SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "errorstats",
    "cluster",
    "keyspace",
    "vectors",
    "router",
];

/// CPU seconds (system, user) used by `who` (`RUSAGE_SELF`, `RUSAGE_CHILDREN` or
/// `RUSAGE_THREAD`), each printed as Redis prints them: seconds with 6 decimals.
fn cpu_seconds(who: libc::c_int) -> (String, String) {
    // SAFETY: `rusage` is plain integers, so all zeroes is a valid value; getrusage only
    // writes the struct it is given.
    // SAFETY: `rusage` is a plain C struct of integers, for which all zeroes is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; `who` is one of the constants getrusage accepts.
    // SAFETY: `usage` is a valid, writable `rusage` that outlives the call.
    if unsafe { libc::getrusage(who, &mut usage) } != 0 {
        return ("0.000000".into(), "0.000000".into());
    }
    let seconds = |t: libc::timeval| format!("{}.{:06}", t.tv_sec, t.tv_usec);
    (seconds(usage.ru_stime), seconds(usage.ru_utime))
}

/// INFO text, Redis's format: `# Section` headers and `name:value` lines, CRLF ends: the
/// service's figures with `parts` where they belong, the sections `asked` for.
pub fn report(core: &Core, parts: InfoParts, asked: &[String]) -> String {
    let everything = asked.iter().any(|s| s == "all" || s == "everything");
    let wants = |name: &str| {
        everything
            || asked.is_empty() && DEFAULT_SECTIONS.contains(&name)
            || asked
                .iter()
                .any(|s| s == name || s == "default" && DEFAULT_SECTIONS.contains(&name))
    };
    let mut out = String::new();
    for (name, title, lines) in sections(core, parts) {
        if !wants(name) {
            continue;
        }
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        let _ = write!(out, "# {title}\r\n");
        for (k, v) in lines {
            let _ = write!(out, "{k}:{v}\r\n");
        }
    }
    out
}

/// Every section, in Redis's order (Quiver's and what serves adds where they belong).
fn sections(core: &Core, parts: InfoParts) -> Vec<Section> {
    let stats = &core.stats;
    let mut all = vec![
        ("server", "Server", server(core, parts.cluster_enabled)),
        (
            "clients",
            "Clients",
            figures::info_lines(core, figures::CLIENTS),
        ),
        ("memory", "Memory", memory(core, parts.memory)),
    ];
    if let Some(lines) = parts.persistence {
        all.push(("persistence", "Persistence", lines));
    }
    let mut stat_lines = figures::info_lines(core, figures::STATS);
    stat_lines.extend(stall_lines(&stats.stalls));
    stat_lines.extend(parts.stats);
    all.push(("stats", "Stats", stat_lines));
    all.push(("replication", "Replication", parts.replication));
    all.push(("cpu", "CPU", cpu()));
    let cluster = u8::from(parts.cluster_enabled).to_string();
    all.push(("cluster", "Cluster", vec![line("cluster_enabled", cluster)]));
    all.extend(parts.sections);
    all.push(("keyspace", "Keyspace", parts.keyspace));
    all.push(("vectors", "Vectors", vectors(stats, parts.vectors)));
    all.push(("commandstats", "Commandstats", command_stats(stats)));
    let errors = stats
        .error_codes
        .lock()
        .iter()
        .map(|(code, count)| (format!("errorstat_{code}"), format!("count={count}")))
        .collect();
    all.push(("errorstats", "Errorstats", errors));
    all
}

fn server(core: &Core, cluster_enabled: bool) -> Vec<Line> {
    let uptime = core.stats.started.elapsed().as_secs();
    let mode = if cluster_enabled {
        "cluster"
    } else {
        "standalone"
    };
    let executable = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    vec![
        line("redis_version", REDIS_COMPAT_VERSION.into()),
        line("quiver_version", env!("CARGO_PKG_VERSION").into()),
        line("redis_mode", mode.into()),
        line("os", std::env::consts::OS.into()),
        line("arch_bits", (usize::BITS).to_string()),
        line("process_id", std::process::id().to_string()),
        line("run_id", core.run_id.clone()),
        line("tcp_port", core.port.to_string()),
        line("uptime_in_seconds", uptime.to_string()),
        line("uptime_in_days", (uptime / 86_400).to_string()),
        line("executable", executable),
    ]
}

/// The process's memory, with what serves adds (`more`) after its resident set.
fn memory(core: &Core, more: Vec<Line>) -> Vec<Line> {
    let mut lines = figures::info_lines(core, figures::MEMORY);
    lines.extend(more);
    lines.extend([
        line("maxmemory", "0".into()),
        // Quiver uses Rust's default, the system allocator (Redis prints "libc" for it).
        line("mem_allocator", "libc".into()),
    ]);
    lines
}

fn cpu() -> Vec<Line> {
    let (sys, user) = cpu_seconds(libc::RUSAGE_SELF);
    let (sys_children, user_children) = cpu_seconds(libc::RUSAGE_CHILDREN);
    // Redis's main thread executes every command; Quiver's worker threads all do, so this is
    // the worker thread answering this INFO.
    let (sys_thread, user_thread) = cpu_seconds(libc::RUSAGE_THREAD);
    vec![
        line("used_cpu_sys", sys),
        line("used_cpu_user", user),
        line("used_cpu_sys_children", sys_children),
        line("used_cpu_user_children", user_children),
        line("used_cpu_sys_main_thread", sys_thread),
        line("used_cpu_user_main_thread", user_thread),
    ]
}

/// The widths of the engine vectors run, with what serves adds (`more`) after their mean.
fn vectors(stats: &crate::stats::Stats, more: Vec<Line>) -> Vec<Line> {
    let widths = &stats.vector_widths();
    let mut lines = vec![
        line("vectors", widths.count().to_string()),
        line("vector_keys", widths.sum().to_string()),
        line(
            "vector_width_mean",
            format!("{:.2}", widths.sum() as f64 / widths.count().max(1) as f64),
        ),
    ];
    lines.extend(more);
    for (bound, count) in widths.buckets() {
        if count > 0 {
            let name = if bound == u64::MAX {
                "vector_width_le_inf".to_string()
            } else {
                format!("vector_width_le_{bound}")
            };
            lines.push((name, count.to_string()));
        }
    }
    lines
}

/// Redis 7 lists a command once it was called, rejected or failed.
fn command_stats(stats: &crate::stats::Stats) -> Vec<Line> {
    COMMANDS
        .iter()
        .zip(&stats.commands)
        .enumerate()
        .filter_map(|(i, (c, s))| {
            let (calls, usec) = stats.calls(i);
            let rejected = s.rejected_calls.load(Relaxed);
            let failed = s.failed_calls.load(Relaxed);
            if calls == 0 && rejected == 0 && failed == 0 {
                return None;
            }
            let per_call = if calls == 0 {
                0.0
            } else {
                usec as f64 / calls as f64
            };
            Some((
                format!("cmdstat_{}", c.name),
                format!(
                    "calls={calls},usec={usec},usec_per_call={per_call:.2},\
                     rejected_calls={rejected},failed_calls={failed}"
                ),
            ))
        })
        .collect()
}

/// The serving threads' delays (`stats::Stalls`): runs that held a thread, wakes of its
/// meter, and its waits for a core between two wakes, over 5 ms and over 25 ms, and the
/// longest of each since start.
fn stall_lines(stalls: &crate::stats::Stalls) -> Vec<Line> {
    let (runs, wakes, offcore) = (&stalls.runs, &stalls.wakes, &stalls.offcore);
    [
        ("serving_runs_over_5ms", &runs.over_5ms),
        ("serving_runs_over_25ms", &runs.over_25ms),
        ("serving_run_max_us", &runs.max_us),
        ("serving_wakes_over_5ms", &wakes.over_5ms),
        ("serving_wakes_over_25ms", &wakes.over_25ms),
        ("serving_wake_max_us", &wakes.max_us),
        ("serving_offcore_over_5ms", &offcore.over_5ms),
        ("serving_offcore_over_25ms", &offcore.over_25ms),
        ("serving_offcore_max_us", &offcore.max_us),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.load(Relaxed).to_string()))
    .collect()
}
