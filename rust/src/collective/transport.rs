//! Transports: how one GPU -> GPU transfer of a DAG moves through the fabric.
//!
//! - **P2P**: GPU to GPU over the fabric's route (NVLink, or PCIe through
//!   switches where the path allows it: NCCL's default `NCCL_P2P_LEVEL` is
//!   PXB, no P2P across a CPU root complex; src/graph/paths.cc).
//! - **Host-staged** (NCCL's SHM transport, P2P disabled or across sockets):
//!   GPU -> host memory -> GPU, two transfers through a host endpoint. The
//!   buffer sits on the receiver's side (NCCL `SHM_LOCALITY` default: receiver),
//!   so the staging host is the one nearest the destination GPU. The hops
//!   pipeline in chunks of `host_chunk_bytes` (default 512 KiB = NCCL_BUFFSIZE
//!   4 MiB / NCCL_STEPS 8, the Simple protocol's slot) through `host_slots`
//!   slots (default NCCL_STEPS = 8); `host_chunk_bytes = 0` moves the whole
//!   transfer in one chunk: two serialized hops.
//! - **RDMA** (GPUDirect RDMA through a NIC): the route across the NIC and the
//!   network; the NIC reads and writes GPU memory directly. Where the GPU and
//!   its NIC are not allowed P2P (a root complex between them; NCCL's
//!   `NCCL_NET_GDR_LEVEL` default PXB), the data is staged through host memory
//!   on each side. PXN (NCCL 2.12+, `NCCL_PXN_DISABLE=0`): when the receiver's
//!   rail (its NIC's network switch) differs from the sender's, the data goes
//!   first over NVLink to the sender-node GPU on the receiver's rail, whose NIC
//!   sends it: the rail-optimized network is never crossed between rails.
//!
//! Per-transfer overheads: the extra per-step latency of the path's hardware
//! class over NVLink, from NCCL src/graph/tuning.cc hwLat (ring row; PCI and
//! SHM paths are NCCL_HW_PCI, network paths NCCL_HW_NET): Simple PCI 5.7 -
//! NVLink 3.4 = 2.3 us, NET 14.0 - 3.4 = 10.6 us; LL 1.0 - 0.6 = 0.4 and
//! 2.7 - 0.6 = 2.1 us; LL128 2.5 - 1.9 = 0.6 and 4.0 - 1.9 = 2.1 us. NVLink
//! P2P adds nothing (its latency is already in the collective's step
//! latency), so NVLink-only fabrics run exactly as before. Applying the same
//! numbers to a plain (task-graph) transfer is an assumption.
//!
//! A transfer is expanded into a small sub-DAG (an entry delay, legs of
//! chunks, an exit) by [`expand`]; a DAG with nothing to expand is returned
//! unchanged. At flow level a plain transfer of 8 staging buffers or more
//! may run as a chunk train instead ([`expand_train`]: each leg's middle
//! chunks in pieces of one buffer; exact at constant leg rates, opt-in since
//! not bounded otherwise).

use super::lower::{Dag, NodeKind};
use super::params::{Protocol, Transport, TransportParams};
use crate::error::{FlitsimError, Result};
use crate::fabric::{FabricSpec, Peer, Topology};

/// Hardware class of a GPU pair's route (NCCL's NCCL_HW_NVLINK / PCI / NET).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathClass {
    /// NVLink only (through NVSwitches or a bridge).
    NvLink,
    /// Through PCIe (switches, root complexes, socket links).
    Pcie,
    /// Through a NIC and the network.
    Network,
}

const NONE: u32 = u32::MAX;

/// What the transports need to know about a fabric's routes: per GPU its
/// domain (GPUs reachable without crossing a NIC or network switch), the host
/// endpoint nearest it and its rail (the network element its NIC attaches
/// to); per GPU pair the path class and the element, if any, that forbids P2P.
#[derive(Debug, Clone)]
pub struct Reach {
    pub gpus: u32,
    /// GPUs + host endpoints (DAG endpoint ids are below this).
    pub endpoints: u32,
    /// Per GPU: domain index (0..domains).
    pub domain: Vec<u32>,
    pub domains: u32,
    /// Per GPU: nearest host endpoint id (NONE: no host memory on the fabric).
    pub host_near: Vec<u32>,
    /// Per GPU: rail id (NONE: no NIC).
    pub rail: Vec<u32>,
    /// Per GPU: payload rate of its NIC, bytes/s (0 = none).
    pub net_bytes_per_s: Vec<f64>,
    /// Per GPU: the domain's GPUs may P2P with it over NVLink (PXN proxies need it).
    nvlink_domain: bool,
    /// Pair classes, row-major gpus x gpus; empty = every pair NvLink, P2P allowed.
    class: Vec<u8>,
    /// Pair -> index+1 into `blockers` (0 = P2P allowed); empty = all allowed.
    blocker: Vec<u32>,
    pub blockers: Vec<String>,
}

impl Reach {
    /// A single NVLink domain (every one-tier NVSwitch fabric): every pair
    /// P2P over NVLink, no hosts, no NICs.
    pub fn nvlink_domain(gpus: u32) -> Self {
        let g = gpus as usize;
        Reach { gpus, endpoints: gpus, domain: vec![0; g], domains: 1, host_near: vec![NONE; g], rail: vec![NONE; g], net_bytes_per_s: vec![0.0; g], nvlink_domain: true, class: Vec::new(), blocker: Vec::new(), blockers: Vec::new() }
    }

    /// From explicit tables (tests, and the graph fabric's topology).
    /// `class[a * gpus + b]`, `blocker[a * gpus + b]` (None = P2P allowed).
    ///
    /// # Errors
    /// `Config` when a table has the wrong length or names an endpoint that does not exist.
    #[allow(clippy::too_many_arguments)]
    pub fn from_tables(gpus: u32, endpoints: u32, domain: Vec<u32>, host_near: Vec<u32>, rail: Vec<u32>, class: Vec<PathClass>, blocker: Vec<Option<String>>, nvlink_within_domains: bool) -> Result<Self> {
        let g = gpus as usize;
        let bad = |what: &str| FlitsimError::config("fabric", what.to_string(), "per-GPU and per-pair route tables of the fabric's size (internal)");
        if domain.len() != g || host_near.len() != g || rail.len() != g || class.len() != g * g || blocker.len() != g * g {
            return Err(bad("route table sizes"));
        }
        if host_near.iter().any(|&h| h != NONE && (h < gpus || h >= endpoints)) {
            return Err(bad("host endpoint id"));
        }
        let domains = domain.iter().copied().max().map_or(0, |m| m + 1);
        let mut blockers: Vec<String> = Vec::new();
        let mut bidx = Vec::with_capacity(g * g);
        for b in blocker {
            match b {
                None => bidx.push(0),
                Some(name) => {
                    let i = match blockers.iter().position(|x| *x == name) {
                        Some(i) => i,
                        None => {
                            blockers.push(name);
                            blockers.len() - 1
                        }
                    };
                    bidx.push(i as u32 + 1);
                }
            }
        }
        let code = |c: PathClass| match c {
            PathClass::NvLink => 0u8,
            PathClass::Pcie => 1,
            PathClass::Network => 2,
        };
        Ok(Reach { gpus, endpoints, domain, domains, host_near, rail, net_bytes_per_s: vec![0.0; g], nvlink_domain: nvlink_within_domains, class: class.into_iter().map(code).collect(), blocker: bidx, blockers })
    }

    /// From a fabric spec: a one-tier fabric (or a graph of NVSwitches and
    /// bridges only, all allowing P2P) is one NVLink domain; otherwise every
    /// GPU pair's class comes from the elements on its routes (NIC, Ethernet,
    /// InfiniBand: network; PCIe switch, root complex: PCIe), P2P blockers from
    /// the spec (`allow_p2p = false` on a route), domains from the pairs that
    /// do not cross a network, each GPU's host the host endpoint fewest hops
    /// away inside its domain, its rail the network switch its nearest NIC
    /// attaches to and its NIC rate that NIC's network-side link payload rate.
    ///
    /// # Errors
    /// `Config` for a link spec that does not derive.
    pub fn of_spec(spec: &FabricSpec) -> Result<Self> {
        use crate::fabric::ElementKind as K;
        let kinds_nvlink = spec.switch_kinds.iter().all(|k| matches!(k.kind, K::Nvswitch | K::Bridge) && k.allow_p2p);
        if !spec.is_graph() || (spec.hosts == 0 && kinds_nvlink) {
            return Ok(Reach::nvlink_domain(spec.gpus));
        }
        let topo = Topology::new(spec);
        let (g, e) = (spec.gpus, spec.endpoints());
        let kind = |s: u32| spec.kind_of(s).map(|k| k.kind);
        let is_net = |s: u32| matches!(kind(s), Some(K::Nic | K::Ethernet | K::Infiniband));
        let is_pcie = |s: u32| matches!(kind(s), Some(K::PcieSwitch | K::RootComplex));
        let name = |s: u32| match spec.kind_of(s) {
            Some(k) => format!("switch {s} ({} \"{}\")", k.kind.name(), k.name),
            None => format!("switch {s}"),
        };
        let mut class = Vec::with_capacity((g * g) as usize);
        let mut blocker = Vec::with_capacity((g * g) as usize);
        for a in 0..g {
            for b in 0..g {
                let sw = if a == b { Vec::new() } else { topo.route_switches(a, b) };
                class.push(if sw.iter().any(|&s| is_net(s)) {
                    PathClass::Network
                } else if sw.iter().any(|&s| is_pcie(s)) {
                    PathClass::Pcie
                } else {
                    PathClass::NvLink
                });
                blocker.push(spec.p2p_blocker(&topo, a, b).map(name));
            }
        }
        // domains: connected components of the non-network pairs
        let mut domain = vec![u32::MAX; g as usize];
        let mut next = 0;
        for a in 0..g {
            if domain[a as usize] != u32::MAX {
                continue;
            }
            for b in 0..g {
                if b == a || class[(a * g + b) as usize] != PathClass::Network {
                    domain[b as usize] = next;
                }
            }
            next += 1;
        }
        // nearest host inside the GPU's domain (fewest hops), lowest id on ties
        let mut host_near = vec![NONE; g as usize];
        for a in 0..g {
            let mut best = (usize::MAX, NONE);
            for h in g..e {
                let path = topo.path(a, h);
                let sw = topo.route_switches(a, h);
                if path.is_empty() || sw.iter().any(|&s| is_net(s)) {
                    continue;
                }
                if path.len() < best.0 {
                    best = (path.len(), h);
                }
            }
            host_near[a as usize] = best.1;
        }
        // rail: the network element the GPU's nearest NIC attaches to
        let mut rail = vec![NONE; g as usize];
        let mut rate = vec![0.0f64; g as usize];
        // each GPU's NIC: the nearest; GPUs sharing the same nearest set (two
        // GPUs and two NICs under one PCIe switch, as in DGX H100) take them
        // in id order, one each (NCCL gives every GPU its own NIC there)
        let nics: Vec<u32> = (0..spec.switches).filter(|&s| kind(s) == Some(K::Nic)).collect();
        let mut sets: Vec<Vec<u32>> = Vec::with_capacity(g as usize);
        for a in 0..g {
            let best = nics.iter().filter_map(|&s| topo.distance(s, a)).min();
            sets.push(match best {
                Some(b) => nics.iter().copied().filter(|&s| topo.distance(s, a) == Some(b)).collect(),
                None => Vec::new(),
            });
        }
        for a in 0..g {
            let set = &sets[a as usize];
            if set.is_empty() {
                continue;
            }
            let rank = (0..a).filter(|&b| sets[b as usize] == *set).count();
            let nic = set[rank % set.len()];
            for o in 0..spec.switch_ports {
                if let Peer::Switch { switch, .. } = topo.peer(nic, o) {
                    if matches!(kind(switch), Some(K::Ethernet | K::Infiniband | K::Nic)) {
                        rail[a as usize] = switch;
                        let (_, t) = spec.links[topo.port_link(nic, o, 0) as usize].derive()?;
                        rate[a as usize] = t.rate_bps as f64 / 8.0;
                        break;
                    }
                }
            }
        }
        let nvlink_within = true;
        Ok(Reach::from_tables(g, e, domain, host_near, rail, class, blocker, nvlink_within)?.with_net_rates(rate))
    }

    /// With per-GPU NIC payload rates, bytes/s.
    pub fn with_net_rates(mut self, rates: Vec<f64>) -> Self {
        if rates.len() == self.gpus as usize {
            self.net_bytes_per_s = rates;
        }
        self
    }

    /// The route class of GPU pair (a, b).
    pub fn class(&self, a: u32, b: u32) -> PathClass {
        if self.class.is_empty() || a >= self.gpus || b >= self.gpus {
            return PathClass::NvLink;
        }
        match self.class[(a * self.gpus + b) as usize] {
            0 => PathClass::NvLink,
            1 => PathClass::Pcie,
            _ => PathClass::Network,
        }
    }

    /// The element that forbids GPU -> GPU P2P between a and b, if any.
    pub fn p2p_blocker(&self, a: u32, b: u32) -> Option<&str> {
        if self.blocker.is_empty() || a >= self.gpus || b >= self.gpus {
            return None;
        }
        match self.blocker[(a * self.gpus + b) as usize] {
            0 => None,
            i => Some(&self.blockers[i as usize - 1]),
        }
    }

    /// Whether every GPU pair is one NVLink P2P hop class (nothing to expand).
    pub fn all_nvlink(&self) -> bool {
        self.class.is_empty() || self.class.iter().all(|&c| c == 0) && self.blocker.iter().all(|&b| b == 0)
    }

    /// Whether NCCL enables LL128 by default for a collective over `members`
    /// (NCCL src/graph/tuning.cc, `protoEnable` 2 = "LL128 only where it is
    /// safe"): the intra-node path type of its graphs must be NVLink (at most
    /// PATH_NVB, NVLink through a bridge or peer GPU) and, across nodes, the GPU
    /// must reach its NIC without crossing the CPU (PATH_PXB). Here: every pair
    /// of members inside one domain is NVLink P2P, and no pair across domains
    /// has GPU <-> NIC P2P forbidden. PCIe pairs (even under one PCIe switch,
    /// PATH_PIX) and host-staged (SHM) pairs turn LL128 off.
    pub fn ll128_allowed(&self, members: &[u32]) -> bool {
        if self.all_nvlink() {
            return true;
        }
        for (i, &a) in members.iter().enumerate() {
            for &b in &members[i + 1..] {
                let same = self.domain.get(a as usize) == self.domain.get(b as usize);
                if same && (self.class(a, b) != PathClass::NvLink || self.p2p_blocker(a, b).is_some()) {
                    return false;
                }
                if !same && (self.p2p_blocker(a, b).is_some() || self.p2p_blocker(b, a).is_some()) {
                    return false;
                }
            }
        }
        true
    }

    /// The GPUs of each domain, in id order.
    pub fn domain_members(&self, members: &[u32]) -> Vec<Vec<u32>> {
        let mut out: Vec<Vec<u32>> = vec![Vec::new(); self.domains.max(1) as usize];
        for &m in members {
            out[self.domain.get(m as usize).copied().unwrap_or(0) as usize].push(m);
        }
        out.retain(|d| !d.is_empty());
        out
    }

    /// PXN proxy for src -> dst across the network: a GPU in src's domain on
    /// dst's rail that src reaches peer to peer inside the domain (lowest id),
    /// or None when src is on that rail already or no such GPU exists.
    pub fn pxn_proxy(&self, src: u32, dst: u32) -> Option<u32> {
        let (rs, rd) = (self.rail[src as usize], self.rail[dst as usize]);
        if rd == NONE || rs == rd || !self.nvlink_domain {
            return None;
        }
        let ds = self.domain[src as usize];
        (0..self.gpus).find(|&g| g != src && self.domain[g as usize] == ds && self.rail[g as usize] == rd && self.class(src, g) != PathClass::Network && self.p2p_blocker(src, g).is_none())
    }
}

/// Chunks of one staged leg in flight at once: 1. A channel's Simple-protocol
/// sender posts its steps in order (a step's slot is written, then the next:
/// NCCL src/device/prims_simple.h), so each leg moves one chunk at a time and
/// the pipelining comes from the legs working on different chunks. (Was 2,
/// "double-buffered", assumed: two chunks of one leg then shared its route,
/// which the flow tier flags as outside its validation and the packet engine
/// ran 5.5 % faster on a three-leg cross-node copy.)
pub const IN_FLIGHT_PER_LEG: u64 = 1;

/// NCCL tuning.cc hwLat (ring row) differences over NVLink, ps: (PCI, NET) by protocol.
pub fn hw_extra_ps(pr: Protocol) -> (u64, u64) {
    match pr {
        Protocol::Ll => (400_000, 2_100_000),
        Protocol::Ll128 => (600_000, 2_100_000),
        _ => (2_300_000, 10_600_000),
    }
}

/// How one transfer moves: endpoints in order (src, intermediates..., dst),
/// the extra latency and the transport resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Route {
    pub hops: Vec<u32>,
    pub extra_ps: u64,
    pub transport: Transport,
}

/// Resolve the transport of src -> dst.
///
/// # Errors
/// `Config` naming the element: forced P2P across a path that forbids it;
/// forced host staging on a fabric without host memory; forced RDMA between
/// GPUs that no network separates.
pub fn route(reach: &Reach, src: u32, dst: u32, t: &TransportParams, pr: Protocol) -> Result<Route> {
    let class = reach.class(src, dst);
    let (pcie, net) = hw_extra_ps(pr);
    let pcie = if t.pcie_extra_ps == u64::MAX { pcie } else { t.pcie_extra_ps };
    let net = if t.net_extra_ps == u64::MAX { net } else { t.net_extra_ps };
    let blocker = reach.p2p_blocker(src, dst);
    let host = |g: u32| reach.host_near[g as usize];
    let host_route = |field: &str| -> Result<Route> {
        let h = host(dst);
        if h == NONE {
            let why = match blocker {
                Some(e) => format!("a fabric with host memory (hosts > 0): GPUs {src} -> {dst} cross {e}, which forbids P2P, so the copy must be staged through host memory, and this fabric has none"),
                None => format!("a fabric with host memory (hosts > 0) for a host-staged copy of GPUs {src} -> {dst}; this fabric has none"),
            };
            return Err(FlitsimError::config(field, t.transport.name(), &why));
        }
        Ok(Route { hops: vec![src, h, dst], extra_ps: pcie.max(if class == PathClass::Network { net } else { 0 }), transport: Transport::Host })
    };
    match (t.transport, class) {
        (Transport::P2p, _) => {
            if let Some(e) = blocker {
                return Err(FlitsimError::config("transport", "p2p", &format!("a path that allows GPU peer-to-peer: GPUs {src} -> {dst} cross {e}, which forbids P2P (use transport = \"auto\" or \"host\")")));
            }
            Ok(Route { hops: vec![src, dst], extra_ps: match class { PathClass::NvLink => 0, PathClass::Pcie => pcie, PathClass::Network => net }, transport: Transport::P2p })
        }
        (Transport::Host, _) => host_route("transport"),
        (Transport::Rdma, PathClass::NvLink | PathClass::Pcie) => Err(FlitsimError::config("transport", "rdma", &format!("GPUs on different nodes: GPUs {src} and {dst} are in one domain (no NIC on their route; use \"auto\", \"p2p\" or \"host\")"))),
        (Transport::Auto, PathClass::NvLink | PathClass::Pcie) => {
            if blocker.is_some() {
                host_route("transport")
            } else {
                Ok(Route { hops: vec![src, dst], extra_ps: if class == PathClass::Pcie { pcie } else { 0 }, transport: Transport::P2p })
            }
        }
        (Transport::Auto | Transport::Rdma, PathClass::Network) => {
            // GPUDirect RDMA unless P2P (GPU <-> NIC) is forbidden: then stage
            // through host memory on both sides. PXN first moves the data over
            // NVLink to the sender-node GPU on the receiver's rail.
            let mut hops = vec![src];
            let sender = if t.pxn { reach.pxn_proxy(src, dst) } else { None };
            if let Some(p) = sender {
                hops.push(p);
            }
            // NCCL checks GDR for the GPU that talks to the NIC (the PXN proxy
            // when there is one: ncclTopoCheckGdr uses the intermediate GPU's
            // distance), so the leg that crosses the network decides
            let blocker = match sender {
                Some(p) => reach.p2p_blocker(p, dst),
                None => blocker,
            };
            if blocker.is_some() {
                let (hs, hd) = (host(*hops.last().expect("src")), host(dst));
                if hs == NONE || hd == NONE {
                    return Err(FlitsimError::config("transport", format!("GPUs {src} -> {dst}"), &format!("GPUDirect RDMA or host memory on both sides: {} forbids GPU <-> NIC P2P and the fabric has no host memory to stage through", blocker.unwrap_or("an element"))));
                }
                hops.push(hs);
                if hd != hs {
                    hops.push(hd);
                }
            }
            hops.push(dst);
            Ok(Route { hops, extra_ps: net, transport: Transport::Rdma })
        }
    }
}

/// Expand every GPU -> GPU transfer of `dag` whose route is not plain
/// NVLink P2P into its transport's sub-DAG. Returns None when nothing needs
/// expanding (the DAG then runs as lowered, bit-identical).
///
/// Sub-DAG of a transfer over hops h0 -> h1 -> ... -> hm: an entry delay of
/// the route's extra latency; leg j (h_j -> h_{j+1}) in chunks, chunk q of leg
/// j after chunk q of leg j-1 (the data is there) and after chunk q-2 of its
/// own leg ([`IN_FLIGHT_PER_LEG`] = 1: in order), and chunk q of leg 0 after
/// chunk q - slots of the last leg (a free slot); an exit join after the last
/// leg. The sender's protocol floor goes to the first leg's chunks pro rata.
///
/// # Errors
/// As [`route`]; `Config` when the expanded DAG exceeds the node limit.
pub fn expand(dag: &Dag, reach: &Reach, t: &TransportParams, pr: Protocol) -> Result<Option<Dag>> {
    if reach.all_nvlink() && t.transport != Transport::Host && t.transport != Transport::Rdma {
        return Ok(None);
    }
    Ok(expand_each(dag, reach, &|_| *t, pr)?.map(|x| x.0))
}

/// [`expand`] with a transport per node (`t(i)` for node i); also returns
/// each old node's (entry, exit) node in the new DAG.
///
/// # Errors
/// As [`expand`].
#[allow(clippy::type_complexity)]
pub fn expand_each(dag: &Dag, reach: &Reach, t: &dyn Fn(usize) -> TransportParams, pr: Protocol) -> Result<Option<(Dag, Vec<u32>, Vec<u32>)>> {
    let mut routes: Vec<Option<Route>> = Vec::with_capacity(dag.nodes.len());
    let mut any = false;
    for (i, n) in dag.nodes.iter().enumerate() {
        let r = match *n {
            NodeKind::Transfer { src, dst, loopback: false, .. } if src != dst && src < reach.gpus && dst < reach.gpus => {
                let r = route(reach, src, dst, &t(i), pr)?;
                if r.hops.len() == 2 && r.extra_ps == 0 {
                    None
                } else {
                    any = true;
                    Some(r)
                }
            }
            _ => None,
        };
        routes.push(r);
    }
    if !any {
        return Ok(None);
    }
    let mut out = Dag::default();
    // entry and exit node of every old node
    let mut entry = vec![0u32; dag.nodes.len()];
    let mut exit = vec![0u32; dag.nodes.len()];
    for (i, n) in dag.nodes.iter().enumerate() {
        let tp = t(i);
        let Some(r) = &routes[i] else {
            let id = out.push(*n);
            entry[i] = id;
            exit[i] = id;
            continue;
        };
        let NodeKind::Transfer { bytes, min_ps, .. } = *n else { unreachable!("routes only for transfers") };
        (entry[i], exit[i]) = push_chunked(&mut out, r, bytes, min_ps, &tp)?;
    }
    for &(a, b, d) in &dag.edges {
        out.edge(exit[a as usize], entry[b as usize], d);
    }
    Ok(Some((out, entry, exit)))
}

/// Append the chunked sub-DAG of one routed transfer to `out` (see
/// [`expand`]); returns its (entry, exit) node.
fn push_chunked(out: &mut Dag, r: &Route, bytes: u64, min_ps: u64, tp: &TransportParams) -> Result<(u32, u32)> {
    let e = out.push(NodeKind::Delay { ps: r.extra_ps });
    let legs = r.hops.len() - 1;
    let k = chunks(legs, bytes, tp);
    if out.nodes.len() as u64 + k * legs as u64 > super::lower::MAX_DAG_NODES {
        return Err(too_many_nodes(bytes));
    }
    let base = out.nodes.len() as u32;
    for j in 0..legs {
        for q in 0..k {
            let b = chunk_of(bytes, k, q);
            out.push(NodeKind::Transfer { src: r.hops[j], dst: r.hops[j + 1], bytes: b, loopback: false, min_ps: if j == 0 { floor_share(min_ps, b, bytes) } else { 0 } });
        }
    }
    let id = |j: usize, q: u64| base + (j as u64 * k + q) as u32;
    let slots = tp.slots.max(1) as u64;
    for j in 0..legs {
        for q in 0..k {
            if j == 0 {
                out.edge(e, id(0, q), 0);
                if legs > 1 && q >= slots {
                    out.edge(id(legs - 1, q - slots), id(0, q), 0);
                }
            } else {
                out.edge(id(j - 1, q), id(j, q), 0);
            }
            if q >= IN_FLIGHT_PER_LEG {
                out.edge(id(j, q - IN_FLIGHT_PER_LEG), id(j, q), 0);
            }
        }
    }
    let x = if k == 1 {
        id(legs - 1, 0)
    } else {
        let x = out.push(NodeKind::Delay { ps: 0 });
        for q in k.saturating_sub(IN_FLIGHT_PER_LEG)..k {
            out.edge(id(legs - 1, q), x, 0);
        }
        x
    };
    Ok((e, x))
}

/// A staged copy whose sub-DAG would pass the node limit.
fn too_many_nodes(bytes: u64) -> FlitsimError {
    FlitsimError::config("nbytes", bytes, &format!("a transfer whose staged copy stays under {} DAG nodes (raise host_chunk_bytes)", super::lower::MAX_DAG_NODES))
}

/// Chunks per leg of a `bytes` transfer over `legs` legs (1 when unstaged or unpipelined).
fn chunks(legs: usize, bytes: u64, tp: &TransportParams) -> u64 {
    let chunk = if legs == 1 || tp.chunk_bytes == 0 { bytes.max(1) } else { tp.chunk_bytes };
    bytes.div_ceil(chunk).max(1)
}

/// Bytes of chunk `q` of `k` (the first `bytes % k` carry one byte more).
fn chunk_of(bytes: u64, k: u64, q: u64) -> u64 {
    bytes / k + u64::from(q < bytes % k)
}

/// The sender's protocol floor's share for `b` of `bytes`, ps (pro rata).
fn floor_share(min_ps: u64, b: u64, bytes: u64) -> u64 {
    if bytes == 0 {
        0
    } else {
        (min_ps as u128 * b as u128 / bytes as u128) as u64
    }
}

/// Fewest body pieces (of one staging buffer, `slots` chunks, each) a
/// staged copy needs to run as a chunk train ([`expand_train`]): a piece may
/// run up to about one buffer ahead of the leg before it, so a train is
/// kept to copies of at least 8 buffers (66 chunks of 512 KiB with NCCL's 8
/// slots: 33 MiB); shorter ones run chunk by chunk.
pub const TRAIN_MIN_PIECES: u64 = 8;

/// One plain transfer's (no protocol floor) transport sub-DAG with every
/// leg's middle chunks carried in pieces of one staging buffer each: a
/// **chunk train** (flow level's speed lever for staged copies;
/// docs/fidelity.md "Chunk trains"), and whether it is one. None when the
/// route needs no expansion (as [`expand`]); the exact chunked sub-DAG
/// (false) when the route has one leg, fewer slots than legs (the slot limit
/// would then set the end) or under [`TRAIN_MIN_PIECES`] pieces.
///
/// Leg j of k chunks becomes head H_j (chunk 0), pieces X_j,p (chunks
/// 1..k-2 in runs of `slots`), each followed by a gap (a delay of (chunks in
/// the piece - 1) x `lat_ps(h_j, h_j+1)`: the per-chunk path latencies its
/// one flow pays only once), and tail T_j (chunk k-1). H_j after H_j-1;
/// X_j,p after the previous piece of its leg (or H_j) and, for j > 0, after
/// piece p-1 of leg j-1 (no more than one piece ahead of the data); the first
/// leg's X_0,p after piece p-2 of the last leg (no more than two pieces
/// ahead: the staging buffer's slots); T_j after its leg's last piece and
/// T_j-1; the exit is the last tail. With every leg at a constant rate r_j
/// and latency l_j this ends exactly when the chunked copy does (the flow-
/// shop makespan sum_j (c / r_j + l_j) + (k - 1) max_j (c / r_j + l_j), equal
/// chunks c: the bottleneck leg's pieces run back to back and the lags never
/// bind). Where rates change while it runs, a piece runs at its own leg's
/// rate and may run ahead of the leg before it by up to one piece, and the
/// latencies are taken per piece: the lever's error, measured
/// (docs/fidelity.md: no general bound, so trains are opt-in,
/// `CollectiveParams::chunk_trains`).
///
/// # Errors
/// As [`route`], and what `lat_ps` returns.
pub fn expand_train(src: u32, dst: u32, bytes: u64, reach: &Reach, t: &TransportParams, pr: Protocol, lat_ps: &mut dyn FnMut(u32, u32) -> Result<u64>) -> Result<Option<(Dag, bool)>> {
    if src == dst || src >= reach.gpus || dst >= reach.gpus {
        return Ok(None);
    }
    let r = route(reach, src, dst, t, pr)?;
    if r.hops.len() == 2 && r.extra_ps == 0 {
        return Ok(None); // plain P2P, as expand_each leaves it
    }
    let legs = r.hops.len() - 1;
    let k = chunks(legs, bytes, t);
    let per = t.slots.max(1) as u64;
    let mut out = Dag::default();
    if legs == 1 || (t.slots as usize) < legs || k < 2 + TRAIN_MIN_PIECES * per {
        push_chunked(&mut out, &r, bytes, 0, t)?;
        return Ok(Some((out, false)));
    }
    let e = out.push(NodeKind::Delay { ps: r.extra_ps });
    // body chunks 1..=n in pieces of `per` chunks (the last may be shorter)
    let n = k - 2;
    let pieces = n.div_ceil(per);
    if 1 + legs as u64 * (2 + 2 * pieces) > super::lower::MAX_DAG_NODES {
        return Err(too_many_nodes(bytes));
    }
    let piece_chunks = |p: u64| if p + 1 < pieces { per } else { n - per * (pieces - 1) };
    // bytes of chunks first..first+len (those below bytes % k carry one byte more, chunk_of)
    let span = |first: u64, len: u64| -> u64 { len * (bytes / k) + (first + len).min(bytes % k).saturating_sub(first) };
    let mut heads: Vec<u32> = Vec::with_capacity(legs);
    let mut tails: Vec<u32> = Vec::with_capacity(legs);
    // per leg, the node each piece ends at (its gap, or the piece itself)
    let mut ends: Vec<Vec<u32>> = Vec::with_capacity(legs);
    // the first leg's pieces
    let mut starts0: Vec<u32> = Vec::with_capacity(pieces as usize);
    for j in 0..legs {
        let (a, b) = (r.hops[j], r.hops[j + 1]);
        let lat = lat_ps(a, b)?;
        let h = out.push(NodeKind::Transfer { src: a, dst: b, bytes: chunk_of(bytes, k, 0), loopback: false, min_ps: 0 });
        out.edge(heads.last().copied().unwrap_or(e), h, 0);
        heads.push(h);
        let mut leg_ends = Vec::with_capacity(pieces as usize);
        let mut first = 1;
        for p in 0..pieces {
            let len = piece_chunks(p);
            let x = out.push(NodeKind::Transfer { src: a, dst: b, bytes: span(first, len), loopback: false, min_ps: 0 });
            first += len;
            if j == 0 {
                starts0.push(x);
            }
            out.edge(leg_ends.last().copied().unwrap_or(h), x, 0);
            // no more than one piece ahead of the leg before it ...
            if j > 0 && p > 0 {
                out.edge(ends[j - 1][p as usize - 1], x, 0);
            }
            let end = if len > 1 {
                let g = out.push(NodeKind::Delay { ps: (len - 1).saturating_mul(lat) });
                out.edge(x, g, 0);
                g
            } else {
                x
            };
            leg_ends.push(end);
        }
        ends.push(leg_ends);
    }
    // ... and the first leg no more than two pieces ahead of the last (the staging buffer's slots)
    for p in 2..pieces as usize {
        out.edge(ends[legs - 1][p - 2], starts0[p], 0);
    }
    for j in 0..legs {
        let (a, b) = (r.hops[j], r.hops[j + 1]);
        let tl = out.push(NodeKind::Transfer { src: a, dst: b, bytes: chunk_of(bytes, k, k - 1), loopback: false, min_ps: 0 });
        out.edge(*ends[j].last().expect("a piece"), tl, 0);
        if let Some(&pt) = tails.last() {
            out.edge(pt, tl, 0);
        }
        tails.push(tl);
    }
    Ok(Some((out, true)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::dag::{Backend, CEv, DagExec};
    use crate::engine::{self, EventQueue, Model, NoInterrupt, TimePs};

    struct M(DagExec);
    impl Model for M {
        type Event = CEv;
        fn handle(&mut self, now: TimePs, ev: CEv, q: &mut EventQueue<CEv>) -> Result<()> {
            self.0.handle(now, ev, q)
        }
    }

    /// Run `dag` on the ideal port model (one port per endpoint of `bw` B/s, latency `alpha`).
    fn ideal(dag: &Dag, alpha: u64, bw: f64) -> u64 {
        let mut m = M(DagExec::new(Backend::Ideal { alpha_ps: alpha, bytes_per_s: bw, port_free: vec![0; 4] }));
        let mut q = EventQueue::with_capacity(64);
        m.0.start(0, 0, dag, &mut q).unwrap();
        engine::run(&mut m, &mut q, u64::MAX, &mut NoInterrupt).unwrap();
        m.0.done[0].1
    }

    /// Two GPUs behind one root complex that forbids P2P, host memory endpoint 2.
    fn pcie_pair() -> Reach {
        Reach::from_tables(2, 3, vec![0, 0], vec![2, 2], vec![NONE, NONE], vec![PathClass::Pcie; 4], vec![None, Some("root_complex[0] (cpu0)".into()), Some("root_complex[0] (cpu0)".into()), None], false).unwrap()
    }

    fn params(t: Transport, chunk: u64) -> TransportParams {
        TransportParams { transport: t, chunk_bytes: chunk, slots: 8, pxn: true, pcie_extra_ps: u64::MAX, net_extra_ps: u64::MAX }
    }

    fn one(src: u32, dst: u32, bytes: u64) -> Dag {
        Dag { nodes: vec![NodeKind::Transfer { src, dst, bytes, loopback: false, min_ps: 0 }], edges: Vec::new() }
    }

    #[test]
    fn unpipelined_host_staged_copy_is_two_serialized_hops() {
        // Closed form: extra + 2 (S / B + alpha); S = 8 MB at 25 GB/s = 320 us per hop.
        let (s, bw, alpha) = (8_000_000u64, 25e9, 1_000_000u64);
        let d = expand(&one(0, 1, s), &pcie_pair(), &params(Transport::Auto, 0), Protocol::Simple).unwrap().unwrap();
        let hop = (s as f64 * 1e12 / bw).ceil() as u64;
        assert_eq!(ideal(&d, alpha, bw), 2_300_000 + 2 * (hop + alpha));
    }

    #[test]
    fn pipelined_host_staged_copy_overlaps_its_hops() {
        // k chunks of c, one in flight per leg: each chunk costs c / B + alpha on
        // its leg, the second leg trails by one chunk: extra + (k + 1) (c / B + alpha).
        let (c, k, bw, alpha) = (512 * 1024u64, 16u64, 25e9, 1_000_000u64);
        let d = expand(&one(0, 1, c * k), &pcie_pair(), &params(Transport::Auto, c), Protocol::Simple).unwrap().unwrap();
        let chunk = (c as f64 * 1e12 / bw).ceil() as u64;
        assert_eq!(ideal(&d, alpha, bw), 2_300_000 + (k + 1) * (chunk + alpha));
    }

    #[test]
    fn a_chunk_train_ends_when_its_chunks_would_at_constant_rates() {
        // Closed form (flow shop of k equal chunks over m legs of one rate and
        // latency): extra + (k + m - 1) (c / B + alpha), the chunked copy's end.
        let (c, bw, alpha) = (512 * 1024u64, 25e9, 1_000_000u64);
        let chunk = (c as f64 * 1e12 / bw).ceil() as u64;
        let t = params(Transport::Auto, c);
        let min_k = 2 + TRAIN_MIN_PIECES * t.slots as u64;
        for (reach, src, dst, legs, extra) in [(pcie_pair(), 0, 1, 2u64, 2_300_000u64), (two_nodes(false), 0, 2, 3, 10_600_000)] {
            for k in [min_k, min_k + 1, min_k + 7, 200, 771] {
                let (train, is_train) = expand_train(src, dst, c * k, &reach, &t, Protocol::Simple, &mut |_, _| Ok(alpha)).unwrap().unwrap();
                assert!(is_train);
                let chunked = expand(&one(src, dst, c * k), &reach, &t, Protocol::Simple).unwrap().unwrap();
                let flows = |d: &Dag| d.nodes.iter().filter(|n| matches!(n, NodeKind::Transfer { .. })).count() as u64;
                // head, a piece per buffer of slots chunks, tail, per leg
                assert_eq!(flows(&train), legs * (2 + (k - 2).div_ceil(t.slots as u64)));
                assert_eq!(flows(&chunked), legs * k);
                let want = extra + (k + legs - 1) * (chunk + alpha);
                assert_eq!(ideal(&chunked, alpha, bw), want, "chunked, k = {k}");
                assert_eq!(ideal(&train, alpha, bw), want, "train, k = {k}, {legs} legs");
                // every leg carries the transfer's bytes
                let legs_bytes: u64 = train.nodes.iter().map(|n| if let NodeKind::Transfer { bytes, .. } = *n { bytes } else { 0 }).sum();
                assert_eq!(legs_bytes, legs * c * k);
            }
            // under TRAIN_MIN_PIECES buffers, or fewer slots than legs: the exact chunked sub-DAG
            let mut one_slot = t;
            one_slot.slots = legs as u32 - 1;
            for (tp, bytes) in [(t, 3 * c), (t, (min_k - 1) * c), (one_slot, 200 * c)] {
                let (d, is_train) = expand_train(src, dst, bytes, &reach, &tp, Protocol::Simple, &mut |_, _| Ok(alpha)).unwrap().unwrap();
                assert!(!is_train);
                assert_eq!(d.nodes, expand(&one(src, dst, bytes), &reach, &tp, Protocol::Simple).unwrap().unwrap().nodes);
            }
        }
        assert!(expand_train(0, 1, 64 << 20, &Reach::nvlink_domain(2), &t, Protocol::Simple, &mut |_, _| Ok(alpha)).unwrap().is_none());
        // a latency error reaches the caller
        let e = expand_train(0, 1, 64 << 20, &pcie_pair(), &t, Protocol::Simple, &mut |_, _| Err(FlitsimError::config("transfer", "0 -> 1", "a path"))).unwrap_err();
        assert!(e.to_string().contains("transfer"), "{e}");
    }

    #[test]
    fn forcing_p2p_across_a_blocking_element_names_it() {
        let e = expand(&one(0, 1, 4096), &pcie_pair(), &params(Transport::P2p, 0), Protocol::Simple).unwrap_err().to_string();
        assert!(e.contains("root_complex[0] (cpu0)") && e.contains("transport"), "{e}");
        // RDMA inside one domain and host staging without hosts are refused too
        let e = expand(&one(0, 1, 4096), &pcie_pair(), &params(Transport::Rdma, 0), Protocol::Simple).unwrap_err().to_string();
        assert!(e.contains("one domain"), "{e}");
        let e = expand(&one(0, 1, 4096), &Reach::nvlink_domain(2), &params(Transport::Host, 0), Protocol::Simple).unwrap_err().to_string();
        assert!(e.contains("host memory"), "{e}");
    }

    #[test]
    fn nvlink_p2p_is_left_alone() {
        assert!(expand(&one(0, 1, 4096), &Reach::nvlink_domain(2), &params(Transport::Auto, 0), Protocol::Simple).unwrap().is_none());
        assert!(expand(&one(0, 1, 4096), &Reach::nvlink_domain(2), &params(Transport::P2p, 0), Protocol::Simple).unwrap().is_none());
    }

    /// Two nodes of two GPUs, NVLink inside, GPU g on rail g % 2; hosts 4, 5.
    fn two_nodes(gdr: bool) -> Reach {
        let dom = vec![0, 0, 1, 1];
        let mut class = Vec::new();
        let mut blk = Vec::new();
        for a in 0..4u32 {
            for b in 0..4u32 {
                let same = dom[a as usize] == dom[b as usize];
                class.push(if same { PathClass::NvLink } else { PathClass::Network });
                blk.push(if !same && !gdr { Some("root_complex[0]".to_string()) } else { None });
            }
        }
        Reach::from_tables(4, 6, dom, vec![4, 4, 5, 5], vec![0, 1, 0, 1], class, blk, true).unwrap()
    }

    #[test]
    fn rdma_routes_with_pxn_and_host_staging() {
        let t = params(Transport::Auto, 512 * 1024);
        // same rail: straight through the NIC
        assert_eq!(route(&two_nodes(true), 0, 2, &t, Protocol::Simple).unwrap().hops, vec![0, 2]);
        // GPU 0 (rail 0) -> GPU 3 (rail 1): PXN over NVLink to GPU 1 (rail 1) first
        let r = route(&two_nodes(true), 0, 3, &t, Protocol::Simple).unwrap();
        assert_eq!((r.hops.clone(), r.transport, r.extra_ps), (vec![0, 1, 3], Transport::Rdma, 10_600_000));
        // PXN off: straight across rails
        let mut off = t;
        off.pxn = false;
        assert_eq!(route(&two_nodes(true), 0, 3, &off, Protocol::Simple).unwrap().hops, vec![0, 3]);
        // no GPUDirect RDMA: host memory on both sides
        assert_eq!(route(&two_nodes(false), 0, 2, &t, Protocol::Simple).unwrap().hops, vec![0, 4, 5, 2]);
        // forced host staging across nodes goes through the receiver's host
        assert_eq!(route(&two_nodes(true), 0, 2, &params(Transport::Host, 0), Protocol::Simple).unwrap().hops, vec![0, 5, 2]);
    }

    #[test]
    fn expansion_keeps_bytes_and_dependencies() {
        // a -> b chain of two transfers; each staged leg carries the transfer's bytes
        let mut d = one(0, 1, 3 * 512 * 1024 + 7);
        d.nodes.push(NodeKind::Transfer { src: 1, dst: 0, bytes: 100, loopback: false, min_ps: 0 });
        d.edges.push((0, 1, 5));
        let e = expand(&d, &pcie_pair(), &params(Transport::Auto, 512 * 1024), Protocol::Simple).unwrap().unwrap();
        let mut by_leg = std::collections::BTreeMap::new();
        for n in &e.nodes {
            if let NodeKind::Transfer { src, dst, bytes, .. } = *n {
                *by_leg.entry((src, dst)).or_insert(0u64) += bytes;
            }
        }
        assert_eq!(by_leg[&(0, 2)], 3 * 512 * 1024 + 7 + 0);
        assert_eq!(by_leg[&(2, 1)], 3 * 512 * 1024 + 7);
        assert_eq!(by_leg[&(1, 2)], 100);
        assert_eq!(by_leg[&(2, 0)], 100);
        // the old edge's delay survives between the first's exit and the second's entry
        assert_eq!(e.edges.iter().filter(|x| x.2 == 5).count(), 1);
        // second transfer (ideal): both hops after the first ends
        let t = ideal(&e, 0, 25e9);
        assert!(t > ideal(&expand(&one(0, 1, 3 * 512 * 1024 + 7), &pcie_pair(), &params(Transport::Auto, 512 * 1024), Protocol::Simple).unwrap().unwrap(), 0, 25e9));
    }
}
