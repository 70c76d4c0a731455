//! Helpers shared by the Rust integration tests (each test binary includes
//! this module with `mod common;`, so not every binary uses every helper).
#![allow(dead_code)]

use flitsim::fabric::TransferBatch;

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
