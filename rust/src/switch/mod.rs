//! Cycle-level input-queued crossbar switch (the NVSwitch model).
//!
//! # Model
//! - N ports on the switch's own clock; every port moves at most one flit per
//!   cycle in and one out (the links' rate in flits per switch cycle).
//! - Per input and VC a buffer of `buffer_per_vc_flits`, organized as VOQs or as
//!   one FIFO ([`Queueing`]). A packet is admitted only if the whole packet
//!   fits (credit-based flow control upstream, virtual cut-through).
//! - A head flit may request `pipeline_latency_cycles` after it arrives. With
//!   speedup S each cycle has S allocation rounds (slots); a granted input-output
//!   pair stays connected for the whole packet (packet-mode scheduling, VCT),
//!   moving one flit per slot. With S > 1 a packet requests only once its tail
//!   is in the buffer, so the faster crossbar never runs ahead of the input link.
//! - Without output buffers (S = 1) the crossbar drives the output link and a
//!   grant needs downstream credits for the whole packet. With output buffers a
//!   grant needs space there, and the output link drains one flit per cycle,
//!   round-robin over VCs, sending a packet once the downstream holds credits
//!   for all of it (cut-through from the output buffer).
//! - Credit masks are applied before arbitration; the allocator ([`alloc`])
//!   sees only free inputs, free outputs and requests that can proceed.
//!
//! # Event-driven
//! Work happens only at slots where something changes: a head becomes ready,
//! a connection ends, an output link frees, credits return, a packet is
//! injected, or a previous round left grantable requests unmatched. Those
//! times live in one min-heap; the owner asks [`Switch::next_event_cycle`] and
//! skips idle time. Within a slot only ports with work are touched (bitsets of
//! free ports and of inputs with ready heads). The packet-slot pool grows to its high-water mark; otherwise nothing
//! allocates.
//!
//! # API for a fabric
//! [`Switch::can_accept`] / [`Switch::inject`] at an input (the upstream link's
//! credit check and delivery), [`Switch::step`] per busy cycle,
//! [`Switch::departures`] (packets whose tail left an output this cycle), and
//! [`Switch::return_credits`] when the downstream frees buffer. Upstream credit
//! returns are reported in [`Switch::upstream_credits`] (input, VC, flits, cycle).
//!
//! # Files
//! This file holds the data path in pipeline order (inject, events, allocation,
//! connection, output link, departure); [`wheel`] the event queue, [`stats`] the
//! counters and their window, [`diagnose`] the stall check and its account,
//! [`prefetch`] the cache hint used where a queue's state will be touched soon.

pub mod alloc;
pub mod bits;
mod diagnose;
mod prefetch;
mod spec;
mod stats;
mod wheel;

pub use spec::{Queueing, SwitchSpec, MAX_PORTS};
pub use stats::{InputVcStats, OutputVcStats, PortStats, SwitchStats};

use crate::error::{FlitsimError, Result};
use crate::stats::Histogram;
use alloc::{Allocator, Matching, Requests, NONE};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use wheel::{Ev, EV_CONN_END, EV_CREDIT, EV_LINK_FREE, EV_READY};

/// A packet as the switch sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Packet {
    /// Output port.
    pub dest: u32,
    /// Virtual channel (kept from input to output).
    pub vc: u32,
    /// Length, flits (1..=max_packet_flits).
    pub flits: u32,
    /// Creation cycle at the source (for end-to-end latency; the switch orders
    /// oldest-first by it).
    pub birth_cycle: u64,
    /// Opaque owner tag (e.g. a fabric's packet id).
    pub tag: u64,
}

/// A packet that left an output port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Departure {
    pub input: u32,
    pub output: u32,
    pub packet: Packet,
    /// Cycle the head flit entered the input buffer.
    pub head_in_cycle: u64,
    /// Cycle the tail flit left the output port.
    pub tail_out_cycle: u64,
    /// Cycles the packet waited, ready, for a grant.
    pub queueing_cycles: u64,
}

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    pkt: Packet,
    input: u32,
    /// Next slot in the same queue (NONE at the tail); shares the slot's
    /// cache line with the packet.
    next: u32,
    head_in: u64,
    ready_at: u64,
    queued: u64,
}

#[derive(Debug, Clone, Copy)]
struct InOcc {
    flits: u32,
    since: u64,
}

#[derive(Debug, Clone, Copy)]
struct OutVc {
    credits: u32,
    ob_space: u32,
    low_since: Option<u64>,
}

#[derive(Debug, Clone, Copy)]
struct QueueState {
    head: u32,
    tail: u32,
    /// Packets in the queue whose head flit may request (<= the queue's length).
    ready: u32,
}

/// Runtime state of one switch.
pub struct Switch {
    spec: SwitchSpec,
    n: usize,
    v: usize,
    w: usize,
    s: u64,
    q_per_iv: usize,
    max_f: u32,
    outbuf: bool,
    alloc: Box<dyn Allocator>,
    needs_ages: bool,
    req: Requests,
    m: Matching,
    /// Per matched input (in `m.matched` order) the VC of its grant.
    grant_vc: Vec<u32>,
    // Input side.
    /// Packets buffered at the inputs (a pool shared by all inputs; grows to
    /// the high-water mark of packets inside, then is reused).
    slots: Vec<Slot>,
    free_slots: Vec<u32>,
    /// Per queue (input, VC, output-or-0): head/tail slot, length, ready
    /// count, kept together so one cache line serves a packet's visit.
    qs: Vec<QueueState>,
    /// Per (input, VC): buffer occupancy and when it last changed (one
    /// cache line serves both).
    in_occ: Vec<InOcc>,
    in_link_free: Vec<u64>,
    /// `ready_rows[(i*V+v)*W ..]`: outputs with a ready head at (i, v).
    ready_rows: Vec<u64>,
    has_ready: Vec<u64>,
    /// Per input: bit `vc` set iff (input, vc) has a ready head.
    ready_vcs: Vec<u64>,
    /// `ready_any[i*W ..]`: outputs some VC of input i has a ready head for,
    /// with `ready_cnt[i*N+o]` behind each bit: with up to 8 VCs the mask of
    /// those VCs (bit vc), with more their count. Lets allocation skip, in
    /// one AND, inputs whose ready heads all wait for busy outputs.
    ready_any: Vec<u64>,
    ready_cnt: Vec<u8>,
    /// Up to 8 VCs: `ready_cnt` holds masks and `ok_vcs[o]` the VCs of output
    /// o that can take a packet (bit vc of `ok`), so a grant picks its VC
    /// from one AND of two bytes.
    vc_masks: bool,
    ok_vcs: Vec<u8>,
    free_inputs: Vec<u64>,
    conn_slot: Vec<u32>,
    vc_ptr: Vec<u32>,
    // Output side.
    free_outputs: Vec<u64>,
    /// `ok[v*W ..]`: outputs whose VC v can take a maximum-size packet.
    ok: Vec<u64>,
    okfree: Vec<u64>,
    /// Per (output, VC): downstream credits, output-buffer space, and since
    /// when credits are below one packet (kept together: updated together).
    out_vc: Vec<OutVc>,
    ob_ring: Vec<Slot>,
    ob_head: Vec<u32>,
    ob_len: Vec<u32>,
    ob_cap: usize,
    link_busy: Vec<bool>,
    link_cur: Vec<Slot>,
    link_vc_ptr: Vec<u32>,
    out_pending: Vec<u32>,
    out_pending_mark: Vec<bool>,
    // Time and events.
    /// Far events (beyond the wheel's horizon); rare.
    heap: BinaryHeap<Ev>,
    /// Timing wheel for near events (every event the switch schedules for
    /// itself lies within `wheel_len.len()` slots): bucket = slot & mask;
    /// entries packed into one word each ([`wheel::pack`]). Bucket k's
    /// first [`wheel::BUCKET`] entries lie in `wheel_ev[k * BUCKET ..]` (one
    /// flat array: a push is one store at an address known from the bucket's
    /// length alone), the rest, in order, in `wheel_spill[k]` (grows to its
    /// high-water mark, then is reused).
    wheel_ev: Vec<u64>,
    wheel_len: Vec<u32>,
    wheel_spill: Vec<Vec<u64>>,
    wheel_slot: Vec<u64>,
    wheel_bits: Vec<u64>,
    wheel_mask: u64,
    wheel_events: usize,
    now_cycle: u64,
    retry_slot: Option<u64>,
    dirty: bool,
    sys_flits: u64,
    sys_last: u64,
    packets_inside: u64,
    last_progress: u64,
    departures: Vec<Departure>,
    upstream: Vec<(u32, u32, u32, u64)>,
    record_upstream: bool,
    /// Build request rows with the general loop even for 1- or 2-word rows
    /// (the reference for the register form; tests only).
    generic_rows: bool,
    /// Deferred histograms ([`Switch::set_deferred_histograms`]): exact
    /// counts of small values, per output for the latency
    /// (`small_latency[o*SMALL + v]`) and switch-wide for the queueing delay,
    /// folded into the histograms by [`Switch::finish_stats`].
    small_latency: Vec<u16>,
    small_queueing: Vec<u32>,
    stats: SwitchStats,
}

/// Values below this go to the deferred exact counts.
pub(crate) const SMALL: usize = 256;

impl Switch {
    /// Build a switch with empty buffers and full downstream credits at cycle 0.
    ///
    /// # Errors
    /// `Config` if the spec is invalid.
    pub fn new(spec: &SwitchSpec) -> Result<Self> {
        spec.validate()?;
        let n = spec.ports as usize;
        let v = spec.vcs as usize;
        let w = bits::words(n);
        let q_per_iv = if spec.queueing == Queueing::Voq { n } else { 1 };
        let alloc = alloc::by_name(&spec.allocator, n, spec.iterations, spec.seed)?;
        let needs_ages = alloc.needs_ages();
        let outbuf = spec.output_buffer_per_vc_flits > 0;
        let ob_cap = if outbuf { spec.output_buffer_per_vc_flits as usize } else { 0 };
        let mut all = vec![0u64; w];
        for i in 0..n {
            bits::set(&mut all, i);
        }
        let mut ok = Vec::with_capacity(v * w);
        for _ in 0..v {
            ok.extend_from_slice(&all);
        }
        // Longest self-scheduled delay: ready (pipeline + packet) or a
        // connection / link holding a whole packet, in slots.
        let horizon = (((spec.pipeline_latency_cycles as u64 + spec.max_packet_flits as u64 + 2) * spec.speedup as u64) as usize).next_power_of_two();
        let mut sw = Switch {
            n,
            v,
            w,
            s: spec.speedup as u64,
            q_per_iv,
            max_f: spec.max_packet_flits,
            outbuf,
            alloc,
            needs_ages,
            req: Requests::new(n, needs_ages),
            m: Matching::new(n),
            grant_vc: vec![0; n],
            // Buffers are sized in flits, so the packet count inside is not
            // known up front: start with a few slots per (input, VC) and grow.
            slots: Vec::with_capacity(n * v * 4),
            free_slots: Vec::with_capacity(n * v * 4),
            qs: vec![QueueState { head: NONE, tail: NONE, ready: 0 }; n * v * q_per_iv],
            in_occ: vec![InOcc { flits: 0, since: 0 }; n * v],
            in_link_free: vec![0; n],
            ready_rows: vec![0; n * v * w],
            has_ready: vec![0; w],
            ready_vcs: vec![0; n],
            ready_any: vec![0; n * w],
            ready_cnt: vec![0; n * n],
            vc_masks: v <= 8,
            ok_vcs: vec![if v <= 8 { ((1u32 << v) - 1) as u8 } else { 0 }; n],
            free_inputs: all.clone(),
            conn_slot: vec![NONE; n],
            vc_ptr: vec![0; n],
            free_outputs: all,
            okfree: vec![0; ok.len()],
            ok,
            out_vc: vec![OutVc { credits: spec.downstream_credits_per_vc_flits, ob_space: spec.output_buffer_per_vc_flits, low_since: None }; n * v],
            ob_ring: vec![Slot::default(); n * v * ob_cap],
            ob_head: vec![0; n * v],
            ob_len: vec![0; n * v],
            ob_cap,
            link_busy: vec![false; n],
            link_cur: vec![Slot::default(); n],
            link_vc_ptr: vec![0; n],
            out_pending: Vec::with_capacity(n),
            out_pending_mark: vec![false; n],
            heap: BinaryHeap::with_capacity(4 * n * v + 16),
            wheel_ev: vec![0; horizon * wheel::BUCKET],
            wheel_len: vec![0; horizon],
            wheel_spill: (0..horizon).map(|_| Vec::new()).collect(),
            wheel_slot: vec![0; horizon],
            wheel_bits: vec![0; bits::words(horizon)],
            wheel_mask: horizon as u64 - 1,
            wheel_events: 0,
            now_cycle: 0,
            retry_slot: None,
            dirty: false,
            sys_flits: 0,
            sys_last: 0,
            packets_inside: 0,
            last_progress: 0,
            departures: Vec::with_capacity(4 * n),
            upstream: Vec::with_capacity(4 * n),
            record_upstream: false,
            generic_rows: false,
            small_latency: Vec::new(),
            small_queueing: Vec::new(),
            stats: SwitchStats {
                since_cycle: 0,
                inputs: vec![InputVcStats::default(); n * v],
                outputs: vec![OutputVcStats::default(); n * v],
                ports: vec![PortStats::default(); n],
                network_latency: Histogram::new(),
                queueing: Histogram::new(),
                output_latency: vec![Histogram::new(); n],
                system_flit_cycles: 0,
                flit_sojourn_cycles: 0,
                flits_out: 0,
                packets_out: 0,
                allocation_rounds: 0,
                slots_processed: 0,
            },
            spec: spec.clone(),
        };
        sw.spec.stall_timeout_cycles = spec.stall_timeout();
        Ok(sw)
    }

    /// The validated spec (with the stall timeout resolved).
    pub fn spec(&self) -> &SwitchSpec {
        &self.spec
    }

    /// Keep a log of upstream credit returns in [`Self::upstream_credits`].
    pub fn set_record_upstream_credits(&mut self, on: bool) {
        self.record_upstream = on;
    }

    /// Defer the latency and queueing histograms: per packet only an exact
    /// count of its value is bumped (values below 256; larger ones are
    /// recorded at once), and [`Self::finish_stats`] folds the counts in.
    /// The histograms then equal those of the default mode sample for sample,
    /// but [`Self::stats`] shows them complete only after `finish_stats`
    /// (the switch lab reads them there; a fabric that samples `stats()`
    /// mid-run keeps the default). Call before the first step.
    pub fn set_deferred_histograms(&mut self, on: bool) {
        self.fold_histograms();
        if on {
            self.small_latency = vec![0; self.n * SMALL];
            self.small_queueing = vec![0; SMALL];
        } else {
            self.small_latency = Vec::new();
            self.small_queueing = Vec::new();
        }
    }

    /// Move the deferred counts into the histograms (the network latency is
    /// the sum over outputs).
    pub(crate) fn fold_histograms(&mut self) {
        if self.small_latency.is_empty() {
            return;
        }
        let st = &mut self.stats;
        for o in 0..self.n {
            for v in 0..SMALL {
                let k = std::mem::take(&mut self.small_latency[o * SMALL + v]) as u64;
                st.output_latency[o].record_n(v as u64, k);
                st.network_latency.record_n(v as u64, k);
            }
        }
        for v in 0..SMALL {
            let k = std::mem::take(&mut self.small_queueing[v]) as u64;
            st.queueing.record_n(v as u64, k);
        }
    }

    /// Cycle of the last [`Self::step`].
    pub fn now_cycle(&self) -> u64 {
        self.now_cycle
    }

    /// Packets admitted and not yet departed.
    pub fn packets_inside(&self) -> u64 {
        self.packets_inside
    }

    /// Whether the next [`Self::step`] has work that no pending event stands
    /// for (a credit returned "due now", an injection; with output buffers
    /// also an output link to serve after credits came back "due now"): the
    /// owner must step the switch at the next cycle even if
    /// `next_event_cycle` is None.
    pub fn allocation_pending(&self) -> bool {
        self.dirty || !self.out_pending.is_empty()
    }

    /// Free input buffer at (input, vc), flits (the upstream sender's credits).
    #[inline]
    pub fn input_free_flits(&self, input: usize, vc: usize) -> u32 {
        self.spec.buffer_per_vc_flits - self.in_occ[input * self.v + vc].flits
    }

    /// Downstream credits (flits) output `output` holds on `vc` (for counters).
    #[inline]
    pub fn output_credits(&self, output: usize, vc: usize) -> u32 {
        self.out_vc[output * self.v + vc].credits
    }

    /// Whether `inject(input, vc, flits)` at `cycle` would be accepted: the
    /// input link is free and the buffer holds the whole packet.
    #[inline]
    pub fn can_accept(&self, input: usize, vc: usize, flits: u32, cycle: u64) -> bool {
        self.in_link_free[input] <= cycle && self.input_free_flits(input, vc) >= flits
    }

    /// A hint that a packet for (input, vc, dest) will be injected soon:
    /// starts loading its queue's state, so that the injection finds it in
    /// cache (the switch lab calls it as it creates a packet, so the misses
    /// of one cycle's arrivals overlap). No effect on any result.
    #[inline(always)]
    pub fn prefetch_queue(&self, input: usize, vc: usize, dest: usize) {
        let q = (input * self.v + vc) * self.q_per_iv + if self.q_per_iv > 1 { dest } else { 0 };
        prefetch::prefetch(&self.qs, q);
    }

    /// First cycle the input link can deliver another head flit.
    #[inline]
    pub fn input_link_free_cycle(&self, input: usize) -> u64 {
        self.in_link_free[input]
    }

    /// Deliver a packet's head flit to `input` at `cycle` (its body follows one
    /// flit per cycle). Call before [`Self::step`] for that cycle.
    ///
    /// # Errors
    /// `Config` for an out-of-range port, VC, destination or length; `Config`
    /// too if the buffer lacks room or the input link is still busy (the
    /// caller must check [`Self::can_accept`], as a sender checks credits).
    ///
    /// Inlined into its caller, so the packet's fields go from the caller's
    /// registers into the slot (passed by value out of line, the 32-byte
    /// packet was written to the stack field by field and read back in two
    /// 16-byte loads, which wait for those stores); the error paths stay out
    /// of line.
    #[inline(always)]
    pub fn inject(&mut self, input: usize, pkt: Packet, cycle: u64) -> Result<()> {
        let (n, v) = (self.n, self.v);
        if input >= n || pkt.dest as usize >= n || pkt.vc as usize >= v || pkt.flits == 0 || pkt.flits > self.max_f {
            return Err(self.bad_packet(input, &pkt));
        }
        if !self.can_accept(input, pkt.vc as usize, pkt.flits, cycle) || cycle < self.now_cycle {
            return Err(Self::bad_inject(input, &pkt, cycle));
        }
        self.admit(input, pkt, cycle);
        Ok(())
    }

    /// [`Self::inject`] for an owner that has checked what `inject` checks
    /// (ports, VC and length in range, [`Self::can_accept`], `cycle` not
    /// before the last step): the switch lab, whose spec validation and
    /// `can_accept` call already did. Checked again in debug builds.
    #[inline(always)]
    pub(crate) fn inject_checked(&mut self, input: usize, pkt: Packet, cycle: u64) {
        debug_assert!(input < self.n && (pkt.dest as usize) < self.n && (pkt.vc as usize) < self.v && pkt.flits >= 1 && pkt.flits <= self.max_f);
        debug_assert!(self.can_accept(input, pkt.vc as usize, pkt.flits, cycle) && cycle >= self.now_cycle);
        self.admit(input, pkt, cycle);
    }

    /// The data path of an injection (its checks done).
    #[inline(always)]
    fn admit(&mut self, input: usize, pkt: Packet, cycle: u64) {
        let v = self.v;
        let iv = input * v + pkt.vc as usize;
        self.account_occ(iv, cycle);
        self.in_occ[iv].flits += pkt.flits;
        let st = &mut self.stats.inputs[iv];
        st.packets_in += 1;
        st.flits_in += pkt.flits as u64;
        st.occupancy_max_flits = st.occupancy_max_flits.max(self.in_occ[iv].flits as u64);
        self.account_sys(cycle);
        self.sys_flits += pkt.flits as u64;
        self.packets_inside += 1;
        self.in_link_free[input] = cycle + pkt.flits as u64;
        let sl = match self.free_slots.pop() {
            Some(sl) => sl,
            None => {
                self.slots.push(Slot::default());
                (self.slots.len() - 1) as u32
            }
        };
        let extra = if self.s > 1 { pkt.flits as u64 - 1 } else { 0 };
        let ready_at = cycle + extra + self.spec.pipeline_latency_cycles as u64;
        self.slots[sl as usize] = Slot { pkt, input: input as u32, next: NONE, head_in: cycle, ready_at, queued: 0 };
        let q = iv * self.q_per_iv + if self.q_per_iv > 1 { pkt.dest as usize } else { 0 };
        if self.qs[q].tail == NONE {
            self.qs[q].head = sl;
        } else {
            self.slots[self.qs[q].tail as usize].next = sl;
        }
        self.qs[q].tail = sl;
        if ready_at <= cycle && self.s == 1 {
            // Ready on arrival (no pipeline): no event needed.
            self.on_ready(q);
            self.dirty = true;
        } else {
            self.push_ev(ready_at * self.s, EV_READY, q as u32, 0);
        }
        self.last_progress = cycle;
    }

    #[cold]
    #[inline(never)]
    fn bad_packet(&self, input: usize, pkt: &Packet) -> FlitsimError {
        let (n, v) = (self.n, self.v);
        FlitsimError::config(
            "packet",
            format!("input {input}, dest {}, vc {}, {} flits", pkt.dest, pkt.vc, pkt.flits),
            format!("ports < {n}, vc < {v}, 1..={} flits", self.max_f),
        )
    }

    #[cold]
    #[inline(never)]
    fn bad_inject(input: usize, pkt: &Packet, cycle: u64) -> FlitsimError {
        FlitsimError::config(
            "inject",
            format!("input {input} vc {} at cycle {cycle}", pkt.vc),
            "a free input link and buffer room for the whole packet (check can_accept)",
        )
    }

    /// Downstream credits for `flits` on (output, vc) arrive at `cycle`
    /// (>= the current cycle).
    ///
    /// # Errors
    /// `Config` for an out-of-range port or VC, or credits beyond the
    /// configured count.
    #[inline]
    pub fn return_credits(&mut self, output: usize, vc: usize, flits: u32, cycle: u64) -> Result<()> {
        if output >= self.n || vc >= self.v || flits > self.spec.downstream_credits_per_vc_flits {
            return Err(FlitsimError::config(
                "return_credits",
                format!("output {output} vc {vc}, {flits} flits"),
                "an existing output port and VC, at most the configured credits",
            ));
        }
        if cycle <= self.now_cycle {
            // Due now: usable from the next step on, as an event would be.
            self.on_credit(output, vc, flits, self.now_cycle);
        } else {
            self.push_ev(cycle * self.s, EV_CREDIT, (output << 8 | vc) as u32, flits);
        }
        Ok(())
    }

    /// Lower the downstream credits of `output` (every VC) to `flits`, for an
    /// output whose receiver has a smaller buffer than the largest one
    /// (`downstream_credits_per_vc_flits`). Call before the first step.
    pub fn set_output_credits(&mut self, output: usize, flits: u32) {
        for vc in 0..self.v {
            let ov = output * self.v + vc;
            self.out_vc[ov].credits = flits.min(self.spec.downstream_credits_per_vc_flits);
            self.update_ok(output, vc, self.now_cycle);
        }
    }

    /// Packets whose tail left an output during the last [`Self::step`].
    pub fn departures(&self) -> &[Departure] {
        &self.departures
    }

    /// Upstream credit returns (input, vc, flits, cycle) of the last step, if
    /// recording is on.
    pub fn upstream_credits(&self) -> &[(u32, u32, u32, u64)] {
        &self.upstream
    }

    /// Process cycle `cycle` (non-decreasing across calls): events due, S
    /// allocation rounds, output links. Injections for `cycle` come first.
    pub fn step(&mut self, cycle: u64) {
        self.departures.clear();
        self.upstream.clear();
        self.now_cycle = cycle;
        for r in 0..self.s {
            let slot = cycle * self.s + r;
            while let Some(t) = self.wheel_next() {
                if t > slot {
                    break;
                }
                let k = (t & self.wheel_mask) as usize;
                bits::clear(&mut self.wheel_bits, k);
                // Handled in place: an event handled at slot t schedules
                // only later slots, below t + the wheel's length, so never
                // into bucket k, which stays as it is until cleared.
                let len = self.wheel_len[k] as usize;
                self.wheel_events -= len;
                for j in 0..len.min(wheel::BUCKET) {
                    let (kind, a, b) = wheel::unpack(self.wheel_ev[k * wheel::BUCKET + j]);
                    self.handle(slot, kind, a as usize, b);
                }
                if len > wheel::BUCKET {
                    for j in 0..len - wheel::BUCKET {
                        let (kind, a, b) = wheel::unpack(self.wheel_spill[k][j]);
                        self.handle(slot, kind, a as usize, b);
                    }
                    self.wheel_spill[k].clear();
                }
                debug_assert_eq!(self.wheel_len[k] as usize, len);
                self.wheel_len[k] = 0;
            }
            while let Some(&Reverse((t, kind, a, b))) = self.heap.peek() {
                if t > slot {
                    break;
                }
                self.heap.pop();
                self.handle(slot, kind, a as usize, b);
            }
            let retry = self.retry_slot.is_some_and(|s| s <= slot);
            // Only a new ready head, a freed port or regained credit/space can
            // create a match that the last allocation did not find.
            if retry || self.dirty {
                self.retry_slot = None;
                self.dirty = false;
                self.stats.slots_processed += 1;
                self.allocate(slot);
            }
        }
        if self.outbuf {
            for k in 0..self.out_pending.len() {
                let o = self.out_pending[k] as usize;
                self.out_pending_mark[o] = false;
                self.serve_output(o, cycle);
            }
            self.out_pending.clear();
        }
    }

    #[inline(always)]
    fn handle(&mut self, slot: u64, kind: u8, a: usize, b: u32) {
        let cycle = self.cycle_of(slot);
        match kind {
            EV_READY => self.on_ready(a),
            EV_CONN_END => self.end_connection(a, slot),
            EV_LINK_FREE => {
                let o = a;
                let sl = self.link_cur[o];
                self.link_busy[o] = false;
                let ov = o * self.v + sl.pkt.vc as usize;
                self.out_vc[ov].ob_space += sl.pkt.flits;
                self.update_ok(o, sl.pkt.vc as usize, cycle);
                self.depart(o, &sl, cycle - 1, cycle);
                self.pend_output(o);
            }
            EV_CREDIT => self.on_credit(a >> 8, a & 0xFF, b, cycle),
            _ => unreachable!(),
        }
    }

    #[inline(always)]
    fn on_ready(&mut self, q: usize) {
        self.qs[q].ready += 1;
        if self.qs[q].ready == 1 {
            self.mark_head_ready(q);
        }
    }

    #[inline]
    fn on_credit(&mut self, o: usize, vc: usize, flits: u32, cycle: u64) {
        let ov = o * self.v + vc;
        // A misbehaving owner cannot push credits past the configured count.
        self.out_vc[ov].credits = self.out_vc[ov].credits.saturating_add(flits).min(self.spec.downstream_credits_per_vc_flits);
        self.update_ok(o, vc, cycle);
        if self.outbuf {
            self.pend_output(o);
        }
    }

    /// The head of queue `q` is ready: set its request bit.
    #[inline(always)]
    fn mark_head_ready(&mut self, q: usize) {
        self.dirty = true;
        let head = self.qs[q].head as usize;
        let s = &mut self.slots[head];
        let (o, i, vc) = (s.pkt.dest as usize, s.input as usize, s.pkt.vc as usize);
        // Queueing delay counts from readiness, including time spent behind
        // earlier packets of the same queue.
        s.queued = s.ready_at;
        let (iv, w) = (i * self.v + vc, self.w);
        if !bits::get_at(&self.ready_rows, iv, w, o) {
            bits::set_at(&mut self.ready_rows, iv, w, o);
            let c = &mut self.ready_cnt[i * self.n + o];
            let was = *c;
            *c = if self.vc_masks { was | 1 << vc } else { was + 1 };
            if was == 0 {
                bits::set_at(&mut self.ready_any, i, w, o);
            }
        }
        bits::set(&mut self.has_ready, i);
        self.ready_vcs[i] |= 1u64 << vc;
    }

    #[inline(always)]
    fn update_ok(&mut self, o: usize, vc: usize, cycle: u64) {
        let ov = o * self.v + vc;
        let (w, max_f) = (self.w, self.max_f);
        let ovs = &mut self.out_vc[ov];
        let avail = if self.outbuf { ovs.ob_space } else { ovs.credits };
        let okw = &mut self.ok[vc * w + (o >> 6)];
        let bit = 1u64 << (o & 63);
        if avail >= max_f {
            if *okw & bit == 0 {
                *okw |= bit;
                self.dirty = true;
            }
            if self.vc_masks {
                self.ok_vcs[o] |= 1 << vc;
            }
        } else {
            *okw &= !bit;
            if self.vc_masks {
                self.ok_vcs[o] &= !(1 << vc);
            }
        }
        // Credit exhaustion bookkeeping (downstream credits).
        let low = ovs.credits < max_f;
        match (low, ovs.low_since) {
            (true, None) => {
                ovs.low_since = Some(cycle);
                self.stats.outputs[ov].credit_exhaustion_episodes += 1;
            }
            (false, Some(since)) => {
                ovs.low_since = None;
                self.stats.outputs[ov].credit_exhaustion_cycles += cycle.saturating_sub(since.max(self.stats.since_cycle));
            }
            _ => {}
        }
    }

    fn pend_output(&mut self, o: usize) {
        if !self.out_pending_mark[o] {
            self.out_pending_mark[o] = true;
            self.out_pending.push(o as u32);
        }
    }

    #[inline]
    fn allocate(&mut self, slot: u64) {
        let (n, v, w) = (self.n, self.v, self.w);
        self.req.clear();
        let needs_ages = self.needs_ages;
        if bits::is_empty(&self.free_outputs) {
            return;
        }
        // Outputs each VC may request this round: credit/space mask and free.
        match *self.free_outputs.as_slice() {
            [f0] => {
                for (d, a) in self.okfree.iter_mut().zip(&self.ok) {
                    *d = a & f0;
                }
            }
            [f0, f1] => {
                for (d, a) in self.okfree.chunks_exact_mut(2).zip(self.ok.chunks_exact(2)) {
                    d[0] = a[0] & f0;
                    d[1] = a[1] & f1;
                }
            }
            _ => {
                for vc in 0..v {
                    for k in 0..w {
                        self.okfree[vc * w + k] = self.ok[vc * w + k] & self.free_outputs[k];
                    }
                }
            }
        }
        for wi in 0..w {
            // Free inputs with a ready head for some free output, found
            // without a data-dependent branch per input (most candidates
            // wait for busy outputs).
            let all = self.has_ready[wi] & self.free_inputs[wi];
            let mut cand = bits::rows_meeting(all, wi << 6, &self.ready_any, &self.free_outputs);
            while cand != 0 {
                let i = wi << 6 | cand.trailing_zeros() as usize;
                cand &= cand - 1;
                // The row (zero: cleared, or never set) is the OR over the
                // input's ready VCs of their ready heads' outputs that the
                // VC may request; one or two words kept in registers.
                let mut vcs = self.ready_vcs[i];
                let base = i * v * w;
                let any = match if self.generic_rows { 0 } else { w } {
                    1 => {
                        let mut r0 = 0u64;
                        while vcs != 0 {
                            let vc = vcs.trailing_zeros() as usize;
                            vcs &= vcs - 1;
                            r0 |= self.ready_rows[base + vc] & self.okfree[vc];
                        }
                        self.req.rows[i] = r0;
                        r0 != 0
                    }
                    2 => {
                        let (mut r0, mut r1) = (0u64, 0u64);
                        while vcs != 0 {
                            let vc = vcs.trailing_zeros() as usize;
                            vcs &= vcs - 1;
                            let rr = &self.ready_rows[base + 2 * vc..base + 2 * vc + 2];
                            let of = &self.okfree[2 * vc..2 * vc + 2];
                            r0 |= rr[0] & of[0];
                            r1 |= rr[1] & of[1];
                        }
                        let row = &mut self.req.rows[2 * i..2 * i + 2];
                        row[0] = r0;
                        row[1] = r1;
                        r0 | r1 != 0
                    }
                    _ => {
                        let row = &mut self.req.rows[i * w..(i + 1) * w];
                        while vcs != 0 {
                            let vc = vcs.trailing_zeros() as usize;
                            vcs &= vcs - 1;
                            let rr = &self.ready_rows[(i * v + vc) * w..(i * v + vc + 1) * w];
                            bits::or_and(row, rr, &self.okfree[vc * w..(vc + 1) * w]);
                        }
                        !bits::is_empty(row)
                    }
                };
                if any {
                    self.req.active.push(i as u32);
                    if needs_ages {
                        for o in bits::iter(&self.req.rows[i * w..(i + 1) * w]) {
                            let mut age = u64::MAX;
                            for vc in 0..v {
                                if let Some(sl) = self.candidate(i, vc, o) {
                                    age = age.min(self.slots[sl].pkt.birth_cycle);
                                }
                            }
                            self.req.ages[i * n + o] = age;
                        }
                    }
                }
            }
        }
        if self.req.active.is_empty() {
            return;
        }
        self.stats.allocation_rounds += 1;
        self.m.clear();
        self.alloc.allocate(&self.req, &mut self.m);
        // Each grant's VC first (a choice that depends only on its own input
        // and output, so it is the same here as at the connection), and the
        // line of its queue's state prefetched, so that the grants' misses
        // overlap (with the conflict counting below) instead of stalling one
        // connection after another.
        for k in 0..self.m.matched.len() {
            let i = self.m.matched[k] as usize;
            let o = self.m.input_to_output[i] as usize;
            let vc = self.pick_vc(i, o);
            self.grant_vc[k] = vc as u32;
            prefetch::prefetch(&self.qs, (i * v + vc) * self.q_per_iv + if self.q_per_iv > 1 { o } else { 0 });
        }
        // Conflicts: requests not granted, per input and per output.
        // Every request counts once at its input and its output, and each
        // matched pair (a request) is taken back at both: counted in the walk
        // over the request bits, without a popcount or a branch per request.
        for k in 0..self.req.active.len() {
            let i = self.req.active[k] as usize;
            let row = &self.req.rows[i * w..(i + 1) * w];
            let mut c = 0u64;
            for (wi, &word) in row.iter().enumerate() {
                let mut b = word;
                while b != 0 {
                    let o = wi << 6 | b.trailing_zeros() as usize;
                    b &= b - 1;
                    c += 1;
                    self.stats.ports[o].output_conflicts += 1;
                }
            }
            self.stats.ports[i].input_conflicts += c;
        }
        for k in 0..self.m.matched.len() {
            let i = self.m.matched[k] as usize;
            let o = self.m.input_to_output[i] as usize;
            self.stats.ports[i].input_conflicts -= 1;
            self.stats.ports[o].output_conflicts -= 1;
        }
        let cycle = self.cycle_of(slot);
        for k in 0..self.m.matched.len() {
            let i = self.m.matched[k] as usize;
            let o = self.m.input_to_output[i] as usize;
            self.start_connection(i, o, self.grant_vc[k] as usize, slot, cycle);
        }
        // Unmatched requests between still-free ports: try again next slot.
        for k in 0..self.req.active.len() {
            let i = self.req.active[k] as usize;
            if self.m.input_to_output[i] != NONE {
                continue;
            }
            if !bits::disjoint(&self.req.rows[i * w..(i + 1) * w], &self.free_outputs) {
                self.retry_slot = Some(slot + 1);
                break;
            }
        }
    }

    /// The slot of the ready head at (i, vc) bound for `o`, if it can go.
    #[inline]
    fn candidate(&self, i: usize, vc: usize, o: usize) -> Option<usize> {
        let iv = i * self.v + vc;
        let (wo, bo) = (o >> 6, o & 63);
        if (self.ready_rows[iv * self.w + wo] & self.ok[vc * self.w + wo]) >> bo & 1 == 0 {
            return None;
        }
        let q = iv * self.q_per_iv + if self.q_per_iv > 1 { o } else { 0 };
        Some(self.qs[q].head as usize)
    }

    /// The VC a grant of (i, o) uses: round-robin from the input's pointer
    /// over the VCs with a ready head for `o` that `o` can take (the oldest
    /// head for the age-based allocator).
    #[inline(always)]
    fn pick_vc(&self, i: usize, o: usize) -> usize {
        let v = self.v;
        let mut vc = NONE as usize;
        if self.needs_ages {
            let mut best = u64::MAX;
            for k in 0..v {
                if let Some(sl) = self.candidate(i, k, o) {
                    if self.slots[sl].pkt.birth_cycle < best {
                        best = self.slots[sl].pkt.birth_cycle;
                        vc = k;
                    }
                }
            }
        } else {
            // The first VC at or after the input's pointer, cyclically, with
            // a ready head for `o` that `o` can take: the VCs as one mask.
            let can = if self.vc_masks {
                (self.ready_cnt[i * self.n + o] & self.ok_vcs[o]) as u64
            } else {
                let (wo, bo) = (o >> 6, o & 63);
                let w = self.w;
                let mut can = 0u64;
                for k in 0..v {
                    can |= ((self.ready_rows[(i * v + k) * w + wo] & self.ok[k * w + wo]) >> bo & 1) << k;
                }
                can
            };
            let start = self.vc_ptr[i] as usize;
            let from = can & (u64::MAX << start);
            let pick = if from != 0 { from } else { can };
            if pick != 0 {
                vc = pick.trailing_zeros() as usize;
            }
        }
        vc
    }

    /// Connect input i to output o for the head of (i, vc, o) (the VC from
    /// [`Self::pick_vc`]).
    #[inline]
    fn start_connection(&mut self, i: usize, o: usize, vc: usize, slot: u64, cycle: u64) {
        let v = self.v;
        debug_assert!(vc != NONE as usize);
        self.vc_ptr[i] = if vc + 1 == v { 0 } else { vc as u32 + 1 };
        let iv = i * v + vc;
        let q = iv * self.q_per_iv + if self.q_per_iv > 1 { o } else { 0 };
        // Dequeue the head (the queue's state and the packet's slot through
        // one reference each).
        let qst = &mut self.qs[q];
        let sl = qst.head as usize;
        let s = &mut self.slots[sl];
        qst.head = s.next;
        if qst.head == NONE {
            qst.tail = NONE;
        }
        qst.ready -= 1;
        let more_ready = qst.ready > 0;
        let pkt = s.pkt;
        let waited = cycle - s.queued;
        s.queued = waited;
        let w = self.w;
        bits::clear_at(&mut self.ready_rows, iv, w, o);
        let c = &mut self.ready_cnt[i * self.n + o];
        *c = if self.vc_masks { *c & !(1 << vc) } else { *c - 1 };
        if *c == 0 {
            bits::clear_at(&mut self.ready_any, i, w, o);
        }
        if more_ready {
            self.mark_head_ready(q);
        } else if bits::is_empty(&self.ready_rows[iv * w..(iv + 1) * w]) {
            self.ready_vcs[i] &= !(1u64 << vc);
            if self.ready_vcs[i] == 0 {
                bits::clear(&mut self.has_ready, i);
            }
        }
        let st = &mut self.stats.inputs[iv];
        st.packets_granted += 1;
        st.queueing_cycles_sum += waited;
        if (waited as usize) < self.small_queueing.len() {
            let k = &mut self.small_queueing[waited as usize];
            *k += 1;
            if *k == u32::MAX {
                self.stats.queueing.record_n(waited, std::mem::take(k) as u64);
            }
        } else {
            self.stats.queueing.record(waited);
        }
        // Connect.
        bits::clear(&mut self.free_inputs, i);
        bits::clear(&mut self.free_outputs, o);
        self.conn_slot[i] = sl as u32;
        let ov = o * v + vc;
        if self.outbuf {
            self.out_vc[ov].ob_space -= pkt.flits;
            let idx = ov * self.ob_cap + ((self.ob_head[ov] + self.ob_len[ov]) as usize % self.ob_cap);
            self.ob_ring[idx] = self.slots[sl];
            self.ob_ring[idx].queued = cycle; // head reaches the output buffer
            self.ob_len[ov] += 1;
            self.pend_output(o);
        } else {
            self.out_vc[ov].credits -= pkt.flits;
        }
        self.update_ok(o, vc, cycle);
        self.push_ev(slot + pkt.flits as u64, EV_CONN_END, i as u32, 0);
        self.last_progress = cycle;
    }

    #[inline]
    fn end_connection(&mut self, i: usize, slot: u64) {
        let cycle = self.cycle_of(slot);
        let sl = self.conn_slot[i] as usize;
        self.conn_slot[i] = NONE;
        let s = self.slots[sl];
        let (vc, o, f) = (s.pkt.vc as usize, s.pkt.dest as usize, s.pkt.flits);
        let iv = i * self.v + vc;
        self.account_occ(iv, cycle);
        self.in_occ[iv].flits -= f;
        self.free_slots.push(sl as u32);
        if self.record_upstream {
            self.upstream.push((i as u32, vc as u32, f, cycle));
        }
        bits::set(&mut self.free_inputs, i);
        bits::set(&mut self.free_outputs, o);
        self.dirty = true;
        if !self.outbuf {
            // The crossbar drove the link: the tail left in the previous slot.
            let wait = s.queued;
            let mut d = s;
            d.queued = wait;
            self.depart(o, &d, self.cycle_of(slot - 1), cycle);
        }
        self.last_progress = cycle;
    }

    /// Output link service (output-buffered switches): start the next packet,
    /// round-robin over VCs, if the downstream has credits for all of it.
    fn serve_output(&mut self, o: usize, cycle: u64) {
        if self.link_busy[o] {
            return;
        }
        let v = self.v;
        let start = self.link_vc_ptr[o] as usize;
        for k in 0..v {
            let vc = (start + k) % v;
            let ov = o * v + vc;
            if self.ob_len[ov] == 0 {
                continue;
            }
            let idx = ov * self.ob_cap + self.ob_head[ov] as usize;
            let sl = self.ob_ring[idx];
            if sl.queued > cycle || self.out_vc[ov].credits < sl.pkt.flits {
                continue;
            }
            self.ob_head[ov] = ((self.ob_head[ov] as usize + 1) % self.ob_cap) as u32;
            self.ob_len[ov] -= 1;
            self.out_vc[ov].credits -= sl.pkt.flits;
            self.update_ok(o, vc, cycle);
            self.link_busy[o] = true;
            self.link_vc_ptr[o] = ((vc + 1) % v) as u32;
            let mut cur = sl;
            // Restore the grant-wait for the departure record.
            cur.queued = self.slots_wait_of(&sl);
            self.link_cur[o] = cur;
            self.push_ev((cycle + sl.pkt.flits as u64) * self.s, EV_LINK_FREE, o as u32, 0);
            self.last_progress = cycle;
            return;
        }
    }

    #[inline]
    fn slots_wait_of(&self, sl: &Slot) -> u64 {
        // In the output buffer `queued` holds the cycle the head crossed; the
        // grant wait is that minus the ready time.
        sl.queued.saturating_sub(sl.ready_at)
    }

    #[inline(always)]
    fn depart(&mut self, o: usize, s: &Slot, tail_out: u64, now: u64) {
        let f = s.pkt.flits as u64;
        self.account_sys(now);
        self.sys_flits -= f;
        self.packets_inside -= 1;
        let ov = o * self.v + s.pkt.vc as usize;
        let lat = tail_out + 1 - s.head_in;
        let st = &mut self.stats;
        st.outputs[ov].packets_out += 1;
        st.outputs[ov].flits_out += f;
        st.flits_out += f;
        st.packets_out += 1;
        st.flit_sojourn_cycles += f * lat;
        if !self.small_latency.is_empty() && lat < SMALL as u64 {
            let k = &mut self.small_latency[o * SMALL + lat as usize];
            *k += 1;
            if *k == u16::MAX {
                let k = std::mem::take(k) as u64;
                st.network_latency.record_n(lat, k);
                st.output_latency[o].record_n(lat, k);
            }
        } else {
            st.network_latency.record(lat);
            st.output_latency[o].record(lat);
        }
        self.departures.push(Departure {
            input: s.input,
            output: o as u32,
            packet: s.pkt,
            head_in_cycle: s.head_in,
            tail_out_cycle: tail_out,
            queueing_cycles: s.queued,
        });
    }

}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(outbuf: u32, speedup: u32) -> SwitchSpec {
        SwitchSpec {
            ports: 4,
            vcs: 2,
            buffer_per_vc_flits: 16,
            max_packet_flits: 8,
            queueing: Queueing::Voq,
            speedup,
            pipeline_latency_cycles: 2,
            output_buffer_per_vc_flits: outbuf,
            downstream_credits_per_vc_flits: 8,
            allocator: "islip".into(),
            iterations: 1,
            clock_ghz: 1.0,
            seed: 0,
            stall_timeout_cycles: 100,
        }
    }

    /// Drive the switch as a fabric would: inject, step through the event
    /// times it announces, collect departures.
    fn drain(sw: &mut Switch, until: u64) -> Vec<Departure> {
        let mut out = vec![];
        while let Some(c) = sw.next_event_cycle() {
            if c > until {
                break;
            }
            sw.step(c);
            out.extend_from_slice(sw.departures());
        }
        out
    }

    /// One 8-flit packet through an idle switch: it requests P = 2 cycles
    /// after its head arrives and its 8 flits leave one per cycle, so the
    /// tail leaves at head_in + P + F - 1 (Dally & Towles ch. 16), with or
    /// without output buffers (cut-through from the output buffer).
    #[test]
    fn single_packet_latency_is_pipeline_plus_serialization() {
        for (outbuf, speedup) in [(0, 1), (16, 1)] {
            let mut sw = Switch::new(&spec(outbuf, speedup)).unwrap();
            sw.set_record_upstream_credits(true);
            let p = Packet { dest: 3, vc: 1, flits: 8, birth_cycle: 10, tag: 77 };
            assert!(sw.can_accept(0, 1, 8, 10));
            sw.inject(0, p, 10).unwrap();
            assert_eq!(sw.input_free_flits(0, 1), 8);
            let d = drain(&mut sw, 1000);
            assert_eq!(d.len(), 1);
            assert_eq!(d[0].packet.tag, 77);
            assert_eq!(d[0].tail_out_cycle, 10 + 2 + 8 - 1, "outbuf {outbuf}");
            assert_eq!(sw.input_free_flits(0, 1), 16);
            assert_eq!(sw.packets_inside(), 0);
        }
    }

    /// Virtual cut-through with 8 credits (one packet): the second packet to
    /// the same output VC waits until the first one's credits come back.
    #[test]
    fn credits_gate_the_next_packet() {
        let mut sw = Switch::new(&spec(0, 1)).unwrap();
        sw.inject(0, Packet { dest: 2, vc: 0, flits: 8, birth_cycle: 0, tag: 1 }, 0).unwrap();
        sw.inject(1, Packet { dest: 2, vc: 0, flits: 8, birth_cycle: 0, tag: 2 }, 0).unwrap();
        let d = drain(&mut sw, 1000);
        assert_eq!(d.len(), 1, "no credits for the second packet");
        assert!(sw.check_stall(d[0].tail_out_cycle + 200, 1000.0).is_err(), "credits never returned: stall");
        // Credits return 5 cycles after the tail: the second packet goes then.
        let back = d[0].tail_out_cycle + 1 + 5;
        sw.return_credits(2, 0, 8, back).unwrap();
        let d2 = drain(&mut sw, 1000);
        assert_eq!(d2.len(), 1);
        assert_eq!(d2[0].tail_out_cycle, back + 8 - 1);
    }

    /// More events at one slot than a wheel bucket's flat part holds
    /// (`wheel::BUCKET`): 32 packets on 32 disjoint input-output pairs all
    /// connect at once, so their 32 connection ends fall in one slot, and
    /// 24 credit returns to one cycle; every one is handled (each tail at
    /// P + F - 1 = 9, the credits back to one packet's worth).
    #[test]
    fn a_bucket_overflowing_its_flat_part_loses_no_event() {
        let mut sp = spec(0, 1);
        sp.ports = 32;
        let mut sw = Switch::new(&sp).unwrap();
        for i in 0..32u32 {
            sw.inject(i as usize, Packet { dest: (i + 5) % 32, vc: 0, flits: 8, birth_cycle: 0, tag: i as u64 }, 0).unwrap();
        }
        let d = drain(&mut sw, 1000);
        assert!(wheel::BUCKET < 32);
        assert_eq!(d.len(), 32);
        assert!(d.iter().all(|x| x.tail_out_cycle == 2 + 8 - 1));
        let mut tags: Vec<u64> = d.iter().map(|x| x.packet.tag).collect();
        tags.sort();
        assert_eq!(tags, (0..32).collect::<Vec<u64>>());
        // 8 credits used on each output VC 0; 24 returns of one flit at
        // cycle 50 on output 0 (saturating at the configured 8).
        for _ in 0..24 {
            sw.return_credits(0, 0, 1, 50).unwrap();
        }
        drain(&mut sw, 1000);
        assert_eq!(sw.output_credits(0, 0), 8);
        assert_eq!(sw.output_credits(1, 0), 0);
        assert_eq!(sw.next_event_cycle(), None);
    }

    /// The register form of the request rows (one- and two-word rows) and
    /// the lab's `inject_checked` against the general row loop and the
    /// checked `inject`: two switches driven by the same random traffic
    /// (Bernoulli arrivals, uniform destinations and VCs, 1-8 flits, each
    /// packet offered when its input can take it, credits back 0-3 cycles
    /// after its tail) give every departure, in order, and the final
    /// statistics equal; 2 to 100 ports (one and two words), iSLIP with one
    /// and two iterations, PIM, wavefront and the age-based allocator, with
    /// and without pipeline, and output buffers with speedup 2.
    #[test]
    fn register_rows_and_checked_injection_match_the_general_path() {
        use crate::engine::SimRng;
        let cases = [(2, "islip", 1, 0, 1), (64, "islip", 1, 0, 1), (72, "islip", 1, 2, 1), (72, "islip", 2, 0, 1), (100, "pim", 2, 0, 1), (72, "oldest_first", 1, 1, 1), (100, "wavefront", 1, 0, 1), (72, "islip", 1, 0, 2)];
        for (ports, alloc, it, pipe, speedup) in cases {
            let mut sp = spec(if speedup > 1 { 16 } else { 0 }, speedup);
            sp.ports = ports;
            sp.vcs = 4;
            sp.allocator = alloc.into();
            sp.iterations = it;
            sp.pipeline_latency_cycles = pipe;
            sp.downstream_credits_per_vc_flits = 16;
            let mut general = Switch::new(&sp).unwrap();
            general.generic_rows = true;
            let mut fast = Switch::new(&sp).unwrap();
            let mut rng = SimRng::new(ports as u64 * 31 + it as u64);
            let (mut departed, mut moved) = (0usize, 0u64);
            for cycle in 0..4000u64 {
                for i in 0..ports as usize {
                    if !rng.bernoulli(0.09) {
                        continue;
                    }
                    let p = Packet { dest: rng.below(ports as u64) as u32, vc: rng.below(4) as u32, flits: 1 + rng.below(8) as u32, birth_cycle: cycle, tag: cycle * 1000 + i as u64 };
                    let ok = general.can_accept(i, p.vc as usize, p.flits, cycle);
                    assert_eq!(ok, fast.can_accept(i, p.vc as usize, p.flits, cycle));
                    if ok {
                        general.inject(i, p, cycle).unwrap();
                        fast.inject_checked(i, p, cycle);
                    }
                }
                general.step(cycle);
                fast.step(cycle);
                assert_eq!(general.departures(), fast.departures(), "{ports} ports, {alloc} x{it}, cycle {cycle}");
                for k in 0..general.departures().len() {
                    let d = general.departures()[k];
                    let back = d.tail_out_cycle + 1 + rng.below(4);
                    general.return_credits(d.output as usize, d.packet.vc as usize, d.packet.flits, back).unwrap();
                    fast.return_credits(d.output as usize, d.packet.vc as usize, d.packet.flits, back).unwrap();
                    moved += d.packet.flits as u64;
                }
                departed += general.departures().len();
            }
            assert!(departed as f64 > 0.5 * 0.09 * ports as f64 * 4000.0, "{ports} ports, {alloc}: {departed} packets");
            let (a, b) = (format!("{:?}", general.finish_stats(4000)), format!("{:?}", fast.finish_stats(4000)));
            assert_eq!(a, b, "{ports} ports, {alloc} x{it}");
            assert_eq!(general.stats().flits_out, moved);
        }
    }

    #[test]
    fn bad_injections_are_config_errors() {
        let mut sw = Switch::new(&spec(0, 1)).unwrap();
        let ok = Packet { dest: 1, vc: 0, flits: 8, birth_cycle: 0, tag: 0 };
        assert!(sw.inject(9, ok, 0).is_err());
        assert!(sw.inject(0, Packet { dest: 4, ..ok }, 0).is_err());
        assert!(sw.inject(0, Packet { flits: 9, ..ok }, 0).is_err());
        sw.inject(0, ok, 0).unwrap();
        // The input link still carries the first packet's body.
        assert!(sw.inject(0, ok, 3).is_err());
        let mut bad = spec(0, 1);
        bad.ports = 0;
        assert!(matches!(Switch::new(&bad), Err(FlitsimError::Config { .. })));
        bad = spec(0, 2);
        assert!(matches!(Switch::new(&bad), Err(FlitsimError::Config { .. })));
    }
}
