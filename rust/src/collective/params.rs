//! Collective operations, algorithms, protocols and the (calibrated)
//! parameters of their lowering. Every value that is not public is a field
//! here with its calibration written next to it (docs/collectives.md).

use crate::error::{ensure, FlitsimError, Result};
use crate::taskgraph::CollectiveKind;
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
        match self {
            Op::SendRecv => 1.0,
            Op::AllReduce => CollectiveKind::AllReduce.busbw_factor(n),
            Op::AllGather => CollectiveKind::AllGather.busbw_factor(n),
            Op::ReduceScatter => CollectiveKind::ReduceScatter.busbw_factor(n),
            Op::AllToAll => CollectiveKind::AllToAll.busbw_factor(n),
            Op::Broadcast => CollectiveKind::Broadcast.busbw_factor(n),
            Op::Reduce => CollectiveKind::Reduce.busbw_factor(n),
        }
    }

    pub fn from_kind(k: CollectiveKind) -> Self {
        match k {
            CollectiveKind::AllReduce => Op::AllReduce,
            CollectiveKind::AllGather => Op::AllGather,
            CollectiveKind::ReduceScatter => Op::ReduceScatter,
            CollectiveKind::AllToAll => Op::AllToAll,
            CollectiveKind::Broadcast => Op::Broadcast,
            CollectiveKind::Reduce => Op::Reduce,
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
    /// Pick the fastest by the closed-form estimate (as NCCL's tuner does).
    Auto,
    Ring,
    Tree,
    Direct,
    Nvls,
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
/// they exist, otherwise calibrated on the H100/H200 logs of REFERENCE.md
/// (docs/collectives.md gives each value and why).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CollectiveParams {
    #[serde(default = "d_algo")]
    pub algorithm: Algorithm,
    #[serde(default = "d_proto")]
    pub protocol: Protocol,
    /// Ring/tree channels (0 = auto: up to 8, fewer for small sizes so each
    /// channel's per-rank part is at least 64 KiB).
    #[serde(default)]
    pub channels: u32,
    /// Pipelining chunk per channel and step, bytes (0 = 1 MiB: NCCL's Simple
    /// all-reduce slice, 2 steps x 512 KiB = NCCL_BUFFSIZE 4 MiB / NCCL_STEPS 8).
    #[serde(default)]
    pub chunk_bytes: u64,
    /// Root rank (index into members) for broadcast and reduce.
    #[serde(default)]
    pub root: u32,
    /// Element size, bytes (4 = float32, nccl-tests' default type).
    #[serde(default = "d_dtype")]
    pub dtype_bytes: u32,
    /// GPU injection limit as a fraction of its links' payload data rate
    /// (calibrated, assumed: 0.824 = NCCL topo.h SM90 20.6 GB/s per link / 25
    /// GB/s; matches 8xH100 ring busbw ~370 and CE p2p 371-377 GB/s).
    /// Applied only when the fabric's own `gpu.injection_bytes_per_s` is 0.
    #[serde(default = "d_link_eff")]
    pub link_efficiency: f64,
    /// Per-collective launch/base latency, ps (0 = by protocol: NCCL
    /// tuning.cc ring baseLat LL 3.6, LL128 10.0, Simple 8.4 us).
    #[serde(default)]
    pub launch_ps: u64,
    /// Per-step synchronisation latency on top of the fabric's own, ps (0 =
    /// by protocol: NCCL tuning.cc NVLink ring hwLat LL 0.47, LL128 1.9,
    /// Simple 3.4 us, less the ~0.2 us the fabric itself models).
    #[serde(default)]
    pub step_latency_ps: u64,
    /// NVLS engine throughput per GPU as a fraction of its links' payload
    /// data rate (calibrated, assumed: 0.687 from 8xH100 NVLS busbw 480 and
    /// the n = 4..8 series of NCCL issue 1455).
    #[serde(default = "d_nvls_eff")]
    pub nvls_efficiency: f64,
    /// NVLS latency = base + per_rank x n, ps (calibrated on 2xH100 128 B
    /// 5.56 us, NCCL issue 1259, and 8xH200 1 KB, Azure; assumed).
    #[serde(default = "d_nvls_base")]
    pub nvls_base_ps: u64,
    #[serde(default = "d_nvls_rank")]
    pub nvls_per_rank_ps: u64,
    /// Reduction compute at the receiving GPU, bytes of reduced data per s
    /// (0 = free). Default in Python: HBM bandwidth / 3 (read two operands,
    /// write one), assumed.
    #[serde(default)]
    pub reduce_bytes_per_s: u64,
    /// Simulated packet size: 0 = automatic (largest power of two, a multiple
    /// of the payload, that gives every port at least one packet of a typical
    /// transfer, at most 16 KiB: the switch model allocates buffer slots per flit, so bigger packets cost set-up time), used only if the fabric's is 0.
    #[serde(default)]
    pub sim_packet_bytes: u64,
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
fn d_link_eff() -> f64 {
    20.6 / 25.0
}
fn d_nvls_eff() -> f64 {
    0.687
}
fn d_nvls_base() -> u64 {
    1_500_000
}
fn d_nvls_rank() -> u64 {
    2_000_000
}

impl Default for CollectiveParams {
    fn default() -> Self {
        CollectiveParams {
            algorithm: d_algo(),
            protocol: d_proto(),
            channels: 0,
            chunk_bytes: 0,
            root: 0,
            dtype_bytes: d_dtype(),
            link_efficiency: d_link_eff(),
            launch_ps: 0,
            step_latency_ps: 0,
            nvls_efficiency: d_nvls_eff(),
            nvls_base_ps: d_nvls_base(),
            nvls_per_rank_ps: d_nvls_rank(),
            reduce_bytes_per_s: 0,
            sim_packet_bytes: 0,
        }
    }
}

impl CollectiveParams {
    /// Launch/base latency for a protocol, ps.
    pub fn launch_for(&self, p: Protocol) -> u64 {
        if self.launch_ps > 0 {
            return self.launch_ps;
        }
        match p {
            Protocol::Ll => 3_600_000,
            Protocol::Ll128 => 10_000_000,
            _ => 8_400_000,
        }
    }

    /// Per-step latency for a protocol, ps.
    pub fn step_for(&self, p: Protocol) -> u64 {
        if self.step_latency_ps > 0 {
            return self.step_latency_ps;
        }
        match p {
            Protocol::Ll => 270_000,
            Protocol::Ll128 => 1_700_000,
            _ => 3_200_000,
        }
    }

    /// NVLS latency for `n` ranks, ps.
    pub fn nvls_latency(&self, n: u32) -> u64 {
        self.nvls_base_ps.saturating_add(self.nvls_per_rank_ps.saturating_mul(n as u64))
    }

    /// Validate value ranges.
    pub fn validate(&self) -> Result<()> {
        ensure(self.dtype_bytes >= 1 && self.dtype_bytes <= 16, "dtype_bytes", self.dtype_bytes, "1..=16 bytes per element")?;
        ensure(self.link_efficiency > 0.0 && self.link_efficiency <= 1.0, "link_efficiency", self.link_efficiency, "a fraction in (0, 1]")?;
        ensure(self.nvls_efficiency > 0.0 && self.nvls_efficiency <= 4.0, "nvls_efficiency", self.nvls_efficiency, "a fraction in (0, 4]")?;
        ensure(self.channels <= 64, "channels", self.channels, "0 (auto) or 1..=64")?;
        ensure(self.chunk_bytes == 0 || self.chunk_bytes >= self.dtype_bytes as u64, "chunk_bytes", self.chunk_bytes, "0 (auto) or at least one element")?;
        if self.sim_packet_bytes > 1 << 20 {
            return Err(FlitsimError::config("sim_packet_bytes", self.sim_packet_bytes, "0 (auto) or up to 1 MiB"));
        }
        Ok(())
    }
}
