//! A partition's live index entries per namespace (DBSIZE of each database) and, in a store
//! of slots, per hash slot of the partition's range (CLUSTER COUNTKEYSINSLOT, and the count of
//! a cluster chain's ranges that a router sums for DBSIZE) — both in O(1), kept beside the
//! index by every write, replay, compaction, split and flush, and saved in checkpoints.
//!
//! The per-slot counts cost 4 bytes per slot of the range per namespace with keys (64 KiB
//! for all 16384 slots of a namespace, spread over the partitions): nothing per key.

use crate::slot::SlotRange;

/// Live index entries of one partition, per namespace and per slot.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct NsKeys {
    /// The partition's slots (`None` in a store of format 1, whose partitions hold keys by
    /// hash: no per-slot counts).
    range: Option<SlotRange>,
    /// Few namespaces (databases in use): a short list.
    entries: Vec<NsEntry>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct NsEntry {
    ns: u32,
    keys: u64,
    /// Per slot of the range, `slot - range.lo`; empty without a range.
    per_slot: Box<[u32]>,
}

impl NsKeys {
    /// Counts for a partition owning `range` (`None`: every key, no per-slot counts).
    pub fn for_range(range: Option<SlotRange>) -> NsKeys {
        NsKeys {
            range,
            entries: Vec::new(),
        }
    }

    /// Where `slot`'s count is, if the partition owns it.
    #[inline]
    fn offset(&self, slot: u16) -> Option<usize> {
        self.range
            .filter(|r| r.contains(slot))
            .map(|r| (slot - r.lo) as usize)
    }

    fn entry(&mut self, ns: u32) -> &mut NsEntry {
        let i = match self.entries.iter().position(|e| e.ns == ns) {
            Some(i) => i,
            None => {
                let slots = self.range.map_or(0, |r| r.len() as usize);
                self.entries.push(NsEntry {
                    ns,
                    keys: 0,
                    per_slot: vec![0; slots].into_boxed_slice(),
                });
                self.entries.len() - 1
            }
        };
        &mut self.entries[i]
    }

    /// One more live key of namespace `ns` in hash slot `slot`.
    #[inline]
    pub fn add(&mut self, ns: u32, slot: u16) {
        let at = self.offset(slot);
        let e = self.entry(ns);
        e.keys += 1;
        if let Some(c) = at.and_then(|i| e.per_slot.get_mut(i)) {
            *c += 1;
        }
    }

    /// One live key fewer of namespace `ns` in hash slot `slot`.
    #[inline]
    pub fn sub(&mut self, ns: u32, slot: u16) {
        let at = self.offset(slot);
        let Some(i) = self.entries.iter().position(|e| e.ns == ns) else {
            return;
        };
        let e = &mut self.entries[i];
        e.keys = e.keys.saturating_sub(1);
        if let Some(c) = at.and_then(|i| e.per_slot.get_mut(i)) {
            *c = c.saturating_sub(1);
        }
        if e.keys == 0 {
            self.entries.swap_remove(i);
        }
    }

    pub fn get(&self, ns: u32) -> u64 {
        self.entries
            .iter()
            .find(|e| e.ns == ns)
            .map_or(0, |e| e.keys)
    }

    /// Live keys of namespace `ns` in the slots of `range` this partition owns.
    pub fn in_range(&self, ns: u32, range: SlotRange) -> u64 {
        let (Some(own), Some(e)) = (self.range, self.entries.iter().find(|e| e.ns == ns)) else {
            return 0;
        };
        let (lo, hi) = (range.lo.max(own.lo), range.hi.min(own.hi));
        if lo > hi {
            return 0;
        }
        e.per_slot[(lo - own.lo) as usize..=(hi - own.lo) as usize]
            .iter()
            .map(|&c| u64::from(c))
            .sum()
    }

    /// Forgets a namespace; returns how many entries it had.
    pub fn remove(&mut self, ns: u32) -> u64 {
        match self.entries.iter().position(|e| e.ns == ns) {
            Some(i) => self.entries.swap_remove(i).keys,
            None => 0,
        }
    }

    /// The partition now owns only `kept`, a part of its range (a split moved the rest
    /// away, and its keys with it): the counts of the other slots go.
    pub fn narrow(&mut self, kept: SlotRange) {
        let Some(own) = self.range else {
            return;
        };
        let (from, to) = ((kept.lo - own.lo) as usize, (kept.hi - own.lo) as usize);
        for e in &mut self.entries {
            e.per_slot = e.per_slot[from..=to].into();
            e.keys = e.per_slot.iter().map(|&c| u64::from(c)).sum();
        }
        self.entries.retain(|e| e.keys > 0);
        self.range = Some(kept);
    }

    /// Namespaces with entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Slots with a count of their own (each namespace has one count per slot).
    pub fn slots(&self) -> usize {
        self.range.map_or(0, |r| r.len() as usize)
    }

    /// (namespace, live keys, per-slot counts) of every namespace with keys.
    pub fn iter(&self) -> impl Iterator<Item = (u32, u64, &[u32])> + '_ {
        self.entries.iter().map(|e| (e.ns, e.keys, &e.per_slot[..]))
    }

    /// Sets a namespace's counts as a checkpoint recorded them (`per_slot` has one count per
    /// slot of the range, or is empty without one). `false` if it does not fit the range.
    pub fn load(&mut self, ns: u32, keys: u64, per_slot: Vec<u32>) -> bool {
        if per_slot.len() != self.slots() {
            return false;
        }
        let e = self.entry(ns);
        e.keys = keys;
        e.per_slot = per_slot.into_boxed_slice();
        true
    }

    pub fn clear(&mut self) {
        self.entries.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_per_namespace_and_per_slot() {
        let mut k = NsKeys::for_range(SlotRange::new(100, 199));
        k.add(0, 100);
        k.add(0, 150);
        k.add(0, 150);
        k.add(3, 199);
        assert_eq!((k.get(0), k.get(3), k.len()), (3, 1, 2));
        let r = |lo, hi| SlotRange::new(lo, hi).unwrap();
        assert_eq!(k.in_range(0, r(150, 150)), 2);
        assert_eq!(k.in_range(0, r(0, 120)), 1);
        assert_eq!(k.in_range(0, r(200, 300)), 0);
        assert_eq!(k.in_range(3, r(0, 16383)), 1);
        k.sub(3, 199);
        assert_eq!(k.len(), 1);
        k.sub(0, 150);
        assert_eq!((k.get(0), k.in_range(0, r(150, 150))), (2, 1));
        k.sub(5, 150);
        assert_eq!(k.remove(0), 2);
        assert_eq!(k, NsKeys::for_range(SlotRange::new(100, 199)));
    }

    #[test]
    fn narrowing_keeps_the_kept_slots_counts_only() {
        let mut k = NsKeys::for_range(SlotRange::new(0, 9));
        for slot in [1, 2, 2, 7, 8] {
            k.add(0, slot);
        }
        k.add(1, 9);
        k.narrow(SlotRange::new(0, 4).unwrap());
        assert_eq!((k.get(0), k.get(1), k.len(), k.slots()), (3, 0, 1, 5));
        assert_eq!(k.in_range(0, SlotRange::ALL), 3);
    }

    #[test]
    fn without_a_range_only_totals_are_kept() {
        let mut k = NsKeys::for_range(None);
        k.add(0, 5);
        k.add(0, 16383);
        assert_eq!(
            (k.get(0), k.in_range(0, SlotRange::ALL), k.slots()),
            (2, 0, 0)
        );
        assert!(k.load(1, 7, Vec::new()));
        assert!(!k.load(2, 7, vec![1]));
    }
}
