//! The automatic fidelity choice for collectives (`fidelity = "auto"`): flow
//! level (run by [`run_collective`] on a spec that says `flow`), then packet
//! level instead where the flow run is outside its validation; the result
//! says which ran and why. And the flow level's rank fold ([`run_flow_folded`]).

use super::dag::{Backend, CEv, DagExec};
use super::lower::{algo_name, Dag, Lowered, NodeKind};
use super::params::{CollectiveRequest, Op};
use super::run::{calibrated_spec, choose_sim_packets, fabric_info, reach_of, run_collective, transported, CollectiveResult, AUTO_PRUNE_FACTOR};
use super::tiers::{lower_best, lower_in, plan};
use super::transport::Reach;
use crate::engine::{self, EventQueue, Interrupt, Model, TimePs};
use crate::error::{FlitsimError, Result};
use crate::fabric::{FabricSpec, Fidelity};
use crate::flow::{flow_stats, outside_validation, FlowFabric, FlowSim, FLOW_VALID};

const WARN: &str = "warning: flow level asked for outside its validation: ";

/// Run one collective at `spec.fidelity` (`packet`, `flow` or `auto`).
///
/// # Errors
/// As [`run_collective`].
pub fn run_collective_at(spec: &FabricSpec, req: &CollectiveRequest, interrupt: &mut dyn Interrupt) -> Result<CollectiveResult> {
    if spec.fidelity != Fidelity::Auto {
        if let Some(r) = run_flow_folded(spec, req, interrupt)? {
            return Ok(r);
        }
        return run_collective(spec, req, interrupt);
    }
    let mut s = spec.clone();
    s.fidelity = Fidelity::Flow;
    let why = match FlowFabric::new(&s)?.packet_bound {
        Some(w) => w,
        None => {
            let mut r = match run_flow_folded(&s, req, interrupt)? {
                Some(r) => r,
                None => run_collective(&s, req, interrupt)?,
            };
            if r.fidelity_reason == FLOW_VALID {
                r.fidelity_reason = format!("auto chose flow: {FLOW_VALID}");
                return Ok(r);
            }
            r.fidelity_reason.trim_start_matches(WARN).to_string()
        }
    };
    s.fidelity = Fidelity::Packet;
    let mut r = run_collective(&s, req, interrupt)?;
    r.fidelity = "packet".into();
    r.fidelity_reason = format!("auto chose packet: {why}");
    Ok(r)
}

struct FoldModel(DagExec);

impl Model for FoldModel {
    type Event = CEv;
    fn handle(&mut self, now: TimePs, ev: CEv, q: &mut EventQueue<CEv>) -> Result<()> {
        self.0.handle_q(now, ev, q)
    }
}

/// The flow level's rank fold: an all-to-all over every GPU of a collapsed
/// one-layer fabric whose GPUs the flow model treats alike
/// ([`FlowFabric::gpus_alike`]), lowered to a DAG that is the same for every
/// rank up to g -> g + 1 ([`rank_zero_dag`]), runs rank 0's part alone with
/// each transfer loading its source's downlink in place of its destination's
/// (the rotation that takes it there: rank 0 receives, from all ranks, the
/// rotations of what it sends). Exact: the whole problem is invariant under
/// the rotation, max-min fair rates are unique (so invariant), each resource
/// sees the same flows with coefficient 1 (integer weights: the same filling
/// steps), drains tie per source as before, and every other rank's statistics
/// are rank 0's. `events` counts the folded run's events.
/// `FLITSIM_FLOW_FOLD=0` turns it off (the tests compare both).
/// None where it does not apply (the caller runs the whole fabric).
///
/// # Errors
/// As [`run_collective`].
pub fn run_flow_folded(spec: &FabricSpec, req: &CollectiveRequest, interrupt: &mut dyn Interrupt) -> Result<Option<CollectiveResult>> {
    let n = spec.gpus;
    let env_is = |k: &str, v: &str| std::env::var(k).is_ok_and(|x| x == v);
    if spec.fidelity != Fidelity::Flow || req.op != Op::AllToAll || spec.is_graph() || !spec.faults.is_empty() || n < 2 {
        return Ok(None);
    }
    if env_is("FLITSIM_FLOW_FOLD", "0") {
        return Ok(None);
    }
    if req.members.len() != n as usize || req.members.iter().enumerate().any(|(i, &m)| m != i as u32) {
        return Ok(None);
    }
    spec.validate()?;
    let info = fabric_info(spec)?;
    let reach = reach_of(spec)?;
    let first = lower_best(req.op, &req.members, req.bytes, &req.params, &info, &reach)?;
    let cands = plan(req.op, &req.members, req.bytes, &req.params, &info, &reach)?;
    if cands.len() <= 1 {
        return fold_one(spec, req, first, &reach, interrupt);
    }
    // Several candidates (protocol auto): the choice `run_collective` makes at
    // flow level (every candidate within AUTO_PRUNE_FACTOR of the best
    // estimate, in plan order; the fastest, ties to the earlier), each folded.
    let best_est = cands.iter().map(|c| c.2).fold(f64::INFINITY, f64::min);
    let mut best: Option<(CollectiveResult, usize)> = None;
    let mut tried = Vec::new();
    for i in (0..cands.len()).filter(|&i| cands[i].2 <= best_est * AUTO_PRUNE_FACTOR) {
        let (a, p, _) = cands[i];
        let low = lower_in(req.op, &req.members, req.bytes, a, p, &req.params, &info, &reach)?;
        let Some(r) = fold_one(spec, req, low, &reach, interrupt)? else { return Ok(None) };
        tried.push((i, (algo_name(a).to_string(), format!("{p:?}").to_lowercase(), r.time_ps)));
        if best.as_ref().is_none_or(|(b, bi)| r.time_ps < b.time_ps || (r.time_ps == b.time_ps && i < *bi)) {
            best = Some((r, i));
        }
    }
    let Some((mut r, _)) = best else { return Ok(None) };
    tried.sort_by_key(|t| t.0);
    r.auto_candidates = tried.into_iter().map(|t| t.1).collect();
    Ok(Some(r))
}

/// One lowered candidate through the rank fold (None: its DAG or the fabric is not rank-symmetric).
fn fold_one(spec: &FabricSpec, req: &CollectiveRequest, low: Lowered, reach: &Reach, interrupt: &mut dyn Interrupt) -> Result<Option<CollectiveResult>> {
    let n = spec.gpus;
    let low = transported(low, reach, &req.params)?;
    let Some(dag0) = rank_zero_dag(&low.dag, n) else { return Ok(None) };
    let fspec = calibrated_spec(spec, req.params.link_efficiency)?;
    let list: Vec<(u32, u32, u64)> = low.dag.nodes.iter().filter_map(|n| if let NodeKind::Transfer { src, dst, bytes, loopback, .. } = *n { Some((src, if loopback { u32::MAX } else { dst }, bytes)) } else { None }).collect();
    let (fspec, sim_note) = choose_sim_packets(fspec, req.params.sim_packet_bytes, &list);
    let mut sim = FlowSim::new(&fspec)?;
    if !sim.fab.gpus_alike() {
        return Ok(None);
    }
    sim.fab.fold_down = true;
    let mut model = FoldModel(DagExec::new(Backend::Flow(sim)));
    let mut q = EventQueue::with_capacity(1024);
    model.0.start(0, 0, &dag0, &mut q)?;
    let summary = engine::run(&mut model, &mut q, u64::MAX, interrupt)?;
    let sim = model.0.flow().expect("flow backend");
    if let Some(d) = sim.describe_incomplete() {
        return Err(FlitsimError::Stalled { time_ps: summary.end_ps, detail: d });
    }
    let time_ps = model.0.done.first().map_or(summary.end_ps, |x| x.1);
    let st = flow_stats(sim, summary.events);
    let g = n as usize;
    let (sent, recv) = low.dag.bytes_per_gpu(n);
    // Rank 0's links stand for every rank's.
    let p0 = st.ports.iter().filter(|p| p.gpu == 0);
    let (tx0, rx0) = p0.clone().fold((0u64, 0u64), |(a, b), p| (a + p.link.payload_bytes, b + p.rx_payload_bytes));
    let max_u = p0.map(|p| p.link.busy_ps as f64 / time_ps.max(1) as f64).fold(0.0, f64::max);
    let link_recv = vec![rx0; g];
    Ok(Some(CollectiveResult {
        time_ps,
        algorithm: low.algorithm,
        protocol: low.protocol,
        channels: low.channels,
        chunk_bytes: low.chunk_bytes,
        transfers: list.len() as u64,
        bytes_sent: sent,
        bytes_received: recv,
        link_bytes_sent: vec![tx0; g],
        rx_payload_bytes: link_recv.clone(),
        link_bytes_received: link_recv,
        sim_packet_bytes: if fspec.sim_packet_bytes == 0 { fspec.gpu.payload_bytes as u64 } else { fspec.sim_packet_bytes },
        folded_planes: 1,
        fold_reason: "flow level: planes are not simulated one by one; ranks folded (rotation-symmetric all-to-all: rank 0 simulated)".into(),
        sim_packet_note: sim_note,
        packets: st.packets * n as u64,
        events: summary.events,
        max_link_utilization: max_u,
        credit_exhaustion_episodes: 0,
        arbitration_conflicts: 0,
        estimate_ps: low.estimate_ps,
        auto_candidates: Vec::new(),
        faults: Default::default(),
        sent_bytes_on_fabric: st.sent_bytes * n as u64,
        // (one-layer fabrics have no switch-link classes)
        link_class_payload_bytes: Vec::new(),
        fidelity: "flow".into(),
        fidelity_reason: match outside_validation(sim) {
            Some(w) => format!("warning: flow level asked for outside its validation: {w}"),
            None => FLOW_VALID.into(),
        },
    }))
}

/// Rank 0's part of `dag` if the DAG is the same for every rank of `0..n`
/// up to g -> g + 1, else None. Nodes other than transfers are shared (they
/// may only follow shared nodes); every transfer belongs to its source,
/// which is neither its destination nor a loopback; no edge joins two ranks;
/// and rank r's transfers, in node order, match rank 0's one for one: the
/// same destination offset (dst - src mod n), bytes and floor, and the same
/// predecessors (shared nodes, or the same places in the rank's own order)
/// with the same delays, in the same order. The part keeps the shared nodes
/// and rank 0's transfers in their order and the edges among them in theirs.
fn rank_zero_dag(dag: &Dag, n: u32) -> Option<Dag> {
    const SHARED: u32 = u32::MAX;
    let nn = dag.nodes.len();
    let mut owner = vec![SHARED; nn];
    let mut place = vec![0u32; nn];
    let mut count = vec![0u32; n as usize];
    for (i, k) in dag.nodes.iter().enumerate() {
        if let NodeKind::Transfer { src, dst, loopback, .. } = *k {
            if loopback || src == dst || src >= n || dst >= n {
                return None;
            }
            owner[i] = src;
            place[i] = count[src as usize];
            count[src as usize] += 1;
        }
    }
    if count.iter().any(|&c| c != count[0]) || count[0] == 0 {
        return None;
    }
    for &(a, b, _) in &dag.edges {
        let (oa, ob) = (owner[a as usize], owner[b as usize]);
        if ob == SHARED && oa != SHARED || oa != SHARED && oa != ob {
            return None;
        }
    }
    // predecessors per node, in edge order: pred[at[b]..at[b + 1]] (one allocation, not one per node)
    let (at, pred) = dag.csr(false);
    let preds = |i: usize| &pred[at[i] as usize..at[i + 1] as usize];
    // rank 0's signature by place, then every rank against it
    let sig = |i: usize| -> (u32, u64, u64) {
        let NodeKind::Transfer { src, dst, bytes, min_ps, .. } = dag.nodes[i] else { unreachable!() };
        ((dst + n - src) % n, bytes, min_ps)
    };
    let key = |a: u32| if owner[a as usize] == SHARED { (0u8, a) } else { (1u8, place[a as usize]) };
    let mut zero: Vec<usize> = Vec::with_capacity(count[0] as usize);
    for i in 0..nn {
        if owner[i] == 0 {
            zero.push(i);
        }
    }
    for i in 0..nn {
        let r = owner[i];
        if r == SHARED || r == 0 {
            continue;
        }
        let z = zero[place[i] as usize];
        let (pi, pz) = (preds(i), preds(z));
        if sig(i) != sig(z) || pi.len() != pz.len() || pi.iter().zip(pz).any(|(&(a, d), &(b, e))| d != e || key(a) != key(b)) {
            return None;
        }
    }
    // the part: shared nodes and rank 0's, renumbered in order
    let mut id = vec![u32::MAX; nn];
    let mut out = Dag::default();
    out.nodes.reserve(nn / n as usize + 1);
    for i in 0..nn {
        if owner[i] == SHARED || owner[i] == 0 {
            id[i] = out.push(dag.nodes[i]);
        }
    }
    for &(a, b, d) in &dag.edges {
        if id[a as usize] != u32::MAX && id[b as usize] != u32::MAX {
            out.edge(id[a as usize], id[b as usize], d);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A staggered all-to-all over `n` ranks: a shared start, then per
    /// (offset k, rank r) a chain of `chunks` transfers, 2 in flight.
    fn a2a(n: u32, chunks: u32, bytes: impl Fn(u32, u32) -> u64) -> Dag {
        let mut d = Dag::default();
        let start = d.push(NodeKind::Delay { ps: 5 });
        for k in 1..n {
            for r in 0..n {
                let mut ids = Vec::new();
                for j in 0..chunks {
                    let me = d.push(NodeKind::Transfer { src: r, dst: (r + k) % n, bytes: bytes(r, j), loopback: false, min_ps: 0 });
                    d.edge(if j < 2 { start } else { ids[j as usize - 2] }, me, 0);
                    ids.push(me);
                }
            }
        }
        d
    }

    #[test]
    fn rank_zero_part_of_a_symmetric_dag() {
        let d = a2a(4, 3, |_, j| 100 + j as u64);
        let z = rank_zero_dag(&d, 4).expect("symmetric");
        // the start and rank 0's 3 offsets x 3 chunks, in order, with their chains
        assert_eq!(z.nodes.len(), 1 + 3 * 3);
        let dsts: Vec<u32> = z.nodes.iter().filter_map(|k| if let NodeKind::Transfer { src: 0, dst, .. } = *k { Some(dst) } else { None }).collect();
        assert_eq!(dsts, vec![1, 1, 1, 2, 2, 2, 3, 3, 3]);
        assert_eq!(z.edges.len(), 9);
        assert!(z.edges.contains(&(1, 3, 0)) && z.edges.contains(&(0, 1, 0)));
    }

    #[test]
    fn asymmetric_dags_are_not_folded() {
        // one rank's chunk is larger
        assert!(rank_zero_dag(&a2a(4, 3, |r, j| if r == 2 && j == 1 { 101 } else { 100 }), 4).is_none());
        // an edge from rank 1 to rank 2
        let mut d = a2a(4, 1, |_, _| 100);
        let (a, b) = (d.nodes.iter().position(|k| matches!(*k, NodeKind::Transfer { src: 1, .. })).unwrap(), d.nodes.iter().position(|k| matches!(*k, NodeKind::Transfer { src: 2, .. })).unwrap());
        d.edge(a as u32, b as u32, 0);
        assert!(rank_zero_dag(&d, 4).is_none());
        // a loopback, and a shared node after a transfer
        let mut d = a2a(4, 1, |_, _| 100);
        d.push(NodeKind::Transfer { src: 0, dst: 0, bytes: 8, loopback: true, min_ps: 0 });
        assert!(rank_zero_dag(&d, 4).is_none());
        let mut d = a2a(4, 1, |_, _| 100);
        let end = d.push(NodeKind::Delay { ps: 1 });
        d.edge(1, end, 0);
        assert!(rank_zero_dag(&d, 4).is_none());
        // a rank with a different destination order (rank 3 lists 3 -> 2 before 3 -> 1)
        let mut d = a2a(4, 1, |_, _| 100);
        let last = d.nodes.len() - 1;
        let i = d.nodes.iter().position(|k| matches!(*k, NodeKind::Transfer { src: 3, dst: 0, .. })).unwrap();
        d.nodes.swap(i, last);
        assert!(rank_zero_dag(&d, 4).is_none());
    }
}
