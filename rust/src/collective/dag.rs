//! Executing lowered DAGs on a backend: the cycle-level fabric (batch API
//! and the task-graph network share [`DagExec`]) or an ideal alpha-beta port
//! model (the closed-form reference). A node starts at max over its
//! predecessors of (end + edge delay).

use super::lower::{Dag, NodeKind};
use crate::engine::{Scheduler, TimePs};
use crate::error::Result;
use crate::fabric::{FEv, FabricSim};

const NONE: u32 = u32::MAX;

/// Events of a fabric running DAGs (and plain transfers).
#[derive(Debug, Clone, Copy)]
pub enum CEv {
    Fab(FEv),
    /// Node ready to start.
    Ready(u32),
    /// Delay node (or ideal transfer) finished.
    Done(u32),
    /// Flow-level fabric events ([`crate::flow::FlowEv`] flattened, one
    /// variant each: with one-field variants `CEv` takes `FEv`'s tag niche
    /// and stays 16 bytes, so queue entries are built and copied in
    /// registers; a nested `Flow(FlowEv)` made it 24, copied through the
    /// stack; see [`CEv::flow`] and [`CEv::as_flow`]).
    FlowStart(u32),
    FlowSolve(bool),
    FlowDrain(u64),
    FlowDone(u32),
}

const _: () = assert!(std::mem::size_of::<CEv>() == 16);

impl CEv {
    /// A flow-level event as a `CEv`.
    #[inline]
    pub fn flow(e: crate::flow::FlowEv) -> Self {
        use crate::flow::FlowEv as F;
        match e {
            F::Start(x) => CEv::FlowStart(x),
            F::Solve { deferred } => CEv::FlowSolve(deferred),
            F::Drain { gen } => CEv::FlowDrain(gen),
            F::Done(x) => CEv::FlowDone(x),
        }
    }

    /// The flow-level event, if this is one.
    #[inline]
    pub fn as_flow(&self) -> Option<crate::flow::FlowEv> {
        use crate::flow::FlowEv as F;
        Some(match *self {
            CEv::FlowStart(x) => F::Start(x),
            CEv::FlowSolve(deferred) => F::Solve { deferred },
            CEv::FlowDrain(gen) => F::Drain { gen },
            CEv::FlowDone(x) => F::Done(x),
            CEv::Fab(_) | CEv::Ready(_) | CEv::Done(_) => return None,
        })
    }
}

/// Forwards fabric events into a `CEv` scheduler.
struct Wrap<'a>(&'a mut dyn Scheduler<CEv>);

impl Scheduler<FEv> for Wrap<'_> {
    #[inline]
    fn schedule(&mut self, t: TimePs, e: FEv) {
        self.0.schedule(t, CEv::Fab(e))
    }
}

/// [`Wrap`] over the concrete queue: the fabric's hot scheduling path makes
/// one indirect call per event instead of two (the queue's push inlines).
struct WrapQ<'a>(&'a mut crate::engine::EventQueue<CEv>);

impl Scheduler<FEv> for WrapQ<'_> {
    #[inline(always)]
    fn schedule(&mut self, t: TimePs, e: FEv) {
        self.0.schedule(t, CEv::Fab(e))
    }
}

/// Forwards flow events into a `CEv` scheduler.
struct WrapFlow<'a>(&'a mut dyn Scheduler<CEv>);

impl Scheduler<crate::flow::FlowEv> for WrapFlow<'_> {
    #[inline]
    fn schedule(&mut self, t: TimePs, e: crate::flow::FlowEv) {
        self.0.schedule(t, CEv::flow(e))
    }
}

/// Where transfers run.
pub(crate) enum Backend {
    Fabric(FabricSim),
    /// Flow level on the same fabric (`crate::flow`).
    Flow(crate::flow::FlowSim),
    /// One port per GPU of `bytes_per_s`; a transfer occupies its source's
    /// port for bytes / B and lands `alpha_ps` after it leaves.
    Ideal { alpha_ps: u64, bytes_per_s: f64, port_free: Vec<TimePs> },
}

struct Inst {
    tag: u32,
    remaining: u32,
    /// Virtual index of node 0 minus its array index (wrapping): transfers
    /// spray from their virtual index (= array index unless the owner skips
    /// nodes, [`DagExec::start_virtual`]).
    voff: u32,
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
    /// When set (before `start`), every node's end time, ps (batch API).
    pub(crate) node_end: Option<Vec<TimePs>>,
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
            node_end: None,
        }
    }

    pub fn fabric(&self) -> Option<&FabricSim> {
        match &self.backend {
            Backend::Fabric(s) => Some(s),
            _ => None,
        }
    }

    /// The flow-level simulator, mutable.
    pub(crate) fn flow_mut(&mut self) -> Option<&mut crate::flow::FlowSim> {
        match &mut self.backend {
            Backend::Flow(s) => Some(s),
            _ => None,
        }
    }

    /// The flow-level simulator, when transfers run at flow level.
    pub fn flow(&self) -> Option<&crate::flow::FlowSim> {
        match &self.backend {
            Backend::Flow(s) => Some(s),
            _ => None,
        }
    }

    /// Drop every finished DAG and transfer (memory bounded by the work
    /// between idle moments, not by the run's): only at flow level, with
    /// nothing in flight (every instance finished and reported, no plain
    /// transfer open, the flow simulator idle) and no per-node end times
    /// kept. Node and transfer ids restart at 0; spray numbering is virtual
    /// ([`DagExec::start_virtual`]), so answers do not change. The owner must
    /// hold no node or transfer id (no operation running). False, nothing
    /// done, otherwise.
    pub(crate) fn compact(&mut self) -> bool {
        if self.node_end.is_some() || !self.done.is_empty() || !self.plain_done.is_empty() || self.insts.iter().any(|i| i.remaining > 0) {
            return false;
        }
        let Backend::Flow(f) = &mut self.backend else { return false };
        if !f.compact() {
            return false;
        }
        self.kind.clear();
        self.succ_off.clear();
        self.succ.clear();
        self.pending.clear();
        self.ready_ps.clear();
        self.inst_of.clear();
        self.insts.clear();
        self.xfer_node.clear();
        true
    }

    /// DAG nodes held (since the last [`DagExec::compact`]).
    pub fn nodes_held(&self) -> usize {
        self.kind.len()
    }

    /// Add a DAG and start its source nodes at `now`; `tag` is reported in `done`.
    pub fn start(&mut self, now: TimePs, tag: u32, dag: &Dag, q: &mut dyn Scheduler<CEv>) -> Result<()> {
        let base = self.kind.len() as u32;
        self.start_virtual(now, tag, dag, q, base)
    }

    /// Index the next DAG's first node gets (its array index).
    pub fn next_index(&self) -> u32 {
        self.kind.len() as u32
    }

    /// As [`DagExec::start`], with node `j`'s transfers spraying from virtual
    /// index `vbase + j` instead of its array index (an owner that replays
    /// some DAGs without running them keeps the numbering the run would have
    /// had; `start` is `vbase` = [`DagExec::next_index`]).
    pub fn start_virtual(&mut self, now: TimePs, tag: u32, dag: &Dag, q: &mut dyn Scheduler<CEv>, vbase: u32) -> Result<()> {
        let base = self.kind.len() as u32;
        let m = dag.nodes.len();
        if m == 0 {
            self.done.push((tag, now));
            return Ok(());
        }
        let inst = self.insts.len() as u32;
        self.insts.push(Inst { tag, remaining: m as u32, voff: vbase.wrapping_sub(base) });
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
            Backend::Flow(sim) => {
                let x = sim.add_transfer(src, dst, bytes, tag)?;
                sim.handle(now, crate::flow::FlowEv::Start(x), &mut WrapFlow(q))?;
                self.collect(q);
                Ok(())
            }
            Backend::Ideal { alpha_ps, bytes_per_s, port_free } => {
                if port_free.len() <= src as usize {
                    port_free.resize(src as usize + 1, 0);
                }
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

    /// Start (ready) time of node `i`, ps.
    pub(crate) fn node_start(&self, i: u32) -> TimePs {
        self.ready_ps[i as usize]
    }

    fn node_done(&mut self, i: u32, t: TimePs, q: &mut dyn Scheduler<CEv>) {
        if let Some(e) = self.node_end.as_mut() {
            if e.len() <= i as usize {
                e.resize(i as usize + 1, 0);
            }
            e[i as usize] = t;
        }
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

    /// A DAG transfer's last byte arrived at `t`: the node ends then, or at
    /// its protocol floor (start + min_ps) if that is later.
    fn transfer_done(&mut self, i: u32, t: TimePs, q: &mut dyn Scheduler<CEv>) {
        if let NodeKind::Transfer { min_ps, .. } = self.kind[i as usize] {
            let floor = self.ready_ps[i as usize].saturating_add(min_ps);
            if floor > t {
                q.schedule(floor, CEv::Done(i));
                return;
            }
        }
        self.node_done(i, t, q);
    }

    fn collect(&mut self, q: &mut dyn Scheduler<CEv>) {
        let completed = match &mut self.backend {
            Backend::Fabric(sim) => &mut sim.completed,
            Backend::Flow(sim) => &mut sim.completed,
            Backend::Ideal { .. } => return,
        };
        if completed.is_empty() {
            return;
        }
        let c = std::mem::take(completed);
        for &(x, t) in &c {
            let node = self.xfer_node.get(x as usize).copied().unwrap_or(NONE);
            if node == NONE {
                let tag = match &self.backend {
                    Backend::Fabric(sim) => sim.xfers[x as usize].tag,
                    Backend::Flow(sim) => sim.xfers[x as usize].tag,
                    Backend::Ideal { .. } => 0,
                };
                self.plain_done.push((tag, t));
            } else {
                self.transfer_done(node, t, q);
            }
        }
        let mut c = c;
        c.clear();
        match &mut self.backend {
            Backend::Fabric(sim) => sim.completed = c,
            Backend::Flow(sim) => sim.completed = c,
            Backend::Ideal { .. } => {}
        }
    }

    /// [`Self::handle`] on the concrete event queue (same order, same
    /// result; fabric events skip one indirect call per scheduled event).
    pub(crate) fn handle_q(&mut self, now: TimePs, ev: CEv, q: &mut crate::engine::EventQueue<CEv>) -> Result<()> {
        if let CEv::Fab(e) = ev {
            if let Backend::Fabric(sim) = &mut self.backend {
                sim.handle(now, e, &mut WrapQ(q))?;
                if !sim.completed.is_empty() {
                    self.collect(q);
                }
                return Ok(());
            }
        }
        self.handle(now, ev, q)
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
            CEv::FlowStart(_) | CEv::FlowSolve(_) | CEv::FlowDrain(_) | CEv::FlowDone(_) => {
                let e = ev.as_flow().expect("a flow event");
                if let Backend::Flow(sim) = &mut self.backend {
                    sim.handle(now, e, &mut WrapFlow(q))?;
                }
                self.collect(q);
            }
            CEv::Done(i) => self.node_done(i, now, q),
            CEv::Ready(i) => match self.kind[i as usize] {
                NodeKind::Delay { ps } => q.schedule(now + ps, CEv::Done(i)),
                NodeKind::Transfer { src, dst, bytes, loopback, min_ps } => match &mut self.backend {
                    Backend::Fabric(sim) => {
                        let x = if loopback { sim.add_loopback_transfer(src, bytes, i)? } else { sim.add_transfer(src, dst, bytes, i)? };
                        sim.xfers[x as usize].spray_offset = i.wrapping_add(self.insts[self.inst_of[i as usize] as usize].voff);
                        self.set_xfer_node(x, i);
                        if let Backend::Fabric(sim) = &mut self.backend {
                            sim.handle(now, FEv::StartTransfer(x), &mut Wrap(q))?;
                        }
                        self.collect(q);
                    }
                    Backend::Flow(sim) => {
                        let x = if loopback { sim.add_loopback_transfer(src, bytes, i)? } else { sim.add_transfer(src, dst, bytes, i)? };
                        sim.xfers[x as usize].spray_offset = i.wrapping_add(self.insts[self.inst_of[i as usize] as usize].voff);
                        self.set_xfer_node(x, i);
                        if let Backend::Flow(sim) = &mut self.backend {
                            sim.handle(now, crate::flow::FlowEv::Start(x), &mut WrapFlow(q))?;
                        }
                        self.collect(q);
                    }
                    Backend::Ideal { alpha_ps, bytes_per_s, port_free } => {
                        // host endpoints (staging) get a port on first use
                        if port_free.len() <= src as usize {
                            port_free.resize(src as usize + 1, 0);
                        }
                        let s = now.max(port_free[src as usize]);
                        let e = s + (bytes as f64 * 1e12 / *bytes_per_s).ceil() as u64;
                        port_free[src as usize] = e;
                        q.schedule((e + *alpha_ps).max(now.saturating_add(min_ps)), CEv::Done(i));
                    }
                },
            },
        }
        Ok(())
    }
}

/// The task-graph executor's periodic skip (rust/src/taskgraph/exec.rs):
/// the live DAG state encoded relative, and moved.
impl DagExec {
    /// First node and node count of the instance node `i` belongs to.
    fn inst_range(&self, i: u32) -> (u32, u32) {
        let inst = self.inst_of[i as usize];
        let mut a = i as usize;
        while a > 0 && self.inst_of[a - 1] == inst {
            a -= 1;
        }
        let mut b = i as usize + 1;
        while b < self.inst_of.len() && self.inst_of[b] == inst {
            b += 1;
        }
        (a as u32, (b - a) as u32)
    }

    /// Live instances (index, first node) and live transfers (id, plain)
    /// found from the queued events `evs` and the running flows; None at
    /// packet level or with uncollected completions.
    #[allow(clippy::type_complexity)]
    fn live(&self, evs: &[&CEv]) -> Option<(Vec<(u32, u32)>, Vec<(u32, bool)>)> {
        let Backend::Flow(f) = &self.backend else { return None };
        if !self.done.is_empty() || !self.plain_done.is_empty() || !f.completed.is_empty() {
            return None;
        }
        let mut xs: Vec<u32> = f.periodic_active().to_vec();
        let mut nodes: Vec<u32> = Vec::new();
        for e in evs {
            match e {
                CEv::Ready(i) | CEv::Done(i) => nodes.push(*i),
                CEv::FlowStart(x) | CEv::FlowDone(x) => xs.push(*x),
                CEv::FlowSolve(_) | CEv::FlowDrain(_) => {}
                CEv::Fab(_) => return None,
            }
        }
        xs.sort_unstable();
        xs.dedup();
        let mut out_x = Vec::with_capacity(xs.len());
        for &x in &xs {
            let node = self.xfer_node.get(x as usize).copied().unwrap_or(NONE);
            if node != NONE {
                nodes.push(node);
            }
            out_x.push((x, node == NONE));
        }
        let mut insts: Vec<(u32, u32)> = nodes.iter().map(|&i| (self.inst_of[i as usize], i)).collect();
        insts.sort_unstable();
        insts.dedup_by_key(|e| e.0);
        let insts = insts.into_iter().map(|(k, i)| (k, self.inst_range(i).0)).collect();
        Some((insts, out_x))
    }

    /// Encode the live state relative to `now` and to task `task_base`
    /// (tags relative, nodes as (live instance, offset), spray modulo `l`).
    /// False where it cannot be (packet level, a transfer not found).
    pub(crate) fn periodic_encode(&self, now: TimePs, task_base: u32, l: u32, evs: &[&CEv], out: &mut Vec<u64>) -> bool {
        let Some((insts, _)) = self.live(evs) else { return false };
        let Backend::Flow(f) = &self.backend else { return false };
        let ord = |i: u32| -> Option<[u64; 2]> {
            let k = self.inst_of[i as usize];
            let p = insts.binary_search_by_key(&k, |e| e.0).ok()?;
            Some([1 + p as u64, (i - insts[p].1) as u64])
        };
        let xref = |x: u32| -> Option<[u64; 2]> {
            match self.xfer_node.get(x as usize).copied().unwrap_or(NONE) {
                NONE => Some([0, f.xfers[x as usize].tag.wrapping_sub(task_base) as u64]),
                node => ord(node),
            }
        };
        out.push(insts.len() as u64);
        for &(k, a) in &insts {
            let inst = &self.insts[k as usize];
            let (_, m) = self.inst_range(a);
            out.extend_from_slice(&[inst.tag.wrapping_sub(task_base) as u64, inst.remaining as u64, m as u64, (a.wrapping_add(inst.voff) % l) as u64]);
            for i in a..a + m {
                out.extend_from_slice(&[self.pending[i as usize] as u64, self.ready_ps[i as usize].wrapping_sub(now)]);
            }
        }
        for e in evs {
            let r = match e {
                CEv::Ready(i) => ord(*i).map(|r| [1, r[0], r[1]]),
                CEv::Done(i) => ord(*i).map(|r| [2, r[0], r[1]]),
                CEv::FlowStart(x) => xref(*x).map(|r| [3, r[0], r[1]]),
                CEv::FlowDone(x) => xref(*x).map(|r| [4, r[0], r[1]]),
                CEv::FlowSolve(deferred) => Some([5, *deferred as u64, 0]),
                CEv::FlowDrain(gen) => Some([6, f.periodic_drain_valid(*gen) as u64, 0]),
                CEv::Fab(_) => None,
            };
            let Some(r) = r else { return false };
            out.extend_from_slice(&r);
        }
        let mut xr = |x: u32| xref(x);
        f.periodic_encode(now, l, &mut xr, out)
    }

    /// Move the live state `dt_ps` later and its tasks `sh` later: live
    /// instances' tags and node ready times, live transfers (as
    /// [`crate::flow::FlowSim::periodic_shift`]). Node and transfer ids stay
    /// (later ones are numbered after them, as in the run skipped).
    pub(crate) fn periodic_shift(&mut self, evs: &[&CEv], sh: u32, dt_ps: u64) -> bool {
        let Some((insts, xs)) = self.live(evs) else { return false };
        for &(k, a) in &insts {
            let (_, m) = self.inst_range(a);
            self.insts[k as usize].tag += sh;
            for i in a..a + m {
                self.ready_ps[i as usize] += dt_ps;
            }
        }
        if let Backend::Flow(f) = &mut self.backend {
            f.periodic_shift(dt_ps, &xs, sh);
        }
        true
    }
}
