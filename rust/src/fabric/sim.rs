//! The fabric simulator: GPU ports with their links, cycle-level switches,
//! and the events between them, on one event queue.
//!
//! Path of a packet: a GPU port picks the next packet of one of its transfer
//! shares (round-robin over shares) when its serializer is free, the packet's
//! VC holds credits for all its flits (the switch input buffer), and the GPU's
//! outstanding/injection limits allow; the head reaches the switch input after
//! one flit time plus the link latency and is injected on the switch's clock;
//! the switch allocates and drives its output link one flit per cycle; the
//! tail reaches the destination GPU the link latency after leaving; the GPU
//! drains it (at once, or at its ejection rate) and returns the credits to
//! the switch output after `credit_return_ps`. The switch returns input-buffer
//! credits to the GPU port the same way.
//!
//! Switch steps happen only at cycles where a switch has work. A wake event
//! re-queues itself once at the same picosecond before stepping, so every
//! packet head due in that cycle (all scheduled earlier, since link latency is
//! positive) is injected first.

use super::spec::{FabricSpec, Spray};
use super::topology::Topology;
use crate::engine::{Scheduler, TimePs};
use crate::error::{FlitsimError, Result};
use crate::link::{LinkDirection, LinkTiming, Replay, ReplayStats};
use crate::phy::PacketFormat;
use crate::switch::{Packet, Queueing, Switch, SwitchSpec};
use std::collections::VecDeque;

mod faults;

pub use faults::FaultStats;
use faults::FaultState;

/// Bits in a transfer's reorder window.
const REORDER_WINDOW: u64 = 4096;
const NONE: u32 = u32::MAX;

/// Fabric events.
#[derive(Debug, Clone, Copy)]
pub enum FEv {
    StartTransfer(u32),
    PortTry(u32),
    Arrive { sw: u32, input: u32, pkt: u32 },
    Wake { sw: u32, cycle: u64, deferred: bool },
    Deliver { port: u32, pkt: u32 },
    Consume { port: u32, pkt: u32 },
    CreditGpu { port: u32, vc: u32, flits: u32 },
    CreditSw { sw: u32, out: u32, vc: u32, flits: u32 },
    /// A packet lost to a fault is queued again at its source (replay timer expired).
    Requeue(u32),
}

#[derive(Debug, Clone, Copy, Default)]
struct PktInfo {
    xfer: u32,
    bytes: u32,
    flits: u32,
    vc: u32,
    seq: u64,
    src_port: u32,
    sw: u32,
    out: u32,
    /// Where the packet is: STAGE_* (for faults: what a dead component takes with it).
    stage: u8,
    /// Caught by a fault: its events only drain the dead path; a copy was requeued.
    lost: bool,
    /// A copy sent again after a fault (delivered bytes count as replayed).
    replayed: bool,
}

const STAGE_TO_SWITCH: u8 = 0;
const STAGE_IN_SWITCH: u8 = 1;
const STAGE_TO_GPU: u8 = 2;
const STAGE_DELIVERED: u8 = 3;
const STAGE_FREE: u8 = 4;

#[derive(Debug, Clone, Default)]
struct Share {
    xfer: u32,
    full_left: u64,
    last_bytes: u32,
    /// Bytes of each full simulated packet of this transfer.
    pkt_bytes: u64,
    /// Sequence number of a requeued lost packet (NO_SEQ: take the transfer's next).
    seq: u64,
}

const NO_SEQ: u64 = u64::MAX;

#[derive(Debug, Clone)]
pub(crate) struct Xfer {
    pub src: u32,
    pub dst: u32,
    pub bytes: u64,
    pub start_ps: TimePs,
    pub end_ps: TimePs,
    pub done: bool,
    pub tag: u32,
    /// Goes through the switch even when src == dst (NVLS traffic to the
    /// switch's reduction/multicast engine and back).
    pub loopback: bool,
    /// Round-robin spray starts at eligible port `spray_offset mod count`
    /// (0 for plain transfers; collectives rotate it so the ports that carry
    /// one packet more than the others differ from transfer to transfer).
    pub spray_offset: u32,
    /// Time this transfer had packets waiting at a source port that was
    /// blocked on credits (the switch input buffer was full), summed over its
    /// ports, ps. Divided by `lanes` it is the credit wait of one lane.
    pub credit_wait_ps: u64,
    /// Source ports the transfer was sprayed over.
    pub lanes: u32,
    vc: u32,
    left: u64,
    next_seq: u64,
    prefix: u64,
    received: u64,
    window: u32,
}

struct Port {
    sw: u32,
    sw_port: u32,
    link: LinkDirection,
    rx: LinkTiming,
    queue: VecDeque<u32>,
    try_at: Option<TimePs>,
    blocked: bool,
    /// Start of the current credit-blocked interval, if the port is blocked on credits.
    credit_blocked_since: Option<TimePs>,
    outstanding: u32,
    max_outstanding: u32,
    next_inject_ps: TimePs,
    inj_ps_per_byte: f64,
    /// Injection overhead per protocol packet, bytes.
    inj_overhead_bytes: u64,
    rx_free_ps: TimePs,
    rx_ps_per_byte: f64,
    /// Retry on the switch -> GPU direction (None without bit errors): its
    /// replays shift the arrival train (go-back-N; credits back-pressure the switch).
    rx_replay: Option<Replay>,
    rx_replay_stats: ReplayStats,
    rx_last_ps: TimePs,
    /// Payload bytes delivered to this GPU through this port (each byte once).
    rx_payload_bytes: u64,
    /// Payload bytes this port sent that a fault destroyed (each replayed elsewhere).
    lost_bytes: u64,
}

struct Sw {
    sw: Switch,
    cycle_ps: f64,
    wake_at: Option<u64>,
    stepped: Option<u64>,
}

/// Per-GPU reorder-buffer statistics.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct ReorderStats {
    /// Packets held (arrived after a gap) at the worst moment.
    pub max_packets: u64,
    /// Sum over deliveries of packets held just after each delivery.
    pub held_sum: u64,
    pub deliveries: u64,
    /// Packets that arrived beyond the 4096-packet tracking window.
    pub window_overflows: u64,
}

/// The simulator state.
pub struct FabricSim {
    pub(crate) topo: Topology,
    /// Largest simulated packet, bytes, and the packets registered so far at
    /// that size: the work estimate checked against [`MAX_SIM_PACKETS`].
    largest_packet_bytes: u64,
    packets_planned: u64,
    spray: Spray,
    ports: Vec<Port>,
    sws: Vec<Sw>,
    pub(crate) xfers: Vec<Xfer>,
    shares: Vec<Share>,
    pkts: Vec<PktInfo>,
    free_pkts: Vec<u32>,
    windows: Vec<[u64; (REORDER_WINDOW / 64) as usize]>,
    free_windows: Vec<u32>,
    rr_out: Vec<u32>,
    fmt: PacketFormat,
    payload: u64,
    sim_bytes: u64,
    /// Adaptive coalescing target packets per lane (0 = off) and its cap.
    per_lane: u64,
    largest: u64,
    vcs: u32,
    scratch: Vec<u32>,
    in_flight: Vec<u64>,
    pub(crate) reorder: Vec<ReorderStats>,
    /// Completed transfers not yet collected by the owner: (transfer, time).
    pub(crate) completed: Vec<(u32, TimePs)>,
    pub(crate) packets_sent: u64,
    /// Payload bytes delivered to each GPU (drained at its ports), for
    /// conservation checks against what the links carried.
    pub(crate) delivered_bytes: Vec<u64>,
    faults: FaultState,
}

fn ceil_div_f(t: f64) -> u64 {
    (t - 1e-6).ceil().max(0.0) as u64
}

/// Most simulated packets one fabric run may plan (about half an hour of
/// simulation: the engine moves roughly 0.6 M packets per second on one core).
pub const MAX_SIM_PACKETS: u64 = 1 << 30;

impl FabricSim {
    /// Build from a validated spec. `port_divisor` is the GPU port count that
    /// GPU-wide limits are split over (the spec's own unless plane-folded).
    pub fn new(spec: &FabricSpec, port_divisor: u32) -> Result<Self> {
        spec.validate()?;
        let topo = Topology::new(spec);
        let link0 = &spec.links[0];
        let fmt = link0.packet;
        let payload = spec.gpu.payload_bytes as u64;
        let sim_bytes = if spec.sim_packet_bytes == 0 { payload } else { spec.sim_packet_bytes };
        // The largest simulated packet sets every buffer (two of them fit).
        let largest = if spec.sim_packets_per_lane > 0 { spec.max_sim_packet_bytes.max(sim_bytes) } else { sim_bytes };
        let proto = largest / payload;
        let max_f = (proto * fmt.flits_per_packet(payload)) as u32;
        let vcs = link0.vcs;
        let mut ports = Vec::with_capacity(topo.gpu_port_to.len());
        let mut rate_bps = None;
        let div = port_divisor.max(1) as f64;
        for p in 0..topo.gpu_port_to.len() {
            let (sw, sw_port, li) = topo.gpu_port_to[p].unwrap_or((NONE, NONE, 0));
            let (_, mut timing) = spec.links[li as usize].derive()?;
            let rx = timing;
            rate_bps.get_or_insert(timing.rate_bps);
            let buf = if spec.switch.buffer_per_vc_flits > 0 { spec.switch.buffer_per_vc_flits } else { timing.credits_per_vc_flits };
            // Coalesced packets: every buffer holds at least two simulated packets.
            timing.credits_per_vc_flits = buf.max(2 * max_f);
            timing.exhaustion_below_flits = max_f;
            let g = &spec.gpu;
            let rx_replay = rx.replay.filter(|r| r.hazard_per_flit_bit > 0.0).map(|r| Replay::new(r, 2 * p as u64 + 1));
            ports.push(Port {
                rx_replay,
                rx_replay_stats: ReplayStats::default(),
                rx_last_ps: 0,
                rx_payload_bytes: 0,
                lost_bytes: 0,
                sw,
                sw_port,
                link: LinkDirection::with_stream(timing, 2 * p as u64),
                rx,
                queue: VecDeque::new(),
                try_at: None,
                blocked: false,
                credit_blocked_since: None,
                outstanding: 0,
                max_outstanding: if g.max_outstanding_packets == 0 { 0 } else { ((g.max_outstanding_packets as f64 / div).ceil() as u32).max(1) },
                next_inject_ps: 0,
                inj_ps_per_byte: if g.injection_bytes_per_s == 0 { 0.0 } else { 1e12 * div / g.injection_bytes_per_s as f64 },
                inj_overhead_bytes: g.injection_packet_overhead_bytes as u64,
                rx_free_ps: 0,
                rx_ps_per_byte: if g.ejection_bytes_per_s == 0 { 0.0 } else { 1e12 * div / g.ejection_bytes_per_s as f64 },
            });
        }
        let rate = rate_bps.unwrap_or(1) as f64;
        let flit_bits = fmt.flit_bytes as f64 * 8.0;
        let clock_ghz = if spec.switch.clock_ghz > 0.0 { spec.switch.clock_ghz } else { rate / flit_bits / 1e9 };
        let (_, t0) = link0.derive()?;
        let sb = if spec.switch.buffer_per_vc_flits > 0 { spec.switch.buffer_per_vc_flits } else { t0.credits_per_vc_flits };
        let mut sws = Vec::with_capacity(spec.switches as usize);
        for _ in 0..spec.switches {
            let ss = SwitchSpec {
                ports: spec.switch_ports.max(1),
                vcs,
                buffer_per_vc_flits: sb.max(2 * max_f),
                max_packet_flits: max_f,
                queueing: if spec.switch.queueing == "fifo" { Queueing::Fifo } else { Queueing::Voq },
                speedup: spec.switch.speedup,
                pipeline_latency_cycles: spec.switch.pipeline_latency_cycles,
                output_buffer_per_vc_flits: if spec.switch.output_buffer_per_vc_flits == 0 { 0 } else { spec.switch.output_buffer_per_vc_flits.max(2 * max_f) },
                downstream_credits_per_vc_flits: t0.credits_per_vc_flits.max(2 * max_f),
                allocator: spec.switch.allocator.clone(),
                iterations: spec.switch.iterations,
                clock_ghz,
                seed: 0,
                stall_timeout_cycles: 0,
            };
            let mut sw = Switch::new(&ss).map_err(|e| crate::link::prefix_field(e, "switch"))?;
            sw.set_record_upstream_credits(true);
            sws.push(Sw { sw, cycle_ps: 1000.0 / clock_ghz, wake_at: None, stepped: None });
        }
        let topo_gpus = topo.gpus as usize;
        let faults = FaultState::new(spec, &topo)?;
        Ok(FabricSim {
            largest_packet_bytes: largest.max(1),
            packets_planned: 0,
            faults,
            rr_out: crate::error::try_vec(topo.switches as usize * topo.gpus as usize, 0, "switches x gpus")?,
            reorder: vec![ReorderStats::default(); topo.gpus as usize],
            in_flight: vec![0; topo.gpus as usize],
            topo,
            spray: spec.spray,
            ports,
            sws,
            xfers: Vec::new(),
            shares: Vec::new(),
            pkts: Vec::new(),
            free_pkts: Vec::new(),
            windows: Vec::new(),
            free_windows: Vec::new(),
            fmt,
            payload,
            sim_bytes,
            per_lane: spec.sim_packets_per_lane as u64,
            largest,
            vcs,
            scratch: Vec::new(),
            completed: Vec::new(),
            packets_sent: 0,
            delivered_bytes: vec![0; topo_gpus],
        })
    }

    /// Register a transfer; start it by scheduling `FEv::StartTransfer(id)`.
    pub fn add_transfer(&mut self, src: u32, dst: u32, bytes: u64, tag: u32) -> Result<u32> {
        let g = self.topo.gpus;
        if src >= g || dst >= g {
            return Err(FlitsimError::config("transfer", format!("{src} -> {dst}"), &format!("GPU ids in 0..{g} (the fabric has {g} GPUs)")));
        }
        // Work estimate before any event: at least one simulated packet per
        // largest-packet bytes. Refuse runs that would take hours rather than
        // start them (a 2^50-byte transfer is ~2^30 packets of 1 MiB).
        self.packets_planned = self.packets_planned.saturating_add(bytes.div_ceil(self.largest_packet_bytes));
        if self.packets_planned > MAX_SIM_PACKETS {
            return Err(FlitsimError::config(
                "transfer bytes",
                format!("{bytes} (with the transfers before it, {} simulated packets of at most {} bytes)", self.packets_planned, self.largest_packet_bytes),
                &format!("at most {MAX_SIM_PACKETS} simulated packets per run (hours of simulation): send less, or raise sim_packet_bytes / max_sim_packet_bytes"),
            ));
        }
        let id = self.xfers.len() as u32;
        self.xfers.push(Xfer {
            src,
            dst,
            bytes,
            start_ps: 0,
            end_ps: 0,
            done: false,
            tag,
            loopback: false,
            spray_offset: 0,
            credit_wait_ps: 0,
            lanes: 0,
            vc: id % self.vcs,
            left: bytes,
            next_seq: 0,
            prefix: 0,
            received: 0,
            window: NONE,
        });
        Ok(id)
    }

    /// Register a transfer that leaves `gpu` through its ports, crosses the
    /// switches and returns to `gpu` (NVLS: contributions into the switch's
    /// reduction engine, results multicast back): it loads both link directions.
    pub fn add_loopback_transfer(&mut self, gpu: u32, bytes: u64, tag: u32) -> Result<u32> {
        let id = self.add_transfer(gpu, gpu, bytes, tag)?;
        self.xfers[id as usize].loopback = true;
        Ok(id)
    }

    #[inline]
    fn t_of(&self, sw: usize, cycle: u64) -> TimePs {
        ceil_div_f(cycle as f64 * self.sws[sw].cycle_ps)
    }

    #[inline]
    fn c_of(&self, sw: usize, t: TimePs) -> u64 {
        ((t as f64 / self.sws[sw].cycle_ps) - 1e-9).ceil().max(0.0) as u64
    }

    fn flits_for(&self, bytes: u64) -> u32 {
        let k = bytes.div_ceil(self.payload);
        ((k - 1) * self.fmt.flits_per_packet(self.payload) + self.fmt.flits_per_packet(bytes - (k - 1) * self.payload)) as u32
    }

    fn complete(&mut self, x: u32, now: TimePs) {
        let t = &mut self.xfers[x as usize];
        t.done = true;
        t.end_ps = now;
        if t.window != NONE {
            self.free_windows.push(t.window);
            t.window = NONE;
        }
        self.completed.push((x, now));
    }

    /// Make sure switch `s` is stepped at its next event cycle, and no later
    /// than `at` if given (after an injection or a credit return, which the
    /// switch acts on at its next step without an event of its own).
    fn ensure_wake(&mut self, s: usize, at: Option<u64>, q: &mut dyn Scheduler<FEv>) {
        let sw = &self.sws[s];
        let next = match (sw.sw.next_event_cycle(), at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let Some(mut c) = next else { return };
        if let Some(st) = sw.stepped {
            c = c.max(st + 1);
        }
        if sw.wake_at.is_some_and(|w| w <= c) {
            return;
        }
        self.sws[s].wake_at = Some(c);
        let t = self.t_of(s, c);
        q.schedule(t, FEv::Wake { sw: s as u32, cycle: c, deferred: false });
    }

    fn schedule_try(&mut self, p: usize, at: TimePs, q: &mut dyn Scheduler<FEv>) {
        let port = &mut self.ports[p];
        if port.try_at.is_some_and(|t| t <= at) {
            return;
        }
        port.try_at = Some(at);
        q.schedule(at, FEv::PortTry(p as u32));
    }

    /// Handle one event.
    pub fn handle(&mut self, now: TimePs, ev: FEv, q: &mut dyn Scheduler<FEv>) -> Result<()> {
        if now >= self.faults.next_ps {
            // Nothing happens between events, so applying a fault at the first
            // event at or after its time is exact.
            self.apply_faults(now, q);
        }
        match ev {
            FEv::Requeue(sid) => self.requeue(now, sid, q),
            FEv::StartTransfer(x) => self.start_transfer(now, x, q),
            FEv::PortTry(p) => {
                let p = p as usize;
                if self.ports[p].try_at != Some(now) {
                    return Ok(());
                }
                self.ports[p].try_at = None;
                self.port_try(now, p, q)
            }
            FEv::Arrive { sw, input, pkt } => {
                let s = sw as usize;
                let info = self.pkts[pkt as usize];
                if info.lost {
                    return self.drop_lost(now, pkt, true, q);
                }
                self.pkts[pkt as usize].stage = STAGE_IN_SWITCH;
                let c = self.c_of(s, now).max(self.sws[s].stepped.map_or(0, |x| x + 1)).max(self.sws[s].sw.input_link_free_cycle(input as usize));
                let packet = Packet { dest: info.out, vc: info.vc, flits: info.flits, birth_cycle: c, tag: pkt as u64 };
                if !self.sws[s].sw.can_accept(input as usize, info.vc as usize, info.flits, c) {
                    return Err(FlitsimError::Stalled {
                        time_ps: now,
                        detail: format!("switch {sw} input {input} VC {} cannot take a {}-flit packet the link had credits for (credit accounting out of step)", info.vc, info.flits),
                    });
                }
                self.sws[s].sw.inject(input as usize, packet, c)?;
                self.ensure_wake(s, Some(c), q);
                Ok(())
            }
            FEv::Wake { sw, cycle, deferred } => {
                let s = sw as usize;
                if self.sws[s].wake_at != Some(cycle) {
                    return Ok(());
                }
                if !deferred {
                    q.schedule(now, FEv::Wake { sw, cycle, deferred: true });
                    return Ok(());
                }
                self.sws[s].wake_at = None;
                let c = self.sws[s].stepped.map_or(cycle, |st| cycle.max(st + 1));
                self.sws[s].sw.step(c);
                self.sws[s].stepped = Some(c);
                self.after_step(s, q);
                self.ensure_wake(s, None, q);
                Ok(())
            }
            FEv::Deliver { port, pkt } => {
                let p = port as usize;
                if self.pkts[pkt as usize].lost {
                    return self.drop_lost(now, pkt, false, q);
                }
                self.pkts[pkt as usize].stage = STAGE_DELIVERED;
                let bytes = self.pkts[pkt as usize].bytes as f64;
                let pr = &mut self.ports[p];
                if pr.rx_ps_per_byte > 0.0 {
                    let t = now.max(pr.rx_free_ps).saturating_add(crate::engine::ps_ceil(bytes * pr.rx_ps_per_byte));
                    pr.rx_free_ps = t;
                    q.schedule(t, FEv::Consume { port, pkt });
                    Ok(())
                } else {
                    self.consume(now, p, pkt, q)
                }
            }
            FEv::Consume { port, pkt } => self.consume(now, port as usize, pkt, q),
            FEv::CreditGpu { port, vc, flits } => {
                let p = port as usize;
                self.ports[p].link.return_credits(now, vc as usize, flits);
                if self.ports[p].blocked {
                    self.ports[p].blocked = false;
                    self.close_credit_block(p, now);
                    self.schedule_try(p, now, q);
                }
                Ok(())
            }
            FEv::CreditSw { sw, out, vc, flits } => {
                let s = sw as usize;
                let c = self.c_of(s, now).max(self.sws[s].stepped.map_or(0, |x| x + 1));
                self.sws[s].sw.return_credits(out as usize, vc as usize, flits, c)?;
                self.ensure_wake(s, Some(c), q);
                Ok(())
            }
        }
    }

    fn after_step(&mut self, s: usize, q: &mut dyn Scheduler<FEv>) {
        let sp = self.topo.switch_ports;
        for k in 0..self.sws[s].sw.departures().len() {
            let d = self.sws[s].sw.departures()[k];
            let gp = self.topo.switch_port_to[(s as u32 * sp + d.output) as usize].expect("routed to a wired port");
            let mut t = self.t_of(s, d.tail_out_cycle + 1) + self.ports[gp as usize].rx.latency_ps;
            let pkt = d.packet.tag as u32;
            self.pkts[pkt as usize].stage = STAGE_TO_GPU;
            if self.ports[gp as usize].rx_replay.is_some() {
                t = self.rx_replay_arrival(s, gp as usize, pkt, t);
            }
            q.schedule(t, FEv::Deliver { port: gp, pkt });
        }
        for k in 0..self.sws[s].sw.upstream_credits().len() {
            let (input, vc, flits, cycle) = self.sws[s].sw.upstream_credits()[k];
            let gp = self.topo.switch_port_to[(s as u32 * sp + input) as usize].expect("wired input");
            let t = self.t_of(s, cycle) + self.ports[gp as usize].link.timing().credit_return_ps;
            q.schedule(t, FEv::CreditGpu { port: gp, vc, flits });
        }
    }

    fn start_transfer(&mut self, now: TimePs, x: u32, q: &mut dyn Scheduler<FEv>) -> Result<()> {
        let (src, dst, bytes, loopback, offset) = {
            let t = &mut self.xfers[x as usize];
            t.start_ps = now;
            (t.src, t.dst, t.bytes, t.loopback, t.spray_offset)
        };
        if bytes == 0 || (src == dst && !loopback) {
            self.complete(x, now);
            return Ok(());
        }
        let mut elig = std::mem::take(&mut self.scratch);
        self.eligible_ports(src, dst, &mut elig);
        if offset > 0 && !elig.is_empty() {
            let k = offset as usize % elig.len();
            elig.rotate_left(k);
        }
        let e = elig.len() as u64;
        let lanes = match self.spray {
            Spray::Hash => 1,
            _ => e,
        };
        // Adaptive coalescing: k packets per lane (at least `per_lane`, more if
        // the packets would exceed `largest`), lanes x k packets in all, so
        // every lane carries the same count (no lane left one packet short).
        let s = if self.per_lane > 0 {
            let k = self.per_lane.max(bytes.div_ceil(lanes * self.largest));
            let want = bytes.div_ceil(lanes * k).div_ceil(self.payload) * self.payload;
            want.clamp(self.sim_bytes, self.largest)
        } else {
            self.sim_bytes
        };
        let n = bytes.div_ceil(s);
        let rem = (bytes % s) as u32;
        let mk = |full: u64, last: u32| Share { xfer: x, full_left: full, last_bytes: last, pkt_bytes: s, seq: NO_SEQ };
        match self.spray {
            Spray::RoundRobin if !self.equal_rates(&elig) => {
                // Ports of unequal rates: packet counts in proportion to each
                // port's rate (largest remainder), so every port finishes
                // together instead of the slowest bounding the transfer; the
                // partial last packet rides the fastest port.
                let total: f64 = elig.iter().map(|&p| self.ports[p as usize].link.timing().rate_bps as f64).sum();
                let mut counts: Vec<u64> = Vec::with_capacity(elig.len());
                let mut rema: Vec<(f64, usize)> = Vec::with_capacity(elig.len());
                for (i, &p) in elig.iter().enumerate() {
                    let want = n as f64 * self.ports[p as usize].link.timing().rate_bps as f64 / total;
                    counts.push(want.floor() as u64);
                    rema.push((want - want.floor(), i));
                }
                let mut left = n - counts.iter().sum::<u64>();
                rema.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
                for &(_, i) in &rema {
                    if left == 0 {
                        break;
                    }
                    counts[i] += 1;
                    left -= 1;
                }
                let fastest = (0..elig.len()).filter(|&i| counts[i] > 0).max_by_key(|&i| (self.ports[elig[i] as usize].link.timing().rate_bps, std::cmp::Reverse(i))).unwrap_or(0);
                for (i, &p) in elig.iter().enumerate() {
                    let mut cnt = counts[i];
                    let mut last = 0;
                    if rem > 0 && i == fastest {
                        cnt -= 1;
                        last = rem;
                    }
                    if cnt == 0 && last == 0 {
                        continue;
                    }
                    let sid = self.shares.len() as u32;
                    self.shares.push(mk(cnt, last));
                    self.ports[p as usize].queue.push_back(sid);
                    self.schedule_try(p as usize, now, q);
                }
            }
            Spray::RoundRobin => {
                for (i, &p) in elig.iter().enumerate() {
                    let i = i as u64;
                    if i >= n {
                        break;
                    }
                    let cnt = (n - i).div_ceil(e);
                    let has_last = rem > 0 && (n - 1) % e == i;
                    let sid = self.shares.len() as u32;
                    self.shares.push(if has_last { mk(cnt - 1, rem) } else { mk(cnt, 0) });
                    self.ports[p as usize].queue.push_back(sid);
                    self.schedule_try(p as usize, now, q);
                }
            }
            Spray::Hash => {
                // SplitMix64 of (src, dst, transfer): a fixed, portable hash.
                let mut z = ((src as u64) << 42) ^ ((dst as u64) << 21) ^ x as u64;
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                let p = elig[((z ^ (z >> 31)) % e) as usize];
                let sid = self.shares.len() as u32;
                self.shares.push(mk(n - u64::from(rem > 0), rem));
                self.ports[p as usize].queue.push_back(sid);
                self.schedule_try(p as usize, now, q);
            }
            Spray::Adaptive => {
                let sid = self.shares.len() as u32;
                self.shares.push(mk(n - u64::from(rem > 0), rem));
                for &p in &elig {
                    self.ports[p as usize].queue.push_back(sid);
                    self.schedule_try(p as usize, now, q);
                }
            }
        }
        self.xfers[x as usize].lanes = match self.spray {
            Spray::RoundRobin => n.min(e) as u32,
            Spray::Hash => 1,
            Spray::Adaptive => e as u32,
        };
        self.scratch = elig;
        Ok(())
    }

    /// Whether every port in `ports` has the same link rate.
    fn equal_rates(&self, ports: &[u32]) -> bool {
        let mut it = ports.iter().map(|&p| self.ports[p as usize].link.timing().rate_bps);
        let first = it.next();
        it.all(|r| Some(r) == first)
    }

    fn port_try(&mut self, now: TimePs, p: usize, q: &mut dyn Scheduler<FEv>) -> Result<()> {
        let port = &self.ports[p];
        if port.queue.is_empty() {
            return Ok(());
        }
        let free = port.link.free_at_ps().max(port.next_inject_ps);
        if free > now {
            self.schedule_try(p, free, q);
            return Ok(());
        }
        if port.max_outstanding > 0 && port.outstanding >= port.max_outstanding {
            self.ports[p].blocked = true;
            return Ok(());
        }
        let n = self.ports[p].queue.len();
        for _ in 0..n {
            let sid = *self.ports[p].queue.front().expect("non-empty");
            let sh = &self.shares[sid as usize];
            if sh.full_left == 0 && sh.last_bytes == 0 {
                self.ports[p].queue.pop_front();
                continue;
            }
            let bytes = if sh.full_left > 0 { sh.pkt_bytes } else { sh.last_bytes as u64 };
            let x = sh.xfer;
            let vc = self.xfers[x as usize].vc;
            let flits = self.flits_for(bytes);
            let port = &mut self.ports[p];
            port.queue.rotate_left(1);
            if !port.link.has_credits(vc as usize, flits) {
                continue;
            }
            // A full replay buffer holds the port until ACKs return.
            let room = port.link.replay_room_at(now, flits);
            if room > now {
                port.link.add_replay_buffer_wait(room - now);
                self.schedule_try(p, room, q);
                return Ok(());
            }
            // Send it.
            let sh = &mut self.shares[sid as usize];
            if sh.full_left > 0 {
                sh.full_left -= 1;
            } else {
                sh.last_bytes = 0;
            }
            let resent_seq = sh.seq;
            let tx = port.link.send_packets(now, vc as usize, flits, bytes as u32, bytes.div_ceil(self.payload) as u32);
            port.outstanding += 1;
            if port.inj_ps_per_byte > 0.0 {
                let cost = bytes + port.inj_overhead_bytes * bytes.div_ceil(self.payload);
                port.next_inject_ps = tx.start_ps.saturating_add(crate::engine::ps_ceil(cost as f64 * port.inj_ps_per_byte));
            }
            let (sw, input) = (port.sw, port.sw_port);
            let dst = self.xfers[x as usize].dst;
            let routes = self.topo.routes(sw, dst);
            let out = if self.faults.any_dead {
                self.live_route(sw, dst)
            } else if routes.len() == 1 {
                routes[0]
            } else {
                let k = (sw * self.topo.gpus + dst) as usize;
                let o = routes[self.rr_out[k] as usize % routes.len()];
                self.rr_out[k] = self.rr_out[k].wrapping_add(1);
                o
            };
            let xf = &mut self.xfers[x as usize];
            let replayed = resent_seq != NO_SEQ;
            let seq = if replayed { resent_seq } else { xf.next_seq };
            let info = PktInfo { xfer: x, bytes: bytes as u32, flits, vc, seq, src_port: p as u32, sw, out, stage: STAGE_TO_SWITCH, lost: false, replayed };
            if !replayed {
                xf.next_seq += 1;
            }
            let id = if let Some(id) = self.free_pkts.pop() {
                self.pkts[id as usize] = info;
                id
            } else {
                self.pkts.push(info);
                (self.pkts.len() - 1) as u32
            };
            self.packets_sent += 1;
            q.schedule(tx.head_arrival_ps, FEv::Arrive { sw, input, pkt: id });
            self.schedule_try(p, tx.tail_out_ps.max(self.ports[p].next_inject_ps), q);
            return Ok(());
        }
        if !self.ports[p].queue.is_empty() {
            self.ports[p].blocked = true;
            self.ports[p].credit_blocked_since.get_or_insert(now);
        }
        Ok(())
    }

    /// A credit-blocked port is unblocked: charge the wait to every transfer
    /// that had packets queued on it.
    fn close_credit_block(&mut self, p: usize, now: TimePs) {
        let Some(since) = self.ports[p].credit_blocked_since.take() else { return };
        let waited = now - since;
        for &sid in &self.ports[p].queue {
            let sh = &self.shares[sid as usize];
            if sh.full_left > 0 || sh.last_bytes > 0 {
                self.xfers[sh.xfer as usize].credit_wait_ps += waited;
            }
        }
    }

    fn consume(&mut self, now: TimePs, p: usize, pkt: u32, q: &mut dyn Scheduler<FEv>) -> Result<()> {
        let info = self.pkts[pkt as usize];
        self.free_pkts.push(pkt);
        self.pkts[pkt as usize].stage = STAGE_FREE;
        self.ports[p].rx_payload_bytes += info.bytes as u64;
        self.faults.count_delivered(info.bytes as u64, info.replayed);
        let crt = self.ports[p].rx.credit_return_ps;
        q.schedule(now + crt, FEv::CreditSw { sw: info.sw, out: info.out, vc: info.vc, flits: info.flits });
        let sp = info.src_port as usize;
        self.ports[sp].outstanding -= 1;
        if self.ports[sp].blocked && self.ports[sp].max_outstanding > 0 {
            self.ports[sp].blocked = false;
            self.close_credit_block(sp, now);
            self.schedule_try(sp, now, q);
        }
        // Reorder tracking at the destination.
        let x = info.xfer as usize;
        let dst = self.xfers[x].dst as usize;
        if self.xfers[x].window == NONE {
            let w = self.free_windows.pop().unwrap_or_else(|| {
                self.windows.push([0; (REORDER_WINDOW / 64) as usize]);
                (self.windows.len() - 1) as u32
            });
            self.windows[w as usize] = [0; (REORDER_WINDOW / 64) as usize];
            self.xfers[x].window = w;
        }
        let xf = &mut self.xfers[x];
        let win = &mut self.windows[xf.window as usize];
        let rs = &mut self.reorder[dst];
        let held_before = xf.received - xf.prefix;
        if info.seq >= xf.prefix + REORDER_WINDOW {
            // Beyond the window: count it, and slide the window up to it (the
            // packets skipped are treated as delivered in order).
            rs.window_overflows += 1;
            xf.prefix = info.seq + 1 - REORDER_WINDOW;
            *win = [0; (REORDER_WINDOW / 64) as usize];
            xf.received = xf.received.max(xf.prefix);
        }
        if info.seq >= xf.prefix {
            let b = info.seq % REORDER_WINDOW;
            win[(b / 64) as usize] |= 1 << (b % 64);
            xf.received += 1;
        }
        loop {
            let b = xf.prefix % REORDER_WINDOW;
            if win[(b / 64) as usize] & (1 << (b % 64)) == 0 {
                break;
            }
            win[(b / 64) as usize] &= !(1 << (b % 64));
            xf.prefix += 1;
        }
        // Held = arrived behind a gap, waiting in the GPU's reorder buffer;
        // the GPU's occupancy is the sum over its incoming transfers.
        let held = xf.received - xf.prefix;
        self.in_flight[dst] = self.in_flight[dst] + held - held_before;
        rs.deliveries += 1;
        rs.max_packets = rs.max_packets.max(self.in_flight[dst]);
        rs.held_sum += self.in_flight[dst];
        xf.left -= info.bytes as u64;
        self.delivered_bytes[dst] += info.bytes as u64;
        if xf.left == 0 {
            let xid = x as u32;
            self.complete(xid, now);
        }
        Ok(())
    }

    /// Close statistics at `end_ps`.
    pub fn finish(&mut self, end_ps: TimePs) {
        for p in &mut self.ports {
            p.link.finish(end_ps);
        }
        for s in 0..self.sws.len() {
            let c = self.c_of(s, end_ps);
            self.sws[s].sw.finish_stats(c);
        }
    }

    /// Pending work that can never finish: a description, or None.
    pub fn describe_incomplete(&self) -> Option<String> {
        let open: Vec<usize> = (0..self.xfers.len()).filter(|&x| !self.xfers[x].done && self.xfers[x].start_ps != u64::MAX).collect();
        if open.is_empty() {
            return None;
        }
        let mut s = format!("{} transfers unfinished, e.g. ", open.len());
        for &x in open.iter().take(4) {
            let t = &self.xfers[x];
            s += &format!("#{x} GPU {} -> {} ({} of {} bytes left); ", t.src, t.dst, t.left, t.bytes);
        }
        for (i, sw) in self.sws.iter().enumerate() {
            if sw.sw.packets_inside() > 0 {
                s += &format!("switch {i}: {}; ", sw.sw.describe_blocked(0));
                break;
            }
        }
        Some(s)
    }

    pub(crate) fn ports_iter(&self) -> impl Iterator<Item = (u32, &LinkDirection)> {
        self.ports.iter().map(|p| (p.sw, &p.link))
    }

    pub(crate) fn switches(&self) -> impl Iterator<Item = &Switch> {
        self.sws.iter().map(|s| &s.sw)
    }

    pub(crate) fn cycle_ps(&self) -> f64 {
        self.sws.first().map_or(1.0, |s| s.cycle_ps)
    }
}
