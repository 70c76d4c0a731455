//! Lowering: a collective request becomes a DAG of transfers and delays.

use super::params::{Algorithm, CollectiveParams, Op, Protocol};
use crate::error::{FlitsimError, Result};

/// One DAG node.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum NodeKind {
    /// GPU `src` -> GPU `dst`; `loopback`: into the switches and back to `src`
    /// (NVLS), which loads both directions of the GPU's links.
    Transfer { src: u32, dst: u32, bytes: u64, loopback: bool },
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
    fn add(&mut self, k: NodeKind) -> u32 {
        self.nodes.push(k);
        (self.nodes.len() - 1) as u32
    }
    fn edge(&mut self, a: u32, b: u32, delay: u64) {
        self.edges.push((a, b, delay));
    }
    /// Sum of transfer bytes leaving each GPU (loopback counted), length `gpus`.
    pub fn bytes_sent(&self, gpus: u32) -> Vec<u64> {
        let mut v = vec![0u64; gpus as usize];
        for n in &self.nodes {
            if let NodeKind::Transfer { src, bytes, .. } = *n {
                if (src as usize) < v.len() {
                    v[src as usize] += bytes;
                }
            }
        }
        v
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
    /// Closed-form time estimate used for `auto`, ps.
    pub estimate_ps: f64,
}

const MIB: u64 = 1 << 20;
/// Chunks of one send/recv pair in flight (NCCL's p2p buffers hold several steps).
const P2P_WINDOW: usize = 4;

/// Split `total` elements into `parts`, part `i` (the first `total % parts` get one more).
fn split(total: u64, parts: u64, i: u64) -> u64 {
    total / parts + u64::from(i < total % parts)
}

fn algo_name(a: Algorithm) -> &'static str {
    match a {
        Algorithm::Auto => "auto",
        Algorithm::Ring => "ring",
        Algorithm::Tree => "tree",
        Algorithm::Direct => "direct",
        Algorithm::Nvls => "nvls",
    }
}

/// Algorithms each operation supports (first = default when not auto-picked).
fn supported(op: Op) -> &'static [Algorithm] {
    match op {
        Op::AllReduce => &[Algorithm::Ring, Algorithm::Tree, Algorithm::Nvls],
        Op::AllGather | Op::ReduceScatter | Op::Broadcast | Op::Reduce => &[Algorithm::Ring],
        Op::AllToAll | Op::SendRecv => &[Algorithm::Direct],
    }
}

/// Closed-form estimate (the same alpha-beta terms the DAG realises), ps.
fn estimate(op: Op, a: Algorithm, pr: Protocol, n: u32, bytes: u64, p: &CollectiveParams, f: &FabricInfo) -> f64 {
    let b_gpu = f.port_bytes_per_s * f.gpu_ports as f64 * p.link_efficiency;
    let s = bytes as f64 * pr.wire_factor();
    let step = p.step_for(pr) as f64;
    let nn = n as f64;
    let launch = p.launch_for(pr) as f64;
    match a {
        Algorithm::Nvls => p.nvls_latency(n) as f64 + s * (nn + 1.0) / nn / (f.port_bytes_per_s * f.gpu_ports as f64 * p.nvls_efficiency) * 1e12,
        // Double binary tree: a rank is inner in one tree (sends S/2 up and
        // twice S/2 down) and a leaf in the other (S/2 up): ~2S sent.
        Algorithm::Tree => launch + 2.0 * (nn.log2().ceil()) * step + 2.0 * s / b_gpu * 1e12,
        Algorithm::Direct => launch + step + s * op.busbw_factor(n) / b_gpu * 1e12,
        _ => {
            let steps = match op {
                Op::AllReduce => 2.0 * (nn - 1.0),
                _ => nn - 1.0,
            };
            launch + steps * step + s * op.busbw_factor(n) / b_gpu * 1e12
        }
    }
}

/// Lower a collective.
///
/// # Errors
/// `Config`: a repeated or out-of-range GPU, fewer than 2 members for
/// send/recv, a size that is not a whole number of elements (or, for
/// all_gather / reduce_scatter / all_to_all, of n x elements: NCCL's API takes
/// a per-rank count), an algorithm the operation lacks, NVLS on a fabric
/// without it, a root outside the group.
pub fn lower(op: Op, members: &[u32], bytes: u64, p: &CollectiveParams, f: &FabricInfo) -> Result<Lowered> {
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
    let sup = supported(op);
    let mut algo = p.algorithm;
    if algo == Algorithm::Nvls && !f.nvls {
        return Err(FlitsimError::config("algorithm", "nvls", "a fabric whose switches support NVLS (switch.nvls = true: NVSwitch gen3+, Hopper and later); this fabric's do not"));
    }
    if algo != Algorithm::Auto && !sup.contains(&algo) {
        let names: Vec<&str> = sup.iter().map(|&a| algo_name(a)).collect();
        return Err(FlitsimError::config("algorithm", algo_name(algo), &format!("one of auto, {} for {op:?}", names.join(", "))));
    }
    let protos: Vec<Protocol> = if p.protocol == Protocol::Auto { vec![Protocol::Simple, Protocol::Ll128, Protocol::Ll] } else { vec![p.protocol] };
    let algos: Vec<Algorithm> = if algo == Algorithm::Auto { sup.iter().copied().filter(|&a| a != Algorithm::Nvls || (f.nvls && n > 1)).collect() } else { vec![algo] };
    let mut best = (f64::INFINITY, algos[0], protos[0]);
    for &a in &algos {
        for &pr in &protos {
            // NVLS runs the Simple protocol only (NCCL).
            if a == Algorithm::Nvls && pr != Protocol::Simple && protos.len() > 1 {
                continue;
            }
            let t = estimate(op, a, pr, n, bytes, p, f);
            if t < best.0 {
                best = (t, a, pr);
            }
        }
    }
    let (est, a, pr) = best;
    algo = a;
    let chunk = if p.chunk_bytes > 0 { p.chunk_bytes } else { MIB };
    let chunk_el = (chunk / e).max(1);
    let elems = bytes / e;
    let wf = pr.wire_factor();
    // Wire bytes for a part of `el` elements under the protocol.
    let wb = |el: u64| -> u64 { ((el * e) as f64 * wf).ceil() as u64 };
    let step = p.step_for(pr);
    let launch = if algo == Algorithm::Nvls { p.nvls_latency(n) } else { p.launch_for(pr) };
    let mut dag = Dag::default();
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
    let auto_ch = |part_el: u64| -> u32 {
        if p.channels > 0 {
            p.channels
        } else {
            ((part_el * e) / (64 * 1024)).clamp(1, 8) as u32
        }
    };
    let mut channels = 1;
    if n == 1 || elems == 0 {
        return Ok(Lowered { dag, algorithm: algo, protocol: pr, channels, chunk_bytes: chunk, estimate_ps: est });
    }
    match (op, algo) {
        (Op::AllReduce | Op::AllGather | Op::ReduceScatter, Algorithm::Ring) => {
            // Ring: per channel, the buffer is cut into n shards; at step s rank r
            // sends shard (r - s) mod n to r + 1. all_reduce = reduce-scatter
            // (n-1 steps, reducing) then all-gather (n-1 steps).
            let steps = if op == Op::AllReduce { 2 * (n - 1) } else { n - 1 };
            let reducing = |s: u32| match op {
                Op::AllReduce => s < n - 1,
                Op::ReduceScatter => true,
                _ => false,
            };
            // On a switched fabric every channel's ring runs r -> r+1 over the
            // same links in lock step (NCCL's model: one latency per step,
            // busbw = channels x per-channel bw), so the channels of a step are
            // one transfer of their summed chunks: separate chains would let
            // packet-level timing noise desynchronise them.
            channels = auto_ch(elems / n as u64);
            let group_chunk_el = chunk_el.saturating_mul(channels as u64);
            {
                let ch_el = elems;
                let max_shard = ch_el.div_ceil(n as u64);
                let k_chunks = max_shard.div_ceil(group_chunk_el).max(1);
                // ids[(k * steps + s) * n + r]
                let base = dag.nodes.len() as u32;
                for k in 0..k_chunks {
                    for s in 0..steps {
                        for r in 0..n {
                            let shard = ((r + n - s % n) % n) as u64;
                            let el = split(split(ch_el, n as u64, shard), k_chunks, k);
                            dag.add(NodeKind::Transfer { src: rank(r), dst: rank(r + 1), bytes: wb(el), loopback: false });
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
                                let el = split(split(ch_el, n as u64, shard), k_chunks, k);
                                let d = step + if reducing(s - 1) { red(el) } else { 0 };
                                dag.edge(id(k, s - 1, prev), me, d);
                            }
                            if k > 0 {
                                dag.edge(id(k - 1, s, r), me, 0);
                            }
                        }
                    }
                }
            }
        }
        (Op::Broadcast | Op::Reduce, _) => {
            // Pipelined chain: broadcast root -> root+1 -> ...; reduce towards
            // the root: root+1 -> root+2 -> ... -> root (reducing at each hop).
            channels = auto_ch(elems);
            let group_chunk_el = chunk_el.saturating_mul(channels as u64);
            let hops = n - 1;
            let order: Vec<u32> = if op == Op::Broadcast { (0..n).map(|i| rank(p.root + i)).collect() } else { (0..n).map(|i| rank(p.root + 1 + i)).collect() };
            {
                let ch_el = elems;
                let k_chunks = ch_el.div_ceil(group_chunk_el).max(1);
                let base = dag.nodes.len() as u32;
                for k in 0..k_chunks {
                    let el = split(ch_el, k_chunks, k);
                    for h in 0..hops {
                        dag.add(NodeKind::Transfer { src: order[h as usize], dst: order[h as usize + 1], bytes: wb(el), loopback: false });
                    }
                }
                for k in 0..k_chunks {
                    let el = split(ch_el, k_chunks, k);
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
        }
        (Op::AllReduce, Algorithm::Tree) => {
            // Double binary tree: two heap-ordered binary trees, the second on
            // mirrored ranks (the leaves of one are inner nodes of the other),
            // each reducing half the data up to its root and broadcasting it down.
            channels = 2;
            for t in 0..2u64 {
                let half = split(elems, 2, t);
                if half == 0 {
                    continue;
                }
                let pos_rank = |i: u32| if t == 0 { rank(i) } else { rank(n - 1 - i) };
                let k_chunks = half.div_ceil(chunk_el).max(1);
                let mut up_prev: Vec<u32> = vec![u32::MAX; n as usize];
                let mut down_prev: Vec<u32> = vec![u32::MAX; n as usize];
                for k in 0..k_chunks {
                    let el = split(half, k_chunks, k);
                    // Up: position i (> 0) sends to (i - 1) / 2, after its children.
                    let mut up = vec![u32::MAX; n as usize];
                    for i in (1..n).rev() {
                        let me = dag.add(NodeKind::Transfer { src: pos_rank(i), dst: pos_rank((i - 1) / 2), bytes: wb(el), loopback: false });
                        up[i as usize] = me;
                        let mut leaf = true;
                        for c in [2 * i + 1, 2 * i + 2] {
                            if c < n {
                                leaf = false;
                                dag.edge(up[c as usize], me, step + red(el));
                            }
                        }
                        if leaf {
                            dag.edge(start, me, 0);
                        }
                        if up_prev[i as usize] != u32::MAX {
                            dag.edge(up_prev[i as usize], me, 0);
                        }
                    }
                    // Down: position i sends to its children once it has the result.
                    let mut down = vec![u32::MAX; n as usize]; // transfer into position i
                    for i in 0..n {
                        for c in [2 * i + 1, 2 * i + 2] {
                            if c >= n {
                                continue;
                            }
                            let me = dag.add(NodeKind::Transfer { src: pos_rank(i), dst: pos_rank(c), bytes: wb(el), loopback: false });
                            down[c as usize] = me;
                            if i == 0 {
                                for rc in [1u32, 2] {
                                    if rc < n {
                                        dag.edge(up[rc as usize], me, step + red(el));
                                    }
                                }
                            } else {
                                dag.edge(down[i as usize], me, step);
                            }
                            if down_prev[c as usize] != u32::MAX {
                                dag.edge(down_prev[c as usize], me, 0);
                            }
                        }
                    }
                    up_prev = up;
                    down_prev = down;
                }
            }
        }
        (Op::AllReduce, Algorithm::Nvls) => {
            // NVLS: per chunk, every GPU sends its contribution into the
            // switches and receives the multicast result, S (n+1)/n bytes each
            // way over the whole operation (a loopback through the switch
            // carries exactly these per-direction byte counts); the reduction
            // engine processes each GPU's traffic at nvls_efficiency x its link
            // rate, as a serial stage after the wire.
            channels = 1;
            let rate = f.port_bytes_per_s * f.gpu_ports as f64 * p.nvls_efficiency;
            let k_chunks = elems.div_ceil(chunk_el).max(1);
            // Up to NVLS_WINDOW chunks of one GPU in flight (NCCL's NVLS
            // buffers hold several steps).
            const NVLS_WINDOW: usize = 4;
            for r in 0..n {
                let mut ts: Vec<u32> = Vec::with_capacity(k_chunks as usize);
                let mut prev_e = u32::MAX;
                for k in 0..k_chunks {
                    let el = split(elems, k_chunks, k);
                    let b = (wb(el) as f64 * (n as f64 + 1.0) / n as f64).ceil() as u64;
                    let t = dag.add(NodeKind::Transfer { src: rank(r), dst: rank(r), bytes: b, loopback: true });
                    let eng = dag.add(NodeKind::Delay { ps: (b as f64 / rate * 1e12).ceil() as u64 });
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
            // posted at once in that order (chunks of one pair chained).
            // One rank's buffer holds n parts; the part for itself stays put,
            // so (n-1)/n of the buffer leaves each rank (nccl-tests' definition).
            let pair_el = elems / n as u64;
            let k_chunks = pair_el.div_ceil(chunk_el).max(1);
            for k in 1..n {
                for r in 0..n {
                    let mut ids: Vec<u32> = Vec::with_capacity(k_chunks as usize);
                    for j in 0..k_chunks {
                        let el = split(pair_el, k_chunks, j);
                        let me = dag.add(NodeKind::Transfer { src: rank(r), dst: rank(r + k), bytes: wb(el), loopback: false });
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
                let me = dag.add(NodeKind::Transfer { src: members[0], dst: members[1], bytes: wb(split(elems, k_chunks, j)), loopback: false });
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
