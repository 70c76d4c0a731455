//! Collective lowering against closed forms (no fabric contention: the ideal
//! alpha-beta port model executes the same DAGs).

use flitsim::collective::{lower, run_collective_ideal, Algorithm, CollectiveParams, CollectiveRequest, FabricInfo, Op, Protocol};

fn req(op: Op, n: u32, bytes: u64, algo: Algorithm) -> CollectiveRequest {
    CollectiveRequest {
        op,
        members: (0..n).collect(),
        bytes,
        params: CollectiveParams { algorithm: algo, protocol: Protocol::Simple, channels: 1, chunk_bytes: bytes, launch_ps: 1, host_launch_ps: 0, step_latency_ps: 1, ..Default::default() },
    }
}

/// Ring all-reduce, one channel, one chunk per shard, on one port of B per GPU
/// with latency alpha: 2(n-1) steps of S/n bytes, T = 2(n-1)/n S/B + 2(n-1) alpha
/// (Thakur, Rabenseifner, Gropp 2005, "Optimization of collective communication
/// operations in MPICH", ring/reduce-scatter+allgather cost). Here alpha is the
/// port model's latency plus the 1 ps step latency; launch is 1 ps.
#[test]
fn ring_all_reduce_matches_closed_form() {
    let b = 100e9; // bytes/s
    let alpha = 2_000_000u64; // 2 us
    for &n in &[2u32, 4, 8] {
        let s = 8u64 * n as u64 * 1_000_000; // divisible by n x 4-byte elements
        let t = run_collective_ideal(n, alpha, b, false, &req(Op::AllReduce, n, s, Algorithm::Ring)).unwrap();
        let k = 2 * (n as u64 - 1);
        let closed = k as f64 * (s as f64 / n as f64) / b * 1e12 + k as f64 * alpha as f64 + (k - 1) as f64 * 1.0 + 1.0;
        assert!((t as f64 - closed).abs() <= k as f64 + 2.0, "n={n}: {t} vs {closed}");
    }
}

/// all_gather and reduce_scatter: n-1 steps of S/n (same reference).
#[test]
fn ring_gather_and_scatter_match_closed_form() {
    let (b, alpha, n) = (50e9, 1_000_000u64, 8u32);
    let s = 64u64 << 20;
    for op in [Op::AllGather, Op::ReduceScatter] {
        let t = run_collective_ideal(n, alpha, b, false, &req(op, n, s, Algorithm::Ring)).unwrap();
        let k = (n - 1) as f64;
        let closed = k * (s as f64 / n as f64) / b * 1e12 + k * alpha as f64 + k;
        assert!((t as f64 - closed).abs() <= 10.0, "{op:?}: {t} vs {closed}");
    }
}

fn info(nvls: bool) -> FabricInfo {
    FabricInfo { gpus: 8, gpu_ports: 18, port_bytes_per_s: 25e9, nvls }
}

/// Bytes per GPU: ring all_reduce sends 2(n-1)/n S; NVLS sends S (n+1)/n
/// (contributions S into the switch, the reduced shard S/n multicast back);
/// reduce_scatter + all_gather send (n-1)/n S each, together the all_reduce's.
#[test]
fn bytes_per_gpu_follow_the_algorithms() {
    let (n, s) = (8u32, 8u64 << 20);
    let p = |a| CollectiveParams { algorithm: a, protocol: Protocol::Simple, ..Default::default() };
    let m: Vec<u32> = (0..n).collect();
    let sent = |op, a| lower(op, &m, s, &p(a), &info(true)).unwrap().dag.bytes_sent(n);
    let ring = sent(Op::AllReduce, Algorithm::Ring);
    let nvls = sent(Op::AllReduce, Algorithm::Nvls);
    let rs = sent(Op::ReduceScatter, Algorithm::Ring);
    let ag = sent(Op::AllGather, Algorithm::Ring);
    for g in 0..n as usize {
        assert_eq!(ring[g], 2 * (n as u64 - 1) * s / n as u64);
        assert!((nvls[g] as f64 - s as f64 * (n as f64 + 1.0) / n as f64).abs() < 64.0);
        assert_eq!(rs[g] + ag[g], ring[g]);
        assert_eq!(rs[g], (n as u64 - 1) * s / n as u64);
    }
    // NVLS moves (n+1)/n / (2(n-1)/n) = 9/14 of the ring's bytes at n = 8.
    assert!((nvls[0] as f64 / ring[0] as f64 - 9.0 / 14.0).abs() < 1e-3);
}

/// LL128 puts 128/120 wire bytes per user byte, LL 2 (NCCL device.h).
#[test]
fn protocols_scale_wire_bytes() {
    let (n, s) = (4u32, 3u64 << 20);
    let m: Vec<u32> = (0..n).collect();
    let b = |pr| {
        let p = CollectiveParams { algorithm: Algorithm::Ring, protocol: pr, channels: 1, ..Default::default() };
        lower(Op::AllGather, &m, s, &p, &info(false)).unwrap().dag.bytes_sent(n)[0] as f64
    };
    let simple = b(Protocol::Simple);
    assert!((b(Protocol::Ll128) / simple - 128.0 / 120.0).abs() < 1e-4);
    assert!((b(Protocol::Ll) / simple - 2.0).abs() < 1e-4);
}

#[test]
fn bad_input_is_a_config_error() {
    let p = CollectiveParams::default();
    let e = lower(Op::AllReduce, &[0, 1, 1], 1024, &p, &info(true)).unwrap_err().to_string();
    assert!(e.contains("appears twice"), "{e}");
    let e = lower(Op::AllReduce, &[0, 9], 1024, &p, &info(true)).unwrap_err().to_string();
    assert!(e.contains("not on the fabric"), "{e}");
    let nv = CollectiveParams { algorithm: Algorithm::Nvls, ..Default::default() };
    let e = lower(Op::AllReduce, &[0, 1], 1024, &nv, &info(false)).unwrap_err().to_string();
    assert!(e.contains("NVLS"), "{e}");
    let e = lower(Op::AllReduce, &[0, 1], 1023, &p, &info(true)).unwrap_err().to_string();
    assert!(e.contains("4-byte elements"), "{e}");
    let e = lower(Op::AllGather, &[0, 1, 2], 1024, &p, &info(true)).unwrap_err().to_string();
    assert!(e.contains("multiple of 12"), "{e}");
    let tree = CollectiveParams { algorithm: Algorithm::Tree, ..Default::default() };
    let e = lower(Op::AllGather, &[0, 1], 1024, &tree, &info(true)).unwrap_err().to_string();
    assert!(e.contains("algorithm"), "{e}");
}

/// nccl-tests PERFORMANCE.md factors.
#[test]
fn busbw_factors_are_nccl_tests() {
    assert_eq!(Op::AllReduce.busbw_factor(8), 2.0 * 7.0 / 8.0);
    assert_eq!(Op::AllGather.busbw_factor(8), 7.0 / 8.0);
    assert_eq!(Op::ReduceScatter.busbw_factor(4), 3.0 / 4.0);
    assert_eq!(Op::AllToAll.busbw_factor(72), 71.0 / 72.0);
    assert_eq!(Op::Broadcast.busbw_factor(8), 1.0);
    assert_eq!(Op::SendRecv.busbw_factor(2), 1.0);
}

/// Issue 13: parameters that overflowed into faster answers, and DAGs too big
/// to allocate, are Config errors naming the field (no abort, no wrap).
#[test]
fn absurd_parameters_and_dag_sizes_are_refused() {
    let m: Vec<u32> = (0..8).collect();
    let bad = [
        CollectiveParams { step_latency_ps: u64::MAX, ..Default::default() },
        CollectiveParams { link_efficiency: 1e-300, ..Default::default() },
        CollectiveParams { nvls_efficiency: 1e-300, ..Default::default() },
        CollectiveParams { ll_efficiency: f64::NAN, ..Default::default() },
        CollectiveParams { host_launch_ps: u64::MAX, ..Default::default() },
    ];
    for p in &bad {
        let e = lower(Op::AllReduce, &m, 1 << 20, p, &info(true)).unwrap_err().to_string();
        assert!(e.contains("ps") || e.contains("efficiency"), "{e}");
    }
    // chunk_bytes = 4 on 1 GiB: 2^28 chunks -> estimated before allocating
    let tiny = CollectiveParams { chunk_bytes: 4, ..Default::default() };
    let e = lower(Op::AllReduce, &m, 1 << 30, &tiny, &info(true)).unwrap_err().to_string();
    assert!(e.contains("DAG") && e.contains("chunk_bytes"), "{e}");
    let e = lower(Op::AllReduce, &m, 1 << 50, &CollectiveParams::default(), &info(true)).unwrap_err().to_string();
    assert!(e.contains("DAG"), "{e}");
}

/// The intra-node tree is two chains: 2 (n-1) S bytes in all (each chain moves
/// its half up and down n-1 hops), like a ring's n x 2(n-1)/n S.
#[test]
fn tree_chains_move_two_n_minus_one_halves() {
    let (n, s) = (8u32, 8u64 << 20);
    let m: Vec<u32> = (0..n).collect();
    let p = CollectiveParams { algorithm: Algorithm::Tree, protocol: Protocol::Simple, ..Default::default() };
    let sent: u64 = lower(Op::AllReduce, &m, s, &p, &info(false)).unwrap().dag.bytes_sent(n).iter().sum();
    assert_eq!(sent, 2 * (n as u64 - 1) * s);
}
