//! CONFIG GET and SET: the settings by their Redis names. SET changes the live ones
//! (`settings::Live`: [`MUTABLE`], and those of what serves: [`MoreSettings`]) while serving,
//! several in one call all or nothing, with Redis 7's checks and errors; every other setting
//! CONFIG GET shows is refused as Redis refuses an immutable one. REWRITE writes the live ones
//! back into the settings file (`Live::rewrite`); RESETSTAT resets the statistics
//! (`Stats::reset`).

use bytes::Bytes;
use quiver_resp::glob_match;

use crate::config::parse_byte_size;
use crate::errors::{self, err, unknown_subcommand, wrong_arity};
use crate::frame::string2ll;
use crate::reply::Reply;
use crate::service::Core;
use crate::settings::Change;

/// The settings CONFIG SET changes while serving.
pub const MUTABLE: &[&str] = &[
    "maxclients",
    "timeout",
    "client-query-buffer-limit",
    "client-output-buffer-limit",
    "requirepass",
    "slowlog-log-slower-than",
    "slowlog-max-len",
    "latency-monitor-threshold",
    "proto-max-bulk-len",
    "loglevel",
    "acllog-max-len",
];

/// The settings of what serves beyond the service's own (a node's), for CONFIG.
pub trait MoreSettings {
    /// Each with its value now, by Redis name (CONFIG GET).
    fn values(&self) -> Vec<(&'static str, String)>;
    /// Those CONFIG SET changes while serving.
    fn mutable(&self) -> &'static [&'static str];
    /// Whether `value` suits the mutable setting `name`; else why not, in Redis's words.
    fn check(&self, name: &str, value: &[u8]) -> Result<(), String>;
    /// Sets `name` to a `value` that `check` accepted.
    fn apply(&self, name: &str, value: &[u8]);
    /// CONFIG REWRITE: each mutable setting's value now, as the settings file writes it, and
    /// whether it differs from the default.
    fn rewrite_values(&self) -> Vec<(&'static str, toml_edit::Value, bool)>;
}

/// CONFIG for a service on `core`, whose settings beyond the service's are `more`.
pub fn run(core: &Core, more: Option<&dyn MoreSettings>, args: &[Bytes]) -> Reply {
    config(core, more, args)
}

/// The service's settings CONFIG GET reports, by Redis name.
fn config_values(core: &Core) -> Vec<(&'static str, String)> {
    let (c, live) = (&core.config, &core.live);
    vec![
        ("bind", c.bind.to_string()),
        ("port", core.port.to_string()),
        ("unixsocket", path_or_empty(&c.unixsocket)),
        ("databases", c.databases.to_string()),
        ("maxclients", live.maxclients().to_string()),
        ("timeout", live.timeout().to_string()),
        ("proto-max-bulk-len", live.proto_max_bulk_len().to_string()),
        ("loglevel", live.loglevel().to_string()),
        ("acllog-max-len", live.acllog_max_len().to_string()),
        (
            "client-query-buffer-limit",
            live.client_query_buffer_limit().to_string(),
        ),
        (
            "client-output-buffer-limit",
            format!("normal {} 0 0", live.client_output_buffer_limit_shown()),
        ),
        (
            "client-output-buffer-total-limit",
            c.client_output_buffer_total_limit.to_string(),
        ),
        (
            "protected-mode",
            if c.protected_mode { "yes" } else { "no" }.into(),
        ),
        ("requirepass", live.requirepass().unwrap_or_default()),
        ("aclfile", path_or_empty(&c.aclfile)),
        ("tls-port", c.tls_port.unwrap_or_default().to_string()),
        ("tls-cert-file", path_or_empty(&c.tls_cert_file)),
        ("tls-key-file", path_or_empty(&c.tls_key_file)),
        ("tls-ca-cert-file", path_or_empty(&c.tls_ca_cert_file)),
        ("tls-auth-clients", c.tls_auth_clients.to_string()),
        ("save", String::new()),
        ("appendonly", "no".into()),
        ("maxmemory", "0".into()),
        ("maxmemory-policy", "noeviction".into()),
        (
            "slowlog-log-slower-than",
            live.slowlog_log_slower_than().to_string(),
        ),
        ("slowlog-max-len", live.slowlog_max_len().to_string()),
        (
            "latency-monitor-threshold",
            live.latency_monitor_threshold().to_string(),
        ),
        ("enable-debug-command", c.enable_debug_command.to_string()),
    ]
}

/// A path setting as CONFIG GET shows it: empty when unset.
fn path_or_empty(p: &Option<std::path::PathBuf>) -> String {
    p.as_ref()
        .map_or(String::new(), |p| p.display().to_string())
}

/// CONFIG GET pattern [pattern ...], SET name value [name value ...], RESETSTAT, REWRITE,
/// HELP.
fn config(core: &Core, more: Option<&dyn MoreSettings>, args: &[Bytes]) -> Reply {
    let sub = args[1].to_ascii_lowercase();
    match &sub[..] {
        b"get" => {
            if args.len() < 3 {
                return wrong_arity("config|get");
            }
            let mut values = config_values(core);
            values.extend(more.map(|m| m.values()).unwrap_or_default());
            let mut found = Vec::new();
            for (name, value) in &values {
                let matched = args[2..]
                    .iter()
                    .any(|p| glob_match(&p.to_ascii_lowercase(), name.as_bytes()));
                if matched {
                    found.push((Reply::text(*name), Reply::text(value.as_str())));
                }
            }
            Reply::Map(found)
        }
        b"set" => set(core, more, args),
        b"resetstat" if args.len() != 2 => wrong_arity("config|resetstat"),
        b"resetstat" => {
            core.stats.reset();
            Reply::OK
        }
        b"rewrite" if args.len() != 2 => wrong_arity("config|rewrite"),
        b"rewrite" => match &core.config.config_file {
            None => err("ERR The server is running without a config file"),
            Some(path) => match core
                .live
                .rewrite(path, &more.map(|m| m.rewrite_values()).unwrap_or_default())
            {
                Ok(()) => Reply::OK,
                Err(e) => Reply::error(format!("ERR Rewriting config file: {e}")),
            },
        },
        b"help" if args.len() != 2 => wrong_arity("config|help"),
        b"help" => Reply::Array(vec![
            Reply::simple("CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"),
            Reply::simple("GET <pattern>"),
            Reply::simple(
                "    Return parameters matching the glob-like <pattern> and their values.",
            ),
            Reply::simple("SET <directive> <value>"),
            Reply::simple("    Set the configuration <directive> to <value>."),
            Reply::simple("RESETSTAT"),
            Reply::simple("    Reset statistics reported by the INFO command."),
            Reply::simple("REWRITE"),
            Reply::simple("    Rewrite the configuration file."),
            Reply::simple("HELP"),
            Reply::simple("    Prints this help."),
        ]),
        _ => unknown_subcommand(&args[1], "CONFIG"),
    }
}

/// CONFIG SET name value [name value ...], as Redis 7: every name is checked first (known,
/// mutable, given once: the first problem is the answer), then every value; only if all hold
/// is any applied.
fn set(core: &Core, more: Option<&dyn MoreSettings>, args: &[Bytes]) -> Reply {
    if args.len() < 4 {
        return wrong_arity("config|set");
    }
    if args.len() % 2 != 0 {
        return err(errors::SYNTAX);
    }
    let more_values = more.map(|m| m.values()).unwrap_or_default();
    let more_mutable = more.map_or(&[][..], |m| m.mutable());
    let known: Vec<&str> = config_values(core)
        .iter()
        .map(|(n, _)| *n)
        .chain(more_values.iter().map(|(n, _)| *n))
        .collect();
    let pairs: Vec<(&Bytes, &Bytes)> = args[2..].chunks(2).map(|p| (&p[0], &p[1])).collect();
    let mut named: Vec<&str> = Vec::with_capacity(pairs.len());
    for (name, _) in &pairs {
        let lower = String::from_utf8_lossy(name).to_ascii_lowercase();
        let mutable = MUTABLE.iter().chain(more_mutable).find(|m| **m == lower);
        let Some(&mutable) = mutable else {
            if known.contains(&lower.as_str()) {
                return set_failed(name, "can't set immutable config");
            }
            return Reply::error(format!(
                "ERR Unknown option or number of arguments for CONFIG SET - '{}'",
                String::from_utf8_lossy(name)
            ));
        };
        if named.contains(&mutable) {
            return set_failed(name, "duplicate parameter");
        }
        named.push(mutable);
    }
    // Every value is checked before any is applied.
    let mut changes = Vec::with_capacity(pairs.len());
    for ((_, value), setting) in pairs.iter().zip(&named) {
        let checked = match more.filter(|_| !MUTABLE.contains(setting)) {
            Some(m) => m.check(setting, value).map(|()| None),
            None => change(core, setting, value).map(Some),
        };
        match checked {
            Ok(c) => changes.push(c),
            // A value's error names the setting as Redis spells it, not as given.
            Err(why) => return set_failed(setting.as_bytes(), &why),
        }
    }
    for ((c, setting), (_, value)) in changes.iter().zip(&named).zip(&pairs) {
        match (c, more) {
            (Some(c), _) => core.apply(c),
            (None, Some(m)) => m.apply(setting, value),
            (None, None) => {}
        }
    }
    Reply::OK
}

fn set_failed(name: &[u8], why: &str) -> Reply {
    Reply::error(format!(
        "ERR CONFIG SET failed (possibly related to argument '{}') - {why}",
        String::from_utf8_lossy(name)
    ))
}

/// The change `value` makes to the mutable `setting`, or why it cannot (Redis's words).
fn change(core: &Core, setting: &str, value: &[u8]) -> Result<Change, String> {
    let text = String::from_utf8_lossy(value);
    Ok(match setting {
        "maxclients" => {
            let n = integer(value, 1, u32::MAX.into())? as usize;
            if let Err(possible) = crate::server::make_room_for_clients(n) {
                return Err(format!(
                    "The operating system is not able to handle the specified number of \
                     clients, try with {possible}"
                ));
            }
            Change::MaxClients(n)
        }
        "timeout" => Change::Timeout(integer(value, 0, i32::MAX.into())? as u64),
        "client-query-buffer-limit" => {
            Change::ClientQueryBufferLimit(memory(&text, 1 << 20, i64::MAX)?)
        }
        "client-output-buffer-limit" => {
            let normal = output_limit(&text)?;
            Change::ClientOutputBufferLimit(
                normal.unwrap_or_else(|| core.live.client_output_buffer_limit_shown()),
            )
        }
        "requirepass" => Change::RequirePass((!value.is_empty()).then(|| text.into_owned())),
        "slowlog-log-slower-than" => Change::SlowlogLogSlowerThan(integer(value, -1, i64::MAX)?),
        "slowlog-max-len" => Change::SlowlogMaxLen(integer(value, 0, i64::MAX)? as usize),
        "latency-monitor-threshold" => {
            Change::LatencyMonitorThreshold(integer(value, 0, i64::MAX)? as u64)
        }
        "proto-max-bulk-len" => {
            let n = memory(&text, 1 << 20, i64::MAX)?;
            let ceiling = core.live.proto_max_bulk_len_ceiling();
            if n > ceiling {
                return Err(format!(
                    "the store was opened for values of at most {ceiling} bytes: raise \
                     proto-max-bulk-len in the settings file and restart"
                ));
            }
            Change::ProtoMaxBulkLen(n)
        }
        "loglevel" => Change::LogLevel(text.parse()?),
        "acllog-max-len" => Change::AclLogMaxLen(integer(value, 0, i64::MAX)? as usize),
        other => return Err(format!("no way to set {other}")),
    })
}

/// An integer in `lo..=hi`, or Redis's error (a node's settings are checked with it too).
pub fn integer(value: &[u8], lo: i64, hi: i64) -> Result<i64, String> {
    let n = string2ll(value).ok_or("argument couldn't be parsed into an integer")?;
    in_range(n, lo, hi)
}

fn in_range(n: i64, lo: i64, hi: i64) -> Result<i64, String> {
    if (lo..=hi).contains(&n) {
        Ok(n)
    } else {
        Err(format!("argument must be between {lo} and {hi} inclusive"))
    }
}

/// A byte count with Redis's units in `lo..=hi`, or Redis's error.
fn memory(value: &str, lo: i64, hi: i64) -> Result<usize, String> {
    let n = parse_byte_size(value).map_err(|_| "argument must be a memory value".to_string())?;
    let n = i64::try_from(n).map_err(|_| "argument must be a memory value".to_string())?;
    Ok(in_range(n, lo, hi)? as usize)
}

/// `client-output-buffer-limit`: groups of `class hard soft seconds` (classes `normal`,
/// `replica` / `slave`, `pubsub`); the normal class's hard limit, if given. Quiver's clients
/// are all of class normal and it enforces the hard limit alone (0: none but
/// `client-output-buffer-total-limit`), so the other classes are accepted and ignored, and a
/// normal soft limit is refused.
fn output_limit(value: &str) -> Result<Option<usize>, String> {
    let words: Vec<&str> = value.split_whitespace().collect();
    if words.len() % 4 != 0 {
        return Err("Wrong number of arguments in buffer limit configuration.".into());
    }
    let mut normal = None;
    for group in words.chunks(4) {
        let class = group[0].to_ascii_lowercase();
        if !matches!(class.as_str(), "normal" | "replica" | "slave" | "pubsub") {
            return Err("Invalid client class specified in buffer limit configuration.".into());
        }
        let numbers = (
            parse_byte_size(group[1]),
            parse_byte_size(group[2]),
            group[3].parse::<u64>(),
        );
        let (Ok(hard), Ok(soft), Ok(seconds)) = numbers else {
            return Err(
                "Error in hard, soft or soft_seconds setting in buffer limit configuration.".into(),
            );
        };
        if class == "normal" {
            if soft != 0 || seconds != 0 {
                return Err("Quiver enforces no soft limit on normal clients: give 0 0".into());
            }
            normal = Some(hard);
        }
    }
    Ok(normal)
}
