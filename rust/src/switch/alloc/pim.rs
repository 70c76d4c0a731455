//! Parallel iterative matching (Anderson, Owicki, Saxe, Thacker, "High-Speed
//! Switch Scheduling for Local-Area Networks", ACM TOCS 11(4), 1993).
//!
//! Each iteration, over the inputs and outputs still unmatched:
//! 1. Request: every unmatched input requests every output it has a cell for.
//! 2. Grant: every unmatched output that received requests grants one of them
//!    uniformly at random.
//! 3. Accept: every input that received grants accepts one uniformly at random.
//!
//! With every VOQ backlogged, one iteration matches an input unless no output
//! grants it, so throughput is 1 - (1 - 1/N)^N, tending to 1 - 1/e = 0.632
//! (Anderson et al. 1993, Sec. 3). Choices use a seeded PCG stream, so runs are
//! reproducible.

use super::{bits, clear_columns, columns, Allocator, Matching, Requests};
use crate::engine::SimRng;

pub struct Pim {
    iterations: u32,
    rng: SimRng,
    cols: Vec<u64>,
    touched: Vec<u32>,
    grants: Vec<u64>,
    granted_inputs: Vec<u32>,
}

impl Pim {
    pub fn new(n: usize, iterations: u32, seed: u64) -> Self {
        let w = bits::words(n);
        Pim {
            iterations,
            rng: SimRng::substream(seed, 0x5049_4d),
            cols: vec![0; n * w],
            touched: Vec::with_capacity(n),
            grants: vec![0; n * w],
            granted_inputs: Vec::with_capacity(n),
        }
    }
}

impl Allocator for Pim {
    fn name(&self) -> &'static str {
        "pim"
    }

    fn allocate(&mut self, req: &Requests, m: &mut Matching) {
        let w = req.w;
        for _ in 0..self.iterations {
            columns(req, m, &mut self.cols, &mut self.touched);
            if self.touched.is_empty() {
                break;
            }
            // Grant: uniform choice among requesting inputs.
            for k in 0..self.touched.len() {
                let o = self.touched[k] as usize;
                let col = &self.cols[o * w..(o + 1) * w];
                let c = bits::count(col);
                let i = bits::nth(col, self.rng.below(c as u64) as u32);
                let g = &mut self.grants[i * w..(i + 1) * w];
                if bits::is_empty(g) {
                    self.granted_inputs.push(i as u32);
                }
                bits::set(g, o);
            }
            // Accept: uniform choice among grants.
            for k in 0..self.granted_inputs.len() {
                let i = self.granted_inputs[k] as usize;
                let g = &mut self.grants[i * w..(i + 1) * w];
                let c = bits::count(g);
                let o = bits::nth(g, self.rng.below(c as u64) as u32);
                g.fill(0);
                m.add(i, o);
            }
            self.granted_inputs.clear();
            clear_columns(&mut self.cols, w, &mut self.touched);
        }
    }
}
