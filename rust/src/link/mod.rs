//! One direction of a link: serializer, fixed latency (propagation + PHY + FEC
//! codeword accumulation) and credit-based flow control per virtual channel.
//!
//! Credits are counted in flits per VC (Dally & Towles, ch. 13). A packet may
//! start only when its VC holds credits for the whole packet (virtual
//! cut-through); the credits come back `credit_return_ps` after the receiver
//! frees the buffer. The component is passive: the owner (an experiment, a
//! switch port, a fabric) calls [`LinkDirection::send`] and
//! [`LinkDirection::return_credits`] from its own events, so one type serves
//! every layer above.

mod replay;
mod spec;

pub use replay::{Replay, ReplaySpec, ReplayStats, ReplayTiming, DEFAULT_TIMEOUT_PS, MAX_PACKET_ERROR_PROB};
pub use spec::{prefix_field, LinkSpec, LinkTiming, MAX_DELAY_PS};

use crate::engine::TimePs;
use serde::Serialize;

/// Per-VC credit statistics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct VcStats {
    /// Episodes in which the VC's credits fell below
    /// `LinkTiming::exhaustion_below_flits` (it could not start a packet).
    pub exhaustion_episodes: u64,
    /// Total time spent exhausted, ps.
    pub exhaustion_ps: u64,
    /// Packets sent on this VC.
    pub packets: u64,
    /// Flits sent on this VC.
    pub flits: u64,
}

/// Whole-link statistics for one direction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct LinkStats {
    /// Time the serializer was busy, ps.
    pub busy_ps: u64,
    /// Payload bytes carried (excluding header flits and padding).
    pub payload_bytes: u64,
    /// Bytes on the wire (all flits).
    pub wire_bytes: u64,
    /// Packets carried.
    pub packets: u64,
    /// Link-level retry (zero without bit errors).
    pub replay: ReplayStats,
}

/// When a packet's flits leave and arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmission {
    /// Serialization start.
    pub start_ps: TimePs,
    /// Serialization end: the serializer is free again.
    pub tail_out_ps: TimePs,
    /// Head flit usable at the receiver (for cut-through forwarding).
    pub head_arrival_ps: TimePs,
    /// Whole packet received and decoded.
    pub tail_arrival_ps: TimePs,
}

/// Runtime state of one link direction.
#[derive(Debug, Clone)]
pub struct LinkDirection {
    timing: LinkTiming,
    busy_until_ps: TimePs,
    credits: Vec<u32>,
    exhausted_since_ps: Vec<Option<TimePs>>,
    vc_stats: Vec<VcStats>,
    stats: LinkStats,
    /// Retry state; None when the link has no errors and no replay buffer
    /// (then `send` is exactly the error-free serializer).
    replay: Option<Replay>,
}

impl LinkDirection {
    /// A link direction with full credits, idle at time 0.
    pub fn new(timing: LinkTiming) -> Self {
        Self::with_stream(timing, 0)
    }

    /// As [`new`](Self::new), drawing bit errors from stream `stream` of the
    /// replay seed (one stream per link direction of a fabric).
    pub fn with_stream(timing: LinkTiming, stream: u64) -> Self {
        let vcs = timing.vcs as usize;
        let replay = timing.replay.filter(|r| r.hazard_per_flit_bit > 0.0 || r.replay_buffer_bytes > 0).map(|r| Replay::new(r, stream));
        Self {
            replay,
            credits: vec![timing.credits_per_vc_flits; vcs],
            exhausted_since_ps: vec![None; vcs],
            vc_stats: vec![VcStats::default(); vcs],
            busy_until_ps: 0,
            stats: LinkStats::default(),
            timing,
        }
    }

    /// The derived timing parameters.
    #[inline]
    pub fn timing(&self) -> &LinkTiming {
        &self.timing
    }

    /// Credits (flits) currently available on `vc`.
    #[inline]
    pub fn credits(&self, vc: usize) -> u32 {
        self.credits[vc]
    }

    /// True if `vc` holds credits for `flits` flits.
    #[inline]
    pub fn has_credits(&self, vc: usize, flits: u32) -> bool {
        self.credits[vc] >= flits
    }

    /// When the serializer is next free.
    #[inline]
    pub fn free_at_ps(&self) -> TimePs {
        self.busy_until_ps
    }

    /// Send one packet of `flits` flits carrying `payload_bytes` on `vc`,
    /// decided at `now_ps`. The caller must have checked
    /// [`has_credits`](Self::has_credits); serialization starts when the
    /// serializer is free.
    #[inline]
    pub fn send(&mut self, now_ps: TimePs, vc: usize, flits: u32, payload_bytes: u32) -> Transmission {
        self.send_packets(now_ps, vc, flits, payload_bytes, 1)
    }

    /// Earliest time (>= `now_ps`) the replay buffer has room for `flits`
    /// flits (`now_ps` without a bounded buffer).
    #[inline]
    pub fn replay_room_at(&mut self, now_ps: TimePs, flits: u32) -> TimePs {
        let fb = self.timing.flit_bytes as u64;
        match &mut self.replay {
            Some(r) => r.room_at(now_ps, flits as u64 * fb),
            None => now_ps,
        }
    }

    /// Count time the sender waited for replay-buffer room.
    pub fn add_replay_buffer_wait(&mut self, ps: u64) {
        self.stats.replay.buffer_wait_ps += ps;
    }

    /// Send `flits` flits that stand for `protocol_packets` protocol packets
    /// (a coalesced simulated packet): as [`send`](Self::send), and with bit
    /// errors each protocol packet is retried until clean (go-back-N), which
    /// delays the whole packet and holds the serializer for the replays.
    #[inline]
    pub fn send_packets(&mut self, now_ps: TimePs, vc: usize, flits: u32, payload_bytes: u32, protocol_packets: u32) -> Transmission {
        debug_assert!(self.credits[vc] >= flits, "send without credits");
        self.credits[vc] -= flits;
        if self.credits[vc] < self.timing.exhaustion_below_flits && self.exhausted_since_ps[vc].is_none() {
            self.exhausted_since_ps[vc] = Some(now_ps);
            self.vc_stats[vc].exhaustion_episodes += 1;
        }
        let t = &self.timing;
        let start = now_ps.max(self.busy_until_ps);
        let ser = t.serialization_ps(flits as u64);
        let lost = match &mut self.replay {
            Some(r) => r.on_send(flits as u64, t.flit_bytes, protocol_packets as u64, ser, t.latency_ps, &mut self.stats.replay),
            None => 0,
        };
        let tail_out = start + ser + lost;
        self.busy_until_ps = tail_out;
        let s = &mut self.stats;
        s.busy_ps += ser + lost;
        s.payload_bytes += payload_bytes as u64;
        s.wire_bytes += flits as u64 * t.flit_bytes as u64;
        s.packets += 1;
        let v = &mut self.vc_stats[vc];
        v.packets += 1;
        v.flits += flits as u64;
        let tx = Transmission {
            start_ps: start,
            tail_out_ps: tail_out,
            head_arrival_ps: start + lost + t.flit_ps + t.latency_ps,
            tail_arrival_ps: tail_out + t.latency_ps,
        };
        if let Some(r) = &mut self.replay {
            r.hold(tx.tail_arrival_ps, flits as u64 * t.flit_bytes as u64);
        }
        tx
    }

    /// Credits for `flits` flits arrive back at the sender at `now_ps`.
    #[inline]
    pub fn return_credits(&mut self, now_ps: TimePs, vc: usize, flits: u32) {
        self.credits[vc] += flits;
        if self.credits[vc] >= self.timing.exhaustion_below_flits {
            if let Some(since) = self.exhausted_since_ps[vc].take() {
                self.vc_stats[vc].exhaustion_ps += now_ps.saturating_sub(since);
            }
        }
        debug_assert!(self.credits[vc] <= self.timing.credits_per_vc_flits, "credit overflow");
    }

    /// Close open zero-credit episodes at `end_ps` (call once at the end of a run).
    pub fn finish(&mut self, end_ps: TimePs) {
        for (vc, z) in self.exhausted_since_ps.iter_mut().enumerate() {
            if let Some(since) = z.take() {
                self.vc_stats[vc].exhaustion_ps += end_ps.saturating_sub(since);
            }
        }
    }

    /// Whole-link statistics.
    pub fn stats(&self) -> &LinkStats {
        &self.stats
    }

    /// Per-VC statistics.
    pub fn vc_stats(&self) -> &[VcStats] {
        &self.vc_stats
    }
}
