//! Time-resolved counters of the packet engine: per switch port the input
//! buffer occupancy (queue depth) and the downstream credits in use on its
//! output, per endpoint port the credits in use on its uplink, sampled at a
//! fixed interval into a buffer of fixed size, with the flits each switch
//! output sent since the previous sample (its utilization over time).
//!
//! Sampling is exact, not approximate: nothing changes between events, so
//! the state just before the first event at or after a sample instant is the
//! state at that instant. When the buffer is full, every other sample is
//! dropped and the interval doubles, so a run of any length is covered by at
//! most `max_samples` equally spaced samples (memory: `max_samples x
//! (3 x switch ports + endpoint ports) x 4` bytes, allocated once). Off by
//! default: the engine's check is one comparison with `u64::MAX` per event.

use crate::error::{FlitsimError, Result};
use crate::link::LinkDirection;
use crate::switch::Switch;
use serde::{Deserialize, Serialize};

/// Most values one sampler may hold (samples x series): 128 MiB of `u32`.
pub const MAX_COUNTER_VALUES: u64 = 1 << 25;

/// Counter sampling of a fabric run (packet level only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct CounterSpec {
    /// First sampling interval, ps (0: off). Doubles each time the buffer fills.
    #[serde(default)]
    pub interval_ps: u64,
    /// Most samples kept (the buffer size; >= 2).
    #[serde(default = "d_max_samples")]
    pub max_samples: u32,
}

fn d_max_samples() -> u32 {
    512
}

impl CounterSpec {
    pub fn is_off(&self) -> bool {
        self.interval_ps == 0
    }

    /// # Errors
    /// `Config` naming `counters.max_samples` (below 2) or the memory cap.
    pub fn validate(&self, series: u64) -> Result<()> {
        if self.is_off() {
            return Ok(());
        }
        if self.max_samples < 2 {
            return Err(FlitsimError::config("counters.max_samples", self.max_samples, "at least 2 samples (the buffer halves when full)"));
        }
        let values = self.max_samples as u64 * series;
        if values > MAX_COUNTER_VALUES {
            return Err(FlitsimError::config(
                "counters.max_samples",
                format!("{} ({} series: {values} values)", self.max_samples, series),
                &format!("at most {MAX_COUNTER_VALUES} values (samples x ports); sample fewer times"),
            ));
        }
        Ok(())
    }
}

/// What a run sampled: `time_ps[t]` and, row-major `[t][series]`, the
/// counters; see [`Sampler`].
#[derive(Debug, Clone, Default, Serialize)]
pub struct CounterSamples {
    /// Interval between kept samples at the end of the run, ps.
    pub interval_ps: u64,
    /// The buffer size (most samples kept).
    pub max_samples: u32,
    /// Switch ports per switch (series `s * switch_ports + p`).
    pub switch_ports: u32,
    pub time_ps: Vec<u64>,
    /// Flits in switch `s` port `p`'s input buffer, summed over VCs.
    pub queue_flits: Vec<u32>,
    /// Flits sent out of switch `s` port `p` whose credits are not back
    /// (on the wire, in the next buffer, or credit in flight), summed over VCs.
    pub credits_in_use_flits: Vec<u32>,
    /// Per endpoint port (`endpoint * gpu_ports + k`), the same for its uplink.
    pub endpoint_credits_in_use_flits: Vec<u32>,
    /// Flits that left switch `s` port `p` since the previous sample (0 at
    /// the first): utilization over the interval = this x cycle / interval.
    pub output_flits: Vec<u32>,
}

/// The sampler a fabric simulation carries (see the module docs).
#[derive(Debug, Clone)]
pub struct Sampler {
    /// Next sample instant, ps (`u64::MAX`: off).
    pub next_ps: u64,
    interval_ps: u64,
    cap: usize,
    len: usize,
    switch_ports: usize,
    /// Per switch port and VC: the output's credits at the start (its downstream capacity).
    out_cap: Vec<u32>,
    vcs: Vec<usize>,
    ep_cap: Vec<u32>,
    time_ps: Vec<u64>,
    queue: Vec<u32>,
    credits: Vec<u32>,
    ep_credits: Vec<u32>,
    /// Per switch port: flits out so far at the last sample; and the per-sample deltas.
    last_out: Vec<u64>,
    out_flits: Vec<u32>,
}

impl Sampler {
    /// A sampler that never samples.
    pub fn off() -> Self {
        Sampler { next_ps: u64::MAX, interval_ps: 0, cap: 0, len: 0, switch_ports: 0, out_cap: Vec::new(), vcs: Vec::new(), ep_cap: Vec::new(), time_ps: Vec::new(), queue: Vec::new(), credits: Vec::new(), ep_credits: Vec::new(), last_out: Vec::new(), out_flits: Vec::new() }
    }

    /// A sampler for these switches (with full credits: call before any
    /// traffic) and endpoint uplinks; `off()` when `spec` is off.
    ///
    /// # Errors
    /// `Config` from [`CounterSpec::validate`].
    pub fn new<'a>(spec: &CounterSpec, switch_ports: u32, switches: impl Iterator<Item = &'a Switch>, uplinks: impl Iterator<Item = &'a LinkDirection>) -> Result<Self> {
        if spec.is_off() {
            return Ok(Self::off());
        }
        let sp = switch_ports as usize;
        let mut out_cap = Vec::new();
        let mut vcs = Vec::new();
        for sw in switches {
            let v = sw.spec().vcs as usize;
            vcs.push(v);
            for o in 0..sp {
                for vc in 0..v {
                    out_cap.push(sw.output_credits(o, vc));
                }
            }
        }
        let ep_cap: Vec<u32> = uplinks.map(|l| l.timing().credits_per_vc_flits * l.timing().vcs).collect();
        let nsp = vcs.len() * sp;
        spec.validate(3 * nsp as u64 + ep_cap.len() as u64)?;
        let cap = spec.max_samples as usize;
        Ok(Sampler {
            next_ps: 0,
            interval_ps: spec.interval_ps,
            cap,
            len: 0,
            switch_ports: sp,
            out_cap,
            vcs,
            time_ps: vec![0; cap],
            queue: vec![0; cap * nsp],
            credits: vec![0; cap * nsp],
            ep_credits: vec![0; cap * ep_cap.len()],
            ep_cap,
            last_out: vec![0; nsp],
            out_flits: vec![0; cap * nsp],
        })
    }

    /// Record the current state at every sample instant up to `now`
    /// (inclusive when `inclusive`, else strictly before: call before
    /// handling an event at `now`).
    pub fn sample<'a>(&mut self, now: u64, inclusive: bool, switches: impl Iterator<Item = &'a Switch> + Clone, uplinks: impl Iterator<Item = &'a LinkDirection> + Clone) {
        while self.next_ps < now || (inclusive && self.next_ps == now) {
            if self.len == self.cap {
                self.decimate();
                continue;
            }
            let t = self.len;
            self.time_ps[t] = self.next_ps;
            let nsp = self.vcs.len() * self.switch_ports;
            let (mut i, mut ci) = (t * nsp, 0);
            for (s, sw) in switches.clone().enumerate() {
                let v = self.vcs[s];
                let buf = sw.spec().buffer_per_vc_flits;
                let outs = &sw.stats().outputs;
                for p in 0..self.switch_ports {
                    let (mut q, mut c, mut f) = (0u32, 0u32, 0u64);
                    for vc in 0..v {
                        q += buf - sw.input_free_flits(p, vc);
                        c += self.out_cap[ci].saturating_sub(sw.output_credits(p, vc));
                        f += outs[p * v + vc].flits_out;
                        ci += 1;
                    }
                    self.queue[i] = q;
                    self.credits[i] = c;
                    let j = i - t * nsp;
                    self.out_flits[i] = u32::try_from(f - self.last_out[j]).unwrap_or(u32::MAX);
                    self.last_out[j] = f;
                    i += 1;
                }
            }
            let ne = self.ep_cap.len();
            for (k, l) in uplinks.clone().enumerate() {
                let free: u32 = (0..l.timing().vcs as usize).map(|vc| l.credits(vc)).sum();
                self.ep_credits[t * ne + k] = self.ep_cap[k].saturating_sub(free);
            }
            self.len += 1;
            self.next_ps = self.next_ps.saturating_add(self.interval_ps);
        }
    }

    /// At the end of a run (`end_ps`): samples up to the first instant at or
    /// after it, so the last one holds the final state and the output deltas
    /// sum to every flit that left.
    pub fn close<'a>(&mut self, end_ps: u64, switches: impl Iterator<Item = &'a Switch> + Clone, uplinks: impl Iterator<Item = &'a LinkDirection> + Clone) {
        if self.cap == 0 {
            return;
        }
        self.sample(end_ps, true, switches.clone(), uplinks.clone());
        while self.len == 0 || self.time_ps[self.len - 1] < end_ps {
            let t = self.next_ps;
            self.sample(t, true, switches.clone(), uplinks.clone());
        }
    }

    /// Keep samples 0, 2, 4, ... (each kept sample's output delta takes the
    /// dropped one before it) and double the interval.
    fn decimate(&mut self) {
        let nsp = self.vcs.len() * self.switch_ports;
        let ne = self.ep_cap.len();
        let keep = self.len.div_ceil(2);
        if self.len % 2 == 0 {
            // The last sample goes: the next delta counts from the last kept one.
            let last = (self.len - 1) * nsp;
            for k in 0..nsp {
                self.last_out[k] -= self.out_flits[last + k] as u64;
            }
        }
        for j in 1..keep {
            self.time_ps[j] = self.time_ps[2 * j];
            self.queue.copy_within(2 * j * nsp..(2 * j + 1) * nsp, j * nsp);
            self.credits.copy_within(2 * j * nsp..(2 * j + 1) * nsp, j * nsp);
            self.ep_credits.copy_within(2 * j * ne..(2 * j + 1) * ne, j * ne);
            for k in 0..nsp {
                self.out_flits[j * nsp + k] = self.out_flits[2 * j * nsp + k].saturating_add(self.out_flits[(2 * j - 1) * nsp + k]);
            }
        }
        self.len = keep;
        self.interval_ps = self.interval_ps.saturating_mul(2);
        self.next_ps = self.time_ps[keep - 1].saturating_add(self.interval_ps);
    }

    /// The samples so far (None when off).
    pub fn export(&self) -> Option<CounterSamples> {
        if self.cap == 0 {
            return None;
        }
        let nsp = self.vcs.len() * self.switch_ports;
        let ne = self.ep_cap.len();
        Some(CounterSamples {
            interval_ps: self.interval_ps,
            max_samples: self.cap as u32,
            switch_ports: self.switch_ports as u32,
            time_ps: self.time_ps[..self.len].to_vec(),
            queue_flits: self.queue[..self.len * nsp].to_vec(),
            credits_in_use_flits: self.credits[..self.len * nsp].to_vec(),
            endpoint_credits_in_use_flits: self.ep_credits[..self.len * ne].to_vec(),
            output_flits: self.out_flits[..self.len * nsp].to_vec(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_by_default_and_small_buffers_refused() {
        assert!(CounterSpec::default().is_off());
        assert!(Sampler::off().export().is_none());
        let bad = CounterSpec { interval_ps: 1000, max_samples: 1 };
        assert!(bad.validate(4).is_err());
        let big = CounterSpec { interval_ps: 1000, max_samples: u32::MAX };
        assert!(big.validate(4).is_err());
    }
}
