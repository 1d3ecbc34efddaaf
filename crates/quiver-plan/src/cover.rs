//! Minimum set cover over at most 64 elements: the exact solver ([`Solver`], branch and
//! bound) and the classic greedy approximation ([`greedy_cover`]).
//!
//! The universe and every set are bit masks (`u64`): element `e` is bit `e`. The callers are
//! [`crate::plan`] (which replica serves each key of a multiget) and [`crate::sim`] (the
//! Monte Carlo of the expected multiget width).

/// The greedy approximation of minimum set cover: repeatedly take the set covering the most
/// uncovered elements (the first such set on ties). Returns the indices of the sets taken, or
/// `None` if the sets do not cover `universe`. Within a factor `H(max set size)` of optimal.
pub fn greedy_cover(universe: u64, sets: &[u64]) -> Option<Vec<usize>> {
    let mut uncovered = universe;
    let mut taken = Vec::new();
    while uncovered != 0 {
        let (best, gain) = sets
            .iter()
            .enumerate()
            .map(|(i, &m)| (i, (m & uncovered).count_ones()))
            .fold((usize::MAX, 0), |acc, x| if x.1 > acc.1 { x } else { acc });
        if gain == 0 {
            return None;
        }
        taken.push(best);
        uncovered &= !sets[best];
    }
    Some(taken)
}

/// An exact minimum set cover of `universe` by `sets` (indices into `sets`), or `None` if
/// the sets do not cover it. See [`Solver`] for how.
pub fn exact_cover(universe: u64, sets: &[u64]) -> Option<Vec<usize>> {
    Solver::default().min_cover(universe, sets)
}

/// Exact minimum set cover by branch and bound, for small universes (at most 64 elements).
///
/// 1. Reduce: clip the sets to the universe, drop empty and duplicate sets and sets contained
///    in another (some minimum cover never needs them).
/// 2. Start from the greedy cover as the incumbent: the search only looks for strictly
///    smaller covers.
/// 3. Branch on the uncovered element with the fewest usable sets (each branch takes one of
///    them, most new elements first). Branch `i` bans the sets of branches `0..i`, so the
///    branches partition the covers and no cover is explored twice.
/// 4. Prune a node when `chosen + lower bound >= incumbent`, with the larger of two bounds:
///    `ceil(uncovered / largest usable set's new elements)`, and the size of a set of
///    uncovered elements no two of which share a usable set (each needs its own set) —
///    the strong one when sets are small, as on large clusters.
///
/// Reusable: keeps its buffers between calls.
#[derive(Default)]
pub struct Solver {
    /// The reduced sets.
    masks: Vec<u64>,
    /// Index in the caller's slice of each reduced set.
    origin: Vec<usize>,
    /// Per reduced set: how many enclosing branches ban it (0 = usable).
    banned: Vec<u32>,
    /// Per element (bit position), the reduced sets containing it.
    containing: Vec<Vec<u32>>,
    chosen: Vec<u32>,
    best: Vec<u32>,
}

impl Solver {
    /// The minimum cover (indices into `sets`), or `None` if there is none.
    pub fn min_cover(&mut self, universe: u64, sets: &[u64]) -> Option<Vec<usize>> {
        if !self.solve(universe, sets) {
            return None;
        }
        let mut out: Vec<usize> = self.best.iter().map(|&i| self.origin[i as usize]).collect();
        out.sort_unstable();
        Some(out)
    }

    /// The size of a minimum cover. Panics if the sets do not cover the universe.
    pub fn min_cover_len(&mut self, universe: u64, sets: &[u64]) -> usize {
        assert!(
            self.solve(universe, sets),
            "the sets do not cover the universe"
        );
        self.best.len()
    }

    /// Leaves a minimum cover in `self.best`; false if there is no cover.
    fn solve(&mut self, universe: u64, sets: &[u64]) -> bool {
        self.reduce(universe, sets);
        // The greedy cover of the reduced sets is the first incumbent; there is none exactly
        // when the sets do not cover the universe.
        let Some(greedy) = greedy_cover(universe, &self.masks) else {
            return false;
        };
        self.best.clear();
        if universe == 0 {
            return true;
        }
        self.best.extend(greedy.iter().map(|&i| i as u32));
        self.banned.clear();
        self.banned.resize(self.masks.len(), 0);
        for c in &mut self.containing {
            c.clear();
        }
        self.containing.resize_with(64, Vec::new);
        for (i, &m) in self.masks.iter().enumerate() {
            for e in Bits(m) {
                self.containing[e].push(i as u32);
            }
        }
        self.chosen.clear();
        self.search(universe);
        true
    }

    /// Step 1: the reduced sets, with where each came from.
    fn reduce(&mut self, universe: u64, sets: &[u64]) {
        self.masks.clear();
        self.origin.clear();
        // Larger sets first, so a set is only ever checked against the ones kept before it
        // (a set can only be contained in one at least as large).
        let mut order: Vec<usize> = (0..sets.len())
            .filter(|&i| sets[i] & universe != 0)
            .collect();
        order.sort_by_key(|&i| (std::cmp::Reverse((sets[i] & universe).count_ones()), i));
        for i in order {
            let m = sets[i] & universe;
            if self.masks.iter().any(|&k| m & !k == 0) {
                continue; // contained in (or equal to) a kept set
            }
            self.masks.push(m);
            self.origin.push(i);
        }
    }

    fn search(&mut self, uncovered: u64) {
        if uncovered == 0 {
            if self.chosen.len() < self.best.len() {
                self.best.clone_from(&self.chosen);
            }
            return;
        }
        let depth = self.chosen.len();
        if depth + 1 >= self.best.len() {
            return;
        }
        // The element with the fewest usable sets, and per element the union of its usable
        // sets (its "neighbours": elements that can share a set with it).
        let mut branch_elem = usize::MAX;
        let mut fewest = u32::MAX;
        let mut neighbours = [0u64; 64];
        let mut largest = 0u32;
        for e in Bits(uncovered) {
            let mut options = 0u32;
            for &s in &self.containing[e] {
                if self.banned[s as usize] == 0 {
                    options += 1;
                    let m = self.masks[s as usize];
                    neighbours[e] |= m;
                    largest = largest.max((m & uncovered).count_ones());
                }
            }
            if options == 0 {
                return; // the bans of enclosing branches leave this element uncoverable
            }
            if options < fewest {
                fewest = options;
                branch_elem = e;
            }
        }
        let left = uncovered.count_ones();
        let bound_size = left.div_ceil(largest);
        // Greedy independent set of elements, least-connected first.
        let mut elems: [(u32, u8); 64] = [(0, 0); 64];
        let mut n = 0;
        for e in Bits(uncovered) {
            elems[n] = ((neighbours[e] & uncovered).count_ones(), e as u8);
            n += 1;
        }
        elems[..n].sort_unstable();
        let mut free = uncovered;
        let mut bound_indep = 0u32;
        for &(_, e) in &elems[..n] {
            if free & (1 << e) != 0 {
                bound_indep += 1;
                free &= !neighbours[e as usize];
            }
        }
        if depth + bound_size.max(bound_indep) as usize >= self.best.len() {
            return;
        }

        let mut options: Vec<(u32, u32)> = self.containing[branch_elem]
            .iter()
            .filter(|&&s| self.banned[s as usize] == 0)
            .map(|&s| ((self.masks[s as usize] & uncovered).count_ones(), s))
            .collect();
        options.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        for &(_, s) in &options {
            self.chosen.push(s);
            self.search(uncovered & !self.masks[s as usize]);
            self.chosen.pop();
            self.banned[s as usize] += 1;
        }
        for &(_, s) in &options {
            self.banned[s as usize] -= 1;
        }
    }
}

/// The positions of the set bits of a mask, lowest first.
pub(crate) struct Bits(pub(crate) u64);

impl Iterator for Bits {
    type Item = usize;
    #[inline]
    fn next(&mut self) -> Option<usize> {
        if self.0 == 0 {
            return None;
        }
        let e = self.0.trailing_zeros() as usize;
        self.0 &= self.0 - 1;
        Some(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::WyRand;

    fn mask(elems: &[u32]) -> u64 {
        elems.iter().fold(0, |m, &e| m | 1 << e)
    }

    fn is_cover(universe: u64, sets: &[u64], chosen: &[usize]) -> bool {
        chosen.iter().fold(0, |a, &i| a | sets[i]) & universe == universe
    }

    /// Exhaustive minimum cover size, for checking the solver on tiny instances.
    fn brute_force(universe: u64, sets: &[u64]) -> Option<usize> {
        let n = sets.len();
        assert!(n <= 16);
        (0u32..1 << n)
            .filter(|pick| {
                (0..n)
                    .filter(|&i| pick & 1 << i != 0)
                    .fold(0, |a, i| a | sets[i])
                    & universe
                    == universe
            })
            .map(|pick| pick.count_ones() as usize)
            .min()
    }

    #[test]
    fn hand_built_instances() {
        // The textbook case where greedy is fooled: two halves {0..6} and {7..13} cover
        // everything, but greedy first takes the 8-element set straddling them.
        let u = (1u64 << 14) - 1;
        let sets = [
            mask(&[0, 1, 2, 3, 4, 5, 6]),
            mask(&[7, 8, 9, 10, 11, 12, 13]),
            mask(&[0, 1, 2, 3, 7, 8, 9, 10]),
            mask(&[4, 5, 11, 12]),
            mask(&[6, 13]),
        ];
        assert_eq!(exact_cover(u, &sets), Some(vec![0, 1]));
        let g = greedy_cover(u, &sets).unwrap();
        assert_eq!(g, vec![2, 3, 4]);

        // Every set needed: disjoint singletons.
        let sets = [mask(&[0]), mask(&[1]), mask(&[2])];
        assert_eq!(exact_cover(0b111, &sets), Some(vec![0, 1, 2]));
        // One set holds everything.
        let sets = [mask(&[0, 1]), mask(&[0, 1, 2, 3]), mask(&[2, 3])];
        assert_eq!(exact_cover(0b1111, &sets), Some(vec![1]));
        // Elements outside the universe are ignored; duplicates and subsets are harmless.
        let sets = [mask(&[0, 5]), mask(&[0, 5]), mask(&[1, 6]), mask(&[1])];
        assert_eq!(exact_cover(0b11, &sets).map(|c| c.len()), Some(2));
        // No cover.
        assert_eq!(exact_cover(0b111, &[mask(&[0]), mask(&[1])]), None);
        assert_eq!(greedy_cover(0b111, &[mask(&[0]), mask(&[1])]), None);
        // The empty universe needs nothing.
        assert_eq!(exact_cover(0, &[mask(&[0])]), Some(vec![]));
    }

    #[test]
    fn exact_matches_brute_force_and_never_exceeds_greedy() {
        let mut rng = WyRand::new(7);
        let mut solver = Solver::default();
        for trial in 0..3000 {
            let elems = 1 + rng.below(20) as u32;
            let universe = if elems == 64 {
                u64::MAX
            } else {
                (1u64 << elems) - 1
            };
            let n = 1 + rng.below(14) as usize;
            let density = 1 + rng.below(6);
            let sets: Vec<u64> = (0..n)
                .map(|_| {
                    (0..elems)
                        .filter(|_| rng.below(10) < density)
                        .fold(0, |m, e| m | 1 << e)
                })
                .collect();
            let exact = solver.min_cover(universe, &sets);
            let greedy = greedy_cover(universe, &sets);
            let brute = brute_force(universe, &sets);
            assert_eq!(
                exact.as_ref().map(Vec::len),
                brute,
                "trial {trial}: {sets:?}"
            );
            assert_eq!(greedy.is_some(), brute.is_some());
            if let (Some(e), Some(g)) = (exact, greedy) {
                assert!(is_cover(universe, &sets, &e), "trial {trial}");
                assert!(is_cover(universe, &sets, &g), "trial {trial}");
                assert!(e.len() <= g.len(), "trial {trial}");
            }
        }
    }
}
