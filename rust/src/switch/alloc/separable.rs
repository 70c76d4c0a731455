//! Separable round-robin allocators (Dally & Towles, *Principles and Practices
//! of Interconnection Networks*, 2004, Sec. 19.3): one bank of round-robin
//! arbiters per side, run one after the other, single pass.
//!
//! - Input-first: each input's arbiter picks one of its requested outputs; each
//!   output's arbiter then picks one of the inputs that picked it. An input
//!   arbiter advances past its pick only if the pick won at the output, an
//!   output arbiter past the input it granted (D&T 19.3.1: updating losing
//!   input arbiters would let them skip requests and starve).
//! - Output-first: each output's arbiter picks one requesting input; each input
//!   then picks one of the outputs that picked it. Both arbiters advance on
//!   every grant they make, accepted or not — McKeown's RRM, whose output
//!   pointers move in lock-step under load and cap uniform throughput near
//!   1 - 1/e; iSLIP is this allocator with the slip rule (update on accept).

use super::{bits, clear_columns, columns, Allocator, Matching, Requests, NONE};

pub struct SeparableInputFirst {
    n: usize,
    in_ptr: Vec<u32>,
    out_ptr: Vec<u32>,
    /// Per output: inputs whose arbiter picked it.
    picks: Vec<u64>,
    touched: Vec<u32>,
}

impl SeparableInputFirst {
    pub fn new(n: usize) -> Self {
        let w = bits::words(n);
        SeparableInputFirst { n, in_ptr: vec![0; n], out_ptr: vec![0; n], picks: vec![0; n * w], touched: Vec::with_capacity(n) }
    }
}

impl Allocator for SeparableInputFirst {
    fn name(&self) -> &'static str {
        "separable_input_first"
    }

    fn allocate(&mut self, req: &Requests, m: &mut Matching) {
        let (n, w) = (self.n, req.w);
        for &i in &req.active {
            let i = i as usize;
            if let Some(o) = bits::next_cyclic(req.row(i), self.in_ptr[i] as usize, n) {
                let p = &mut self.picks[o * w..(o + 1) * w];
                if bits::is_empty(p) {
                    self.touched.push(o as u32);
                }
                bits::set(p, i);
            }
        }
        for k in 0..self.touched.len() {
            let o = self.touched[k] as usize;
            let p = &self.picks[o * w..(o + 1) * w];
            let i = bits::next_cyclic(p, self.out_ptr[o] as usize, n).expect("picked");
            m.add(i, o);
            self.out_ptr[o] = ((i + 1) % n) as u32;
            self.in_ptr[i] = ((o + 1) % n) as u32;
        }
        clear_columns(&mut self.picks, w, &mut self.touched);
    }
}

pub struct SeparableOutputFirst {
    n: usize,
    in_ptr: Vec<u32>,
    out_ptr: Vec<u32>,
    cols: Vec<u64>,
    touched: Vec<u32>,
    grants: Vec<u64>,
    granted_inputs: Vec<u32>,
}

impl SeparableOutputFirst {
    pub fn new(n: usize) -> Self {
        let w = bits::words(n);
        SeparableOutputFirst {
            n,
            in_ptr: vec![0; n],
            out_ptr: vec![0; n],
            cols: vec![0; n * w],
            touched: Vec::with_capacity(n),
            grants: vec![0; n * w],
            granted_inputs: Vec::with_capacity(n),
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
        columns(req, m, &mut self.cols, &mut self.touched);
        for k in 0..self.touched.len() {
            let o = self.touched[k] as usize;
            let col = &self.cols[o * w..(o + 1) * w];
            let i = bits::next_cyclic(col, self.out_ptr[o] as usize, n).expect("requested");
            self.out_ptr[o] = ((i + 1) % n) as u32;
            let g = &mut self.grants[i * w..(i + 1) * w];
            if bits::is_empty(g) {
                self.granted_inputs.push(i as u32);
            }
            bits::set(g, o);
        }
        for k in 0..self.granted_inputs.len() {
            let i = self.granted_inputs[k] as usize;
            let g = &mut self.grants[i * w..(i + 1) * w];
            let o = bits::next_cyclic(g, self.in_ptr[i] as usize, n).expect("granted");
            self.in_ptr[i] = ((o + 1) % n) as u32;
            g.fill(0);
            m.add(i, o);
        }
        self.granted_inputs.clear();
        clear_columns(&mut self.cols, w, &mut self.touched);
    }
}
