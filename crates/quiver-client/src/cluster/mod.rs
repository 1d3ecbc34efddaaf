//! [`ClusterClient`]: commands routed over a Redis-Cluster-style cluster (Redis Cluster, or
//! Quiver's nodes) by the hash slot of their key.
//!
//! * `table` — the slot table (slot → master and replicas) and the reading of `CLUSTER
//!   SLOTS`;
//! * the error replies that steer a request (`MOVED`, `ASK`, `TRYAGAIN`, `CLUSTERDOWN`,
//!   `CROSSSLOT`) are parsed by `quiver_resp::redirect`, shared with the router;
//! * `router` — one lazily opened connection per node, the table's refresh, and single-key
//!   routing through redirects and retries;
//! * `multi` — multi-key calls: one pipelined request per node (per slot for a node that
//!   answers `CROSSSLOT`), written to every node before any reply is read; with
//!   [`ClusterOptions::read_from_replicas`], a multiget's nodes chosen among masters and
//!   replicas so that the fewest are contacted (`quiver_plan`);
//! * `options` — [`ClusterOptions`], the bounds ([`REDIRECTS_MAX`], [`NODE_FAILURES_MAX`]),
//!   [`ClusterStats`].
//!
//! # Redirects and retries
//!
//! `MOVED <slot> <addr>` updates the slot and re-reads the whole table (from that node first),
//! then the command is retried there — after [`ClusterOptions::retry_delay`] when the node
//! redirecting it had redirected this call before (the nodes disagree for the moment, as
//! while a range's new owner has not yet adopted its hand-over); `ASK <slot>
//! <addr>` sends `ASKING` and the command to that node once, the table unchanged; `TRYAGAIN`
//! and `CLUSTERDOWN` retry after [`ClusterOptions::retry_delay`]. A node that cannot be
//! reached before anything was sent to it makes the client re-read the table from the other
//! nodes and retry ([`NODE_FAILURES_MAX`] times a call). All of it is bounded by
//! [`REDIRECTS_MAX`] attempts, then [`Error::Redirects`] names the last redirect
//! ([`Error::ClusterDown`] if it was `CLUSTERDOWN`). A multiget reading from replicas follows
//! the same rules, and does not read from a node as a replica again in the call once it
//! refused a request or could not be reached (its keys' masters stay candidates).
//!
//! The connection's reconnect rule holds here too: a request that may have reached a node is
//! never resent. When its connection fails, the call returns the error; the node's connection
//! is dropped and the table re-read before the next call.

mod multi;
mod options;
mod router;
mod table;

use bytes::Bytes;

pub use quiver_resp::slot::{key_slot, SLOTS};

use crate::cluster::multi::MultiKind;
pub use crate::cluster::options::{
    ClusterOptions, ClusterStats, DEFAULT_RETRY_DELAY, NODE_FAILURES_MAX, REDIRECTS_MAX,
};
use crate::cluster::router::Router;
use crate::conn::{count, expect_ok, optional_bulk, unexpected};
#[cfg(doc)]
use crate::error::Error;
use crate::error::Result;
use crate::resp::Value;

/// A client of a cluster: each command goes to the node serving its key's hash slot.
///
/// Blocking, like [`crate::Connection`], and for one thread (`&mut self`). It keeps the slot
/// table (16384 entries: each slot's master and replicas) and one connection per node, opened
/// on the first command routed to it. Every command goes to its slot's master, except
/// multigets with [`ClusterOptions::read_from_replicas`].
pub struct ClusterClient {
    router: Router,
}

impl std::fmt::Debug for ClusterClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterClient")
            .field("nodes", &self.nodes())
            .field("stats", &self.router.stats)
            .finish_non_exhaustive()
    }
}

impl ClusterClient {
    /// Reads the slot table from the first of `seeds` (`host:port`) that gives one, with
    /// [`ClusterOptions::new`].
    pub fn connect(seeds: &[&str]) -> Result<ClusterClient> {
        ClusterClient::connect_with(ClusterOptions::new(seeds.iter().copied()))
    }

    /// Reads the slot table from the first seed that gives one. Fails with
    /// [`Error::ClusterDown`] when none does (the text says why, seed by seed).
    pub fn connect_with(options: ClusterOptions) -> Result<ClusterClient> {
        Ok(ClusterClient {
            router: Router::connect(options)?,
        })
    }

    pub fn options(&self) -> &ClusterOptions {
        &self.router.options
    }

    /// Re-reads the slot table (`CLUSTER SLOTS`) from the first known node that answers.
    pub fn refresh(&mut self) -> Result<()> {
        self.router.refresh(None, None)
    }

    /// The address (`host:port`) of the node the table says serves `slot`; `None` for a slot
    /// no node serves (or `slot` ≥ [`SLOTS`]).
    pub fn slot_owner(&self, slot: u16) -> Option<&str> {
        let node = self.router.table.owner(slot)?;
        Some(self.router.nodes[node].addr.as_str())
    }

    /// The addresses of the replicas the table lists for `slot`, in `CLUSTER SLOTS` order
    /// (for Quiver, down the slot's chain after its head); none for a slot no node serves.
    pub fn slot_replicas(&self, slot: u16) -> Vec<&str> {
        let replicas = self.router.table.replicas(slot).iter();
        replicas
            .map(|&node| self.router.nodes[node].addr.as_str())
            .collect()
    }

    /// The addresses of the nodes serving at least one slot as its master, in the order the
    /// table lists them.
    pub fn nodes(&self) -> Vec<&str> {
        self.router.serving_nodes()
    }

    /// What the client did so far: requests, redirects, retries, refreshes.
    pub fn stats(&self) -> ClusterStats {
        self.router.stats
    }

    /// Sends `args` to the node serving the slot of `args[key_index]` and returns its reply.
    /// Redirects and retries are followed (see the module documentation); an error reply is
    /// `Err` ([`Error::Server`], ...). `key_index` past `args` is [`Error::KeyIndex`].
    pub fn command(&mut self, args: &[&[u8]], key_index: usize) -> Result<Value> {
        self.router.route(args, key_index)
    }

    /// `GET key`: the value, or `None` if the key does not exist.
    pub fn get(&mut self, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        let reply = self.command(&[b"GET", key.as_ref()], 1)?;
        optional_bulk("GET", reply)
    }

    /// `SET key value`.
    pub fn set(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        let reply = self.command(&[b"SET", key.as_ref(), value.as_ref()], 1)?;
        expect_ok("SET", reply)
    }

    /// `DEL key`: whether the key existed.
    pub fn delete(&mut self, key: impl AsRef<[u8]>) -> Result<bool> {
        let reply = self.command(&[b"DEL", key.as_ref()], 1)?;
        Ok(count("DEL", reply)? > 0)
    }

    /// `EXISTS key`.
    pub fn exists(&mut self, key: impl AsRef<[u8]>) -> Result<bool> {
        let reply = self.command(&[b"EXISTS", key.as_ref()], 1)?;
        Ok(count("EXISTS", reply)? > 0)
    }

    /// `INCR key`: the new value.
    pub fn incr(&mut self, key: impl AsRef<[u8]>) -> Result<i64> {
        match self.command(&[b"INCR", key.as_ref()], 1)? {
            Value::Integer(n) => Ok(n),
            other => Err(unexpected("INCR", "an integer", &other)),
        }
    }

    /// `MGET` over the cluster: one entry per key, in order (`None` for a missing key). One
    /// request per node, all written before any reply is read. No keys: no round trip.
    ///
    /// With [`ClusterOptions::read_from_replicas`] a key may be read from its slot's master or
    /// a replica: the call contacts the fewest nodes that hold every key between them (and
    /// sends each the widest `MGET`); [`ClusterStats::multiget_requests`] counts them.
    pub fn multi_get<K: AsRef<[u8]>>(&mut self, keys: &[K]) -> Result<Vec<Option<Bytes>>> {
        let keys: Vec<&[u8]> = keys.iter().map(AsRef::as_ref).collect();
        Ok(multi::run(&mut self.router, MultiKind::Get, &keys, &[])?.values)
    }

    /// `MSET` over the cluster: each node sets its keys in one command. Not atomic across
    /// nodes: if the call fails, nodes that answered may have set theirs. No pairs: no round
    /// trip.
    pub fn multi_set<K: AsRef<[u8]>, V: AsRef<[u8]>>(&mut self, pairs: &[(K, V)]) -> Result<()> {
        let keys: Vec<&[u8]> = pairs.iter().map(|(k, _)| k.as_ref()).collect();
        let values: Vec<&[u8]> = pairs.iter().map(|(_, v)| v.as_ref()).collect();
        multi::run(&mut self.router, MultiKind::Set, &keys, &values).map(|_| ())
    }

    /// `DEL` over the cluster: how many of the keys existed. No keys: no round trip.
    pub fn multi_delete<K: AsRef<[u8]>>(&mut self, keys: &[K]) -> Result<u64> {
        let keys: Vec<&[u8]> = keys.iter().map(AsRef::as_ref).collect();
        Ok(multi::run(&mut self.router, MultiKind::Delete, &keys, &[])?.count)
    }

    /// `EXISTS` over the cluster: how many of the keys exist (a key named twice counts
    /// twice, as in `EXISTS`). No keys: no round trip.
    pub fn multi_exists<K: AsRef<[u8]>>(&mut self, keys: &[K]) -> Result<u64> {
        let keys: Vec<&[u8]> = keys.iter().map(AsRef::as_ref).collect();
        Ok(multi::run(&mut self.router, MultiKind::Exists, &keys, &[])?.count)
    }
}
