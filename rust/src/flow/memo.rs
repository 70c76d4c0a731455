//! Memoized max-min solves: a filling is a pure function of its input (the
//! running flows' paths and caps in running order, the fixed capacities), so
//! a solve whose input equals an earlier one bit for bit takes that one's
//! rates and full flags instead of filling again. Exact: the input is
//! compared in full (coefficients and caps as f64 bits), a hash only finds
//! the candidate. Diffusion steps repeat the same flow sets step after step
//! (docs/fidelity.md "Speed levers").
//!
//! Bounded: at most [`MAX_ENTRIES`] path entries are kept (then the table is
//! cleared); after [`PROBE_SOLVES`] solves with under one hit in
//! [`MIN_HIT_RATIO`] the memo turns itself off for the run (misses cost a
//! hash and a copy of the input; [`SolveMemo::with_pauses`] judges windows of lookups and pauses instead). `FLITSIM_FLOW_SOLVE_MEMO_DEBUG=1` prints
//! each simulator's counts when it ends.

use crate::engine::FastMap;

/// Most path entries (resource, coefficient) kept over all memoized solves.
const MAX_ENTRIES: usize = 1 << 21;
/// Solves before the hit rate is judged.
const PROBE_SOLVES: u64 = 1 << 15;
/// Off if fewer than one hit per this many solves by then.
const MIN_HIT_RATIO: u64 = 20;

#[derive(Debug, Clone)]
struct Entry {
    off: Vec<u32>,
    path: Vec<(u32, u64)>,
    cap: Vec<u64>,
    rate: Vec<f64>,
    used: Vec<u32>,
    full: Vec<bool>,
}

/// The memo table (see the module).
#[derive(Debug, Clone)]
pub struct SolveMemo {
    on: bool,
    /// Solves before the hit rate is judged; off below one hit per `min_hit_ratio` solves.
    probe_solves: u64,
    min_hit_ratio: u64,
    /// [`SolveMemo::with_pauses`]: judged per window of `probe_solves` lookups;
    /// a window under the ratio pauses lookups for this many solves, then it
    /// looks again (a diffusion run's warm-up steps miss, its later steps hit).
    pause_solves: Option<u64>,
    paused_left: u64,
    win_solves: u64,
    win_hits: u64,
    table: FastMap<u64, Entry>,
    entries: usize,
    solves: u64,
    hits: u64,
}

fn mix(h: u64, v: u64) -> u64 {
    (h ^ v).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29)
}

fn key(off: &[u32], path: &[(u32, f64)], cap: &[f64]) -> u64 {
    let mut h = mix(0, off.len() as u64);
    for &(r, c) in path {
        h = mix(mix(h, r as u64), c.to_bits());
    }
    for &c in cap {
        h = mix(h, c.to_bits());
    }
    for &o in off {
        h = mix(h, o as u64);
    }
    h
}

impl SolveMemo {
    /// On unless `FLITSIM_FLOW_SOLVE_MEMO=0`.
    pub fn new() -> Self {
        let on = std::env::var("FLITSIM_FLOW_SOLVE_MEMO").map_or(true, |v| v != "0");
        SolveMemo { on, probe_solves: PROBE_SOLVES, min_hit_ratio: MIN_HIT_RATIO, pause_solves: None, paused_left: 0, win_solves: 0, win_hits: 0, table: FastMap::default(), entries: 0, solves: 0, hits: 0 }
    }

    /// [`SolveMemo::new`] judged per window of `probe_solves` lookups: a window
    /// with under one hit in `min_hit_ratio` pauses lookups for `pause_solves`
    /// solves, then another window is tried (a memo whose misses cost a copy of
    /// a large input pays only where it mostly hits). Callers ask
    /// [`SolveMemo::looking`] before building a lookup's input.
    pub fn with_pauses(probe_solves: u64, min_hit_ratio: u64, pause_solves: u64) -> Self {
        let mut m = Self::new();
        m.probe_solves = probe_solves;
        m.min_hit_ratio = min_hit_ratio;
        m.pause_solves = Some(pause_solves);
        m
    }

    /// Whether to look up at this solve (false when off or paused; a paused
    /// solve counts down the pause).
    pub fn looking(&mut self) -> bool {
        if !self.on {
            return false;
        }
        if self.paused_left > 0 {
            self.paused_left -= 1;
            return false;
        }
        true
    }

    /// Whether lookups are made.
    pub fn is_on(&self) -> bool {
        self.on
    }

    /// Turn it on or off (off drops the table).
    pub fn set_on(&mut self, on: bool) {
        self.on = on;
        if !on {
            self.table.clear();
            self.entries = 0;
        }
    }

    /// The rates, used resources and their full flags of an earlier solve of
    /// exactly this input, with its hash; (None, hash) otherwise.
    pub fn get(&mut self, off: &[u32], path: &[(u32, f64)], cap: &[f64]) -> (Option<(&[f64], &[u32], &[bool])>, u64) {
        self.solves += 1;
        if let Some(p) = self.pause_solves {
            self.win_solves += 1;
            if self.win_solves == self.probe_solves {
                if self.win_hits * self.min_hit_ratio < self.win_solves {
                    self.paused_left = p;
                }
                self.win_solves = 0;
                self.win_hits = 0;
            }
        } else if self.solves == self.probe_solves && self.hits * self.min_hit_ratio < self.solves {
            self.set_on(false);
        }
        if !self.on {
            return (None, 0);
        }
        let h = key(off, path, cap);
        match self.table.get(&h) {
            Some(e)
                if e.off == off
                    && e.path.len() == path.len()
                    && e.path.iter().zip(path).all(|(a, b)| a.0 == b.0 && a.1 == b.1.to_bits())
                    && e.cap.iter().zip(cap).all(|(a, b)| *a == b.to_bits()) =>
            {
                self.hits += 1;
                self.win_hits += 1;
                (Some((&e.rate, &e.used, &e.full)), h)
            }
            _ => (None, h),
        }
    }

    /// Keep a solve's result (`full` indexed by resource, read at `used`).
    #[allow(clippy::too_many_arguments)]
    pub fn put(&mut self, h: u64, off: &[u32], path: &[(u32, f64)], cap: &[f64], rate: &[f64], used: &[u32], full: &[bool]) {
        if !self.on || self.paused_left > 0 {
            return;
        }
        if self.entries + path.len() > MAX_ENTRIES {
            self.table.clear();
            self.entries = 0;
        }
        let e = Entry {
            off: off.to_vec(),
            path: path.iter().map(|&(r, c)| (r, c.to_bits())).collect(),
            cap: cap.iter().map(|c| c.to_bits()).collect(),
            rate: rate.to_vec(),
            used: used.to_vec(),
            full: used.iter().map(|&r| full[r as usize]).collect(),
        };
        self.entries += path.len();
        if let Some(old) = self.table.insert(h, e) {
            self.entries -= old.path.len();
        }
    }

    /// (solves looked up, hits).
    pub fn counts(&self) -> (u64, u64) {
        (self.solves, self.hits)
    }
}

impl Drop for SolveMemo {
    fn drop(&mut self) {
        if std::env::var("FLITSIM_FLOW_SOLVE_MEMO_DEBUG").is_ok_and(|v| v == "1") {
            eprintln!("solve memo: {} solves, {} hits, on {}, {} entries", self.solves, self.hits, self.on, self.entries);
        }
    }
}

impl Default for SolveMemo {
    fn default() -> Self {
        Self::new()
    }
}
