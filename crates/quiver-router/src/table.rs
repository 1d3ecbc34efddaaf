//! Where the router sends each key: the slot table of the topology in etcd, kept current by a
//! watch (the same document and the same rule as the nodes': a version older than the one in
//! use is ignored).

use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use quiver_cluster::follow;
use quiver_cluster::meta::EtcdSettings;
use quiver_cluster::topology::UNASSIGNED;
use quiver_cluster::{MetaError, Topology};
use quiver_resp::slot::{key_slot, SlotRange, SLOTS};
use tokio::sync::{watch, Notify};

/// One topology as the router routes by it.
#[derive(Debug, Default)]
pub struct SlotTable {
    /// 0: no topology yet.
    pub epoch: u64,
    /// Per node (in the topology's order), its address.
    pub addrs: Vec<Arc<str>>,
    /// Per slot, the index of its node (the chain's head) in `addrs`, or [`UNASSIGNED`].
    slots: Vec<u16>,
    /// With replicas: per slot, the index of its chain in `chains` (its shard's in the
    /// topology; [`UNASSIGNED`]: none).
    chain_of: Vec<u16>,
    /// With replicas, per shard of the topology, its chain's members' indices in `addrs`,
    /// tail first: where a read goes when its planner has a choice among the nodes it contacts
    /// (the tail's copy is always committed: a CRAQ read there never waits).
    chains: Vec<Vec<u16>>,
}

impl SlotTable {
    pub fn of(t: &Topology) -> SlotTable {
        let mut table = SlotTable {
            epoch: t.epoch,
            addrs: t.nodes.iter().map(|n| Arc::from(n.addr.as_str())).collect(),
            slots: t.slot_table(),
            chain_of: Vec::new(),
            chains: Vec::new(),
        };
        if t.replicas > 1 {
            table.chain_of = t.shard_table();
            table.chains = t
                .shards
                .iter()
                .map(|shard| {
                    shard
                        .chain
                        .iter()
                        .rev()
                        .filter_map(|id| t.nodes.iter().position(|n| &n.id == id))
                        .map(|i| i as u16)
                        .collect()
                })
                .collect();
        }
        table
    }

    /// The nodes that may serve a read of `key` (a READONLY connection's): the members of
    /// its slot's chain, tail first; its owner alone without replicas; none while its slot has
    /// no owner.
    pub fn readers_of(&self, key: &[u8]) -> &[u16] {
        let slot = key_slot(key) as usize;
        match self.chain_of.get(slot) {
            Some(&c) if c != UNASSIGNED => &self.chains[c as usize],
            _ => match self.slots.get(slot) {
                Some(n) if *n != UNASSIGNED => std::slice::from_ref(n),
                _ => &[],
            },
        }
    }

    /// The node serving `key` (its chain's head) and what a command on it is grouped by: with
    /// replicas, for a write, its chain (a node refuses a write whose keys lie in two of its
    /// chains: the write's message goes down one chain), else the node. `None` while its slot
    /// has no owner.
    pub fn route_of(&self, key: &[u8], write: bool) -> Option<(usize, usize)> {
        let slot = key_slot(key);
        let node = self.node_of_slot(slot)?;
        let unit = match self.chain_of.get(slot as usize) {
            Some(&c) if write && c != UNASSIGNED => c as usize,
            _ => node,
        };
        Some((unit, node))
    }

    /// Whether `node` holds a committed copy of `key` as a member of its chain (its owner
    /// without replicas): a node's copy of a range it is joining, or has handed away and not
    /// dropped yet, is not one.
    pub fn is_member_for(&self, node: usize, key: &[u8]) -> bool {
        self.readers_of(key).contains(&(node as u16))
    }

    /// The member of `key`'s chain that answers for it when every node is asked (KEYS, SCAN:
    /// each key once): the tail, whose copy is always committed.
    pub fn answers_for(&self, node: usize, key: &[u8]) -> bool {
        self.readers_of(key).first() == Some(&(node as u16))
    }

    /// The nodes that answer for some key when every node is asked ([`Self::answers_for`]),
    /// ascending: every node without replicas, the chains' tails with them.
    pub fn answering(&self) -> Vec<usize> {
        if self.chains.is_empty() {
            return (0..self.addrs.len()).collect();
        }
        let mut nodes: Vec<usize> = self
            .chains
            .iter()
            .filter_map(|c| c.first().map(|&n| n as usize))
            .collect();
        nodes.sort_unstable();
        nodes.dedup();
        nodes
    }

    /// The nodes FLUSHALL and FLUSHDB go to, ascending: every node without replicas (one
    /// importing a range holds keys of it too); with them, the chains' heads, each of which
    /// flushes the chains it heads down to their other members.
    pub fn flushing(&self) -> Vec<usize> {
        if self.chains.is_empty() {
            return (0..self.addrs.len()).collect();
        }
        let mut heads: Vec<usize> = self
            .slots
            .iter()
            .filter(|&&n| n != UNASSIGNED)
            .map(|&n| n as usize)
            .collect();
        heads.sort_unstable();
        heads.dedup();
        heads
    }

    /// Per node that answers for some key ([`Self::answers_for`]), the slot ranges it answers
    /// for, in slot order: what it counts of DBSIZE, each key once.
    pub fn answered_ranges(&self) -> Vec<(usize, Vec<SlotRange>)> {
        let mut out: Vec<(usize, Vec<SlotRange>)> = Vec::new();
        let mut run: Option<(usize, SlotRange)> = None;
        for slot in 0..SLOTS as u16 {
            let answering = match self.chain_of.get(slot as usize) {
                Some(&c) if c != UNASSIGNED => self.chains[c as usize].first().map(|&n| n as usize),
                _ => self.node_of_slot(slot),
            };
            run = match (run, answering) {
                (Some((n, r)), Some(a)) if n == a && r.hi + 1 == slot => {
                    Some((n, SlotRange { lo: r.lo, hi: slot }))
                }
                (prev, next) => {
                    if let Some((n, r)) = prev {
                        push_range(&mut out, n, r);
                    }
                    next.map(|a| (a, SlotRange { lo: slot, hi: slot }))
                }
            };
        }
        if let Some((n, r)) = run {
            push_range(&mut out, n, r);
        }
        out.sort_unstable_by_key(|e| e.0);
        out
    }

    /// Whether every range `node` is a member of has another member, who takes the node's
    /// place once it is found dead (else its ranges wait for it).
    pub fn has_others(&self, node: usize) -> bool {
        let n = node as u16;
        let mut found = false;
        for chain in self.chains.iter().filter(|c| c.contains(&n)) {
            if chain.len() < 2 {
                return false;
            }
            found = true;
        }
        found
    }

    /// The fewest copies any range has (its chain's members; 1 without replicas).
    pub fn copies_min(&self) -> usize {
        self.chains.iter().map(Vec::len).min().unwrap_or(1)
    }

    /// Whether reads may go to replicas (chains of more than one member).
    pub fn replicated(&self) -> bool {
        !self.chains.is_empty()
    }

    /// The node serving `key`, or `None` while its slot has no owner (or there is no
    /// topology).
    pub fn node_of(&self, key: &[u8]) -> Option<usize> {
        self.node_of_slot(key_slot(key))
    }

    pub fn node_of_slot(&self, slot: u16) -> Option<usize> {
        let n = *self.slots.get(slot as usize)?;
        (n != UNASSIGNED).then_some(n as usize)
    }
}

fn push_range(out: &mut Vec<(usize, Vec<SlotRange>)>, node: usize, r: SlotRange) {
    match out.iter_mut().find(|e| e.0 == node) {
        Some(e) => e.1.push(r),
        None => out.push((node, vec![r])),
    }
}

/// The table in use, replaced whole when a newer topology arrives.
#[derive(Default)]
pub struct Tables {
    current: RwLock<Arc<SlotTable>>,
    /// Wakes the follower to read etcd now (a node answered MOVED: the router is behind).
    pub refresh: Notify,
    /// Wakes the requests waiting for a newer table.
    pub changed: Notify,
}

impl Tables {
    pub fn current(&self) -> Arc<SlotTable> {
        self.current.read().clone()
    }

    /// Installs `t` unless the table in use is as new. Returns whether it was installed.
    pub fn adopt(&self, t: &Topology) -> bool {
        let mut current = self.current.write();
        if t.epoch <= current.epoch {
            return false;
        }
        *current = Arc::new(SlotTable::of(t));
        drop(current);
        self.changed.notify_waiters();
        true
    }

    /// Waits (at most `limit`) for a table newer than `epoch`, asking the follower to read
    /// etcd at once. Returns the table in use then.
    pub async fn newer_than(&self, epoch: u64, limit: Duration) -> Arc<SlotTable> {
        let changed = self.changed.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        let now = self.current();
        if now.epoch > epoch {
            return now;
        }
        self.refresh.notify_one();
        let _ = tokio::time::timeout(limit, changed).await;
        self.current()
    }
}

/// Follows the topology in etcd until `shutdown`: read, watch, read again on a refresh; on
/// any failure, wait and start again (the table in use stays).
pub async fn follow(
    tables: Arc<Tables>,
    etcd: EtcdSettings,
    on_change: impl Fn(&SlotTable) + Send + Sync + 'static,
    mut shutdown: watch::Receiver<bool>,
) {
    let ended = |n, outcome| follow::log_end("router", "routing by the last topology", n, outcome);
    let shutdown = async move {
        let _ = shutdown.wait_for(|&s| s).await;
    };
    let (tables, etcd, on_change) = (&tables, &etcd, &on_change);
    follow::follow(|| session(tables, etcd, on_change), ended, shutdown).await;
}

async fn session(
    tables: &Tables,
    etcd: &EtcdSettings,
    on_change: &(impl Fn(&SlotTable) + Send + Sync),
) -> Result<(), MetaError> {
    let meta = etcd.connect().await?;
    let adopt = |t: &Topology| {
        if tables.adopt(t) {
            let table = tables.current();
            tracing::info!(
                epoch = table.epoch,
                nodes = table.addrs.len(),
                "router: routing by a new topology"
            );
            on_change(&table);
        }
    };
    let first = meta.topology().await?;
    let after = first.as_ref().map(|v| v.revision);
    if let Some(v) = &first {
        adopt(&v.topology);
    }
    let mut watch = meta.watch(after).await?;
    tracing::info!(
        endpoints = %etcd.endpoints,
        epoch = tables.current().epoch,
        "router: watching etcd"
    );
    loop {
        tokio::select! {
            v = watch.next() => match v? {
                Some(v) => adopt(&v.topology),
                None => return Ok(()),
            },
            _ = tables.refresh.notified() => {
                if let Some(v) = meta.topology().await? {
                    adopt(&v.topology);
                }
            }
        }
    }
}
