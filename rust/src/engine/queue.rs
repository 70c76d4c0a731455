//! The event queue: an implicit 4-ary min-heap keyed by `(time_ps, seq)`.
//!
//! The key is packed into one `u128` (time in the high 64 bits, insertion
//! sequence in the low 64), so every comparison is a single integer compare and
//! ties at the same picosecond resolve first-in first-out. Keys live in their
//! own array, apart from the payloads: a node's four children's keys fill one
//! 64-byte cache line, and a 4-ary heap is half as deep as a binary one, which
//! matters once a million events are pending (LaMarca & Ladner 1996 on d-ary
//! heaps and caches). Payloads never move: they sit in a slab and the heap
//! carries a 4-byte slot index beside each key. Storage is reused: after
//! warm-up the loop does not allocate.

use super::TimePs;

/// An event popped from the queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scheduled<E> {
    pub time_ps: TimePs,
    pub event: E,
}

const D: usize = 4;

/// Pending events ordered by `(time_ps, insertion sequence)`.
pub struct EventQueue<E> {
    keys: Vec<u128>,
    slots: Vec<u32>,
    slab: Vec<Option<E>>,
    free: Vec<u32>,
    seq: u64,
    now_ps: TimePs,
    /// First event time asked for beyond [`super::MAX_TIME_PS`] (0 = none);
    /// such an event is not queued and [`super::run`] reports it.
    beyond_ps: TimePs,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E> EventQueue<E> {
    /// An empty queue at time 0.
    pub fn new() -> Self {
        Self::with_capacity(0)
    }

    /// An empty queue with room for `n` pending events.
    pub fn with_capacity(n: usize) -> Self {
        Self { keys: Vec::with_capacity(n), slots: Vec::with_capacity(n), slab: Vec::with_capacity(n), free: Vec::new(), seq: 0, now_ps: 0, beyond_ps: 0 }
    }

    /// Time of the last popped event (0 before the first pop).
    #[inline]
    pub fn now_ps(&self) -> TimePs {
        self.now_ps
    }

    /// Number of pending events.
    #[inline]
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// True when nothing is pending.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Schedule `event` at absolute time `time_ps`.
    ///
    /// Times before `now_ps` are clamped to `now_ps`: the past cannot be
    /// changed, and clamping keeps the queue monotone. A time beyond
    /// [`super::MAX_TIME_PS`] is not queued but remembered, and [`super::run`]
    /// stops with a `Config` error naming it (see [`Self::beyond_range_ps`]):
    /// simulated time never wraps or saturates silently.
    #[inline]
    pub fn schedule(&mut self, time_ps: TimePs, event: E) {
        let t = time_ps.max(self.now_ps);
        if t > super::MAX_TIME_PS {
            if self.beyond_ps == 0 {
                self.beyond_ps = t;
            }
            return;
        }
        let key = ((t as u128) << 64) | self.seq as u128;
        self.seq += 1;
        let slot = match self.free.pop() {
            Some(s) => {
                self.slab[s as usize] = Some(event);
                s
            }
            None => {
                self.slab.push(Some(event));
                (self.slab.len() - 1) as u32
            }
        };
        self.keys.push(key);
        self.slots.push(slot);
        self.sift_up(self.keys.len() - 1);
    }

    /// Schedule `event` `delay_ps` after now.
    #[inline]
    pub fn schedule_in(&mut self, delay_ps: TimePs, event: E) {
        self.schedule(self.now_ps.saturating_add(delay_ps), event);
    }

    /// The first event time requested beyond [`super::MAX_TIME_PS`], if any.
    #[inline]
    pub fn beyond_range_ps(&self) -> Option<TimePs> {
        (self.beyond_ps != 0).then_some(self.beyond_ps)
    }

    /// Time of the earliest pending event.
    #[inline]
    pub fn peek_time(&self) -> Option<TimePs> {
        self.keys.first().map(|&k| (k >> 64) as TimePs)
    }

    /// Remove and return the earliest event, advancing `now_ps` to its time.
    #[inline]
    pub fn pop(&mut self) -> Option<Scheduled<E>> {
        let n = self.keys.len();
        if n == 0 {
            return None;
        }
        let key = self.keys.swap_remove(0);
        let slot = self.slots.swap_remove(0);
        if n > 1 {
            self.sift_down(0);
        }
        let event = self.slab[slot as usize].take().expect("live slot");
        self.free.push(slot);
        let t = (key >> 64) as TimePs;
        self.now_ps = t;
        Some(Scheduled { time_ps: t, event })
    }

    /// Drop every pending event (time and sequence counters are kept).
    pub fn clear(&mut self) {
        self.keys.clear();
        self.slots.clear();
        self.slab.clear();
        self.free.clear();
    }

    #[inline]
    fn sift_up(&mut self, mut i: usize) {
        // Hole technique: move parents down, write the new entry once.
        let key = self.keys[i];
        let slot = self.slots[i];
        while i > 0 {
            let p = (i - 1) / D;
            if self.keys[p] <= key {
                break;
            }
            self.keys[i] = self.keys[p];
            self.slots[i] = self.slots[p];
            i = p;
        }
        self.keys[i] = key;
        self.slots[i] = slot;
    }

    #[inline]
    fn sift_down(&mut self, mut i: usize) {
        let n = self.keys.len();
        let key = self.keys[i];
        let slot = self.slots[i];
        loop {
            let first = D * i + 1;
            if first >= n {
                break;
            }
            let last = (first + D).min(n);
            let mut best = first;
            let mut best_key = self.keys[first];
            for c in first + 1..last {
                let k = self.keys[c];
                if k < best_key {
                    best = c;
                    best_key = k;
                }
            }
            if best_key >= key {
                break;
            }
            self.keys[i] = best_key;
            self.slots[i] = self.slots[best];
            i = best;
        }
        self.keys[i] = key;
        self.slots[i] = slot;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ties_pop_in_insertion_order() {
        let mut q = EventQueue::new();
        q.schedule(10, 'a');
        q.schedule(5, 'b');
        q.schedule(10, 'c');
        q.schedule(5, 'd');
        let order: Vec<char> = std::iter::from_fn(|| q.pop().map(|s| s.event)).collect();
        assert_eq!(order, vec!['b', 'd', 'a', 'c']);
    }

    #[test]
    fn past_is_clamped_to_now() {
        let mut q = EventQueue::new();
        q.schedule(100, 1);
        q.pop();
        q.schedule(3, 2);
        assert_eq!(q.pop().unwrap().time_ps, 100);
    }

    #[test]
    fn pops_sorted_against_a_reference_sort() {
        // Reference: a stable sort by time of the same (time, id) stream.
        let mut rng = crate::engine::SimRng::new(9);
        let mut q = EventQueue::new();
        let mut reference = Vec::new();
        for id in 0..5000u32 {
            let t = rng.below(500);
            q.schedule(t, id);
            reference.push((t, id));
        }
        reference.sort_by_key(|&(t, _)| t);
        let got: Vec<(u64, u32)> = std::iter::from_fn(|| q.pop().map(|s| (s.time_ps, s.event))).collect();
        assert_eq!(got, reference);
    }

    #[test]
    fn times_beyond_the_range_are_refused_not_wrapped() {
        let mut q = EventQueue::new();
        q.schedule(super::super::MAX_TIME_PS, 1);
        assert_eq!(q.beyond_range_ps(), None);
        q.schedule(u64::MAX, 2);
        q.schedule(super::super::MAX_TIME_PS + 1, 3);
        assert_eq!(q.beyond_range_ps(), Some(u64::MAX));
        assert_eq!(q.len(), 1);
    }

    #[test]
    fn engine_is_send() {
        fn is_send<T: Send>() {}
        is_send::<EventQueue<(u32, u64)>>();
        is_send::<super::super::SimRng>();
    }
}
