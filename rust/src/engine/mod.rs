//! Deterministic discrete-event kernel.
//!
//! Time is `u64` picoseconds. Events are ordered by `(time_ps, insertion
//! sequence)`: two events at the same picosecond fire in the order they were
//! scheduled. This is the one place that ordering rule is defined. The queue is
//! generic over the event payload, owns no global state and is `Send` whenever
//! the payload is, so a simulation can run on a thread that released the GIL.

mod queue;
mod rng;

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
/// Events strictly after `until_ps` stay in the queue. The interrupt hook is
/// called every [`CHECK_EVERY_EVENTS`] events.
///
/// # Errors
/// Whatever the model or the interrupt hook returns.
pub fn run<M: Model>(
    model: &mut M,
    queue: &mut EventQueue<M::Event>,
    until_ps: TimePs,
    interrupt: &mut dyn Interrupt,
) -> Result<RunSummary> {
    let mut events = 0u64;
    let mut end_ps = queue.now_ps();
    while let Some(t) = queue.peek_time() {
        if t > until_ps {
            break;
        }
        let Scheduled { time_ps, event } = queue.pop().expect("peeked");
        model.handle(time_ps, event, queue)?;
        end_ps = time_ps;
        events += 1;
        if events % CHECK_EVERY_EVENTS == 0 {
            interrupt.check(time_ps)?;
        }
    }
    Ok(RunSummary { end_ps, events })
}

/// Error for a model that still has work but no events left to make progress.
pub fn stalled(time_ps: TimePs, detail: impl Into<String>) -> FlitsimError {
    FlitsimError::Stalled { time_ps, detail: detail.into() }
}
