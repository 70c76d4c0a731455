//! Max-min fair rates by progressive filling (Bertsekas & Gallager, Data
//! Networks, 2nd ed., sec. 6.5.2), weighted: flow `f` puts `coef` x its rate on
//! each resource of its path (a transfer sprayed over E ports puts 1/E of its
//! rate on each), and may not exceed its own `cap`.
//!
//! All flows rise together; a resource that fills freezes every flow crossing
//! it; a flow that reaches its cap freezes alone. The result is the unique
//! max-min fair allocation. Pure arithmetic in a fixed order: bit-identical
//! for identical inputs.

/// Relative slack under which a resource counts as full.
const FULL: f64 = 1e-9;

/// Reusable scratch for [`max_min`] (no allocation per call once warm).
#[derive(Debug, Default, Clone)]
pub struct Filler {
    rem: Vec<f64>,
    weight: Vec<f64>,
    frozen: Vec<bool>,
    /// Per resource: the flows crossing it (CSR), rebuilt per call.
    pub res_off: Vec<u32>,
    pub res_flows: Vec<u32>,
    fill: Vec<u32>,
    /// Resources the last call's flows touch (sorted); only these are valid.
    used: Vec<u32>,
    /// Scratch of the filling loop: live resources, live capped flows.
    live: Vec<u32>,
    capped: Vec<u32>,
    at_cap: Vec<u32>,
    seen: Vec<bool>,
    /// Resources that became full in the last call (valid for resources the
    /// flows touch; others read false).
    pub full: Vec<bool>,
}

/// Flows as CSR: flow `f` crosses `path[off[f]..off[f+1]]` = (resource, coef).
pub struct Flows<'a> {
    pub off: &'a [u32],
    pub path: &'a [(u32, f64)],
    pub cap: &'a [f64],
}

impl Filler {
    /// Resources the last call's flows touch, in index order.
    pub fn used(&self) -> &[u32] {
        &self.used
    }

    /// Put the state a [`Filler::max_min`] call leaves behind that callers
    /// read (`used`, `full`) back as a call with these results left it: the
    /// previous call's resources read not full, `used`'s get `full` (a memoized
    /// solve, `FlowSim`). `used` sorted, one flag per entry.
    pub fn restore(&mut self, capacity_len: usize, used: &[u32], full: &[bool]) {
        if self.full.len() != capacity_len {
            return; // never filled: nothing to restore over (callers fill first)
        }
        for &r in &self.used {
            self.full[r as usize] = false;
        }
        self.used.clear();
        self.used.extend_from_slice(used);
        for (&r, &f) in used.iter().zip(full) {
            self.full[r as usize] = f;
        }
    }

    /// Shared set-up of a filling: zero rates, per-resource state of the
    /// resources `flows` touch (sorted into `used`), their weights and the CSR
    /// of flows per resource (`res_off`, `res_flows`). Returns (flows, resources).
    #[inline]
    fn prepare(&mut self, capacity: &[f64], flows: &Flows<'_>, rate: &mut Vec<f64>) -> (usize, usize) {
        let nf = flows.cap.len();
        let nr = capacity.len();
        rate.clear();
        rate.resize(nf, 0.0);
        if self.rem.len() != nr {
            // Per-resource state, reset below only where flows touch it.
            self.rem = vec![0.0; nr];
            self.weight = vec![0.0; nr];
            self.full = vec![false; nr];
            self.res_off = vec![0; nr + 1];
            self.seen = vec![false; nr];
        }
        for &r in &self.used {
            self.full[r as usize] = false;
            self.res_off[r as usize + 1] = 0;
        }
        self.res_off[0] = 0;
        self.used.clear();
        self.frozen.clear();
        self.frozen.resize(nf, false);
        // Resources the flows touch, in first-seen order (deterministic).
        for &(r, _) in flows.path {
            let ru = r as usize;
            if !self.seen[ru] {
                self.seen[ru] = true;
                self.used.push(r);
                self.rem[ru] = capacity[ru];
                self.weight[ru] = 0.0;
                self.res_off[ru + 1] = 0;
            }
        }
        for &r in &self.used {
            self.seen[r as usize] = false;
        }
        self.used.sort_unstable();
        for &(r, c) in flows.path {
            self.weight[r as usize] += c;
            self.res_off[r as usize + 1] += 1;
        }
        // CSR of flows per resource over the used resources, in index order
        // (a count sits in res_off[r + 1] until r is reached; unused entries
        // are stale and never read).
        let mut acc = 0u32;
        for &r in &self.used {
            let cnt = self.res_off[r as usize + 1];
            self.res_off[r as usize] = acc;
            acc += cnt;
            self.res_off[r as usize + 1] = acc;
        }
        self.res_flows.clear();
        self.res_flows.resize(flows.path.len(), 0);
        // (only the used resources' entries are set and read: no reset of all)
        if self.fill.len() < nr.max(1) {
            self.fill.resize(nr.max(1), 0);
        }
        for &r in &self.used {
            self.fill[r as usize] = self.res_off[r as usize];
        }
        for f in 0..nf {
            for k in flows.off[f]..flows.off[f + 1] {
                let r = flows.path[k as usize].0 as usize;
                self.res_flows[self.fill[r] as usize] = f as u32;
                self.fill[r] += 1;
            }
        }
        (nf, nr)
    }

    /// Max-min fair rates of `flows` over resources of capacity `capacity`
    /// into `rate` (same length as `flows.cap`).
    pub fn max_min(&mut self, capacity: &[f64], flows: &Flows<'_>, rate: &mut Vec<f64>) {
        let (nf, _nr) = self.prepare(capacity, flows, rate);
        let mut level = 0.0f64;
        let mut left = nf;
        // Live resources (weight > 0, not full: the only ones whose `rem` is
        // read again) and live capped flows, each in the order the full scan
        // visits them: the same arithmetic in the same order as scanning all.
        self.live.clear();
        for &r in &self.used {
            if self.weight[r as usize] > 0.0 {
                self.live.push(r);
            }
        }
        // Capped flows by (cap, index): the smallest unfrozen cap bounds the
        // step ((cap - level).max(0) is monotone in cap, so its minimum is
        // the minimum cap's), and the flows reaching their caps at a level
        // are a prefix of this order (cap - level <= FULL x cap is monotone
        // in cap: cap - level is exact near the level, Sterbenz), frozen in
        // index order as a scan of all flows would.
        self.capped.clear();
        for f in 0..nf {
            if flows.cap[f].is_finite() {
                self.capped.push(f as u32);
            }
        }
        let caps = flows.cap;
        self.capped.sort_unstable_by(|&a, &b| caps[a as usize].total_cmp(&caps[b as usize]).then(a.cmp(&b)));
        let mut ci = 0usize;
        let any_uncapped = self.capped.len() < nf;
        while left > 0 {
            // Next level at which a resource fills or a flow reaches its cap.
            let mut step = f64::INFINITY;
            for &r in &self.live {
                let r = r as usize;
                if self.weight[r] > 0.0 {
                    step = step.min(self.rem[r].max(0.0) / self.weight[r]);
                }
            }
            while ci < self.capped.len() && self.frozen[self.capped[ci] as usize] {
                ci += 1;
            }
            if ci < self.capped.len() {
                step = step.min((flows.cap[self.capped[ci] as usize] - level).max(0.0));
            }
            if any_uncapped && !step.is_finite() {
                // Unconstrained flows (no resource, no cap): cannot happen for
                // fabric paths; give them an infinite rate.
                for f in 0..nf {
                    if !self.frozen[f] {
                        rate[f] = f64::INFINITY;
                    }
                }
                break;
            }
            level += step;
            for i in 0..self.live.len() {
                let r = self.live[i] as usize;
                if self.weight[r] > 0.0 {
                    self.rem[r] -= step * self.weight[r];
                }
            }
            // Freeze flows at full resources, then flows at their caps.
            for i in 0..self.live.len() {
                let r = self.live[i] as usize;
                if !self.full[r] && self.weight[r] > 0.0 && self.rem[r] <= FULL * capacity[r] {
                    self.full[r] = true;
                    for k in self.res_off[r]..self.res_off[r + 1] {
                        let f = self.res_flows[k as usize] as usize;
                        if !self.frozen[f] {
                            self.freeze(f, level, flows, rate);
                            left -= 1;
                        }
                    }
                }
            }
            self.at_cap.clear();
            let mut k = ci;
            while k < self.capped.len() {
                let f = self.capped[k] as usize;
                k += 1;
                if self.frozen[f] {
                    continue;
                }
                if flows.cap[f] - level <= FULL * flows.cap[f] {
                    self.at_cap.push(f as u32);
                } else {
                    break;
                }
            }
            self.at_cap.sort_unstable();
            for i in 0..self.at_cap.len() {
                let f = self.at_cap[i] as usize;
                self.freeze(f, level, flows, rate);
                left -= 1;
            }
            // Drop what can no longer constrain (order kept).
            let (w, full) = (&self.weight, &self.full);
            self.live.retain(|&r| w[r as usize] > 0.0 && !full[r as usize]);
        }
    }

    #[cfg(test)]
    pub(crate) fn reference_max_min(&mut self, capacity: &[f64], flows: &Flows<'_>, rate: &mut Vec<f64>) {
        let (nf, _nr) = self.prepare(capacity, flows, rate);
        let mut level = 0.0f64;
        let mut left = nf;
        while left > 0 {
            // Next level at which a resource fills or a flow reaches its cap.
            let mut step = f64::INFINITY;
            for &r in &self.used {
                let r = r as usize;
                if self.weight[r] > 0.0 && !self.full[r] {
                    step = step.min(self.rem[r].max(0.0) / self.weight[r]);
                }
            }
            for f in 0..nf {
                if !self.frozen[f] {
                    step = step.min((flows.cap[f] - level).max(0.0));
                }
            }
            if !step.is_finite() {
                // Unconstrained flows (no resource, no cap): cannot happen for
                // fabric paths; give them an infinite rate.
                for f in 0..nf {
                    if !self.frozen[f] {
                        rate[f] = f64::INFINITY;
                    }
                }
                break;
            }
            level += step;
            for i in 0..self.used.len() {
                let r = self.used[i] as usize;
                if self.weight[r] > 0.0 {
                    self.rem[r] -= step * self.weight[r];
                }
            }
            // Freeze flows at full resources, then flows at their caps.
            for i in 0..self.used.len() {
                let r = self.used[i] as usize;
                if !self.full[r] && self.weight[r] > 0.0 && self.rem[r] <= FULL * capacity[r] {
                    self.full[r] = true;
                    for k in self.res_off[r]..self.res_off[r + 1] {
                        let f = self.res_flows[k as usize] as usize;
                        if !self.frozen[f] {
                            self.freeze(f, level, flows, rate);
                            left -= 1;
                        }
                    }
                }
            }
            for f in 0..nf {
                if !self.frozen[f] && flows.cap[f].is_finite() && flows.cap[f] - level <= FULL * flows.cap[f] {
                    self.freeze(f, level, flows, rate);
                    left -= 1;
                }
            }
        }
    }

    fn freeze(&mut self, f: usize, level: f64, flows: &Flows<'_>, rate: &mut [f64]) {
        self.frozen[f] = true;
        rate[f] = level;
        for k in flows.off[f]..flows.off[f + 1] {
            let (r, c) = flows.path[k as usize];
            self.weight[r as usize] -= c;
            if self.weight[r as usize] < 1e-12 {
                self.weight[r as usize] = 0.0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn solve(cap: &[f64], paths: &[Vec<(u32, f64)>], fcap: &[f64]) -> Vec<f64> {
        let mut off = vec![0u32];
        let mut path = Vec::new();
        for p in paths {
            path.extend_from_slice(p);
            off.push(path.len() as u32);
        }
        let mut r = Vec::new();
        Filler::default().max_min(cap, &Flows { off: &off, path: &path, cap: fcap }, &mut r);
        r
    }

    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]
        /// The optimized filling (live lists, sorted caps) equals the plain
        /// full scan bit for bit, on random flow sets with shared resources,
        /// spray coefficients, equal and infinite caps; warm scratch reused.
        #[test]
        fn optimized_filling_equals_the_full_scan(
            caps_r in proptest::collection::vec(1u32..64, 1..24),
            flows in proptest::collection::vec((proptest::collection::vec((0u32..24, 1u32..5), 1..5), 0u32..40), 1..60),
        ) {
            let nr = caps_r.len() as u32;
            let capacity: Vec<f64> = caps_r.iter().map(|&c| c as f64 * 0.37).collect();
            let mut off = vec![0u32];
            let mut path = Vec::new();
            let mut fcap = Vec::new();
            for (p, c) in &flows {
                let mut seen = Vec::new();
                for &(r, k) in p {
                    let r = r % nr;
                    if !seen.contains(&r) {
                        seen.push(r);
                        path.push((r, 1.0 / k as f64));
                    }
                }
                off.push(path.len() as u32);
                // 0..9: no cap; else a cap on a coarse grid (ties between flows)
                fcap.push(if *c < 10 { f64::INFINITY } else { (*c / 3) as f64 * 0.25 });
            }
            let fl = Flows { off: &off, path: &path, cap: &fcap };
            let mut a = Filler::default();
            let mut b = Filler::default();
            let (mut ra, mut rb) = (Vec::new(), Vec::new());
            for _ in 0..2 {
                a.max_min(&capacity, &fl, &mut ra);
                b.reference_max_min(&capacity, &fl, &mut rb);
                let ba: Vec<u64> = ra.iter().map(|x| x.to_bits()).collect();
                let bb: Vec<u64> = rb.iter().map(|x| x.to_bits()).collect();
                prop_assert_eq!(ba, bb);
                prop_assert_eq!(&a.full, &b.full);
            }
        }
    }

    #[test]
    fn textbook_example() {
        // Links A (cap 1) and B (cap 1); flow 0 crosses A and B, flow 1 only
        // A, flows 2 and 3 only B.
        let inf = f64::INFINITY;
        let r = solve(&[1.0, 1.0], &[vec![(0, 1.0), (1, 1.0)], vec![(0, 1.0)], vec![(1, 1.0)], vec![(1, 1.0)]], &[inf; 4]);
        // B: 3 flows share 1 -> 1/3 each fills B first; then A: flow 1 gets 1 - 1/3.
        assert!((r[0] - 1.0 / 3.0).abs() < 1e-12 && (r[2] - 1.0 / 3.0).abs() < 1e-12 && (r[3] - 1.0 / 3.0).abs() < 1e-12);
        assert!((r[1] - 2.0 / 3.0).abs() < 1e-12, "{r:?}");
    }

    #[test]
    fn caps_and_coefficients() {
        // One resource of 10; flow 0 capped at 2, flow 1 sprays half its rate on it
        // (coef 0.5): after flow 0 freezes at 2, flow 1 gets (10 - 2) / 0.5 = 16.
        let r = solve(&[10.0], &[vec![(0, 1.0)], vec![(0, 0.5)]], &[2.0, f64::INFINITY]);
        assert!((r[0] - 2.0).abs() < 1e-12 && (r[1] - 16.0).abs() < 1e-9, "{r:?}");
    }
}

