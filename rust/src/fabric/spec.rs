//! Fabric specification: GPUs with NVLink ports, switch chips, and the wires
//! between them, validated on construction.
//!
//! Endpoints (GPUs, then host-memory endpoints) are wired to switching
//! elements; elements are joined to each other by trunks. Without trunks,
//! kinds or hosts a fabric is one switch layer (NVL72, HGX, DGX are all
//! single-stage) and every result is what it was before graphs existed. With
//! them the fabric is a graph: PCIe switches, root complexes, NICs,
//! Ethernet/InfiniBand switches, NVLink bridges and second NVSwitch tiers,
//! routed by destination over shortest paths with ECMP (docs/graph.md).

use crate::error::{ensure, FlitsimError, Result};
use crate::link::{prefix_field, LinkSpec};
use serde::{Deserialize, Serialize};

/// Most GPUs (or switches) one fabric may have.
pub const MAX_ENDPOINTS: u32 = 1 << 20;
/// Most ports (GPU and switch sides together) one fabric may have.
pub const MAX_PORTS: u64 = 1 << 24;

/// How a GPU spreads a transfer's packets over its ports (and a switch over
/// its parallel output ports to one GPU).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Spray {
    /// Packet j of a transfer goes to the j-th eligible port (mod count).
    RoundRobin,
    /// Every packet of a (src, dst, flow) goes to one port chosen by a hash.
    Hash,
    /// Each packet goes to the eligible port whose link has the most credits
    /// (ties: lowest backlog, then lowest index).
    Adaptive,
}

/// How finely a fabric is simulated (speed lever; docs/fidelity.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fidelity {
    /// Packet by packet through cycle-level switches (the reference).
    #[default]
    Packet,
    /// Fluid max-min flows on the same graph (`crate::flow`), validated
    /// against packet level where bandwidth-bound.
    Flow,
    /// Flow level where its validation holds, packet level where the run is
    /// credit- or arbitration-bound; the result says which ran and why.
    Auto,
}

impl Fidelity {
    pub fn name(self) -> &'static str {
        match self {
            Fidelity::Packet => "packet",
            Fidelity::Flow => "flow",
            Fidelity::Auto => "auto",
        }
    }
}

/// The GPU side: how packets are made and injected.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuInjection {
    /// Payload per protocol packet, bytes: 256 for copy engines, 128 for SM
    /// stores (nccl-tests issue 149, NVIDIA maintainer).
    #[serde(default = "d_payload")]
    pub payload_bytes: u32,
    /// Most packets a GPU may have in flight (sent, not yet delivered), split
    /// evenly over its ports; 0 = unlimited.
    #[serde(default)]
    pub max_outstanding_packets: u32,
    /// Injection rate cap per GPU, bytes/s of payload, split evenly over its
    /// ports; 0 = limited by the links only.
    #[serde(default)]
    pub injection_bytes_per_s: u64,
    /// Injection cost of each protocol packet beyond its payload, in bytes at
    /// `injection_bytes_per_s` (a per-request issue cost: smaller payloads
    /// inject slower, SM 128 B below copy-engine 256 B); 0 = none.
    #[serde(default)]
    pub injection_packet_overhead_bytes: u32,
    /// Receive drain rate per GPU, bytes/s, split evenly over its ports;
    /// 0 = unlimited (buffers free on arrival).
    #[serde(default)]
    pub ejection_bytes_per_s: u64,
    /// Injection cap per GPU port by the kind of link it is wired with:
    /// entry `i` caps every GPU port whose wire uses `links[i]`, bytes/s of
    /// payload (charged with `injection_packet_overhead_bytes` per packet),
    /// not split; 0 = that port is limited by its link only. Empty (the
    /// default) = `injection_bytes_per_s` split evenly over the ports. A GPU
    /// with NVLink and PCIe ports needs it: the NVLink-calibrated DMA rate
    /// is not what a PCIe port carries ([`port_injection_caps`]). Host
    /// endpoints are never capped by it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub link_injection_bytes_per_s: Vec<u64>,
}

impl GpuInjection {
    /// The limits one port of endpoint `endpoint` wired with link `link`
    /// runs under, as `Port::new`-style consumers read them: GPU-wide
    /// fields unchanged except `injection_bytes_per_s`, which is replaced
    /// by the per-link cap x `div` (so that a consumer dividing by `div`
    /// gets the cap) when `link_injection_bytes_per_s` is set; host
    /// endpoints (`endpoint >= gpus`) get no injection cap then.
    pub fn for_port(&self, endpoint: u32, gpus: u32, link: u32, div: f64) -> GpuInjection {
        let mut g = GpuInjection { link_injection_bytes_per_s: Vec::new(), ..*self };
        if !self.link_injection_bytes_per_s.is_empty() {
            let cap = if endpoint >= gpus { 0 } else { self.link_injection_bytes_per_s.get(link as usize).copied().unwrap_or(0) };
            g.injection_bytes_per_s = (cap as f64 * div).round() as u64;
        }
        g
    }
}

/// Fraction of a PCIe link's lane rate (GT/s x lanes / 8, before 128b/130b)
/// that NCCL's topology model gives the link: `bw = width x speed / 80`
/// GB/s with speed 60 / 120 / 240 for 8 / 16 / 32 GT/s (NCCL
/// src/graph/topo.cc, kvDictPciGen), i.e. 0.75 x the lane rate: Gen3 x16
/// 12 GB/s (topo.h PCI_BW), Gen4 x16 24 GB/s, Gen5 x16 48 GB/s.
pub const NCCL_PCIE_FRACTION_OF_LANE_RATE: f64 = 0.75;

/// Per-link injection caps of a graph fabric's GPU ports (see
/// [`GpuInjection::link_injection_bytes_per_s`]), bytes/s of payload:
/// a port wired into an NVSwitch or an NVLink bridge gets the calibrated
/// NVLink DMA rate `link_efficiency` x its link's raw rate (x payload /
/// (payload + `overhead_bytes`) is then charged per packet, as on one-tier
/// fabrics); any other GPU port (PCIe into a switch, root complex or NIC)
/// gets NCCL's PCIe figure, [`NCCL_PCIE_FRACTION_OF_LANE_RATE`] x the lane
/// rate, expressed so that the sustained payload rate equals it after the
/// per-packet overhead. Links no GPU port uses get 0.
///
/// # Errors
/// `Config` for a link spec that does not derive.
pub fn port_injection_caps(spec: &FabricSpec, link_efficiency: f64, overhead_bytes: u32) -> Result<Vec<u64>> {
    use crate::fabric::ElementKind as K;
    let mut caps = vec![0u64; spec.links.len()];
    let payload = spec.gpu.payload_bytes.max(1) as f64;
    for w in spec.wires.iter().filter(|w| w.gpu < spec.gpus) {
        let li = w.link as usize;
        let Some(link) = spec.links.get(li) else { continue };
        let nvlink = matches!(spec.kind_of(w.switch).map(|k| k.kind), Some(K::Nvswitch | K::Bridge)) || !spec.is_graph();
        let cap = if nvlink {
            link.derive()?.1.rate_bps as f64 / 8.0 * link_efficiency
        } else {
            let lane_bytes = link.serdes.baud_gbd * 1e9 * link.serdes.modulation.bits_per_symbol() as f64 * link.serdes.lanes as f64 / 8.0;
            NCCL_PCIE_FRACTION_OF_LANE_RATE * lane_bytes * (payload + overhead_bytes as f64) / payload
        };
        caps[li] = caps[li].max(cap as u64);
    }
    Ok(caps)
}

fn d_payload() -> u32 {
    256
}

impl Default for GpuInjection {
    fn default() -> Self {
        GpuInjection { payload_bytes: 256, max_outstanding_packets: 0, injection_bytes_per_s: 0, injection_packet_overhead_bytes: 0, ejection_bytes_per_s: 0, link_injection_bytes_per_s: Vec::new() }
    }
}

/// Parameters shared by every switch chip of the fabric; ports come from the
/// wiring and the clock from the link rate (one flit per port per cycle).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchParams {
    #[serde(default = "d_alloc")]
    pub allocator: String,
    #[serde(default = "d_one")]
    pub iterations: u32,
    /// `"voq"` or `"fifo"`.
    #[serde(default = "d_voq")]
    pub queueing: String,
    #[serde(default = "d_one")]
    pub speedup: u32,
    /// Route + allocation pipeline, cycles.
    #[serde(default)]
    pub pipeline_latency_cycles: u32,
    /// Input buffer per (port, VC), flits; 0 = the link's credits_per_vc_flits.
    #[serde(default)]
    pub buffer_per_vc_flits: u32,
    /// Output buffer per (port, VC), flits; 0 = none.
    #[serde(default)]
    pub output_buffer_per_vc_flits: u32,
    /// Core clock, GHz; 0 = derived: one flit per cycle at the link's payload rate.
    #[serde(default)]
    pub clock_ghz: f64,
    /// The chips can reduce and multicast (NVLink SHARP, NVSwitch gen3+:
    /// Hopper and later; NVIDIA Hopper architecture page). Collectives with
    /// the NVLS algorithm need it.
    #[serde(default)]
    pub nvls: bool,
}

fn d_alloc() -> String {
    "islip".into()
}
fn d_one() -> u32 {
    1
}
fn d_voq() -> String {
    "voq".into()
}

impl Default for SwitchParams {
    fn default() -> Self {
        SwitchParams {
            allocator: d_alloc(),
            iterations: 1,
            queueing: d_voq(),
            speedup: 1,
            pipeline_latency_cycles: 0,
            buffer_per_vc_flits: 0,
            output_buffer_per_vc_flits: 0,
            clock_ghz: 0.0,
            nvls: false,
        }
    }
}

/// One cable/trace: GPU `gpu` port `gpu_port` <-> switch `switch` port `switch_port`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Wire {
    pub gpu: u32,
    pub gpu_port: u32,
    pub switch: u32,
    pub switch_port: u32,
    /// Index into `FabricSpec::links` for the GPU end (default 0).
    #[serde(default)]
    pub link: u32,
    /// Index into `FabricSpec::links` for the switch end (default: same as `link`).
    #[serde(default)]
    pub switch_link: Option<u32>,
}

/// Largest fault time accepted, ps (2^62, the bound on transfer start times).
pub const MAX_FAULT_PS: u64 = 1 << 62;

/// A component that fails at `at_ps` and stays dead. Traffic started later
/// avoids it (spraying skips it); packets inside it or on its wires at that
/// moment are lost and replayed end to end by their source over what is left
/// once the source's replay timer (`links[..].replay.timeout_ps`) expires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Fault {
    /// The wire of GPU `gpu` port `port` (both directions).
    Link { gpu: u32, port: u32, at_ps: u64 },
    /// Switch chip `switch` (one plane of a planar fabric) and all its wires.
    Plane { switch: u32, at_ps: u64 },
    /// Switching element `nic` (its kind must be `nic`) and all its wires and trunks.
    Nic { nic: u32, at_ps: u64 },
}

impl Fault {
    /// When the component dies, ps.
    pub fn at_ps(&self) -> u64 {
        match *self {
            Fault::Link { at_ps, .. } | Fault::Plane { at_ps, .. } | Fault::Nic { at_ps, .. } => at_ps,
        }
    }
}

/// What a switching element is (sets defaults and validation rules; the
/// cycle-level model is the same switch core for all of them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ElementKind {
    Nvswitch,
    PcieSwitch,
    RootComplex,
    /// A NIC: a PCIe side (wires or trunks to GPUs / PCIe switches / root
    /// complexes) and a network side (trunks to Ethernet/InfiniBand switches).
    Nic,
    Ethernet,
    Infiniband,
    /// A 2-port NVLink bridge between two GPUs (no pipeline latency).
    Bridge,
}

impl ElementKind {
    pub fn name(self) -> &'static str {
        match self {
            ElementKind::Nvswitch => "nvswitch",
            ElementKind::PcieSwitch => "pcie_switch",
            ElementKind::RootComplex => "root_complex",
            ElementKind::Nic => "nic",
            ElementKind::Ethernet => "ethernet",
            ElementKind::Infiniband => "infiniband",
            ElementKind::Bridge => "bridge",
        }
    }
}

/// One kind of switching element: its parameters and rules.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchKind {
    pub name: String,
    pub kind: ElementKind,
    /// Switch-core parameters of this kind (clock 0 = derived from its
    /// fastest link; buffer 0 = the links' credits).
    #[serde(default)]
    pub params: SwitchParams,
    /// GPU -> GPU (peer-to-peer) packets may cross this element; host traffic
    /// always may. A P2P transfer whose routes cross an element with
    /// `allow_p2p = false` is refused with a ConfigError naming it.
    #[serde(default = "d_true")]
    pub allow_p2p: bool,
    /// The element can reduce and multicast (NVLS).
    #[serde(default)]
    pub nvls: bool,
}

/// A cable between two switching elements (both directions):
/// element `a` port `a_port` <-> element `b` port `b_port`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Trunk {
    pub a: u32,
    pub a_port: u32,
    pub b: u32,
    pub b_port: u32,
    /// Index into `FabricSpec::links` (end `a`; default 0).
    #[serde(default)]
    pub link: u32,
    /// Link spec at end `b` (default: same as `link`); must equal it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub b_link: Option<u32>,
    /// This trunk is a dateline of torus dimension `d` (both directions):
    /// a packet's VC class has bit `d` set iff its route crosses a dateline
    /// of dimension `d` (see `Topology::transfer_vc`); None: not a dateline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dateline: Option<u32>,
}

/// Most torus dimensions with datelines: 2^6 VC classes = the 64-VC limit of a link.
pub const MAX_DATELINE_DIMS: u32 = 6;

/// A routing-table entry fixed by the user: at `switch`, packets for
/// endpoint `dst` leave by `ports` (spread round-robin), instead of the
/// shortest-path ECMP set. Used for deadlock-free routing on meshes and tori
/// (dimension order), where shortest-path ECMP has cyclic channel
/// dependencies and can deadlock under load, as in any credit-based network.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StaticRoute {
    pub switch: u32,
    pub dst: u32,
    pub ports: Vec<u32>,
}

/// Most host-memory endpoints one fabric may have.
pub const MAX_HOSTS: u32 = 1 << 12;

/// A whole scale-up fabric.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FabricSpec {
    pub gpus: u32,
    /// NVLink ports per GPU.
    pub gpu_ports: u32,
    pub switches: u32,
    /// Ports per switch chip.
    pub switch_ports: u32,
    /// Link specs referenced by wires.
    pub links: Vec<LinkSpec>,
    pub wires: Vec<Wire>,
    #[serde(default)]
    pub gpu: GpuInjection,
    #[serde(default)]
    pub switch: SwitchParams,
    #[serde(default = "d_spray")]
    pub spray: Spray,
    /// Bytes of payload per *simulated* packet: several protocol packets
    /// coalesced for speed (header flits still charged per protocol packet);
    /// 0 = one simulated packet per protocol packet.
    #[serde(default)]
    pub sim_packet_bytes: u64,
    /// Adaptive coalescing: when > 0, each transfer's simulated packets are
    /// sized so that every port it is sprayed over carries about this many
    /// (bytes / (lanes x N), rounded up to whole protocol packets), at least
    /// `sim_packet_bytes` and at most `max_sim_packet_bytes`. Simulation cost
    /// then grows with the number of transfers, not their bytes. 0 = off.
    #[serde(default)]
    pub sim_packets_per_lane: u32,
    /// Largest simulated packet adaptive coalescing may make, bytes (buffers
    /// hold two of them); default 256 KiB.
    #[serde(default = "d_max_sim")]
    pub max_sim_packet_bytes: u64,
    /// Allow exact plane folding when the engine can prove the symmetry.
    #[serde(default = "d_true")]
    pub fold_planes: bool,
    /// `packet` (default), `flow` or `auto` (see [`Fidelity`]).
    #[serde(default)]
    pub fidelity: Fidelity,
    /// Components that die during the run (none by default).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<Fault>,
    /// Host-memory endpoints (CPU DRAM behind a root complex): endpoint ids
    /// `gpus..gpus + hosts`; `Wire::gpu` indexes endpoints. Each has
    /// `gpu_ports` port slots (unwired slots allowed).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub hosts: u32,
    /// Kinds of switching element (empty: every switch is an NVSwitch-like
    /// chip with `switch` parameters, as before graphs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub switch_kinds: Vec<SwitchKind>,
    /// Per switch, an index into `switch_kinds` (empty iff `switch_kinds` is).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub switch_kind: Vec<u32>,
    /// Switch-to-switch cables.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trunks: Vec<Trunk>,
    /// Routing-table entries that replace the computed ones (validated: wired
    /// ports, no loop, no dead end).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub static_routes: Vec<StaticRoute>,
    /// Time-resolved queue-depth and credit counters (packet level; off by default).
    #[serde(default, skip_serializing_if = "super::CounterSpec::is_off")]
    pub counters: super::CounterSpec,
}

fn is_zero(x: &u32) -> bool {
    *x == 0
}

fn d_max_sim() -> u64 {
    256 << 10
}

fn d_spray() -> Spray {
    Spray::RoundRobin
}
fn d_true() -> bool {
    true
}

impl FabricSpec {
    /// Field checks: ids in range, every port wired at most once, link specs
    /// valid and equal at both ends of every wire and trunk, kinds, NICs,
    /// bridges, faults; for a one-layer fabric also every GPU pair sharing a
    /// switch. [`FabricSpec::validate`] (fabric/validate.rs) adds the checks
    /// of graph fabrics that need the routing tables.
    ///
    /// # Errors
    /// `Config` naming the wire, GPU or element at fault.
    pub(crate) fn validate_fields(&self) -> Result<()> {
        // Size limits come first, before anything is allocated from them: the
        // largest scale-up domain built is 576 GPUs (NVL576), so 2^20 GPUs or
        // switches leave room for studies while keeping per-port tables
        // (gpus x gpu_ports, switches x switch_ports) within memory.
        ensure(self.gpus >= 1 && self.gpus <= MAX_ENDPOINTS, "gpus", self.gpus, "1..=1048576 GPUs")?;
        ensure(self.hosts <= MAX_HOSTS, "hosts", self.hosts, "0..=4096 host-memory endpoints")?;
        ensure(self.switches <= MAX_ENDPOINTS, "switches", self.switches, "0..=1048576 switches")?;
        ensure(self.gpu_ports >= 1 && self.gpu_ports <= 256, "gpu_ports", self.gpu_ports, "1..=256 ports per GPU")?;
        ensure(self.switch_ports <= 4096, "switch_ports", self.switch_ports, "0..=4096 ports per switch")?;
        let ne = self.endpoints() as u64;
        let ports = ne * self.gpu_ports as u64 + self.switches as u64 * self.switch_ports as u64;
        ensure(ports <= MAX_PORTS, "gpus x gpu_ports + switches x switch_ports", ports, "at most 2^24 ports in one fabric")?;
        let pairs = ne * self.switches as u64;
        ensure(pairs <= MAX_PORTS, "gpus x switches", pairs, "at most 2^24 (per-switch, per-GPU tables)")?;
        ensure(
            self.switch.clock_ghz == 0.0 || (self.switch.clock_ghz.is_finite() && (0.001..=1000.0).contains(&self.switch.clock_ghz)),
            "switch.clock_ghz",
            format!("{:?}", self.switch.clock_ghz),
            "0 (derived from the link rate) or 0.001..=1000 GHz",
        )?;
        ensure(!self.links.is_empty(), "links", "[]", "at least one link spec")?;
        for (i, l) in self.links.iter().enumerate() {
            l.derive().map_err(|e| prefix_field(e, &format!("links[{i}]")))?;
        }
        let g = &self.gpu;
        ensure(g.payload_bytes >= 1, "gpu.payload_bytes", g.payload_bytes, "at least 1 byte")?;
        let maxp = self.links.iter().map(|l| l.packet.max_payload_bytes).min().unwrap_or(0);
        ensure(g.payload_bytes <= maxp, "gpu.payload_bytes", g.payload_bytes, &format!("at most the links' max_payload_bytes ({maxp})"))?;
        ensure(
            g.link_injection_bytes_per_s.is_empty() || g.link_injection_bytes_per_s.len() == self.links.len(),
            "gpu.link_injection_bytes_per_s",
            format!("{} entries", g.link_injection_bytes_per_s.len()),
            &format!("empty or one cap per entry of links ({})", self.links.len()),
        )?;
        if self.sim_packet_bytes > 0 {
            ensure(
                self.sim_packet_bytes % g.payload_bytes as u64 == 0 && self.sim_packet_bytes <= 1 << 20,
                "sim_packet_bytes",
                self.sim_packet_bytes,
                &format!("0 or a multiple of gpu.payload_bytes ({}) up to 1 MiB", g.payload_bytes),
            )?;
        }
        if self.sim_packets_per_lane > 0 {
            ensure(self.sim_packets_per_lane <= 1 << 20, "sim_packets_per_lane", self.sim_packets_per_lane, "0 (off) or 1..=1048576")?;
            let lo = self.sim_packet_bytes.max(g.payload_bytes as u64);
            ensure(
                self.max_sim_packet_bytes % g.payload_bytes as u64 == 0 && self.max_sim_packet_bytes >= lo && self.max_sim_packet_bytes <= 1 << 20,
                "max_sim_packet_bytes",
                self.max_sim_packet_bytes,
                &format!("a multiple of gpu.payload_bytes ({}) from sim_packet_bytes ({lo}) up to 1 MiB", g.payload_bytes),
            )?;
        }
        ensure(matches!(self.switch.queueing.as_str(), "voq" | "fifo"), "switch.queueing", &self.switch.queueing, "\"voq\" or \"fifo\"")?;
        let mut gpu_used = crate::error::try_vec(self.endpoints() as usize * self.gpu_ports as usize, u32::MAX, "gpus x gpu_ports")?;
        let mut sw_used = crate::error::try_vec(self.switches as usize * self.switch_ports as usize, u32::MAX, "switches x switch_ports")?;
        for (w, wire) in self.wires.iter().enumerate() {
            let f = |name: &str| format!("wires[{w}].{name}");
            let nl = self.links.len() as u32;
            // The checks below format their messages up front: run them only
            // when a cheap test finds something wrong (large explicit wire lists).
            let ok = wire.gpu < if self.hosts == 0 { self.gpus } else { self.endpoints() }
                && wire.gpu_port < self.gpu_ports
                && wire.switch < self.switches
                && wire.switch_port < self.switch_ports
                && wire.link < nl
                && wire.switch_link.is_none_or(|sl| sl < nl && self.links[sl as usize] == self.links[wire.link as usize]);
            if !ok {
                if self.hosts == 0 {
                    ensure(wire.gpu < self.gpus, &f("gpu"), wire.gpu, &format!("a GPU id in 0..{}", self.gpus))?;
                } else {
                    ensure(wire.gpu < self.endpoints(), &f("gpu"), wire.gpu, &format!("an endpoint id in 0..{} (GPUs 0..{}, hosts {}..{})", self.endpoints(), self.gpus, self.gpus, self.endpoints()))?;
                }
                ensure(wire.gpu_port < self.gpu_ports, &f("gpu_port"), wire.gpu_port, &format!("a port in 0..{}", self.gpu_ports))?;
                ensure(wire.switch < self.switches, &f("switch"), wire.switch, &format!("a switch id in 0..{}", self.switches))?;
                ensure(wire.switch_port < self.switch_ports, &f("switch_port"), wire.switch_port, &format!("a port in 0..{}", self.switch_ports))?;
                ensure(wire.link < nl, &f("link"), wire.link, &format!("a link index in 0..{nl}"))?;
                if let Some(sl) = wire.switch_link {
                    ensure(sl < nl, &f("switch_link"), sl, &format!("a link index in 0..{nl}"))?;
                    ensure(
                        self.links[sl as usize] == self.links[wire.link as usize],
                        &f("switch_link"),
                        sl,
                        &format!("the same link spec at both ends (GPU end uses links[{}])", wire.link),
                    )?;
                }
            }
            let gi = (wire.gpu * self.gpu_ports + wire.gpu_port) as usize;
            if gpu_used[gi] != u32::MAX {
                return Err(FlitsimError::config(
                    f("gpu_port"),
                    format!("{} port {}", self.endpoint_name(wire.gpu), wire.gpu_port),
                    &format!("each GPU port wired at most once (also used by wires[{}])", gpu_used[gi]),
                ));
            }
            gpu_used[gi] = w as u32;
            let si = (wire.switch * self.switch_ports + wire.switch_port) as usize;
            if sw_used[si] != u32::MAX {
                return Err(FlitsimError::config(
                    f("switch_port"),
                    format!("switch {} port {}", wire.switch, wire.switch_port),
                    &format!("each switch port wired at most once (also used by wires[{}])", sw_used[si]),
                ));
            }
            sw_used[si] = w as u32;
        }
        if self.is_graph() {
            ensure(
                self.sim_packets_per_lane == 0,
                "sim_packets_per_lane",
                self.sim_packets_per_lane,
                "0 on a graph fabric: adaptive coalescing makes packets so large that the pipeline fill over several hops (one packet time per store point) moves the time by several %; use sim_packet_bytes (<= 4 KiB keeps it within 1 %: docs/graph.md)",
            )?;
            self.validate_graph(&mut sw_used)?;
            return self.validate_faults_graph();
        }
        // Reachability: GPUs a and b need a common switch.
        let mut on = vec![false; (self.gpus * self.switches) as usize];
        for w in &self.wires {
            on[(w.gpu * self.switches + w.switch) as usize] = true;
        }
        self.check_reachable(&on, "")?;
        if self.faults.is_empty() {
            return Ok(());
        }
        ensure(self.faults.len() <= 1 << 16, "faults", self.faults.len(), "at most 65536 faults")?;
        // Faults: known components and times; after all of them every pair
        // of GPUs must still share a live switch, or traffic could never finish.
        let mut dead_sw = vec![false; self.switches as usize];
        let mut dead_port = vec![false; (self.gpus * self.gpu_ports) as usize];
        for (i, f) in self.faults.iter().enumerate() {
            self.check_fault(i, f, &mut dead_sw, &mut dead_port)?;
        }
        if self.switches > 0 && dead_sw.iter().all(|&d| d) {
            return Err(FlitsimError::config("faults", format!("all {} planes", self.switches), "at least one live switch plane: with every plane dead nothing can move"));
        }
        let mut live = vec![false; (self.gpus * self.switches) as usize];
        for w in &self.wires {
            if !dead_sw[w.switch as usize] && !dead_port[(w.gpu * self.gpu_ports + w.gpu_port) as usize] {
                live[(w.gpu * self.switches + w.switch) as usize] = true;
            }
        }
        self.check_reachable(&live, " after the faults")
    }

    /// Check fault `i` and mark what it kills.
    fn check_fault(&self, i: usize, f: &Fault, dead_sw: &mut [bool], dead_port: &mut [bool]) -> Result<()> {
        let name = |x: &str| format!("faults[{i}].{x}");
        ensure(f.at_ps() <= MAX_FAULT_PS, &name("at_ps"), f.at_ps(), "a time in 0..=2^62 ps (from the start of the run)")?;
        match *f {
            Fault::Link { gpu, port, .. } => {
                ensure(gpu < self.endpoints(), &name("gpu"), gpu, &format!("a GPU id in 0..{}", self.endpoints()))?;
                ensure(port < self.gpu_ports, &name("port"), port, &format!("a port in 0..{}", self.gpu_ports))?;
                ensure(
                    self.wires.iter().any(|w| w.gpu == gpu && w.gpu_port == port),
                    &name("port"),
                    format!("GPU {gpu} port {port}"),
                    "a wired GPU port (this one has no wire to fail)",
                )?;
                dead_port[(gpu * self.gpu_ports + port) as usize] = true;
            }
            Fault::Plane { switch, .. } => {
                ensure(switch < self.switches, &name("switch"), switch, &format!("a switch (plane) id in 0..{}", self.switches))?;
                dead_sw[switch as usize] = true;
            }
            Fault::Nic { nic, .. } => {
                ensure(nic < self.switches, &name("nic"), nic, &format!("a switching-element id in 0..{} whose kind is \"nic\"", self.switches))?;
                let k = self.kind_of(nic).map(|k| k.kind);
                if k != Some(ElementKind::Nic) {
                    return Err(FlitsimError::config(
                        name("nic"),
                        format!("element {nic} ({})", k.map_or("switch", |k| k.name())),
                        "the id of an element of kind \"nic\" (see switch_kinds / switch_kind); use a \"plane\" fault for a switch",
                    ));
                }
                dead_sw[nic as usize] = true;
            }
        }
        Ok(())
    }

    /// GPUs then hosts: endpoint ids `0..gpus + hosts`.
    #[inline]
    pub fn endpoints(&self) -> u32 {
        self.gpus.saturating_add(self.hosts)
    }

    /// A graph fabric (trunks, element kinds or hosts) rather than one switch layer.
    #[inline]
    pub fn is_graph(&self) -> bool {
        self.hosts > 0 || !self.switch_kinds.is_empty() || !self.trunks.is_empty() || !self.static_routes.is_empty()
    }

    /// The kind of switching element `s` (None: a plain switch with `switch` parameters).
    #[inline]
    pub fn kind_of(&self, s: u32) -> Option<&SwitchKind> {
        self.switch_kind.get(s as usize).and_then(|&k| self.switch_kinds.get(k as usize))
    }

    /// Switch-core parameters of element `s`.
    #[inline]
    pub fn params_of(&self, s: u32) -> &SwitchParams {
        self.kind_of(s).map_or(&self.switch, |k| &k.params)
    }

    /// "GPU 3" or "host 0" for endpoint `e`.
    pub fn endpoint_name(&self, e: u32) -> String {
        if e < self.gpus {
            format!("GPU {e}")
        } else {
            format!("host {}", e - self.gpus)
        }
    }

    /// "element 4 (nic \"cx7\")" or "switch 4".
    pub fn element_name(&self, s: u32) -> String {
        match self.kind_of(s) {
            Some(k) => format!("element {s} ({} {:?})", k.kind.name(), k.name),
            None => format!("switch {s}"),
        }
    }

    fn check_params(p: &SwitchParams, field: &str) -> Result<()> {
        ensure(
            p.clock_ghz == 0.0 || (p.clock_ghz.is_finite() && (0.001..=1000.0).contains(&p.clock_ghz)),
            &format!("{field}.clock_ghz"),
            format!("{:?}", p.clock_ghz),
            "0 (derived from the link rate) or 0.001..=1000 GHz",
        )?;
        ensure(matches!(p.queueing.as_str(), "voq" | "fifo"), &format!("{field}.queueing"), &p.queueing, "\"voq\" or \"fifo\"")?;
        Ok(())
    }

    /// Graph fabrics: kinds, trunks, NICs, bridges and routes. `sw_used`
    /// holds the wire using each switch port.
    fn validate_graph(&self, sw_used: &mut [u32]) -> Result<()> {
        ensure(self.switch_kinds.len() <= 256, "switch_kinds", self.switch_kinds.len(), "at most 256 kinds")?;
        if self.switch_kinds.is_empty() {
            ensure(self.switch_kind.is_empty(), "switch_kind", format!("{} entries", self.switch_kind.len()), "empty when switch_kinds is empty")?;
        } else {
            ensure(
                self.switch_kind.len() == self.switches as usize,
                "switch_kind",
                format!("{} entries", self.switch_kind.len()),
                &format!("one kind index per switch ({})", self.switches),
            )?;
        }
        for (i, k) in self.switch_kinds.iter().enumerate() {
            Self::check_params(&k.params, &format!("switch_kinds[{i}].params"))?;
        }
        let nk = self.switch_kinds.len() as u32;
        for (s, &k) in self.switch_kind.iter().enumerate() {
            ensure(k < nk, &format!("switch_kind[{s}]"), k, &format!("an index into switch_kinds (0..{nk})"))?;
        }
        ensure(self.trunks.len() as u64 <= MAX_PORTS, "trunks", self.trunks.len(), "at most 2^24 trunks")?;
        let nl = self.links.len() as u32;
        for (i, t) in self.trunks.iter().enumerate() {
            let f = |n: &str| format!("trunks[{i}].{n}");
            ensure(t.a < self.switches, &f("a"), t.a, &format!("a switch id in 0..{}", self.switches))?;
            ensure(t.b < self.switches, &f("b"), t.b, &format!("a switch id in 0..{}", self.switches))?;
            ensure(t.a_port < self.switch_ports, &f("a_port"), t.a_port, &format!("a port in 0..{}", self.switch_ports))?;
            ensure(t.b_port < self.switch_ports, &f("b_port"), t.b_port, &format!("a port in 0..{}", self.switch_ports))?;
            ensure(t.a != t.b, &f("b"), t.b, &format!("another element than a = {} (a trunk joins two elements)", t.a))?;
            ensure(t.link < nl, &f("link"), t.link, &format!("a link index in 0..{nl}"))?;
            if let Some(d) = t.dateline {
                ensure(d < MAX_DATELINE_DIMS, &f("dateline"), d, &format!("a torus dimension in 0..{MAX_DATELINE_DIMS} (2^dims VC classes, at most 64 VCs)"))?;
            }
            if let Some(bl) = t.b_link {
                ensure(bl < nl, &f("b_link"), bl, &format!("a link index in 0..{nl}"))?;
                ensure(
                    self.links[bl as usize] == self.links[t.link as usize],
                    &f("b_link"),
                    bl,
                    &format!("the same link spec at both ends of the trunk ({} end uses links[{}])", self.element_name(t.a), t.link),
                )?;
            }
            for (sw, port, n) in [(t.a, t.a_port, "a_port"), (t.b, t.b_port, "b_port")] {
                let si = (sw * self.switch_ports + port) as usize;
                let u = sw_used[si];
                if u != u32::MAX {
                    let by = if u & (1 << 31) != 0 { format!("trunks[{}]", u & !(1 << 31)) } else { format!("wires[{u}]") };
                    return Err(FlitsimError::config(f(n), format!("{} port {port}", self.element_name(sw)), &format!("each switch port wired at most once (also used by {by})")));
                }
                sw_used[si] = (1 << 31) | i as u32;
            }
        }
        // Bridges: two ports; NICs: a network side.
        for s in 0..self.switches {
            let Some(k) = self.kind_of(s) else { continue };
            match k.kind {
                ElementKind::Nic => {
                    let net = self.trunks.iter().any(|t| {
                        let other = if t.a == s {
                            Some(t.b)
                        } else if t.b == s {
                            Some(t.a)
                        } else {
                            None
                        };
                        other.and_then(|o| self.kind_of(o)).is_some_and(|ok| matches!(ok.kind, ElementKind::Ethernet | ElementKind::Infiniband | ElementKind::Nic))
                    });
                    if !net {
                        return Err(FlitsimError::config(
                            format!("switch_kind[{s}]"),
                            self.element_name(s),
                            "a NIC with a trunk to an ethernet or infiniband switch (or a peer NIC) on its network side; this one has none",
                        ));
                    }
                }
                ElementKind::Bridge => {
                    let used = (0..self.switch_ports).filter(|&p| sw_used[(s * self.switch_ports + p) as usize] != u32::MAX).count();
                    ensure(used <= 2, &format!("switch_kind[{s}]"), format!("{} with {used} wired ports", self.element_name(s)), "an NVLink bridge joins two ports")?;
                }
                _ => {}
            }
        }
        ensure(self.static_routes.len() as u64 <= MAX_PORTS, "static_routes", self.static_routes.len(), "at most 2^24 entries")?;
        let mut seen = std::collections::HashSet::new();
        for (i, r) in self.static_routes.iter().enumerate() {
            let f = |n: &str| format!("static_routes[{i}].{n}");
            ensure(r.switch < self.switches, &f("switch"), r.switch, &format!("a switch id in 0..{}", self.switches))?;
            ensure(r.dst < self.endpoints(), &f("dst"), r.dst, &format!("an endpoint id in 0..{}", self.endpoints()))?;
            ensure(!r.ports.is_empty() && r.ports.len() <= self.switch_ports as usize, &f("ports"), format!("{:?}", r.ports), "1..=switch_ports output ports")?;
            ensure(seen.insert((r.switch, r.dst)), &f("dst"), r.dst, &format!("one entry per (switch, dst): {} already has one for this dst", self.element_name(r.switch)))?;
            for &o in &r.ports {
                ensure(o < self.switch_ports, &f("ports"), o, &format!("a port in 0..{}", self.switch_ports))?;
                let si = (r.switch * self.switch_ports + o) as usize;
                ensure(sw_used[si] != u32::MAX, &f("ports"), format!("{} port {o}", self.element_name(r.switch)), "a wired port (this one leads nowhere)")?;
            }
        }
        Ok(())
    }

    pub(crate) fn validate_faults_graph(&self) -> Result<()> {
        if self.faults.is_empty() {
            return Ok(());
        }
        ensure(self.faults.len() <= 1 << 16, "faults", self.faults.len(), "at most 65536 faults")?;
        let mut dead_sw = vec![false; self.switches as usize];
        let mut dead_port = vec![false; (self.endpoints() * self.gpu_ports) as usize];
        // Graph fabrics may lose every path of some pair (one NIC per GPU):
        // transfers started after that fail at their start with a
        // ConfigError, so the run up to then still counts.
        for (i, f) in self.faults.iter().enumerate() {
            self.check_fault(i, f, &mut dead_sw, &mut dead_port)?;
        }
        Ok(())
    }

    /// Every GPU wired to a switch and every pair sharing one, by `on[gpu * switches + switch]`.
    fn check_reachable(&self, on: &[bool], when: &str) -> Result<()> {
        let field = if when.is_empty() { "wires" } else { "faults" };
        let row = |g: u32| &on[(g * self.switches) as usize..((g + 1) * self.switches) as usize];
        for a in 0..self.gpus {
            if self.gpus > 1 && !row(a).iter().any(|&x| x) {
                return Err(FlitsimError::config(field, format!("GPU {a}"), &format!("every GPU wired to at least one live switch{when} (this GPU is disconnected)")));
            }
        }
        for a in 0..self.gpus {
            let row_a = row(a);
            for b in a + 1..self.gpus {
                let row_b = row(b);
                if !row_a.iter().zip(row_b).any(|(&x, &y)| x && y) {
                    return Err(FlitsimError::config(
                        field,
                        format!("GPUs {a} and {b}"),
                        &format!("every pair of GPUs sharing at least one live switch{when} (single switch layer); these two share none"),
                    ));
                }
            }
        }
        Ok(())
    }
}
