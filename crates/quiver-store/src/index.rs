//! The in-RAM hash index of one partition (FAWN-DS, thesis Fig. 4.2, with linear probing).
//!
//! Each slot is 6 bytes held in two arrays: a 16-bit key fragment (0 = empty, 1 = tombstone)
//! and a 32-bit log location (`slot * span + offset / 8`). The full key is never in RAM: a
//! fragment match is confirmed by reading the record and comparing keys, and a mismatch resumes
//! probing where it stopped. A key's home slot is `(order * capacity) >> 32`, monotonic in the
//! hash, so slots are in hash order (which SCAN uses) whatever the capacity.
//!
//! The index never needs full keys to be rebuilt larger: growth re-reads the log (see
//! `maintenance`), so slots carry no spare hash bits and stay at 6 bytes. Between growths the
//! load stays between `LOAD_AFTER_GROWTH` and `LOAD_GROW`, i.e. 6.7 to 8 bytes per key.

use crate::hash::{KeyHash, FRAG_EMPTY, FRAG_TOMBSTONE};

/// Load (live + tombstones) / capacity at which growth is requested.
pub const LOAD_GROW: f64 = 0.90;
/// Load above which writers wait for growth instead of inserting (probe chains get long).
pub const LOAD_HARD_MAX: f64 = 0.96;
/// Load a rebuilt index is sized for.
pub const LOAD_AFTER_GROWTH: f64 = 0.75;
/// Load an index rebuilt from the logs (whose key count is known) is sized for.
pub const LOAD_AFTER_REBUILD: f64 = 0.80;
/// Smallest capacity of a partition's index.
pub const CAPACITY_MIN: usize = 1024;
/// RAM per slot: u16 fragment + u32 location.
pub const SLOT_BYTES: usize = 6;
/// How far ahead of its probe a loop over many keys prefetches a key's home slot (compaction's
/// liveness test and its index moves): enough misses in flight to fill the core's line-fill
/// buffers, few enough that none is evicted before its probe.
pub const PREFETCH_AHEAD: usize = 16;

pub struct Index {
    frags: Vec<u16>,
    locs: Vec<u32>,
    live: usize,
    tombstones: usize,
}

/// Where a probe for one key stands; kept across reads so a fragment collision resumes the
/// probe instead of restarting it.
#[derive(Clone, Copy, Debug)]
pub struct Probe {
    pub pos: usize,
    pub steps: usize,
}

impl Index {
    /// An empty index sized for `keys` keys at `LOAD_AFTER_GROWTH`.
    pub fn for_keys(keys: usize) -> Index {
        Index::for_keys_at(keys, LOAD_AFTER_GROWTH)
    }

    /// An empty index sized for `keys` keys at `load`.
    pub fn for_keys_at(keys: usize, load: f64) -> Index {
        let cap = ((keys as f64 / load).ceil() as usize).max(CAPACITY_MIN);
        Index::with_capacity(cap)
    }

    pub fn with_capacity(cap: usize) -> Index {
        assert!(cap >= 1 && cap <= u32::MAX as usize);
        Index {
            frags: zeroed_huge(cap),
            locs: zeroed_huge(cap),
            live: 0,
            tombstones: 0,
        }
    }

    /// Rebuilds from raw arrays (checkpoint load); counts live and tombstone slots.
    pub fn from_parts(frags: Vec<u16>, locs: Vec<u32>) -> Index {
        assert_eq!(frags.len(), locs.len());
        let live = frags.iter().filter(|&&f| f > FRAG_TOMBSTONE).count();
        let tombstones = frags.iter().filter(|&&f| f == FRAG_TOMBSTONE).count();
        Index {
            frags,
            locs,
            live,
            tombstones,
        }
    }

    pub fn frags(&self) -> &[u16] {
        &self.frags
    }

    pub fn locs(&self) -> &[u32] {
        &self.locs
    }

    pub fn capacity(&self) -> usize {
        self.frags.len()
    }

    pub fn live(&self) -> usize {
        self.live
    }

    /// (live + tombstones) / capacity.
    pub fn load(&self) -> f64 {
        (self.live + self.tombstones) as f64 / self.capacity() as f64
    }

    /// Whether `more` inserts fit under `LOAD_HARD_MAX`.
    pub fn has_room(&self, more: usize) -> bool {
        ((self.live + self.tombstones + more) as f64) <= LOAD_HARD_MAX * self.capacity() as f64
    }

    pub fn bytes(&self) -> usize {
        self.capacity() * SLOT_BYTES
    }

    #[inline]
    pub fn home(&self, hash: KeyHash) -> usize {
        ((hash.order() as u64 * self.capacity() as u64) >> 32) as usize
    }

    /// Smallest order value whose home slot is `slot` (SCAN cursors).
    pub fn first_order_of_slot(&self, slot: usize) -> u64 {
        ((slot as u64) << 32).div_ceil(self.capacity() as u64)
    }

    #[inline]
    pub fn probe(&self, hash: KeyHash) -> Probe {
        Probe {
            pos: self.home(hash),
            steps: 0,
        }
    }

    /// Software-prefetches the cache lines a probe for `hash` starts on.
    #[inline]
    pub fn prefetch(&self, hash: KeyHash) {
        let home = self.home(hash);
        prefetch_read(self.frags.as_ptr().wrapping_add(home));
        prefetch_read(self.locs.as_ptr().wrapping_add(home));
    }

    /// In a loop that probes `items` in order, called before the probe of item `i`: prefetches
    /// the home slot of the item [`PREFETCH_AHEAD`] places on (and, at the first item, of all
    /// those before it), so the probes find their lines in the cache.
    #[inline]
    pub fn prefetch_ahead<T>(&self, items: &[T], i: usize, hash: impl Fn(&T) -> KeyHash) {
        let from = if i == 0 { 0 } else { i + PREFETCH_AHEAD };
        for item in items.iter().take(i + PREFETCH_AHEAD + 1).skip(from) {
            self.prefetch(hash(item));
        }
    }

    /// The next slot at or after the probe position whose fragment equals `frag`, advancing the
    /// probe past it. `None` once an empty slot ends the chain.
    #[inline]
    pub fn next_candidate(&self, frag: u16, probe: &mut Probe) -> Option<(usize, u32)> {
        let cap = self.capacity();
        while probe.steps < cap {
            let pos = probe.pos;
            let f = self.frags[pos];
            probe.pos = if pos + 1 == cap { 0 } else { pos + 1 };
            probe.steps += 1;
            if f == frag {
                return Some((pos, self.locs[pos]));
            }
            if f == FRAG_EMPTY {
                return None;
            }
        }
        None
    }

    /// Slot holding exactly `loc` in `hash`'s chain, if any (compaction liveness test).
    pub fn find_loc(&self, hash: KeyHash, loc: u32) -> Option<usize> {
        let frag = hash.fragment();
        let mut probe = self.probe(hash);
        while let Some((pos, l)) = self.next_candidate(frag, &mut probe) {
            if l == loc {
                return Some(pos);
            }
        }
        None
    }

    /// Inserts a key known to be absent; returns its slot.
    pub fn insert(&mut self, hash: KeyHash, loc: u32) -> usize {
        debug_assert!(self.live + self.tombstones < self.capacity());
        let cap = self.capacity();
        let mut pos = self.home(hash);
        loop {
            let f = self.frags[pos];
            if f <= FRAG_TOMBSTONE {
                if f == FRAG_TOMBSTONE {
                    self.tombstones -= 1;
                }
                self.frags[pos] = hash.fragment();
                self.locs[pos] = loc;
                self.live += 1;
                return pos;
            }
            pos = if pos + 1 == cap { 0 } else { pos + 1 };
        }
    }

    pub fn set_loc(&mut self, pos: usize, loc: u32) {
        debug_assert!(self.frags[pos] > FRAG_TOMBSTONE);
        self.locs[pos] = loc;
    }

    pub fn remove(&mut self, pos: usize) {
        debug_assert!(self.frags[pos] > FRAG_TOMBSTONE);
        self.frags[pos] = FRAG_TOMBSTONE;
        self.live -= 1;
        self.tombstones += 1;
    }

    /// Live slot at `pos`: its location.
    pub fn live_at(&self, pos: usize) -> Option<u32> {
        (self.frags[pos] > FRAG_TOMBSTONE).then(|| self.locs[pos])
    }

    pub fn is_empty_at(&self, pos: usize) -> bool {
        self.frags[pos] == FRAG_EMPTY
    }
}

/// A zeroed array whose pages the kernel may back with transparent huge pages: index probes
/// land at random, and 2 MiB pages spare most of their TLB misses.
pub fn zeroed_huge<T: Copy + Default>(len: usize) -> Vec<T> {
    /// Arrays smaller than a huge page gain nothing.
    const HUGE_PAGE_BYTES: usize = 2 << 20;
    let v = vec![T::default(); len];
    let bytes = len * std::mem::size_of::<T>();
    if bytes >= HUGE_PAGE_BYTES {
        let start = (v.as_ptr() as usize).next_multiple_of(4096);
        let end = (v.as_ptr() as usize + bytes) & !4095;
        if end > start {
            // SAFETY: advice on pages inside our own allocation; it never changes their
            // contents (MADV_HUGEPAGE only allows huge pages), and failure is harmless.
            unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
            }
        }
    }
    v
}

#[inline]
fn prefetch_read<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetch is a hint; it never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch(p as *const i8, std::arch::x86_64::_MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_find_remove() {
        let mut ix = Index::with_capacity(CAPACITY_MIN);
        let hs: Vec<KeyHash> = (0..500u32).map(|i| KeyHash::of(&i.to_le_bytes())).collect();
        for (i, h) in hs.iter().enumerate() {
            ix.insert(*h, i as u32);
        }
        assert_eq!(ix.live(), 500);
        for (i, h) in hs.iter().enumerate() {
            assert!(ix.find_loc(*h, i as u32).is_some());
        }
        let pos = ix.find_loc(hs[7], 7).unwrap();
        ix.remove(pos);
        assert!(ix.find_loc(hs[7], 7).is_none());
        // Keys behind the tombstone are still found.
        for (i, h) in hs.iter().enumerate().filter(|(i, _)| *i != 7) {
            assert!(ix.find_loc(*h, i as u32).is_some(), "key {i}");
        }
        let again = ix.insert(hs[7], 77);
        assert_eq!(ix.find_loc(hs[7], 77), Some(again));
    }

    #[test]
    fn homes_are_monotonic_in_order() {
        let ix = Index::with_capacity(3000);
        let mut last = 0;
        for o in (0..u32::MAX).step_by(1 << 20) {
            let h = ix.home(KeyHash(o as u64));
            assert!(h >= last);
            last = h;
        }
        for slot in [0usize, 1, 2, 1500, 2999] {
            let o = ix.first_order_of_slot(slot);
            assert_eq!(ix.home(KeyHash(o)), slot);
            if o > 0 {
                assert_eq!(ix.home(KeyHash(o - 1)), slot - 1);
            }
        }
    }
}
