//! The periodic region of a task graph: where a schedule of identical steps
//! declares (`TaskGraph::period_tasks` = P) that task i + P is task i one
//! step later. Verified structurally here, task by task (O(tasks + edges));
//! the executor ([`super::exec`]) uses a verified region to skip whole
//! periods once the run's live state repeats (exact; see its module doc).

use super::graph::TaskGraph;

/// A verified periodic region: tasks `lo..hi`, where task i and i + `p`
/// agree for every i in `lo..hi - p` (kind, device, peer, duration, bytes,
/// collective and its members, release 0, steal) and their predecessor and
/// successor lists are each other's shifted by `p` (edge kinds included).
#[derive(Debug, Clone)]
pub(crate) struct Region {
    pub lo: usize,
    pub hi: usize,
    pub p: usize,
}

/// Adjacency in CSR form, each list sorted by (task, edge kind).
pub(crate) struct Adj {
    pub off: Vec<u32>,
    pub list: Vec<(u32, u8)>,
}

impl Adj {
    pub fn of(&self, i: usize) -> &[(u32, u8)] {
        &self.list[self.off[i] as usize..self.off[i + 1] as usize]
    }
}

fn csr(n: usize, from: &[u32], to: &[u32], kind: &[u8]) -> Adj {
    let mut off = vec![0u32; n + 1];
    for &a in from {
        off[a as usize + 1] += 1;
    }
    for i in 0..n {
        off[i + 1] += off[i];
    }
    let mut fill = off.clone();
    let mut list = vec![(0u32, 0u8); from.len()];
    for e in 0..from.len() {
        let a = from[e] as usize;
        list[fill[a] as usize] = (to[e], kind[e]);
        fill[a] += 1;
    }
    for i in 0..n {
        list[off[i] as usize..off[i + 1] as usize].sort_unstable();
    }
    Adj { off, list }
}

/// Predecessor lists (per task: (predecessor, edge kind)).
pub(crate) fn preds(g: &TaskGraph) -> Adj {
    csr(g.len(), &g.edge_dst, &g.edge_src, &g.edge_kind)
}

/// Maximal runs `(first, end)` of tasks i in `first..end` with i ~ i + `p`.
fn matching_runs(g: &TaskGraph, pred: &Adj, succ: &Adj, p: usize) -> Vec<(usize, usize)> {
    let n = g.len();
    let rel = |i: usize| g.release_ps.get(i).copied().unwrap_or(0);
    let steal = |i: usize| g.steal_ppm.get(i).copied().unwrap_or(0);
    let shifted = |a: &[(u32, u8)], b: &[(u32, u8)]| a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.0 as usize + p == y.0 as usize && x.1 == y.1);
    let same = |i: usize| {
        let j = i + p;
        g.kind[i] == g.kind[j]
            && g.device[i] == g.device[j]
            && g.peer[i] == g.peer[j]
            && g.duration_ps[i] == g.duration_ps[j]
            && g.bytes[i] == g.bytes[j]
            && (g.kind[i] != 2 || (g.collective[i] == g.collective[j] && g.members(g.group[i]) == g.members(g.group[j])))
            && rel(i) == 0
            && rel(j) == 0
            && steal(i) == steal(j)
            && shifted(pred.of(i), pred.of(j))
            && shifted(succ.of(i), succ.of(j))
    };
    let mut runs = Vec::new();
    let mut first = None;
    for i in 0..n.saturating_sub(p) {
        match (same(i), first) {
            (true, None) => first = Some(i),
            (false, Some(f)) => {
                runs.push((f, i));
                first = None;
            }
            _ => {}
        }
    }
    if let Some(f) = first {
        runs.push((f, n - p));
    }
    runs
}

/// Successor lists (per task: (successor, edge kind)).
pub(crate) fn succs(g: &TaskGraph) -> Adj {
    csr(g.len(), &g.edge_src, &g.edge_dst, &g.edge_kind)
}

/// The declared period verified: the longest run of tasks i with i ~ i + P
/// (at least 3 periods long), or why there is none.
pub(crate) fn verify(g: &TaskGraph, pred: &Adj, succ: &Adj) -> Result<Region, String> {
    let n = g.len();
    let p = g.period_tasks as usize;
    if p == 0 {
        return Err(if g.inner_periods.is_empty() { "no period declared" } else { "no step period declared" }.into());
    }
    if 3 * p > n {
        return Err(format!("declared period {p} tasks: the graph has only {n} tasks (fewer than 3 periods)"));
    }
    // the first of the longest runs
    let best = matching_runs(g, pred, succ, p).into_iter().fold((0, 0), |b, r| if r.1 - r.0 > b.1 - b.0 { r } else { b });
    if best.1 - best.0 < 3 * p {
        return Err(format!(
            "declared period {p} tasks does not hold: the longest run of tasks i matching i + {p} is {} tasks (tasks {}..{}), under 3 periods",
            best.1 - best.0,
            best.0,
            best.1
        ));
    }
    let (lo, hi) = (best.0, best.1 + p);
    Ok(Region { lo, hi, p })
}

/// The declared inner periods verified: every maximal run of tasks i with
/// i ~ i + P (P one of `inner_periods`) at least 3 periods long is a region
/// (tasks `lo..end + P`), in task order; where two overlap the later one
/// starts where the earlier ends (a part of a run is a run) and is kept if
/// still 3 periods long. Empty with why when none holds.
pub(crate) fn verify_inner(g: &TaskGraph, pred: &Adj, succ: &Adj) -> Result<Vec<Region>, String> {
    let n = g.len();
    let outer = g.period_tasks as usize;
    // an inner period is shorter than the step period: one as long would
    // cover the step and cut the layers' regions away where they overlap
    let usable = |p: usize| p > 0 && 3 * p <= n && (outer == 0 || p < outer);
    let mut ps: Vec<usize> = g.inner_periods.iter().map(|&p| p as usize).filter(|&p| usable(p)).collect();
    ps.sort_unstable();
    ps.dedup();
    if ps.is_empty() {
        if g.inner_periods.is_empty() {
            return Err("no inner period declared".into());
        }
        let mut why = Vec::new();
        if g.inner_periods.contains(&0) {
            why.push("0".to_string());
        }
        if outer > 0 && g.inner_periods.iter().any(|&p| p as usize >= outer) {
            why.push(format!("as long as the step period ({outer} tasks) or longer"));
        }
        if g.inner_periods.iter().any(|&p| p > 0 && 3 * p as usize > n && (outer == 0 || (p as usize) < outer)) {
            why.push(format!("longer than a third of the graph ({n} tasks)"));
        }
        return Err(format!("every declared inner period ({:?} tasks) is {}", g.inner_periods, why.join(", or ")));
    }
    let mut all: Vec<Region> = Vec::new();
    for &p in &ps {
        all.extend(matching_runs(g, pred, succ, p).into_iter().filter(|r| r.1 - r.0 >= 3 * p).map(|r| Region { lo: r.0, hi: r.1 + p, p }));
    }
    all.sort_by_key(|r| (r.lo, r.p));
    let mut out: Vec<Region> = Vec::new();
    for mut r in all {
        if let Some(last) = out.last() {
            r.lo = r.lo.max(last.hi);
        }
        if r.hi >= r.lo + 3 * r.p {
            out.push(r);
        }
    }
    if out.is_empty() {
        return Err(format!("declared inner periods {ps:?} tasks: no run of tasks i matching i + P is 3 periods long"));
    }
    Ok(out)
}
