//! A small, fast PRNG for the load generator (wyrand: one 64x64->128 multiply per draw).
//! Not for anything but picking keys.

#[derive(Clone, Debug)]
pub struct WyRand {
    state: u64,
}

impl WyRand {
    pub fn new(seed: u64) -> WyRand {
        WyRand { state: seed }
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0xa076_1d64_78bd_642f);
        let t = (self.state as u128).wrapping_mul((self.state ^ 0xe703_7ed1_a0b4_28db) as u128);
        ((t >> 64) as u64) ^ (t as u64)
    }

    /// Uniform in `0..n` (Lemire's multiply-shift; the bias is below 2^-64 * n, negligible here).
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// Uniform in `[0, 1)` with 53 bits of precision.
    #[inline]
    pub fn unit_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn below_stays_in_range_and_covers_it() {
        let mut r = WyRand::new(1);
        let mut seen = [0u32; 10];
        for _ in 0..100_000 {
            seen[r.below(10) as usize] += 1;
        }
        // Each bucket expects 10_000 (sd ~95).
        assert!(
            seen.iter().all(|&c| (9_500..10_500).contains(&c)),
            "{seen:?}"
        );
        for _ in 0..1000 {
            let u = r.unit_f64();
            assert!((0.0..1.0).contains(&u));
        }
    }
}
