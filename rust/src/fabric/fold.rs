//! Plane folding: a fabric of P identical switch planes, with packets sprayed
//! round-robin and every transfer a whole number of (planes x links x packet)
//! units, carries exactly 1/P of every transfer on each plane; simulating one
//! plane with every transfer divided by P gives the same times, bit for bit.
//! One plan, used by the batch API and by collectives, with its reason.

use super::spec::{FabricSpec, Spray, Wire};

/// What to run: the (possibly folded) spec, the plane count it stands for
/// (1 = not folded) and why.
#[derive(Debug, Clone)]
pub struct FoldPlan {
    pub spec: FabricSpec,
    pub planes: u32,
    pub reason: String,
}

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

    fn unfolded(spec: &FabricSpec, reason: String) -> Self {
        FoldPlan { spec: spec.clone(), planes: 1, reason }
    }
}

/// The one-plane spec of a plane-symmetric fabric, the plane count, and the
/// unit (planes x links x simulated packet bytes) every transfer must be a
/// multiple of for folding to be exact; or why the fabric cannot fold.
pub(crate) fn fold_spec(spec: &FabricSpec) -> std::result::Result<(FabricSpec, u32, u64), String> {
    if spec.is_graph() {
        return Err("graph fabric (trunks, element kinds or hosts): planes are not proven identical, so nothing is folded".into());
    }
    if !spec.fold_planes {
        return Err("folding disabled (fold_planes = false)".into());
    }
    if !spec.faults.is_empty() {
        return Err("faults break the symmetry between planes".into());
    }
    if spec.links.iter().any(|l| l.replay.is_some_and(|r| r.ber > 0.0)) {
        return Err("bit errors are sampled per link, so planes are not identical".into());
    }
    if spec.spray != Spray::RoundRobin {
        return Err(format!("spray {:?} does not spread packets evenly over planes", spec.spray));
    }
    if spec.sim_packets_per_lane > 0 {
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
