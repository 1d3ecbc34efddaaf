//! Cluster mode (`cluster-enabled`): this node's identity, the topology it serves by, and the
//! routing rule every command on keys passes.
//!
//! The topology (which node owns which hash slots, at which epoch) comes from etcd through
//! the node's agent (`agent`); a node adopts a version only when its epoch is higher than the
//! one it has, and keeps the last one in its data directory (`CLUSTER`), so that a node that
//! restarts while etcd is unreachable serves the slots it owned at its last epoch.
//!
//! A range being handed over to another node is **frozen** for the last step of its move:
//! writes to it wait (their connection's run holds them, boundedly, then answers TRYAGAIN)
//! until the hand-over is decided, and reads too from the moment the hand-over may commit.
//! Every run of commands holds the [`ClusterNode::gate`] for reading from its routing check to
//! its last reply; freezing takes it for writing, so once a range is frozen no write that
//! passed its check earlier is still running.
//!
//! Ranges this node held (owned, or was importing) and no longer does are **dropped**: each
//! adoption adds them to the pending drops (kept in `CLUSTER`, so a restart finishes them),
//! which the agent deletes, never touching a slot the node owns or imports by then.
//!
//! The routing rule ([`ClusterNode::route`]): a command runs here when this node owns every
//! one of its keys, whatever their slots — a deliberate difference from Redis Cluster, which
//! refuses keys of different slots (CROSSSLOT) even on one node; accepting them is what keeps
//! a multiget one vector per node. Otherwise the client is sent where the keys are
//! (`-MOVED slot host:port`, the first key's slot) when one node owns them all, and refused
//! with CROSSSLOT when they span nodes. A slot no node owns, or no topology at all, is
//! CLUSTERDOWN.
//!
//! In a replicated cluster (`replicas` > 1) a node also serves its ranges only while it
//! **holds its lease** in etcd and the topology names its current **run** (the number it
//! drew at start). The manager takes a node out of its chains only after its lease expired
//! (or when it restarted, at a new run); the node stops serving before that moment by its own
//! clock ([`ClusterNode::leased`]), so a node that was removed — stalled, partitioned — never
//! answers from a copy the chain has moved past. A restarted node stays out until the
//! topology readmits it (`quiver_cluster::topology::repair`).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};
use quiver_cluster::topology::{valid_node_id, Node, Topology, UNASSIGNED};
use quiver_store::slot::{key_slot, SlotRange, SLOTS};
use serde::{Deserialize, Serialize};

use crate::chain::Chains;

/// The file in the data directory holding the node's id and its last topology.
pub const CLUSTER_FILE: &str = "CLUSTER";

pub const CROSSSLOT: &str = "CROSSSLOT Keys in request don't hash to the same slot";
pub const DOWN_NO_TOPOLOGY: &str = "CLUSTERDOWN The cluster is down";
pub const DOWN_UNSERVED: &str = "CLUSTERDOWN Hash slot not served";
pub const DOWN_NO_LEASE: &str =
    "CLUSTERDOWN This node holds no lease in etcd now: it may have been taken out of its chains";
pub const DOWN_NOT_ADMITTED: &str =
    "CLUSTERDOWN This node restarted and is not back in its chains yet";

/// Part of a lease's TTL a node counts on: it stops serving a fifth of the TTL before etcd
/// can expire the lease (its clock and etcd's may run apart a little; a run may be
/// descheduled between its check and its read).
const LEASE_USE_NUM: u32 = 4;
const LEASE_USE_DEN: u32 = 5;

/// Where a command's keys are served.
#[derive(Debug, PartialEq, Eq)]
pub enum Route {
    /// Every key is this node's (or there are none).
    Local,
    /// One other node owns every key: `-MOVED slot addr`.
    Moved { slot: u16, addr: String },
    /// The keys span nodes.
    CrossSlot,
    /// A key's slot is unassigned, or there is no topology yet: the reply's text.
    Down(&'static str),
    /// A write to a range frozen for its hand-over (or a read, while the hand-over's outcome
    /// is unknown): wait for the thaw, then route again.
    Frozen { slot: u16 },
}

/// The topology as this node serves by it.
pub struct View {
    pub topology: Option<Topology>,
    /// This node's index in `topology.nodes`, when a member.
    pub me: Option<u16>,
    /// Per slot, the owner's (the chain head's) index in `topology.nodes` (or `UNASSIGNED`).
    table: Vec<u16>,
    /// Per slot, the index of its shard in `topology.shards` (or `UNASSIGNED`).
    shard: Vec<u16>,
    /// Per slot, whether this node is in its chain after the head (a replica: it serves
    /// reads of READONLY connections).
    replica: Vec<bool>,
    /// Whether the topology names this node's current run (or needs none: `replicas` 1).
    admitted: bool,
}

impl View {
    fn of(topology: Option<Topology>, my_id: &str, my_run: u64) -> View {
        let table = topology
            .as_ref()
            .map(Topology::slot_table)
            .unwrap_or_default();
        let me = topology
            .as_ref()
            .and_then(|t| t.node_index(my_id).ok())
            .map(|i| i as u16);
        let admitted = topology
            .as_ref()
            .is_some_and(|t| t.replicas <= 1 || t.node(my_id).is_some_and(|n| n.run == my_run));
        let shard = topology
            .as_ref()
            .map(Topology::shard_table)
            .unwrap_or_default();
        let mut replica = Vec::new();
        if let Some(t) = &topology {
            replica = vec![false; SLOTS as usize];
            for s in t
                .shards
                .iter()
                .filter(|s| s.position(my_id).is_some_and(|p| p > 0))
            {
                replica[s.slots.lo as usize..=s.slots.hi as usize].fill(true);
            }
        }
        View {
            topology,
            me,
            table,
            shard,
            replica,
            admitted,
        }
    }

    pub fn epoch(&self) -> u64 {
        self.topology.as_ref().map_or(0, |t| t.epoch)
    }

    /// The owner of `slot`, if any.
    pub fn owner(&self, slot: u16) -> Option<&Node> {
        let t = self.topology.as_ref()?;
        let i = *self.table.get(slot as usize)?;
        (i != UNASSIGNED).then(|| &t.nodes[i as usize])
    }

    /// Per slot, whether this node owns it or is importing it (`id` is this node's).
    fn held(&self, id: &str) -> Vec<bool> {
        let mut held = vec![false; SLOTS as usize];
        let Some(t) = &self.topology else {
            return held;
        };
        for (slot, &owner) in self.table.iter().enumerate() {
            held[slot] = (owner != UNASSIGNED && Some(owner) == self.me) || self.replica[slot];
        }
        for m in t.migrations.iter().filter(|m| m.to == id) {
            held[m.slots.lo as usize..=m.slots.hi as usize].fill(true);
        }
        for (slots, _, _) in t.joins().filter(|(_, joiner, _)| *joiner == id) {
            held[slots.lo as usize..=slots.hi as usize].fill(true);
        }
        held
    }
}

/// The maximal runs of slots for which `f` holds.
pub fn slot_runs(f: impl Fn(usize) -> bool) -> Vec<SlotRange> {
    let mut runs = Vec::new();
    let mut start = None;
    for slot in 0..=SLOTS as usize {
        let inside = slot < SLOTS as usize && f(slot);
        match (inside, start) {
            (true, None) => start = Some(slot),
            (false, Some(lo)) => {
                runs.push(SlotRange {
                    lo: lo as u16,
                    hi: (slot - 1) as u16,
                });
                start = None;
            }
            _ => {}
        }
    }
    runs
}

/// This node in its cluster.
pub struct ClusterNode {
    pub id: String,
    /// The address clients are sent to (`--advertise`, or the bound address).
    pub addr: String,
    view: RwLock<Arc<View>>,
    /// Whether the agent is connected to etcd and watching.
    etcd_connected: AtomicBool,
    /// The data directory (where [`CLUSTER_FILE`] is kept).
    dir: PathBuf,
    pub started: Instant,
    /// Held for reading by every run of commands, for writing to freeze a range.
    pub gate: tokio::sync::RwLock<()>,
    /// Ranges whose writes wait ([`ClusterNode::freeze`]), and with `reads` set whose reads
    /// wait too; `frozen_count` is their number, read first so that routing takes no lock
    /// while nothing is frozen.
    frozen: Mutex<Vec<Frozen>>,
    frozen_count: AtomicUsize,
    /// Woken when a range thaws.
    pub thawed: tokio::sync::Notify,
    /// Ranges to delete from the store (see the module documentation).
    pending_drops: Mutex<Vec<SlotRange>>,
    /// Migrations from this node whose task runs (the agent starts one per migration).
    pub running_moves: Mutex<HashSet<SlotRange>>,
    /// Joins to chains this node is the tail of whose task runs (`agent::join`).
    pub running_joins: Mutex<HashSet<SlotRange>>,
    /// Chains this node is handing the head role of over, or splitting (`agent::drained`).
    pub running_handoffs: Mutex<HashSet<SlotRange>>,
    /// Asks the agent to read the topology from etcd now (a node handing a range to this
    /// one says it has).
    pub refresh: tokio::sync::Notify,
    /// Serializes the store operations on whole ranges: an import's batch, a drop.
    pub range_ops: Mutex<()>,
    /// Serializes [`ClusterNode::save`]: the agent, a move's thread and a drop save from
    /// their own threads, through one temporary file.
    saving: Mutex<()>,
    /// This node's part in the chains it is a member of (replication).
    pub chains: Chains,
    /// This process's run (see the module documentation).
    pub run: u64,
    /// Until when (nanoseconds after `started`) the node surely holds its lease; 0: none.
    lease_until: AtomicU64,
    /// The etcd revision of the newest topology the agent has seen (adopted, or found no
    /// newer than the one served): a lease renewal counts only up to it.
    seen_revision: AtomicI64,
}

/// A range whose writes (and reads, with `reads`) wait.
#[derive(Clone, Copy, Debug)]
struct Frozen {
    range: SlotRange,
    reads: bool,
}

/// What [`CLUSTER_FILE`] holds.
#[derive(Serialize, Deserialize)]
struct Saved {
    node_id: String,
    topology: Option<Topology>,
    #[serde(default, with = "ranges_text")]
    pending_drops: Vec<SlotRange>,
}

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("{path}: {what}")]
    File { path: String, what: String },
    #[error("cluster-node-id {0:?}: 1 to 40 of [0-9A-Za-z_-]")]
    BadId(String),
    #[error("the data directory {dir} belongs to cluster node {saved}, not {given}")]
    OtherNode {
        dir: String,
        saved: String,
        given: String,
    },
}

impl ClusterNode {
    /// The node of data directory `dir`: its id is `id` when given (it must match the one
    /// the directory was created with), else the directory's, else a new one; its topology is
    /// the last one it saved.
    pub fn open(dir: &Path, id: Option<&str>, addr: String) -> Result<ClusterNode, ClusterError> {
        let path = dir.join(CLUSTER_FILE);
        let file_error = |what: String| ClusterError::File {
            path: path.display().to_string(),
            what,
        };
        let saved: Option<Saved> = match std::fs::read(&path) {
            Ok(bytes) => Some(
                serde_json::from_slice(&bytes)
                    .map_err(|e| file_error(format!("not a cluster state file: {e}")))?,
            ),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(file_error(e.to_string())),
        };
        if let Some(t) = saved.as_ref().and_then(|s| s.topology.as_ref()) {
            t.validate().map_err(|e| file_error(e.to_string()))?;
        }
        let id = match (id, &saved) {
            (Some(given), Some(s)) if given != s.node_id => {
                return Err(ClusterError::OtherNode {
                    dir: dir.display().to_string(),
                    saved: s.node_id.clone(),
                    given: given.to_string(),
                })
            }
            (Some(given), _) => given.to_string(),
            (None, Some(s)) => s.node_id.clone(),
            (None, None) => quiver_service::service::new_id(),
        };
        if !valid_node_id(&id) {
            return Err(ClusterError::BadId(id));
        }
        let (topology, pending_drops) =
            saved.map_or((None, Vec::new()), |s| (s.topology, s.pending_drops));
        // A move from this node that a previous run left unfinished may have sent the
        // transaction that hands the range over, its outcome unknown: its writes wait until
        // the move's task has changed the topology once more (after which that transaction
        // cannot apply) or found it applied.
        // Its reads wait as well: if that transaction applied, the target may be serving the
        // range already.
        let frozen: Vec<Frozen> = topology
            .as_ref()
            .map(|t| {
                t.migrations_from(&id)
                    .map(|m| Frozen {
                        range: m.slots,
                        reads: true,
                    })
                    .collect()
            })
            .unwrap_or_default();
        let run = new_run();
        let node = ClusterNode {
            view: RwLock::new(Arc::new(View::of(topology, &id, run))),
            id,
            addr,
            etcd_connected: AtomicBool::new(false),
            dir: dir.to_path_buf(),
            started: Instant::now(),
            gate: tokio::sync::RwLock::new(()),
            frozen_count: AtomicUsize::new(frozen.len()),
            frozen: Mutex::new(frozen),
            thawed: tokio::sync::Notify::new(),
            pending_drops: Mutex::new(pending_drops),
            running_moves: Mutex::new(HashSet::new()),
            running_joins: Mutex::new(HashSet::new()),
            running_handoffs: Mutex::new(HashSet::new()),
            refresh: tokio::sync::Notify::new(),
            range_ops: Mutex::new(()),
            saving: Mutex::new(()),
            chains: Chains::default(),
            run,
            lease_until: AtomicU64::new(0),
            seen_revision: AtomicI64::new(0),
        };
        if let Some(t) = &node.view().topology {
            node.chains.adopt(t, &node.id);
        }
        node.save()?;
        Ok(node)
    }

    /// Freezes `range` (see the module documentation): returns once no write to it is in
    /// flight.
    pub async fn freeze(&self, range: SlotRange) {
        let _drained = self.gate.write().await;
        let mut frozen = self.frozen.lock();
        frozen.push(Frozen {
            range,
            reads: false,
        });
        self.frozen_count.store(frozen.len(), Ordering::SeqCst);
    }

    /// Makes reads of the frozen `range` wait too: from the moment its hand-over may commit
    /// until this node knows the outcome, the target may be serving the range (and taking
    /// writes), so a read here could miss them. Reads already running started before the
    /// hand-over, so they need no draining.
    pub fn freeze_reads(&self, range: SlotRange) {
        for f in self.frozen.lock().iter_mut().filter(|f| f.range == range) {
            f.reads = true;
        }
    }

    /// Lets writes to `range` run again (they route anew: MOVED once the range is gone).
    pub fn thaw(&self, range: SlotRange) {
        let mut frozen = self.frozen.lock();
        frozen.retain(|f| f.range != range);
        self.frozen_count.store(frozen.len(), Ordering::SeqCst);
        drop(frozen);
        self.thawed.notify_waiters();
    }

    pub fn frozen(&self) -> Vec<SlotRange> {
        self.frozen.lock().iter().map(|f| f.range).collect()
    }

    /// Whether a write (`write`) or a read of `slot` must wait (a chain's messages to a
    /// frozen range are refused).
    pub fn is_frozen(&self, slot: u16, write: bool) -> bool {
        self.frozen_count.load(Ordering::SeqCst) > 0
            && self
                .frozen
                .lock()
                .iter()
                .any(|f| f.range.contains(slot) && (write || f.reads))
    }

    /// The ranges waiting to be dropped.
    pub fn pending_drops(&self) -> Vec<SlotRange> {
        self.pending_drops.lock().clone()
    }

    /// `range` was dropped: forget it (and save).
    pub fn dropped(&self, range: SlotRange) -> Result<(), ClusterError> {
        self.pending_drops.lock().retain(|r| *r != range);
        self.save()
    }

    /// The slots of `range` this node neither owns nor imports now: what a drop may delete.
    pub fn droppable(&self, range: SlotRange) -> Vec<SlotRange> {
        let held = self.view().held(&self.id);
        slot_runs(|s| range.contains(s as u16) && !held[s])
    }

    /// The topology served now.
    pub fn view(&self) -> Arc<View> {
        self.view.read().clone()
    }

    pub fn me(&self) -> Node {
        Node {
            id: self.id.clone(),
            addr: self.addr.clone(),
            run: self.run,
        }
    }

    /// The agent has seen the topology of etcd revision `revision`.
    pub fn saw_topology(&self, revision: i64) {
        self.seen_revision.fetch_max(revision, Ordering::SeqCst);
    }

    /// The lease renewed by a request sent at `sent` holds for `ttl` from then: the node
    /// counts on [`LEASE_USE_NUM`]/[`LEASE_USE_DEN`] of it — only if the topology in etcd
    /// after the renewal, at `topology_revision`, is one the node has seen. So a topology
    /// written at time t (one that expels the node, say) is seen, or the node stops serving,
    /// before t + TTL: a renewal sent before t counts up to 4/5 TTL after it, one sent after
    /// t only once that version is seen. Returns whether it counted.
    pub fn lease_renewed(&self, sent: Instant, ttl: Duration, topology_revision: i64) -> bool {
        if topology_revision > self.seen_revision.load(Ordering::SeqCst) {
            return false;
        }
        let until =
            sent.saturating_duration_since(self.started) + ttl * LEASE_USE_NUM / LEASE_USE_DEN;
        self.lease_until
            .fetch_max(until.as_nanos() as u64, Ordering::SeqCst);
        true
    }

    /// Whether the node surely holds its lease now.
    pub fn leased(&self) -> bool {
        (self.started.elapsed().as_nanos() as u64) < self.lease_until.load(Ordering::SeqCst)
    }

    /// Why this node may not serve its ranges now (see the module documentation), if it may
    /// not.
    pub fn not_serving(&self, view: &View) -> Option<&'static str> {
        match &view.topology {
            Some(t) if t.replicas > 1 => {
                if !view.admitted {
                    Some(DOWN_NOT_ADMITTED)
                } else if !self.leased() {
                    Some(DOWN_NO_LEASE)
                } else {
                    None
                }
            }
            _ => None,
        }
    }

    pub fn etcd_connected(&self) -> bool {
        self.etcd_connected.load(Ordering::SeqCst)
    }

    pub(crate) fn set_etcd_connected(&self, connected: bool) {
        self.etcd_connected.store(connected, Ordering::SeqCst);
    }

    /// Serves by `topology` from now on if its epoch is higher than the current one (an older
    /// or equal one is ignored: versions only move forward). Returns whether it was adopted;
    /// an adopted topology is saved in the data directory.
    pub fn adopt(&self, topology: Topology) -> Result<bool, ClusterError> {
        {
            let mut view = self.view.write();
            if topology.epoch <= view.epoch() {
                return Ok(false);
            }
            let next = View::of(Some(topology), &self.id, self.run);
            let (before, after) = (view.held(&self.id), next.held(&self.id));
            let lost = slot_runs(|s| before[s] && !after[s]);
            if let Some(t) = &next.topology {
                // Its senders start from the agent's next reconciliation.
                self.chains.adopt(t, &self.id);
            }
            *view = Arc::new(next);
            if !lost.is_empty() {
                self.pending_drops.lock().extend(lost);
            }
        }
        self.save()?;
        Ok(true)
    }

    /// Writes [`CLUSTER_FILE`]: a new file renamed over the old one, synced. One save at a
    /// time, each of the state as it is when it starts: the last rename carries the newest.
    fn save(&self) -> Result<(), ClusterError> {
        let _saving = self.saving.lock();
        let path = self.dir.join(CLUSTER_FILE);
        let tmp = self.dir.join(format!("{CLUSTER_FILE}.tmp"));
        let file_error = |e: std::io::Error| ClusterError::File {
            path: path.display().to_string(),
            what: e.to_string(),
        };
        let saved = Saved {
            node_id: self.id.clone(),
            topology: self.view().topology.clone(),
            pending_drops: self.pending_drops(),
        };
        // Strings, integers and vectors always serialize.
        let bytes = serde_json::to_vec_pretty(&saved).unwrap_or_default();
        {
            let mut f = std::fs::File::create(&tmp).map_err(file_error)?;
            std::io::Write::write_all(&mut f, &bytes).map_err(file_error)?;
            f.sync_all().map_err(file_error)?;
        }
        std::fs::rename(&tmp, &path).map_err(file_error)?;
        std::fs::File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(file_error)
    }

    /// Where the command with `keys` runs (see the module documentation); `write`: whether
    /// it may write them (a write to a frozen range waits); `replica_read`: a read that a
    /// replica may serve (a READONLY connection's).
    pub fn route<'k>(
        &self,
        keys: impl IntoIterator<Item = &'k [u8]>,
        write: bool,
        replica_read: bool,
    ) -> Route {
        let view = self.view.read();
        let Some(topology) = &view.topology else {
            return Route::Down(DOWN_NO_TOPOLOGY);
        };
        let mut first: Option<(u16, u16)> = None;
        let mut all_mine = true;
        let mut one_owner = true;
        let mut frozen = None;
        // A replicated write must stay in one chain: its message goes down that chain alone.
        let mut chains = (topology.replicas > 1 && write).then_some(UNASSIGNED);
        let mut several_chains = false;
        for key in keys {
            let slot = key_slot(key);
            let owner = view.table[slot as usize];
            if owner == UNASSIGNED {
                return Route::Down(DOWN_UNSERVED);
            }
            all_mine &= Some(owner) == view.me || (replica_read && view.replica[slot as usize]);
            if let Some(chain) = &mut chains {
                let shard = view.shard[slot as usize];
                several_chains |= *chain != UNASSIGNED && *chain != shard;
                *chain = shard;
            }
            if frozen.is_none() && self.is_frozen(slot, write) {
                frozen = Some(slot);
            }
            match first {
                None => first = Some((slot, owner)),
                Some((_, o)) => one_owner &= o == owner,
            }
        }
        if all_mine && first.is_some() {
            if let Some(text) = self.not_serving(&view) {
                return Route::Down(text);
            }
        }
        match first {
            _ if all_mine && several_chains => Route::CrossSlot,
            _ if all_mine => match frozen {
                Some(slot) => Route::Frozen { slot },
                None => Route::Local,
            },
            Some((slot, owner)) if one_owner => Route::Moved {
                slot,
                addr: view
                    .topology
                    .as_ref()
                    .map_or_else(String::new, |t| t.nodes[owner as usize].addr.clone()),
            },
            _ => Route::CrossSlot,
        }
    }
}

/// A new run number: random, never 0 (0 is "no run known" in an older topology).
fn new_run() -> u64 {
    let id = quiver_service::service::new_id();
    u64::from_str_radix(&id[..16], 16).unwrap_or(1).max(1)
}

/// Slot ranges as Redis writes them, `lo-hi`.
mod ranges_text {
    use quiver_store::slot::SlotRange;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(ranges: &[SlotRange], s: S) -> Result<S::Ok, S::Error> {
        let text: Vec<String> = ranges.iter().map(|r| r.to_string()).collect();
        text.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<SlotRange>, D::Error> {
        Vec::<String>::deserialize(d)?
            .iter()
            .map(|t| {
                SlotRange::parse(t)
                    .ok_or_else(|| serde::de::Error::custom(format!("slot range {t:?}")))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
