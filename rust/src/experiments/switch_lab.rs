//! The switch lab: one switch driven by synthetic traffic, in Rust for speed
//! (spec in, results out).
//!
//! Each input has a source that creates packets (Bernoulli i.i.d. or bursty
//! on/off arrivals; uniform, permutation, hotspot or incast destinations) into
//! an unbounded-in-principle source queue (bounded here by
//! `source_queue_packets`; overflow is counted and marks the run saturated).
//! The source sends its queue's head over the input link (one flit per cycle)
//! when the switch's input buffer holds the whole packet (credits). Each output
//! feeds a sink that consumes a packet as its tail arrives and returns its
//! credits `credit_return_cycles` later; outputs listed in `dead_outputs` never
//! return credits (a failed downstream), which is how stalls are provoked.
//!
//! Statistics cover `measure_cycles` after `warmup_cycles`.

use crate::engine::{Interrupt, SimRng};
use crate::error::{ensure, Result};
use crate::stats::Histogram;
use crate::switch::{bits, Packet, Switch, SwitchSpec, SwitchStats};
use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// Destination pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pattern {
    /// Each packet to an output drawn uniformly from all N.
    Uniform,
    /// A fixed random permutation (seeded): input i always sends to perm(i).
    Permutation,
    /// With probability `hotspot_fraction` to `hotspot_port`, else uniform.
    Hotspot,
    /// `incast_sources` inputs all send to `incast_target`; others are idle.
    Incast,
}

/// Arrival process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Process {
    /// A new packet each cycle with probability load / packet_flits.
    Bernoulli,
    /// On/off: bursts of geometrically many packets (mean
    /// `mean_burst_packets`) back to back to one destination, separated by
    /// geometric idle gaps sized so the mean rate is `load`.
    Bursty,
}

/// Synthetic traffic.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrafficSpec {
    pub pattern: Pattern,
    pub process: Process,
    /// Offered load per active source, flits per cycle, in (0, 1].
    pub load: f64,
    /// Packet length, flits.
    pub packet_flits: u32,
    #[serde(default = "one_f")]
    pub mean_burst_packets: f64,
    #[serde(default)]
    pub hotspot_port: u32,
    #[serde(default)]
    pub hotspot_fraction: f64,
    #[serde(default)]
    pub incast_target: u32,
    /// Number of senders for incast (the lowest-numbered ports other than the
    /// target); 0 = every other port.
    #[serde(default)]
    pub incast_sources: u32,
    #[serde(default)]
    pub seed: u64,
}

fn one_f() -> f64 {
    1.0
}
fn default_sq() -> u32 {
    4096
}

/// One switch-lab run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchLabSpec {
    pub switch: SwitchSpec,
    pub traffic: TrafficSpec,
    pub warmup_cycles: u64,
    pub measure_cycles: u64,
    /// Cycles from a tail leaving an output to its credits reaching the switch.
    #[serde(default)]
    pub credit_return_cycles: u64,
    /// Outputs whose downstream never returns credits.
    #[serde(default)]
    pub dead_outputs: Vec<u32>,
    /// Source queue bound per input, packets.
    #[serde(default = "default_sq")]
    pub source_queue_packets: u32,
}

/// Results of a run.
#[derive(Debug, Clone, Serialize)]
pub struct SwitchLabResult {
    pub ports: u32,
    pub vcs: u32,
    pub measure_cycles: u64,
    pub cycle_ps: f64,
    pub active_sources: u32,
    /// Flits created in the window / (cycles x active sources).
    pub offered_load: f64,
    /// Flits delivered in the window / (cycles x ports).
    pub accepted_throughput: f64,
    /// Flits delivered in the window.
    pub delivered_flits: u64,
    /// Packets dropped at full source queues (offered load above capacity).
    pub source_dropped_packets: u64,
    /// Packets waiting in source queues at the end.
    pub source_backlog_packets: u64,
    /// Packet latency from creation to tail out (tail_out + 1 - birth), cycles.
    pub latency: Histogram,
    pub switch: SwitchStats,
    /// Little's law terms over the window, whole switch: L (flits), lambda
    /// (flits/cycle), W (cycles per flit).
    pub mean_occupancy_flits: f64,
    pub throughput_flits_per_cycle: f64,
    pub mean_sojourn_cycles: f64,
    /// Cycles at which the switch did work (idle cycles are skipped).
    pub cycles_processed: u64,
}

/// Latencies below this many cycles are counted exactly in an array first.
const LAT_SMALL: usize = 1024;

struct Source {
    rng: SimRng,
    next: u64,
    burst_left: u64,
    burst_dest: u32,
    active: bool,
}

/// Next-arrival calendar of the sources: a timing wheel for arrivals within
/// `len` cycles (the common case) and a heap for later ones. `len` is a
/// power of two sized to a few mean inter-arrival gaps, so the buckets in use
/// stay in cache; the order of sources within a cycle does not matter (each
/// source has its own random stream and queue).
struct Calendar {
    len: usize,
    buckets: Vec<Vec<u32>>,
    bucket_cycle: Vec<u64>,
    nonempty: Vec<u64>,
    count: usize,
    far: BinaryHeap<Reverse<(u64, u32)>>,
}

impl Calendar {
    /// `mean_gap` = mean cycles between a source's arrivals.
    fn new(n: usize, mean_gap: f64) -> Self {
        let len = ((8.0 * mean_gap).clamp(64.0, 1024.0) as usize).next_power_of_two();
        Calendar {
            len,
            buckets: (0..len).map(|_| Vec::with_capacity(n.min(8))).collect(),
            bucket_cycle: vec![0; len],
            nonempty: vec![0; len / 64],
            count: 0,
            far: BinaryHeap::with_capacity(n + 1),
        }
    }

    /// Schedule source `i` at cycle `a` (`now` = current cycle, a >= now).
    #[inline(always)]
    fn push(&mut self, a: u64, i: u32, now: u64) {
        if a < now + self.len as u64 {
            let k = a as usize & (self.len - 1);
            if self.buckets[k].is_empty() {
                bits::set(&mut self.nonempty, k);
                self.bucket_cycle[k] = a;
            }
            self.buckets[k].push(i);
            self.count += 1;
        } else {
            self.far.push(Reverse((a, i)));
        }
    }

    /// Move far arrivals that entered the wheel's window at `now`.
    fn promote(&mut self, now: u64) {
        while let Some(&Reverse((a, i))) = self.far.peek() {
            if a >= now + self.len as u64 {
                break;
            }
            self.far.pop();
            self.push(a, i, now);
        }
    }

    /// Whether some source's arrival is due at cycle `a` (< now + len).
    #[inline(always)]
    fn has_at(&self, a: u64) -> bool {
        let k = a as usize & (self.len - 1);
        !self.buckets[k].is_empty() && self.bucket_cycle[k] == a
    }

    fn next(&self, now: u64) -> Option<u64> {
        let w = if self.count > 0 {
            bits::next_cyclic(&self.nonempty, now as usize & (self.len - 1), self.len).map(|k| self.bucket_cycle[k])
        } else {
            None
        };
        let f = self.far.peek().map(|Reverse((a, _))| *a);
        match (w, f) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        }
    }
}

/// Per input its queue of (dest, vc, birth cycle), bounded by the spec's
/// `source_queue_packets`; each queue's storage grows to its own high-water
/// mark (a short queue stays in a cache line or two).
struct SourceQueues {
    q: Vec<VecDeque<(u32, u32, u64)>>,
    nonempty: Vec<u64>,
}

/// Trials until the first success (values 1, 2, ...), success probability p,
/// by inversion: `floor(ln(u) / ln(1 - p)) + 1` for one uniform draw u in
/// (0, 1], computed as [`geometric_ge1_exact`] computes it, value for value.
///
/// Most draws skip libm's `ln` and the division: a table logarithm
/// ([`fast_ln`], absolute error below [`FAST_LN_ERR`]) times 1 / ln(1 - p)
/// brackets the quotient; when the bracket, widened by the rounding of the
/// exact formula, holds no integer, the floor is known and equals the exact
/// formula's. Otherwise (a draw within ~1e-8 of a step, about one in 10^7
/// here) the exact formula runs. Same draws, same values: the random stream
/// and every result are unchanged.
#[derive(Clone)]
struct Geometric {
    /// ln(1 - p) (0 for p = 1).
    ln_q: f64,
    /// 1 / ln(1 - p).
    inv_ln_q: f64,
    /// Bound on |fast quotient - true quotient| from the table logarithm.
    slack: f64,
    table: &'static LnTable,
    /// The value itself for draws u whose top 20 bits (exponent and 8
    /// mantissa bits) are `CELL_BASE + k`, where every u of that cell gets
    /// the same value (0 where a step falls inside the cell: those draws
    /// take the logarithm paths, as do values above u16::MAX). Cells cover
    /// u >= 2^-CELL_OCTAVES; 16-bit cells keep the part in use small (the
    /// top octaves, where most draws fall) in cache.
    cells: Vec<u16>,
}

/// Octaves of u below 1 that the cell table covers (u >= 2^-40).
const CELL_OCTAVES: u64 = 40;
/// Top 20 bits (u.to_bits() >> 44) of the smallest u in the table.
const CELL_BASE: u64 = (1023 - CELL_OCTAVES) << 8;

impl Geometric {
    fn new(ln_q: f64) -> Self {
        let inv_ln_q = if ln_q == 0.0 { 0.0 } else { 1.0 / ln_q };
        let mut cells = vec![0u16; (CELL_OCTAVES << 8) as usize + 1];
        if ln_q != 0.0 {
            // Cell k holds [a, b) with a, b its first bits and the next
            // cell's; the exact formula's quotient for any u there lies in
            // [x(b), x(a)] widened by its rounding (1e-15 relative) and that
            // of x(a), x(b) themselves: a margin of 1e-9 + 1e-12 x covers both
            // many times over. A constant floor across that range is the value.
            let x = |bits: u64| f64::from_bits(bits << 44).ln() / ln_q;
            let mut x_lo_end = x(CELL_BASE);
            for (k, c) in cells.iter_mut().enumerate() {
                let t = CELL_BASE + k as u64;
                let (xa, xb) = (x_lo_end, x(t + 1));
                x_lo_end = xb;
                if t == 1023 << 8 {
                    // The cell of u = 1 holds only u = 1 (u <= 1).
                    *c = geometric_ge1_exact(1.0, ln_q) as u16;
                    continue;
                }
                let m = 1e-9 + 1e-12 * xa.abs();
                let (lo, hi) = (xb - m, xa + m);
                if lo >= 0.0 && hi < 65535.0 && (lo as u64) == (hi as u64) {
                    *c = lo as u16 + 1;
                }
            }
        }
        Geometric { ln_q, inv_ln_q, slack: FAST_LN_ERR * inv_ln_q.abs() + 1e-12, table: ln_table(), cells }
    }

    #[inline]
    fn sample(&self, rng: &mut SimRng) -> u64 {
        if self.ln_q == 0.0 {
            return 1;
        }
        self.of(1.0 - rng.uniform()) // (0, 1]
    }

    /// The value for the draw u in (0, 1] (ln_q != 0).
    #[inline]
    fn of(&self, u: f64) -> u64 {
        if let Some(k) = self.cell(u) {
            return k;
        }
        match self.fast(u) {
            Some(k) => k,
            None => geometric_ge1_exact(u, self.ln_q),
        }
    }

    /// The value from the cell table, if u's cell holds no step.
    #[inline]
    fn cell(&self, u: f64) -> Option<u64> {
        match self.cells.get((u.to_bits() >> 44).wrapping_sub(CELL_BASE) as usize) {
            Some(&c) if c != 0 => Some(c as u64),
            _ => None,
        }
    }

    /// The value from the table logarithm, if its bracket decides it.
    #[inline]
    fn fast(&self, u: f64) -> Option<u64> {
        let x = fast_ln(u, self.table) * self.inv_ln_q;
        // The exact formula's quotient is within 1e-15 relative of the true
        // one (ln and the division each round once, < 1 ulp); the fast one
        // within `slack` plus its own roundings: [lo, hi] holds both with a
        // wide margin (x >= 0 whenever lo >= 0).
        let lo = x * (1.0 - 1e-13) - self.slack;
        let hi = x * (1.0 + 1e-13) + self.slack;
        if lo >= 0.0 && hi < 4.0e15 {
            let k = lo as u64;
            if (hi as u64) == k {
                return Some(k + 1);
            }
        }
        None
    }
}

/// The inversion formula itself (the reference the fast path reproduces).
#[inline(never)]
fn geometric_ge1_exact(u: f64, ln_q: f64) -> u64 {
    // The quotient is >= 0 (or -0.0), so truncation is the floor (and the
    // cast saturates as `floor` then the cast would): no libm `floor` call.
    ((u.ln() / ln_q) as u64).saturating_add(1)
}

/// Trials until the first success, the plain formula (the bursty process).
#[inline]
fn geometric_ge1(rng: &mut SimRng, ln_q: f64) -> u64 {
    if ln_q == 0.0 {
        return 1;
    }
    geometric_ge1_exact(1.0 - rng.uniform(), ln_q)
}

/// Bound on |[`fast_ln`] - ln| for normal u in (0, 1]: the quadratic's
/// remainder (|t| <= 2^-9: |t|^3 / 3 < 2.5e-9) plus roundings (< 1e-13 for
/// |ln u| < 750), rounded up 4x.
const FAST_LN_ERR: f64 = 1e-8;

/// Bits of the mantissa that pick the table entry.
const LN_TABLE_BITS: u32 = 8;

/// Per table entry j: the center c_j = 1 + (j + 1/2) / 256, ln c_j, 1 / c_j.
type LnTable = [(f64, f64, f64); 1 << LN_TABLE_BITS];

fn ln_table() -> &'static LnTable {
    static T: std::sync::OnceLock<LnTable> = std::sync::OnceLock::new();
    T.get_or_init(|| {
        let mut t = [(0.0, 0.0, 0.0); 1 << LN_TABLE_BITS];
        for (j, e) in t.iter_mut().enumerate() {
            let c = 1.0 + (j as f64 + 0.5) / (1u64 << LN_TABLE_BITS) as f64;
            *e = (c, c.ln(), 1.0 / c);
        }
        t
    })
}

/// ln(u) for normal positive u, to within [`FAST_LN_ERR`]: u = 2^e m with m
/// in [1, 2), m = c_j (1 + t) for the center c_j of m's 1/256 interval
/// (|t| <= 2^-9), ln u = e ln 2 + ln c_j + t - t^2/2.
#[inline]
fn fast_ln(u: f64, table: &LnTable) -> f64 {
    let b = u.to_bits();
    let e = ((b >> 52) & 0x7FF) as i64 - 1023;
    let m = f64::from_bits((b & 0x000F_FFFF_FFFF_FFFF) | 0x3FF0_0000_0000_0000);
    let j = ((b >> (52 - LN_TABLE_BITS)) & ((1 << LN_TABLE_BITS) - 1)) as usize;
    let (c, ln_c, inv_c) = table[j];
    let t = (m - c) * inv_c;
    (e as f64 * std::f64::consts::LN_2 + ln_c) + (t - 0.5 * t * t)
}

/// ln(1 - p), accurate for tiny p (ln_1p), 0 for p >= 1; never 0 for 0 < p < 1.
#[inline]
fn ln_one_minus(p: f64) -> f64 {
    if p >= 1.0 {
        0.0
    } else {
        (-p).ln_1p().min(-f64::MIN_POSITIVE)
    }
}

fn geometric_ge0_mean(rng: &mut SimRng, mean: f64) -> u64 {
    if mean <= 0.0 {
        return 0;
    }
    let q = mean / (1.0 + mean);
    // Above ~2^53 q rounds to 1.0 and q.ln() to 0: u.ln() / 0 = -inf cast to 0, so a source with
    // an astronomically long mean off period never went off (offered load 1 for load 0.1).
    // ln(1 - 1/(1 + mean)) keeps the period huge; every other mean takes the old path (same draws).
    let lnq = match q.ln() {
        l if l == 0.0 => ln_one_minus(1.0 / (1.0 + mean)),
        l => l,
    };
    let u = 1.0 - rng.uniform();
    (u.ln() / lnq) as u64 // >= 0: truncation is the floor
}

impl SwitchLabSpec {
    /// # Errors
    /// `Config` naming the first invalid field.
    pub fn validate(&self) -> Result<()> {
        self.switch.validate()?;
        let n = self.switch.ports;
        let t = &self.traffic;
        ensure(t.load > 0.0 && t.load <= 1.0, "traffic.load", t.load, "offered load in (0, 1] flits per port per cycle")?;
        ensure(
            t.packet_flits >= 1 && t.packet_flits <= self.switch.max_packet_flits,
            "traffic.packet_flits",
            t.packet_flits,
            &format!("1..={} (switch.max_packet_flits)", self.switch.max_packet_flits),
        )?;
        ensure(t.mean_burst_packets.is_finite() && t.mean_burst_packets >= 1.0, "traffic.mean_burst_packets", t.mean_burst_packets, "at least 1 packet")?;
        ensure(t.hotspot_port < n, "traffic.hotspot_port", t.hotspot_port, &format!("a port below {n}"))?;
        ensure((0.0..=1.0).contains(&t.hotspot_fraction), "traffic.hotspot_fraction", t.hotspot_fraction, "a probability in [0, 1]")?;
        ensure(t.incast_target < n, "traffic.incast_target", t.incast_target, &format!("a port below {n}"))?;
        ensure(
            !matches!(t.pattern, Pattern::Incast) || n >= 2,
            "switch.ports",
            n,
            "at least 2 ports for incast traffic (one port has no other to send to)",
        )?;
        ensure(t.incast_sources < n, "traffic.incast_sources", t.incast_sources, &format!("0 (all others) or fewer than {n}"))?;
        ensure(self.measure_cycles >= 1 && self.measure_cycles <= 1 << 40, "measure_cycles", self.measure_cycles, "1..=2^40 cycles")?;
        ensure(self.warmup_cycles <= 1 << 40, "warmup_cycles", self.warmup_cycles, "at most 2^40 cycles")?;
        ensure(self.credit_return_cycles <= 1 << 30, "credit_return_cycles", self.credit_return_cycles, "at most 2^30 cycles")?;
        ensure(
            self.source_queue_packets >= 1 && self.source_queue_packets <= 1 << 20,
            "source_queue_packets",
            self.source_queue_packets,
            "1..=2^20 packets",
        )?;
        ensure(
            (n as u64) * self.source_queue_packets as u64 <= 1 << 26,
            "source_queue_packets",
            self.source_queue_packets,
            &format!("ports x source_queue_packets at most 2^26 (memory); {n} ports allow {}", (1u64 << 26) / n as u64),
        )?;
        for &d in &self.dead_outputs {
            ensure(d < n, "dead_outputs", d, &format!("ports below {n}"))?;
        }
        Ok(())
    }
}

/// Run the lab.
///
/// # Errors
/// `Config` for an invalid spec; `Stalled` if packets are inside the switch and
/// no flit moves for the stall timeout; `Interrupted` from the hook.
pub fn run(spec: &SwitchLabSpec, interrupt: &mut dyn Interrupt) -> Result<SwitchLabResult> {
    run_with(spec, interrupt, true)
}

/// [`run`] with the latency and queueing histograms either deferred (exact
/// counts folded in at the end, what `run` uses) or recorded per packet (the
/// reference the equality test `tests/switch_paths.rs` compares against).
///
/// # Errors
/// As [`run`].
pub fn run_with(spec: &SwitchLabSpec, interrupt: &mut dyn Interrupt, deferred_histograms: bool) -> Result<SwitchLabResult> {
    spec.validate()?;
    let mut sw = Switch::new(&spec.switch)?;
    // The lab reads the histograms after finish_stats only.
    sw.set_deferred_histograms(deferred_histograms);
    let n = spec.switch.ports as usize;
    let vcs = spec.switch.vcs as u64;
    let t = &spec.traffic;
    let f = t.packet_flits;
    let cycle_ps = spec.switch.cycle_ps();
    let w = bits::words(n);
    let end = spec.warmup_cycles + spec.measure_cycles;

    // Destinations for the permutation pattern (Fisher-Yates, seeded).
    let mut perm: Vec<u32> = (0..n as u32).collect();
    let mut prng = SimRng::substream(t.seed, u64::MAX);
    for i in (1..n).rev() {
        let j = prng.below(i as u64 + 1) as usize;
        perm.swap(i, j);
    }
    let incast_k = if t.incast_sources == 0 { n - 1 } else { t.incast_sources as usize };
    let mut dead = vec![false; n];
    for &d in &spec.dead_outputs {
        dead[d as usize] = true;
    }
    let p_packet = t.load / f as f64;
    let ln_q_packet = ln_one_minus(p_packet);
    let geo_packet = Geometric::new(ln_q_packet);
    let ln_q_burst = ln_one_minus(1.0 / t.mean_burst_packets);
    let off_mean = t.mean_burst_packets * f as f64 * (1.0 - t.load) / t.load;
    let mut sources: Vec<Source> = Vec::with_capacity(n);
    let mut arrivals = Calendar::new(n, f as f64 / t.load);
    let mut active_sources = 0u32;
    for i in 0..n {
        let active = match t.pattern {
            Pattern::Incast => i != t.incast_target as usize && (i - (i > t.incast_target as usize) as usize) < incast_k,
            _ => true,
        };
        let mut rng = SimRng::substream(t.seed, i as u64);
        let next = match t.process {
            Process::Bernoulli => geo_packet.sample(&mut rng).saturating_sub(1),
            Process::Bursty => geometric_ge0_mean(&mut rng, off_mean),
        };
        if active {
            active_sources += 1;
            arrivals.push(next, i as u32, 0);
        }
        sources.push(Source { rng, next, burst_left: 0, burst_dest: 0, active });
    }
    let cap = spec.source_queue_packets as usize;
    let mut sq = SourceQueues { q: (0..n).map(|_| VecDeque::with_capacity(4)).collect(), nonempty: vec![0; w] };
    // Inputs whose link is free (`link_free`), and per cycle t (mod `wake_len`)
    // the inputs whose link frees at t: a source that just sent is not visited
    // again until its packet's last flit is on the link (`in_link_free`).
    let wake_len = (f as usize + 1).next_power_of_two();
    let mut link_free = vec![0u64; w];
    for i in 0..n {
        bits::set(&mut link_free, i);
    }
    let mut wake = vec![0u64; wake_len * w];
    let mut woken_to = 0u64;
    let mut latency = Histogram::new();
    // Exact counts of small latencies, folded into `latency` at the end
    // (the same histogram as recording each one).
    let mut lat_small = vec![0u32; if deferred_histograms { LAT_SMALL } else { 0 }];
    let mut generated_flits = 0u64;
    let mut dropped = 0u64;
    let mut reset_done = spec.warmup_cycles == 0;
    let mut cycles_processed = 0u64;
    let cancel = crate::engine::CancelToken::new();
    let mut c: u64 = 0;
    let mut first = true;

    loop {
        // The next cycle with work. After the first cycle nothing is due at
        // or before c (a time <= c is taken as c + 1, below), so when the
        // next cycle has work for certain (a source queue to serve, work
        // pending in the switch, or arrivals at c + 1: under load nearly
        // every cycle) it is c + 1 without looking for the earliest arrival
        // and event.
        let mut next = u64::MAX;
        if !first & (!bits::is_empty(&sq.nonempty) | sw.allocation_pending() | arrivals.has_at(c + 1)) {
            next = c + 1;
        } else {
            if let Some(a) = arrivals.next(c) {
                next = next.min(a);
            }
            if let Some(e) = sw.next_event_cycle() {
                next = next.min(e);
            }
            if !bits::is_empty(&sq.nonempty) || sw.allocation_pending() {
                next = next.min(if first { c } else { c + 1 });
            }
        }
        if next == u64::MAX || next >= end {
            if next == u64::MAX && sw.packets_inside() > 0 {
                sw.check_stall(c, cycle_ps)?;
            }
            break;
        }
        if !first && next <= c {
            next = c + 1;
        }
        first = false;
        if !reset_done && next >= spec.warmup_cycles {
            sw.reset_stats(spec.warmup_cycles);
            reset_done = true;
        }
        c = next;
        cycles_processed += 1;
        // Arrivals due at or before c (each at its own cycle: queue order and
        // birth times are exact even when cycles were skipped).
        arrivals.promote(c);
        let k = c as usize & (arrivals.len - 1);
        let mut due = if !arrivals.buckets[k].is_empty() && arrivals.bucket_cycle[k] == c {
            bits::clear(&mut arrivals.nonempty, k);
            arrivals.count -= arrivals.buckets[k].len();
            std::mem::take(&mut arrivals.buckets[k])
        } else {
            Vec::new()
        };
        for &i in &due {
            let a = c;
            let i = i as usize;
            let s = &mut sources[i];
            debug_assert!(s.active);
            let (dest, gap) = match t.process {
                Process::Bernoulli => {
                    let d = pick_dest(t, n, i, &perm, &mut s.rng);
                    (d, geo_packet.sample(&mut s.rng))
                }
                Process::Bursty => {
                    if s.burst_left == 0 {
                        s.burst_left = geometric_ge1(&mut s.rng, ln_q_burst);
                        s.burst_dest = pick_dest(t, n, i, &perm, &mut s.rng);
                    }
                    s.burst_left -= 1;
                    let gap = if s.burst_left == 0 { (f as u64).saturating_add(geometric_ge0_mean(&mut s.rng, off_mean)) } else { f as u64 };
                    (s.burst_dest, gap)
                }
            };
            let vc = if vcs > 1 { s.rng.below(vcs) as u32 } else { 0 };
            sw.prefetch_queue(i, vc as usize, dest as usize);
            if a >= spec.warmup_cycles {
                generated_flits += f as u64;
            }
            if sq.q[i].len() < cap {
                sq.q[i].push_back((dest, vc, a));
                bits::set(&mut sq.nonempty, i);
            } else {
                dropped += 1;
            }
            s.next = a.saturating_add(gap);
            arrivals.push(s.next, i as u32, c);
        }
        due.clear();
        if due.capacity() > 0 {
            arrivals.buckets[k] = due;
        }
        // Links that freed in (woken_to, c].
        if c - woken_to >= wake_len as u64 {
            for (k, x) in wake.iter_mut().enumerate() {
                link_free[k % w] |= *x;
                *x = 0;
            }
        } else {
            for t in woken_to + 1..=c {
                let b = (t as usize & (wake_len - 1)) * w;
                for k in 0..w {
                    link_free[k] |= wake[b + k];
                    wake[b + k] = 0;
                }
            }
        }
        woken_to = c;
        // Sources send their heads if the input link is free and credits allow.
        for wi in 0..w {
            let mut m = sq.nonempty[wi] & link_free[wi];
            while m != 0 {
                let i = wi << 6 | m.trailing_zeros() as usize;
                m &= m - 1;
                debug_assert!(sw.input_link_free_cycle(i) <= c);
                let (dest, vc, birth) = *sq.q[i].front().expect("non-empty queue");
                if sw.can_accept(i, vc as usize, f, c) {
                    // In range by the spec's validation and pick_dest, admitted by can_accept.
                    sw.inject_checked(i, Packet { dest, vc, flits: f, birth_cycle: birth, tag: 0 }, c);
                    bits::clear(&mut link_free, i);
                    bits::set(&mut wake[((c + f as u64) as usize & (wake_len - 1)) * w..][..w], i);
                    sq.q[i].pop_front();
                    if sq.q[i].is_empty() {
                        bits::clear(&mut sq.nonempty, i);
                    }
                }
            }
        }
        sw.step(c);
        for k in 0..sw.departures().len() {
            let (tail, birth, o, vc, flits) = {
                let d = &sw.departures()[k];
                (d.tail_out_cycle, d.packet.birth_cycle, d.output as usize, d.packet.vc as usize, d.packet.flits)
            };
            if tail >= spec.warmup_cycles {
                let l = tail + 1 - birth;
                if (l as usize) < lat_small.len() {
                    let k = &mut lat_small[l as usize];
                    *k += 1;
                    if *k == u32::MAX {
                        latency.record_n(l, std::mem::take(k) as u64);
                    }
                } else {
                    latency.record(l);
                }
            }
            if !dead[o] {
                sw.return_credits(o, vc, flits, tail + 1 + spec.credit_return_cycles)?;
            }
        }
        if cycles_processed % 1024 == 0 {
            sw.check_stall(c, cycle_ps)?;
            if cycles_processed % 16384 == 0 {
                let now = crate::engine::ps_ceil(c as f64 * cycle_ps);
                cancel.check(now)?;
                interrupt.check(now)?;
            }
        }
    }
    if !reset_done {
        sw.reset_stats(spec.warmup_cycles);
    }
    let stats = sw.finish_stats(end).clone();
    for (l, &k) in lat_small.iter().enumerate() {
        latency.record_n(l as u64, k as u64);
    }
    let cycles = spec.measure_cycles as f64;
    let delivered = stats.flits_out;
    let backlog: u64 = sq.q.iter().map(|x| x.len() as u64).sum();
    let lambda = delivered as f64 / cycles;
    Ok(SwitchLabResult {
        ports: spec.switch.ports,
        vcs: spec.switch.vcs,
        measure_cycles: spec.measure_cycles,
        cycle_ps,
        active_sources,
        offered_load: generated_flits as f64 / (cycles * active_sources.max(1) as f64),
        accepted_throughput: delivered as f64 / (cycles * n as f64),
        delivered_flits: delivered,
        source_dropped_packets: dropped,
        source_backlog_packets: backlog,
        latency,
        mean_occupancy_flits: stats.system_flit_cycles as f64 / cycles,
        throughput_flits_per_cycle: lambda,
        mean_sojourn_cycles: if delivered > 0 { stats.flit_sojourn_cycles as f64 / delivered as f64 } else { 0.0 },
        switch: stats,
        cycles_processed,
    })
}

#[inline]
fn pick_dest(t: &TrafficSpec, n: usize, i: usize, perm: &[u32], rng: &mut SimRng) -> u32 {
    match t.pattern {
        Pattern::Uniform => rng.below(n as u64) as u32,
        Pattern::Permutation => perm[i],
        Pattern::Hotspot => {
            if rng.bernoulli(t.hotspot_fraction) {
                t.hotspot_port
            } else {
                rng.below(n as u64) as u32
            }
        }
        Pattern::Incast => t.incast_target,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fast geometric sampler returns the inversion formula's value for
    /// every draw: random draws, and draws placed on and a few ulps around
    /// each step u = (1 - p)^k, where a bracket that is too narrow would show.
    #[test]
    fn fast_geometric_equals_the_formula() {
        let mut rng = SimRng::new(9);
        for &p in &[1.0 / 16.0, 0.5 / 8.0, 0.9, 0.999, 0.3, 1e-3, 1e-6, 0.0625 / 7.0] {
            let ln_q = ln_one_minus(p);
            let g = Geometric::new(ln_q);
            let (draws, mut decided, mut by_cell) = (200_000, 0, 0);
            for _ in 0..draws {
                let u = 1.0 - rng.uniform();
                assert_eq!(g.of(u), geometric_ge1_exact(u, ln_q), "p {p} u {u:e}");
                if let Some(k) = g.cell(u) {
                    assert_eq!(k, geometric_ge1_exact(u, ln_q), "cell: p {p} u {u:e}");
                    by_cell += 1;
                }
                if let Some(k) = g.fast(u) {
                    assert_eq!(k, geometric_ge1_exact(u, ln_q), "fast: p {p} u {u:e}");
                    decided += 1;
                }
            }
            // A cell spans ln(1 + 1/256) / |ln(1 - p)| in the quotient: at the
            // bench's p = 1/16 that is 0.06, so ~94 % of draws end at the cell.
            if p == 1.0 / 16.0 {
                assert!(by_cell > draws * 9 / 10, "p {p}: {by_cell} of {draws} decided by a cell");
            }
            // The bracket is 2 x slack wide (1e-8 / |ln(1 - p)| each side), so
            // about that fraction of draws falls back to libm: 2 % at p = 1e-6,
            // ~1e-6 at the bench's p = 1/16.
            let bound = (4.0 * g.slack * draws as f64) as u32 + draws / 1000;
            assert!(draws - decided <= bound, "p {p}: {decided} of {draws} decided by the table");
            for k in 0..3000u64 {
                let step = (k as f64 * ln_q).exp();
                if step < 1e-300 {
                    break;
                }
                for d in -4i64..=4 {
                    let u = f64::from_bits((step.to_bits() as i64 + d) as u64);
                    if u > 0.0 && u <= 1.0 {
                        assert_eq!(g.of(u), geometric_ge1_exact(u, ln_q), "p {p} k {k} u {u:e}");
                    }
                }
            }
            for u in [1.0, 1.0 - f64::EPSILON / 2.0, f64::EPSILON / 2.0, 0.5, 0.25] {
                assert_eq!(g.of(u), geometric_ge1_exact(u, ln_q), "p {p} u {u:e}");
            }
        }
    }

    /// The table logarithm is within its stated bound of libm's.
    #[test]
    fn fast_ln_within_its_bound() {
        let mut rng = SimRng::new(4);
        let t = ln_table();
        for _ in 0..200_000 {
            let u = 1.0 - rng.uniform();
            assert!((fast_ln(u, t) - u.ln()).abs() < FAST_LN_ERR / 3.0, "u {u:e}");
        }
    }
}
