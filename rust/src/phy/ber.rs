//! Bit errors through the FEC: from a lane's raw (pre-FEC) bit error rate to
//! corrected and uncorrectable codewords, and to the probability that a
//! packet reaches the receiver with an error the FEC could not fix (its CRC
//! fails and link-level retry replays it).
//!
//! Model (closed form, independent bit errors):
//! - symbol error probability `p_s = 1 - (1 - BER)^m` for `m`-bit symbols;
//! - symbol errors per `n`-symbol codeword ~ Binomial(n, p_s); an RS code with
//!   `n - k` parity symbols corrects up to `t = floor((n - k) / 2)` of them
//!   (RS(544,514) "KP4": m = 10, t = 15; Intel AN 846, IEEE 802.3 cl. 91), so
//!   `P(uncorrectable) = sum_{j > t} C(n, j) p_s^j (1 - p_s)^(n - j)` and
//!   `P(corrected) = sum_{1 <= j <= t} ...`;
//! - uncorrectable codewords hit the link's flit stream at a constant rate per
//!   bit, `h = -ln(1 - P(uncorrectable)) / D`, D = flit bits per codeword
//!   (k x m x line-code efficiency: 5120 for KP4 with 256b/257b); a packet of
//!   `W` flit bits is corrupted with probability `1 - exp(-h W)`. Codeword
//!   boundaries are not tracked, so a codeword shared by two packets counts
//!   once (go-back-N replays both anyway).
//! - Without FEC every line bit error corrupts its packet: `h = -ln(1 - BER)`
//!   per line bit, `1 / line-code efficiency` line bits per flit bit.
//!
//! Real channels also have burst errors (DFE error propagation) that this
//! independent-error model does not include; the raw BER of NVLink lanes is
//! not public (NVIDIA publishes no NVLink BER or FEC figures).

use super::SerdesSpec;
use crate::error::{ensure, Result};
use serde::Serialize;

/// Codeword and packet error probabilities of a lane at one raw BER.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct FecErrorModel {
    /// Raw (pre-FEC) bit error rate.
    pub ber: f64,
    /// Probability that one FEC symbol holds at least one bit error (the BER
    /// itself without FEC).
    pub symbol_error_prob: f64,
    /// Symbol errors the code corrects per codeword, t (0 without FEC).
    pub correctable_symbols: u32,
    /// P(codeword without any symbol error).
    pub codeword_clean_prob: f64,
    /// P(1..=t symbol errors: the FEC corrects the codeword).
    pub codeword_corrected_prob: f64,
    /// P(more than t symbol errors: uncorrectable, the packet's CRC fails).
    pub codeword_uncorrectable_prob: f64,
    /// Flit (payload-level) bits per codeword, D (1 without FEC: each bit is
    /// its own "codeword").
    pub codeword_flit_bits: f64,
    /// Uncorrectable codewords per flit bit carried, h.
    pub hazard_per_flit_bit: f64,
}

impl FecErrorModel {
    /// The closed form for `serdes` at raw bit error rate `ber`.
    ///
    /// # Errors
    /// `Config` if `ber` is not in [0, 1) or the SerDes spec is invalid.
    pub fn new(serdes: &SerdesSpec, ber: f64) -> Result<Self> {
        serdes.validate()?;
        ensure(ber.is_finite() && (0.0..1.0).contains(&ber), "ber", ber, "a bit error rate in [0, 1)")?;
        let lc = serdes.line_code.efficiency();
        let Some(f) = serdes.fec else {
            let h = -(-ber).ln_1p() / lc;
            return Ok(FecErrorModel {
                ber,
                symbol_error_prob: ber,
                correctable_symbols: 0,
                codeword_clean_prob: 1.0 - ber,
                codeword_corrected_prob: 0.0,
                codeword_uncorrectable_prob: ber,
                codeword_flit_bits: 1.0,
                hazard_per_flit_bit: h,
            });
        };
        let ps = -(f.symbol_bits as f64 * (-ber).ln_1p()).exp_m1();
        let t = (f.n - f.k) / 2;
        let (clean, corrected, unc) = binomial_split(f.n, ps, t);
        let d = f.k as f64 * f.symbol_bits as f64 * lc;
        let h = if unc >= 1.0 { f64::INFINITY } else { -(-unc).ln_1p() / d };
        Ok(FecErrorModel {
            ber,
            symbol_error_prob: ps,
            correctable_symbols: t,
            codeword_clean_prob: clean,
            codeword_corrected_prob: corrected,
            codeword_uncorrectable_prob: unc,
            codeword_flit_bits: d,
            hazard_per_flit_bit: h,
        })
    }

    /// Probability that a packet of `flit_bits` flit bits is corrupted
    /// (holds part of an uncorrectable codeword).
    #[inline]
    pub fn packet_error_prob(&self, flit_bits: f64) -> f64 {
        if self.hazard_per_flit_bit == 0.0 {
            0.0
        } else {
            -(-self.hazard_per_flit_bit * flit_bits).exp_m1()
        }
    }
}

/// For X ~ Binomial(n, p): (P(X = 0), P(1 <= X <= t), P(X > t)), each summed
/// from its own terms (no `1 - x` cancellation, so tails down to ~1e-300 keep
/// their relative precision). Terms come from the log pmf by the recurrence
/// ln pmf(j) = ln pmf(j-1) + ln((n-j+1)/j) + ln(p/(1-p)).
pub fn binomial_split(n: u32, p: f64, t: u32) -> (f64, f64, f64) {
    if p <= 0.0 {
        return (1.0, 0.0, 0.0);
    }
    if p >= 1.0 {
        return if t >= n { (0.0, 1.0, 0.0) } else { (0.0, 0.0, 1.0) };
    }
    let lq = (-p).ln_1p();
    let odds = p.ln() - lq;
    let mut lp = n as f64 * lq;
    let clean = lp.exp();
    let (mut corr, mut unc) = (0.0, 0.0);
    for j in 1..=n {
        lp += ((n - j + 1) as f64 / j as f64).ln() + odds;
        let v = lp.exp();
        if j <= t {
            corr += v;
        } else {
            unc += v;
        }
    }
    (clean, corr, unc.min(1.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::phy::{FecCode, LineCode, Modulation};

    fn kp4_lane() -> SerdesSpec {
        SerdesSpec {
            baud_gbd: 106.25,
            modulation: Modulation::Pam4,
            lanes: 2,
            fec: Some(FecCode { n: 544, k: 514, symbol_bits: 10, interleave_lanes: 1 }),
            line_code: LineCode::B256B257,
            phy_latency_ps: 0,
        }
    }

    #[test]
    fn kp4_corrects_15_symbols_and_carries_5120_flit_bits() {
        let m = FecErrorModel::new(&kp4_lane(), 1e-4).unwrap();
        assert_eq!(m.correctable_symbols, 15);
        assert!((m.codeword_flit_bits - 5120.0).abs() < 1e-9);
        let s = m.codeword_clean_prob + m.codeword_corrected_prob + m.codeword_uncorrectable_prob;
        assert!((s - 1.0).abs() < 1e-12, "{s}");
    }

    #[test]
    fn tail_matches_direct_sum_at_small_n() {
        // n = 4, t = 1, p = 0.1: P(X > 1) = 1 - 0.9^4 - 4 * 0.1 * 0.9^3.
        let (c, k, u) = binomial_split(4, 0.1, 1);
        assert!((c - 0.6561).abs() < 1e-15);
        assert!((k - 0.2916).abs() < 1e-15);
        assert!((u - (1.0 - 0.6561 - 0.2916)).abs() < 1e-15);
    }

    #[test]
    fn no_fec_every_bit_error_counts() {
        let mut s = kp4_lane();
        s.fec = None;
        s.line_code = LineCode::None;
        let m = FecErrorModel::new(&s, 1e-6).unwrap();
        let w = 2176.0;
        let direct = 1.0 - (1.0f64 - 1e-6).powf(w);
        assert!((m.packet_error_prob(w) / direct - 1.0).abs() < 1e-9, "{} vs {direct}", m.packet_error_prob(w));
    }

    #[test]
    fn bad_ber_is_rejected() {
        for b in [-1e-9, 1.0, f64::NAN, f64::INFINITY] {
            let e = FecErrorModel::new(&kp4_lane(), b).unwrap_err().to_string();
            assert!(e.contains("ber"), "{e}");
        }
        assert_eq!(FecErrorModel::new(&kp4_lane(), 0.0).unwrap().hazard_per_flit_bit, 0.0);
    }
}
