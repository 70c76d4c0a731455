//! Oldest-first (age-based) allocation: requests are served in order of the
//! age of the packet behind them, oldest first, each granted if its input and
//! output are still free (a greedy maximal matching; Dally & Towles Sec. 19.5
//! on priority by age). Ties go to the lower input, then the lower output.

use super::{bits, Allocator, Matching, Requests, NONE};

pub struct OldestFirst {
    order: Vec<(u64, u32, u32)>,
}

impl OldestFirst {
    pub fn new(n: usize) -> Self {
        OldestFirst { order: Vec::with_capacity(n * 4) }
    }
}

impl Allocator for OldestFirst {
    fn name(&self) -> &'static str {
        "oldest_first"
    }

    fn needs_ages(&self) -> bool {
        true
    }

    fn allocate(&mut self, req: &Requests, m: &mut Matching) {
        let n = req.n;
        self.order.clear();
        for &i in &req.active {
            for o in bits::iter(req.row(i as usize)) {
                self.order.push((req.ages[i as usize * n + o], i, o as u32));
            }
        }
        self.order.sort_unstable();
        for &(_, i, o) in &self.order {
            if m.input_to_output[i as usize] == NONE && m.output_to_input[o as usize] == NONE {
                m.add(i as usize, o as usize);
            }
        }
    }
}
