//! The simulation's random numbers: one seeded PCG stream per model.
//!
//! PCG-64 (MCG variant, O'Neill 2014) is fixed here rather than `StdRng`
//! because `StdRng`'s algorithm may change between `rand` releases, and results
//! must be bit-identical across machines and versions for the same seed.

use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;

/// A seeded, portable random stream.
#[derive(Clone, Debug)]
pub struct SimRng(Pcg64Mcg);

impl SimRng {
    /// A stream from a 64-bit seed.
    pub fn new(seed: u64) -> Self {
        SimRng(Pcg64Mcg::seed_from_u64(seed))
    }

    /// An independent stream for sub-component `index` (e.g. one per port),
    /// derived from the parent seed with a SplitMix64 step so streams differ.
    pub fn substream(seed: u64, index: u64) -> Self {
        let mut z = seed ^ index.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        SimRng::new(z ^ (z >> 31))
    }

    /// Uniform in [0, 1).
    #[inline]
    pub fn uniform(&mut self) -> f64 {
        // 53 random mantissa bits, the standard construction.
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// True with probability `p`.
    #[inline]
    pub fn bernoulli(&mut self, p: f64) -> bool {
        self.uniform() < p
    }

    /// Uniform integer in [0, n); n must be > 0.
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        self.0.random_range(0..n)
    }

    /// Exponential with the given mean (inverse-transform sampling).
    #[inline]
    pub fn exponential(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.uniform()).ln()
    }

    /// Raw 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        use rand::Rng;
        self.0.next_u64()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream() {
        let mut a = SimRng::new(7);
        let mut b = SimRng::new(7);
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
    }

    #[test]
    fn uniform_mean_is_half() {
        let mut r = SimRng::new(1);
        let n = 200_000;
        let mean: f64 = (0..n).map(|_| r.uniform()).sum::<f64>() / n as f64;
        // std of the mean = sqrt(1/12/n) = 6.5e-4; 5 sigma.
        assert!((mean - 0.5).abs() < 3.3e-3, "{mean}");
    }
}
