//! The switch's event queue: a timing wheel for near events (every delay the
//! switch schedules for itself lies within its horizon) backed by a min-heap
//! for far ones. Events are keyed by slot (cycle x speedup + round); ties at
//! one slot resolve by kind, then index, so runs are deterministic. The wheel's
//! storage lives in [`Switch`]'s fields, next to the data path that uses it.

use super::{bits, Switch};
use std::cmp::Reverse;

// Event kinds in the heap payload (top 4 bits).
pub(super) const EV_CONN_END: u8 = 0;
pub(super) const EV_LINK_FREE: u8 = 1;
pub(super) const EV_READY: u8 = 2;
pub(super) const EV_CREDIT: u8 = 3;

/// Heap entry: (slot, kind, index, value); ties at one slot resolve by kind,
/// then index, so runs are deterministic.
pub(super) type Ev = Reverse<(u64, u8, u32, u32)>;

#[inline]
fn ev(slot: u64, kind: u8, a: u32, b: u32) -> Ev {
    Reverse((slot, kind, a, b))
}

/// Entries of a bucket kept in the flat array (two cache lines); more go to
/// the bucket's spill vector, after them in order.
pub(super) const BUCKET: usize = 16;

/// A wheel entry as one word: kind (2 bits) << 62 | index (< 2^30) << 32 |
/// value. Pushed with one 8-byte store and read back with one 8-byte load
/// (a tuple of a byte and two words took three stores, and its read waited
/// on them). Every index fits: a queue index is below ports x VCs x ports
/// <= 4096 x 64 x 4096 = 2^30, a credit's (output << 8 | VC) below 2^20.
#[inline(always)]
pub(super) fn pack(kind: u8, a: u32, b: u32) -> u64 {
    debug_assert!(kind < 4 && a < 1 << 30);
    (kind as u64) << 62 | (a as u64) << 32 | b as u64
}

/// The (kind, index, value) of a wheel entry.
#[inline(always)]
pub(super) fn unpack(e: u64) -> (u8, u32, u32) {
    ((e >> 62) as u8, (e >> 32) as u32 & ((1 << 30) - 1), e as u32)
}

impl Switch {
    /// The cycle of a slot (no division without speedup).
    #[inline]
    pub(super) fn cycle_of(&self, slot: u64) -> u64 {
        if self.s == 1 {
            slot
        } else {
            slot / self.s
        }
    }

    /// Schedule an event at `slot` (>= the current cycle's first slot).
    #[inline(always)]
    pub(super) fn push_ev(&mut self, slot: u64, kind: u8, a: u32, b: u32) {
        let base = self.now_cycle * self.s;
        if slot >= base && slot - base <= self.wheel_mask {
            let k = (slot & self.wheel_mask) as usize;
            let len = self.wheel_len[k] as usize;
            if len == 0 {
                bits::set(&mut self.wheel_bits, k);
                self.wheel_slot[k] = slot;
            }
            debug_assert_eq!(self.wheel_slot[k], slot);
            if len < BUCKET {
                self.wheel_ev[k * BUCKET + len] = pack(kind, a, b);
            } else {
                self.wheel_spill[k].push(pack(kind, a, b));
            }
            self.wheel_len[k] = len as u32 + 1;
            self.wheel_events += 1;
        } else {
            self.heap.push(ev(slot, kind, a, b));
        }
    }

    /// Earliest slot in the wheel.
    #[inline]
    pub(super) fn wheel_next(&self) -> Option<u64> {
        if self.wheel_events == 0 {
            return None;
        }
        let start = ((self.now_cycle * self.s) & self.wheel_mask) as usize;
        bits::next_cyclic(&self.wheel_bits, start, self.wheel_len.len()).map(|k| self.wheel_slot[k])
    }

    /// Earliest cycle at which [`Self::step`] has work, if any.
    #[inline]
    pub fn next_event_cycle(&self) -> Option<u64> {
        let mut t = self.retry_slot.unwrap_or(u64::MAX);
        if let Some(Reverse((slot, ..))) = self.heap.peek() {
            t = t.min(*slot);
        }
        if let Some(slot) = self.wheel_next() {
            t = t.min(slot);
        }
        if t == u64::MAX {
            None
        } else {
            Some(self.cycle_of(t))
        }
    }
}
