//! Two endpoints, one link direction: move `total_bytes` in packets of
//! `payload_bytes` and watch serialization, latency and credits.
//!
//! The sender streams packets back to back, round-robin over the VCs, and
//! waits whenever the next packet's VC lacks credits for the whole packet. The
//! receiver consumes each packet as its tail arrives (sink rate unlimited) and
//! returns its credits, which reach the sender `credit_return_ps` later.
//!
//! Closed forms this must reproduce (tests/ and this module's tests):
//! - bandwidth-bound: throughput -> payload rate x packet efficiency;
//! - credit-bound: with C credits per VC (a multiple of the packet's F flits)
//!   and credit round trip R = serialization + latency + credit_return, the
//!   throughput is C x flit_bytes / R (payload share thereof) when that is below
//!   the link rate (Dally & Towles ch. 13; Kung et al. SIGCOMM 94).

use crate::engine::{self, EventQueue, Interrupt, Model, TimePs};
use crate::error::{ensure, Result};
use crate::link::{LinkDirection, LinkSpec, LinkStats, VcStats};
use crate::phy::SerdesRates;
use crate::stats::Histogram;
use serde::{Deserialize, Serialize};

/// Parameters of the experiment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkTransferSpec {
    pub link: LinkSpec,
    /// Bytes to move (payload).
    pub total_bytes: u64,
    /// Payload per packet (the last packet carries the remainder).
    pub payload_bytes: u64,
    /// Per-packet arrays are kept for at most this many packets (the histogram
    /// and counters always cover all of them). Bounds memory.
    #[serde(default = "default_max_recorded")]
    pub max_recorded_packets: u64,
}

fn default_max_recorded() -> u64 {
    1_000_000
}

/// Results of the experiment.
#[derive(Debug, Clone, Serialize)]
pub struct LinkTransferResult {
    pub rates: SerdesRates,
    /// Time the last packet was received, ps (the transfer starts at 0).
    pub completion_ps: u64,
    /// Time the last credit returned to the sender: the end of the run, over
    /// which link and VC statistics are accounted, ps.
    pub run_end_ps: u64,
    /// total_bytes / completion time, GB/s (1e9 bytes/s).
    pub throughput_gBps: f64,
    /// Credit round trip of a full-size packet: serialization + latency + credit
    /// return, ps.
    pub credit_rtt_ps: u64,
    pub packets: u64,
    /// Serialization start per recorded packet, ps.
    pub start_ps: Vec<u64>,
    /// Tail arrival per recorded packet, ps.
    pub arrival_ps: Vec<u64>,
    /// Time a ready packet waited for credits, summed over packets, ps.
    pub credit_wait_ps: u64,
    pub latency_hist: Histogram,
    pub link: LinkStats,
    pub vcs: Vec<VcStats>,
    pub events: u64,
}

enum Ev {
    /// The sender may send its next packet.
    TrySend,
    /// A packet's tail arrived at the receiver.
    Arrive { vc: u32, flits: u32, start_ps: TimePs },
    /// Credits reach the sender.
    Credit { vc: u32, flits: u32 },
}

struct Sim {
    link: LinkDirection,
    payload: u64,
    remaining_bytes: u64,
    next_vc: usize,
    /// Time the sender began waiting for credits, if it is waiting.
    waiting_since: Option<TimePs>,
    send_pending: bool,
    flits_full: u32,
    packet_format: crate::phy::PacketFormat,
    max_recorded: u64,
    res_start: Vec<u64>,
    res_arrival: Vec<u64>,
    hist: Histogram,
    credit_wait_ps: u64,
    packets: u64,
    last_arrival: TimePs,
}

impl Sim {
    fn next_packet(&self) -> Option<(u32, u32)> {
        if self.remaining_bytes == 0 {
            return None;
        }
        let p = self.remaining_bytes.min(self.payload);
        let f = if p == self.payload { self.flits_full } else { self.packet_format.flits_per_packet(p) as u32 };
        Some((p as u32, f))
    }
}

impl Model for Sim {
    type Event = Ev;

    fn handle(&mut self, now: TimePs, ev: Ev, q: &mut EventQueue<Ev>) -> Result<()> {
        match ev {
            Ev::TrySend => {
                self.send_pending = false;
                let Some((p, f)) = self.next_packet() else { return Ok(()) };
                let vc = self.next_vc;
                if !self.link.has_credits(vc, f) {
                    self.waiting_since.get_or_insert(now);
                    return Ok(());
                }
                if let Some(w) = self.waiting_since.take() {
                    self.credit_wait_ps += now - w;
                }
                // A full replay buffer holds the sender until ACKs return.
                let room = self.link.replay_room_at(now, f);
                if room > now {
                    self.link.add_replay_buffer_wait(room - now);
                    self.send_pending = true;
                    q.schedule(room, Ev::TrySend);
                    return Ok(());
                }
                let tx = self.link.send(now, vc, f, p);
                self.remaining_bytes -= p as u64;
                self.next_vc = (vc + 1) % self.link.timing().vcs as usize;
                q.schedule(tx.tail_arrival_ps, Ev::Arrive { vc: vc as u32, flits: f, start_ps: tx.start_ps });
                if self.remaining_bytes > 0 {
                    self.send_pending = true;
                    q.schedule(tx.tail_out_ps, Ev::TrySend);
                }
            }
            Ev::Arrive { vc, flits, start_ps } => {
                if self.packets < self.max_recorded {
                    self.res_start.push(start_ps);
                    self.res_arrival.push(now);
                }
                self.hist.record(now - start_ps);
                self.packets += 1;
                self.last_arrival = now;
                let rt = self.link.timing().credit_return_ps;
                q.schedule(now + rt, Ev::Credit { vc, flits });
            }
            Ev::Credit { vc, flits } => {
                self.link.return_credits(now, vc as usize, flits);
                if self.waiting_since.is_some() && !self.send_pending && vc as usize == self.next_vc {
                    self.send_pending = true;
                    q.schedule(now, Ev::TrySend);
                }
            }
        }
        Ok(())
    }
}

/// Run the experiment.
///
/// # Errors
/// `Config` for an invalid spec; `Interrupted` if the hook cancels.
pub fn run(spec: &LinkTransferSpec, interrupt: &mut dyn Interrupt) -> Result<LinkTransferResult> {
    let (rates, mut timing) = spec.link.derive().map_err(|e| crate::link::prefix_field(e, "link"))?;
    ensure(spec.total_bytes >= 1 && spec.total_bytes <= 1 << 50, "total_bytes", spec.total_bytes, "1 byte to 1 PiB (2^50)")?;
    spec.link.packet.check_payload(spec.payload_bytes)?;
    let pf = spec.link.packet;
    let flits_full = pf.flits_per_packet(spec.payload_bytes) as u32;
    // Exhausted = the VC cannot start one of this experiment's packets.
    timing.exhaustion_below_flits = flits_full;
    // Work estimate before any event (two events per packet): the same budget
    // as a fabric run, so 1 PiB in 256 B packets is refused, not run for days.
    let packets = pf.transfer(spec.total_bytes, spec.payload_bytes).packets;
    ensure(
        packets <= crate::fabric::MAX_SIM_PACKETS,
        "total_bytes",
        format!("{} ({packets} packets of {} B)", spec.total_bytes, spec.payload_bytes),
        &format!("at most {} packets per run (fewer bytes or larger packets)", crate::fabric::MAX_SIM_PACKETS),
    )?;
    let rec = spec.max_recorded_packets.min(pf.transfer(spec.total_bytes, spec.payload_bytes).packets) as usize;
    let mut sim = Sim {
        link: LinkDirection::new(timing),
        payload: spec.payload_bytes,
        remaining_bytes: spec.total_bytes,
        next_vc: 0,
        waiting_since: None,
        send_pending: true,
        flits_full,
        packet_format: pf,
        max_recorded: spec.max_recorded_packets,
        res_start: Vec::with_capacity(rec),
        res_arrival: Vec::with_capacity(rec),
        hist: Histogram::new(),
        credit_wait_ps: 0,
        packets: 0,
        last_arrival: 0,
    };
    let mut q = EventQueue::with_capacity(64);
    q.schedule(0, Ev::TrySend);
    let summary = engine::run(&mut sim, &mut q, u64::MAX, interrupt)?;
    if sim.remaining_bytes > 0 {
        return Err(engine::stalled(summary.end_ps, format!("{} bytes left with no credits returning", sim.remaining_bytes)));
    }
    sim.link.finish(summary.end_ps);
    let credit_rtt_ps = timing.serialization_ps(flits_full as u64) + timing.latency_ps + timing.credit_return_ps;
    Ok(LinkTransferResult {
        rates,
        completion_ps: sim.last_arrival,
        run_end_ps: summary.end_ps,
        throughput_gBps: spec.total_bytes as f64 / sim.last_arrival as f64 * 1e3,
        credit_rtt_ps,
        packets: sim.packets,
        start_ps: sim.res_start,
        arrival_ps: sim.res_arrival,
        credit_wait_ps: sim.credit_wait_ps,
        latency_hist: sim.hist,
        link: *sim.link.stats(),
        vcs: sim.link.vc_stats().to_vec(),
        events: summary.events,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::NoInterrupt;

    fn nvlink5(credits: u32, credit_return_ps: u64) -> LinkSpec {
        LinkSpec { vcs: 1, credits_per_vc_flits: credits, credit_return_ps, ..crate::presets::nvlink5() }
    }

    #[test]
    fn one_packet_latency_is_sum_of_parts() {
        let spec = LinkTransferSpec { link: nvlink5(1024, 0), total_bytes: 256, payload_bytes: 256, max_recorded_packets: 10 };
        let r = run(&spec, &mut NoInterrupt).unwrap();
        // 17 flits x 16 B x 8 = 2176 bits at 400 Gb/s = 5440 ps; + 5000 prop
        // + 20000 PHY + 25600 FEC accumulation (5440 bits / 212.5 Gb/s).
        assert_eq!(r.arrival_ps[0] - r.start_ps[0], 5440 + 5000 + 20000 + 25600);
    }

    #[test]
    fn credit_bound_throughput_is_c_flit_over_rtt() {
        // 34 credits = 2 packets of 17 flits; RTT = 5440 + 50600 + 100000.
        let spec = LinkTransferSpec { link: nvlink5(34, 100_000), total_bytes: 256 << 16, payload_bytes: 256, max_recorded_packets: 0 };
        let r = run(&spec, &mut NoInterrupt).unwrap();
        let rtt = 5440.0 + 50_600.0 + 100_000.0;
        let expect_gbps = 2.0 * 256.0 / rtt * 1e3; // payload GB/s
        assert!((r.throughput_gBps / expect_gbps - 1.0).abs() < 5e-3, "{} vs {}", r.throughput_gBps, expect_gbps);
        assert!(r.vcs[0].exhaustion_episodes > 1000);
    }
}
