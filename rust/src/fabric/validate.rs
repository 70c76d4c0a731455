//! Whole-spec validation: the field checks of `spec.rs`, and for graph
//! fabrics the checks that need the routing tables of `topology.rs` (every
//! GPU reaches every endpoint; static routes without loops or dead ends),
//! plus the peer-to-peer rule applied when a transfer is added.

use super::spec::FabricSpec;
use super::topology::{Peer, Topology};
use crate::error::{FlitsimError, Result};

impl FabricSpec {
    /// Validate the whole spec: fields (ids, ports wired once, link specs
    /// equal at both ends of every wire and trunk, kinds, NICs, bridges,
    /// faults) and reachability (one layer: every GPU pair shares a switch;
    /// graph: a path of wires and trunks both ways, static routes loop-free).
    ///
    /// # Errors
    /// `Config` naming the wire, GPU or element at fault.
    pub fn validate(&self) -> Result<()> {
        self.validate_fields()?;
        self.counters.validate(0)?;
        if self.is_graph() {
            let topo = Topology::new(self);
            if !self.static_routes.is_empty() {
                self.check_route_loops(&topo)?;
            }
            self.check_graph_reachable(&topo, "")?;
            if topo.dateline_dims > 0 {
                self.check_datelines(&topo)?;
            }
        }
        Ok(())
    }

    /// Dateline trunks: enough VCs for 2^dims classes, one route per pair
    /// (the class is fixed from the route when the transfer is added), and no
    /// faults (routes rebuilt around a fault would cross datelines anew).
    fn check_datelines(&self, topo: &Topology) -> Result<()> {
        let need = 1u32 << topo.dateline_dims;
        let ti = self.trunks.iter().position(|t| t.dateline == Some(topo.dateline_dims - 1)).unwrap_or(0);
        if let Some((li, l)) = self.links.iter().enumerate().find(|(_, l)| l.vcs < need) {
            return Err(FlitsimError::config(
                format!("trunks[{ti}].dateline"),
                format!("dimension {} ({need} VC classes)", topo.dateline_dims - 1),
                &format!("links with at least {need} VCs (one per dateline class); links[{li}] has {}", l.vcs),
            ));
        }
        if !self.faults.is_empty() {
            return Err(FlitsimError::config("faults", format!("{} faults", self.faults.len()), "none on a fabric with dateline trunks (routes rebuilt around a fault would cross datelines the VC classes do not account for)"));
        }
        for s in 0..self.switches {
            for d in 0..self.endpoints() {
                let r = topo.routes(s, d);
                if r.len() > 1 && r.iter().any(|&o| matches!(topo.peer(s, o), Peer::Switch { .. })) {
                    return Err(FlitsimError::config(
                        "static_routes",
                        format!("{} towards {}: ports {:?}", self.element_name(s), self.endpoint_name(d), r),
                        "one output per (element, destination) on a fabric with dateline trunks (a packet's VC class is fixed from its route when it is injected)",
                    ));
                }
            }
        }
        let mut elig = Vec::new();
        for a in 0..self.endpoints() {
            for b in 0..self.endpoints() {
                topo.eligible_ports(a, b, &mut elig);
                let first = elig.first().and_then(|&p| topo.gpu_port_to[p as usize]).map(|x| x.0);
                if elig.iter().any(|&p| topo.gpu_port_to[p as usize].map(|x| x.0) != first) {
                    return Err(FlitsimError::config(
                        "wires",
                        format!("{} -> {}", self.endpoint_name(a), self.endpoint_name(b)),
                        "endpoint ports into one element per destination on a fabric with dateline trunks (a packet's VC class is fixed from its route)",
                    ));
                }
            }
        }
        Ok(())
    }

    /// With static routes: from every switch that routes towards a
    /// destination, following the tables must reach it, never revisiting a
    /// switch (a loop) and never stopping at a switch without a route (a dead end).
    fn check_route_loops(&self, topo: &Topology) -> Result<()> {
                let n = self.switches as usize;
        let mut state = vec![0u8; n];
        let mut stack: Vec<(u32, usize)> = Vec::new();
        for d in 0..self.endpoints() {
            state.iter_mut().for_each(|x| *x = 0);
            for s0 in 0..self.switches {
                if state[s0 as usize] != 0 || topo.routes(s0, d).is_empty() {
                    continue;
                }
                // Iterative DFS: 1 = on the stack, 2 = done.
                state[s0 as usize] = 1;
                stack.push((s0, 0));
                while let Some(&mut (s, ref mut k)) = stack.last_mut() {
                    let r = topo.routes(s, d);
                    if *k >= r.len() {
                        state[s as usize] = 2;
                        stack.pop();
                        continue;
                    }
                    let o = r[*k];
                    *k += 1;
                    match topo.peer(s, o) {
                        Peer::Switch { switch: v, .. } => {
                            if topo.routes(v, d).is_empty() {
                                return Err(FlitsimError::config("static_routes", format!("{} port {o} towards {}", self.element_name(s), self.endpoint_name(d)), &format!("routes without dead ends: it leads to {}, which has no route to that endpoint", self.element_name(v))));
                            }
                            match state[v as usize] {
                                0 => {
                                    state[v as usize] = 1;
                                    stack.push((v, 0));
                                }
                                1 => {
                                    return Err(FlitsimError::config("static_routes", format!("{} port {o} towards {}", self.element_name(s), self.endpoint_name(d)), &format!("loop-free routes: this one returns to {} (a route loop)", self.element_name(v))));
                                }
                                _ => {}
                            }
                        }
                        Peer::Endpoint(g) if g / self.gpu_ports != d => {
                            return Err(FlitsimError::config("static_routes", format!("{} port {o} towards {}", self.element_name(s), self.endpoint_name(d)), &format!("routes that end at their destination: this port reaches {}", self.endpoint_name(g / self.gpu_ports))));
                        }
                        _ => {}
                    }
                }
            }
        }
        Ok(())
    }

    /// Every GPU reaches every other endpoint (GPU or host) over the graph, both ways.
    fn check_graph_reachable(&self, topo: &Topology, when: &str) -> Result<()> {
        let field = if when.is_empty() { "wires" } else { "faults" };
        let mut elig = Vec::new();
        for a in 0..self.gpus {
            for b in 0..self.endpoints() {
                if a == b {
                    continue;
                }
                for (x, y) in [(a, b), (b, a)] {
                    topo.eligible_ports(x, y, &mut elig);
                    if elig.is_empty() {
                        return Err(FlitsimError::config(
                            field,
                            format!("{} -> {}", self.endpoint_name(x), self.endpoint_name(y)),
                            &format!("a path of wires and trunks from every GPU to every other endpoint and back{when}; this pair has none (unreachable)"),
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// For a GPU -> GPU transfer: the first element on its routes that
    /// forbids peer-to-peer traffic, if any (transfers with a host are not P2P).
    pub fn p2p_blocker(&self, topo: &Topology, src: u32, dst: u32) -> Option<u32> {
        if src >= self.gpus || dst >= self.gpus || src == dst || self.switch_kinds.iter().all(|k| k.allow_p2p) {
            return None;
        }
        topo.route_switches(src, dst).into_iter().find(|&s| self.kind_of(s).is_some_and(|k| !k.allow_p2p))
    }

}
