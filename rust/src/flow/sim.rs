//! The flow simulator: transfers as fluid flows on a [`FlowFabric`], rates
//! max-min fair, recomputed when flows start or drain (event-driven, integer
//! picoseconds, on the caller's event queue like the packet level).
//!
//! A transfer started at t becomes a flow at once; its work (bytes of its
//! busiest lane x lanes) drains at its max-min rate; it completes the fixed
//! path latency after draining. Starts at one picosecond are solved together
//! (the solve event re-queues itself once at the same time, so every start
//! already due at that picosecond joins it).

use super::paths::FlowFabric;
use super::share::{Filler, Flows};
use crate::engine::{Scheduler, TimePs};
use crate::error::{FlitsimError, Result};
use crate::fabric::FabricSpec;

/// Units of [`FlowSim::res_bytes`]'s fixed-point counters per byte (2^16:
/// an increment is off by at most 2^-17 byte; a counter holds 2^47 bytes).
const RES_UNIT: f64 = 65_536.0;

/// The state a collective running alone on an idle flow simulator changes,
/// taken before it starts ([`FlowSim::mark`]).
#[derive(Debug, Clone)]
pub struct FlowMark {
    outside_clear: bool,
    sent: u64,
    res: Vec<i64>,
    solves: u64,
    gen: u64,
}

/// What a collective run alone from an idle state added ([`FlowSim::since`]):
/// replayed by [`FlowSim::replay`] for the same collective started again on
/// an idle simulator.
#[derive(Debug, Clone)]
pub struct FlowReplay {
    /// Recorded from a state with no outside-validation finding (then valid
    /// from either state; else only from a state with one).
    outside_clear: bool,
    /// The finding the run made (message, ps after its start).
    outside: Option<((String, String), u64)>,
    res: Vec<(u32, i64)>,
    solves: u64,
    gen: u64,
    sent_bytes: u64,
}

/// "at t = <us> us", the time part of a finding's message.
fn at_time(t: TimePs) -> String {
    format!("at t = {:.3} us", t as f64 / 1e6)
}

/// Flow events.
#[derive(Debug, Clone, Copy)]
pub enum FlowEv {
    Start(u32),
    Solve { deferred: bool },
    Drain { gen: u64 },
    Done(u32),
}

/// One transfer of the flow model.
#[derive(Debug, Clone)]
pub struct FlowXfer {
    pub src: u32,
    pub dst: u32,
    pub bytes: u64,
    pub tag: u32,
    pub loopback: bool,
    /// Round-robin spray starts at eligible port `spray_offset mod count`.
    pub spray_offset: u32,
    pub start_ps: TimePs,
    pub end_ps: TimePs,
    pub done: bool,
    pub lanes: u32,
    /// Drain group: the resource its spray starts on (see `FlowSim::handle`).
    group: u32,
    work: f64,
    scale: f64,
    cap: f64,
    /// One simulated packet's time on one of its lanes, ps.
    pkt_ps: f64,
    /// Fixed time on its idle path (added after its bytes drain), ps.
    lat_ps: u64,
    path: (u32, u32),
}

/// Where flow level may differ from packet level, found while running.
#[derive(Debug, Clone, Default)]
pub struct FlowDiagnosis {
    /// The first pattern seen that the flow level does not represent
    /// (synchronized round-robin, parallel transfers on one GPU pair), described.
    pub outside: Option<String>,
    /// When `outside` was found, ps (its message says "at t = ... us").
    pub outside_at_ps: u64,
    /// `outside`'s message without its time: the text before and after
    /// "at t = ... us" (a replay renders it at its own time).
    outside_text: Option<(String, String)>,
    /// Solves (max-min recomputations) run.
    pub solves: u64,
}

impl FlowDiagnosis {
    /// Record a finding at `t`: its message is `pre` + "at t = ... us" + `post`.
    fn found(&mut self, t: TimePs, pre: String, post: String) {
        self.outside = Some(format!("{pre}{}{post}", at_time(t)));
        self.outside_at_ps = t;
        self.outside_text = Some((pre, post));
    }
}

/// The whole-set memo's window of lookups (`FlowSim::set_memo`), and the
/// solves it pauses after a window in which under one in
/// `SET_MEMO_MIN_HIT_RATIO` of them hit: a miss copies the whole set, so the
/// memo pays only where most lookups hit (a tensor-parallel run's sets hit
/// about 1 in 1000 times; HunyuanVideo DistriFusion on eth-2x8xl40 1 in 5,
/// where the memo made the run ~10 % slower; Flux.1-dev 1024 px there most).
const SET_MEMO_WINDOW_SOLVES: u64 = 1 << 12;
const SET_MEMO_MIN_HIT_RATIO: u64 = 3;
const SET_MEMO_PAUSE_SOLVES: u64 = 1 << 15;

/// The filling input of transfers `ids` (in that order) as CSR: `off`, their
/// path entries `flat`, their caps.
fn gather(xfers: &[FlowXfer], path_buf: &[(u32, f64)], ids: impl Iterator<Item = u32>, off: &mut Vec<u32>, flat: &mut Vec<(u32, f64)>, caps: &mut Vec<f64>) {
    off.clear();
    flat.clear();
    caps.clear();
    off.push(0);
    for x in ids {
        let t = &xfers[x as usize];
        flat.extend_from_slice(&path_buf[t.path.0 as usize..t.path.1 as usize]);
        off.push(flat.len() as u32);
        caps.push(t.cap);
    }
}

/// How a solve fills the running flows' rates ([`FlowSim::set_filling`]).
///
/// Max-min fair rates decompose over connected components (flows linked by
/// shared resources), and filling each component on its own (its flows in
/// running order) makes its rates independent of what runs elsewhere, so
/// re-filling only the components a start or drain touched gives the same
/// bits as re-filling all of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Filling {
    /// The default: a solve re-fills only the components that hold a resource
    /// of a flow started or drained since the last solve, each on its own;
    /// the others keep their rates.
    Incremental,
    /// Every component at every solve, each on its own
    /// (`FLITSIM_FLOW_INCREMENTAL=0`): the same bits as `Incremental`.
    Components,
    /// One filling of every running flow together (`FLITSIM_FLOW_GLOBAL_FILL=1`;
    /// the filling before stop 17): the same max-min rates up to rounding and
    /// the fill tolerance (share.rs `FULL`, 1e-9 relative), but a component's
    /// rates then carry the rounding of levels set by other components, so
    /// drains that tie in one filling can fall a picosecond apart in the other
    /// (docs/fidelity.md "Component filling").
    Global,
}

/// The simulator state.
pub struct FlowSim {
    pub fab: FlowFabric,
    pub xfers: Vec<FlowXfer>,
    /// Paths of started transfers, CSR by `FlowXfer::path`; a finished
    /// transfer's slice is reclaimed when no running one follows it.
    path_buf: Vec<(u32, f64)>,
    /// Scratch path of [`FlowSim::path_latency_ps`].
    lat_buf: Vec<(u32, f64)>,
    active: Vec<u32>,
    rate: Vec<f64>,
    off: Vec<u32>,
    flat: Vec<(u32, f64)>,
    caps: Vec<f64>,
    filler: Filler,
    last_ps: TimePs,
    gen: u64,
    solve_at: Option<TimePs>,
    /// Payload bytes carried per resource, in units of 2^-16 byte: integer
    /// sums are exact and independent of their order, so a replayed
    /// collective ([`FlowSim::replay`]) adds exactly what running it adds.
    res_fixed: Vec<i64>,
    /// Payload bytes of transfers replayed rather than run (statistics).
    pub replayed_sent_bytes: u64,
    /// Payload bytes of every transfer added that crosses the fabric
    /// (src != dst, or loopback), compacted ones included.
    added_sent_bytes: u64,
    /// Transfers dropped by [`FlowSim::compact`]: transfer `x` of `xfers`
    /// is the run's `id_base + x`-th (the hash spray reads that number).
    id_base: u64,
    pub diagnosis: FlowDiagnosis,
    /// Completed transfers not yet collected by the owner: (transfer, time).
    pub completed: Vec<(u32, TimePs)>,
    /// Running flows per source GPU (a new flow's place in its ports' round-robin).
    active_from: Vec<u32>,
    /// Flows started since the last solve: (round-robin place, dst, src).
    fresh: Vec<(u32, u32, u32)>,
    pairs: Vec<(u32, u32)>,
    /// Flows drained at one event: (group, path start, port-set length (0
    /// unless `port_set_drain`), start time, transfer, packet time).
    finished: Vec<(u32, u32, u32, TimePs, u32, f64)>,
    /// Opt-in (`FLITSIM_FLOW_PORT_SET_DRAIN=1`, off by default): drains
    /// grouped by the port set alone, not by the port the spray starts on.
    /// Makes a graph fabric's flow state independent of the spray rotation
    /// (the periodic skip then repeats every step) but moves answers where
    /// flows of one port set drain together (ib-4xhgx-h100 16 MiB ring
    /// all_reduce -6.3 %, docs/fidelity.md "Rotation-invariant paths").
    port_set_drain: bool,
    /// Path entries of running flows (compaction trigger).
    live_path: usize,
    /// How solves fill ([`Filling`]; from `FLITSIM_FLOW_GLOBAL_FILL=1` /
    /// `FLITSIM_FLOW_INCREMENTAL=0`, else incremental).
    filling: Filling,
    /// Resources on the paths of flows started or drained since the last solve.
    dirty: Vec<u32>,
    dirty_mark: Vec<bool>,
    /// Next solve fills every component (rates not known to match `active`).
    all_dirty: bool,
    /// Per resource: the running flows (transfer ids) whose paths cross it,
    /// in no particular order (kept at start and drain): a touched component
    /// is found by a search from its dirty resources, not by an analysis of
    /// every running flow.
    res_flows: Vec<Vec<(u32, u32)>>,
    /// Per path entry (parallel to `path_buf`): its place in its resource's
    /// `res_flows` list, whose items are (transfer, entry offset in its path),
    /// so a drain leaves each list in O(1).
    path_lidx: Vec<u32>,
    /// Scratch of the search: resources and transfers seen (false outside a
    /// solve), the resources seen, the search stack, each running flow's
    /// index in `active`, a component's flows by that index.
    res_seen: Vec<bool>,
    xfer_seen: Vec<bool>,
    seen_res: Vec<u32>,
    stack: Vec<u32>,
    pos: Vec<u32>,
    comp: Vec<(u32, u32)>,
    /// Resources full in the solve that last filled their component.
    res_full: Vec<bool>,
    sub_rate: Vec<f64>,
    by_id: Vec<(u32, f64)>,
    /// Memoized component (or global) fillings (exact; `FLITSIM_FLOW_SOLVE_MEMO=0` turns it off).
    memo: super::memo::SolveMemo,
    /// Memoized whole running sets under the component filling: its rates are
    /// a pure function of the running flows in running order (each
    /// component's of its own), so a set seen before takes that solve's
    /// rates and full flags without the component analysis (diffusion steps
    /// repeat whole sets). Own table, judged on its own hit rate: paused
    /// where few of a window of lookups hit, tried again later
    /// (`SolveMemo::with_pauses`; most sets of a tensor-parallel run come once).
    set_memo: super::memo::SolveMemo,
    set_off: Vec<u32>,
    set_flat: Vec<(u32, f64)>,
    set_caps: Vec<f64>,
    set_used: Vec<u32>,
    set_hash: u64,
    /// `set_off` .. `set_caps` hold this solve's running set (set by the lookup, taken by the put).
    set_built: bool,
}

impl FlowSim {
    /// Build from a spec (validated).
    ///
    /// # Errors
    /// `Config` for an invalid spec.
    pub fn new(spec: &FabricSpec) -> Result<Self> {
        // Dead components reroute and replay at packet level only: a fluid
        // run would ignore them (a wrong answer, not an approximation), so it
        // is refused; `auto` never gets here with faults (it picks packet level).
        if !spec.faults.is_empty() {
            return Err(crate::error::FlitsimError::config(
                "fidelity",
                "flow",
                &format!("\"packet\" or \"auto\" when the spec has faults ({} dead component(s)): the flow level does not reroute or replay", spec.faults.len()),
            ));
        }
        let fab = FlowFabric::new(spec)?;
        let nr = fab.capacity.len();
        let g = fab.endpoints() as usize;
        Ok(FlowSim {
            fab,
            xfers: Vec::new(),
            path_buf: Vec::new(),
            lat_buf: Vec::new(),
            active: Vec::new(),
            rate: Vec::new(),
            off: Vec::new(),
            flat: Vec::new(),
            caps: Vec::new(),
            filler: Filler::default(),
            last_ps: 0,
            gen: 0,
            solve_at: None,
            res_fixed: vec![0; nr],
            replayed_sent_bytes: 0,
            added_sent_bytes: 0,
            id_base: 0,
            diagnosis: FlowDiagnosis::default(),
            completed: Vec::new(),
            active_from: vec![0; g],
            fresh: Vec::new(),
            pairs: Vec::new(),
            finished: Vec::new(),
            port_set_drain: std::env::var("FLITSIM_FLOW_PORT_SET_DRAIN").is_ok_and(|v| v == "1"),
            live_path: 0,
            filling: if std::env::var("FLITSIM_FLOW_GLOBAL_FILL").is_ok_and(|v| v == "1") {
                Filling::Global
            } else if std::env::var("FLITSIM_FLOW_INCREMENTAL").is_ok_and(|v| v == "0") {
                Filling::Components
            } else {
                Filling::Incremental
            },
            dirty: Vec::new(),
            dirty_mark: vec![false; nr],
            all_dirty: true,
            res_flows: vec![Vec::new(); nr],
            path_lidx: Vec::new(),
            res_seen: vec![false; nr],
            xfer_seen: Vec::new(),
            seen_res: Vec::new(),
            stack: Vec::new(),
            pos: Vec::new(),
            res_full: vec![false; nr],
            comp: Vec::new(),
            sub_rate: Vec::new(),
            by_id: Vec::new(),
            memo: super::memo::SolveMemo::new(),
            set_memo: super::memo::SolveMemo::with_pauses(SET_MEMO_WINDOW_SOLVES, SET_MEMO_MIN_HIT_RATIO, SET_MEMO_PAUSE_SOLVES),
            set_off: Vec::new(),
            set_flat: Vec::new(),
            set_caps: Vec::new(),
            set_used: Vec::new(),
            set_hash: 0,
            set_built: false,
        })
    }

    /// How solves fill ([`Filling`]).
    pub fn set_filling(&mut self, f: Filling) {
        self.filling = f;
        self.all_dirty = true;
    }

    /// Memoized solves on or off (results are identical either way).
    pub fn set_solve_memo(&mut self, on: bool) {
        self.memo.set_on(on);
        self.set_memo.set_on(on);
    }

    /// Fillings (whole sets, components, global sets) looked up in the memos and how many they answered.
    pub fn solve_memo_counts(&self) -> (u64, u64) {
        let (a, b) = self.memo.counts();
        let (c, d) = self.set_memo.counts();
        (a + c, b + d)
    }

    /// Whether drains are grouped by the port set alone (the opt-in
    /// `FLITSIM_FLOW_PORT_SET_DRAIN=1`; see the field).
    pub fn port_set_drain(&self) -> bool {
        self.port_set_drain
    }

    /// Port-set drain grouping on or off (see the field).
    pub fn set_port_set_drain(&mut self, on: bool) {
        self.port_set_drain = on;
    }

    /// Make the next solve fill every component (for code that changes the
    /// running flows other than through start and drain).
    pub fn invalidate_rates(&mut self) {
        self.all_dirty = true;
    }

    fn mark_dirty(&mut self, a: u32, b: u32) {
        if self.filling != Filling::Incremental {
            return;
        }
        for k in a..b {
            let r = self.path_buf[k as usize].0;
            if !self.dirty_mark[r as usize] {
                self.dirty_mark[r as usize] = true;
                self.dirty.push(r);
            }
        }
    }

    /// Register a transfer; start it with `FlowEv::Start(id)`.
    ///
    /// # Errors
    /// `Config` for GPU ids outside the fabric.
    pub fn add_transfer(&mut self, src: u32, dst: u32, bytes: u64, tag: u32) -> Result<u32> {
        let g = self.fab.endpoints();
        if src >= g || dst >= g {
            let gpus = self.fab.gpus();
            let allowed = if g == gpus { format!("GPU ids in 0..{g} (the fabric has {g} GPUs)") } else { format!("endpoint ids in 0..{g} ({gpus} GPUs, then {} host-memory endpoints)", g - gpus) };
            return Err(FlitsimError::config("transfer", format!("{src} -> {dst}"), &allowed));
        }
        let id = self.xfers.len() as u32;
        if src != dst {
            self.added_sent_bytes += bytes;
        }
        self.xfers.push(FlowXfer { src, dst, bytes, tag, loopback: false, spray_offset: 0, start_ps: 0, end_ps: 0, done: false, lanes: 0, group: 0, work: 0.0, scale: 0.0, cap: 0.0, pkt_ps: 0.0, lat_ps: 0, path: (0, 0) });
        Ok(id)
    }

    /// The fixed latency of a `src` -> `dst` flow on the idle path, ps (what a
    /// transfer between them adds after draining).
    ///
    /// # Errors
    /// `Config` for endpoints outside the fabric or without a path.
    pub fn path_latency_ps(&mut self, src: u32, dst: u32) -> Result<u64> {
        let g = self.fab.endpoints();
        if src >= g || dst >= g {
            return Err(FlitsimError::config("transfer", format!("{src} -> {dst}"), &format!("endpoint ids in 0..{g}")));
        }
        let mut buf = std::mem::take(&mut self.lat_buf);
        let r = self.fab.path(src, dst, 1, 0, 0, &mut buf);
        buf.clear();
        self.lat_buf = buf;
        Ok(r?.4)
    }

    /// A transfer from `gpu` through the switches back to `gpu` (NVLS).
    ///
    /// # Errors
    /// `Config` for a GPU id outside the fabric.
    pub fn add_loopback_transfer(&mut self, gpu: u32, bytes: u64, tag: u32) -> Result<u32> {
        let id = self.add_transfer(gpu, gpu, bytes, tag)?;
        self.xfers[id as usize].loopback = true;
        self.added_sent_bytes += bytes;
        Ok(id)
    }

    /// Handle one event.
    ///
    /// # Errors
    /// `Config` for a transfer with no path.
    pub fn handle(&mut self, now: TimePs, ev: FlowEv, q: &mut dyn Scheduler<FlowEv>) -> Result<()> {
        match ev {
            FlowEv::Start(x) => self.start(now, x, q),
            FlowEv::Solve { deferred } => {
                if self.solve_at != Some(now) {
                    return Ok(());
                }
                if !deferred {
                    q.schedule(now, FlowEv::Solve { deferred: true });
                    return Ok(());
                }
                self.solve_at = None;
                self.solve(now, q);
                Ok(())
            }
            FlowEv::Drain { gen } => {
                if gen != self.gen {
                    return Ok(());
                }
                self.advance(now);
                self.finished.clear();
                // Drained flows leave; the rest keep their order (so the sort
                // below finds them mostly in order already).
                let mut w = 0;
                for k in 0..self.active.len() {
                    let x = self.active[k] as usize;
                    let r = self.rate[k];
                    if self.xfers[x].work <= r.max(1e-12) * 0.5 {
                        self.xfers[x].work = 0.0;
                        self.active_from[self.xfers[x].src as usize] -= 1;
                        let (a, b) = self.xfers[x].path;
                        self.mark_dirty(a, b);
                        self.link_flow(x as u32, a, b, false);
                        let t = &self.xfers[x];
                        self.live_path -= (t.path.1 - t.path.0) as usize;
                        let (a, b) = t.path;
                        let n = if self.port_set_drain { self.port_set_len(a, b) } else { 0 };
                        self.finished.push((t.group, a, n, t.start_ps, x as u32, t.pkt_ps));
                    } else {
                        self.active[w] = self.active[k];
                        self.rate[w] = r;
                        w += 1;
                    }
                }
                self.active.truncate(w);
                self.rate.truncate(w);
                // Flows that drain together from one port set: round-robin
                // serves their last packets one per round, in start order, so
                // at packet level the earlier ones finish whole packet times
                // before the last (which ends when the fluid does). Without
                // this the fluid ties them exactly and loses the lead that
                // chained steps (ring channels) build on.
                // Groups: the resource the spray starts on (FlowXfer::group;
                // on a graph fabric the uplink bundle of the rotated first
                // port), or with the opt-in port-set drain the path's uplink
                // resources (a prefix of its entries); groups in that order,
                // flows in start order within one.
                let mut fin = std::mem::take(&mut self.finished);
                let buf = &self.path_buf;
                let set = |f: &(u32, u32, u32, TimePs, u32, f64)| buf[f.1 as usize..(f.1 + f.2) as usize].iter().map(|e| e.0);
                fin.sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| set(a).cmp(set(b))).then((a.3, a.4).cmp(&(b.3, b.4))));
                let mut i = 0;
                while i < fin.len() {
                    let mut j = i + 1;
                    while j < fin.len() && fin[j].0 == fin[i].0 && set(&fin[j]).eq(set(&fin[i])) {
                        j += 1;
                    }
                    let n = j - i;
                    for (rank, f) in fin[i..j].iter().enumerate() {
                        let early = ((n - 1 - rank) as f64 * f.5) as u64;
                        q.schedule(now + self.xfers[f.4 as usize].lat_ps.saturating_sub(early), FlowEv::Done(f.4));
                    }
                    i = j;
                }
                self.finished = fin;
                // Keep the active list in start order (determinism of the solve order).
                self.sort_active();
                self.solve(now, q);
                Ok(())
            }
            FlowEv::Done(x) => {
                let t = &mut self.xfers[x as usize];
                t.done = true;
                t.end_ps = now;
                self.completed.push((x, now));
                Ok(())
            }
        }
    }

    /// Entries of the path `a..b` that name its port set: on a graph fabric
    /// the uplink bundles (a prefix: paths are in resource order and uplinks
    /// come first); on a one-layer fabric its first resource.
    fn port_set_len(&self, a: u32, b: u32) -> u32 {
        if self.fab.graph.is_none() {
            return 1;
        }
        let n = (a..b).take_while(|&k| !self.fab.is_down(self.path_buf[k as usize].0 as usize)).count() as u32;
        n.max(1)
    }

    fn sort_active(&mut self) {
        if self.filling != Filling::Incremental || self.all_dirty || self.rate.len() != self.active.len() {
            // Rates are recomputed right after, so only the ids need ordering.
            self.active.sort_unstable();
            self.rate.clear();
            self.all_dirty = true;
            return;
        }
        // The incremental solve keeps the rates of untouched components: carry them.
        if self.active.windows(2).all(|w| w[0] < w[1]) {
            return;
        }
        self.by_id.clear();
        self.by_id.extend(self.active.iter().copied().zip(self.rate.iter().copied()));
        self.by_id.sort_unstable_by_key(|p| p.0);
        for (k, &(x, r)) in self.by_id.iter().enumerate() {
            self.active[k] = x;
            self.rate[k] = r;
        }
    }

    fn start(&mut self, now: TimePs, x: u32, q: &mut dyn Scheduler<FlowEv>) -> Result<()> {
        let (src, dst, bytes, loopback, off) = {
            let t = &mut self.xfers[x as usize];
            t.start_ps = now;
            (t.src, t.dst, t.bytes, t.loopback, t.spray_offset)
        };
        if bytes == 0 || (src == dst && !loopback) {
            let t = &mut self.xfers[x as usize];
            t.done = true;
            t.end_ps = now;
            self.completed.push((x, now));
            return Ok(());
        }
        if self.active.is_empty() {
            self.path_buf.clear();
            self.path_lidx.clear();
        } else if self.path_buf.len() > 4096 && self.path_buf.len() > 4 * self.live_path {
            self.compact_paths();
        }
        let a = self.path_buf.len() as u32;
        // (the run's transfer number: equal to `x` until a compaction)
        let nth = (self.id_base as u32).wrapping_add(x);
        let (lanes, work, cap, pkt_ps, lat_ps) = self.fab.path(src, dst, bytes, nth, off, &mut self.path_buf)?;
        let b = self.path_buf.len() as u32;
        self.mark_dirty(a, b);
        self.link_flow(x, a, b, true);
        let group = match (&self.fab.graph, self.port_set_drain) {
            (Some(_), true) => 0,
            (Some(g), false) => g.last_group,
            (None, _) => self.path_buf[a as usize].0,
        };
        let t = &mut self.xfers[x as usize];
        t.path = (a, b);
        t.group = group;
        self.live_path += (t.path.1 - t.path.0) as usize;
        t.lanes = lanes;
        t.work = work;
        t.scale = bytes as f64 / work;
        t.cap = cap;
        t.pkt_ps = pkt_ps;
        t.lat_ps = lat_ps;
        // Bring running flows up to now at their old rates before the set changes.
        self.advance(now);
        self.active.push(x);
        self.rate.push(0.0);
        self.fresh.push((self.active_from[src as usize], dst, src));
        self.active_from[src as usize] += 1;
        if self.solve_at != Some(now) {
            self.solve_at = Some(now);
            q.schedule(now, FlowEv::Solve { deferred: false });
        }
        // No drain may fire at the old rates before the solve.
        self.gen += 1;
        Ok(())
    }

    /// Keep only the paths of running flows (memory bounded by the flows in
    /// flight, not by the transfers ever started).
    fn compact_paths(&mut self) {
        let mut buf = Vec::with_capacity(self.flat.len() + 64);
        let mut lidx = Vec::with_capacity(self.flat.len() + 64);
        for &x in &self.active {
            let t = &mut self.xfers[x as usize];
            let a = buf.len() as u32;
            buf.extend_from_slice(&self.path_buf[t.path.0 as usize..t.path.1 as usize]);
            lidx.extend_from_slice(&self.path_lidx[t.path.0 as usize..t.path.1 as usize]);
            t.path = (a, buf.len() as u32);
        }
        self.path_buf = buf;
        self.path_lidx = lidx;
    }

    /// Drain work at the current rates from `last_ps` to `now`, counting bytes per resource.
    fn advance(&mut self, now: TimePs) {
        let dt = now.saturating_sub(self.last_ps) as f64;
        self.last_ps = now;
        if dt == 0.0 {
            return;
        }
        for (k, &x) in self.active.iter().enumerate() {
            let r = self.rate.get(k).copied().unwrap_or(0.0);
            if r <= 0.0 {
                continue;
            }
            let t = &mut self.xfers[x as usize];
            let moved = (r * dt).min(t.work);
            t.work -= moved;
            let (a, b) = t.path;
            let bytes = moved * t.scale;
            for &(res, c) in &self.path_buf[a as usize..b as usize] {
                // round half up (bytes >= 0): a plain conversion, no libm call
                self.res_fixed[res as usize] += (bytes * c * RES_UNIT + 0.5) as i64;
            }
        }
    }

    fn solve(&mut self, now: TimePs, q: &mut dyn Scheduler<FlowEv>) {
        self.gen += 1;
        if self.active.is_empty() {
            self.rate.clear();
            self.clear_dirty();
            self.res_full.iter_mut().for_each(|f| *f = false);
            self.all_dirty = false;
            return;
        }
        self.diagnosis.solves += 1;
        if self.filling == Filling::Global {
            self.solve_global();
        } else if !self.solve_set_memoized() {
            if self.filling == Filling::Incremental && !self.all_dirty && self.rate.len() == self.active.len() {
                self.solve_components();
            } else {
                self.solve_all();
            }
            self.set_memo_put();
        }
        if self.diagnosis.outside.is_none() {
            self.check_synchronized(now);
        }
        self.fresh.clear();
        let mut next = f64::INFINITY;
        for (k, &x) in self.active.iter().enumerate() {
            let r = self.rate[k];
            if r > 0.0 {
                next = next.min(self.xfers[x as usize].work / r);
            }
        }
        if next.is_finite() {
            let dt = (next.ceil() as u64).max(1);
            q.schedule(now + dt, FlowEv::Drain { gen: self.gen });
        }
    }

    /// The component filling's answer for the whole running set from `set_memo`
    /// (see the field): true if it had it.
    fn solve_set_memoized(&mut self) -> bool {
        self.set_built = false;
        if !self.set_memo.looking() {
            return false;
        }
        self.set_built = true;
        gather(&self.xfers, &self.path_buf, self.active.iter().copied(), &mut self.set_off, &mut self.set_flat, &mut self.set_caps);
        let (hit, h) = self.set_memo.get(&self.set_off, &self.set_flat, &self.set_caps);
        self.set_hash = h;
        let Some((rate, used, full)) = hit else { return false };
        self.rate.clear();
        self.rate.extend_from_slice(rate);
        // (a resource no running flow crosses any more was on a drained flow's path: dirty)
        for &r in &self.dirty {
            self.res_full[r as usize] = false;
        }
        for (&r, &f) in used.iter().zip(full) {
            self.res_full[r as usize] = f;
        }
        self.clear_dirty();
        self.all_dirty = false;
        true
    }

    /// Keep the component filling's answer for the set `solve_set_memoized` built.
    fn set_memo_put(&mut self) {
        if !std::mem::take(&mut self.set_built) {
            return;
        }
        // the set's resources, each once (in first-seen order: a hit only sets their flags)
        self.set_used.clear();
        for &(r, _) in &self.set_flat {
            if !self.res_seen[r as usize] {
                self.res_seen[r as usize] = true;
                self.set_used.push(r);
            }
        }
        for &r in &self.set_used {
            self.res_seen[r as usize] = false;
        }
        self.set_memo.put(self.set_hash, &self.set_off, &self.set_flat, &self.set_caps, &self.rate, &self.set_used, &self.res_full);
    }

    fn clear_dirty(&mut self) {
        for &r in &self.dirty {
            self.dirty_mark[r as usize] = false;
        }
        self.dirty.clear();
    }

    /// Transfer `x` (path entries `a..b`) joins or leaves the running flows
    /// of its resources (`res_flows`).
    fn link_flow(&mut self, x: u32, a: u32, b: u32, join: bool) {
        if self.path_lidx.len() < self.path_buf.len() {
            self.path_lidx.resize(self.path_buf.len(), 0);
        }
        for k in a..b {
            let l = &mut self.res_flows[self.path_buf[k as usize].0 as usize];
            if join {
                self.path_lidx[k as usize] = l.len() as u32;
                l.push((x, k - a));
            } else {
                let i = self.path_lidx[k as usize] as usize;
                l.swap_remove(i);
                if let Some(&(y, j)) = l.get(i) {
                    self.path_lidx[(self.xfers[y as usize].path.0 + j) as usize] = i as u32;
                }
            }
        }
    }

    /// Every running flow filled, one component at a time (the answer an
    /// incremental solve gives).
    fn solve_all(&mut self) {
        self.clear_dirty();
        self.res_full.iter_mut().for_each(|f| *f = false);
        self.rate.clear();
        self.rate.resize(self.active.len(), 0.0);
        for &x in &self.active {
            let t = &self.xfers[x as usize];
            let (a, b) = t.path;
            for k in a..b {
                let r = self.path_buf[k as usize].0;
                if !self.dirty_mark[r as usize] {
                    self.dirty_mark[r as usize] = true;
                    self.dirty.push(r);
                }
            }
        }
        self.all_dirty = false;
        self.solve_components();
    }

    /// One filling of every running flow together ([`Filling::Global`]).
    fn solve_global(&mut self) {
        self.clear_dirty();
        gather(&self.xfers, &self.path_buf, self.active.iter().copied(), &mut self.off, &mut self.flat, &mut self.caps);
        let (hit, h) = self.memo.get(&self.off, &self.flat, &self.caps);
        if let Some((rate, used, full)) = hit {
            self.rate.clear();
            self.rate.extend_from_slice(rate);
            self.filler.restore(self.fab.capacity.len(), used, full);
            return;
        }
        self.filler.max_min(&self.fab.capacity, &Flows { off: &self.off, path: &self.flat, cap: &self.caps }, &mut self.rate);
        self.memo.put(h, &self.off, &self.flat, &self.caps, &self.rate, self.filler.used(), &self.filler.full);
    }

    /// Re-fill the components holding a dirty resource, each on its own
    /// (flows in `active` order); the rest keep their rates.
    fn solve_components(&mut self) {
        if self.pos.len() < self.xfers.len() {
            self.pos.resize(self.xfers.len(), 0);
            self.xfer_seen.resize(self.xfers.len(), false);
        }
        for (k, &x) in self.active.iter().enumerate() {
            self.pos[x as usize] = k as u32;
        }
        // A dirty resource no flow crosses any more is idle (not full); the
        // others are set again by their component's filling.
        for &r in &self.dirty {
            self.res_full[r as usize] = false;
        }
        let mut d = 0;
        while d < self.dirty.len() {
            let r0 = self.dirty[d];
            d += 1;
            if self.res_seen[r0 as usize] {
                continue;
            }
            // The component of r0: resources and flows reached through shared resources.
            self.res_seen[r0 as usize] = true;
            self.seen_res.push(r0);
            self.stack.push(r0);
            self.comp.clear();
            let n = self.active.len();
            'search: while let Some(r) = self.stack.pop() {
                for i in 0..self.res_flows[r as usize].len() {
                    let x = self.res_flows[r as usize][i].0;
                    if self.xfer_seen[x as usize] {
                        continue;
                    }
                    self.xfer_seen[x as usize] = true;
                    self.comp.push((self.pos[x as usize], x));
                    if self.comp.len() == n {
                        // every running flow is in it: nothing left to reach
                        self.stack.clear();
                        break 'search;
                    }
                    let (a, b) = self.xfers[x as usize].path;
                    for k in a..b {
                        let r2 = self.path_buf[k as usize].0;
                        if !self.res_seen[r2 as usize] {
                            self.res_seen[r2 as usize] = true;
                            self.seen_res.push(r2);
                            self.stack.push(r2);
                        }
                    }
                }
            }
            if self.comp.is_empty() {
                continue;
            }
            // its flows in `active` order (all of them: `active` is that order)
            if self.comp.len() == self.active.len() {
                for (k, c) in self.comp.iter_mut().enumerate() {
                    *c = (k as u32, self.active[k]);
                }
            } else {
                self.comp.sort_unstable();
            }
            for &(_, x) in &self.comp {
                self.xfer_seen[x as usize] = false;
            }
            gather(&self.xfers, &self.path_buf, self.comp.iter().map(|c| c.1), &mut self.off, &mut self.flat, &mut self.caps);
            // (diffusion steps repeat a component's flows step after step: memoized, exact)
            let (hit, h) = self.memo.get(&self.off, &self.flat, &self.caps);
            if let Some((rate, used, full)) = hit {
                for (n, &(k, _)) in self.comp.iter().enumerate() {
                    self.rate[k as usize] = rate[n];
                }
                for (&r, &f) in used.iter().zip(full) {
                    self.res_full[r as usize] = f;
                }
            } else {
                self.filler.max_min(&self.fab.capacity, &Flows { off: &self.off, path: &self.flat, cap: &self.caps }, &mut self.sub_rate);
                for (n, &(k, _)) in self.comp.iter().enumerate() {
                    self.rate[k as usize] = self.sub_rate[n];
                }
                for &r in self.filler.used() {
                    self.res_full[r as usize] = self.filler.full[r as usize];
                }
                self.memo.put(h, &self.off, &self.flat, &self.caps, &self.sub_rate, self.filler.used(), &self.filler.full);
            }
            if self.comp.len() == self.active.len() {
                break; // (the search stopped early: the other dirty resources are in it or idle)
            }
        }
        for &r in &self.seen_res {
            self.res_seen[r as usize] = false;
        }
        self.seen_res.clear();
        self.clear_dirty();
    }

    /// Is some uplink resource of GPU `src` full in the last solve?
    fn port_full(&self, src: u32) -> bool {
        // (component filling: the flags of each component's last filling; global: the last filling's)
        let full = if self.filling == Filling::Global { &self.filler.full } else { &self.res_full };
        (0..self.fab.capacity.len()).any(|r| {
            full[r]
                && match self.fab.kinds[r] {
                    super::paths::Resource::UpGpu(g) => g == src,
                    super::paths::Resource::Up(p) => p / self.fab.topo.gpu_ports == src,
                    super::paths::Resource::Bundle(b) => self.fab.graph.as_ref().is_some_and(|g| g.bundles[b as usize].side == 0 && g.bundles[b as usize].owner == src),
                    _ => false,
                }
        })
    }

    /// Parallel transfers between one pair of GPUs (ring channels): at
    /// packet level the port's round-robin finishes them a few packets
    /// apart, the first to finish starts its next step early on idle ports,
    /// and over chained steps that lead compounds (multi-channel rings run
    /// 6-15 % faster than fluid sharing, docs/fidelity.md).
    fn check_parallel_pairs(&mut self, now: TimePs) {
        self.pairs.clear();
        for &x in &self.active {
            let t = &self.xfers[x as usize];
            // NVLS loopback shares are validated (within 1 %, docs/fidelity.md).
            if !t.loopback {
                self.pairs.push((t.src, t.dst));
            }
        }
        self.pairs.sort_unstable();
        for i in 1..self.pairs.len() {
            if self.pairs[i] == self.pairs[i - 1] {
                let (s, d) = self.pairs[i];
                let n = self.pairs.iter().filter(|p| **p == (s, d)).count();
                self.diagnosis.found(
                    now,
                    format!("pipeline-bound: {n} concurrent transfers GPU {s} -> {d} "),
                    " (e.g. ring channels); at packet level they finish a few packets apart and the next steps overlap, which fluid sharing does not represent".into(),
                );
                return;
            }
        }
    }

    /// Synchronized round-robin: flows started together from two or more
    /// sources to one destination at the same place in their sources'
    /// round-robin order (e.g. every source listing destinations 0, 1, 2, ...).
    /// At packet level their packets reach that switch output in the same
    /// rounds, every round: a rolling incast that the output arbitrates and
    /// credits throttle, so the fluid rates (which see only averages) are too
    /// optimistic (11 % at 16 GPUs, tests/flow.rs).
    fn check_synchronized(&mut self, now: TimePs) {
        if self.fresh.len() < 2 {
            return;
        }
        self.check_parallel_pairs(now);
        if self.diagnosis.outside.is_some() {
            return;
        }
        self.fresh.sort_unstable();
        for i in 1..self.fresh.len() {
            let (w0, w1) = (self.fresh[i - 1], self.fresh[i]);
            if w0.0 == w1.0 && w0.1 == w1.1 && w0.2 != w1.2 {
                let (place, dst) = (w0.0, w0.1);
                // It costs bandwidth only where the colliding sources cycle over
                // several destinations and their own ports are the bottleneck
                // (a balanced pattern that needs every output busy all the time);
                // one flow per source, or sources with room to spare, are not
                // slowed (tests/flow.rs incast_alone_is_exact, incast_with_other_traffic).
                let group: Vec<u32> = self.fresh.iter().filter(|f| f.0 == place && f.1 == dst).map(|f| f.2).collect();
                let busy = group.iter().filter(|&&src| self.active_from[src as usize] >= 2 && self.port_full(src)).count();
                if busy < 2 {
                    continue;
                }
                let n = group.len();
                self.diagnosis.found(
                    now,
                    format!("arbitration-bound: {n} sources start flows to GPU {dst} at the same place ({place}) of their round-robin order "),
                    " (synchronized order, a rolling incast at packet level); stagger destinations (source s sends to s+1, s+2, ...) or run packet level".into(),
                );
                return;
            }
        }
    }

    /// Payload bytes resource `r` carried so far.
    pub fn res_bytes(&self, r: usize) -> f64 {
        self.res_fixed[r] as f64 / RES_UNIT
    }

    /// Resources of the model (length of the per-resource counters).
    pub fn resources(&self) -> usize {
        self.res_fixed.len()
    }

    /// No flow running, no solve pending, no completion uncollected: what
    /// happens next depends only on what is started next.
    pub fn is_idle(&self) -> bool {
        self.active.is_empty() && self.solve_at.is_none() && self.completed.is_empty()
    }

    /// The counters a run from here changes (see [`FlowReplay`]).
    pub fn mark(&self) -> FlowMark {
        FlowMark { outside_clear: self.diagnosis.outside.is_none(), sent: self.added_sent_bytes, res: self.res_fixed.clone(), solves: self.diagnosis.solves, gen: self.gen }
    }

    /// What changed since `m` (the transfers added since are summed into
    /// sent bytes; their per-transfer records stay with this run only).
    /// None if a finding was made without its text kept apart from its time
    /// (not done by this module's checks).
    pub fn since(&self, m: &FlowMark, t0: TimePs) -> Option<FlowReplay> {
        let outside = match (&self.diagnosis.outside, m.outside_clear) {
            (Some(_), true) => Some((self.diagnosis.outside_text.clone()?, self.diagnosis.outside_at_ps - t0)),
            _ => None,
        };
        let res = self.res_fixed.iter().zip(&m.res).enumerate().filter(|(_, (a, b))| a != b).map(|(r, (a, b))| (r as u32, a - b)).collect();
        let sent_bytes = self.added_sent_bytes - m.sent;
        Some(FlowReplay { outside_clear: m.outside_clear, outside, res, solves: self.diagnosis.solves - m.solves, gen: self.gen - m.gen, sent_bytes })
    }

    /// Whether `r` may be replayed from the current state (see [`FlowReplay`]).
    pub fn can_replay(&self, r: &FlowReplay) -> bool {
        r.outside_clear || self.diagnosis.outside.is_some()
    }

    /// Add what a recorded run added (the simulator must be idle, as it was
    /// when the record was taken).
    pub fn replay(&mut self, r: &FlowReplay, now: TimePs) {
        if self.diagnosis.outside.is_none() {
            if let Some(((pre, post), dt)) = &r.outside {
                // the finding at its time in this run
                self.diagnosis.found(now + dt, pre.clone(), post.clone());
            }
        }
        for &(res, d) in &r.res {
            self.res_fixed[res as usize] += d;
        }
        self.diagnosis.solves += r.solves;
        self.gen += r.gen;
        self.replayed_sent_bytes += r.sent_bytes;
    }

    /// Counters a run grows (solves, solve generation, transfers, sent
    /// bytes, per-resource bytes in fixed point), for the task-graph
    /// executor's periodic skip.
    pub fn periodic_counters(&self, out: &mut Vec<i64>) {
        out.push(self.diagnosis.solves as i64);
        out.push(self.gen as i64);
        out.push((self.id_base + self.xfers.len() as u64) as i64);
        out.push(self.sent_bytes() as i64);
        out.extend_from_slice(&self.res_fixed);
    }

    /// Add `m` periods of growth (`delta`: a difference of two
    /// [`FlowSim::periodic_counters`], the later taken now): the sent bytes
    /// of the last period count `m` times more. Nothing may be uncollected.
    /// False, nothing changed, if it is or the counters do not fit.
    pub fn periodic_advance(&mut self, delta: &[i64], m: u64) -> bool {
        if !self.completed.is_empty() || delta.len() != 4 + self.res_fixed.len() || delta[2] < 0 || delta[3] < 0 {
            return false;
        }
        let m = m as i64;
        let Some(sent) = (delta[3] as u64).checked_mul(m as u64).and_then(|s| s.checked_add(self.replayed_sent_bytes)) else { return false };
        let ok = self.res_fixed.iter().zip(&delta[4..]).all(|(&r, &d)| d.checked_mul(m).and_then(|x| x.checked_add(r)).is_some());
        if !ok {
            return false;
        }
        self.replayed_sent_bytes = sent;
        self.diagnosis.solves += (delta[0] * m) as u64;
        // `gen` is not moved: queued drains are valid by equality with it
        for (r, &d) in self.res_fixed.iter_mut().zip(&delta[4..]) {
            *r += d * m;
        }
        true
    }

    /// The live flow state relative to `now` for the task-graph executor's
    /// periodic skip: per running flow (in id order) `xref` of its id (who it
    /// belongs to, relative), endpoints, size, spray rotation modulo `l`,
    /// remaining work and rate (f64 bits: bit for bit), time since start;
    /// the time since the last drain accounting, a pending solve, the flows
    /// fresh since the last solve; what the component filling keeps between
    /// solves (whether all are to be re-filled, the resources touched since
    /// the last solve, the full ones). False when completions are uncollected.
    pub fn periodic_encode(&self, now: TimePs, l: u32, xref: &mut dyn FnMut(u32) -> Option<[u64; 2]>, out: &mut Vec<u64>) -> bool {
        if !self.completed.is_empty() || self.last_ps > now || l == 0 {
            return false;
        }
        out.push(self.all_dirty as u64);
        out.push(self.dirty.len() as u64);
        out.extend(self.dirty.iter().map(|&r| r as u64));
        if self.filling != Filling::Global {
            // (global: full flags live in the filler and are re-made by each solve before use)
            let full = self.res_full.iter().filter(|&&f| f).count();
            out.push(full as u64);
            out.extend(self.res_full.iter().enumerate().filter(|(_, &f)| f).map(|(r, _)| r as u64));
        }
        // with no flow running the drain clock does not matter (the next start resets it)
        let since = if self.active.is_empty() { 0 } else { now - self.last_ps };
        out.extend_from_slice(&[self.active.len() as u64, since, self.solve_at.map_or(u64::MAX, |t| now.wrapping_sub(t)), self.diagnosis.outside.is_some() as u64, self.rate.len() as u64]);
        for (k, &x) in self.active.iter().enumerate() {
            let t = &self.xfers[x as usize];
            let Some(r) = xref(x) else { return false };
            out.extend_from_slice(&r);
            out.extend_from_slice(&[
                t.src as u64,
                t.dst as u64,
                t.bytes,
                t.loopback as u64,
                (t.spray_offset % l) as u64,
                t.work.to_bits(),
                self.rate.get(k).copied().unwrap_or(0.0).to_bits(),
                now.wrapping_sub(t.start_ps),
            ]);
        }
        out.push(self.fresh.len() as u64);
        for f in &self.fresh {
            out.extend_from_slice(&[f.0 as u64, f.1 as u64, f.2 as u64]);
        }
        true
    }

    /// Payload bytes sent over the fabric so far (run and replayed).
    pub fn sent_bytes(&self) -> u64 {
        self.added_sent_bytes + self.replayed_sent_bytes
    }

    /// Drop the records of finished transfers (memory bounded by the
    /// transfers between idle moments, not by the run's): only when idle
    /// ([`FlowSim::is_idle`]) and the owner holds no transfer id from before
    /// (ids restart at 0; the run's numbering, which the hash spray reads,
    /// goes on). False, nothing done, if not idle.
    pub fn compact(&mut self) -> bool {
        if !self.is_idle() {
            return false;
        }
        self.id_base += self.xfers.len() as u64;
        self.xfers.clear();
        self.pos.clear();
        self.xfer_seen.clear();
        self.path_buf.clear();
        self.path_lidx.clear();
        self.live_path = 0;
        true
    }

    /// Transfers registered since the last [`FlowSim::compact`].
    pub fn transfers_held(&self) -> usize {
        self.xfers.len()
    }

    /// Running flows' ids (periodic skip).
    pub fn periodic_active(&self) -> &[u32] {
        &self.active
    }

    /// Whether a queued `Drain { gen }` is still valid (periodic skip).
    pub fn periodic_drain_valid(&self, gen: u64) -> bool {
        gen == self.gen
    }

    /// Move the live state `dt_ps` later (periodic skip): the drain clock, a
    /// pending solve, the start times of the transfers `xs`; plain ones
    /// (`true`) get their task tag moved by `sh` tasks.
    pub fn periodic_shift(&mut self, dt_ps: u64, xs: &[(u32, bool)], sh: u32) {
        self.last_ps += dt_ps;
        if let Some(t) = self.solve_at.as_mut() {
            *t += dt_ps;
        }
        for &(x, plain) in xs {
            let t = &mut self.xfers[x as usize];
            t.start_ps += dt_ps;
            if plain {
                t.tag += sh;
            }
        }
    }

    /// Transfers not finished: a description, or None.
    pub fn describe_incomplete(&self) -> Option<String> {
        let open: Vec<usize> = (0..self.xfers.len()).filter(|&x| !self.xfers[x].done && self.xfers[x].lanes > 0).collect();
        if open.is_empty() {
            return None;
        }
        let mut s = format!("{} flows unfinished, e.g. ", open.len());
        for &x in open.iter().take(4) {
            let t = &self.xfers[x];
            s += &format!("#{} GPU {} -> {} ({:.0} of {} bytes left); ", self.id_base + x as u64, t.src, t.dst, t.work * t.scale, t.bytes);
        }
        Some(s)
    }
}
