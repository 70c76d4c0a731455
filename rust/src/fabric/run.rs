//! Running transfers on a fabric: the batch API (arrays in, completion times
//! and statistics out; plane folding decided by [`super::fold`]).

use super::fold::FoldPlan;
use super::sim::{FEv, FabricSim};
use super::spec::FabricSpec;
use crate::engine::{self, EventQueue, Interrupt, Model, TimePs};
use crate::error::{ensure, FlitsimError, Result};
use super::stats::{stats_of, FabricStats};
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

impl TransferBatch {
    /// Who waits for whom, as CSR: the transfers that wait for transfer `i`
    /// (its `after` is `i`) are `deps[off[i]..off[i + 1]]`, in index order.
    /// Shared by the packet and flow batch runs.
    pub fn dependents(&self) -> (Vec<u32>, Vec<u32>) {
        let n = self.after.len();
        let mut off = vec![0u32; n + 1];
        for &a in &self.after {
            if a >= 0 {
                off[a as usize + 1] += 1;
            }
        }
        for i in 0..n {
            off[i + 1] += off[i];
        }
        let mut fill = off.clone();
        let mut deps = vec![0u32; off[n] as usize];
        for (i, &a) in self.after.iter().enumerate() {
            if a >= 0 {
                deps[fill[a as usize] as usize] = i as u32;
                fill[a as usize] += 1;
            }
        }
        (off, deps)
    }
}

/// Outcome of a batch: per-transfer times, the folding decision and the
/// fabric's statistics.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BatchResult {
    pub start_ps: Vec<u64>,
    pub end_ps: Vec<u64>,
    pub makespan_ps: u64,
    /// Planes folded into one (1 = no folding).
    pub folded_planes: u32,
    /// Why folding was or was not applied.
    pub fold_reason: String,
    #[serde(flatten)]
    pub stats: FabricStats,
    /// Fidelity that ran (`packet` or `flow`) and why (auto's choice, or a
    /// warning where flow level was asked for outside its validation).
    pub fidelity: String,
    pub fidelity_reason: String,
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

pub(crate) fn validate_batch(b: &TransferBatch, gpus: u32) -> Result<()> {
    let n = b.src.len();
    for (name, len) in [("dst", b.dst.len()), ("bytes", b.bytes.len()), ("start_ps", b.start_ps.len()), ("after", b.after.len())] {
        ensure(len == n, name, format!("length {len}"), &format!("one entry per transfer ({n})"))?;
    }
    for i in 0..n {
        ensure(b.src[i] < gpus, &format!("src[{i}]"), b.src[i], &format!("a GPU (or host endpoint) id in 0..{gpus}"))?;
        ensure(b.dst[i] < gpus, &format!("dst[{i}]"), b.dst[i], &format!("a GPU (or host endpoint) id in 0..{gpus}"))?;
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

/// Run a batch of transfers.
///
/// # Errors
/// `Config` for bad specs or arrays (lengths, ids, dependency cycles);
/// `Stalled` if transfers remain that can never finish.
pub fn run_batch(spec: &FabricSpec, batch: &TransferBatch, interrupt: &mut dyn Interrupt) -> Result<BatchResult> {
    spec.validate()?;
    validate_batch(batch, spec.endpoints())?;
    let plan = FoldPlan::new(spec, (0..batch.bytes.len()).map(|i| (batch.src[i], batch.dst[i], batch.bytes[i])));
    let (run_spec, planes, reason) = (plan.spec, plan.planes, plan.reason);
    let mut sim = FabricSim::new(&run_spec, spec.gpu_ports)?;
    let n = batch.src.len();
    for i in 0..n {
        sim.add_transfer(batch.src[i], batch.dst[i], batch.bytes[i] / planes as u64, i as u32)?;
    }
    let (off, deps) = batch.dependents();
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
    let mut r = BatchResult { stats: stats_of(sim, run_spec.gpu_ports, summary.events), ..Default::default() };
    r.start_ps = sim.xfers.iter().map(|x| x.start_ps).collect();
    r.end_ps = sim.xfers.iter().map(|x| x.end_ps).collect();
    r.makespan_ps = r.end_ps.iter().copied().max().unwrap_or(0);
    r.folded_planes = planes;
    r.fold_reason = reason;
    r.fidelity = "packet".into();
    Ok(r)
}

