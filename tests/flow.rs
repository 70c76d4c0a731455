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
