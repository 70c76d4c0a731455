//! iSLIP (McKeown, "The iSLIP Scheduling Algorithm for Input-Queued
//! Switches", IEEE/ACM Trans. Networking 7(2), 1999).
//!
//! Each iteration, over the inputs and outputs still unmatched:
//! 1. Request: every unmatched input requests every output it has a cell for.
//! 2. Grant: every unmatched output that received requests grants the one that
//!    appears next in a round-robin schedule starting at its grant pointer g_o.
//! 3. Accept: every input that received grants accepts the one that appears
//!    next in a round-robin schedule starting at its accept pointer a_i.
//!
//! Pointer rules (the "slip"): a_i moves to one beyond the accepted output, and
//! g_o to one beyond the granted input *only if that grant was accepted*; both
//! are updated only in the first iteration (McKeown 1999, Sec. III-B and IV),
//! which is what desynchronizes the output pointers and gives 100 % throughput
//! under uniform i.i.d. Bernoulli traffic with a single iteration.

use super::{GrantScratch, bits, clear_columns, columns, Allocator, Matching, Requests, NONE};

pub struct Islip {
    n: usize,
    iterations: u32,
    grant_ptr: Vec<u32>,
    accept_ptr: Vec<u32>,
    s: GrantScratch,
    /// First iteration, per output: the requesting input nearest its grant
    /// pointer so far as `distance << 32 | input` (the minimum is the
    /// nearest: distances of different inputs differ); `u64::MAX` = no
    /// request yet.
    grant_key: Vec<u64>,
    /// First iteration, per input: the granting output nearest its accept
    /// pointer so far, as `distance << 32 | output`; `u64::MAX` = no grant.
    accept_key: Vec<u64>,
    /// First iteration: outputs in the order of their first request, inputs
    /// in the order of their first grant (fixed length n + 1; a count says
    /// how many are in use, so an entry is written, one past them, without a
    /// branch).
    order_out: Vec<u32>,
    order_in: Vec<u32>,
}

impl Islip {
    pub fn new(n: usize, iterations: u32) -> Self {
        Islip {
            n,
            iterations,
            grant_ptr: vec![0; n],
            accept_ptr: vec![0; n],
            s: GrantScratch::new(n),
            grant_key: vec![u64::MAX; n],
            accept_key: vec![u64::MAX; n],
            order_out: vec![0; n + 1],
            order_in: vec![0; n + 1],
        }
    }
}

impl Allocator for Islip {
    fn name(&self) -> &'static str {
        "islip"
    }

    fn allocate(&mut self, req: &Requests, m: &mut Matching) {
        let (n, w) = (self.n, req.w);
        self.first_iteration(req, m);
        for iter in 1..self.iterations {
            // Later iterations: step 1 (request), columns of the unmatched
            // request matrix.
            columns(req, m, &mut self.s.cols, &mut self.s.touched);
            if self.s.touched.is_empty() {
                break;
            }
            // Step 2 (grant).
            grant_round(&mut self.s, &self.grant_ptr, n, w);
            // Step 3 (accept).
            for k in 0..self.s.granted_inputs.len() {
                let i = self.s.granted_inputs[k] as usize;
                let g = &mut self.s.grants[i * w..(i + 1) * w];
                let o = bits::next_cyclic(g, self.accept_ptr[i] as usize, n).expect("granted");
                bits::zero(g);
                m.add(i, o);
                debug_assert!(iter > 0, "pointers move in the first iteration only");
            }
            self.s.granted_inputs.clear();
            clear_columns(&mut self.s.cols, w, &mut self.s.touched);
        }
        debug_assert!(m.matched.iter().all(|&i| m.input_to_output[i as usize] != NONE));
    }
}

/// iSLIP step 2 (grant) on the column form: each touched output grants the
/// requesting input nearest at or after its grant pointer; the grants land in
/// `s.grants` (rows) and the inputs granted in `s.granted_inputs`.
#[inline]
fn grant_round(s: &mut GrantScratch, grant_ptr: &[u32], n: usize, w: usize) {
    for k in 0..s.touched.len() {
        let o = s.touched[k] as usize;
        let col = &s.cols[o * w..(o + 1) * w];
        if let Some(i) = bits::next_cyclic(col, grant_ptr[o] as usize, n) {
            let g = &mut s.grants[i * w..(i + 1) * w];
            if bits::is_empty(g) {
                s.granted_inputs.push(i as u32);
            }
            bits::set(g, o);
        }
    }
}

/// Cyclic distance from pointer `p` forward to `x`, over `n` ports.
#[inline]
fn dist(x: usize, p: u32, n: usize) -> u32 {
    // x - p, plus n if that is negative: arithmetic, not a branch (the
    // direction is random under random traffic).
    let d = x as i64 - p as i64;
    (d + (n as i64 & (d >> 63))) as u32
}

impl Islip {
    /// The first iteration, when every port is unmatched, straight from the
    /// request rows (a round has few requests: no column matrix is built).
    /// Decisions and their order are those of the column form used for later
    /// iterations: outputs are visited in the order their first request
    /// appears (inputs ascending, outputs ascending within a row), each grants
    /// the requester nearest after its pointer, and inputs accept, in the
    /// order they were first granted, the grant nearest after theirs.
    fn first_iteration(&mut self, req: &Requests, m: &mut Matching) {
        let n = self.n;
        let w = req.w;
        // Step 1 (request) and step 2 (grant): per output the nearest
        // requester, kept as a minimum key (no data-dependent branch).
        let mut touched = 0usize;
        for &i in &req.active {
            let i = i as usize;
            for (wi, &word) in req.rows[i * w..(i + 1) * w].iter().enumerate() {
                let mut b = word;
                while b != 0 {
                    let o = wi << 6 | b.trailing_zeros() as usize;
                    b &= b - 1;
                    let key = (dist(i, self.grant_ptr[o], n) as u64) << 32 | i as u64;
                    let g = &mut self.grant_key[o];
                    self.order_out[touched] = o as u32;
                    touched += (*g == u64::MAX) as usize;
                    *g = (*g).min(key);
                }
            }
        }
        let mut granted = 0usize;
        for k in 0..touched {
            let o = self.order_out[k] as usize;
            let i = (std::mem::replace(&mut self.grant_key[o], u64::MAX) & 0xFFFF_FFFF) as usize;
            let key = (dist(o, self.accept_ptr[i], n) as u64) << 32 | o as u64;
            let a = &mut self.accept_key[i];
            self.order_in[granted] = i as u32;
            granted += (*a == u64::MAX) as usize;
            *a = (*a).min(key);
        }
        // Step 3 (accept), and the pointer update (first iteration only).
        for k in 0..granted {
            let i = self.order_in[k] as usize;
            let o = (std::mem::replace(&mut self.accept_key[i], u64::MAX) & 0xFFFF_FFFF) as usize;
            m.add(i, o);
            self.accept_ptr[i] = if o + 1 == n { 0 } else { o as u32 + 1 };
            self.grant_ptr[o] = if i + 1 == n { 0 } else { i as u32 + 1 };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::SimRng;

    /// iSLIP in the textbook column form for every iteration (the form the
    /// allocator used before the first iteration was taken from the rows):
    /// the reference the fast first iteration must match decision for
    /// decision, including the order of `matched` (the switch starts
    /// connections, and so emits departures, in that order).
    struct Reference {
        n: usize,
        iterations: u32,
        grant_ptr: Vec<u32>,
        accept_ptr: Vec<u32>,
        s: GrantScratch,
    }

    impl Reference {
        fn allocate(&mut self, req: &Requests, m: &mut Matching) {
            let (n, w) = (self.n, req.w);
            for iter in 0..self.iterations {
                columns(req, m, &mut self.s.cols, &mut self.s.touched);
                if self.s.touched.is_empty() {
                    break;
                }
                grant_round(&mut self.s, &self.grant_ptr, n, w);
                for k in 0..self.s.granted_inputs.len() {
                    let i = self.s.granted_inputs[k] as usize;
                    let g = &mut self.s.grants[i * w..(i + 1) * w];
                    let o = bits::next_cyclic(g, self.accept_ptr[i] as usize, n).unwrap();
                    bits::zero(g);
                    m.add(i, o);
                    if iter == 0 {
                        self.accept_ptr[i] = if o + 1 == n { 0 } else { o as u32 + 1 };
                        self.grant_ptr[o] = if i + 1 == n { 0 } else { i as u32 + 1 };
                    }
                }
                self.s.granted_inputs.clear();
                clear_columns(&mut self.s.cols, w, &mut self.s.touched);
            }
        }
    }

    #[test]
    fn matches_the_column_form_decision_for_decision() {
        let mut rng = SimRng::new(11);
        for &(n, density) in &[(5usize, 0.5f64), (72, 0.04), (72, 0.3), (130, 0.05)] {
            for iterations in 1..=3 {
                let mut fast = Islip::new(n, iterations);
                let mut slow = Reference { n, iterations, grant_ptr: vec![0; n], accept_ptr: vec![0; n], s: GrantScratch::new(n) };
                let mut req = Requests::new(n, false);
                let (mut mf, mut ms) = (Matching::new(n), Matching::new(n));
                for _round in 0..300 {
                    req.clear();
                    for i in 0..n {
                        for o in 0..n {
                            if rng.bernoulli(density) {
                                bits::set(req.row_mut(i), o);
                            }
                        }
                        if !bits::is_empty(req.row(i)) {
                            req.active.push(i as u32);
                        }
                    }
                    mf.clear();
                    ms.clear();
                    fast.allocate(&req, &mut mf);
                    slow.allocate(&req, &mut ms);
                    assert_eq!(mf.matched, ms.matched, "n {n} iterations {iterations}");
                    assert_eq!(mf.input_to_output, ms.input_to_output);
                    assert_eq!(fast.grant_ptr, slow.grant_ptr);
                    assert_eq!(fast.accept_ptr, slow.accept_ptr);
                }
            }
        }
    }
}
