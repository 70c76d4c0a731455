//! Deterministic discrete-event kernel.
//!
//! Time is `u64` picoseconds. Events are ordered by `(time_ps, insertion
//! sequence)`: two events at the same picosecond fire in the order they were
//! scheduled. This is the one place that ordering rule is defined. The queue is
//! generic over the event payload, owns no global state and is `Send` whenever
//! the payload is, so a simulation can run on a thread that released the GIL.

mod cancel;
mod fasthash;
mod queue;
mod rng;

pub use cancel::{cancel_all, CancelToken};
pub use fasthash::FastMap;
pub use queue::{EventQueue, Scheduled};
pub use rng::SimRng;

use crate::error::{FlitsimError, Result};

/// Something that accepts future events: the queue itself, or an adapter that
/// wraps a sub-model's events into its owner's event type (so a fabric and a
/// task graph can share one queue).
pub trait Scheduler<E> {
    /// Schedule `event` at absolute time `time_ps` (clamped to now).
    fn schedule(&mut self, time_ps: TimePs, event: E);
}

impl<E> Scheduler<E> for EventQueue<E> {
    #[inline]
    fn schedule(&mut self, time_ps: TimePs, event: E) {
        EventQueue::schedule(self, time_ps, event)
    }
}

/// Adapter: schedules `E` events into a queue of `F` through `wrap`.
pub struct Mapped<'a, F, W> {
    pub queue: &'a mut EventQueue<F>,
    pub wrap: W,
}

impl<E, F, W: Fn(E) -> F> Scheduler<E> for Mapped<'_, F, W> {
    #[inline]
    fn schedule(&mut self, time_ps: TimePs, event: E) {
        self.queue.schedule(time_ps, (self.wrap)(event))
    }
}

/// Picoseconds, the engine's unit of time.
pub type TimePs = u64;

/// Latest simulated time an event may have: 2^63 - 1 ps (about 106 days).
/// Chosen so that every time fits an `i64` (numpy `int64`, Parquet, pandas)
/// without going negative, and so that adding any one duration below 2^63 to
/// a valid time cannot wrap a `u64`. The queue refuses later events and
/// [`run`] turns that into [`time_range_error`].
pub const MAX_TIME_PS: TimePs = i64::MAX as u64;

/// Picoseconds from a float computation (sizes over rates, cycles times a
/// clock period): rounded up, with NaN and anything beyond `u64` mapped to
/// `u64::MAX`, which the queue then refuses (never a silent 0 or a wrap).
#[inline]
pub fn ps_ceil(x: f64) -> TimePs {
    if x.is_nan() {
        u64::MAX
    } else {
        ceil_f64(x) as u64 // `as` saturates: negative -> 0, huge -> u64::MAX
    }
}

/// `x.ceil()` without the libm call that x86-64's baseline target (no
/// SSE4.1 `roundsd`) makes of it on the hot paths: truncate and step up,
/// exact for |x| < 2^52 (every time and cycle count here); beyond, and for
/// NaN, `f64::ceil` itself. Equal to `x.ceil()` except that (-1, 0) gives
/// +0.0 instead of -0.0, which every caller clamps or casts to 0 anyway.
#[inline]
pub fn ceil_f64(x: f64) -> f64 {
    if x.abs() < 4_503_599_627_370_496.0 {
        let t = x as i64 as f64;
        if t < x {
            t + 1.0
        } else {
            t
        }
    } else {
        x.ceil()
    }
}

/// The error for simulated time beyond [`MAX_TIME_PS`].
pub fn time_range_error(time_ps: TimePs) -> FlitsimError {
    FlitsimError::config(
        "simulated time",
        format!("{time_ps} ps"),
        "at most 2^63-1 ps (about 106 days): an input duration, size, rate or clock period puts an event beyond it",
    )
}

/// How often (in events) a long run calls its interrupt check.
pub const CHECK_EVERY_EVENTS: u64 = 1 << 16;

/// A cooperative cancellation hook, called between chunks of events.
///
/// The Python bindings use it to look at pending signals (Ctrl-C); tests use it
/// to cancel after N checks. It must be cheap relative to `CHECK_EVERY_EVENTS`
/// events.
pub trait Interrupt {
    /// Return `Err` to stop the run.
    fn check(&mut self, now_ps: TimePs) -> Result<()>;
}

/// Never interrupts.
pub struct NoInterrupt;

impl Interrupt for NoInterrupt {
    #[inline]
    fn check(&mut self, _now_ps: TimePs) -> Result<()> {
        Ok(())
    }
}

impl<F: FnMut(TimePs) -> Result<()>> Interrupt for F {
    fn check(&mut self, now_ps: TimePs) -> Result<()> {
        self(now_ps)
    }
}

/// A model driven by the event loop.
pub trait Model {
    /// The model's event payload.
    type Event;
    /// Handle one event at `now_ps`; may schedule more on `queue`.
    fn handle(&mut self, now_ps: TimePs, event: Self::Event, queue: &mut EventQueue<Self::Event>) -> Result<()>;
}

/// Outcome of [`run`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunSummary {
    /// Time of the last event handled.
    pub end_ps: TimePs,
    /// Number of events handled.
    pub events: u64,
}

/// Run `model` until the queue is empty or `until_ps` is passed.
///
/// Events strictly after `until_ps` stay in the queue. Every
/// [`CHECK_EVERY_EVENTS`] events the run polls the process-wide cancel flag
/// ([`cancel_all`], set on Ctrl-C from any thread) and calls the interrupt hook.
///
/// # Errors
/// `Config` ([`time_range_error`]) when the model schedules an event beyond
/// [`MAX_TIME_PS`]; `Interrupted` after [`cancel_all`]; whatever the model or
/// the interrupt hook returns.
pub fn run<M: Model>(
    model: &mut M,
    queue: &mut EventQueue<M::Event>,
    until_ps: TimePs,
    interrupt: &mut dyn Interrupt,
) -> Result<RunSummary> {
    let cancel = CancelToken::new();
    let mut events = 0u64;
    let mut end_ps = queue.now_ps();
    if let Some(t) = queue.beyond_range_ps() {
        return Err(time_range_error(t));
    }
    while let Some(Scheduled { time_ps, event }) = queue.pop_until(until_ps) {
        model.handle(time_ps, event, queue)?;
        if let Some(t) = queue.beyond_range_ps() {
            return Err(time_range_error(t));
        }
        end_ps = time_ps;
        events += 1;
        if events % CHECK_EVERY_EVENTS == 0 {
            cancel.check(time_ps)?;
            interrupt.check(time_ps)?;
        }
    }
    Ok(RunSummary { end_ps, events })
}

/// Error for a model that still has work but no events left to make progress.
pub fn stalled(time_ps: TimePs, detail: impl Into<String>) -> FlitsimError {
    FlitsimError::Stalled { time_ps, detail: detail.into() }
}

#[cfg(test)]
mod ceil_tests {
    use super::ceil_f64;

    #[test]
    fn ceil_f64_equals_f64_ceil() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut vals = vec![0.0, 1.0, -1.0, 0.5, 1.5, 2.0 - f64::EPSILON, 4.5e15, 4.503_599_627_370_495e15, 1e300, f64::INFINITY, -2.5];
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            vals.push((x >> 11) as f64 / (1u64 << 20) as f64 - 1000.0);
        }
        for v in vals {
            let (a, b) = (ceil_f64(v), v.ceil());
            assert!(a == b, "{v}: {a} vs {b}");
        }
        assert!(ceil_f64(f64::NAN).is_nan());
    }
}
