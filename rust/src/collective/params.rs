//! Collective operations, algorithms, protocols and the (calibrated)
//! parameters of their lowering. Every value that is not public is a field
//! here with its calibration written next to it (docs/collectives.md).

use crate::error::{ensure, FlitsimError, Result};
use serde::{Deserialize, Serialize};

/// Collective operations (NCCL names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    AllReduce,
    AllGather,
    ReduceScatter,
    AllToAll,
    Broadcast,
    Reduce,
    /// One send/recv pair: `members = [src, dst]`.
    SendRecv,
}

impl Op {
    /// nccl-tests bus-bandwidth factor (nccl-tests PERFORMANCE.md): 2(n-1)/n
    /// all_reduce; (n-1)/n all_gather, reduce_scatter, all_to_all; 1
    /// broadcast, reduce, send/recv.
    pub fn busbw_factor(self, n: u32) -> f64 {
        let n = n.max(1) as f64;
        match self {
            Op::AllReduce => 2.0 * (n - 1.0) / n,
            Op::AllGather | Op::ReduceScatter | Op::AllToAll => (n - 1.0) / n,
            Op::Broadcast | Op::Reduce | Op::SendRecv => 1.0,
        }
    }

    /// Whether the operation reduces (costs compute at the receiving GPU).
    pub fn reduces(self) -> bool {
        matches!(self, Op::AllReduce | Op::ReduceScatter | Op::Reduce)
    }
}

/// Lowering algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Algorithm {
    /// The fastest the simulator finds among the candidates whose
    /// closed-form estimate is within 2x of the best (`run::run_collective`;
    /// task graphs: the same choice at flow level, memoized).
    Auto,
    Ring,
    Tree,
    Direct,
    Nvls,
    /// Across domains (all_reduce): reduce-scatter inside each domain, an
    /// all_reduce per rail across domains, all-gather inside each domain
    /// (`super::tiers`).
    Hierarchical,
}

/// NCCL protocol: bytes on the wire per user byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Protocol {
    Auto,
    Simple,
    /// 120 B of data per 128 B line (NCCL src/include/device.h).
    Ll128,
    /// 4 B data + 4 B flag per 8 B (50 %).
    Ll,
}

impl Protocol {
    /// Wire bytes per user byte: 1, 128/120, 2.
    pub fn wire_factor(self) -> f64 {
        match self {
            Protocol::Ll128 => 128.0 / 120.0,
            Protocol::Ll => 2.0,
            _ => 1.0,
        }
    }
}

/// Transport selector for a transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Transport {
    /// P2P where the path allows it, else host-staged; RDMA across nodes.
    #[default]
    Auto,
    /// Peer to peer over the route (a ConfigError where the path forbids it).
    P2p,
    /// Through host memory (the staging host nearest the destination).
    Host,
    /// GPUDirect RDMA through the NICs (only across a network).
    Rdma,
}

impl Transport {
    pub fn name(self) -> &'static str {
        match self {
            Transport::Auto => "auto",
            Transport::P2p => "p2p",
            Transport::Host => "host",
            Transport::Rdma => "rdma",
        }
    }
}

/// Transport settings (part of [`super::CollectiveParams`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TransportParams {
    pub transport: Transport,
    /// Host-staged / PXN chunk, bytes; 0 = the whole transfer in one chunk (unpipelined).
    pub chunk_bytes: u64,
    /// Chunks the intermediate buffer holds (NCCL_STEPS).
    pub slots: u32,
    /// PXN rail routing on (NCCL default) or off (`NCCL_PXN_DISABLE=1`).
    pub pxn: bool,
    /// Extra latency of a PCIe / network path over NVLink, ps (u64::MAX = by protocol).
    pub pcie_extra_ps: u64,
    pub net_extra_ps: u64,
}

/// What to run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CollectiveRequest {
    pub op: Op,
    /// GPU ids in rank order (no repeats).
    pub members: Vec<u32>,
    /// nccl-tests "size", bytes (all_gather / reduce_scatter: the whole
    /// gathered buffer, n x per-rank part).
    pub bytes: u64,
    #[serde(default)]
    pub params: CollectiveParams,
}

/// Lowering and calibration parameters. Defaults: public NCCL constants where
/// they exist (src/graph/tuning.cc, src/graph/topo.h), otherwise calibrated on
/// public H100/H200 nccl-tests results (docs/collectives.md gives each value,
/// its source and why). The same values serve every fabric preset: rates are
/// fractions of the fabric's own link payload rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CollectiveParams {
    #[serde(default = "d_algo")]
    pub algorithm: Algorithm,
    #[serde(default = "d_proto")]
    pub protocol: Protocol,
    /// Channels (0 = auto: as many as keep at least `channel_min_bytes` of
    /// the per-rank part per channel, at most `max_channels`; NCCL lowers its
    /// channel count for small sizes the same way, enqueue.cc).
    #[serde(default)]
    pub channels: u32,
    /// Most channels auto picks (16: NCCL's ring/NVLS channel count on
    /// NVSwitch systems, assumed).
    #[serde(default = "d_max_ch")]
    pub max_channels: u32,
    /// Pipelining chunk per channel and step, bytes (0 = 1 MiB: NCCL's Simple
    /// slice, 2 steps x 512 KiB = NCCL_BUFFSIZE 4 MiB / NCCL_STEPS 8).
    #[serde(default)]
    pub chunk_bytes: u64,
    /// Root rank (index into members) for broadcast and reduce.
    #[serde(default)]
    pub root: u32,
    /// Element size, bytes (4 = float32, nccl-tests' default type).
    #[serde(default = "d_dtype")]
    pub dtype_bytes: u32,
    /// GPU injection rate as a fraction of its links' payload data rate,
    /// charged per protocol packet on (payload + 8) bytes (see
    /// `run::INJECTION_PACKET_OVERHEAD_BYTES`): 0.849 gives NCCL topo.h's SM90
    /// 20.6 GB/s per link at 256-byte packets (8xH100 ring busbw ~370, CE p2p
    /// 371-377 GB/s) and ~20 GB/s at 128 B (nccl-tests issue 149). Applied
    /// only when the fabric's own `gpu.injection_bytes_per_s` is 0.
    #[serde(default = "d_link_eff")]
    pub link_efficiency: f64,
    /// Cap on the LL protocol's user-data rate per GPU as a fraction of its
    /// links' payload rate (below it, LL runs at NCCL's fixed fraction of the
    /// Simple rate, `lower::LL_RING_REDUCE_RATIO`): LL writes 8-byte data+flag
    /// words that the receiver polls, so the SMs, not the wire, bound it
    /// (0.313 = NCCL tuning.cc llMaxBws
    /// Hopper single node 141 GB/s / 450 GB/s; Blackwell's 282 / 900 and
    /// Ampere's 87.7 / 300 give the same fraction within 7 %).
    #[serde(default = "d_ll_eff")]
    pub ll_efficiency: f64,
    /// LL128 user-data rate per channel as a fraction of the GPU's link
    /// payload rate (0.0816 = NCCL tuning.cc perChMaxRingLL128Bws Hopper 36.7
    /// GB/s / 450 GB/s; Blackwell 73.4 / 900).
    #[serde(default = "d_ll128_ch_eff")]
    pub ll128_channel_efficiency: f64,
    /// Host-side cost of one collective call as nccl-tests times it (kernel
    /// launch, enqueue, the event pair around the iteration), ps; 0 = none.
    /// Not public: calibrated on the H100/H200 small-size points
    /// (docs/collectives.md).
    #[serde(default = "d_host")]
    pub host_launch_ps: u64,
    /// Device-side base latency of the collective, ps (0 = by algorithm and
    /// protocol: NCCL tuning.cc baseLat, ring LL 6.6 / LL128 14.0 / Simple
    /// 8.4 us, tree 6.8 / 14.0 / 8.4 us).
    #[serde(default)]
    pub launch_ps: u64,
    /// Per-step synchronisation latency on top of the fabric's own, ps (0 =
    /// by algorithm and protocol: NCCL tuning.cc NVLink hwLat, ring LL 0.6 /
    /// LL128 1.9 / Simple 3.4 us, tree 0.6 / 1.25 / 4.0 us, less the ~0.2 us
    /// per step the fabric itself models).
    #[serde(default)]
    pub step_latency_ps: u64,
    /// NVLS engine throughput per GPU as a fraction of its links' payload
    /// data rate (not public; calibrated: 0.687 fits the 8xH100 n = 4..8
    /// series of NCCL issue 1455 at 2 GiB, 0.657 the 8xH200 Azure 1 GB and
    /// aiconfigurator 512 MiB points (`flitsim calibrate nccl-tests` on
    /// tests/data/nccl); 0.672 splits the difference, docs/collectives.md).
    #[serde(default = "d_nvls_eff")]
    pub nvls_efficiency: f64,
    /// NVLS latency = base + per_rank x n on top of the host launch, ps (not
    /// public; calibrated: 8xH200 Azure 1 KB / 1 MB fit 24.6 us at n = 8
    /// (`flitsim calibrate`), 2xH100 128 B 5.56 us with CUDA graphs (NCCL
    /// issue 1259) at n = 2; the line through both has base ~0 and 3.07 us
    /// per rank).
    #[serde(default = "d_nvls_base")]
    pub nvls_base_ps: u64,
    #[serde(default = "d_nvls_rank")]
    pub nvls_per_rank_ps: u64,
    /// Reduction compute at the receiving GPU, bytes of reduced data per s
    /// (0 = free). Default in Python: HBM bandwidth / 3 (read two operands,
    /// write one), assumed.
    #[serde(default)]
    pub reduce_bytes_per_s: u64,
    /// Simulated packet size request (speed lever): 0 = automatic (see
    /// `run::choose_sim_packets`); a request that could move the answer by
    /// more than 1 % is lowered and reported. Used only if the fabric's is 0.
    #[serde(default)]
    pub sim_packet_bytes: u64,
    /// Transport of every GPU -> GPU transfer (`super::transport`): `auto`
    /// (P2P where the path allows it, else host-staged; RDMA across nodes),
    /// or forced `p2p`, `host`, `rdma`.
    #[serde(default)]
    pub transport: Transport,
    /// Host-staged / PXN pipelining chunk, bytes (default 512 KiB: NCCL_BUFFSIZE
    /// 4 MiB / NCCL_STEPS 8); 0 = the whole transfer in one chunk (unpipelined).
    #[serde(default = "d_host_chunk")]
    pub host_chunk_bytes: u64,
    /// Staging chunk of point-to-point operations (send/recv, all_to_all:
    /// algorithm `direct`), bytes; 0 (default) = NCCL's `p2pChunkSize` by path
    /// (src/init.cc): 512 KiB (`NCCL_P2P_NVL_CHUNKSIZE`) where every pair is
    /// NVLink, else 128 KiB (`NCCL_P2P_PCI_CHUNKSIZE` in one node,
    /// `NCCL_P2P_NET_CHUNKSIZE` across nodes). `host_chunk_bytes = 0` keeps
    /// these unpipelined too.
    #[serde(default)]
    pub p2p_chunk_bytes: u64,
    /// Chunks an intermediate buffer holds (default 8 = NCCL_STEPS).
    #[serde(default = "d_host_slots")]
    pub host_slots: u32,
    /// Flow level only, task-graph transfers: run staged copies of 8 or more
    /// buffers as chunk trains (`crate::collective::expand_train`; docs/fidelity.md
    /// "Chunk trains"). A speed lever, exact at
    /// constant leg rates, but off by 3-5 % (up to 17 % with 128 KiB chunks) on
    /// adversarial pairs of staggered copies: off by default, opted into where
    /// it was checked (the main map). `FLITSIM_CHUNK_TRAINS=0` / `1` overrides.
    #[serde(default)]
    pub chunk_trains: bool,
    /// PXN rail routing across nodes (NCCL default on; NCCL_PXN_DISABLE=1 turns it off).
    #[serde(default = "d_true")]
    pub pxn: bool,
    /// Extra per-transfer latency of a PCIe / host-staged path over NVLink,
    /// ps (0 = by protocol: NCCL tuning.cc hwLat PCI - NVLink, Simple 2.3 us).
    #[serde(default)]
    pub pcie_extra_latency_ps: u64,
    /// Extra per-transfer latency of a network path over NVLink, ps (0 = by
    /// protocol: NCCL tuning.cc hwLat NET - NVLink, Simple 10.6 us).
    #[serde(default)]
    pub net_extra_latency_ps: u64,
}

/// NCCL src/init.cc `NCCL_P2P_NVL_CHUNKSIZE` default: p2p chunk where every pair is NVLink.
pub const P2P_NVL_CHUNK_BYTES: u64 = 512 * 1024;
/// NCCL src/init.cc `NCCL_P2P_PCI_CHUNKSIZE` (one node, not all NVLink) and
/// `NCCL_P2P_NET_CHUNKSIZE` (across nodes) defaults: both 128 KiB.
pub const P2P_PCI_CHUNK_BYTES: u64 = 128 * 1024;

fn d_host_chunk() -> u64 {
    512 * 1024
}
fn d_host_slots() -> u32 {
    8
}
fn d_true() -> bool {
    true
}

fn d_algo() -> Algorithm {
    Algorithm::Auto
}
fn d_proto() -> Protocol {
    Protocol::Auto
}
fn d_dtype() -> u32 {
    4
}
fn d_max_ch() -> u32 {
    16
}
fn d_link_eff() -> f64 {
    0.849
}
fn d_ll_eff() -> f64 {
    141.0 / 450.0
}
fn d_ll128_ch_eff() -> f64 {
    36.7 / 450.0
}
fn d_host() -> u64 {
    HOST_LAUNCH_PS
}
fn d_nvls_eff() -> f64 {
    0.672
}
fn d_nvls_base() -> u64 {
    NVLS_BASE_PS
}
fn d_nvls_rank() -> u64 {
    NVLS_PER_RANK_PS
}

/// Calibrated injection overhead per protocol packet, bytes at the
/// injection rate: with `link_efficiency` 0.849 it reproduces both public
/// points, copy-engine 256-byte packets at 20.6 GB/s per NVLink 4 link (NCCL
/// topo.h SM90; CE p2p 371-377 GB/s over 18 links, NCCL issue 1264) and SM
/// 128-byte stores at ~20 GB/s (nccl-tests issue 149): (256 + 8) / (0.849 x
/// 25) -> 20.6 and (128 + 8) / (0.849 x 25) -> 20.0 GB/s.
pub const INJECTION_PACKET_OVERHEAD_BYTES: u32 = 8;

/// Calibrated host launch cost, ps: `flitsim calibrate nccl-tests` on the
/// three H200 logs in tests/data/nccl with only `host_launch_ps` free
/// (2.89 us, rows <= 1 MiB; docs/collectives.md). Was 4.06 us before ring LL
/// ran at NCCL's 1/4-of-Simple rate, when the 1 MiB ring row pulled it up.
pub const HOST_LAUNCH_PS: u64 = 2_890_000;
/// Calibrated NVLS latency terms, ps (docs/collectives.md).
pub const NVLS_BASE_PS: u64 = 0;
pub const NVLS_PER_RANK_PS: u64 = 3_070_000;
/// Per-step latency the fabric itself already models (switch hops, link
/// flight, credit return), subtracted from NCCL's hwLat, ps.
const FABRIC_STEP_PS: u64 = 200_000;
/// Largest latency parameter accepted, ps (1 s: far beyond any collective).
pub const MAX_LATENCY_PS: u64 = 1_000_000_000_000;

impl Default for CollectiveParams {
    fn default() -> Self {
        CollectiveParams {
            algorithm: d_algo(),
            protocol: d_proto(),
            channels: 0,
            max_channels: d_max_ch(),
            chunk_bytes: 0,
            root: 0,
            dtype_bytes: d_dtype(),
            link_efficiency: d_link_eff(),
            ll_efficiency: d_ll_eff(),
            ll128_channel_efficiency: d_ll128_ch_eff(),
            host_launch_ps: d_host(),
            launch_ps: 0,
            step_latency_ps: 0,
            nvls_efficiency: d_nvls_eff(),
            nvls_base_ps: d_nvls_base(),
            nvls_per_rank_ps: d_nvls_rank(),
            reduce_bytes_per_s: 0,
            sim_packet_bytes: 0,
            transport: Transport::Auto,
            host_chunk_bytes: d_host_chunk(),
            p2p_chunk_bytes: 0,
            host_slots: d_host_slots(),
            chunk_trains: false,
            pxn: true,
            pcie_extra_latency_ps: 0,
            net_extra_latency_ps: 0,
        }
    }
}

impl CollectiveParams {
    /// Launch latency (host + device base) for an algorithm and protocol, ps.
    pub fn launch_for(&self, a: Algorithm, p: Protocol) -> u64 {
        let base = if self.launch_ps > 0 {
            self.launch_ps
        } else {
            match (a, p) {
                (Algorithm::Tree, Protocol::Ll) => 6_800_000,
                (_, Protocol::Ll) => 6_600_000,
                (_, Protocol::Ll128) => 14_000_000,
                _ => 8_400_000,
            }
        };
        self.host_launch_ps + base
    }

    /// Per-step latency for an algorithm and protocol, ps.
    pub fn step_for(&self, a: Algorithm, p: Protocol) -> u64 {
        if self.step_latency_ps > 0 {
            return self.step_latency_ps;
        }
        let hw = match (a, p) {
            (_, Protocol::Ll) => 600_000,
            (Algorithm::Tree, Protocol::Ll128) => 1_250_000,
            (_, Protocol::Ll128) => 1_900_000,
            (Algorithm::Tree, _) => 4_000_000,
            _ => 3_400_000,
        };
        hw - FABRIC_STEP_PS
    }

    /// The transport settings of a collective lowered with `algorithm` over
    /// a group whose every pair is NVLink (`all_nvlink`, from the transport's
    /// `Reach::all_nvlink`) or not: point-to-point operations (`direct`) stage in
    /// NCCL's p2p chunk (see `p2p_chunk_bytes`), everything else in `host_chunk_bytes`.
    pub fn transport_params_for(&self, algorithm: Algorithm, all_nvlink: bool) -> TransportParams {
        let mut t = self.transport_params();
        if algorithm == Algorithm::Direct && self.host_chunk_bytes != 0 {
            t.chunk_bytes = if self.p2p_chunk_bytes != 0 {
                self.p2p_chunk_bytes
            } else if all_nvlink {
                P2P_NVL_CHUNK_BYTES
            } else {
                P2P_PCI_CHUNK_BYTES
            };
        }
        t
    }

    /// The transport settings.
    pub fn transport_params(&self) -> TransportParams {
        let or_auto = |v: u64| if v == 0 { u64::MAX } else { v };
        TransportParams {
            transport: self.transport,
            chunk_bytes: self.host_chunk_bytes,
            slots: self.host_slots,
            pxn: self.pxn,
            pcie_extra_ps: or_auto(self.pcie_extra_latency_ps),
            net_extra_ps: or_auto(self.net_extra_latency_ps),
        }
    }

    /// NVLS latency for `n` ranks (host launch included), ps.
    pub fn nvls_latency(&self, n: u32) -> u64 {
        self.host_launch_ps + self.nvls_base_ps + self.nvls_per_rank_ps * n as u64
    }

    /// Validate value ranges: every parameter bounded so that no derived
    /// time or rate can overflow or silently turn absurd.
    ///
    /// # Errors
    /// `Config` naming the field, its value and the range allowed.
    pub fn validate(&self) -> Result<()> {
        ensure(self.dtype_bytes >= 1 && self.dtype_bytes <= 16, "dtype_bytes", self.dtype_bytes, "1..=16 bytes per element")?;
        let frac = |name: &str, v: f64, lo: f64, hi: f64| ensure(v.is_finite() && v >= lo && v <= hi, name, v, &format!("a fraction of the link payload rate in [{lo}, {hi}]"));
        frac("link_efficiency", self.link_efficiency, 0.01, 1.0)?;
        frac("ll_efficiency", self.ll_efficiency, 0.001, 1.0)?;
        frac("ll128_channel_efficiency", self.ll128_channel_efficiency, 0.0001, 1.0)?;
        frac("nvls_efficiency", self.nvls_efficiency, 0.01, 4.0)?;
        ensure(self.channels <= 64, "channels", self.channels, "0 (auto) or 1..=64")?;
        ensure((1..=64).contains(&self.max_channels), "max_channels", self.max_channels, "1..=64")?;
        ensure(self.chunk_bytes == 0 || self.chunk_bytes >= self.dtype_bytes as u64, "chunk_bytes", self.chunk_bytes, "0 (auto) or at least one element")?;
        ensure(self.chunk_bytes <= 1 << 36, "chunk_bytes", self.chunk_bytes, "0 (auto) or at most 64 GiB")?;
        for (name, v) in [("host_launch_ps", self.host_launch_ps), ("launch_ps", self.launch_ps), ("step_latency_ps", self.step_latency_ps), ("nvls_base_ps", self.nvls_base_ps), ("nvls_per_rank_ps", self.nvls_per_rank_ps)] {
            ensure(v <= MAX_LATENCY_PS, name, v, "0..=10^12 ps (1 s)")?;
        }
        ensure(self.reduce_bytes_per_s == 0 || self.reduce_bytes_per_s >= 1_000_000, "reduce_bytes_per_s", self.reduce_bytes_per_s, "0 (free) or at least 10^6 bytes/s")?;
        ensure(self.host_chunk_bytes == 0 || (self.host_chunk_bytes >= 4096 && self.host_chunk_bytes <= 1 << 36), "host_chunk_bytes", self.host_chunk_bytes, "0 (unpipelined) or 4 KiB..=64 GiB")?;
        ensure(self.p2p_chunk_bytes == 0 || (self.p2p_chunk_bytes >= 4096 && self.p2p_chunk_bytes <= 1 << 36), "p2p_chunk_bytes", self.p2p_chunk_bytes, "0 (NCCL's by path) or 4 KiB..=64 GiB")?;
        ensure((1..=1024).contains(&self.host_slots), "host_slots", self.host_slots, "1..=1024 buffer slots")?;
        for (name, v) in [("pcie_extra_latency_ps", self.pcie_extra_latency_ps), ("net_extra_latency_ps", self.net_extra_latency_ps)] {
            ensure(v <= MAX_LATENCY_PS, name, v, "0 (by protocol) ..=10^12 ps (1 s)")?;
        }
        if self.sim_packet_bytes > 1 << 20 {
            return Err(FlitsimError::config("sim_packet_bytes", self.sim_packet_bytes, "0 (auto) or up to 1 MiB"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p2p_operations_stage_in_nccls_p2p_chunk() {
        // NCCL src/init.cc: p2pChunkSize 512 KiB all-NVLink, 128 KiB over PCIe / the network
        let (pcie, nv) = (false, true);
        let p = CollectiveParams::default();
        assert_eq!(p.transport_params_for(Algorithm::Direct, pcie).chunk_bytes, 128 * 1024);
        assert_eq!(p.transport_params_for(Algorithm::Direct, nv).chunk_bytes, 512 * 1024);
        // collectives keep the Simple slot, NCCL_BUFFSIZE / NCCL_STEPS
        assert_eq!(p.transport_params_for(Algorithm::Ring, pcie).chunk_bytes, 512 * 1024);
        let fixed = CollectiveParams { p2p_chunk_bytes: 64 * 1024, ..Default::default() };
        assert_eq!(fixed.transport_params_for(Algorithm::Direct, pcie).chunk_bytes, 64 * 1024);
        let unpiped = CollectiveParams { host_chunk_bytes: 0, ..Default::default() };
        assert_eq!(unpiped.transport_params_for(Algorithm::Direct, pcie).chunk_bytes, 0);
        let bad = CollectiveParams { p2p_chunk_bytes: 100, ..Default::default() };
        assert!(bad.validate().unwrap_err().to_string().contains("p2p_chunk_bytes"));
    }
}
