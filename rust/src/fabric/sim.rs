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

/// Fabric events. 16 bytes, a 32-bit tag and 32/64-bit fields only (no
/// narrower field): the queue moves them as 32-bit words that store
/// forwarding serves from the stores that built them (see
/// `engine::queue::push_words`).
#[derive(Debug, Clone, Copy)]
#[repr(u32)]
pub enum FEv {
    StartTransfer(u32),
    PortTry(u32),
    Arrive { sw: u32, input: u32, pkt: u32 },
    /// Step switch `sw` at `cycle` (re-queued once at the same picosecond as
    /// [`FEv::WakeStep`], so every packet head due then is injected first).
    Wake { sw: u32, cycle: u64 },
    /// The re-queued wake: step now.
    WakeStep { sw: u32, cycle: u64 },
    Deliver { port: u32, pkt: u32 },
    Consume { port: u32, pkt: u32 },
    CreditGpu { port: u32, vc: u32, flits: u32 },
    /// `out_vc` = output | VC << 16 (switch ports <= 4096 and VCs <= 64 by
    /// validation), so the event stays 16 bytes ([`FEv::credit_sw`]).
    CreditSw { sw: u32, out_vc: u32, flits: u32 },
    /// A packet lost to a fault is queued again at its source (replay timer expired).
    Requeue(u32),
}

impl FEv {
    /// A credit return to switch `sw`'s output `out` on `vc` (validated
    /// bounds: `out < 4096`, `vc < 64`, so 16 bits each hold them exactly).
    #[inline(always)]
    fn credit_sw(sw: u32, out: u32, vc: u32, flits: u32) -> Self {
        debug_assert!(out <= u16::MAX as u32 && vc <= u16::MAX as u32);
        FEv::CreditSw { sw, out_vc: out | vc << 16, flits }
    }
}

// Events are copied into the queue on every schedule: 16 bytes of 32/64-bit
// fields are moved as words store forwarding serves (a 24-byte event with
// narrow fields was copied wide from the stack: a store-forwarding stall per
// event on the 72-GPU ring; docs/performance.md, fourth round).
const _: () = assert!(std::mem::size_of::<FEv>() == 16);

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
    /// Switch the packet heads to on a trunk (NONE otherwise).
    next: u32,
}

const STAGE_TO_SWITCH: u8 = 0;
const STAGE_IN_SWITCH: u8 = 1;
/// On a trunk from switch `sw` (output `out`) to switch `next`.
const STAGE_ON_TRUNK: u8 = 2;
const STAGE_TO_GPU: u8 = 3;
const STAGE_DELIVERED: u8 = 4;
const STAGE_FREE: u8 = 5;

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

impl Port {
    /// A GPU (or host) port: `timing` drives its uplink (stream `2 p`), `rx`
    /// its downlink; GPU-wide injection/ejection limits from `g`, split over
    /// `div` ports (see [`FabricSim::new`]).
    #[allow(clippy::too_many_arguments)]
    fn new(sw: u32, sw_port: u32, p: usize, timing: LinkTiming, rx: LinkTiming, rx_replay: Option<Replay>, g: &super::spec::GpuInjection, div: f64) -> Self {
        Port {
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
        }
    }
}

/// The serializer of a switch output port in a graph fabric: the link it
/// drives at that link's own (re-framed) rate.
struct OutLink {
    link: LinkDirection,
    /// Link index in the spec.
    index: u32,
}

struct Sw {
    sw: Switch,
    cycle_ps: f64,
    wake_at: Option<u64>,
    stepped: Option<u64>,
    /// The last (time, cycle) of [`FabricSim::c_of`] and (cycle, time) of
    /// [`FabricSim::t_of`] (u64::MAX: none): events of one switch come in
    /// runs at one time or cycle, and each conversion is a float division
    /// or product and a rounding. Same values, computed once.
    c_memo: std::cell::Cell<(TimePs, u64)>,
    t_memo: std::cell::Cell<(u64, TimePs)>,
}

impl Sw {
    fn new(sw: Switch, cycle_ps: f64) -> Self {
        let none = std::cell::Cell::new((u64::MAX, 0));
        Sw { sw, cycle_ps, wake_at: None, stepped: None, c_memo: none.clone(), t_memo: none }
    }
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
    /// The last packet size asked of [`Self::shape`] and its (flits,
    /// protocol packets): nearly every packet of a run has the same size,
    /// and the three divisions per packet were a visible share of it.
    shape_memo: std::cell::Cell<(u64, u32, u64)>,
    in_flight: Vec<u64>,
    pub(crate) reorder: Vec<ReorderStats>,
    /// Completed transfers not yet collected by the owner: (transfer, time).
    pub(crate) completed: Vec<(u32, TimePs)>,
    pub(crate) packets_sent: u64,
    /// Payload bytes delivered to each GPU (drained at its ports), for
    /// conservation checks against what the links carried.
    pub(crate) delivered_bytes: Vec<u64>,
    faults: FaultState,
    /// Graph fabrics only (None: one switch layer, the original engine).
    graph: Option<Box<Graph>>,
    /// Time-resolved counters (`sampler.rs`; off: `next_ps = u64::MAX`).
    pub(crate) sampler: super::sampler::Sampler,
}

/// What a graph fabric adds: the spec (routes are rebuilt when a component
/// dies) and one serializer per wired switch output port.
struct Graph {
    spec: FabricSpec,
    /// Per switch port (switch * switch_ports + p); None if unwired.
    out_links: Vec<Option<OutLink>>,
}

/// A link's timing in the fabric's base flits (`links[0]`'s packet format):
/// the same payload per second as the link's own format. The link frames
/// payload into packets of its `max_payload_bytes` (a NIC re-frames TLPs into
/// MTU-sized frames), so its wire bytes per payload byte are
/// `flit_bytes x flits_per_packet(max_payload) / max_payload`; the base format
/// charges `flit_bytes0 x flits_per_packet0(payload) / payload` per payload
/// byte. The effective rate scales the link's rate by the ratio, so a full
/// protocol packet in base flits takes exactly the time its payload takes on
/// the link. Credits convert by bytes. Links in the base format are unchanged.
pub(crate) fn reframed(l: &crate::link::LinkSpec, base: &PacketFormat, payload: u64) -> Result<LinkTiming> {
    let (_, mut t) = l.derive()?;
    if l.packet == *base {
        return Ok(t);
    }
    let pl = l.packet.max_payload_bytes as u64;
    let own = (l.packet.flits_per_packet(pl) * l.packet.flit_bytes as u64) as f64 / pl as f64;
    let b = (base.flits_per_packet(payload) * base.flit_bytes as u64) as f64 / payload as f64;
    t.rate_bps = ((t.rate_bps as f64 * b / own).round() as u64).max(1);
    t.credits_per_vc_flits = ((t.credits_per_vc_flits as u64 * l.packet.flit_bytes as u64 / base.flit_bytes as u64).max(1)).min(u32::MAX as u64 / 4) as u32;
    t.flit_bytes = base.flit_bytes;
    t.flit_ps = crate::phy::serialization_ps(base.flit_bytes as u64, t.rate_bps);
    Ok(t)
}

fn ceil_div_f(t: f64) -> u64 {
    crate::engine::ceil_f64(t - 1e-6).max(0.0) as u64
}

/// Most simulated packets one fabric run may plan (about half an hour of
/// simulation: the engine moves roughly 0.6 M packets per second on one core).
pub const MAX_SIM_PACKETS: u64 = 1 << 30;

impl FabricSim {
    /// Build from a validated spec. `port_divisor` is the GPU port count that
    /// GPU-wide limits are split over (the spec's own unless plane-folded).
    pub fn new(spec: &FabricSpec, port_divisor: u32) -> Result<Self> {
        spec.validate()?;
        if spec.is_graph() {
            return Self::new_graph(spec);
        }
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
            let g = &g.for_port((p / spec.gpu_ports as usize) as u32, spec.gpus, li, div); // per-link-kind cap (spec.rs)
            ports.push(Port::new(sw, sw_port, p, timing, rx, rx_replay, g, div));
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
            sws.push(Sw::new(sw, 1000.0 / clock_ghz));
        }
        let topo_gpus = topo.gpus as usize;
        let faults = FaultState::new(spec, &topo)?;
        FabricSim {
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
            shape_memo: std::cell::Cell::new((0, 0, 0)),
            completed: Vec::new(),
            packets_sent: 0,
            delivered_bytes: vec![0; topo_gpus],
            graph: None,
            sampler: super::sampler::Sampler::off(),
        }
        .sampled(spec)
    }

    /// Start the spec's counter sampler (credits are full: no traffic yet).
    fn sampled(mut self, spec: &FabricSpec) -> Result<Self> {
        self.sampler = super::sampler::Sampler::new(&spec.counters, self.topo.switch_ports, self.sws.iter().map(|s| &s.sw), self.ports.iter().map(|p| &p.link))?;
        Ok(self)
    }

    /// A graph fabric: per-element switch parameters and clocks, per-link
    /// re-framed timing (see [`reframed`]), a serializer on every switch
    /// output, trunk credits from the next element's input buffer.
    fn new_graph(spec: &FabricSpec) -> Result<Self> {
        let topo = Topology::new(spec);
        let fmt = spec.links[0].packet;
        let payload = spec.gpu.payload_bytes as u64;
        let sim_bytes = if spec.sim_packet_bytes == 0 { payload } else { spec.sim_packet_bytes };
        let largest = if spec.sim_packets_per_lane > 0 { spec.max_sim_packet_bytes.max(sim_bytes) } else { sim_bytes };
        let max_f = ((largest / payload) * fmt.flits_per_packet(payload)) as u32;
        let vcs = spec.links.iter().map(|l| l.vcs).min().unwrap_or(1).max(1);
        let timings: Vec<LinkTiming> = spec.links.iter().map(|l| reframed(l, &fmt, payload)).collect::<Result<_>>()?;
        let (sn, spp) = (spec.switches as usize, spec.switch_ports);
        // Per element: its input buffer (flits per VC) and clock.
        let mut buf = vec![0u32; sn];
        let mut clock = vec![0f64; sn];
        for s in 0..spec.switches {
            let p = spec.params_of(s);
            let mut fastest = 0u64;
            let mut credits = 0u32;
            for o in 0..spp {
                if matches!(topo.peer(s, o), super::topology::Peer::None) {
                    continue;
                }
                let t = &timings[topo.port_link(s, o, 0) as usize];
                fastest = fastest.max(t.rate_bps);
                credits = credits.max(t.credits_per_vc_flits);
            }
            let b = if p.buffer_per_vc_flits > 0 { p.buffer_per_vc_flits } else { credits };
            buf[s as usize] = b.max(2 * max_f);
            clock[s as usize] = if p.clock_ghz > 0.0 { p.clock_ghz } else { fastest.max(1) as f64 / (fmt.flit_bytes as f64 * 8.0) / 1e9 };
        }
        // Endpoint ports: their link, credits = the first element's input buffer.
        let mut ports = Vec::with_capacity(topo.gpu_port_to.len());
        let g = &spec.gpu;
        let div = spec.gpu_ports.max(1) as f64;
        for p in 0..topo.gpu_port_to.len() {
            let (sw, sw_port, li) = topo.gpu_port_to[p].unwrap_or((NONE, NONE, 0));
            let mut timing = timings[li as usize];
            let rx = timing;
            if sw != NONE {
                timing.credits_per_vc_flits = buf[sw as usize];
            }
            timing.exhaustion_below_flits = max_f;
            let gp = g.for_port((p / spec.gpu_ports as usize) as u32, spec.gpus, li, div); // per-link-kind cap (spec.rs)
            ports.push(Port::new(sw, sw_port, p, timing, rx, None, &gp, div));
        }
        let mut sws = Vec::with_capacity(sn);
        let mut out_links: Vec<Option<OutLink>> = Vec::with_capacity(sn * spp as usize);
        for s in 0..spec.switches {
            let p = spec.params_of(s);
            // What each output's receiver can hold: the next element's input
            // buffer over a trunk, the link's credits at an endpoint.
            let mut down = vec![0u32; spp as usize];
            for o in 0..spp {
                let li = topo.port_link(s, o, 0);
                down[o as usize] = match topo.peer(s, o) {
                    super::topology::Peer::None => 2 * max_f,
                    super::topology::Peer::Endpoint(_) => timings[li as usize].credits_per_vc_flits.max(2 * max_f),
                    super::topology::Peer::Switch { switch, .. } => buf[switch as usize],
                };
                let wired = !matches!(topo.peer(s, o), super::topology::Peer::None);
                out_links.push(wired.then(|| {
                    let mut t = timings[li as usize];
                    // Credits are the switch core's; the serializer only times.
                    t.credits_per_vc_flits = u32::MAX / 4;
                    t.exhaustion_below_flits = 0;
                    OutLink { link: LinkDirection::with_stream(t, (1 << 40) + (s as u64 * spp as u64 + o as u64)), index: li }
                }));
            }
            let dmax = down.iter().copied().max().unwrap_or(2 * max_f);
            let ss = SwitchSpec {
                ports: spp.max(1),
                vcs,
                buffer_per_vc_flits: buf[s as usize],
                max_packet_flits: max_f,
                queueing: if p.queueing == "fifo" { Queueing::Fifo } else { Queueing::Voq },
                speedup: p.speedup,
                pipeline_latency_cycles: p.pipeline_latency_cycles,
                output_buffer_per_vc_flits: if p.output_buffer_per_vc_flits == 0 { 0 } else { p.output_buffer_per_vc_flits.max(2 * max_f) },
                downstream_credits_per_vc_flits: dmax,
                allocator: p.allocator.clone(),
                iterations: p.iterations,
                clock_ghz: clock[s as usize],
                seed: 0,
                stall_timeout_cycles: 0,
            };
            let mut sw = Switch::new(&ss).map_err(|e| crate::link::prefix_field(e, &format!("switch_kinds (element {s})")))?;
            sw.set_record_upstream_credits(true);
            for (o, &d) in down.iter().enumerate() {
                if d < dmax {
                    sw.set_output_credits(o, d);
                }
            }
            sws.push(Sw::new(sw, 1000.0 / clock[s as usize]));
        }
        let ne = topo.endpoints as usize;
        let faults = FaultState::new(spec, &topo)?;
        FabricSim {
            largest_packet_bytes: largest.max(1),
            packets_planned: 0,
            faults,
            rr_out: crate::error::try_vec(topo.switches as usize * ne, 0, "switches x endpoints")?,
            reorder: vec![ReorderStats::default(); ne],
            in_flight: vec![0; ne],
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
            shape_memo: std::cell::Cell::new((0, 0, 0)),
            completed: Vec::new(),
            packets_sent: 0,
            delivered_bytes: vec![0; ne],
            graph: Some(Box::new(Graph { spec: spec.clone(), out_links })),
            sampler: super::sampler::Sampler::off(),
        }
        .sampled(spec)
    }

    /// Register a transfer; start it by scheduling `FEv::StartTransfer(id)`.
    pub fn add_transfer(&mut self, src: u32, dst: u32, bytes: u64, tag: u32) -> Result<u32> {
        let g = self.topo.endpoints;
        if src >= g || dst >= g {
            if self.graph.is_none() {
                return Err(FlitsimError::config("transfer", format!("{src} -> {dst}"), &format!("GPU ids in 0..{g} (the fabric has {g} GPUs)")));
            }
            return Err(FlitsimError::config("transfer", format!("{src} -> {dst}"), &format!("endpoint ids in 0..{g} (GPUs 0..{}, hosts {}..{g})", self.topo.gpus, self.topo.gpus)));
        }
        if let Some(gr) = &self.graph {
            if let Some(s) = gr.spec.p2p_blocker(&self.topo, src, dst) {
                return Err(FlitsimError::config(
                    "transfer",
                    format!("GPU {src} -> GPU {dst} peer-to-peer"),
                    &format!("a route whose elements allow P2P: it crosses {} (allow_p2p = false); stage the copy through host memory instead", gr.spec.element_name(s)),
                ));
            }
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
            vc: self.topo.transfer_vc(src, dst, id, self.vcs),
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
        let s = &self.sws[sw];
        let (c, t) = s.t_memo.get();
        if c == cycle {
            return t;
        }
        let t = ceil_div_f(cycle as f64 * s.cycle_ps);
        s.t_memo.set((cycle, t));
        t
    }

    #[inline]
    fn c_of(&self, sw: usize, t: TimePs) -> u64 {
        let s = &self.sws[sw];
        let (tm, c) = s.c_memo.get();
        if tm == t {
            return c;
        }
        let c = crate::engine::ceil_f64((t as f64 / s.cycle_ps) - 1e-9).max(0.0) as u64;
        s.c_memo.set((t, c));
        c
    }

    fn flits_for(&self, bytes: u64) -> u32 {
        self.shape(bytes).0
    }

    /// Flits and protocol packets of a simulated packet of `bytes` (> 0)
    /// payload bytes (memoized for the last size: the same arithmetic).
    #[inline]
    fn shape(&self, bytes: u64) -> (u32, u64) {
        let (b, f, k) = self.shape_memo.get();
        if b == bytes && b != 0 {
            return (f, k);
        }
        let k = bytes.div_ceil(self.payload);
        let f = ((k - 1) * self.fmt.flits_per_packet(self.payload) + self.fmt.flits_per_packet(bytes - (k - 1) * self.payload)) as u32;
        self.shape_memo.set((bytes, f, k));
        (f, k)
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
    #[inline]
    fn ensure_wake<Q: Scheduler<FEv> + ?Sized>(&mut self, s: usize, at: Option<u64>, q: &mut Q) {
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
        q.schedule(t, FEv::Wake { sw: s as u32, cycle: c });
    }

    #[inline]
    fn schedule_try<Q: Scheduler<FEv> + ?Sized>(&mut self, p: usize, at: TimePs, q: &mut Q) {
        let port = &mut self.ports[p];
        if port.try_at.is_some_and(|t| t <= at) {
            return;
        }
        port.try_at = Some(at);
        q.schedule(at, FEv::PortTry(p as u32));
    }

    /// Handle one event.
    pub fn handle<Q: Scheduler<FEv> + ?Sized>(&mut self, now: TimePs, ev: FEv, q: &mut Q) -> Result<()> {
        if now >= self.sampler.next_ps {
            self.sampler.sample(now, false, self.sws.iter().map(|s| &s.sw), self.ports.iter().map(|p| &p.link));
        }
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
                let mut info = info;
                if info.stage == STAGE_ON_TRUNK {
                    // Next hop, chosen where the packet is (destination-based, ECMP round-robin).
                    let dst = self.xfers[info.xfer as usize].dst;
                    let routes = self.topo.routes(sw, dst);
                    if routes.is_empty() || (self.faults.any_dead && !self.reaches(sw, dst)) {
                        // A fault left this element without a route: replay from the source.
                        self.lose_packet(now, now, pkt, q);
                        return self.drop_lost(now, pkt, true, q);
                    }
                    let out = if self.faults.any_dead {
                        self.live_route(sw, dst)
                    } else {
                        let k = (sw * self.topo.endpoints + dst) as usize;
                        let o = routes[self.rr_out[k] as usize % routes.len()];
                        self.rr_out[k] = self.rr_out[k].wrapping_add(1);
                        o
                    };
                    let pk = &mut self.pkts[pkt as usize];
                    pk.sw = sw;
                    pk.out = out;
                    pk.next = NONE;
                    info = *pk;
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
            FEv::Wake { sw, cycle } => {
                if self.sws[sw as usize].wake_at == Some(cycle) {
                    q.schedule(now, FEv::WakeStep { sw, cycle });
                }
                Ok(())
            }
            FEv::WakeStep { sw, cycle } => {
                let s = sw as usize;
                if self.sws[s].wake_at != Some(cycle) {
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
            FEv::CreditSw { sw, out_vc, flits } => {
                let (out, vc) = (out_vc & 0xffff, out_vc >> 16);
                let s = sw as usize;
                let c = self.c_of(s, now).max(self.sws[s].stepped.map_or(0, |x| x + 1));
                self.sws[s].sw.return_credits(out as usize, vc as usize, flits, c)?;
                self.ensure_wake(s, Some(c), q);
                Ok(())
            }
        }
    }

    fn after_step<Q: Scheduler<FEv> + ?Sized>(&mut self, s: usize, q: &mut Q) {
        if self.graph.is_some() {
            return self.after_step_graph(s, q);
        }
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

    /// Graph fabrics: each departure is serialized on its output's own link
    /// (the switch core never sends faster than its fastest link; slower
    /// links queue behind it, bounded by the downstream credits the core
    /// holds) and goes to an endpoint or, over a trunk, to the next element,
    /// whose input buffer returns the credits.
    fn after_step_graph<Q: Scheduler<FEv> + ?Sized>(&mut self, s: usize, q: &mut Q) {
        use super::topology::Peer;
        let sp = self.topo.switch_ports;
        let mut gr = self.graph.take().expect("graph fabric");
        for k in 0..self.sws[s].sw.departures().len() {
            let d = self.sws[s].sw.departures()[k];
            let pkt = d.packet.tag as u32;
            let info = self.pkts[pkt as usize];
            let flits = d.packet.flits as u64;
            let head_t = self.t_of(s, d.tail_out_cycle + 1 - flits);
            let core_tail = self.t_of(s, d.tail_out_cycle + 1);
            let ol = gr.out_links[(s as u32 * sp + d.output) as usize].as_mut().expect("routed to a wired port");
            let proto = (info.bytes as u64).div_ceil(self.payload) as u32;
            let tx = ol.link.send_packets(head_t, info.vc as usize, info.flits, info.bytes, proto);
            ol.link.return_credits(tx.start_ps, info.vc as usize, info.flits);
            let lat = ol.link.timing().latency_ps;
            let tail = tx.tail_out_ps.max(core_tail);
            match self.topo.peer(s as u32, d.output) {
                Peer::Switch { switch, port } => {
                    let pk = &mut self.pkts[pkt as usize];
                    pk.stage = STAGE_ON_TRUNK;
                    pk.next = switch;
                    // The head is handed to the next core no earlier than its
                    // tail can follow one flit per cycle (virtual cut-through
                    // over a link slower than that core).
                    let c2 = self.sws[switch as usize].cycle_ps;
                    let head = tx.head_arrival_ps.max((tail + lat).saturating_sub((flits as f64 * c2).floor() as u64));
                    q.schedule(head, FEv::Arrive { sw: switch, input: port, pkt });
                }
                Peer::Endpoint(gp) => {
                    self.pkts[pkt as usize].stage = STAGE_TO_GPU;
                    q.schedule(tail + lat, FEv::Deliver { port: gp, pkt });
                }
                Peer::None => unreachable!("routes lead to wired ports"),
            }
        }
        for k in 0..self.sws[s].sw.upstream_credits().len() {
            let (input, vc, flits, cycle) = self.sws[s].sw.upstream_credits()[k];
            let t0 = self.t_of(s, cycle);
            match self.topo.peer(s as u32, input) {
                Peer::Endpoint(gp) => {
                    let t = t0 + self.ports[gp as usize].link.timing().credit_return_ps;
                    q.schedule(t, FEv::CreditGpu { port: gp, vc, flits });
                }
                Peer::Switch { switch, port } => {
                    let crt = gr.out_links[(s as u32 * sp + input) as usize].as_ref().map_or(0, |o| o.link.timing().credit_return_ps);
                    q.schedule(t0 + crt, FEv::credit_sw(switch, port, vc, flits));
                }
                Peer::None => {}
            }
        }
        self.graph = Some(gr);
    }

    fn start_transfer<Q: Scheduler<FEv> + ?Sized>(&mut self, now: TimePs, x: u32, q: &mut Q) -> Result<()> {
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
        if elig.is_empty() {
            self.scratch = elig;
            let name = |e: u32| if e < self.topo.gpus { format!("GPU {e}") } else { format!("host {}", e - self.topo.gpus) };
            return Err(FlitsimError::config(
                format!("transfer {x}"),
                format!("{} -> {} started at {now} ps", name(src), name(dst)),
                "a live path: the faults before this start left none (every route crosses a dead element)",
            ));
        }
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

    fn port_try<Q: Scheduler<FEv> + ?Sized>(&mut self, now: TimePs, p: usize, q: &mut Q) -> Result<()> {
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
            if n > 1 {
                port.queue.rotate_left(1); // (a no-op, but a call, for one share)
            }
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
            let proto = self.shape_memo.get().2; // `flits_for(bytes)` above set it
            debug_assert_eq!(proto, bytes.div_ceil(self.payload));
            let tx = port.link.send_packets(now, vc as usize, flits, bytes as u32, proto as u32);
            port.outstanding += 1;
            if port.inj_ps_per_byte > 0.0 {
                let cost = bytes + port.inj_overhead_bytes * proto;
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
                let k = (sw * self.topo.endpoints + dst) as usize;
                let o = routes[self.rr_out[k] as usize % routes.len()];
                self.rr_out[k] = self.rr_out[k].wrapping_add(1);
                o
            };
            let xf = &mut self.xfers[x as usize];
            let replayed = resent_seq != NO_SEQ;
            let seq = if replayed { resent_seq } else { xf.next_seq };
            let info = PktInfo { xfer: x, bytes: bytes as u32, flits, vc, seq, src_port: p as u32, sw, out, stage: STAGE_TO_SWITCH, lost: false, replayed, next: NONE };
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

    fn consume<Q: Scheduler<FEv> + ?Sized>(&mut self, now: TimePs, p: usize, pkt: u32, q: &mut Q) -> Result<()> {
        let info = self.pkts[pkt as usize];
        self.free_pkts.push(pkt);
        self.pkts[pkt as usize].stage = STAGE_FREE;
        self.ports[p].rx_payload_bytes += info.bytes as u64;
        self.faults.count_delivered(info.bytes as u64, info.replayed);
        let crt = self.ports[p].rx.credit_return_ps;
        q.schedule(now + crt, FEv::credit_sw(info.sw, info.out, info.vc, info.flits));
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
        self.sampler.close(end_ps, self.sws.iter().map(|s| &s.sw), self.ports.iter().map(|p| &p.link));
        for p in &mut self.ports {
            p.link.finish(end_ps);
        }
        if let Some(g) = &mut self.graph {
            for o in g.out_links.iter_mut().flatten() {
                o.link.finish(end_ps);
            }
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

    /// Graph fabrics: every wired switch output port's link direction, as
    /// (switch, port, peer, link index, stats); empty for one switch layer.
    pub(crate) fn switch_links(&self) -> Vec<(u32, u32, super::topology::Peer, u32, crate::link::LinkStats)> {
        let Some(g) = &self.graph else { return Vec::new() };
        let sp = self.topo.switch_ports.max(1);
        g.out_links
            .iter()
            .enumerate()
            .filter_map(|(i, o)| o.as_ref().map(|o| (i as u32 / sp, i as u32 % sp, o)))
            .map(|(s, p, o)| (s, p, self.topo.peer(s, p), o.index, *o.link.stats()))
            .collect()
    }

    pub(crate) fn cycle_ps(&self) -> f64 {
        self.sws.first().map_or(1.0, |s| s.cycle_ps)
    }
}

