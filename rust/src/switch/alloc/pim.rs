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

use super::{GrantScratch, bits, clear_columns, columns, Allocator, Matching, Requests};
use crate::engine::SimRng;

pub struct Pim {
    iterations: u32,
    rng: SimRng,
    s: GrantScratch,
}

impl Pim {
    pub fn new(n: usize, iterations: u32, seed: u64) -> Self {
        Pim {
            iterations,
            rng: SimRng::substream(seed, 0x0050_494d),
            s: GrantScratch::new(n),
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
            columns(req, m, &mut self.s.cols, &mut self.s.touched);
            if self.s.touched.is_empty() {
                break;
            }
            // Grant: uniform choice among requesting inputs.
            for k in 0..self.s.touched.len() {
                let o = self.s.touched[k] as usize;
                let col = &self.s.cols[o * w..(o + 1) * w];
                let c = bits::count(col);
                let i = bits::nth(col, self.rng.below(c as u64) as u32);
                let g = &mut self.s.grants[i * w..(i + 1) * w];
                if bits::is_empty(g) {
                    self.s.granted_inputs.push(i as u32);
                }
                bits::set(g, o);
            }
            // Accept: uniform choice among grants.
            for k in 0..self.s.granted_inputs.len() {
                let i = self.s.granted_inputs[k] as usize;
                let g = &mut self.s.grants[i * w..(i + 1) * w];
                let c = bits::count(g);
                let o = bits::nth(g, self.rng.below(c as u64) as u32);
                bits::zero(g);
                m.add(i, o);
            }
            self.s.granted_inputs.clear();
            clear_columns(&mut self.s.cols, w, &mut self.s.touched);
        }
    }
}
