//! Stall diagnosis: whether a switch with packets inside has stopped moving
//! flits, and a readable account of which inputs, VCs and outputs are blocked
//! on what (credits, output-buffer space).

use super::alloc::NONE;
use super::Switch;
use crate::error::{FlitsimError, Result};

impl Switch {
    /// Stall check: `Stalled` if packets are inside and no flit has moved
    /// for the stall timeout (or nothing can ever happen again).
    ///
    /// # Errors
    /// `Stalled` describing the blocked inputs, VCs and outputs.
    pub fn check_stall(&self, cycle: u64, ps_per_cycle: f64) -> Result<()> {
        if self.packets_inside == 0 {
            return Ok(());
        }
        let idle = cycle.saturating_sub(self.last_progress);
        if idle < self.spec.stall_timeout_cycles && (self.next_event_cycle().is_some() || self.allocation_pending()) {
            return Ok(());
        }
        Err(FlitsimError::Stalled { time_ps: (cycle as f64 * ps_per_cycle) as u64, detail: self.describe_blocked(idle) })
    }

    /// Human-readable account of what is blocked.
    pub fn describe_blocked(&self, idle_cycles: u64) -> String {
        let mut parts = Vec::new();
        let mut shown = 0;
        for iv in 0..self.n * self.v {
            if self.in_occ[iv].flits == 0 {
                continue;
            }
            let (i, vc) = (iv / self.v, iv % self.v);
            let mut head = None;
            for k in 0..self.q_per_iv {
                let q = iv * self.q_per_iv + k;
                if self.qs[q].head != NONE {
                    head = Some(self.slots[self.qs[q].head as usize].pkt);
                    break;
                }
            }
            if let Some(p) = head {
                if shown < 8 {
                    let ov = p.dest as usize * self.v + vc;
                    let what = if self.outbuf {
                        format!("output buffer space {} flits, downstream credits {} flits", self.out_vc[ov].ob_space, self.out_vc[ov].credits)
                    } else {
                        format!("downstream credits {} flits", self.out_vc[ov].credits)
                    };
                    parts.push(format!(
                        "input {i} VC{vc} holds {} flits, head packet ({} flits) waits for output {} VC{vc} ({what}, needs {})",
                        self.in_occ[iv].flits, p.flits, p.dest, self.max_f
                    ));
                }
                shown += 1;
            }
        }
        if shown > 8 {
            parts.push(format!("... and {} more blocked input VCs", shown - 8));
        }
        format!(
            "{} packets inside the switch, no flit moved for {idle_cycles} cycles (credits not returning?): {}",
            self.packets_inside,
            parts.join("; ")
        )
    }
}
