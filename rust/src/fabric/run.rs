//! Running transfers on a fabric: the batch API (arrays in, completion times
//! and statistics out), exact plane folding, and the task-graph network.

use super::sim::{FEv, FabricSim, FaultStats, ReorderStats};
use super::spec::{FabricSpec, Spray, Wire};
use crate::engine::{self, EventQueue, Interrupt, Model, TimePs};
use crate::error::{ensure, FlitsimError, Result};
use crate::link::{LinkStats, ReplayStats, VcStats};
use crate::switch::SwitchStats;
use serde::{Deserialize, Serialize};

/// Transfers to run, columnar.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TransferBatch {
    pub src: Vec<u32>,
    pub dst: Vec<u32>,
    pub bytes: Vec<u64>,
    /// Earliest start, ps.
    pub start_ps: Vec<u64>,
    /// Index of a transfer that must finish first, or -1.
    pub after: Vec<i64>,
}

/// Per GPU port link (GPU -> switch direction) statistics.
#[derive(Debug, Clone, Serialize)]
pub struct PortLinkStats {
    pub gpu: u32,
    pub port: u32,
    pub switch: u32,
    pub link: LinkStats,
    pub vcs: Vec<VcStats>,
    /// Payload bytes delivered to the GPU through this port (switch -> GPU
    /// direction), each byte once.
    pub rx_payload_bytes: u64,
    /// Payload bytes this port sent that a fault destroyed (replayed elsewhere).
    pub lost_bytes: u64,
    /// Link-level retry on the switch -> GPU direction.
    pub rx_replay: ReplayStats,
}

/// Outcome of a batch.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BatchResult {
    pub start_ps: Vec<u64>,
    pub end_ps: Vec<u64>,
    pub makespan_ps: u64,
    /// Planes folded into one (1 = no folding).
    pub folded_planes: u32,
    /// Why folding was or was not applied.
    pub fold_reason: String,
    pub ports: Vec<PortLinkStats>,
    pub switches: Vec<SwitchStats>,
    pub switch_cycle_ps: f64,
    pub reorder: Vec<ReorderStats>,
    pub packets: u64,
    pub events: u64,
    /// Faults and end-to-end replays (all zero without faults).
    pub faults: FaultStats,
    /// Payload bytes of the transfers that crossed the fabric (src != dst or loopback).
    pub sent_bytes: u64,
}

struct BatchModel {
    sim: FabricSim,
    dependents_off: Vec<u32>,
    dependents: Vec<u32>,
    start_ps: Vec<u64>,
}

impl Model for BatchModel {
    type Event = FEv;
    fn handle(&mut self, now: TimePs, ev: FEv, q: &mut EventQueue<FEv>) -> Result<()> {
        self.sim.handle(now, ev, q)?;
        while let Some((x, t)) = self.sim.completed.pop() {
            let x = x as usize;
            for k in self.dependents_off[x]..self.dependents_off[x + 1] {
                let d = self.dependents[k as usize];
                q.schedule(t.max(self.start_ps[d as usize]), FEv::StartTransfer(d));
            }
        }
        Ok(())
    }
}

fn validate_batch(b: &TransferBatch, gpus: u32) -> Result<()> {
    let n = b.src.len();
    for (name, len) in [("dst", b.dst.len()), ("bytes", b.bytes.len()), ("start_ps", b.start_ps.len()), ("after", b.after.len())] {
        ensure(len == n, name, format!("length {len}"), &format!("one entry per transfer ({n})"))?;
    }
    for i in 0..n {
        ensure(b.src[i] < gpus, &format!("src[{i}]"), b.src[i], &format!("a GPU id in 0..{gpus}"))?;
        ensure(b.dst[i] < gpus, &format!("dst[{i}]"), b.dst[i], &format!("a GPU id in 0..{gpus}"))?;
        ensure(b.after[i] >= -1 && b.after[i] < n as i64 && b.after[i] != i as i64, &format!("after[{i}]"), b.after[i], &format!("-1 or another transfer's index in 0..{n}"))?;
    }
    // Each transfer has at most one predecessor: a cycle is a loop in the chain.
    let mut state = vec![0u8; n];
    for i in 0..n {
        let mut path = Vec::new();
        let mut j = i;
        while state[j] == 0 {
            state[j] = 1;
            path.push(j);
            if b.after[j] < 0 {
                break;
            }
            j = b.after[j] as usize;
            if state[j] == 1 {
                let k = path.iter().position(|&x| x == j).unwrap_or(0);
                let cyc: Vec<String> = path[k..].iter().chain(std::iter::once(&j)).map(|x| x.to_string()).collect();
                return Err(FlitsimError::config("after", format!("cycle {}", cyc.join(" <- ")), "an acyclic chain of dependencies"));
            }
        }
        for &p in &path {
            state[p] = 2;
        }
    }
    Ok(())
}

/// Decide plane folding: returns the folded spec and the plane count, or why not.
fn fold(spec: &FabricSpec, b: &TransferBatch) -> std::result::Result<(FabricSpec, u32), String> {
    let (f, planes, unit) = fold_spec(spec)?;
    if let Some(i) = (0..b.bytes.len()).find(|&i| b.bytes[i] % unit != 0 && b.src[i] != b.dst[i]) {
        return Err(format!("transfer {i} ({} bytes) is not a multiple of planes x links x packet = {unit} bytes", b.bytes[i]));
    }
    Ok((f, planes))
}

/// The one-plane spec of a plane-symmetric fabric, the plane count, and the
/// unit (planes x links x simulated packet bytes) every transfer must be a
/// multiple of for folding to be exact; or why the fabric cannot fold.
pub(crate) fn fold_spec(spec: &FabricSpec) -> std::result::Result<(FabricSpec, u32, u64), String> {
    if !spec.fold_planes {
        return Err("folding disabled (fold_planes = false)".into());
    }
    if !spec.faults.is_empty() {
        return Err("faults break the symmetry between planes".into());
    }
    if spec.links.iter().any(|l| l.replay.is_some_and(|r| r.ber > 0.0)) {
        return Err("bit errors are sampled per link, so planes are not identical".into());
    }
    if spec.spray != Spray::RoundRobin {
        return Err(format!("spray {:?} does not spread packets evenly over planes", spec.spray));
    }
    if spec.sim_packets_per_lane > 0 {
        return Err("adaptive coalescing (sim_packets_per_lane) sizes packets from each transfer's bytes, which folding divides".into());
    }
    let topo = super::topology::Topology::new(spec);
    let Some((planes, l)) = topo.plane_symmetry(spec) else {
        return Err("switches are not identical planes (unequal links per GPU, mixed link specs or unwired ports)".into());
    };
    let s = if spec.sim_packet_bytes == 0 { spec.gpu.payload_bytes as u64 } else { spec.sim_packet_bytes };
    let unit = planes as u64 * l as u64 * s;
    // One plane: switch 0 and the L ports of every GPU wired to it.
    let mut wires: Vec<Wire> = spec.wires.iter().filter(|w| w.switch == 0).copied().collect();
    wires.sort_by_key(|w| (w.gpu, w.gpu_port));
    let mut k = 0;
    let mut last = u32::MAX;
    for w in &mut wires {
        if w.gpu != last {
            k = 0;
            last = w.gpu;
        }
        w.gpu_port = k;
        k += 1;
    }
    let mut f = spec.clone();
    f.switches = 1;
    f.gpu_ports = l;
    f.wires = wires;
    Ok((f, planes, unit))
}

/// Run a batch of transfers.
///
/// # Errors
/// `Config` for bad specs or arrays (lengths, ids, dependency cycles);
/// `Stalled` if transfers remain that can never finish.
pub fn run_batch(spec: &FabricSpec, batch: &TransferBatch, interrupt: &mut dyn Interrupt) -> Result<BatchResult> {
    spec.validate()?;
    validate_batch(batch, spec.gpus)?;
    let (run_spec, planes, reason) = match fold(spec, batch) {
        Ok((f, p)) => (f, p, format!("folded {p} identical planes into one (round-robin spray, every transfer a multiple of planes x links x packet)")),
        Err(why) => (spec.clone(), 1, why),
    };
    let mut sim = FabricSim::new(&run_spec, spec.gpu_ports)?;
    let n = batch.src.len();
    for i in 0..n {
        sim.add_transfer(batch.src[i], batch.dst[i], batch.bytes[i] / planes as u64, i as u32)?;
    }
    let mut off = vec![0u32; n + 1];
    for &a in &batch.after {
        if a >= 0 {
            off[a as usize + 1] += 1;
        }
    }
    for i in 0..n {
        off[i + 1] += off[i];
    }
    let mut fill = off.clone();
    let mut deps = vec![0u32; off[n] as usize];
    for (i, &a) in batch.after.iter().enumerate() {
        if a >= 0 {
            deps[fill[a as usize] as usize] = i as u32;
            fill[a as usize] += 1;
        }
    }
    let mut q = EventQueue::with_capacity(4096);
    for i in 0..n {
        if batch.after[i] < 0 {
            q.schedule(batch.start_ps[i], FEv::StartTransfer(i as u32));
        }
    }
    let mut model = BatchModel { sim, dependents_off: off, dependents: deps, start_ps: batch.start_ps.clone() };
    let summary = engine::run(&mut model, &mut q, u64::MAX, interrupt)?;
    let sim = &mut model.sim;
    if let Some(d) = sim.describe_incomplete() {
        return Err(FlitsimError::Stalled { time_ps: summary.end_ps, detail: d });
    }
    sim.finish(summary.end_ps);
    let mut r = stats_of(sim, run_spec.gpu_ports, summary.events);
    r.start_ps = sim.xfers.iter().map(|x| x.start_ps).collect();
    r.end_ps = sim.xfers.iter().map(|x| x.end_ps).collect();
    r.makespan_ps = r.end_ps.iter().copied().max().unwrap_or(0);
    r.folded_planes = planes;
    r.fold_reason = reason;
    Ok(r)
}

/// Fabric statistics of a finished simulation (transfer arrays left empty).
pub fn stats_of(sim: &FabricSim, gpu_ports: u32, events: u64) -> BatchResult {
    let ports = sim
        .ports_iter()
        .zip(sim.port_fault_stats())
        .enumerate()
        .map(|(i, ((sw, l), (rx_payload_bytes, lost_bytes, rx_replay)))| PortLinkStats {
            gpu: i as u32 / gpu_ports,
            port: i as u32 % gpu_ports,
            switch: sw,
            link: *l.stats(),
            vcs: l.vc_stats().to_vec(),
            rx_payload_bytes,
            lost_bytes,
            rx_replay,
        })
        .collect();
    BatchResult {
        start_ps: Vec::new(),
        end_ps: Vec::new(),
        makespan_ps: 0,
        folded_planes: 1,
        fold_reason: String::new(),
        ports,
        switches: sim.switches().map(|s| s.stats().clone()).collect(),
        switch_cycle_ps: sim.cycle_ps(),
        reorder: sim.reorder.clone(),
        packets: sim.packets_sent,
        events,
        faults: sim.fault_stats(),
        sent_bytes: sim.xfers.iter().filter(|x| x.src != x.dst || x.loopback).map(|x| x.bytes).sum(),
    }
}
