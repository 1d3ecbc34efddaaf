//! One measured run's result (one JSON line), built from what the threads counted and the
//! CPU seconds read around the window; pure, so that every derived figure is tested.

use std::collections::BTreeMap;

use quiver_client::ClusterStats;
use serde::Serialize;

use crate::cluster::client::RouterCounts;
use crate::cluster::spec::ClusterConfig;

/// One server process over the window.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ServerFigures {
    pub pid: u32,
    /// The node it serves (`host:port`, as the slot table names it).
    pub node: String,
    pub cpu_s: f64,
    /// `cpu_s / measured_s`: 1.0 is one core busy.
    pub cpu_util: f64,
    /// The share of the key space `0..keys` whose slots the node owns: with uniform key
    /// choice, the share of the keys read that it served.
    pub key_share: f64,
    /// `keys_read * key_share / cpu_s`.
    pub keys_per_server_cpu_s: Option<f64>,
}

/// The router over the window (`--router`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RouterFigures {
    /// `host:port`.
    pub addr: String,
    /// `--router-pid`, and its CPU seconds over the window (`null` without it).
    pub pid: Option<u32>,
    pub cpu_s: Option<f64>,
    pub cpu_util: Option<f64>,
    /// From its INFO over the window: pipelined batches sent to back-ends (one per back-end
    /// per batch), and commands sent (a multiget's share of one back-end is one). `null` when
    /// its INFO does not have them.
    pub backend_requests: Option<u64>,
    pub backend_commands: Option<u64>,
}

/// One measured run (one line of output). The server figures are empty and `null` without
/// `--server-pids`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ClusterRecord {
    /// Always `"cluster"`.
    pub bench: &'static str,
    /// `--label`.
    pub system: String,
    pub seeds: Vec<String>,
    /// Nodes serving slots, as the client's slot table lists them.
    pub nodes: usize,
    pub node_addrs: Vec<String>,
    pub keys: u64,
    pub key_size: usize,
    pub value_size: usize,
    pub width: usize,
    /// `mget`, or `mset`: then `multigets` counts multisets and `keys_read` the keys written.
    pub op: &'static str,
    /// Cluster clients read from replicas too.
    pub read_from_replicas: bool,
    pub threads: usize,
    pub warmup_s: f64,
    pub duration_s: f64,
    /// From the window's start to the last measured multiget's reply.
    pub measured_s: f64,
    /// Multigets started in the window (each thread finishes the one it started last).
    pub multigets: u64,
    /// `multigets * width`.
    pub keys_read: u64,
    pub keys_per_sec: f64,
    pub multigets_per_sec: f64,
    /// Requests the back-ends received in the window: from cluster clients, one per node a
    /// multiget touched, or one per slot to a node that answered CROSSSLOT; through a router,
    /// its sub-commands to the back-ends (`router.backend_commands`; the clients' own one per
    /// multiget when its INFO does not count them).
    pub requests: u64,
    /// `requests / multigets`.
    pub requests_per_multiget: f64,
    /// `keys_read / requests`: the vector width each back-end saw.
    pub mean_keys_per_request: f64,
    /// CROSSSLOT replies over the whole run, warm-up included (each switches one node of one
    /// client to a request per slot).
    pub cross_slot: u64,
    /// Whole run, all threads: MOVED and ASK followed, TRYAGAIN / CLUSTERDOWN retried, nodes
    /// found unreachable, slot tables read. Nonzero redirects mean the topology moved.
    pub moved: u64,
    pub asked: u64,
    pub retries: u64,
    pub node_failures: u64,
    pub refreshes: u64,
    /// Each `--server-pids` process, in the order given.
    pub servers: Vec<ServerFigures>,
    /// Sum of the servers' CPU seconds.
    pub server_cpu_s: Option<f64>,
    /// `keys_read / server_cpu_s`: what compares on a host where client and servers share
    /// cores.
    pub keys_per_server_cpu_s: Option<f64>,
    /// This process's CPU seconds over the window (every client thread).
    pub client_cpu_s: Option<f64>,
    pub client_cpu_util: Option<f64>,
    /// `--router`: the router's figures (`null` for a run through cluster clients).
    pub router: Option<RouterFigures>,
    /// `keys_read / (server_cpu_s + router.cpu_s)`: the nodes' and the router's CPU together
    /// (`null` without `--router-pid`).
    pub keys_per_server_cpu_s_with_router: Option<f64>,
    pub seed: u64,
    pub tags: BTreeMap<String, String>,
    /// When the window began, RFC 3339 UTC.
    pub started_at: String,
}

/// A server's CPU seconds over the window and what it serves.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerCpu {
    pub pid: u32,
    pub node: String,
    pub cpu_s: f64,
    pub key_share: f64,
}

/// The router over the window, before any figure is derived.
#[derive(Clone, Debug, PartialEq)]
pub struct RouterMeasured {
    pub addr: String,
    pub pid: Option<u32>,
    pub cpu_s: Option<f64>,
    /// The change of its counters over the window.
    pub backend: Option<RouterCounts>,
}

/// What a run measured, before any figure is derived.
#[derive(Clone, Debug, PartialEq)]
pub struct Measured {
    pub node_addrs: Vec<String>,
    pub measured_s: f64,
    pub multigets: u64,
    /// Sum over threads of the client stats' change over the window.
    pub window: ClusterStats,
    /// Sum over threads of the client stats at the end (the whole run).
    pub total: ClusterStats,
    pub servers: Vec<ServerCpu>,
    pub client_cpu_s: Option<f64>,
    pub router: Option<RouterMeasured>,
    pub started_at: String,
}

/// `a / b`, or `None` when `b` is not positive (an idle server: no figure, not infinity).
fn per(a: f64, b: f64) -> Option<f64> {
    (b > 0.0).then(|| a / b)
}

impl ClusterRecord {
    pub fn new(cfg: &ClusterConfig, m: Measured) -> ClusterRecord {
        let keys_read = m.multigets * cfg.width as u64;
        let secs = m.measured_s;
        let servers: Vec<ServerFigures> = m
            .servers
            .iter()
            .map(|s| ServerFigures {
                pid: s.pid,
                node: s.node.clone(),
                cpu_s: s.cpu_s,
                cpu_util: per(s.cpu_s, secs).unwrap_or(0.0),
                key_share: s.key_share,
                keys_per_server_cpu_s: per(keys_read as f64 * s.key_share, s.cpu_s),
            })
            .collect();
        let server_cpu_s = (!servers.is_empty()).then(|| servers.iter().map(|s| s.cpu_s).sum());
        let router = m.router.as_ref().map(|r| RouterFigures {
            addr: r.addr.clone(),
            pid: r.pid,
            cpu_s: r.cpu_s,
            cpu_util: r.cpu_s.and_then(|c| per(c, secs)),
            backend_requests: r.backend.map(|b| b.backend_requests),
            backend_commands: r.backend.map(|b| b.backend_commands),
        });
        // What the back-ends received: through a router, its sub-commands.
        let requests = router
            .as_ref()
            .and_then(|r| r.backend_commands)
            .unwrap_or(m.window.requests);
        let with_router = server_cpu_s
            .zip(router.as_ref().and_then(|r| r.cpu_s))
            .and_then(|(s, r)| per(keys_read as f64, s + r));
        ClusterRecord {
            bench: "cluster",
            system: cfg.label.clone(),
            seeds: cfg.seeds.clone(),
            nodes: m.node_addrs.len(),
            node_addrs: m.node_addrs,
            keys: cfg.keys,
            key_size: cfg.key_size,
            value_size: cfg.value_size,
            width: cfg.width,
            op: cfg.op.name(),
            read_from_replicas: cfg.read_from_replicas,
            threads: cfg.threads,
            warmup_s: cfg.warmup_s,
            duration_s: cfg.duration_s,
            measured_s: secs,
            multigets: m.multigets,
            keys_read,
            keys_per_sec: per(keys_read as f64, secs).unwrap_or(0.0),
            multigets_per_sec: per(m.multigets as f64, secs).unwrap_or(0.0),
            requests,
            requests_per_multiget: per(requests as f64, m.multigets as f64).unwrap_or(0.0),
            mean_keys_per_request: per(keys_read as f64, requests as f64).unwrap_or(0.0),
            cross_slot: m.total.cross_slot,
            moved: m.total.moved,
            asked: m.total.asked,
            retries: m.total.retries,
            node_failures: m.total.node_failures,
            refreshes: m.total.refreshes,
            servers,
            server_cpu_s,
            keys_per_server_cpu_s: server_cpu_s.and_then(|c| per(keys_read as f64, c)),
            client_cpu_s: m.client_cpu_s,
            client_cpu_util: m.client_cpu_s.and_then(|c| per(c, secs)),
            router,
            keys_per_server_cpu_s_with_router: with_router,
            seed: cfg.seed,
            tags: cfg.tags.clone(),
            started_at: m.started_at,
        }
    }

    // Numbers, strings, vectors and a map with string keys: serializing cannot fail.
    #[allow(clippy::expect_used)]
    pub fn to_json_line(&self) -> String {
        serde_json::to_string(self).expect("a record serializes")
    }
}

/// Adds the fields of two client stats (threads' figures summed).
pub fn add_stats(a: ClusterStats, b: ClusterStats) -> ClusterStats {
    ClusterStats {
        requests: a.requests + b.requests,
        moved: a.moved + b.moved,
        asked: a.asked + b.asked,
        retries: a.retries + b.retries,
        cross_slot: a.cross_slot + b.cross_slot,
        node_failures: a.node_failures + b.node_failures,
        refreshes: a.refreshes + b.refreshes,
        multiget_keys: a.multiget_keys + b.multiget_keys,
        multiget_requests: a.multiget_requests + b.multiget_requests,
    }
}

/// `after - before`, field by field (counters only grow).
pub fn sub_stats(after: ClusterStats, before: ClusterStats) -> ClusterStats {
    ClusterStats {
        requests: after.requests - before.requests,
        moved: after.moved - before.moved,
        asked: after.asked - before.asked,
        retries: after.retries - before.retries,
        cross_slot: after.cross_slot - before.cross_slot,
        node_failures: after.node_failures - before.node_failures,
        refreshes: after.refreshes - before.refreshes,
        multiget_keys: after.multiget_keys - before.multiget_keys,
        multiget_requests: after.multiget_requests - before.multiget_requests,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measured() -> Measured {
        Measured {
            node_addrs: vec!["127.0.0.1:7000".into(), "127.0.0.1:7001".into()],
            measured_s: 2.0,
            multigets: 1000,
            window: ClusterStats {
                requests: 2000,
                ..ClusterStats::default()
            },
            total: ClusterStats {
                requests: 2600,
                cross_slot: 3,
                refreshes: 4,
                ..ClusterStats::default()
            },
            servers: vec![
                ServerCpu {
                    pid: 11,
                    node: "127.0.0.1:7001".into(),
                    cpu_s: 0.5,
                    key_share: 0.25,
                },
                ServerCpu {
                    pid: 10,
                    node: "127.0.0.1:7000".into(),
                    cpu_s: 1.5,
                    key_share: 0.75,
                },
            ],
            client_cpu_s: Some(1.0),
            router: None,
            started_at: "2026-01-02T03:04:05.006Z".into(),
        }
    }

    #[test]
    fn figures_are_derived_from_the_counts() {
        let mut cfg = ClusterConfig::new(vec!["127.0.0.1:7000".into()]);
        cfg.width = 32;
        cfg.label = "quiver".into();
        let r = ClusterRecord::new(&cfg, measured());
        assert_eq!(
            (r.bench, r.system.as_str(), r.nodes),
            ("cluster", "quiver", 2)
        );
        assert_eq!(r.keys_read, 32_000);
        assert_eq!(r.keys_per_sec, 16_000.0);
        assert_eq!(r.multigets_per_sec, 500.0);
        assert_eq!(r.requests, 2000);
        assert_eq!(r.requests_per_multiget, 2.0);
        assert_eq!(r.mean_keys_per_request, 16.0);
        assert_eq!((r.cross_slot, r.refreshes), (3, 4));
        assert_eq!(r.server_cpu_s, Some(2.0));
        assert_eq!(r.keys_per_server_cpu_s, Some(16_000.0));
        // Per node: its share of the keys over its own CPU seconds.
        assert_eq!(r.servers[0].keys_per_server_cpu_s, Some(16_000.0));
        assert_eq!(r.servers[1].keys_per_server_cpu_s, Some(16_000.0));
        assert_eq!(r.servers[1].cpu_util, 0.75);
        assert_eq!(r.client_cpu_util, Some(0.5));
        let v: serde_json::Value = serde_json::from_str(&r.to_json_line()).unwrap();
        assert_eq!(v["servers"][0]["pid"], 11);
        assert_eq!(v["mean_keys_per_request"], 16.0);
        assert_eq!(v["tags"], serde_json::json!({}));
        assert_eq!(v["router"], serde_json::Value::Null);
        assert_eq!(r.keys_per_server_cpu_s_with_router, None);
    }

    #[test]
    fn through_a_router_the_back_ends_requests_are_its_sub_commands() {
        let mut cfg = ClusterConfig::new(vec!["127.0.0.1:7000".into()]);
        cfg.label = "quiver-router".into();
        let mut m = measured();
        // The clients sent one MGET per multiget; the router split each over the 2 nodes.
        m.window.requests = 1000;
        m.router = Some(RouterMeasured {
            addr: "127.0.0.1:7380".into(),
            pid: Some(12),
            cpu_s: Some(2.0),
            backend: Some(RouterCounts {
                backend_requests: 1900,
                backend_commands: 2000,
            }),
        });
        let r = ClusterRecord::new(&cfg, m.clone());
        assert_eq!(r.requests, 2000);
        assert_eq!(r.requests_per_multiget, 2.0);
        assert_eq!(r.mean_keys_per_request, 16.0);
        // Nodes alone (2 CPU s), then nodes and router (4 CPU s).
        assert_eq!(r.keys_per_server_cpu_s, Some(16_000.0));
        assert_eq!(r.keys_per_server_cpu_s_with_router, Some(8_000.0));
        let router = r.router.as_ref().unwrap();
        assert_eq!(router.cpu_util, Some(1.0));
        assert_eq!(
            (router.backend_requests, router.backend_commands),
            (Some(1900), Some(2000))
        );
        let v: serde_json::Value = serde_json::from_str(&r.to_json_line()).unwrap();
        assert_eq!(v["router"]["pid"], 12);
        // Without its counters or its pid: the clients' requests, no combined figure.
        m.router = Some(RouterMeasured {
            addr: "127.0.0.1:7380".into(),
            pid: None,
            cpu_s: None,
            backend: None,
        });
        let r = ClusterRecord::new(&cfg, m);
        assert_eq!(r.requests, 1000);
        assert_eq!(r.keys_per_server_cpu_s_with_router, None);
    }

    #[test]
    fn nothing_measured_gives_zeros_not_infinities() {
        let cfg = ClusterConfig::new(vec!["h:1".into()]);
        let mut m = measured();
        m.multigets = 0;
        m.window = ClusterStats::default();
        m.measured_s = 0.0;
        m.servers[0].cpu_s = 0.0;
        m.servers[1].cpu_s = 0.0;
        m.client_cpu_s = None;
        let r = ClusterRecord::new(&cfg, m);
        assert_eq!((r.keys_per_sec, r.requests_per_multiget), (0.0, 0.0));
        assert_eq!(r.mean_keys_per_request, 0.0);
        assert_eq!(r.keys_per_server_cpu_s, None);
        assert_eq!(r.servers[0].keys_per_server_cpu_s, None);
        assert_eq!(r.client_cpu_util, None);
        let mut m = measured();
        m.servers.clear();
        let r = ClusterRecord::new(&cfg, m);
        assert_eq!((r.server_cpu_s, r.keys_per_server_cpu_s), (None, None));
        // The JSON line is valid whatever the figures.
        serde_json::from_str::<serde_json::Value>(&r.to_json_line()).unwrap();
    }

    #[test]
    fn stats_add_and_subtract_field_by_field() {
        let a = ClusterStats {
            requests: 5,
            moved: 1,
            asked: 2,
            retries: 3,
            cross_slot: 4,
            node_failures: 6,
            refreshes: 7,
            multiget_keys: 8,
            multiget_requests: 9,
        };
        let b = add_stats(a, a);
        assert_eq!(b.requests, 10);
        assert_eq!(b.refreshes, 14);
        assert_eq!((b.multiget_keys, b.multiget_requests), (16, 18));
        assert_eq!(sub_stats(b, a), a);
    }
}
