//! A partition's keys with an expiry time, for the active sweep, exact key counts and INFO's
//! `expires=` / `avg_ttl=`. Keys without expiry cost nothing here; each key with one costs an
//! entry in a hash map and in an ordered set (by 64-bit key hash, so the structure needs no
//! key bytes and survives compaction and resizes, which move records, unchanged).
//!
//! It is a summary, not the truth: a record's own expiry decides whether it is live (reads
//! check it), and the sweep verifies the record before deleting anything. Two keys of a
//! partition whose 64-bit hashes collide share one entry; the only effect is on the summary
//! (one may be swept later, lazily, as a read finds it expired).

use std::collections::{BTreeSet, HashMap};

use crate::slot::SlotRange;

#[derive(Clone, Debug, Default)]
pub(crate) struct Expiries {
    /// hash -> (expire_at, namespace, hash slot). foldhash, not SipHash: every put of a key
    /// asks it.
    by_hash: HashMap<u64, (u64, u32, u16), foldhash::fast::RandomState>,
    /// (expire_at, hash)
    by_time: BTreeSet<(u64, u64)>,
    /// Per namespace: entries and the sum of their expire_at (for the average time to live).
    per_ns: Vec<(u32, u64, u128)>,
}

impl Expiries {
    /// Records that the key with `hash` (of namespace `ns`, in hash slot `slot`) now expires
    /// at `at` (or never: `None`).
    pub fn set(&mut self, hash: u64, ns: u32, slot: u16, at: Option<u64>) {
        self.remove(hash);
        if let Some(at) = at {
            self.by_hash.insert(hash, (at, ns, slot));
            self.by_time.insert((at, hash));
            match self.per_ns.iter_mut().find(|e| e.0 == ns) {
                Some(e) => {
                    e.1 += 1;
                    e.2 += at as u128;
                }
                None => self.per_ns.push((ns, 1, at as u128)),
            }
        }
    }

    /// The key with `hash` is gone, or no longer expires.
    pub fn remove(&mut self, hash: u64) {
        // Most stores have few keys with an expiry; a put of one without must not pay a probe.
        if self.by_hash.is_empty() {
            return;
        }
        if let Some((old, ns, _)) = self.by_hash.remove(&hash) {
            self.by_time.remove(&(old, hash));
            if let Some(i) = self.per_ns.iter().position(|e| e.0 == ns) {
                let e = &mut self.per_ns[i];
                e.1 -= 1;
                e.2 -= old as u128;
                if e.1 == 0 {
                    self.per_ns.swap_remove(i);
                }
            }
        }
    }

    /// Forgets every entry of namespace `ns` (its database was flushed).
    pub fn remove_ns(&mut self, ns: u32) {
        if !self.per_ns.iter().any(|e| e.0 == ns) {
            return;
        }
        let gone: Vec<u64> = self
            .by_hash
            .iter()
            .filter(|(_, &(_, n, _))| n == ns)
            .map(|(&h, _)| h)
            .collect();
        for h in gone {
            self.remove(h);
        }
    }

    pub fn len(&self) -> usize {
        self.by_hash.len()
    }

    /// Entries of namespace `ns` whose time has come (`expire_at <= now`): O(due entries).
    pub fn due_count(&self, ns: u32, now: u64) -> usize {
        if !self.per_ns.iter().any(|e| e.0 == ns) {
            return 0;
        }
        self.due_hashes(now)
            .filter(|h| self.by_hash.get(h).is_some_and(|e| e.1 == ns))
            .count()
    }

    /// Entries of namespace `ns` in the slots of `range` whose time has come: O(due entries).
    pub fn due_in_range(&self, ns: u32, range: SlotRange, now: u64) -> usize {
        if !self.per_ns.iter().any(|e| e.0 == ns) {
            return 0;
        }
        self.due_hashes(now)
            .filter(|h| {
                self.by_hash
                    .get(h)
                    .is_some_and(|e| e.1 == ns && range.contains(e.2))
            })
            .count()
    }

    /// Up to `max` hashes of keys whose time has come, the earliest first.
    pub fn due(&self, now: u64, max: usize) -> Vec<u64> {
        self.due_hashes(now).take(max).collect()
    }

    fn due_hashes(&self, now: u64) -> impl Iterator<Item = u64> + '_ {
        self.by_time.range(..=(now, u64::MAX)).map(|&(_, h)| h)
    }

    /// Keys of namespace `ns` with an expiry still ahead of `now`, and the sum of their
    /// remaining times (ms).
    pub fn pending(&self, ns: u32, now: u64) -> (u64, u128) {
        let Some(&(_, mut n, mut sum)) = self.per_ns.iter().find(|e| e.0 == ns) else {
            return (0, 0);
        };
        for &(at, h) in self.by_time.range(..=(now, u64::MAX)) {
            if self.by_hash.get(&h).is_some_and(|e| e.1 == ns) {
                n -= 1;
                sum -= at as u128;
            }
        }
        (n, sum.saturating_sub(n as u128 * now as u128))
    }

    /// Every (hash, expire_at, namespace, slot), for a checkpoint.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64, u32, u16)> + '_ {
        self.by_hash
            .iter()
            .map(|(&h, &(t, ns, slot))| (h, t, ns, slot))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_replace_and_count() {
        let mut e = Expiries::default();
        e.set(1, 0, 10, Some(100));
        e.set(2, 0, 20, Some(50));
        e.set(1, 0, 10, Some(200));
        e.set(3, 0, 30, None);
        e.set(4, 7, 40, Some(40));
        assert_eq!(e.len(), 3);
        assert_eq!(e.due_count(0, 49), 0);
        assert_eq!(e.due_count(7, 49), 1);
        assert_eq!(e.due(60, 10), vec![4, 2]);
        let r = |lo, hi| SlotRange::new(lo, hi).unwrap();
        assert_eq!(e.due_in_range(0, r(0, 19), 60), 0);
        assert_eq!(e.due_in_range(0, r(20, 20), 60), 1);
        assert_eq!(e.due_in_range(0, r(0, 16383), 49), 0);
        assert_eq!(e.due_in_range(7, r(40, 40), 60), 1);
        assert_eq!(e.pending(0, 60), (1, 140));
        assert_eq!(e.pending(7, 10), (1, 30));
        e.remove_ns(7);
        e.remove(2);
        e.set(1, 0, 10, None);
        assert_eq!(e.len(), 0);
        assert_eq!(e.pending(0, 0), (0, 0));
    }
}
