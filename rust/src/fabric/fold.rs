//! Plane folding: a fabric of P identical switch planes, with packets sprayed
//! round-robin and every transfer a whole number of (planes x links x packet)
//! units, carries exactly 1/P of every transfer on each plane; simulating one
//! plane with every transfer divided by P gives the same times, bit for bit.
//! One plan, used by the batch API and by collectives, with its reason.
//!
//! Balanced folding ([`FoldPlan::balanced`], collectives only): when a
//! transfer is not a whole number of units, the planes of the full fabric
//! differ by at most one simulated packet per lane (round-robin spray), so no
//! plane is exactly 1/P. Simulating one plane carrying `ceil(bytes / P)` of
//! every transfer models the planes as evenly loaded, which is what the
//! fabric's real 256-byte spray does to within one 256-byte packet per lane.
//! Against full fidelity (256-byte packets, all planes) the difference is at
//! most one payload packet per lane per transfer, so it is offered only when
//! every lane of every transfer carries at least [`BALANCED_MIN_PACKETS`]
//! payload packets (bound 1 / 128 < 1 % per transfer), and only with one
//! link per GPU per plane (NVL72; measured in
//! tests/test_engine_levers.py and docs/performance.md). Collectives with
//! smaller transfers may still fold when the same 1/128 bound holds on the
//! collective's time ([`FoldPlan::balanced_with`]; `collective::run` checks
//! it along the DAG's dependency chains, whose launch and step latencies
//! dwarf one packet time per transfer).

use super::spec::{FabricSpec, Spray, Wire};

/// What to run: the (possibly folded) spec, the plane count it stands for
/// (1 = not folded) and why.
#[derive(Debug, Clone)]
pub struct FoldPlan {
    pub spec: FabricSpec,
    pub planes: u32,
    pub reason: String,
}

/// Fewest payload packets per lane (plane x link) of every transfer for a
/// balanced fold: one packet of lane imbalance is then at most 1/128 of it.
pub const BALANCED_MIN_PACKETS: u64 = 128;

impl FoldPlan {
    /// Plan for `transfers` = (src, dst, bytes) on `spec` (self-transfers
    /// that stay in the GPU, src == dst without loopback, may pass any size).
    pub fn new(spec: &FabricSpec, transfers: impl IntoIterator<Item = (u32, u32, u64)>) -> Self {
        match fold_spec(spec) {
            Ok((f, planes, unit)) => {
                for (i, (src, dst, bytes)) in transfers.into_iter().enumerate() {
                    if bytes % unit != 0 && src != dst {
                        return FoldPlan::unfolded(spec, format!("transfer {i} ({bytes} bytes) is not a multiple of planes x links x packet = {unit} bytes"));
                    }
                }
                FoldPlan { spec: f, planes, reason: format!("folded {planes} identical planes into one (round-robin spray, every transfer a multiple of planes x links x packet)") }
            }
            Err(why) => FoldPlan::unfolded(spec, why),
        }
    }

    /// Like [`Self::new`], but a fabric of identical planes folds even when a
    /// transfer is not a whole number of units, each plane carrying
    /// [`Self::plane_bytes`] = `ceil(bytes / P)` (see the module text for the
    /// bound), provided every lane gets at least [`BALANCED_MIN_PACKETS`]
    /// payload packets. Adaptive coalescing folds too: its packets are sized
    /// per lane, and folding divides bytes and lanes alike.
    pub fn balanced(spec: &FabricSpec, transfers: impl IntoIterator<Item = (u32, u32, u64)> + Clone) -> Self {
        Self::balanced_with(spec, transfers, None)
    }

    /// [`Self::balanced`], and where a transfer is below
    /// [`BALANCED_MIN_PACKETS`] per lane, `chains(planes)` may still accept
    /// the fold: it checks the same 1/128 bound on the collective's time
    /// instead of on each transfer's (the caller's dependency chains, e.g.
    /// `collective::run`), `Ok(why)` or `Err(why not)`.
    pub fn balanced_with(spec: &FabricSpec, transfers: impl IntoIterator<Item = (u32, u32, u64)> + Clone, chains: Option<&dyn Fn(u32) -> std::result::Result<String, String>>) -> Self {
        let exact = Self::new(spec, transfers.clone());
        if exact.planes > 1 {
            return exact;
        }
        let (f, planes, _) = match fold_spec_with(spec, true) {
            Ok(x) => x,
            Err(_) => return exact,
        };
        if f.gpu_ports != 1 {
            // Measured: with several links per plane (HGX B200, 9) a balanced
            // fold moved a 32 MiB tree all_reduce by 0.9 % on top of coalescing;
            // with one link per plane (NVL72) every case stayed within 0.2 %.
            return FoldPlan::unfolded(spec, format!("{}; not balanced-folded either: {} links per GPU per plane (balanced folds need one)", exact.reason, f.gpu_ports));
        }
        let lanes = planes as u64 * f.gpu_ports as u64;
        let least = lanes * spec.gpu.payload_bytes as u64 * BALANCED_MIN_PACKETS;
        for (i, (src, dst, bytes)) in transfers.into_iter().enumerate() {
            if src != dst && bytes < least {
                let short = format!("transfer {i} ({bytes} bytes) gives a lane fewer than {BALANCED_MIN_PACKETS} payload packets");
                return match chains.map(|c| c(planes)) {
                    Some(Ok(why)) => FoldPlan { spec: f, planes, reason: format!("balanced fold of {planes} identical planes into one: every plane carries ceil(bytes / {planes}) of each transfer ({short}, but {why})") },
                    Some(Err(why)) => FoldPlan::unfolded(spec, format!("{}; not balanced-folded either: {short}, and {why}", exact.reason)),
                    None => FoldPlan::unfolded(spec, format!("{}; not balanced-folded either: {short}", exact.reason)),
                };
            }
        }
        FoldPlan {
            spec: f,
            planes,
            reason: format!("balanced fold of {planes} identical planes into one: every plane carries ceil(bytes / {planes}) of each transfer (planes evenly loaded; within one payload packet per lane of the full spray, every lane >= {BALANCED_MIN_PACKETS} packets)"),
        }
    }

    /// Bytes one plane carries of a `bytes` transfer (exact when folding is).
    #[inline]
    pub fn plane_bytes(&self, bytes: u64) -> u64 {
        bytes.div_ceil(self.planes as u64)
    }

    fn unfolded(spec: &FabricSpec, reason: String) -> Self {
        FoldPlan { spec: spec.clone(), planes: 1, reason }
    }
}

/// Which symmetry a fold rests on: planes alike (the plane fold) or GPUs alike (the rank fold).
/// The reasons keep the wording each fold reported before the two shared this check.
#[derive(Clone, Copy)]
enum Parts {
    Planes,
    Gpus,
}

/// What breaks the symmetry both folds rest on, or `Ok` when nothing does: the preconditions
/// the two share, in one place; `parts` only chooses the wording of the reason.
fn symmetry_blocker(spec: &FabricSpec, parts: Parts) -> std::result::Result<(), String> {
    let planes = matches!(parts, Parts::Planes);
    if spec.is_graph() {
        return Err(if planes {
            "graph fabric (trunks, element kinds or hosts): planes are not proven identical, so nothing is folded"
        } else {
            "graph fabric (trunks, element kinds, hosts or static routes)"
        }
        .into());
    }
    if !spec.fold_planes {
        return Err("folding disabled (fold_planes = false)".into());
    }
    if !spec.faults.is_empty() {
        return Err(if planes { "faults break the symmetry between planes" } else { "faults" }.into());
    }
    if spec.links.iter().any(|l| l.replay.is_some_and(|r| r.ber > 0.0)) {
        return Err(if planes { "bit errors are sampled per link, so planes are not identical" } else { "bit errors are sampled per link" }.into());
    }
    if spec.spray != Spray::RoundRobin {
        return Err(if planes {
            format!("spray {:?} does not spread packets evenly over planes", spec.spray)
        } else {
            format!("spray {:?}", spec.spray)
        });
    }
    Ok(())
}

/// Whether every GPU of `spec` is interchangeable with every other for
/// traffic that stays within one GPU's own ports (a loopback through the
/// switches, as NVLS is lowered): one switch layer, every GPU wired with the
/// same count of the same link spec, nothing sampled or timed per component
/// (faults, bit errors, counters), round-robin spray and a deterministic
/// allocator. Traffic of one GPU then meets no other GPU's anywhere (its
/// packets enter and leave by its own switch ports; a conflict-free
/// permutation for every allocator here), so GPUs with identical traffic run
/// identically and one of them can stand for all (`collective::run`, rank
/// folding). `Err(why not)`.
pub fn gpu_symmetry(spec: &FabricSpec) -> std::result::Result<(), String> {
    symmetry_blocker(spec, Parts::Gpus)?;
    if !spec.counters.is_off() {
        return Err("time-resolved counters are sampled per port".into());
    }
    if spec.switch.allocator == "pim" {
        return Err("the pim allocator draws random numbers shared by all ports".into());
    }
    let Some(w0) = spec.wires.first() else {
        return Err("no wires".into());
    };
    if spec.wires.iter().any(|w| w.link != w0.link || w.switch_link != w0.switch_link) {
        return Err("GPUs are wired with different link specs".into());
    }
    let mut per_gpu = vec![0u32; spec.gpus as usize];
    for w in &spec.wires {
        match per_gpu.get_mut(w.gpu as usize) {
            Some(x) => *x += 1,
            None => return Err(format!("wire to endpoint {} beyond the GPUs", w.gpu)),
        }
    }
    if per_gpu.iter().any(|&k| k != spec.gpu_ports) {
        return Err("not every GPU port is wired".into());
    }
    Ok(())
}

/// The one-plane spec of a plane-symmetric fabric, the plane count, and the
/// unit (planes x links x simulated packet bytes) every transfer must be a
/// multiple of for folding to be exact; or why the fabric cannot fold.
pub(crate) fn fold_spec(spec: &FabricSpec) -> std::result::Result<(FabricSpec, u32, u64), String> {
    fold_spec_with(spec, false)
}

/// [`fold_spec`]; `adaptive_ok`: allow adaptive coalescing (balanced folds).
fn fold_spec_with(spec: &FabricSpec, adaptive_ok: bool) -> std::result::Result<(FabricSpec, u32, u64), String> {
    symmetry_blocker(spec, Parts::Planes)?;
    if spec.sim_packets_per_lane > 0 && !adaptive_ok {
        return Err("adaptive coalescing (sim_packets_per_lane) sizes packets from each transfer's bytes, which folding divides".into());
    }
    let topo = super::topology::Topology::new(spec);
    let Some((planes, l)) = topo.plane_symmetry(spec) else {
        return Err("switches are not identical planes (unequal links per GPU, mixed link specs or unwired ports)".into());
    };
    let s = if spec.sim_packet_bytes == 0 { spec.gpu.payload_bytes as u64 } else { spec.sim_packet_bytes };
    let unit = planes as u64 * l as u64 * s;
    // One plane: switch 0 and the L ports of every GPU wired to it.
    let mut wires: Vec<Wire> = spec.wires.iter().filter(|w| w.switch == 0).copied().collect();
    wires.sort_by_key(|w| (w.gpu, w.gpu_port));
    let mut k = 0;
    let mut last = u32::MAX;
    for w in &mut wires {
        if w.gpu != last {
            k = 0;
            last = w.gpu;
        }
        w.gpu_port = k;
        k += 1;
    }
    let mut f = spec.clone();
    f.switches = 1;
    f.gpu_ports = l;
    f.wires = wires;
    Ok((f, planes, unit))
}
