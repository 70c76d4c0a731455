//! The fabric seen by the flow model: which resources (GPU port links, switch
//! output links) a transfer loads and by how much, their payload capacities,
//! per-lane credit caps and the fixed per-transfer latency, all derived from
//! the same [`FabricSpec`] the packet level runs.
//!
//! Capacities are payload rates: a full simulated packet of `s` payload bytes
//! occupies a GPU port for max(serialization of its flits, header flits
//! included; its injection pacing) and a switch output for max(its flits x the
//! switch cycle; the receiver's drain time), exactly as the packet level paces
//! them. Round-robin spraying puts 1/k of a transfer on each of the k ports it
//! uses, and a switch spreads its share evenly over its ports to the
//! destination, so a transfer is one flow with fixed coefficients.
//!
//! When every GPU is wired to every switch with the same number of links (and
//! one link spec), every port of a GPU carries the same load under round-robin
//! or adaptive spraying; the model then keeps one uplink and one downlink
//! resource per GPU (capacity = ports x one port): same rates, far fewer terms.

use super::graph::GraphModel;
use crate::error::{FlitsimError, Result};
use crate::fabric::{FabricSpec, Spray, Topology};

/// A resource of the flow model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    /// GPU port link, GPU -> switch (index gpu * gpu_ports + port).
    Up(u32),
    /// Switch output link, switch -> GPU (index switch * switch_ports + port).
    Down(u32),
    /// All ports of a GPU, GPU -> switches (collapsed model).
    UpGpu(u32),
    /// All links into a GPU, switches -> GPU (collapsed model).
    DownGpu(u32),
    /// A bundle of parallel directed links of a graph fabric
    /// ([`GraphModel::bundles`]): endpoint ports to one element, or an
    /// element's ports to one neighbour.
    Bundle(u32),
}

/// The flow model's static view of a fabric.
#[derive(Debug, Clone)]
pub struct FlowFabric {
    pub(crate) topo: Topology,
    spray: Spray,
    pub collapsed: bool,
    /// Capacity per resource, payload bytes per ps.
    pub capacity: Vec<f64>,
    pub kinds: Vec<Resource>,
    /// Payload capacity of one GPU port (uplink) / switch port (downlink), bytes per ps.
    up_port: Vec<f64>,
    /// Largest rate one lane may carry: its VC's credit window over the round
    /// trip, payload bytes per ps.
    pub lane_cap: f64,
    /// Fixed part of a transfer's time on an idle path, ps: head flit
    /// serialization + link latencies + switch pipeline (see [`FlowFabric::new`]).
    pub latency_ps: u64,
    /// Payload per protocol packet, simulated packet bytes, adaptive
    /// coalescing target and cap (as the packet level uses them).
    pub payload: u64,
    sim_bytes: u64,
    per_lane: u64,
    largest: u64,
    /// Flits per protocol packet of `payload` bytes; flit bytes; link payload rate, bytes/ps.
    pub flits_per_packet: u64,
    pub flit_bytes: u64,
    pub link_bytes_per_ps: f64,
    /// Why the packet level should decide this fabric (credit- or
    /// arbitration-bound), if it should; None = flow level validated.
    pub packet_bound: Option<String>,
    scratch: Vec<u32>,
    /// Eligible ports per (src, dst) of a one-layer fabric, filled on first
    /// use: `elig_at[src * endpoints + dst]` = start in `elig_buf` (u32::MAX
    /// = not yet), the count in `elig_len` (the same ports
    /// `Topology::eligible_ports` returns, in its order).
    elig_at: Vec<u32>,
    elig_len: Vec<u8>,
    elig_buf: Vec<u32>,
    /// The smallest `up_port` over each entry's eligible ports (`elig_min[i]`
    /// for `elig_at[i]`): the port cap of a transfer that uses them all.
    elig_min: Vec<f64>,
    /// Collapsed fabric: the switch ports that feed each GPU, ascending
    /// (`down_buf[down_at[g]..down_at[g + 1]]`, what [`FlowFabric::ports_of`]
    /// returns for `DownGpu(g)`); empty otherwise.
    down_at: Vec<u32>,
    down_buf: Vec<u32>,
    /// The multi-hop model of a graph fabric (trunks, hosts, element kinds);
    /// None for a one-layer fabric.
    pub graph: Option<Box<GraphModel>>,
    /// Rank fold (`collective::flow_run`, collapsed fabrics only): a
    /// transfer loads its source's downlink resource in place of its
    /// destination's: one rank of a rotation-symmetric pattern simulated
    /// alone, its incoming traffic being the rotation of its outgoing.
    pub(crate) fold_down: bool,
}

fn ser_ps(bits: f64, rate_bps: u64) -> f64 {
    (bits * 1e12 / rate_bps as f64).ceil()
}

impl FlowFabric {
    /// Derive from a spec (validated here).
    ///
    /// Latency of a transfer on an idle path: its first packet's head flit
    /// serializes (one flit time) and crosses the GPU link (latency), is
    /// registered at the next switch clock edge, waits
    /// `pipeline_latency_cycles`, and the tail reaches the GPU one downlink
    /// latency after leaving the switch; the bytes themselves are the fluid
    /// part (work / rate). For one 256 B packet this is exactly the packet
    /// level's time (tests/fabric.rs `single_packet_latency_is_sum_of_parts`).
    ///
    /// # Errors
    /// `Config` for an invalid spec.
    pub fn new(spec: &FabricSpec) -> Result<Self> {
        spec.validate()?;
        let topo = Topology::new(spec);
        let payload = spec.gpu.payload_bytes as u64;
        let sim_bytes = if spec.sim_packet_bytes == 0 { payload } else { spec.sim_packet_bytes };
        let largest = if spec.sim_packets_per_lane > 0 { spec.max_sim_packet_bytes.max(sim_bytes) } else { sim_bytes };
        if spec.is_graph() {
            return Self::new_graph(spec, topo, payload, sim_bytes, largest);
        }
        let fmt = spec.links[0].packet;
        let fpp = fmt.flits_per_packet(payload);
        let flit_bytes = fmt.flit_bytes as u64;
        let (_, t0) = spec.links[0].derive()?;
        let rate = t0.rate_bps;
        let clock_ghz = if spec.switch.clock_ghz > 0.0 { spec.switch.clock_ghz } else { rate as f64 / (flit_bytes as f64 * 8.0) / 1e9 };
        let cycle_ps = 1000.0 / clock_ghz;
        // Packets of `sim_bytes` (whole protocol packets) and their flits.
        let s = sim_bytes;
        let f_s = (s / payload) * fpp + if s % payload > 0 { fmt.flits_per_packet(s % payload) } else { 0 };
        let max_f = (largest / payload) * fpp;
        let div = spec.gpu_ports.max(1) as f64;
        let g = &spec.gpu;
        // each protocol packet charged its payload + overhead, as the packet engine does
        let inj_cost = |ovh: u32| (s + ovh as u64 * s.div_ceil(payload)) as f64;
        let inj_ps = if g.injection_bytes_per_s == 0 { 0.0 } else { (inj_cost(g.injection_packet_overhead_bytes) * 1e12 * div / g.injection_bytes_per_s as f64).ceil() };
        let ej_ps = if g.ejection_bytes_per_s == 0 { 0.0 } else { (s as f64 * 1e12 * div / g.ejection_bytes_per_s as f64).ceil() };
        let np = topo.gpu_port_to.len();
        let mut up_port = vec![0.0; np];
        let mut lat_max = 0u64;
        let mut lane_cap = f64::INFINITY;
        let mut why: Option<String> = None;
        let buf = |c: u32| (if spec.switch.buffer_per_vc_flits > 0 { spec.switch.buffer_per_vc_flits } else { c }).max(2 * max_f as u32) as u64;
        // one derivation per link spec, not per port (1,296 ports on the NVL72)
        let mut timings = vec![None; spec.links.len()];
        for p in 0..np {
            let Some((_, _, li)) = topo.gpu_port_to[p] else { continue };
            let t = match timings[li as usize] {
                Some(t) => t,
                None => *timings[li as usize].insert(spec.links[li as usize].derive()?.1),
            };
            let ser = ser_ps((f_s * flit_bytes * 8) as f64, t.rate_bps);
            // a per-link-kind cap replaces the GPU-wide share (GpuInjection::for_port)
            let inj_ps = if g.link_injection_bytes_per_s.is_empty() {
                inj_ps
            } else {
                let gp = g.for_port((p / spec.gpu_ports as usize) as u32, spec.gpus, li, div);
                if gp.injection_bytes_per_s == 0 { 0.0 } else { (inj_cost(gp.injection_packet_overhead_bytes) * 1e12 * div / gp.injection_bytes_per_s as f64).ceil() }
            };
            up_port[p] = s as f64 / ser.max(inj_ps);
            // Head registered at the switch clock edge after it arrives (as the packet level does).
            let head = (((t.flit_ps + t.latency_ps) as f64 / cycle_ps - 1e-9).ceil() + spec.switch.pipeline_latency_cycles as f64) * cycle_ps;
            // Injection pacing holds back each packet after the first: the
            // fluid charges it for the first one too, so take that back.
            let paced = (inj_ps - ser).max(0.0) as u64;
            lat_max = lat_max.max((head.ceil() as u64 + t.latency_ps).saturating_sub(paced));
            // Credit windows: the switch input buffer (GPU -> switch) and the GPU's
            // receive buffer (switch -> GPU), each over its round trip.
            let pk = |c: u64| (c / f_s) as f64 * s as f64;
            let rtt_up = ser + t.latency_ps as f64 + (spec.switch.pipeline_latency_cycles as f64 + 1.0) * cycle_ps + t.credit_return_ps as f64;
            let rtt_dn = f_s as f64 * cycle_ps + t.latency_ps as f64 + ej_ps + t.credit_return_ps as f64 + cycle_ps;
            let up_c = pk(buf(t.credits_per_vc_flits)) / rtt_up;
            let dn_c = pk((t.credits_per_vc_flits as u64).max(2 * max_f)) / rtt_dn;
            lane_cap = lane_cap.min(up_c).min(dn_c);
            let link = up_port[p];
            if up_c.min(dn_c) < link && why.is_none() {
                let (c, rtt, side) = if up_c <= dn_c { (buf(t.credits_per_vc_flits), rtt_up, "switch input") } else { ((t.credits_per_vc_flits as u64).max(2 * max_f), rtt_dn, "GPU receive") };
                why = Some(format!(
                    "credit-bound: one VC's {side} credit window ({c} flits per {:.1} ns round trip) carries {:.1} GB/s, below the port's {:.1} GB/s",
                    rtt / 1e3,
                    up_c.min(dn_c) * 1e3,
                    link * 1e3
                ));
            }
            if g.max_outstanding_packets > 0 {
                let per_port = ((g.max_outstanding_packets as f64 / div).ceil()).max(1.0);
                let rtt = ser + 2.0 * t.latency_ps as f64 + (f_s as f64 + 1.0) * cycle_ps + ej_ps;
                let cap = per_port * s as f64 / rtt;
                if cap < up_port[p] {
                    why.get_or_insert_with(|| format!("outstanding-bound: {per_port} packets in flight per port over a {:.1} ns round trip carry {:.1} GB/s, below the port's {:.1} GB/s", rtt / 1e3, cap * 1e3, up_port[p] * 1e3));
                    up_port[p] = cap;
                }
            }
        }
        let ns = topo.switch_port_to.len();
        let mut down_port = vec![0.0; ns];
        for q in 0..ns {
            if topo.switch_port_to[q].is_some() {
                down_port[q] = s as f64 / (f_s as f64 * cycle_ps).ceil().max(ej_ps);
            }
        }
        if !spec.faults.is_empty() {
            why = Some(format!("faults: {} dead link(s) or plane(s) are simulated at packet level only (rerouting and end-to-end replay)", spec.faults.len()));
        } else if spec.links.iter().any(|l| l.replay.is_some()) {
            why = Some("link-level replay (bit errors, FEC, go-back-N) is simulated at packet level only".into());
        }
        if spec.switch.queueing == "fifo" {
            why = Some("arbitration-bound: FIFO input queues block at the head of line (58.6 % saturation under uniform traffic, Karol et al. 1987), which fluid sharing does not represent".into());
        }
        if spec.switch.speedup == 1 && spec.switch.clock_ghz > 0.0 && spec.switch.clock_ghz < rate as f64 / (flit_bytes as f64 * 8.0) / 1e9 {
            why.get_or_insert_with(|| "arbitration-bound: the switch clock is slower than one flit per link flit time".into());
        }
        // Collapse when every GPU has every port wired, the same number of links
        // to each switch, one link spec, and spraying spreads over all ports.
        let gp = spec.gpu_ports;
        let mut uniform = spec.spray != Spray::Hash && topo.gpu_port_to.iter().all(|x| x.is_some());
        uniform &= spec.wires.iter().all(|w| w.link == spec.wires[0].link && w.switch_link.is_none_or(|l| l == w.link));
        if uniform {
            for sw in 0..spec.switches {
                let l0 = topo.routes(sw, 0).len();
                if (0..spec.gpus).any(|d| topo.routes(sw, d).len() != l0) {
                    uniform = false;
                    break;
                }
            }
        }
        let (mut down_at, mut down_buf) = (Vec::new(), Vec::new());
        if uniform {
            down_at = vec![0u32; spec.gpus as usize + 1];
            for w in topo.switch_port_to.iter().flatten() {
                down_at[(w / gp) as usize + 1] += 1;
            }
            for g in 0..spec.gpus as usize {
                down_at[g + 1] += down_at[g];
            }
            down_buf = vec![0u32; down_at[spec.gpus as usize] as usize];
            let mut fill = down_at.clone();
            for (q, w) in topo.switch_port_to.iter().enumerate() {
                if let Some(w) = w {
                    let g = (w / gp) as usize;
                    down_buf[fill[g] as usize] = q as u32;
                    fill[g] += 1;
                }
            }
        }
        let (capacity, kinds) = if uniform {
            let mut c = Vec::with_capacity(2 * spec.gpus as usize);
            let mut k = Vec::with_capacity(2 * spec.gpus as usize);
            for gg in 0..spec.gpus {
                let ports = &up_port[(gg * gp) as usize..((gg + 1) * gp) as usize];
                c.push(ports.iter().cloned().fold(f64::INFINITY, f64::min) * gp as f64);
                k.push(Resource::UpGpu(gg));
            }
            let dmin = down_port.iter().zip(&topo.switch_port_to).filter(|(_, w)| w.is_some()).map(|(c, _)| *c).fold(f64::INFINITY, f64::min);
            for gg in 0..spec.gpus {
                c.push(dmin * gp as f64);
                k.push(Resource::DownGpu(gg));
            }
            (c, k)
        } else {
            let mut c = up_port.clone();
            let mut k: Vec<Resource> = (0..np as u32).map(Resource::Up).collect();
            c.extend_from_slice(&down_port);
            k.extend((0..ns as u32).map(Resource::Down));
            (c, k)
        };
        Ok(FlowFabric {
            topo,
            spray: spec.spray,
            collapsed: uniform,
            capacity,
            kinds,
            up_port,
            lane_cap,
            latency_ps: lat_max,
            payload,
            sim_bytes,
            per_lane: spec.sim_packets_per_lane as u64,
            largest,
            flits_per_packet: fpp,
            flit_bytes,
            link_bytes_per_ps: rate as f64 / 8e12,
            packet_bound: why,
            scratch: Vec::new(),
            elig_at: Vec::new(),
            elig_len: Vec::new(),
            elig_buf: Vec::new(),
            elig_min: Vec::new(),
            down_at,
            down_buf,
            graph: None,
            fold_down: false,
        })
    }

    /// The graph-fabric variant of [`FlowFabric::new`] ([`GraphModel`]).
    fn new_graph(spec: &FabricSpec, topo: Topology, payload: u64, sim_bytes: u64, largest: u64) -> Result<Self> {
        let (g, capacity, mut why) = GraphModel::new(spec, &topo, sim_bytes, largest)?;
        if !spec.faults.is_empty() {
            why = Some(format!("faults: {} dead component(s) are simulated at packet level only (rerouting and end-to-end replay)", spec.faults.len()));
        } else if spec.links.iter().any(|l| l.replay.is_some()) {
            why = Some("link-level replay (bit errors, FEC, go-back-N) is simulated at packet level only".into());
        }
        let fifo = spec.switch.queueing == "fifo" || (0..spec.switches).any(|s| spec.params_of(s).queueing == "fifo");
        if fifo {
            why = Some("arbitration-bound: FIFO input queues block at the head of line (58.6 % saturation under uniform traffic, Karol et al. 1987), which fluid sharing does not represent".into());
        }
        if g.max_outstanding_limited(spec) {
            why.get_or_insert_with(|| "outstanding-bound: a per-GPU outstanding-packet limit on a multi-hop fabric is simulated at packet level only".into());
        }
        let kinds = (0..capacity.len() as u32).map(Resource::Bundle).collect();
        let fmt = spec.links[0].packet;
        let (_, t0) = spec.links[0].derive()?;
        Ok(FlowFabric {
            topo,
            spray: spec.spray,
            collapsed: false,
            capacity,
            kinds,
            up_port: g.up_port.clone(),
            lane_cap: f64::INFINITY,
            latency_ps: 0,
            payload,
            sim_bytes,
            per_lane: spec.sim_packets_per_lane as u64,
            largest,
            flits_per_packet: fmt.flits_per_packet(payload),
            flit_bytes: fmt.flit_bytes as u64,
            link_bytes_per_ps: t0.rate_bps as f64 / 8e12,
            packet_bound: why,
            scratch: Vec::new(),
            elig_at: Vec::new(),
            elig_len: Vec::new(),
            elig_buf: Vec::new(),
            elig_min: Vec::new(),
            down_at: Vec::new(),
            down_buf: Vec::new(),
            graph: Some(Box::new(g)),
            fold_down: false,
        })
    }

    /// GPUs of the fabric.
    pub fn gpus(&self) -> u32 {
        self.topo.gpus
    }

    /// Endpoints (GPUs, then host-memory endpoints) of the fabric.
    pub fn endpoints(&self) -> u32 {
        self.topo.endpoints
    }

    /// Append the path of a transfer (resource, coefficient) to `out`; returns
    /// (lanes, work bytes, cap, packet time, latency): the work is the transfer's bytes, `cap` its
    /// largest rate, payload bytes/ps: (bytes / busiest lane's bytes) x one
    /// lane's rate (packet quantization: alone, it ends when its fullest lane
    /// does); the packet time is one simulated packet on one lane, ps; the
    /// latency is the fixed time on the idle path, ps (one value per
    /// one-layer fabric; per source and destination on a graph).
    ///
    /// # Errors
    /// `Config` if no port of `src` reaches `dst`.
    pub fn path(&mut self, src: u32, dst: u32, bytes: u64, x: u32, spray_offset: u32, out: &mut Vec<(u32, f64)>) -> Result<(u32, f64, f64, f64, u64)> {
        if let Some(g) = self.graph.as_mut() {
            return g.path(&self.topo, self.spray, src, dst, bytes, x, spray_offset, out);
        }
        // The eligible ports, rotated left by the spray offset: port j of the
        // rotation is elig[(rot + j) % e] (read in place, no copy).
        let (in_scratch, at, e, all_min) = self.eligible(src, dst);
        if e == 0 {
            return Err(FlitsimError::config("transfer", format!("{src} -> {dst}"), "a destination reachable through a switch from the source"));
        }
        let elig: &[u32] = if in_scratch { &self.scratch[..e] } else { &self.elig_buf[at..at + e] };
        let rot = if spray_offset > 0 { spray_offset as usize % e } else { 0 };
        let e = e as u64;
        let lanes_all = if self.spray == Spray::Hash { 1 } else { e };
        let s = if self.per_lane > 0 {
            let k = self.per_lane.max(bytes.div_ceil(lanes_all * self.largest));
            (bytes.div_ceil(lanes_all * k).div_ceil(self.payload) * self.payload).clamp(self.sim_bytes, self.largest)
        } else {
            self.sim_bytes
        };
        let n = bytes.div_ceil(s);
        let rem = bytes % s;
        let (lanes, lane_bytes) = if lanes_all == 1 {
            (1, bytes)
        } else {
            let per = n.div_ceil(e);
            // Lane 0 carries ceil(n/e) packets; the short last packet sits on lane (n-1) % e.
            let short = rem > 0 && (n - 1) % e == 0;
            (n.min(e), per * s - if short { s - rem } else { 0 })
        };
        // The ports used: the first `lanes` of the rotation, or the one the hash picks.
        let (first, used) = if self.spray == Spray::Hash {
            let mut z = ((src as u64) << 42) ^ ((dst as u64) << 21) ^ x as u64;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            (rot + ((z ^ (z >> 31)) % e) as usize, 1)
        } else {
            (rot, lanes as usize)
        };
        let e = e as usize;
        let port = |j: usize| elig[(first + j) % e];
        let k = used as f64;
        if self.collapsed {
            out.push((src, 1.0));
            out.push((self.topo.gpus + if self.fold_down { src } else { dst }, 1.0));
        } else {
            let np = self.up_port.len() as u32;
            let sp = self.topo.switch_ports;
            for j in 0..used {
                let p = port(j);
                out.push((p, 1.0 / k));
                let (sw, _, _) = self.topo.gpu_port_to[p as usize].expect("eligible ports are wired");
                let r = self.topo.routes(sw, dst);
                for &o in r {
                    out.push((np + sw * sp + o, 1.0 / (k * r.len() as f64)));
                }
            }
        }
        // (min is exact in any order: all ports used = the entry's minimum)
        let port_cap = if used == e { all_min } else { (0..used).map(|j| self.up_port[port(j) as usize]).fold(f64::INFINITY, f64::min) };
        // Effective lanes: bytes / busiest lane's bytes (<= k), so an idle path
        // takes exactly the busiest lane's time, while under sharing the flow
        // asks only for its true bytes (the ports its short lanes leave idle
        // serve other transfers, as spray rotation makes them at packet level).
        let eff = (bytes as f64 / lane_bytes.max(1) as f64).min(k);
        let cap = eff * self.lane_cap.min(port_cap);
        Ok((lanes as u32, bytes as f64, cap, s.min(lane_bytes.max(1)) as f64 / port_cap, self.latency_ps))
    }

    /// `Topology::eligible_ports(src, dst)`, computed once per pair (once per
    /// source on a collapsed fabric): (in `scratch`?, start in `elig_buf`,
    /// count, smallest `up_port` over them); the ports are `scratch[..count]`
    /// or `elig_buf[start..start + count]`.
    fn eligible(&mut self, src: u32, dst: u32) -> (bool, usize, usize, f64) {
        let n = self.topo.endpoints as usize;
        let min_of = |up: &[f64], ports: &[u32]| ports.iter().map(|&p| up[p as usize]).fold(f64::INFINITY, f64::min);
        if n > 1024 || self.topo.gpu_ports > u8::MAX as u32 {
            // (the table would pass 5 MB; compute per call)
            self.topo.eligible_ports(src, dst, &mut self.scratch);
            return (true, 0, self.scratch.len(), min_of(&self.up_port, &self.scratch));
        }
        if self.elig_at.len() != n * n {
            self.elig_at = vec![u32::MAX; n * n];
            self.elig_len = vec![0; n * n];
            self.elig_min = vec![f64::INFINITY; n * n];
        }
        // Collapsed (every switch reaches every GPU through the same number of
        // ports): a port is eligible iff its switch reaches any GPU, so the
        // list depends on the source only.
        let by_src = self.collapsed && self.topo.endpoints == self.topo.gpus;
        let i = src as usize * n + if by_src { 0 } else { dst as usize };
        if self.elig_at[i] == u32::MAX {
            self.topo.eligible_ports(src, dst, &mut self.scratch);
            self.elig_at[i] = self.elig_buf.len() as u32;
            self.elig_len[i] = self.scratch.len() as u8;
            self.elig_min[i] = min_of(&self.up_port, &self.scratch);
            self.elig_buf.extend_from_slice(&self.scratch);
        }
        (false, self.elig_at[i] as usize, self.elig_len[i] as usize, self.elig_min[i])
    }

    /// Does the flow model treat every GPU alike (so a pattern invariant
    /// under g -> g + 1 has rates and statistics invariant too)? A collapsed
    /// fabric (every transfer loads exactly its source's uplink and its
    /// destination's downlink resource, coefficient 1) of GPUs only whose
    /// uplink resources have one capacity, downlink resources one capacity,
    /// every port one rate, every GPU the same number of eligible ports and of
    /// switch ports feeding it. (Latency and lane cap are one value per fabric.)
    pub(crate) fn gpus_alike(&mut self) -> bool {
        let g = self.topo.gpus;
        if !self.collapsed || self.graph.is_some() || self.topo.endpoints != g || g == 0 {
            return false;
        }
        let same = |v: &[f64]| v.iter().all(|x| x.to_bits() == v[0].to_bits());
        let (up, down) = self.capacity.split_at(g as usize);
        if !same(up) || !same(down) || !same(&self.up_port) {
            return false;
        }
        let e0 = self.eligible(0, 1 % g).2;
        let d0 = self.down_at.get(1).copied().unwrap_or(0);
        (1..g).all(|s| self.eligible(s, (s + 1) % g).2 == e0 && self.down_at[s as usize + 1] - self.down_at[s as usize] == d0)
    }

    /// Ports a resource stands for: (kind, ports) with kind 0 = GPU ports, 1 = switch ports.
    pub(crate) fn ports_of(&self, r: usize, out: &mut Vec<u32>) -> u8 {
        out.clear();
        match self.kinds[r] {
            Resource::Bundle(b) => {
                let (side, ports) = self.graph.as_ref().expect("bundles only in graph fabrics").ports_of(b as usize);
                out.extend_from_slice(ports);
                side
            }
            Resource::Up(p) => {
                out.push(p);
                0
            }
            Resource::Down(q) => {
                out.push(q);
                1
            }
            Resource::UpGpu(g) => {
                let gp = self.topo.gpu_ports;
                out.extend(g * gp..(g + 1) * gp);
                0
            }
            Resource::DownGpu(g) => {
                // (DownGpu only exists on a collapsed fabric, which built the table)
                out.extend_from_slice(&self.down_buf[self.down_at[g as usize] as usize..self.down_at[g as usize + 1] as usize]);
                1
            }
        }
    }

    /// Is resource `r` a switch output (downlink) resource?
    pub fn is_down(&self, r: usize) -> bool {
        match self.kinds[r] {
            Resource::Bundle(b) => self.graph.as_ref().is_some_and(|g| g.bundles[b as usize].side == 1),
            k => matches!(k, Resource::Down(_) | Resource::DownGpu(_)),
        }
    }
}
