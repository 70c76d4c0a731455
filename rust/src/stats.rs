//! Streaming statistics: memory is bounded by the histogram's resolution, not by
//! the number of samples.

use serde::Serialize;

/// Sub-buckets per power of two: relative bucket width 1/16 (6.25 %).
const SUB_BITS: u32 = 4;
const SUB: u64 = 1 << SUB_BITS;

/// Log-linear histogram of non-negative integers (HdrHistogram-style): exact
/// below 16, then 16 linear sub-buckets per power of two, so any percentile is
/// within 6.25 % of the true value. Fixed size (1 KiB counts), no allocation
/// per sample.
#[derive(Debug, Clone, Serialize)]
pub struct Histogram {
    counts: Vec<u64>,
    count: u64,
    sum: u128,
    min: u64,
    max: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

impl Histogram {
    /// An empty histogram covering the whole u64 range.
    pub fn new() -> Self {
        Histogram { counts: vec![0; ((64 - SUB_BITS as usize) + 1) * SUB as usize], count: 0, sum: 0, min: u64::MAX, max: 0 }
    }

    #[inline]
    fn index(v: u64) -> usize {
        if v < SUB {
            return v as usize;
        }
        let msb = 63 - v.leading_zeros(); // >= SUB_BITS
        let shift = msb - SUB_BITS;
        let sub = (v >> shift) & (SUB - 1);
        ((shift as u64 + 1) * SUB + sub) as usize
    }

    /// Lower bound of bucket `i`.
    fn bucket_low(i: usize) -> u64 {
        let i = i as u64;
        if i < SUB {
            return i;
        }
        let shift = i / SUB - 1;
        let sub = i % SUB;
        (SUB + sub) << shift
    }

    /// Record one value.
    #[inline]
    pub fn record(&mut self, v: u64) {
        self.counts[Self::index(v)] += 1;
        self.count += 1;
        self.sum += v as u128;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    /// Record `k` samples of value `v` (the same state as `k` calls of
    /// [`Self::record`]; nothing for `k` = 0).
    #[inline]
    pub fn record_n(&mut self, v: u64, k: u64) {
        if k == 0 {
            return;
        }
        self.counts[Self::index(v)] += k;
        self.count += k;
        self.sum += v as u128 * k as u128;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    /// Merge another histogram into this one.
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.count += other.count;
        self.sum += other.sum;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    /// Number of samples.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Exact mean (0 when empty).
    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum as f64 / self.count as f64
        }
    }

    /// Exact minimum (0 when empty).
    pub fn min(&self) -> u64 {
        if self.count == 0 {
            0
        } else {
            self.min
        }
    }

    /// Exact maximum.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The `q`-quantile (q in [0, 1]), as the midpoint of its bucket clamped to
    /// [min, max]; 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let lo = Self::bucket_low(i);
                let hi = Self::bucket_low(i + 1).saturating_sub(1).max(lo);
                return (lo + (hi - lo) / 2).clamp(self.min, self.max);
            }
        }
        self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_within_bucket_resolution() {
        let mut h = Histogram::new();
        for v in 1..=100_000u64 {
            h.record(v);
        }
        for q in [0.25, 0.5, 0.9, 0.99] {
            let exact = q * 100_000.0;
            let got = h.quantile(q) as f64;
            assert!((got - exact).abs() / exact < 0.0625, "q={q} got={got}");
        }
        assert_eq!(h.min(), 1);
        assert_eq!(h.max(), 100_000);
        assert!((h.mean() - 50_000.5).abs() < 1e-9);
    }

    #[test]
    fn small_values_are_exact() {
        let mut h = Histogram::new();
        for v in [3, 3, 3, 7] {
            h.record(v);
        }
        assert_eq!(h.quantile(0.5), 3);
        assert_eq!(h.quantile(1.0), 7);
    }
}
