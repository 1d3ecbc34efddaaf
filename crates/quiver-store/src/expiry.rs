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

#[derive(Clone, Debug, Default)]
pub(crate) struct Expiries {
    by_hash: HashMap<u64, u64>,
    /// (expire_at, hash)
    by_time: BTreeSet<(u64, u64)>,
    /// Sum of every entry's expire_at (for the average time to live).
    sum: u128,
}

impl Expiries {
    /// Records that the key with `hash` now expires at `at` (or never: `None`).
    pub fn set(&mut self, hash: u64, at: Option<u64>) {
        match at {
            Some(at) => {
                if let Some(old) = self.by_hash.insert(hash, at) {
                    self.by_time.remove(&(old, hash));
                    self.sum -= old as u128;
                }
                self.by_time.insert((at, hash));
                self.sum += at as u128;
            }
            None => self.remove(hash),
        }
    }

    /// The key with `hash` is gone, or no longer expires.
    pub fn remove(&mut self, hash: u64) {
        if let Some(old) = self.by_hash.remove(&hash) {
            self.by_time.remove(&(old, hash));
            self.sum -= old as u128;
        }
    }

    pub fn len(&self) -> usize {
        self.by_hash.len()
    }

    /// Entries whose time has come (`expire_at <= now`): O(their number).
    pub fn due_count(&self, now: u64) -> usize {
        self.by_time.range(..=(now, u64::MAX)).count()
    }

    /// Up to `max` hashes of keys whose time has come, the earliest first.
    pub fn due(&self, now: u64, max: usize) -> Vec<u64> {
        self.by_time
            .range(..=(now, u64::MAX))
            .take(max)
            .map(|&(_, h)| h)
            .collect()
    }

    /// Keys with an expiry still ahead of `now`, and the sum of their remaining times (ms).
    pub fn pending(&self, now: u64) -> (u64, u128) {
        let (mut n, mut sum) = (self.by_hash.len() as u64, self.sum);
        for &(at, _) in self.by_time.range(..=(now, u64::MAX)) {
            n -= 1;
            sum -= at as u128;
        }
        (n, sum.saturating_sub(n as u128 * now as u128))
    }

    /// Every (hash, expire_at), for a checkpoint.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.by_hash.iter().map(|(&h, &t)| (h, t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_replace_and_count() {
        let mut e = Expiries::default();
        e.set(1, Some(100));
        e.set(2, Some(50));
        e.set(1, Some(200));
        e.set(3, None);
        assert_eq!(e.len(), 2);
        assert_eq!(e.due_count(49), 0);
        assert_eq!(e.due(60, 10), vec![2]);
        assert_eq!(e.pending(60), (1, 140));
        e.remove(2);
        e.set(1, None);
        assert_eq!(e.len(), 0);
        assert_eq!(e.pending(0), (0, 0));
    }
}
