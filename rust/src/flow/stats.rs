//! Flow-level statistics in the packet level's result layout
//! ([`FabricStats`]): what the links carried (payload, wire bytes with header
//! flits, busy time, protocol packets) per GPU port and per switch output.
//! Counters the fluid model does not have (credit exhaustion, arbitration
//! conflicts, queueing, reorder) are zero; results say which fidelity ran.

use super::sim::FlowSim;
use crate::fabric::{FabricStats, PortLinkStats};
use crate::link::{LinkStats, VcStats};
use crate::stats::Histogram;
use crate::switch::{InputVcStats, OutputVcStats, PortStats, SwitchStats};

/// Statistics of a flow run (transfer arrays left empty), closed at `end_ps`.
pub fn flow_stats(sim: &FlowSim, events: u64) -> FabricStats {
    let fab = &sim.fab;
    let topo = &fab.topo;
    let np = topo.gpu_port_to.len();
    let ns = topo.switch_port_to.len();
    let mut up = vec![0.0f64; np];
    let mut down = vec![0.0f64; ns];
    let mut ports = Vec::new();
    for r in 0..sim.resources() {
        let b = sim.res_bytes(r);
        let kind = fab.ports_of(r, &mut ports);
        if ports.is_empty() {
            continue;
        }
        let share = b / ports.len() as f64;
        for &p in &ports {
            if kind == 0 {
                up[p as usize] += share;
            } else {
                down[p as usize] += share;
            }
        }
    }
    let wire_one = |payload: f64| -> (u64, u64) {
        let pk = (payload / fab.payload as f64).ceil();
        let flits = (payload / fab.flit_bytes as f64).ceil() + pk * (fab.flits_per_packet as f64 - (fab.payload as f64 / fab.flit_bytes as f64).ceil());
        (pk as u64, flits as u64)
    };
    let link_ps_one = |w: u64| (w as f64 * fab.flit_bytes as f64 / fab.link_bytes_per_ps).round() as u64;
    // Graph fabrics: packets in the base format (as the packet engine counts
    // them), busy time at each port's own re-framed rate (link index `l`).
    let wire = |payload: f64, _l: Option<u32>| -> (u64, u64) { wire_one(payload) };
    let link_ps = |w: u64, l: Option<u32>| -> u64 {
        match (&fab.graph, l) {
            (Some(g), Some(l)) => g.busy_ps_of(l, w),
            _ => link_ps_one(w),
        }
    };
    let flit_of = |_l: Option<u32>| -> u64 { fab.flit_bytes };
    // Bytes delivered into each GPU port: its switch port's output.
    let mut rx = vec![0.0f64; np];
    for (q, w) in topo.switch_port_to.iter().enumerate() {
        if let Some(gp) = w {
            rx[*gp as usize] += down[q];
        }
    }
    let mut out_ports = Vec::with_capacity(np);
    for (p, &b) in up.iter().enumerate() {
        let l = topo.gpu_port_to[p].map(|x| x.2);
        let (pk, flits) = wire(b, l);
        let sw = topo.gpu_port_to[p].map_or(u32::MAX, |x| x.0);
        out_ports.push(PortLinkStats {
            gpu: p as u32 / topo.gpu_ports,
            port: p as u32 % topo.gpu_ports,
            switch: sw,
            link: LinkStats { busy_ps: link_ps(flits, l), payload_bytes: b.round() as u64, wire_bytes: flits * flit_of(l), packets: pk, replay: Default::default() },
            vcs: vec![VcStats::default()],
            rx_payload_bytes: rx[p].round() as u64,
            lost_bytes: 0,
            rx_replay: Default::default(),
        });
    }
    let sp = topo.switch_ports as usize;
    let mut switches = Vec::with_capacity(topo.switches as usize);
    for s in 0..topo.switches as usize {
        let mut outputs = vec![OutputVcStats::default(); sp];
        let mut fo = 0;
        let mut po = 0;
        for k in 0..sp {
            let l = fab.graph.as_ref().map(|_| topo.port_link(s as u32, k as u32, 0));
            let (pk, flits) = wire(down[s * sp + k], l);
            outputs[k].flits_out = flits;
            outputs[k].packets_out = pk;
            fo += flits;
            po += pk;
        }
        switches.push(SwitchStats {
            since_cycle: 0,
            inputs: vec![InputVcStats::default(); sp],
            outputs,
            ports: vec![PortStats::default(); sp],
            network_latency: Histogram::default(),
            queueing: Histogram::default(),
            output_latency: Vec::new(),
            system_flit_cycles: 0,
            flit_sojourn_cycles: 0,
            flits_out: fo,
            packets_out: po,
            allocation_rounds: 0,
            slots_processed: 0,
        });
    }
    let packets = out_ports.iter().map(|p| p.link.packets).sum();
    let sent_bytes = sim.sent_bytes();
    FabricStats {
        ports: out_ports,
        switches,
        switch_cycle_ps: fab.flit_bytes as f64 / fab.link_bytes_per_ps,
        reorder: vec![Default::default(); topo.gpus as usize],
        packets,
        events,
        sent_bytes,
        ..Default::default()
    }
}
