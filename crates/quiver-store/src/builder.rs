//! Builds a partition's index by replaying log records in order. Recovery (after a checkpoint
//! or from scratch), index growth and compaction all go through this one replay.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::dbs::DbMap;
use crate::error::Result;
use crate::expiry::Expiries;
use crate::hash::KeyHash;
use crate::index::Index;
use crate::key_counts::NsKeys;
use crate::log::format::{self, RecordHeader, RecordType, RECORD_EXT_LEN_MAX, RECORD_HEADER_LEN};
use crate::partition::{Counters, SegmentSet};
use crate::slot::{key_slot, SlotRange};

/// A batch member seen before its commit record.
#[derive(Clone, Debug)]
pub(crate) struct Member {
    pub ns: u32,
    pub key: Vec<u8>,
    pub hash: KeyHash,
    pub loc: u32,
    pub delete: bool,
    pub expire_at: Option<u64>,
}

pub(crate) struct IndexBuilder {
    pub index: Index,
    pub counters: Counters,
    /// The keys with an expiry time, as replayed (recovery keeps them; a resize, whose
    /// partition tracks them already, ignores them).
    pub expiries: Expiries,
    /// Live index entries per namespace, as replayed (recovery keeps them).
    pub ns_keys: NsKeys,
    /// The store's database mapping: records of namespaces no database reads (flushed) are
    /// garbage and are not indexed. `None`: every namespace is live.
    dbs: Option<Arc<DbMap>>,
    /// Highest sequence number seen.
    pub max_seq: u64,
    /// Batch seq -> members seen so far, waiting for the commit record.
    pending: HashMap<u64, Vec<Member>>,
    /// Seqs of every commit record replayed (resolves batches whose own commit is missing).
    pub commits: HashSet<u64>,
    /// A whole part ended by a BatchEnd, the last record replayed: the next record applies it
    /// (see `seal`); at the end of the log, the batch's commit record elsewhere decides.
    unproven: Option<u64>,
    /// The batch whose member or end record was the last record replayed (its part is the end
    /// of the log: one a crash interrupted is cut off there).
    pub tail_batch: Option<u64>,
    /// Problems found while replaying (damaged batches), for the recovery report.
    pub problems: Vec<String>,
    /// Set when an insert found the index too full: the result must be rebuilt larger.
    overflowed: bool,
    /// The partition's slot range: records of keys outside it are garbage (left behind by a
    /// split or a dropped range) and are not indexed. `None`: every key (format 1).
    range: Option<SlotRange>,
}

impl IndexBuilder {
    pub fn new(index: Index) -> IndexBuilder {
        IndexBuilder {
            index,
            counters: Counters::default(),
            expiries: Expiries::default(),
            ns_keys: NsKeys::for_range(None),
            dbs: None,
            max_seq: 0,
            pending: HashMap::new(),
            commits: HashSet::new(),
            unproven: None,
            tail_batch: None,
            problems: Vec::new(),
            overflowed: false,
            range: None,
        }
    }

    /// A builder that indexes only keys of `range` (`None`: every key).
    pub fn for_range(index: Index, range: Option<SlotRange>) -> IndexBuilder {
        IndexBuilder {
            range,
            ns_keys: NsKeys::for_range(range),
            ..IndexBuilder::new(index)
        }
    }

    /// Skips records of namespaces that `dbs` says are dead.
    pub fn with_dbs(mut self, dbs: Arc<DbMap>) -> IndexBuilder {
        self.dbs = Some(dbs);
        self
    }

    fn owns(&self, ns: u32, key: &[u8]) -> bool {
        self.range.is_none_or(|r| r.contains(key_slot(key)))
            && self.dbs.as_ref().is_none_or(|d| d.is_live(ns))
    }

    /// Replays one verified record found at `loc`.
    pub fn apply(
        &mut self,
        segs: &SegmentSet,
        loc: u32,
        h: &RecordHeader,
        rec: &[u8],
    ) -> Result<()> {
        if let Some(seq) = self.unproven.take() {
            // Written after the whole batch: the part before it is committed.
            let members = self.pending.remove(&seq).unwrap_or_default();
            self.apply_members(segs, &members)?;
        }
        self.counters.records += 1;
        self.max_seq = self.max_seq.max(h.seq);
        self.tail_batch = (h.ty.is_batch_member() || h.ty == RecordType::BatchEnd).then_some(h.seq);
        let key = &rec[h.key_range()];
        let ext = h.ext(rec);
        let hash = KeyHash::of_ns(ext.namespace, key);
        match h.ty {
            RecordType::Put | RecordType::Delete if !self.owns(ext.namespace, key) => {
                self.counters.dead += 1
            }
            RecordType::Put => self.put(segs, hash, ext.namespace, key, loc, ext.expire_at)?,
            RecordType::Delete => self.delete(segs, hash, ext.namespace, key)?,
            RecordType::BatchPut | RecordType::BatchDelete => {
                self.pending.entry(h.seq).or_default().push(Member {
                    ns: ext.namespace,
                    key: key.to_vec(),
                    hash,
                    loc,
                    delete: h.ty == RecordType::BatchDelete,
                    expire_at: ext.expire_at,
                });
            }
            RecordType::Truncate => {
                // Everything before it is dead, itself included.
                self.index = Index::with_capacity(self.index.capacity());
                self.counters.dead = self.counters.records;
                self.expiries = Expiries::default();
                self.ns_keys.clear();
                self.pending.clear();
            }
            RecordType::BatchEnd => {
                self.counters.dead += 1;
                let expected = format::commit_count(&rec[h.value_range()]) as usize;
                match self.pending.get(&h.seq).map_or(0, |m| m.len()) {
                    n if n == expected => self.unproven = Some(h.seq),
                    0 => {}
                    n => {
                        let members = self.pending.remove(&h.seq).unwrap_or_default();
                        self.counters.dead += n as u64;
                        self.problems.push(format!(
                            "batch {} has {n} of its {expected} members in this partition and \
                             was not applied: keys {} may hold older values",
                            h.seq,
                            show_keys(&members)
                        ));
                    }
                }
            }
            RecordType::BatchCommit => {
                self.counters.dead += 1;
                self.commits.insert(h.seq);
                let expected = format::commit_count(&rec[h.value_range()]) as usize;
                let members = self.pending.remove(&h.seq).unwrap_or_default();
                if members.len() == expected {
                    self.apply_members(segs, &members)?;
                } else if !members.is_empty() {
                    // Only damage can separate some members of a part from its commit record.
                    // (None at all: compaction made the part plain records and dropped it.)
                    self.counters.dead += members.len() as u64;
                    self.problems.push(format!(
                        "batch {} has {} of its {expected} members in this partition and was not \
                         applied: keys {} may hold older values",
                        h.seq,
                        members.len(),
                        show_keys(&members)
                    ));
                }
            }
        }
        Ok(())
    }

    pub fn apply_members(&mut self, segs: &SegmentSet, members: &[Member]) -> Result<()> {
        for m in members {
            if !self.owns(m.ns, &m.key) {
                self.counters.dead += 1;
            } else if m.delete {
                self.delete(segs, m.hash, m.ns, &m.key)?;
            } else {
                self.put(segs, m.hash, m.ns, &m.key, m.loc, m.expire_at)?;
            }
        }
        Ok(())
    }

    /// Batches whose members were seen but whose commit record was not (yet), the last part
    /// replayed (if it ended with a BatchEnd) included.
    pub fn take_pending(&mut self) -> HashMap<u64, Vec<Member>> {
        self.unproven = None;
        std::mem::take(&mut self.pending)
    }

    /// The end of a replay of a running partition's log (a resize's catch-up): a part ended
    /// by a BatchEnd is committed (a batch that fails takes its parts back); members without
    /// their end belong to batches that failed, and are dropped.
    pub fn finish_live(&mut self, segs: &SegmentSet) -> Result<()> {
        if let Some(seq) = self.unproven.take() {
            let members = self.pending.remove(&seq).unwrap_or_default();
            self.apply_members(segs, &members)?;
        }
        self.pending.clear();
        Ok(())
    }

    /// Counts members of a batch that will never be applied.
    pub fn discard_members(&mut self, n: usize) {
        self.counters.dead += n as u64;
    }

    /// Finds the slot of `key`, reading candidate records to compare full keys (and
    /// namespaces: the full hash covers the namespace). Candidates are read from the segment's
    /// mapping where it has one: a replay confirms a candidate for nearly every overwrite, and
    /// a read syscall and a buffer per record made a resize's catch-up slower than the writers
    /// it follows (2.7 µs a record: a round under the lock of half a second, BENCHMARKS §34).
    fn find(&self, segs: &SegmentSet, hash: KeyHash, key: &[u8]) -> Result<Option<usize>> {
        let frag = hash.fragment();
        let mut probe = self.index.probe(hash);
        let want = RECORD_HEADER_LEN + RECORD_EXT_LEN_MAX + key.len();
        let mut buf = Vec::new();
        while let Some((pos, loc)) = self.index.next_candidate(frag, &mut probe) {
            let Ok((seg, offset)) = segs.resolve(loc) else {
                continue;
            };
            let rec = seg.bytes_at(&mut buf, offset, want)?;
            let Ok(h) = format::check_header(rec) else {
                continue;
            };
            if &rec[h.key_range()] == key && KeyHash::of_ns(h.ext(rec).namespace, key) == hash {
                return Ok(Some(pos));
            }
        }
        Ok(None)
    }

    pub fn put(
        &mut self,
        segs: &SegmentSet,
        hash: KeyHash,
        ns: u32,
        key: &[u8],
        loc: u32,
        expire_at: Option<u64>,
    ) -> Result<()> {
        let slot = key_slot(key);
        self.expiries.set(hash.0, ns, slot, expire_at);
        match self.find(segs, hash, key)? {
            Some(pos) => {
                self.index.set_loc(pos, loc);
                self.counters.dead += 1;
            }
            None => self.insert_new(hash, ns, slot, loc),
        }
        Ok(())
    }

    /// Inserts a key known to be absent.
    fn insert_new(&mut self, hash: KeyHash, ns: u32, slot: u16, loc: u32) {
        if self.overflowed || !self.index.has_room(1) {
            self.overflowed = true;
            return;
        }
        self.index.insert(hash, loc);
        self.ns_keys.add(ns, slot);
    }

    pub fn delete(&mut self, segs: &SegmentSet, hash: KeyHash, ns: u32, key: &[u8]) -> Result<()> {
        self.expiries.remove(hash.0);
        self.counters.dead += 1; // the tombstone record itself
        if let Some(pos) = self.find(segs, hash, key)? {
            self.index.remove(pos);
            self.ns_keys.sub(ns, key_slot(key));
            self.counters.dead += 1;
        }
        Ok(())
    }

    /// Whether the index must be rebuilt larger: an insert found it full, or it lacks room
    /// under `LOAD_HARD_MAX` for the batch members still pending (with none pending: it is
    /// past that load) — opening's `recovery::resolve_batches` applies those after this
    /// check, where an insert that does not fit would drop its key.
    pub fn too_full(&self) -> bool {
        let pending: usize = self.pending.values().map(Vec::len).sum();
        self.overflowed || !self.index.has_room(pending)
    }
}

/// The keys of batch members, for a message (the first few).
fn show_keys(members: &[Member]) -> String {
    const SHOWN_KEYS_MAX: usize = 256;
    let mut s: Vec<String> = members
        .iter()
        .take(SHOWN_KEYS_MAX)
        .map(|m| crate::error::show_key(&m.key))
        .collect();
    if members.len() > SHOWN_KEYS_MAX {
        s.push(format!("and {} more", members.len() - SHOWN_KEYS_MAX));
    }
    s.join(", ")
}
