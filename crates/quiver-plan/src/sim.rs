//! `quiver sim vector-width`: the Monte Carlo of the vector-interface paper's Fig. 13 (Sec. 6.1,
//! "Simulation of worst-case pattern").
//!
//! A client multigets `keys` distinct random keys from a cluster of `servers` servers where
//! every key lives on `replication` servers. It must send each key to one of its replicas and
//! wants as few (so as wide) vectors as possible, so it picks the smallest set of servers that
//! together hold every key: a minimum set cover whose universe is the requested keys and whose
//! sets are the servers (each server "covers" the requested keys it holds).
//!
//! # Model
//! Consistent hashing with random placement is modelled as the paper does ("keys map uniformly
//! at random to nodes (including replicas of keys)", "replica nodes are chosen randomly (without
//! replacement)"): each key's replica set is `replication` distinct servers chosen uniformly at
//! random, independently of the other keys. The keys are distinct, so their placements are
//! independent draws; no key universe needs to be simulated.
//!
//! # What is reported
//! Per `(servers, replication)` cell, over `trials` trials, with `X` the number of servers
//! contacted in a trial and `K` the number of keys:
//! - `mean_servers_contacted_*` = mean of `X`;
//! - `width_of_mean_*` = `K / mean(X)`: **what the paper plots**. Its text: "we record the
//!   average minimum node count. We then divide the desired vector width (32) by this number to
//!   calculate the average expected vector RPC width", and its replication-1 formula
//!   `32 / (x - x(1 - 1/x)^32)` is `K / E[X]` too;
//! - `mean_width_*` = mean of `K / X` (`E[K/X]`, never below `K / E[X]` by Jensen's
//!   inequality): the width an average multiget sees;
//! - `closed_form_width` (replication 1 only): `K / E[X]` with
//!   `E[X] = S (1 - (1 - 1/S)^K)`, the expected number of non-empty bins when `K` balls go
//!   into `S` bins. With one replica the client has no choice, so the Monte Carlo estimates
//!   exactly this.
//!
//! `*_exact` comes from an exact minimum set cover ([`Solver`], branch and bound), and
//! `*_greedy` from the classic greedy approximation ([`greedy_cover`]); the gap between them
//! is reported too (both in [`crate::cover`]). The plots use the exact figures, as the paper
//! does (its footnote 3: "This requires calculating a minimum set cover").
//!
//! # Determinism
//! Each cell draws from its own PRNG, seeded from `(seed, servers, replication)`, so a cell's
//! figures do not depend on which other cells are in the grid or in what order they run.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::cover::{greedy_cover, Solver};
use crate::rng::WyRand;

/// A parameter out of range, or a list that does not parse: the message says which.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidConfig(pub String);

/// Most keys per multiget: a trial's key set is a bit mask in a `u64`.
pub const KEYS_MAX: usize = 64;
/// Most servers in a cluster.
pub const SERVERS_MAX: usize = 4096;
/// Most replicas per key.
pub const REPLICATION_MAX: usize = 32;
/// Most trials per cell.
pub const TRIALS_MAX: u64 = 100_000_000;

/// What `quiver sim vector-width` simulates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VectorWidthConfig {
    /// Keys per multiget (the paper: 32).
    pub keys: usize,
    /// Cluster sizes to simulate.
    pub servers: Vec<usize>,
    /// Replication factors to simulate; cells with `replication > servers` are skipped.
    pub replication: Vec<usize>,
    /// Trials per cell (the paper: 1000).
    pub trials: u64,
    pub seed: u64,
}

impl VectorWidthConfig {
    pub fn validate(&self) -> Result<(), InvalidConfig> {
        let bad = |m: String| Err(InvalidConfig(m));
        if !(1..=KEYS_MAX).contains(&self.keys) {
            return bad(format!("--keys {} outside 1..={KEYS_MAX}", self.keys));
        }
        if self.servers.is_empty() || self.replication.is_empty() {
            return bad("--servers and --replication need at least one value".into());
        }
        if let Some(s) = self
            .servers
            .iter()
            .find(|s| !(1..=SERVERS_MAX).contains(*s))
        {
            return bad(format!("servers {s} outside 1..={SERVERS_MAX}"));
        }
        if let Some(r) = self
            .replication
            .iter()
            .find(|r| !(1..=REPLICATION_MAX).contains(*r))
        {
            return bad(format!("replication {r} outside 1..={REPLICATION_MAX}"));
        }
        if !(1..=TRIALS_MAX).contains(&self.trials) {
            return bad(format!("--trials {} outside 1..={TRIALS_MAX}", self.trials));
        }
        Ok(())
    }

    /// The `(servers, replication)` cells to simulate, in order (servers outer), and those
    /// skipped because a key cannot have more distinct replicas than there are servers.
    pub fn cells(&self) -> (Vec<Cell>, Vec<Cell>) {
        let mut run = Vec::new();
        let mut skipped = Vec::new();
        for &s in &self.servers {
            for &r in &self.replication {
                if r <= s {
                    run.push((s, r));
                } else {
                    skipped.push((s, r));
                }
            }
        }
        (run, skipped)
    }
}

/// A `(servers, replication)` pair of the grid.
pub type Cell = (usize, usize);

/// One cell's figures: one JSON line (or CSV row) of `quiver sim vector-width`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VectorWidthResult {
    /// Always `"vector-width"`: tells `quiver bench report` what kind of record this is.
    pub sim: String,
    pub servers: usize,
    pub replication: usize,
    pub keys: usize,
    pub trials: u64,
    pub seed: u64,
    /// Mean servers contacted with an exact minimum cover.
    pub mean_servers_contacted_exact: f64,
    /// Standard error of that mean.
    pub stderr_servers_contacted_exact: f64,
    /// Mean of `keys / servers contacted` (exact cover).
    pub mean_width_exact: f64,
    /// `keys / mean_servers_contacted_exact`: the paper's definition (Fig. 13).
    pub width_of_mean_exact: f64,
    pub mean_servers_contacted_greedy: f64,
    pub mean_width_greedy: f64,
    pub width_of_mean_greedy: f64,
    /// Mean of (greedy - exact) servers contacted.
    pub mean_gap_servers: f64,
    /// Largest (greedy - exact) in any trial.
    pub max_gap_servers: u32,
    /// Trials where greedy contacted more servers than needed.
    pub trials_greedy_worse: u64,
    /// Replication 1 only: `S (1 - (1 - 1/S)^K)`.
    pub closed_form_servers_contacted: Option<f64>,
    /// Replication 1 only: `K / closed_form_servers_contacted` (the paper's formula).
    pub closed_form_width: Option<f64>,
}

impl VectorWidthResult {
    /// The CSV column names, in the order of [`VectorWidthResult::csv_row`].
    pub const CSV_HEADER: &'static str = "servers,replication,keys,trials,seed,\
        mean_servers_contacted_exact,stderr_servers_contacted_exact,mean_width_exact,\
        width_of_mean_exact,mean_servers_contacted_greedy,mean_width_greedy,width_of_mean_greedy,\
        mean_gap_servers,max_gap_servers,trials_greedy_worse,closed_form_servers_contacted,\
        closed_form_width";

    /// One CSV row (no newline); an absent closed form is an empty field.
    pub fn csv_row(&self) -> String {
        let opt = |v: Option<f64>| v.map(|v| v.to_string()).unwrap_or_default();
        let mut s = String::new();
        let _ = write!(
            s,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            self.servers,
            self.replication,
            self.keys,
            self.trials,
            self.seed,
            self.mean_servers_contacted_exact,
            self.stderr_servers_contacted_exact,
            self.mean_width_exact,
            self.width_of_mean_exact,
            self.mean_servers_contacted_greedy,
            self.mean_width_greedy,
            self.width_of_mean_greedy,
            self.mean_gap_servers,
            self.max_gap_servers,
            self.trials_greedy_worse,
            opt(self.closed_form_servers_contacted),
            opt(self.closed_form_width),
        );
        s
    }
}

/// Expected number of distinct servers hit by `keys` uniform keys over `servers` servers:
/// `S (1 - (1 - 1/S)^K)` (non-empty bins after K balls into S bins).
pub fn closed_form_servers(keys: usize, servers: usize) -> f64 {
    let s = servers as f64;
    s * (1.0 - (1.0 - 1.0 / s).powi(keys as i32))
}

/// The paper's replication-1 curve: `K / (S - S (1 - 1/S)^K)`.
pub fn closed_form_width(keys: usize, servers: usize) -> f64 {
    keys as f64 / closed_form_servers(keys, servers)
}

/// Parses a list of positive integers: comma-separated items, each a number or an inclusive
/// range `A-B` (`1,2,4`, `1-128`, `1-4,8,16`). Duplicates are kept out; order is kept.
pub fn parse_list(s: &str) -> Result<Vec<usize>, InvalidConfig> {
    let bad = |m: String| InvalidConfig(m);
    let num = |t: &str| {
        t.trim()
            .parse::<usize>()
            .map_err(|_| bad(format!("{t:?} in {s:?} is not a non-negative integer")))
    };
    let mut out: Vec<usize> = Vec::new();
    let mut push = |v: usize| {
        if !out.contains(&v) {
            out.push(v);
        }
    };
    for item in s.split(',') {
        let item = item.trim();
        if item.is_empty() {
            return Err(bad(format!("empty item in list {s:?}")));
        }
        match item.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if a > b {
                    return Err(bad(format!("range {item:?} is empty")));
                }
                // Bounded so that a typo like 1-1000000000 fails in validation, not by
                // exhausting memory here.
                if b - a > 1_000_000 {
                    return Err(bad(format!("range {item:?} is too long")));
                }
                (a..=b).for_each(&mut push);
            }
            None => push(num(item)?),
        }
    }
    Ok(out)
}

/// Runs every cell of `cfg` in order, handing each result to `on_result` as it is done (the
/// CLI streams them), and returns them all.
pub fn run(
    cfg: &VectorWidthConfig,
    on_result: &mut dyn FnMut(&VectorWidthResult),
) -> Result<Vec<VectorWidthResult>, InvalidConfig> {
    cfg.validate()?;
    let (cells, _skipped) = cfg.cells();
    let mut out = Vec::with_capacity(cells.len());
    for (servers, replication) in cells {
        let r = simulate_cell(cfg.keys, servers, replication, cfg.trials, cfg.seed);
        on_result(&r);
        out.push(r);
    }
    Ok(out)
}

/// splitmix64: spreads `(seed, servers, replication)` into unrelated PRNG seeds.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn cell_seed(seed: u64, servers: usize, replication: usize) -> u64 {
    mix(mix(mix(seed) ^ servers as u64) ^ replication as u64)
}

/// One cell: `trials` multigets of `keys` keys on `servers` servers with `replication` replicas.
///
/// Panics if the parameters are out of range (see [`VectorWidthConfig::validate`]).
pub fn simulate_cell(
    keys: usize,
    servers: usize,
    replication: usize,
    trials: u64,
    seed: u64,
) -> VectorWidthResult {
    assert!((1..=KEYS_MAX).contains(&keys));
    assert!(replication >= 1 && replication <= servers && trials >= 1);
    let mut rng = WyRand::new(cell_seed(seed, servers, replication));
    let mut placement = Placement::new(servers);
    let universe = if keys == 64 {
        u64::MAX
    } else {
        (1u64 << keys) - 1
    };
    let mut solver = Solver::default();

    // Servers contacted is an integer in 1..=keys: counting trials per value keeps the sums
    // exact (integers) until the final divisions.
    let mut exact_counts = [0u64; KEYS_MAX + 1];
    let mut greedy_counts = [0u64; KEYS_MAX + 1];
    let (mut max_gap, mut worse) = (0u32, 0u64);
    for _ in 0..trials {
        let sets = placement.draw(&mut rng, keys, replication);
        let exact = solver.min_cover_len(universe, sets);
        let greedy = greedy_len(universe, sets);
        debug_assert!(exact <= greedy);
        exact_counts[exact] += 1;
        greedy_counts[greedy] += 1;
        let gap = (greedy - exact) as u32;
        max_gap = max_gap.max(gap);
        worse += u64::from(gap > 0);
    }
    let exact = Moments::of(&exact_counts, keys);
    let greedy = Moments::of(&greedy_counts, keys);
    let (cf_servers, cf_width) = if replication == 1 {
        (
            Some(closed_form_servers(keys, servers)),
            Some(closed_form_width(keys, servers)),
        )
    } else {
        (None, None)
    };
    VectorWidthResult {
        sim: "vector-width".into(),
        servers,
        replication,
        keys,
        trials,
        seed,
        mean_servers_contacted_exact: exact.mean,
        stderr_servers_contacted_exact: exact.stderr,
        mean_width_exact: exact.mean_width,
        width_of_mean_exact: keys as f64 / exact.mean,
        mean_servers_contacted_greedy: greedy.mean,
        mean_width_greedy: greedy.mean_width,
        width_of_mean_greedy: keys as f64 / greedy.mean,
        mean_gap_servers: greedy.mean - exact.mean,
        max_gap_servers: max_gap,
        trials_greedy_worse: worse,
        closed_form_servers_contacted: cf_servers,
        closed_form_width: cf_width,
    }
}

/// Summary of the servers contacted over a cell's trials, from a count of trials per value.
struct Moments {
    mean: f64,
    /// Standard error of `mean` (sample standard deviation / sqrt(trials)).
    stderr: f64,
    /// Mean of `keys / servers contacted`.
    mean_width: f64,
}

impl Moments {
    fn of(counts: &[u64], keys: usize) -> Moments {
        let (mut n, mut sum, mut sum_sq) = (0u64, 0u64, 0u64);
        let mut width_sum = 0.0;
        for (x, &c) in counts.iter().enumerate().skip(1) {
            let x = x as u64;
            n += c;
            sum += c * x;
            sum_sq += c * x * x;
            width_sum += c as f64 * keys as f64 / x as f64;
        }
        let nf = n as f64;
        let mean = sum as f64 / nf;
        // Sum of squared deviations, exactly: n * sum_sq - sum^2 over n.
        let ss = (n as u128 * sum_sq as u128 - sum as u128 * sum as u128) as f64 / nf;
        let variance = if n > 1 { ss / (nf - 1.0) } else { 0.0 };
        Moments {
            mean,
            stderr: (variance / nf).sqrt(),
            mean_width: width_sum / nf,
        }
    }
}

/// Draws replica placements and turns them into set-cover instances, reusing its buffers.
struct Placement {
    /// A permutation of the servers; its prefix after a partial Fisher-Yates shuffle is a
    /// uniform sample without replacement whatever order the previous draw left it in.
    perm: Vec<u32>,
    /// Per server, the mask of this trial's keys it holds.
    holds: Vec<u64>,
    touched: Vec<u32>,
    sets: Vec<u64>,
}

impl Placement {
    fn new(servers: usize) -> Placement {
        Placement {
            perm: (0..servers as u32).collect(),
            holds: vec![0; servers],
            touched: Vec::new(),
            sets: Vec::new(),
        }
    }

    /// Places `keys` keys on `replication` distinct random servers each and returns, for
    /// every server that holds at least one of them, the mask of keys it holds.
    fn draw(&mut self, rng: &mut WyRand, keys: usize, replication: usize) -> &[u64] {
        let n = self.perm.len();
        for key in 0..keys {
            for i in 0..replication {
                let j = i + rng.below((n - i) as u64) as usize;
                self.perm.swap(i, j);
                let s = self.perm[i] as usize;
                if self.holds[s] == 0 {
                    self.touched.push(s as u32);
                }
                self.holds[s] |= 1 << key;
            }
        }
        self.sets.clear();
        for &s in &self.touched {
            self.sets.push(std::mem::take(&mut self.holds[s as usize]));
        }
        self.touched.clear();
        &self.sets
    }
}

/// The size of the greedy cover of a trial's placement.
// Every key of a trial is placed on `replication >= 1` servers, so the sets always cover the
// universe and greedy always finds a cover.
#[allow(clippy::expect_used)]
fn greedy_len(universe: u64, sets: &[u64]) -> usize {
    greedy_cover(universe, sets)
        .expect("every key is on some server")
        .len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cover::{greedy_cover, Bits, Solver};

    fn is_cover(universe: u64, sets: &[u64], chosen: &[usize]) -> bool {
        chosen.iter().fold(0, |a, &i| a | sets[i]) & universe == universe
    }

    #[test]
    fn exact_never_exceeds_greedy_on_simulated_placements() {
        let mut rng = WyRand::new(11);
        let mut solver = Solver::default();
        for &(servers, replication) in &[(8, 2), (32, 3), (64, 5), (128, 10), (24, 4)] {
            let mut placement = Placement::new(servers);
            for _ in 0..200 {
                let sets = placement.draw(&mut rng, 32, replication).to_vec();
                let e = solver.min_cover(u32::MAX as u64, &sets).unwrap();
                let g = greedy_cover(u32::MAX as u64, &sets).unwrap();
                assert!(is_cover(u32::MAX as u64, &sets, &e));
                assert!(e.len() <= g.len());
                // Every key sits on exactly `replication` servers.
                for key in 0..32 {
                    let holders = sets.iter().filter(|&&m| m & 1 << key != 0).count();
                    assert_eq!(holders, replication);
                }
            }
        }
    }

    /// Can `universe` be covered by at most `k` of `sets`? Plain depth-limited search on the
    /// element with the fewest sets, with no bounds: slow but obviously right.
    fn coverable_within(universe: u64, sets: &[u64], k: usize) -> bool {
        if universe == 0 {
            return true;
        }
        if k == 0 {
            return false;
        }
        let e = Bits(universe)
            .min_by_key(|&e| sets.iter().filter(|&&m| m & 1 << e != 0).count())
            .unwrap();
        sets.iter()
            .filter(|&&m| m & 1 << e != 0)
            .any(|&m| coverable_within(universe & !m, sets, k - 1))
    }

    #[test]
    fn exact_matches_iterative_deepening_on_cluster_sized_instances() {
        let mut rng = WyRand::new(5);
        let mut solver = Solver::default();
        let universe = u32::MAX as u64;
        // (The unbounded check takes seconds per 128-server instance: few of those.)
        for &(servers, replication, trials) in &[(32, 3, 20), (48, 4, 10), (128, 10, 1)] {
            let mut placement = Placement::new(servers);
            for _ in 0..trials {
                let sets = placement.draw(&mut rng, 32, replication).to_vec();
                let exact = solver.min_cover_len(universe, &sets);
                assert!(coverable_within(universe, &sets, exact));
                assert!(!coverable_within(universe, &sets, exact - 1));
            }
        }
    }

    #[test]
    fn replication_one_matches_the_closed_form() {
        for &servers in &[1usize, 2, 3, 8, 32, 128] {
            let r = simulate_cell(32, servers, 1, 4000, 3);
            let expected = closed_form_servers(32, servers);
            let se = r.stderr_servers_contacted_exact;
            // With one replica there is no choice: greedy and exact agree.
            assert_eq!(
                r.mean_servers_contacted_greedy,
                r.mean_servers_contacted_exact
            );
            assert_eq!(r.trials_greedy_worse, 0);
            // Within 4 standard errors (a tiny floor for the zero-variance cases S = 1, 2).
            assert!(
                (r.mean_servers_contacted_exact - expected).abs() <= 4.0 * se + 1e-3,
                "S={servers}: {} vs {expected} (se {se})",
                r.mean_servers_contacted_exact
            );
            assert_eq!(r.closed_form_width, Some(32.0 / expected));
        }
    }

    #[test]
    fn full_replication_needs_one_server() {
        for &s in &[1usize, 2, 5, 10] {
            let r = simulate_cell(32, s, s, 100, 1);
            assert_eq!(r.mean_servers_contacted_exact, 1.0);
            assert_eq!(r.mean_servers_contacted_greedy, 1.0);
            assert_eq!(r.mean_width_exact, 32.0);
            assert_eq!(r.width_of_mean_exact, 32.0);
            assert_eq!(r.stderr_servers_contacted_exact, 0.0);
        }
    }

    #[test]
    fn closed_form_values() {
        assert_eq!(closed_form_width(32, 1), 32.0);
        assert!((closed_form_width(32, 2) - 16.0).abs() < 1e-6);
        // Many servers: nearly every key on its own server.
        assert!(closed_form_width(32, 1_000_000) < 1.0001);
    }

    #[test]
    fn deterministic_per_cell() {
        let cfg = |servers: Vec<usize>| VectorWidthConfig {
            keys: 32,
            servers,
            replication: vec![1, 3],
            trials: 50,
            seed: 42,
        };
        let a = run(&cfg(vec![16, 64]), &mut |_| {}).unwrap();
        let b = run(&cfg(vec![64]), &mut |_| {}).unwrap();
        assert_eq!(a[2..], b[..]);
        let c = run(&cfg(vec![16, 64]), &mut |_| {}).unwrap();
        assert_eq!(a, c);
    }

    #[test]
    fn cells_skip_replication_above_servers() {
        let cfg = VectorWidthConfig {
            keys: 32,
            servers: vec![1, 4],
            replication: vec![1, 3],
            trials: 1,
            seed: 0,
        };
        let (run, skipped) = cfg.cells();
        assert_eq!(run, vec![(1, 1), (4, 1), (4, 3)]);
        assert_eq!(skipped, vec![(1, 3)]);
    }

    #[test]
    fn lists_parse() {
        assert_eq!(parse_list("1,2,4").unwrap(), vec![1, 2, 4]);
        assert_eq!(parse_list("1-4").unwrap(), vec![1, 2, 3, 4]);
        assert_eq!(parse_list("1-3, 8,2").unwrap(), vec![1, 2, 3, 8]);
        for bad in ["", "1,,2", "4-1", "x", "1-", "-3", "1.5"] {
            assert!(parse_list(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn validation() {
        let ok = VectorWidthConfig {
            keys: 32,
            servers: vec![1, 128],
            replication: vec![1, 10],
            trials: 10,
            seed: 0,
        };
        assert!(ok.validate().is_ok());
        for bad in [
            VectorWidthConfig {
                keys: 0,
                ..ok.clone()
            },
            VectorWidthConfig {
                keys: 65,
                ..ok.clone()
            },
            VectorWidthConfig {
                servers: vec![0],
                ..ok.clone()
            },
            VectorWidthConfig {
                replication: vec![],
                ..ok.clone()
            },
            VectorWidthConfig {
                trials: 0,
                ..ok.clone()
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn csv_row_has_every_column() {
        let r = simulate_cell(8, 4, 2, 10, 0);
        let cols = VectorWidthResult::CSV_HEADER.split(',').count();
        assert_eq!(r.csv_row().split(',').count(), cols);
        assert!(r.csv_row().ends_with(",,"), "no closed form for R=2");
    }
}
