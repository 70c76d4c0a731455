//! SerDes lane timing and the rate chain from symbol rate to payload.
//!
//! One chain derives every bandwidth figure (the bandwidth ledger, README):
//!
//! ```text
//! baud (GBd) x bits/symbol            = line rate per lane      (Gb/s)
//! line rate  x k/n        (FEC)       = post-FEC rate per lane
//! post-FEC   x line-code efficiency   = payload rate per lane
//! payload    x lanes per direction    = payload rate per direction
//! ```
//!
//! For IEEE 802.3dj 200G lanes (and NVLink 5 by inference):
//! 106.25 GBd PAM4 = 212.5 Gb/s; RS(544,514) and 256b/257b transcoding bring it
//! to exactly 200 Gb/s (212.5 x 514/544 x 256/257 = 212.5 x 16/17).

mod ber;
mod packet;

pub use ber::{binomial_split, FecErrorModel};
pub use packet::PacketFormat;

use crate::error::{ensure, Result};
use serde::{Deserialize, Serialize};

/// Bits carried per symbol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Modulation {
    /// Non-return-to-zero, 1 bit per symbol.
    Nrz,
    /// 4-level pulse-amplitude modulation, 2 bits per symbol.
    Pam4,
}

impl Modulation {
    /// Bits per symbol: NRZ 1, PAM4 2.
    pub fn bits_per_symbol(self) -> u32 {
        match self {
            Modulation::Nrz => 1,
            Modulation::Pam4 => 2,
        }
    }
}

/// Block line code applied before FEC; only its efficiency matters for rates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum LineCode {
    /// No line code (efficiency 1).
    #[serde(rename = "none")]
    None,
    /// 64b/66b (IEEE 802.3 clause 49): 64/66.
    #[serde(rename = "64b/66b")]
    B64B66,
    /// 64b/66b transcoded to 256b/257b ahead of RS FEC (IEEE 802.3 clause 91):
    /// net 256/257 of payload.
    #[serde(rename = "256b/257b")]
    B256B257,
    /// 128b/130b (PCIe 3-5): 128/130.
    #[serde(rename = "128b/130b")]
    B128B130,
}

impl LineCode {
    /// Payload bits per coded bit.
    pub fn efficiency(self) -> f64 {
        match self {
            LineCode::None => 1.0,
            LineCode::B64B66 => 64.0 / 66.0,
            LineCode::B256B257 => 256.0 / 257.0,
            LineCode::B128B130 => 128.0 / 130.0,
        }
    }

    /// The name used in specs.
    pub fn name(self) -> &'static str {
        match self {
            LineCode::None => "none",
            LineCode::B64B66 => "64b/66b",
            LineCode::B256B257 => "256b/257b",
            LineCode::B128B130 => "128b/130b",
        }
    }
}

/// A Reed-Solomon-style block FEC: `n` symbols per codeword of which `k` carry data.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FecCode {
    /// Codeword length in symbols (544 for KP4).
    pub n: u32,
    /// Data symbols per codeword (514 for KP4).
    pub k: u32,
    /// Bits per FEC symbol (10 for KP4).
    pub symbol_bits: u32,
    /// Lanes one codeword is striped over (1 = a whole codeword on one lane, as
    /// in the 25.6 ns figure: 5440 bits / 212.5 Gb/s). Default 1.
    #[serde(default = "one")]
    pub interleave_lanes: u32,
}

fn one() -> u32 {
    1
}

/// One direction of a SerDes link: `lanes` identical lanes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SerdesSpec {
    /// Symbol rate per lane in gigabaud.
    pub baud_gbd: f64,
    /// Modulation: `"nrz"` or `"pam4"`.
    pub modulation: Modulation,
    /// Lanes (differential pairs) per direction.
    pub lanes: u32,
    /// Block FEC, or none.
    #[serde(default)]
    pub fec: Option<FecCode>,
    /// Line code: `"none"`, `"64b/66b"`, `"256b/257b"`, `"128b/130b"`.
    #[serde(default = "no_line_code")]
    pub line_code: LineCode,
    /// Fixed PHY latency per direction (SerDes, FEC decode, retimers), in ps.
    #[serde(default)]
    pub phy_latency_ps: u64,
}

fn no_line_code() -> LineCode {
    LineCode::None
}

/// Rates and latencies derived from a [`SerdesSpec`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SerdesRates {
    pub bits_per_symbol: u32,
    /// baud x bits/symbol, per lane.
    pub line_rate_per_lane_gbps: f64,
    /// After removing FEC parity, per lane.
    pub post_fec_rate_per_lane_gbps: f64,
    /// After FEC and line code, per lane.
    pub payload_rate_per_lane_gbps: f64,
    /// Line rate of all lanes of one direction.
    pub line_rate_gbps: f64,
    /// Payload rate of all lanes of one direction.
    pub payload_rate_gbps: f64,
    /// Payload rate of one direction in bits per second, rounded to the bit.
    pub payload_rate_bps: u64,
    /// FEC code rate k/n (1 without FEC).
    pub fec_efficiency: f64,
    /// Line-code efficiency.
    pub line_code_efficiency: f64,
    /// Duration of one bit on one lane (unit interval / bits per symbol), ps.
    pub bit_time_ps: f64,
    /// Duration of one symbol (unit interval), ps.
    pub unit_interval_ps: f64,
    /// Time to receive one whole FEC codeword before it can be decoded, ps
    /// (rounded up to the picosecond); 0 without FEC.
    pub fec_accumulation_ps: u64,
    /// Fixed PHY latency, ps.
    pub phy_latency_ps: u64,
}

impl SerdesSpec {
    /// Check every field; errors name the field, the value and what is allowed.
    pub fn validate(&self) -> Result<()> {
        ensure(self.baud_gbd.is_finite() && self.baud_gbd > 0.0, "baud_gbd", self.baud_gbd, "a finite rate > 0 GBd")?;
        ensure(self.baud_gbd <= 1000.0, "baud_gbd", self.baud_gbd, "at most 1000 GBd")?;
        ensure(self.lanes >= 1 && self.lanes <= 64, "lanes", self.lanes, "an integer in 1..=64")?;
        if let Some(f) = &self.fec {
            ensure(f.n >= 1, "fec.n", f.n, "n >= 1 symbols")?;
            ensure(f.k >= 1 && f.k <= f.n, "fec.k", f.k, &format!("1 <= k <= n = {}", f.n))?;
            ensure(f.symbol_bits >= 1 && f.symbol_bits <= 64, "fec.symbol_bits", f.symbol_bits, "1..=64 bits")?;
            ensure(
                f.interleave_lanes >= 1 && f.interleave_lanes <= self.lanes,
                "fec.interleave_lanes",
                f.interleave_lanes,
                &format!("1..=lanes ({})", self.lanes),
            )?;
        }
        Ok(())
    }

    /// Derive the rate chain.
    ///
    /// # Errors
    /// [`crate::FlitsimError::Config`] if the spec is invalid.
    pub fn rates(&self) -> Result<SerdesRates> {
        self.validate()?;
        let bps = self.modulation.bits_per_symbol();
        let line = self.baud_gbd * bps as f64;
        let fec_eff = self.fec.map_or(1.0, |f| f.k as f64 / f.n as f64);
        let lc = self.line_code.efficiency();
        let post_fec = line * fec_eff;
        let payload_lane = post_fec * lc;
        let payload = payload_lane * self.lanes as f64;
        let fec_acc = self.fec.map_or(0, |f| {
            let bits = f.n as f64 * f.symbol_bits as f64;
            (bits * 1000.0 / (line * f.interleave_lanes as f64) - 1e-9).ceil() as u64
        });
        Ok(SerdesRates {
            bits_per_symbol: bps,
            line_rate_per_lane_gbps: line,
            post_fec_rate_per_lane_gbps: post_fec,
            payload_rate_per_lane_gbps: payload_lane,
            line_rate_gbps: line * self.lanes as f64,
            payload_rate_gbps: payload,
            payload_rate_bps: (payload * 1e9).round() as u64,
            fec_efficiency: fec_eff,
            line_code_efficiency: lc,
            bit_time_ps: 1000.0 / line,
            unit_interval_ps: 1000.0 / self.baud_gbd,
            fec_accumulation_ps: fec_acc,
            phy_latency_ps: self.phy_latency_ps,
        })
    }
}

/// Time to serialize `bytes` at `rate_bps`, rounded up to the picosecond.
///
/// Exact integer arithmetic (u128), so 272 B at 400 Gb/s is exactly 5440 ps.
#[inline]
pub fn serialization_ps(bytes: u64, rate_bps: u64) -> u64 {
    let num = bytes as u128 * 8 * 1_000_000_000_000u128;
    if num <= u64::MAX as u128 {
        // the same quotient by a 64-bit division (a 128-bit one is a library
        // call, once per packet on the hot path)
        return (num as u64).div_ceil(rate_bps);
    }
    num.div_ceil(rate_bps as u128) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kp4() -> FecCode {
        FecCode { n: 544, k: 514, symbol_bits: 10, interleave_lanes: 1 }
    }

    #[test]
    fn ieee_200g_lane_is_200_gbps_payload() {
        // IEEE 802.3dj: 106.25 GBd PAM4, RS(544,514), 256b/257b -> 200 Gb/s.
        let s = SerdesSpec {
            baud_gbd: 106.25,
            modulation: Modulation::Pam4,
            lanes: 1,
            fec: Some(kp4()),
            line_code: LineCode::B256B257,
            phy_latency_ps: 0,
        };
        let r = s.rates().unwrap();
        assert!((r.line_rate_per_lane_gbps - 212.5).abs() < 1e-12);
        assert!((r.payload_rate_per_lane_gbps - 200.0).abs() < 1e-9);
        // 5440 bits / 212.5 Gb/s = 25.6 ns (RS(544,514) codeword, Intel AN 846).
        assert_eq!(r.fec_accumulation_ps, 25_600);
    }

    #[test]
    fn serialization_is_exact() {
        assert_eq!(serialization_ps(272, 400_000_000_000), 5440);
        assert_eq!(serialization_ps(1, 3), 2_666_666_666_667);
    }

    #[test]
    fn bad_fec_is_rejected() {
        let mut s = SerdesSpec {
            baud_gbd: 53.125,
            modulation: Modulation::Pam4,
            lanes: 2,
            fec: Some(FecCode { n: 514, k: 544, symbol_bits: 10, interleave_lanes: 1 }),
            line_code: LineCode::None,
            phy_latency_ps: 0,
        };
        let e = s.rates().unwrap_err().to_string();
        assert!(e.contains("fec.k") && e.contains("544"), "{e}");
        s.fec = None;
        s.baud_gbd = -1.0;
        assert!(s.rates().unwrap_err().to_string().contains("baud_gbd"));
    }
}
