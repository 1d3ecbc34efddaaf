//! The cluster's configuration as one document: the nodes, which chain of nodes owns each
//! range of hash slots, the migrations in flight, and the epoch that orders every version.
//!
//! It is stored in etcd as one JSON value (`meta`), so every change is one transaction that
//! replaces the whole document with the next epoch: no node ever sees half of a change, and
//! "newer" is one integer comparison. A node adopts a topology only when its epoch is higher
//! than the one it has.
//!
//! Slots are Redis Cluster's 16384 hash slots. A range is owned by a chain of up to `replicas`
//! nodes (FAWN-KV's chains, seed 001 chapter 4): writes enter at the head (the owner clients are
//! sent to) and flow down to the tail; each chain has a `version`, the epoch at which its
//! membership last changed, which every replication message carries (fencing).

use std::fmt;

use quiver_resp::redirect::split_addr;
use quiver_resp::slot::{SlotRange, SLOTS};
use serde::{Deserialize, Serialize};

/// Longest node id (Redis Cluster's ids are 40 hex characters).
pub const NODE_ID_MAX: usize = 40;
/// Most nodes in one cluster (Redis Cluster's recommended maximum).
pub const NODES_MAX: usize = 1000;
/// The longest chain a cluster may ask for (`replicas`).
pub const REPLICAS_MAX: u8 = 3;
/// Slot table entry of a slot no node owns.
pub const UNASSIGNED: u16 = u16::MAX;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TopologyError {
    #[error("invalid cluster topology: {0}")]
    Invalid(String),
    #[error("unknown node {0}")]
    UnknownNode(String),
    #[error("{0}")]
    Refused(String),
}

type Result<T> = std::result::Result<T, TopologyError>;

/// A member of the cluster: its id and the address clients are sent to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Node {
    pub id: String,
    /// `host:port`, as `-MOVED` and CLUSTER SLOTS give it to clients.
    pub addr: String,
    /// The incarnation: a number a node draws each time its process starts. In a
    /// registration, the running process's; in the topology, the one whose state the node's
    /// chains were built with (a restarted node may have lost what it had in flight, so it
    /// serves its chains only once the topology names its new run: see `repair`). In the
    /// topology, [`EXPELLED`] admits no process of the node.
    #[serde(default)]
    pub run: u64,
}

/// The run the topology gives a node it expels (no process draws it): the node stops
/// serving, and leaves its chains once it surely did (`repair`).
pub const EXPELLED: u64 = 0;

impl Node {
    /// The host and port of [`Node::addr`].
    pub fn host_port(&self) -> (&str, u16) {
        split_addr(&self.addr).unwrap_or((&self.addr, 0))
    }
}

/// Whether `id` can name a node: 1 to [`NODE_ID_MAX`] of `[0-9A-Za-z_-]` (it appears in
/// etcd keys and in CLUSTER NODES lines, which are split at spaces).
pub fn valid_node_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= NODE_ID_MAX
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// A range of slots and the chain that owns it: `chain[0]`, the head, takes the writes (the
/// owner clients are sent to); the last, the tail, acknowledges them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    #[serde(with = "range_text")]
    pub slots: SlotRange,
    pub chain: Vec<String>,
    /// The epoch at which this chain's membership last changed. Replication messages carry
    /// it; a node accepts one only at the version it serves by, so a node removed from the
    /// chain cannot make any member accept a write.
    #[serde(default)]
    pub version: u64,
    /// A node catching up with the range to join the chain as its tail (the tail streams
    /// the range to it; see `join`). Not a member: it serves nothing of the range yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub joining: Option<String>,
}

impl Shard {
    pub fn owner(&self) -> &str {
        &self.chain[0]
    }

    pub fn tail(&self) -> &str {
        &self.chain[self.chain.len() - 1]
    }

    /// `id`'s place in the chain (0: the head).
    pub fn position(&self, id: &str) -> Option<usize> {
        self.chain.iter().position(|c| c == id)
    }

    /// The member after `id` (where `id` sends its writes), if `id` is a member but not the
    /// tail.
    pub fn successor(&self, id: &str) -> Option<&str> {
        let i = self.position(id)?;
        self.chain.get(i + 1).map(String::as_str)
    }
}

/// A node's role as Redis's tools are shown it ([`Topology::redis_role`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RedisRole<'a> {
    Master,
    Replica { of: &'a str },
}

/// A range of slots on its way from one node to another. Ownership stays with `from` until
/// the transaction that ends the migration gives it to `to` (see `migrate`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Migration {
    #[serde(with = "range_text")]
    pub slots: SlotRange,
    pub from: String,
    pub to: String,
    /// Times the source has (re)started it. Each start is a change of the document, so a
    /// hand-over transaction computed before it (by a source that then crashed) can no
    /// longer apply.
    #[serde(default)]
    pub attempt: u32,
}

/// Where a range is to end up in a replicated cluster (`move-slots`, `rebalance` with
/// replicas: `topology::reshape`): served by `chain`, head first. The chains serving it now
/// change member by member until they are this one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Target {
    #[serde(with = "range_text")]
    pub slots: SlotRange,
    pub chain: Vec<String>,
}

/// One version of the cluster's configuration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Topology {
    /// Grows by one with every change.
    pub epoch: u64,
    /// Nodes per chain.
    pub replicas: u8,
    pub nodes: Vec<Node>,
    /// Disjoint, in slot order; slots in none are unassigned.
    pub shards: Vec<Shard>,
    #[serde(default)]
    pub migrations: Vec<Migration>,
    /// Nodes leaving the cluster (`remove-node` with replicas: `topology::leave`): each of
    /// their chains gets a replacement first, then they are spliced out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub leaving: Vec<String>,
    /// Ranges on their way to other chains (`topology::reshape`), disjoint, in slot order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<Target>,
}

impl Topology {
    /// The first topology of a cluster of `nodes`: epoch 1, the slots split evenly between
    /// them in the order given, each range's chain laid on the ring as FAWN-KV lays it: node
    /// `i` heads range `i`, and nodes `i+1 .. i+replicas-1` follow it, so every node is the
    /// head of one chain, the tail of another and in the middle of the rest of its chains.
    pub fn create(nodes: Vec<Node>, replicas: u8) -> Result<Topology> {
        if replicas == 0 || replicas > REPLICAS_MAX {
            return Err(TopologyError::Refused(format!(
                "--replicas {replicas}: chains of 1 to {REPLICAS_MAX} nodes"
            )));
        }
        if nodes.is_empty() {
            return Err(TopologyError::Invalid("a cluster needs a node".into()));
        }
        if nodes.len() < replicas as usize {
            return Err(TopologyError::Refused(format!(
                "--replicas {replicas} needs at least {replicas} nodes, not {}",
                nodes.len()
            )));
        }
        let n = nodes.len();
        let shards = SlotRange::even(n as u32)
            .into_iter()
            .enumerate()
            .map(|(i, slots)| Shard {
                slots,
                chain: (0..replicas as usize)
                    .map(|k| nodes[(i + k) % n].id.clone())
                    .collect(),
                version: 1,
                joining: None,
            })
            .collect();
        let t = Topology {
            epoch: 1,
            replicas,
            nodes,
            shards,
            migrations: Vec::new(),
            leaving: Vec::new(),
            targets: Vec::new(),
        };
        t.validate()?;
        Ok(t)
    }

    pub fn from_json(bytes: &[u8]) -> Result<Topology> {
        let t: Topology = serde_json::from_slice(bytes)
            .map_err(|e| TopologyError::Invalid(format!("not a topology document: {e}")))?;
        t.validate()?;
        Ok(t)
    }

    pub fn to_json(&self) -> Vec<u8> {
        // A struct of strings, integers and vectors always serializes.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Checks everything a node relies on: unique, well-formed nodes; disjoint shards in
    /// order whose chains name distinct members; migrations between members, of slots their
    /// source owns.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(TopologyError::Invalid(m));
        if self.nodes.len() > NODES_MAX {
            return bad(format!("{} nodes (at most {NODES_MAX})", self.nodes.len()));
        }
        if self.replicas == 0 {
            return bad("replicas must be at least 1".into());
        }
        for (i, n) in self.nodes.iter().enumerate() {
            if !valid_node_id(&n.id) {
                return bad(format!("node id {:?}", n.id));
            }
            if split_addr(&n.addr).is_none() {
                return bad(format!(
                    "node {} has address {:?} (host:port)",
                    n.id, n.addr
                ));
            }
            if self.nodes[..i]
                .iter()
                .any(|m| m.id == n.id || m.addr == n.addr)
            {
                return bad(format!("node {} ({}) listed twice", n.id, n.addr));
            }
        }
        let mut next = 0u32;
        for s in &self.shards {
            if (s.slots.lo as u32) < next {
                return bad(format!("slots {} overlap or are out of order", s.slots));
            }
            next = s.slots.hi as u32 + 1;
            // A chain shorter than `replicas` has lost members (until new ones catch up); an
            // empty one would have lost the range's data. A member on its way out (leaving,
            // or not in the range's target) is replaced before it goes: one more meanwhile.
            let longest = self.replicas as usize + usize::from(self.has_extra(s));
            if s.chain.is_empty() || s.chain.len() > longest {
                return bad(format!(
                    "slots {}: a chain of {} nodes, replicas is {}",
                    s.slots,
                    s.chain.len(),
                    self.replicas
                ));
            }
            if s.version > self.epoch {
                return bad(format!(
                    "slots {}: chain version {} after the epoch {}",
                    s.slots, s.version, self.epoch
                ));
            }
            for (i, id) in s.chain.iter().enumerate() {
                self.node_index(id)?;
                if s.chain[..i].contains(id) {
                    return bad(format!("slots {}: node {id} twice in a chain", s.slots));
                }
            }
            if let Some(id) = &s.joining {
                self.node_index(id)?;
                if s.chain.contains(id) || !self.wants_member(s) {
                    return bad(format!(
                        "slots {}: node {id} joins a chain it is in, or a full one",
                        s.slots
                    ));
                }
            }
        }
        for id in &self.leaving {
            self.node_index(id)?;
        }
        self.validate_targets()?;
        for m in &self.migrations {
            self.node_index(&m.to)?;
            if m.from == m.to {
                return bad(format!(
                    "migration of {} from {} to itself",
                    m.slots, m.from
                ));
            }
            if self.owner_of_range(m.slots) != Some(m.from.as_str()) {
                return bad(format!(
                    "migration of {} from {}, which does not own them",
                    m.slots, m.from
                ));
            }
        }
        Ok(())
    }

    pub fn node_index(&self, id: &str) -> Result<usize> {
        self.nodes
            .iter()
            .position(|n| n.id == id)
            .ok_or_else(|| TopologyError::UnknownNode(id.to_string()))
    }

    pub fn node(&self, id: &str) -> Option<&Node> {
        self.nodes.iter().find(|n| n.id == id)
    }

    /// Per slot, the index in [`Topology::nodes`] of its owner, or [`UNASSIGNED`].
    pub fn slot_table(&self) -> Vec<u16> {
        let mut table = vec![UNASSIGNED; SLOTS as usize];
        for s in &self.shards {
            // validate() checked the chain's members.
            let owner = self.node_index(s.owner()).map_or(UNASSIGNED, |i| i as u16);
            table[s.slots.lo as usize..=s.slots.hi as usize].fill(owner);
        }
        table
    }

    /// Per slot, the index in [`Topology::shards`] of the shard holding it, or [`UNASSIGNED`].
    pub fn shard_table(&self) -> Vec<u16> {
        let mut table = vec![UNASSIGNED; SLOTS as usize];
        for (i, s) in self.shards.iter().enumerate() {
            table[s.slots.lo as usize..=s.slots.hi as usize].fill(i as u16);
        }
        table
    }

    /// Slots some node owns.
    pub fn assigned_slots(&self) -> u32 {
        self.shards.iter().map(|s| s.slots.len()).sum()
    }

    /// The ranges `id` owns (as head), in slot order.
    pub fn ranges_of(&self, id: &str) -> Vec<SlotRange> {
        self.shards
            .iter()
            .filter(|s| s.owner() == id)
            .map(|s| s.slots)
            .collect()
    }

    /// How Redis's tools are shown node `id` (CLUSTER NODES, ROLE, INFO replication; see
    /// docs/cluster.md, "What Redis tools see"): a master of the ranges it heads; a node that
    /// heads none but is a member of chains, a replica of the head of the first of them; a
    /// node in no chain, a master without slots.
    pub fn redis_role(&self, id: &str) -> RedisRole<'_> {
        if self.shards.iter().any(|s| s.owner() == id) {
            return RedisRole::Master;
        }
        match self.shards.iter().find(|s| s.position(id).is_some()) {
            Some(s) => RedisRole::Replica { of: s.owner() },
            None => RedisRole::Master,
        }
    }

    /// The ranges whose keys node `id` counts in DBSIZE, as the Redis instance it is shown
    /// as: a master's, those it heads; a replica's, those of its master's chains it is a
    /// member of. Summed over the masters (`redis-cli --cluster info`), each key once.
    pub fn counted_ranges(&self, id: &str) -> Vec<SlotRange> {
        match self.redis_role(id) {
            RedisRole::Master => self.ranges_of(id),
            RedisRole::Replica { of } => self
                .shards
                .iter()
                .filter(|s| s.owner() == of && s.position(id).is_some())
                .map(|s| s.slots)
                .collect(),
        }
    }

    /// The nodes node `id` sends its chains' writes to (its successors, each once, in the
    /// topology's node order): its replicas in ROLE and INFO replication.
    pub fn successors_of(&self, id: &str) -> Vec<&Node> {
        self.nodes
            .iter()
            .filter(|n| self.shards.iter().any(|s| s.successor(id) == Some(&n.id)))
            .collect()
    }

    /// The one node owning every slot of `range`, if one does.
    pub fn owner_of_range(&self, range: SlotRange) -> Option<&str> {
        let mut owner = None;
        let mut next = range.lo as u32;
        for s in &self.shards {
            if s.slots.hi < range.lo || s.slots.lo > range.hi {
                continue;
            }
            if s.slots.lo as u32 > next {
                return None; // a gap
            }
            match owner {
                None => owner = Some(s.owner()),
                Some(o) if o != s.owner() => return None,
                Some(_) => {}
            }
            next = s.slots.hi as u32 + 1;
        }
        (next > range.hi as u32).then_some(owner).flatten()
    }

    /// The next version with `node` a member owning nothing.
    pub fn with_node(&self, node: Node) -> Result<Topology> {
        let mut t = self.next();
        t.nodes.push(node);
        t.validate()?;
        Ok(t)
    }

    /// The next version with member `id` reached at `addr` (a node restarted on another
    /// address).
    pub fn with_address(&self, id: &str, addr: &str) -> Result<Topology> {
        let i = self.node_index(id)?;
        let mut t = self.next();
        t.nodes[i].addr = addr.to_string();
        t.validate()?;
        Ok(t)
    }

    /// The next version without `id`, which must own nothing and take part in no migration.
    pub fn without_node(&self, id: &str) -> Result<Topology> {
        self.node_index(id)?;
        if self.shards.iter().any(|s| s.chain.iter().any(|c| c == id)) {
            return Err(TopologyError::Refused(format!(
                "node {id} still owns slots: move them away first"
            )));
        }
        if self.migrations.iter().any(|m| m.from == id || m.to == id) {
            return Err(TopologyError::Refused(format!(
                "node {id} takes part in a migration"
            )));
        }
        let mut t = self.next();
        t.nodes.retain(|n| n.id != id);
        t.leaving.retain(|n| n != id);
        Ok(t)
    }

    /// The next version with `id` appended to the chain of exactly `slots` as its tail (it
    /// has caught up with the range), at a new version.
    pub fn with_tail(&self, slots: SlotRange, id: &str) -> Result<Topology> {
        self.node_index(id)?;
        let mut t = self.next();
        let version = t.epoch;
        let replicas = t.replicas as usize;
        let Some(s) = t.shards.iter_mut().find(|s| s.slots == slots) else {
            return Err(TopologyError::Refused(format!("no chain of slots {slots}")));
        };
        if s.position(id).is_some() {
            return Err(TopologyError::Refused(format!(
                "node {id} is already in the chain of slots {slots}"
            )));
        }
        if !self.wants_member(s) {
            return Err(TopologyError::Refused(format!(
                "the chain of slots {slots} already has {replicas} nodes that stay"
            )));
        }
        s.chain.push(id.to_string());
        s.version = version;
        s.joining = None;
        t.validate()?;
        Ok(t)
    }

    /// The next version with `id` catching up with the chain of exactly `slots` to join it
    /// as tail (the chain itself, and its version, unchanged).
    pub fn with_joining(&self, slots: SlotRange, id: &str) -> Result<Topology> {
        self.node_index(id)?;
        let mut t = self.next();
        let Some(s) = t.shards.iter_mut().find(|s| s.slots == slots) else {
            return Err(TopologyError::Refused(format!("no chain of slots {slots}")));
        };
        s.joining = Some(id.to_string());
        t.validate()?;
        Ok(t)
    }

    /// The next version where the join of `id` to the chain of `slots` is over: `id` its new
    /// tail (`completed`, at a new chain version) or not joining any more.
    pub fn with_join_ended(&self, slots: SlotRange, id: &str, completed: bool) -> Result<Topology> {
        let joining = self
            .shards
            .iter()
            .any(|s| s.slots == slots && s.joining.as_deref() == Some(id));
        if !joining {
            return Err(TopologyError::Refused(format!(
                "node {id} is not joining the chain of slots {slots}"
            )));
        }
        if completed {
            return self.with_tail(slots, id);
        }
        let mut t = self.next();
        for s in t.shards.iter_mut().filter(|s| s.slots == slots) {
            s.joining = None;
        }
        Ok(t)
    }

    /// The joins in flight: (slots, the joining node, the chain's tail, which streams the
    /// range to it).
    pub fn joins(&self) -> impl Iterator<Item = (SlotRange, &str, &str)> {
        self.shards
            .iter()
            .filter_map(|s| Some((s.slots, s.joining.as_deref()?, s.tail())))
    }

    /// The next version with a migration of `slots` from their owner to `to` recorded.
    pub fn with_migration(&self, slots: SlotRange, to: &str) -> Result<Topology> {
        self.node_index(to)?;
        if self.replicas > 1 {
            // With replicas a range moves member by member (`with_targets`), never as a copy
            // from one node to another.
            return Err(TopologyError::Refused(format!(
                "with replicas ({}) slots move to a chain (a target), not to one node",
                self.replicas
            )));
        }
        let Some(from) = self.owner_of_range(slots) else {
            return Err(TopologyError::Refused(format!(
                "slots {slots} are not owned by one node: move each owner's part on its own"
            )));
        };
        if from == to {
            return Err(TopologyError::Refused(format!(
                "node {to} already owns slots {slots}"
            )));
        }
        if let Some(m) = self.migration_overlapping(slots) {
            return Err(TopologyError::Refused(format!(
                "slots {} are already moving from {} to {}",
                m.slots, m.from, m.to
            )));
        }
        let mut t = self.next();
        t.migrations.push(Migration {
            slots,
            from: from.to_string(),
            to: to.to_string(),
            attempt: 0,
        });
        Ok(t)
    }

    /// The next version with the migration of exactly `slots` counted as started once more.
    pub fn with_migration_attempt(&self, slots: SlotRange) -> Result<Topology> {
        let mut t = self.next();
        let Some(m) = t.migrations.iter_mut().find(|m| m.slots == slots) else {
            return Err(TopologyError::Refused(format!(
                "no migration of slots {slots}"
            )));
        };
        m.attempt += 1;
        Ok(t)
    }

    /// The migrations whose source is `id`.
    pub fn migrations_from<'a>(&'a self, id: &'a str) -> impl Iterator<Item = &'a Migration> {
        self.migrations.iter().filter(move |m| m.from == id)
    }

    pub fn migration_overlapping(&self, slots: SlotRange) -> Option<&Migration> {
        self.migrations.iter().find(|m| m.slots.overlaps(&slots))
    }

    /// The next version with the migration of exactly `slots` ended: ownership given to its
    /// target when `completed`, left with its source otherwise.
    pub fn with_migration_ended(&self, slots: SlotRange, completed: bool) -> Result<Topology> {
        let Some(i) = self.migrations.iter().position(|m| m.slots == slots) else {
            return Err(TopologyError::Refused(format!(
                "no migration of slots {slots}"
            )));
        };
        let mut t = self.next();
        let m = t.migrations.remove(i);
        if completed {
            let version = t.epoch;
            t.assign(slots, vec![m.to], version);
        }
        t.validate()?;
        Ok(t)
    }

    /// Gives `slots` to `chain`: the shards around them are cut at the range's edges, and
    /// neighbours with the same chain joined (so the document stays as short as the ring).
    /// `version` is the new chain's (this change's epoch).
    fn assign(&mut self, slots: SlotRange, chain: Vec<String>, version: u64) {
        let mut shards = Vec::with_capacity(self.shards.len() + 2);
        for s in self.shards.drain(..) {
            if s.slots.hi < slots.lo || s.slots.lo > slots.hi {
                shards.push(s);
                continue;
            }
            if s.slots.lo < slots.lo {
                shards.push(Shard {
                    slots: SlotRange {
                        lo: s.slots.lo,
                        hi: slots.lo - 1,
                    },
                    chain: s.chain.clone(),
                    version: s.version,
                    joining: None,
                });
            }
            if s.slots.hi > slots.hi {
                shards.push(Shard {
                    slots: SlotRange {
                        lo: slots.hi + 1,
                        hi: s.slots.hi,
                    },
                    chain: s.chain,
                    version: s.version,
                    joining: None,
                });
            }
        }
        shards.push(Shard {
            slots,
            chain,
            version,
            joining: None,
        });
        shards.sort_by_key(|s| s.slots.lo);
        let mut joined: Vec<Shard> = Vec::with_capacity(shards.len());
        for s in shards {
            match joined.last_mut() {
                Some(last)
                    if last.chain == s.chain && last.slots.hi as u32 + 1 == s.slots.lo as u32 =>
                {
                    last.slots.hi = s.slots.hi;
                    last.version = last.version.max(s.version);
                }
                _ => joined.push(s),
            }
        }
        self.shards = joined;
    }

    /// A copy with the epoch one higher: the start of every change.
    fn next(&self) -> Topology {
        let mut t = self.clone();
        t.epoch += 1;
        t
    }

    /// Moves that give every node its even share of the slots: each node above its share
    /// hands its highest slots to the nodes below theirs, in node order. Shares follow
    /// [`SlotRange::even`] sizes; every range moved is owned by one node.
    pub fn rebalance_plan(&self) -> Vec<(SlotRange, String)> {
        let n = self.nodes.len();
        if n == 0 {
            return Vec::new();
        }
        let target: Vec<u32> = SlotRange::even(n as u32).iter().map(|r| r.len()).collect();
        let mut have: Vec<u32> = self
            .nodes
            .iter()
            .map(|node| self.ranges_of(&node.id).iter().map(|r| r.len()).sum())
            .collect();
        let mut plan = Vec::new();
        let mut owned: Vec<Vec<SlotRange>> = self
            .nodes
            .iter()
            .map(|node| self.ranges_of(&node.id))
            .collect();
        for to in 0..n {
            while have[to] < target[to] {
                let Some(from) = (0..n).find(|&f| have[f] > target[f]) else {
                    return plan;
                };
                let want = (target[to] - have[to]).min(have[from] - target[from]);
                // Take from the top of the giver's highest range.
                let Some(last) = owned[from].last_mut() else {
                    return plan;
                };
                let take = want.min(last.len());
                let range = SlotRange {
                    lo: (last.hi as u32 + 1 - take) as u16,
                    hi: last.hi,
                };
                if take == last.len() {
                    owned[from].pop();
                } else {
                    last.hi = range.lo - 1;
                }
                have[from] -= take;
                have[to] += take;
                plan.push((range, self.nodes[to].id.clone()));
            }
        }
        plan
    }
}

impl fmt::Display for Topology {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "epoch {}, {} node(s), replicas {}",
            self.epoch,
            self.nodes.len(),
            self.replicas
        )?;
        for s in &self.shards {
            writeln!(
                f,
                "  slots {:>11}  {}  (chain version {})",
                s.slots.to_string(),
                s.chain.join(" -> "),
                s.version
            )?;
            if let Some(id) = &s.joining {
                writeln!(
                    f,
                    "  slots {:>11}  {id} joining as tail",
                    s.slots.to_string()
                )?;
            }
        }
        for m in &self.migrations {
            writeln!(f, "  moving {}: {} -> {}", m.slots, m.from, m.to)?;
        }
        for id in &self.leaving {
            writeln!(
                f,
                "  {id} leaving: replaced in each of its chains, then removed"
            )?;
        }
        for target in &self.targets {
            writeln!(
                f,
                "  slots {:>11}  moving to {}",
                target.slots.to_string(),
                target.chain.join(" -> ")
            )?;
        }
        Ok(())
    }
}

/// A slot range as Redis writes one, `lo-hi`.
mod range_text {
    use quiver_resp::slot::SlotRange;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(r: &SlotRange, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&r.to_string())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<SlotRange, D::Error> {
        let text = String::deserialize(d)?;
        SlotRange::parse(&text).ok_or_else(|| {
            serde::de::Error::custom(format!("slot range {text:?} (lo-hi, 0..16383)"))
        })
    }
}

mod heads;
mod leave;
mod repair;
mod reshape;
pub use repair::{Finding, Repair};
pub use reshape::same_chain;

#[cfg(test)]
mod tests;
