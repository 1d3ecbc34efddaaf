//! One chain's replication stream as one member sees it: the messages it applied and has not
//! yet seen committed (to forward, and to send again after the chain changes), which keys
//! those messages wrote (dirty keys, CRAQ's), and how far the chain has committed.
//!
//! A message is numbered (`seq`) by the head in the order its writes were applied there;
//! every member applies messages in that order, one after the other, so each member's history
//! is a prefix of its predecessor's. The tail's application is the commit point: a message is
//! committed when the tail has applied it, which its predecessor learns from the tail's reply,
//! and so on up to the head, whose clients are answered then.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use quiver_store::slot::SlotRange;
use quiver_store::RangeItem;
use tokio::sync::{watch, Notify};

/// Bytes of applied, uncommitted messages a member keeps at most (a successor that does not
/// answer makes the head refuse writes past it rather than grow without bound).
pub const BACKLOG_BYTES_MAX: usize = 256 << 20;

/// A vector of writes, as the head applied it.
#[derive(Debug)]
pub struct Msg {
    pub seq: u64,
    pub items: Vec<RangeItem>,
    /// Applied all or nothing (a compound batch, MULTI/EXEC, MSET) rather than as plain puts.
    pub atomic: bool,
    /// A FLUSHALL of the chain's range: every key of it deleted at once (no items).
    pub flush: bool,
}

impl Msg {
    /// Writes `items` (all or nothing when `atomic`).
    pub fn write(seq: u64, items: Vec<RangeItem>, atomic: bool) -> Msg {
        Msg {
            seq,
            items,
            atomic,
            flush: false,
        }
    }

    /// Bytes it holds (for the backlog's bound).
    pub fn size(&self) -> usize {
        64 + self
            .items
            .iter()
            .map(|i| 16 + i.key.len() + i.entry.as_ref().map_or(0, |e| 16 + e.value.len()))
            .sum::<usize>()
    }
}

/// This member's place in the chain at one version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Role {
    /// The chain's version (the epoch at which its membership last changed).
    pub version: u64,
    /// 0: the head.
    pub position: usize,
    pub len: usize,
    /// The next member's address (where this one forwards), unless this one is the tail.
    pub successor: Option<String>,
}

impl Role {
    pub fn is_head(&self) -> bool {
        self.position == 0
    }

    pub fn is_tail(&self) -> bool {
        self.position + 1 == self.len
    }
}

/// How far the chain has committed, as waiters see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    pub committed: u64,
    /// This member left the chain: what it has not seen committed never will be (here).
    pub retired: bool,
}

/// Why a message from the predecessor was not applied.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Refusal {
    #[error("FENCED chain of slots {slots} is at version {mine} here, not {theirs}")]
    Version {
        slots: SlotRange,
        mine: u64,
        theirs: u64,
    },
    #[error("FENCED this node heads the chain of slots {0}: it takes no replication")]
    Head(SlotRange),
    #[error("ERR chain of slots {slots}: message {got} after {applied} (a gap)")]
    Gap {
        slots: SlotRange,
        applied: u64,
        got: u64,
    },
    #[error("TRYAGAIN replication backlog of slots {0} is full: the chain is not answering")]
    Backlog(SlotRange),
    #[error("TRYAGAIN this node no longer heads the chain of slots {0}")]
    NotHead(SlotRange),
}

struct State {
    role: Role,
    /// Last message applied here.
    applied: u64,
    /// Last message known committed.
    committed: u64,
    /// Applied here, not known committed, in order.
    backlog: VecDeque<Arc<Msg>>,
    backlog_bytes: usize,
    /// Key → the last message that wrote it, while that message is not known committed.
    dirty: HashMap<Bytes, u64>,
    /// The last flush of the range not known committed (0: none): every key is dirty
    /// until it is.
    flush_dirty: u64,
    /// Bumped whenever the sender must start again (a new version or successor).
    generation: u64,
    retired: bool,
}

pub struct Stream {
    pub slots: SlotRange,
    state: Mutex<State>,
    progress: watch::Sender<Progress>,
    /// New messages to forward, or a new generation: wakes the sender.
    pub wake: Notify,
    /// The generation a sender task was started for (one task per generation).
    sender: Mutex<Option<u64>>,
}

/// What [`Stream::receive`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Receipt {
    /// Apply it, then call [`Stream::applied`].
    Apply,
    /// Already applied here (sent again after the chain changed): only wait for its commit.
    Duplicate,
}

impl Stream {
    /// The stream of a member whose copy of the range includes every message up to `start`
    /// (0 for a chain's first members; a joining node's copy was taken at `start`).
    pub fn new(slots: SlotRange, role: Role, start: u64) -> Stream {
        Stream {
            slots,
            state: Mutex::new(State {
                role,
                applied: start,
                committed: start,
                backlog: VecDeque::new(),
                backlog_bytes: 0,
                dirty: HashMap::new(),
                flush_dirty: 0,
                generation: 0,
                retired: false,
            }),
            progress: watch::Sender::new(Progress {
                committed: start,
                retired: false,
            }),
            wake: Notify::new(),
            sender: Mutex::new(None),
        }
    }

    /// Whether a sender must be started now (this member forwards, and no task was started
    /// for the current generation); the caller starts it.
    pub fn claim_sender(&self) -> bool {
        let s = self.state.lock();
        if s.retired || s.role.successor.is_none() {
            return false;
        }
        let mut sender = self.sender.lock();
        if *sender == Some(s.generation) {
            return false;
        }
        *sender = Some(s.generation);
        true
    }

    pub fn role(&self) -> Role {
        self.state.lock().role.clone()
    }

    /// The role at a new version. A member that became the tail has committed everything it
    /// applied (it is where commits happen now).
    pub fn set_role(&self, role: Role) {
        let mut s = self.state.lock();
        if s.role == role {
            return;
        }
        s.role = role;
        s.generation += 1;
        if s.role.is_tail() {
            let applied = s.applied;
            self.commit_locked(&mut s, applied);
        }
        drop(s);
        self.wake.notify_one();
    }

    /// This member left the chain: waiters give up.
    pub fn retire(&self) {
        let mut s = self.state.lock();
        s.retired = true;
        s.generation += 1;
        let committed = s.committed;
        drop(s);
        self.progress.send_replace(Progress {
            committed,
            retired: true,
        });
        self.wake.notify_one();
    }

    pub fn generation(&self) -> u64 {
        self.state.lock().generation
    }

    /// (applied, committed, messages and bytes waiting for their commit).
    pub fn figures(&self) -> (u64, u64, usize, usize) {
        let s = self.state.lock();
        (s.applied, s.committed, s.backlog.len(), s.backlog_bytes)
    }

    /// The head numbers its next message and marks `keys` dirty, before applying it (a
    /// reader that sees the new value then finds the key dirty). Call under the node's
    /// order lock, then [`Stream::applied`] with the same number whatever the write did.
    pub fn begin<'k>(&self, keys: impl Iterator<Item = &'k Bytes>) -> Result<u64, Refusal> {
        let mut s = self.state.lock();
        if s.backlog_bytes > BACKLOG_BYTES_MAX {
            return Err(Refusal::Backlog(self.slots));
        }
        let seq = s.applied + 1;
        for k in keys {
            s.dirty.insert(k.clone(), seq);
        }
        Ok(seq)
    }

    /// The head numbers its next message, a flush of the range, which makes every key dirty
    /// until it is committed (as [`Stream::begin`]).
    pub fn begin_flush(&self) -> Result<u64, Refusal> {
        let mut s = self.state.lock();
        if s.backlog_bytes > BACKLOG_BYTES_MAX {
            return Err(Refusal::Backlog(self.slots));
        }
        if !s.role.is_head() {
            return Err(Refusal::NotHead(self.slots));
        }
        s.flush_dirty = s.applied + 1;
        Ok(s.flush_dirty)
    }

    /// A message from the predecessor at `version`: whether to apply it (its keys then
    /// marked dirty, unless this member is the tail, where applying is committing). Call
    /// under the node's order lock.
    pub fn receive(&self, version: u64, msg: &Msg) -> Result<Receipt, Refusal> {
        let mut s = self.state.lock();
        if s.role.version != version || s.retired {
            return Err(Refusal::Version {
                slots: self.slots,
                mine: s.role.version,
                theirs: version,
            });
        }
        if s.role.is_head() {
            return Err(Refusal::Head(self.slots));
        }
        if msg.seq <= s.applied {
            return Ok(Receipt::Duplicate);
        }
        if msg.seq != s.applied + 1 {
            return Err(Refusal::Gap {
                slots: self.slots,
                applied: s.applied,
                got: msg.seq,
            });
        }
        if !s.role.is_tail() {
            for item in &msg.items {
                s.dirty.insert(item.key.clone(), msg.seq);
            }
            if msg.flush {
                s.flush_dirty = msg.seq;
            }
        }
        Ok(Receipt::Apply)
    }

    /// `msg` is applied here (as far as it could be: its items are what took effect). The
    /// tail commits it at once; any other member keeps it to forward.
    pub fn applied(&self, msg: Msg) {
        let mut s = self.state.lock();
        s.applied = s.applied.max(msg.seq);
        if s.role.is_tail() {
            let seq = msg.seq;
            self.commit_locked(&mut s, seq);
            return;
        }
        s.backlog_bytes += msg.size();
        s.backlog.push_back(Arc::new(msg));
        drop(s);
        self.wake.notify_one();
    }

    /// Up to `max` messages after `after`, for the sender, with the version to send them at.
    pub fn after(&self, after: u64, max: usize) -> (u64, Vec<Arc<Msg>>) {
        let s = self.state.lock();
        let msgs = s
            .backlog
            .iter()
            .filter(|m| m.seq > after)
            .take(max)
            .cloned()
            .collect();
        (s.role.version, msgs)
    }

    /// The successor answered message `seq`: it is committed.
    pub fn commit(&self, seq: u64) {
        let mut s = self.state.lock();
        self.commit_locked(&mut s, seq);
    }

    fn commit_locked(&self, s: &mut State, seq: u64) {
        if seq <= s.committed {
            return;
        }
        s.committed = seq;
        while s.backlog.front().is_some_and(|m| m.seq <= seq) {
            if let Some(m) = s.backlog.pop_front() {
                s.backlog_bytes -= m.size();
            }
        }
        // Bounded by the keys of the messages in flight.
        s.dirty.retain(|_, last| *last > seq);
        if s.flush_dirty <= seq {
            s.flush_dirty = 0;
        }
        self.progress.send_replace(Progress {
            committed: seq,
            retired: s.retired,
        });
    }

    /// The message whose commit makes `key`'s value here committed (0: it is).
    pub fn dirty(&self, key: &[u8]) -> u64 {
        let s = self.state.lock();
        if s.dirty.is_empty() {
            return s.flush_dirty;
        }
        s.dirty.get(key).copied().unwrap_or(0).max(s.flush_dirty)
    }

    /// Waits until message `seq` is committed; `false` if this member left the chain first
    /// (its outcome is unknown here).
    pub async fn committed(&self, seq: u64) -> bool {
        let mut rx = self.progress.subscribe();
        loop {
            let p = *rx.borrow_and_update();
            if p.committed >= seq {
                return true;
            }
            if p.retired || rx.changed().await.is_err() {
                return false;
            }
        }
    }
}
