//! Engine integration tests: ordering rule, determinism, hold-model invariants.

use flitsim::engine::{run, EventQueue, Model, NoInterrupt, SimRng, TimePs};
use flitsim::FlitsimError;

/// Hold model: each event re-schedules itself at now + Exp(mean) until `left` runs out.
struct Hold {
    rng: SimRng,
    left: u64,
    trace: Vec<(TimePs, u32)>,
}

impl Model for Hold {
    type Event = u32;
    fn handle(&mut self, now: TimePs, ev: u32, q: &mut EventQueue<u32>) -> flitsim::Result<()> {
        self.trace.push((now, ev));
        if self.left > 0 {
            self.left -= 1;
            q.schedule(now + self.rng.exponential(1000.0) as u64, ev);
        }
        Ok(())
    }
}

fn hold_run(seed: u64) -> Vec<(TimePs, u32)> {
    let mut m = Hold { rng: SimRng::new(seed), left: 50_000, trace: Vec::new() };
    let mut q = EventQueue::new();
    for i in 0..100 {
        q.schedule(0, i);
    }
    run(&mut m, &mut q, u64::MAX, &mut NoInterrupt).unwrap();
    m.trace
}

#[test]
fn time_never_goes_backwards_and_ties_are_fifo() {
    let t = hold_run(3);
    assert_eq!(t.len(), 50_100);
    assert!(t.windows(2).all(|w| w[0].0 <= w[1].0));
    // The 100 initial events at t = 0 fire in insertion order.
    let first: Vec<u32> = t.iter().take(100).map(|x| x.1).collect();
    assert_eq!(first, (0..100).collect::<Vec<_>>());
}

#[test]
fn same_seed_is_bit_identical_and_different_seed_differs() {
    assert_eq!(hold_run(11), hold_run(11));
    assert_ne!(hold_run(11), hold_run(12));
}

#[test]
fn mean_hold_time_matches_exponential_mean() {
    // Little's law on the hold model: 100 tokens each holding Exp(1000 ps) (floored
    // to integer ps, so mean 999.5) -> event rate 100 / 999.5 per ps.
    let t = hold_run(5);
    let end = t.last().unwrap().0 as f64;
    let rate = t.len() as f64 / end;
    let expect = 100.0 / 999.5;
    assert!((rate / expect - 1.0).abs() < 0.02, "rate {rate} expect {expect}");
}

#[test]
fn interrupt_hook_stops_the_run() {
    let mut m = Hold { rng: SimRng::new(1), left: u64::MAX, trace: Vec::new() };
    let mut q = EventQueue::new();
    q.schedule(0, 0);
    let mut calls = 0;
    let mut hook = |now: TimePs| {
        calls += 1;
        if calls == 3 {
            Err(FlitsimError::Interrupted { time_ps: now })
        } else {
            Ok(())
        }
    };
    let e = run(&mut m, &mut q, u64::MAX, &mut hook).unwrap_err();
    assert!(matches!(e, FlitsimError::Interrupted { .. }));
    assert_eq!(m.trace.len() as u64, 3 * flitsim::engine::CHECK_EVERY_EVENTS);
}

#[test]
fn run_until_leaves_later_events_pending() {
    let mut m = Hold { rng: SimRng::new(1), left: 0, trace: Vec::new() };
    let mut q = EventQueue::new();
    q.schedule(10, 1);
    q.schedule(20, 2);
    let s = run(&mut m, &mut q, 15, &mut NoInterrupt).unwrap();
    assert_eq!(s.events, 1);
    assert_eq!(q.len(), 1);
}
