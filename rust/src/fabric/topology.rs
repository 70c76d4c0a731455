//! The wired fabric as lookup tables: which switch port each endpoint port
//! reaches, what each switch port is wired to (an endpoint port or another
//! switch's port over a trunk), and the routing tables.
//!
//! Routing is destination-based: `routes(switch, dst)` is the ECMP set of
//! output ports of `switch` on a shortest path (hop count) to endpoint `dst`,
//! computed once at build by a breadth-first search from every destination.
//! An endpoint sprays only over its ports at minimum distance to the
//! destination (so an NVLink bridge carries the peer's traffic and PCIe the
//! rest). Without trunks every switch either is wired to `dst` (distance 1,
//! its ports to `dst` are the routes) or cannot reach it, exactly the tables
//! of the one-layer fabric.

use super::spec::FabricSpec;

/// Unreachable.
const INF: u32 = u32::MAX;

/// No dateline on this switch port.
const NO_DATELINE: u8 = u8::MAX;

/// What a switch port is wired to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    /// Nothing.
    None,
    /// Endpoint port `endpoint * gpu_ports + k`.
    Endpoint(u32),
    /// Port `port` of switch `switch` (a trunk).
    Switch { switch: u32, port: u32 },
}

/// One element a packet crosses on its way (see [`Topology::path`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hop {
    /// `None`: the source endpoint; `Some(s)`: switching element `s`.
    pub switch: Option<u32>,
    /// Port it entered by (None at the source endpoint).
    pub in_port: Option<u32>,
    /// Port it leaves by (an endpoint's port slot at the source).
    pub out_port: u32,
    /// Index into the spec's links of the link it leaves over.
    pub link: u32,
    /// Equal-cost choices at this hop (ports the packets are spread over).
    pub ecmp: u32,
}

/// Derived, immutable wiring and routing tables.
#[derive(Debug, Clone)]
pub struct Topology {
    /// GPUs (endpoints `0..gpus`).
    pub gpus: u32,
    /// GPUs and hosts (endpoints `gpus..endpoints` are host memory).
    pub endpoints: u32,
    pub gpu_ports: u32,
    pub switches: u32,
    pub switch_ports: u32,
    /// Per endpoint port (endpoint * gpu_ports + k): (switch, switch_port, link index), or None if unwired.
    pub gpu_port_to: Vec<Option<(u32, u32, u32)>>,
    /// Per switch port (switch * switch_ports + p): endpoint port index, or None.
    pub switch_port_to: Vec<Option<u32>>,
    /// Per switch port: the trunk peer (switch, port); empty without trunks.
    pub trunk_to: Vec<Option<(u32, u32)>>,
    /// Per switch port: index of the link it drives (wires: the switch end's
    /// spec; trunks: the trunk's); empty in a one-layer fabric.
    pub switch_port_link: Vec<u32>,
    /// Hops from switch s to endpoint d at `s * endpoints + d` (INF: none);
    /// empty in a one-layer fabric.
    dist: Vec<u32>,
    /// Per switch: an NVLink element — an NVLink bridge or an NVSwitch —
    /// (preferred over other ports at the same distance; empty without element kinds).
    bridge: Vec<bool>,
    /// CSR per (switch, dst endpoint): the ECMP output ports.
    route_off: Vec<u32>,
    route_ports: Vec<u32>,
    /// Torus dimensions with dateline trunks (0: none; then the two tables below are empty).
    pub dateline_dims: u32,
    /// Per switch port: the dimension whose dateline its trunk is, or NO_DATELINE.
    dateline_of: Vec<u8>,
    /// Per (src, dst) endpoint pair: the VC class of its route (bit d: crosses
    /// a dateline of dimension d).
    vc_class: Vec<u8>,
}

impl Topology {
    /// Build from a validated spec.
    pub fn new(spec: &FabricSpec) -> Self {
        Self::with_dead(spec, &[], &[])
    }

    /// Build with dead switches (`dead_sw[s]`) and dead endpoint ports
    /// (`dead_port[p]`) removed from the routing (empty slices: all alive).
    /// Wiring tables still describe every wire.
    pub fn with_dead(spec: &FabricSpec, dead_sw: &[bool], dead_port: &[bool]) -> Self {
        let ne = spec.gpus + spec.hosts;
        let gp = (ne * spec.gpu_ports) as usize;
        let sp = (spec.switches * spec.switch_ports) as usize;
        let graph = spec.is_graph();
        let mut gpu_port_to = vec![None; gp];
        let mut switch_port_to = vec![None; sp];
        let mut trunk_to = if spec.trunks.is_empty() { Vec::new() } else { vec![None; sp] };
        let mut switch_port_link = if graph { vec![0u32; sp] } else { Vec::new() };
        let sw_dead = |s: u32| dead_sw.get(s as usize).copied().unwrap_or(false);
        let port_dead = |p: u32| dead_port.get(p as usize).copied().unwrap_or(false);
        for w in &spec.wires {
            let g = w.gpu * spec.gpu_ports + w.gpu_port;
            gpu_port_to[g as usize] = Some((w.switch, w.switch_port, w.link));
            let si = (w.switch * spec.switch_ports + w.switch_port) as usize;
            switch_port_to[si] = Some(g);
            if graph {
                switch_port_link[si] = w.switch_link.unwrap_or(w.link);
            }
        }
        for t in &spec.trunks {
            let ia = (t.a * spec.switch_ports + t.a_port) as usize;
            let ib = (t.b * spec.switch_ports + t.b_port) as usize;
            trunk_to[ia] = Some((t.b, t.b_port));
            trunk_to[ib] = Some((t.a, t.a_port));
            switch_port_link[ia] = t.link;
            switch_port_link[ib] = t.b_link.unwrap_or(t.link);
        }
        let mut route_off = vec![0u32];
        let mut route_ports = Vec::new();
        let mut dist = Vec::new();
        if !graph {
            // One switch layer: the ports of each switch wired to each GPU.
            let mut lists: Vec<Vec<u32>> = vec![Vec::new(); (spec.switches * ne) as usize];
            for w in &spec.wires {
                if sw_dead(w.switch) || port_dead(w.gpu * spec.gpu_ports + w.gpu_port) {
                    continue;
                }
                lists[(w.switch * ne + w.gpu) as usize].push(w.switch_port);
            }
            for mut l in lists {
                l.sort_unstable();
                route_ports.extend(l);
                route_off.push(route_ports.len() as u32);
            }
        } else {
            let (s_n, e_n, spp) = (spec.switches as usize, ne as usize, spec.switch_ports);
            dist = vec![INF; s_n * e_n];
            let mut queue: Vec<u32> = Vec::with_capacity(s_n);
            for d in 0..ne {
                queue.clear();
                for k in 0..spec.gpu_ports {
                    let p = d * spec.gpu_ports + k;
                    if let Some((s, _, _)) = gpu_port_to[p as usize] {
                        if !sw_dead(s) && !port_dead(p) && dist[s as usize * e_n + d as usize] == INF {
                            dist[s as usize * e_n + d as usize] = 1;
                            queue.push(s);
                        }
                    }
                }
                let mut head = 0;
                while head < queue.len() {
                    let u = queue[head];
                    head += 1;
                    let du = dist[u as usize * e_n + d as usize];
                    if trunk_to.is_empty() {
                        continue;
                    }
                    for o in 0..spp {
                        if let Some((v, _)) = trunk_to[(u * spp + o) as usize] {
                            let k = v as usize * e_n + d as usize;
                            if !sw_dead(v) && dist[k] == INF {
                                dist[k] = du + 1;
                                queue.push(v);
                            }
                        }
                    }
                }
            }
            let fixed: std::collections::HashMap<(u32, u32), &Vec<u32>> = spec.static_routes.iter().map(|r| ((r.switch, r.dst), &r.ports)).collect();
            for s in 0..spec.switches {
                for d in 0..ne {
                    if let Some(ports) = fixed.get(&(s, d)) {
                        let live = |o: u32| {
                            let i = (s * spp + o) as usize;
                            !sw_dead(s) && (switch_port_to[i].is_some_and(|g| !port_dead(g)) || (!trunk_to.is_empty() && trunk_to[i].is_some_and(|(v, _)| !sw_dead(v))))
                        };
                        let mut l: Vec<u32> = ports.iter().copied().filter(|&o| live(o)).collect();
                        l.sort_unstable();
                        route_ports.extend(l);
                        route_off.push(route_ports.len() as u32);
                        continue;
                    }
                    let ds = dist[s as usize * e_n + d as usize];
                    if ds != INF && !sw_dead(s) {
                        for o in 0..spp {
                            let i = (s * spp + o) as usize;
                            let take = if ds == 1 {
                                switch_port_to[i].is_some_and(|g| g / spec.gpu_ports == d && !port_dead(g))
                            } else {
                                !trunk_to.is_empty() && trunk_to[i].is_some_and(|(v, _)| !sw_dead(v) && dist[v as usize * e_n + d as usize] == ds - 1)
                            };
                            if take {
                                route_ports.push(o);
                            }
                        }
                    }
                    route_off.push(route_ports.len() as u32);
                }
            }
        }
        Topology {
            gpus: spec.gpus,
            endpoints: ne,
            gpu_ports: spec.gpu_ports,
            switches: spec.switches,
            switch_ports: spec.switch_ports,
            gpu_port_to,
            switch_port_to,
            trunk_to,
            switch_port_link,
            dist,
            bridge: (0..spec.switches)
                .map(|s| spec.kind_of(s).is_some_and(|k| matches!(k.kind, super::spec::ElementKind::Bridge | super::spec::ElementKind::Nvswitch)))
                .collect(),
            route_off,
            route_ports,
            dateline_dims: 0,
            dateline_of: Vec::new(),
            vc_class: Vec::new(),
        }
        .with_datelines(spec)
    }

    /// Dateline virtual channels (Dally & Seitz 1987; Dally & Towles 2004,
    /// sec. 14.2): on a torus, dimension-order routing alone has a cyclic
    /// channel dependency around every ring. Packets whose route crosses the
    /// ring's dateline travel that ring on VC class 1, the others on class 0,
    /// so each class's dependencies stop short of the full ring (a minimal
    /// route is at most k/2 hops and class-1 routes all contain the dateline
    /// link) and the dependency graph is acyclic. BookSim's `dim_order_torus`
    /// picks the ring class again at every turn into a new dimension, which
    /// needs a VC change inside a router; this switch keeps a packet's VC from
    /// input to output, so the class is fixed at injection with one bit per
    /// dimension (2^dims classes): in every ring a class is then either all
    /// dateline-crossing or all not, the same property per ring.
    fn with_datelines(mut self, spec: &FabricSpec) -> Self {
        let Some(dims) = spec.trunks.iter().filter_map(|t| t.dateline).max().map(|d| d + 1) else { return self };
        let spp = self.switch_ports;
        let mut of = vec![NO_DATELINE; (self.switches * spp) as usize];
        for t in &spec.trunks {
            if let Some(d) = t.dateline {
                of[(t.a * spp + t.a_port) as usize] = d as u8;
                of[(t.b * spp + t.b_port) as usize] = d as u8;
            }
        }
        self.dateline_dims = dims;
        self.dateline_of = of;
        let ne = self.endpoints;
        let mut classes = vec![0u8; (ne * ne) as usize];
        for a in 0..ne {
            for b in 0..ne {
                classes[(a * ne + b) as usize] = self.route_class(a, b);
            }
        }
        self.vc_class = classes;
        self
    }

    /// VC class of the route from `src` to `dst`: bit d set iff it crosses a
    /// dateline of dimension d (routes with datelines are unique, checked by
    /// validation, so the representative path is the path).
    fn route_class(&self, src: u32, dst: u32) -> u8 {
        let mut c = 0u8;
        for h in self.path(src, dst) {
            if let Some(s) = h.switch {
                let d = self.dateline_of[(s * self.switch_ports + h.out_port) as usize];
                if d != NO_DATELINE {
                    c |= 1 << d;
                }
            }
        }
        c
    }

    /// Dateline dimension of the trunk on `switch` port `port`, if any.
    pub fn dateline(&self, switch: u32, port: u32) -> Option<u32> {
        let d = *self.dateline_of.get((switch * self.switch_ports + port) as usize)?;
        (d != NO_DATELINE).then_some(d as u32)
    }

    /// VC class of the route `src -> dst` (0 without datelines).
    pub fn route_vc_class(&self, src: u32, dst: u32) -> u32 {
        self.vc_class.get((src * self.endpoints + dst) as usize).map_or(0, |&c| c as u32)
    }

    /// The VC a transfer's packets use on every hop: without datelines
    /// transfers take VCs round-robin (`xfer mod vcs`); with them, the
    /// route's class, and transfers of one class round-robin over the
    /// `vcs / 2^dims` VCs of that class (VC = class + 2^dims x k).
    #[inline]
    pub fn transfer_vc(&self, src: u32, dst: u32, xfer: u32, vcs: u32) -> u32 {
        if self.dateline_dims == 0 {
            return xfer % vcs;
        }
        let n = 1u32 << self.dateline_dims;
        self.route_vc_class(src, dst) + n * (xfer % (vcs / n).max(1))
    }

    /// Output ports of `switch` on a shortest path to endpoint `dst` (the ECMP set).
    #[inline]
    pub fn routes(&self, switch: u32, dst: u32) -> &[u32] {
        let k = (switch * self.endpoints + dst) as usize;
        &self.route_ports[self.route_off[k] as usize..self.route_off[k + 1] as usize]
    }

    /// What port `port` of `switch` is wired to.
    #[inline]
    pub fn peer(&self, switch: u32, port: u32) -> Peer {
        let i = (switch * self.switch_ports + port) as usize;
        if let Some(g) = self.switch_port_to[i] {
            return Peer::Endpoint(g);
        }
        match self.trunk_to.get(i).copied().flatten() {
            Some((s, p)) => Peer::Switch { switch: s, port: p },
            None => Peer::None,
        }
    }

    /// Hops from `switch` to endpoint `dst` (None: unreachable). One-layer
    /// fabrics: 1 where a route exists.
    pub fn distance(&self, switch: u32, dst: u32) -> Option<u32> {
        if self.dist.is_empty() {
            return (!self.routes(switch, dst).is_empty()).then_some(1);
        }
        let d = self.dist[(switch * self.endpoints + dst) as usize];
        (d != INF).then_some(d)
    }

    /// Ports of endpoint `src` at minimum distance to `dst`, in port order
    /// (one-layer: every port whose switch reaches `dst`). Among those, ports
    /// into an NVLink element (bridge or NVSwitch) win: peer access goes over
    /// NVLink, not PCIe (CUDA peer-to-peer uses NVLink when the GPUs have it).
    pub fn eligible_ports(&self, src: u32, dst: u32, out: &mut Vec<u32>) {
        self.min_distance_ports(src, dst, out);
        if self.bridge.iter().any(|&b| b) {
            let is_bridge = |p: u32| self.gpu_port_to[p as usize].is_some_and(|(s, _, _)| self.bridge[s as usize]);
            if out.iter().any(|&p| is_bridge(p)) {
                out.retain(|&p| is_bridge(p));
            }
        }
    }

    fn min_distance_ports(&self, src: u32, dst: u32, out: &mut Vec<u32>) {
        out.clear();
        let mut best = INF;
        for k in 0..self.gpu_ports {
            let p = src * self.gpu_ports + k;
            if let Some((s, _, _)) = self.gpu_port_to[p as usize] {
                if self.routes(s, dst).is_empty() {
                    continue;
                }
                let d = self.distance(s, dst).unwrap_or(INF);
                if d < best {
                    best = d;
                    out.clear();
                }
                if d == best {
                    out.push(p);
                }
            }
        }
    }

    /// Index of the link a switch port drives (`default` in a one-layer fabric).
    #[inline]
    pub fn port_link(&self, switch: u32, port: u32, default: u32) -> u32 {
        self.switch_port_link.get((switch * self.switch_ports + port) as usize).copied().unwrap_or(default)
    }

    /// One representative path from endpoint `src` to `dst`: the first
    /// eligible port, then the first ECMP port at every switch; empty if
    /// unreachable or `src == dst`.
    pub fn path(&self, src: u32, dst: u32) -> Vec<Hop> {
        let mut hops = Vec::new();
        let mut elig = Vec::new();
        self.eligible_ports(src, dst, &mut elig);
        let Some(&p0) = elig.first() else { return hops };
        if src == dst {
            return hops;
        }
        let (mut s, mut inp, l0) = self.gpu_port_to[p0 as usize].expect("eligible ports are wired");
        hops.push(Hop { switch: None, in_port: None, out_port: p0 % self.gpu_ports, link: l0, ecmp: elig.len() as u32 });
        // Distances strictly fall along routes, so this ends within `switches` hops.
        for _ in 0..=self.switches {
            let r = self.routes(s, dst);
            let Some(&o) = r.first() else { break };
            hops.push(Hop { switch: Some(s), in_port: Some(inp), out_port: o, link: self.port_link(s, o, l0), ecmp: r.len() as u32 });
            match self.peer(s, o) {
                Peer::Switch { switch, port } => {
                    s = switch;
                    inp = port;
                }
                _ => break,
            }
        }
        hops
    }

    /// Switches on any ECMP route from `src` to `dst` (the routing DAG), in
    /// breadth-first order from the source.
    pub fn route_switches(&self, src: u32, dst: u32) -> Vec<u32> {
        let mut elig = Vec::new();
        self.eligible_ports(src, dst, &mut elig);
        let mut seen = vec![false; self.switches as usize];
        let mut order = Vec::new();
        for &p in &elig {
            let (s, _, _) = self.gpu_port_to[p as usize].expect("eligible ports are wired");
            if !seen[s as usize] {
                seen[s as usize] = true;
                order.push(s);
            }
        }
        let mut head = 0;
        while head < order.len() {
            let s = order[head];
            head += 1;
            for &o in self.routes(s, dst) {
                if let Peer::Switch { switch, .. } = self.peer(s, o) {
                    if !seen[switch as usize] {
                        seen[switch as usize] = true;
                        order.push(switch);
                    }
                }
            }
        }
        order
    }

    /// Domains: per GPU, the index of its domain, the GPUs it reaches without
    /// its route crossing a network element (a NIC, an Ethernet or
    /// InfiniBand switch): one node of a scale-out fabric; one domain for a
    /// one-layer fabric. Transitive (union of the non-network pairs);
    /// numbered in order of each domain's lowest GPU id. The one home of the
    /// concept (placement reads it through `_core.fabric_domains`; the
    /// cross-tier collectives' `Reach` may call it).
    pub fn gpu_domains(&self, spec: &FabricSpec) -> Vec<u32> {
        use super::spec::ElementKind as K;
        let g = self.gpus as usize;
        let is_net = |s: u32| spec.kind_of(s).is_some_and(|k| matches!(k.kind, K::Nic | K::Ethernet | K::Infiniband));
        if !spec.is_graph() || !(0..spec.switches).any(is_net) {
            return vec![0; g];
        }
        let mut parent: Vec<usize> = (0..g).collect();
        fn find(p: &mut [usize], mut a: usize) -> usize {
            while p[a] != a {
                p[a] = p[p[a]];
                a = p[a];
            }
            a
        }
        for a in 0..g {
            for b in a + 1..g {
                if find(&mut parent, a) == find(&mut parent, b) {
                    continue;
                }
                if !self.route_switches(a as u32, b as u32).into_iter().any(is_net) {
                    let (ra, rb) = (find(&mut parent, a), find(&mut parent, b));
                    parent[rb.max(ra)] = rb.min(ra);
                }
            }
        }
        let mut index = vec![u32::MAX; g];
        let mut next = 0;
        let mut out = vec![0u32; g];
        for a in 0..g {
            let r = find(&mut parent, a);
            if index[r] == u32::MAX {
                index[r] = next;
                next += 1;
            }
            out[a] = index[r];
        }
        out
    }

    /// If every switch has exactly `L` wires to every GPU (and all wires use
    /// one link spec), the plane count and `L`: the symmetry plane folding needs.
    pub fn plane_symmetry(&self, spec: &FabricSpec) -> Option<(u32, u32)> {
        if spec.is_graph() {
            return None;
        }
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
