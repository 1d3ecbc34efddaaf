//! How a cluster client is configured, its bounds, and what it counts.

use std::time::Duration;

use crate::conn::ClientOptions;

/// Attempts of one command (or rounds of one multi-key call) that a redirect (`MOVED`,
/// `ASK`), a `TRYAGAIN`, a `CLUSTERDOWN`, a `CROSSSLOT` fallback or an unreachable node may
/// cost before the call fails with [`crate::Error::Redirects`] (Redis Cluster clients use 16
/// too: more redirects than that mean a table that does not converge, not a migration).
pub const REDIRECTS_MAX: usize = 16;

/// Nodes found unreachable (nothing of the request sent) within one call before its connection
/// error is returned: each failure costs a table refresh from the other nodes and a pause, so
/// a failover that has already happened is found, and a dead cluster fails fast.
pub const NODE_FAILURES_MAX: usize = 3;

/// The pause of [`ClusterOptions::new`] before retrying after `TRYAGAIN`, `CLUSTERDOWN`, an
/// unreachable node, or a second `MOVED` from one node within a call.
pub const DEFAULT_RETRY_DELAY: Duration = Duration::from_millis(100);

/// How to reach the cluster and talk to its nodes.
#[derive(Clone, Debug)]
pub struct ClusterOptions {
    /// `host:port` of nodes to read the slot table from, tried in order (and again, after the
    /// known nodes, whenever the table must be refreshed).
    pub seeds: Vec<String>,
    /// The options of every node's connection (password, timeouts, RESP3, reconnect); its
    /// `addr` is ignored, each connection gets its node's.
    pub connection: ClientOptions,
    /// The pause before retrying after `TRYAGAIN`, `CLUSTERDOWN`, an unreachable node, or a
    /// second `MOVED` from one node within a call.
    pub retry_delay: Duration,
    /// Multigets ([`super::ClusterClient::multi_get`]) may read from a slot's replicas, not
    /// only its master: per call, each key is given to its master or one of its replicas so
    /// that the fewest nodes are contacted (a minimum set cover, `quiver_plan`), each with one
    /// wide `MGET`. Every connection then sends `READONLY` when it is made (writes are still
    /// redirected to masters; every other command keeps going to the master). Off by default
    /// (redis-py's option of the same name).
    ///
    /// On Quiver a replica's read is linearizable (CRAQ: a key with a write in flight is
    /// answered once it is committed). On Redis Cluster replicas follow their master
    /// asynchronously: a read from one may miss the latest writes.
    pub read_from_replicas: bool,
}

impl ClusterOptions {
    /// Options for `seeds`: [`ClientOptions::new`]'s defaults for every node's connection,
    /// [`DEFAULT_RETRY_DELAY`], reads from masters only.
    pub fn new<S: Into<String>>(seeds: impl IntoIterator<Item = S>) -> ClusterOptions {
        ClusterOptions {
            seeds: seeds.into_iter().map(Into::into).collect(),
            connection: ClientOptions::new(""),
            retry_delay: DEFAULT_RETRY_DELAY,
            read_from_replicas: false,
        }
    }
}

/// What a cluster client did since it was created ([`super::ClusterClient::stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClusterStats {
    /// Commands sent to nodes (a multi-key call sends one per node, or one per slot to a node
    /// that wants it; `ASKING` and `CLUSTER SLOTS` not counted).
    pub requests: u64,
    /// `MOVED` replies followed.
    pub moved: u64,
    /// `ASK` replies followed.
    pub asked: u64,
    /// `TRYAGAIN` and `CLUSTERDOWN` replies retried after a pause.
    pub retries: u64,
    /// `CROSSSLOT` replies: the node was switched to one request per slot.
    pub cross_slot: u64,
    /// Nodes found unreachable before anything was sent to them.
    pub node_failures: u64,
    /// Slot tables read with `CLUSTER SLOTS` (the first one included).
    pub refreshes: u64,
    /// Keys asked for by multigets ([`super::ClusterClient::multi_get`]), each counted once
    /// per call.
    pub multiget_keys: u64,
    /// `MGET` requests the multigets sent (retries included; also counted in `requests`):
    /// `multiget_keys / multiget_requests` is the mean width of the vector a node was sent.
    pub multiget_requests: u64,
}
