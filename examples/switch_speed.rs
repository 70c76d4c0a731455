//! One run of the BookSim2 comparison configuration (see benches/switch.rs);
//! prints delivered flits, wall seconds and delivered flits per wall-second.
//! `cargo run --release --example switch_speed [measure_cycles]`

#[path = "../benches/common/switch_spec.rs"]
mod switch_spec;

fn main() {
    let cycles: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(200_000);
    let spec = switch_spec::booksim_spec(cycles);
    let t0 = std::time::Instant::now();
    let r = flitsim::experiments::switch_lab::run(&spec, &mut flitsim::engine::NoInterrupt).expect("run");
    let s = t0.elapsed().as_secs_f64();
    println!(
        "cycles {cycles}  delivered_flits {}  accepted {:.4}  wall_s {s:.3}  delivered_flits_per_s {:.3e}",
        r.delivered_flits,
        r.accepted_throughput,
        r.delivered_flits as f64 / s
    );
}
