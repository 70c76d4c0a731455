//! The flow model of a graph fabric (trunks, hosts, element kinds: PCIe
//! switches, root complexes, NICs, Ethernet/InfiniBand switches, bridges,
//! second NVSwitch tiers).
//!
//! Resources are directed links, bundled where the packet level cannot tell
//! them apart: an endpoint's ports to one element over one link spec form one
//! uplink resource; an element's output ports to one neighbour (an endpoint or
//! another element) over one link spec form one output resource. Within a
//! bundle the packet level spreads evenly (round-robin at the endpoint, the
//! per-destination round-robin over ECMP ports at a switch, and an ECMP set
//! holds either all or none of a bundle's ports), so a bundle is exact.
//!
//! A transfer's path is the routing DAG from its source to its destination:
//! the source's eligible ports (minimum distance) split its rate evenly, or in
//! proportion to the port rates where they differ (as the packet level's
//! round-robin does), and every element splits what reaches it evenly over its
//! ECMP ports; distances fall by one per hop, so accumulating per element
//! layer by layer gives each resource its fixed coefficient in one pass.
//!
//! Framing follows the packet engine (`fabric::sim::reframed`): packets are
//! counted in the fabric's base format (`links[0]`'s flits, a header per
//! protocol packet of the GPU's payload) and each link's rate is scaled so a
//! packet takes the time its payload takes in that link's own framing at its
//! own max payload (a NIC re-frames into MTU-sized frames: RoCEv2 98.0 %,
//! InfiniBand 99.4 % at 4096 B). Capacities are payload rates; per hop: the
//! head flit's serialization, link latency, the element's clock edge and
//! pipeline; per hop a credit window (receiver buffer / round trip) caps the rate.

use crate::error::{FlitsimError, Result};
use crate::fabric::{FabricSpec, Spray, Topology};
use crate::link::LinkTiming;
use std::collections::HashMap;

/// A bundle of parallel directed links that the flow level treats as one resource.
#[derive(Debug, Clone)]
pub struct Bundle {
    /// 0: endpoint ports (uplinks); 1: switch output ports.
    pub side: u8,
    /// Endpoint (side 0) or switch (side 1) that drives it.
    pub owner: u32,
    /// Port indices (endpoint ports: e * gpu_ports + k; switch ports: s * switch_ports + o).
    pub ports: Vec<u32>,
    /// Link spec index.
    pub link: u32,
}

/// A cached path: (resource, coefficient) entries and its per-transfer numbers.
#[derive(Debug, Clone)]
struct CachedPath {
    entries: Vec<(u32, f64)>,
    /// Rate cap from credit windows, payload bytes/ps.
    window_cap: f64,
    latency_ps: u64,
}

/// Static flow view of a graph fabric.
#[derive(Debug, Clone)]
pub struct GraphModel {
    pub bundles: Vec<Bundle>,
    /// Per endpoint port / switch port: its bundle (u32::MAX if unwired).
    up_res: Vec<u32>,
    down_res: Vec<u32>,
    /// Per endpoint port: payload capacity, bytes/ps.
    pub up_port: Vec<f64>,
    /// Per resource: credit-window rate of the whole bundle, bytes/ps.
    window: Vec<f64>,
    /// Per switch: clock period and pipeline cycles.
    cycle_ps: Vec<f64>,
    pipe: Vec<u32>,
    /// Per link index: its re-framed timing (base-format flits at the rate
    /// that gives the link's own framing's payload rate).
    timings: Vec<LinkTiming>,
    /// The fabric's base packet format and protocol payload, bytes.
    base: crate::phy::PacketFormat,
    payload: u64,
    /// Simulated packet payload, bytes.
    sim_bytes: u64,
    cache: crate::engine::FastMap<(u32, u32, u32), CachedPath>,
    acc: Vec<f64>,
    touched: Vec<u32>,
    layer: Vec<(u32, f64)>,
    sw_acc: Vec<f64>,
    sw_touched: Vec<u32>,
    scratch: Vec<u32>,
    /// Drain group of the last [`GraphModel::path`]: the uplink bundle of
    /// the port its spray starts on (the rotated first eligible port, or the
    /// hash port).
    pub last_group: u32,
}

fn ser_ps(bytes: u64, rate_bps: u64) -> f64 {
    (bytes as f64 * 8e12 / rate_bps as f64).ceil()
}

/// Most cached (src, dst, offset) paths (bounded memory).
const MAX_CACHED: usize = 1 << 16;

impl GraphModel {
    /// Wire bytes (base format) of a simulated packet of `s` payload bytes.
    fn wire_bytes(&self, s: u64) -> u64 {
        self.base.transfer(s, self.payload).wire_bytes
    }

    /// Derive from a validated graph spec and its topology. Returns the model,
    /// per-resource capacities, and the first reason the fabric is
    /// credit-bound (None if no hop is).
    ///
    /// # Errors
    /// `Config` for an invalid link spec.
    pub fn new(spec: &FabricSpec, topo: &Topology, sim_bytes: u64, largest: u64) -> Result<(Self, Vec<f64>, Option<String>)> {
        let base = spec.links[0].packet;
        let payload = spec.gpu.payload_bytes as u64;
        let mut timings = Vec::with_capacity(spec.links.len());
        for l in &spec.links {
            timings.push(crate::fabric::reframed(l, &base, payload)?);
        }
        let gp = topo.gpu_ports;
        let sp = topo.switch_ports;
        let max_f = (largest / payload) * base.flits_per_packet(payload);
        // Per element (as the packet engine): clock given, or one base flit
        // per cycle at its fastest re-framed link; input buffer per VC given,
        // or its links' largest credits, at least two of the largest packets.
        let mut cycle_ps = vec![0.0; topo.switches as usize];
        let mut pipe = vec![0u32; topo.switches as usize];
        let mut buf = vec![0u64; topo.switches as usize];
        for s in 0..topo.switches {
            let p = spec.params_of(s);
            pipe[s as usize] = p.pipeline_latency_cycles;
            let (mut fastest, mut credits) = (0u64, 0u32);
            for o in 0..sp {
                if !matches!(topo.peer(s, o), crate::fabric::Peer::None) {
                    let t = &timings[topo.port_link(s, o, 0) as usize];
                    fastest = fastest.max(t.rate_bps);
                    credits = credits.max(t.credits_per_vc_flits);
                }
            }
            let ghz = if p.clock_ghz > 0.0 { p.clock_ghz } else { fastest.max(1) as f64 / (base.flit_bytes as f64 * 8.0) / 1e9 };
            cycle_ps[s as usize] = 1000.0 / ghz;
            buf[s as usize] = (if p.buffer_per_vc_flits > 0 { p.buffer_per_vc_flits } else { credits } as u64).max(2 * max_f);
        }
        let g = &spec.gpu;
        let div = gp.max(1) as f64;
        let inj_cost = (sim_bytes + g.injection_packet_overhead_bytes as u64 * sim_bytes.div_ceil(payload)) as f64;
        let inj_ps = if g.injection_bytes_per_s == 0 { 0.0 } else { (inj_cost * 1e12 * div / g.injection_bytes_per_s as f64).ceil() };
        let ej_ps = if g.ejection_bytes_per_s == 0 { 0.0 } else { (sim_bytes as f64 * 1e12 * div / g.ejection_bytes_per_s as f64).ceil() };
        let mut m = GraphModel {
            bundles: Vec::new(),
            up_res: vec![u32::MAX; topo.gpu_port_to.len()],
            down_res: vec![u32::MAX; (topo.switches * sp) as usize],
            up_port: vec![0.0; topo.gpu_port_to.len()],
            window: Vec::new(),
            cycle_ps,
            pipe,
            timings,
            base,
            payload,
            sim_bytes,
            cache: crate::engine::FastMap::default(),
            acc: Vec::new(),
            touched: Vec::new(),
            layer: Vec::new(),
            sw_acc: vec![0.0; topo.switches as usize],
            sw_touched: Vec::new(),
            scratch: Vec::new(),
            last_group: 0,
        };
        let mut capacity = Vec::new();
        let mut why: Option<String> = None;
        let wire = m.wire_bytes(sim_bytes);
        let flits = wire / base.flit_bytes as u64;
        let mut index: HashMap<(u8, u32, u32, u32), u32> = HashMap::new();
        // Endpoint uplinks.
        for p in 0..topo.gpu_port_to.len() {
            let Some((s, _, l)) = topo.gpu_port_to[p] else { continue };
            let t = m.timings[l as usize];
            let ser = ser_ps(wire, t.rate_bps);
            // per-link-kind cap (GpuInjection::for_port), each protocol packet
            // charged its payload + overhead as the packet engine does
            let inj_ps = if g.link_injection_bytes_per_s.is_empty() {
                inj_ps
            } else {
                let pi = g.for_port(p as u32 / gp, spec.gpus, l, div);
                let cost = sim_bytes + pi.injection_packet_overhead_bytes as u64 * sim_bytes.div_ceil(payload);
                if pi.injection_bytes_per_s == 0 { 0.0 } else { (cost as f64 * 1e12 * div / pi.injection_bytes_per_s as f64).ceil() }
            };
            let cap = sim_bytes as f64 / ser.max(inj_ps);
            m.up_port[p] = cap;
            let key = (0u8, p as u32 / gp, s, l);
            let r = *index.entry(key).or_insert_with(|| {
                m.bundles.push(Bundle { side: 0, owner: p as u32 / gp, ports: Vec::new(), link: l });
                capacity.push(0.0);
                m.window.push(0.0);
                (m.bundles.len() - 1) as u32
            });
            m.bundles[r as usize].ports.push(p as u32);
            m.up_res[p] = r;
            capacity[r as usize] += cap;
            // Window: the element's input buffer over the round trip.
            let c = buf[s as usize];
            let cyc = m.cycle_ps[s as usize];
            let rtt = ser + t.latency_ps as f64 + (m.pipe[s as usize] as f64 + 1.0) * cyc + t.credit_return_ps as f64;
            let w = (c / flits) as f64 * sim_bytes as f64 / rtt;
            m.window[r as usize] += w;
            if w < cap && why.is_none() {
                why = Some(format!(
                    "credit-bound: {}'s input credit window ({c} flits per {:.1} ns round trip) carries {:.1} GB/s, below the link's {:.1} GB/s",
                    spec.element_name(s),
                    rtt / 1e3,
                    w * 1e3,
                    cap * 1e3
                ));
            }
        }
        // Switch outputs.
        for s in 0..topo.switches {
            let cyc = m.cycle_ps[s as usize];
            for o in 0..sp {
                let peer = topo.peer(s, o);
                let (nb, is_ep) = match peer {
                    crate::fabric::Peer::None => continue,
                    crate::fabric::Peer::Endpoint(ep) => (ep / gp, true),
                    crate::fabric::Peer::Switch { switch, .. } => (switch, false),
                };
                let l = topo.port_link(s, o, 0);
                let t = m.timings[l as usize];
                let ser = ser_ps(wire, t.rate_bps).max((flits as f64 * cyc).ceil());
                let cap = sim_bytes as f64 / if is_ep { ser.max(ej_ps) } else { ser };
                let key = (if is_ep { 1u8 } else { 2u8 }, s, nb, l);
                let r = *index.entry(key).or_insert_with(|| {
                    m.bundles.push(Bundle { side: 1, owner: s, ports: Vec::new(), link: l });
                    capacity.push(0.0);
                    m.window.push(0.0);
                    (m.bundles.len() - 1) as u32
                });
                let q = (s * sp + o) as usize;
                m.bundles[r as usize].ports.push(q as u32);
                m.down_res[q] = r;
                capacity[r as usize] += cap;
                let (c, rtt) = if is_ep {
                    ((t.credits_per_vc_flits as u64).max(2 * max_f), flits as f64 * cyc + t.latency_ps as f64 + ej_ps + t.credit_return_ps as f64 + cyc)
                } else {
                    let crate::fabric::Peer::Switch { switch: v, .. } = peer else { unreachable!() };
                    (buf[v as usize], ser + t.latency_ps as f64 + (m.pipe[v as usize] as f64 + 1.0) * m.cycle_ps[v as usize] + t.credit_return_ps as f64)
                };
                let w = (c / flits.max(1)) as f64 * sim_bytes as f64 / rtt;
                m.window[r as usize] += w;
                if w < cap && why.is_none() {
                    why = Some(format!(
                        "credit-bound: the credit window of {} port {o} ({c} flits per {:.1} ns round trip) carries {:.1} GB/s, below the link's {:.1} GB/s",
                        spec.element_name(s),
                        rtt / 1e3,
                        w * 1e3,
                        cap * 1e3
                    ));
                }
            }
        }
        m.acc = vec![0.0; capacity.len()];
        Ok((m, capacity, why))
    }

    /// Fixed time of a transfer on an idle path, ps: head flit serialization
    /// and link latency per link, the clock edge and pipeline per element.
    fn latency(&self, topo: &Topology, src: u32, dst: u32) -> u64 {
        let hops = topo.path(src, dst);
        let Some(h0) = hops.first() else { return 0 };
        let t0 = &self.timings[h0.link as usize];
        let mut t = (t0.flit_ps + t0.latency_ps) as f64;
        let n = hops.len();
        for (i, h) in hops.iter().enumerate().skip(1) {
            let s = h.switch.expect("hops after the first are elements") as usize;
            let cyc = self.cycle_ps[s];
            t = ((t / cyc - 1e-9).ceil() + self.pipe[s] as f64) * cyc;
            let lt = &self.timings[h.link as usize];
            t += lt.latency_ps as f64 + if i + 1 < n { lt.flit_ps as f64 } else { 0.0 };
        }
        t.ceil() as u64
    }

    /// Append the path of a transfer to `out`: (lanes, work, cap, packet time, latency).
    /// Entries are in resource order, the source's uplink bundles (its port
    /// set) first; a round-robin or adaptive path does not depend on
    /// `spray_offset` (its drain group, [`GraphModel::last_group`], does).
    ///
    /// # Errors
    /// `Config` if `dst` is unreachable from `src`.
    #[allow(clippy::too_many_arguments)]
    pub fn path(&mut self, topo: &Topology, spray: Spray, src: u32, dst: u32, bytes: u64, x: u32, spray_offset: u32, out: &mut Vec<(u32, f64)>) -> Result<(u32, f64, f64, f64, u64)> {
        let mut elig = std::mem::take(&mut self.scratch);
        topo.eligible_ports(src, dst, &mut elig);
        if elig.is_empty() {
            self.scratch = elig;
            return Err(FlitsimError::config("transfer", format!("{src} -> {dst}"), "a destination reachable from the source"));
        }
        // Rotation-invariant paths: a round-robin (or adaptive) transfer is
        // spread over every eligible port whatever port its rotation starts
        // on, so its path is built from the eligible ports in topology order
        // and its entries kept in resource order (one path per GPU pair, the
        // same bit for bit at any rotation, docs/fidelity.md "Rotation-
        // invariant paths"). Only the hash pick depends on the rotation.
        if spray_offset > 0 && spray == Spray::Hash {
            let k = spray_offset as usize % elig.len();
            elig.rotate_left(k);
        }
        let e = elig.len() as u64;
        let hash_port = if spray == Spray::Hash {
            let mut z = ((src as u64) << 42) ^ ((dst as u64) << 21) ^ x as u64;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            Some(elig[((z ^ (z >> 31)) % e) as usize])
        } else {
            None
        };
        let key = (src, dst, hash_port.map_or(0, |p| p | 1 << 31));
        if !self.cache.contains_key(&key) {
            let used: Vec<u32> = match hash_port {
                Some(p) => vec![p],
                None => elig.clone(),
            };
            let cp = self.build(topo, dst, &used, src);
            if self.cache.len() >= MAX_CACHED {
                self.cache.clear();
            }
            self.cache.insert(key, cp);
        }
        // the drain group: the bundle of the port the spray starts on
        self.last_group = self.up_res[hash_port.unwrap_or(elig[spray_offset as usize % elig.len()]) as usize];
        let cp = &self.cache[&key];
        out.extend_from_slice(&cp.entries);
        let (window_cap, lat) = (cp.window_cap, cp.latency_ps);
        // Packet quantization on the source ports (equal rates, round-robin).
        let s = self.sim_bytes;
        let n = bytes.div_ceil(s);
        let rem = bytes % s;
        let used_n = if hash_port.is_some() { 1 } else { e };
        let equal = hash_port.is_some() || elig.iter().all(|&p| self.up_port[p as usize] == self.up_port[elig[0] as usize]);
        let (lanes, lane_bytes) = if used_n == 1 {
            (1, bytes)
        } else {
            let per = n.div_ceil(used_n);
            let short = rem > 0 && (n - 1) % used_n == 0;
            (n.min(used_n), per * s - if short { s - rem } else { 0 })
        };
        let ports: &[u32] = match hash_port {
            Some(_) => std::slice::from_ref(hash_port.as_ref().expect("hash port")),
            None => &elig,
        };
        let port_cap = ports.iter().map(|&p| self.up_port[p as usize]).fold(f64::INFINITY, f64::min);
        let sum_cap: f64 = ports.iter().map(|&p| self.up_port[p as usize]).sum();
        let quant = if equal { (bytes as f64 / lane_bytes.max(1) as f64).min(used_n as f64) * port_cap } else { sum_cap };
        let cap = quant.min(window_cap);
        self.scratch = elig;
        Ok((lanes as u32, bytes as f64, cap, s.min(lane_bytes.max(1)) as f64 / port_cap, lat))
    }

    fn add(&mut self, r: u32, c: f64) {
        if self.acc[r as usize] == 0.0 {
            self.touched.push(r);
        }
        self.acc[r as usize] += c;
    }

    fn build(&mut self, topo: &Topology, dst: u32, used: &[u32], src: u32) -> CachedPath {
        self.touched.clear();
        self.layer.clear();
        let total: f64 = used.iter().map(|&p| self.up_port[p as usize]).sum();
        let equal = used.iter().all(|&p| self.up_port[p as usize] == self.up_port[used[0] as usize]);
        for &p in used {
            let c = if equal { 1.0 / used.len() as f64 } else { self.up_port[p as usize] / total };
            self.add(self.up_res[p as usize], c);
            let (s, _, _) = topo.gpu_port_to[p as usize].expect("eligible ports are wired");
            self.push_sw(s, c);
        }
        self.flush_layer();
        let sp = topo.switch_ports;
        // Distances fall by one per hop: process the DAG layer by layer.
        while !self.layer.is_empty() {
            let layer = std::mem::take(&mut self.layer);
            for &(s, c) in &layer {
                let r = topo.routes(s, dst);
                let k = r.len() as f64;
                for &o in r {
                    let q = (s * sp + o) as usize;
                    self.add(self.down_res[q], c / k);
                    if let crate::fabric::Peer::Switch { switch, .. } = topo.peer(s, o) {
                        self.push_sw(switch, c / k);
                    }
                }
            }
            self.layer = layer;
            self.layer.clear();
            self.flush_layer();
        }
        let mut entries = Vec::with_capacity(self.touched.len());
        let mut window_cap = f64::INFINITY;
        for &r in &self.touched {
            let c = self.acc[r as usize];
            self.acc[r as usize] = 0.0;
            entries.push((r, c));
            window_cap = window_cap.min(self.window[r as usize] / c);
        }
        // canonical order: by resource (endpoint uplinks first, their indices
        // are below every switch output's), independent of the port order
        entries.sort_unstable_by_key(|e| e.0);
        let latency_ps = self.latency(topo, src, dst);
        CachedPath { entries, window_cap, latency_ps }
    }

    fn push_sw(&mut self, s: u32, c: f64) {
        if self.sw_acc[s as usize] == 0.0 {
            self.sw_touched.push(s);
        }
        self.sw_acc[s as usize] += c;
    }

    /// Move the accumulated next layer (`sw_touched`) into `layer`.
    fn flush_layer(&mut self) {
        for &s in &self.sw_touched {
            self.layer.push((s, self.sw_acc[s as usize]));
            self.sw_acc[s as usize] = 0.0;
        }
        self.sw_touched.clear();
    }

    /// Time `flits` base flits keep link `l` busy, ps (its re-framed rate).
    pub fn busy_ps_of(&self, l: u32, flits: u64) -> u64 {
        let t = &self.timings[l as usize];
        (flits as f64 * self.base.flit_bytes as f64 * 8e12 / t.rate_bps as f64).round() as u64
    }

    /// Whether the GPUs have an outstanding-packet limit (not modelled on graphs).
    pub fn max_outstanding_limited(&self, spec: &FabricSpec) -> bool {
        spec.gpu.max_outstanding_packets > 0
    }

    /// Ports a resource stands for: (side, ports).
    pub fn ports_of(&self, r: usize) -> (u8, &[u32]) {
        let b = &self.bundles[r];
        (b.side, &b.ports)
    }
}
