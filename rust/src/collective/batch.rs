//! The transfer batch API with transports: each transfer of a batch moves by
//! its own transport (`super::transport`): P2P, host-staged, RDMA. The batch
//! becomes a DAG (a root; every transfer after the root by its `start_ps` and
//! after the transfer its `after` names), expanded into the transports'
//! sub-DAGs and run on the fabric (packet level; flow level when the spec
//! says `flow`). A transfer starts when its entry node is ready and ends with
//! its exit node.

use super::dag::{Backend, CEv, DagExec};
use super::lower::{Dag, NodeKind};
use super::params::{CollectiveParams, Protocol};
use super::params::Transport;
use super::transport::{expand_each, Reach};
use crate::engine::{self, EventQueue, Interrupt, Model, TimePs};
use crate::error::{ensure, FlitsimError, Result};
use crate::fabric::{BatchResult, FabricSim, FabricSpec, Fidelity, TransferBatch};

struct M(DagExec);

impl Model for M {
    type Event = CEv;
    fn handle(&mut self, now: TimePs, ev: CEv, q: &mut EventQueue<CEv>) -> Result<()> {
        self.0.handle(now, ev, q)
    }
}

/// Run `batch` with `transports[i]` for transfer i (one entry: all of them).
///
/// # Errors
/// `Config`: mismatched columns, ids outside the fabric, an `after` that is
/// not an earlier-or-later valid index or forms a cycle, a transport the
/// route forbids (named by [`super::transport::route`]); `Stalled` if the
/// fabric cannot finish.
pub fn run_batch_with_transports(spec: &FabricSpec, batch: &TransferBatch, transports: &[Transport], params: &CollectiveParams, interrupt: &mut dyn Interrupt) -> Result<BatchResult> {
    spec.validate()?;
    params.validate()?;
    let n = batch.src.len();
    ensure(batch.dst.len() == n && batch.bytes.len() == n && batch.start_ps.len() == n && batch.after.len() == n, "transfers", n, "columns src, dst, bytes, start_ps, after of one length")?;
    ensure(transports.len() == 1 || transports.len() == n, "transport", transports.len(), &format!("one transport or one per transfer ({n})"))?;
    let mut dag = Dag::default();
    let root = dag.push(NodeKind::Delay { ps: 0 });
    for i in 0..n {
        for (name, v) in [("src", batch.src[i]), ("dst", batch.dst[i])] {
            ensure(v < spec.gpus, &format!("{name}[{i}]"), v, &format!("a GPU id in 0..{}", spec.gpus))?;
        }
        dag.push(NodeKind::Transfer { src: batch.src[i], dst: batch.dst[i], bytes: batch.bytes[i], loopback: false, min_ps: 0 });
    }
    for i in 0..n {
        dag.edge(root, 1 + i as u32, batch.start_ps[i]);
        let a = batch.after[i];
        if a >= 0 {
            ensure((a as usize) < n && a as usize != i, &format!("after[{i}]"), a, &format!("-1 or another transfer's index in 0..{n}"))?;
            dag.edge(1 + a as u32, 1 + i as u32, 0);
        }
    }
    check_acyclic(&batch.after)?;
    let reach = Reach::of_spec(spec)?;
    let base = params.transport_params();
    let tp = |k: usize| {
        let mut t = base;
        if k > 0 {
            t.transport = transports[if transports.len() == 1 { 0 } else { k - 1 }];
        }
        t
    };
    let (dag, entry, exit) = match expand_each(&dag, &reach, &tp, Protocol::Simple)? {
        Some(x) => x,
        None => {
            let ids: Vec<u32> = (0..dag.nodes.len() as u32).collect();
            (dag, ids.clone(), ids)
        }
    };
    let flow = spec.fidelity == Fidelity::Flow;
    let backend = if flow { Backend::Flow(crate::flow::FlowSim::new(spec)?) } else { Backend::Fabric(FabricSim::new(spec, spec.gpu_ports)?) };
    let mut m = M(DagExec::new(backend));
    m.0.node_end = Some(vec![0; dag.nodes.len()]);
    let mut q = EventQueue::with_capacity(1024);
    m.0.start(0, 0, &dag, &mut q)?;
    let summary = engine::run(&mut m, &mut q, u64::MAX, interrupt)?;
    if m.0.done.is_empty() {
        return Err(FlitsimError::Stalled { time_ps: summary.end_ps, detail: "transfers never finished (a transport's sub-DAG did not complete)".into() });
    }
    let ends = m.0.node_end.take().unwrap_or_default();
    let mut r = BatchResult::default();
    for i in 0..n {
        r.start_ps.push(m.0.node_start(entry[1 + i]));
        r.end_ps.push(ends.get(exit[1 + i] as usize).copied().unwrap_or(0));
    }
    r.makespan_ps = r.end_ps.iter().copied().max().unwrap_or(0);
    if let Backend::Fabric(sim) = &mut m.0.backend {
        sim.finish(r.makespan_ps.max(1));
    }
    match &m.0.backend {
        Backend::Fabric(sim) => {
            r.stats = crate::fabric::stats_of(sim, spec.gpu_ports, summary.events);
            r.fidelity = "packet".into();
            r.fidelity_reason = if spec.fidelity == Fidelity::Auto { "auto chose packet: transfers with transports run at packet level".into() } else { String::new() };
        }
        Backend::Flow(sim) => {
            r.stats = crate::flow::flow_stats(sim, summary.events);
            r.fidelity = "flow".into();
            r.fidelity_reason = match crate::flow::outside_validation(sim) {
                Some(w) => format!("warning: flow level asked for outside its validation: {w}"),
                None => crate::flow::FLOW_VALID.into(),
            };
        }
        Backend::Ideal { .. } => {}
    }
    r.folded_planes = 1;
    r.fold_reason = "not folded: transfers with transports".into();
    Ok(r)
}

/// `after` chains must not loop.
fn check_acyclic(after: &[i64]) -> Result<()> {
    let n = after.len();
    let mut state = vec![0u8; n];
    for s in 0..n {
        let mut path = Vec::new();
        let mut i = s;
        while state[i] == 0 {
            state[i] = 1;
            path.push(i);
            let a = after[i];
            if a < 0 {
                break;
            }
            i = a as usize;
            if state[i] == 1 {
                return Err(FlitsimError::config(format!("after[{i}]"), after[i], "transfers whose `after` chains do not loop (a dependency cycle)"));
            }
        }
        for p in path {
            state[p] = 2;
        }
    }
    Ok(())
}
