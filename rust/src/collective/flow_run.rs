//! Collectives at flow level (`fidelity = "flow"`) and the automatic choice
//! (`"auto"`): the same lowered DAG runs on [`crate::flow::FlowSim`] instead of
//! the cycle-level fabric; `auto` falls back to packet level where the flow
//! run is outside its validation and says why.

use super::exec::{calibrated_spec, fabric_info, run_collective, sim_packet_spec, Backend, CEv, CollectiveResult, DagExec};
use super::lower::{lower, NodeKind};
use super::params::CollectiveRequest;
use crate::engine::{self, EventQueue, Interrupt, Model, TimePs};
use crate::error::{FlitsimError, Result};
use crate::fabric::{FabricSpec, Fidelity};
use crate::flow::{flow_stats, outside_validation, FlowFabric, FlowSim, FLOW_VALID};

struct FlowDag {
    exec: DagExec,
}

impl Model for FlowDag {
    type Event = CEv;
    fn handle(&mut self, now: TimePs, ev: CEv, q: &mut EventQueue<CEv>) -> Result<()> {
        self.exec.handle(now, ev, q)
    }
}

const WARN: &str = "warning: flow level asked for outside its validation: ";

/// Run one collective at flow level (whatever `spec.fidelity` says).
///
/// # Errors
/// As [`run_collective`].
pub fn run_collective_flow(spec: &FabricSpec, req: &CollectiveRequest, interrupt: &mut dyn Interrupt) -> Result<CollectiveResult> {
    spec.validate()?;
    let info = fabric_info(spec)?;
    let low = lower(req.op, &req.members, req.bytes, &req.params, &info)?;
    let spec = sim_packet_spec(calibrated_spec(spec, req.params.link_efficiency)?, &low.dag, req.params.sim_packet_bytes);
    let mut model = FlowDag { exec: DagExec::new(Backend::Flow(FlowSim::new(&spec)?)) };
    let mut q = EventQueue::with_capacity(1024);
    model.exec.start(0, 0, &low.dag, &mut q)?;
    let summary = engine::run(&mut model, &mut q, u64::MAX, interrupt)?;
    let sim = model.exec.flow().expect("flow backend");
    if let Some(d) = sim.describe_incomplete() {
        return Err(FlitsimError::Stalled { time_ps: summary.end_ps, detail: d });
    }
    let time_ps = model.exec.done.first().map_or(summary.end_ps, |x| x.1);
    let st = flow_stats(sim, summary.events);
    let mut sent = vec![0u64; spec.gpus as usize];
    let mut recv = vec![0u64; spec.gpus as usize];
    for nd in &low.dag.nodes {
        if let NodeKind::Transfer { src, dst, bytes, .. } = *nd {
            sent[src as usize] += bytes;
            recv[dst as usize] += bytes;
        }
    }
    let max_u = st.ports.iter().map(|p| p.link.busy_ps as f64 / time_ps.max(1) as f64).fold(0.0, f64::max);
    Ok(CollectiveResult {
        time_ps,
        algorithm: low.algorithm,
        protocol: low.protocol,
        channels: low.channels,
        chunk_bytes: low.chunk_bytes,
        transfers: low.dag.nodes.iter().filter(|n| matches!(n, NodeKind::Transfer { .. })).count() as u64,
        bytes_sent: sent,
        bytes_received: recv,
        sim_packet_bytes: if spec.sim_packet_bytes == 0 { spec.gpu.payload_bytes as u64 } else { spec.sim_packet_bytes },
        folded_planes: 1,
        fold_reason: "flow level: planes are not simulated one by one".into(),
        packets: st.packets,
        events: summary.events,
        max_link_utilization: max_u,
        credit_exhaustion_episodes: 0,
        arbitration_conflicts: 0,
        estimate_ps: low.estimate_ps,
        faults: Default::default(),
        sent_bytes_on_fabric: sim.xfers.iter().filter(|x| x.src != x.dst || x.loopback).map(|x| x.bytes).sum(),
        rx_payload_bytes: {
            let mut v = vec![0u64; spec.gpus as usize];
            for p in &st.ports {
                v[p.gpu as usize] += p.rx_payload_bytes;
            }
            v
        },
        fidelity: "flow".into(),
        fidelity_reason: match outside_validation(sim) {
            Some(w) => format!("{WARN}{w}"),
            None => FLOW_VALID.into(),
        },
    })
}

/// Run one collective at `spec.fidelity`: `packet` ([`run_collective`], which
/// ignores the field), `flow` or `auto`.
///
/// # Errors
/// As [`run_collective`].
pub fn run_collective_at(spec: &FabricSpec, req: &CollectiveRequest, interrupt: &mut dyn Interrupt) -> Result<CollectiveResult> {
    let mut s = spec.clone();
    match spec.fidelity {
        Fidelity::Packet => run_collective(spec, req, interrupt),
        Fidelity::Flow => run_collective_flow(spec, req, interrupt),
        Fidelity::Auto => {
            s.fidelity = Fidelity::Flow;
            let why = match FlowFabric::new(&s)?.packet_bound {
                Some(w) => w,
                None => {
                    let mut r = run_collective_flow(&s, req, interrupt)?;
                    if r.fidelity_reason == FLOW_VALID {
                        r.fidelity_reason = format!("auto chose flow: {FLOW_VALID}");
                        return Ok(r);
                    }
                    r.fidelity_reason.trim_start_matches(WARN).to_string()
                }
            };
            s.fidelity = Fidelity::Packet;
            let mut r = run_collective(&s, req, interrupt)?;
            r.fidelity_reason = format!("auto chose packet: {why}");
            Ok(r)
        }
    }
}
