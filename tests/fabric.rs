//! Fabric integration tests against closed forms.

use flitsim::engine::NoInterrupt;
use flitsim::fabric::{run_batch, FabricSpec, Spray};
use flitsim::presets;
mod common;
use common::{batch, all_to_all};

/// `gpus` GPUs, `planes` switches, one NVLink 5 link from every GPU to every switch.
fn planar(gpus: u32, planes: u32) -> FabricSpec {
    presets::planar(gpus, planes, false)
}

#[test]
fn point_to_point_runs_at_ports_times_link_payload_rate() {
    // 2 planes: 2 x 50 GB/s x 256/272 = 94.12 GB/s of payload.
    let spec = planar(4, 2);
    let bytes = 8u64 << 20;
    let r = run_batch(&spec, &batch(&[(0, 1, bytes)]), &mut NoInterrupt).unwrap();
    let gbps = bytes as f64 / r.end_ps[0] as f64 * 1e3;
    let expect = 2.0 * 50.0 * 256.0 / 272.0;
    assert!((gbps / expect - 1.0).abs() < 5e-3, "{gbps} vs {expect}");
}

#[test]
fn single_packet_latency_is_sum_of_parts() {
    // One 256 B packet: GPU serialization (17 flits x 320 ps) + link latency
    // (5 ns propagation + 20 ns PHY + 25.6 ns FEC codeword) to the switch, where
    // the head flit (320 ps) is received before it can be forwarded; the switch
    // then drives 17 flits (17 x 320 ps) and the second link adds its latency.
    // The switch clock is one flit time (50 GB/s / 16 B = 3.125 GHz, 320 ps):
    // the head is registered at the next clock edge after it arrives.
    let spec = planar(2, 1);
    let r = run_batch(&spec, &batch(&[(0, 1, 256)]), &mut NoInterrupt).unwrap();
    let link_latency: u64 = 5_000 + 20_000 + 25_600;
    let head_at_switch = 320 + link_latency;
    let registered = head_at_switch.div_ceil(320) * 320;
    let expect = registered + 17 * 320 + link_latency;
    assert_eq!(r.end_ps[0], expect);
}

#[test]
fn plane_folding_is_exact_on_symmetric_traffic() {
    // 8 GPUs x 4 identical planes, all-to-all of 4 planes x 256 B x 6 per pair.
    let mut spec = planar(8, 4);
    let b = all_to_all(8, 4 * 256 * 6);
    let full = run_batch(&spec, &b, &mut NoInterrupt).unwrap();
    assert_eq!(full.folded_planes, 1);
    spec.fold_planes = true;
    let folded = run_batch(&spec, &b, &mut NoInterrupt).unwrap();
    assert_eq!(folded.folded_planes, 4, "{}", folded.fold_reason);
    assert_eq!(folded.end_ps, full.end_ps);
    assert_eq!(folded.start_ps, full.start_ps);
}

#[test]
fn plane_folding_is_refused_for_asymmetric_traffic() {
    let mut spec = planar(8, 4);
    spec.fold_planes = true;
    // 1000 B is not a multiple of 4 planes x 256 B.
    let r = run_batch(&spec, &batch(&[(0, 1, 1000), (2, 3, 4096)]), &mut NoInterrupt).unwrap();
    assert_eq!(r.folded_planes, 1);
    assert!(r.fold_reason.contains("not a multiple"), "{}", r.fold_reason);
    // Hash spraying puts a flow on one plane: no symmetry either.
    spec.spray = Spray::Hash;
    let r = run_batch(&spec, &batch(&[(0, 1, 4096)]), &mut NoInterrupt).unwrap();
    assert_eq!(r.folded_planes, 1);
    // The hashed flow uses one port: 50 GB/s x 256/272 at most.
    let gbps = 4096.0 / r.end_ps[0] as f64 * 1e3;
    assert!(gbps < 50.0 * 256.0 / 272.0);
}

#[test]
fn incast_is_bounded_by_one_gpus_ejection_bandwidth() {
    // 15 senders -> GPU 0 on 4 planes: GPU 0 can take 4 x 50 GB/s x 256/272.
    let spec = planar(16, 4);
    let per = 4 * 256 * 512u64;
    let items: Vec<(u32, u32, u64)> = (1..16).map(|s| (s, 0, per)).collect();
    let r = run_batch(&spec, &batch(&items), &mut NoInterrupt).unwrap();
    let total = 15.0 * per as f64;
    let gbps = total / r.makespan_ps as f64 * 1e3;
    let bound = 4.0 * 50.0 * 256.0 / 272.0;
    assert!(gbps <= bound * 1.0001 && gbps > 0.97 * bound, "{gbps} vs {bound}");
    // The waiting shows at GPU 0's switch ports: conflicts on output 0 of every
    // plane, none on other outputs; and the senders' links run out of credits.
    for sw in &r.stats.switches {
        assert!(sw.ports[0].output_conflicts > 0);
        assert!(sw.ports[1..].iter().all(|p| p.output_conflicts == 0));
    }
    let exhausted: u64 = r.stats.ports.iter().filter(|p| p.gpu != 0).map(|p| p.vcs.iter().map(|v| v.exhaustion_episodes).sum::<u64>()).sum();
    assert!(exhausted > 0);
}

#[test]
fn zero_byte_and_self_transfers_complete_at_once() {
    let spec = planar(4, 2);
    let mut b = batch(&[(0, 1, 0), (2, 2, 4096)]);
    b.start_ps = vec![1234, 777];
    let r = run_batch(&spec, &b, &mut NoInterrupt).unwrap();
    assert_eq!(r.end_ps, vec![1234, 777]);
}

#[test]
fn dependencies_chain_and_cycles_are_named() {
    let spec = planar(4, 2);
    let mut b = batch(&[(0, 1, 4096), (1, 2, 4096)]);
    b.after = vec![-1, 0];
    let r = run_batch(&spec, &b, &mut NoInterrupt).unwrap();
    assert!(r.start_ps[1] >= r.end_ps[0]);
    b.after = vec![1, 0];
    let e = run_batch(&spec, &b, &mut NoInterrupt).unwrap_err().to_string();
    assert!(e.contains("cycle"), "{e}");
}

#[test]
fn bad_input_is_a_config_error() {
    let mut spec = planar(4, 2);
    // GPU 3 port 0 wired twice.
    let mut w = spec.wires[0];
    w.gpu = 3;
    w.switch_port = 3;
    w.switch = 1;
    spec.wires.push(w);
    let e = run_batch(&spec, &batch(&[(0, 1, 1)]), &mut NoInterrupt).unwrap_err().to_string();
    assert!(e.contains("wired at most once"), "{e}");
    let spec = planar(4, 2);
    let e = run_batch(&spec, &batch(&[(0, 9, 1)]), &mut NoInterrupt).unwrap_err().to_string();
    assert!(e.contains("dst[0]") && e.contains("0..4"), "{e}");
}
