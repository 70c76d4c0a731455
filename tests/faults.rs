//! Faults: bit errors with link-level retry against the go-back-N closed
//! form, dead planes and links with every byte accounted for, and zero-fault
//! runs bit-identical to fault-free ones.

use flitsim::engine::NoInterrupt;
use flitsim::experiments::link_transfer::{run as link_run, LinkTransferSpec};
use flitsim::fabric::{run_batch, BatchResult, FabricSpec, Fault, TransferBatch};
use flitsim::link::{LinkSpec, ReplaySpec};
use flitsim::phy::FecErrorModel;
use flitsim::presets;

fn all_to_all(gpus: u32, bytes: u64) -> TransferBatch {
    let mut b = TransferBatch::default();
    for s in 0..gpus {
        for d in 0..gpus {
            if s != d {
                b.src.push(s);
                b.dst.push(d);
                b.bytes.push(bytes);
                b.start_ps.push(0);
                b.after.push(-1);
            }
        }
    }
    b
}

fn with_ber(mut spec: FabricSpec, ber: f64) -> FabricSpec {
    spec.links[0].replay = Some(ReplaySpec { ber, ..ReplaySpec::default() });
    spec
}

fn same_run(a: &BatchResult, b: &BatchResult) {
    assert_eq!(a.end_ps, b.end_ps);
    assert_eq!(a.stats.packets, b.stats.packets);
    assert_eq!(a.stats.events, b.stats.events);
    for (x, y) in a.stats.ports.iter().zip(&b.stats.ports) {
        assert_eq!(x.link, y.link);
        assert_eq!(x.rx_payload_bytes, y.rx_payload_bytes);
    }
}

#[test]
fn zero_faults_are_bit_identical() {
    let base = presets::planar(8, 4, false);
    let b = all_to_all(8, 64 << 10);
    let r0 = run_batch(&base, &b, &mut NoInterrupt).unwrap();
    // BER 0 with retry modelled (unbounded buffer): nothing changes.
    let r1 = run_batch(&with_ber(base.clone(), 0.0), &b, &mut NoInterrupt).unwrap();
    same_run(&r0, &r1);
    // A fault after the last event never takes effect.
    let mut late = base.clone();
    late.faults = vec![Fault::Plane { switch: 1, at_ps: r0.makespan_ps * 10 }];
    let r2 = run_batch(&late, &b, &mut NoInterrupt).unwrap();
    same_run(&r0, &r2);
    assert_eq!(r2.stats.faults.faults_applied, 0);
}

fn check_accounting(r: &BatchResult) {
    let f = &r.stats.faults;
    let rx: u64 = r.stats.ports.iter().map(|p| p.rx_payload_bytes).sum();
    let tx: u64 = r.stats.ports.iter().map(|p| p.link.payload_bytes).sum();
    let lost: u64 = r.stats.ports.iter().map(|p| p.lost_bytes).sum();
    // Delivered + replayed-and-delivered = sent, from the link statistics.
    assert_eq!(rx, r.stats.sent_bytes, "bytes delivered over the GPU links");
    assert_eq!(f.delivered_bytes + f.replayed_delivered_bytes, r.stats.sent_bytes);
    assert_eq!(f.replayed_delivered_bytes, f.lost_bytes, "every lost byte replayed once");
    assert_eq!(lost, f.lost_bytes);
    // Each lost byte crossed a GPU -> switch link twice.
    assert_eq!(tx, r.stats.sent_bytes + f.lost_bytes);
}

#[test]
fn plane_failure_mid_run_delivers_every_byte_on_the_rest() {
    let base = presets::planar(8, 4, false);
    let b = all_to_all(8, 256 << 10);
    let r0 = run_batch(&base, &b, &mut NoInterrupt).unwrap();
    let mut spec = base.clone();
    let at = r0.makespan_ps / 2;
    spec.faults = vec![Fault::Plane { switch: 2, at_ps: at }];
    let r = run_batch(&spec, &b, &mut NoInterrupt).unwrap();
    assert_eq!(r.stats.faults.faults_applied, 1);
    assert!(r.stats.faults.lost_packets > 0, "the plane died with packets in flight");
    check_accounting(&r);
    // Bound: the half left after the fault moves on 3 of 4 planes at best.
    assert!(r.makespan_ps as f64 >= r0.makespan_ps as f64 * (0.5 + 0.5 * 4.0 / 3.0) * 0.98, "{} vs {}", r.makespan_ps, r0.makespan_ps);
    // Dead plane carried about half of its fair share (before the fault).
    let on = |s: u32| r.stats.ports.iter().filter(|p| p.switch == s).map(|p| p.link.payload_bytes).sum::<u64>() as f64;
    assert!(on(2) < 0.6 * on(0), "{} vs {}", on(2), on(0));
    // Failure at time 0: nothing lost, 3 planes from the start.
    spec.faults = vec![Fault::Plane { switch: 2, at_ps: 0 }];
    let r3 = run_batch(&spec, &b, &mut NoInterrupt).unwrap();
    assert_eq!(r3.stats.faults.lost_packets, 0);
    check_accounting(&r3);
    let slow = r3.makespan_ps as f64 / r0.makespan_ps as f64;
    eprintln!("mid-run: lost {} packets, makespan {} vs {}; at 0: slowdown {slow}", r.stats.faults.lost_packets, r.makespan_ps, r0.makespan_ps);
    assert!((slow - 4.0 / 3.0).abs() < 0.03, "slowdown {slow} vs 4/3");
}

#[test]
fn dead_link_reroutes_and_loses_nothing() {
    let base = presets::planar(4, 2, false);
    let b = all_to_all(4, 128 << 10);
    let r0 = run_batch(&base, &b, &mut NoInterrupt).unwrap();
    let mut spec = base.clone();
    spec.faults = vec![Fault::Link { gpu: 1, port: 0, at_ps: r0.makespan_ps / 3 }];
    let r = run_batch(&spec, &b, &mut NoInterrupt).unwrap();
    check_accounting(&r);
    assert!(r.stats.faults.lost_packets > 0);
    assert!(r.makespan_ps > r0.makespan_ps);
}

#[test]
fn bad_faults_are_config_errors() {
    let base = presets::planar(4, 2, false);
    let b = all_to_all(4, 4096);
    let cases: Vec<(Vec<Fault>, &str)> = vec![
        (vec![Fault::Plane { switch: 0, at_ps: 0 }, Fault::Plane { switch: 1, at_ps: 5 }], "every plane dead"),
        (vec![Fault::Plane { switch: 7, at_ps: 0 }], "faults[0].switch"),
        (vec![Fault::Link { gpu: 9, port: 0, at_ps: 0 }], "faults[0].gpu"),
        (vec![Fault::Link { gpu: 0, port: 5, at_ps: 0 }], "faults[0].port"),
        (vec![Fault::Plane { switch: 0, at_ps: 1 << 63 }], "faults[0].at_ps"),
        (vec![Fault::Nic { nic: 0, at_ps: 0 }], "of kind \"nic\""),
        (vec![Fault::Link { gpu: 0, port: 0, at_ps: 0 }, Fault::Link { gpu: 0, port: 1, at_ps: 0 }], "GPU 0"),
    ];
    for (faults, want) in cases {
        let mut s = base.clone();
        s.faults = faults;
        let e = run_batch(&s, &b, &mut NoInterrupt).unwrap_err().to_string();
        assert!(e.contains(want), "{e} lacks {want}");
    }
}

fn replay_link(ber: f64) -> LinkSpec {
    let mut l = presets::nvlink5();
    l.vcs = 1;
    l.credits_per_vc_flits = 4096;
    l.replay = Some(ReplaySpec { ber, ..ReplaySpec::default() });
    l
}

#[test]
fn replay_overhead_matches_go_back_n_closed_form() {
    // A saturated link: per failed attempt the serializer loses
    // R = S + latency + NAK return; goodput = (1-P)/(1+(R/S-1)P) of error-free
    // (Bertsekas & Gallager, Data Networks, sec. 2.4).
    let n_pkts = 40_000u64;
    let clean = link_run(&LinkTransferSpec { link: replay_link(0.0), total_bytes: 256 * n_pkts, payload_bytes: 256, max_recorded_packets: 0 }, &mut NoInterrupt).unwrap();
    for ber in [1.6e-3, 2.0e-3] {
        let link = replay_link(ber);
        let r = link_run(&LinkTransferSpec { link: link.clone(), total_bytes: 256 * n_pkts, payload_bytes: 256, max_recorded_packets: 0 }, &mut NoInterrupt).unwrap();
        let m = FecErrorModel::new(&link.serdes, ber).unwrap();
        let (_, t) = link.derive().unwrap();
        let p = m.packet_error_prob(17.0 * 128.0);
        let s = t.serialization_ps(17) as f64;
        let rr = s + t.latency_ps as f64 + (t.latency_ps + t.flit_ps) as f64;
        // Failures ~ NegBin(N, 1-P): mean N P/(1-P), sd sqrt(N P)/(1-P).
        let mean_f = n_pkts as f64 * p / (1.0 - p);
        let sd_f = (n_pkts as f64 * p).sqrt() / (1.0 - p);
        let f = r.link.replay.replays as f64;
        assert!((f - mean_f).abs() < 4.0 * sd_f, "BER {ber}: {f} failures vs {mean_f} +- {sd_f}");
        assert_eq!(r.link.replay.replay_ps as f64, f * rr, "R per failure");
        let eff = (1.0 - p) / (1.0 + (rr / s - 1.0) * p);
        let sim = clean.completion_ps as f64 / r.completion_ps as f64;
        let tol = 4.0 * sd_f * rr / (n_pkts as f64 * s / eff) + 2e-3;
        eprintln!("BER {ber}: P_cw {:.4e} P_pkt {p:.4} failures {f} (expect {mean_f:.0} +- {sd_f:.0}) goodput ratio {sim:.4} vs {eff:.4}", m.codeword_uncorrectable_prob);
        assert!((sim - eff).abs() < tol, "BER {ber}: goodput ratio {sim} vs closed form {eff} (tol {tol})");
    }
}

#[test]
fn replay_sampling_is_seeded() {
    let spec = |seed| {
        let mut l = replay_link(1.8e-3);
        l.replay.as_mut().unwrap().seed = seed;
        LinkTransferSpec { link: l, total_bytes: 256 * 5000, payload_bytes: 256, max_recorded_packets: 0 }
    };
    let a = link_run(&spec(1), &mut NoInterrupt).unwrap();
    let b = link_run(&spec(1), &mut NoInterrupt).unwrap();
    let c = link_run(&spec(2), &mut NoInterrupt).unwrap();
    assert_eq!(a.completion_ps, b.completion_ps);
    assert_eq!(a.link, b.link);
    assert_ne!(a.link.replay.replays, c.link.replay.replays);
}

#[test]
fn small_replay_buffer_caps_bandwidth_at_buffer_over_ack_round_trip() {
    // Buffer B bytes, ACK round trip A = S + latency + ACK return: at most
    // B / A (wire bytes) per unit time, even without errors.
    let mut l = replay_link(0.0);
    let b = 4 * 272u64;
    l.replay = Some(ReplaySpec { replay_buffer_bytes: b, ..ReplaySpec::default() });
    let (_, t) = l.derive().unwrap();
    let r = link_run(&LinkTransferSpec { link: l, total_bytes: 256 * 20_000, payload_bytes: 256, max_recorded_packets: 0 }, &mut NoInterrupt).unwrap();
    let a = t.serialization_ps(17) + t.latency_ps + t.latency_ps + t.flit_ps;
    let expect = b as f64 / a as f64 * 1e3 * 256.0 / 272.0; // payload GB/s
    assert!((r.throughput_gBps / expect - 1.0).abs() < 0.01, "{} vs {expect}", r.throughput_gBps);
    assert!(r.link.replay.buffer_wait_ps > 0);
}

#[test]
fn bit_errors_on_a_fabric_are_replayed_and_accounted() {
    let base = presets::planar(4, 2, false);
    let b = all_to_all(4, 64 << 10);
    let r0 = run_batch(&base, &b, &mut NoInterrupt).unwrap();
    let r = run_batch(&with_ber(base, 1.8e-3), &b, &mut NoInterrupt).unwrap();
    check_accounting(&r);
    let tx: u64 = r.stats.ports.iter().map(|p| p.link.replay.replays).sum();
    let rx: u64 = r.stats.ports.iter().map(|p| p.rx_replay.replays).sum();
    assert!(tx > 0 && rx > 0, "{tx} {rx}");
    eprintln!("fabric BER: tx replays {tx} rx replays {rx}, makespan {} vs {}", r.makespan_ps, r0.makespan_ps);
    assert!(r.makespan_ps > r0.makespan_ps);
}

#[test]
fn plane_dead_from_the_start_runs_like_a_fabric_without_it() {
    // Spraying skips the dead plane, so the other planes see exactly the
    // traffic of a fabric built with one plane fewer.
    let b = all_to_all(8, 96 << 10);
    let mut spec = presets::planar(8, 4, false);
    spec.faults = vec![Fault::Plane { switch: 3, at_ps: 0 }];
    let r = run_batch(&spec, &b, &mut NoInterrupt).unwrap();
    let r3 = run_batch(&presets::planar(8, 3, false), &b, &mut NoInterrupt).unwrap();
    assert_eq!(r.end_ps, r3.end_ps);
    assert!(r.stats.ports.iter().filter(|p| p.switch == 3).all(|p| p.link.packets == 0));
}

#[test]
fn plane_failure_mid_collective_completes_with_all_bytes_delivered() {
    use flitsim::collective::{run_collective, Algorithm, CollectiveParams, CollectiveRequest, Op};
    let req = CollectiveRequest { op: Op::AllReduce, members: (0..8).collect(), bytes: 4 << 20, params: CollectiveParams { algorithm: Algorithm::Ring, ..CollectiveParams::default() } };
    let base = presets::planar(8, 4, false);
    let clean = run_collective(&base, &req, &mut NoInterrupt).unwrap();
    let mut spec = base.clone();
    spec.faults = vec![Fault::Plane { switch: 1, at_ps: clean.time_ps / 2 }];
    let r = run_collective(&spec, &req, &mut NoInterrupt).unwrap();
    assert!(r.faults.lost_packets > 0, "the plane died with packets in flight");
    // From link statistics: the bytes delivered over the GPUs' links are the bytes sent.
    assert_eq!(r.rx_payload_bytes.iter().sum::<u64>(), r.sent_bytes_on_fabric);
    assert_eq!(r.faults.delivered_bytes + r.faults.replayed_delivered_bytes, r.sent_bytes_on_fabric);
    assert_eq!(r.faults.replayed_delivered_bytes, r.faults.lost_bytes);
    assert!(r.time_ps > clean.time_ps);
}
