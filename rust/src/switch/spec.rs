//! The switch's parameters, validated once; every delay is a named field with
//! its unit. NVSwitch internals are not public, so
//! these are parameters with documented defaults, not hidden constants.

use crate::error::{ensure, Result};
use serde::{Deserialize, Serialize};

/// How an input port's buffer is organized.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Queueing {
    /// Virtual output queues: one logical queue per (VC, output) in the
    /// input's per-VC buffer, so a blocked output blocks no other.
    Voq,
    /// One FIFO per (input, VC): only its head may request, exposing
    /// head-of-line blocking (Karol, Hluchyj, Morgan 1987).
    Fifo,
}

/// Parameters of one input-queued crossbar switch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchSpec {
    /// Ports (each is one input and one output), >= 1.
    pub ports: u32,
    /// Virtual channels per port, 1..=64.
    #[serde(default = "one")]
    pub vcs: u32,
    /// Input buffer per (port, VC), flits; >= `max_packet_flits`.
    pub buffer_per_vc_flits: u32,
    /// Largest packet the switch carries, flits (credit masks and buffer
    /// checks reserve this much, virtual cut-through).
    pub max_packet_flits: u32,
    /// VOQ or FIFO inputs.
    #[serde(default = "voq")]
    pub queueing: Queueing,
    /// Crossbar speedup: allocation rounds (and flits moved per connection)
    /// per switch cycle, 1..=ports. Above 1 needs output buffers.
    #[serde(default = "one")]
    pub speedup: u32,
    /// Cycles from a head flit's arrival in the input buffer to its first
    /// allocation request (route computation and allocation stages).
    #[serde(default)]
    pub pipeline_latency_cycles: u32,
    /// Output buffer per (port, VC), flits; 0 = none (the crossbar drives the
    /// output link directly).
    #[serde(default)]
    pub output_buffer_per_vc_flits: u32,
    /// Credits per (output, VC) held for the downstream receiver, flits.
    pub downstream_credits_per_vc_flits: u32,
    /// Allocator name (see `alloc::NAMES`).
    pub allocator: String,
    /// Iterations for `islip` and `pim`.
    #[serde(default = "one")]
    pub iterations: u32,
    /// Switch core clock, GHz (one flit per port per cycle).
    #[serde(default = "one_ghz")]
    pub clock_ghz: f64,
    /// Seed for randomized allocators.
    #[serde(default)]
    pub seed: u64,
    /// Cycles with flits pending and no flit moving after which the switch
    /// reports a stall; 0 = automatic (16 x (pipeline + packet) + 4096).
    #[serde(default)]
    pub stall_timeout_cycles: u64,
}

fn one() -> u32 {
    1
}
fn voq() -> Queueing {
    Queueing::Voq
}
fn one_ghz() -> f64 {
    1.0
}

/// Largest port count accepted (request matrices are ports^2 bits).
pub const MAX_PORTS: u32 = 4096;

impl SwitchSpec {
    /// Check every field; the error names the field, the value and the rule.
    ///
    /// # Errors
    /// `Config` for any invalid field or combination.
    pub fn validate(&self) -> Result<()> {
        ensure(self.ports >= 1 && self.ports <= MAX_PORTS, "switch.ports", self.ports, "1..=4096 ports")?;
        ensure(self.vcs >= 1 && self.vcs <= 64, "switch.vcs", self.vcs, "1..=64 virtual channels")?;
        ensure(self.max_packet_flits >= 1 && self.max_packet_flits <= 65_535, "switch.max_packet_flits", self.max_packet_flits, "1..=65535 flits")?;
        ensure(
            self.buffer_per_vc_flits >= self.max_packet_flits && self.buffer_per_vc_flits <= 1 << 20,
            "switch.buffer_per_vc_flits",
            self.buffer_per_vc_flits,
            &format!("at least one packet ({} flits, virtual cut-through) and at most 2^20", self.max_packet_flits),
        )?;
        ensure(self.speedup >= 1 && self.speedup <= self.ports, "switch.speedup", self.speedup, &format!("1..={} (ports)", self.ports))?;
        ensure(
            self.output_buffer_per_vc_flits == 0 || (self.output_buffer_per_vc_flits >= self.max_packet_flits && self.output_buffer_per_vc_flits <= 1 << 20),
            "switch.output_buffer_per_vc_flits",
            self.output_buffer_per_vc_flits,
            &format!("0 (none) or at least one packet ({} flits) and at most 2^20", self.max_packet_flits),
        )?;
        ensure(
            self.speedup == 1 || self.output_buffer_per_vc_flits > 0,
            "switch.output_buffer_per_vc_flits",
            self.output_buffer_per_vc_flits,
            "speedup > 1 delivers more than one flit per cycle to an output: give output buffers (>= one packet)",
        )?;
        ensure(
            self.downstream_credits_per_vc_flits >= self.max_packet_flits,
            "switch.downstream_credits_per_vc_flits",
            self.downstream_credits_per_vc_flits,
            &format!("at least one packet ({} flits)", self.max_packet_flits),
        )?;
        ensure(self.pipeline_latency_cycles <= 1 << 16, "switch.pipeline_latency_cycles", self.pipeline_latency_cycles, "0..=65536")?;
        // Lower bound 1 MHz: a cycle of at most 1e6 ps keeps every cycle-to-ps
        // conversion far inside the engine's time range.
        ensure(self.clock_ghz.is_finite() && (0.001..=1000.0).contains(&self.clock_ghz), "switch.clock_ghz", format!("{:?}", self.clock_ghz), "a clock from 0.001 GHz (1 MHz) to 1000 GHz")?;
        // Memory guard: preallocated state grows as ports x VCs x (buffer
        // slots + queues); refuse sizes that would not fit instead of aborting.
        let (n, v) = (self.ports as u64, self.vcs as u64);
        let queues = if self.queueing == Queueing::Voq { n * v * n } else { n * v };
        let cells = n * v * (self.buffer_per_vc_flits as u64 + self.output_buffer_per_vc_flits as u64) + queues + n * n;
        ensure(
            cells <= 1 << 25,
            "switch",
            format!("{} ports x {} VCs x ({} + {} buffer flits), {} queues", n, v, self.buffer_per_vc_flits, self.output_buffer_per_vc_flits, queues),
            "at most 2^25 buffer slots and queues in all (about 2 GiB of state)",
        )?;
        super::alloc::by_name(&self.allocator, self.ports as usize, self.iterations, self.seed).map(|_| ())
    }

    /// Clock period, ps.
    pub fn cycle_ps(&self) -> f64 {
        1000.0 / self.clock_ghz
    }

    /// Stall timeout in effect, cycles.
    pub fn stall_timeout(&self) -> u64 {
        if self.stall_timeout_cycles > 0 {
            self.stall_timeout_cycles
        } else {
            16 * (self.pipeline_latency_cycles as u64 + self.max_packet_flits as u64) + 4096
        }
    }
}
