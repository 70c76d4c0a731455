//! The BookSim2 comparison point (issue 3): one 72-port input-queued switch,
//! 4 VCs x 16-flit buffers, 8-flit packets, iSLIP (1 iteration), uniform
//! Bernoulli traffic at 0.5 flits/port/cycle. BookSim2 runs this at about
//! 660,000 delivered flits per wall-second on the 2-core development machine;
//! the target is >= 30x that. Criterion reports elements/s = delivered flits/s.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use flitsim::engine::NoInterrupt;
use flitsim::experiments::switch_lab::run;

#[path = "common/switch_spec.rs"]
mod switch_spec;
use switch_spec::booksim_spec;

fn switch(c: &mut Criterion) {
    let spec = booksim_spec(100_000);
    let delivered = run(&spec, &mut NoInterrupt).expect("run").delivered_flits;
    let mut g = c.benchmark_group("switch_72p_islip_uniform_0.5");
    g.throughput(Throughput::Elements(delivered));
    g.sample_size(10);
    g.bench_function("delivered_flits", |b| b.iter(|| run(&spec, &mut NoInterrupt).expect("run")));
    g.finish();
}

criterion_group!(benches, switch);
criterion_main!(benches);
