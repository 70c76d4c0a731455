//! The network a task graph runs over. A fabric implements [`Network`]; the
//! [`AnalyticNetwork`] here is the analytic alpha-beta reference used for tests
//! and for "zero communication cost" baselines.

use super::graph::CollectiveKind;
use crate::engine::{Scheduler, TimePs};
use crate::error::Result;

/// Completed communication: (task tag, completion time).
pub type NetworkDone = Vec<(u32, TimePs)>;

/// A communication model driven by the task-graph executor.
///
/// The executor owns the event queue; the network schedules its own events
/// through `sched` and reports finished work by pushing `(tag, time)` into `done`.
pub trait Network {
    type Event;

    /// Number of devices (endpoints) the network connects.
    fn devices(&self) -> u32;

    /// Begin moving `bytes` from `src` to `dst` at `now_ps`; `tag` identifies it.
    fn start_transfer(&mut self, now_ps: TimePs, tag: u32, src: u32, dst: u32, bytes: u64, sched: &mut dyn Scheduler<Self::Event>, done: &mut NetworkDone) -> Result<()>;

    /// Begin a collective over `members` at `now_ps`.
    fn start_collective(
        &mut self,
        now_ps: TimePs,
        tag: u32,
        members: &[u32],
        kind: CollectiveKind,
        bytes: u64,
        sched: &mut dyn Scheduler<Self::Event>,
        done: &mut NetworkDone,
    ) -> Result<()>;

    /// Handle one of the network's own events.
    fn handle(&mut self, now_ps: TimePs, event: Self::Event, sched: &mut dyn Scheduler<Self::Event>, done: &mut NetworkDone) -> Result<()>;

    /// Called once after the run ends (close statistics).
    fn finish(&mut self, _end_ps: TimePs) {}

    /// The executor's own events (task ends, releases) still queued, told
    /// before every network event: 0 means nothing outside the network can
    /// happen until the network reports a completion.
    fn set_executor_pending(&mut self, _pending: u64) {}

    /// The executor's word, before every network event: true when no device
    /// has a free communication stream and no communication task's end is
    /// queued, so no network work can start before the network reports a
    /// completion (executor events may still come: compute ends, releases).
    fn set_comm_isolated(&mut self, _isolated: bool) {}

    /// Called when the end of communication task `tag` is handled: true if
    /// the network reported that end from a replay started while isolated
    /// (then the executor requires the end to be alone at its picosecond, or
    /// the run is repeated with [`crate::error::FlitsimError::Retry`]).
    fn isolated_end(&mut self, _tag: u32) -> bool {
        false
    }

    /// Events the network accounts for without their having been queued
    /// (work it replayed instead of running), added to the run's count.
    fn replayed_events(&self) -> u64 {
        0
    }

    /// The executor's periodic skip (exec.rs): push words describing the
    /// network's live state relative to `now_ps` such that two states with
    /// equal words evolve identically (the second shifted in time). False:
    /// not supported, or not provably so now (then no skip is tried here).
    /// `events`: the network's queued events in queue order (their times are
    /// the executor's to encode); task tags are encoded relative to `task_base`.
    fn periodic_state(&mut self, _now_ps: TimePs, _task_base: u32, _events: &[&Self::Event], _out: &mut Vec<u64>) -> bool {
        false
    }

    /// Counters that grow over a run (statistics, numbering), for the skip
    /// to add `m` times their per-period growth.
    fn periodic_counters(&self, _out: &mut Vec<i64>) {}

    /// Skip `m` periods: add `m` x `delta` (a difference of two
    /// [`Network::periodic_counters`]), shift live absolute times by `dt_ps`
    /// and live task tags by `sh` (the queued `events` keep their payload;
    /// the executor moves their times). False (and nothing changed) where
    /// that cannot be done exactly.
    fn periodic_advance(&mut self, _now_ps: TimePs, _delta: &[i64], _m: u64, _dt_ps: u64, _sh: u32, _events: &[&Self::Event]) -> bool {
        false
    }
}

/// Alpha-beta network: every device has one injection port of
/// `bandwidth_bytes_per_s` (transfers from one source serialize) and a fixed
/// latency `alpha_ps`; no switch contention. A transfer of S bytes started at t
/// on an idle port completes at t + alpha + S / B. A collective over n ranks
/// of nccl-tests size S completes after `steps` x alpha + factor x S / B with
/// the nccl-tests busbw factor (2(n-1)/n all_reduce, (n-1)/n all_gather,
/// reduce_scatter, all_to_all, 1 broadcast/reduce) and ring step counts
/// (2(n-1) all_reduce, n-1 otherwise): the bandwidth-optimal ring bound.
/// `bandwidth_bytes_per_s = 0` means infinite bandwidth.
#[derive(Debug, Clone)]
pub struct AnalyticNetwork {
    devices: u32,
    alpha_ps: u64,
    bandwidth_bytes_per_s: u64,
    port_free_ps: Vec<TimePs>,
    /// Payload bytes moved by transfers (collectives count busbw bytes per rank).
    pub bytes_moved: u64,
}

impl AnalyticNetwork {
    pub fn new(devices: u32, alpha_ps: u64, bandwidth_bytes_per_s: u64) -> Self {
        Self { devices, alpha_ps, bandwidth_bytes_per_s, port_free_ps: vec![0; devices as usize], bytes_moved: 0 }
    }

    fn wire_ps(&self, bytes: f64) -> u64 {
        if self.bandwidth_bytes_per_s == 0 {
            0
        } else {
            crate::engine::ps_ceil(bytes * 1e12 / self.bandwidth_bytes_per_s as f64)
        }
    }
}

impl Network for AnalyticNetwork {
    type Event = ();

    fn devices(&self) -> u32 {
        self.devices
    }

    fn start_transfer(&mut self, now: TimePs, tag: u32, src: u32, _dst: u32, bytes: u64, _s: &mut dyn Scheduler<()>, done: &mut NetworkDone) -> Result<()> {
        let start = now.max(self.port_free_ps[src as usize]);
        // Saturating: a time past the engine's range reaches the queue as
        // u64::MAX and is refused there, never wrapped.
        let end = start.saturating_add(self.wire_ps(bytes as f64));
        self.port_free_ps[src as usize] = end;
        self.bytes_moved = self.bytes_moved.saturating_add(bytes);
        done.push((tag, end.saturating_add(self.alpha_ps)));
        Ok(())
    }

    fn start_collective(&mut self, now: TimePs, tag: u32, members: &[u32], kind: CollectiveKind, bytes: u64, _s: &mut dyn Scheduler<()>, done: &mut NetworkDone) -> Result<()> {
        let n = members.len() as u32;
        if n <= 1 {
            done.push((tag, now));
            return Ok(());
        }
        let start = members.iter().map(|&m| self.port_free_ps[m as usize]).max().unwrap_or(0).max(now);
        let steps = match kind {
            CollectiveKind::AllReduce => 2 * (n as u64 - 1),
            _ => n as u64 - 1,
        };
        let bus_bytes = kind.busbw_factor(n) * bytes as f64;
        let end = start.saturating_add(self.wire_ps(bus_bytes)).saturating_add(steps.saturating_mul(self.alpha_ps));
        for &m in members {
            self.port_free_ps[m as usize] = end;
        }
        self.bytes_moved = self.bytes_moved.saturating_add((bus_bytes.round() as u64).saturating_mul(n as u64));
        done.push((tag, end));
        Ok(())
    }

    fn handle(&mut self, _now: TimePs, _e: (), _s: &mut dyn Scheduler<()>, _d: &mut NetworkDone) -> Result<()> {
        Ok(())
    }

    fn periodic_state(&mut self, now: TimePs, _base: u32, _e: &[&()], out: &mut Vec<u64>) -> bool {
        // a port free before now is free now: only the time left matters
        out.extend(self.port_free_ps.iter().map(|&f| f.saturating_sub(now)));
        true
    }

    fn periodic_counters(&self, out: &mut Vec<i64>) {
        out.push(self.bytes_moved as i64);
    }

    fn periodic_advance(&mut self, now: TimePs, delta: &[i64], m: u64, dt_ps: u64, _sh: u32, _e: &[&()]) -> bool {
        let Some(add) = (delta[0] as u64).checked_mul(m).and_then(|a| a.checked_add(self.bytes_moved)) else { return false };
        self.bytes_moved = add;
        for f in &mut self.port_free_ps {
            if *f > now {
                *f += dt_ps;
            }
        }
        true
    }
}
