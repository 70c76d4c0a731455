//! The one hasher of the engine's internal lookup maps: FxHash's
//! rotate-xor-multiply (as rustc uses it), deterministic and a few times
//! cheaper than the standard SipHash. The maps it serves (solve memo, path
//! cache, periodic-skip state tables, collective choices and replay records)
//! are keyed by small integers, tuples, already-mixed 64-bit hashes or state
//! vectors built by the simulator itself, and none is iterated in an order
//! that reaches a result, so SipHash's resistance to chosen keys buys nothing
//! there (`perf record` on a flow-level Ring run: SipHash ~5 % of the run).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// FxHash (64-bit): per word, rotate left 5, xor, multiply.
#[derive(Debug, Default, Clone, Copy)]
pub struct FastHasher(u64);

const K: u64 = 0x517c_c1b7_2722_0a95;

impl FastHasher {
    #[inline]
    fn add(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(K);
    }
}

impl Hasher for FastHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }

    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut c = bytes.chunks_exact(8);
        for w in &mut c {
            self.add(u64::from_le_bytes(w.try_into().expect("8 bytes")));
        }
        let r = c.remainder();
        if !r.is_empty() {
            let mut b = [0u8; 8];
            b[..r.len()].copy_from_slice(r);
            self.add(u64::from_le_bytes(b));
        }
    }

    #[inline]
    fn write_u8(&mut self, v: u8) {
        self.add(v as u64);
    }

    #[inline]
    fn write_u32(&mut self, v: u32) {
        self.add(v as u64);
    }

    #[inline]
    fn write_u64(&mut self, v: u64) {
        self.add(v);
    }

    #[inline]
    fn write_usize(&mut self, v: usize) {
        self.add(v as u64);
    }
}

/// A `HashMap` with [`FastHasher`].
pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHasher>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_keys_hash_equal_and_small_keys_spread() {
        let h = |v: &[u64]| {
            let mut s = FastHasher::default();
            std::hash::Hash::hash(v, &mut s);
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
