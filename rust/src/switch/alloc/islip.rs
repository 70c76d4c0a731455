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
}

impl Islip {
    pub fn new(n: usize, iterations: u32) -> Self {
        Islip {
            n,
            iterations,
            grant_ptr: vec![0; n],
            accept_ptr: vec![0; n],
            s: GrantScratch::new(n),
        }
    }
}

impl Allocator for Islip {
    fn name(&self) -> &'static str {
        "islip"
    }

    fn allocate(&mut self, req: &Requests, m: &mut Matching) {
        let (n, w) = (self.n, req.w);
        for iter in 0..self.iterations {
            // Step 1 (request): columns of the unmatched request matrix.
            columns(req, m, &mut self.s.cols, &mut self.s.touched);
            if self.s.touched.is_empty() {
                break;
            }
            // Step 2 (grant).
            for k in 0..self.s.touched.len() {
                let o = self.s.touched[k] as usize;
                let col = &self.s.cols[o * w..(o + 1) * w];
                if let Some(i) = bits::next_cyclic(col, self.grant_ptr[o] as usize, n) {
                    let g = &mut self.s.grants[i * w..(i + 1) * w];
                    if bits::is_empty(g) {
                        self.s.granted_inputs.push(i as u32);
                    }
                    bits::set(g, o);
                }
            }
            // Step 3 (accept).
            for k in 0..self.s.granted_inputs.len() {
                let i = self.s.granted_inputs[k] as usize;
                let g = &mut self.s.grants[i * w..(i + 1) * w];
                let o = bits::next_cyclic(g, self.accept_ptr[i] as usize, n).expect("granted");
                for x in g.iter_mut() {
                    *x = 0;
                }
                m.add(i, o);
                if iter == 0 {
                    self.accept_ptr[i] = if o + 1 == n { 0 } else { o as u32 + 1 };
                    self.grant_ptr[o] = if i + 1 == n { 0 } else { i as u32 + 1 };
                }
            }
            self.s.granted_inputs.clear();
            clear_columns(&mut self.s.cols, w, &mut self.s.touched);
        }
        debug_assert!(m.matched.iter().all(|&i| m.input_to_output[i as usize] != NONE));
    }
}
