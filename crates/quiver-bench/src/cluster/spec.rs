//! What `bench cluster` is asked to do, and the limits every parameter is checked against
//! before a connection opens.

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::keys::check_key_params;
use crate::net::spec::{check_window, LABEL_LEN_MAX, REQUEST_BYTES_MAX, TAGS_MAX, VALUE_SIZE_MAX};

/// Widest multiget (Quiver's default vector limit, as for `bench net`).
pub const WIDTH_MAX: usize = 65_536;
/// Most client threads: each holds its own cluster client (a connection per node), and on the
/// hosts this runs on they share a few cores with the servers.
pub const THREADS_MAX: usize = 256;
/// Most seeds and most server processes named.
pub const SEEDS_MAX: usize = 64;
pub const SERVER_PIDS_MAX: usize = 1024;
/// Pairs per `multi_set` of the load: wide enough that a node's share is a vector, small
/// enough that Redis's one-request-per-slot fallback (about one pair per request at 16384
/// slots) stays a pipeline of modest size.
pub const LOAD_BATCH_KEYS: usize = 1024;

/// What each thread's operations are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `MGET` of `width` random keys, every value checked.
    MultiGet,
    /// `MSET` of `width` random keys, each to its own value (the data set stays the one the
    /// load wrote, so reads after it still check).
    MultiSet,
}

impl Op {
    pub fn name(self) -> &'static str {
        match self {
            Op::MultiGet => "mget",
            Op::MultiSet => "mset",
        }
    }

    /// `mget` or `mset`.
    pub fn parse(s: &str) -> Option<Op> {
        match s {
            "mget" => Some(Op::MultiGet),
            "mset" => Some(Op::MultiSet),
            _ => None,
        }
    }
}

/// A `bench cluster` invocation.
#[derive(Clone, Debug)]
pub struct ClusterConfig {
    /// `host:port` of nodes to read the slot table from.
    pub seeds: Vec<String>,
    /// `host:port` of a `quiver router`: each thread's multigets go to it on one plain
    /// connection (the router splits them per back-end) instead of through a cluster client.
    /// The seeds still give the slot table (which node serves which keys, for `--server-pids`).
    pub router: Option<String>,
    /// The router's process id: its CPU seconds over the window, counted apart from the nodes'.
    pub router_pid: Option<u32>,
    /// Keys `0..keys` are read (and written by `load`).
    pub keys: u64,
    pub key_size: usize,
    pub value_size: usize,
    /// Keys per multiget (or multiset), each index drawn uniformly from `0..keys` (with
    /// replacement).
    pub width: usize,
    pub op: Op,
    /// Cluster clients read multigets from replicas too (quiver-client's
    /// `read_from_replicas`: the fewest nodes that hold the keys).
    pub read_from_replicas: bool,
    /// Client threads, each with its own `ClusterClient` (or its own connection to the
    /// router), each one multiget at a time.
    pub threads: usize,
    pub warmup_s: f64,
    pub duration_s: f64,
    /// Write keys `0..keys` first (`multi_set` in batches of [`LOAD_BATCH_KEYS`]).
    pub load: bool,
    /// Load, then measure nothing.
    pub load_only: bool,
    /// The servers' process ids: their CPU seconds over the window, each matched to the node
    /// it serves by its listening port.
    pub server_pids: Vec<u32>,
    /// The system's name in the record (e.g. `quiver`, `redis-cluster`).
    pub label: String,
    pub tags: BTreeMap<String, String>,
    /// Seed of the key choices (each thread derives its own from it).
    pub seed: u64,
}

impl ClusterConfig {
    /// The command line's defaults, against `seeds`.
    pub fn new(seeds: Vec<String>) -> ClusterConfig {
        ClusterConfig {
            seeds,
            router: None,
            router_pid: None,
            keys: 1_000_000,
            key_size: 16,
            value_size: 32,
            width: 32,
            op: Op::MultiGet,
            read_from_replicas: false,
            threads: 4,
            warmup_s: 1.0,
            duration_s: 10.0,
            load: false,
            load_only: false,
            server_pids: Vec::new(),
            label: "cluster".into(),
            tags: BTreeMap::new(),
            seed: 0x5eed,
        }
    }

    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::Invalid(m));
        if self.seeds.is_empty() || self.seeds.len() > SEEDS_MAX {
            return bad(format!("give 1..={SEEDS_MAX} seeds (host:port)"));
        }
        if let Some(s) = self.seeds.iter().find(|s| !looks_like_host_port(s)) {
            return bad(format!("seed {s:?} is not host:port"));
        }
        if let Some(r) = self.router.as_deref().filter(|r| !looks_like_host_port(r)) {
            return bad(format!("router {r:?} is not host:port"));
        }
        if let Some(pid) = self.router_pid {
            if self.router.is_none() {
                return bad("a router pid without a router (--router HOST:PORT)".into());
            }
            if pid == 0 {
                return bad("router pid 0 is not a process".into());
            }
            if self.server_pids.contains(&pid) {
                return bad(format!(
                    "pid {pid} is given as a server and as the router: the router's CPU is \
                     counted apart"
                ));
            }
        }
        if self.keys == 0 {
            return bad("--keys must be at least 1".into());
        }
        check_key_params(self.keys, self.key_size)?;
        if self.value_size > VALUE_SIZE_MAX {
            return bad(format!(
                "value size {} exceeds {VALUE_SIZE_MAX} bytes",
                self.value_size
            ));
        }
        if !(1..=WIDTH_MAX).contains(&self.width) {
            return bad(format!("width {} outside 1..={WIDTH_MAX}", self.width));
        }
        // The load's batches and a multiget's reply are this large at most.
        let pair = self.key_size + self.value_size + 32;
        if LOAD_BATCH_KEYS.max(self.width) * pair > REQUEST_BYTES_MAX {
            return bad(format!(
                "{} pairs of {} + {} bytes exceed {REQUEST_BYTES_MAX} bytes in one call",
                LOAD_BATCH_KEYS.max(self.width),
                self.key_size,
                self.value_size
            ));
        }
        if !(1..=THREADS_MAX).contains(&self.threads) {
            return bad(format!(
                "threads {} outside 1..={THREADS_MAX}",
                self.threads
            ));
        }
        check_window(self.warmup_s, self.duration_s)?;
        if self.server_pids.len() > SERVER_PIDS_MAX {
            return bad(format!("at most {SERVER_PIDS_MAX} server pids"));
        }
        if self.server_pids.contains(&0) {
            return bad("server pid 0 is not a process".into());
        }
        let mut pids = self.server_pids.clone();
        pids.sort_unstable();
        if let Some(w) = pids.windows(2).find(|w| w[0] == w[1]) {
            return bad(format!("server pid {} given twice", w[0]));
        }
        if self.label.is_empty() || self.label.len() > LABEL_LEN_MAX {
            return bad(format!("the label must have 1..={LABEL_LEN_MAX} bytes"));
        }
        if self.tags.len() > TAGS_MAX {
            return bad(format!("at most {TAGS_MAX} tags"));
        }
        if self
            .tags
            .iter()
            .any(|(k, v)| k.len() > LABEL_LEN_MAX || v.len() > LABEL_LEN_MAX)
        {
            return bad(format!(
                "a tag's key or value is longer than {LABEL_LEN_MAX} bytes"
            ));
        }
        Ok(())
    }
}

/// `host:port` with a non-empty host and a port number (`[::1]:7000` included). Resolution
/// is left to the client: this only catches a missing or garbled port before connecting.
fn looks_like_host_port(s: &str) -> bool {
    match s.rsplit_once(':') {
        Some((host, port)) => !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok() -> ClusterConfig {
        let mut c = ClusterConfig::new(vec!["127.0.0.1:7000".into(), "[::1]:7001".into()]);
        c.keys = 1000;
        c
    }

    #[test]
    fn the_defaults_are_valid() {
        ok().validate().unwrap();
    }

    /// A change that makes a valid configuration invalid.
    type Break = fn(&mut ClusterConfig);

    #[test]
    fn out_of_range_parameters_are_refused() {
        let cases: Vec<(&str, Break)> = vec![
            ("no seeds", |c| c.seeds.clear()),
            ("no port", |c| c.seeds = vec!["localhost".into()]),
            ("port 0", |c| c.seeds = vec!["h:0".into()]),
            ("no host", |c| c.seeds = vec![":7000".into()]),
            ("no keys", |c| c.keys = 0),
            ("key space", |c| (c.keys, c.key_size) = (1000, 2)),
            ("value size", |c| c.value_size = VALUE_SIZE_MAX + 1),
            ("width 0", |c| c.width = 0),
            ("width", |c| c.width = WIDTH_MAX + 1),
            ("big pairs", |c| c.value_size = VALUE_SIZE_MAX),
            ("threads 0", |c| c.threads = 0),
            ("threads", |c| c.threads = THREADS_MAX + 1),
            ("duration 0", |c| c.duration_s = 0.0),
            ("duration nan", |c| c.duration_s = f64::NAN),
            ("warm-up", |c| c.warmup_s = -1.0),
            ("pid 0", |c| c.server_pids = vec![0]),
            ("pid twice", |c| c.server_pids = vec![5, 7, 5]),
            ("empty label", |c| c.label.clear()),
            ("long label", |c| c.label = "x".repeat(LABEL_LEN_MAX + 1)),
            ("long tag", |c| {
                c.tags.insert("k".into(), "é".repeat(LABEL_LEN_MAX));
            }),
            ("router no port", |c| c.router = Some("localhost".into())),
            ("router pid alone", |c| c.router_pid = Some(9)),
            ("router pid 0", |c| {
                c.router = Some("h:1".into());
                c.router_pid = Some(0);
            }),
            ("router pid a server's", |c| {
                c.router = Some("h:1".into());
                c.router_pid = Some(5);
                c.server_pids = vec![5];
            }),
        ];
        for (what, change) in cases {
            let mut c = ok();
            change(&mut c);
            let err = c.validate().expect_err(what);
            assert!(matches!(err, Error::Invalid(_)), "{what}: {err}");
        }
        let mut c = ok();
        c.server_pids = vec![3, 1, 2];
        c.warmup_s = 0.0;
        c.validate().unwrap();
        c.router = Some("127.0.0.1:7380".into());
        c.validate().unwrap();
        c.router_pid = Some(4);
        c.validate().unwrap();
    }
}
