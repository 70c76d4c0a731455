//! The executor: a [`Model`] whose events are task completions plus the
//! network's own events, all on one queue.

use super::graph::{CollectiveKind, EdgeKind, TaskGraph, TaskKind, MAX_STEAL_PPM};
use super::network::{Network, NetworkDone};
use crate::engine::{self, EventQueue, FastMap, Interrupt, Mapped, Model, TimePs};
use crate::error::{ensure, Result};
use serde::Serialize;
use super::periodic::{self, Adj, Region};
use std::collections::{BTreeSet, HashMap};

/// Per-task timing of an executed graph (arrays indexed by task).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TaskGraphResult {
    /// When the task started (resources acquired), ps.
    pub start_ps: Vec<u64>,
    /// When it finished, ps.
    pub end_ps: Vec<u64>,
    /// Latest end among its data predecessors (0 if none), ps.
    pub data_ready_ps: Vec<u64>,
    /// Latest end among its credit predecessors (0 if none), ps. The credit
    /// wait of a task is max(0, credit_ready - data_ready).
    pub credit_ready_ps: Vec<u64>,
    /// End of the last task, ps.
    pub makespan_ps: u64,
    /// Events handled (tasks and network).
    pub events: u64,
    /// Whether the periodic skip applied ("periodic: skipped ..."), or why
    /// not ("not periodic: ..."); the results are identical either way.
    pub periodic: String,
}

enum Ev<N> {
    End(u32),
    /// A compute task's end under communication slowdown, valid while its
    /// generation matches (a rate change reschedules it).
    ComputeEnd(u32, u32),
    /// A task whose dependencies are met reaches its release time.
    Release(u32),
    Net(N),
}

const COMPUTE: usize = 0;
const COMM: usize = 1;

/// Periodic skip: the time task `j` gets from its nearest recorded copy
/// `i` strides earlier (`ord`: the order a start / end was recorded in, NONE if
/// not yet; `times`: the recorded times), `times[x] + i x dt`. None when there
/// is no copy, or the copy is older than the snapshot `snap` (then the stride
/// does not cover it and the jump is refused).
fn copied_time(ord: &[u32], times: &[u64], snap: u32, j: usize, s: usize, dt: u64) -> Option<u64> {
    let mut i = 1;
    loop {
        let x = j.checked_sub(i * s)?;
        if ord[x] != NONE {
            return (ord[x] >= snap).then(|| times[x] + i as u64 * dt);
        }
        i += 1;
    }
}

struct Exec<'g, N: Network> {
    g: &'g TaskGraph,
    net: &'g mut N,
    succ_off: Vec<u32>,
    succ: Vec<u32>,
    succ_edge: Vec<u32>,
    remaining: Vec<u32>,
    free: [Vec<u32>; 2],
    waiting: [Vec<BTreeSet<u32>>; 2],
    res: TaskGraphResult,
    done_tasks: usize,
    done_buf: NetworkDone,
    released: Vec<(u32, usize)>,
    steal: Option<Steal>,
    /// Executor events (End, ComputeEnd, Release) queued and not yet handled.
    pending: u64,
    /// Free communication streams summed over devices, and queued ends of
    /// communication tasks: both 0 means no network work can start before
    /// the network reports a completion ([`Network::set_comm_isolated`]).
    free_comm: u64,
    pending_comm_ends: u64,
    /// Time of the last event handled (u64::MAX before the first).
    last_ps: TimePs,
    per: Option<Box<Per>>,
}

const NONE: u32 = u32::MAX;

/// Anchors per period whose states are all kept (up to 384 states: repeats
/// at strides of many periods are found among them).
const COARSE_PER_PERIOD: usize = 16;
/// Anchors per period in all: the ones between the coarse anchors are
/// compared only with the last state at the same offset (a repeat found at
/// a finer offset lands the jump a whole period further when the window
/// would otherwise just miss the region's end).
const FINE_PER_PERIOD: usize = 64;

/// The periodic skip's state (see [`Exec::try_skip`]): what every detector
/// shares (task orders, the window), and the detectors: the steps' period
/// (one region) and the layers' (inner) periods (a region per run of
/// identical layers), each with its own anchors and states. A jump by one is
/// a jump of the plain run, so the other's states stay valid.
struct Per {
    pred: Adj,
    indeg: Vec<u32>,
    /// Per task: the order of its start / end among all starts / ends (NONE: not yet).
    start_ord: Vec<u32>,
    end_ord: Vec<u32>,
    start_cnt: u32,
    end_cnt: u32,
    /// All tasks below `low` are done.
    low: usize,
    /// Highest task index touched (a predecessor done, or started).
    max_touched: usize,
    /// Touched tasks, a bit each: a layer region's window ends at the
    /// highest touched task inside it (edges into the next step touch tasks
    /// far past it).
    touched: Vec<u64>,
    /// Events handled (the engine's count, kept here).
    handled: u64,
    /// Events the jumps stood for (`handled + extra_events`: the plain run's count).
    extra_events: u64,
    key: Vec<u64>,
    counters: Vec<i64>,
    fine_on: bool,
    /// FLITSIM_PERIODIC_DEBUG set: print, per anchor offset, where the state
    /// differs from the same offset's previous anchor (stderr).
    debug: bool,
    dets: Vec<Det>,
}

/// One period's detector: its verified regions (in task order; the one
/// holding `Per::low` is current), anchors and the states seen there.
struct Det {
    /// "steps" (the declared period) or "layers" (the inner periods).
    what: &'static str,
    regions: Vec<Region>,
    cur: usize,
    hint: bool,
    hint_region: usize,
    hint_off: usize,
    /// Whether the anchor being tried is a coarse one.
    hint_coarse: bool,
    /// Coarse anchor states seen: relative state words -> the anchor.
    table: FastMap<Vec<u64>, Snap>,
    /// Fine anchors: per offset, the last state seen there and its anchor
    /// (one period of them kept: they find repeats at the same offset).
    fine: FastMap<usize, (Vec<u64>, Snap)>,
    dbg: FastMap<usize, Vec<u64>>,
    anchors_tried: u64,
    anchors_idle: u64,
    skipped_periods: u64,
    /// Regions where at least one jump happened.
    regions_skipped: u64,
    last_skipped_region: usize,
    /// Longest stride jumped (periods): the state repeated that many periods apart.
    max_stride: usize,
    refusal: String,
}

impl Det {
    fn new(what: &'static str, regions: Vec<Region>) -> Det {
        Det {
            what,
            regions,
            cur: 0,
            hint: false,
            hint_region: 0,
            hint_off: 0,
            hint_coarse: false,
            table: FastMap::default(),
            fine: FastMap::default(),
            dbg: FastMap::default(),
            anchors_tried: 0,
            anchors_idle: 0,
            skipped_periods: 0,
            regions_skipped: 0,
            last_skipped_region: usize::MAX,
            max_stride: 0,
            refusal: String::new(),
        }
    }

    /// Forget every state seen (a new region, or the steps jumped).
    fn reset(&mut self) {
        self.table.clear();
        self.fine.clear();
        self.dbg.clear();
    }

    /// Task `i` started: an anchor of a region at or after the current one?
    /// (Any of them, not only the next: after the steps jumped, the run is
    /// many layer regions further on and `skip_at` moves `cur` there.)
    fn note_start(&mut self, i: usize, fine_on: bool) {
        // regions are disjoint and in task order: the first one ending past i
        let k = self.cur + self.regions[self.cur.min(self.regions.len())..].partition_point(|r| r.hi <= i);
        let Some(r) = self.regions.get(k) else { return };
        if i >= r.lo {
            let off = (i - r.lo) % r.p;
            let coarse = (r.p / COARSE_PER_PERIOD).max(1);
            let fine = if fine_on { (r.p / FINE_PER_PERIOD).max(1) } else { coarse };
            if off % coarse == 0 || off % fine == 0 {
                self.hint = true;
                self.hint_region = k;
                self.hint_off = off;
                self.hint_coarse = off % coarse == 0;
            }
        }
    }
}

impl Per {
    fn touch(&mut self, i: usize) {
        self.touched[i / 64] |= 1 << (i % 64);
        self.max_touched = self.max_touched.max(i);
    }

    fn is_touched(&self, i: usize) -> bool {
        self.touched[i / 64] >> (i % 64) & 1 == 1
    }

    /// The highest touched task below `end`, if any.
    fn highest_touched_below(&self, end: usize) -> Option<usize> {
        let end = end.min(self.max_touched + 1);
        if end == 0 {
            return None;
        }
        let mut w = (end - 1) / 64;
        let mut word = self.touched[w] & (u64::MAX >> (63 - (end - 1) % 64));
        loop {
            if word != 0 {
                return Some(w * 64 + 63 - word.leading_zeros() as usize);
            }
            if w == 0 {
                return None;
            }
            w -= 1;
            word = self.touched[w];
        }
    }
}

struct Snap {
    base: usize,
    now: u64,
    handled: u64,
    start_cnt: u32,
    end_cnt: u32,
    counters: Vec<i64>,
}

/// Communication steals compute (active only when the graph has a nonzero
/// `steal_ppm`): each running compute task keeps its remaining work in
/// ps x ppm of full-rate time and progresses at `1e6 - steal` ppm of full rate,
/// where `steal` is the sum of the shares of the communication tasks running on
/// its device (capped at `MAX_STEAL_PPM`). Integer arithmetic: deterministic.
struct Steal {
    /// Per device: summed ppm of the running communication tasks.
    device_ppm: Vec<u64>,
    /// Per device: running compute tasks.
    running: Vec<Vec<u32>>,
    /// Per task: remaining work (ps x ppm) and when it was last brought up to date.
    work: Vec<u128>,
    since: Vec<u64>,
    generation: Vec<u32>,
}

impl Steal {
    fn rate(&self, d: usize) -> u128 {
        1_000_000 - self.device_ppm[d].min(MAX_STEAL_PPM as u64) as u128
    }

    /// Bring task `t` on device `d` up to `now` at the device's current rate.
    fn advance(&mut self, now: u64, d: usize, t: usize) {
        let done = (now - self.since[t]) as u128 * self.rate(d);
        self.work[t] = self.work[t].saturating_sub(done);
        self.since[t] = now;
    }

    fn end_of(&self, now: u64, d: usize, t: usize) -> u64 {
        let r = self.rate(d);
        now.saturating_add(self.work[t].div_ceil(r).min(u64::MAX as u128) as u64)
    }
}

impl<'g, N: Network> Exec<'g, N> {
    /// (class, devices) a task needs.
    fn needs(&self, t: u32) -> (usize, &'g [u32]) {
        let g = self.g;
        let i = t as usize;
        match TaskKind::from_code(g.kind[i]).expect("validated") {
            TaskKind::Compute => (COMPUTE, std::slice::from_ref(&g.device[i])),
            TaskKind::Transfer => (COMM, std::slice::from_ref(&g.device[i])),
            TaskKind::Collective => (COMM, g.members(g.group[i])),
        }
    }

    fn can_start(&self, t: u32) -> bool {
        let (c, devs) = self.needs(t);
        devs.iter().all(|&d| self.free[c][d as usize] > 0)
    }

    fn try_start(&mut self, now: TimePs, t: u32, q: &mut EventQueue<Ev<N::Event>>) -> Result<bool> {
        if !self.can_start(t) {
            let (c, devs) = self.needs(t);
            for &d in devs {
                self.waiting[c][d as usize].insert(t);
            }
            return Ok(false);
        }
        let (c, devs) = self.needs(t);
        for &d in devs {
            self.free[c][d as usize] -= 1;
            self.waiting[c][d as usize].remove(&t);
        }
        if c == COMM {
            self.free_comm -= devs.len() as u64;
        }
        self.res.start_ps[t as usize] = now;
        if let Some(p) = self.per.as_mut() {
            let i = t as usize;
            p.start_ord[i] = p.start_cnt;
            p.start_cnt += 1;
            p.touch(i);
            let fine_on = p.fine_on;
            for d in &mut p.dets {
                d.note_start(i, fine_on);
            }
        }
        let g = self.g;
        let i = t as usize;
        if c == COMM {
            self.change_steal(now, t, true, q);
        }
        let mut sched = Mapped { queue: q, wrap: Ev::Net };
        match TaskKind::from_code(g.kind[i]).expect("validated") {
            TaskKind::Compute => match self.steal.as_mut() {
                None => self.done_buf.push((t, now.saturating_add(g.duration_ps[i]))),
                Some(st) => {
                    let d = g.device[i] as usize;
                    st.work[i] = g.duration_ps[i] as u128 * 1_000_000;
                    st.since[i] = now;
                    st.running[d].push(t);
                    q.schedule(st.end_of(now, d, i), Ev::ComputeEnd(t, st.generation[i]));
                    self.pending += 1;
                }
            },
            TaskKind::Transfer => {
                if g.bytes[i] == 0 || g.device[i] == g.peer[i] {
                    self.done_buf.push((t, now));
                } else {
                    self.net.start_transfer(now, t, g.device[i], g.peer[i], g.bytes[i], &mut sched, &mut self.done_buf)?;
                }
            }
            TaskKind::Collective => {
                let kind = CollectiveKind::from_code(g.collective[i]).expect("validated");
                if g.bytes[i] == 0 {
                    self.done_buf.push((t, now));
                } else {
                    self.net.start_collective(now, t, g.members(g.group[i]), kind, g.bytes[i], &mut sched, &mut self.done_buf)?;
                }
            }
        }
        self.flush_done(q);
        Ok(true)
    }

    /// Dependencies met: start now, or at the task's release time.
    fn on_ready(&mut self, now: TimePs, t: u32, q: &mut EventQueue<Ev<N::Event>>) -> Result<bool> {
        let rel = self.g.release_ps.get(t as usize).copied().unwrap_or(0);
        if rel > now {
            self.pending += 1;
            q.schedule(rel, Ev::Release(t));
            return Ok(false);
        }
        self.try_start(now, t, q)
    }

    /// A communication task starts (`on`) or ends: change the steal of its
    /// devices (transfer: source and destination, both run NCCL kernels;
    /// collective: every member) and reschedule the compute running there.
    fn change_steal(&mut self, now: TimePs, t: u32, on: bool, q: &mut EventQueue<Ev<N::Event>>) {
        let g = self.g;
        let i = t as usize;
        let Some(st) = self.steal.as_mut() else { return };
        let ppm = g.steal_ppm[i] as u64;
        if ppm == 0 {
            return;
        }
        let pair = [g.device[i], g.peer[i]];
        let devs: &[u32] = match TaskKind::from_code(g.kind[i]).expect("validated") {
            TaskKind::Transfer if g.device[i] == g.peer[i] => &pair[..1],
            TaskKind::Transfer => &pair[..],
            _ => g.members(g.group[i]),
        };
        for &d in devs {
            let d = d as usize;
            for k in 0..st.running[d].len() {
                let r = st.running[d][k] as usize;
                st.advance(now, d, r);
            }
            if on {
                st.device_ppm[d] += ppm;
            } else {
                st.device_ppm[d] -= ppm;
            }
            for k in 0..st.running[d].len() {
                let r = st.running[d][k] as usize;
                st.generation[r] = st.generation[r].wrapping_add(1);
                q.schedule(st.end_of(now, d, r), Ev::ComputeEnd(r as u32, st.generation[r]));
            }
            self.pending += st.running[d].len() as u64;
        }
    }

    fn flush_done(&mut self, q: &mut EventQueue<Ev<N::Event>>) {
        for i in 0..self.done_buf.len() {
            let (tag, t) = self.done_buf[i];
            self.pending += 1;
            if self.needs(tag).0 == COMM {
                self.pending_comm_ends += 1;
            }
            q.schedule(t, Ev::End(tag));
        }
        self.done_buf.clear();
    }

    fn finish_task(&mut self, now: TimePs, t: u32, q: &mut EventQueue<Ev<N::Event>>) -> Result<()> {
        let i = t as usize;
        self.res.end_ps[i] = now;
        self.res.makespan_ps = self.res.makespan_ps.max(now);
        if let Some(p) = self.per.as_mut() {
            p.end_ord[i] = p.end_cnt;
            p.end_cnt += 1;
            for &x in &self.succ[self.succ_off[i] as usize..self.succ_off[i + 1] as usize] {
                p.touch(x as usize);
            }
        }
        self.done_tasks += 1;
        let (c, devs) = self.needs(t);
        for &d in devs {
            self.free[c][d as usize] += 1;
            self.released.push((d, c));
        }
        if c == COMM {
            self.free_comm += devs.len() as u64;
            self.change_steal(now, t, false, q);
        } else if let Some(st) = self.steal.as_mut() {
            let run = &mut st.running[self.g.device[i] as usize];
            if let Some(k) = run.iter().position(|&x| x == t) {
                run.swap_remove(k);
            }
        }
        for k in self.succ_off[i] as usize..self.succ_off[i + 1] as usize {
            let s = self.succ[k] as usize;
            let e = self.succ_edge[k] as usize;
            if self.g.edge_kind[e] == EdgeKind::Credit as u8 {
                self.res.credit_ready_ps[s] = self.res.credit_ready_ps[s].max(now);
            } else {
                self.res.data_ready_ps[s] = self.res.data_ready_ps[s].max(now);
            }
            self.remaining[s] -= 1;
            if self.remaining[s] == 0 {
                self.on_ready(now, s as u32, q)?;
            }
        }
        // Freed streams go to the lowest-index waiting task that can start.
        while let Some((d, c)) = self.released.pop() {
            let mut cursor = 0u32;
            loop {
                let next = self.waiting[c][d as usize].range(cursor..).next().copied();
                let Some(w) = next else { break };
                cursor = w + 1;
                if self.free[c][d as usize] == 0 {
                    break;
                }
                if self.can_start(w) {
                    self.try_start(now, w, q)?;
                }
            }
        }
        Ok(())
    }
}

impl<N: Network> Model for Exec<'_, N> {
    type Event = Ev<N::Event>;

    fn handle(&mut self, now: TimePs, ev: Self::Event, q: &mut EventQueue<Self::Event>) -> Result<()> {
        if !matches!(ev, Ev::Net(_)) {
            self.pending -= 1;
        }
        if let Some(p) = self.per.as_mut() {
            p.handled += 1;
        }
        self.dispatch(now, ev, q)?;
        self.last_ps = now;
        if self.per.is_some() {
            for di in 0..self.per.as_ref().map_or(0, |p| p.dets.len()) {
                if std::mem::take(&mut self.per.as_mut().expect("checked").dets[di].hint) {
                    self.try_skip(now, q, di)?;
                }
            }
        }
        Ok(())
    }
}

impl<N: Network> Exec<'_, N> {
    fn dispatch(&mut self, now: TimePs, ev: Ev<N::Event>, q: &mut EventQueue<Ev<N::Event>>) -> Result<()> {
        match ev {
            Ev::End(t) => {
                if self.needs(t).0 == COMM {
                    self.pending_comm_ends -= 1;
                    // A replay started while isolated queued this end when it
                    // started, so it fires before executor events queued since
                    // for the same picosecond; the plain run queues it at this
                    // time, after them. Equal only when nothing else happens at
                    // this picosecond: otherwise repeat the run without such replays.
                    if self.net.isolated_end(t) && (self.last_ps == now || q.peek_time() == Some(now)) {
                        return Err(crate::error::FlitsimError::Retry {
                            time_ps: now,
                            detail: format!("task {t}: a collective replayed while isolated ends at the same picosecond as another event"),
                        });
                    }
                }
                self.finish_task(now, t, q)
            }
            Ev::ComputeEnd(t, gen) => match &self.steal {
                Some(st) if st.generation[t as usize] == gen => self.finish_task(now, t, q),
                _ => Ok(()),
            },
            Ev::Release(t) => self.try_start(now, t, q).map(|_| ()),
            Ev::Net(e) => {
                self.net.set_executor_pending(self.pending);
                self.net.set_comm_isolated(self.free_comm == 0 && self.pending_comm_ends == 0);
                let mut sched = Mapped { queue: q, wrap: Ev::Net };
                self.net.handle(now, e, &mut sched, &mut self.done_buf)?;
                self.flush_done(q);
                Ok(())
            }
        }
    }
}

impl<N: Network> Exec<'_, N> {
    /// The periodic skip, tried at an anchor (the end of an event in which an
    /// anchor task of the verified region started).
    ///
    /// The live state is encoded relative to the anchor: `base` (the region
    /// index below which every task is done, a whole number of periods past
    /// `lo`), per task of the window `base..=max_touched` its status
    /// (done / untouched / waiting or running, predecessors left, time since
    /// its start), the stream counts, the queued executor events (kind, task
    /// - base, time - now, still valid), the compute-steal work, and the
    /// network's own words ([`Network::periodic_state`]; only when none of its
    /// events are queued). The executor and the flow level are deterministic
    /// and shift-invariant (integer ps, rates from differences of times,
    /// ties by index order), so two anchors with equal words `s` tasks and
    /// `dt` ps apart evolve identically, shifted. At the second one the run
    /// jumps `m` such strides ahead: every task a stride later starts and
    /// ends `dt` later (times filled from the recorded stride), the live
    /// state moves by `m s` tasks and `m dt` ps, and every counter grows by
    /// `m` times its growth over the stride. The result is the plain run's,
    /// bit for bit (tests/periodic.rs).
    fn try_skip(&mut self, now: TimePs, q: &mut EventQueue<Ev<N::Event>>, di: usize) -> Result<()> {
        let mut p = self.per.take().expect("periodic on");
        let r = self.skip_at(now, q, &mut p, di);
        self.per = Some(p);
        r
    }

    fn skip_at(&mut self, now: TimePs, q: &mut EventQueue<Ev<N::Event>>, p: &mut Per, di: usize) -> Result<()> {
        p.dets[di].anchors_tried += 1;
        let n = self.g.len();
        while p.low < n && p.end_ord[p.low] != NONE {
            p.low += 1;
        }
        {
            // the region holding `low` is current (a new one starts with no states)
            let d = &mut p.dets[di];
            while d.cur + 1 < d.regions.len() && p.low >= d.regions[d.cur + 1].lo {
                d.cur += 1;
                d.reset();
            }
            if d.hint_region != d.cur {
                return Ok(());
            }
        }
        let Region { lo, hi, p: pp } = p.dets[di].regions[p.dets[di].cur];
        if p.low < lo || p.low >= hi {
            return Ok(());
        }
        let base = lo + (p.low - lo) / pp * pp;
        // the window: up to the highest touched task inside the region (the
        // tasks touched past it only lose predecessors until they start:
        // `jump` refuses a stride in which one started)
        let wend = p.highest_touched_below(hi).map_or(base, |t| t + 1).max(base);
        if wend >= hi {
            return Ok(());
        }
        let mut key = std::mem::take(&mut p.key);
        key.clear();
        let evs = q.take_all();
        let nev: Vec<&N::Event> = evs.iter().filter_map(|(_, e)| if let Ev::Net(x) = e { Some(x) } else { None }).collect();
        let net_ok = self.net.periodic_state(now, base as u32, &nev, &mut key);
        drop(nev);
        if !net_ok {
            for (t, e) in evs {
                q.schedule(t, e);
            }
            p.key = key;
            return Ok(());
        }
        p.dets[di].anchors_idle += 1;
        for c in 0..2 {
            key.extend(self.free[c].iter().map(|&f| f as u64));
        }
        key.push((wend - base) as u64);
        for j in base..wend {
            if p.end_ord[j] != NONE {
                key.push(0);
            } else if p.start_ord[j] == NONE && self.remaining[j] == p.indeg[j] {
                key.push(1);
            } else if p.start_ord[j] == NONE {
                key.extend_from_slice(&[2, self.remaining[j] as u64]);
            } else {
                key.extend_from_slice(&[3, now - self.res.start_ps[j]]);
            }
        }
        let mut ok = true;
        for (t, e) in &evs {
            let (code, task, valid) = match e {
                Ev::End(x) => (1, *x, 1),
                Ev::ComputeEnd(x, gen) => (2, *x, self.steal.as_ref().is_some_and(|st| st.generation[*x as usize] == *gen) as u64),
                Ev::Net(_) => (4, base as u32, 0),
                Ev::Release(_) => (3, 0, 0),
            };
            if code == 3 || (task as usize) < lo || task as usize >= hi {
                ok = false;
            }
            key.extend_from_slice(&[code, (task as i64 - base as i64) as u64, t - now, valid]);
        }
        for (t, e) in evs {
            q.schedule(t, e);
        }
        if let Some(st) = &self.steal {
            key.extend_from_slice(&st.device_ppm);
            for run in &st.running {
                key.push(run.len() as u64);
                for &x in run {
                    let x = x as usize;
                    if x < base || x >= wend {
                        ok = false;
                    }
                    key.extend_from_slice(&[(x - base.min(x)) as u64, (st.work[x] >> 64) as u64, st.work[x] as u64, now - st.since[x]]);
                }
            }
        }
        if !ok {
            p.key = key;
            return Ok(());
        }
        p.counters.clear();
        self.net.periodic_counters(&mut p.counters);
        let events = p.handled + p.extra_events;
        let d = &mut p.dets[di];
        if p.debug {
            let off = (now, base);
            if let Some(prev) = d.dbg.get(&d.hint_off) {
                let df: Vec<(usize, u64, u64)> = prev.iter().zip(&key).enumerate().filter(|(_, (a, b))| a != b).map(|(i, (a, b))| (i, *a, *b)).take(12).collect();
                eprintln!("{} anchor off={} t={} base={} len={}/{} head={:?} diffs={:?}", d.what, d.hint_off, off.0, off.1, key.len(), prev.len(), &key[..key.len().min(8)], df);
            }
            d.dbg.insert(d.hint_off, key.clone());
        }
        let found = if d.hint_coarse { d.table.get(&key) } else { d.fine.get(&d.hint_off).filter(|(k, _)| *k == key).map(|(_, s)| s) };
        let Some(snap) = found else {
            let snap = Snap { base, now, handled: events, start_cnt: p.start_cnt, end_cnt: p.end_cnt, counters: p.counters.clone() };
            if d.hint_coarse {
                // bounded memory; a full table held the transient's states: start afresh
                if d.table.len() >= 384 {
                    d.table.clear();
                }
                d.table.insert(key.clone(), snap);
            } else {
                d.fine.insert(d.hint_off, (key.clone(), snap));
            }
            p.key = key;
            return Ok(());
        };
        p.key = key;
        let (s, dt) = (base - snap.base, now - snap.now);
        if s == 0 || dt == 0 {
            return Ok(());
        }
        let wlen = wend - base;
        // m strides: the moved window must not overlap the current one and
        // must end inside the region (vend <= hi). That is enough: a task t of
        // the moved window is the verified copy of t - s (kind, duration,
        // edges shifted), and every task the skipped strides touch lies below
        // the moved window's end (a successor of a task done in the template
        // was touched there, so its copy is below max_touched + m s); tail
        // tasks past the region only lose predecessors, checked in `jump`.
        let m_min = wlen.div_ceil(s).max(1);
        let room = hi.saturating_sub(base + wlen);
        let m = room / s;
        if p.debug {
            eprintln!("{} match: base={base} stride={s} tasks dt={dt} window={wlen} m={m} (at least {m_min})", d.what);
        }
        if m < m_min {
            return Ok(());
        }
        let delta: Vec<i64> = p.counters.iter().zip(&snap.counters).map(|(a, b)| a - b).collect();
        let (snap_start, snap_end, ev_stride) = (snap.start_cnt, snap.end_cnt, events - snap.handled);
        self.jump(now, q, p, di, base, wend, s, dt, m, &delta, snap_start, snap_end, ev_stride)
    }

    #[allow(clippy::too_many_arguments)]
    fn jump(&mut self, now: TimePs, q: &mut EventQueue<Ev<N::Event>>, p: &mut Per, di: usize, base: usize, wend: usize, s: usize, dt: u64, m: usize, delta: &[i64], snap_start: u32, snap_end: u32, ev_stride: u64) -> Result<()> {
        let Region { hi, p: pp, .. } = p.dets[di].regions[p.dets[di].cur];
        let sh = m * s;
        let vend = wend + sh; // the moved window ends here
        let big_dt = dt * m as u64;
        let vb = base + sh;
        // virtual status of j in base..vend at the moved anchor
        let vstarted = |p: &Per, j: usize| j < vb || p.start_ord[j - sh] != NONE;
        let vdone = |p: &Per, j: usize| j < vb || p.end_ord[j - sh] != NONE;
        // Checks first (nothing changed until all pass).
        let mut filled_start = Vec::new();
        let mut filled_end = Vec::new();
        for j in base..vend {
            if vstarted(p, j) && p.start_ord[j] == NONE {
                let Some(t) = copied_time(&p.start_ord, &self.res.start_ps, snap_start, j, s, dt) else { return Ok(()) };
                filled_start.push((j, t));
            }
            if vdone(p, j) && p.end_ord[j] == NONE {
                let Some(t) = copied_time(&p.end_ord, &self.res.end_ps, snap_end, j, s, dt) else { return Ok(()) };
                filled_end.push((j, t));
            }
        }
        // a task past the region started in the stride, or runs: the strides
        // to skip would not repeat it
        if p.max_touched >= hi {
            let mut x = p.max_touched;
            while x >= hi {
                if p.is_touched(x) && p.start_ord[x] != NONE && (p.end_ord[x] == NONE || p.start_ord[x] >= snap_start) {
                    return Ok(());
                }
                x -= 1;
            }
        }
        // successors of the newly done: inside the moved window, or past the
        // region (their counts drop; none may become ready in the skipped time)
        let mut outside: HashMap<usize, u32> = HashMap::new();
        for &(j, _) in &filled_end {
            for k in self.succ_off[j] as usize..self.succ_off[j + 1] as usize {
                let x = self.succ[k] as usize;
                if x >= vend || x < base {
                    if x < hi {
                        return Ok(());
                    }
                    *outside.entry(x).or_default() += 1;
                }
            }
        }
        if outside.iter().any(|(&x, &c)| self.remaining[x] <= c) {
            return Ok(());
        }
        let evs = q.take_all();
        let nev: Vec<&N::Event> = evs.iter().filter_map(|(_, e)| if let Ev::Net(x) = e { Some(x) } else { None }).collect();
        let net_ok = self.net.periodic_advance(now, delta, m as u64, big_dt, sh as u32, &nev);
        drop(nev);
        if !net_ok {
            for (t, e) in evs {
                q.schedule(t, e);
            }
            p.dets[di].refusal = "the network refused to skip (a counter would overflow or the spray numbering would change)".into();
            return Ok(());
        }
        // Apply.
        for (&x, &c) in &outside {
            self.remaining[x] -= c;
        }
        // the live window moves: remaining counts, stream waits, running tasks
        for j in base..wend {
            self.remaining[j + sh] = self.remaining[j];
        }
        for j in base..vb {
            self.remaining[j] = 0;
        }
        for c in 0..2 {
            for w in &mut self.waiting[c] {
                if !w.is_empty() {
                    let moved: Vec<u32> = w.iter().map(|&t| t + sh as u32).collect();
                    w.clear();
                    w.extend(moved);
                }
            }
        }
        for j in base..wend {
            if p.start_ord[j] != NONE && p.end_ord[j] == NONE {
                self.res.start_ps[j + sh] = self.res.start_ps[j] + big_dt;
            }
        }
        for &(j, t) in &filled_start {
            if j >= vb && p.start_ord[j - sh] != NONE && p.end_ord[j - sh] == NONE {
                continue; // a running task of the moved window: set above
            }
            self.res.start_ps[j] = t;
        }
        for &(j, t) in &filled_end {
            self.res.end_ps[j] = t;
            self.res.makespan_ps = self.res.makespan_ps.max(t);
        }
        // orders: everything filled is before the moved anchor
        let mut started_moved = Vec::new();
        for &(j, _) in &filled_start {
            started_moved.push(j);
        }
        for j in started_moved {
            p.start_ord[j] = p.start_cnt;
        }
        p.start_cnt += 1;
        for &(j, _) in &filled_end {
            p.end_ord[j] = p.end_cnt;
        }
        p.end_cnt += 1;
        self.done_tasks += filled_end.len();
        for j in base..vend {
            if p.start_ord[j] != NONE || self.remaining[j] < p.indeg[j] {
                p.touch(j);
            }
        }
        for &x in outside.keys() {
            p.touch(x);
        }
        if let Some(st) = self.steal.as_mut() {
            for run in &mut st.running {
                for x in run.iter_mut() {
                    let (a, b) = (*x as usize, *x as usize + sh);
                    st.work[b] = st.work[a];
                    st.since[b] = st.since[a] + big_dt;
                    st.generation[b] = st.generation[a];
                    *x = b as u32;
                }
            }
        }
        for (t, e) in evs {
            let e = match e {
                Ev::End(x) => Ev::End(x + sh as u32),
                Ev::ComputeEnd(x, gen) => {
                    if let Some(st) = self.steal.as_mut() {
                        st.generation[x as usize + sh] = st.generation[x as usize];
                    }
                    Ev::ComputeEnd(x + sh as u32, gen)
                }
                other => other,
            };
            q.schedule(t + big_dt, e);
        }
        // data / credit ready from the (virtually) done predecessors
        // (data, credit) ready of task j: the latest end of its done predecessors per edge kind
        let ready = |j: usize, end_ps: &[u64]| {
            let (mut d, mut c) = (0u64, 0u64);
            for &(x, kind) in p.pred.of(j) {
                let x = x as usize;
                if p.end_ord[x] != NONE {
                    if kind == EdgeKind::Credit as u8 {
                        c = c.max(end_ps[x]);
                    } else {
                        d = d.max(end_ps[x]);
                    }
                }
            }
            (d, c)
        };
        for j in base..vend {
            (self.res.data_ready_ps[j], self.res.credit_ready_ps[j]) = ready(j, &self.res.end_ps);
        }
        for (&x, _) in &outside {
            (self.res.data_ready_ps[x], self.res.credit_ready_ps[x]) = ready(x, &self.res.end_ps);
        }
        p.extra_events += ev_stride * m as u64;
        let d = &mut p.dets[di];
        d.skipped_periods += (sh / pp) as u64;
        d.max_stride = d.max_stride.max(s / pp);
        if d.last_skipped_region != d.cur {
            d.last_skipped_region = d.cur;
            d.regions_skipped += 1;
        }
        d.table.clear();
        if di == 0 && p.dets.len() > 1 && p.dets[0].what == "steps" {
            // the steps jumped past the layers' regions: their states are of another step
            for d in &mut p.dets[1..] {
                d.reset();
            }
        }
        Ok(())
    }
}

/// What the periodic skip did: "periodic: skipped ..." where a detector
/// jumped (the steps' report as before stop 33, then the layers'), else
/// "not periodic: <why>" (the steps' reason, then the layers').
fn periodic_report(why_steps: Option<String>, why_layers: Option<String>, per: Option<&Per>) -> String {
    // "1 task", "2 tasks"
    let count = |n: usize, what: &str| if n == 1 { format!("1 {what}") } else { format!("{n} {what}s") };
    let why = |d: &Det| {
        if !d.refusal.is_empty() {
            d.refusal.clone()
        } else if d.anchors_idle == 0 {
            format!(
                "the network could not encode its state at any anchor ({} anchors tried; e.g. packet level, a start check or a recording in flight)",
                d.anchors_tried
            )
        } else if d.what == "steps" {
            format!("no state repeated within the region ({} of {} anchors encoded)", d.anchors_idle, d.anchors_tried)
        } else {
            format!("no state repeated within a layer region ({} of {} anchors encoded)", d.anchors_idle, d.anchors_tried)
        }
    };
    let dets: &[Det] = per.map_or(&[], |p| &p.dets);
    let steps = dets.iter().find(|d| d.what == "steps");
    let layers = dets.iter().find(|d| d.what == "layers");
    let steps_part = steps.filter(|d| d.skipped_periods > 0).map(|d| {
        let r = &d.regions[0];
        format!(
            "skipped {} of {} ({} each, region tasks {}..{}, stride up to {}; exact)",
            d.skipped_periods,
            count((r.hi - r.lo) / r.p, "period"),
            count(r.p, "task"),
            r.lo,
            r.hi,
            count(d.max_stride, "period")
        )
    });
    let layers_part = layers.filter(|d| d.skipped_periods > 0).map(|d| {
        let mut ps: Vec<usize> = d.regions.iter().map(|r| r.p).collect();
        ps.sort_unstable();
        ps.dedup();
        let many = ps.len() > 1 || ps.first() != Some(&1);
        let ps: Vec<String> = ps.iter().map(|p| p.to_string()).collect();
        format!(
            "skipped {} in {} of {} ({} task{} each; exact)",
            count(d.skipped_periods as usize, "layer period"),
            d.regions_skipped,
            count(d.regions.len(), "layer region"),
            ps.join(" or "),
            if many { "s" } else { "" }
        )
    });
    let steps_why = why_steps.or_else(|| steps.map(why)).unwrap_or_default();
    let layers_why = why_layers.or_else(|| layers.map(why));
    match (steps_part, layers_part) {
        (Some(a), Some(b)) => format!("periodic: {a}; {b}"),
        (Some(a), None) => match layers_why {
            Some(l) => format!("periodic: {a}; layers not skipped: {l}"),
            None => format!("periodic: {a}"),
        },
        (None, Some(b)) => format!("periodic: {b}; steps not skipped: {steps_why}"),
        // (turned off, the layers were not looked at: no layers' reason)
        (None, None) => match layers_why {
            Some(l) => format!("not periodic: {steps_why}; layers: {l}"),
            None => format!("not periodic: {steps_why}"),
        },
    }
}

/// Execute `graph` over `net` from time 0.
///
/// # Errors
/// `Config` for an invalid graph (bad shapes, device ids outside the network,
/// a dependency cycle, named task by task); `Stalled` if tasks remain but no
/// event can make progress; whatever the network or the interrupt hook returns.
pub fn execute<N: Network>(graph: &TaskGraph, net: &mut N, interrupt: &mut dyn Interrupt) -> Result<TaskGraphResult> {
    graph.validate()?;
    ensure(
        graph.devices <= net.devices(),
        "devices",
        graph.devices,
        &format!("at most the network's {} devices (device ids must exist in the fabric)", net.devices()),
    )?;
    let n = graph.len();
    let (succ_off, succ, succ_edge) = graph.successors();
    let mut remaining = crate::error::try_vec(n, 0u32, "tasks")?;
    for &d in &graph.edge_dst {
        remaining[d as usize] += 1;
    }
    let nd = graph.devices as usize;
    let mut ex = Exec {
        g: graph,
        net,
        succ_off,
        succ,
        succ_edge,
        remaining,
        free: [vec![graph.compute_streams; nd], vec![graph.comm_streams; nd]],
        waiting: [vec![BTreeSet::new(); nd], vec![BTreeSet::new(); nd]],
        per: None,
        res: TaskGraphResult {
            start_ps: crate::error::try_vec(n, 0, "tasks")?,
            end_ps: crate::error::try_vec(n, 0, "tasks")?,
            data_ready_ps: crate::error::try_vec(n, 0, "tasks")?,
            credit_ready_ps: crate::error::try_vec(n, 0, "tasks")?,
            makespan_ps: 0,
            events: 0,
            periodic: String::new(),
        },
        done_tasks: 0,
        done_buf: Vec::new(),
        released: Vec::new(),
        pending: 0,
        free_comm: graph.comm_streams as u64 * nd as u64,
        pending_comm_ends: 0,
        last_ps: u64::MAX,
        steal: graph.steal_ppm.iter().any(|&v| v > 0).then(|| Steal {
            device_ppm: vec![0; nd],
            running: vec![Vec::new(); nd],
            work: vec![0; n],
            since: vec![0; n],
            generation: vec![0; n],
        }),
    };
    // The steps' period (one region) and the layers' (a region per run of
    // identical layers): two detectors on one shared record of the run.
    let off = std::env::var("FLITSIM_PERIODIC").is_ok_and(|v| v == "0");
    let (mut why_steps, mut why_layers) = (None, None);
    let mut dets = Vec::new();
    if off {
        why_steps = Some("turned off (FLITSIM_PERIODIC=0)".to_string());
    } else if graph.period_tasks == 0 && graph.inner_periods.is_empty() {
        why_steps = Some("no period declared".to_string());
    } else {
        let pred = periodic::preds(graph);
        let succ = periodic::succs(graph);
        match periodic::verify(graph, &pred, &succ) {
            Ok(r) => dets.push(Det::new("steps", vec![r])),
            Err(w) => why_steps = Some(w),
        }
        if !graph.inner_periods.is_empty() {
            match periodic::verify_inner(graph, &pred, &succ) {
                Ok(rs) => dets.push(Det::new("layers", rs)),
                Err(w) => why_layers = Some(w),
            }
        }
        if !dets.is_empty() {
            let mut indeg = vec![0u32; n];
            for &d in &graph.edge_dst {
                indeg[d as usize] += 1;
            }
            ex.per = Some(Box::new(Per {
                pred,
                indeg,
                start_ord: vec![NONE; n],
                end_ord: vec![NONE; n],
                start_cnt: 0,
                end_cnt: 0,
                low: 0,
                max_touched: 0,
                touched: vec![0; n.div_ceil(64)],
                handled: 0,
                extra_events: 0,
                key: Vec::new(),
                counters: Vec::new(),
                // FLITSIM_PERIODIC_FINE=0: the coarse anchors only (as before stop 16)
                fine_on: !std::env::var("FLITSIM_PERIODIC_FINE").is_ok_and(|v| v == "0"),
                debug: std::env::var("FLITSIM_PERIODIC_DEBUG").is_ok(),
                dets,
            }));
        }
    }
    let mut q: EventQueue<Ev<N::Event>> = EventQueue::with_capacity(1024);
    for t in 0..n as u32 {
        if ex.remaining[t as usize] == 0 {
            ex.on_ready(0, t, &mut q)?;
        }
    }
    let summary = engine::run(&mut ex, &mut q, u64::MAX, interrupt)?;
    if ex.done_tasks < n {
        let stuck: Vec<usize> = (0..n).filter(|&t| ex.res.end_ps[t] == 0 && ex.remaining[t] == 0).take(8).collect();
        return Err(engine::stalled(
            summary.end_ps,
            format!("{} of {n} tasks never finished; ready but unfinished tasks include {stuck:?} (network never reported completion)", n - ex.done_tasks),
        ));
    }
    ex.net.finish(summary.end_ps);
    let extra = ex.per.as_ref().map_or(0, |p| p.extra_events);
    ex.res.events = summary.events + extra + ex.net.replayed_events();
    ex.res.periodic = periodic_report(why_steps, why_layers, ex.per.as_deref());
    Ok(ex.res)
}

#[cfg(test)]
mod tests {
    use super::super::AnalyticNetwork;
    use super::*;
    use crate::engine::NoInterrupt;

    fn chain_graph(k: u32, m: u32, dur: u64) -> TaskGraph {
        // K stages x M micro-batches; (i, j) after (i, j-1) [data] and (i-1, j) [same stream order].
        let mut g = TaskGraph { devices: k, compute_streams: 1, comm_streams: 1, ..Default::default() };
        let id = |i: u32, j: u32| i * k + j;
        for _i in 0..m {
            for j in 0..k {
                g.kind.push(0);
                g.device.push(j);
                g.peer.push(0);
                g.duration_ps.push(dur);
                g.bytes.push(0);
                g.collective.push(0);
                g.group.push(0);
            }
        }
        for i in 0..m {
            for j in 0..k {
                if j > 0 {
                    g.edge_src.push(id(i, j - 1));
                    g.edge_dst.push(id(i, j));
                    g.edge_kind.push(0);
                }
            }
        }
        g
    }

    #[test]
    fn pipeline_makespan_is_m_plus_k_minus_1_slots() {
        // Closed form: K stages, M equal micro-batches of time d, zero comm:
        // makespan = (M + K - 1) d.
        let (k, m, d) = (4, 8, 1000);
        let g = chain_graph(k, m, d);
        let mut net = AnalyticNetwork::new(k, 0, 0);
        let r = execute(&g, &mut net, &mut NoInterrupt).unwrap();
        assert_eq!(r.makespan_ps, (m + k - 1) as u64 * d);
    }

    #[test]
    fn release_time_delays_a_ready_task() {
        // Stage 0 of micro-batch 1 released at 5000 ps: it and its successor shift.
        let mut g = chain_graph(2, 2, 1000);
        g.release_ps = vec![0, 0, 5000, 0];
        let r = execute(&g, &mut AnalyticNetwork::new(2, 0, 0), &mut NoInterrupt).unwrap();
        assert_eq!(r.start_ps[2], 5000);
        assert_eq!(r.end_ps[3], 7000);
    }

    #[test]
    fn cycle_is_named() {
        let mut g = chain_graph(3, 1, 10);
        g.edge_src.push(2);
        g.edge_dst.push(0);
        g.edge_kind.push(0);
        let e = execute(&g, &mut AnalyticNetwork::new(3, 0, 0), &mut NoInterrupt).unwrap_err().to_string();
        assert!(e.contains("cycle 0 -> 1 -> 2 -> 0"), "{e}");
    }

    #[test]
    fn transfer_takes_alpha_plus_bytes_over_bandwidth() {
        let mut g = TaskGraph { devices: 2, compute_streams: 1, comm_streams: 1, ..Default::default() };
        g.kind = vec![1];
        g.device = vec![0];
        g.peer = vec![1];
        g.duration_ps = vec![0];
        g.bytes = vec![1_000_000];
        g.collective = vec![0];
        g.group = vec![0];
        // 1 MB at 100 GB/s = 10 us; + 1 us alpha.
        let r = execute(&g, &mut AnalyticNetwork::new(2, 1_000_000, 100_000_000_000), &mut NoInterrupt).unwrap();
        assert_eq!(r.end_ps[0], 11_000_000);
    }

    fn overlap_graph(steal_ppm: u32) -> TaskGraph {
        // task 0: transfer 0 -> 1 (1 MB, 11 us on the network below); tasks 1, 2: 20 us compute on 0 and 1.
        let mut g = TaskGraph { devices: 2, compute_streams: 1, comm_streams: 1, ..Default::default() };
        g.kind = vec![1, 0, 0];
        g.device = vec![0, 0, 1];
        g.peer = vec![1, 0, 0];
        g.duration_ps = vec![0, 20_000_000, 20_000_000];
        g.bytes = vec![1_000_000, 0, 0];
        g.collective = vec![0; 3];
        g.group = vec![0; 3];
        g.steal_ppm = vec![steal_ppm, 0, 0];
        g
    }

    #[test]
    fn communication_slows_overlapped_compute_by_its_share() {
        // Closed form: compute D overlapped from its start with communication of length C
        // taking share s runs D + C s: 20 us + 11 us x 0.25 = 22.75 us, on both ends of the transfer.
        let net = || AnalyticNetwork::new(2, 1_000_000, 100_000_000_000);
        let r = execute(&overlap_graph(250_000), &mut net(), &mut NoInterrupt).unwrap();
        assert_eq!(r.end_ps[0], 11_000_000);
        assert_eq!(r.end_ps[1], 22_750_000);
        assert_eq!(r.end_ps[2], 22_750_000);
        // No share: overlap is free, the compute ends at its duration.
        let r0 = execute(&overlap_graph(0), &mut net(), &mut NoInterrupt).unwrap();
        assert_eq!(r0.end_ps[1], 20_000_000);
    }

    #[test]
    fn steal_above_the_cap_is_a_config_error() {
        let e = execute(&overlap_graph(960_000), &mut AnalyticNetwork::new(2, 0, 0), &mut NoInterrupt).unwrap_err().to_string();
        assert!(e.contains("steal_ppm[0]"), "{e}");
    }
}

