//! Chain replication (FAWN-KV's chains, seed 001 chapter 4; CRAQ's reads): this node's part
//! in every chain it is a member of. docs/cluster.md ("Chain replication") has the argument.
//!
//! * **Writes** enter at the head. Under the node's order lock the head numbers the write's
//!   message per chain, marks its keys dirty, applies it to its store and queues it: so
//!   messages are numbered in the order their writes were applied. A vector of writes (a
//!   pipelined run of SETs, an MSET, a compound batch, EXEC) is one message per chain.
//! * Each member's **sender** ([`sender`]) forwards its queue to its successor as pipelined
//!   `CHAIN APPLY` commands ([`wire`]); the successor applies them in order (all or nothing
//!   for an atomic one) and answers each once it is **committed**: at the tail at once (its
//!   application is the commit point), elsewhere when its own successor answered. The head
//!   answers its clients then — the tail's acknowledgement releases the clients of the whole
//!   vector.
//! * **Reads** (CRAQ): any member answers; a run that read a key whose last write here is not
//!   yet committed holds its replies until that write is (the tail's answer, pushed up the
//!   chain). Every run on a replicated node ends with that wait ([`Chains::settle`]).
//! * **Fencing**: every message carries its chain's version (the epoch of its last change);
//!   a member accepts messages only at the version it serves by, so a node taken out of a
//!   chain cannot make a member accept a write.

pub mod sender;
pub mod stream;
pub mod wire;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use quiver_cluster::topology::Topology;
use quiver_store::slot::{key_slot, SlotRange, SLOTS};
use quiver_store::{Batch, RangeItem, Store};

pub use stream::{Msg, Refusal, Role, Stream};

/// Longest wait of a run for the commit of what it wrote or read. Past it the connection is
/// closed without answering: the outcome is unknown (the chain may still commit it).
pub const COMMIT_WAIT_MAX: Duration = Duration::from_secs(30);

/// Slot table entry of a slot no stream of this node covers.
const NO_STREAM: u16 = u16::MAX;

/// The streams of the chains this node is a member of.
#[derive(Default)]
struct Table {
    streams: Vec<Arc<Stream>>,
    /// Per slot, an index into `streams` or [`NO_STREAM`] (empty: no stream at all).
    by_slot: Vec<u16>,
}

/// Which items of a write took effect.
#[derive(Debug)]
pub enum Took {
    All,
    None,
    /// Per item (an I/O error stopped a vector part-way).
    Some(Vec<bool>),
}

impl Took {
    /// What an engine write's result says took effect: all of it, none of it, or (an I/O
    /// error part-way through a plain vector) the writes it names.
    pub fn of<T>(result: &quiver_store::Result<T>) -> Took {
        match result {
            Ok(_) => Took::All,
            Err(quiver_store::Error::PartlyApplied { applied, .. }) => Took::Some(applied.clone()),
            Err(_) => Took::None,
        }
    }

    fn took(&self, i: usize) -> bool {
        match self {
            Took::All => true,
            Took::None => false,
            Took::Some(t) => t.get(i).copied().unwrap_or(false),
        }
    }
}

impl Table {
    fn stream(&self, slot: u16) -> Option<&Arc<Stream>> {
        let i = *self.by_slot.get(slot as usize)?;
        (i != NO_STREAM).then(|| &self.streams[i as usize])
    }
}

/// What a run must wait for before its replies go out: per stream, the message to see
/// committed.
#[derive(Default)]
pub struct Barrier {
    waits: Vec<(Arc<Stream>, u64)>,
}

impl Barrier {
    pub fn is_empty(&self) -> bool {
        self.waits.is_empty()
    }

    /// Adds a wait for message `seq` of `stream`.
    pub fn wait_for(&mut self, stream: &Arc<Stream>, seq: u64) {
        if seq == 0 {
            return;
        }
        match self.waits.iter_mut().find(|(s, _)| Arc::ptr_eq(s, stream)) {
            Some((_, last)) => *last = (*last).max(seq),
            None => self.waits.push((stream.clone(), seq)),
        }
    }

    /// Waits for every commit, at most [`COMMIT_WAIT_MAX`]; `false` when one is unknown (the
    /// member left the chain, or the wait ran out).
    pub async fn settle(&mut self) -> bool {
        let waits = std::mem::take(&mut self.waits);
        let all = async {
            for (stream, seq) in &waits {
                if !stream.committed(*seq).await {
                    return false;
                }
            }
            true
        };
        tokio::time::timeout(COMMIT_WAIT_MAX, all)
            .await
            .unwrap_or(false)
    }
}

/// This node's chains.
#[derive(Default)]
pub struct Chains {
    table: RwLock<Arc<Table>>,
    /// Whether any stream exists (a topology with `replicas` 1 has none: no cost then).
    any: AtomicBool,
    /// Held while a write is numbered, applied and queued (head) or applied (other members),
    /// so that messages follow the order of the writes.
    order: Mutex<()>,
    /// Chains this node is joining: the last message the copy it received includes (its
    /// stream, once it is a member, starts after it).
    joins: Mutex<Vec<(SlotRange, u64)>>,
}

impl Chains {
    pub fn is_replicated(&self) -> bool {
        self.any.load(Ordering::Acquire)
    }

    pub fn stream_of(&self, slots: SlotRange) -> Option<Arc<Stream>> {
        self.table
            .read()
            .streams
            .iter()
            .find(|s| s.slots == slots)
            .cloned()
    }

    pub fn streams(&self) -> Vec<Arc<Stream>> {
        self.table.read().streams.clone()
    }

    /// Takes the chains of `topology` (just adopted by node `me`, whose members are
    /// addressed by `addr_of`): a stream per replicated chain this node is in, its role
    /// updated at a new version; streams of chains it left are retired (their waiters give
    /// up). Returns the streams whose sender must (re)start.
    pub fn adopt(&self, topology: &Topology, me: &str) -> Vec<Arc<Stream>> {
        let old = self.table.read().clone();
        let mut table = Table::default();
        let mut restart = Vec::new();
        if topology.replicas > 1 {
            let mut by_slot = vec![NO_STREAM; SLOTS as usize];
            for shard in &topology.shards {
                let Some(position) = shard.position(me) else {
                    continue;
                };
                let successor = shard
                    .successor(me)
                    .and_then(|id| topology.node(id))
                    .map(|n| n.addr.clone());
                let role = Role {
                    version: shard.version,
                    position,
                    len: shard.chain.len(),
                    successor,
                };
                let stream = match old.streams.iter().find(|s| s.slots == shard.slots) {
                    Some(s) => {
                        if s.role() != role {
                            s.set_role(role);
                            restart.push(s.clone());
                        }
                        s.clone()
                    }
                    None => {
                        let start = self.take_join(shard.slots);
                        let s = Arc::new(Stream::new(shard.slots, role, start));
                        restart.push(s.clone());
                        s
                    }
                };
                by_slot[shard.slots.lo as usize..=shard.slots.hi as usize]
                    .fill(table.streams.len() as u16);
                table.streams.push(stream);
            }
            table.by_slot = by_slot;
        }
        for s in &old.streams {
            if !table.streams.iter().any(|n| Arc::ptr_eq(n, s)) {
                s.retire();
            }
        }
        self.any.store(!table.streams.is_empty(), Ordering::Release);
        *self.table.write() = Arc::new(table);
        restart
    }

    /// This node received the range of the chain of `slots` up to message `seq` to join it
    /// as tail.
    pub fn expect_join(&self, slots: SlotRange, seq: u64) {
        let mut joins = self.joins.lock();
        joins.retain(|(s, _)| *s != slots);
        joins.push((slots, seq));
    }

    /// Where this node's stream of the chain of `slots` starts: after the message its join
    /// copied up to, or at the chain's beginning.
    fn take_join(&self, slots: SlotRange) -> u64 {
        let mut joins = self.joins.lock();
        let at = joins.iter().position(|(s, _)| *s == slots);
        at.map_or(0, |i| joins.swap_remove(i).1)
    }

    /// A write on the head: `items` (each key's new state) applied by `apply`, which says
    /// which of them took effect — then queued as one message per chain of their keys, in the
    /// order of writes. Keys of no replicated chain of this node are written without one. The
    /// run's replies wait for the messages' commits through the keys' dirty marks
    /// ([`Chains::read_barrier`]). Refused, with nothing applied, when a chain's backlog is
    /// full.
    pub fn write<T>(
        &self,
        items: &[RangeItem],
        atomic: bool,
        apply: impl FnOnce() -> (T, Took),
    ) -> Result<T, Refusal> {
        if !self.is_replicated() {
            return Ok(apply().0);
        }
        // Per chain, the positions of its items (one look at the table for the vector).
        let table = self.table.read().clone();
        let mut parts: Vec<(Arc<Stream>, Vec<usize>)> = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let Some(stream) = table.stream(key_slot(&item.key)) else {
                continue;
            };
            match parts.iter_mut().find(|(s, _)| Arc::ptr_eq(s, stream)) {
                Some((_, at)) => at.push(i),
                None => parts.push((stream.clone(), vec![i])),
            }
        }
        if parts.is_empty() {
            return Ok(apply().0);
        }
        let _order = self.order.lock();
        let mut seqs = Vec::with_capacity(parts.len());
        for (stream, at) in &parts {
            match stream.begin(at.iter().map(|&i| &items[i].key)) {
                Ok(seq) => seqs.push(seq),
                Err(r) => {
                    // Every number taken goes out, empty, so no member waits for it.
                    for ((stream, _), &seq) in parts.iter().zip(&seqs) {
                        stream.applied(Msg::write(seq, Vec::new(), atomic));
                    }
                    return Err(r);
                }
            }
        }
        let (result, took) = apply();
        for ((stream, at), seq) in parts.iter().zip(seqs) {
            let items = at
                .iter()
                .filter(|&&i| took.took(i))
                .map(|&i| items[i].clone())
                .collect();
            stream.applied(Msg::write(seq, items, atomic));
        }
        Ok(result)
    }

    /// FLUSHALL (FLUSHDB) on a member of replicated chains: the ranges this node heads are
    /// emptied at once (`Store::drop_ranges`), and each goes down its chain as one flush
    /// message, whose commit `barrier` gets; returns how many keys they had. The ranges it
    /// only follows are their heads' to flush (the router sends FLUSHALL to every node).
    pub fn flush(&self, store: &Store, barrier: &mut Barrier) -> Result<u64, FlushError> {
        let table = self.table.read().clone();
        let heads: Vec<&Arc<Stream>> = table
            .streams
            .iter()
            .filter(|s| s.role().is_head())
            .collect();
        if heads.is_empty() {
            return Ok(0);
        }
        let ranges: Vec<SlotRange> = heads.iter().map(|s| s.slots).collect();
        // Splitting partitions at the ranges' edges copies keys: done before the order lock,
        // so that writes wait only for the truncation.
        store.align_to(&ranges).map_err(FlushError::Store)?;
        let _order = self.order.lock();
        let mut seqs = Vec::with_capacity(heads.len());
        for stream in &heads {
            match stream.begin_flush() {
                Ok(seq) => seqs.push(seq),
                Err(r) => {
                    // Every number taken goes out, empty, so no member waits for it.
                    for (stream, &seq) in heads.iter().zip(&seqs) {
                        stream.applied(Msg::write(seq, Vec::new(), true));
                    }
                    return Err(FlushError::Refused(r));
                }
            }
        }
        let dropped = store.drop_ranges(&ranges);
        for (stream, seq) in heads.iter().zip(seqs) {
            stream.applied(Msg {
                seq,
                items: Vec::new(),
                atomic: true,
                flush: dropped.is_ok(),
            });
            barrier.wait_for(stream, seq);
        }
        dropped.map_err(FlushError::Store)
    }

    /// A message from the predecessor: applied here in order (all or nothing when atomic)
    /// and queued for the successor; the barrier gets its commit, which the reply waits for.
    pub fn receive(
        &self,
        store: &Store,
        slots: SlotRange,
        version: u64,
        msg: Msg,
        barrier: &mut Barrier,
    ) -> Result<(), ReceiveError> {
        let Some(stream) = self.stream_of(slots) else {
            return Err(ReceiveError::Refused(Refusal::Version {
                slots,
                mine: 0,
                theirs: version,
            }));
        };
        if let Some(item) = msg.items.iter().find(|i| !slots.contains(key_slot(&i.key))) {
            return Err(ReceiveError::Outside {
                slots,
                slot: key_slot(&item.key),
            });
        }
        let seq = msg.seq;
        if msg.flush {
            // As on the head: the copying part of the flush before the order lock.
            store.align_to(&[slots]).map_err(ReceiveError::Store)?;
        }
        let _order = self.order.lock();
        match stream
            .receive(version, &msg)
            .map_err(ReceiveError::Refused)?
        {
            stream::Receipt::Duplicate => {}
            stream::Receipt::Apply => {
                if msg.flush {
                    store.drop_ranges(&[slots]).map_err(ReceiveError::Store)?;
                } else {
                    apply_items(store, &msg.items, msg.atomic).map_err(ReceiveError::Store)?;
                }
                stream.applied(msg);
            }
        }
        barrier.wait_for(&stream, seq);
        Ok(())
    }

    /// Adds to `barrier` the commit of the last write of each of `keys` this node has not
    /// seen committed (CRAQ's dirty keys); call once the run has read them.
    pub fn read_barrier(&self, keys: &[Bytes], barrier: &mut Barrier) {
        if !self.is_replicated() {
            return;
        }
        let table = self.table.read().clone();
        for key in keys {
            if let Some(s) = table.stream(key_slot(key)) {
                barrier.wait_for(s, s.dirty(key));
            }
        }
    }
}

/// Why a FLUSHALL of the chains a node heads was not carried out.
#[derive(Debug, thiserror::Error)]
pub enum FlushError {
    #[error("{0}")]
    Refused(Refusal),
    #[error("storage error flushing the node's chains: {0}")]
    Store(quiver_store::Error),
}

/// Why a message was not applied (the reply names it; the sender starts again).
#[derive(Debug, thiserror::Error)]
pub enum ReceiveError {
    #[error("{0}")]
    Refused(Refusal),
    #[error("ERR key of slot {slot} outside the chain's slots {slots}")]
    Outside { slots: SlotRange, slot: u16 },
    #[error("storage error applying a replicated write: {0}")]
    Store(quiver_store::Error),
}

/// Writes a message's items: one compound batch when atomic (a crash keeps all or none),
/// else plain puts and deletes.
pub fn apply_items(store: &Store, items: &[RangeItem], atomic: bool) -> quiver_store::Result<()> {
    if items.is_empty() {
        return Ok(());
    }
    if atomic && items.len() > 1 {
        let mut batch = Batch::new();
        for item in items {
            let batch = batch.in_db(item.db);
            match &item.entry {
                Some(e) => batch.put_entry(item.key.clone(), e.clone(), None),
                None => batch.delete(item.key.clone()),
            };
        }
        return store.apply(&batch).map(|_| ());
    }
    store.import(items)
}
