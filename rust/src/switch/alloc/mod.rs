//! Switch allocators: each matches inputs to outputs for one crossbar slot.
//!
//! One trait, one file per algorithm, chosen by name ([`by_name`]), as in
//! BookSim2. An allocator sees only free inputs and free outputs that can take
//! a packet (credit masks are applied before arbitration, as in US 2023/0070690
//! A1); it returns a matching (each input and output used at most once) and
//! keeps its own priority state (pointers, RNG) between calls.

mod islip;
mod oldest_first;
mod pim;
mod separable_input_first;
mod separable_output_first;
mod wavefront;

pub use islip::Islip;
pub use oldest_first::OldestFirst;
pub use pim::Pim;
pub use separable_input_first::SeparableInputFirst;
pub use separable_output_first::SeparableOutputFirst;
pub use wavefront::Wavefront;

use super::bits;
use crate::error::{FlitsimError, Result};

/// Sentinel for "unmatched".
pub const NONE: u32 = u32::MAX;

/// The request matrix of one allocation round, in preallocated storage.
#[derive(Debug, Clone)]
pub struct Requests {
    /// Ports (inputs = outputs = n).
    pub n: usize,
    /// Words per bitset row.
    pub w: usize,
    /// Row `i` (words `i*w..(i+1)*w`): outputs requested by input `i`.
    pub rows: Vec<u64>,
    /// Inputs with a non-empty row this round, ascending.
    pub active: Vec<u32>,
    /// `ages[i*n+o]`: creation cycle of the oldest packet behind request
    /// (i, o) (smaller = older); filled only for allocators that ask for it.
    pub ages: Vec<u64>,
}

impl Requests {
    pub fn new(n: usize, with_ages: bool) -> Self {
        let w = bits::words(n);
        Requests { n, w, rows: vec![0; n * w], active: Vec::with_capacity(n), ages: if with_ages { vec![0; n * n] } else { Vec::new() } }
    }
    #[inline]
    pub fn row(&self, i: usize) -> &[u64] {
        &self.rows[i * self.w..(i + 1) * self.w]
    }
    #[inline]
    pub fn row_mut(&mut self, i: usize) -> &mut [u64] {
        &mut self.rows[i * self.w..(i + 1) * self.w]
    }
    /// Clear the rows of the active inputs and the active list.
    pub fn clear(&mut self) {
        for k in 0..self.active.len() {
            let i = self.active[k] as usize;
            bits::zero(&mut self.rows[i * self.w..(i + 1) * self.w]);
        }
        self.active.clear();
    }
}

/// Scratch state of a request-grant-accept round (iSLIP, PIM, RRM): the
/// unmatched request matrix by column, the outputs that have requests, and
/// per input the outputs that granted it. Preallocated, reused every round.
#[derive(Debug, Clone)]
pub(crate) struct GrantScratch {
    pub cols: Vec<u64>,
    pub touched: Vec<u32>,
    pub grants: Vec<u64>,
    pub granted_inputs: Vec<u32>,
}

impl GrantScratch {
    pub fn new(n: usize) -> Self {
        let w = bits::words(n);
        GrantScratch { cols: vec![0; n * w], touched: Vec::with_capacity(n), grants: vec![0; n * w], granted_inputs: Vec::with_capacity(n) }
    }
}

/// The result of one allocation: `input_to_output[i]` (or [`NONE`]) and the
/// list of matched inputs.
#[derive(Debug, Clone)]
pub struct Matching {
    pub input_to_output: Vec<u32>,
    pub output_to_input: Vec<u32>,
    pub matched: Vec<u32>,
}

impl Matching {
    pub fn new(n: usize) -> Self {
        Matching { input_to_output: vec![NONE; n], output_to_input: vec![NONE; n], matched: Vec::with_capacity(n) }
    }
    /// Forget the previous matching (touches only matched entries).
    pub fn clear(&mut self) {
        for &i in &self.matched {
            let o = self.input_to_output[i as usize];
            self.output_to_input[o as usize] = NONE;
            self.input_to_output[i as usize] = NONE;
        }
        self.matched.clear();
    }
    #[inline]
    pub fn add(&mut self, i: usize, o: usize) {
        debug_assert!(self.input_to_output[i] == NONE && self.output_to_input[o] == NONE);
        self.input_to_output[i] = o as u32;
        self.output_to_input[o] = i as u32;
        self.matched.push(i as u32);
    }
}

/// A switch allocator (input-output matching for one crossbar slot).
pub trait Allocator: Send {
    /// The allocator's name as accepted by [`by_name`].
    fn name(&self) -> &'static str;
    /// Whether [`Requests::ages`] must be filled.
    fn needs_ages(&self) -> bool {
        false
    }
    /// Compute a matching for `req` into `m` (which arrives cleared).
    fn allocate(&mut self, req: &Requests, m: &mut Matching);
}

/// Allocator names accepted by [`by_name`].
pub const NAMES: &[&str] = &["islip", "pim", "separable_input_first", "separable_output_first", "wavefront", "oldest_first"];

/// Build an allocator by name for `n` ports.
///
/// `iterations` applies to `islip` and `pim` (>= 1); the single-pass
/// allocators require 1. `seed` drives PIM's random choices.
///
/// # Errors
/// `Config` for an unknown name or an invalid iteration count.
pub fn by_name(name: &str, n: usize, iterations: u32, seed: u64) -> Result<Box<dyn Allocator>> {
    let iterative = matches!(name, "islip" | "pim");
    if iterations == 0 || (!iterative && iterations != 1) {
        return Err(FlitsimError::config(
            "allocator.iterations",
            iterations,
            if iterative { "at least 1" } else { "1 (only islip and pim iterate)" },
        ));
    }
    Ok(match name {
        "islip" => Box::new(Islip::new(n, iterations)),
        "pim" => Box::new(Pim::new(n, iterations, seed)),
        "separable_input_first" => Box::new(SeparableInputFirst::new(n)),
        "separable_output_first" => Box::new(SeparableOutputFirst::new(n)),
        "wavefront" => Box::new(Wavefront::new(n)),
        "oldest_first" => Box::new(OldestFirst::new(n)),
        _ => return Err(FlitsimError::config("allocator.name", name, format!("one of {}", NAMES.join(", ")))),
    })
}

/// Transpose the active rows into per-output columns (inputs requesting each
/// output), restricted to inputs still unmatched. Shared by the output-side
/// arbiters; `cols` has `n * w` words and arrives zeroed.
#[inline]
pub(crate) fn columns(req: &Requests, m: &Matching, cols: &mut [u64], touched: &mut Vec<u32>) {
    let w = req.w;
    for &i in &req.active {
        let i = i as usize;
        if m.input_to_output[i] != NONE {
            continue;
        }
        let (iw, ib) = (i >> 6, 1u64 << (i & 63));
        for (wi, &word) in req.row(i).iter().enumerate() {
            let mut b = word;
            while b != 0 {
                let o = wi << 6 | b.trailing_zeros() as usize;
                b &= b - 1;
                if m.output_to_input[o] != NONE {
                    continue;
                }
                let col = &mut cols[o * w..(o + 1) * w];
                if col.iter().all(|&x| x == 0) {
                    touched.push(o as u32);
                }
                col[iw] |= ib;
            }
        }
    }
}

/// Zero the columns listed in `touched`.
#[inline]
pub(crate) fn clear_columns(cols: &mut [u64], w: usize, touched: &mut Vec<u32>) {
    for &o in touched.iter() {
        bits::zero(&mut cols[o as usize * w..(o as usize + 1) * w]);
    }
    touched.clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every allocator returns a valid matching (no input or output twice,
    /// only requested pairs) and, with one request, grants it.
    #[test]
    fn all_allocators_return_valid_matchings() {
        let n = 70;
        let mut rng = crate::engine::SimRng::new(5);
        for name in NAMES {
            let iters = if matches!(*name, "islip" | "pim") { 2 } else { 1 };
            let mut a = by_name(name, n, iters, 1).unwrap();
            let mut req = Requests::new(n, a.needs_ages());
            let mut m = Matching::new(n);
            for _round in 0..50 {
                req.clear();
                for i in 0..n {
                    for o in 0..n {
                        if rng.bernoulli(0.1) {
                            bits::set(req.row_mut(i), o);
                            if a.needs_ages() {
                                req.ages[i * n + o] = rng.below(1000);
                            }
                        }
                    }
                    if !bits::is_empty(req.row(i)) {
                        req.active.push(i as u32);
                    }
                }
                m.clear();
                a.allocate(&req, &mut m);
                let mut out_used = vec![false; n];
                assert!(!m.matched.is_empty(), "{name} matched nothing");
                for &i in &m.matched {
                    let o = m.input_to_output[i as usize] as usize;
                    assert!(bits::get(req.row(i as usize), o), "{name}: unrequested pair");
                    assert!(!out_used[o], "{name}: output twice");
                    out_used[o] = true;
                    assert_eq!(m.output_to_input[o], i);
                }
            }
        }
    }

    fn full_requests(n: usize, ages: bool) -> Requests {
        let mut req = Requests::new(n, ages);
        for i in 0..n {
            for o in 0..n {
                bits::set(req.row_mut(i), o);
            }
            req.active.push(i as u32);
        }
        req
    }

    /// McKeown 1999, Sec. III-B: with every VOQ backlogged, iSLIP's grant
    /// pointers start synchronized (all outputs grant input 0, one match) and
    /// the slip rule moves them apart by one accepted grant per round, so
    /// round k (0-based) matches k + 1 pairs until every round is a perfect
    /// matching. The same allocator without the slip rule (separable
    /// output-first = RRM) moves every pointer past its grant and stays far
    /// from perfect in this fixed request pattern.
    #[test]
    fn islip_pointers_desynchronize_under_full_load() {
        let n = 4;
        let req = full_requests(n, false);
        let mut a = by_name("islip", n, 1, 0).unwrap();
        let mut m = Matching::new(n);
        let mut sizes = vec![];
        for _ in 0..8 {
            m.clear();
            a.allocate(&req, &mut m);
            sizes.push(m.matched.len());
        }
        assert_eq!(sizes, vec![1, 2, 3, 4, 4, 4, 4, 4]);
    }

    /// Wavefront (Tamir & Chi 1993) and oldest-first are maximal: no request is
    /// left with both its input and output unmatched.
    #[test]
    fn wavefront_and_oldest_first_are_maximal() {
        let n = 9;
        let mut rng = crate::engine::SimRng::new(3);
        for name in ["wavefront", "oldest_first"] {
            let mut a = by_name(name, n, 1, 0).unwrap();
            for _ in 0..200 {
                let mut req = Requests::new(n, true);
                for i in 0..n {
                    for o in 0..n {
                        if rng.bernoulli(0.3) {
                            bits::set(req.row_mut(i), o);
                            req.ages[i * n + o] = rng.below(50);
                        }
                    }
                    if !bits::is_empty(req.row(i)) {
                        req.active.push(i as u32);
                    }
                }
                let mut m = Matching::new(n);
                a.allocate(&req, &mut m);
                for i in 0..n {
                    for o in 0..n {
                        if bits::get(req.row(i), o) {
                            assert!(m.input_to_output[i] != NONE || m.output_to_input[o] != NONE, "{name}: ({i},{o}) left");
                        }
                    }
                }
            }
        }
    }

    /// The oldest request is always granted (priority by age).
    #[test]
    fn oldest_first_grants_the_oldest_request() {
        let n = 5;
        let mut req = full_requests(n, true);
        for k in 0..n * n {
            req.ages[k] = 100 + k as u64;
        }
        req.ages[3 * n + 2] = 7;
        let mut a = by_name("oldest_first", n, 1, 0).unwrap();
        let mut m = Matching::new(n);
        a.allocate(&req, &mut m);
        assert_eq!(m.input_to_output[3], 2);
    }

    /// PIM is random but seeded: the same seed gives the same matchings.
    #[test]
    fn pim_is_reproducible_from_its_seed() {
        let n = 16;
        let req = full_requests(n, false);
        let run = |seed| {
            let mut a = by_name("pim", n, 1, seed).unwrap();
            let mut out = vec![];
            for _ in 0..20 {
                let mut m = Matching::new(n);
                a.allocate(&req, &mut m);
                out.push(m.input_to_output.clone());
            }
            out
        };
        assert_eq!(run(1), run(1));
        assert_ne!(run(1), run(2));
    }

    #[test]
    fn unknown_name_and_bad_iterations_are_config_errors() {
        assert!(matches!(by_name("fifo", 4, 1, 0), Err(FlitsimError::Config { .. })));
        assert!(matches!(by_name("islip", 4, 0, 0), Err(FlitsimError::Config { .. })));
        assert!(matches!(by_name("wavefront", 4, 2, 0), Err(FlitsimError::Config { .. })));
    }
}
