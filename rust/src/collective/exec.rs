//! Executing lowered DAGs: on the cycle-level fabric (batch API and the
//! task-graph network share [`DagExec`]) or on an ideal alpha-beta port model
//! (the closed-form reference).

use super::lower::{lower, Dag, FabricInfo, NodeKind};
use super::params::{Algorithm, CollectiveRequest, Protocol};
use crate::engine::{self, EventQueue, Interrupt, Model, Scheduler, TimePs};
use crate::error::{FlitsimError, Result};
use crate::fabric::{fold_spec, FEv, FabricSim, FabricSpec};
use serde::Serialize;

const NONE: u32 = u32::MAX;

/// Events of a fabric running DAGs (and plain transfers).
#[derive(Debug, Clone, Copy)]
pub enum CEv {
    Fab(FEv),
    /// Node ready to start.
    Ready(u32),
    /// Delay node (or ideal transfer) finished.
    Done(u32),
}

/// Forwards fabric events into a `CEv` scheduler.
struct Wrap<'a>(&'a mut dyn Scheduler<CEv>);

impl Scheduler<FEv> for Wrap<'_> {
    #[inline]
    fn schedule(&mut self, t: TimePs, e: FEv) {
        self.0.schedule(t, CEv::Fab(e))
    }
}

/// Where transfers run.
pub(crate) enum Backend {
    Fabric(FabricSim),
    /// One port per GPU of `bytes_per_s`; a transfer occupies its source's
    /// port for bytes / B and lands `alpha_ps` after it leaves.
    Ideal { alpha_ps: u64, bytes_per_s: f64, port_free: Vec<TimePs> },
}

struct Inst {
    tag: u32,
    remaining: u32,
}

/// DAG state for any number of concurrent collectives.
pub struct DagExec {
    pub(crate) backend: Backend,
    kind: Vec<NodeKind>,
    succ_off: Vec<u32>,
    succ: Vec<(u32, u64)>,
    pending: Vec<u32>,
    ready_ps: Vec<TimePs>,
    inst_of: Vec<u32>,
    insts: Vec<Inst>,
    /// Fabric transfer id -> DAG node (NONE for plain transfers).
    xfer_node: Vec<u32>,
    /// Finished collectives: (tag, time).
    pub done: Vec<(u32, TimePs)>,
    /// Finished plain transfers: (tag, time).
    pub plain_done: Vec<(u32, TimePs)>,
}

impl DagExec {
    pub(crate) fn new(backend: Backend) -> Self {
        DagExec {
            backend,
            kind: Vec::new(),
            succ_off: Vec::new(),
            succ: Vec::new(),
            pending: Vec::new(),
            ready_ps: Vec::new(),
            inst_of: Vec::new(),
            insts: Vec::new(),
            xfer_node: Vec::new(),
            done: Vec::new(),
            plain_done: Vec::new(),
        }
    }

    pub fn fabric(&self) -> Option<&FabricSim> {
        match &self.backend {
            Backend::Fabric(s) => Some(s),
            Backend::Ideal { .. } => None,
        }
    }

    /// Add a DAG and start its source nodes at `now`; `tag` is reported in `done`.
    pub fn start(&mut self, now: TimePs, tag: u32, dag: &Dag, q: &mut dyn Scheduler<CEv>) -> Result<()> {
        let base = self.kind.len() as u32;
        let m = dag.nodes.len();
        if m == 0 {
            self.done.push((tag, now));
            return Ok(());
        }
        let inst = self.insts.len() as u32;
        self.insts.push(Inst { tag, remaining: m as u32 });
        // CSR of successors, appended.
        let mut cnt = vec![0u32; m + 1];
        let mut indeg = vec![0u32; m];
        for &(a, b, _) in &dag.edges {
            cnt[a as usize + 1] += 1;
            indeg[b as usize] += 1;
        }
        for i in 0..m {
            cnt[i + 1] += cnt[i];
        }
        let sbase = self.succ.len() as u32;
        self.succ.resize(self.succ.len() + dag.edges.len(), (0, 0));
        let mut fill = cnt.clone();
        for &(a, b, d) in &dag.edges {
            self.succ[(sbase + fill[a as usize]) as usize] = (base + b, d);
            fill[a as usize] += 1;
        }
        if self.succ_off.is_empty() {
            self.succ_off.push(0);
        }
        // succ_off is global: node i's successors are succ[succ_off[i]..succ_off[i+1]].
        self.succ_off.pop();
        for i in 0..=m {
            self.succ_off.push(sbase + cnt[i]);
        }
        self.kind.extend_from_slice(&dag.nodes);
        self.pending.extend_from_slice(&indeg);
        self.ready_ps.extend(std::iter::repeat_n(now, m));
        self.inst_of.extend(std::iter::repeat_n(inst, m));
        for (i, &d) in indeg.iter().enumerate() {
            if d == 0 {
                q.schedule(now, CEv::Ready(base + i as u32));
            }
        }
        Ok(())
    }

    /// Start a plain transfer (task-graph transfer task).
    pub fn start_plain(&mut self, now: TimePs, tag: u32, src: u32, dst: u32, bytes: u64, q: &mut dyn Scheduler<CEv>) -> Result<()> {
        match &mut self.backend {
            Backend::Fabric(sim) => {
                let x = sim.add_transfer(src, dst, bytes, tag)?;
                sim.handle(now, FEv::StartTransfer(x), &mut Wrap(q))?;
                self.collect(q);
                Ok(())
            }
            Backend::Ideal { alpha_ps, bytes_per_s, port_free } => {
                let s = now.max(port_free[src as usize]);
                let e = s + (bytes as f64 * 1e12 / *bytes_per_s).ceil() as u64;
                port_free[src as usize] = e;
                self.plain_done.push((tag, e + *alpha_ps));
                Ok(())
            }
        }
    }

    /// The task tag a fabric transfer belongs to: its own tag for a plain
    /// transfer, its collective's tag for a DAG transfer.
    pub fn task_of_transfer(&self, x: u32, own_tag: u32) -> u32 {
        match self.xfer_node.get(x as usize).copied().unwrap_or(NONE) {
            NONE => own_tag,
            node => self.insts[self.inst_of[node as usize] as usize].tag,
        }
    }

    fn set_xfer_node(&mut self, x: u32, node: u32) {
        let x = x as usize;
        if self.xfer_node.len() <= x {
            self.xfer_node.resize(x + 1, NONE);
        }
        self.xfer_node[x] = node;
    }

    fn node_done(&mut self, i: u32, t: TimePs, q: &mut dyn Scheduler<CEv>) {
        let (a, b) = (self.succ_off[i as usize], self.succ_off[i as usize + 1]);
        for k in a..b {
            let (s, d) = self.succ[k as usize];
            let r = &mut self.ready_ps[s as usize];
            *r = (*r).max(t + d);
            self.pending[s as usize] -= 1;
            if self.pending[s as usize] == 0 {
                q.schedule(*r, CEv::Ready(s));
            }
        }
        let inst = &mut self.insts[self.inst_of[i as usize] as usize];
        inst.remaining -= 1;
        if inst.remaining == 0 {
            self.done.push((inst.tag, t));
        }
    }

    fn collect(&mut self, q: &mut dyn Scheduler<CEv>) {
        let Backend::Fabric(sim) = &mut self.backend else { return };
        if sim.completed.is_empty() {
            return;
        }
        let c = std::mem::take(&mut sim.completed);
        for &(x, t) in &c {
            let node = self.xfer_node.get(x as usize).copied().unwrap_or(NONE);
            if node == NONE {
                let tag = match &self.backend {
                    Backend::Fabric(sim) => sim.xfers[x as usize].tag,
                    Backend::Ideal { .. } => 0,
                };
                self.plain_done.push((tag, t));
            } else {
                self.node_done(node, t, q);
            }
        }
        if let Backend::Fabric(sim) = &mut self.backend {
            let mut c = c;
            c.clear();
            sim.completed = c;
        }
    }

    /// Handle one event.
    pub fn handle(&mut self, now: TimePs, ev: CEv, q: &mut dyn Scheduler<CEv>) -> Result<()> {
        match ev {
            CEv::Fab(e) => {
                if let Backend::Fabric(sim) = &mut self.backend {
                    sim.handle(now, e, &mut Wrap(q))?;
                }
                self.collect(q);
            }
            CEv::Done(i) => self.node_done(i, now, q),
            CEv::Ready(i) => match self.kind[i as usize] {
                NodeKind::Delay { ps } => q.schedule(now + ps, CEv::Done(i)),
                NodeKind::Transfer { src, dst, bytes, loopback } => match &mut self.backend {
                    Backend::Fabric(sim) => {
                        let x = if loopback { sim.add_loopback_transfer(src, bytes, i)? } else { sim.add_transfer(src, dst, bytes, i)? };
                        sim.xfers[x as usize].spray_offset = i;
                        self.set_xfer_node(x, i);
                        if let Backend::Fabric(sim) = &mut self.backend {
                            sim.handle(now, FEv::StartTransfer(x), &mut Wrap(q))?;
                        }
                        self.collect(q);
                    }
                    Backend::Ideal { alpha_ps, bytes_per_s, port_free } => {
                        let s = now.max(port_free[src as usize]);
                        let e = s + (bytes as f64 * 1e12 / *bytes_per_s).ceil() as u64;
                        port_free[src as usize] = e;
                        q.schedule(e + *alpha_ps, CEv::Done(i));
                    }
                },
            },
        }
        Ok(())
    }
}

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
    pub sim_packet_bytes: u64,
    pub folded_planes: u32,
    pub fold_reason: String,
    pub packets: u64,
    pub events: u64,
    pub max_link_utilization: f64,
    pub credit_exhaustion_episodes: u64,
    pub arbitration_conflicts: u64,
    pub estimate_ps: f64,
    /// Faults and end-to-end replays (zero without faults).
    pub faults: crate::fabric::FaultStats,
    /// Payload bytes of the simulated transfers (per plane when folded).
    pub sent_bytes_on_fabric: u64,
    /// Per GPU: payload bytes delivered to it over its links (link statistics;
    /// per plane when folded).
    pub rx_payload_bytes: Vec<u64>,
}

struct DagModel {
    exec: DagExec,
}

impl Model for DagModel {
    type Event = CEv;
    fn handle(&mut self, now: TimePs, ev: CEv, q: &mut EventQueue<CEv>) -> Result<()> {
        self.exec.handle(now, ev, q)
    }
}

/// What the lowering sees of a fabric spec.
pub(crate) fn fabric_info(spec: &FabricSpec) -> Result<FabricInfo> {
    let (_, t) = spec.links[0].derive()?;
    Ok(FabricInfo { gpus: spec.gpus, gpu_ports: spec.gpu_ports, port_bytes_per_s: t.rate_bps as f64 / 8.0, nvls: spec.switch.nvls })
}

/// The spec the collective runs on: calibrated injection limit applied when
/// the fabric has none.
pub(crate) fn calibrated_spec(spec: &FabricSpec, link_efficiency: f64) -> Result<FabricSpec> {
    let mut s = spec.clone();
    if s.gpu.injection_bytes_per_s == 0 {
        let info = fabric_info(spec)?;
        s.gpu.injection_bytes_per_s = (info.port_bytes_per_s * spec.gpu_ports as f64 * link_efficiency) as u64;
    }
    Ok(s)
}

/// Run one collective on a fabric (batch API).
///
/// Simulated packet size (when neither the fabric nor the params set one):
/// the largest power of two times the payload that gives each GPU port at
/// least one packet of the DAG's median transfer, at most 64 KiB. Plane
/// folding when exact (every transfer a multiple of planes x links x packet).
///
/// # Errors
/// `Config` for bad specs or requests (see [`lower`]); `Stalled` if the
/// fabric cannot finish.
pub fn run_collective(spec: &FabricSpec, req: &CollectiveRequest, interrupt: &mut dyn Interrupt) -> Result<CollectiveResult> {
    spec.validate()?;
    let info = fabric_info(spec)?;
    let low = lower(req.op, &req.members, req.bytes, &req.params, &info)?;
    let mut spec = calibrated_spec(spec, req.params.link_efficiency)?;
    let mut sizes: Vec<u64> = low.dag.nodes.iter().filter_map(|n| if let NodeKind::Transfer { bytes, .. } = *n { Some(bytes) } else { None }).collect();
    if spec.sim_packet_bytes == 0 {
        let pay = spec.gpu.payload_bytes as u64;
        let spb = if req.params.sim_packet_bytes > 0 {
            req.params.sim_packet_bytes.div_ceil(pay) * pay
        } else if sizes.is_empty() {
            pay
        } else {
            sizes.sort_unstable();
            let med = sizes[sizes.len() / 2];
            let per_port = med / spec.gpu_ports as u64;
            let mut k = 1u64;
            while pay * k * 2 <= per_port && pay * k * 2 <= 16 * 1024 {
                k *= 2;
            }
            pay * k
        };
        spec.sim_packet_bytes = if spb == pay { 0 } else { spb };
    }
    let spb = if spec.sim_packet_bytes == 0 { spec.gpu.payload_bytes as u64 } else { spec.sim_packet_bytes };
    let (run_spec, planes, reason) = match fold_spec(&spec) {
        Ok((f, p, unit)) => {
            if let Some(b) = low.dag.nodes.iter().find_map(|n| if let NodeKind::Transfer { bytes, .. } = *n { (bytes % unit != 0).then_some(bytes) } else { None }) {
                (spec.clone(), 1, format!("a transfer of {b} bytes is not a multiple of planes x links x packet = {unit} bytes"))
            } else {
                (f, p, format!("folded {p} identical planes into one (round-robin spray, every transfer a multiple of planes x links x packet)"))
            }
        }
        Err(why) => (spec.clone(), 1, why),
    };
    let mut dag = low.dag.clone();
    if planes > 1 {
        for nd in &mut dag.nodes {
            if let NodeKind::Transfer { bytes, .. } = nd {
                *bytes /= planes as u64;
            }
        }
    }
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
    sim.finish(time_ps.max(1));
    let mut sent = vec![0u64; spec.gpus as usize];
    let mut recv = vec![0u64; spec.gpus as usize];
    for nd in &low.dag.nodes {
        if let NodeKind::Transfer { src, dst, bytes, .. } = *nd {
            sent[src as usize] += bytes;
            recv[dst as usize] += bytes;
        }
    }
    let mut max_u: f64 = 0.0;
    let mut exh = 0;
    for (_, l) in sim.ports_iter() {
        max_u = max_u.max(l.stats().busy_ps as f64 / time_ps.max(1) as f64);
        exh += l.vc_stats().iter().map(|v| v.exhaustion_episodes).sum::<u64>();
    }
    let conflicts = sim.switches().map(|s| s.stats().ports.iter().map(|p| p.output_conflicts).sum::<u64>()).sum();
    Ok(CollectiveResult {
        time_ps,
        algorithm: low.algorithm,
        protocol: low.protocol,
        channels: low.channels,
        chunk_bytes: low.chunk_bytes,
        transfers: low.dag.nodes.iter().filter(|n| matches!(n, NodeKind::Transfer { .. })).count() as u64,
        bytes_sent: sent,
        bytes_received: recv,
        sim_packet_bytes: spb,
        folded_planes: planes,
        fold_reason: reason,
        packets: sim.packets_sent,
        events: summary.events,
        max_link_utilization: max_u,
        credit_exhaustion_episodes: exh,
        arbitration_conflicts: conflicts,
        estimate_ps: low.estimate_ps,
        faults: sim.fault_stats(),
        sent_bytes_on_fabric: sim.xfers.iter().filter(|x| x.src != x.dst || x.loopback).map(|x| x.bytes).sum(),
        rx_payload_bytes: gpu_rx_bytes(sim, spec.gpus, run_spec.gpu_ports),
    })
}

/// Payload bytes delivered to each GPU over its links (link statistics).
fn gpu_rx_bytes(sim: &FabricSim, gpus: u32, gpu_ports: u32) -> Vec<u64> {
    let mut v = vec![0u64; gpus as usize];
    for (i, (rx, _, _)) in sim.port_fault_stats().enumerate() {
        v[i / gpu_ports as usize] += rx;
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
