//! The settings of any RESP service (`quiver serve`, `quiver router`): listening, limits,
//! clients, TLS, ACL, renamed commands — keys of a TOML file (`--config`) with Redis's names
//! (`maxclients`, `proto-max-bulk-len`, `client-query-buffer-limit`, `requirepass`, ...) and
//! Redis's defaults. What serves reads its own keys from the same file
//! ([`from_toml_with`]: a node's store and cluster settings, `node_config`); a key that
//! neither knows is refused. Command-line flags override the file.

use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};

use crate::frame::{self, Limits};
use crate::names::Renames;
use crate::tls::AuthClients;

/// Default TCP port (Redis uses 6379; Quiver sits next to it so both can run side by side).
pub const DEFAULT_PORT: u16 = 7379;
/// Redis `maxclients` default.
pub const MAXCLIENTS_DEFAULT: usize = 10_000;
/// Redis `client-query-buffer-limit` default: 1 GiB.
pub const CLIENT_QUERY_BUFFER_LIMIT_DEFAULT: usize = 1 << 30;
/// Hard limit on a normal client's pending replies. Redis's default for normal clients is
/// "no limit"; Quiver stops reading a connection while its replies are pending, so the buffer
/// only ever holds one pipelined run's replies, and this caps that run (a huge MGET of huge
/// values) instead of letting it exhaust memory.
pub const CLIENT_OUTPUT_BUFFER_LIMIT_DEFAULT: usize = 1 << 30;
/// Bound on the replies buffered by all connections together (a reply that would pass it is
/// replaced by an error). Each connection may hold up to `client-output-buffer-limit`; without
/// this, a few clients reading huge MGETs at once could together take many gigabytes.
pub const CLIENT_OUTPUT_BUFFER_TOTAL_LIMIT_DEFAULT: usize = 4 << 30;
/// Redis's default `databases`: real applications and client test suites SELECT 0..15.
pub const DATABASES_DEFAULT: u32 = 16;
/// Redis's defaults for the slow log: commands of 10 ms or more, the last 128 of them.
pub const SLOWLOG_LOG_SLOWER_THAN_DEFAULT: i64 = 10_000;
pub const SLOWLOG_MAX_LEN_DEFAULT: usize = 128;

/// Who may run DEBUG (Redis's `enable-debug-command`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DebugCommand {
    #[default]
    No,
    Yes,
    /// Clients on a loopback address or the Unix socket.
    Local,
}

impl FromStr for DebugCommand {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "no" => Ok(DebugCommand::No),
            "yes" => Ok(DebugCommand::Yes),
            "local" => Ok(DebugCommand::Local),
            _ => Err(format!("expected no, yes or local, got {s:?}")),
        }
    }
}

impl std::fmt::Display for DebugCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DebugCommand::No => "no",
            DebugCommand::Yes => "yes",
            DebugCommand::Local => "local",
        })
    }
}

/// Log line format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

impl FromStr for LogFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            _ => Err(format!("unknown log format {s:?} (expected text or json)")),
        }
    }
}

/// The settings of any RESP service. Field names map to kebab-case TOML keys.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "kebab-case", default)]
pub struct Config {
    /// Address to listen on (one address).
    #[serde(deserialize_with = "parse_str")]
    pub bind: IpAddr,
    /// TCP port; 0 picks a free one (the server prints it).
    pub port: u16,
    /// Also listen on this Unix socket.
    pub unixsocket: Option<PathBuf>,
    /// Serving threads (0 = one per core).
    pub threads: usize,
    /// Databases SELECT can choose from (`0..databases`), as Redis's `databases`.
    pub databases: u32,
    /// Password every client must give with AUTH or HELLO.
    pub requirepass: Option<String>,
    /// While the `default` user has no password, serve only clients on a loopback address
    /// or the Unix socket (decided per connection, as Redis 7 does).
    #[serde(deserialize_with = "yes_no")]
    pub protected_mode: bool,
    pub maxclients: usize,
    /// Close connections idle for this many seconds (0 = never).
    pub timeout: u64,
    #[serde(deserialize_with = "byte_size")]
    pub proto_max_bulk_len: usize,
    /// Largest multibulk count accepted (Redis 7: INT_MAX).
    pub proto_max_multibulk_len: usize,
    #[serde(deserialize_with = "byte_size")]
    pub client_query_buffer_limit: usize,
    /// The most reply bytes one connection holds (0: no limit of its own, only
    /// `client-output-buffer-total-limit`).
    #[serde(deserialize_with = "byte_size")]
    pub client_output_buffer_limit: usize,
    /// Bound on the sum of all connections' buffered replies (0 = no limit).
    #[serde(deserialize_with = "byte_size")]
    pub client_output_buffer_total_limit: usize,
    /// Serve Prometheus metrics over HTTP here (off when unset).
    pub metrics_addr: Option<SocketAddr>,
    #[serde(deserialize_with = "parse_str")]
    pub log_format: LogFormat,
    /// What is logged (Redis's `loglevel`; `RUST_LOG`, when set, rules at start instead).
    #[serde(deserialize_with = "parse_str")]
    pub loglevel: crate::logging::LogLevel,
    /// Entries ACL LOG keeps (Redis's `acllog-max-len`).
    pub acllog_max_len: usize,
    /// TLS port (unset: none; 0: a free one, printed at start), beside the plain `port`.
    pub tls_port: Option<u16>,
    /// The server's certificate chain (PEM) on the TLS port.
    pub tls_cert_file: Option<PathBuf>,
    /// The private key (PEM) of `tls-cert-file`.
    pub tls_key_file: Option<PathBuf>,
    /// The CA certificates (PEM) client certificates must chain to.
    pub tls_ca_cert_file: Option<PathBuf>,
    /// Whether TLS clients must present a certificate: yes (Redis's default), no, optional.
    #[serde(deserialize_with = "parse_str")]
    pub tls_auth_clients: AuthClients,
    /// ACL users are read from this file at start and by ACL LOAD, written by ACL SAVE.
    pub aclfile: Option<PathBuf>,
    /// Commands renamed or disabled: a `[rename-command]` table of `NAME = "new name"`, or
    /// `""` to disable (Redis's `rename-command`; see `names`).
    pub rename_command: Renames,
    /// A command that takes at least this many microseconds goes to the slow log (SLOWLOG;
    /// -1: none does, 0: every one).
    pub slowlog_log_slower_than: i64,
    /// Entries the slow log keeps.
    pub slowlog_max_len: usize,
    /// Events of at least this many milliseconds go to the latency monitor (LATENCY; 0: off).
    pub latency_monitor_threshold: u64,
    /// Who may run DEBUG: no (Redis 7's default), yes, or local clients.
    #[serde(deserialize_with = "parse_str")]
    pub enable_debug_command: DebugCommand,
    /// The file these settings were read from (CONFIG REWRITE writes the live ones back to
    /// it); not a setting.
    #[serde(skip)]
    pub config_file: Option<PathBuf>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            bind: IpAddr::from([127, 0, 0, 1]),
            port: DEFAULT_PORT,
            unixsocket: None,
            threads: 0,
            databases: DATABASES_DEFAULT,
            requirepass: None,
            protected_mode: true,
            maxclients: MAXCLIENTS_DEFAULT,
            timeout: 0,
            proto_max_bulk_len: frame::PROTO_MAX_BULK_LEN,
            proto_max_multibulk_len: frame::PROTO_MULTIBULK_MAX_LEN,
            client_query_buffer_limit: CLIENT_QUERY_BUFFER_LIMIT_DEFAULT,
            client_output_buffer_limit: CLIENT_OUTPUT_BUFFER_LIMIT_DEFAULT,
            client_output_buffer_total_limit: CLIENT_OUTPUT_BUFFER_TOTAL_LIMIT_DEFAULT,
            metrics_addr: None,
            log_format: LogFormat::Text,
            loglevel: crate::logging::LogLevel::Notice,
            acllog_max_len: crate::acl::log::ACL_LOG_LEN_DEFAULT,
            tls_port: None,
            tls_cert_file: None,
            tls_key_file: None,
            tls_ca_cert_file: None,
            tls_auth_clients: AuthClients::Yes,
            aclfile: None,
            rename_command: Renames::default(),
            slowlog_log_slower_than: SLOWLOG_LOG_SLOWER_THAN_DEFAULT,
            slowlog_max_len: SLOWLOG_MAX_LEN_DEFAULT,
            latency_monitor_threshold: 0,
            enable_debug_command: DebugCommand::No,
            config_file: None,
        }
    }
}

/// A configuration that cannot be used; the message says which setting and why.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

impl Config {
    /// Reads a TOML file of the service's settings alone; keys it does not set keep their
    /// defaults.
    pub fn from_file(path: &Path) -> Result<Config, ConfigError> {
        Ok(from_file_with::<NoMore>(path)?.0)
    }

    /// [`Config::from_file`] from the file's text.
    pub fn from_toml(text: &str) -> Result<Config, ConfigError> {
        Ok(from_toml_with::<NoMore>(text)?.0)
    }

    /// The `tls-*` settings.
    pub fn tls(&self) -> crate::tls::Settings<'_> {
        crate::tls::Settings {
            port: self.tls_port,
            cert_file: self.tls_cert_file.as_deref(),
            key_file: self.tls_key_file.as_deref(),
            ca_cert_file: self.tls_ca_cert_file.as_deref(),
            auth_clients: self.tls_auth_clients,
        }
    }

    /// Checks the settings against each other; called before anything is opened.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |m: &str| Err(ConfigError(m.into()));
        self.tls().validate().map_err(ConfigError)?;
        if self.maxclients == 0 {
            return bad("maxclients must be at least 1");
        }
        if self.proto_max_bulk_len < 1024 * 1024 {
            // Redis's own floor for this setting.
            return bad("proto-max-bulk-len must be at least 1mb");
        }
        if self.proto_max_multibulk_len == 0 {
            return bad("proto-max-multibulk-len must be at least 1");
        }
        if self.client_query_buffer_limit < 1024 * 1024 {
            // Redis's own floor for this setting.
            return bad("client-query-buffer-limit must be at least 1mb");
        }
        if self.slowlog_log_slower_than < -1 {
            return bad("slowlog-log-slower-than must be -1 (off) or more");
        }
        if self.requirepass.as_deref() == Some("") {
            return bad("requirepass must not be empty (leave it unset for no password)");
        }
        Ok(())
    }

    /// The protocol parser's limits.
    pub fn limits(&self) -> Limits {
        Limits {
            proto_max_bulk_len: self.proto_max_bulk_len,
            multibulk_len_max: self.proto_max_multibulk_len,
            inline_max_bytes: frame::PROTO_INLINE_MAX_SIZE,
        }
    }

    /// Serving threads: `threads`, or one per core when it is 0.
    pub fn threads(&self) -> usize {
        if self.threads > 0 {
            self.threads
        } else {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        }
    }
}

/// The settings of a service that reads nothing beyond [`Config`]'s.
#[derive(Deserialize)]
struct NoMore {}

/// Reads a TOML file's settings into the service's [`Config`] and `T`, the settings of what
/// serves ([`from_toml_with`]); the error names the file.
pub fn from_file_with<T: DeserializeOwned>(path: &Path) -> Result<(Config, T), ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigError(format!("cannot read {}: {e}", path.display())))?;
    let (mut config, more) =
        from_toml_with(&text).map_err(|e| ConfigError(format!("{}: {}", path.display(), e.0)))?;
    config.config_file = Some(path.to_path_buf());
    Ok((config, more))
}

/// Writes `text` to `path` atomically (a temporary file beside it, synced, renamed over it,
/// the directory synced): the settings file (CONFIG REWRITE) and the aclfile (ACL SAVE).
pub fn write_atomically(path: &Path, text: &str) -> Result<(), String> {
    use std::io::Write;
    let at = |e: std::io::Error| format!("{}: {e}", path.display());
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp).map_err(at)?;
    f.write_all(text.as_bytes()).map_err(at)?;
    f.sync_all().map_err(at)?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(at)?;
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(at)?;
    Ok(())
}

/// Reads the settings of `text` into the service's [`Config`] and `T` (each reads the keys it
/// knows and keeps its defaults for the rest). A key that neither knows is refused, named:
/// a misspelt setting must not be silently ignored. (Each is read on its own, not flattened
/// into one: serde cannot refuse unknown keys across a flattened struct.)
pub fn from_toml_with<T: DeserializeOwned>(text: &str) -> Result<(Config, T), ConfigError> {
    let mut ignored_by_service = BTreeSet::new();
    let config: Config = read_noting_ignored(text, &mut ignored_by_service)?;
    let mut ignored_by_more = BTreeSet::new();
    let more: T = read_noting_ignored(text, &mut ignored_by_more)?;
    match ignored_by_service.intersection(&ignored_by_more).next() {
        Some(key) => Err(ConfigError(format!("unknown setting `{key}`"))),
        None => Ok((config, more)),
    }
}

/// Deserializes `text`, adding the top-level keys it ignored to `ignored`.
fn read_noting_ignored<T: DeserializeOwned>(
    text: &str,
    ignored: &mut BTreeSet<String>,
) -> Result<T, ConfigError> {
    let de = toml::Deserializer::parse(text).map_err(|e| ConfigError(e.to_string()))?;
    serde_ignored::deserialize(de, |path| {
        // A key inside a known table (`[rename-command]`) is that table's to judge.
        if let serde_ignored::Path::Map { parent, key } = path {
            if matches!(parent, serde_ignored::Path::Root) {
                ignored.insert(key);
            }
        }
    })
    .map_err(|e| ConfigError(e.to_string()))
}

pub fn parse_str<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: FromStr,
    T::Err: std::fmt::Display,
{
    let s = String::deserialize(d)?;
    s.parse().map_err(serde::de::Error::custom)
}

/// Redis's `yes` / `no`, or a TOML boolean.
pub fn yes_no<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum B {
        Bool(bool),
        Str(String),
    }
    match B::deserialize(d)? {
        B::Bool(b) => Ok(b),
        B::Str(s) => parse_yes_no(&s).map_err(serde::de::Error::custom),
    }
}

pub fn parse_yes_no(s: &str) -> Result<bool, String> {
    match s.to_ascii_lowercase().as_str() {
        "yes" => Ok(true),
        "no" => Ok(false),
        _ => Err(format!("expected yes or no, got {s:?}")),
    }
}

/// A byte count as an integer or a string with Redis's units (`512mb`, `1gb`, `64k`).
pub fn byte_size<'de, D: Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum N {
        Int(u64),
        Str(String),
    }
    match N::deserialize(d)? {
        N::Int(n) => usize::try_from(n).map_err(serde::de::Error::custom),
        N::Str(s) => parse_byte_size(&s).map_err(serde::de::Error::custom),
    }
}

/// Parses Redis's memory units: `k` = 1000, `kb` = 1024, likewise m/mb and g/gb.
pub fn parse_byte_size(s: &str) -> Result<usize, String> {
    let lower = s.trim().to_ascii_lowercase();
    let digits = lower.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit = &lower[digits.len()..];
    let mult: u64 = match unit {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1 << 10,
        "m" => 1_000_000,
        "mb" => 1 << 20,
        "g" => 1_000_000_000,
        "gb" => 1 << 30,
        _ => return Err(format!("unknown unit in {s:?} (use k, kb, m, mb, g or gb)")),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{s:?} is not a byte count"))?;
    n.checked_mul(mult)
        .and_then(|b| usize::try_from(b).ok())
        .ok_or_else(|| format!("{s:?} is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_redis_defaults() {
        let c = Config::default();
        assert_eq!(c.port, 7379);
        assert!(c.bind.is_loopback());
        assert_eq!(c.maxclients, 10_000);
        assert_eq!(c.proto_max_bulk_len, 512 << 20);
        assert_eq!(c.client_query_buffer_limit, 1 << 30);
        assert_eq!(c.client_output_buffer_total_limit, 4 << 30);
        c.validate().unwrap();
    }

    /// What only the service knows is read, what neither knows refused; a table's keys are
    /// its own to judge.
    #[test]
    fn a_key_neither_part_knows_is_refused() {
        #[derive(Debug, Deserialize, Default)]
        #[serde(default)]
        struct Node {
            dir: String,
        }
        let (c, node) = from_toml_with::<Node>(
            "dir = \"d\"\nmaxclients = 5\n[rename-command]\nFLUSHALL = \"\"\n",
        )
        .unwrap();
        assert_eq!((c.maxclients, node.dir.as_str()), (5, "d"));
        let e = from_toml_with::<Node>("dir = \"d\"\nmaxclientz = 5\n").unwrap_err();
        assert!(e.0.contains("maxclientz"), "{e}");
        let e = Config::from_toml("dir = \"d\"").unwrap_err();
        assert!(e.0.contains("dir"), "{e}");
        let e = Config::from_toml("[bogus]\na = 1\n").unwrap_err();
        assert!(e.0.contains("bogus"), "{e}");
    }

    #[test]
    fn byte_sizes_take_redis_units() {
        assert_eq!(parse_byte_size("1gb"), Ok(1 << 30));
        assert_eq!(parse_byte_size("64k"), Ok(64_000));
        assert!(parse_byte_size("12xb").is_err());
    }
}
