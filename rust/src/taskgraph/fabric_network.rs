//! The fabric as a task-graph [`Network`]: transfer tasks run packet by
//! packet; collective tasks are lowered (see [`crate::collective::lower`])
//! and their DAGs run on the same fabric, concurrently with everything else
//! (no folding: work arrives over time). `auto` algorithm / protocol is the
//! pair `collective()` picks for the same request at flow level: the
//! candidates are simulated alone on the same fabric (they cannot be tried on
//! the shared one), once per (operation, group, size), memoized
//! ([`FabricNetwork::collective_choice`]).

use super::graph::CollectiveKind;
use super::network::{Network, NetworkDone};
use crate::collective::{calibrated_spec, expand, fabric_info, lower_best, lower_in, plan, reach_of, run_collective, AUTO_PRUNE_FACTOR, transported, Algorithm, Backend, CEv, CollectiveParams, CollectiveRequest, Dag, DagExec, FabricInfo, NodeKind, Op, Protocol, Reach};
use std::collections::HashMap;
use crate::engine::{Scheduler, TimePs};
use crate::error::Result;
use crate::fabric::{FabricSim, FabricSpec};

/// The collective operation of a task-graph collective kind.
fn op_of(k: CollectiveKind) -> Op {
    match k {
        CollectiveKind::AllReduce => Op::AllReduce,
        CollectiveKind::AllGather => Op::AllGather,
        CollectiveKind::ReduceScatter => Op::ReduceScatter,
        CollectiveKind::AllToAll => Op::AllToAll,
        CollectiveKind::Broadcast => Op::Broadcast,
        CollectiveKind::Reduce => Op::Reduce,
    }
}

pub struct FabricNetwork {
    pub exec: DagExec,
    info: FabricInfo,
    params: CollectiveParams,
    devices: u32,
    gpu_ports: u32,
    /// Route facts for the transports of every transfer.
    reach: Reach,
    /// The fabric at flow level, where `auto` simulates its candidates alone
    /// (None with faults, which flow level refuses; there, and where a flow
    /// run fails, the closed-form estimate picks).
    choice_spec: Option<FabricSpec>,
    /// (op, group, bytes) -> the simulated `auto` choice.
    choices: HashMap<(u8, Vec<u32>, u64), (Algorithm, Protocol)>,
}

impl FabricNetwork {
    /// A network with the default (calibrated) collective parameters; plain
    /// transfers see the fabric exactly as specified.
    pub fn new(spec: &FabricSpec) -> Result<Self> {
        Self::with_params(spec, CollectiveParams::default(), false)
    }

    /// With explicit collective parameters; `calibrate` applies the
    /// calibrated GPU injection limit (`link_efficiency`) to every transfer.
    pub fn with_params(spec: &FabricSpec, params: CollectiveParams, calibrate: bool) -> Result<Self> {
        params.validate()?;
        let s = if calibrate { calibrated_spec(spec, params.link_efficiency)? } else { spec.clone() };
        // `flow` runs transfers at flow level; `auto` is decided by the caller
        // (crate::taskgraph::execute_on_fabric), which builds this at one of the two.
        let backend = match s.fidelity {
            crate::fabric::Fidelity::Flow => Backend::Flow(crate::flow::FlowSim::new(&s)?),
            _ => Backend::Fabric(FabricSim::new(&s, s.gpu_ports)?),
        };
        let choice_spec = spec.faults.is_empty().then(|| {
            let mut flow = spec.clone();
            flow.fidelity = crate::fabric::Fidelity::Flow;
            flow
        });
        Ok(FabricNetwork { exec: DagExec::new(backend), info: fabric_info(spec)?, params, devices: spec.gpus, gpu_ports: spec.gpu_ports, reach: reach_of(spec)?, choice_spec, choices: HashMap::new() })
    }

    /// The (algorithm, protocol) a collective task of `op` over `members` of
    /// `bytes` runs with: the parameters' own pair when both are given, else
    /// the fastest the simulator finds for the request alone at flow level
    /// (exactly `run_collective` on the fabric at `fidelity = "flow"`, so the
    /// task graph and `collective(..., fidelity="flow")` agree), memoized per
    /// (op, group, size). With faults in the spec: the closed-form estimate.
    ///
    /// # Errors
    /// As [`run_collective`] and [`lower_best`].
    pub fn collective_choice(&mut self, op: Op, members: &[u32], bytes: u64) -> Result<(Algorithm, Protocol)> {
        let p = &self.params;
        if p.algorithm != Algorithm::Auto && p.protocol != Protocol::Auto {
            return Ok((p.algorithm, p.protocol));
        }
        let key = (op as u8, members.to_vec(), bytes);
        if let Some(&c) = self.choices.get(&key) {
            return Ok(c);
        }
        // as run_collective: only candidates within AUTO_PRUNE_FACTOR of the best
        // estimate are simulated; a lone one is the choice without simulating
        let cands = plan(op, members, bytes, p, &self.info, &self.reach)?;
        let best_est = cands.iter().map(|c| c.2).fold(f64::INFINITY, f64::min);
        let near: Vec<(Algorithm, Protocol)> = cands.iter().filter(|c| c.2 <= best_est * AUTO_PRUNE_FACTOR).map(|c| (c.0, c.1)).collect();
        let c = match &self.choice_spec {
            _ if near.len() == 1 => near[0],
            Some(spec) => {
                let req = CollectiveRequest { op, members: members.to_vec(), bytes, params: p.clone() };
                match run_collective(spec, &req, &mut crate::engine::NoInterrupt) {
                    Ok(r) => (r.algorithm, r.protocol),
                    // flow level refuses this fabric: the closed form picks (a bad
                    // request fails the same way in lowering below)
                    Err(_) => {
                        let low = lower_best(op, members, bytes, p, &self.info, &self.reach)?;
                        (low.algorithm, low.protocol)
                    }
                }
            }
            None => {
                let low = lower_best(op, members, bytes, p, &self.info, &self.reach)?;
                (low.algorithm, low.protocol)
            }
        };
        self.choices.insert(key, c);
        Ok(c)
    }

    /// Fabric statistics after the task graph ran (links, switch ports,
    /// reorder buffers; transfer arrays empty), over `makespan_ps`.
    pub fn stats(&self, makespan_ps: u64, events: u64) -> crate::fabric::BatchResult {
        let mut r = crate::fabric::BatchResult::default();
        if let Some(sim) = self.exec.fabric() {
            r.stats = crate::fabric::stats_of(sim, self.gpu_ports, events);
            r.fidelity = "packet".into();
        }
        if let Some(sim) = self.exec.flow() {
            r.stats = crate::flow::flow_stats(sim, events);
            r.fidelity = "flow".into();
        }
        r.makespan_ps = makespan_ps;
        r.folded_planes = 1;
        r.fold_reason = "not folded: task-graph work arrives over time".into();
        r
    }

    /// Per task (indexed by tag, `tasks` long): the credit wait its
    /// transfers saw at their source ports, per lane, ps. A plain transfer:
    /// its credit-blocked time / lanes; a collective: the sum over its
    /// transfers of that, divided by the number of distinct sources (one
    /// chain of steps per rank).
    pub fn task_credit_wait_ps(&self, tasks: usize) -> Vec<u64> {
        let mut out = vec![0f64; tasks];
        let Some(sim) = self.exec.fabric() else { return vec![0; tasks] };
        let mut sources: Vec<std::collections::BTreeSet<u32>> = vec![Default::default(); tasks];
        for (x, xf) in sim.xfers.iter().enumerate() {
            let tag = self.exec.task_of_transfer(x as u32, xf.tag) as usize;
            if tag < tasks {
                out[tag] += xf.credit_wait_ps as f64 / xf.lanes.max(1) as f64;
                sources[tag].insert(xf.src);
            }
        }
        out.iter().zip(&sources).map(|(w, s)| (w / s.len().max(1) as f64).round() as u64).collect()
    }

    /// Protocol packets sent so far (flow level: payload / packet payload).
    pub fn packets_sent(&self) -> u64 {
        match (self.exec.fabric(), self.exec.flow()) {
            (Some(s), _) => s.packets_sent,
            (None, Some(s)) => crate::flow::flow_stats(s, 0).packets,
            _ => 0,
        }
    }

    /// Why a flow-level run is outside the flow level's validation (None when
    /// inside it, or at packet level).
    pub fn flow_outside_validation(&self) -> Option<String> {
        self.exec.flow().and_then(crate::flow::outside_validation)
    }

    fn drain(&mut self, done: &mut NetworkDone) {
        done.append(&mut self.exec.done);
        done.append(&mut self.exec.plain_done);
    }
}

impl Network for FabricNetwork {
    type Event = CEv;

    fn devices(&self) -> u32 {
        self.devices
    }

    fn start_transfer(&mut self, now: TimePs, tag: u32, src: u32, dst: u32, bytes: u64, sched: &mut dyn Scheduler<CEv>, done: &mut NetworkDone) -> Result<()> {
        // A plain transfer whose transport is more than one P2P hop runs as
        // its transport's sub-DAG (Simple protocol overheads: a bulk copy).
        let one = Dag { nodes: vec![NodeKind::Transfer { src, dst, bytes, loopback: false, min_ps: 0 }], edges: Vec::new() };
        match expand(&one, &self.reach, &self.params.transport_params(), Protocol::Simple)? {
            Some(d) => self.exec.start(now, tag, &d, sched)?,
            None => self.exec.start_plain(now, tag, src, dst, bytes, sched)?,
        }
        self.drain(done);
        Ok(())
    }

    fn start_collective(&mut self, now: TimePs, tag: u32, members: &[u32], kind: CollectiveKind, bytes: u64, sched: &mut dyn Scheduler<CEv>, done: &mut NetworkDone) -> Result<()> {
        let op = op_of(kind);
        let (a, pr) = self.collective_choice(op, members, bytes)?;
        let low = transported(lower_in(op, members, bytes, a, pr, &self.params, &self.info, &self.reach)?, &self.reach, &self.params)?;
        self.exec.start(now, tag, &low.dag, sched)?;
        self.drain(done);
        Ok(())
    }

    fn handle(&mut self, now: TimePs, ev: CEv, sched: &mut dyn Scheduler<CEv>, done: &mut NetworkDone) -> Result<()> {
        self.exec.handle(now, ev, sched)?;
        self.drain(done);
        Ok(())
    }

    fn finish(&mut self, end_ps: TimePs) {
        if let Backend::Fabric(sim) = &mut self.exec.backend {
            sim.finish(end_ps);
        }
    }
}
