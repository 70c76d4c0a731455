//! Flow level against packet level and closed forms.

use flitsim::engine::NoInterrupt;
use flitsim::fabric::{run_batch, FabricSpec, Fidelity, TransferBatch};
use flitsim::flow::{run_batch_at, run_batch_flow};
use flitsim::presets;
mod common;
use common::{batch, all_to_all};

fn both(spec: &FabricSpec, b: &TransferBatch) -> (u64, u64) {
    let p = run_batch(spec, b, &mut NoInterrupt).unwrap();
    let f = run_batch_flow(spec, b, &mut NoInterrupt).unwrap();
    (p.makespan_ps, f.makespan_ps)
}

#[test]
fn single_packet_matches_packet_level_exactly() {
    let spec = presets::planar(2, 1, false);
    let (p, f) = both(&spec, &batch(&[(0, 1, 256)]));
    assert_eq!(p, f);
}

#[test]
fn point_to_point_bandwidth_within_2_percent() {
    let spec = presets::planar(4, 2, false);
    let (p, f) = both(&spec, &batch(&[(0, 1, 8 << 20)]));
    assert!((f as f64 / p as f64 - 1.0).abs() < 0.02, "packet {p} flow {f}");
}

/// NCCL's staggered order: source s lists s+1, s+2, ... (mod n).
fn pairwise(gpus: u32, bytes: u64) -> TransferBatch {
    let mut items = Vec::new();
    for k in 1..gpus {
        for s in 0..gpus {
            items.push((s, (s + k) % gpus, bytes));
        }
    }
    batch(&items)
}

fn ratio(spec: &FabricSpec, b: &TransferBatch) -> (f64, String) {
    let p = run_batch(spec, b, &mut NoInterrupt).unwrap();
    let f = run_batch_flow(spec, b, &mut NoInterrupt).unwrap();
    (f.makespan_ps as f64 / p.makespan_ps as f64, f.fidelity_reason)
}

#[test]
fn pairwise_all_to_all_within_2_percent() {
    for (g, pl, b) in [(8u32, 4u32, 1u64 << 20), (16, 2, 1 << 20), (8, 1, 4 << 20)] {
        let (r, why) = ratio(&presets::planar(g, pl, true), &pairwise(g, b));
        assert!((r - 1.0).abs() < 0.02, "{g} GPUs x {pl} planes, {b} B: flow / packet = {r}");
        assert!(!why.starts_with("warning"), "{why}");
    }
}

#[test]
fn synchronized_all_to_all_is_flagged() {
    // Every source lists 0, 1, 2, ...: a rolling incast; packet level is up to
    // 11 % slower than fluid sharing (16 GPUs, 4 MiB), so flow level warns.
    let spec = presets::planar(16, 2, true);
    let (r, why) = ratio(&spec, &all_to_all(16, 1 << 20));
    assert!(r < 0.98, "{r}");
    assert!(why.contains("arbitration-bound") && why.contains("round-robin"), "{why}");
    let mut s = spec.clone();
    s.fidelity = Fidelity::Auto;
    let a = run_batch_at(&s, &all_to_all(16, 1 << 20), &mut NoInterrupt).unwrap();
    assert_eq!(a.fidelity, "packet");
    assert!(a.fidelity_reason.starts_with("auto chose packet: arbitration-bound"), "{}", a.fidelity_reason);
}

#[test]
fn incast_alone_is_exact() {
    // Two sources into one GPU with nothing else on their ports: both fidelities
    // share the output equally; the flow answer equals the packet one.
    let spec = presets::planar(4, 2, false);
    let b = batch(&[(0, 2, 4 << 20), (1, 2, 4 << 20)]);
    let (r, why) = ratio(&spec, &b);
    assert!((r - 1.0).abs() < 1e-3, "{r}");
    assert!(!why.starts_with("warning"), "{why}");
}

#[test]
fn incast_with_other_traffic_matches() {
    // Six sources into GPU 7 (oversubscribed) while each also sends to GPU 6:
    // the packet level's ports skip credit-blocked shares, so the other traffic
    // is not held back; every completion agrees with flow level within 0.1 %.
    let spec = presets::planar(8, 1, false);
    let mut items = Vec::new();
    for s in 0..6u32 {
        items.push((s, 7, 4u64 << 20));
        items.push((s, 6, 1u64 << 19));
    }
    let b = batch(&items);
    let p = run_batch(&spec, &b, &mut NoInterrupt).unwrap();
    let f = run_batch_flow(&spec, &b, &mut NoInterrupt).unwrap();
    for i in 0..items.len() {
        let r = f.end_ps[i] as f64 / p.end_ps[i] as f64;
        assert!((r - 1.0).abs() < 1e-3, "transfer {i}: {r}");
    }
    assert!(!f.fidelity_reason.starts_with("warning"), "{}", f.fidelity_reason);
}

#[test]
fn capacities_are_the_packet_levels_pacing() {
    // planar(4, 2): two NVLink 5 ports per GPU; a 256 B packet is 17 flits of
    // 16 B at 50 GB/s = 5440 ps, so one GPU moves 2 x 256 B / 5440 ps of payload.
    let f = flitsim::flow::FlowFabric::new(&presets::planar(4, 2, false)).unwrap();
    assert!(f.collapsed);
    let expect = 2.0 * 256.0 / 5440.0;
    assert!((f.capacity[0] - expect).abs() < 1e-12, "{}", f.capacity[0]);
    assert!(f.packet_bound.is_none(), "{:?}", f.packet_bound);
}

#[test]
fn links_carry_exactly_the_bytes_and_never_exceed_their_rate() {
    let spec = presets::planar(8, 4, false);
    let b = pairwise(8, 3 << 20);
    let r = run_batch_flow(&spec, &b, &mut NoInterrupt).unwrap();
    let total: u64 = b.bytes.iter().sum();
    let carried: u64 = r.stats.ports.iter().map(|p| p.link.payload_bytes).sum();
    assert!((carried as f64 - total as f64).abs() <= r.stats.ports.len() as f64, "{carried} vs {total}");
    for p in &r.stats.ports {
        assert!(p.link.busy_ps <= r.makespan_ps, "port {}/{} busy {} > {}", p.gpu, p.port, p.link.busy_ps, r.makespan_ps);
    }
    let out: u64 = r.stats.switches.iter().map(|s| s.flits_out).sum();
    let wire: u64 = r.stats.ports.iter().map(|p| p.link.wire_bytes).sum();
    assert!((out * 16) as f64 / wire as f64 - 1.0 < 1e-3);
}

#[test]
fn flow_runs_are_bit_identical() {
    let spec = presets::planar(8, 2, false);
    let b = all_to_all(8, 1 << 20);
    let a = run_batch_flow(&spec, &b, &mut NoInterrupt).unwrap();
    let c = run_batch_flow(&spec, &b, &mut NoInterrupt).unwrap();
    assert_eq!(a.end_ps, c.end_ps);
}

#[test]
fn unknown_fidelity_is_rejected_by_the_spec() {
    let mut v = serde_json::to_value(presets::planar(2, 1, false)).unwrap();
    v["fidelity"] = serde_json::json!("fluid");
    let e = serde_json::from_value::<FabricSpec>(v).unwrap_err().to_string();
    assert!(e.contains("fluid") && e.contains("packet"), "{e}");
}

/// A graph fabric: 4 PCIe Gen4 x16 GPUs, 2 per CPU root complex, one UPI 2.0
/// link between the sockets, host memory per socket (written from
/// `flitsim.hardware.tier_presets.pcie_box("pcie-4xa100-1upi", 4, "pcie4x16", 0, upi_links=1)`).
fn pcie_graph() -> FabricSpec {
    serde_json::from_str(include_str!("data/fabric_pcie_4gpu_1upi.json")).unwrap()
}

#[test]
fn graph_flow_closed_forms_and_packet_level() {
    let mut spec = pcie_graph();
    spec.fidelity = Fidelity::Flow;
    // PCIe Gen4 x16 payload after TLP framing: 16 x 16 GT/s x 128/130 x 256/284 B/s;
    // UPI 2.0: 20 x 16 GT/s x 64/80 x 256/288.
    let pcie: f64 = 16.0 * 16e9 * 128.0 / 130.0 / 8.0 * 256.0 / 284.0;
    let upi: f64 = 20.0 * 16e9 * 64.0 / 80.0 / 8.0 * 256.0 / 288.0;
    let bytes = 16u64 << 20;
    let one = batch(&[(0, 2, bytes)]);
    let f = run_batch_flow(&spec, &one, &mut NoInterrupt).unwrap();
    let rate = bytes as f64 / (f.end_ps[0] as f64 * 1e-12);
    assert!(rate <= pcie.min(upi) * (1.0 + 1e-9) && rate >= pcie.min(upi) * 0.995, "{rate}");
    // Two flows across the one UPI link: half of it each.
    let two = batch(&[(0, 2, bytes), (1, 3, bytes)]);
    let f2 = run_batch_flow(&spec, &two, &mut NoInterrupt).unwrap();
    for &e in &f2.end_ps {
        let r = bytes as f64 / (e as f64 * 1e-12);
        assert!(r <= upi / 2.0 * (1.0 + 1e-9) && r >= upi / 2.0 * 0.995, "{r}");
    }
    // Packet level agrees within 2 % (the flow tier's bound).
    let p2 = run_batch(&spec, &two, &mut NoInterrupt).unwrap();
    let err = f2.makespan_ps as f64 / p2.makespan_ps as f64 - 1.0;
    assert!(err.abs() < 0.02, "flow/packet - 1 = {err}");
    assert_eq!(f2.fidelity, "flow");
}

/// `layers` x (compute on every device, then a collective over `groups`, each
/// group's collective after its members' compute); compute `dur_ps` varies
/// with the layer when `vary`; `extra`: one long compute task on device 0's
/// second stream that ends in the middle of some collective.
fn layered_graph(devices: u32, groups: &[Vec<u32>], layers: u32, bytes: u64, dur_ps: u64, vary: bool, extra: Option<u64>) -> flitsim::taskgraph::TaskGraph {
    use flitsim::taskgraph::{CollectiveKind, TaskGraph, TaskKind};
    let mut g = TaskGraph { devices, compute_streams: 2, comm_streams: 1, ..Default::default() };
    g.group_offsets.push(0);
    for m in groups {
        g.group_members.extend_from_slice(m);
        g.group_offsets.push(g.group_members.len() as u32);
    }
    let push = |g: &mut TaskGraph, kind: TaskKind, device: u32, dur: u64, bytes: u64, group: u32, coll: u8| -> u32 {
        g.kind.push(kind as u8);
        g.device.push(device);
        g.peer.push(0);
        g.duration_ps.push(dur);
        g.bytes.push(bytes);
        g.collective.push(coll);
        g.group.push(group);
        (g.kind.len() - 1) as u32
    };
    let mut prev: Vec<Option<u32>> = vec![None; groups.len()];
    for l in 0..layers {
        let d = if vary { dur_ps + 1_000 * (l as u64 % 3) } else { dur_ps };
        for (gi, m) in groups.iter().enumerate() {
            let mut computes = Vec::new();
            for &dev in m {
                let c = push(&mut g, TaskKind::Compute, dev, d, 0, 0, 0);
                if let Some(p) = prev[gi] {
                    g.edge_src.push(p);
                    g.edge_dst.push(c);
                    g.edge_kind.push(0);
                }
                computes.push(c);
            }
            let a = push(&mut g, TaskKind::Collective, 0, 0, bytes, gi as u32, CollectiveKind::AllReduce as u8);
            for c in computes {
                g.edge_src.push(c);
                g.edge_dst.push(a);
                g.edge_kind.push(0);
            }
            prev[gi] = Some(a);
        }
    }
    if let Some(e) = extra {
        push(&mut g, TaskKind::Compute, 0, e, 0, 0, 0);
    }
    g
}

/// Run `g` on `spec` at flow level with replay on, on without isolated
/// replays, and off: identical task times, event counts and link statistics;
/// returns the collectives replayed (all kinds).
fn replay_matches(spec: &FabricSpec, g: &flitsim::taskgraph::TaskGraph) -> u64 {
    replay_counts(spec, g).0
}

/// As [`replay_matches`]; returns (replayed, of them replayed while isolated).
fn replay_counts(spec: &FabricSpec, g: &flitsim::taskgraph::TaskGraph) -> (u64, u64) {
    use flitsim::collective::CollectiveParams;
    use flitsim::taskgraph::{execute, FabricNetwork};
    let mut spec = spec.clone();
    spec.fidelity = Fidelity::Flow;
    let run = |replay: bool, isolated: bool| {
        let mut net = FabricNetwork::with_params(&spec, CollectiveParams::default(), true).unwrap();
        net.set_replay(replay);
        net.set_isolated_replay(isolated);
        let r = execute(g, &mut net, &mut NoInterrupt).unwrap();
        let st = serde_json::to_string(&net.stats(r.makespan_ps, r.events)).unwrap();
        (r, st, net.flow_outside_validation(), net.replayed, net.replayed_isolated)
    };
    let (a, sa, wa, n, ni) = run(true, true);
    let (c, sc, wc, ns, ns_i) = run(true, false);
    let (b, sb, wb, n0, _) = run(false, false);
    assert_eq!((n0, ns_i), (0, 0));
    assert!(ns <= n && ni <= n, "isolated replays are counted among the replays, and only add to them");
    for (x, sx, wx) in [(&a, &sa, &wa), (&c, &sc, &wc)] {
        assert_eq!(x, &b, "task times or event counts differ with replay");
        assert_eq!(sx, &sb, "link statistics differ with replay");
        assert_eq!(wx, &wb, "validation findings differ with replay");
    }
    (n, ni)
}

/// DistriFusion's shape: `steps` x `layers`, per layer a compute on every
/// device, then an all-gather over all of them that only the same layer of
/// the next step waits for (stale activations), so compute runs ahead while
/// the all-gathers queue on the one communication stream per device.
fn async_graph(devices: u32, steps: u32, layers: u32, bytes: u64, dur_ps: u64) -> flitsim::taskgraph::TaskGraph {
    use flitsim::taskgraph::{CollectiveKind, TaskGraph, TaskKind};
    let mut g = TaskGraph { devices, compute_streams: 1, comm_streams: 1, ..Default::default() };
    g.group_offsets.extend_from_slice(&[0, devices]);
    g.group_members.extend(0..devices);
    let push = |g: &mut TaskGraph, kind: TaskKind, device: u32, dur: u64, bytes: u64, coll: u8| -> u32 {
        g.kind.push(kind as u8);
        g.device.push(device);
        g.peer.push(0);
        g.duration_ps.push(dur);
        g.bytes.push(bytes);
        g.collective.push(coll);
        g.group.push(0);
        (g.kind.len() - 1) as u32
    };
    let edge = |g: &mut TaskGraph, a: u32, b: u32| {
        g.edge_src.push(a);
        g.edge_dst.push(b);
        g.edge_kind.push(0);
    };
    let mut tail: Vec<Option<u32>> = vec![None; devices as usize];
    let mut prev_ag: Vec<Option<u32>> = vec![None; layers as usize];
    for _ in 0..steps {
        for l in 0..layers as usize {
            let comps: Vec<u32> = (0..devices).map(|d| push(&mut g, TaskKind::Compute, d, dur_ps, 0, 0)).collect();
            for (d, &c) in comps.iter().enumerate() {
                if let Some(t) = tail[d] {
                    edge(&mut g, t, c);
                }
                if let Some(a) = prev_ag[l] {
                    edge(&mut g, a, c);
                }
                tail[d] = Some(c);
            }
            let ag = push(&mut g, TaskKind::Collective, 0, 0, bytes, CollectiveKind::AllGather as u8);
            for &c in &comps {
                edge(&mut g, c, ag);
            }
            prev_ag[l] = Some(ag);
        }
    }
    g
}

#[test]
fn isolated_replays_are_bit_identical() {
    // Compute ends and starts while the all-gathers run (executor events
    // pending: no strict replay), but every communication stream is held, so
    // each all-gather after the first of its rotation is replayed isolated.
    let planar = presets::planar(8, 2, false);
    let (n, ni) = replay_counts(&planar, &async_graph(8, 3, 6, 2 << 20, 1_500_000));
    assert!(ni >= 10 && ni <= n, "replayed {n}, isolated {ni}");
    // Compute longer than the collectives: the network idles between them.
    let (_, ni) = replay_counts(&planar, &async_graph(8, 3, 6, 1 << 20, 400_000_000));
    assert!(ni > 0, "{ni}");
    // A graph fabric (PCIe, host-staged transports, rotation periods > 1).
    let (n, ni) = replay_counts(&pcie_graph(), &async_graph(4, 3, 8, 2 << 20, 2_000_000));
    assert!(ni > 0 && ni <= n, "replayed {n}, isolated {ni}");
    // Two communication streams per device: never isolated, still identical.
    let mut two = async_graph(8, 2, 6, 2 << 20, 1_500_000);
    two.comm_streams = 2;
    assert_eq!(replay_counts(&planar, &two).1, 0);
}

#[test]
fn an_isolated_replay_sharing_its_end_picosecond_repeats_the_run_exactly() {
    // A compute task on a second stream ending exactly when an isolated
    // replay ends: the run is repeated without isolated replays, so the
    // answer is the plain one, bit for bit, and says it was repeated.
    use flitsim::collective::CollectiveParams;
    use flitsim::taskgraph::{execute, execute_on_fabric, FabricNetwork, TaskKind};
    let mut spec = presets::planar(8, 2, false);
    spec.fidelity = Fidelity::Flow;
    let with_extra = |dur: u64| {
        let mut g = async_graph(8, 3, 6, 2 << 20, 1_500_000);
        g.compute_streams = 2;
        g.kind.push(TaskKind::Compute as u8);
        g.device.push(0);
        g.peer.push(0);
        g.duration_ps.push(dur);
        g.bytes.push(0);
        g.collective.push(0);
        g.group.push(0);
        g
    };
    let plain = |g: &flitsim::taskgraph::TaskGraph| {
        let mut net = FabricNetwork::with_params(&spec, CollectiveParams::default(), false).unwrap();
        net.set_replay(false);
        let r = execute(g, &mut net, &mut NoInterrupt).unwrap();
        (r.clone(), serde_json::to_string(&net.stats(r.makespan_ps, r.events)).unwrap())
    };
    // The end of the 12th all-gather (task 12 x 9 - 1): well past the first ones.
    let (probe, _) = plain(&with_extra(1 << 40));
    let target = probe.end_ps[12 * 9 - 1];
    let g = with_extra(target);
    let (want, want_stats) = plain(&g);
    assert_eq!(want.end_ps[12 * 9 - 1], target, "the extra task does not touch the network");
    let got = execute_on_fabric(&g, &spec, CollectiveParams::default(), false, &mut NoInterrupt).unwrap();
    assert!(got.network.isolated_retried, "the shared picosecond was seen");
    assert_eq!(got.result, want);
    assert_eq!(serde_json::to_string(&got.network.stats(got.result.makespan_ps, got.result.events)).unwrap(), want_stats);
    // Without the coincidence nothing is repeated.
    let g = with_extra(target + 1);
    let got = execute_on_fabric(&g, &spec, CollectiveParams::default(), false, &mut NoInterrupt).unwrap();
    assert!(!got.network.isolated_retried && got.network.replayed_isolated > 0);
    assert_eq!(got.result, plain(&g).0);
}

#[test]
fn replayed_collectives_are_bit_identical() {
    // One group over every GPU, equal layers: every collective after the
    // first few (one per spray rotation) is replayed, and nothing changes.
    let planar = presets::planar(8, 2, false);
    let all: Vec<u32> = (0..8).collect();
    let n = replay_matches(&planar, &layered_graph(8, &[all.clone()], 12, 3 << 20, 2_000_000, false, None));
    assert!(n >= 8, "replayed {n}");
    // Varying compute between them: still alone, still replayed.
    assert!(replay_matches(&planar, &layered_graph(8, &[all], 12, 1 << 20, 2_000_000, true, None)) >= 8);
    // A graph fabric (PCIe, host-staged transports, rotation periods > 1).
    let pcie = pcie_graph();
    let four: Vec<u32> = (0..4).collect();
    assert!(replay_matches(&pcie, &layered_graph(4, &[four.clone()], 16, 2 << 20, 3_000_000, false, None)) > 0);
    // Not alone: two groups at once, or compute ending mid-collective; the
    // check refuses those and the runs are still identical.
    replay_matches(&planar, &layered_graph(8, &[(0..4).collect(), (4..8).collect()], 8, 1 << 20, 2_000_000, true, None));
    replay_matches(&pcie, &layered_graph(4, &[four], 10, 2 << 20, 3_000_000, false, Some(40_000_000)));
}

/// The component filling against itself and the global one, on random
/// overlapping transfer sets: incremental (only the components a start or
/// drain touched are re-filled, each alone) bit-identical to re-filling every
/// component at every solve (a component's rates depend on its own flows
/// only, so the dirty tracking may skip nothing that matters); against one
/// global filling per solve, end times within 1 ps + 1e-9 of the run (the
/// fill tolerance, share.rs `FULL`, is the only difference besides
/// rounding); link bytes conserved in all; deterministic.
fn incremental_matches_global(spec: &FabricSpec, b: &TransferBatch) {
    use flitsim::flow::{run_batch_flow_filling, Filling};
    let inc = run_batch_flow_filling(spec, b, Some(Filling::Incremental), &mut NoInterrupt).unwrap();
    let all = run_batch_flow_filling(spec, b, Some(Filling::Components), &mut NoInterrupt).unwrap();
    let glo = run_batch_flow_filling(spec, b, Some(Filling::Global), &mut NoInterrupt).unwrap();
    let again = run_batch_flow_filling(spec, b, None, &mut NoInterrupt).unwrap();
    assert_eq!(inc.end_ps, again.end_ps, "incremental filling is the default and deterministic");
    assert_eq!(inc.end_ps, all.end_ps, "incremental = every component re-filled, bit for bit");
    assert_eq!(inc.makespan_ps, all.makespan_ps);
    let bound = 1.0 + 1e-9 * glo.makespan_ps as f64;
    for i in 0..b.src.len() {
        let d = (inc.end_ps[i] as f64 - glo.end_ps[i] as f64).abs();
        assert!(d <= bound, "transfer {i}: {} vs {} ps (bound {bound})", inc.end_ps[i], glo.end_ps[i]);
    }
    let total: u64 = b.src.iter().zip(&b.dst).zip(&b.bytes).filter(|((s, d), _)| s != d).map(|(_, &x)| x).sum();
    for r in [&inc, &all, &glo] {
        let carried: u64 = r.stats.ports.iter().map(|p| p.link.payload_bytes).sum();
        assert!((carried as f64 - total as f64).abs() <= r.stats.ports.len() as f64, "{carried} vs {total}");
        for p in &r.stats.ports {
            assert!(p.link.busy_ps <= r.makespan_ps, "port {}/{} busy {} > {}", p.gpu, p.port, p.link.busy_ps, r.makespan_ps);
        }
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]
    #[test]
    fn incremental_filling_matches_the_global_filling(
        items in proptest::collection::vec((0u32..8, 1u32..8, 1u64..(4 << 20), 0u64..4_000_000, 0u32..4), 1..40),
        graph in proptest::bool::ANY,
    ) {
        let spec = if graph { pcie_graph() } else { presets::planar(8, 2, false) };
        let g = spec.gpus;
        let mut b = batch(&[]);
        for (k, &(s, d, bytes, t, dep)) in items.iter().enumerate() {
            let s = s % g;
            b.src.push(s);
            b.dst.push((s + d) % g);
            b.bytes.push(bytes);
            b.start_ps.push(t);
            // every fourth (about) waits for an earlier one: chains of starts at drains
            b.after.push(if dep == 0 && k > 0 { (k / 2) as i64 } else { -1 });
        }
        incremental_matches_global(&spec, &b);
    }
}

#[test]
fn incremental_filling_on_a_preset_all_to_all() {
    // One component (every flow shares ports): the same flows in the same
    // order as the global filling.
    let spec = presets::planar(8, 2, false);
    incremental_matches_global(&spec, &all_to_all(8, 1 << 20));
}
