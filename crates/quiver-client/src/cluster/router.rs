//! The router: the slot table, one lazily opened connection per node, the table's refresh,
//! and the routing of a single-key command through redirects and retries. The multi-key
//! fan-out (`multi`) builds on its node-level `send` and `receive`.
//!
//! Node indices (into `nodes`, as the table stores them) stay valid until the next refresh,
//! which rebuilds the node list from the new table (connections and per-node flags carried
//! over by address): code holding indices across several nodes refreshes only when it holds
//! none, and remembers a redirect's target by address.

use std::thread;

use bytes::BytesMut;
use quiver_plan::Planner;
use quiver_resp::key_slot;

use crate::cluster::options::{ClusterOptions, ClusterStats, NODE_FAILURES_MAX, REDIRECTS_MAX};
use crate::cluster::table::{host_of, parse_cluster_slots, SlotTable, SlotsRange};
use crate::conn::{Connection, SendFailure};
use crate::error::{Error, Result};
use crate::resp::{encode_command, Value};
use quiver_resp::redirect::join_addr;
use quiver_resp::redirect::Redirect;

/// A node of the cluster, as the client knows it.
pub(crate) struct Node {
    /// `host:port`, as `CLUSTER SLOTS` or a redirect named it.
    pub(crate) addr: String,
    /// Opened on the first request routed here; dropped after a connection failure.
    conn: Option<Connection>,
    /// The node answered `CROSSSLOT` to a request spanning slots (Redis Cluster): multi-key
    /// calls send it one request per slot. Quiver never does, and gets one per node.
    pub(crate) per_slot: bool,
}

impl Node {
    fn new(addr: String) -> Node {
        Node {
            addr,
            conn: None,
            per_slot: false,
        }
    }
}

pub(crate) struct Router {
    pub(crate) options: ClusterOptions,
    pub(crate) nodes: Vec<Node>,
    pub(crate) table: SlotTable,
    /// A request may have been lost on a failed connection: the table is refreshed before the
    /// next call is routed (the node may have failed over).
    stale: bool,
    pub(crate) stats: ClusterStats,
    /// Chooses the nodes of a multiget reading from replicas (keeps its buffers between
    /// calls).
    pub(crate) planner: Planner,
    /// The planner's turn for the next multi-key call: each call takes the next (its rounds
    /// keep it), so that nodes that would do as well share the reads.
    pub(crate) turn: usize,
}

impl Router {
    /// Reads the slot table from the first seed that gives one.
    pub(crate) fn connect(options: ClusterOptions) -> Result<Router> {
        if options.seeds.is_empty() {
            return Err(Error::ClusterDown("no seed address given".into()));
        }
        let mut router = Router {
            options,
            nodes: Vec::new(),
            table: SlotTable::empty(),
            stale: false,
            stats: ClusterStats::default(),
            planner: Planner::default(),
            turn: 0,
        };
        router.refresh(None, None)?;
        Ok(router)
    }

    /// Reads `CLUSTER SLOTS` from the first node that answers — `prefer` first, then the
    /// nodes with an open connection, the other known nodes, the seeds, and `avoid` (a node
    /// that just failed) last — and installs it. Each candidate is asked once: the loop is
    /// bounded by the nodes and seeds known.
    pub(crate) fn refresh(&mut self, prefer: Option<&str>, avoid: Option<&str>) -> Result<()> {
        let mut candidates: Vec<String> = Vec::new();
        let mut add = |addr: &str| {
            if !candidates.iter().any(|c| c == addr) {
                candidates.push(addr.to_owned());
            }
        };
        prefer.into_iter().for_each(&mut add);
        let open = self.nodes.iter().filter(|n| n.conn.is_some());
        open.for_each(|n| add(&n.addr));
        self.nodes.iter().for_each(|n| add(&n.addr));
        self.options.seeds.iter().for_each(|s| add(s));
        if let Some(avoid) = avoid {
            candidates.retain(|c| c != avoid);
            candidates.push(avoid.to_owned());
        }
        let mut failures = Vec::new();
        for addr in &candidates {
            match self.read_table(addr) {
                Ok(ranges) => {
                    self.install(&ranges);
                    self.stale = false;
                    self.stats.refreshes += 1;
                    return Ok(());
                }
                Err(e) => failures.push(format!("{addr}: {e}")),
            }
        }
        Err(Error::ClusterDown(format!(
            "no node gave the slot table ({})",
            failures.join("; ")
        )))
    }

    /// `CLUSTER SLOTS` from `addr`, on its node's connection if it has one.
    fn read_table(&mut self, addr: &str) -> Result<Vec<SlotsRange>> {
        let node = self.node_index(addr);
        let mut request = BytesMut::new();
        encode_command(&mut request, &[b"CLUSTER", b"SLOTS"]);
        let reply = self
            .exchange(node, &request, 1)
            .map_err(|failure| failure.error)?
            .pop()
            .ok_or_else(|| Error::Protocol("no reply to CLUSTER SLOTS".into()))?;
        match reply {
            Value::Error(text) => Err(Error::from_reply(text)),
            reply => parse_cluster_slots(reply, addr),
        }
    }

    /// The table of `ranges`, and the node list rebuilt from it: its masters and replicas in
    /// the order of their first range, each keeping its connection and flags; nodes neither
    /// serving nor replicating anything are dropped with their connections.
    fn install(&mut self, ranges: &[SlotsRange]) {
        let mut old = std::mem::take(&mut self.nodes);
        let mut table = SlotTable::empty();
        for range in ranges {
            let master = self.reinstall(&mut old, &range.addr);
            let replicas: Vec<usize> = range
                .replicas
                .iter()
                .map(|addr| self.reinstall(&mut old, addr))
                .collect();
            table.set_range(range, master, &replicas);
        }
        self.table = table;
    }

    /// The index of the node at `addr` in the node list being rebuilt, taken from `old` (the
    /// list before, with its connection and flags) or new.
    fn reinstall(&mut self, old: &mut Vec<Node>, addr: &str) -> usize {
        if let Some(node) = self.nodes.iter().position(|n| n.addr == addr) {
            return node;
        }
        let node = match old.iter().position(|n| n.addr == addr) {
            Some(i) => old.swap_remove(i),
            None => Node::new(addr.to_owned()),
        };
        self.nodes.push(node);
        self.nodes.len() - 1
    }

    /// The index of the node at `addr`, added (without a connection) if it is new.
    pub(crate) fn node_index(&mut self, addr: &str) -> usize {
        match self.nodes.iter().position(|n| n.addr == addr) {
            Some(node) => node,
            None => {
                self.nodes.push(Node::new(addr.to_owned()));
                self.nodes.len() - 1
            }
        }
    }

    /// The address a redirect from `node` names: `host:port`, or that node's host when the
    /// redirect's host is empty (an unknown endpoint).
    pub(crate) fn redirect_addr(&self, node: usize, host: &str, port: u16) -> String {
        let host = match host {
            "" | "?" => host_of(&self.nodes[node].addr),
            host => host,
        };
        join_addr(host, port)
    }

    /// Refreshes the table if a failure left it stale. Invalidates node indices.
    pub(crate) fn refresh_if_stale(&mut self) {
        // A failed refresh keeps the table it had, still stale: routing on it is the best
        // left, and the errors it meets say where it failed.
        if self.stale {
            let _ = self.refresh(None, None);
        }
    }

    /// The node serving `slot`, from the table as it is (no refresh: indices stay valid).
    pub(crate) fn owner(&self, slot: u16) -> Result<usize> {
        self.table.owner(slot).ok_or(Error::SlotNotCovered { slot })
    }

    /// `MOVED slot addr`: the slot is served there from now on; the rest of the table is read
    /// again from that node (a moved slot rarely moves alone). Invalidates node indices.
    pub(crate) fn moved(&mut self, slot: u16, addr: &str) {
        self.stats.moved += 1;
        let node = self.node_index(addr);
        self.table.set(slot, node);
        // A failed refresh keeps the table with the slot set (the redirect itself is known),
        // and the next attempt tries again.
        if self.refresh(Some(addr), None).is_err() {
            self.stale = true;
        }
    }

    /// A node could not be reached before anything was sent: its connection is dropped, the
    /// table read again from the other nodes (a failover moves its slots), after a pause.
    /// Invalidates node indices.
    pub(crate) fn node_failed(&mut self, addr: &str) {
        self.stats.node_failures += 1;
        self.pause();
        if self.refresh(None, Some(addr)).is_err() {
            self.stale = true;
        }
    }

    /// The pause before a retry.
    pub(crate) fn pause(&self) {
        thread::sleep(self.options.retry_delay);
    }

    /// Writes `request` to `node`, opening its connection first if needed.
    pub(crate) fn send(&mut self, node: usize, request: &[u8]) -> Result<(), SendFailure> {
        let entry = &mut self.nodes[node];
        let conn = match &mut entry.conn {
            Some(conn) => conn,
            None => {
                let mut options = self.options.connection.clone();
                options.addr = entry.addr.clone();
                // Any connection may serve a replica read; on a master READONLY changes
                // nothing (Redis Cluster's rule, and Quiver's).
                options.readonly |= self.options.read_from_replicas;
                let conn = Connection::connect_with(options).map_err(|error| SendFailure {
                    error,
                    unsent: true,
                })?;
                entry.conn.insert(conn)
            }
        };
        conn.send(request).inspect_err(|failure| {
            entry.conn = None;
            // A request that may have been applied is not resent; the next call re-reads
            // the table, in case the node is gone for good.
            self.stale |= !failure.unsent;
        })
    }

    /// Reads `count` replies from `node`. A failure drops the connection and marks the table
    /// stale (the request may have been applied; it is not resent).
    pub(crate) fn receive(&mut self, node: usize, count: usize) -> Result<Vec<Value>> {
        let entry = &mut self.nodes[node];
        let conn = entry.conn.as_mut().ok_or(Error::NotConnected)?;
        conn.receive(count).inspect_err(|_| {
            entry.conn = None;
            self.stale = true;
        })
    }

    /// `send` then `receive`; a failure says whether the request may have been applied.
    fn exchange(
        &mut self,
        node: usize,
        request: &[u8],
        count: usize,
    ) -> Result<Vec<Value>, SendFailure> {
        self.send(node, request)?;
        self.receive(node, count).map_err(|error| SendFailure {
            error,
            unsent: false,
        })
    }

    /// Sends `args` to the node serving the slot of `args[key_index]`, following redirects
    /// and retrying `TRYAGAIN`, `CLUSTERDOWN` and unreachable nodes, at most
    /// [`REDIRECTS_MAX`] attempts in all. Error replies other than those come back as `Err`.
    pub(crate) fn route(&mut self, args: &[&[u8]], key_index: usize) -> Result<Value> {
        let key = args.get(key_index).ok_or(Error::KeyIndex {
            index: key_index,
            args: args.len(),
        })?;
        let slot = key_slot(key);
        let mut request = BytesMut::new();
        encode_command(&mut request, args);
        // An ASK redirect's target, for the next attempt only (by address: a refresh may
        // renumber the nodes meanwhile).
        let mut ask: Option<String> = None;
        let mut node_failures = 0;
        let mut moved_from = Vec::new();
        let mut last = String::new();
        for _ in 0..REDIRECTS_MAX {
            self.refresh_if_stale();
            let (node, asking) = match ask.take() {
                Some(addr) => (self.node_index(&addr), true),
                None => (self.owner_or_refresh(slot)?, false),
            };
            let reply = match self.attempt(node, &request, asking) {
                Ok(reply) => reply,
                Err(failure) if is_unreachable(&failure) && node_failures < NODE_FAILURES_MAX => {
                    node_failures += 1;
                    let addr = self.nodes[node].addr.clone();
                    last = format!("{addr} unreachable: {}", failure.error);
                    self.node_failed(&addr);
                    continue;
                }
                Err(failure) => return Err(failure.error),
            };
            let Value::Error(text) = reply else {
                return Ok(reply);
            };
            match Redirect::parse(&text) {
                Some(Redirect::Moved { slot, host, port }) => {
                    let addr = self.redirect_addr(node, &host, port);
                    let from = self.nodes[node].addr.clone();
                    self.moved(slot, &addr);
                    if sent_back(&mut moved_from, [from]) {
                        self.pause();
                    }
                }
                Some(Redirect::Ask { host, port, .. }) => {
                    self.stats.asked += 1;
                    ask = Some(self.redirect_addr(node, &host, port));
                }
                Some(Redirect::TryAgain) => {
                    self.stats.retries += 1;
                    self.pause();
                }
                Some(Redirect::ClusterDown) => {
                    self.stats.retries += 1;
                    self.pause();
                    self.stale = true;
                }
                Some(Redirect::CrossSlot) | None => return Err(Error::from_reply(text)),
            }
            last = text;
        }
        Err(exhausted(last))
    }

    /// The node serving `slot`; if the table names none, after one refresh. Invalidates node
    /// indices.
    pub(crate) fn owner_or_refresh(&mut self, slot: u16) -> Result<usize> {
        if self.table.owner(slot).is_none() {
            self.refresh(None, None)?;
        }
        self.owner(slot)
    }

    /// One try of a single command on `node` (after `ASKING` if `asking`): its reply, error
    /// replies included as [`Value::Error`].
    fn attempt(&mut self, node: usize, request: &[u8], asking: bool) -> Result<Value, SendFailure> {
        let mut both = BytesMut::new();
        let (request, count) = if asking {
            encode_command(&mut both, &[b"ASKING"]);
            both.extend_from_slice(request);
            (&both[..], 2)
        } else {
            (request, 1)
        };
        self.send(node, request)?;
        self.stats.requests += 1;
        // After ASKING's own reply (+OK), which says nothing the command's reply does not.
        let mut replies = self.receive(node, count).map_err(|error| SendFailure {
            error,
            unsent: false,
        })?;
        replies.pop().ok_or_else(|| SendFailure {
            error: Error::Protocol("no reply to the command".into()),
            unsent: false,
        })
    }

    /// The addresses of the nodes serving at least one slot as its master.
    pub(crate) fn serving_nodes(&self) -> Vec<&str> {
        (0..self.nodes.len())
            .filter(|&n| self.table.serves_any(n))
            .map(|n| self.nodes[n].addr.as_str())
            .collect()
    }
}

/// Notes the nodes that answered `MOVED` in a call's attempt or round in `moved_from` (those
/// that redirected the call so far); true when one of them had redirected it before. The call
/// came back to a node it was sent away from — the nodes disagree for the moment, as while a
/// range's new owner has not yet adopted its hand-over (its table still names the old one) —
/// so the next attempt waits a pause, and the bound is not spent in a few round trips while
/// they converge.
pub(crate) fn sent_back(
    moved_from: &mut Vec<String>,
    redirected_by: impl IntoIterator<Item = String>,
) -> bool {
    let mut back = false;
    for from in redirected_by {
        if moved_from.contains(&from) {
            back = true;
        } else {
            moved_from.push(from);
        }
    }
    back
}

/// The error of a call whose attempts ran out; `last` is the last redirect or retry.
pub(crate) fn exhausted(last: String) -> Error {
    if last.starts_with("CLUSTERDOWN") {
        Error::ClusterDown(last)
    } else {
        Error::Redirects {
            attempts: REDIRECTS_MAX,
            last,
        }
    }
}

/// A node that could not be reached: nothing of the request was sent, for a connection
/// failure (refused, reset, timed out), not a refusal (`AUTH` failing is the same everywhere).
pub(crate) fn is_unreachable(failure: &SendFailure) -> bool {
    failure.unsent && failure.error.is_connection_error()
}
