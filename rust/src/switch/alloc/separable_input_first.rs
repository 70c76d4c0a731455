//! Separable input-first round-robin allocator (Dally & Towles, *Principles
//! and Practices of Interconnection Networks*, 2004, Sec. 19.3): one bank of
//! round-robin arbiters per side, single pass. Each input's arbiter picks one
//! of its requested outputs; each output's arbiter then picks one of the
//! inputs that picked it. An input arbiter advances past its pick only if the
//! pick won at the output, an output arbiter past the input it granted (D&T
//! 19.3.1: updating losing input arbiters would let them skip requests and
//! starve).

use super::{bits, clear_columns, Allocator, Matching, Requests};

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
