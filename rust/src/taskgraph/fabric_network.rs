//! The fabric as a task-graph [`Network`]: transfer tasks run packet by
//! packet; collective tasks are lowered (see [`crate::collective::lower`])
//! and their DAGs run on the same fabric, concurrently with everything else
//! (no folding: work arrives over time). `auto` algorithm / protocol is the
//! pair `collective()` picks for the same request at flow level: the
//! candidates are simulated alone on the same fabric (they cannot be tried on
//! the shared one), once per (operation, group, size), memoized
//! ([`FabricNetwork::collective_choice`]).
//!
//! Replayed collectives (flow level only; exact, not an approximation): a
//! collective that starts on an idle network while nothing else is queued
//! (no task end, release or other network work pending) runs alone until it
//! ends, and its evolution depends only on (operation, group, size,
//! algorithm, protocol) and its transfers' spray rotation (their node index
//! modulo the eligible-port counts of their GPU pairs, 1 on a collapsed
//! fabric): the flow level is shift-invariant in time (integer picoseconds,
//! rates from differences only). The first such run is recorded (duration,
//! the per-resource byte counters it added in exact fixed point, solves,
//! events); a later one with the same key and rotation is replayed from the
//! record: same end time, same counters, bit for bit, without simulating
//! (tests/flow.rs `replayed_collectives_are_bit_identical`). Whether it runs
//! alone is known only once every event queued at its start time before it
//! has been handled, so its start is one queued check event standing where
//! its first node-ready events would stand: a check that fails starts the
//! DAG there, exactly as if it had been queued. `FLITSIM_COLLECTIVE_REPLAY=0`
//! turns replay off (to compare).
//!
//! Isolated collectives (the same records, a wider start condition): executor
//! events may be pending at the check (compute running beside the
//! collective, as in DistriFusion's asynchronous all-gathers), provided no
//! device has a free communication stream and no communication task's end
//! is queued. Streams are freed only by communication tasks' ends, and the
//! network reports none but this collective's, so no network work can start
//! before it ends: the network evolves as if alone. Its end is queued when
//! the replay starts, so at its picosecond it fires before executor events
//! queued later for the same picosecond, where the plain run queues it when
//! its last flow drains (after them). The two orders agree when nothing
//! else happens at that picosecond; the executor checks that, and otherwise
//! returns [`crate::error::FlitsimError::Retry`], on which
//! [`crate::taskgraph::execute_on_fabric`] repeats the run without isolated
//! replays (`isolated_retried`). `FLITSIM_COLLECTIVE_REPLAY_ISOLATED=0`
//! keeps the strict condition only (tests/flow.rs
//! `isolated_replays_are_bit_identical`).

use super::graph::CollectiveKind;
use super::network::{Network, NetworkDone};
use crate::collective::{calibrated_spec, expand, expand_train, fabric_info, lower_best, lower_in, plan, reach_of, run_collective, AUTO_PRUNE_FACTOR, transported, Algorithm, Backend, CEv, CollectiveParams, CollectiveRequest, Dag, DagExec, FabricInfo, NodeKind, Op, Protocol, Reach};
use std::collections::HashSet;
use crate::engine::{FastMap, Scheduler, TimePs};
use crate::flow::FlowReplay;
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

/// Events of the fabric network: the DAG executor's, and the start check of
/// a collective that may be replayed (index into the pending checks).
#[derive(Debug, Clone, Copy)]
pub enum NetEv {
    C(CEv),
    Check(u32),
}

/// Forwards DAG events into the network's scheduler, counting them.
struct Fwd<'a> {
    q: &'a mut dyn Scheduler<NetEv>,
    n: &'a mut u64,
}

impl Scheduler<CEv> for Fwd<'_> {
    #[inline]
    fn schedule(&mut self, t: TimePs, e: CEv) {
        *self.n += 1;
        self.q.schedule(t, NetEv::C(e))
    }
}

/// Collects scheduled events instead of queueing them.
struct Capture(Vec<(TimePs, CEv)>);

impl Scheduler<CEv> for Capture {
    fn schedule(&mut self, t: TimePs, e: CEv) {
        self.0.push((t, e));
    }
}

/// (op, group, bytes, algorithm, protocol) of a replayable collective.
type ReplayKey = (u8, Vec<u32>, u64, u8, u8);

/// One recorded collective run alone: valid for a start whose virtual node
/// index is `residue` modulo `period`.
struct Record {
    period: u32,
    residue: u32,
    nodes: u32,
    duration_ps: u64,
    flow: FlowReplay,
    /// Engine events the run handled beyond the start check.
    events: u64,
}

/// A collective whose start waits for its check event.
struct Pending {
    tag: u32,
    key: ReplayKey,
    op: Op,
    algorithm: Algorithm,
    protocol: Protocol,
    vbase: u32,
    /// Some(record) for a tentative replay (DAG not built), else the DAG's
    /// captured first events and its rotation period.
    replay: Option<usize>,
    readys: Vec<(TimePs, CEv)>,
    period: u32,
    nodes: u32,
}

/// The collective being recorded.
struct Recording {
    tag: u32,
    t0: TimePs,
    key: ReplayKey,
    period: u32,
    residue: u32,
    nodes: u32,
    mark: crate::flow::FlowMark,
    scheduled0: u64,
    readys: u64,
}

/// DAG nodes + flow transfers held before [`FabricNetwork`] drops finished
/// ones at an idle moment (a compaction costs a pass over the instances).
const COMPACT_MIN_HELD: usize = 1 << 16;

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
    choices: FastMap<(u8, Vec<u32>, u64), (Algorithm, Protocol)>,
    /// Replay of collectives run alone (module doc); off at packet level.
    replay_on: bool,
    /// Virtual index of the next DAG node (the array index a run without
    /// replays would give it).
    vnext: u32,
    /// Every DAG's spray numbering starts at 0 (default since stop 15;
    /// `FLITSIM_SPRAY_PER_DAG=0` restores one counter across the task graph):
    /// each collective call maps its transfers to ports afresh, so a step's
    /// state does not carry a counter and the periodic skip repeats at
    /// one-step strides on rotated fabrics (docs/fidelity.md "Spray numbering
    /// per DAG").
    per_dag: bool,
    /// Network operations started and not yet reported done.
    running: u64,
    executor_pending: u64,
    /// Replay of collectives whose devices hold every communication stream
    /// (module doc, "isolated"); on with `replay_on` unless
    /// `FLITSIM_COLLECTIVE_REPLAY_ISOLATED=0` or [`FabricNetwork::set_isolated_replay`].
    isolated_on: bool,
    /// The executor's word, before each network event: no communication
    /// stream is free on any device and no communication task's end is queued.
    comm_isolated: bool,
    /// Tasks replayed while isolated whose end is still queued (their end
    /// must be alone at its picosecond: [`Network::isolated_end`]).
    isolated_inflight: Vec<u32>,
    /// Collectives replayed while isolated (statistics; part of `replayed`).
    pub replayed_isolated: u64,
    /// The run was repeated without isolated replays (an isolated replay's
    /// end shared its picosecond with another event; docs/fidelity.md).
    pub isolated_retried: bool,
    /// DAG events scheduled so far.
    scheduled: u64,
    replayed_events: u64,
    records: FastMap<ReplayKey, Vec<Record>>,
    pending: Vec<Option<Pending>>,
    recording: Option<Recording>,
    /// Collectives replayed / recorded (statistics).
    pub replayed: u64,
    pub recorded: u64,
    /// [`FabricNetwork::all_pairs_rotation`], once computed.
    rotation_lcm: Option<u32>,
    hash_spray: bool,
    pairs_seen: HashSet<(u32, u32)>,
    pairs_lcm: u32,
    /// Held DAG nodes + transfers that trigger a compaction at an idle
    /// moment ([`FabricNetwork::set_compaction`]).
    compact_min_held: usize,
    /// Compactions done (statistics).
    pub compactions: u64,
    /// Plain staged transfers run as chunk trains (flow level only;
    /// [`crate::collective::expand_train`], docs/fidelity.md "Chunk trains"):
    /// `CollectiveParams::chunk_trains` (off by default), `FLITSIM_CHUNK_TRAINS=0` / `1`
    /// over it, or [`FabricNetwork::set_chunk_trains`].
    trains_on: bool,
    /// Plain transfers run as chunk trains (statistics).
    pub trains: u64,
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
        let is_flow = matches!(backend, Backend::Flow(_));
        let trains_on = is_flow
            && match std::env::var("FLITSIM_CHUNK_TRAINS").as_deref() {
                Ok("0") => false,
                Ok("1") => true,
                _ => params.chunk_trains,
            };
        let replay_on = is_flow && s.spray != crate::fabric::Spray::Hash && std::env::var("FLITSIM_COLLECTIVE_REPLAY").map_or(true, |v| v != "0");
        Ok(FabricNetwork {
            exec: DagExec::new(backend),
            info: fabric_info(spec)?,
            params,
            devices: spec.gpus,
            gpu_ports: spec.gpu_ports,
            reach: reach_of(spec)?,
            choice_spec,
            choices: FastMap::default(),
            replay_on,
            vnext: 0,
            per_dag: std::env::var("FLITSIM_SPRAY_PER_DAG").map_or(true, |v| v != "0"),
            running: 0,
            executor_pending: 0,
            isolated_on: replay_on && std::env::var("FLITSIM_COLLECTIVE_REPLAY_ISOLATED").map_or(true, |v| v != "0"),
            comm_isolated: false,
            isolated_inflight: Vec::new(),
            replayed_isolated: 0,
            isolated_retried: false,
            scheduled: 0,
            replayed_events: 0,
            records: FastMap::default(),
            pending: Vec::new(),
            recording: None,
            replayed: 0,
            recorded: 0,
            rotation_lcm: None,
            hash_spray: s.spray == crate::fabric::Spray::Hash,
            pairs_seen: HashSet::new(),
            pairs_lcm: 1,
            compact_min_held: COMPACT_MIN_HELD,
            compactions: 0,
            trains_on,
            trains: 0,
        })
    }

    /// Drop finished DAGs and transfers at idle moments once `min_held`
    /// (DAG nodes + transfers) are held; `usize::MAX`: never. Answers are
    /// the same either way (tests/periodic.rs); default [`COMPACT_MIN_HELD`].
    pub fn set_compaction(&mut self, min_held: usize) {
        self.compact_min_held = min_held;
    }

    /// Memoized flow-level solves on or off (on by default; results are
    /// identical either way, `FlowSim::set_solve_memo`).
    pub fn set_solve_memo(&mut self, on: bool) {
        if let Backend::Flow(f) = &mut self.exec.backend {
            f.set_solve_memo(on);
        }
    }

    /// Flow-level global solves looked up in the memo and how many it
    /// answered ((0, 0) off flow level).
    pub fn solve_memo_counts(&self) -> (u64, u64) {
        self.exec.flow().map_or((0, 0), |f| f.solve_memo_counts())
    }

    /// Group flow-level drains by the port set alone (the opt-in
    /// `FLITSIM_FLOW_PORT_SET_DRAIN=1`, `FlowSim::set_port_set_drain`;
    /// docs/fidelity.md "Rotation-invariant paths"). No effect off flow level.
    /// Call before anything runs.
    pub fn set_port_set_drain(&mut self, on: bool) {
        if let Backend::Flow(f) = &mut self.exec.backend {
            f.set_port_set_drain(on);
        }
    }

    /// Turn replay of collectives run alone on or off (on by default at flow
    /// level; results are identical either way, only the cost differs).
    pub fn set_replay(&mut self, on: bool) {
        self.replay_on = on && matches!(self.exec.backend, Backend::Flow(_));
        self.isolated_on &= self.replay_on;
    }

    /// Replay of isolated collectives (module doc) on or off: on by default
    /// with replay; results are identical either way. Call before anything runs.
    pub fn set_isolated_replay(&mut self, on: bool) {
        self.isolated_on = on && self.replay_on;
    }

    fn flow_idle(&self) -> bool {
        self.exec.flow().is_some_and(|f| f.is_idle())
    }

    /// Record the GPU pairs of a DAG's transfers (their rotation periods,
    /// as [`FabricNetwork::rotation_period`]) for the periodic skip: the
    /// spray of a later DAG node depends on its index only modulo the lcm of
    /// these (`pairs_lcm`; 0 once over 2^20 or where unknown).
    fn note_pairs(&mut self, dag: &Dag) {
        if self.pairs_lcm == 0 {
            return;
        }
        let Backend::Flow(f) = &mut self.exec.backend else {
            self.pairs_lcm = 0;
            return;
        };
        if f.fab.collapsed {
            return;
        }
        let graph = f.fab.graph.is_some();
        let mut ports = Vec::new();
        for n in &dag.nodes {
            if let NodeKind::Transfer { src, dst, .. } = *n {
                if self.pairs_seen.contains(&(src, dst)) {
                    continue;
                }
                self.pairs_seen.insert((src, dst));
                f.fab.topo.eligible_ports(src, dst, &mut ports);
                let e = ports.len().max(1) as u32;
                let d = if graph && src != dst { path_period(f, src, dst, e) } else { e } as u64;
                let l = self.pairs_lcm as u64;
                let l = l / gcd(l, d) * d;
                self.pairs_lcm = if l > 1 << 20 { 0 } else { l as u32 };
                if self.pairs_lcm == 0 {
                    return;
                }
            }
        }
    }

    /// A multiple of every transfer's rotation period on this fabric: the
    /// lcm over GPU pairs of their eligible-port counts (1 collapsed; 0 when
    /// over 2^20, or not at flow level).
    fn all_pairs_rotation(&self) -> u32 {
        let Backend::Flow(f) = &self.exec.backend else { return 0 };
        if f.fab.collapsed {
            return 1;
        }
        let g = f.fab.endpoints();
        let mut ports = Vec::new();
        let mut l: u64 = 1;
        for s in 0..g {
            for d in 0..g {
                f.fab.topo.eligible_ports(s, d, &mut ports);
                let e = ports.len().max(1) as u64;
                l = l / gcd(l, e) * e;
                if l > 1 << 20 {
                    return 0;
                }
            }
        }
        l as u32
    }

    /// Rotation period of a DAG's transfers: the lcm over their GPU pairs of
    /// the smallest rotation step that leaves the pair's flow path unchanged
    /// (on a collapsed fabric every rotation gives the same path: 1; on a
    /// graph fabric the path of every rotation is compared, entries and
    /// figures bit for bit; elsewhere the eligible-port count), capped (0 =
    /// never replay).
    fn rotation_period(&mut self, dag: &Dag) -> u32 {
        let Backend::Flow(f) = &mut self.exec.backend else { return 0 };
        if f.fab.collapsed {
            return 1;
        }
        let graph = f.fab.graph.is_some();
        let mut seen: HashSet<(u32, u32)> = HashSet::new();
        let mut ports = Vec::new();
        let mut l: u64 = 1;
        for n in &dag.nodes {
            if let NodeKind::Transfer { src, dst, .. } = *n {
                if !seen.insert((src, dst)) {
                    continue;
                }
                f.fab.topo.eligible_ports(src, dst, &mut ports);
                let e = ports.len().max(1) as u32;
                let d = if graph && src != dst { path_period(f, src, dst, e) } else { e };
                let d = d as u64;
                l = l / gcd(l, d) * d;
                if l > 1 << 20 {
                    return 0;
                }
            }
        }
        l as u32
    }

    fn lower(&self, op: Op, members: &[u32], bytes: u64, a: Algorithm, pr: Protocol) -> Result<crate::collective::Lowered> {
        transported(lower_in(op, members, bytes, a, pr, &self.params, &self.info, &self.reach)?, &self.reach, &self.params)
    }

    /// Start the captured first events of a DAG now, in order, as if they had
    /// been queued where the check stood.
    fn run_readys(&mut self, now: TimePs, readys: Vec<(TimePs, CEv)>, sched: &mut dyn Scheduler<NetEv>) -> Result<()> {
        self.replayed_events += (readys.len() as u64).saturating_sub(1);
        for (_, ev) in readys {
            let mut f = Fwd { q: &mut *sched, n: &mut self.scheduled };
            self.exec.handle(now, ev, &mut f)?;
        }
        Ok(())
    }

    fn check(&mut self, now: TimePs, id: u32, sched: &mut dyn Scheduler<NetEv>) -> Result<()> {
        let p = self.pending[id as usize].take().expect("one check per pending collective");
        if self.pending.iter().all(|x| x.is_none()) {
            self.pending.clear();
        }
        let idle = self.running == 1 && self.recording.is_none() && self.flow_idle();
        let strict = idle && self.executor_pending == 0;
        // (isolated: executor events may come, but none can start network work before this ends)
        let isolated = idle && !strict && self.isolated_on && self.comm_isolated;
        let alone = strict || isolated;
        match p.replay {
            Some(i) if alone && self.exec.flow().is_some_and(|f| f.can_replay(&self.records[&p.key][i].flow)) => {
                if isolated {
                    self.isolated_inflight.push(p.tag);
                    self.replayed_isolated += 1;
                }
                let r = &self.records[&p.key][i];
                let (dur, ev) = (r.duration_ps, r.events);
                if let crate::collective::Backend::Flow(sim) = &mut self.exec.backend {
                    sim.replay(&self.records[&p.key][i].flow, now);
                }
                self.replayed_events += ev;
                self.replayed += 1;
                self.exec.done.push((p.tag, now + dur));
                Ok(())
            }
            Some(_) => {
                let low = self.lower(p.op, &p.key.1, p.key.2, p.algorithm, p.protocol)?;
                let mut cap = Capture(Vec::new());
                self.note_pairs(&low.dag);
                self.exec.start_virtual(now, p.tag, &low.dag, &mut cap, p.vbase)?;
                self.run_readys(now, cap.0, sched)
            }
            None => {
                if alone && p.period > 0 {
                    let mark = self.exec.flow().expect("flow backend").mark();
                    self.recording = Some(Recording {
                        tag: p.tag,
                        t0: now,
                        key: p.key,
                        period: p.period,
                        residue: p.vbase % p.period,
                        nodes: p.nodes,
                        mark,
                        scheduled0: self.scheduled,
                        readys: (p.readys.len() as u64).saturating_sub(1),
                    });
                }
                self.run_readys(now, p.readys, sched)
            }
        }
    }

    /// Close the recording if its collective just finished alone.
    fn close_recording(&mut self, t: TimePs) {
        let Some(rec) = self.recording.take() else { return };
        let Some(sim) = self.exec.flow() else { return };
        if self.running != 1 || !sim.is_idle() {
            return;
        }
        let Some(flow) = sim.since(&rec.mark, rec.t0) else { return };
        let list = self.records.entry(rec.key).or_default();
        if list.len() < 64 {
            list.push(Record { period: rec.period, residue: rec.residue, nodes: rec.nodes, duration_ps: t - rec.t0, flow, events: rec.readys + (self.scheduled - rec.scheduled0) });
            self.recorded += 1;
        }
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
        if let Some(tag) = self.recording.as_ref().map(|r| r.tag) {
            if let Some(&(_, t)) = self.exec.done.iter().find(|d| d.0 == tag) {
                self.close_recording(t);
            }
        }
        self.running -= (self.exec.done.len() + self.exec.plain_done.len()) as u64;
        done.append(&mut self.exec.done);
        done.append(&mut self.exec.plain_done);
        // Nothing in flight (every operation reported, no start check or
        // recording open): finished DAGs and transfers are dropped, so memory
        // is bounded by the work between idle moments (a Flux.1-dev 8192 px
        // Ring run kept ~0.6 GB per diffusion step of them).
        if self.running == 0
            && self.pending.is_empty()
            && self.recording.is_none()
            && self.exec.nodes_held() + self.exec.flow().map_or(0, |f| f.transfers_held()) >= self.compact_min_held
            && self.exec.compact()
        {
            self.compactions += 1;
        }
    }
}

impl FabricNetwork {
    /// Spray numbering per DAG (true, the default) or one running counter
    /// across the task graph (false; tests of multi-step strides use it).
    pub fn set_spray_per_dag(&mut self, on: bool) {
        self.per_dag = on;
    }

    /// Run plain staged transfers as chunk trains (flow level only) or chunk
    /// by chunk (false, the default: the reference).
    pub fn set_chunk_trains(&mut self, on: bool) {
        self.trains_on = on && self.exec.flow().is_some();
    }

    /// Move the task graph's spray numbering past a DAG of `k` nodes (not with `per_dag`).
    fn advance(&mut self, k: u32) {
        if !self.per_dag {
            self.vnext = self.vnext.wrapping_add(k);
        }
    }
}

impl Network for FabricNetwork {
    type Event = NetEv;

    fn devices(&self) -> u32 {
        self.devices
    }

    fn start_transfer(&mut self, now: TimePs, tag: u32, src: u32, dst: u32, bytes: u64, sched: &mut dyn Scheduler<NetEv>, done: &mut NetworkDone) -> Result<()> {
        // A plain transfer whose transport is more than one P2P hop runs as
        // its transport's sub-DAG (Simple protocol overheads: a bulk copy).
        self.running += 1;
        let tp = self.params.transport_params();
        let sub = match self.exec.flow_mut() {
            Some(flow) if self.trains_on => expand_train(src, dst, bytes, &self.reach, &tp, Protocol::Simple, &mut |a, b| flow.path_latency_ps(a, b))?.map(|(d, train)| {
                self.trains += u64::from(train);
                d
            }),
            _ => expand(&Dag { nodes: vec![NodeKind::Transfer { src, dst, bytes, loopback: false, min_ps: 0 }], edges: Vec::new() }, &self.reach, &tp, Protocol::Simple)?,
        };
        match sub {
            Some(d) => {
                let vbase = self.vnext;
                self.advance(d.nodes.len() as u32);
                self.note_pairs(&d);
                let mut f = Fwd { q: sched, n: &mut self.scheduled };
                self.exec.start_virtual(now, tag, &d, &mut f, vbase)?
            }
            None => {
                let mut f = Fwd { q: sched, n: &mut self.scheduled };
                self.exec.start_plain(now, tag, src, dst, bytes, &mut f)?
            }
        }
        self.drain(done);
        Ok(())
    }

    fn start_collective(&mut self, now: TimePs, tag: u32, members: &[u32], kind: CollectiveKind, bytes: u64, sched: &mut dyn Scheduler<NetEv>, done: &mut NetworkDone) -> Result<()> {
        let op = op_of(kind);
        let (a, pr) = self.collective_choice(op, members, bytes)?;
        let candidate = self.replay_on && self.vnext < 1 << 31 && self.running == 0 && self.recording.is_none() && self.flow_idle();
        self.running += 1;
        let key: ReplayKey = (op as u8, members.to_vec(), bytes, a as u8, pr as u8);
        if candidate {
            let flow = self.exec.flow().expect("replay is on at flow level only");
            let hit = self.records.get(&key).and_then(|v| v.iter().position(|r| self.vnext % r.period == r.residue && flow.can_replay(&r.flow)));
            if let Some(i) = hit {
                // tentative replay: the DAG is built only if the check fails
                let vbase = self.vnext;
                self.advance(self.records[&key][i].nodes);
                let id = self.pending.len() as u32;
                self.pending.push(Some(Pending { tag, key, op, algorithm: a, protocol: pr, vbase, replay: Some(i), readys: Vec::new(), period: 0, nodes: 0 }));
                sched.schedule(now, NetEv::Check(id));
                return Ok(());
            }
        }
        let low = self.lower(op, members, bytes, a, pr)?;
        let vbase = self.vnext;
        let m = low.dag.nodes.len() as u32;
        self.advance(m);
        if candidate && m > 0 {
            let period = self.rotation_period(&low.dag);
            let mut cap = Capture(Vec::new());
            self.note_pairs(&low.dag);
            self.exec.start_virtual(now, tag, &low.dag, &mut cap, vbase)?;
            let id = self.pending.len() as u32;
            self.pending.push(Some(Pending { tag, key, op, algorithm: a, protocol: pr, vbase, replay: None, readys: cap.0, period, nodes: m }));
            sched.schedule(now, NetEv::Check(id));
            return Ok(());
        }
        self.note_pairs(&low.dag);
        let mut f = Fwd { q: sched, n: &mut self.scheduled };
        self.exec.start_virtual(now, tag, &low.dag, &mut f, vbase)?;
        self.drain(done);
        Ok(())
    }

    fn handle(&mut self, now: TimePs, ev: NetEv, sched: &mut dyn Scheduler<NetEv>, done: &mut NetworkDone) -> Result<()> {
        match ev {
            NetEv::C(e) => {
                let mut f = Fwd { q: sched, n: &mut self.scheduled };
                self.exec.handle(now, e, &mut f)?;
            }
            NetEv::Check(id) => self.check(now, id, sched)?,
        }
        self.drain(done);
        Ok(())
    }

    fn set_executor_pending(&mut self, pending: u64) {
        self.executor_pending = pending;
    }

    fn set_comm_isolated(&mut self, isolated: bool) {
        self.comm_isolated = isolated;
    }

    fn isolated_end(&mut self, tag: u32) -> bool {
        match self.isolated_inflight.iter().position(|&t| t == tag) {
            Some(i) => {
                self.isolated_inflight.swap_remove(i);
                true
            }
            None => false,
        }
    }

    fn replayed_events(&self) -> u64 {
        self.replayed_events
    }

    fn periodic_state(&mut self, now: TimePs, task_base: u32, events: &[&NetEv], out: &mut Vec<u64>) -> bool {
        // Flow level only (the packet level's live state is not encoded); no
        // start check queued, nothing being recorded. The live state: running
        // operations, the DAGs and flows in flight (relative: tags to
        // `task_base`, nodes to their instance, times to now, work and rates
        // bit for bit), the spray rotation of the next DAG node (its index
        // modulo the ports' rotation period) and the memos (choices, records:
        // equal counts, so the same ones exist).
        if !self.pending.is_empty() || self.recording.is_some() || self.hash_spray {
            return false; // the hash spreads by transfer id
        }
        if !matches!(self.exec.backend, Backend::Flow(_)) {
            return false;
        }
        // the pairs' rotations seen so far (equal at two anchors: no new pair
        // in between, so the same ones repeat), else the whole fabric's
        let l = if self.pairs_lcm > 0 {
            self.pairs_lcm
        } else {
            match self.rotation_lcm {
                Some(l) => l,
                None => {
                    let l = self.all_pairs_rotation();
                    self.rotation_lcm = Some(l);
                    l
                }
            }
        };
        if l == 0 {
            return false;
        }
        let mut cevs = Vec::with_capacity(events.len());
        for e in events {
            match e {
                NetEv::C(c) => cevs.push(c),
                NetEv::Check(_) => return false,
            }
        }
        out.extend_from_slice(&[
            self.running,
            l as u64,
            self.pairs_seen.len() as u64,
            (self.vnext % l) as u64,
            (self.vnext >= 1 << 31) as u64,
            self.records.values().map(|v| v.len()).sum::<usize>() as u64,
            self.choices.len() as u64,
            self.replay_on as u64,
            self.isolated_on as u64,
            self.isolated_inflight.len() as u64,
        ]);
        // isolated replays in flight (their ends are the executor's queued events)
        let at = out.len();
        out.extend(self.isolated_inflight.iter().map(|&t| t.wrapping_sub(task_base) as u64));
        out[at..].sort_unstable();
        self.exec.periodic_encode(now, task_base, l, &cevs, out)
    }

    fn periodic_counters(&self, out: &mut Vec<i64>) {
        out.extend_from_slice(&[self.vnext as i64, self.scheduled as i64, self.replayed_events as i64, self.replayed as i64, self.recorded as i64, self.replayed_isolated as i64]);
        if let Some(f) = self.exec.flow() {
            f.periodic_counters(out);
        }
    }

    fn periodic_advance(&mut self, _now: TimePs, delta: &[i64], m: u64, dt_ps: u64, sh: u32, events: &[&NetEv]) -> bool {
        let v = self.vnext as u64 + delta[0] as u64 * m;
        if delta[0] < 0 || v >= 1 << 32 || (self.vnext < 1 << 31 && v >= 1 << 31) || delta[1..6].iter().any(|&d| d < 0) {
            return false;
        }
        let cevs: Vec<&CEv> = events.iter().filter_map(|e| if let NetEv::C(c) = e { Some(c) } else { None }).collect();
        if cevs.len() != events.len() {
            return false;
        }
        let Backend::Flow(f) = &mut self.exec.backend else { return false };
        if !f.periodic_advance(&delta[6..], m) {
            return false;
        }
        if !self.exec.periodic_shift(&cevs, sh, dt_ps) {
            return false; // not reached: periodic_state encoded this state
        }
        self.vnext = v as u32;
        self.scheduled += delta[1] as u64 * m;
        self.replayed_events += delta[2] as u64 * m;
        self.replayed += delta[3] as u64 * m;
        self.recorded += delta[4] as u64 * m;
        self.replayed_isolated += delta[5] as u64 * m;
        for t in &mut self.isolated_inflight {
            *t = t.wrapping_add(sh);
        }
        true
    }

    fn finish(&mut self, end_ps: TimePs) {
        if let Backend::Fabric(sim) = &mut self.exec.backend {
            sim.finish(end_ps);
        }
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// Smallest d dividing `e` with the path and drain group of rotation k equal
/// to those of k + d for every k (graph fabrics: a round-robin path does not
/// depend on the rotation; its drain group, the bundle of the port the spray
/// starts on, does unless the opt-in port-set drain is on; the same for any
/// size).
fn path_period(f: &mut crate::flow::FlowSim, src: u32, dst: u32, e: u32) -> u32 {
    let mut sig = Vec::with_capacity(e as usize);
    let port_set = f.port_set_drain();
    let fab = &mut f.fab;
    for k in 0..e {
        let mut out = Vec::new();
        match fab.path(src, dst, 1 << 20, 0, k, &mut out) {
            Ok((lanes, work, cap, pkt, lat)) => {
                let group = if port_set { 0 } else { fab.graph.as_ref().map_or(0, |g| g.last_group) };
                sig.push((out.iter().map(|&(r, c)| (r, c.to_bits())).collect::<Vec<_>>(), lanes, work.to_bits(), cap.to_bits(), pkt.to_bits(), lat, group));
            }
            Err(_) => return e,
        }
    }
    (1..=e).find(|&d| e % d == 0 && (0..e).all(|k| sig[k as usize] == sig[((k + d) % e) as usize])).unwrap_or(e)
}

