//! Fabric bench: NVL72 all-to-all (pairwise order) at packet fidelity, one
//! folded plane and the full 18 planes; throughput in packets per second.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use flitsim::engine::NoInterrupt;
use flitsim::fabric::{run_batch, FabricSpec, GpuInjection, Spray, SwitchParams, TransferBatch, Wire};
use flitsim::link::LinkSpec;
use flitsim::phy::{FecCode, LineCode, Modulation, PacketFormat, SerdesSpec};

fn nvl72(fold: bool) -> FabricSpec {
    let link = LinkSpec {
        serdes: SerdesSpec {
            baud_gbd: 106.25,
            modulation: Modulation::Pam4,
            lanes: 2,
            fec: Some(FecCode { n: 544, k: 514, symbol_bits: 10, interleave_lanes: 1 }),
            line_code: LineCode::B256B257,
            phy_latency_ps: 20_000,
        },
        packet: PacketFormat::default(),
        propagation_ps: 5_000,
        vcs: 8,
        credits_per_vc_flits: 512,
        credit_return_ps: 30_000,
    };
    let wires = (0..72).flat_map(|g| (0..18).map(move |s| Wire { gpu: g, gpu_port: s, switch: s, switch_port: g, link: 0, switch_link: None })).collect();
    FabricSpec {
        gpus: 72,
        gpu_ports: 18,
        switches: 18,
        switch_ports: 72,
        links: vec![link],
        wires,
        gpu: GpuInjection::default(),
        switch: SwitchParams::default(),
        spray: Spray::RoundRobin,
        sim_packet_bytes: 0,
        fold_planes: fold,
    }
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
