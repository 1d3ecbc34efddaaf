//! INFO [section ...]: the server's state and statistics in Redis's format.

use std::fmt::Write as _;
use std::sync::atomic::Ordering::Relaxed;

use bytes::Bytes;

use crate::state::ServerState;
use quiver_service::cmd::connection::REDIS_COMPAT_VERSION;
use quiver_service::reply::Reply;
use quiver_service::service::Core;
use quiver_service::table::COMMANDS;

pub fn run(state: &ServerState, args: &[Bytes]) -> Reply {
    let sections = asked_sections(args);
    Reply::Verbatim {
        format: *b"txt",
        text: Bytes::from(info(state, &sections)),
    }
}

/// The sections asked for by INFO's arguments.
pub fn asked_sections(args: &[Bytes]) -> Vec<String> {
    args[1..]
        .iter()
        .map(|a| String::from_utf8_lossy(a).to_ascii_lowercase())
        .collect()
}

/// A section a RESP server adds to the common ones: (name, title, lines).
pub type Section = (&'static str, &'static str, Vec<(String, String)>);

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

/// A node's INFO text.
pub fn info(state: &ServerState, asked: &[String]) -> String {
    report(&state.core, Some(state), Vec::new(), asked)
}

/// INFO text, Redis's format: `# Section` headers and `name:value` lines, CRLF ends. The
/// sections about the store come with a `node`; `extra` sections follow the cluster section.
pub fn report(
    core: &Core,
    node: Option<&ServerState>,
    extra: Vec<Section>,
    asked: &[String],
) -> String {
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
    let store_stats = node.map(|n| n.store.stats());
    let cluster_enabled = node.is_some_and(|n| n.cluster.is_some());
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
    let rss = quiver_service::metrics::process_rss_bytes();
    let mut memory = vec![l("used_memory_rss", rss.to_string())];
    if let Some(store_stats) = &store_stats {
        memory.extend([
            l("index_bytes", store_stats.index_bytes.to_string()),
            l("index_capacity", store_stats.index_capacity.to_string()),
            l(
                "index_spilled_keys",
                store_stats.index_spilled_keys.to_string(),
            ),
            l(
                "index_bytes_per_key",
                format!(
                    "{:.2}",
                    store_stats.index_bytes as f64 / store_stats.keys.max(1) as f64
                ),
            ),
        ]);
    }
    memory.extend([
        l("maxmemory", "0".into()),
        // Quiver uses Rust's default, the system allocator (Redis prints "libc" for it).
        l("mem_allocator", "libc".into()),
    ]);
    section("memory", "Memory", memory);
    if let (Some(store_stats), Some(node)) = (&store_stats, node) {
        section(
            "persistence",
            "Persistence",
            vec![
                l("loading", "0".into()),
                l("durability", node.config.durability.to_string()),
                l("backend", node.config.backend.to_string()),
                l("partitions", store_stats.partitions.to_string()),
                l("segments", store_stats.segments.to_string()),
                l("disk_bytes", store_stats.disk_bytes.to_string()),
                l("records", store_stats.records.to_string()),
                l("dead_records", store_stats.dead_records.to_string()),
                l("garbage_ratio", format!("{:.4}", store_stats.garbage_ratio)),
                l(
                    "compaction_copied_records",
                    store_stats.compaction_copied_records.to_string(),
                ),
                l(
                    "compaction_dropped_records",
                    store_stats.compaction_dropped_records.to_string(),
                ),
                l(
                    "disk_reserve_bytes",
                    store_stats.disk_reserve_bytes.to_string(),
                ),
                l(
                    "short_of_space",
                    (store_stats.short_of_space as u8).to_string(),
                ),
                l(
                    "partitions_refusing_writes",
                    store_stats.partitions_refusing_writes.to_string(),
                ),
                l(
                    "refusing_writes_because",
                    store_stats
                        .refusing_writes_because
                        .clone()
                        .unwrap_or_default(),
                ),
                l(
                    "last_background_error",
                    store_stats
                        .last_background_error
                        .clone()
                        .unwrap_or_default(),
                ),
                l(
                    "maintenance_stall_max_us",
                    store_stats.maintenance_stall_max_us.to_string(),
                ),
                l(
                    "maintenance_stall_max_by",
                    store_stats.maintenance_stall_max_by.replace(' ', "_"),
                ),
                l(
                    "maintenance_stall_total_us",
                    store_stats.maintenance_stall_total_us.to_string(),
                ),
                l(
                    "maintenance_stalls",
                    store_stats.maintenance_stalls.to_string(),
                ),
                l("rdb_changes_since_last_save", "0".into()),
                l("aof_enabled", "0".into()),
            ],
        );
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
        .chain(store_stats.iter().flat_map(|s| lock_lines(&s.locks)))
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
    for (name, title, lines) in extra {
        section(name, title, lines);
    }
    // Live keys only (those whose expiry time has come are not counted, swept or not);
    // avg_ttl is the exact mean time to live of the keys with an expiry, in ms. One line per
    // database with keys, as Redis.
    section(
        "keyspace",
        "Keyspace",
        node.map(|n| n.store.db_stats())
            .unwrap_or_default()
            .into_iter()
            .map(|d| {
                l(
                    &format!("db{}", d.db),
                    format!(
                        "keys={},expires={},avg_ttl={}",
                        d.keys, d.expiring_keys, d.avg_ttl_ms
                    ),
                )
            })
            .collect(),
    );
    let widths = &stats.vector_widths();
    let mut vector_lines = vec![
        l("vectors", widths.count().to_string()),
        l("vector_keys", widths.sum().to_string()),
        l(
            "vector_width_mean",
            format!("{:.2}", widths.sum() as f64 / widths.count().max(1) as f64),
        ),
    ];
    if let Some(node) = node {
        vector_lines.push(l(
            "max_vector_width",
            node.config.max_vector_width.to_string(),
        ));
    }
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

/// The serving paths' partition lock figures (a node's `# Stats`): writers' locks, waits,
/// wait and hold times; readers' waits and wait time.
fn lock_lines(locks: &quiver_store::LockStats) -> Vec<(String, String)> {
    [
        ("partition_write_locks", locks.write_locks),
        ("partition_write_lock_waits", locks.write_waits),
        ("partition_write_lock_wait_us", locks.write_wait_us),
        ("partition_write_lock_hold_us", locks.write_hold_us),
        ("partition_read_lock_waits", locks.read_waits),
        ("partition_read_lock_wait_us", locks.read_wait_us),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// The serving threads' delays (`stats::Stalls`): runs that held a thread, and wakes of its
/// meter, over 5 ms and over 25 ms, and the longest of each since start.
fn stall_lines(stalls: &quiver_service::stats::Stalls) -> Vec<(String, String)> {
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
