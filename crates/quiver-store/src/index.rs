//! The in-RAM hash index of one partition (FAWN-DS, thesis Fig. 4.2, with linear probing).
//!
//! Each slot is 6 bytes held in two arrays: a 16-bit key fragment (0 = empty, 1 = tombstone)
//! and a 32-bit log location (`slot * span + offset / 8`). The full key is never in RAM: a
//! fragment match is confirmed by reading the record and comparing keys, and a mismatch resumes
//! probing where it stopped. A key's home slot is `(order * capacity) >> 32`, monotonic in the
//! hash, so slots are in hash order (which SCAN uses) whatever the capacity.
//!
//! The index never needs full keys to be rebuilt larger: growth re-reads the log (see
//! `resize`), so slots carry no spare hash bits and stay at 6 bytes. Between growths the
//! load stays between `LOAD_AFTER_GROWTH` and `LOAD_GROW`, i.e. 6.7 to 8 bytes per key.
//!
//! A growth takes time in proportion to the partition, and the room left between
//! `LOAD_GROW` and `LOAD_HARD_MAX` lasts a writer time in the same proportion, but 3-4x
//! shorter (BENCHMARKS §34): in a bulk load, writers would wait for every growth. So an index
//! whose main table is full takes further keys in a **spill**, a second table as large,
//! probed after the main one, until the resize under way replaces both with one table.
//! Positions `0..capacity` are the main table's slots, the spill's follow them.

use crate::hash::{KeyHash, FRAG_EMPTY, FRAG_TOMBSTONE};

/// Load (live + tombstones) / capacity at which growth is requested.
pub const LOAD_GROW: f64 = 0.90;
/// Load above which a table takes no more keys (probe chains get long): the main table's
/// inserts go to the spill, and with the spill that full writers wait for growth.
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

/// A partition's index: its main table, and the spill that takes keys while the main table
/// is full (until a resize folds both into one).
pub struct Index {
    main: Table,
    spill: Option<Box<Table>>,
    /// A spill made ahead, its pages faulted in, for the insert that opens one (`SpareSpill`).
    spare: Option<SpareSpill>,
    /// Unique among the indexes of a process: a position found in an index means the same
    /// slot later only in the same index (see `lookup::foresee`).
    id: u64,
}

/// The next index's `id`.
static NEXT_INDEX_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn next_index_id() -> u64 {
    NEXT_INDEX_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// A spill table made ahead of the insert that opens it, its pages faulted in (a resize makes
/// one as it starts: `Index::keep_spare_spill`). Where that insert makes the table itself,
/// under the partition's lock, its first stores fault the pages in on the serving thread: a
/// huge page zeroed per fault, 6-8 ms of the thread's run each where the machine's memory was
/// never touched before (BENCHMARKS §55).
pub struct SpareSpill(Box<Table>);

impl SpareSpill {
    /// A spill of `cap` slots with every page faulted in, `step_done` called after each
    /// `PAGE_STEP_BYTES` of them.
    pub fn prefaulted(cap: usize, mut step_done: impl FnMut()) -> SpareSpill {
        let mut table = Box::new(Table::with_capacity(cap));
        crate::stalls::fault_in(&mut table.frags, &mut step_done);
        crate::stalls::fault_in(&mut table.locs, &mut step_done);
        SpareSpill(table)
    }
}

/// One linear-probing table; positions are its own.
struct Table {
    frags: Vec<u16>,
    locs: Vec<u32>,
    live: usize,
    tombstones: usize,
}

/// Where a probe for one key stands; kept across reads so a fragment collision resumes the
/// probe instead of restarting it. Valid while the index is unchanged but for inserts.
#[derive(Clone, Copy, Debug)]
pub struct Probe {
    /// Position within the table probed (the main table's, or the spill's).
    pos: usize,
    steps: usize,
    /// The key's home in the spill, if the index has one; `None` once probing it.
    spill_home: Option<usize>,
    in_spill: bool,
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
        Index {
            main: Table::with_capacity(cap),
            spill: None,
            spare: None,
            id: next_index_id(),
        }
    }

    /// Rebuilds from raw arrays (checkpoint load); counts live and tombstone slots.
    pub fn from_parts(frags: Vec<u16>, locs: Vec<u32>) -> Index {
        assert_eq!(frags.len(), locs.len());
        let live = frags.iter().filter(|&&f| f > FRAG_TOMBSTONE).count();
        let tombstones = frags.iter().filter(|&&f| f == FRAG_TOMBSTONE).count();
        Index {
            main: Table {
                frags,
                locs,
                live,
                tombstones,
            },
            spill: None,
            spare: None,
            id: next_index_id(),
        }
    }

    /// The capacity of the spare spill (`SpareSpill`) this index wants while `coming` more
    /// keys are inserted: its main table has no room for them, and it has no spill yet nor a
    /// spare. A spare is RAM as large as the main table, so only for a spill that is coming.
    pub fn spare_spill_wanted(&self, coming: usize) -> Option<usize> {
        let cap = self.capacity();
        (coming > self.main.room() && self.takes_spare(cap)).then_some(cap)
    }

    /// Whether a spare of `cap` slots would be this index's spill: one of its main table's
    /// size, and it has neither a spill nor such a spare yet.
    fn takes_spare(&self, cap: usize) -> bool {
        let have = self.spare.as_ref().is_some_and(|s| s.0.capacity() == cap);
        cap == self.capacity() && self.spill.is_none() && !have
    }

    /// Keeps `spare` for the insert that opens this index's spill, if it is of the main
    /// table's size and none is open; else hands it back (for the caller to free outside its
    /// lock).
    pub fn keep_spare_spill(&mut self, spare: SpareSpill) -> Option<SpareSpill> {
        if !self.takes_spare(spare.0.capacity()) {
            return Some(spare);
        }
        self.spare = Some(spare);
        None
    }

    /// This index's identity (unique in the process).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Whether `hash` has no candidate slot (no live slot with its fragment): the key is
    /// certainly absent, without a read of the log.
    pub fn surely_absent(&self, hash: KeyHash) -> bool {
        self.next_candidate(hash.fragment(), &mut self.probe(hash))
            .is_none()
    }

    /// The main table's fragments (a checkpoint saves only an index without a spill).
    pub fn frags(&self) -> &[u16] {
        &self.main.frags
    }

    /// The main table's locations.
    pub fn locs(&self) -> &[u32] {
        &self.main.locs
    }

    /// Slots of the main table.
    pub fn capacity(&self) -> usize {
        self.main.capacity()
    }

    /// Positions there are: the main table's slots, then the spill's.
    pub fn slots(&self) -> usize {
        self.capacity() + self.spill.as_ref().map_or(0, |s| s.capacity())
    }

    pub fn has_spill(&self) -> bool {
        self.spill.is_some()
    }

    /// Live keys, in both tables.
    pub fn live(&self) -> usize {
        self.main.live + self.spill.as_ref().map_or(0, |s| s.live)
    }

    /// Keys in the spill.
    pub fn spilled(&self) -> usize {
        self.spill.as_ref().map_or(0, |s| s.live)
    }

    /// The main table's (live + tombstones) / capacity.
    pub fn load(&self) -> f64 {
        self.main.used() as f64 / self.capacity() as f64
    }

    /// Whether the index should grow: its main table is past `LOAD_GROW`, or full and
    /// spilling.
    pub fn wants_growth(&self) -> bool {
        self.load() > LOAD_GROW || self.spill.is_some()
    }

    /// Whether `more` inserts fit, in the main table and the spill (one is opened when
    /// needed).
    pub fn has_room(&self, more: usize) -> bool {
        let spill = match &self.spill {
            Some(s) => s.room(),
            None => Table::room_of(self.capacity(), 0),
        };
        more <= self.main.room() + spill
    }

    /// RAM the tables take (a spare spill's too).
    pub fn bytes(&self) -> usize {
        let spare = self.spare.as_ref().map_or(0, |s| s.0.capacity());
        (self.slots() + spare) * SLOT_BYTES
    }

    /// The main table's home slot of `hash`.
    #[inline]
    pub fn home(&self, hash: KeyHash) -> usize {
        self.main.home(hash)
    }

    /// Smallest order value whose home slot in the main table is `slot` (SCAN cursors).
    pub fn first_order_of_slot(&self, slot: usize) -> u64 {
        ((slot as u64) << 32).div_ceil(self.capacity() as u64)
    }

    #[inline]
    pub fn probe(&self, hash: KeyHash) -> Probe {
        Probe {
            pos: self.main.home(hash),
            steps: 0,
            spill_home: self.spill.as_ref().map(|s| s.home(hash)),
            in_spill: false,
        }
    }

    /// Software-prefetches the cache lines a probe for `hash` starts on (in the main table:
    /// a spill is rare and short-lived).
    #[inline]
    pub fn prefetch(&self, hash: KeyHash) {
        let home = self.home(hash);
        prefetch_read(self.main.frags.as_ptr().wrapping_add(home));
        prefetch_read(self.main.locs.as_ptr().wrapping_add(home));
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

    /// The next position at or after the probe's whose fragment equals `frag`, advancing the
    /// probe past it: along the main table's chain, then the spill's. `None` once an empty
    /// slot ends the last chain.
    #[inline]
    pub fn next_candidate(&self, frag: u16, probe: &mut Probe) -> Option<(usize, u32)> {
        if !probe.in_spill {
            if let Some(found) = self.main.next_candidate(frag, probe) {
                return Some(found);
            }
            // A probe made before the spill was opened has no home in it: the caller's key
            // was looked up before the insert that opened it, so it is in neither table.
            let home = probe.spill_home?;
            *probe = Probe {
                pos: home,
                steps: 0,
                spill_home: None,
                in_spill: true,
            };
        }
        let spill = self.spill.as_ref()?;
        let (pos, loc) = spill.next_candidate(frag, probe)?;
        Some((self.capacity() + pos, loc))
    }

    /// Position holding exactly `loc` in `hash`'s chains, if any (compaction liveness test).
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

    /// Inserts a key known to be absent — in the main table while it has room, else in the
    /// spill, opened now if need be — and returns its position. The caller checked
    /// `has_room`.
    pub fn insert(&mut self, hash: KeyHash, loc: u32) -> usize {
        if self.main.room() > 0 {
            return self.main.insert(hash, loc);
        }
        // As large as the main table: a spill of half its size filled while a resize ran, on
        // a core the writers shared with it (BENCHMARKS §35).
        let cap = self.capacity();
        // A spare is kept only at the main table's size (`takes_spare`), which changes only
        // with a new index.
        let spare = &mut self.spare;
        let spill = self.spill.get_or_insert_with(|| match spare.take() {
            Some(SpareSpill(table)) => table,
            None => Box::new(Table::with_capacity(cap)),
        });
        debug_assert_eq!(spill.capacity(), cap, "a spill of another size");
        debug_assert!(spill.room() > 0, "an insert without room");
        self.main.capacity() + spill.insert(hash, loc)
    }

    pub fn set_loc(&mut self, pos: usize, loc: u32) {
        let (table, at) = self.table_mut(pos);
        debug_assert!(table.frags[at] > FRAG_TOMBSTONE);
        table.locs[at] = loc;
    }

    pub fn remove(&mut self, pos: usize) {
        let (table, at) = self.table_mut(pos);
        table.remove(at);
    }

    /// Live slot at `pos`: its location.
    pub fn live_at(&self, pos: usize) -> Option<u32> {
        let (table, at) = self.table(pos);
        (table.frags[at] > FRAG_TOMBSTONE).then(|| table.locs[at])
    }

    /// The fragment at `pos`.
    pub fn frag_at(&self, pos: usize) -> u16 {
        let (table, at) = self.table(pos);
        table.frags[at]
    }

    /// Locations of every live key whose hash order is in `[from, end)` — and of some others
    /// (each table's slots from the home of `from` to that of `end - 1`, and the chains that
    /// run past them): SCAN reads their keys and keeps those in range.
    pub fn locs_for_orders(&self, from: u32, end: u64, out: &mut Vec<u32>) {
        self.main.locs_for_orders(from, end, out);
        if let Some(spill) = &self.spill {
            spill.locs_for_orders(from, end, out);
        }
    }

    fn table(&self, pos: usize) -> (&Table, usize) {
        let cap = self.capacity();
        match (pos.checked_sub(cap), &self.spill) {
            (None, _) => (&self.main, pos),
            (Some(at), Some(spill)) => (spill, at),
            (Some(_), None) => panic!("index position {pos} past a table of {cap} slots"),
        }
    }

    fn table_mut(&mut self, pos: usize) -> (&mut Table, usize) {
        let cap = self.capacity();
        match (pos.checked_sub(cap), &mut self.spill) {
            (None, _) => (&mut self.main, pos),
            (Some(at), Some(spill)) => (spill, at),
            (Some(_), None) => panic!("index position {pos} past a table of {cap} slots"),
        }
    }
}

impl Table {
    fn with_capacity(cap: usize) -> Table {
        assert!(cap >= 1 && cap <= u32::MAX as usize);
        Table {
            frags: zeroed_huge(cap),
            locs: zeroed_huge(cap),
            live: 0,
            tombstones: 0,
        }
    }

    fn capacity(&self) -> usize {
        self.frags.len()
    }

    /// Slots taken: live and tombstones.
    fn used(&self) -> usize {
        self.live + self.tombstones
    }

    /// Inserts that fit under `LOAD_HARD_MAX`.
    fn room(&self) -> usize {
        Table::room_of(self.capacity(), self.used())
    }

    fn room_of(capacity: usize, used: usize) -> usize {
        ((LOAD_HARD_MAX * capacity as f64) as usize).saturating_sub(used)
    }

    #[inline]
    fn home(&self, hash: KeyHash) -> usize {
        self.home_of_order(hash.order() as u64)
    }

    #[inline]
    fn home_of_order(&self, order: u64) -> usize {
        ((order * self.capacity() as u64) >> 32) as usize
    }

    #[inline]
    fn next_candidate(&self, frag: u16, probe: &mut Probe) -> Option<(usize, u32)> {
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

    fn insert(&mut self, hash: KeyHash, loc: u32) -> usize {
        debug_assert!(self.used() < self.capacity());
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

    fn remove(&mut self, pos: usize) {
        debug_assert!(self.frags[pos] > FRAG_TOMBSTONE);
        self.frags[pos] = FRAG_TOMBSTONE;
        self.live -= 1;
        self.tombstones += 1;
    }

    /// See [`Index::locs_for_orders`]: the slots from the home of `from` to that of
    /// `end - 1`, then on to the next empty slot (wrapping past the table's end), never
    /// reaching the first slot again.
    fn locs_for_orders(&self, from: u32, end: u64, out: &mut Vec<u32>) {
        if end <= from as u64 {
            return;
        }
        let cap = self.capacity();
        // Homes are monotonic in the order: `start <= last`.
        let (start, last) = (self.home_of_order(from as u64), self.home_of_order(end - 1));
        let live = |pos: usize| (self.frags[pos] > FRAG_TOMBSTONE).then(|| self.locs[pos]);
        out.extend((start..=last).filter_map(live));
        let mut pos = (last + 1) % cap;
        let mut steps = last + 1 - start;
        while steps < cap && pos != start && self.frags[pos] != FRAG_EMPTY {
            out.extend(live(pos));
            pos = (pos + 1) % cap;
            steps += 1;
        }
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

    fn hashes(n: u32) -> Vec<KeyHash> {
        (0..n).map(|i| KeyHash::of(&i.to_le_bytes())).collect()
    }

    /// Keys a main table of `CAPACITY_MIN` slots holds at most.
    const MAIN_MAX: usize = (LOAD_HARD_MAX * CAPACITY_MIN as f64) as usize;

    /// An index of `CAPACITY_MIN` slots holding its most and `spilled` keys more (key `i` at
    /// location `i`), and the keys' hashes.
    fn spilled_index(spilled: usize) -> (Index, Vec<KeyHash>) {
        let mut ix = Index::with_capacity(CAPACITY_MIN);
        let hs = hashes((MAIN_MAX + spilled) as u32);
        for (i, h) in hs.iter().enumerate() {
            assert!(ix.has_room(1), "key {i}");
            let pos = ix.insert(*h, i as u32);
            assert_eq!(pos >= ix.capacity(), i >= MAIN_MAX, "key {i} at {pos}");
        }
        (ix, hs)
    }

    #[test]
    fn a_full_main_table_spills_and_every_key_stays_found() {
        let (mut ix, hs) = spilled_index(300);
        assert!(ix.has_spill() && ix.wants_growth());
        assert_eq!((ix.live(), ix.spilled()), (hs.len(), 300));
        assert_eq!(ix.slots(), 2 * CAPACITY_MIN);
        assert_eq!(ix.bytes(), ix.slots() * SLOT_BYTES);
        for (i, h) in hs.iter().enumerate() {
            let pos = ix
                .find_loc(*h, i as u32)
                .unwrap_or_else(|| panic!("key {i}"));
            assert_eq!(ix.live_at(pos), Some(i as u32));
            assert_eq!(ix.frag_at(pos), h.fragment());
        }
        // Updates and removals of spilled keys.
        let last = hs.len() - 1;
        let pos = ix.find_loc(hs[last], last as u32).unwrap();
        ix.set_loc(pos, 7_000_000);
        assert_eq!(ix.find_loc(hs[last], 7_000_000), Some(pos));
        ix.remove(pos);
        assert_eq!(ix.find_loc(hs[last], 7_000_000), None);
        assert_eq!(ix.spilled(), 299);
        // Both tables full: no room, and exactly as many inserts as fit are allowed.
        let left = 2 * MAIN_MAX - ix.live() - 1; // one tombstone in the spill
        assert!(ix.has_room(left) && !ix.has_room(left + 1));
    }

    /// A spill made ahead (by a resize, off the serving threads) is the one the insert that
    /// overflows the main table opens: its pages are not faulted in by that writer.
    #[test]
    fn the_insert_that_spills_opens_the_spare_spill_made_ahead() {
        let mut ix = Index::with_capacity(CAPACITY_MIN);
        assert_eq!(
            ix.spare_spill_wanted(MAIN_MAX),
            None,
            "room for those to come"
        );
        assert_eq!(ix.spare_spill_wanted(MAIN_MAX + 1), Some(CAPACITY_MIN));
        // One of another size is handed back (the main table grew since it was asked for).
        let wrong = SpareSpill::prefaulted(2 * CAPACITY_MIN, || {});
        assert!(ix.keep_spare_spill(wrong).is_some());
        let spare = SpareSpill::prefaulted(CAPACITY_MIN, || {});
        let spare_frags = spare.0.frags.as_ptr();
        assert!(ix.keep_spare_spill(spare).is_none());
        assert_eq!(
            ix.spare_spill_wanted(usize::MAX),
            None,
            "a spare is kept once"
        );
        assert_eq!(
            ix.bytes(),
            2 * CAPACITY_MIN * SLOT_BYTES,
            "its RAM is counted"
        );
        let hs = hashes((MAIN_MAX + 1) as u32);
        for (i, h) in hs.iter().enumerate() {
            ix.insert(*h, i as u32);
        }
        assert!(ix.has_spill() && ix.spare.is_none());
        assert_eq!(
            ix.spill.as_ref().map(|t| t.frags.as_ptr()),
            Some(spare_frags)
        );
        assert_eq!(ix.bytes(), ix.slots() * SLOT_BYTES);
        for (i, h) in hs.iter().enumerate() {
            assert!(ix.find_loc(*h, i as u32).is_some(), "key {i}");
        }
        // With a spill open, none is wanted.
        assert_eq!(ix.spare_spill_wanted(usize::MAX), None);
    }

    /// A spare's pages are faulted in a `PAGE_STEP_BYTES` step at a time (the caller paces
    /// between steps): 2 MiB of fragments and 4 MiB of locations, six steps.
    #[test]
    fn a_spare_spill_is_faulted_in_by_steps() {
        let mut steps = 0;
        let spare = SpareSpill::prefaulted(1 << 20, || steps += 1);
        assert_eq!(steps, 6);
        assert!(spare.0.frags.iter().all(|&f| f == FRAG_EMPTY));
        assert_eq!(spare.0.live, 0);
    }

    #[test]
    fn a_probe_goes_through_the_main_chain_into_the_spill() {
        let (ix, hs) = spilled_index(50);
        // A spilled key's probe passes its whole chain in the main table (candidates of the
        // same fragment included) before the spill's.
        let spilled = hs.len() - 1;
        let mut probe = ix.probe(hs[spilled]);
        let mut seen = Vec::new();
        while let Some((pos, loc)) = ix.next_candidate(hs[spilled].fragment(), &mut probe) {
            seen.push((pos >= ix.capacity(), loc));
        }
        assert_eq!(seen.last(), Some(&(true, spilled as u32)), "{seen:?}");
    }

    #[test]
    fn locs_for_orders_holds_every_key_in_the_range_from_both_tables() {
        let (ix, hs) = spilled_index(200);
        let bounds = [0u64, 1, 1 << 20, 1 << 31, (1 << 32) - 5, 1 << 32];
        for &from in &bounds[..bounds.len() - 1] {
            for &end in bounds.iter().filter(|&&e| e > from) {
                let mut locs = Vec::new();
                ix.locs_for_orders(from as u32, end, &mut locs);
                for (i, h) in hs.iter().enumerate() {
                    let order = h.order() as u64;
                    if from <= order && order < end {
                        assert!(locs.contains(&(i as u32)), "key {i} in [{from}, {end})");
                    }
                }
            }
        }
    }
}
