//! The switch lab's deferred histograms (exact counts of small values folded
//! in at the end) against recording every packet: on random configurations
//! (every allocator, VOQ/FIFO, speedup with output buffers, pipeline, warm-up,
//! credit delay, all traffic patterns and processes, loads up to saturation)
//! the whole result must be identical, histogram bins, sums, extremes and
//! every counter. Also drives a bare `Switch` both ways with a reset in the
//! middle of the run.

use flitsim::engine::{NoInterrupt, SimRng};
use flitsim::experiments::switch_lab::{run_with, Pattern, Process, SwitchLabSpec, TrafficSpec};
use flitsim::switch::{Packet, Queueing, Switch, SwitchSpec};
use proptest::prelude::*;

const ALLOCATORS: [&str; 6] = ["islip", "pim", "separable_input_first", "separable_output_first", "wavefront", "oldest_first"];

fn switch_spec(ports: u32, vcs: u32, f: u32, mult: (u32, u32), fifo: bool, alloc: usize, iters: u32, pipe: u32, sp: u32) -> SwitchSpec {
    let allocator = ALLOCATORS[alloc];
    let speedup = sp.min(ports);
    SwitchSpec {
        ports,
        vcs,
        buffer_per_vc_flits: f * mult.0,
        max_packet_flits: f,
        queueing: if fifo { Queueing::Fifo } else { Queueing::Voq },
        speedup,
        pipeline_latency_cycles: pipe,
        output_buffer_per_vc_flits: if speedup > 1 { f * mult.1 } else { 0 },
        downstream_credits_per_vc_flits: f * mult.1,
        allocator: allocator.into(),
        iterations: if matches!(allocator, "islip" | "pim") { iters } else { 1 },
        clock_ghz: 1.0,
        seed: 3,
        stall_timeout_cycles: 0,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn deferred_histograms_equal_per_packet_recording(
        ports in prop::sample::select(vec![2u32, 3, 8, 17, 72]), vcs in 1u32..4, f in 1u32..9, mult in (1u32..3, 1u32..3),
        fifo in any::<bool>(), alloc in 0usize..6, iters in 1u32..3, pipe in 0u32..3, sp in prop::sample::select(vec![1u32, 1, 2]),
        load in prop::sample::select(vec![0.1, 0.5, 0.8, 1.0]), pattern in 0usize..4, bursty in any::<bool>(),
        warmup in prop::sample::select(vec![0u64, 300]), credit_delay in prop::sample::select(vec![0u64, 7]), seed in 0u64..1000,
    ) {
        let switch = switch_spec(ports, vcs, f, mult, fifo, alloc, iters, pipe, sp);
        let traffic = TrafficSpec {
            pattern: [Pattern::Uniform, Pattern::Permutation, Pattern::Hotspot, Pattern::Incast][pattern],
            process: if bursty { Process::Bursty } else { Process::Bernoulli },
            load,
            packet_flits: f,
            mean_burst_packets: 3.0,
            hotspot_port: 0,
            hotspot_fraction: 0.4,
            incast_target: ports - 1,
            incast_sources: 0,
            seed,
        };
        let spec = SwitchLabSpec { switch, traffic, warmup_cycles: warmup, measure_cycles: 1500, credit_return_cycles: credit_delay, dead_outputs: vec![], source_queue_packets: 64 };
        let a = run_with(&spec, &mut NoInterrupt, false);
        let b = run_with(&spec, &mut NoInterrupt, true);
        match (a, b) {
            (Ok(a), Ok(b)) => {
                prop_assert!(a.latency.count() > 0);
                prop_assert_eq!(serde_json::to_string(&a).unwrap(), serde_json::to_string(&b).unwrap());
            }
            (Err(a), Err(b)) => prop_assert_eq!(a.to_string(), b.to_string()),
            (a, b) => prop_assert!(false, "one run failed: {:?} vs {:?}", a.err(), b.err()),
        }
    }
}

/// A bare switch fed the same random packets both ways, latencies beyond the
/// deferred range included (credits come back late), statistics reset in the
/// middle: identical departures every step and identical statistics.
#[test]
fn bare_switch_deferred_statistics_equal_and_survive_a_reset() {
    let spec = switch_spec(8, 2, 4, (4, 1), false, 0, 1, 1, 1);
    let mut a = Switch::new(&spec).unwrap();
    let mut b = Switch::new(&spec).unwrap();
    b.set_deferred_histograms(true);
    let mut rng = SimRng::new(9);
    let mut long = 0;
    for c in 0..20_000u64 {
        if c == 5_000 {
            a.reset_stats(c);
            b.reset_stats(c);
        }
        for i in 0..8 {
            if rng.uniform() < 0.3 {
                let p = Packet { dest: rng.below(8) as u32, vc: rng.below(2) as u32, flits: 1 + rng.below(4) as u32, birth_cycle: c, tag: 0 };
                if a.can_accept(i, p.vc as usize, p.flits, c) {
                    assert!(b.can_accept(i, p.vc as usize, p.flits, c));
                    a.inject(i, p, c).unwrap();
                    b.inject(i, p, c).unwrap();
                }
            }
        }
        a.step(c);
        b.step(c);
        assert_eq!(a.departures(), b.departures());
        for d in a.departures().to_vec() {
            // Every 50th packet's credits come back 400 cycles late: some latencies exceed 256.
            let back = if d.packet.birth_cycle % 50 == 0 { 400 } else { 2 };
            long += (back == 400) as u32;
            a.return_credits(d.output as usize, d.packet.vc as usize, d.packet.flits, d.tail_out_cycle + back).unwrap();
            b.return_credits(d.output as usize, d.packet.vc as usize, d.packet.flits, d.tail_out_cycle + back).unwrap();
        }
    }
    assert!(long > 0);
    let sa = serde_json::to_string(a.finish_stats(20_000)).unwrap();
    let sb = serde_json::to_string(b.finish_stats(20_000)).unwrap();
    assert!(a.stats().network_latency.count() > 1000);
    assert!(a.stats().network_latency.max() > 256, "the test must reach values past the deferred range");
    assert_eq!(sa, sb);
}

/// The deferred counters are 16-bit per (output, latency) and fold into the
/// histograms each time one fills: a 2-port switch with 1-flit packets at
/// full load sends about 150,000 packets per output at one latency, past
/// 65,535 twice, and the result must still equal per-packet recording.
#[test]
fn deferred_counters_overflow_into_the_histograms() {
    let switch = switch_spec(2, 1, 1, (2, 2), false, 0, 1, 0, 1);
    let traffic = TrafficSpec {
        pattern: Pattern::Permutation,
        process: Process::Bernoulli,
        load: 1.0,
        packet_flits: 1,
        mean_burst_packets: 1.0,
        hotspot_port: 0,
        hotspot_fraction: 0.0,
        incast_target: 0,
        incast_sources: 0,
        seed: 3,
    };
    let spec = SwitchLabSpec { switch, traffic, warmup_cycles: 0, measure_cycles: 150_000, credit_return_cycles: 0, dead_outputs: vec![], source_queue_packets: 64 };
    let a = run_with(&spec, &mut NoInterrupt, false).unwrap();
    let b = run_with(&spec, &mut NoInterrupt, true).unwrap();
    let h = &a.switch.output_latency[0];
    assert!(h.count() > 2 * 65_535 && h.min() == h.max(), "one (output, latency) bin must pass the 16-bit counter twice: {} packets, latencies {}..{}", h.count(), h.min(), h.max());
    assert_eq!(serde_json::to_string(&a).unwrap(), serde_json::to_string(&b).unwrap());
}

/// An output-buffered switch (speedup 3) whose credits come back "due now"
/// while the sources are idle: the pending output service must be announced
/// (`allocation_pending`), or an owner that skips idle cycles, as the lab
/// does, sees no work and reports a stall with 143 packets inside, at t =
/// 1023 cycles, found by `examples/switch_dump.rs`. Now it runs, and skipping
/// idle cycles gives the same departures as stepping every cycle.
#[test]
fn output_service_after_credits_due_now_is_announced() {
    let mut switch = switch_spec(72, 1, 1, (2, 1), false, 3, 1, 0, 3);
    switch.output_buffer_per_vc_flits = 2;
    switch.seed = 99;
    let traffic = TrafficSpec {
        pattern: Pattern::Incast,
        process: Process::Bursty,
        load: 0.7,
        packet_flits: 1,
        mean_burst_packets: 4.0,
        hotspot_port: 0,
        hotspot_fraction: 0.0,
        incast_target: 58,
        incast_sources: 0,
        seed: 471,
    };
    let spec = SwitchLabSpec { switch: switch.clone(), traffic, warmup_cycles: 0, measure_cycles: 6069, credit_return_cycles: 0, dead_outputs: vec![], source_queue_packets: 1024 };
    let r = run_with(&spec, &mut NoInterrupt, true).expect("no stall");
    // Incast into one output with 1 credit and a 2-cycle credit loop (sent at
    // t, back at t + 1, usable at t + 2): one flit per 2 cycles.
    assert!(r.delivered_flits.abs_diff(6069 / 2) <= 1, "{}", r.delivered_flits);

    // Bare switch: the same packets, stepped every cycle or only when it has work.
    let mut every = Switch::new(&switch).unwrap();
    let mut lazy = Switch::new(&switch).unwrap();
    let (mut de, mut dl) = (vec![], vec![]);
    for c in 0..400u64 {
        if c % 50 < 3 {
            for i in 0..6 {
                let p = Packet { dest: 58, vc: 0, flits: 1, birth_cycle: c, tag: c * 8 + i as u64 };
                if every.can_accept(i, 0, 1, c) {
                    assert!(lazy.can_accept(i, 0, 1, c));
                    every.inject(i, p, c).unwrap();
                    lazy.inject(i, p, c).unwrap();
                }
            }
        }
        for (sw, out, always) in [(&mut every, &mut de, true), (&mut lazy, &mut dl, false)] {
            let due = sw.next_event_cycle().is_some_and(|e| e <= c) || sw.allocation_pending() || c % 50 < 3;
            if always || due {
                sw.step(c);
                for d in sw.departures().to_vec() {
                    out.push((d.packet.tag, d.tail_out_cycle));
                    sw.return_credits(d.output as usize, 0, 1, d.tail_out_cycle + 1).unwrap();
                }
            }
        }
    }
    assert!(de.len() > 50);
    assert_eq!(de, dl);
    assert_eq!(lazy.packets_inside(), 0);
}
