//! Full-precision JSON dumps of switch-lab runs on a fixed set of
//! configurations plus `N` seeded random ones (every allocator, VOQ/FIFO,
//! speedup with output buffers, pipeline, warm-up, credit delay, every traffic
//! pattern and process), one line per run. Used to check that a speed change
//! leaves every answer bit-identical: dump before and after, `cmp` the files.
//! `cargo run --release --example switch_dump [N] > dump.txt`

#[path = "../benches/common/switch_spec.rs"]
mod switch_spec;

use flitsim::experiments::switch_lab::{run, Pattern, Process};
use flitsim::switch::Queueing;

fn main() {
    let n: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(40);
    let mut specs = vec![switch_spec::booksim_spec(20_000)];
    let allocs = ["islip", "pim", "separable_input_first", "separable_output_first", "wavefront", "oldest_first"];
    // SplitMix64: a fixed stream of configurations.
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut rnd = move |m: u64| {
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % m
    };
    for _ in 0..n {
        let mut s = switch_spec::booksim_spec(2_000 + rnd(6_000));
        s.switch.ports = [2, 3, 8, 16, 33, 64, 72, 100][rnd(8) as usize];
        s.switch.vcs = 1 + rnd(4) as u32;
        s.switch.max_packet_flits = 1 + rnd(8) as u32;
        s.switch.buffer_per_vc_flits = s.switch.max_packet_flits * (1 + rnd(3) as u32);
        s.switch.downstream_credits_per_vc_flits = s.switch.max_packet_flits * (1 + rnd(3) as u32);
        s.switch.queueing = if rnd(4) == 0 { Queueing::Fifo } else { Queueing::Voq };
        s.switch.allocator = allocs[rnd(6) as usize].into();
        let it = 1 + rnd(3) as u32;
        s.switch.iterations = if matches!(s.switch.allocator.as_str(), "islip" | "pim") { it } else { 1 };
        s.switch.pipeline_latency_cycles = if rnd(3) == 0 { rnd(4) as u32 } else { 0 };
        if rnd(4) == 0 {
            s.switch.speedup = (2 + rnd(2) as u32).min(s.switch.ports);
            s.switch.output_buffer_per_vc_flits = s.switch.max_packet_flits * (1 + rnd(2) as u32);
        } else if rnd(5) == 0 {
            s.switch.output_buffer_per_vc_flits = s.switch.max_packet_flits;
        }
        s.switch.seed = rnd(100);
        s.traffic.packet_flits = 1 + rnd(s.switch.max_packet_flits as u64) as u32;
        s.traffic.load = [0.05, 0.2, 0.5, 0.7, 0.9, 1.0][rnd(6) as usize];
        s.traffic.pattern = [Pattern::Uniform, Pattern::Permutation, Pattern::Hotspot, Pattern::Incast][rnd(4) as usize];
        s.traffic.process = if rnd(3) == 0 { Process::Bursty } else { Process::Bernoulli };
        s.traffic.mean_burst_packets = 1.0 + rnd(6) as f64;
        s.traffic.hotspot_port = rnd(s.switch.ports as u64) as u32;
        s.traffic.hotspot_fraction = 0.3;
        s.traffic.incast_target = rnd(s.switch.ports as u64) as u32;
        s.traffic.seed = rnd(1000);
        s.warmup_cycles = if rnd(2) == 0 { rnd(1500) } else { 0 };
        s.credit_return_cycles = if rnd(3) == 0 { rnd(20) } else { 0 };
        s.source_queue_packets = [4, 64, 1024][rnd(3) as usize];
        if s.traffic.pattern == Pattern::Incast && s.switch.ports < 2 {
            s.switch.ports = 2;
        }
        specs.push(s);
    }
    for s in &specs {
        match run(s, &mut flitsim::engine::NoInterrupt) {
            Ok(r) => println!("{}", serde_json::to_string(&r).expect("json")),
            Err(e) => println!("error {e} SPEC {}", serde_json::to_string(s).unwrap_or_default()),
        }
    }
}
