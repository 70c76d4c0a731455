//! The engine's guards (issue 13): simulated time beyond 2^63-1 ps is a
//! `Config` error (never a wrap), and `cancel_all` from another thread stops a
//! run that would never end. Own test binary: `cancel_all` is process-wide.

use flitsim::engine::{self, cancel_all, EventQueue, Model, NoInterrupt, TimePs, MAX_TIME_PS};
use flitsim::FlitsimError;

/// Reschedules itself `step_ps` later, forever.
struct Ticker {
    step_ps: u64,
}

impl Model for Ticker {
    type Event = ();
    fn handle(&mut self, now: TimePs, _e: (), q: &mut EventQueue<()>) -> flitsim::Result<()> {
        q.schedule(now.saturating_add(self.step_ps), ());
        Ok(())
    }
}

#[test]
fn time_beyond_the_range_stops_the_run_with_a_config_error() {
    // 2^62 ps steps: the second event is at 2^63 > 2^63 - 1.
    let mut q = EventQueue::new();
    q.schedule(0, ());
    let err = engine::run(&mut Ticker { step_ps: 1 << 62 }, &mut q, u64::MAX, &mut NoInterrupt).unwrap_err();
    match err {
        FlitsimError::Config { field, value, .. } => {
            assert_eq!(field, "simulated time");
            assert_eq!(value, format!("{} ps", 1u64 << 63));
        }
        e => panic!("expected Config, got {e:?}"),
    }
    assert!(q.now_ps() <= MAX_TIME_PS);
}

#[test]
fn cancel_all_stops_a_run_on_another_thread() {
    let h = std::thread::spawn(|| {
        let mut q = EventQueue::new();
        q.schedule(0, ());
        engine::run(&mut Ticker { step_ps: 1 }, &mut q, u64::MAX, &mut NoInterrupt)
    });
    std::thread::sleep(std::time::Duration::from_millis(50));
    cancel_all();
    let r = h.join().expect("no panic");
    assert!(matches!(r, Err(FlitsimError::Interrupted { .. })), "{r:?}");
    // A run started after the cancel is not affected.
    let mut q = EventQueue::new();
    q.schedule(0, ());
    let s = engine::run(&mut Ticker { step_ps: 1 }, &mut q, 1000, &mut NoInterrupt).unwrap();
    assert_eq!(s.events, 1001);
}
