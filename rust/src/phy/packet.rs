//! Packetization: how many flits a payload takes and what fraction is payload.
//!
//! NVLink 1/2 (Hot Chips 28; Pascal whitepaper): 16-byte flits, one header flit
//! per packet, up to 256 B of data; 256 B travels in 17 flits (94.1 %), 64 B in
//! 5 flits (80 %). Later generations' formats are not public, so these are
//! parameters.

use crate::error::{ensure, Result};
use serde::{Deserialize, Serialize};

/// The packet format of a link protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PacketFormat {
    /// Flit size in bytes (16 for NVLink).
    #[serde(default = "default_flit")]
    pub flit_bytes: u32,
    /// Header (and other overhead) flits per packet.
    #[serde(default = "default_header")]
    pub header_flits: u32,
    /// Largest payload one packet may carry, in bytes.
    #[serde(default = "default_max_payload")]
    pub max_payload_bytes: u32,
}

fn default_flit() -> u32 {
    16
}
fn default_header() -> u32 {
    1
}
fn default_max_payload() -> u32 {
    256
}

impl Default for PacketFormat {
    fn default() -> Self {
        PacketFormat { flit_bytes: 16, header_flits: 1, max_payload_bytes: 256 }
    }
}

impl PacketFormat {
    /// Check every field.
    pub fn validate(&self) -> Result<()> {
        ensure(self.flit_bytes >= 1 && self.flit_bytes <= 4096, "flit_bytes", self.flit_bytes, "1..=4096 bytes")?;
        ensure(self.header_flits <= 64, "header_flits", self.header_flits, "0..=64 flits")?;
        ensure(
            self.max_payload_bytes >= 1 && self.max_payload_bytes <= 1 << 20,
            "max_payload_bytes",
            self.max_payload_bytes,
            "1..=1048576 bytes",
        )?;
        Ok(())
    }

    /// Check a per-packet payload against this format.
    pub fn check_payload(&self, payload_bytes: u64) -> Result<()> {
        ensure(
            payload_bytes >= 1 && payload_bytes <= self.max_payload_bytes as u64,
            "payload_bytes",
            payload_bytes,
            &format!("1..={} bytes (max_payload_bytes)", self.max_payload_bytes),
        )
    }

    /// Flits for one packet carrying `payload_bytes` (header + data flits).
    #[inline]
    pub fn flits_per_packet(&self, payload_bytes: u64) -> u64 {
        self.header_flits as u64 + payload_bytes.div_ceil(self.flit_bytes as u64)
    }

    /// Payload bytes / wire bytes for a packet carrying `payload_bytes`.
    pub fn efficiency(&self, payload_bytes: u64) -> f64 {
        payload_bytes as f64 / (self.flits_per_packet(payload_bytes) * self.flit_bytes as u64) as f64
    }

    /// Packets and flits to move `total_bytes` in packets of at most
    /// `payload_bytes` (the last packet carries the remainder).
    pub fn transfer(&self, total_bytes: u64, payload_bytes: u64) -> TransferShape {
        let full = total_bytes / payload_bytes;
        let rem = total_bytes % payload_bytes;
        let packets = full + u64::from(rem > 0);
        let flits = full * self.flits_per_packet(payload_bytes) + if rem > 0 { self.flits_per_packet(rem) } else { 0 };
        TransferShape { packets, flits, wire_bytes: flits * self.flit_bytes as u64 }
    }
}

/// How a transfer is cut into packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TransferShape {
    pub packets: u64,
    pub flits: u64,
    pub wire_bytes: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvlink_packet_efficiency_matches_hot_chips() {
        // Hot Chips 28: 256 B in 17 flits = 94.1 %, 64 B = 80 %.
        let p = PacketFormat::default();
        assert_eq!(p.flits_per_packet(256), 17);
        assert!((p.efficiency(256) - 256.0 / 272.0).abs() < 1e-15);
        assert!((p.efficiency(64) - 0.8).abs() < 1e-15);
    }

    #[test]
    fn transfer_counts_remainder_packet() {
        let p = PacketFormat::default();
        let s = p.transfer(1000, 256);
        assert_eq!(s.packets, 4); // 3 x 256 + 232
        assert_eq!(s.flits, 3 * 17 + (1 + 15));
    }
}
