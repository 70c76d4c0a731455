//! Faults in the fabric simulator: dead links and dead switch planes at given
//! times, and bit errors with link-level retry on the switch -> GPU direction.
//!
//! A fault is applied at the first event at or after its time (nothing
//! changes between events, so this is exact). Then:
//! - every packet whose path the dead component takes away (on a dead wire,
//!   inside or on the wires of a dead switch, or headed for a dead output) is
//!   *lost*: its pending events only drain the dead path (credits flow back so
//!   live switches stay consistent), and a copy with the same sequence number
//!   is queued again at its source when the source's replay timer
//!   (`replay.timeout_ps` of the link, default 1 us) expires, on a live port;
//! - packets still queued at a source port that died, or whose switch can no
//!   longer reach their destination, are sprayed again over the live ports;
//! - new transfers and route choices skip dead ports (spraying skips the plane);
//! - GPU-wide limits stay split as before (each port's queue keeps its share,
//!   docs/fabric.md), so a dead port's share goes with it: the calibrated
//!   collective injection is NCCL's per-link rate, and a plane dead from
//!   t = 0 runs exactly like a fabric built without it.
//!
//! Accounting: `delivered + replayed_delivered = sent` bytes; each loss
//! costs one more transmission (a replayed copy can be lost again by a later
//! fault, so `replayed_delivered <= lost`).
//! The spec guarantees (FabricSpec::validate) that every pair of GPUs keeps a
//! live switch after all faults, so requeued packets always find a port.

use super::*;
use crate::fabric::spec::Fault;
use crate::link::DEFAULT_TIMEOUT_PS;

/// Fault and end-to-end replay accounting of a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct FaultStats {
    /// Faults that took effect during the run (a fault after the last event has none).
    pub faults_applied: u32,
    /// Packets a fault destroyed (each was sent again).
    pub lost_packets: u64,
    pub lost_bytes: u64,
    /// Payload bytes delivered by a first transmission.
    pub delivered_bytes: u64,
    /// Payload bytes delivered by an end-to-end replay after a fault.
    pub replayed_delivered_bytes: u64,
}

pub(super) struct FaultState {
    /// (time, fault), by time.
    list: Vec<(u64, Fault)>,
    next: usize,
    /// Time of the next fault not yet applied (u64::MAX: none).
    pub next_ps: u64,
    /// Some component is dead: route choices must check liveness.
    pub any_dead: bool,
    port_dead: Vec<bool>,
    sw_dead: Vec<bool>,
    /// Replay timer of each GPU port's link, ps.
    timeout_ps: Vec<u64>,
    rr: u32,
    pub stats: FaultStats,
}

impl FaultState {
    pub fn new(spec: &FabricSpec, topo: &Topology) -> Result<Self> {
        let mut list: Vec<(u64, Fault)> = spec.faults.iter().map(|f| (f.at_ps(), *f)).collect();
        list.sort_by_key(|&(t, _)| t);
        let timeout_ps = topo
            .gpu_port_to
            .iter()
            .map(|w| w.map_or(DEFAULT_TIMEOUT_PS, |(_, _, li)| spec.links[li as usize].replay.map_or(DEFAULT_TIMEOUT_PS, |r| r.timeout_ps)))
            .collect();
        Ok(FaultState {
            next_ps: list.first().map_or(u64::MAX, |&(t, _)| t),
            list,
            next: 0,
            any_dead: false,
            port_dead: vec![false; topo.gpu_port_to.len()],
            sw_dead: vec![false; topo.switches as usize],
            timeout_ps,
            rr: 0,
            stats: FaultStats::default(),
        })
    }

    #[inline]
    pub fn count_delivered(&mut self, bytes: u64, replayed: bool) {
        if replayed {
            self.stats.replayed_delivered_bytes += bytes;
        } else {
            self.stats.delivered_bytes += bytes;
        }
    }
}

impl FabricSim {
    /// GPU port `p` and its switch are alive.
    #[inline]
    fn port_alive(&self, p: usize) -> bool {
        let sw = self.ports[p].sw;
        sw != NONE && !self.faults.port_dead[p] && !self.faults.sw_dead[sw as usize]
    }

    /// Output `o` of switch `sw` leads to a live GPU port.
    #[inline]
    fn out_alive(&self, sw: u32, o: u32) -> bool {
        match self.topo.switch_port_to[(sw * self.topo.switch_ports + o) as usize] {
            Some(gp) => self.port_alive(gp as usize),
            None => match self.topo.peer(sw, o) {
                crate::fabric::topology::Peer::Switch { switch, .. } => !self.faults.sw_dead[switch as usize],
                _ => false,
            },
        }
    }

    pub(super) fn reaches(&self, sw: u32, dst: u32) -> bool {
        self.topo.routes(sw, dst).iter().any(|&o| self.out_alive(sw, o))
    }

    /// Live ports of GPU `src` through which `dst` is reachable (all wired
    /// ones while nothing is dead), in port order.
    pub(super) fn eligible_ports(&self, src: u32, dst: u32, out: &mut Vec<u32>) {
        self.topo.eligible_ports(src, dst, out);
        if self.faults.any_dead {
            out.retain(|&p| self.port_alive(p as usize) && self.reaches(self.ports[p as usize].sw, dst));
        }
    }

    /// Next live output of `sw` towards `dst`, round-robin.
    pub(super) fn live_route(&mut self, sw: u32, dst: u32) -> u32 {
        let k = (sw * self.topo.endpoints + dst) as usize;
        let n = self.topo.routes(sw, dst).len();
        for _ in 0..n {
            let o = self.topo.routes(sw, dst)[self.rr_out[k] as usize % n];
            self.rr_out[k] = self.rr_out[k].wrapping_add(1);
            if self.out_alive(sw, o) {
                return o;
            }
        }
        // Unreachable: shares are only queued where a live route exists.
        self.topo.routes(sw, dst)[0]
    }

    /// Apply every fault due by `now`.
    pub(super) fn apply_faults<Q: Scheduler<FEv> + ?Sized>(&mut self, now: TimePs, q: &mut Q) {
        while self.faults.next < self.faults.list.len() && self.faults.list[self.faults.next].0 <= now {
            let (at, f) = self.faults.list[self.faults.next];
            self.faults.next += 1;
            self.faults.any_dead = true;
            self.faults.stats.faults_applied += 1;
            // What the fault takes: a dead plane, or one wire (GPU port p <->
            // switch s output o).
            let (dead_sw, wire) = match f {
                Fault::Plane { switch, .. } => {
                    self.faults.sw_dead[switch as usize] = true;
                    (switch, None)
                }
                Fault::Link { gpu, port, .. } => {
                    let p = (gpu * self.topo.gpu_ports + port) as usize;
                    self.faults.port_dead[p] = true;
                    let (s, o, _) = self.topo.gpu_port_to[p].expect("validated: a wired port");
                    (NONE, Some((p as u32, s, o)))
                }
                Fault::Nic { nic, .. } => {
                    self.faults.sw_dead[nic as usize] = true;
                    (nic, None)
                }
            };
            let graph = self.graph.is_some();
            // Packets in flight on what died.
            for id in 0..self.pkts.len() {
                let pk = self.pkts[id];
                if pk.lost || pk.stage > STAGE_TO_GPU {
                    continue;
                }
                let mut hit = pk.sw == dead_sw || wire.is_some_and(|(p, s, o)| (pk.src_port == p && pk.stage == STAGE_TO_SWITCH) || (pk.sw == s && pk.out == o));
                if graph && !hit && dead_sw != NONE {
                    // On a trunk into the dead element, or queued for an output leading to it.
                    hit = (pk.stage == STAGE_ON_TRUNK && pk.next == dead_sw)
                        || (pk.stage <= STAGE_IN_SWITCH && matches!(self.topo.peer(pk.sw, pk.out), crate::fabric::topology::Peer::Switch { switch, .. } if switch == dead_sw));
                }
                if hit {
                    self.lose_packet(at, now, id as u32, q);
                }
            }
            if let Some(g) = &self.graph {
                // Routes over what is left (shortest paths on the live graph).
                let dead_port: Vec<bool> = self.faults.port_dead.clone();
                self.topo = Topology::with_dead(&g.spec, &self.faults.sw_dead, &dead_port);
            }
        }
        self.faults.next_ps = self.faults.list.get(self.faults.next).map_or(u64::MAX, |&(t, _)| t);
        // Queued work that can no longer leave where it waits: spray again.
        for p in 0..self.ports.len() {
            if self.ports[p].queue.is_empty() {
                continue;
            }
            let alive = self.port_alive(p);
            let sw = self.ports[p].sw;
            let mut queue = std::mem::take(&mut self.ports[p].queue);
            let mut moved = Vec::new();
            queue.retain(|&sid| {
                let sh = &self.shares[sid as usize];
                let pending = sh.full_left > 0 || sh.last_bytes > 0;
                let stays = pending && alive && self.reaches(sw, self.xfers[sh.xfer as usize].dst);
                if pending && !stays {
                    moved.push(sid);
                }
                stays
            });
            self.ports[p].queue = queue;
            if self.ports[p].queue.is_empty() {
                self.ports[p].blocked = false;
                self.ports[p].credit_blocked_since = None;
            }
            for sid in moved {
                self.respray(now, sid, q);
            }
        }
    }

    /// Packet `id` is destroyed by a fault at `at`: count it and queue a copy
    /// at its source when the replay timer expires (applied lazily, so the
    /// timer may already have expired by `now`).
    pub(super) fn lose_packet<Q: Scheduler<FEv> + ?Sized>(&mut self, at: TimePs, now: TimePs, id: u32, q: &mut Q) {
        let pk = self.pkts[id as usize];
        self.pkts[id as usize].lost = true;
        let b = pk.bytes as u64;
        self.faults.stats.lost_packets += 1;
        self.faults.stats.lost_bytes += b;
        self.ports[pk.src_port as usize].lost_bytes += b;
        let sid = self.shares.len() as u32;
        self.shares.push(Share { xfer: pk.xfer, full_left: 0, last_bytes: pk.bytes, pkt_bytes: b, seq: pk.seq });
        q.schedule((at + self.faults.timeout_ps[pk.src_port as usize]).max(now), FEv::Requeue(sid));
    }

    /// Move the packets left in share `sid` to live ports, by the spray rule.
    fn respray<Q: Scheduler<FEv> + ?Sized>(&mut self, now: TimePs, sid: u32, q: &mut Q) {
        let sh = self.shares[sid as usize].clone();
        if sh.full_left == 0 && sh.last_bytes == 0 {
            return; // an adaptive share already moved from another port
        }
        self.shares[sid as usize].full_left = 0;
        self.shares[sid as usize].last_bytes = 0;
        let (src, dst) = (self.xfers[sh.xfer as usize].src, self.xfers[sh.xfer as usize].dst);
        let mut elig = Vec::new();
        self.eligible_ports(src, dst, &mut elig);
        let e = elig.len() as u64;
        if e == 0 {
            return; // validated away; nothing to do
        }
        let mut push = |this: &mut Self, p: u32, share: Share| {
            let id = this.shares.len() as u32;
            this.shares.push(share);
            this.ports[p as usize].queue.push_back(id);
            this.schedule_try(p as usize, now, q);
        };
        match self.spray {
            Spray::Adaptive => {
                let id = self.shares.len() as u32;
                self.shares.push(sh);
                for &p in &elig {
                    self.ports[p as usize].queue.push_back(id);
                    self.schedule_try(p as usize, now, q);
                }
            }
            Spray::Hash => {
                let p = elig[(sh.xfer as u64 % e) as usize];
                push(self, p, sh);
            }
            Spray::RoundRobin => {
                let n = sh.full_left;
                for (i, &p) in elig.iter().enumerate() {
                    let i = i as u64;
                    let cnt = n / e + u64::from(i < n % e);
                    let last = if i == n % e { sh.last_bytes } else { 0 };
                    if cnt > 0 || last > 0 {
                        push(self, p, Share { full_left: cnt, last_bytes: last, ..sh.clone() });
                    }
                }
            }
        }
    }

    /// A lost packet's replay timer expired: queue it on a live port.
    pub(super) fn requeue<Q: Scheduler<FEv> + ?Sized>(&mut self, now: TimePs, sid: u32, q: &mut Q) -> Result<()> {
        let x = self.shares[sid as usize].xfer as usize;
        let (src, dst) = (self.xfers[x].src, self.xfers[x].dst);
        let mut elig = std::mem::take(&mut self.scratch);
        self.eligible_ports(src, dst, &mut elig);
        if elig.is_empty() {
            self.scratch = elig;
            return Err(FlitsimError::Stalled { time_ps: now, detail: format!("GPU {src} has no live port to GPU {dst} for a replayed packet") });
        }
        let p = elig[self.faults.rr as usize % elig.len()];
        self.faults.rr = self.faults.rr.wrapping_add(1);
        self.scratch = elig;
        self.ports[p as usize].queue.push_back(sid);
        self.schedule_try(p as usize, now, q);
        Ok(())
    }

    /// A lost packet's pending event: drain the dead path. `at_switch`: it
    /// reached a switch input over a wire (it is not injected; its credits
    /// return to the sender); otherwise it left a switch output (the switch's
    /// credits return).
    pub(super) fn drop_lost<Q: Scheduler<FEv> + ?Sized>(&mut self, now: TimePs, pkt: u32, at_switch: bool, q: &mut Q) -> Result<()> {
        let info = self.pkts[pkt as usize];
        self.pkts[pkt as usize].stage = STAGE_FREE;
        self.free_pkts.push(pkt);
        let sp = info.src_port as usize;
        if at_switch && info.stage == STAGE_ON_TRUNK {
            // Off a trunk: the upstream element's output gets its credits back.
            let crt = self.ports[sp].link.timing().credit_return_ps;
            q.schedule(now + crt, FEv::credit_sw(info.sw, info.out, info.vc, info.flits));
        } else if at_switch {
            let crt = self.ports[sp].link.timing().credit_return_ps;
            q.schedule(now + crt, FEv::CreditGpu { port: info.src_port, vc: info.vc, flits: info.flits });
        } else {
            let gp = self.topo.switch_port_to[(info.sw * self.topo.switch_ports + info.out) as usize].expect("wired output") as usize;
            q.schedule(now + self.ports[gp].rx.credit_return_ps, FEv::credit_sw(info.sw, info.out, info.vc, info.flits));
        }
        self.ports[sp].outstanding -= 1;
        if self.ports[sp].blocked && self.ports[sp].max_outstanding > 0 {
            self.ports[sp].blocked = false;
            self.close_credit_block(sp, now);
            self.schedule_try(sp, now, q);
        }
        Ok(())
    }

    /// Tail arrival at GPU port `gp` of packet `pkt` whose error-free arrival
    /// is `t`, with go-back-N on the switch -> GPU wire: no earlier than one
    /// serialization after the previous arrival (replays shift the train),
    /// plus R per failed attempt.
    pub(super) fn rx_replay_arrival(&mut self, s: usize, gp: usize, pkt: u32, t: TimePs) -> TimePs {
        let info = self.pkts[pkt as usize];
        let k = (info.bytes as u64).div_ceil(self.payload).max(1);
        let ser = (info.flits as f64 * self.sws[s].cycle_ps).floor() as u64;
        let fb = self.fmt.flit_bytes as u64;
        let port = &mut self.ports[gp];
        let base = t.max(port.rx_last_ps + ser);
        let r = port.rx_replay.as_mut().expect("checked by the caller");
        let wire = info.flits as u64 * fb;
        let f = r.sample_failures(k, (wire * 8) as f64 / k as f64);
        let mut lost = 0;
        if f > 0 {
            lost = f * r.penalty_ps(ser.div_ceil(k), port.rx.latency_ps);
            let st = &mut port.rx_replay_stats;
            st.replays += f;
            st.replayed_wire_bytes += f * wire.div_ceil(k);
            st.replay_ps += lost;
        }
        port.rx_last_ps = base + lost;
        base + lost
    }

    /// Per GPU port: payload bytes delivered through it, payload bytes it
    /// sent that faults destroyed, retry statistics of its switch -> GPU direction.
    pub(crate) fn port_fault_stats(&self) -> impl Iterator<Item = (u64, u64, ReplayStats)> + '_ {
        self.ports.iter().map(|p| (p.rx_payload_bytes, p.lost_bytes, p.rx_replay_stats))
    }

    pub(crate) fn fault_stats(&self) -> FaultStats {
        self.faults.stats
    }
}
