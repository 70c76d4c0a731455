//! The BookSim2 comparison configuration, shared by benches/switch.rs and
//! examples/switch_speed.rs: one 72-port input-queued switch, 4 VCs x 16-flit
//! buffers, 8-flit packets, iSLIP (1 iteration), uniform Bernoulli traffic at
//! 0.5 flits/port/cycle.

use flitsim::experiments::switch_lab::{Pattern, Process, SwitchLabSpec, TrafficSpec};
use flitsim::switch::{Queueing, SwitchSpec};

/// The benchmark configuration (shared with benches/switch_bench.py).
pub fn booksim_spec(measure_cycles: u64) -> SwitchLabSpec {
    SwitchLabSpec {
        switch: SwitchSpec {
            ports: 72,
            vcs: 4,
            buffer_per_vc_flits: 16,
            max_packet_flits: 8,
            queueing: Queueing::Voq,
            speedup: 1,
            pipeline_latency_cycles: 0,
            output_buffer_per_vc_flits: 0,
            downstream_credits_per_vc_flits: 16,
            allocator: "islip".into(),
            iterations: 1,
            clock_ghz: 1.0,
            seed: 1,
            stall_timeout_cycles: 0,
        },
        traffic: TrafficSpec {
            pattern: Pattern::Uniform,
            process: Process::Bernoulli,
            load: 0.5,
            packet_flits: 8,
            mean_burst_packets: 1.0,
            hotspot_port: 0,
            hotspot_fraction: 0.0,
            incast_target: 0,
            incast_sources: 0,
            seed: 1,
        },
        warmup_cycles: 0,
        measure_cycles,
        credit_return_cycles: 0,
        dead_outputs: vec![],
        source_queue_packets: 1024,
    }
}

