//! Helpers shared by the Rust integration tests (each test binary includes
//! this module with `mod common;`, so not every binary uses every helper).
#![allow(dead_code)]

use flitsim::fabric::TransferBatch;
use flitsim::taskgraph::{CollectiveKind, TaskGraph, TaskKind};

/// Independent transfers `(src, dst, bytes)`, all starting at t = 0.
pub fn batch(items: &[(u32, u32, u64)]) -> TransferBatch {
    TransferBatch {
        src: items.iter().map(|x| x.0).collect(),
        dst: items.iter().map(|x| x.1).collect(),
        bytes: items.iter().map(|x| x.2).collect(),
        start_ps: vec![0; items.len()],
        after: vec![-1; items.len()],
    }
}

/// Every ordered pair of distinct GPUs sends `bytes` (n (n - 1) transfers).
pub fn all_to_all(gpus: u32, bytes: u64) -> TransferBatch {
    let mut items = Vec::new();
    for s in 0..gpus {
        for d in 0..gpus {
            if s != d {
                items.push((s, d, bytes));
            }
        }
    }
    batch(&items)
}

/// Append a task to `g` (an all-gather over group 0 when it is a
/// collective); returns its index.
pub fn push_task(g: &mut TaskGraph, kind: TaskKind, device: u32, peer: u32, dur_ps: u64, bytes: u64, steal_ppm: u32) -> u32 {
    g.kind.push(kind as u8);
    g.device.push(device);
    g.peer.push(peer);
    g.duration_ps.push(dur_ps);
    g.bytes.push(bytes);
    g.collective.push(CollectiveKind::AllGather as u8);
    g.group.push(0);
    g.steal_ppm.push(steal_ppm);
    (g.kind.len() - 1) as u32
}

/// Append the edge `a` -> `b` of `kind` (0 data, 1 credit) to `g`.
pub fn push_edge(g: &mut TaskGraph, a: u32, b: u32, kind: u8) {
    g.edge_src.push(a);
    g.edge_dst.push(b);
    g.edge_kind.push(kind);
}
