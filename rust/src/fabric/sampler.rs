//! Time-resolved counters of the packet engine: per switch port the input
//! buffer occupancy (queue depth) and the downstream credits in use on its
//! output, per endpoint port the credits in use on its uplink, sampled at a
//! fixed interval into a buffer of fixed size.
//!
//! Sampling is exact, not approximate: nothing changes between events, so
//! the state just before the first event at or after a sample instant is the
//! state at that instant. When the buffer is full, every other sample is
//! dropped and the interval doubles, so a run of any length is covered by at
//! most `max_samples` equally spaced samples (memory: `max_samples x
//! (2 x switch ports + endpoint ports) x 4` bytes, allocated once). Off by
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
}

impl Sampler {
    /// A sampler that never samples.
    pub fn off() -> Self {
        Sampler { next_ps: u64::MAX, interval_ps: 0, cap: 0, len: 0, switch_ports: 0, out_cap: Vec::new(), vcs: Vec::new(), ep_cap: Vec::new(), time_ps: Vec::new(), queue: Vec::new(), credits: Vec::new(), ep_credits: Vec::new() }
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
        spec.validate(2 * nsp as u64 + ep_cap.len() as u64)?;
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
                for p in 0..self.switch_ports {
                    let (mut q, mut c) = (0u32, 0u32);
                    for vc in 0..v {
                        q += buf - sw.input_free_flits(p, vc);
                        c += self.out_cap[ci].saturating_sub(sw.output_credits(p, vc));
                        ci += 1;
                    }
                    self.queue[i] = q;
                    self.credits[i] = c;
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

    /// Keep samples 0, 2, 4, ... and double the interval.
    fn decimate(&mut self) {
        let nsp = self.vcs.len() * self.switch_ports;
        let ne = self.ep_cap.len();
        let keep = self.len.div_ceil(2);
        for j in 1..keep {
            self.time_ps[j] = self.time_ps[2 * j];
            self.queue.copy_within(2 * j * nsp..(2 * j + 1) * nsp, j * nsp);
            self.credits.copy_within(2 * j * nsp..(2 * j + 1) * nsp, j * nsp);
            self.ep_credits.copy_within(2 * j * ne..(2 * j + 1) * ne, j * ne);
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
