//! Link-level retry: a replay buffer and go-back-N with ACK/NAK.
//!
//! The sender keeps every packet it sent in a replay buffer until the
//! receiver acknowledges it. The receiver checks each packet's CRC after FEC
//! decoding; a corrupted packet (an uncorrectable codeword, [`FecErrorModel`])
//! is answered with a NAK, and the sender goes back: it resends the packet and
//! everything it sent after it (go-back-N). Per failed attempt the link loses
//!
//! ```text
//! R = serialization of the packet + link latency + NAK return
//! ```
//!
//! of serializer time (the failed attempt, then the window of packets sent
//! while the NAK was on its way, which the receiver discards). With packet
//! error probability P and S = serialization per packet, a saturated link's
//! goodput is `S / (S + R P / (1 - P))` of the error-free one, i.e.
//! `(1 - P) / (1 + (R/S - 1) P)`: the go-back-N efficiency of Bertsekas and
//! Gallager, *Data Networks* (2nd ed.), sec. 2.4. Packets behind a replay wait
//! for it (in-order delivery), so latency grows by R per failed attempt.
//!
//! ACKs are coalesced by a timer (`ack_interval_ps`): a packet leaves the
//! replay buffer when the first ACK after its arrival reaches the sender. A
//! full buffer stalls the sender, so a buffer smaller than rate x ACK round
//! trip caps bandwidth even without errors. A sender that hears neither ACK
//! nor NAK (a dead link) gives up after `timeout_ps` (the fabric then replays
//! the packet end to end over another link).
//!
//! NVLink's replay timers, buffer sizes and lane BER are not public
//! (NVIDIA publishes none of them): every value here is a parameter with an
//! assumed default.

use super::MAX_DELAY_PS;
use crate::engine::{SimRng, TimePs};
use crate::error::{ensure, Result};
use crate::phy::FecErrorModel;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Default replay timer, ps (1 us; assumed, NVLink's is not public).
pub const DEFAULT_TIMEOUT_PS: u64 = 1_000_000;

/// Bit errors and link-level retry of a link direction.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplaySpec {
    /// Raw (pre-FEC) bit error rate per lane, in [0, 1). Default 0 (not
    /// public for NVLink).
    #[serde(default)]
    pub ber: f64,
    /// Receiver tail arrival to NAK usable at the sender, ps. Default (None):
    /// one flit time plus the link latency (the NAK is one control flit on
    /// the reverse direction of the same link), assumed.
    #[serde(default)]
    pub nak_return_ps: Option<u64>,
    /// ACK coalescing timer, ps: the receiver acknowledges at the next
    /// multiple of it after a packet arrives; 0 = every packet on arrival.
    #[serde(default)]
    pub ack_interval_ps: u64,
    /// ACK sent to ACK usable at the sender, ps. Default (None): as the NAK.
    #[serde(default)]
    pub ack_return_ps: Option<u64>,
    /// Replay buffer, wire bytes of unacknowledged packets; 0 = unbounded.
    /// At least one maximum-size packet.
    #[serde(default)]
    pub replay_buffer_bytes: u64,
    /// Replay timer: neither ACK nor NAK for this long and the sender gives
    /// the link up, ps. Default 1 us (assumed).
    #[serde(default = "d_timeout")]
    pub timeout_ps: u64,
    /// Seed of the error sampling (each link direction draws its own stream).
    #[serde(default)]
    pub seed: u64,
}

fn d_timeout() -> u64 {
    DEFAULT_TIMEOUT_PS
}

impl Default for ReplaySpec {
    fn default() -> Self {
        ReplaySpec { ber: 0.0, nak_return_ps: None, ack_interval_ps: 0, ack_return_ps: None, replay_buffer_bytes: 0, timeout_ps: DEFAULT_TIMEOUT_PS, seed: 0 }
    }
}

/// Largest packet error probability accepted: beyond it the link would
/// spend over 99 % of its time replaying (past the FEC cliff).
pub const MAX_PACKET_ERROR_PROB: f64 = 0.99;

/// Derived, integer retry timing (part of [`super::LinkTiming`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ReplayTiming {
    pub ber: f64,
    /// Uncorrectable codewords per flit bit.
    pub hazard_per_flit_bit: f64,
    pub nak_return_ps: u64,
    pub ack_interval_ps: u64,
    pub ack_return_ps: u64,
    pub replay_buffer_bytes: u64,
    pub timeout_ps: u64,
    pub seed: u64,
    /// P(a maximum-size protocol packet is corrupted).
    pub max_packet_error_prob: f64,
}

impl ReplaySpec {
    /// Validate against the link and derive the timing. `latency_ps` and
    /// `flit_ps` are the link's; `max_packet_flits`/`flit_bytes` its largest packet.
    pub(crate) fn derive(&self, serdes: &crate::phy::SerdesSpec, latency_ps: u64, flit_ps: u64, max_packet_flits: u64, flit_bytes: u32) -> Result<ReplayTiming> {
        let m = FecErrorModel::new(serdes, self.ber)?;
        for (name, v) in [("nak_return_ps", self.nak_return_ps), ("ack_return_ps", self.ack_return_ps), ("ack_interval_ps", Some(self.ack_interval_ps)), ("timeout_ps", Some(self.timeout_ps))] {
            if let Some(v) = v {
                ensure(v <= MAX_DELAY_PS, name, v, "0..=1e12 ps (one second)")?;
            }
        }
        ensure(self.timeout_ps >= 1, "timeout_ps", self.timeout_ps, "at least 1 ps")?;
        let max_wire = max_packet_flits * flit_bytes as u64;
        ensure(
            self.replay_buffer_bytes == 0 || (self.replay_buffer_bytes >= max_wire && self.replay_buffer_bytes <= 1 << 40),
            "replay_buffer_bytes",
            self.replay_buffer_bytes,
            &format!("0 (unbounded) or one maximum-size packet ({max_wire} wire bytes) up to 2^40"),
        )?;
        let p = m.packet_error_prob((max_wire * 8) as f64);
        ensure(
            p <= MAX_PACKET_ERROR_PROB,
            "ber",
            self.ber,
            &format!(
                "a BER the FEC can live with: at this BER {:.4} of maximum-size packets are corrupted (uncorrectable codeword probability {:.3e}); the link would do nothing but replay",
                p, m.codeword_uncorrectable_prob
            ),
        )?;
        let back = latency_ps + flit_ps;
        Ok(ReplayTiming {
            ber: self.ber,
            hazard_per_flit_bit: m.hazard_per_flit_bit,
            nak_return_ps: self.nak_return_ps.unwrap_or(back),
            ack_interval_ps: self.ack_interval_ps,
            ack_return_ps: self.ack_return_ps.or(self.nak_return_ps).unwrap_or(back),
            replay_buffer_bytes: self.replay_buffer_bytes,
            timeout_ps: self.timeout_ps,
            seed: self.seed,
            max_packet_error_prob: p,
        })
    }
}

/// Retry statistics of one link direction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ReplayStats {
    /// Failed attempts (packets that arrived corrupted and were replayed).
    pub replays: u64,
    /// Wire bytes resent by those replays (the corrupted packets themselves).
    pub replayed_wire_bytes: u64,
    /// Serializer time lost to replays (failed attempts and go-back windows), ps.
    pub replay_ps: u64,
    /// Time the sender waited for room in a full replay buffer, ps.
    pub buffer_wait_ps: u64,
}

/// Runtime retry state of one link direction: error sampling and the replay
/// buffer. Allocation-free in steady state (the buffer's queue reaches its
/// high-water mark and is reused).
#[derive(Debug, Clone)]
pub struct Replay {
    t: ReplayTiming,
    rng: SimRng,
    /// Unacknowledged packets: (time their ACK reaches the sender, wire bytes).
    held: VecDeque<(TimePs, u64)>,
    held_bytes: u64,
}

impl Replay {
    /// Retry state for one link direction; `stream` separates the error
    /// streams of links that share a spec (and seed).
    pub fn new(t: ReplayTiming, stream: u64) -> Self {
        Replay { rng: SimRng::substream(t.seed, stream), t, held: VecDeque::new(), held_bytes: 0 }
    }

    #[inline]
    pub fn timing(&self) -> &ReplayTiming {
        &self.t
    }

    /// Failed attempts while sending `packets` protocol packets of
    /// `flit_bits` flit bits each: each packet is retried until it arrives
    /// clean (a negative-binomial count, sampled by geometric jumps: one
    /// uniform per failure plus one).
    pub fn sample_failures(&mut self, packets: u64, flit_bits: f64) -> u64 {
        let h = self.t.hazard_per_flit_bit * flit_bits;
        if h == 0.0 || packets == 0 {
            return 0;
        }
        let (mut left, mut failures) = (packets, 0u64);
        loop {
            // Clean packets before the next failure: Geometric(P), P = 1 - e^-h.
            let u = 1.0 - self.rng.uniform();
            let clean = (u.ln() / -h).floor();
            if clean >= left as f64 {
                return failures;
            }
            left -= clean as u64;
            failures += 1;
        }
    }

    /// Serializer time a send of `flits` flits (`packets` protocol packets,
    /// serialization `ser_ps`) loses to replays (R per failed attempt),
    /// accounted in `stats`.
    pub fn on_send(&mut self, flits: u64, flit_bytes: u32, packets: u64, ser_ps: u64, latency_ps: u64, stats: &mut ReplayStats) -> u64 {
        let packets = packets.max(1);
        let wire = flits * flit_bytes as u64;
        let f = self.sample_failures(packets, (wire * 8) as f64 / packets as f64);
        if f == 0 {
            return 0;
        }
        let lost = f * self.penalty_ps(ser_ps.div_ceil(packets), latency_ps);
        stats.replays += f;
        stats.replayed_wire_bytes += f * wire.div_ceil(packets);
        stats.replay_ps += lost;
        lost
    }

    /// R: serializer time one failed attempt of a packet with serialization
    /// `ser_ps` costs on a link of latency `latency_ps`.
    #[inline]
    pub fn penalty_ps(&self, ser_ps: u64, latency_ps: u64) -> u64 {
        ser_ps + latency_ps + self.t.nak_return_ps
    }

    /// Earliest time (>= `now`) the replay buffer can take `wire_bytes`.
    pub fn room_at(&mut self, now: TimePs, wire_bytes: u64) -> TimePs {
        let cap = self.t.replay_buffer_bytes;
        if cap == 0 {
            return now;
        }
        while let Some(&(at, b)) = self.held.front() {
            if at > now {
                break;
            }
            self.held.pop_front();
            self.held_bytes -= b;
        }
        if self.held_bytes + wire_bytes <= cap {
            return now;
        }
        let mut freed = self.held_bytes + wire_bytes - cap;
        for &(at, b) in &self.held {
            if b >= freed {
                return at.max(now);
            }
            freed -= b;
        }
        now
    }

    /// Hold a packet whose tail arrives at `tail_arrival_ps` until its ACK returns.
    pub fn hold(&mut self, tail_arrival_ps: TimePs, wire_bytes: u64) {
        if self.t.replay_buffer_bytes == 0 {
            return;
        }
        let i = self.t.ack_interval_ps;
        let sent = if i == 0 { tail_arrival_ps } else { tail_arrival_ps.div_ceil(i) * i };
        let at = sent + self.t.ack_return_ps;
        // ACKs return in order; keep the queue monotone.
        let at = self.held.back().map_or(at, |&(b, _)| at.max(b));
        self.held.push_back((at, wire_bytes));
        self.held_bytes += wire_bytes;
    }
}
