//! Running one collective: the batch API on the fabric (simulated packet
//! size, plane folding, statistics) and on the ideal port model.

use super::dag::{Backend, CEv, DagExec};
use super::lower::{algo_name, lower, FabricInfo, Lowered, NodeKind};
use super::tiers::{lower_best, lower_in, plan};
use super::params::{Algorithm, CollectiveParams, CollectiveRequest, Protocol};
use super::transport::{expand, Reach};
use crate::engine::{self, EventQueue, Interrupt, Model, TimePs};
use crate::error::{FlitsimError, Result};
use crate::fabric::{fold_spec, FabricSim, FabricSpec, FoldPlan};
use serde::Serialize;

/// Outcome of one collective.
#[derive(Debug, Clone, Serialize)]
pub struct CollectiveResult {
    pub time_ps: u64,
    pub algorithm: Algorithm,
    pub protocol: Protocol,
    pub channels: u32,
    pub chunk_bytes: u64,
    pub transfers: u64,
    /// Payload bytes sent / received per GPU over its links (whole fabric,
    /// unfolded), protocol expansion included.
    pub bytes_sent: Vec<u64>,
    pub bytes_received: Vec<u64>,
    /// Payload bytes the fabric's GPU -> switch links actually carried per
    /// GPU (link statistics, times the folded planes), and the payload bytes
    /// delivered to each GPU: the physics check of the lowering's own count.
    pub link_bytes_sent: Vec<u64>,
    pub link_bytes_received: Vec<u64>,
    pub sim_packet_bytes: u64,
    pub folded_planes: u32,
    pub fold_reason: String,
    /// How the simulated packets were sized, and any lever request that was
    /// overridden because it could move the answer by more than 1 %.
    pub sim_packet_note: String,
    pub packets: u64,
    pub events: u64,
    pub max_link_utilization: f64,
    pub credit_exhaustion_episodes: u64,
    pub arbitration_conflicts: u64,
    pub estimate_ps: f64,
    /// When `auto` chose: every (algorithm, protocol, simulated time_ps) tried.
    pub auto_candidates: Vec<(String, String, u64)>,
    /// Faults and end-to-end replays (zero without faults).
    pub faults: crate::fabric::FaultStats,
    /// Payload bytes of the simulated transfers (per plane when folded).
    pub sent_bytes_on_fabric: u64,
    /// Per GPU: payload bytes delivered to it over its links (link statistics;
    /// per plane when folded).
    pub rx_payload_bytes: Vec<u64>,
    /// Graph fabrics: payload bytes carried by switch-output links, summed
    /// per link spec index (length `links`; empty for one switch layer): what
    /// each link class (PCIe, socket link, Ethernet, ...) carried.
    pub link_class_payload_bytes: Vec<u64>,
    /// Fidelity that ran (`packet` or `flow`) and why (see `crate::flow`).
    pub fidelity: String,
    pub fidelity_reason: String,
}

struct DagModel {
    exec: DagExec,
}

impl Model for DagModel {
    type Event = CEv;
    fn handle(&mut self, now: TimePs, ev: CEv, q: &mut EventQueue<CEv>) -> Result<()> {
        self.exec.handle_q(now, ev, q)
    }
}

/// What the lowering sees of a fabric spec.
///
/// `gpu_ports` counts the ports alive when the collective starts (a plane
/// or link dead from t = 0 is a fabric without it; the fewest over GPUs),
/// so protocol rates that scale with the links match the fabric that runs.
pub(crate) fn fabric_info(spec: &FabricSpec) -> Result<FabricInfo> {
    let (_, t) = spec.links[0].derive()?;
    let mut live = spec.gpu_ports;
    if !spec.faults.is_empty() {
        let dead_at_start = |w: &crate::fabric::Wire| {
            spec.faults.iter().any(|f| match *f {
                crate::fabric::Fault::Plane { switch, at_ps: 0 } => switch == w.switch,
                crate::fabric::Fault::Link { gpu, port, at_ps: 0 } => gpu == w.gpu && port == w.gpu_port,
                _ => false,
            })
        };
        live = (0..spec.gpus).map(|g| spec.wires.iter().filter(|w| w.gpu == g && !dead_at_start(w)).count() as u32).min().unwrap_or(spec.gpu_ports);
    }
    if spec.is_graph() {
        // a graph GPU's ports may differ in kind (PCIe + NVLink bridge): the
        // GPU's total over its wired ports, as that many equal ports (GPU 0)
        let mut total = 0.0;
        let mut count = 0u32;
        for w in spec.wires.iter().filter(|w| w.gpu == 0) {
            total += spec.links[w.link as usize].derive()?.1.rate_bps as f64 / 8.0;
            count += 1;
        }
        if count > 0 {
            let nvls = spec.switch.nvls || spec.switch_kinds.iter().any(|k| k.nvls);
            return Ok(FabricInfo { gpus: spec.gpus, gpu_ports: count, port_bytes_per_s: total / count as f64, nvls });
        }
    }
    Ok(FabricInfo { gpus: spec.gpus, gpu_ports: live.max(1), port_bytes_per_s: t.rate_bps as f64 / 8.0, nvls: spec.switch.nvls })
}

/// The route facts transports need (see [`super::transport`], [`Reach::of_spec`]).
///
/// # Errors
/// `Config` for an invalid fabric.
pub(crate) fn reach_of(spec: &FabricSpec) -> Result<Reach> {
    Reach::of_spec(spec)
}

/// `low` with its transfers expanded into their transports' sub-DAGs.
///
/// # Errors
/// As [`super::transport::expand`].
pub(crate) fn transported(mut low: Lowered, reach: &Reach, p: &CollectiveParams) -> Result<Lowered> {
    if let Some(d) = expand(&low.dag, reach, &p.transport_params_for(low.algorithm, reach.all_nvlink()), low.protocol)? {
        low.dag = d;
    }
    Ok(low)
}

pub use super::params::INJECTION_PACKET_OVERHEAD_BYTES;

/// The spec the collective runs on: calibrated injection limit applied when
/// the fabric has none.
pub(crate) fn calibrated_spec(spec: &FabricSpec, link_efficiency: f64) -> Result<FabricSpec> {
    let mut s = spec.clone();
    if s.gpu.injection_bytes_per_s == 0 {
        let info = fabric_info(spec)?;
        // the fabric splits the cap evenly over every port slot (wired or not)
        s.gpu.injection_bytes_per_s = (info.port_bytes_per_s * spec.gpu_ports as f64 * link_efficiency) as u64;
        s.gpu.injection_packet_overhead_bytes = INJECTION_PACKET_OVERHEAD_BYTES;
        if spec.is_graph() {
            // per port kind: NVLink ports the calibrated rate, PCIe ports NCCL's PCIe figure (fabric/spec.rs)
            s.gpu.link_injection_bytes_per_s = crate::fabric::port_injection_caps(spec, link_efficiency, INJECTION_PACKET_OVERHEAD_BYTES)?;
        }
    }
    Ok(s)
}

/// Candidates `auto` simulates: those whose closed-form estimate is within
/// this factor of the best estimate (the estimate ignores contention, so it
/// ranks well but not exactly; beyond 2x no contention effect measured here
/// reverses the order).
pub const AUTO_PRUNE_FACTOR: f64 = 2.0;

/// Run one collective on a fabric (batch API).
///
/// `auto` algorithm / protocol: every supported (algorithm, protocol) pair
/// whose closed-form estimate is within [`AUTO_PRUNE_FACTOR`] of the best is
/// simulated on the fabric, and the fastest simulated one is returned (its
/// time is the simulator's own prediction; `auto_candidates` lists them all).
///
/// # Errors
/// `Config` for bad specs or requests (see [`lower`]); `Stalled` if the
/// fabric cannot finish.
pub fn run_collective(spec: &FabricSpec, req: &CollectiveRequest, interrupt: &mut dyn Interrupt) -> Result<CollectiveResult> {
    spec.validate()?;
    let info = fabric_info(spec)?;
    let reach = reach_of(spec)?;
    // validates the request and parameters before anything is simulated
    let first = lower_best(req.op, &req.members, req.bytes, &req.params, &info, &reach)?;
    let cands = plan(req.op, &req.members, req.bytes, &req.params, &info, &reach)?;
    if cands.len() <= 1 {
        return simulate(spec, req, first, interrupt);
    }
    let best_est = cands.iter().map(|c| c.2).fold(f64::INFINITY, f64::min);
    // Packet level on one switch layer: candidates run in order of their
    // estimate, and one whose lower bound (wire_lower_bound_ps) already
    // exceeds the best simulated time is not simulated: it cannot be the
    // fastest, so the choice and its time are what simulating all would give
    // (ties go to the earlier candidate in plan order, as before).
    let prune = spec.fidelity != crate::fabric::Fidelity::Flow && !spec.is_graph();
    let mut order: Vec<usize> = (0..cands.len()).filter(|&i| cands[i].2 <= best_est * AUTO_PRUNE_FACTOR).collect();
    if prune {
        order.sort_by(|&i, &j| cands[i].2.total_cmp(&cands[j].2).then(i.cmp(&j)));
    }
    let mut best: Option<(CollectiveResult, usize)> = None;
    let mut tried = Vec::new();
    for i in order {
        let (a, p, _) = cands[i];
        let low = lower_in(req.op, &req.members, req.bytes, a, p, &req.params, &info, &reach)?;
        let r = if prune {
            let low = transported(low, &reach, &req.params)?;
            if let Some((b, _)) = &best {
                if wire_lower_bound_ps(spec, &low.dag)? > b.time_ps as f64 {
                    continue;
                }
            }
            simulate_transported(spec, req, low, interrupt)?
        } else {
            simulate(spec, req, low, interrupt)?
        };
        tried.push((i, (algo_name(a).to_string(), format!("{p:?}").to_lowercase(), r.time_ps)));
        if best.as_ref().is_none_or(|(b, bi)| r.time_ps < b.time_ps || (r.time_ps == b.time_ps && i < *bi)) {
            best = Some((r, i));
        }
    }
    let (mut r, _) = best.expect("at least the best estimate is simulated");
    tried.sort_by_key(|t| t.0);
    r.auto_candidates = tried.into_iter().map(|t| t.1).collect();
    Ok(r)
}

/// A lower bound on any packet-level run of `dag` on `spec` (one switch
/// layer), ps: the most bytes its transfers push out of one GPU (loopbacks
/// included) over that GPU's links' raw data rate. Nothing in the engine
/// sends faster than a link's rate (headers, credits and injection caps only
/// slow it), and folding divides bytes and ports alike.
fn wire_lower_bound_ps(spec: &FabricSpec, dag: &super::lower::Dag) -> Result<f64> {
    let mut rate = vec![0f64; spec.gpus as usize];
    for w in &spec.wires {
        if let Some(x) = rate.get_mut(w.gpu as usize) {
            *x += spec.links[w.link as usize].derive()?.1.rate_bps as f64 / 8.0;
        }
    }
    let sent = dag.bytes_sent(spec.gpus);
    Ok(sent.iter().zip(&rate).filter(|(_, r)| **r > 0.0).map(|(&b, &r)| b as f64 / r * 1e12).fold(0.0, f64::max))
}

/// Simulate one lowered collective on the fabric, at flow level when the
/// spec says `flow` (packet level otherwise: `auto` is decided by
/// `run_collective_at`).
fn simulate(spec: &FabricSpec, req: &CollectiveRequest, low: Lowered, interrupt: &mut dyn Interrupt) -> Result<CollectiveResult> {
    if spec.fidelity == crate::fabric::Fidelity::Flow {
        return simulate_flow(spec, req, low, interrupt);
    }
    let low = transported(low, &reach_of(spec)?, &req.params)?;
    simulate_transported(spec, req, low, interrupt)
}

/// [`simulate`] at packet level of a DAG already through [`transported`].
fn simulate_transported(spec: &FabricSpec, req: &CollectiveRequest, low: Lowered, interrupt: &mut dyn Interrupt) -> Result<CollectiveResult> {
    match simulate_packet(spec, req, &low, true, true, interrupt)? {
        Ok(r) => Ok(r),
        Err(why) => {
            // the chain-bound fold was refused after the run: full planes
            let mut r = simulate_packet(spec, req, &low, false, true, interrupt)?.expect("no chain-bound fold to refuse");
            r.fold_reason = format!("{}; {why}", r.fold_reason);
            Ok(r)
        }
    }
}

/// [`simulate`] at packet level on a transported DAG. `chain_fold`: the
/// balanced fold may be accepted by the collective-wide chain bound
/// ([`fold_chain_bound`]); when the run then shows lanes shared by more
/// concurrent transfers than the bound allows, `Ok(Err(why))` (run again
/// with `chain_fold = false`). `rank_fold`: simulate one of identical
/// loopback-only ranks where [`rank_blocks`] and the fabric's
/// [`crate::fabric::gpu_symmetry`] allow it (exact).
fn simulate_packet(spec: &FabricSpec, req: &CollectiveRequest, low: &Lowered, chain_fold: bool, rank_fold: bool, interrupt: &mut dyn Interrupt) -> Result<std::result::Result<CollectiveResult, String>> {
    let spec = calibrated_spec(spec, req.params.link_efficiency)?;
    let xfers = || low.dag.nodes.iter().filter_map(|n| if let NodeKind::Transfer { src, dst, bytes, loopback, .. } = *n { Some((src, if loopback { u32::MAX } else { dst }, bytes)) } else { None });
    let list: Vec<(u32, u32, u64)> = xfers().collect();
    let (spec, sim_note) = choose_sim_packets(spec, req.params.sim_packet_bytes, &list);
    let spb = if spec.sim_packet_bytes == 0 { spec.gpu.payload_bytes as u64 } else { spec.sim_packet_bytes };
    // engine hook: balanced folds (fabric/fold.rs) when exact folding cannot apply
    let by_chains = std::cell::Cell::new(false);
    let chains = |planes: u32| {
        let r = fold_chain_bound(&low.dag, &spec, planes);
        by_chains.set(r.is_ok());
        r
    };
    let plan = FoldPlan::balanced_with(&spec, list.iter().copied(), if chain_fold { Some(&chains) } else { None });
    let (run_spec, planes, reason) = (plan.spec, plan.planes, plan.reason);
    let by_chains = by_chains.get() && planes > 1;
    let mut dag = low.dag.clone();
    if planes > 1 {
        for nd in &mut dag.nodes {
            if let NodeKind::Transfer { bytes, .. } = nd {
                *bytes = bytes.div_ceil(planes as u64);
            }
        }
    }
    // Rank folding: identical ranks that only loop back through their own
    // switch ports never meet; one stands for all (exact, no bound needed).
    let mut reason = reason;
    let rank_gpus = match rank_blocks(&dag).and_then(|bg| crate::fabric::gpu_symmetry(&run_spec).map(|()| bg).map_err(|why| format!("no rank fold: the ranks are identical loopbacks, but {why}"))) {
        Err(why) if why.starts_with("no rank fold") => {
            reason = format!("{reason}; {why}");
            Vec::new()
        }
        Ok((blk, gpus)) if rank_fold && gpus.len() > 1 => {
            reason = format!(
                "{reason}; rank fold: {} ranks run identical loopback-only transfer chains on interchangeable GPUs (no packet of one meets another's), so GPU {} is simulated and its link statistics stand for every rank's (exact)",
                gpus.len(),
                gpus[0]
            );
            dag.nodes.truncate(blk + 1);
            dag.edges.retain(|&(_, b, _)| b as usize <= blk);
            gpus
        }
        _ => Vec::new(),
    };
    let sim = FabricSim::new(&run_spec, spec.gpu_ports)?;
    let mut model = DagModel { exec: DagExec::new(Backend::Fabric(sim)) };
    let mut q = EventQueue::with_capacity(4096);
    model.exec.start(0, 0, &dag, &mut q)?;
    let summary = engine::run(&mut model, &mut q, u64::MAX, interrupt)?;
    let Backend::Fabric(sim) = &mut model.exec.backend else { unreachable!("fabric backend") };
    if let Some(d) = sim.describe_incomplete() {
        return Err(FlitsimError::Stalled { time_ps: summary.end_ps, detail: d });
    }
    let time_ps = model.exec.done.first().map_or(summary.end_ps, |x| x.1);
    if by_chains {
        // The chain bound counts one packet of lane imbalance per transfer;
        // k transfers sharing a lane at once can leave up to k packets on one
        // plane. Checked on the folded run's own transfer times.
        let k = max_concurrent(sim, spec.gpus) as u128;
        let d = chain_transfers(&low.dag) as u128;
        let t = packet_time_ps(&spec).unwrap_or(u64::MAX) as u128;
        let bound = d * k * t * crate::fabric::BALANCED_MIN_PACKETS as u128;
        if bound > time_ps as u128 {
            return Ok(Err(format!(
                "balanced fold refused after the run: up to {k} transfers shared a GPU's lanes at once on a chain of {d} transfers, so {d} x {k} x {:.2} ns x {} = {:.2} us exceeds the collective's {:.2} us",
                t as f64 / 1e3,
                crate::fabric::BALANCED_MIN_PACKETS,
                bound as f64 / 1e6,
                time_ps as f64 / 1e6
            )));
        }
    }
    sim.finish(time_ps.max(1));
    let mut sent = vec![0u64; spec.gpus as usize];
    let mut recv = vec![0u64; spec.gpus as usize];
    for nd in &low.dag.nodes {
        if let NodeKind::Transfer { src, dst, bytes, .. } = *nd {
            // host endpoints (staging) are not GPUs: their bytes are not a GPU's
            if let Some(x) = sent.get_mut(src as usize) {
                *x += bytes;
            }
            if let Some(x) = recv.get_mut(dst as usize) {
                *x += bytes;
            }
        }
    }
    let pl = planes as u64;
    let mut link_sent = vec![0u64; spec.gpus as usize];
    for (i, (_, l)) in sim.ports_iter().enumerate() {
        // host endpoints' ports follow the GPUs': not a GPU's link
        if let Some(x) = link_sent.get_mut(i / run_spec.gpu_ports as usize) {
            *x += l.stats().payload_bytes * pl;
        }
    }
    let mut link_recv: Vec<u64> = sim.delivered_bytes.iter().take(spec.gpus as usize).map(|&b| b * pl).collect();
    let mut max_u: f64 = 0.0;
    let mut exh = 0;
    for (_, l) in sim.ports_iter() {
        max_u = max_u.max(l.stats().busy_ps as f64 / time_ps.max(1) as f64);
        exh += l.vc_stats().iter().map(|v| v.exhaustion_episodes).sum::<u64>();
    }
    let mut conflicts: u64 = sim.switches().map(|s| s.stats().ports.iter().map(|p| p.output_conflicts).sum::<u64>()).sum();
    let mut rx_payload = gpu_rx_bytes(sim, spec.gpus, run_spec.gpu_ports);
    let mut sent_on_fabric: u64 = sim.xfers.iter().filter(|x| x.src != x.dst || x.loopback).map(|x| x.bytes).sum();
    if let Some(&g0) = rank_gpus.first() {
        // the simulated rank's statistics stand for every rank's
        let g0 = g0 as usize;
        for &g in &rank_gpus[1..] {
            let g = g as usize;
            link_sent[g] = link_sent[g0];
            link_recv[g] = link_recv[g0];
            rx_payload[g] = rx_payload[g0];
        }
        let k = rank_gpus.len() as u64;
        exh *= k;
        conflicts *= k;
        sent_on_fabric *= k;
    }
    Ok(Ok(CollectiveResult {
        time_ps,
        algorithm: low.algorithm,
        protocol: low.protocol,
        channels: low.channels,
        chunk_bytes: low.chunk_bytes,
        transfers: low.dag.nodes.iter().filter(|n| matches!(n, NodeKind::Transfer { .. })).count() as u64,
        bytes_sent: sent,
        bytes_received: recv,
        link_bytes_sent: link_sent,
        link_bytes_received: link_recv,
        sim_packet_bytes: spb,
        folded_planes: planes,
        fold_reason: reason,
        sim_packet_note: sim_note,
        packets: sim.packets_sent,
        events: summary.events,
        max_link_utilization: max_u,
        credit_exhaustion_episodes: exh,
        arbitration_conflicts: conflicts,
        estimate_ps: low.estimate_ps,
        auto_candidates: Vec::new(),
        faults: sim.fault_stats(),
        sent_bytes_on_fabric: sent_on_fabric,
        rx_payload_bytes: rx_payload,
        link_class_payload_bytes: by_link_class(&crate::fabric::stats_of(sim, run_spec.gpu_ports, 0), spec.links.len()),
        fidelity: "packet".into(),
        fidelity_reason: String::new(),
    }))
}

/// [`simulate`] at flow level: the same DAG on [`crate::flow::FlowSim`]
/// (simulated packet size chosen as for packet level: it sets the flow
/// level's packet quantization).
fn simulate_flow(spec: &FabricSpec, req: &CollectiveRequest, low: Lowered, interrupt: &mut dyn Interrupt) -> Result<CollectiveResult> {
    let low = transported(low, &reach_of(spec)?, &req.params)?;
    use crate::flow::{flow_stats, outside_validation, FlowSim, FLOW_VALID};
    let spec = calibrated_spec(spec, req.params.link_efficiency)?;
    let list: Vec<(u32, u32, u64)> = low.dag.nodes.iter().filter_map(|n| if let NodeKind::Transfer { src, dst, bytes, loopback, .. } = *n { Some((src, if loopback { u32::MAX } else { dst }, bytes)) } else { None }).collect();
    let (spec, sim_note) = choose_sim_packets(spec, req.params.sim_packet_bytes, &list);
    let mut model = DagModel { exec: DagExec::new(Backend::Flow(FlowSim::new(&spec)?)) };
    let mut q = EventQueue::with_capacity(1024);
    model.exec.start(0, 0, &low.dag, &mut q)?;
    let summary = engine::run(&mut model, &mut q, u64::MAX, interrupt)?;
    let sim = model.exec.flow().expect("flow backend");
    if let Some(d) = sim.describe_incomplete() {
        return Err(FlitsimError::Stalled { time_ps: summary.end_ps, detail: d });
    }
    let time_ps = model.exec.done.first().map_or(summary.end_ps, |x| x.1);
    let st = flow_stats(sim, summary.events);
    let g = spec.gpus as usize;
    // host endpoints (staging) are not GPUs: their bytes are not a GPU's
    let (sent, recv) = low.dag.bytes_per_gpu(spec.gpus);
    let (mut link_sent, mut link_recv) = (vec![0u64; g], vec![0u64; g]);
    // Host-memory endpoints' ports (graph fabrics) are not GPUs' links.
    for p in st.ports.iter().filter(|p| (p.gpu as usize) < g) {
        link_sent[p.gpu as usize] += p.link.payload_bytes;
        link_recv[p.gpu as usize] += p.rx_payload_bytes;
    }
    let max_u = st.ports.iter().map(|p| p.link.busy_ps as f64 / time_ps.max(1) as f64).fold(0.0, f64::max);
    Ok(CollectiveResult {
        time_ps,
        algorithm: low.algorithm,
        protocol: low.protocol,
        channels: low.channels,
        chunk_bytes: low.chunk_bytes,
        transfers: list.len() as u64,
        bytes_sent: sent,
        bytes_received: recv,
        link_bytes_sent: link_sent,
        rx_payload_bytes: link_recv.clone(),
        link_bytes_received: link_recv,
        sim_packet_bytes: if spec.sim_packet_bytes == 0 { spec.gpu.payload_bytes as u64 } else { spec.sim_packet_bytes },
        folded_planes: 1,
        fold_reason: "flow level: planes are not simulated one by one".into(),
        sim_packet_note: sim_note,
        packets: st.packets,
        events: summary.events,
        max_link_utilization: max_u,
        credit_exhaustion_episodes: 0,
        arbitration_conflicts: 0,
        estimate_ps: low.estimate_ps,
        auto_candidates: Vec::new(),
        faults: Default::default(),
        sent_bytes_on_fabric: st.sent_bytes,
        link_class_payload_bytes: by_link_class(&st, spec.links.len()),
        fidelity: "flow".into(),
        fidelity_reason: match outside_validation(sim) {
            Some(w) => format!("warning: flow level asked for outside its validation: {w}"),
            None => FLOW_VALID.into(),
        },
    })
}

/// One payload packet's time on the slowest lane, ps: link serialisation of
/// its flits or the injection cap's share per port (overhead included).
fn packet_time_ps(spec: &FabricSpec) -> std::result::Result<u64, String> {
    let pay = spec.gpu.payload_bytes.max(1) as u64;
    let mut t_pkt = 0u64;
    for l in &spec.links {
        let (_, tm) = l.derive().map_err(|e| format!("link timing: {e}"))?;
        t_pkt = t_pkt.max(tm.serialization_ps(l.packet.flits_per_packet(pay)));
    }
    if spec.gpu.injection_bytes_per_s > 0 {
        let lane = spec.gpu.injection_bytes_per_s as f64 / spec.gpu_ports.max(1) as f64;
        t_pkt = t_pkt.max(((pay + spec.gpu.injection_packet_overhead_bytes as u64) as f64 * 1e12 / lane).ceil() as u64);
    }
    Ok(t_pkt)
}

/// Rank blocks of a DAG lowered as one start node (node 0, a delay nothing
/// precedes) followed by one contiguous block of nodes per rank, each block's
/// transfers all loopbacks of that rank's GPU (NVLS), the blocks identical
/// node for node and edge for edge up to the GPU, and no edge between blocks.
/// `Ok((block length, GPU of each block))` or why not. Such ranks interact
/// only through the fabric, and on a GPU-symmetric fabric
/// ([`crate::fabric::gpu_symmetry`]) loopbacks of different GPUs share no
/// port, so every rank's timing equals the first's.
fn rank_blocks(dag: &super::lower::Dag) -> std::result::Result<(usize, Vec<u32>), String> {
    let n = dag.nodes.len();
    if n < 3 || !matches!(dag.nodes[0], NodeKind::Delay { .. }) {
        return Err("no start node".into());
    }
    // the GPU of each block, in order: a new block starts where the src changes
    let mut gpus: Vec<u32> = Vec::new();
    for nd in &dag.nodes[1..] {
        match *nd {
            NodeKind::Transfer { src, dst, loopback: true, .. } if src == dst => {
                if gpus.last() != Some(&src) {
                    if gpus.contains(&src) {
                        return Err(format!("GPU {src}'s transfers are not one block"));
                    }
                    gpus.push(src);
                }
            }
            NodeKind::Transfer { .. } => return Err("a transfer that is not a loopback".into()),
            NodeKind::Delay { .. } => {}
        }
    }
    let k = gpus.len();
    if k < 2 || (n - 1) % k != 0 {
        return Err("ranks of unequal node counts".into());
    }
    let blk = (n - 1) / k;
    let block_of = |v: usize| (v - 1) / blk;
    for j in 0..blk {
        let a = dag.nodes[1 + j];
        for (b, &g) in gpus.iter().enumerate() {
            let same = match (a, dag.nodes[1 + b * blk + j]) {
                (NodeKind::Transfer { bytes, min_ps, .. }, NodeKind::Transfer { src, bytes: b2, min_ps: m2, .. }) => bytes == b2 && min_ps == m2 && src == g,
                (x, y) => x == y,
            };
            if !same {
                return Err(format!("rank {b}'s node {j} differs from rank 0's"));
            }
        }
    }
    // edges: per block, in order, the same (from offset, to offset, delay); none between blocks
    let mut per: Vec<Vec<(usize, usize, u64)>> = vec![Vec::new(); k];
    for &(a, c, d) in &dag.edges {
        let (a, c) = (a as usize, c as usize);
        if c == 0 {
            return Err("an edge into the start node".into());
        }
        let b = block_of(c);
        let from = if a == 0 {
            usize::MAX
        } else if block_of(a) == b {
            a - 1 - b * blk
        } else {
            return Err("an edge between ranks".into());
        };
        per[b].push((from, c - 1 - b * blk, d));
    }
    if per.iter().any(|e| *e != per[0]) {
        return Err("ranks with different dependencies".into());
    }
    Ok((blk, gpus))
}

/// Most fabric transfers on one dependency chain of `dag`.
fn chain_transfers(dag: &super::lower::Dag) -> u64 {
    let n = dag.nodes.len();
    let mut indeg = vec![0u32; n];
    for &(_, b, _) in &dag.edges {
        indeg[b as usize] += 1;
    }
    let (off, succ) = dag.csr(true);
    let mut depth = vec![0u64; n];
    let mut stack: Vec<u32> = (0..n as u32).filter(|&v| indeg[v as usize] == 0).collect();
    let mut most = 0;
    while let Some(v) = stack.pop() {
        let v = v as usize;
        let on_fabric = matches!(dag.nodes[v], NodeKind::Transfer { src, dst, bytes, loopback, .. } if bytes > 0 && (src != dst || loopback));
        let here = depth[v] + u64::from(on_fabric);
        most = most.max(here);
        for &(b, _) in &succ[off[v] as usize..off[v + 1] as usize] {
            let b = b as usize;
            depth[b] = depth[b].max(here);
            indeg[b] -= 1;
            if indeg[b] == 0 {
                stack.push(b as u32);
            }
        }
    }
    most
}

/// Most transfers in flight at once from one GPU or into one GPU (the
/// folded run's start and end times).
fn max_concurrent(sim: &FabricSim, gpus: u32) -> u64 {
    let mut ev: Vec<(u32, u64, i8)> = Vec::with_capacity(sim.xfers.len() * 4);
    for x in sim.xfers.iter().filter(|x| x.bytes > 0 && (x.src != x.dst || x.loopback)) {
        ev.push((x.src, x.start_ps, 1));
        ev.push((x.src, x.end_ps, -1));
        ev.push((gpus + x.dst, x.start_ps, 1));
        ev.push((gpus + x.dst, x.end_ps, -1));
    }
    // ends before starts at one time: back-to-back transfers do not overlap
    ev.sort_unstable_by_key(|&(g, t, d)| (g, t, d));
    let (mut most, mut cur, mut last) = (0i64, 0i64, u32::MAX);
    for (g, _, d) in ev {
        if g != last {
            cur = 0;
            last = g;
        }
        cur += d as i64;
        most = most.max(cur);
    }
    most.max(0) as u64
}

/// The balanced fold's bound on a whole collective (see `fabric/fold.rs`).
///
/// Against the full spray a folded transfer ends at most one payload packet
/// time `t` (the slowest lane's, injection overhead included) early or late.
/// Such a shift moves what depends on the transfer by the same amount, never
/// more (a later start shifts a FIFO lane's departures by at most as much),
/// so the collective's end moves by at most `t` x the most fabric transfers
/// on one dependency chain of the DAG. Every chain also lasts at least its
/// delay nodes, its edge delays and each transfer's own serialisation on the
/// fastest lane (or its protocol floor). The fold is accepted when on every
/// chain from a source, [`BALANCED_MIN_PACKETS`] x `t` per transfer stays
/// within that lower bound: the error is then at most 1/128 of the
/// collective's time, as the per-transfer rule guarantees for transfers of
/// >= 128 packets per lane. One pass in topological order, O(nodes + edges).
///
/// `Ok(why)` or `Err(why not)`.
fn fold_chain_bound(dag: &super::lower::Dag, spec: &FabricSpec, planes: u32) -> std::result::Result<String, String> {
    use crate::fabric::BALANCED_MIN_PACKETS;
    let t_pkt = packet_time_ps(spec)?;
    let mut rate_max = 0u64;
    for l in &spec.links {
        rate_max = rate_max.max(l.derive().map_err(|e| format!("link timing: {e}"))?.1.rate_bps);
    }
    if rate_max == 0 {
        return Err("no link rate".into());
    }
    let err = BALANCED_MIN_PACKETS as i128 * t_pkt as i128;
    let n = dag.nodes.len();
    let weight = |k: &NodeKind| -> i128 {
        match *k {
            NodeKind::Transfer { src, dst, bytes, loopback, min_ps } => {
                if bytes == 0 || (src == dst && !loopback) {
                    return 0;
                }
                let lane = bytes.div_ceil(planes as u64) as u128;
                let ser = (lane * 8 * 1_000_000_000_000 / rate_max as u128) as i128;
                err - ser.max(min_ps as i128)
            }
            NodeKind::Delay { ps } => -(ps as i128),
        }
    };
    // CSR of successors, Kahn's order; best[v] = the chain maximum ending at v
    let mut indeg = vec![0u32; n];
    for &(_, b, _) in &dag.edges {
        indeg[b as usize] += 1;
    }
    let (off, succ) = dag.csr(true);
    let mut best = vec![i128::MIN; n];
    let mut stack: Vec<u32> = (0..n as u32).filter(|&v| indeg[v as usize] == 0).collect();
    let (mut seen, mut worst) = (0usize, i128::MIN);
    while let Some(v) = stack.pop() {
        seen += 1;
        let v = v as usize;
        let here = if best[v] == i128::MIN { 0 } else { best[v] } + weight(&dag.nodes[v]);
        worst = worst.max(here);
        for &(b, d) in &succ[off[v] as usize..off[v + 1] as usize] {
            let b = b as usize;
            best[b] = best[b].max(here - d as i128);
            indeg[b] -= 1;
            if indeg[b] == 0 {
                stack.push(b as u32);
            }
        }
    }
    if seen < n {
        return Err("the DAG has a cycle".into());
    }
    let t_ns = t_pkt as f64 / 1e3;
    if worst <= 0 {
        Ok(format!("every dependency chain lasts at least {BALANCED_MIN_PACKETS} packet times ({t_ns:.2} ns each) per transfer on it, so the fold moves the time by at most 1/{BALANCED_MIN_PACKETS}"))
    } else {
        Err(format!("a dependency chain is {:.3} us short of {BALANCED_MIN_PACKETS} packet times ({t_ns:.2} ns each) per transfer on it (the collective-wide bound)", worst as f64 / 1e6))
    }
}

/// Switch-output link payload summed per link spec index (empty without switch links).
fn by_link_class(st: &crate::fabric::FabricStats, links: usize) -> Vec<u64> {
    if st.switch_links.is_empty() {
        return Vec::new();
    }
    let mut v = vec![0u64; links];
    for l in &st.switch_links {
        if let Some(x) = v.get_mut(l.link_index as usize) {
            *x += l.link.payload_bytes;
        }
    }
    v
}

/// Payload bytes delivered to each GPU over its links (link statistics).
fn gpu_rx_bytes(sim: &FabricSim, gpus: u32, gpu_ports: u32) -> Vec<u64> {
    let mut v = vec![0u64; gpus as usize];
    for (i, (rx, _, _)) in sim.port_fault_stats().enumerate() {
        if let Some(x) = v.get_mut(i / gpu_ports as usize) {
            *x += rx;
        }
    }
    v
}

/// Run a lowered collective on the ideal alpha-beta port model (one port per
/// GPU of `bytes_per_s`, latency `alpha_ps` per transfer, no contention at
/// receivers): the closed-form reference. Returns the completion time, ps.
///
/// # Errors
/// `Config` for a bad request or non-positive bandwidth.
pub fn run_collective_ideal(gpus: u32, alpha_ps: u64, bytes_per_s: f64, nvls: bool, req: &CollectiveRequest) -> Result<u64> {
    if !(bytes_per_s > 0.0) {
        return Err(FlitsimError::config("bandwidth_bytes_per_s", bytes_per_s, "a positive rate"));
    }
    let info = FabricInfo { gpus, gpu_ports: 1, port_bytes_per_s: bytes_per_s, nvls };
    let low = lower(req.op, &req.members, req.bytes, &req.params, &info)?;
    let mut model = DagModel { exec: DagExec::new(Backend::Ideal { alpha_ps, bytes_per_s, port_free: vec![0; gpus as usize] }) };
    let mut q = EventQueue::with_capacity(1024);
    model.exec.start(0, 0, &low.dag, &mut q)?;
    let s = engine::run(&mut model, &mut q, u64::MAX, &mut engine::NoInterrupt)?;
    Ok(model.exec.done.first().map_or(s.end_ps, |x| x.1))
}

/// Fewest simulated packets per GPU port (lane) of a transfer for which a
/// coalesced packet moves the answer by < 1 %: a transfer sprayed over L lanes
/// in packets of s bytes ends when its fullest lane does, up to one packet
/// late, so the error is at most 1 / (packets per lane); with balanced lanes
/// (adaptive coalescing) only the last, partial packet remains, and each step
/// pays about one packet serialisation more. 32 per lane measured 0.7 %, 64
/// 0.3 % on
/// 8-GPU HGX H100 ring / tree / all_to_all / broadcast at 8 MiB against
/// 256-byte packets (tests/test_collective_physics.py).
pub const MIN_PACKETS_PER_LANE: u64 = 64;
/// Largest simulated packet the automatic choice uses, bytes.
const AUTO_MAX_SIM_PACKET: u64 = 64 * 1024;

/// Size the simulated packets of a collective run (speed lever, bounded).
///
/// The fabric's own `sim_packet_bytes` / `sim_packets_per_lane` win when set.
/// Otherwise: on a fabric that folds to one link per GPU per plane, a fixed
/// packet of at most 1/16 of the median per-plane transfer (one lane, so no
/// lane imbalance), at most 16 KiB; else adaptive coalescing with
/// [`MIN_PACKETS_PER_LANE`] packets per lane (every lane the same count).
/// A requested `sim_packet_bytes` that would leave fewer than
/// [`MIN_PACKETS_PER_LANE`] packets per lane of the median transfer is
/// lowered to the largest size that does not, and the note says so.
pub(crate) fn choose_sim_packets(spec: FabricSpec, requested: u64, xfers: &[(u32, u32, u64)]) -> (FabricSpec, String) {
    let mut spec = spec;
    let pay = spec.gpu.payload_bytes as u64;
    let mut sizes: Vec<u64> = xfers.iter().map(|x| x.2).filter(|&b| b > 0).collect();
    if sizes.is_empty() {
        return (spec, "one protocol packet per simulated packet".into());
    }
    sizes.sort_unstable();
    let med = sizes[sizes.len() / 2];
    let folded = fold_spec(&spec).ok().map(|(f, p, _)| (p as u64, f.gpu_ports as u64));
    if spec.sim_packets_per_lane > 0 {
        return (spec, "adaptive coalescing as the fabric sets it".into());
    }
    if spec.sim_packet_bytes > 0 {
        let (p, l) = folded.unwrap_or((1, spec.gpu_ports as u64));
        let per_lane = med / p / spec.sim_packet_bytes / l.max(1);
        let note = if per_lane < MIN_PACKETS_PER_LANE && spec.sim_packet_bytes > pay {
            format!("simulated packets of {} bytes as the fabric sets them: the median transfer ({med} bytes) gets {per_lane} per lane, fewer than {MIN_PACKETS_PER_LANE}, so the time may be off by more than 1 % (warning)", spec.sim_packet_bytes)
        } else {
            format!("simulated packets of {} bytes as the fabric sets them", spec.sim_packet_bytes)
        };
        return (spec, note);
    }
    let lanes_per_gpu = match folded {
        Some((_, l)) => l,
        None => spec.gpu_ports as u64,
    };
    let per_plane = match folded {
        Some((p, _)) => med / p,
        None => med,
    };
    // Largest power-of-two multiple of the payload with >= MIN packets per lane.
    let largest_safe = |cap: u64| {
        let mut k = 1u64;
        while pay * k * 2 <= cap && per_plane / (pay * k * 2 * lanes_per_gpu.max(1)) >= MIN_PACKETS_PER_LANE {
            k *= 2;
        }
        pay * k
    };
    if requested > 0 {
        let want = requested.div_ceil(pay) * pay;
        let safe = largest_safe(1 << 20);
        let s = want.min(safe.max(pay));
        spec.sim_packet_bytes = if s == pay { 0 } else { s };
        let note = if s < want {
            format!("sim_packet_bytes = {requested} lowered to {s}: the median transfer ({med} bytes) would get fewer than {MIN_PACKETS_PER_LANE} packets per lane, which can move the time by more than 1 %")
        } else {
            format!("sim_packet_bytes = {s} as requested")
        };
        return (spec, note);
    }
    if spec.is_graph() {
        // Adaptive coalescing is refused on graph fabrics (FabricSpec::validate):
        // fixed packets of at most 4 KiB, still >= MIN per lane.
        let s = largest_safe(4096);
        spec.sim_packet_bytes = if s == pay { 0 } else { s };
        return (spec, format!("fixed simulated packets of {s} bytes (graph fabric: adaptive coalescing is refused on multi-hop paths; >= {MIN_PACKETS_PER_LANE} per median transfer)"));
    }
    // One lane per GPU per plane, and folding exact with the chosen packet:
    // every transfer a whole number of planes x packet units.
    let folds = |s: u64| match folded {
        Some((p, 1)) => xfers.iter().all(|&(a, b, bytes)| a == b || bytes % (p * s) == 0),
        _ => false,
    };
    let mut s = largest_safe(16 * 1024);
    while s > pay && !folds(s) {
        s /= 2;
    }
    if folds(s) {
        spec.sim_packet_bytes = if s == pay { 0 } else { s };
        (spec, format!("fixed simulated packets of {s} bytes (folded to one lane per GPU; >= {MIN_PACKETS_PER_LANE} per median transfer)"))
    } else {
        spec.sim_packets_per_lane = MIN_PACKETS_PER_LANE as u32;
        spec.max_sim_packet_bytes = AUTO_MAX_SIM_PACKET.max(pay).div_ceil(pay) * pay;
        let note = format!("adaptive coalescing: {MIN_PACKETS_PER_LANE} packets per lane of every transfer, {pay}..{} bytes each", spec.max_sim_packet_bytes);
        (spec, note)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use super::super::params::Op;
    use crate::engine::NoInterrupt;

    fn nvls_fabric(gpus: u32, planes: u32) -> FabricSpec {
        let mut s = crate::presets::planar(gpus, planes, true);
        s.switch.nvls = true;
        s
    }

    fn run(spec: &FabricSpec, op: Op, members: &[u32], bytes: u64, rank_fold: bool) -> CollectiveResult {
        let req = CollectiveRequest { op, members: members.to_vec(), bytes, params: CollectiveParams { algorithm: Algorithm::Nvls, protocol: Protocol::Simple, ..Default::default() } };
        let info = fabric_info(spec).unwrap();
        let reach = reach_of(spec).unwrap();
        let low = lower_in(op, members, bytes, Algorithm::Nvls, Protocol::Simple, &req.params, &info, &reach).unwrap();
        let low = transported(low, &reach, &req.params).unwrap();
        simulate_packet(spec, &req, &low, true, rank_fold, &mut NoInterrupt).unwrap().unwrap()
    }

    /// Rank folding is exact: one simulated rank gives the same time and the
    /// same per-GPU link statistics as all ranks simulated (NVLS, the
    /// plane fold on in both; sizes on both sides of the balanced fold's
    /// per-transfer threshold, uneven chunks, a subset of the GPUs).
    #[test]
    fn rank_fold_is_bit_identical_to_every_rank() {
        let cases: [(u32, u32, Op, u64, Vec<u32>); 5] = [
            (8, 18, Op::AllReduce, 64 << 10, (0..8).collect()),
            (8, 18, Op::AllReduce, (5 << 20) + 768, (0..8).collect()),
            (8, 4, Op::AllGather, 3 << 20, (0..8).collect()),
            (8, 4, Op::ReduceScatter, 3 << 20, (0..8).collect()),
            (72, 18, Op::AllReduce, 16 << 20, (0..72).collect()),
        ];
        for (g, p, op, bytes, members) in cases.iter().cloned().chain([(8, 4, Op::AllReduce, 2 << 20, vec![1, 3, 4, 6])]) {
            let spec = nvls_fabric(g, p);
            let one = run(&spec, op, &members, bytes, true);
            let all = run(&spec, op, &members, bytes, false);
            assert!(one.fold_reason.contains("rank fold"), "{}", one.fold_reason);
            assert!(!all.fold_reason.contains("rank fold"));
            assert!(one.packets * (members.len() as u64) == all.packets, "{g}x{p} {op:?} {bytes}: packets {} vs {}", one.packets, all.packets);
            let what = format!("{g}x{p} {op:?} {bytes} over {members:?}");
            assert_eq!(one.time_ps, all.time_ps, "{what}");
            assert_eq!(one.link_bytes_sent, all.link_bytes_sent, "{what}");
            assert_eq!(one.link_bytes_received, all.link_bytes_received, "{what}");
            assert_eq!(one.rx_payload_bytes, all.rx_payload_bytes, "{what}");
            assert_eq!(one.sent_bytes_on_fabric, all.sent_bytes_on_fabric, "{what}");
            assert_eq!(one.credit_exhaustion_episodes, all.credit_exhaustion_episodes, "{what}");
            assert_eq!(one.arbitration_conflicts, all.arbitration_conflicts, "{what}");
            assert_eq!(one.max_link_utilization, all.max_link_utilization, "{what}");
        }
    }

    /// Refused where ranks can meet or differ: a ring (transfers between
    /// GPUs), faults, the pim allocator, folding off.
    #[test]
    fn rank_fold_is_refused_where_ranks_can_meet() {
        let spec = nvls_fabric(8, 4);
        let members: Vec<u32> = (0..8).collect();
        let low = lower_in(Op::AllReduce, &members, 1 << 20, Algorithm::Ring, Protocol::Simple, &CollectiveParams::default(), &fabric_info(&spec).unwrap(), &reach_of(&spec).unwrap()).unwrap();
        assert!(rank_blocks(&low.dag).unwrap_err().contains("not a loopback"));
        let nv = lower_in(Op::AllReduce, &members, 1 << 20, Algorithm::Nvls, Protocol::Simple, &CollectiveParams::default(), &fabric_info(&spec).unwrap(), &reach_of(&spec).unwrap()).unwrap();
        assert_eq!(rank_blocks(&nv.dag).unwrap().1, members);
        let mut d = nv.dag.clone();
        if let Some(NodeKind::Transfer { bytes, .. }) = d.nodes.iter_mut().rev().find(|n| matches!(n, NodeKind::Transfer { .. })) {
            *bytes += 1;
        }
        assert!(rank_blocks(&d).unwrap_err().contains("differs"));
        let mut pim = spec.clone();
        pim.switch.allocator = "pim".into();
        assert!(crate::fabric::gpu_symmetry(&pim).is_err());
        let mut off = spec.clone();
        off.fold_planes = false;
        assert!(crate::fabric::gpu_symmetry(&off).is_err());
        let r = run(&off, Op::AllReduce, &members, 1 << 20, true);
        assert!(r.fold_reason.contains("no rank fold: the ranks are identical loopbacks, but folding disabled"), "{}", r.fold_reason);
        let mut faulty = spec.clone();
        faulty.faults.push(crate::fabric::Fault::Link { gpu: 0, port: 0, at_ps: 1000 });
        assert!(crate::fabric::gpu_symmetry(&faulty).unwrap_err().contains("faults"));
        assert!(crate::fabric::gpu_symmetry(&spec).is_ok());
    }
}
