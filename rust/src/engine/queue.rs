//! The event queue: a binary min-heap keyed by `(time_ps, seq)`.
//!
//! The key is packed into one `u128` (time in the high 64 bits, insertion
//! sequence in the low 64), so every comparison is a single integer compare and
//! ties at the same picosecond resolve first-in first-out. Pushing and popping
//! reuse the heap's storage: after warm-up the loop does not allocate.

use super::TimePs;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

struct Entry<E> {
    key: u128,
    event: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<E> Ord for Entry<E> {
    // Reversed: BinaryHeap is a max-heap and we want the earliest key on top.
    fn cmp(&self, other: &Self) -> Ordering {
        other.key.cmp(&self.key)
    }
}

/// An event popped from the queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scheduled<E> {
    pub time_ps: TimePs,
    pub event: E,
}

/// Pending events ordered by `(time_ps, insertion sequence)`.
pub struct EventQueue<E> {
    heap: BinaryHeap<Entry<E>>,
    seq: u64,
    now_ps: TimePs,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E> EventQueue<E> {
    /// An empty queue at time 0.
    pub fn new() -> Self {
        Self { heap: BinaryHeap::new(), seq: 0, now_ps: 0 }
    }

    /// An empty queue with room for `n` pending events.
    pub fn with_capacity(n: usize) -> Self {
        Self { heap: BinaryHeap::with_capacity(n), seq: 0, now_ps: 0 }
    }

    /// Time of the last popped event (0 before the first pop).
    #[inline]
    pub fn now_ps(&self) -> TimePs {
        self.now_ps
    }

    /// Number of pending events.
    #[inline]
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// True when nothing is pending.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Schedule `event` at absolute time `time_ps`.
    ///
    /// Times before `now_ps` are clamped to `now_ps`: the past cannot be
    /// changed, and clamping keeps the queue monotone.
    #[inline]
    pub fn schedule(&mut self, time_ps: TimePs, event: E) {
        let t = time_ps.max(self.now_ps);
        let key = ((t as u128) << 64) | self.seq as u128;
        self.seq += 1;
        self.heap.push(Entry { key, event });
    }

    /// Schedule `event` `delay_ps` after now.
    #[inline]
    pub fn schedule_in(&mut self, delay_ps: TimePs, event: E) {
        self.schedule(self.now_ps.saturating_add(delay_ps), event);
    }

    /// Time of the earliest pending event.
    #[inline]
    pub fn peek_time(&self) -> Option<TimePs> {
        self.heap.peek().map(|e| (e.key >> 64) as TimePs)
    }

    /// Remove and return the earliest event, advancing `now_ps` to its time.
    #[inline]
    pub fn pop(&mut self) -> Option<Scheduled<E>> {
        self.heap.pop().map(|e| {
            let t = (e.key >> 64) as TimePs;
            self.now_ps = t;
            Scheduled { time_ps: t, event: e.event }
        })
    }

    /// Drop every pending event (time and sequence counters are kept).
    pub fn clear(&mut self) {
        self.heap.clear();
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
    fn engine_is_send() {
        fn is_send<T: Send>() {}
        is_send::<EventQueue<(u32, u64)>>();
        is_send::<super::super::SimRng>();
    }
}
