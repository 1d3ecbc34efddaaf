//! Which replica serves each key of a multiget, so that the multiget contacts as few servers
//! as possible (and sends each of them a vector as wide as possible).
//!
//! That is a minimum set cover: the universe is the multiget's keys, and each server is the
//! set of those keys it holds. Up to [`EXACT_KEYS_MAX`] keys it is solved exactly
//! ([`crate::cover::Solver`], branch and bound); wider multigets are planned greedily (the
//! set covering the most unplanned keys first, within a factor `H(max keys per server)` of the
//! minimum).
//!
//! ```
//! use quiver_plan::plan;
//!
//! // Key 0 is on servers 1 and 2, key 1 on 2 and 3, key 2 on 3 only.
//! let p = plan(&[vec![1, 2], vec![2, 3], vec![3]])?;
//! assert_eq!(p.groups.len(), 2);
//! assert!(p.exact);
//! // Each key goes to the first of its replicas (in the order given) that is contacted.
//! for (key, server) in p.assignment.iter().enumerate() {
//!     assert!([vec![1, 2], vec![2, 3], vec![3]][key].contains(server));
//! }
//! # Ok::<(), quiver_plan::PlanError>(())
//! ```

use crate::cover::{greedy_cover, Solver};

/// The most keys planned exactly: the exact solver's universe is a `u64` bit mask.
pub const EXACT_KEYS_MAX: usize = 64;

/// Why a multiget cannot be planned.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// The key at this index (in the caller's order) has no replica to read it from.
    #[error("key {key} of the multiget has no replica")]
    NoReplica { key: usize },
}

/// Which server serves each key of a multiget.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan<S> {
    /// Per key, in the caller's order: the server that serves it, one of the key's replicas.
    pub assignment: Vec<S>,
    /// Per server contacted (in the order of its first key): the server and the indices of the
    /// keys it serves, ascending. Every key is in exactly one group.
    pub groups: Vec<(S, Vec<usize>)>,
    /// Whether the number of servers contacted is a proven minimum (the exact solver), rather
    /// than greedy's answer.
    pub exact: bool,
}

impl<S> Plan<S> {
    /// How many servers the multiget contacts.
    pub fn servers_contacted(&self) -> usize {
        self.groups.len()
    }
}

/// Plans `replicas`: per key, the servers holding it (in the caller's order of preference).
/// A one-off [`Planner`]; see [`Planner::plan`].
pub fn plan<S: Copy + Ord, R: AsRef<[S]>>(replicas: &[R]) -> Result<Plan<S>, PlanError> {
    Planner::default().plan(replicas)
}

/// Plans multigets, keeping the exact solver's buffers between calls.
pub struct Planner {
    solver: Solver,
    /// Multigets of at most this many keys are planned exactly (at most [`EXACT_KEYS_MAX`]).
    exact_keys_max: usize,
}

impl Default for Planner {
    fn default() -> Self {
        Planner {
            solver: Solver::default(),
            exact_keys_max: EXACT_KEYS_MAX,
        }
    }
}

impl Planner {
    /// A planner that solves exactly only multigets of at most `keys` keys (capped at
    /// [`EXACT_KEYS_MAX`]) and plans wider ones greedily: the exact search is exponential in
    /// the worst case, greedy is quadratic.
    pub fn with_exact_keys_max(keys: usize) -> Planner {
        Planner {
            exact_keys_max: keys.min(EXACT_KEYS_MAX),
            ..Planner::default()
        }
    }

    /// Chooses, for every key, one of its replicas (`replicas[key]`, servers in the caller's
    /// order of preference; duplicates are harmless) so that the fewest servers are contacted.
    /// Among the servers contacted, a key goes to the first of its replicas in that order.
    ///
    /// Deterministic: the same input gives the same plan.
    pub fn plan<S: Copy + Ord, R: AsRef<[S]>>(
        &mut self,
        replicas: &[R],
    ) -> Result<Plan<S>, PlanError> {
        self.plan_turned(replicas, 0)
    }

    /// [`Planner::plan`] with ties broken from the `turn`-th server on: among covers of the
    /// same (fewest) servers, which one is taken depends on the servers' order, here the
    /// distinct servers in ascending order rotated by `turn`. A front-end that gives each
    /// multiget the next turn spreads its multigets over servers that would do as well (with
    /// chains of 3 on 3 nodes any one node holds every key: without turns, every multiget
    /// would go to the first); the same turn for the rounds of one multiget keeps its choices.
    pub fn plan_turned<S: Copy + Ord, R: AsRef<[S]>>(
        &mut self,
        replicas: &[R],
        turn: usize,
    ) -> Result<Plan<S>, PlanError> {
        let keys = replicas.len();
        // The distinct servers, ascending (their positions are the set indices), and the keys
        // each one holds.
        let mut pairs: Vec<(S, usize)> = replicas
            .iter()
            .enumerate()
            .flat_map(|(k, r)| r.as_ref().iter().map(move |&s| (s, k)))
            .collect();
        pairs.sort_unstable();
        pairs.dedup();
        let mut servers: Vec<S> = Vec::new();
        let mut holds: Vec<Vec<usize>> = Vec::new();
        for (s, k) in pairs {
            if servers.last() != Some(&s) {
                servers.push(s);
                holds.push(Vec::new());
            }
            if let Some(h) = holds.last_mut() {
                h.push(k);
            }
        }

        // Ties go to the servers from the turn's on (see above).
        if !servers.is_empty() {
            let shift = turn % servers.len();
            servers.rotate_left(shift);
            holds.rotate_left(shift);
        }

        let exact = keys <= self.exact_keys_max;
        let cover = if exact {
            let (universe, masks) = bitmasks(keys, &holds);
            self.solver.min_cover(universe, &masks)
        } else {
            greedy_cover_wide(keys, &holds)
        };
        let no_replica = || PlanError::NoReplica {
            key: replicas
                .iter()
                .position(|r| r.as_ref().is_empty())
                .unwrap_or(0),
        };
        // Only a key without replicas leaves the keys uncovered.
        let cover = cover.ok_or_else(no_replica)?;
        // Ascending, for the lookups below.
        let mut chosen: Vec<S> = cover.iter().map(|&i| servers[i]).collect();
        chosen.sort_unstable();

        let mut assignment = Vec::with_capacity(keys);
        // Per chosen server, its group's position in `groups` once it has one.
        let mut group_of: Vec<Option<usize>> = vec![None; chosen.len()];
        let mut groups: Vec<(S, Vec<usize>)> = Vec::new();
        for (key, r) in replicas.iter().enumerate() {
            let Some((server, c)) = r
                .as_ref()
                .iter()
                .find_map(|s| chosen.binary_search(s).ok().map(|c| (*s, c)))
            else {
                // The cover holds every key: only a key without replicas gets here.
                return Err(PlanError::NoReplica { key });
            };
            let g = *group_of[c].get_or_insert_with(|| {
                groups.push((server, Vec::new()));
                groups.len() - 1
            });
            groups[g].1.push(key);
            assignment.push(server);
        }
        Ok(Plan {
            assignment,
            groups,
            exact,
        })
    }
}

/// The set-cover instance as bitmasks (`keys` <= 64): every key's bit set in `universe`, and
/// per server the bits of the keys it holds.
fn bitmasks(keys: usize, holds: &[Vec<usize>]) -> (u64, Vec<u64>) {
    let universe = if keys == 64 {
        u64::MAX
    } else {
        (1u64 << keys) - 1
    };
    let masks = holds
        .iter()
        .map(|h| h.iter().fold(0, |m, &k| m | 1 << k))
        .collect();
    (universe, masks)
}

/// Greedy set cover of `keys` keys of any number: `holds[i]` is the keys set `i` holds.
/// Repeatedly takes the set holding the most uncovered keys (the first such set on ties), as
/// [`greedy_cover`] does on masks. `None` if the sets do not cover every key.
fn greedy_cover_wide(keys: usize, holds: &[Vec<usize>]) -> Option<Vec<usize>> {
    if keys <= 64 {
        let (universe, masks) = bitmasks(keys, holds);
        return greedy_cover(universe, &masks);
    }
    let mut covered = vec![false; keys];
    let mut left = keys;
    let mut taken = Vec::new();
    while left > 0 {
        let (best, gain) = holds
            .iter()
            .enumerate()
            .map(|(i, h)| (i, h.iter().filter(|&&k| !covered[k]).count()))
            .fold((usize::MAX, 0), |acc, x| if x.1 > acc.1 { x } else { acc });
        if gain == 0 {
            return None;
        }
        for &k in &holds[best] {
            covered[k] = true;
        }
        left -= gain;
        taken.push(best);
    }
    Some(taken)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::WyRand;

    /// The plan is well formed: every key on one of its replicas, the groups partition the
    /// keys and agree with the assignment, each key on the first contacted replica.
    fn check(replicas: &[Vec<u32>], p: &Plan<u32>) {
        assert_eq!(p.assignment.len(), replicas.len());
        let contacted: Vec<u32> = p.groups.iter().map(|g| g.0).collect();
        for (k, r) in replicas.iter().enumerate() {
            let first = r.iter().find(|s| contacted.contains(s));
            assert_eq!(first, Some(&p.assignment[k]), "key {k}");
        }
        let mut seen = vec![false; replicas.len()];
        for (s, keys) in &p.groups {
            assert!(!keys.is_empty());
            assert!(keys.windows(2).all(|w| w[0] < w[1]));
            for &k in keys {
                assert!(!seen[k]);
                seen[k] = true;
                assert_eq!(p.assignment[k], *s);
            }
        }
        assert!(seen.iter().all(|&s| s));
    }

    /// The fewest servers that hold every key, by trying every subset of servers.
    fn brute_force(replicas: &[Vec<u32>], servers: u32) -> usize {
        (0u32..1 << servers)
            .filter(|pick| {
                replicas
                    .iter()
                    .all(|r| r.iter().any(|s| pick & 1 << s != 0))
            })
            .map(|pick| pick.count_ones() as usize)
            .min()
            .unwrap_or(usize::MAX)
    }

    fn random_replicas(rng: &mut WyRand, keys: usize, servers: u32, max_r: u64) -> Vec<Vec<u32>> {
        (0..keys)
            .map(|_| {
                let r = 1 + rng.below(max_r);
                (0..r).map(|_| rng.below(servers as u64) as u32).collect()
            })
            .collect()
    }

    #[test]
    fn small_multigets_contact_the_fewest_servers() {
        let mut rng = WyRand::new(3);
        let mut planner = Planner::default();
        for trial in 0..500 {
            let servers = 1 + rng.below(10) as u32;
            let keys = rng.below(13) as usize;
            let replicas = random_replicas(&mut rng, keys, servers, 4);
            let p = planner.plan(&replicas).unwrap();
            assert!(p.exact);
            check(&replicas, &p);
            assert_eq!(
                p.servers_contacted(),
                if keys == 0 {
                    0
                } else {
                    brute_force(&replicas, servers)
                },
                "trial {trial}: {replicas:?}"
            );
        }
    }

    #[test]
    fn wide_multigets_are_planned_greedily() {
        let mut rng = WyRand::new(4);
        let replicas = random_replicas(&mut rng, 300, 40, 3);
        let p = plan(&replicas).unwrap();
        assert!(!p.exact);
        check(&replicas, &p);
        assert!(p.servers_contacted() <= 40);
        // A planner told to stay greedy on small multigets never does better than exact.
        let small = random_replicas(&mut rng, 32, 24, 3);
        let greedy = Planner::with_exact_keys_max(8).plan(&small).unwrap();
        let exact = plan(&small).unwrap();
        assert!(!greedy.exact && exact.exact);
        check(&small, &greedy);
        assert!(exact.servers_contacted() <= greedy.servers_contacted());
    }

    #[test]
    fn the_callers_order_picks_among_contacted_replicas() {
        // Servers 5 and 7 are both needed; key 0 is on both.
        let p = plan(&[vec![5, 7], vec![7], vec![5]]).unwrap();
        assert_eq!(p.assignment, [5, 7, 5]);
        assert_eq!(p.groups, [(5, vec![0, 2]), (7, vec![1])]);
        let p = plan(&[vec![7, 5], vec![7], vec![5]]).unwrap();
        assert_eq!(p.assignment, [7, 7, 5]);
        // One server holding everything is all a multiget needs; duplicates are harmless.
        let p = plan(&[vec!["b", "a"], vec!["a", "a"], vec!["c", "a"]]).unwrap();
        assert_eq!(p.assignment, ["a", "a", "a"]);
        assert_eq!(p.servers_contacted(), 1);
    }

    /// Turns break ties between equally small covers round the servers; the plans are as
    /// small whatever the turn, and the same turn gives the same plan.
    #[test]
    fn turns_go_round_equal_covers() {
        // Every server holds every key: any one is a minimum cover.
        let all = vec![vec![0u32, 1, 2]; 5];
        let mut p = Planner::default();
        let firsts: Vec<u32> = (0..6)
            .map(|turn| {
                let plan = p.plan_turned(&all, turn).unwrap();
                assert_eq!(plan.servers_contacted(), 1);
                check(&all, &plan);
                plan.groups[0].0
            })
            .collect();
        assert_eq!(firsts, [0, 1, 2, 0, 1, 2]);
        assert_eq!(p.plan(&all).unwrap(), p.plan_turned(&all, 3).unwrap());
        let mut rng = WyRand::new(7);
        for turn in 0..200 {
            let replicas = random_replicas(&mut rng, 12, 6, 3);
            let a = p.plan(&replicas).unwrap();
            let b = p.plan_turned(&replicas, turn).unwrap();
            check(&replicas, &b);
            assert_eq!(a.servers_contacted(), b.servers_contacted());
            assert_eq!(b, p.plan_turned(&replicas, turn).unwrap());
        }
    }

    #[test]
    fn a_key_without_replicas_is_an_error() {
        let none: Vec<u32> = Vec::new();
        assert_eq!(
            plan(&[vec![1], none.clone()]),
            Err(PlanError::NoReplica { key: 1 })
        );
        let wide: Vec<Vec<u32>> = (0..100)
            .map(|k| if k == 70 { none.clone() } else { vec![1] })
            .collect();
        assert_eq!(plan(&wide), Err(PlanError::NoReplica { key: 70 }));
        let p = plan::<u32, Vec<u32>>(&[]).unwrap();
        assert_eq!(p.servers_contacted(), 0);
    }
}
