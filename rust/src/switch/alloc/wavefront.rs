//! Wavefront allocator (Tamir & Chi, "Symmetric Crossbar Arbiters for VLSI
//! Communication Switches", IEEE TPDS 4(1), 1993; Dally & Towles Sec. 19.4).
//!
//! The N x N request matrix is swept by diagonals: cell (i, o) lies on
//! diagonal (i + o) mod N. Starting from the priority diagonal, each diagonal's
//! cells are independent (no two share a row or column), so each grants if it
//! is requested and its row and column are still free; the wave then moves to
//! the next diagonal. After N diagonals the matching is maximal. The priority
//! diagonal rotates by one every allocation, so no request starves.

use super::{bits, Allocator, Matching, Requests, NONE};

pub struct Wavefront {
    n: usize,
    priority_diag: usize,
}

impl Wavefront {
    pub fn new(n: usize) -> Self {
        Wavefront { n, priority_diag: 0 }
    }
}

impl Allocator for Wavefront {
    fn name(&self) -> &'static str {
        "wavefront"
    }

    fn allocate(&mut self, req: &Requests, m: &mut Matching) {
        let n = self.n;
        // Only rows with requests can hold a granting cell, so the sweep
        // visits (diagonal, active row) pairs: O(N x active inputs).
        for d in 0..n {
            let diag = (self.priority_diag + d) % n;
            for &i in &req.active {
                let i = i as usize;
                if m.input_to_output[i] != NONE {
                    continue;
                }
                let o = (diag + n - i) % n;
                if m.output_to_input[o] == NONE && bits::get(req.row(i), o) {
                    m.add(i, o);
                }
            }
        }
        self.priority_diag = (self.priority_diag + 1) % n;
    }
}
