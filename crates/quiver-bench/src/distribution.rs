//! Key popularity: uniform, Zipf over key ranks, or Zipf over recency (YCSB's "latest").
//!
//! The Zipf sampler is YCSB's `ZipfianGenerator`, from Gray et al., "Quickly generating
//! billion-record synthetic databases" (SIGMOD '94): rank r in `0..n` is drawn with probability
//! close to `(r + 1)^-theta / zeta(n, theta)` in O(1) per draw after an O(n) (here O(2^16))
//! setup. Ranks 0 and 1 are exact; the tail is the continuous approximation.
//!
//! Ranks are scrambled into key indexes by a bijection (multiplication by a prime modulo n), so
//! the hot keys are not the first keys loaded: they sit in different segments and pages.
//! Partitions are chosen by the key's hash, so hot keys are spread across them either way.
//! "Latest" is not scrambled: rank r is the key r places before the newest, so that with
//! inserts (YCSB workload D) the keys just inserted are the hottest.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};
use crate::rng::WyRand;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Distribution {
    Uniform,
    Zipf,
    /// Zipf over recency: the newest key the most popular (YCSB's `latest`).
    Latest,
}

impl Distribution {
    pub fn name(self) -> &'static str {
        match self {
            Distribution::Uniform => "uniform",
            Distribution::Zipf => "zipf",
            Distribution::Latest => "latest",
        }
    }
}

impl FromStr for Distribution {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "uniform" => Ok(Distribution::Uniform),
            "zipf" | "zipfian" => Ok(Distribution::Zipf),
            "latest" => Ok(Distribution::Latest),
            _ => Err(Error::Invalid(format!(
                "unknown distribution {s:?} (expected uniform, zipf or latest)"
            ))),
        }
    }
}

impl fmt::Display for Distribution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Below this many items zeta is summed exactly; above, the first `ZETA_EXACT_TERMS` terms are
/// summed and the tail comes from the Euler-Maclaurin formula (relative error < 1e-12).
const ZETA_EXACT_TERMS: u64 = 1 << 16;
/// A prime larger than any key count: multiplication by it modulo n permutes `0..n`.
const SCRAMBLE_PRIME: u64 = (1 << 61) - 1;

/// `sum_{i=1..=n} i^-theta`.
pub fn zeta(n: u64, theta: f64) -> f64 {
    let exact = n.min(ZETA_EXACT_TERMS);
    let mut sum = 0.0;
    // Smallest terms first, for accuracy.
    for i in (1..=exact).rev() {
        sum += (i as f64).powf(-theta);
    }
    if n <= ZETA_EXACT_TERMS {
        return sum;
    }
    // sum_{i=m+1..=n} f(i) = integral_m^n f + (f(n) - f(m)) / 2 + (f'(n) - f'(m)) / 12 - ...
    let (m, nf) = (exact as f64, n as f64);
    let f = |x: f64| x.powf(-theta);
    let df = |x: f64| -theta * x.powf(-theta - 1.0);
    let integral = (nf.powf(1.0 - theta) - m.powf(1.0 - theta)) / (1.0 - theta);
    sum + integral + (f(nf) - f(m)) / 2.0 + (df(nf) - df(m)) / 12.0
}

/// Zipf-distributed ranks in `0..n` (rank 0 the most popular).
#[derive(Clone, Debug)]
pub struct Zipf {
    n: u64,
    theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
    /// 1 + 0.5^theta: draws of u * zetan below this are rank 1.
    rank1_bound: f64,
}

impl Zipf {
    /// `theta` in (0, 1): YCSB's default (and the papers') is 0.99.
    pub fn new(n: u64, theta: f64) -> Result<Zipf> {
        if n == 0 {
            return Err(Error::Invalid("Zipf over an empty key set".into()));
        }
        if !(theta > 0.0 && theta < 1.0) {
            return Err(Error::Invalid(format!("Zipf theta {theta} outside (0, 1)")));
        }
        let zetan = zeta(n, theta);
        let zeta2 = zeta(2, theta);
        let eta = if n <= 2 {
            0.0
        } else {
            (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / (1.0 - zeta2 / zetan)
        };
        Ok(Zipf {
            n,
            theta,
            alpha: 1.0 / (1.0 - theta),
            zetan,
            eta,
            rank1_bound: 1.0 + 0.5f64.powf(theta),
        })
    }

    pub fn theta(&self) -> f64 {
        self.theta
    }

    /// Probability of rank 0: 1 / zeta(n, theta).
    pub fn rank0_probability(&self) -> f64 {
        1.0 / self.zetan
    }

    #[inline]
    pub fn sample_rank(&self, rng: &mut WyRand) -> u64 {
        let u = rng.unit_f64();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < self.rank1_bound || self.n <= 2 {
            return 1.min(self.n - 1);
        }
        let r = (self.n as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        r.min(self.n - 1)
    }
}

/// Maps rank `r` in `0..n` to a key index in `0..n`, one-to-one.
#[inline]
pub fn scramble(rank: u64, n: u64) -> u64 {
    scramble_with(rank, n, SCRAMBLE_PRIME % n)
}

/// `scramble` with `prime_mod_n = SCRAMBLE_PRIME % n` precomputed: below 2^32 keys the product
/// fits in 64 bits and a 64-bit remainder replaces the much slower 128-bit one.
#[inline]
fn scramble_with(rank: u64, n: u64, prime_mod_n: u64) -> u64 {
    debug_assert!(rank < n);
    if n <= 1 << 32 {
        rank * prime_mod_n % n
    } else {
        ((rank as u128 * prime_mod_n as u128) % n as u128) as u64
    }
}

/// Draws key indexes in `0..n` from a distribution.
#[derive(Clone, Debug)]
pub enum KeySampler {
    Uniform {
        n: u64,
    },
    Zipf {
        zipf: Zipf,
        prime_mod_n: u64,
    },
    /// Rank r is key `n - 1 - r` (the caller shifts it by the keys inserted since).
    Latest {
        zipf: Zipf,
    },
}

impl KeySampler {
    pub fn new(dist: Distribution, n: u64, theta: f64) -> Result<KeySampler> {
        if n == 0 {
            return Err(Error::Invalid("cannot sample from zero keys".into()));
        }
        Ok(match dist {
            Distribution::Uniform => KeySampler::Uniform { n },
            Distribution::Zipf => KeySampler::Zipf {
                zipf: Zipf::new(n, theta)?,
                prime_mod_n: SCRAMBLE_PRIME % n,
            },
            Distribution::Latest => KeySampler::Latest {
                zipf: Zipf::new(n, theta)?,
            },
        })
    }

    #[inline]
    pub fn next(&self, rng: &mut WyRand) -> u64 {
        match self {
            KeySampler::Uniform { n } => rng.below(*n),
            KeySampler::Zipf { zipf, prime_mod_n } => {
                scramble_with(zipf.sample_rank(rng), zipf.n, *prime_mod_n)
            }
            KeySampler::Latest { zipf } => zipf.n - 1 - zipf.sample_rank(rng),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeta_matches_the_exact_sum() {
        for n in [1u64, 2, 10, 1000] {
            let exact: f64 = (1..=n).map(|i| (i as f64).powf(-0.99)).sum();
            assert!((zeta(n, 0.99) - exact).abs() < 1e-9);
        }
        // Past the exact part, the Euler-Maclaurin tail.
        let n = ZETA_EXACT_TERMS * 8 + 12_345;
        for theta in [0.5, 0.99] {
            let exact: f64 = (1..=n).rev().map(|i| (i as f64).powf(-theta)).sum();
            let rel = (zeta(n, theta) - exact).abs() / exact;
            assert!(rel < 1e-10, "theta {theta}: relative error {rel}");
        }
    }

    #[test]
    fn zipf_rank_frequencies() {
        let n = 1000;
        let z = Zipf::new(n, 0.99).unwrap();
        let mut rng = WyRand::new(7);
        let draws = 1_000_000;
        let mut counts = vec![0u64; n as usize];
        for _ in 0..draws {
            let r = z.sample_rank(&mut rng);
            assert!(r < n);
            counts[r as usize] += 1;
        }
        // Rank 0: probability 1/zeta(1000, 0.99) ~= 0.134; the sd of the frequency is ~3.4e-4.
        let p0 = counts[0] as f64 / draws as f64;
        assert!(
            (p0 - z.rank0_probability()).abs() < 0.005,
            "p0 {p0} vs {}",
            z.rank0_probability()
        );
        // The most popular ranks come in decreasing order of frequency.
        for r in 0..5 {
            assert!(counts[r] > counts[r + 1], "rank {r}: {:?}", &counts[..7]);
        }
        // Rank 1 is exact too: 2^-theta / zeta.
        let p1 = counts[1] as f64 / draws as f64;
        let want1 = 0.5f64.powf(0.99) / zeta(n, 0.99);
        assert!((p1 - want1).abs() < 0.005, "p1 {p1} vs {want1}");
        // The tail is sampled too.
        assert!(counts[n as usize / 2..].iter().sum::<u64>() > 0);
    }

    #[test]
    fn zipf_small_and_bad_parameters() {
        let mut rng = WyRand::new(3);
        for n in [1u64, 2, 3] {
            let z = Zipf::new(n, 0.99).unwrap();
            for _ in 0..1000 {
                assert!(z.sample_rank(&mut rng) < n);
            }
        }
        assert!(Zipf::new(0, 0.99).is_err());
        assert!(Zipf::new(10, 1.0).is_err());
        assert!(Zipf::new(10, 0.0).is_err());
        assert!(Zipf::new(10, f64::NAN).is_err());
    }

    #[test]
    fn scramble_is_a_permutation() {
        for n in [1u64, 7, 1000, 4096, (1 << 32) + 7] {
            if n > 5000 {
                // Both arithmetic paths agree at the boundary.
                for r in [0, 1, 2, n / 2, n - 1] {
                    let want = ((r as u128 * SCRAMBLE_PRIME as u128) % n as u128) as u64;
                    assert_eq!(scramble(r, n), want);
                }
                continue;
            }
            let mut seen = vec![false; n as usize];
            for r in 0..n {
                let i = scramble(r, n) as usize;
                assert!(!seen[i]);
                seen[i] = true;
            }
        }
        // The hottest ranks are not neighbours.
        assert!(scramble(1, 1_000_000).abs_diff(scramble(0, 1_000_000)) > 1000);
    }

    #[test]
    fn samplers_stay_in_range() {
        let mut rng = WyRand::new(11);
        for dist in [
            Distribution::Uniform,
            Distribution::Zipf,
            Distribution::Latest,
        ] {
            let s = KeySampler::new(dist, 12_345, 0.99).unwrap();
            for _ in 0..10_000 {
                assert!(s.next(&mut rng) < 12_345);
            }
        }
        assert_eq!("zipf".parse::<Distribution>().unwrap(), Distribution::Zipf);
        assert_eq!(
            "latest".parse::<Distribution>().unwrap(),
            Distribution::Latest
        );
        assert!("pareto".parse::<Distribution>().is_err());
    }
}
