//! Separable output-first round-robin allocator (Dally & Towles 2004, Sec.
//! 19.3), single pass: each output's arbiter picks one requesting input; each
//! input then picks one of the outputs that picked it. Both arbiters advance
//! on every grant they make, accepted or not. This is McKeown's RRM, whose
//! output pointers move in lock-step under load and cap uniform throughput far
//! below 100 %; iSLIP is this allocator with the slip rule (advance only on
//! an accepted grant, first iteration only).

use super::{GrantScratch, bits, clear_columns, columns, Allocator, Matching, Requests, NONE};

pub struct SeparableOutputFirst {
    n: usize,
    in_ptr: Vec<u32>,
    out_ptr: Vec<u32>,
    s: GrantScratch,
}

impl SeparableOutputFirst {
    pub fn new(n: usize) -> Self {
        SeparableOutputFirst {
            n,
            in_ptr: vec![0; n],
            out_ptr: vec![0; n],
            s: GrantScratch::new(n),
        }
    }
}

impl Allocator for SeparableOutputFirst {
    fn name(&self) -> &'static str {
        "separable_output_first"
    }

    fn allocate(&mut self, req: &Requests, m: &mut Matching) {
        let (n, w) = (self.n, req.w);
        debug_assert!(m.matched.is_empty() || m.input_to_output[m.matched[0] as usize] != NONE);
        columns(req, m, &mut self.s.cols, &mut self.s.touched);
        for k in 0..self.s.touched.len() {
            let o = self.s.touched[k] as usize;
            let col = &self.s.cols[o * w..(o + 1) * w];
            let i = bits::next_cyclic(col, self.out_ptr[o] as usize, n).expect("requested");
            self.out_ptr[o] = ((i + 1) % n) as u32;
            let g = &mut self.s.grants[i * w..(i + 1) * w];
            if bits::is_empty(g) {
                self.s.granted_inputs.push(i as u32);
            }
            bits::set(g, o);
        }
        for k in 0..self.s.granted_inputs.len() {
            let i = self.s.granted_inputs[k] as usize;
            let g = &mut self.s.grants[i * w..(i + 1) * w];
            let o = bits::next_cyclic(g, self.in_ptr[i] as usize, n).expect("granted");
            self.in_ptr[i] = ((o + 1) % n) as u32;
            bits::zero(g);
            m.add(i, o);
        }
        self.s.granted_inputs.clear();
        clear_columns(&mut self.s.cols, w, &mut self.s.touched);
    }
}
