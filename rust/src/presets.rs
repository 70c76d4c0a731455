//! Presets for Rust-only use (tests, benches, `cargo run --example`): the
//! NVLink 5 link and NVL72-style planar fabrics. The sourced, documented presets
//! are the Python ones (`python/flitsim/hardware/`); these mirror their values,
//! and tests/test_fabric.py runs the Python presets through the same engine.

use crate::fabric::{FabricSpec, GpuInjection, Spray, SwitchParams, Wire};
use crate::link::LinkSpec;
use crate::phy::{FecCode, LineCode, Modulation, PacketFormat, SerdesSpec};

/// NVLink 5, one direction: 2 lanes x 106.25 GBd PAM4, RS(544,514) +
/// 256b/257b = 50 GB/s; 5 ns propagation, 20 ns PHY, 8 VCs x 512 flits,
/// 30 ns credit return (the last four assumed, as in `hardware/links.py`).
pub fn nvlink5() -> LinkSpec {
    LinkSpec {
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
        replay: None,
    }
}

/// `gpus` GPUs and `planes` switch chips, one NVLink 5 link from every GPU to
/// every chip (GPU g port k <-> chip k port g): GB200 NVL72 is `planar(72, 18)`.
pub fn planar(gpus: u32, planes: u32, fold_planes: bool) -> FabricSpec {
    let wires = (0..gpus)
        .flat_map(|g| (0..planes).map(move |s| Wire { gpu: g, gpu_port: s, switch: s, switch_port: g, link: 0, switch_link: None }))
        .collect();
    FabricSpec {
        gpus,
        gpu_ports: planes,
        switches: planes,
        switch_ports: gpus,
        links: vec![nvlink5()],
        wires,
        gpu: GpuInjection::default(),
        switch: SwitchParams::default(),
        spray: Spray::RoundRobin,
        sim_packet_bytes: 0,
        sim_packets_per_lane: 0,
        max_sim_packet_bytes: 256 << 10,
        fold_planes,
        fidelity: crate::fabric::Fidelity::Packet,
        faults: Vec::new(),
        hosts: 0,
        switch_kinds: Vec::new(),
        switch_kind: Vec::new(),
        trunks: Vec::new(),
        static_routes: Vec::new(),
        counters: Default::default(),
    }
}
