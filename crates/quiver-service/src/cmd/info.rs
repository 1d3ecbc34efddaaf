//! INFO [section ...]: the state and statistics of a RESP service in Redis's format. The
//! service's own figures come from its `Core`; what serves adds its lines and sections
//! (`InfoParts`, from `Service::info_parts`: a node's store, a router's routing).

use std::fmt::Write as _;
use std::sync::atomic::Ordering::Relaxed;

use bytes::Bytes;

use crate::cmd::connection::REDIS_COMPAT_VERSION;
use crate::reply::Reply;
use crate::service::{Core, InfoParts, Service};
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
/// service's figures with `parts` where they belong.
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
    let stats = &core.stats;
    let cluster_enabled = parts.cluster_enabled;
    let mut section = |name: &str, title: &str, lines: Vec<(String, String)>| {
        if !wants(name) {
            return;
        }
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        let _ = write!(out, "# {title}\r\n");
        for (k, v) in lines {
            let _ = write!(out, "{k}:{v}\r\n");
        }
    };
    let uptime = stats.started.elapsed().as_secs();
    let l = |k: &str, v: String| (k.to_string(), v);
    section(
        "server",
        "Server",
        vec![
            l("redis_version", REDIS_COMPAT_VERSION.into()),
            l("quiver_version", env!("CARGO_PKG_VERSION").into()),
            l(
                "redis_mode",
                if cluster_enabled {
                    "cluster"
                } else {
                    "standalone"
                }
                .into(),
            ),
            l("os", std::env::consts::OS.into()),
            l("arch_bits", (usize::BITS).to_string()),
            l("process_id", std::process::id().to_string()),
            l("run_id", core.run_id.clone()),
            l("tcp_port", core.port.to_string()),
            l("uptime_in_seconds", uptime.to_string()),
            l("uptime_in_days", (uptime / 86_400).to_string()),
            l(
                "executable",
                std::env::current_exe()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default(),
            ),
        ],
    );
    section(
        "clients",
        "Clients",
        vec![
            l(
                "connected_clients",
                stats.connected_clients.load(Relaxed).to_string(),
            ),
            l("maxclients", core.config.maxclients.to_string()),
            l("blocked_clients", "0".into()),
            l(
                "client_output_buffer_total_bytes",
                core.stats.output_buffered_bytes().to_string(),
            ),
            l(
                "client_output_buffer_total_limit",
                core.output_budget.limit_bytes().to_string(),
            ),
        ],
    );
    let rss = crate::metrics::process_rss_bytes();
    let mut memory = vec![l("used_memory_rss", rss.to_string())];
    memory.extend(parts.memory);
    memory.extend([
        l("maxmemory", "0".into()),
        // Quiver uses Rust's default, the system allocator (Redis prints "libc" for it).
        l("mem_allocator", "libc".into()),
    ]);
    section("memory", "Memory", memory);
    if let Some(lines) = parts.persistence {
        section("persistence", "Persistence", lines);
    }
    section(
        "stats",
        "Stats",
        vec![
            l(
                "total_connections_received",
                stats.connections_received.load(Relaxed).to_string(),
            ),
            l(
                "total_commands_processed",
                stats.total_commands().to_string(),
            ),
            l("total_net_input_bytes", stats.net_input_bytes().to_string()),
            l(
                "total_net_output_bytes",
                stats.net_output_bytes().to_string(),
            ),
            l(
                "rejected_connections",
                stats.rejected_connections.load(Relaxed).to_string(),
            ),
            l("keyspace_hits", stats.keyspace_hits().to_string()),
            l("keyspace_misses", stats.keyspace_misses().to_string()),
            l(
                "total_error_replies",
                stats.error_replies.load(Relaxed).to_string(),
            ),
            l(
                "total_error_replies_protocol",
                stats.protocol_errors.load(Relaxed).to_string(),
            ),
            l(
                "unknown_commands",
                stats.unknown_commands.load(Relaxed).to_string(),
            ),
            l(
                "transaction_retries",
                stats.transaction_retries.load(Relaxed).to_string(),
            ),
            l(
                "transactions_abandoned",
                stats.transactions_abandoned.load(Relaxed).to_string(),
            ),
            l(
                "clients_closed_by_limit",
                stats.clients_closed_by_limit.load(Relaxed).to_string(),
            ),
            l(
                "replies_refused_by_total_limit",
                stats
                    .replies_refused_by_total_limit
                    .load(Relaxed)
                    .to_string(),
            ),
        ]
        .into_iter()
        .chain(stall_lines(&stats.stalls))
        .chain(parts.stats)
        .collect(),
    );
    let (sys, user) = cpu_seconds(libc::RUSAGE_SELF);
    let (sys_children, user_children) = cpu_seconds(libc::RUSAGE_CHILDREN);
    // Redis's main thread executes every command; Quiver's worker threads all do, so this is
    // the worker thread answering this INFO.
    let (sys_thread, user_thread) = cpu_seconds(libc::RUSAGE_THREAD);
    section(
        "cpu",
        "CPU",
        vec![
            l("used_cpu_sys", sys),
            l("used_cpu_user", user),
            l("used_cpu_sys_children", sys_children),
            l("used_cpu_user_children", user_children),
            l("used_cpu_sys_main_thread", sys_thread),
            l("used_cpu_user_main_thread", user_thread),
        ],
    );
    section(
        "cluster",
        "Cluster",
        vec![l("cluster_enabled", u8::from(cluster_enabled).to_string())],
    );
    for (name, title, lines) in parts.sections {
        section(name, title, lines);
    }
    section("keyspace", "Keyspace", parts.keyspace);
    let widths = &stats.vector_widths();
    let mut vector_lines = vec![
        l("vectors", widths.count().to_string()),
        l("vector_keys", widths.sum().to_string()),
        l(
            "vector_width_mean",
            format!("{:.2}", widths.sum() as f64 / widths.count().max(1) as f64),
        ),
    ];
    vector_lines.extend(parts.vectors);
    for (bound, count) in widths.buckets() {
        if count > 0 {
            let name = if bound == u64::MAX {
                "vector_width_le_inf".to_string()
            } else {
                format!("vector_width_le_{bound}")
            };
            vector_lines.push((name, count.to_string()));
        }
    }
    section("vectors", "Vectors", vector_lines);
    // Redis 7 lists a command once it was called, rejected or failed.
    let command_lines = COMMANDS
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
        .collect();
    section("commandstats", "Commandstats", command_lines);
    let error_lines = stats
        .error_codes
        .lock()
        .iter()
        .map(|(code, count)| (format!("errorstat_{code}"), format!("count={count}")))
        .collect();
    section("errorstats", "Errorstats", error_lines);
    out
}

/// The serving threads' delays (`stats::Stalls`): runs that held a thread, and wakes of its
/// meter, over 5 ms and over 25 ms, and the longest of each since start.
fn stall_lines(stalls: &crate::stats::Stalls) -> Vec<(String, String)> {
    let (runs, wakes) = (&stalls.runs, &stalls.wakes);
    [
        ("serving_runs_over_5ms", &runs.over_5ms),
        ("serving_runs_over_25ms", &runs.over_25ms),
        ("serving_run_max_us", &runs.max_us),
        ("serving_wakes_over_5ms", &wakes.over_5ms),
        ("serving_wakes_over_25ms", &wakes.over_25ms),
        ("serving_wake_max_us", &wakes.max_us),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.load(Relaxed).to_string()))
    .collect()
}
