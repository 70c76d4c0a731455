//! The one hasher of the engine's internal lookup maps: FxHash
//! (`rustc-hash`, the hasher rustc uses), deterministic and a few times
//! cheaper than the standard SipHash. The maps it serves (solve memo, path
//! cache, periodic-skip state tables, collective choices and replay records)
//! are keyed by small integers, tuples, already-mixed 64-bit hashes or state
//! vectors built by the simulator itself, and none is iterated in an order
//! that reaches a result, so SipHash's resistance to chosen keys buys nothing
//! there (`perf record` on a flow-level Ring run: SipHash ~5 % of the run).

use std::collections::HashMap;

/// A `HashMap` with FxHash.
pub type FastMap<K, V> = HashMap<K, V, rustc_hash::FxBuildHasher>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::{BuildHasher, Hash, Hasher};

    #[test]
    fn equal_keys_hash_equal_and_small_keys_spread() {
        let h = |v: &[u64]| {
            let mut s = rustc_hash::FxBuildHasher.build_hasher();
            v.hash(&mut s);
            s.finish()
        };
        assert_eq!(h(&[1, 2, 3]), h(&[1, 2, 3]));
        assert_ne!(h(&[1, 2, 3]), h(&[3, 2, 1]));
        // consecutive small keys land in different buckets of a small table
        let mut m: FastMap<(u32, u32, u32), u32> = FastMap::default();
        for i in 0..1000u32 {
            m.insert((i % 10, i / 10, 0), i);
        }
        assert_eq!(m.len(), 1000);
        assert!((0..1000u32).all(|i| m[&(i % 10, i / 10, 0)] == i));
    }
}
