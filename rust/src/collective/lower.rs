//! Lowering: a collective request becomes a DAG of transfers and delays.
//!
//! What the DAG carries is NCCL's mechanism, step by step: a launch delay
//! (host launch + the algorithm/protocol's device base latency), per-step
//! synchronisation latency on the edges, protocol wire expansion (LL 2x,
//! LL128 128/120) on the transfers, and the protocol's SM-side throughput
//! (LL per GPU, LL128 per channel) as a floor on each transfer's duration;
//! chunks pipeline along the ring / chain. The fabric adds the rest (link
//! serialisation, switch arbitration, credits, contention).

use super::params::{Algorithm, CollectiveParams, Op, Protocol};
use crate::error::{FlitsimError, Result};

/// One DAG node.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum NodeKind {
    /// GPU `src` -> GPU `dst`; `loopback`: into the switches and back to `src`
    /// (NVLS), which loads both directions of the GPU's links. `min_ps`: the
    /// sender's protocol throughput floor (LL / LL128 copy loops): the node
    /// ends no earlier than `min_ps` after it starts.
    Transfer { src: u32, dst: u32, bytes: u64, loopback: bool, min_ps: u64 },
    /// A fixed delay (launch latency, one NVLS engine chunk).
    Delay { ps: u64 },
}

/// Nodes and edges (pred, succ, delay_ps): succ starts at max over its
/// predecessors of (end + delay).
#[derive(Debug, Clone, Default)]
pub struct Dag {
    pub nodes: Vec<NodeKind>,
    pub edges: Vec<(u32, u32, u64)>,
}

impl Dag {
    fn with_capacity(nodes: u64, edges: u64) -> Result<Self> {
        let mut d = Dag::default();
        let fail = |what: &str, k: u64| FlitsimError::config("nbytes", format!("a DAG of {k} {what}"), "a collective whose transfer DAG fits in memory (raise chunk_bytes)");
        d.nodes.try_reserve_exact(nodes as usize).map_err(|_| fail("nodes", nodes))?;
        d.edges.try_reserve_exact(edges as usize).map_err(|_| fail("edges", edges))?;
        Ok(d)
    }
    fn add(&mut self, k: NodeKind) -> u32 {
        self.push(k)
    }
    /// Append a node; its id.
    pub(crate) fn push(&mut self, k: NodeKind) -> u32 {
        self.nodes.push(k);
        (self.nodes.len() - 1) as u32
    }
    pub(crate) fn edge(&mut self, a: u32, b: u32, delay: u64) {
        self.edges.push((a, b, delay));
    }
    /// The edges grouped per node in CSR form, in edge order: `(off, adj)` with
    /// node v's entries at `adj[off[v]..off[v + 1]]`, each (other end, delay_ps);
    /// successors of v when `by_pred` (edges leaving v), else its predecessors.
    pub(crate) fn csr(&self, by_pred: bool) -> (Vec<u32>, Vec<(u32, u64)>) {
        let n = self.nodes.len();
        let mut off = vec![0u32; n + 1];
        for &(a, b, _) in &self.edges {
            off[if by_pred { a } else { b } as usize + 1] += 1;
        }
        for i in 0..n {
            off[i + 1] += off[i];
        }
        let mut fill = off.clone();
        let mut adj = vec![(0u32, 0u64); self.edges.len()];
        for &(a, b, d) in &self.edges {
            let (at, other) = if by_pred { (a, b) } else { (b, a) };
            adj[fill[at as usize] as usize] = (other, d);
            fill[at as usize] += 1;
        }
        (off, adj)
    }
    /// Sum of transfer bytes leaving each GPU (loopback counted), length `gpus`.
    pub fn bytes_sent(&self, gpus: u32) -> Vec<u64> {
        self.bytes_per_gpu(gpus).0
    }
    /// Sums of transfer bytes leaving and reaching each GPU (loopback
    /// counted), each of length `gpus`; endpoints beyond (host memory on graph
    /// fabrics) are not GPUs and are left out.
    pub fn bytes_per_gpu(&self, gpus: u32) -> (Vec<u64>, Vec<u64>) {
        let (mut sent, mut recv) = (vec![0u64; gpus as usize], vec![0u64; gpus as usize]);
        for n in &self.nodes {
            if let NodeKind::Transfer { src, dst, bytes, .. } = *n {
                if let Some(x) = sent.get_mut(src as usize) {
                    *x += bytes;
                }
                if let Some(x) = recv.get_mut(dst as usize) {
                    *x += bytes;
                }
            }
        }
        (sent, recv)
    }
}

/// What the lowering needs to know about the fabric.
#[derive(Debug, Clone, Copy)]
pub struct FabricInfo {
    pub gpus: u32,
    pub gpu_ports: u32,
    /// Payload data rate of one GPU port, bytes/s.
    pub port_bytes_per_s: f64,
    /// Switches can reduce and multicast (NVLS).
    pub nvls: bool,
}

/// A lowered collective.
#[derive(Debug, Clone)]
pub struct Lowered {
    pub dag: Dag,
    pub algorithm: Algorithm,
    pub protocol: Protocol,
    pub channels: u32,
    pub chunk_bytes: u64,
    /// Closed-form time estimate of the (algorithm, protocol) run, ps.
    pub estimate_ps: f64,
}

const MIB: u64 = 1 << 20;
/// Chunks of one send/recv pair in flight (NCCL's p2p buffers hold several steps).
const P2P_WINDOW: usize = 4;
/// Chunks of one GPU's NVLS traffic in flight.
const NVLS_WINDOW: usize = 4;
/// Largest DAG one collective may lower to (nodes): beyond it the memory
/// (about 100 B per node with its edges) is refused, not allocated.
pub const MAX_DAG_NODES: u64 = 1 << 22;
/// Smallest per-rank part per channel before auto adds a channel (NCCL's
/// thread thresholds: 64 B x 512 threads, enqueue.cc), bytes.
const CHANNEL_MIN_BYTES: u64 = 32 * 1024;
/// Chunks per channel and tree level NCCL's tree chunk sizing aims for, and
/// the smallest chunk it shrinks to, bytes (enqueue.cc, Simple protocol).
pub(crate) const TREE_CHUNKS_PER_LEVEL: u64 = 8;
pub(crate) const TREE_MIN_CHUNK_BYTES: u64 = 64 * 1024;

/// Split `total` elements into `parts`, part `i` (the first `total % parts` get one more).
fn split(total: u64, parts: u64, i: u64) -> u64 {
    total / parts + u64::from(i < total % parts)
}

pub(crate) fn algo_name(a: Algorithm) -> &'static str {
    match a {
        Algorithm::Auto => "auto",
        Algorithm::Ring => "ring",
        Algorithm::Tree => "tree",
        Algorithm::Direct => "direct",
        Algorithm::Nvls => "nvls",
        Algorithm::Hierarchical => "hierarchical",
    }
}

/// Algorithms each operation supports (first = default when not auto-picked).
fn supported(op: Op) -> &'static [Algorithm] {
    match op {
        Op::AllReduce => &[Algorithm::Ring, Algorithm::Tree, Algorithm::Nvls],
        Op::AllGather | Op::ReduceScatter => &[Algorithm::Ring, Algorithm::Nvls],
        Op::Broadcast | Op::Reduce => &[Algorithm::Ring],
        Op::AllToAll | Op::SendRecv => &[Algorithm::Direct],
    }
}

/// Per-GPU NVLS bytes each way, as a multiple of the size: all_reduce sends
/// every contribution in and gets the reduced result back, S (n+1)/n; for
/// all_gather the ingress (n-1)/n S of the others' shards bounds it (the
/// multicast replicates in the switch), for reduce_scatter the egress.
fn nvls_factor(op: Op, n: u32) -> f64 {
    let nn = n as f64;
    match op {
        Op::AllReduce => (nn + 1.0) / nn,
        _ => (nn - 1.0) / nn,
    }
}

/// NCCL's tuning-model ratios of the LL protocol's bus bandwidth to the
/// Simple protocol's on the same channels (src/graph/tuning.cc, "model
/// refinements"): ring LL moves 1/4 of Simple's rate for all_reduce and
/// reduce (each step receives, reduces and re-sends 8-byte data+flag lines
/// from the SMs) and 1/3 for the copy-only ops; tree LL moves 0.92 / 3.8.
/// (NCCL uses 1/4 for every op across nodes; here the one-domain ratio is
/// used for rings across domains, where the NIC bounds them anyway.) The result is then capped at `llMaxBws`
/// (`ll_efficiency`).
pub(crate) const LL_RING_REDUCE_RATIO: f64 = 1.0 / 4.0;
pub(crate) const LL_RING_COPY_RATIO: f64 = 1.0 / 3.0;
pub(crate) const LL_TREE_RATIO: f64 = 0.92 / 3.8;
/// Payload of the packets the Simple protocol's reference rate is charged
/// at, bytes (copy-engine sized, NCCL topo.h's SM90 20.6 GB/s per link).
const SIMPLE_REFERENCE_PAYLOAD_BYTES: f64 = 256.0;

/// The Simple protocol's user-data rate of one GPU (bytes/s): its injection
/// limit at `link_efficiency`, each packet costing its payload plus
/// `params::INJECTION_PACKET_OVERHEAD_BYTES`.
pub(crate) fn simple_rate(p: &CollectiveParams, f: &FabricInfo) -> f64 {
    let gpu = f.port_bytes_per_s * f.gpu_ports as f64;
    let ov = super::params::INJECTION_PACKET_OVERHEAD_BYTES as f64;
    gpu * p.link_efficiency * SIMPLE_REFERENCE_PAYLOAD_BYTES / (SIMPLE_REFERENCE_PAYLOAD_BYTES + ov)
}

/// Protocol throughput of one GPU's sends (user bytes/s) for `channels`,
/// or infinity when only the wire and the injection limit bound it.
///
/// LL: the SM-side rate NCCL's tuning model gives it, a fixed fraction of
/// the Simple rate on the same links (`LL_*_RATIO`), capped at
/// `ll_efficiency` x the links' payload rate (NCCL `llMaxBws`).
pub(crate) fn proto_rate(op: Op, a: Algorithm, pr: Protocol, channels: u32, p: &CollectiveParams, f: &FabricInfo) -> f64 {
    let gpu = f.port_bytes_per_s * f.gpu_ports as f64;
    match pr {
        Protocol::Ll => {
            let ratio = match a {
                Algorithm::Tree => LL_TREE_RATIO,
                _ if matches!(op, Op::AllReduce | Op::Reduce) => LL_RING_REDUCE_RATIO,
                _ => LL_RING_COPY_RATIO,
            };
            (simple_rate(p, f) * ratio).min(gpu * p.ll_efficiency)
        }
        Protocol::Ll128 => gpu * p.ll128_channel_efficiency * channels.max(1) as f64,
        _ => f64::INFINITY,
    }
}

/// Channels for a per-rank part of `part_bytes`.
fn channels_for(part_bytes: u64, p: &CollectiveParams) -> u32 {
    if p.channels > 0 {
        p.channels
    } else {
        (part_bytes / CHANNEL_MIN_BYTES).clamp(1, p.max_channels as u64) as u32
    }
}

/// Closed-form estimate of the DAG's time (the same alpha-beta terms the
/// DAG realises, without contention), ps. Used by the task-graph network's
/// `auto` and to prune the candidates `collective()` simulates.
pub fn estimate(op: Op, a: Algorithm, pr: Protocol, n: u32, bytes: u64, p: &CollectiveParams, f: &FabricInfo) -> f64 {
    let gpu = f.port_bytes_per_s * f.gpu_ports as f64;
    let b_wire = gpu * p.link_efficiency / pr.wire_factor();
    let nn = n as f64;
    let s = bytes as f64;
    let part = match op {
        Op::AllReduce | Op::AllGather | Op::ReduceScatter | Op::AllToAll => bytes / n as u64,
        _ => bytes,
    };
    let ch = channels_for(part, p);
    let b = b_wire.min(proto_rate(op, a, pr, ch, p, f));
    let step = p.step_for(a, pr) as f64 + 200_000.0;
    let launch = p.launch_for(a, pr) as f64;
    match a {
        Algorithm::Nvls => p.nvls_latency(n) as f64 + s * nvls_factor(op, n) / (gpu * p.nvls_efficiency.min(p.link_efficiency)) * 1e12,
        // Two pipelined chains (NCCL's intra-node tree), each moving half the
        // data up and down n-1 hops: 2 (n-1) steps, ~2 S sent per rank.
        Algorithm::Tree => launch + 2.0 * (nn - 1.0) * step + 2.0 * s / b * 1e12,
        Algorithm::Direct => launch + step + s * op.busbw_factor(n) / b * 1e12,
        _ => {
            let steps = match op {
                Op::AllReduce => 2.0 * (nn - 1.0),
                _ => nn - 1.0,
            };
            launch + steps * step + s * op.busbw_factor(n) / b * 1e12
        }
    }
}

/// Every (algorithm, protocol) pair `auto` may choose for this request, in
/// NCCL's order (ring, tree, NVLS; Simple, LL128, LL). NVLS runs Simple only.
///
/// # Errors
/// `Config`: an algorithm the operation lacks, NVLS on a fabric without it or
/// with a protocol other than Simple.
pub fn candidates(op: Op, n: u32, p: &CollectiveParams, f: &FabricInfo) -> Result<Vec<(Algorithm, Protocol)>> {
    let sup = supported(op);
    let algo = p.algorithm;
    if algo == Algorithm::Nvls && !f.nvls {
        return Err(FlitsimError::config("algorithm", "nvls", "a fabric whose switches support NVLS (switch.nvls = true: NVSwitch gen3+, Hopper and later); this fabric's do not"));
    }
    if algo == Algorithm::Nvls && !matches!(p.protocol, Protocol::Auto | Protocol::Simple) {
        return Err(FlitsimError::config("protocol", format!("{:?}", p.protocol).to_lowercase(), "auto or simple with algorithm = nvls (NCCL runs NVLS on the Simple protocol only)"));
    }
    if algo != Algorithm::Auto && !sup.contains(&algo) {
        let names: Vec<&str> = sup.iter().map(|&a| algo_name(a)).collect();
        return Err(FlitsimError::config("algorithm", algo_name(algo), &format!("one of auto, {} for {op:?}", names.join(", "))));
    }
    let protos: &[Protocol] = if p.protocol == Protocol::Auto { &[Protocol::Simple, Protocol::Ll128, Protocol::Ll] } else { std::slice::from_ref(&p.protocol) };
    let algos: Vec<Algorithm> = if algo == Algorithm::Auto { sup.iter().copied().filter(|&a| a != Algorithm::Nvls || (f.nvls && n > 1)).collect() } else { vec![algo] };
    let mut out = Vec::new();
    for &a in &algos {
        for &pr in protos {
            if a == Algorithm::Nvls && pr != Protocol::Simple {
                continue;
            }
            out.push((a, pr));
        }
    }
    Ok(out)
}

/// Check the request (group, size, root) against the fabric.
pub(crate) fn check_request(op: Op, members: &[u32], bytes: u64, p: &CollectiveParams, f: &FabricInfo) -> Result<()> {
    p.validate()?;
    let n = members.len() as u32;
    if n == 0 {
        return Err(FlitsimError::config("group", "[]", "at least one GPU"));
    }
    let mut seen = vec![false; f.gpus as usize];
    for &m in members {
        if m >= f.gpus {
            return Err(FlitsimError::config("group", format!("{members:?}"), &format!("GPU ids in 0..{} (GPU {m} is not on the fabric)", f.gpus)));
        }
        if seen[m as usize] {
            return Err(FlitsimError::config("group", format!("{members:?}"), &format!("distinct GPUs (GPU {m} appears twice)")));
        }
        seen[m as usize] = true;
    }
    if op == Op::SendRecv && n != 2 {
        return Err(FlitsimError::config("group", format!("{members:?}"), "exactly two GPUs [src, dst] for send/recv"));
    }
    let e = p.dtype_bytes as u64;
    if bytes % e != 0 {
        return Err(FlitsimError::config("nbytes", bytes, &format!("a whole number of {e}-byte elements (dtype_bytes = {e})")));
    }
    let per_rank = matches!(op, Op::AllGather | Op::ReduceScatter | Op::AllToAll);
    // all_to_all: `bytes` is one rank's whole send buffer, n parts of equal
    // whole elements (one per peer, itself included), like all_gather's n shards.
    if per_rank && bytes % (e * n as u64) != 0 {
        let unit = e * n as u64;
        return Err(FlitsimError::config(
            "nbytes",
            bytes,
            &format!("a multiple of {unit} bytes for {op:?} over {n} ranks (every rank holds an equal whole number of {e}-byte elements per peer; NCCL takes a per-rank count, so pad the buffer)"),
        ));
    }
    if matches!(op, Op::Broadcast | Op::Reduce) && p.root >= n {
        return Err(FlitsimError::config("root", p.root, &format!("a rank in 0..{n}")));
    }
    Ok(())
}

/// Lower a collective; `auto` algorithm / protocol resolved by the
/// closed-form [`estimate`] (the batch API instead simulates the candidates).
///
/// # Errors
/// `Config`: a repeated or out-of-range GPU, fewer than 2 members for
/// send/recv, a size that is not a whole number of elements (or, for
/// all_gather / reduce_scatter / all_to_all, of n x elements: NCCL's API takes
/// a per-rank count), an algorithm the operation lacks, NVLS on a fabric
/// without it, a root outside the group, a DAG above [`MAX_DAG_NODES`].
pub fn lower(op: Op, members: &[u32], bytes: u64, p: &CollectiveParams, f: &FabricInfo) -> Result<Lowered> {
    check_request(op, members, bytes, p, f)?;
    let n = members.len() as u32;
    let cands = candidates(op, n, p, f)?;
    let mut best = (f64::INFINITY, cands[0].0, cands[0].1);
    for &(a, pr) in &cands {
        let t = estimate(op, a, pr, n, bytes, p, f);
        if t < best.0 {
            best = (t, a, pr);
        }
    }
    lower_as(op, members, bytes, best.1, best.2, p, f)
}

/// Nodes the DAG of (op, algorithm) will have (an upper bound), before any
/// allocation.
fn dag_nodes(op: Op, a: Algorithm, n: u64, elems: u64, chunk_el: u64, channels: u64) -> u64 {
    let group = chunk_el.saturating_mul(channels).max(1);
    let k = |el: u64, c: u64| el.div_ceil(c).max(1);
    match (op, a) {
        (Op::AllToAll, _) => n.saturating_mul(n - 1).saturating_mul(k(elems / n, chunk_el)),
        (Op::SendRecv, _) => k(elems, chunk_el),
        (_, Algorithm::Nvls) => n.saturating_mul(2).saturating_mul(k(elems, chunk_el)),
        (_, Algorithm::Tree) => 4u64.saturating_mul(n).saturating_mul(k(elems.div_ceil(2), chunk_el)),
        (Op::Broadcast | Op::Reduce, _) => n.saturating_mul(k(elems, group)),
        _ => 2u64.saturating_mul(n).saturating_mul(n).saturating_mul(k(elems.div_ceil(n), group)),
    }
    .saturating_add(1)
}

/// Lower with a given (algorithm, protocol) (no `auto`).
///
/// # Errors
/// As [`lower`].
pub fn lower_as(op: Op, members: &[u32], bytes: u64, algo: Algorithm, pr: Protocol, p: &CollectiveParams, f: &FabricInfo) -> Result<Lowered> {
    check_request(op, members, bytes, p, f)?;
    let n = members.len() as u32;
    let est = estimate(op, algo, pr, n, bytes, p, f);
    let e = p.dtype_bytes as u64;
    let mut chunk = if p.chunk_bytes > 0 { p.chunk_bytes } else { MIB };
    let elems = bytes / e;
    let part_bytes = match op {
        Op::AllReduce | Op::AllGather | Op::ReduceScatter | Op::AllToAll => bytes / n as u64,
        _ => bytes,
    };
    let mut channels = match (op, algo) {
        (Op::AllToAll | Op::SendRecv, _) | (_, Algorithm::Nvls) => 1,
        _ => channels_for(part_bytes, p),
    };
    if algo == Algorithm::Tree && p.chunk_bytes == 0 {
        // NCCL (enqueue.cc) shrinks a tree's chunk until every channel has
        // ~8 chunks per level of depth (n-1 here), down to 64 KiB
        let per_ch = bytes / channels.max(2) as u64;
        while per_ch / chunk < (n as u64 - 1).max(1) * TREE_CHUNKS_PER_LEVEL && chunk > TREE_MIN_CHUNK_BYTES {
            chunk /= 2;
        }
    }
    let chunk_el = (chunk / e).max(1);
    let est_nodes = dag_nodes(op, algo, n as u64, elems, chunk_el, channels as u64);
    if est_nodes > MAX_DAG_NODES {
        return Err(FlitsimError::config(
            "nbytes",
            bytes,
            &format!("a collective whose transfer DAG stays under {MAX_DAG_NODES} nodes ({op:?} over {n} ranks in chunks of {chunk} bytes needs about {est_nodes}); raise chunk_bytes or split the collective"),
        ));
    }
    let wf = pr.wire_factor();
    // Wire bytes for a part of `el` elements under the protocol.
    let wb = |el: u64| -> u64 { ((el * e) as f64 * wf).ceil() as u64 };
    let rate = proto_rate(op, algo, pr, channels, p, f);
    // Protocol floor on a transfer of `el` user elements.
    let floor = |el: u64| -> u64 { if rate.is_finite() { ((el * e) as f64 * 1e12 / rate).ceil() as u64 } else { 0 } };
    let xfer = |src: u32, dst: u32, el: u64| NodeKind::Transfer { src, dst, bytes: wb(el), loopback: false, min_ps: floor(el) };
    let step = p.step_for(algo, pr);
    let launch = if algo == Algorithm::Nvls { p.nvls_latency(n) } else { p.launch_for(algo, pr) };
    let mut dag = Dag::with_capacity(est_nodes, est_nodes.saturating_mul(3))?;
    let start = dag.add(NodeKind::Delay { ps: launch });
    let rank = |i: u32| members[(i % n) as usize];
    // Reduction compute for `el` elements received.
    let red = |el: u64| -> u64 {
        if p.reduce_bytes_per_s == 0 {
            0
        } else {
            ((el * e) as f64 * 1e12 / p.reduce_bytes_per_s as f64).ceil() as u64
        }
    };
    if n == 1 || elems == 0 {
        return Ok(Lowered { dag, algorithm: algo, protocol: pr, channels: 1, chunk_bytes: chunk, estimate_ps: est });
    }
    match (op, algo) {
        (Op::AllReduce | Op::AllGather | Op::ReduceScatter, Algorithm::Ring) => {
            // Ring: the buffer is cut into n shards; at step s rank r sends
            // shard (r - s) mod n to r + 1. all_reduce = reduce-scatter (n-1
            // steps, reducing) then all-gather (n-1 steps). On a switched
            // fabric every channel's ring runs r -> r+1 over the same links in
            // lock step (NCCL's model: one latency per step, busbw = channels
            // x per-channel bw), so the channels of a step are one transfer of
            // their summed chunks: separate chains would let packet-level
            // timing noise desynchronise them.
            let steps = if op == Op::AllReduce { 2 * (n - 1) } else { n - 1 };
            let reducing = |s: u32| match op {
                Op::AllReduce => s < n - 1,
                Op::ReduceScatter => true,
                _ => false,
            };
            let group_chunk_el = chunk_el.saturating_mul(channels as u64);
            let max_shard = elems.div_ceil(n as u64);
            let k_chunks = max_shard.div_ceil(group_chunk_el).max(1);
            let shard_el = |shard: u64, k: u64| split(split(elems, n as u64, shard), k_chunks, k);
            // ids[(k * steps + s) * n + r]
            let base = dag.nodes.len() as u32;
            for k in 0..k_chunks {
                for s in 0..steps {
                    for r in 0..n {
                        let shard = ((r + n - s % n) % n) as u64;
                        dag.add(xfer(rank(r), rank(r + 1), shard_el(shard, k)));
                    }
                }
            }
            let id = |k: u64, s: u32, r: u32| base + ((k as u32 * steps + s) * n + r);
            for k in 0..k_chunks {
                for s in 0..steps {
                    for r in 0..n {
                        let me = id(k, s, r);
                        if s == 0 {
                            dag.edge(start, me, 0);
                        } else {
                            let prev = (r + n - 1) % n;
                            let shard = ((prev + n - (s - 1) % n) % n) as u64;
                            let d = step + if reducing(s - 1) { red(shard_el(shard, k)) } else { 0 };
                            dag.edge(id(k, s - 1, prev), me, d);
                        }
                        if k > 0 {
                            dag.edge(id(k - 1, s, r), me, 0);
                        }
                    }
                }
            }
        }
        (Op::Broadcast | Op::Reduce, _) => {
            // Pipelined chain: broadcast root -> root+1 -> ...; reduce towards
            // the root: root+1 -> root+2 -> ... -> root (reducing at each hop).
            let group_chunk_el = chunk_el.saturating_mul(channels as u64);
            let hops = n - 1;
            let order: Vec<u32> = if op == Op::Broadcast { (0..n).map(|i| rank(p.root + i)).collect() } else { (0..n).map(|i| rank(p.root + 1 + i)).collect() };
            let k_chunks = elems.div_ceil(group_chunk_el).max(1);
            let base = dag.nodes.len() as u32;
            for k in 0..k_chunks {
                let el = split(elems, k_chunks, k);
                for h in 0..hops {
                    dag.add(xfer(order[h as usize], order[h as usize + 1], el));
                }
            }
            for k in 0..k_chunks {
                let el = split(elems, k_chunks, k);
                for h in 0..hops {
                    let me = base + k as u32 * hops + h;
                    if h == 0 {
                        dag.edge(start, me, 0);
                    } else {
                        dag.edge(me - 1, me, step + if op == Op::Reduce { red(el) } else { 0 });
                    }
                    if k > 0 {
                        dag.edge(me - hops, me, 0);
                    }
                }
            }
        }
        (Op::AllReduce, Algorithm::Tree) => {
            // NCCL's tree inside one NVLink domain is a chain through the
            // ranks (tuning.cc charges 2 (n-1) hops of latency): two chains in
            // opposite directions, each reducing half the data up to its head
            // and broadcasting the result back down, pipelined by chunks.
            channels = channels.max(2);
            let group_chunk_el = chunk_el.saturating_mul((channels as u64).div_ceil(2));
            for t in 0..2u64 {
                let half = split(elems, 2, t);
                if half == 0 {
                    continue;
                }
                // position 0 is the chain's head (the tree root)
                let pos = |i: u32| if t == 0 { rank(i) } else { rank(n - 1 - i) };
                let k_chunks = half.div_ceil(group_chunk_el).max(1);
                let h = n - 1;
                let base = dag.nodes.len() as u32;
                // per chunk: up[i] = pos(i+1) -> pos(i) for i in 0..h (index h-1-j
                // in order of sending), then down[i] = pos(i) -> pos(i+1)
                for k in 0..k_chunks {
                    let el = split(half, k_chunks, k);
                    for i in (0..h).rev() {
                        dag.add(xfer(pos(i + 1), pos(i), el));
                    }
                    for i in 0..h {
                        dag.add(xfer(pos(i), pos(i + 1), el));
                    }
                }
                let up = |k: u64, i: u32| base + (k as u32) * 2 * h + (h - 1 - i);
                let down = |k: u64, i: u32| base + (k as u32) * 2 * h + h + i;
                for k in 0..k_chunks {
                    let el = split(half, k_chunks, k);
                    for i in (0..h).rev() {
                        let me = up(k, i);
                        if i == h - 1 {
                            dag.edge(start, me, 0);
                        } else {
                            dag.edge(up(k, i + 1), me, step + red(el));
                        }
                        if k > 0 {
                            dag.edge(up(k - 1, i), me, 0);
                        }
                    }
                    for i in 0..h {
                        let me = down(k, i);
                        if i == 0 {
                            dag.edge(up(k, 0), me, step + red(el));
                        } else {
                            dag.edge(down(k, i - 1), me, step);
                        }
                        if k > 0 {
                            dag.edge(down(k - 1, i), me, 0);
                        }
                    }
                }
            }
        }
        (Op::AllReduce | Op::AllGather | Op::ReduceScatter, Algorithm::Nvls) => {
            // NVLS: per chunk, every GPU sends its contributions into the
            // switches and receives the multicast result (a loopback through
            // the switch carries the per-direction byte counts of
            // `nvls_factor`); the switch's reduction / multicast engine
            // processes each GPU's traffic at nvls_efficiency x its link rate,
            // a serial stage after the wire.
            let eng_rate = f.port_bytes_per_s * f.gpu_ports as f64 * p.nvls_efficiency;
            let k_chunks = elems.div_ceil(chunk_el).max(1);
            let fac = nvls_factor(op, n);
            for r in 0..n {
                let mut ts: Vec<u32> = Vec::with_capacity(k_chunks as usize);
                let mut prev_e = u32::MAX;
                for k in 0..k_chunks {
                    let el = split(elems, k_chunks, k);
                    let b = (wb(el) as f64 * fac).ceil() as u64;
                    let t = dag.add(NodeKind::Transfer { src: rank(r), dst: rank(r), bytes: b, loopback: true, min_ps: 0 });
                    let eng = dag.add(NodeKind::Delay { ps: (b as f64 / eng_rate * 1e12).ceil() as u64 });
                    let k = k as usize;
                    dag.edge(if k < NVLS_WINDOW { start } else { ts[k - NVLS_WINDOW] }, t, 0);
                    dag.edge(t, eng, 0);
                    if prev_e != u32::MAX {
                        dag.edge(prev_e, eng, 0);
                    }
                    ts.push(t);
                    prev_e = eng;
                }
            }
        }
        (Op::AllToAll, _) => {
            // Direct, staggered: rank r sends its part for r + k at step k, all
            // posted at once in that order (chunks of one pair chained). One
            // rank's buffer holds n parts; the part for itself stays put, so
            // (n-1)/n of the buffer leaves each rank (nccl-tests' definition).
            let pair_el = elems / n as u64;
            let k_chunks = pair_el.div_ceil(chunk_el).max(1);
            for k in 1..n {
                for r in 0..n {
                    let mut ids: Vec<u32> = Vec::with_capacity(k_chunks as usize);
                    for j in 0..k_chunks {
                        let me = dag.add(xfer(rank(r), rank(r + k), split(pair_el, k_chunks, j)));
                        let j = j as usize;
                        dag.edge(if j < P2P_WINDOW { start } else { ids[j - P2P_WINDOW] }, me, 0);
                        ids.push(me);
                    }
                }
            }
        }
        (Op::SendRecv, _) => {
            let k_chunks = elems.div_ceil(chunk_el).max(1);
            let mut ids: Vec<u32> = Vec::with_capacity(k_chunks as usize);
            for j in 0..k_chunks {
                let me = dag.add(xfer(members[0], members[1], split(elems, k_chunks, j)));
                let j = j as usize;
                dag.edge(if j < P2P_WINDOW { start } else { ids[j - P2P_WINDOW] }, me, 0);
                ids.push(me);
            }
        }
        (op, a) => {
            return Err(FlitsimError::config("algorithm", algo_name(a), &format!("an algorithm {op:?} supports")));
        }
    }
    Ok(Lowered { dag, algorithm: algo, protocol: pr, channels, chunk_bytes: chunk, estimate_ps: est })
}
