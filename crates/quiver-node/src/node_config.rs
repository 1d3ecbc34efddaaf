//! A node's own settings (`quiver serve`): its store (data directory, durability, partitions,
//! segments, compaction), how its runs become engine vectors, and cluster mode. They are
//! keys of the same TOML file as the service's settings (`config`), read beside them
//! ([`ServeConfig::from_file`]).

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use quiver_store::large_hash::USER_DATABASES_MAX;
use quiver_store::log::format::{record_len, SEGMENT_HEADER_LEN};
use quiver_store::options::{KEY_LEN_MAX, SEGMENT_BYTES_MAX, SEGMENT_BYTES_MIN};
use quiver_store::{BackendKind, Durability, Options};
use serde::Deserialize;

use quiver_service::config::{byte_size, parse_str, yes_no, Config, ConfigError};
use quiver_service::names::PEER_COMMANDS;

/// Default data directory.
pub const DEFAULT_DIR: &str = "./quiver-data";
/// Fewest partitions of a store the server creates when `partitions` is 0 (the default: one
/// per server thread) in `os` and `none` durability with two serving threads or more. Each
/// partition is its own log, so a vector of writes costs one append per partition it touches:
/// with 16 a pipelined run of 32 SETs made about 14 writes; with 4, pipelined SET and MSET-32
/// ran 16-28% faster on a 2-core machine (docs/BENCHMARKS.md §12). But a partition is also the
/// unit of parallel writing (its lock serializes its writers), so threads get at least this
/// many. One serving thread has no other writer to wait for, and gets one partition: an MSET
/// is then one part and no commit record, a pipelined run of SETs one append (§51: SET
/// 2-16% and MSET-32 9-21% faster at 1-2M keys). The price §32 measured for one partition,
/// writers waiting up to 0.5 s while its index of 2M keys grew, went with the index spill and
/// the resize's catch-up rounds (`resize`): loading 2M keys into one partition, no serving run
/// took over 8.5 ms (§51). In `fsync` mode there is no floor (see [`NodeConfig::partitions`]).
pub const PARTITIONS_MIN_DEFAULT: u32 = 4;
/// Serving threads per partition of a new store in `fsync` mode when `partitions` is 0 (one
/// partition up to four threads). There the disk bounds the writes, not the cores: every
/// partition a round of writes touches is one more fdatasync before the replies (four files'
/// fdatasyncs at once took 1.6-2.4 times one's here), and a batch over several partitions
/// syncs its parts before its commit record, holding their locks, where a batch over one is
/// one part, synced once (§32: one thread, one partition against four, SET 2.1-2.7x, MSET-32
/// 1.7-2.8x). At two threads one partition instead of two: an MSET batch held its lock 126 µs
/// instead of 711, and MSET-32 ran 1.7-1.9x, SET 1.3x, MGET-32/MSET-32 50/50 2.2-2.4x (§47).
/// But a partition's writers hold its readers, and its lock is every thread's: on many cores
/// writes still spread over a few (the 16-core grid has not measured `fsync` yet).
pub const FSYNC_THREADS_PER_PARTITION: u32 = 4;
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
/// Default of `cluster-node-timeout`, in milliseconds (Redis's is 15 s; a shorter one fails
/// over sooner, a longer one survives longer stalls).
pub const CLUSTER_NODE_TIMEOUT_DEFAULT: u64 = 5000;

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

impl std::fmt::Display for Coalesce {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Coalesce::Off => "off",
            Coalesce::Adaptive => "adaptive",
        })
    }
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

/// A node's settings beyond the service's. Field names map to kebab-case TOML keys.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "kebab-case", default)]
pub struct NodeConfig {
    /// Data directory.
    pub dir: PathBuf,
    #[serde(deserialize_with = "parse_str")]
    pub durability: Durability,
    #[serde(deserialize_with = "parse_str")]
    pub backend: BackendKind,
    /// Partitions of a new store (an existing store keeps its own); 0: one per server thread,
    /// at least `PARTITIONS_MIN_DEFAULT` with several threads outside `fsync` mode
    /// ([`NodeConfig::partitions`]).
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
    /// `compact_cpu_share`; urgent, half a core or this if more): the serving threads on that
    /// core keep the rest. 1: unpaced.
    pub compaction_cpu_share: f64,
    /// Background compaction starts in a partition whose garbage ratio (dead records over
    /// records) passes this (the store's `compact_garbage_ratio`); 0: no background
    /// compaction.
    pub compaction_garbage_ratio: f64,
    #[serde(deserialize_with = "parse_str")]
    pub coalesce: Coalesce,
    /// Widest engine vector built from a pipelined run of single-key commands.
    pub max_vector_width: usize,
    /// Widest engine read or delete call for one command (a wider one is split).
    pub max_multikey_width: usize,
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
}

impl Default for NodeConfig {
    fn default() -> Self {
        NodeConfig {
            dir: PathBuf::from(DEFAULT_DIR),
            durability: Durability::Os,
            backend: BackendKind::Mmap,
            partitions: 0,
            segment_size: Options::default().segment_bytes as usize,
            disk_reserve: Options::default().disk_reserve_bytes as usize,
            compaction_cpu_share: Options::default().compact_cpu_share,
            compaction_garbage_ratio: Options::default().compact_garbage_ratio,
            coalesce: Coalesce::Off,
            max_vector_width: MAX_VECTOR_WIDTH_DEFAULT,
            max_multikey_width: MAX_MULTIKEY_WIDTH_DEFAULT,
            cluster_enabled: false,
            cluster_etcd: None,
            cluster_etcd_prefix: quiver_cluster::meta::DEFAULT_PREFIX.to_string(),
            cluster_node_id: None,
            cluster_announce: None,
            cluster_node_timeout: CLUSTER_NODE_TIMEOUT_DEFAULT,
        }
    }
}

impl NodeConfig {
    /// The node's settings CONFIG GET reports (beside the service's), by Redis name.
    pub fn values(&self) -> Vec<(&'static str, String)> {
        vec![
            ("dir", self.dir.display().to_string()),
            ("durability", self.durability.to_string()),
            ("segment-size", self.segment_size.to_string()),
            ("disk-reserve", self.disk_reserve.to_string()),
            (
                "compaction-cpu-share",
                self.compaction_cpu_share.to_string(),
            ),
            (
                "compaction-garbage-ratio",
                self.compaction_garbage_ratio.to_string(),
            ),
            ("backend", self.backend.to_string()),
            ("coalesce", self.coalesce.to_string()),
            ("max-vector-width", self.max_vector_width.to_string()),
            ("max-multikey-width", self.max_multikey_width.to_string()),
        ]
    }

    /// `cluster-node-timeout` as the TTL of the node's lease.
    pub fn cluster_node_timeout(&self) -> Duration {
        Duration::from_millis(self.cluster_node_timeout)
    }

    /// The engine's options for this node, serving with `service`'s settings.
    pub fn store_options(&self, service: &Config) -> Options {
        Options {
            partitions: self.partitions(service),
            segment_bytes: self.segment_size as u64,
            disk_reserve_bytes: self.disk_reserve as u64,
            compact_cpu_share: self.compaction_cpu_share,
            compact_garbage_ratio: self.compaction_garbage_ratio,
            value_len_max: service.proto_max_bulk_len,
            durability: self.durability,
            backend: self.backend,
            databases: service.databases,
            // Reads and deletes come split at `max-multikey-width`; compound batches (MSET,
            // EXEC) cannot be split, and this bounds them.
            vector_width_max: ENGINE_VECTOR_WIDTH_MAX,
            ..Options::default()
        }
    }

    /// Partitions of a new store: `partitions`, or when it is 0 one per serving thread — at
    /// least `PARTITIONS_MIN_DEFAULT` with two threads or more — except in `fsync` mode, one
    /// per `FSYNC_THREADS_PER_PARTITION` threads (each constant says why).
    pub fn partitions(&self, service: &Config) -> u32 {
        let threads = service.threads() as u32;
        match self.partitions {
            0 if self.durability == Durability::Fsync => {
                threads.div_ceil(FSYNC_THREADS_PER_PARTITION)
            }
            0 if threads <= 1 => 1,
            0 => threads.max(PARTITIONS_MIN_DEFAULT),
            n => n,
        }
    }

    /// Checks the node's settings, against each other and against `service`'s.
    pub fn validate(&self, service: &Config) -> Result<(), ConfigError> {
        let bad = |m: String| Err(ConfigError(m));
        self.validate_cluster(service)?;
        // The last databases hold large hashes' anchors and buckets (`large_hash`).
        if !(1..=USER_DATABASES_MAX).contains(&service.databases) {
            return bad(format!(
                "databases must be between 1 and {USER_DATABASES_MAX}"
            ));
        }
        if self.max_vector_width == 0 {
            return bad("max-vector-width must be at least 1".into());
        }
        if !(1..=ENGINE_VECTOR_WIDTH_MAX).contains(&self.max_multikey_width) {
            return bad(format!(
                "max-multikey-width must be between 1 and {ENGINE_VECTOR_WIDTH_MAX}"
            ));
        }
        if !(self.compaction_cpu_share > 0.0 && self.compaction_cpu_share <= 1.0) {
            return bad(format!(
                "compaction-cpu-share must be above 0 and at most 1 (got {})",
                self.compaction_cpu_share
            ));
        }
        if !(0.0..1.0).contains(&self.compaction_garbage_ratio) {
            return bad(format!(
                "compaction-garbage-ratio must be at least 0 and below 1 (got {})",
                self.compaction_garbage_ratio
            ));
        }
        let segment = self.segment_size as u64;
        if !segment.is_power_of_two() || !(SEGMENT_BYTES_MIN..=SEGMENT_BYTES_MAX).contains(&segment)
        {
            return bad(format!(
                "segment-size must be a power of two from {SEGMENT_BYTES_MIN} to {SEGMENT_BYTES_MAX} bytes"
            ));
        }
        let record_max = record_len(KEY_LEN_MAX, service.proto_max_bulk_len) + SEGMENT_HEADER_LEN;
        if record_max as u64 > segment {
            return bad(format!(
                "segment-size {segment} cannot hold a value of proto-max-bulk-len {} (a record \
                 must fit in one segment: raise segment-size or lower proto-max-bulk-len)",
                service.proto_max_bulk_len
            ));
        }
        Ok(())
    }

    /// The cluster settings: what cluster mode needs, and commands the cluster's peers send
    /// each other left under their names.
    fn validate_cluster(&self, service: &Config) -> Result<(), ConfigError> {
        let bad = |m: String| Err(ConfigError(m));
        if self.cluster_node_timeout < quiver_cluster::meta::LEASE_TTL_MIN.as_millis() as u64 {
            return bad(format!(
                "cluster-node-timeout {}: at least {} ms (etcd's shortest lease)",
                self.cluster_node_timeout,
                quiver_cluster::meta::LEASE_TTL_MIN.as_millis()
            ));
        }
        if !self.cluster_enabled {
            return Ok(());
        }
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
        } else if service.bind.is_unspecified() {
            return bad(format!(
                "bind {} in cluster mode needs cluster-announce (the host:port clients reach)",
                service.bind
            ));
        }
        if let Some(cmd) = PEER_COMMANDS.iter().find(|&&c| {
            service
                .rename_command
                .lookup(c.spec().name.as_bytes())
                .is_none()
        }) {
            return bad(format!(
                "rename-command {:?}: the cluster's nodes and routers send it to each other by \
                 this name",
                cmd.spec().name
            ));
        }
        Ok(())
    }
}

/// Everything `quiver serve` is configured with: the service's settings and the node's, from
/// one file.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServeConfig {
    pub service: Config,
    pub node: NodeConfig,
}

impl ServeConfig {
    /// Reads a TOML file; keys it does not set keep their defaults, a key neither the service
    /// nor the node knows is refused.
    pub fn from_file(path: &Path) -> Result<ServeConfig, ConfigError> {
        let (service, node) = quiver_service::config::from_file_with(path)?;
        Ok(ServeConfig { service, node })
    }

    /// [`ServeConfig::from_file`] from the file's text.
    pub fn from_toml(text: &str) -> Result<ServeConfig, ConfigError> {
        let (service, node) = quiver_service::config::from_toml_with(text)?;
        Ok(ServeConfig { service, node })
    }

    /// Checks the settings; called before anything is opened.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.service.validate()?;
        self.node.validate(&self.service)
    }

    /// The engine's options.
    pub fn store_options(&self) -> Options {
        self.node.store_options(&self.service)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quiver_service::config::parse_byte_size;

    #[test]
    fn defaults_are_valid() {
        ServeConfig::default().validate().unwrap();
    }

    #[test]
    fn partitions_follow_threads_with_a_floor_for_several_outside_fsync_mode_and_a_share_in_it() {
        let with = |threads, durability, partitions| {
            let service = Config {
                threads,
                ..Config::default()
            };
            let node = NodeConfig {
                durability,
                partitions,
                ..NodeConfig::default()
            };
            node.partitions(&service)
        };
        assert_eq!(with(1, Durability::Os, 0), 1);
        assert_eq!(with(2, Durability::Os, 0), PARTITIONS_MIN_DEFAULT);
        assert_eq!(with(8, Durability::None, 0), 8);
        assert_eq!(with(1, Durability::Fsync, 0), 1);
        let per = FSYNC_THREADS_PER_PARTITION as usize;
        assert_eq!(with(per, Durability::Fsync, 0), 1);
        assert_eq!(with(per + 1, Durability::Fsync, 0), 2);
        assert_eq!(with(1, Durability::Fsync, 16), 16);
        assert_eq!(with(2, Durability::Os, 3), 3);
    }

    #[test]
    fn toml_with_redis_names_and_units() {
        let c = ServeConfig::from_toml(
            "port = 0\nmaxclients = 5\nproto-max-bulk-len = \"2mb\"\nprotected-mode = \"no\"\n\
             bind = \"0.0.0.0\"\ndurability = \"fsync\"\ncoalesce = \"adaptive\"\n\
             client-output-buffer-total-limit = \"64mb\"\n",
        )
        .unwrap();
        assert_eq!(c.service.port, 0);
        assert_eq!(c.service.maxclients, 5);
        assert_eq!(c.service.proto_max_bulk_len, 2 << 20);
        assert!(!c.service.protected_mode);
        assert_eq!(c.node.durability, Durability::Fsync);
        assert_eq!(c.node.coalesce, Coalesce::Adaptive);
        assert_eq!(c.service.client_output_buffer_total_limit, 64 << 20);
        c.validate().unwrap();
        let c = ServeConfig::from_toml("client-output-buffer-total-limit = 0").unwrap();
        assert_eq!(c.service.client_output_buffer_total_limit, 0, "0: no limit");
        let c = ServeConfig::from_toml("compaction-cpu-share = 0.5").unwrap();
        c.validate().unwrap();
        assert_eq!(c.store_options().compact_cpu_share, 0.5);
    }

    #[test]
    fn the_readme_example_is_valid() {
        let readme = include_str!("../../../README.md");
        let start = readme.find("```toml\n").expect("README has a toml block") + 8;
        let end = start + readme[start..].find("```").expect("closed block");
        let c = ServeConfig::from_toml(&readme[start..end]).unwrap();
        assert_eq!(c, ServeConfig::default());
    }

    #[test]
    fn bad_settings_are_named() {
        let e = ServeConfig::from_toml("maxclientz = 5").unwrap_err();
        assert!(e.0.contains("maxclientz"), "{e}");
        let e = ServeConfig::from_toml("durability = \"sometimes\"").unwrap_err();
        assert!(e.0.contains("sometimes"), "{e}");
        // Protected mode is decided per connection (`server`), not at start.
        let c = ServeConfig::from_toml("bind = \"0.0.0.0\"").unwrap();
        c.validate().unwrap();
        for share in ["0", "1.5", "-0.25"] {
            let c = ServeConfig::from_toml(&format!("compaction-cpu-share = {share}")).unwrap();
            let e = c.validate().unwrap_err();
            assert!(e.0.contains("compaction-cpu-share"), "{e}");
        }
        assert_eq!(parse_byte_size("1gb"), Ok(1 << 30));
        assert_eq!(parse_byte_size("64k"), Ok(64_000));
        assert!(parse_byte_size("12xb").is_err());
    }
}
