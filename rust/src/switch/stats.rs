//! Switch statistics: counters per (input, VC), (output, VC) and port, the
//! latency histograms and Little's-law integrals, and the window they cover
//! ([`Switch::reset_stats`] / [`Switch::finish_stats`]). The data path bumps the
//! counters where events happen; the time integrals are kept here.

use super::Switch;
use crate::stats::Histogram;
use serde::Serialize;

/// Counters per (input port, VC).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct InputVcStats {
    pub packets_in: u64,
    pub flits_in: u64,
    /// Packets granted by the allocator.
    pub packets_granted: u64,
    /// Sum over granted packets of cycles waited ready for a grant.
    pub queueing_cycles_sum: u64,
    /// Time integral of buffer occupancy, flit-cycles (mean = this / cycles).
    pub occupancy_flit_cycles: u64,
    /// Largest occupancy seen, flits.
    pub occupancy_max_flits: u64,
}

/// Counters per (output port, VC).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct OutputVcStats {
    pub packets_out: u64,
    pub flits_out: u64,
    /// Episodes in which downstream credits fell below one maximum-size packet
    /// (the VC could not take a packet: exhausted for virtual cut-through).
    pub credit_exhaustion_episodes: u64,
    /// Cycles spent exhausted.
    pub credit_exhaustion_cycles: u64,
}

/// Counters per port.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct PortStats {
    /// Requests this input made that were not granted, summed over rounds.
    pub input_conflicts: u64,
    /// Requests to this output that were not granted, summed over rounds.
    pub output_conflicts: u64,
}

/// All switch statistics since the last [`Switch::reset_stats`].
#[derive(Debug, Clone, Serialize)]
pub struct SwitchStats {
    /// First cycle of the window.
    pub since_cycle: u64,
    /// Index `port * vcs + vc`.
    pub inputs: Vec<InputVcStats>,
    pub outputs: Vec<OutputVcStats>,
    pub ports: Vec<PortStats>,
    /// Packet latency inside the switch, head in to tail out inclusive
    /// (tail_out - head_in + 1), cycles.
    pub network_latency: Histogram,
    /// Cycles a ready head waited for a grant.
    pub queueing: Histogram,
    /// Per output port, network latency.
    pub output_latency: Vec<Histogram>,
    /// Time integral of flits inside the switch (admitted, not yet departed),
    /// flit-cycles: Little's law L.
    pub system_flit_cycles: u64,
    /// Sum over departed flits of their time in the switch, cycles
    /// (tail_out + 1 - head_in per flit): Little's law W x departures.
    pub flit_sojourn_cycles: u64,
    pub flits_out: u64,
    pub packets_out: u64,
    /// Allocation rounds run (work done: idle slots cost none).
    pub allocation_rounds: u64,
    /// Slots processed.
    pub slots_processed: u64,
}

impl Switch {
    #[inline]
    pub(super) fn account_occ(&mut self, iv: usize, cycle: u64) {
        let last = self.in_occ[iv].since.max(self.stats.since_cycle);
        self.stats.inputs[iv].occupancy_flit_cycles += self.in_occ[iv].flits as u64 * cycle.saturating_sub(last);
        self.in_occ[iv].since = cycle;
    }

    #[inline]
    pub(super) fn account_sys(&mut self, cycle: u64) {
        let last = self.sys_last.max(self.stats.since_cycle);
        self.stats.system_flit_cycles += self.sys_flits * cycle.saturating_sub(last);
        self.sys_last = cycle;
    }

    /// Start a new statistics window at `cycle` (e.g. after warm-up). Integrals
    /// restart from the current state; open exhaustion episodes count as new.
    pub fn reset_stats(&mut self, cycle: u64) {
        let nv = self.n * self.v;
        for iv in 0..nv {
            self.in_occ[iv].since = cycle;
        }
        self.sys_last = cycle;
        let st = &mut self.stats;
        st.since_cycle = cycle;
        st.inputs.iter_mut().for_each(|x| *x = InputVcStats::default());
        st.outputs.iter_mut().for_each(|x| *x = OutputVcStats::default());
        st.ports.iter_mut().for_each(|x| *x = PortStats::default());
        st.network_latency = Histogram::new();
        st.queueing = Histogram::new();
        st.output_latency.iter_mut().for_each(|h| *h = Histogram::new());
        self.small_latency.iter_mut().for_each(|k| *k = 0);
        self.small_queueing.iter_mut().for_each(|k| *k = 0);
        st.system_flit_cycles = 0;
        st.flit_sojourn_cycles = 0;
        st.flits_out = 0;
        st.packets_out = 0;
        st.allocation_rounds = 0;
        st.slots_processed = 0;
        for iv in 0..nv {
            st.inputs[iv].occupancy_max_flits = self.in_occ[iv].flits as u64;
            if self.out_vc[iv].low_since.is_some() {
                self.out_vc[iv].low_since = Some(cycle);
                st.outputs[iv].credit_exhaustion_episodes += 1;
            }
        }
    }

    /// Close the window at `cycle` and return the statistics.
    pub fn finish_stats(&mut self, cycle: u64) -> &SwitchStats {
        for iv in 0..self.n * self.v {
            self.account_occ(iv, cycle);
            if let Some(since) = self.out_vc[iv].low_since {
                self.stats.outputs[iv].credit_exhaustion_cycles += cycle.saturating_sub(since.max(self.stats.since_cycle));
                self.out_vc[iv].low_since = Some(cycle);
            }
        }
        self.account_sys(cycle);
        self.fold_histograms();
        &self.stats
    }

    /// Statistics so far (integrals up to the last change).
    pub fn stats(&self) -> &SwitchStats {
        &self.stats
    }
}
