//! Fixed-width bitsets over port indices, stored as `u64` words in caller-owned
//! slices so that request matrices live in one preallocated buffer.

/// Words needed for `n` bits.
#[inline]
pub fn words(n: usize) -> usize {
    n.div_ceil(64)
}

#[inline]
pub fn set(row: &mut [u64], i: usize) {
    row[i >> 6] |= 1u64 << (i & 63);
}

#[inline]
pub fn clear(row: &mut [u64], i: usize) {
    row[i >> 6] &= !(1u64 << (i & 63));
}

#[inline]
pub fn get(row: &[u64], i: usize) -> bool {
    row[i >> 6] >> (i & 63) & 1 == 1
}

/// Bit `i` of row `r` of a buffer of rows of `w` words each: one index into
/// the buffer (no row slice with its own bounds checks). `i` < 64 `w`.
#[inline(always)]
pub fn get_at(buf: &[u64], r: usize, w: usize, i: usize) -> bool {
    buf[r * w + (i >> 6)] >> (i & 63) & 1 == 1
}

/// Set bit `i` of row `r` (as [`get_at`]).
#[inline(always)]
pub fn set_at(buf: &mut [u64], r: usize, w: usize, i: usize) {
    buf[r * w + (i >> 6)] |= 1u64 << (i & 63);
}

/// Clear bit `i` of row `r` (as [`get_at`]).
#[inline(always)]
pub fn clear_at(buf: &mut [u64], r: usize, w: usize, i: usize) {
    buf[r * w + (i >> 6)] &= !(1u64 << (i & 63));
}

/// Zero `row`: one or two words (a switch up to 128 ports) by plain
/// stores; longer rows store only to non-zero words (an unconditional loop
/// over a length unknown at compile time compiles to a `memset` call).
#[inline]
pub fn zero(row: &mut [u64]) {
    match row {
        // One or two words: plain stores (no branch on the contents).
        [a] => *a = 0,
        [a, b] => {
            *a = 0;
            *b = 0;
        }
        _ => {
            for x in row.iter_mut() {
                if *x != 0 {
                    *x = 0;
                }
            }
        }
    }
}

/// Whether `a` and `b` share no set bit (rows of equal length).
#[inline]
pub fn disjoint(a: &[u64], b: &[u64]) -> bool {
    match (a, b) {
        ([a0], [b0]) => a0 & b0 == 0,
        ([a0, a1], [b0, b1]) => (a0 & b0) | (a1 & b1) == 0,
        _ => a.iter().zip(b).all(|(x, y)| x & y == 0),
    }
}

/// The bits of `set` (bit `b` standing for row `base + b` of `rows`, rows of
/// `mask.len()` words) whose row shares a set bit with `mask`. No branch
/// depends on the rows' contents, so a set of rows that mostly miss the mask
/// costs no mispredictions.
#[inline]
pub fn rows_meeting(set: u64, base: usize, rows: &[u64], mask: &[u64]) -> u64 {
    // 1 if x != 0, else 0, in arithmetic.
    #[inline]
    fn nonzero(x: u64) -> u64 {
        (x | x.wrapping_neg()) >> 63
    }
    let mut out = 0u64;
    let mut s = set;
    match mask {
        [m0] => {
            while s != 0 {
                let b = s & s.wrapping_neg();
                let i = base + s.trailing_zeros() as usize;
                s ^= b;
                out |= b & nonzero(rows[i] & m0).wrapping_neg();
            }
        }
        [m0, m1] => {
            while s != 0 {
                let b = s & s.wrapping_neg();
                let i = base + s.trailing_zeros() as usize;
                s ^= b;
                let r = &rows[2 * i..2 * i + 2];
                out |= b & nonzero((r[0] & m0) | (r[1] & m1)).wrapping_neg();
            }
        }
        _ => {
            let w = mask.len();
            while s != 0 {
                let b = s & s.wrapping_neg();
                let i = base + s.trailing_zeros() as usize;
                s ^= b;
                let x = rows[i * w..(i + 1) * w].iter().zip(mask).fold(0, |a, (r, m)| a | (r & m));
                out |= b & nonzero(x).wrapping_neg();
            }
        }
    }
    out
}

/// `dst |= a & b` word by word (rows of equal length).
#[inline]
pub fn or_and(dst: &mut [u64], a: &[u64], b: &[u64]) {
    match (dst, a, b) {
        ([d0], [a0], [b0]) => *d0 |= a0 & b0,
        ([d0, d1], [a0, a1], [b0, b1]) => {
            *d0 |= a0 & b0;
            *d1 |= a1 & b1;
        }
        (dst, a, b) => {
            for ((d, x), y) in dst.iter_mut().zip(a).zip(b) {
                *d |= x & y;
            }
        }
    }
}

#[inline]
pub fn is_empty(row: &[u64]) -> bool {
    match row {
        [a] => *a == 0,
        [a, b] => a | b == 0,
        _ => row.iter().all(|&w| w == 0),
    }
}

#[inline]
pub fn count(row: &[u64]) -> u32 {
    match row {
        [a] => a.count_ones(),
        [a, b] => a.count_ones() + b.count_ones(),
        _ => row.iter().map(|w| w.count_ones()).sum(),
    }
}

/// First set bit at index >= `start` (cyclically, over `n` bits); `None` if empty.
/// This is a round-robin arbiter whose highest-priority element is `start`.
#[inline]
pub fn next_cyclic(row: &[u64], start: usize, n: usize) -> Option<usize> {
    let start = if start >= n { 0 } else { start };
    let (w0, b0) = (start >> 6, start & 63);
    let first = row[w0] & (!0u64 << b0);
    if first != 0 {
        return Some((w0 << 6) | first.trailing_zeros() as usize);
    }
    let nw = row.len();
    let mut w = w0;
    for k in 1..=nw {
        w += 1;
        if w == nw {
            w = 0;
        }
        let mut bits = row[w];
        if k == nw {
            // Wrapped back to the start word: only bits below b0 remain.
            bits &= if b0 == 0 { 0 } else { (1u64 << b0) - 1 };
        }
        if bits != 0 {
            let i = (w << 6) | bits.trailing_zeros() as usize;
            return if i < n { Some(i) } else { None };
        }
    }
    None
}

/// The `k`-th set bit (0-based) of `row`; the caller ensures `k < count(row)`.
#[inline]
pub fn nth(row: &[u64], mut k: u32) -> usize {
    for (w, &word) in row.iter().enumerate() {
        let c = word.count_ones();
        if k < c {
            let mut bits = word;
            for _ in 0..k {
                bits &= bits - 1;
            }
            return (w << 6) | bits.trailing_zeros() as usize;
        }
        k -= c;
    }
    unreachable!("nth: k beyond popcount")
}

/// Iterate the set bits of `row` in increasing order.
#[inline]
pub fn iter(row: &[u64]) -> impl Iterator<Item = usize> + '_ {
    row.iter().enumerate().flat_map(|(w, &word)| {
        let mut bits = word;
        std::iter::from_fn(move || {
            if bits == 0 {
                None
            } else {
                let b = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                Some((w << 6) | b)
            }
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `get_at` / `set_at` / `clear_at` on row r of a buffer act as `get` /
    /// `set` / `clear` on that row's slice, and touch no other row.
    #[test]
    fn bit_at_a_row_is_the_bit_of_its_slice() {
        for w in 1..4 {
            let rows = 5;
            let (mut a, mut b) = (vec![0u64; rows * w], vec![0u64; rows * w]);
            let mut x = 12345u64;
            for _ in 0..2000 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let (r, i, op) = ((x >> 20) as usize % rows, (x >> 30) as usize % (64 * w), (x >> 50) % 3);
                match op {
                    0 => set_at(&mut a, r, w, i),
                    1 => clear_at(&mut a, r, w, i),
                    _ => assert_eq!(get_at(&a, r, w, i), get(&b[r * w..(r + 1) * w], i)),
                }
                match op {
                    0 => set(&mut b[r * w..(r + 1) * w], i),
                    1 => clear(&mut b[r * w..(r + 1) * w], i),
                    _ => {}
                }
                assert_eq!(a, b);
            }
        }
    }

    #[test]
    fn cyclic_search_wraps() {
        let mut r = vec![0u64; 2];
        set(&mut r, 3);
        set(&mut r, 70);
        assert_eq!(next_cyclic(&r, 0, 72), Some(3));
        assert_eq!(next_cyclic(&r, 4, 72), Some(70));
        assert_eq!(next_cyclic(&r, 71, 72), Some(3));
        assert_eq!(next_cyclic(&r, 3, 72), Some(3));
        assert_eq!(nth(&r, 1), 70);
        assert_eq!(iter(&r).collect::<Vec<_>>(), vec![3, 70]);
        clear(&mut r, 3);
        assert_eq!(next_cyclic(&r, 71, 72), Some(70));
    }

    /// `rows_meeting` keeps exactly the rows that share a bit with the mask,
    /// for one, two and three words per row (64 w rows, any 64-row block).
    #[test]
    fn rows_meeting_keeps_rows_that_share_a_bit() {
        let mut rng = crate::engine::SimRng::new(2);
        for w in 1..=3usize {
            for _ in 0..500 {
                let rows: Vec<u64> = (0..64 * w * w).map(|_| rng.next_u64() & rng.next_u64() & rng.next_u64()).collect();
                let mask: Vec<u64> = (0..w).map(|_| rng.next_u64() & rng.next_u64()).collect();
                let set = rng.next_u64();
                let base = 64 * rng.below(w as u64) as usize;
                let mut want = 0u64;
                for b in 0..64 {
                    let i = base + b;
                    if set >> b & 1 == 1 && !disjoint(&rows[i * w..(i + 1) * w], &mask) {
                        want |= 1 << b;
                    }
                }
                assert_eq!(rows_meeting(set, base, &rows, &mask), want, "w {w}");
            }
        }
    }
}
