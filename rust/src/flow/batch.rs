//! Batches of transfers at flow level, and the fidelity dispatch of the
//! batch API (`packet` | `flow` | `auto`).

use super::sim::{Filling, FlowEv, FlowSim};
use super::stats::flow_stats;
use super::{outside_validation, FLOW_VALID};
use crate::engine::{self, EventQueue, Interrupt, Model, TimePs};
use crate::error::{FlitsimError, Result};
use crate::fabric::{run_batch, validate_batch, BatchResult, FabricSpec, Fidelity, TransferBatch};

struct FlowBatch {
    sim: FlowSim,
    dependents_off: Vec<u32>,
    dependents: Vec<u32>,
    start_ps: Vec<u64>,
}

impl Model for FlowBatch {
    type Event = FlowEv;
    fn handle(&mut self, now: TimePs, ev: FlowEv, q: &mut EventQueue<FlowEv>) -> Result<()> {
        self.sim.handle(now, ev, q)?;
        while let Some((x, t)) = self.sim.completed.pop() {
            let x = x as usize;
            for k in self.dependents_off[x]..self.dependents_off[x + 1] {
                let d = self.dependents[k as usize];
                q.schedule(t.max(self.start_ps[d as usize]), FlowEv::Start(d));
            }
        }
        Ok(())
    }
}

/// Run a batch at flow level, whatever `spec.fidelity` says; the result's
/// `fidelity_reason` carries a warning when the run is outside the flow
/// level's validation (credit-bound hop, FIFO queueing, incast).
///
/// # Errors
/// `Config` for bad specs or arrays; `Stalled` if flows remain unfinished.
pub fn run_batch_flow(spec: &FabricSpec, batch: &TransferBatch, interrupt: &mut dyn Interrupt) -> Result<BatchResult> {
    run_batch_flow_filling(spec, batch, None, interrupt)
}

/// [`run_batch_flow`] with the filling chosen (`Some`); None = the default
/// ([`Filling`], `FlowSim::set_filling`).
///
/// # Errors
/// As [`run_batch_flow`].
pub fn run_batch_flow_filling(spec: &FabricSpec, batch: &TransferBatch, filling: Option<Filling>, interrupt: &mut dyn Interrupt) -> Result<BatchResult> {
    spec.validate()?;
    validate_batch(batch, spec.endpoints())?;
    let mut sim = FlowSim::new(spec)?;
    if let Some(f) = filling {
        sim.set_filling(f);
    }
    let n = batch.src.len();
    for i in 0..n {
        sim.add_transfer(batch.src[i], batch.dst[i], batch.bytes[i], i as u32)?;
    }
    let (off, deps) = batch.dependents();
    let mut q = EventQueue::with_capacity(1024);
    for i in 0..n {
        if batch.after[i] < 0 {
            q.schedule(batch.start_ps[i], FlowEv::Start(i as u32));
        }
    }
    let mut model = FlowBatch { sim, dependents_off: off, dependents: deps, start_ps: batch.start_ps.clone() };
    let summary = engine::run(&mut model, &mut q, u64::MAX, interrupt)?;
    let sim = &model.sim;
    if let Some(d) = sim.describe_incomplete() {
        return Err(FlitsimError::Stalled { time_ps: summary.end_ps, detail: d });
    }
    let mut r = BatchResult { stats: flow_stats(sim, summary.events), folded_planes: 1, ..Default::default() };
    r.start_ps = sim.xfers.iter().map(|x| x.start_ps).collect();
    r.end_ps = sim.xfers.iter().map(|x| x.end_ps).collect();
    r.makespan_ps = r.end_ps.iter().copied().max().unwrap_or(0);
    r.fold_reason = "flow level: planes are not simulated one by one".into();
    r.fidelity = "flow".into();
    r.fidelity_reason = match outside_validation(sim) {
        Some(why) => format!("warning: flow level asked for outside its validation: {why}"),
        None => FLOW_VALID.into(),
    };
    Ok(r)
}

/// Run a batch at the fidelity `spec.fidelity` names. `auto`: flow level,
/// then packet level instead if the flow run is outside its validation
/// (the reason says which and why).
///
/// # Errors
/// As [`run_batch`] and [`run_batch_flow`].
pub fn run_batch_at(spec: &FabricSpec, batch: &TransferBatch, interrupt: &mut dyn Interrupt) -> Result<BatchResult> {
    match spec.fidelity {
        Fidelity::Packet => run_batch(spec, batch, interrupt),
        Fidelity::Flow => run_batch_flow(spec, batch, interrupt),
        Fidelity::Auto => {
            let mut s = spec.clone();
            s.fidelity = Fidelity::Flow;
            let why = match crate::flow::FlowFabric::new(&s)?.packet_bound {
                Some(w) => Some(w),
                None => {
                    let r = run_batch_flow(&s, batch, interrupt)?;
                    if r.fidelity_reason == FLOW_VALID {
                        let mut r = r;
                        r.fidelity_reason = format!("auto chose flow: {FLOW_VALID}");
                        return Ok(r);
                    }
                    Some(r.fidelity_reason.trim_start_matches("warning: flow level asked for outside its validation: ").to_string())
                }
            };
            s.fidelity = Fidelity::Packet;
            let mut r = run_batch(&s, batch, interrupt)?;
            r.fidelity_reason = format!("auto chose packet: {}", why.unwrap_or_default());
            Ok(r)
        }
    }
}
