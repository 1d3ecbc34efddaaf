//! COMMAND, CONFIG GET and INFO: what clients and operators ask the server about itself.

use std::fmt::Write as _;
use std::sync::atomic::Ordering::Relaxed;

use bytes::Bytes;
use quiver_store::scan::glob_match;

use crate::cmd::{connection::REDIS_COMPAT_VERSION, lookup, Cmd, CommandSpec, COMMANDS};
use crate::errors::{err, unknown_subcommand, wrong_arity};
use crate::exec::Ctx;
use crate::reply::Reply;
use crate::state::ServerState;

pub fn run(ctx: &mut Ctx<'_>, cmd: Cmd, args: &[Bytes]) -> Reply {
    match cmd {
        Cmd::Command => command(args),
        Cmd::Config => config(ctx.state, args),
        Cmd::Info => {
            let sections: Vec<String> = args[1..]
                .iter()
                .map(|a| String::from_utf8_lossy(a).to_ascii_lowercase())
                .collect();
            Reply::Verbatim {
                format: *b"txt",
                text: Bytes::from(info(ctx.state, &sections)),
            }
        }
        other => unreachable!("{other:?} is not an introspection command"),
    }
}

fn bulk(s: &str) -> Reply {
    Reply::Bulk(Bytes::copy_from_slice(s.as_bytes()))
}

/// COMMAND [COUNT | LIST | INFO name... | DOCS name... | HELP].
fn command(args: &[Bytes]) -> Reply {
    let Some(sub) = args.get(1) else {
        return Reply::Array(COMMANDS.iter().map(command_info).collect());
    };
    let sub = sub.to_ascii_lowercase();
    match &sub[..] {
        b"count" if args.len() == 2 => Reply::Integer(COMMANDS.len() as i64),
        b"count" => wrong_arity("command|count"),
        b"list" => Reply::Array(COMMANDS.iter().map(|c| bulk(c.name)).collect()),
        b"info" => Reply::Array(
            args[2..]
                .iter()
                .map(|n| lookup(n).map_or(Reply::Null, |(_, c)| command_info(c)))
                .collect(),
        ),
        b"docs" => {
            let specs: Vec<&CommandSpec> = if args.len() == 2 {
                COMMANDS.iter().collect()
            } else {
                args[2..]
                    .iter()
                    .filter_map(|n| lookup(n).map(|x| x.1))
                    .collect()
            };
            Reply::Map(
                specs
                    .into_iter()
                    .map(|c| (bulk(c.name), command_docs(c)))
                    .collect(),
            )
        }
        b"help" => Reply::Array(
            [
                "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "(no subcommand)",
                "    Return details about all Quiver commands.",
                "COUNT",
                "    Return the total number of commands in this Quiver server.",
                "LIST",
                "    Return a list of all commands in this Quiver server.",
                "INFO [<command-name> ...]",
                "    Return details about multiple commands.",
                "DOCS [<command-name> ...]",
                "    Return documentation details about multiple commands.",
                "HELP",
                "    Print this help.",
            ]
            .iter()
            .map(|l| Reply::simple(*l))
            .collect(),
        ),
        _ => unknown_subcommand(&args[1], "COMMAND"),
    }
}

/// One command in Redis 7's COMMAND INFO shape: name, arity, flags, first key, last key,
/// step, ACL categories, tips, key specifications, subcommands.
fn command_info(c: &CommandSpec) -> Reply {
    Reply::Array(vec![
        bulk(c.name),
        Reply::Integer(c.arity.into()),
        Reply::Set(c.flags.iter().map(|f| Reply::simple(*f)).collect()),
        Reply::Integer(c.first_key.into()),
        Reply::Integer(c.last_key.into()),
        Reply::Integer(c.step.into()),
        Reply::Set(vec![Reply::simple(format!("@{}", c.group))]),
        Reply::Array(Vec::new()),
        Reply::Array(Vec::new()),
        Reply::Array(Vec::new()),
    ])
}

fn command_docs(c: &CommandSpec) -> Reply {
    Reply::Map(vec![
        (bulk("summary"), bulk(c.summary)),
        (bulk("since"), bulk(c.since)),
        (bulk("group"), bulk(c.group)),
    ])
}

/// The settings CONFIG GET reports, by Redis name.
fn config_values(state: &ServerState) -> Vec<(&'static str, String)> {
    let c = &state.config;
    vec![
        ("bind", c.bind.to_string()),
        ("port", state.port.to_string()),
        (
            "unixsocket",
            c.unixsocket
                .as_ref()
                .map_or(String::new(), |p| p.display().to_string()),
        ),
        ("dir", c.dir.display().to_string()),
        ("databases", "1".into()),
        ("maxclients", c.maxclients.to_string()),
        ("timeout", c.timeout.to_string()),
        ("proto-max-bulk-len", c.proto_max_bulk_len.to_string()),
        (
            "client-query-buffer-limit",
            c.client_query_buffer_limit.to_string(),
        ),
        (
            "client-output-buffer-limit",
            format!("normal {} 0 0", c.client_output_buffer_limit),
        ),
        (
            "client-output-buffer-total-limit",
            c.client_output_buffer_total_limit.to_string(),
        ),
        (
            "protected-mode",
            if c.protected_mode { "yes" } else { "no" }.into(),
        ),
        ("requirepass", c.requirepass.clone().unwrap_or_default()),
        ("save", String::new()),
        ("appendonly", "no".into()),
        ("maxmemory", "0".into()),
        ("maxmemory-policy", "noeviction".into()),
        ("durability", c.durability.to_string()),
        ("segment-size", c.segment_size.to_string()),
        ("disk-reserve", c.disk_reserve.to_string()),
        ("backend", c.backend.to_string()),
        ("coalesce", format!("{:?}", c.coalesce).to_ascii_lowercase()),
        ("max-vector-width", c.max_vector_width.to_string()),
    ]
}

/// CONFIG GET pattern [pattern ...]; CONFIG SET is refused (settings are fixed at start).
fn config(state: &ServerState, args: &[Bytes]) -> Reply {
    let sub = args[1].to_ascii_lowercase();
    match &sub[..] {
        b"get" => {
            if args.len() < 3 {
                return wrong_arity("config|get");
            }
            let values = config_values(state);
            let mut found = Vec::new();
            for (name, value) in &values {
                let matched = args[2..]
                    .iter()
                    .any(|p| glob_match(&p.to_ascii_lowercase(), name.as_bytes()));
                if matched {
                    found.push((bulk(name), bulk(value)));
                }
            }
            Reply::Map(found)
        }
        b"set" | b"rewrite" | b"resetstat" => {
            err("ERR Quiver's settings are fixed at start: edit the config file and restart")
        }
        b"help" => Reply::Array(vec![
            Reply::simple("CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"),
            Reply::simple("GET <pattern>"),
            Reply::simple(
                "    Return parameters matching the glob-like <pattern> and their values.",
            ),
            Reply::simple("HELP"),
            Reply::simple("    Print this help."),
        ]),
        _ => unknown_subcommand(&args[1], "CONFIG"),
    }
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
    "keyspace",
    "vectors",
];

/// CPU seconds (system, user) used by `who` (`RUSAGE_SELF`, `RUSAGE_CHILDREN` or
/// `RUSAGE_THREAD`), each printed as Redis prints them: seconds with 6 decimals.
fn cpu_seconds(who: libc::c_int) -> (String, String) {
    // SAFETY: `rusage` is plain integers, so all zeroes is a valid value; getrusage only
    // writes the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; `who` is one of the constants getrusage accepts.
    if unsafe { libc::getrusage(who, &mut usage) } != 0 {
        return ("0.000000".into(), "0.000000".into());
    }
    let seconds = |t: libc::timeval| format!("{}.{:06}", t.tv_sec, t.tv_usec);
    (seconds(usage.ru_stime), seconds(usage.ru_utime))
}

/// INFO text, Redis's format: `# Section` headers and `name:value` lines, CRLF ends.
pub fn info(state: &ServerState, asked: &[String]) -> String {
    let everything = asked.iter().any(|s| s == "all" || s == "everything");
    let wants = |name: &str| {
        everything
            || asked.is_empty() && DEFAULT_SECTIONS.contains(&name)
            || asked
                .iter()
                .any(|s| s == name || s == "default" && DEFAULT_SECTIONS.contains(&name))
    };
    let mut out = String::new();
    let stats = &state.stats;
    let store_stats = state.store.stats();
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
            l("redis_mode", "standalone".into()),
            l("os", std::env::consts::OS.into()),
            l("arch_bits", (usize::BITS).to_string()),
            l("process_id", std::process::id().to_string()),
            l("run_id", state.run_id.clone()),
            l("tcp_port", state.port.to_string()),
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
            l("maxclients", state.config.maxclients.to_string()),
            l("blocked_clients", "0".into()),
            l(
                "client_output_buffer_total_bytes",
                state.output_budget.buffered_bytes().to_string(),
            ),
            l(
                "client_output_buffer_total_limit",
                state.output_budget.limit_bytes().to_string(),
            ),
        ],
    );
    let rss = crate::metrics::process_rss_bytes();
    section(
        "memory",
        "Memory",
        vec![
            l("used_memory_rss", rss.to_string()),
            l("index_bytes", store_stats.index_bytes.to_string()),
            l("index_capacity", store_stats.index_capacity.to_string()),
            l(
                "index_bytes_per_key",
                format!(
                    "{:.2}",
                    store_stats.index_bytes as f64 / store_stats.keys.max(1) as f64
                ),
            ),
            l("maxmemory", "0".into()),
            // Quiver uses Rust's default, the system allocator (Redis prints "libc" for it).
            l("mem_allocator", "libc".into()),
        ],
    );
    section(
        "persistence",
        "Persistence",
        vec![
            l("loading", "0".into()),
            l("durability", state.config.durability.to_string()),
            l("backend", state.config.backend.to_string()),
            l("partitions", store_stats.partitions.to_string()),
            l("segments", store_stats.segments.to_string()),
            l("disk_bytes", store_stats.disk_bytes.to_string()),
            l("records", store_stats.records.to_string()),
            l("dead_records", store_stats.dead_records.to_string()),
            l("garbage_ratio", format!("{:.4}", store_stats.garbage_ratio)),
            l(
                "disk_reserve_bytes",
                store_stats.disk_reserve_bytes.to_string(),
            ),
            l(
                "short_of_space",
                (store_stats.short_of_space as u8).to_string(),
            ),
            l(
                "last_background_error",
                store_stats
                    .last_background_error
                    .clone()
                    .unwrap_or_default(),
            ),
            l("rdb_changes_since_last_save", "0".into()),
            l("aof_enabled", "0".into()),
        ],
    );
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
            l(
                "total_net_input_bytes",
                stats.net_input_bytes.load(Relaxed).to_string(),
            ),
            l(
                "total_net_output_bytes",
                stats.net_output_bytes.load(Relaxed).to_string(),
            ),
            l(
                "rejected_connections",
                stats.rejected_connections.load(Relaxed).to_string(),
            ),
            l(
                "keyspace_hits",
                stats.keyspace_hits.load(Relaxed).to_string(),
            ),
            l(
                "keyspace_misses",
                stats.keyspace_misses.load(Relaxed).to_string(),
            ),
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
        ],
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
    let keys = state.store.len();
    section(
        "keyspace",
        "Keyspace",
        if keys > 0 {
            vec![l("db0", format!("keys={keys},expires=0,avg_ttl=0"))]
        } else {
            Vec::new()
        },
    );
    let widths = &stats.vector_widths;
    let mut vector_lines = vec![
        l("vectors", widths.count().to_string()),
        l("vector_keys", widths.sum().to_string()),
        l(
            "vector_width_mean",
            format!("{:.2}", widths.sum() as f64 / widths.count().max(1) as f64),
        ),
        l(
            "max_vector_width",
            state.config.max_vector_width.to_string(),
        ),
    ];
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
        .filter_map(|(c, s)| {
            let calls = s.calls.load(Relaxed);
            let usec = s.usec.load(Relaxed);
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
