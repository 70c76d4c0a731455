//! Collectives across tiers: groups whose GPUs sit in more than one domain
//! (GPUs connected without crossing a NIC or network switch, see
//! [`Reach`]), lowered the way NCCL runs them across nodes.
//!
//! - **ring**: one ring through all ranks, ordered domain by domain; channel
//!   group c enters each domain at its c-th GPU and leaves from the one before
//!   it (NCCL's rings use a different NIC per channel), so the C groups spread
//!   over the rails. The hop between domains is a network transfer; with PXN
//!   the transport first moves it over NVLink to the GPU on the receiver's
//!   rail ([`super::transport`]). Broadcast / reduce chain domain by domain.
//! - **hierarchical** (all_reduce; NCCL's NVLS-tree / 2D structure): a
//!   reduce-scatter inside every domain (ring or NVLS, whichever the estimate
//!   prefers), an all_reduce of each GPU's 1/L share among the GPUs of the same
//!   local index across domains (one rail each: ring over the nodes), and an
//!   all-gather inside every domain. The phases are separated by barriers, so
//!   its time is intra + inter + intra (NCCL pipelines them by chunks: a
//!   conservative simplification).
//! - **direct** all_to_all: as in one domain; the transports route each pair
//!   (RDMA, PXN).
//!
//! - **tree** (all_reduce): NCCL's inter-node tree, chains inside the
//!   domains and the double binary tree between their heads
//!   ([`dtree_parents`]).
//! - **nvls** (all_reduce, NVLS fabrics): NCCL's NVLS-tree, NVLS inside the
//!   domains and the double binary tree across them per rail.
//!
//! Not modelled across domains: CollNet / in-network reduction, and NVLS as
//! one multicast group spanning domains.

use super::lower::{algo_name, candidates, check_request, estimate, lower_as, proto_rate, Dag, FabricInfo, Lowered, NodeKind, MAX_DAG_NODES, TREE_CHUNKS_PER_LEVEL, TREE_MIN_CHUNK_BYTES};
use super::params::{Algorithm, CollectiveParams, Op, Protocol};
use super::transport::{hw_extra_ps, Reach};
use crate::error::{FlitsimError, Result};

/// The group's GPUs by domain (domain order of first appearance), or None
/// when they all sit in one domain.
fn split_domains(members: &[u32], reach: &Reach) -> Option<Vec<Vec<u32>>> {
    if reach.domains <= 1 {
        return None;
    }
    let mut order: Vec<u32> = Vec::new();
    let mut groups: Vec<Vec<u32>> = Vec::new();
    for &m in members {
        let d = reach.domain.get(m as usize).copied().unwrap_or(0);
        match order.iter().position(|&x| x == d) {
            Some(i) => groups[i].push(m),
            None => {
                order.push(d);
                groups.push(vec![m]);
            }
        }
    }
    (groups.len() > 1).then_some(groups)
}

/// Aggregate NIC rate of the smallest-bandwidth domain, bytes/s (0 = unknown).
fn domain_net_rate(groups: &[Vec<u32>], reach: &Reach) -> f64 {
    let mut best = f64::INFINITY;
    for g in groups {
        // GPUs sharing a rail share its NIC: count each rail once
        let mut rails: Vec<(u32, f64)> = Vec::new();
        for &m in g {
            let (r, b) = (reach.rail[m as usize], reach.net_bytes_per_s.get(m as usize).copied().unwrap_or(0.0));
            if !rails.iter().any(|x| x.0 == r) {
                rails.push((r, b));
            }
        }
        best = best.min(rails.iter().map(|x| x.1).sum());
    }
    if best.is_finite() {
        best
    } else {
        0.0
    }
}

fn equal_domains(groups: &[Vec<u32>]) -> bool {
    groups.iter().all(|g| g.len() == groups[0].len())
}

/// (algorithm, protocol, estimate ps) for every candidate `auto` may pick
/// for this group; one domain: [`candidates`] with [`estimate`].
///
/// # Errors
/// As [`candidates`]; `Config` for tree or NVLS forced across domains.
pub fn plan(op: Op, members: &[u32], bytes: u64, p: &CollectiveParams, f: &FabricInfo, reach: &Reach) -> Result<Vec<(Algorithm, Protocol, f64)>> {
    // the group itself first (a repeated GPU is that, not an uneven domain)
    check_request(op, members, bytes, p, f)?;
    let n = members.len().max(1) as u32;
    let Some(groups) = split_domains(members, reach) else {
        if p.algorithm == Algorithm::Hierarchical {
            return Err(FlitsimError::config("algorithm", "hierarchical", "a group spanning more than one domain (these GPUs share one; use ring, tree or nvls)"));
        }
        let ll128 = p.protocol != Protocol::Auto || reach.ll128_allowed(members);
        return Ok(candidates(op, n, p, f)?.into_iter().filter(|&(_, pr)| ll128 || pr != Protocol::Ll128).map(|(a, pr)| (a, pr, estimate(op, a, pr, n, bytes, p, f))).collect());
    };
    let eq = equal_domains(&groups);
    let uneven = || FlitsimError::config("group", format!("{members:?}"), &format!("the same number of GPUs in every domain for algorithm = {} (the group has {} in its domains)", algo_name(p.algorithm), groups.iter().map(|g| g.len().to_string()).collect::<Vec<_>>().join(" / ")));
    let algos: Vec<Algorithm> = match (p.algorithm, op) {
        (Algorithm::Auto, Op::AllReduce) => {
            let mut v = vec![Algorithm::Ring, Algorithm::Tree];
            if eq {
                v.push(Algorithm::Hierarchical);
                if f.nvls {
                    v.push(Algorithm::Nvls);
                }
            }
            v
        }
        (Algorithm::Auto, Op::AllToAll | Op::SendRecv) => vec![Algorithm::Direct],
        (Algorithm::Auto, _) => vec![Algorithm::Ring],
        (Algorithm::Tree, Op::AllReduce) => vec![Algorithm::Tree],
        (Algorithm::Nvls, Op::AllReduce) => {
            if !f.nvls {
                return Err(FlitsimError::config("algorithm", "nvls", "a fabric whose switches support NVLS (switch.nvls = true); this fabric's do not"));
            }
            if !eq {
                return Err(uneven());
            }
            vec![Algorithm::Nvls]
        }
        (Algorithm::Tree | Algorithm::Nvls, _) => {
            return Err(FlitsimError::config("algorithm", algo_name(p.algorithm), &format!("ring (or direct) for {op:?} across {} domains: NCCL's inter-node tree and NVLS-tree are all_reduce algorithms", groups.len())));
        }
        (Algorithm::Hierarchical, Op::AllReduce) => {
            if !eq {
                return Err(uneven());
            }
            vec![Algorithm::Hierarchical]
        }
        (Algorithm::Hierarchical, _) => return Err(FlitsimError::config("algorithm", "hierarchical", "all_reduce only (other operations across domains: ring or direct)")),
        (a, _) => vec![a],
    };
    // NCCL enables LL128 by default only over NVLink (tuning.cc; Reach::ll128_allowed)
    let protos: &[Protocol] = if p.protocol != Protocol::Auto { std::slice::from_ref(&p.protocol) } else if reach.ll128_allowed(members) { &[Protocol::Simple, Protocol::Ll128, Protocol::Ll] } else { &[Protocol::Simple, Protocol::Ll] };
    let net = domain_net_rate(&groups, reach);
    let mut out = Vec::new();
    for &a in &algos {
        for &pr in protos {
            if a == Algorithm::Nvls && pr != Protocol::Simple && p.protocol == Protocol::Auto {
                continue;
            }
            // validates the algorithm against the operation like one domain does
            let mut one = p.clone();
            one.algorithm = if a == Algorithm::Hierarchical { Algorithm::Ring } else { a };
            one.protocol = pr;
            candidates(op, n, &one, f)?;
            out.push((a, pr, estimate_across(op, a, pr, &groups, bytes, p, f, net)));
        }
    }
    Ok(out)
}

/// Closed-form estimate across domains, ps: the one-domain estimate of the
/// same algorithm with the network bound and latency added (`net` = the
/// smallest domain's NIC rate, bytes/s).
#[allow(clippy::too_many_arguments)]
fn estimate_across(op: Op, a: Algorithm, pr: Protocol, groups: &[Vec<u32>], bytes: u64, p: &CollectiveParams, f: &FabricInfo, net: f64) -> f64 {
    let n: u32 = groups.iter().map(|g| g.len() as u32).sum();
    let d = groups.len() as f64;
    let extra = hw_extra_ps(pr).1 as f64;
    let s = bytes as f64;
    let wire = pr.wire_factor();
    // the inter-domain tree: 2 ceil(log2 D) hops of latency, each node's NICs
    // sending ~2 (D-1)/D of its data (`data` bytes over `rate`)
    let log_d = (d.log2()).ceil().max(1.0);
    let tree_step = p.step_for(Algorithm::Tree, pr) as f64 + 200_000.0;
    let tree_inter = |data: f64, rate: f64| 2.0 * log_d * (tree_step + extra) + if rate > 0.0 && rate.is_finite() { 2.0 * (d - 1.0) / d * data * wire / rate * 1e12 } else { 0.0 };
    if matches!(a, Algorithm::Hierarchical | Algorithm::Nvls) {
        let l = groups[0].len() as u32;
        let intra = |o: Op| {
            if a == Algorithm::Nvls {
                return estimate(o, Algorithm::Nvls, Protocol::Simple, l, bytes, p, f);
            }
            candidates(o, l, &{ let mut q = p.clone(); q.algorithm = Algorithm::Auto; q.protocol = pr; q }, f).map(|c| c.iter().map(|&(x, y)| estimate(o, x, y, l, bytes, p, f)).fold(f64::INFINITY, f64::min)).unwrap_or(f64::INFINITY)
        };
        let share = s / l as f64;
        let per_gpu_net = if net > 0.0 { net / l as f64 } else { f64::INFINITY };
        let inter = if a == Algorithm::Nvls {
            tree_inter(share, per_gpu_net)
        } else {
            2.0 * (d - 1.0) * (p.step_for(Algorithm::Ring, pr) as f64 + extra) + 2.0 * (d - 1.0) / d * share * wire / per_gpu_net * 1e12
        };
        return intra(Op::ReduceScatter) + inter + intra(Op::AllGather);
    }
    if a == Algorithm::Tree {
        let l = groups.iter().map(|g| g.len()).max().unwrap_or(1) as f64;
        let gpu = f.port_bytes_per_s * f.gpu_ports as f64;
        let part = bytes / n.max(1) as u64;
        let ch = if p.channels > 0 { p.channels } else { (part / (32 * 1024)).clamp(1, p.max_channels as u64) as u32 };
        let b = (gpu * p.link_efficiency / wire).min(proto_rate(Op::AllReduce, Algorithm::Tree, pr, ch, p, f));
        let net_bw = tree_inter(s, net) - tree_inter(0.0, net);
        return p.launch_for(Algorithm::Tree, pr) as f64 + 2.0 * (l - 1.0) * tree_step + tree_inter(0.0, net) + (2.0 * s / b * 1e12).max(net_bw);
    }
    let base = estimate(op, a, pr, n, bytes, p, f);
    let bound = if net > 0.0 { s * op.busbw_factor(n) * wire / net * 1e12 } else { 0.0 };
    let crossings = match op {
        Op::AllReduce => 2.0 * (d - 1.0),
        Op::AllToAll | Op::SendRecv => 1.0,
        _ => d - 1.0,
    };
    base.max(p.launch_for(a, pr) as f64 + bound) + crossings * extra
}

/// Parents of NCCL's double binary tree over `d` nodes (src/graph/trees.cc):
/// tree 0 is the binary tree whose node r (r > 0) hangs below the node that
/// clears r's lowest set bit and sets the next one (or only clears it when
/// that is out of range), so odd nodes are leaves and node 0 is the root;
/// tree 1 is tree 0 mirrored (r -> d-1-r) when d is even, shifted by one
/// when d is odd, so a node that is interior in one tree is a leaf in the
/// other and every node sends and receives about the same. `None` = root.
pub(crate) fn dtree_parents(d: u32) -> [Vec<Option<u32>>; 2] {
    let t0: Vec<Option<u32>> = (0..d)
        .map(|r| {
            if r == 0 {
                return None;
            }
            let b = r & r.wrapping_neg();
            let up = (r ^ b) | (b << 1);
            Some(if up >= d { r ^ b } else { up })
        })
        .collect();
    // tree 1 = tree 0 seen through a relabelling m (an involution when mirrored)
    let m = |r: u32| if d % 2 == 0 { d - 1 - r } else { (r + 1) % d };
    let inv = |r: u32| if d % 2 == 0 { d - 1 - r } else { (r + d - 1) % d };
    let t1 = (0..d).map(|r| t0[inv(r) as usize].map(m)).collect();
    [t0, t1]
}

/// NCCL's tree all_reduce across domains, as a DAG (node 0 = the launch):
/// inside every domain a chain through its GPUs to the domain's head, and
/// between the heads the double binary tree ([`dtree_parents`]); the data is
/// split over C channel groups x the 2 trees, and both trees of group c use
/// the heads at local index c (the groups spread over the rails, one NIC per
/// channel pair as NCCL's tree channels do; the heads of one tree share a
/// local index: no rail change). Per
/// chunk: reduce up the chains and the tree (each hop reducing), then
/// broadcast down; chunk k of a connection follows chunk k-1 on it. Bytes:
/// 2 (D-1) S between domains, 2 D (L-1) S inside them (L GPUs per domain).
fn lower_dtree(groups: &[Vec<u32>], bytes: u64, pr: Protocol, p: &CollectiveParams, f: &FabricInfo, launch_ps: u64) -> Result<Dag> {
    let d = groups.len() as u32;
    let l = groups.iter().map(|g| g.len()).min().unwrap_or(1) as u32;
    let n: u32 = groups.iter().map(|g| g.len() as u32).sum();
    let e = p.dtype_bytes as u64;
    let elems = bytes / e;
    let part = bytes / n.max(1) as u64;
    let ch = if p.channels > 0 { p.channels } else { (part / (32 * 1024)).clamp(1, p.max_channels as u64) as u32 };
    let c_groups = ch.div_ceil(2).clamp(1, l.max(1));
    // NCCL (enqueue.cc) shrinks a tree's chunk until each channel has about
    // 8 chunks per level of the tree's depth, down to 64 KiB: the pipeline
    // must fill the chain and the tree, not move one chunk level by level
    let depth = (l.saturating_sub(1) + (d as f64).log2().ceil() as u32).max(1) as u64;
    let per_share = bytes / (2 * c_groups as u64).max(1);
    let mut chunk = if p.chunk_bytes > 0 { p.chunk_bytes } else { 1 << 20 };
    if p.chunk_bytes == 0 {
        while per_share / chunk < depth * TREE_CHUNKS_PER_LEVEL && chunk > TREE_MIN_CHUNK_BYTES {
            chunk /= 2;
        }
    }
    let chunk_el = (chunk / e).max(1);
    let rate = proto_rate(Op::AllReduce, Algorithm::Tree, pr, ch, p, f);
    let wf = pr.wire_factor();
    let step = p.step_for(Algorithm::Tree, pr);
    let red = |el: u64| if p.reduce_bytes_per_s == 0 { 0 } else { ((el * e) as f64 * 1e12 / p.reduce_bytes_per_s as f64).ceil() as u64 };
    let xfer = |src: u32, dst: u32, el: u64| NodeKind::Transfer {
        src,
        dst,
        bytes: ((el * e) as f64 * wf).ceil() as u64,
        loopback: false,
        min_ps: if rate.is_finite() { ((el * e) as f64 * 1e12 / rate).ceil() as u64 } else { 0 },
    };
    let parents = dtree_parents(d);
    let k_per = |share: u64| share.div_ceil(chunk_el).max(1);
    let est_nodes = 2 * c_groups as u64 * k_per(elems.div_ceil(2 * c_groups as u64)) * (2 * n as u64);
    if est_nodes > MAX_DAG_NODES {
        return Err(FlitsimError::config("nbytes", bytes, &format!("a collective whose transfer DAG stays under {MAX_DAG_NODES} nodes (tree over {n} ranks needs about {est_nodes}); raise chunk_bytes")));
    }
    let mut dag = Dag::default();
    let start = dag.push(NodeKind::Delay { ps: launch_ps });
    let shares = 2 * c_groups as u64;
    for c in 0..c_groups {
        for (t, par) in parents.iter().enumerate() {
            let share = elems / shares + u64::from(((2 * c as u64) + t as u64) < elems % shares);
            if share == 0 {
                continue;
            }
            let chain: Vec<Vec<u32>> = groups
                .iter()
                .map(|g| {
                    // both trees of group c hang off the GPU at local index c (its NIC:
                    // interior in one tree, leaf in the other, so the NIC's load
                    // balances); tree 1 walks the chain the other way round
                    let j = c as usize % g.len();
                    let mut v: Vec<u32> = g[j..].iter().chain(&g[..j]).copied().collect();
                    if t == 1 {
                        v[1..].reverse();
                    }
                    v
                })
                .collect();
            let kids: Vec<Vec<u32>> = (0..d).map(|i| (0..d).filter(|&x| par[x as usize] == Some(i)).collect()).collect();
            let k_chunks = k_per(share);
            // previous chunk's node of each connection: (kind, domain, index)
            let mut last: std::collections::HashMap<(u8, u32, u32), u32> = std::collections::HashMap::new();
            for k in 0..k_chunks {
                let el = share / k_chunks + u64::from(k < share % k_chunks);
                let mut add = |dag: &mut Dag, key: (u8, u32, u32), kind: NodeKind, preds: &[(u32, u64)]| -> u32 {
                    let me = dag.push(kind);
                    if preds.is_empty() {
                        dag.edge(start, me, 0);
                    }
                    for &(a, dl) in preds {
                        dag.edge(a, me, dl);
                    }
                    if let Some(&prev) = last.get(&key) {
                        dag.edge(prev, me, 0);
                    }
                    last.insert(key, me);
                    me
                };
                // up: chains (tail -> head), then the tree, leaves first
                let mut chain_top = vec![None; d as usize];
                for i in 0..d {
                    let g = &chain[i as usize];
                    let mut prev: Option<u32> = None;
                    for m in (1..g.len() as u32).rev() {
                        let preds: Vec<(u32, u64)> = prev.map(|x| vec![(x, step + red(el))]).unwrap_or_default();
                        prev = Some(add(&mut dag, (0, i, m), xfer(g[m as usize], g[m as usize - 1], el), &preds));
                    }
                    chain_top[i as usize] = prev;
                }
                let mut up = vec![None; d as usize];
                // post-order: a node sends up once its chain and its children have arrived
                let mut order: Vec<u32> = Vec::with_capacity(d as usize);
                fn post(i: u32, kids: &[Vec<u32>], out: &mut Vec<u32>) {
                    for &c in &kids[i as usize] {
                        post(c, kids, out);
                    }
                    out.push(i);
                }
                let root = (0..d).find(|&x| par[x as usize].is_none()).expect("a root");
                post(root, &kids, &mut order);
                let ready = |i: u32, up: &[Option<u32>]| -> Vec<(u32, u64)> {
                    let mut v: Vec<(u32, u64)> = chain_top[i as usize].map(|x| vec![(x, step + red(el))]).unwrap_or_default();
                    v.extend(kids[i as usize].iter().filter_map(|&c| up[c as usize]).map(|x| (x, step + red(el))));
                    v
                };
                for &i in &order {
                    if let Some(pa) = par[i as usize] {
                        let preds = ready(i, &up);
                        up[i as usize] = Some(add(&mut dag, (1, i, 0), xfer(chain[i as usize][0], chain[pa as usize][0], el), &preds));
                    }
                }
                // down: the root's result to its children, each head down its chain
                let root_ready = ready(root, &up);
                let mut down = vec![None; d as usize];
                for &i in order.iter().rev() {
                    let from: Vec<(u32, u64)> = match par[i as usize] {
                        None => root_ready.clone(),
                        Some(pa) => match down[pa as usize] {
                            Some(x) => vec![(x, step)],
                            None => root_ready.clone(),
                        },
                    };
                    if let Some(pa) = par[i as usize] {
                        down[i as usize] = Some(add(&mut dag, (2, i, 0), xfer(chain[pa as usize][0], chain[i as usize][0], el), &from));
                    }
                    let g = &chain[i as usize];
                    let mut prev: Vec<(u32, u64)> = match down[i as usize] {
                        Some(x) => vec![(x, step)],
                        None => root_ready.clone(),
                    };
                    for m in 0..(g.len() as u32).saturating_sub(1) {
                        let me = add(&mut dag, (3, i, m), xfer(g[m as usize], g[m as usize + 1], el), &prev);
                        prev = vec![(me, step)];
                    }
                }
            }
        }
    }
    Ok(dag)
}

/// Append `sub` to `out`; its node 0 (the launch delay) becomes a zero
/// delay when `zero_start`. Returns the offset of its nodes.
fn append(out: &mut Dag, sub: &Dag, zero_start: bool) -> u32 {
    let base = out.nodes.len() as u32;
    for (i, n) in sub.nodes.iter().enumerate() {
        out.push(if i == 0 && zero_start { NodeKind::Delay { ps: 0 } } else { *n });
    }
    for &(a, b, d) in &sub.edges {
        out.edge(base + a, base + b, d);
    }
    base
}

/// Nodes of `sub` without successors.
fn sinks(sub: &Dag) -> Vec<u32> {
    let mut has = vec![false; sub.nodes.len()];
    for &(a, _, _) in &sub.edges {
        has[a as usize] = true;
    }
    (0..sub.nodes.len() as u32).filter(|&i| !has[i as usize]).collect()
}

/// Lower with a given (algorithm, protocol); one domain: [`lower_as`].
///
/// # Errors
/// As [`lower_as`] and [`plan`].
#[allow(clippy::too_many_arguments)]
pub fn lower_in(op: Op, members: &[u32], bytes: u64, a: Algorithm, pr: Protocol, p: &CollectiveParams, f: &FabricInfo, reach: &Reach) -> Result<Lowered> {
    let Some(groups) = split_domains(members, reach) else {
        return lower_as(op, members, bytes, a, pr, p, f);
    };
    check_request(op, members, bytes, p, f)?;
    let net = domain_net_rate(&groups, reach);
    let est = estimate_across(op, a, pr, &groups, bytes, p, f, net);
    let e = p.dtype_bytes as u64;
    let mut dag = Dag::default();
    let (channels, chunk) = match (op, a) {
        (Op::AllReduce, Algorithm::Tree) => {
            dag = lower_dtree(&groups, bytes, pr, p, f, p.launch_for(Algorithm::Tree, pr))?;
            let part = bytes / members.len() as u64;
            (if p.channels > 0 { p.channels } else { (part / (32 * 1024)).clamp(1, p.max_channels as u64) as u32 }, p.chunk_bytes)
        }
        (Op::AllReduce, Algorithm::Hierarchical | Algorithm::Nvls) => {
            // Nvls across domains = NCCL's NVLS-tree: NVLS reduce-scatter in
            // every domain, the double binary tree across them per rail, NVLS
            // all-gather; hierarchical: the intra algorithm by estimate, a ring
            // per rail. A size that is not a whole element per GPU of a domain
            // runs padded to one (< L elements more; NCCL takes any count).
            let nv = a == Algorithm::Nvls;
            let l = groups[0].len();
            let unit = e * l as u64;
            let bytes = bytes.div_ceil(unit) * unit;
            let root = dag.push(NodeKind::Delay { ps: if nv { p.nvls_latency(l as u32) } else { p.launch_for(Algorithm::Ring, pr) } });
            let mut inner = p.clone();
            inner.algorithm = Algorithm::Auto;
            inner.protocol = pr;
            let best = |o: Op, g: &[u32], b: u64| -> Result<Lowered> {
                if nv {
                    return lower_as(o, g, b, Algorithm::Nvls, Protocol::Simple, p, f);
                }
                let c = candidates(o, g.len() as u32, &inner, f)?;
                let (x, y) = c.iter().copied().min_by(|u, v| estimate(o, u.0, u.1, g.len() as u32, b, p, f).total_cmp(&estimate(o, v.0, v.1, g.len() as u32, b, p, f))).expect("a candidate");
                lower_as(o, g, b, x, y, p, f)
            };
            // phase 1: reduce-scatter in every domain
            let mut prev = vec![root];
            let phase = |dag: &mut Dag, subs: Vec<Dag>, prev: &[u32]| -> Vec<u32> {
                let bar = if prev.len() == 1 { prev[0] } else {
                    let b = dag.push(NodeKind::Delay { ps: 0 });
                    for &x in prev {
                        dag.edge(x, b, 0);
                    }
                    b
                };
                let mut out = Vec::new();
                for s in subs {
                    let base = append(dag, &s, true);
                    dag.edge(bar, base, 0);
                    out.extend(sinks(&s).into_iter().map(|x| x + base));
                }
                out
            };
            let rs: Vec<Dag> = groups.iter().map(|g| best(Op::ReduceScatter, g, bytes).map(|x| x.dag)).collect::<Result<_>>()?;
            prev = phase(&mut dag, rs, &prev);
            // phase 2: all_reduce of each 1/L share across domains, one rail per local index
            let share = bytes / l as u64;
            let mut ar = Vec::new();
            for j in 0..l {
                let rail: Vec<u32> = groups.iter().map(|g| g[j]).collect();
                ar.push(if nv {
                    let singles: Vec<Vec<u32>> = rail.iter().map(|&x| vec![x]).collect();
                    lower_dtree(&singles, share, pr, p, f, 0)?
                } else {
                    lower_as(Op::AllReduce, &rail, share, Algorithm::Ring, pr, p, f)?.dag
                });
            }
            prev = phase(&mut dag, ar, &prev);
            let ag: Vec<Dag> = groups.iter().map(|g| best(Op::AllGather, g, bytes).map(|x| x.dag)).collect::<Result<_>>()?;
            phase(&mut dag, ag, &prev);
            (1, p.chunk_bytes)
        }
        (Op::AllToAll | Op::SendRecv, _) => {
            let low = lower_as(op, members, bytes, Algorithm::Direct, pr, p, f)?;
            return Ok(Lowered { estimate_ps: est, ..low });
        }
        (Op::Broadcast | Op::Reduce, _) => {
            // a chain domain by domain, starting in the root's domain with the root
            let root = members[p.root as usize];
            let mut gs = groups.clone();
            let ri = gs.iter().position(|g| g.contains(&root)).expect("root in a group");
            gs.rotate_left(ri);
            let g0 = &mut gs[0];
            let k = g0.iter().position(|&x| x == root).expect("root");
            g0.rotate_left(k);
            let order: Vec<u32> = gs.concat();
            let mut q = p.clone();
            q.root = 0;
            let low = lower_as(op, &order, bytes, Algorithm::Ring, pr, &q, f)?;
            return Ok(Lowered { estimate_ps: est, ..low });
        }
        (_, Algorithm::Ring | Algorithm::Auto) => {
            // C channel groups, group c rotated by c inside every domain
            let n = members.len() as u64;
            let lmin = groups.iter().map(|g| g.len()).min().unwrap_or(1) as u32;
            let per_rank = matches!(op, Op::AllGather | Op::ReduceScatter);
            let part = bytes / n;
            let ch = if p.channels > 0 { p.channels } else { (part / (32 * 1024)).clamp(1, p.max_channels as u64) as u32 };
            let c_groups = ch.min(lmin).max(1);
            // elements split over groups in units that keep every group's size legal
            let unit = if per_rank { e * n } else { e };
            let units = bytes / unit;
            let root = dag.push(NodeKind::Delay { ps: p.launch_for(Algorithm::Ring, pr) });
            let mut q = p.clone();
            q.channels = (ch / c_groups).max(1);
            for c in 0..c_groups {
                let u = units / c_groups as u64 + u64::from((c as u64) < units % c_groups as u64);
                if u == 0 {
                    continue;
                }
                let order: Vec<u32> = groups
                    .iter()
                    .flat_map(|g| {
                        let r = c as usize % g.len();
                        g[r..].iter().chain(&g[..r]).copied().collect::<Vec<u32>>()
                    })
                    .collect();
                let sub = lower_as(op, &order, u * unit, Algorithm::Ring, pr, &q, f)?;
                let base = append(&mut dag, &sub.dag, true);
                dag.edge(root, base, 0);
            }
            (ch, p.chunk_bytes)
        }
        (_, x) => return Err(FlitsimError::config("algorithm", super::lower::algo_name(x), "ring or hierarchical across domains")),
    };
    if dag.nodes.len() as u64 > MAX_DAG_NODES {
        return Err(FlitsimError::config("nbytes", bytes, &format!("a collective whose transfer DAG stays under {MAX_DAG_NODES} nodes; raise chunk_bytes")));
    }
    Ok(Lowered { dag, algorithm: a, protocol: pr, channels, chunk_bytes: if chunk > 0 { chunk } else { 1 << 20 }, estimate_ps: est })
}

/// Lower with `auto` resolved by the closed-form estimates of [`plan`].
///
/// # Errors
/// As [`lower_in`].
pub fn lower_best(op: Op, members: &[u32], bytes: u64, p: &CollectiveParams, f: &FabricInfo, reach: &Reach) -> Result<Lowered> {
    let c = plan(op, members, bytes, p, f, reach)?;
    let (a, pr, _) = c.iter().copied().min_by(|x, y| x.2.total_cmp(&y.2)).ok_or_else(|| FlitsimError::config("algorithm", "auto", "an algorithm the operation supports"))?;
    lower_in(op, members, bytes, a, pr, p, f, reach)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::transport::PathClass;

    /// D domains of L GPUs (ids domain-major), NVLink inside, network between, rail = local index.
    fn nodes(d: u32, l: u32) -> Reach {
        let g = d * l;
        let dom: Vec<u32> = (0..g).map(|x| x / l).collect();
        let mut class = Vec::new();
        for a in 0..g {
            for b in 0..g {
                class.push(if a / l == b / l { PathClass::NvLink } else { PathClass::Network });
            }
        }
        Reach::from_tables(g, g, dom, vec![u32::MAX; g as usize], (0..g).map(|x| x % l).collect(), class, vec![None; (g * g) as usize], true).unwrap().with_net_rates(vec![50e9; g as usize])
    }

    fn info(g: u32) -> FabricInfo {
        FabricInfo { gpus: g, gpu_ports: 18, port_bytes_per_s: 25e9, nvls: false }
    }

    /// (bytes between domains, bytes inside domains) of a DAG.
    fn split_bytes(dag: &Dag, l: u32) -> (u64, u64) {
        let (mut net, mut intra) = (0, 0);
        for n in &dag.nodes {
            if let NodeKind::Transfer { src, dst, bytes, .. } = *n {
                if src / l == dst / l {
                    intra += bytes;
                } else {
                    net += bytes;
                }
            }
        }
        (net, intra)
    }

    #[test]
    fn auto_never_picks_ll128_off_nvlink() {
        // NCCL tuning.cc: LL128 is on by default only where the graphs' intra path is NVLink
        let pcie = |n: u32| Reach::from_tables(n, n, vec![0; n as usize], vec![u32::MAX; n as usize], vec![u32::MAX; n as usize], vec![PathClass::Pcie; (n * n) as usize], vec![None; (n * n) as usize], false).unwrap();
        let members: Vec<u32> = (0..8).collect();
        for op in [Op::AllReduce, Op::AllGather, Op::ReduceScatter] {
            for s in [4u64 << 10, 4 << 20, 64 << 20] {
                let c = plan(op, &members, s, &CollectiveParams::default(), &info(8), &pcie(8)).unwrap();
                assert!(!c.is_empty() && c.iter().all(|x| x.1 != Protocol::Ll128), "{op:?} {s}: {c:?}");
                // NVLink keeps it
                let nv = plan(op, &members, s, &CollectiveParams::default(), &info(8), &nodes(1, 8)).unwrap();
                assert!(nv.iter().any(|x| x.1 == Protocol::Ll128));
            }
        }
        // forced LL128 stays forced (NCCL_PROTO=LL128 enables it)
        let forced = CollectiveParams { protocol: Protocol::Ll128, ..Default::default() };
        assert!(plan(Op::AllReduce, &members, 1 << 20, &forced, &info(8), &pcie(8)).unwrap().iter().all(|x| x.1 == Protocol::Ll128));
        // across nodes with NVLink inside and GPUDirect RDMA, LL128 stays a candidate
        let m16: Vec<u32> = (0..16).collect();
        assert!(plan(Op::AllReduce, &m16, 1 << 20, &CollectiveParams::default(), &info(16), &nodes(2, 8)).unwrap().iter().any(|x| x.1 == Protocol::Ll128));
    }

    #[test]
    fn hierarchical_all_reduce_moves_the_closed_form_bytes() {
        // intra reduce-scatter + all-gather: 2 D (L-1) S; inter all_reduce of S/L per rail: 2 (D-1) S.
        let (d, l, s) = (2u32, 4u32, 64u64 << 20);
        let mut p = CollectiveParams { algorithm: Algorithm::Hierarchical, protocol: Protocol::Simple, ..Default::default() };
        p.chunk_bytes = 1 << 20;
        let members: Vec<u32> = (0..d * l).collect();
        let low = lower_in(Op::AllReduce, &members, s, Algorithm::Hierarchical, Protocol::Simple, &p, &info(d * l), &nodes(d, l)).unwrap();
        let (net, intra) = split_bytes(&low.dag, l);
        assert_eq!(net, 2 * (d as u64 - 1) * s);
        assert_eq!(intra, 2 * d as u64 * (l as u64 - 1) * s);
        // forced on one domain, or with unequal domains: refused
        assert!(plan(Op::AllReduce, &[0, 1, 2], s, &p, &info(8), &nodes(2, 4)).unwrap_err().to_string().contains("one domain"));
        assert!(plan(Op::AllReduce, &[0, 1, 2, 4], s, &p, &info(8), &nodes(2, 4)).unwrap_err().to_string().contains("same number"));
    }

    #[test]
    fn ring_across_domains_crosses_each_boundary_once_per_channel_group() {
        // flat ring: 2 (n-1) S in all; D crossings of every group's ring carry 2 (n-1)/n of its share.
        let (d, l, s) = (2u32, 4u32, 64u64 << 20);
        let n = (d * l) as u64;
        let p = CollectiveParams { chunk_bytes: 1 << 20, ..Default::default() };
        let members: Vec<u32> = (0..d * l).collect();
        let low = lower_in(Op::AllReduce, &members, s, Algorithm::Ring, Protocol::Simple, &p, &info(d * l), &nodes(d, l)).unwrap();
        let (net, intra) = split_bytes(&low.dag, l);
        assert_eq!(net + intra, 2 * (n - 1) * s);
        assert_eq!(net, d as u64 * 2 * (n - 1) * s / n);
        // every rail's GPU is some group's entry: the crossings land on all L local indices
        let mut entry = std::collections::BTreeSet::new();
        for nd in &low.dag.nodes {
            if let NodeKind::Transfer { src, dst, .. } = *nd {
                if src / l != dst / l {
                    entry.insert(dst % l);
                }
            }
        }
        assert_eq!(entry.len(), l as usize);
        // tree / NVLS across domains are all_reduce algorithms: other ops refuse them by name
        let t = CollectiveParams { algorithm: Algorithm::Tree, ..Default::default() };
        assert!(plan(Op::AllGather, &members, s, &t, &info(8), &nodes(d, l)).unwrap_err().to_string().contains("tree"));
        // NVLS-tree needs NVLS switches
        let nv = CollectiveParams { algorithm: Algorithm::Nvls, ..Default::default() };
        assert!(plan(Op::AllReduce, &members, s, &nv, &info(8), &nodes(d, l)).unwrap_err().to_string().contains("NVLS"));
        // auto offers ring, tree and hierarchical for all_reduce, direct for all_to_all
        let a = plan(Op::AllReduce, &members, s, &CollectiveParams::default(), &info(8), &nodes(d, l)).unwrap();
        assert!(a.iter().any(|x| x.0 == Algorithm::Hierarchical) && a.iter().any(|x| x.0 == Algorithm::Ring) && a.iter().any(|x| x.0 == Algorithm::Tree));
        let a2 = plan(Op::AllToAll, &members, s, &CollectiveParams::default(), &info(8), &nodes(d, l)).unwrap();
        assert!(a2.iter().all(|x| x.0 == Algorithm::Direct));
    }

    #[test]
    fn broadcast_across_domains_chains_domain_by_domain() {
        let (d, l, s) = (2u32, 4u32, 8u64 << 20);
        let p = CollectiveParams { root: 5, ..Default::default() };
        let members: Vec<u32> = (0..d * l).collect();
        let low = lower_in(Op::Broadcast, &members, s, Algorithm::Ring, Protocol::Simple, &p, &info(8), &nodes(d, l)).unwrap();
        // the chain crosses the network once: S bytes between domains, (n-2) S inside
        let (net, intra) = split_bytes(&low.dag, l);
        assert_eq!((net, intra), (s, 6 * s));
        // and starts at the root
        let first = low.dag.nodes.iter().find_map(|n| if let NodeKind::Transfer { src, .. } = *n { Some(src) } else { None });
        assert_eq!(first, Some(5));
    }

    #[test]
    fn double_binary_tree_spans_every_node_and_balances_the_two_trees() {
        for d in 1..=17u32 {
            let ts = dtree_parents(d);
            let mut kids = vec![0u32; d as usize];
            for t in &ts {
                assert_eq!(t.iter().filter(|x| x.is_none()).count(), 1, "one root (d = {d})");
                for r in 0..d {
                    // following parents reaches the root within d hops: a tree, no cycle
                    let (mut x, mut hops) = (r, 0);
                    while let Some(pa) = t[x as usize] {
                        assert!(pa < d && pa != x);
                        x = pa;
                        hops += 1;
                        assert!(hops <= d, "cycle at d = {d}");
                    }
                    if let Some(pa) = t[r as usize] {
                        kids[pa as usize] += 1;
                    }
                }
            }
            // NCCL's property: a node interior in one tree is (near) a leaf in the other, so no
            // node feeds more than 2 children over both trees (sends / receives stay balanced)
            assert!(kids.iter().all(|&k| k <= 2), "d = {d}: {kids:?}");
        }
    }

    #[test]
    fn tree_across_domains_moves_the_closed_form_bytes() {
        // NCCL's tree: chains inside domains, double binary tree between heads; every GPU but the
        // roots sends each element up once and every GPU but the chain tails receives it down once:
        // 2 (D-1) S between domains, 2 D (L-1) S inside them
        for (d, l) in [(2u32, 4u32), (4, 2), (3, 2)] {
            let s = 12u64 << 20;
            let p = CollectiveParams { chunk_bytes: 1 << 20, ..Default::default() };
            let members: Vec<u32> = (0..d * l).collect();
            let low = lower_in(Op::AllReduce, &members, s, Algorithm::Tree, Protocol::Simple, &p, &info(d * l), &nodes(d, l)).unwrap();
            let (net, intra) = split_bytes(&low.dag, l);
            assert_eq!(net, 2 * (d as u64 - 1) * s, "d = {d}");
            assert_eq!(intra, 2 * d as u64 * (l as u64 - 1) * s, "d = {d}");
            // the trees' heads of a channel group share a local index: inter-domain hops stay on one rail
            for nd in &low.dag.nodes {
                if let NodeKind::Transfer { src, dst, .. } = *nd {
                    if src / l != dst / l {
                        assert_eq!(src % l, dst % l);
                    }
                }
            }
        }
    }

    #[test]
    fn nvls_tree_across_domains_and_padded_hierarchical() {
        // NVLS-tree: NVLS reduce-scatter / all-gather inside (loopback traffic only), the tree across
        // the rails: 2 (D-1) S / L per rail x L rails = 2 (D-1) S between domains, nothing else
        let (d, l, s) = (4u32, 2u32, 8u64 << 20);
        let members: Vec<u32> = (0..d * l).collect();
        let f = FabricInfo { nvls: true, ..info(d * l) };
        let p = CollectiveParams { chunk_bytes: 1 << 20, ..Default::default() };
        let low = lower_in(Op::AllReduce, &members, s, Algorithm::Nvls, Protocol::Simple, &p, &f, &nodes(d, l)).unwrap();
        let (net, intra) = split_bytes(&low.dag, l);
        let loop_bytes: u64 = low.dag.nodes.iter().map(|n| if let NodeKind::Transfer { bytes, loopback: true, .. } = *n { bytes } else { 0 }).sum();
        assert_eq!(net, 2 * (d as u64 - 1) * s);
        assert_eq!(intra, loop_bytes);
        // hierarchical takes a size that is not a whole element per GPU of a domain (padded): 8 B
        let h = CollectiveParams { algorithm: Algorithm::Hierarchical, ..Default::default() };
        assert!(plan(Op::AllReduce, &members, 8, &h, &f, &nodes(d, l)).is_ok());
        let low = lower_in(Op::AllReduce, &members, 8, Algorithm::Hierarchical, Protocol::Ll, &h, &f, &nodes(d, l)).unwrap();
        assert!(low.dag.nodes.iter().any(|n| matches!(n, NodeKind::Transfer { .. })));
        // a repeated GPU is reported as such, not as uneven domains
        let e = plan(Op::AllReduce, &[0, 1, 2, 2], 1 << 20, &h, &f, &nodes(d, l)).unwrap_err().to_string();
        assert!(e.contains("appears twice"), "{e}");
    }
}
