//! Link specification and the timing derived from it.

use crate::error::{ensure, Result};
use super::replay::{ReplaySpec, ReplayTiming};
use crate::phy::{serialization_ps, PacketFormat, SerdesRates, SerdesSpec};
use serde::{Deserialize, Serialize};

/// Everything that defines one direction of a link (both directions are
/// identical unless a fabric says otherwise).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    /// Lanes and their coding.
    pub serdes: SerdesSpec,
    /// Packet format.
    #[serde(default)]
    pub packet: PacketFormat,
    /// Propagation delay of the channel (cable or trace), ps.
    #[serde(default)]
    pub propagation_ps: u64,
    /// Virtual channels.
    #[serde(default = "default_vcs")]
    pub vcs: u32,
    /// Receiver buffer per VC, in flits; the sender starts with this many credits.
    pub credits_per_vc_flits: u32,
    /// Delay from the receiver freeing a buffer to the credit being usable at
    /// the sender, ps (credit message serialization, propagation, processing).
    #[serde(default)]
    pub credit_return_ps: u64,
    /// Bit errors and link-level retry (replay buffer, go-back-N, ACK/NAK);
    /// None = an error-free link without retry modelling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<ReplaySpec>,
}

/// Largest delay a link accepts, ps (one second).
pub const MAX_DELAY_PS: u64 = 1_000_000_000_000;

fn default_vcs() -> u32 {
    1
}

/// Derived, integer timing of a link direction (the engine's view).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LinkTiming {
    /// Payload-level data rate of the direction (flits travel at this rate).
    pub rate_bps: u64,
    pub flit_bytes: u32,
    /// Serialization time of one flit, ps (rounded up).
    pub flit_ps: u64,
    /// Fixed latency after serialization: propagation + PHY + FEC accumulation, ps.
    pub latency_ps: u64,
    pub propagation_ps: u64,
    pub phy_latency_ps: u64,
    pub fec_accumulation_ps: u64,
    pub vcs: u32,
    pub credits_per_vc_flits: u32,
    pub credit_return_ps: u64,
    /// A VC counts as credit-exhausted while it holds fewer credits than this
    /// (default: one maximum-size packet, which virtual cut-through needs to
    /// start a packet; equal to "zero credits" when credits are a multiple of it).
    pub exhaustion_below_flits: u32,
    /// Retry timing, if the link models bit errors / link-level retry.
    pub replay: Option<ReplayTiming>,
}

impl LinkTiming {
    /// Serialization time of `flits` flits, ps, rounded up.
    #[inline]
    pub fn serialization_ps(&self, flits: u64) -> u64 {
        serialization_ps(flits * self.flit_bytes as u64, self.rate_bps)
    }
}

impl LinkSpec {
    /// Validate and derive the rate chain and timing.
    ///
    /// # Errors
    /// [`crate::FlitsimError::Config`] naming the first bad field.
    pub fn derive(&self) -> Result<(SerdesRates, LinkTiming)> {
        let rates = self.serdes.rates().map_err(|e| prefix_field(e, "serdes"))?;
        self.packet.validate().map_err(|e| prefix_field(e, "packet"))?;
        ensure(self.vcs >= 1 && self.vcs <= 64, "vcs", self.vcs, "1..=64 virtual channels")?;
        // Delays up to one second keep every sum of times exact in u64 ps.
        for (name, v) in [("propagation_ps", self.propagation_ps), ("credit_return_ps", self.credit_return_ps), ("serdes.phy_latency_ps", self.serdes.phy_latency_ps)] {
            ensure(v <= MAX_DELAY_PS, name, v, "0..=1e12 ps (one second)")?;
        }
        ensure(self.credits_per_vc_flits <= 1 << 24, "credits_per_vc_flits", self.credits_per_vc_flits, "at most 2^24 flits")?;
        let max_pkt = self.packet.flits_per_packet(self.packet.max_payload_bytes as u64);
        ensure(
            self.credits_per_vc_flits as u64 >= max_pkt,
            "credits_per_vc_flits",
            self.credits_per_vc_flits,
            &format!(
                "at least one maximum-size packet ({max_pkt} flits for {} B payload); virtual cut-through needs room for a whole packet",
                self.packet.max_payload_bytes
            ),
        )?;
        ensure(rates.payload_rate_bps > 0, "serdes", rates.payload_rate_gbps, "a payload rate > 0")?;
        let flit_ps = serialization_ps(self.packet.flit_bytes as u64, rates.payload_rate_bps);
        let timing = LinkTiming {
            rate_bps: rates.payload_rate_bps,
            flit_bytes: self.packet.flit_bytes,
            flit_ps,
            latency_ps: self.propagation_ps + rates.phy_latency_ps + rates.fec_accumulation_ps,
            propagation_ps: self.propagation_ps,
            phy_latency_ps: rates.phy_latency_ps,
            fec_accumulation_ps: rates.fec_accumulation_ps,
            vcs: self.vcs,
            credits_per_vc_flits: self.credits_per_vc_flits,
            credit_return_ps: self.credit_return_ps,
            exhaustion_below_flits: max_pkt as u32,
            replay: None,
        };
        let mut timing = timing;
        if let Some(r) = &self.replay {
            timing.replay = Some(r.derive(&self.serdes, timing.latency_ps, flit_ps, max_pkt, self.packet.flit_bytes).map_err(|e| prefix_field(e, "replay"))?);
        }
        Ok((rates, timing))
    }
}

/// Prefix a config error's field with the enclosing struct's name.
pub fn prefix_field(e: crate::FlitsimError, outer: &str) -> crate::FlitsimError {
    match e {
        crate::FlitsimError::Config { field, value, allowed } => {
            crate::FlitsimError::Config { field: format!("{outer}.{field}"), value, allowed }
        }
        other => other,
    }
}
