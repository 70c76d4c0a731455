//! Classic hold model (Jones 1986; Vaucher & Duval 1975): with P events
//! pending, repeatedly pop the earliest and push one at now + Exp(mean).
//! Reports events (pop + push) per second for P = 1e3 .. 1e6.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use flitsim::engine::{EventQueue, SimRng};

const MEAN_PS: f64 = 1_000_000.0;
const OPS: u64 = 200_000;

fn prime(pending: usize, rng: &mut SimRng) -> EventQueue<u64> {
    let mut q = EventQueue::with_capacity(pending + 1);
    for i in 0..pending {
        q.schedule(rng.exponential(MEAN_PS) as u64, i as u64);
    }
    q
}

fn hold(c: &mut Criterion) {
    let mut g = c.benchmark_group("hold_model");
    g.throughput(Throughput::Elements(OPS));
    g.sample_size(20);
    for &pending in &[1_000usize, 10_000, 100_000, 1_000_000] {
        let mut rng = SimRng::new(42);
        let mut q = prime(pending, &mut rng);
        g.bench_with_input(BenchmarkId::from_parameter(pending), &pending, |b, _| {
            b.iter(|| {
                for _ in 0..OPS {
                    let e = q.pop().unwrap();
                    let dt = rng.exponential(MEAN_PS) as u64;
                    q.schedule(e.time_ps + dt, e.event);
                }
            })
        });
    }
    g.finish();
}

criterion_group!(benches, hold);
criterion_main!(benches);
