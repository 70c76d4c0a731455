//! The cycle-level switch against the classic results of switching theory.
//!
//! Every expected value comes from a paper or a closed form, cited at the test.
//! Tolerances come from sampling error: throughput is a mean over N ports x T
//! cycles of 0/1 departures, so its standard error is about
//! sqrt(rho (1 - rho) / (N T)) inflated by the autocorrelation of the queue
//! process; we allow at least 4x that with a generous correlation factor of 10
//! (stated per test), and never tighter than the model difference we claim.

use flitsim::engine::NoInterrupt;
use flitsim::experiments::switch_lab::{run, Pattern, Process, SwitchLabResult, SwitchLabSpec, TrafficSpec};
use flitsim::switch::{Queueing, SwitchSpec};

fn cell_switch(n: u32, queueing: Queueing, allocator: &str, iterations: u32, speedup: u32) -> SwitchSpec {
    SwitchSpec {
        ports: n,
        vcs: 1,
        buffer_per_vc_flits: 256,
        max_packet_flits: 1,
        queueing,
        speedup,
        pipeline_latency_cycles: 0,
        output_buffer_per_vc_flits: if speedup > 1 { 256 } else { 0 },
        downstream_credits_per_vc_flits: 64,
        allocator: allocator.into(),
        iterations,
        clock_ghz: 1.0,
        seed: 11,
        stall_timeout_cycles: 0,
    }
}

fn uniform(load: f64, packet_flits: u32, seed: u64) -> TrafficSpec {
    TrafficSpec {
        pattern: Pattern::Uniform,
        process: Process::Bernoulli,
        load,
        packet_flits,
        mean_burst_packets: 1.0,
        hotspot_port: 0,
        hotspot_fraction: 0.0,
        incast_target: 0,
        incast_sources: 0,
        seed,
    }
}

fn lab(switch: SwitchSpec, traffic: TrafficSpec, warmup: u64, measure: u64) -> SwitchLabResult {
    let spec = SwitchLabSpec {
        switch,
        traffic,
        warmup_cycles: warmup,
        measure_cycles: measure,
        credit_return_cycles: 0,
        dead_outputs: vec![],
        source_queue_packets: 256,
    };
    let r = run(&spec, &mut NoInterrupt).expect("run");
    assert_little(&r);
    r
}

/// Little's law, L = lambda W, over the measurement window. Over a finite
/// window the two sides differ only by the packets present at its ends
/// (at most occupancy x sojourn / T each end, Little 1961 / Stidham 1974), so
/// the relative tolerance is 3 x 2 W / T plus 1 %.
fn assert_little(r: &SwitchLabResult) {
    if r.delivered_flits == 0 {
        return;
    }
    let l = r.mean_occupancy_flits;
    let lw = r.throughput_flits_per_cycle * r.mean_sojourn_cycles;
    let tol = 0.01 + 6.0 * r.mean_sojourn_cycles / r.measure_cycles as f64;
    assert!((l - lw).abs() <= tol * lw.max(1e-9), "Little: L = {l:.4}, lambda W = {lw:.4}, tol {tol:.4}");
}

/// Karol, Hluchyj, Morgan, "Input Versus Output Queueing on a Space-Division
/// Packet Switch", IEEE Trans. Commun. 35(12), 1987, Table I: saturation
/// throughput of FIFO input queueing under uniform i.i.d. traffic, exact for
/// finite N: N=2 0.7500, N=4 0.6553, N=8 0.6184; N -> inf 2 - sqrt(2) = 0.5858.
/// Cells (one-flit packets); outputs pick a contending HOL cell at random (PIM).
/// Standard error: sqrt(0.25 / (N T)) x 10 (correlation) = 0.0035 at N=8,
/// T=200k; tolerance 0.01.
#[test]
fn fifo_hol_saturation_matches_karol_1987() {
    for (n, expect) in [(2u32, 0.7500), (4, 0.6553), (8, 0.6184)] {
        let r = lab(cell_switch(n, Queueing::Fifo, "pim", 1, 1), uniform(1.0, 1, n as u64), 5_000, 200_000);
        assert!((r.accepted_throughput - expect).abs() < 0.01, "N={n}: {} vs Karol {expect}", r.accepted_throughput);
        assert!(r.source_dropped_packets > 0, "saturated sources expected");
    }
}

/// Large N tends to 2 - sqrt(2) = 0.5858 (Karol et al. 1987, eq. 14); at N=32
/// the finite-N value is within 0.01 of it (their Table I converges as ~1/N:
/// N=8 is 0.0326 above the limit, so N=32 is about 0.008 above). Tolerance
/// 0.015 covers that offset plus 3 x the standard error (~0.002).
#[test]
fn fifo_hol_large_n_tends_to_two_minus_sqrt2() {
    let r = lab(cell_switch(32, Queueing::Fifo, "islip", 1, 1), uniform(1.0, 1, 3), 5_000, 60_000);
    let limit = 2.0 - 2f64.sqrt();
    assert!(r.accepted_throughput > limit - 0.005 && r.accepted_throughput < limit + 0.015, "{}", r.accepted_throughput);
}

/// Anderson et al., "High-Speed Switch Scheduling for Local-Area Networks",
/// ACM TOCS 1993, Sec. 3: with every VOQ backlogged an input is matched in
/// one PIM iteration iff some output grants it: 1 - (1 - 1/N)^N
/// (-> 1 - 1/e = 0.632). N=16: 0.6439. Tolerance 0.01 (s.e. ~0.002).
#[test]
fn voq_pim_one_iteration_saturates_near_one_minus_one_over_e() {
    let n = 16u32;
    let expect = 1.0 - (1.0 - 1.0 / n as f64).powi(n as i32);
    let r = lab(cell_switch(n, Queueing::Voq, "pim", 1, 1), uniform(1.0, 1, 7), 10_000, 100_000);
    assert!((r.accepted_throughput - expect).abs() < 0.01, "{} vs {expect}", r.accepted_throughput);
}

/// McKeown, "The iSLIP Scheduling Algorithm for Input-Queued Switches",
/// IEEE/ACM ToN 1999, Sec. IV-A: one iteration of iSLIP under uniform i.i.d.
/// Bernoulli arrivals reaches 100 % throughput (pointers desynchronize) with
/// unbounded VOQs. We check (a) at load 0.95 — far above the 0.632 of PIM/RRM
/// and 0.586 of FIFO — the switch carries the offered load (|accepted -
/// offered| < 0.01, s.e. ~0.002) with no source overflow, and (b) at load 1
/// with deep VOQs (256 cells each) accepted throughput above 0.98 (a critically
/// loaded queue approaches 1 only as the window grows). The separable
/// output-first allocator without the slip rule (RRM) saturates far lower
/// (McKeown 1999 Sec. III: about 63 %), so it must stay below 0.9.
#[test]
fn voq_islip_one_iteration_reaches_full_throughput() {
    let mut s = cell_switch(16, Queueing::Voq, "islip", 1, 1);
    s.buffer_per_vc_flits = 1024;
    let r = lab(s.clone(), uniform(0.95, 1, 9), 20_000, 100_000);
    assert!((r.accepted_throughput - r.offered_load).abs() < 0.01, "iSLIP {} vs {}", r.accepted_throughput, r.offered_load);
    assert_eq!(r.source_dropped_packets, 0);
    s.buffer_per_vc_flits = 4096;
    let r = lab(s, uniform(1.0, 1, 9), 20_000, 100_000);
    assert!(r.accepted_throughput > 0.98, "iSLIP {}", r.accepted_throughput);
    let rrm = lab(cell_switch(16, Queueing::Voq, "separable_output_first", 1, 1), uniform(1.0, 1, 9), 20_000, 100_000);
    assert!(rrm.accepted_throughput < 0.9, "RRM {}", rrm.accepted_throughput);
}

/// Output queueing (speedup N) carries all offered load (Karol et al. 1987,
/// Sec. III); saturated inputs deliver ~1 flit/port/cycle. With finite output
/// buffers the outputs stay busy whenever cells are queued: > 0.99.
#[test]
fn output_queueing_speedup_n_reaches_full_throughput() {
    let n = 8u32;
    let r = lab(cell_switch(n, Queueing::Fifo, "islip", 1, n), uniform(1.0, 1, 13), 5_000, 50_000);
    assert!(r.accepted_throughput > 0.99, "{}", r.accepted_throughput);
}

/// A maximal matching with speedup 2 gives 100 % throughput for admissible
/// traffic (Dai & Prabhakar, INFOCOM 2000; Leonardi et al. 2001). Wavefront is
/// maximal (Tamir & Chi 1993). Saturated inputs: > 0.99.
#[test]
fn voq_speedup_two_maximal_matching_reaches_full_throughput() {
    let r = lab(cell_switch(16, Queueing::Voq, "wavefront", 1, 2), uniform(1.0, 1, 17), 10_000, 60_000);
    assert!(r.accepted_throughput > 0.99, "{}", r.accepted_throughput);
}

/// Below saturation every allocator must carry the offered load: accepted =
/// offered within sampling error (s.e. sqrt(rho/(N T)) ~ 0.002 at N=16,
/// T=40k, 8-flit packets; tolerance 0.02).
#[test]
fn every_allocator_carries_offered_load_below_saturation() {
    for (name, it) in [("islip", 2), ("pim", 3), ("separable_input_first", 1), ("separable_output_first", 1), ("wavefront", 1), ("oldest_first", 1)] {
        let mut s = cell_switch(16, Queueing::Voq, name, it, 1);
        s.max_packet_flits = 8;
        s.vcs = 2;
        s.buffer_per_vc_flits = 64;
        let r = lab(s, uniform(0.5, 8, 21), 5_000, 40_000);
        assert!((r.accepted_throughput - 0.5).abs() < 0.02, "{name}: {}", r.accepted_throughput);
        assert_eq!(r.source_dropped_packets, 0, "{name}");
    }
}

/// Zero-load latency of a packet: it requests `P` cycles after its head
/// arrives and its F flits then leave one per cycle, so tail_out - head_in + 1
/// = P + F (pipeline plus serialization, Dally & Towles ch. 16). At very low
/// load almost no packet waits.
#[test]
fn zero_load_latency_is_pipeline_plus_serialization() {
    let mut s = cell_switch(8, Queueing::Voq, "islip", 1, 1);
    s.max_packet_flits = 8;
    s.buffer_per_vc_flits = 32;
    s.pipeline_latency_cycles = 3;
    let r = lab(s, uniform(0.01, 8, 1), 1_000, 100_000);
    assert_eq!(r.switch.network_latency.min(), 3 + 8);
    assert_eq!(r.switch.network_latency.quantile(0.5), 3 + 8);
}

/// Output-queued (speedup N) mean queueing delay matches the M/D/1-like
/// closed form of Karol et al. 1987, eq. (19): for uniform Bernoulli cells at
/// load p on an N x N switch, mean wait = (N-1)/N x p / (2 (1 - p)) cycles.
/// N=8, p=0.8: 1.75 cycles. Our sojourn = wait + 1 (transmission cycle).
/// Tolerance 5 % (sampling error of a mean wait over ~3M cells).
#[test]
fn output_queueing_delay_matches_karol_eq19() {
    let (n, p) = (8u32, 0.8);
    let r = lab(cell_switch(n, Queueing::Fifo, "islip", 1, n), uniform(p, 1, 23), 5_000, 400_000);
    let expect_wait = (n as f64 - 1.0) / n as f64 * p / (2.0 * (1.0 - p));
    let got_wait = r.mean_sojourn_cycles - 1.0;
    assert!((got_wait / expect_wait - 1.0).abs() < 0.05, "{got_wait} vs {expect_wait}");
}
