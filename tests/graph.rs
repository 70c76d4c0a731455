//! Graph fabrics at the Rust level: a two-level leaf/spine tree of switches
//! (one link spec, so closed forms are per link): routes, ECMP, conservation
//! of bytes over the trunks, and the physical bound of every transfer.

use flitsim::engine::NoInterrupt;
use flitsim::fabric::{run_batch, FabricSpec, Peer, Topology, Trunk, Wire};
use flitsim::presets;
mod common;
use common::{batch};

/// `leaves` leaf switches with `per_leaf` GPUs each (one port per GPU), every
/// leaf trunked once to each of `spines` spine switches. Leaf l = element l,
/// spine s = element leaves + s; leaf ports: GPUs first, then spines.
fn leaf_spine(leaves: u32, per_leaf: u32, spines: u32) -> FabricSpec {
    let mut spec = presets::planar(leaves * per_leaf, 1, false);
    spec.gpu_ports = 1;
    spec.switches = leaves + spines;
    spec.switch_ports = (per_leaf + spines).max(leaves);
    spec.wires = (0..leaves * per_leaf).map(|g| Wire { gpu: g, gpu_port: 0, switch: g / per_leaf, switch_port: g % per_leaf, link: 0, switch_link: None }).collect();
    spec.trunks = (0..leaves).flat_map(|l| (0..spines).map(move |s| Trunk { a: l, a_port: per_leaf + s, b: leaves + s, b_port: l, link: 0, b_link: None, dateline: None })).collect();
    spec
}

#[test]
fn leaf_spine_routes_are_shortest_with_ecmp_over_spines() {
    let spec = leaf_spine(4, 2, 2);
    spec.validate().unwrap();
    let t = Topology::new(&spec);
    // Same leaf: the GPU's own port. Other leaf: both spines (ECMP 2); a spine: the one trunk down.
    assert_eq!(t.routes(0, 1), &[1]);
    assert_eq!(t.routes(0, 7), &[2, 3]);
    assert_eq!(t.routes(4, 7), &[3]);
    assert_eq!(t.peer(0, 2), Peer::Switch { switch: 4, port: 0 });
    let hops = t.path(0, 7);
    assert_eq!(hops.iter().map(|h| h.switch).collect::<Vec<_>>(), vec![None, Some(0), Some(4), Some(3)]);
    assert_eq!(hops.iter().map(|h| h.ecmp).collect::<Vec<_>>(), vec![1, 2, 1, 1]);
}

#[test]
fn leaf_spine_all_to_all_conserves_bytes_over_trunks() {
    let spec = leaf_spine(4, 2, 2);
    let n = 8u32;
    let bytes = 64u64 << 10;
    let items: Vec<(u32, u32, u64)> = (0..n).flat_map(|s| (0..n).filter(move |&d| d != s).map(move |d| (s, d, bytes))).collect();
    let r = run_batch(&spec, &batch(&items), &mut NoInterrupt).unwrap();
    // Remote pairs cross one leaf->spine trunk and one spine->leaf trunk.
    let remote = items.iter().filter(|x| x.0 / 2 != x.1 / 2).count() as u64 * bytes;
    let up: u64 = r.stats.switch_links.iter().filter(|l| l.to == "switch" && l.switch < 4).map(|l| l.link.payload_bytes).sum();
    let down: u64 = r.stats.switch_links.iter().filter(|l| l.to == "switch" && l.switch >= 4).map(|l| l.link.payload_bytes).sum();
    assert_eq!(up, remote);
    assert_eq!(down, remote);
    // Delivered to endpoints: every byte once.
    let to_gpus: u64 = r.stats.switch_links.iter().filter(|l| l.to == "endpoint").map(|l| l.link.payload_bytes).sum();
    assert_eq!(to_gpus, items.len() as u64 * bytes);
    // ECMP: the two spines carry the same bytes within one packet per flow.
    let spine = |s: u32| r.stats.switch_links.iter().filter(|l| l.switch == 4 + s).map(|l| l.link.payload_bytes).sum::<u64>();
    assert!(spine(0).abs_diff(spine(1)) <= items.len() as u64 * 256, "{} vs {}", spine(0), spine(1));
    // No GPU receives faster than its one link: 7 x 64 KiB at 50 GB/s x 256/272.
    let rate = 50e9 * 256.0 / 272.0;
    let bound_ps = 7.0 * bytes as f64 / rate * 1e12;
    assert!(r.makespan_ps as f64 >= bound_ps, "{} < {bound_ps}", r.makespan_ps);
}

#[test]
fn one_layer_presets_are_not_graphs() {
    let spec = presets::planar(72, 18, true);
    assert!(!spec.is_graph());
    let json = serde_json::to_string(&spec).unwrap();
    for k in ["hosts", "switch_kinds", "trunks", "static_routes"] {
        assert!(!json.contains(k), "{k} serialized for a one-layer fabric");
    }
}
