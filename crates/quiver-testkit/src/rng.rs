//! The tests' PRNG and its seed. The generator is the project's one (`quiver_plan::rng`,
//! wyrand); a test with a random seed prints it (`seed NAME=VALUE`) and takes it from the
//! environment variable NAME when set, so a failure can be repeated.

use quiver_plan::rng::WyRand;

/// A small deterministic generator for tests (wyrand). Not for anything that needs
/// unpredictability.
#[derive(Clone, Debug)]
pub struct Rng(WyRand);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(WyRand::new(seed))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.0.below(n)
    }

    /// Uniform index into `0..n`: picking from a slice.
    pub fn index(&mut self, n: usize) -> usize {
        self.0.index(n)
    }

    /// Uniform in `lo..hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo)
    }
}

/// SplitMix64's finaliser: a good 64-bit mix (a seed or a value derived from a number).
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A seed from the environment variable `var` if set, else from the clock; printed as
/// `seed VAR=VALUE` (set it to repeat the run).
pub fn seed_from_env(var: &str) -> u64 {
    let seed = env_seed(var).unwrap_or_else(clock_seed);
    print_seed(var, seed);
    seed
}

/// A seed from the environment variable `var` if set, else `fixed` (a test whose runs are
/// all alike unless asked otherwise); printed as [`seed_from_env`] prints it.
pub fn seed_from_env_or(var: &str, fixed: u64) -> u64 {
    let seed = env_seed(var).unwrap_or(fixed);
    print_seed(var, seed);
    seed
}

fn env_seed(var: &str) -> Option<u64> {
    let s = std::env::var(var).ok()?;
    Some(
        s.parse()
            .unwrap_or_else(|_| panic!("{var}={s:?} is not a u64")),
    )
}

/// The clock's nanoseconds and the process id, mixed: distinct for tests started together.
fn clock_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    mix64(nanos ^ u64::from(std::process::id()))
}

/// On stderr, which the test harness shows with a failing test's output.
fn print_seed(var: &str, seed: u64) {
    eprintln!("seed {var}={seed}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_gives_the_seed() {
        // A variable no other test sets.
        std::env::set_var("QUIVER_TESTKIT_SEED", "42");
        assert_eq!(seed_from_env("QUIVER_TESTKIT_SEED"), 42);
        assert_eq!(seed_from_env_or("QUIVER_TESTKIT_SEED", 7), 42);
        assert_eq!(seed_from_env_or("QUIVER_TESTKIT_UNSET", 7), 7);
    }

    #[test]
    fn range_stays_in_range() {
        let mut r = Rng::new(1);
        assert!((0..1000).all(|_| (5..9).contains(&r.range(5, 9))));
    }
}
