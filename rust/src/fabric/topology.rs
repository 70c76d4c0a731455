//! The wired fabric as lookup tables: which switch port each GPU port reaches,
//! which GPU port each switch port reaches, and which ports lead from one GPU
//! to another.

use super::spec::FabricSpec;

/// Derived, immutable wiring tables.
#[derive(Debug, Clone)]
pub struct Topology {
    pub gpus: u32,
    pub gpu_ports: u32,
    pub switches: u32,
    pub switch_ports: u32,
    /// Per GPU port (gpu * gpu_ports + k): (switch, switch_port, link index), or None if unwired.
    pub gpu_port_to: Vec<Option<(u32, u32, u32)>>,
    /// Per switch port (switch * switch_ports + p): GPU port index, or None.
    pub switch_port_to: Vec<Option<u32>>,
    /// CSR per (switch, dst gpu): switch output ports wired to that GPU.
    route_off: Vec<u32>,
    route_ports: Vec<u32>,
}

impl Topology {
    /// Build from a validated spec.
    pub fn new(spec: &FabricSpec) -> Self {
        let gp = (spec.gpus * spec.gpu_ports) as usize;
        let sp = (spec.switches * spec.switch_ports) as usize;
        let mut gpu_port_to = vec![None; gp];
        let mut switch_port_to = vec![None; sp];
        let mut lists: Vec<Vec<u32>> = vec![Vec::new(); (spec.switches * spec.gpus) as usize];
        for w in &spec.wires {
            let g = w.gpu * spec.gpu_ports + w.gpu_port;
            gpu_port_to[g as usize] = Some((w.switch, w.switch_port, w.link));
            switch_port_to[(w.switch * spec.switch_ports + w.switch_port) as usize] = Some(g);
            lists[(w.switch * spec.gpus + w.gpu) as usize].push(w.switch_port);
        }
        let mut route_off = vec![0u32];
        let mut route_ports = Vec::new();
        for mut l in lists {
            l.sort_unstable();
            route_ports.extend(l);
            route_off.push(route_ports.len() as u32);
        }
        Topology { gpus: spec.gpus, gpu_ports: spec.gpu_ports, switches: spec.switches, switch_ports: spec.switch_ports, gpu_port_to, switch_port_to, route_off, route_ports }
    }

    /// Output ports of `switch` wired to GPU `dst`.
    #[inline]
    pub fn routes(&self, switch: u32, dst: u32) -> &[u32] {
        let k = (switch * self.gpus + dst) as usize;
        &self.route_ports[self.route_off[k] as usize..self.route_off[k + 1] as usize]
    }

    /// Ports of GPU `src` through which GPU `dst` is reachable, in port order.
    pub fn eligible_ports(&self, src: u32, dst: u32, out: &mut Vec<u32>) {
        out.clear();
        for k in 0..self.gpu_ports {
            let p = src * self.gpu_ports + k;
            if let Some((s, _, _)) = self.gpu_port_to[p as usize] {
                if !self.routes(s, dst).is_empty() {
                    out.push(p);
                }
            }
        }
    }

    /// If every switch has exactly `L` wires to every GPU (and all wires use
    /// one link spec), the plane count and `L`: the symmetry plane folding needs.
    pub fn plane_symmetry(&self, spec: &FabricSpec) -> Option<(u32, u32)> {
        if spec.switches < 2 || spec.wires.iter().any(|w| w.link != spec.wires[0].link || w.switch_link.is_some_and(|l| l != w.link)) {
            return None;
        }
        let l = self.routes(0, 0).len() as u32;
        if l == 0 {
            return None;
        }
        for s in 0..spec.switches {
            for g in 0..spec.gpus {
                if self.routes(s, g).len() as u32 != l {
                    return None;
                }
            }
        }
        // Each GPU's ports must all be wired (so per-port shares are equal).
        if (spec.gpu_ports) != l * spec.switches || self.gpu_port_to.iter().any(|x| x.is_none()) {
            return None;
        }
        Some((spec.switches, l))
    }
}
