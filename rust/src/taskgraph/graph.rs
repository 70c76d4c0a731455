//! The task graph: columnar task and edge arrays, validated on construction.

use crate::error::{ensure, FlitsimError, Result};
use serde::{Deserialize, Serialize};

/// What a task does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[repr(u8)]
pub enum TaskKind {
    /// Occupies one compute stream of `device` for `duration_ps`.
    Compute = 0,
    /// Moves `bytes` from `device` to `peer` over the network.
    Transfer = 1,
    /// A collective over `group` with `bytes` (nccl-tests "size").
    Collective = 2,
}

impl TaskKind {
    pub fn from_code(c: u8) -> Option<Self> {
        match c {
            0 => Some(TaskKind::Compute),
            1 => Some(TaskKind::Transfer),
            2 => Some(TaskKind::Collective),
            _ => None,
        }
    }
}

/// Collective operations (NCCL names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum CollectiveKind {
    AllReduce = 0,
    AllGather = 1,
    ReduceScatter = 2,
    AllToAll = 3,
    Broadcast = 4,
    Reduce = 5,
}

impl CollectiveKind {
    pub fn from_code(c: u8) -> Option<Self> {
        use CollectiveKind::*;
        [AllReduce, AllGather, ReduceScatter, AllToAll, Broadcast, Reduce].get(c as usize).copied()
    }

    /// nccl-tests bus-bandwidth factor for `n` ranks: busbw = algbw x factor
    /// (nccl-tests PERFORMANCE.md): 2(n-1)/n for all_reduce, (n-1)/n for
    /// all_gather, reduce_scatter and all_to_all, 1 for broadcast and reduce.
    pub fn busbw_factor(self, n: u32) -> f64 {
        let n = n as f64;
        match self {
            CollectiveKind::AllReduce => 2.0 * (n - 1.0) / n,
            CollectiveKind::AllGather | CollectiveKind::ReduceScatter | CollectiveKind::AllToAll => (n - 1.0) / n,
            CollectiveKind::Broadcast | CollectiveKind::Reduce => 1.0,
        }
    }
}

/// Most of a device's compute rate communication may take (95 %): compute always progresses.
pub const MAX_STEAL_PPM: u32 = 950_000;

/// Why an edge exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[repr(u8)]
pub enum EdgeKind {
    /// The successor consumes the predecessor's output.
    Data = 0,
    /// The successor needs a buffer slot the predecessor frees.
    Credit = 1,
}

/// A validated task graph in columnar form (one entry per task / edge).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskGraph {
    pub devices: u32,
    pub compute_streams: u32,
    pub comm_streams: u32,
    /// [`TaskKind`] codes.
    pub kind: Vec<u8>,
    /// Compute: the device; transfer: the source; collective: ignored.
    pub device: Vec<u32>,
    /// Transfer: the destination; otherwise ignored.
    pub peer: Vec<u32>,
    /// Compute duration, ps; otherwise ignored.
    pub duration_ps: Vec<u64>,
    /// Transfer / collective size, bytes; otherwise ignored.
    pub bytes: Vec<u64>,
    /// Collective: [`CollectiveKind`] code; otherwise ignored.
    pub collective: Vec<u8>,
    /// Collective: index of its group; otherwise ignored.
    pub group: Vec<u32>,
    /// CSR groups: members of group g are `group_members[group_offsets[g]..group_offsets[g+1]]`.
    pub group_offsets: Vec<u32>,
    pub group_members: Vec<u32>,
    /// Earliest start per task, ps (empty = all 0): e.g. a request's arrival.
    #[serde(default)]
    pub release_ps: Vec<u64>,
    /// Communication tasks: the share of each involved device's compute rate
    /// the task takes while it runs, parts per million (empty = none): NCCL
    /// kernels occupy SMs beside the compute (flitsim.cost.overlap). Shares of
    /// overlapping communication tasks add, capped at [`MAX_STEAL_PPM`].
    #[serde(default)]
    pub steal_ppm: Vec<u32>,
    /// Declared period in tasks (0 = none): a schedule of identical steps
    /// says task i + P is task i one step later (same kind, device, size,
    /// predecessors shifted by P). The executor verifies it and, where the
    /// run's state repeats, skips whole periods exactly ([`super::periodic`]).
    #[serde(default)]
    pub period_tasks: u32,
    /// Declared inner periods in tasks (empty = none): within a step, runs of
    /// identical layers (a DiT's transformer blocks; Flux.1's double and
    /// single blocks are two). Verified like `period_tasks`, each maximal
    /// run of at least 3 periods a region of its own, and skipped exactly
    /// where the state repeats from one layer to the next, whether or not
    /// the steps repeat ([`super::periodic`]).
    #[serde(default)]
    pub inner_periods: Vec<u32>,
    pub edge_src: Vec<u32>,
    pub edge_dst: Vec<u32>,
    /// [`EdgeKind`] codes.
    pub edge_kind: Vec<u8>,
}

impl TaskGraph {
    /// Number of tasks.
    pub fn len(&self) -> usize {
        self.kind.len()
    }

    /// True if there are no tasks.
    pub fn is_empty(&self) -> bool {
        self.kind.is_empty()
    }

    /// Members of collective group `g`.
    pub fn members(&self, g: u32) -> &[u32] {
        let a = self.group_offsets[g as usize] as usize;
        let b = self.group_offsets[g as usize + 1] as usize;
        &self.group_members[a..b]
    }

    /// Check shapes, ranges and acyclicity.
    ///
    /// # Errors
    /// `Config` naming the array and index; a cycle is named task by task.
    pub fn validate(&self) -> Result<()> {
        let n = self.len();
        // Bounds before anything is sized from them (per-device tables).
        let max_dev = crate::fabric::MAX_ENDPOINTS;
        ensure(self.devices >= 1 && self.devices <= max_dev, "devices", self.devices, &format!("1..={max_dev} devices"))?;
        ensure(self.compute_streams >= 1 && self.compute_streams <= 1024, "compute_streams", self.compute_streams, "1..=1024 streams per device")?;
        ensure(self.comm_streams >= 1 && self.comm_streams <= 1024, "comm_streams", self.comm_streams, "1..=1024 streams per device")?;
        ensure(n < u32::MAX as usize, "tasks", n, "fewer than 2^32-1 tasks (tasks are tagged by u32)")?;
        ensure(self.edge_src.len() < u32::MAX as usize, "edges", self.edge_src.len(), "fewer than 2^32-1 edges")?;
        for (name, len) in [
            ("device", self.device.len()),
            ("peer", self.peer.len()),
            ("duration_ps", self.duration_ps.len()),
            ("bytes", self.bytes.len()),
            ("collective", self.collective.len()),
            ("group", self.group.len()),
        ] {
            ensure(len == n, name, format!("length {len}"), &format!("one entry per task ({n})"))?;
        }
        ensure(
            self.release_ps.is_empty() || self.release_ps.len() == n,
            "release_ps",
            format!("length {}", self.release_ps.len()),
            &format!("empty or one entry per task ({n})"),
        )?;
        ensure(
            self.steal_ppm.is_empty() || self.steal_ppm.len() == n,
            "steal_ppm",
            format!("length {}", self.steal_ppm.len()),
            &format!("empty or one entry per task ({n})"),
        )?;
        if let Some((i, &v)) = self.steal_ppm.iter().enumerate().find(|(_, &v)| v > MAX_STEAL_PPM) {
            ensure(false, &format!("steal_ppm[{i}]"), v, &format!("at most {MAX_STEAL_PPM} (95 % of the compute rate)"))?;
        }
        ensure(
            self.edge_dst.len() == self.edge_src.len() && self.edge_kind.len() == self.edge_src.len(),
            "edge_dst",
            format!("lengths {}/{}/{}", self.edge_src.len(), self.edge_dst.len(), self.edge_kind.len()),
            "edge_src, edge_dst and edge_kind of equal length",
        )?;
        ensure(!self.group_offsets.is_empty() || !self.kind.contains(&2), "group_offsets", "[]", "CSR offsets starting at 0")?;
        if !self.group_offsets.is_empty() {
            ensure(self.group_offsets[0] == 0, "group_offsets[0]", self.group_offsets[0], "0")?;
            for w in self.group_offsets.windows(2) {
                ensure(w[0] <= w[1], "group_offsets", format!("{} > {}", w[0], w[1]), "non-decreasing offsets")?;
            }
            let last = *self.group_offsets.last().unwrap() as usize;
            ensure(last == self.group_members.len(), "group_offsets[-1]", last, &format!("len(group_members) = {}", self.group_members.len()))?;
        }
        let ngroups = self.group_offsets.len().saturating_sub(1);
        let dev_ok = |d: u32| d < self.devices;
        let allowed_dev = format!("a device id in 0..{}", self.devices);
        for t in 0..n {
            let k = TaskKind::from_code(self.kind[t])
                .ok_or_else(|| FlitsimError::config(format!("kind[{t}]"), self.kind[t], "0 (compute), 1 (transfer) or 2 (collective)"))?;
            match k {
                TaskKind::Compute => ensure(dev_ok(self.device[t]), &format!("device[{t}]"), self.device[t], &allowed_dev)?,
                TaskKind::Transfer => {
                    ensure(dev_ok(self.device[t]), &format!("device[{t}] (transfer source)"), self.device[t], &allowed_dev)?;
                    ensure(dev_ok(self.peer[t]), &format!("peer[{t}] (transfer destination)"), self.peer[t], &allowed_dev)?;
                }
                TaskKind::Collective => {
                    ensure((self.group[t] as usize) < ngroups, &format!("group[{t}]"), self.group[t], &format!("a group index in 0..{ngroups}"))?;
                    CollectiveKind::from_code(self.collective[t])
                        .ok_or_else(|| FlitsimError::config(format!("collective[{t}]"), self.collective[t], "0..=5 (all_reduce .. reduce)"))?;
                    let m = self.members(self.group[t]);
                    ensure(!m.is_empty(), &format!("group {}", self.group[t]), "[]", "at least one member")?;
                    let mut seen = m.to_vec();
                    seen.sort_unstable();
                    for w in seen.windows(2) {
                        ensure(w[0] != w[1], &format!("group {}", self.group[t]), format!("{m:?}"), "distinct devices (a device appears twice)")?;
                    }
                    for &d in m {
                        ensure(dev_ok(d), &format!("group {} member", self.group[t]), d, &allowed_dev)?;
                    }
                }
            }
        }
        for (e, (&s, &d)) in self.edge_src.iter().zip(&self.edge_dst).enumerate() {
            ensure((s as usize) < n, &format!("edge_src[{e}]"), s, &format!("a task index in 0..{n}"))?;
            ensure((d as usize) < n, &format!("edge_dst[{e}]"), d, &format!("a task index in 0..{n}"))?;
            ensure(self.edge_kind[e] <= 1, &format!("edge_kind[{e}]"), self.edge_kind[e], "0 (data) or 1 (credit)")?;
        }
        if let Some(cycle) = self.find_cycle() {
            let path: Vec<String> = cycle.iter().map(|t| t.to_string()).collect();
            return Err(FlitsimError::config("edges", format!("cycle {}", path.join(" -> ")), "an acyclic graph (tasks on a dependency cycle can never start)"));
        }
        Ok(())
    }

    /// Successor lists in CSR form: (offsets, targets, edge index).
    pub(crate) fn successors(&self) -> (Vec<u32>, Vec<u32>, Vec<u32>) {
        let n = self.len();
        let mut off = vec![0u32; n + 1];
        for &s in &self.edge_src {
            off[s as usize + 1] += 1;
        }
        for i in 0..n {
            off[i + 1] += off[i];
        }
        let mut fill = off.clone();
        let mut tgt = vec![0u32; self.edge_src.len()];
        let mut eid = vec![0u32; self.edge_src.len()];
        for (e, (&s, &d)) in self.edge_src.iter().zip(&self.edge_dst).enumerate() {
            let p = fill[s as usize] as usize;
            tgt[p] = d;
            eid[p] = e as u32;
            fill[s as usize] += 1;
        }
        (off, tgt, eid)
    }

    /// A dependency cycle, closed (first == last), if the graph has one.
    fn find_cycle(&self) -> Option<Vec<u32>> {
        let n = self.len();
        let (off, tgt, _) = self.successors();
        // Iterative DFS with colours: 0 new, 1 on stack, 2 done.
        let mut colour = vec![0u8; n];
        let mut parent = vec![u32::MAX; n];
        let mut stack: Vec<(u32, u32)> = Vec::new();
        for root in 0..n as u32 {
            if colour[root as usize] != 0 {
                continue;
            }
            stack.push((root, off[root as usize]));
            colour[root as usize] = 1;
            while let Some(&mut (v, ref mut next)) = stack.last_mut() {
                if *next < off[v as usize + 1] {
                    let w = tgt[*next as usize];
                    *next += 1;
                    match colour[w as usize] {
                        0 => {
                            colour[w as usize] = 1;
                            parent[w as usize] = v;
                            stack.push((w, off[w as usize]));
                        }
                        1 => {
                            let mut cyc = vec![w];
                            let mut x = v;
                            while x != w {
                                cyc.push(x);
                                x = parent[x as usize];
                            }
                            cyc.push(w);
                            cyc.reverse();
                            return Some(cyc);
                        }
                        _ => {}
                    }
                } else {
                    colour[v as usize] = 2;
                    stack.pop();
                }
            }
        }
        None
    }
}
