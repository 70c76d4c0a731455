//! Fabric bench: NVL72 all-to-all (pairwise order) at packet fidelity, one
//! folded plane and the full 18 planes; throughput in packets per second.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use flitsim::engine::NoInterrupt;
use flitsim::fabric::{run_batch, FabricSpec, TransferBatch};
use flitsim::presets;

fn nvl72(fold: bool) -> FabricSpec {
    presets::planar(72, 18, fold)
}

fn all_to_all(bytes: u64) -> TransferBatch {
    let mut b = TransferBatch::default();
    for k in 1..72u32 {
        for s in 0..72u32 {
            b.src.push(s);
            b.dst.push((s + k) % 72);
            b.bytes.push(bytes);
            b.start_ps.push(0);
            b.after.push(-1);
        }
    }
    b
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("nvl72_all_to_all");
    g.sample_size(10);
    let bytes = 18 * 256 * 8; // 36 KiB per pair, 8 packets per port
    let packets = 72 * 71 * bytes / 256;
    g.throughput(Throughput::Elements(packets));
    for (name, fold) in [("folded", true), ("unfolded", false)] {
        let spec = nvl72(fold);
        let b = all_to_all(bytes);
        g.bench_function(name, |bch| bch.iter(|| run_batch(&spec, &b, &mut NoInterrupt).unwrap().makespan_ps));
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
