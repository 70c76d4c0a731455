//! Max-min fair rates by progressive filling (Bertsekas & Gallager, Data
//! Networks, 2nd ed., sec. 6.5.2), weighted: flow `f` puts `coef` x its rate on
//! each resource of its path (a transfer sprayed over E ports puts 1/E of its
//! rate on each), and may not exceed its own `cap`.
//!
//! All flows rise together; a resource that fills freezes every flow crossing
//! it; a flow that reaches its cap freezes alone. The result is the unique
//! max-min fair allocation. Pure arithmetic in a fixed order: bit-identical
//! for identical inputs.
//!
//! The filling's arithmetic is that of the plain full scan (kept as
//! `reference_max_min` in the tests and compared bit for bit): a resource's
//! weight summed in path order, levels by the least quotient, every
//! constraining resource's remainder lowered by the step, full resources
//! frozen in index order with their flows in index order, then the flows at
//! their caps in index order. What makes it cheaper (docs/fidelity.md
//! "Speed levers"): the resources a call touches are found with a bitset
//! (index order without a sort), their state sits in dense slots, capped flows
//! are ordered by bucketing their few distinct caps (a sort beyond
//! [`CAP_BUCKETS`]), and a quotient is divided out only where it can be below
//! the least one so far.

/// Relative slack under which a resource counts as full.
const FULL: f64 = 1e-9;
/// Distinct cap values ordered by buckets (more: a sort by (cap, index)).
const CAP_BUCKETS: usize = 8;
/// No slot.
const NONE: u32 = u32::MAX;

/// Reusable scratch for [`Filler::max_min`] (no allocation per call once warm).
#[derive(Debug, Default, Clone)]
pub struct Filler {
    /// Per resource (index), scratch of the set-up: weight summed in path
    /// order, flow count (then fill position), slot.
    weight: Vec<f64>,
    count: Vec<u32>,
    slot: Vec<u32>,
    /// Resources seen in this call (one bit each; cleared as read).
    bits: Vec<u64>,
    /// Per slot (the call's resources in index order): remaining capacity,
    /// weight of the unfrozen flows (0 once it can no longer constrain: full,
    /// or no unfrozen flow left), full threshold, its flows (CSR into
    /// `slot_flows`, in index order).
    lrem: Vec<f64>,
    lw: Vec<f64>,
    lthr: Vec<f64>,
    slot_beg: Vec<u32>,
    slot_flows: Vec<u32>,
    /// Per path entry: its resource's slot.
    pslot: Vec<u32>,
    frozen: Vec<bool>,
    /// Slots that may still constrain (weight > 0), in index order.
    live: Vec<u32>,
    /// Resources the last call's flows touch (sorted); only these are valid.
    used: Vec<u32>,
    /// Capped flows by (cap, index); scratch of the cap levels.
    capped: Vec<u32>,
    at_cap: Vec<u32>,
    bucket: Vec<u8>,
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

    /// Set-up of a filling: zero rates, the slots of the resources `flows`
    /// touch (in index order, into `used`), their weights, flows and each
    /// path entry's slot. Returns the number of flows.
    #[inline]
    fn prepare(&mut self, capacity: &[f64], flows: &Flows<'_>, rate: &mut Vec<f64>) -> usize {
        let nf = flows.cap.len();
        let nr = capacity.len();
        rate.clear();
        rate.resize(nf, 0.0);
        if self.weight.len() != nr {
            self.weight = vec![0.0; nr];
            self.count = vec![0; nr];
            self.slot = vec![NONE; nr];
            self.full = vec![false; nr];
            self.bits = vec![0; nr.div_ceil(64)];
            self.used.clear();
        }
        for &r in &self.used {
            self.full[r as usize] = false;
        }
        self.used.clear();
        self.frozen.clear();
        self.frozen.resize(nf, false);
        // One pass: a resource's weight summed in path order, its flows counted.
        for &(r, c) in flows.path {
            let ru = r as usize;
            let (w, b) = (ru >> 6, 1u64 << (ru & 63));
            if self.bits[w] & b == 0 {
                self.bits[w] |= b;
                self.weight[ru] = 0.0;
                self.count[ru] = 0;
            }
            self.weight[ru] += c;
            self.count[ru] += 1;
        }
        // Used resources in index order (the set bits): their slots.
        self.lrem.clear();
        self.lw.clear();
        self.lthr.clear();
        self.slot_beg.clear();
        let mut acc = 0u32;
        for w in 0..self.bits.len() {
            let mut m = self.bits[w];
            if m == 0 {
                continue;
            }
            self.bits[w] = 0;
            while m != 0 {
                let r = (w << 6) | m.trailing_zeros() as usize;
                m &= m - 1;
                self.slot[r] = self.used.len() as u32;
                self.used.push(r as u32);
                self.lrem.push(capacity[r]);
                // (weight 0: never constrains, as a resource left out)
                self.lw.push(self.weight[r]);
                self.lthr.push(FULL * capacity[r]);
                self.slot_beg.push(acc);
                acc += self.count[r];
            }
        }
        self.slot_beg.push(acc);
        // Flows per slot in index order; each path entry's slot.
        self.slot_flows.clear();
        self.slot_flows.resize(flows.path.len(), 0);
        self.pslot.clear();
        self.pslot.resize(flows.path.len(), 0);
        let mut fill = std::mem::take(&mut self.count);
        for (s, &r) in self.used.iter().enumerate() {
            fill[r as usize] = self.slot_beg[s];
        }
        for f in 0..nf {
            for k in flows.off[f] as usize..flows.off[f + 1] as usize {
                let r = flows.path[k].0 as usize;
                self.pslot[k] = self.slot[r];
                self.slot_flows[fill[r] as usize] = f as u32;
                fill[r] += 1;
            }
        }
        self.count = fill;
        nf
    }

    /// Capped flows into `capped` by (cap, index).
    fn order_caps(&mut self, caps: &[f64]) {
        self.capped.clear();
        let nf = caps.len();
        let mut vals = [0u64; CAP_BUCKETS];
        let mut nv = 0usize;
        self.bucket.clear();
        self.bucket.resize(nf, u8::MAX);
        let mut count = [0u32; CAP_BUCKETS];
        let mut ncapped = 0u32;
        for f in 0..nf {
            let c = caps[f];
            if !c.is_finite() {
                continue;
            }
            ncapped += 1;
            let b = c.to_bits();
            let mut d = 0;
            while d < nv && vals[d] != b {
                d += 1;
            }
            if d == nv {
                if nv == CAP_BUCKETS {
                    for f in 0..nf {
                        if caps[f].is_finite() {
                            self.capped.push(f as u32);
                        }
                    }
                    self.capped.sort_unstable_by(|&a, &b| caps[a as usize].total_cmp(&caps[b as usize]).then(a.cmp(&b)));
                    return;
                }
                vals[nv] = b;
                nv += 1;
            }
            self.bucket[f] = d as u8;
            count[d] += 1;
        }
        let mut order = [0usize; CAP_BUCKETS];
        for (i, o) in order.iter_mut().enumerate().take(nv) {
            *o = i;
        }
        order[..nv].sort_unstable_by(|&a, &b| f64::from_bits(vals[a]).total_cmp(&f64::from_bits(vals[b])));
        let mut start = [0u32; CAP_BUCKETS];
        let mut acc = 0u32;
        for &d in &order[..nv] {
            start[d] = acc;
            acc += count[d];
        }
        self.capped.resize(ncapped as usize, 0);
        for f in 0..nf {
            let d = self.bucket[f];
            if d != u8::MAX {
                self.capped[start[d as usize] as usize] = f as u32;
                start[d as usize] += 1;
            }
        }
    }

    /// Max-min fair rates of `flows` over resources of capacity `capacity`
    /// into `rate` (same length as `flows.cap`).
    pub fn max_min(&mut self, capacity: &[f64], flows: &Flows<'_>, rate: &mut Vec<f64>) {
        let nf = self.prepare(capacity, flows, rate);
        let mut level = 0.0f64;
        let mut left = nf;
        self.order_caps(flows.cap);
        let mut ci = 0usize;
        let any_uncapped = self.capped.len() < nf;
        self.live.clear();
        for s in 0..self.lw.len() {
            if self.lw[s] > 0.0 {
                self.live.push(s as u32);
            }
        }
        while left > 0 {
            // Next level at which a resource fills or a flow reaches its cap.
            // Slots that can no longer constrain have weight 0: their ratio is
            // NaN or +inf, which `min` passes over.
            // (a quotient is computed only where it can be below the least so
            // far: fl(a / w) < best needs a < best * w in reals, which
            // a > fl(best * w) * (1 + 2^-50) rules out)
            let mut step = f64::INFINITY;
            let mut bound = f64::INFINITY;
            for &s in &self.live {
                let s = s as usize;
                let a = self.lrem[s].max(0.0);
                let w = self.lw[s];
                if a <= bound * w {
                    step = step.min(a / w);
                    bound = step * (1.0 + f64::EPSILON * 4.0);
                }
            }
            while ci < self.capped.len() && self.frozen[self.capped[ci] as usize] {
                ci += 1;
            }
            if ci < self.capped.len() {
                step = step.min((flows.cap[self.capped[ci] as usize] - level).max(0.0));
            }
            if any_uncapped && !step.is_finite() {
                for f in 0..nf {
                    if !self.frozen[f] {
                        rate[f] = f64::INFINITY;
                    }
                }
                break;
            }
            level += step;
            for &s in &self.live {
                let s = s as usize;
                self.lrem[s] -= step * self.lw[s];
            }
            // Freeze flows at full resources, then flows at their caps.
            for i in 0..self.live.len() {
                let s = self.live[i] as usize;
                if self.lw[s] > 0.0 && self.lrem[s] <= self.lthr[s] {
                    self.full[self.used[s] as usize] = true;
                    self.lw[s] = 0.0;
                    for k in self.slot_beg[s]..self.slot_beg[s + 1] {
                        let f = self.slot_flows[k as usize] as usize;
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
            if self.at_cap.len() > 1 && flows.cap[self.at_cap[0] as usize].to_bits() != flows.cap[*self.at_cap.last().unwrap() as usize].to_bits() {
                self.at_cap.sort_unstable();
            }
            for i in 0..self.at_cap.len() {
                let f = self.at_cap[i] as usize;
                self.freeze(f, level, flows, rate);
                left -= 1;
            }
            let lw = &self.lw;
            self.live.retain(|&s| lw[s as usize] > 0.0);
        }
    }

    #[inline]
    fn freeze(&mut self, f: usize, level: f64, flows: &Flows<'_>, rate: &mut [f64]) {
        self.frozen[f] = true;
        rate[f] = level;
        for k in flows.off[f] as usize..flows.off[f + 1] as usize {
            let w = &mut self.lw[self.pslot[k] as usize];
            // (a slot at 0 stays 0: full, or no unfrozen flow left)
            *w -= flows.path[k].1;
            if *w < 1e-12 {
                *w = 0.0;
            }
        }
    }

    /// The plain full scan the filling above reproduces bit for bit: per
    /// level every touched resource and every flow scanned.
    #[cfg(test)]
    pub(crate) fn reference_max_min(capacity: &[f64], flows: &Flows<'_>, rate: &mut Vec<f64>) -> Vec<bool> {
        let nf = flows.cap.len();
        let nr = capacity.len();
        rate.clear();
        rate.resize(nf, 0.0);
        let mut used: Vec<u32> = flows.path.iter().map(|e| e.0).collect();
        used.sort_unstable();
        used.dedup();
        let mut rem = capacity.to_vec();
        let mut weight = vec![0.0f64; nr];
        for &(r, c) in flows.path {
            weight[r as usize] += c;
        }
        let mut res_flows: Vec<Vec<usize>> = vec![Vec::new(); nr];
        for f in 0..nf {
            for k in flows.off[f]..flows.off[f + 1] {
                res_flows[flows.path[k as usize].0 as usize].push(f);
            }
        }
        let mut full = vec![false; nr];
        let mut frozen = vec![false; nf];
        let freeze = |f: usize, level: f64, weight: &mut Vec<f64>, frozen: &mut Vec<bool>, rate: &mut Vec<f64>| {
            frozen[f] = true;
            rate[f] = level;
            for k in flows.off[f]..flows.off[f + 1] {
                let (r, c) = flows.path[k as usize];
                weight[r as usize] -= c;
                if weight[r as usize] < 1e-12 {
                    weight[r as usize] = 0.0;
                }
            }
        };
        let mut level = 0.0f64;
        let mut left = nf;
        while left > 0 {
            let mut step = f64::INFINITY;
            for &r in &used {
                let r = r as usize;
                if weight[r] > 0.0 && !full[r] {
                    step = step.min(rem[r].max(0.0) / weight[r]);
                }
            }
            for f in 0..nf {
                if !frozen[f] {
                    step = step.min((flows.cap[f] - level).max(0.0));
                }
            }
            if !step.is_finite() {
                for f in 0..nf {
                    if !frozen[f] {
                        rate[f] = f64::INFINITY;
                    }
                }
                break;
            }
            level += step;
            for &r in &used {
                let r = r as usize;
                if weight[r] > 0.0 && !full[r] {
                    rem[r] -= step * weight[r];
                }
            }
            for &r in &used {
                let r = r as usize;
                if !full[r] && weight[r] > 0.0 && rem[r] <= FULL * capacity[r] {
                    full[r] = true;
                    for &f in &res_flows[r] {
                        if !frozen[f] {
                            freeze(f, level, &mut weight, &mut frozen, rate);
                            left -= 1;
                        }
                    }
                }
            }
            for f in 0..nf {
                if !frozen[f] && flows.cap[f].is_finite() && flows.cap[f] - level <= FULL * flows.cap[f] {
                    freeze(f, level, &mut weight, &mut frozen, rate);
                    left -= 1;
                }
            }
        }
        full
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
        /// The optimized filling (bitset of touched resources, dense slots,
        /// bucketed or sorted caps, quotients divided only where they can be
        /// least) equals the plain full scan bit for bit, rates, full flags
        /// and touched resources, on random flow sets with shared resources,
        /// spray coefficients, equal and infinite caps (up to 10 distinct
        /// finite ones: the bucketed order and the sort beyond 8); warm scratch reused.
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
            let (mut ra, mut rb) = (Vec::new(), Vec::new());
            let full = Filler::reference_max_min(&capacity, &fl, &mut rb);
            let bb: Vec<u64> = rb.iter().map(|x| x.to_bits()).collect();
            for _ in 0..2 {
                a.max_min(&capacity, &fl, &mut ra);
                let ba: Vec<u64> = ra.iter().map(|x| x.to_bits()).collect();
                prop_assert_eq!(&ba, &bb);
                prop_assert_eq!(&a.full, &full);
                let mut used: Vec<u32> = path.iter().map(|e| e.0).collect();
                used.sort_unstable();
                used.dedup();
                prop_assert_eq!(a.used(), &used[..]);
            }
            // warm scratch from a different call: the same answer
            let one = [0u32, path.len().min(1) as u32];
            a.max_min(&capacity, &Flows { off: &one, path: &path[..1], cap: &fcap[..1] }, &mut ra);
            a.max_min(&capacity, &fl, &mut ra);
            let ba: Vec<u64> = ra.iter().map(|x| x.to_bits()).collect();
            prop_assert_eq!(&ba, &bb);
            prop_assert_eq!(&a.full, &full);
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

