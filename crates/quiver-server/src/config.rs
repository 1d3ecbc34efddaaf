//! Server settings: a TOML file (`quiver serve --config`) whose keys use Redis's names
//! (`maxclients`, `proto-max-bulk-len`, `client-query-buffer-limit`, `requirepass`, ...), with
//! Redis's defaults, plus Quiver's own (`durability`, `backend`, `coalesce`, `max-vector-width`,
//! `max-multikey-width`).
//! Command-line flags override the file.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use quiver_store::log::format::{record_len, SEGMENT_HEADER_LEN};
use quiver_store::options::{KEY_LEN_MAX, SEGMENT_BYTES_MAX, SEGMENT_BYTES_MIN};
use quiver_store::DATABASES_MAX;
use quiver_store::{BackendKind, Durability, Options};
use serde::{Deserialize, Deserializer};

use crate::frame::{self, Limits};
use crate::names::{Renames, PEER_COMMANDS};
use crate::tls::AuthClients;

/// Default TCP port (Redis uses 6379; Quiver sits next to it so both can run side by side).
pub const DEFAULT_PORT: u16 = 7379;
/// Default data directory.
pub const DEFAULT_DIR: &str = "./quiver-data";
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
/// Fewest partitions of a store the server creates when `partitions` is 0 (the default: one
/// per server thread) in `os` and `none` durability. Each partition is its own log, so a
/// vector of writes costs one append per partition it touches: with 16 a pipelined run of 32
/// SETs made about 14 writes; with 4, pipelined SET and MSET-32 ran 16-28% faster on a 2-core
/// machine (docs/BENCHMARKS.md §12). But a partition is also the unit of parallel writing
/// (its lock serializes its writers) and of maintenance (an index resize or a checkpoint
/// works on one partition's index at a time): with one partition of 2M keys, SET ran 30%
/// slower than with 4 and a serving thread waited up to 0.5 s (§32). In `fsync` mode there
/// is no floor (see [`Config::partitions`]).
pub const PARTITIONS_MIN_DEFAULT: u32 = 4;
/// Default widest engine vector built from a pipelined run of single-key commands (the paper's
/// storage vector width R). One command with more keys (an MGET of 100) is a vector of its own.
pub const MAX_VECTOR_WIDTH_DEFAULT: usize = 64;
/// Default widest engine read or delete call for one command: an MGET, EXISTS or DEL with more
/// keys is split into several calls (an MGET's reads are then checked unchanged before it is
/// answered, so its reply is still one state of the store).
pub const MAX_MULTIKEY_WIDTH_DEFAULT: usize = 4096;
/// Most keys of one engine call of any kind. A compound batch (an MSET, an EXEC) cannot be
/// split without losing its atomicity, so this bounds them: a wider one is refused whole.
pub const ENGINE_VECTOR_WIDTH_MAX: usize = 1 << 20;

/// Redis's default `databases`: real applications and client test suites SELECT 0..15.
pub const DATABASES_DEFAULT: u32 = 16;

/// Whether single GETs from different connections are coalesced into one engine vector.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Coalesce {
    /// Each connection's pipelined run is its own vector (the direct pattern).
    #[default]
    Off,
    /// GETs that arrive while the engine is busy wait in one queue and go together; the width
    /// follows the load, up to `max-vector-width` (the paper's intermediate queue).
    Adaptive,
}

impl FromStr for Coalesce {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "off" => Ok(Coalesce::Off),
            "adaptive" => Ok(Coalesce::Adaptive),
            _ => Err(format!(
                "unknown coalesce mode {s:?} (expected off or adaptive)"
            )),
        }
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

/// Every server setting. Field names map to kebab-case TOML keys.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields, default)]
pub struct Config {
    /// Address to listen on (one address).
    #[serde(deserialize_with = "parse_str")]
    pub bind: IpAddr,
    /// TCP port; 0 picks a free one (the server prints it).
    pub port: u16,
    /// Also listen on this Unix socket.
    pub unixsocket: Option<PathBuf>,
    /// Data directory.
    pub dir: PathBuf,
    #[serde(deserialize_with = "parse_str")]
    pub durability: Durability,
    #[serde(deserialize_with = "parse_str")]
    pub backend: BackendKind,
    /// Partitions of a new store (an existing store keeps its own); 0: one per server thread,
    /// at least `PARTITIONS_MIN_DEFAULT` outside `fsync` mode ([`Config::partitions`]).
    pub partitions: u32,
    /// Segment file size of a new store (an existing store keeps its own): a power of two,
    /// and the unit compaction frees space in. A value of `proto-max-bulk-len` must fit.
    #[serde(deserialize_with = "byte_size")]
    pub segment_size: usize,
    /// Disk space held in reserve (the store's `RESERVE` file) so that deletes and
    /// compaction still run on a full disk; capped at 1/32 of the file system; 0: none.
    #[serde(deserialize_with = "byte_size")]
    pub disk_reserve: usize,
    /// The share of a core background compaction takes while it is not urgent (the store's
    /// `compact_cpu_share`): the serving threads on that core keep the rest. 1: unpaced.
    pub compaction_cpu_share: f64,
    /// Worker threads (0 = one per core).
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
    #[serde(deserialize_with = "byte_size")]
    pub client_output_buffer_limit: usize,
    /// Bound on the sum of all connections' buffered replies (0 = no limit).
    #[serde(deserialize_with = "byte_size")]
    pub client_output_buffer_total_limit: usize,
    #[serde(deserialize_with = "parse_str")]
    pub coalesce: Coalesce,
    pub max_vector_width: usize,
    pub max_multikey_width: usize,
    /// Serve Prometheus metrics over HTTP here (off when unset).
    pub metrics_addr: Option<SocketAddr>,
    #[serde(deserialize_with = "parse_str")]
    pub log_format: LogFormat,
    /// Cluster mode (Redis's `cluster-enabled`): serve the hash slots the cluster's topology
    /// in etcd gives this node, and redirect the rest.
    #[serde(deserialize_with = "yes_no")]
    pub cluster_enabled: bool,
    /// etcd endpoints of the cluster (comma-separated URLs), in cluster mode.
    pub cluster_etcd: Option<String>,
    /// Prefix of the cluster's keys in etcd.
    pub cluster_etcd_prefix: String,
    /// This node's id (kept in the data directory's `CLUSTER` file; a new one when unset).
    pub cluster_node_id: Option<String>,
    /// `host:port` clients are sent to (MOVED, CLUSTER SLOTS); the bound address when unset.
    pub cluster_announce: Option<String>,
    /// Milliseconds a node may go without renewing its lease in etcd before the manager takes
    /// it out of its chains (Redis's `cluster-node-timeout`; etcd leases are whole seconds,
    /// at least 2).
    pub cluster_node_timeout: u64,
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
}

impl Default for Config {
    fn default() -> Self {
        Config {
            bind: IpAddr::from([127, 0, 0, 1]),
            port: DEFAULT_PORT,
            unixsocket: None,
            dir: PathBuf::from(DEFAULT_DIR),
            durability: Durability::Os,
            backend: BackendKind::Mmap,
            partitions: 0,
            segment_size: Options::default().segment_bytes as usize,
            disk_reserve: Options::default().disk_reserve_bytes as usize,
            compaction_cpu_share: Options::default().compact_cpu_share,
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
            coalesce: Coalesce::Off,
            max_vector_width: MAX_VECTOR_WIDTH_DEFAULT,
            max_multikey_width: MAX_MULTIKEY_WIDTH_DEFAULT,
            metrics_addr: None,
            log_format: LogFormat::Text,
            cluster_enabled: false,
            cluster_etcd: None,
            cluster_etcd_prefix: quiver_cluster::meta::DEFAULT_PREFIX.to_string(),
            cluster_node_id: None,
            cluster_announce: None,
            cluster_node_timeout: CLUSTER_NODE_TIMEOUT_DEFAULT,
            tls_port: None,
            tls_cert_file: None,
            tls_key_file: None,
            tls_ca_cert_file: None,
            tls_auth_clients: AuthClients::Yes,
            aclfile: None,
            rename_command: Renames::default(),
        }
    }
}

/// A configuration that cannot be used; the message says which setting and why.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

/// Default of `cluster-node-timeout`, in milliseconds (Redis's is 15 s; a shorter one fails
/// over sooner, a longer one survives longer stalls).
pub const CLUSTER_NODE_TIMEOUT_DEFAULT: u64 = 5000;

impl Config {
    /// `cluster-node-timeout` as the TTL of the node's lease.
    pub fn cluster_node_timeout(&self) -> Duration {
        Duration::from_millis(self.cluster_node_timeout)
    }

    /// Reads a TOML file; keys it does not set keep their defaults.
    pub fn from_file(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError(format!("cannot read {}: {e}", path.display())))?;
        Config::from_toml(&text).map_err(|e| ConfigError(format!("{}: {}", path.display(), e.0)))
    }

    pub fn from_toml(text: &str) -> Result<Config, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError(e.to_string()))
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
        let bad = |m: String| Err(ConfigError(m));
        if self.cluster_enabled {
            if self
                .cluster_etcd
                .as_deref()
                .is_none_or(|e| e.trim().is_empty())
            {
                return bad("cluster-enabled needs cluster-etcd (the etcd endpoints)".into());
            }
            if let Some(id) = &self.cluster_node_id {
                if !quiver_cluster::topology::valid_node_id(id) {
                    return bad(format!("cluster-node-id {id:?}: 1 to 40 of [0-9A-Za-z_-]"));
                }
            }
            if let Some(a) = &self.cluster_announce {
                if quiver_resp::redirect::split_addr(a).is_none() {
                    return bad(format!("cluster-announce {a:?}: host:port"));
                }
            } else if self.bind.is_unspecified() {
                return bad(format!(
                    "bind {} in cluster mode needs cluster-announce (the host:port clients reach)",
                    self.bind
                ));
            }
        }
        self.tls().validate().map_err(ConfigError)?;
        if self.cluster_enabled {
            if let Some(cmd) = PEER_COMMANDS.iter().find(|&&c| {
                self.rename_command
                    .lookup(c.spec().name.as_bytes())
                    .is_none()
            }) {
                return bad(format!(
                    "rename-command {:?}: the cluster's nodes and routers send it to each other by \
                     this name",
                    cmd.spec().name
                ));
            }
        }
        if self.cluster_node_timeout < quiver_cluster::meta::LEASE_TTL_MIN.as_millis() as u64 {
            return bad(format!(
                "cluster-node-timeout {}: at least {} ms (etcd's shortest lease)",
                self.cluster_node_timeout,
                quiver_cluster::meta::LEASE_TTL_MIN.as_millis()
            ));
        }
        if self.maxclients == 0 {
            return bad("maxclients must be at least 1".into());
        }
        if !(1..=DATABASES_MAX).contains(&self.databases) {
            return bad(format!("databases must be between 1 and {DATABASES_MAX}"));
        }
        if self.max_vector_width == 0 {
            return bad("max-vector-width must be at least 1".into());
        }
        if !(1..=ENGINE_VECTOR_WIDTH_MAX).contains(&self.max_multikey_width) {
            return bad(format!(
                "max-multikey-width must be between 1 and {ENGINE_VECTOR_WIDTH_MAX}"
            ));
        }
        if self.proto_max_bulk_len < 1024 * 1024 {
            // Redis's own floor for this setting.
            return bad("proto-max-bulk-len must be at least 1mb".into());
        }
        if self.proto_max_multibulk_len == 0 {
            return bad("proto-max-multibulk-len must be at least 1".into());
        }
        if self.client_query_buffer_limit < 1024 * 1024 {
            // Redis's own floor for this setting.
            return bad("client-query-buffer-limit must be at least 1mb".into());
        }
        if !(self.compaction_cpu_share > 0.0 && self.compaction_cpu_share <= 1.0) {
            return bad(format!(
                "compaction-cpu-share must be above 0 and at most 1 (got {})",
                self.compaction_cpu_share
            ));
        }
        if self.requirepass.as_deref() == Some("") {
            return bad("requirepass must not be empty (leave it unset for no password)".into());
        }
        let segment = self.segment_size as u64;
        if !segment.is_power_of_two() || !(SEGMENT_BYTES_MIN..=SEGMENT_BYTES_MAX).contains(&segment)
        {
            return bad(format!(
                "segment-size must be a power of two from {SEGMENT_BYTES_MIN} to {SEGMENT_BYTES_MAX} bytes"
            ));
        }
        let record_max = record_len(KEY_LEN_MAX, self.proto_max_bulk_len) + SEGMENT_HEADER_LEN;
        if record_max as u64 > segment {
            return bad(format!(
                "segment-size {segment} cannot hold a value of proto-max-bulk-len {} (a record \
                 must fit in one segment: raise segment-size or lower proto-max-bulk-len)",
                self.proto_max_bulk_len
            ));
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

    /// The engine's options for this server.
    pub fn store_options(&self) -> Options {
        Options {
            partitions: self.partitions(),
            segment_bytes: self.segment_size as u64,
            disk_reserve_bytes: self.disk_reserve as u64,
            compact_cpu_share: self.compaction_cpu_share,
            value_len_max: self.proto_max_bulk_len,
            durability: self.durability,
            backend: self.backend,
            databases: self.databases,
            // Reads and deletes come split at `max-multikey-width`; compound batches (MSET,
            // EXEC) cannot be split, and this bounds them.
            vector_width_max: ENGINE_VECTOR_WIDTH_MAX,
            ..Options::default()
        }
    }

    /// Partitions of a new store: `partitions`, or one per server thread when it is 0 — at
    /// least `PARTITIONS_MIN_DEFAULT`, except in `fsync` mode: there every partition a round
    /// of writes touches is one more write to the disk and fdatasync before the replies
    /// (four files' fdatasyncs at once took 1.6-2.4 times one's here), and a batch over
    /// one partition is one part, synced once (§32: one server thread, one partition against
    /// four, SET 2.1-2.7x, MSET-32 1.7-2.8x).
    pub fn partitions(&self) -> u32 {
        let threads = self.threads() as u32;
        match self.partitions {
            0 if self.durability == Durability::Fsync => threads,
            0 => threads.max(PARTITIONS_MIN_DEFAULT),
            n => n,
        }
    }

    pub fn threads(&self) -> usize {
        if self.threads > 0 {
            self.threads
        } else {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        }
    }
}

fn parse_str<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: FromStr,
    T::Err: std::fmt::Display,
{
    let s = String::deserialize(d)?;
    s.parse().map_err(serde::de::Error::custom)
}

/// Redis's `yes` / `no`, or a TOML boolean.
fn yes_no<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
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
fn byte_size<'de, D: Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
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

    #[test]
    fn partitions_follow_threads_with_a_floor_outside_fsync_mode() {
        let with = |threads, durability, partitions| Config {
            threads,
            durability,
            partitions,
            ..Config::default()
        };
        assert_eq!(
            with(1, Durability::Os, 0).partitions(),
            PARTITIONS_MIN_DEFAULT
        );
        assert_eq!(with(8, Durability::None, 0).partitions(), 8);
        assert_eq!(with(1, Durability::Fsync, 0).partitions(), 1);
        assert_eq!(with(2, Durability::Fsync, 0).partitions(), 2);
        assert_eq!(with(1, Durability::Fsync, 16).partitions(), 16);
        assert_eq!(with(2, Durability::Os, 3).partitions(), 3);
    }

    #[test]
    fn toml_with_redis_names_and_units() {
        let c = Config::from_toml(
            "port = 0\nmaxclients = 5\nproto-max-bulk-len = \"2mb\"\nprotected-mode = \"no\"\n\
             bind = \"0.0.0.0\"\ndurability = \"fsync\"\ncoalesce = \"adaptive\"\n\
             client-output-buffer-total-limit = \"64mb\"\n",
        )
        .unwrap();
        assert_eq!(c.port, 0);
        assert_eq!(c.maxclients, 5);
        assert_eq!(c.proto_max_bulk_len, 2 << 20);
        assert!(!c.protected_mode);
        assert_eq!(c.durability, Durability::Fsync);
        assert_eq!(c.coalesce, Coalesce::Adaptive);
        assert_eq!(c.client_output_buffer_total_limit, 64 << 20);
        c.validate().unwrap();
        let c = Config::from_toml("client-output-buffer-total-limit = 0").unwrap();
        assert_eq!(c.client_output_buffer_total_limit, 0, "0: no limit");
        let c = Config::from_toml("compaction-cpu-share = 0.5").unwrap();
        c.validate().unwrap();
        assert_eq!(c.store_options().compact_cpu_share, 0.5);
    }

    #[test]
    fn the_readme_example_is_valid() {
        let readme = include_str!("../../../README.md");
        let start = readme.find("```toml\n").expect("README has a toml block") + 8;
        let end = start + readme[start..].find("```").expect("closed block");
        let c = Config::from_toml(&readme[start..end]).unwrap();
        assert_eq!(c, Config::default());
    }

    #[test]
    fn bad_settings_are_named() {
        let e = Config::from_toml("maxclientz = 5").unwrap_err();
        assert!(e.0.contains("maxclientz"), "{e}");
        let e = Config::from_toml("durability = \"sometimes\"").unwrap_err();
        assert!(e.0.contains("sometimes"), "{e}");
        // Protected mode is decided per connection (`server`), not at start.
        let c = Config::from_toml("bind = \"0.0.0.0\"").unwrap();
        c.validate().unwrap();
        for share in ["0", "1.5", "-0.25"] {
            let c = Config::from_toml(&format!("compaction-cpu-share = {share}")).unwrap();
            let e = c.validate().unwrap_err();
            assert!(e.0.contains("compaction-cpu-share"), "{e}");
        }
        assert_eq!(parse_byte_size("1gb"), Ok(1 << 30));
        assert_eq!(parse_byte_size("64k"), Ok(64_000));
        assert!(parse_byte_size("12xb").is_err());
    }
}
