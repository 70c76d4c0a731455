//! One run of the BookSim2 comparison configuration (see benches/switch.rs);
//! prints delivered flits, wall seconds and delivered flits per wall-second.
//! `cargo run --release --example switch_speed [measure_cycles]`

#[path = "../benches/common/switch_spec.rs"]
mod switch_spec;

fn main() {
    let cycles: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(200_000);
    let mut spec = switch_spec::booksim_spec(cycles);
    if let Some(l) = std::env::args().nth(2).and_then(|a| a.parse().ok()) {
        spec.traffic.load = l;
    }
    if let Some(p) = std::env::args().nth(3).and_then(|a| a.parse().ok()) {
        spec.switch.ports = p;
    }
    if let Some(v) = std::env::args().nth(4).and_then(|a| a.parse().ok()) {
        spec.switch.vcs = v;
    }
    let t0 = std::time::Instant::now();
    let r = flitsim::experiments::switch_lab::run(&spec, &mut flitsim::engine::NoInterrupt).expect("run");
    let s = t0.elapsed().as_secs_f64();
    eprintln!("cycles_processed {} slots {} allocation_rounds {} conflicts_in {}", r.cycles_processed, r.switch.slots_processed, r.switch.allocation_rounds, r.switch.ports.iter().map(|p| p.input_conflicts).sum::<u64>());
    println!(
        "cycles {cycles}  delivered_flits {}  accepted {:.4}  wall_s {s:.3}  delivered_flits_per_s {:.3e}",
        r.delivered_flits,
        r.accepted_throughput,
        r.delivered_flits as f64 / s
    );
}
