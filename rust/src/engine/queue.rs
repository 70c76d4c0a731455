//! The event queue: a radix heap (Ahuja, Mehlhorn, Orlin & Tarjan 1990,
//! "Faster algorithms for the shortest path problem", J. ACM 37(2)) keyed by
//! `time_ps`, with first-in first-out order among equal times.
//!
//! Simulated time is monotone (nothing is scheduled before the last popped
//! event), which is what a radix heap needs. Bucket `b` holds the events whose
//! time differs from the reference time `last` first in bit `b - 1` (bucket 0:
//! time == `last`). Popping from an empty bucket 0 finds the lowest non-empty
//! bucket, takes its minimum time as the new `last` and moves its events, in
//! order, into lower buckets; each event moves at most 64 times, in practice a
//! few, and every move is a sequential copy (no pointer chasing through a
//! heap of a million entries, which was 40 % of a 72-GPU fabric run).
//!
//! Ties: events of one time always sit in the same bucket (the bucket depends
//! only on the time and `last`, and `last` changes only in bits below the
//! bucket being split), appended in scheduling order and moved in order, so
//! they pop first-in first-out: the same order as a heap keyed by
//! `(time, insertion sequence)`, event for event. Storage is reused: after
//! warm-up the loop does not allocate.

use super::TimePs;

/// An event popped from the queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scheduled<E> {
    pub time_ps: TimePs,
    pub event: E,
}

/// Buckets: 0 (time == last) and one per differing top bit, 1..=64.
const BUCKETS: usize = 65;

/// Pending events ordered by `(time_ps, insertion sequence)`.
pub struct EventQueue<E> {
    /// Events at exactly `last`, in scheduling order: `now[head..]` are
    /// pending (a vector read from `head`, cleared when drained: cheaper
    /// than a ring buffer's wrap arithmetic on every push and pop).
    now: Vec<(TimePs, E)>,
    head: usize,
    /// Buckets 1..=64 (index 0 unused).
    buckets: Vec<Vec<(TimePs, E)>>,
    /// Bit `b` set iff bucket `b` (>= 1) is non-empty.
    nonempty: u128,
    /// Earliest time in each bucket (kept on push, so a split scans once).
    mins: [TimePs; BUCKETS],
    /// Reference time of the buckets: the last popped (or peeked) minimum.
    last: TimePs,
    len: usize,
    now_ps: TimePs,
    /// First event time asked for beyond [`super::MAX_TIME_PS`] (0 = none);
    /// such an event is not queued and [`super::run`] reports it.
    beyond_ps: TimePs,
}

impl<E> Drop for EventQueue<E> {
    fn drop(&mut self) {
        self.now_clear();
    }
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

/// `v.push((t, e))`, moving a 16-byte event as four 32-bit words. A plain
/// push copies the event out of the stack slot it was assembled in with one
/// 16-byte load, which store forwarding cannot serve from the narrower
/// stores that built it: a stall of some 15 cycles on every schedule (perf:
/// ~40 % of the fabric's scheduling sites on the NVL72 ring). Events whose
/// fields are all 32 or 64 bits with a 32-bit tag (`FEv`, and `CEv` around
/// it) are built by stores of at least 32 bits, so each 32-bit load here is
/// served by one of them; the loads are volatile so they are not merged
/// back into one wide load. Other sizes push normally. Same bytes, same
/// order: only how they are moved differs.
#[inline(always)]
fn push_words<E>(v: &mut Vec<(TimePs, E)>, t: TimePs, e: E) {
    use std::mem::{align_of, size_of, MaybeUninit};
    if size_of::<E>() == 16 && align_of::<E>() >= 4 {
        let p = &e as *const E as *const MaybeUninit<u32>;
        // SAFETY: E is 16 bytes, at least 4-aligned: four aligned words;
        // MaybeUninit carries padding bytes as they are. `e` is forgotten,
        // not dropped: its bytes are moved into the vector below.
        let w = unsafe { [p.read_volatile(), p.add(1).read_volatile(), p.add(2).read_volatile(), p.add(3).read_volatile()] };
        std::mem::forget(e);
        if v.len() == v.capacity() {
            v.reserve(1);
        }
        // SAFETY: len < capacity; the slot's `.1` is E-aligned (>= 4) and 16
        // bytes, written whole with E's own bytes before `set_len`.
        unsafe {
            let dst = v.as_mut_ptr().add(v.len());
            std::ptr::addr_of_mut!((*dst).0).write(t);
            let q = std::ptr::addr_of_mut!((*dst).1) as *mut MaybeUninit<u32>;
            for (k, x) in w.into_iter().enumerate() {
                q.add(k).write(x);
            }
            v.set_len(v.len() + 1);
        }
    } else {
        v.push((t, e));
    }
}

#[inline]
fn bucket_of(t: TimePs, last: TimePs) -> usize {
    (64 - (t ^ last).leading_zeros()) as usize
}

impl<E> EventQueue<E> {
    /// An empty queue at time 0.
    pub fn new() -> Self {
        Self::with_capacity(0)
    }

    /// An empty queue with room for `n` pending events at the current time.
    pub fn with_capacity(n: usize) -> Self {
        Self { now: Vec::with_capacity(n), head: 0, buckets: (0..BUCKETS).map(|_| Vec::new()).collect(), nonempty: 0, mins: [TimePs::MAX; BUCKETS], last: 0, len: 0, now_ps: 0, beyond_ps: 0 }
    }

    /// Time of the last popped event (0 before the first pop).
    #[inline]
    pub fn now_ps(&self) -> TimePs {
        self.now_ps
    }

    /// Number of pending events.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when nothing is pending.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Schedule `event` at absolute time `time_ps`.
    ///
    /// Times before `now_ps` are clamped to `now_ps`: the past cannot be
    /// changed, and clamping keeps the queue monotone. A time beyond
    /// [`super::MAX_TIME_PS`] is not queued but remembered, and [`super::run`]
    /// stops with a `Config` error naming it (see [`Self::beyond_range_ps`]):
    /// simulated time never wraps or saturates silently.
    #[inline(always)]
    pub fn schedule(&mut self, time_ps: TimePs, event: E) {
        let t = time_ps.max(self.now_ps);
        if t > super::MAX_TIME_PS || t < self.last {
            return self.schedule_rare(t, event);
        }
        self.push(t, event);
    }

    /// The common push: `last <= t <= MAX_TIME_PS`.
    #[inline(always)]
    fn push(&mut self, t: TimePs, event: E) {
        self.len += 1;
        if t == self.last {
            push_words(&mut self.now, t, event);
        } else {
            let b = bucket_of(t, self.last);
            // b is in 1..=64 (t != last) and buckets has 65 entries
            let v = &mut self.buckets[b];
            push_words(v, t, event);
            self.nonempty |= 1u128 << b;
            let m = &mut self.mins[b];
            *m = (*m).min(t);
        }
    }

    /// [`Self::schedule`] beyond the range (refused, remembered) or before
    /// `last` (only after a peek moved `last` past now and before a pop).
    #[cold]
    #[inline(never)]
    fn schedule_rare(&mut self, t: TimePs, event: E) {
        if t > super::MAX_TIME_PS {
            if self.beyond_ps == 0 {
                self.beyond_ps = t;
            }
            return;
        }
        self.rebase(t);
        self.push(t, event);
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

    /// Time of the earliest pending event (brings it to the front; the queue's
    /// order and contents are unchanged).
    #[inline]
    pub fn peek_time(&mut self) -> Option<TimePs> {
        if self.head == self.now.len() && !self.refill() {
            return None;
        }
        Some(self.last)
    }

    /// Remove and return the earliest event, advancing `now_ps` to its time.
    #[inline]
    pub fn pop(&mut self) -> Option<Scheduled<E>> {
        if self.head == self.now.len() && !self.refill() {
            return None;
        }
        let (t, event) = self.take_front();
        self.len -= 1;
        self.now_ps = t;
        Some(Scheduled { time_ps: t, event })
    }

    /// The next event at `last` (the caller checked `head < now.len()`).
    /// Moved out by a bitwise read: the slot is dead from here on (`head`
    /// passed it); [`Self::now_clear`] (the only way `now` is emptied, also
    /// on drop) forgets such slots instead of dropping them twice.
    #[inline(always)]
    fn take_front(&mut self) -> (TimePs, E) {
        let i = self.head;
        self.head = i + 1;
        debug_assert!(i < self.now.len());
        // SAFETY: i < now.len() (checked by every caller); slot i is never
        // read again: `head` moved past it and `now_clear` forgets slots
        // before `head` without dropping them.
        unsafe { std::ptr::read(self.now.as_ptr().add(i)) }
    }

    /// Empty `now`: drop the pending events `now[head..]`, forget the
    /// slots before `head` (moved out by [`Self::take_front`]).
    fn now_clear(&mut self) {
        let h = self.head.min(self.now.len());
        let pending = self.now.len() - h;
        // SAFETY: slots 0..h were moved out (never dropped again); slots
        // h..len are live and dropped exactly once here; len is 0 after.
        unsafe {
            let p = self.now.as_mut_ptr().add(h);
            self.now.set_len(0);
            std::ptr::drop_in_place(std::ptr::slice_from_raw_parts_mut(p, pending));
        }
        self.head = 0;
    }

    /// [`Self::pop`] if the earliest event is at or before `until_ps`
    /// (else None, the queue unchanged but for a peek).
    #[inline(always)]
    pub fn pop_until(&mut self, until_ps: TimePs) -> Option<Scheduled<E>> {
        if self.head == self.now.len() && !self.refill() {
            return None;
        }
        if self.last > until_ps {
            return None;
        }
        let (t, event) = self.take_front();
        self.len -= 1;
        self.now_ps = t;
        Some(Scheduled { time_ps: t, event })
    }

    /// Bucket 0 is empty: split the lowest non-empty bucket around its
    /// minimum. False if nothing is pending.
    #[inline(never)]
    fn refill(&mut self) -> bool {
        if self.nonempty == 0 {
            return false;
        }
        self.now_clear();
        let b = self.nonempty.trailing_zeros() as usize;
        let mut from = std::mem::take(&mut self.buckets[b]);
        self.nonempty &= !(1u128 << b);
        let min = self.mins[b];
        self.mins[b] = TimePs::MAX;
        debug_assert_eq!(Some(min), from.iter().map(|e| e.0).min());
        self.last = min;
        for (t, e) in from.drain(..) {
            if t == min {
                self.now.push((t, e));
            } else {
                let k = bucket_of(t, min);
                debug_assert!(k < b);
                self.buckets[k].push((t, e));
                self.nonempty |= 1u128 << k;
                self.mins[k] = self.mins[k].min(t);
            }
        }
        self.buckets[b] = from;
        true
    }

    /// Re-bucket everything around an earlier reference time `t` (rare: a
    /// schedule between a peek and the next pop, earlier than the peeked
    /// minimum). Events of one time stay in one bucket, in order.
    #[cold]
    fn rebase(&mut self, t: TimePs) {
        let mut all: Vec<(TimePs, E)> = self.now.drain(self.head..).collect();
        self.now_clear();
        for b in 1..BUCKETS {
            all.append(&mut self.buckets[b]);
        }
        self.nonempty = 0;
        self.mins = [TimePs::MAX; BUCKETS];
        self.last = t;
        for (x, e) in all {
            if x == t {
                self.now.push((x, e));
            } else {
                let k = bucket_of(x, t);
                self.buckets[k].push((x, e));
                self.nonempty |= 1u128 << k;
                self.mins[k] = self.mins[k].min(x);
            }
        }
    }

    /// Remove every pending event, returned in pop order (time, then
    /// scheduling order); the clock is kept, so scheduling them again in
    /// this order restores the queue (the task-graph executor's periodic
    /// skip reads and shifts the queue this way).
    pub fn take_all(&mut self) -> Vec<(TimePs, E)> {
        let mut all: Vec<(TimePs, E)> = self.now.drain(self.head..).collect();
        self.now_clear();
        for b in 1..BUCKETS {
            all.append(&mut self.buckets[b]);
        }
        // one time lives in one bucket, in scheduling order: a stable sort keeps ties FIFO
        all.sort_by_key(|e| e.0);
        self.clear();
        all
    }

    /// Drop every pending event (time is kept).
    pub fn clear(&mut self) {
        self.now_clear();
        for b in &mut self.buckets {
            b.clear();
        }
        self.nonempty = 0;
        self.mins = [TimePs::MAX; BUCKETS];
        self.last = self.now_ps;
        self.len = 0;
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
    fn take_all_returns_pop_order_and_rescheduling_restores_it() {
        let mut q = EventQueue::new();
        for (t, e) in [(10, 'a'), (5, 'b'), (10, 'c'), (5, 'd'), (7, 'e')] {
            q.schedule(t, e);
        }
        q.pop(); // 'b' at 5
        let all = q.take_all();
        assert_eq!(all, vec![(5, 'd'), (7, 'e'), (10, 'a'), (10, 'c')]);
        assert!(q.is_empty());
        for (t, e) in all {
            q.schedule(t, e);
        }
        let order: Vec<char> = std::iter::from_fn(|| q.pop().map(|s| s.event)).collect();
        assert_eq!(order, vec!['d', 'e', 'a', 'c']);
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

    /// Interleaved pops and pushes (the hold model, with many ties and wide
    /// time ranges) against a reference ordered by (time, insertion sequence).
    #[test]
    fn interleaved_against_a_reference_heap() {
        use std::cmp::Reverse;
        use std::collections::BinaryHeap;
        let mut rng = crate::engine::SimRng::new(3);
        let mut q = EventQueue::new();
        let mut r: BinaryHeap<Reverse<(u64, u64)>> = BinaryHeap::new();
        let mut seq = 0u64;
        for _ in 0..300 {
            let t = rng.below(1000);
            q.schedule(t, seq);
            r.push(Reverse((t, seq)));
            seq += 1;
        }
        for step in 0..50_000u64 {
            let a = q.pop().unwrap();
            let Reverse((t, s)) = r.pop().unwrap();
            assert_eq!((a.time_ps, a.event), (t, s), "step {step}");
            for _ in 0..(step % 3) {
                let dt = match rng.below(4) {
                    0 => 0,
                    1 => rng.below(8),
                    2 => rng.below(1 << 20),
                    _ => rng.below(1 << 40),
                };
                q.schedule(t + dt, seq);
                r.push(Reverse((t + dt, seq)));
                seq += 1;
            }
            if step % 7 == 0 {
                // A peek, then a schedule earlier than the peeked minimum.
                if let Some(p) = q.peek_time() {
                    assert_eq!(Some(p), r.peek().map(|x| x.0 .0));
                    if p > t {
                        let e = t + (p - t) / 2;
                        q.schedule(e, seq);
                        r.push(Reverse((e, seq)));
                        seq += 1;
                    }
                }
            }
            assert_eq!(q.len(), r.len());
            if r.is_empty() {
                break;
            }
        }
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

    /// Events that own memory are dropped exactly once whichever way they
    /// leave (popped, taken, cleared, rebased, dropped with the queue),
    /// including 16-byte ones moved as words: the vector read from `head`
    /// and the word copies neither leak nor drop twice.
    #[test]
    fn owned_events_are_dropped_exactly_once() {
        use std::rc::Rc;
        let token = Rc::new(());
        // Rc is 8 bytes; (Rc, u64) is 16 bytes and 8-aligned: the word path.
        let mk = |k: u64| (token.clone(), k);
        {
            let mut q = EventQueue::new();
            for k in 0..50u64 {
                q.schedule(k % 7, mk(k));
            }
            for _ in 0..15 {
                q.pop(); // the 8 events at 0 and the 7 at 1
            }
            assert_eq!((q.now_ps(), q.peek_time()), (1, Some(2)));
            q.schedule(1, mk(99)); // before the peeked minimum: a rebase
            q.schedule(0, mk(100)); // clamped to now
            assert_eq!(q.peek_time(), Some(1));
            let all = q.take_all();
            assert_eq!(Rc::strong_count(&token), 1 + all.len());
            for (t, e) in all {
                q.schedule(t, e);
            }
            q.pop();
            q.clear();
            assert_eq!(Rc::strong_count(&token), 1);
            for k in 0..20u64 {
                q.schedule(1000 + k, mk(k));
            }
            q.pop();
            assert_eq!(Rc::strong_count(&token), 1 + q.len());
        }
        assert_eq!(Rc::strong_count(&token), 1, "queue drop");
    }

    #[test]
    fn engine_is_send() {
        fn is_send<T: Send>() {}
        is_send::<EventQueue<(u32, u64)>>();
        is_send::<super::super::SimRng>();
    }
}
