//! Fabric statistics of a finished simulation: per GPU port link and VC
//! counters, per switch statistics, reorder buffers, packet and event counts.
//! One type for the batch API and the task-graph network.

use super::sim::{FabricSim, FaultStats, ReorderStats};
use crate::link::{LinkStats, ReplayStats, VcStats};
use crate::switch::SwitchStats;
use serde::Serialize;

/// Per GPU port link (GPU -> switch direction) statistics.
#[derive(Debug, Clone, Serialize)]
pub struct PortLinkStats {
    pub gpu: u32,
    pub port: u32,
    pub switch: u32,
    pub link: LinkStats,
    pub vcs: Vec<VcStats>,
    /// Payload bytes delivered to the GPU through this port (switch -> GPU
    /// direction), each byte once.
    pub rx_payload_bytes: u64,
    /// Payload bytes this port sent that a fault destroyed (replayed elsewhere).
    pub lost_bytes: u64,
    /// Link-level retry on the switch -> GPU direction.
    pub rx_replay: ReplayStats,
}

/// One switch output's link direction in a graph fabric (trunks and
/// switch -> endpoint links).
#[derive(Debug, Clone, Serialize)]
pub struct SwitchLinkStats {
    pub switch: u32,
    pub port: u32,
    /// "switch" (a trunk) or "endpoint".
    pub to: &'static str,
    /// Peer switch or endpoint id, and its port.
    pub peer: u32,
    pub peer_port: u32,
    /// Index into the spec's links.
    pub link_index: u32,
    pub link: LinkStats,
}

/// What the fabric counted.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FabricStats {
    pub ports: Vec<PortLinkStats>,
    pub switches: Vec<SwitchStats>,
    pub switch_cycle_ps: f64,
    pub reorder: Vec<ReorderStats>,
    pub packets: u64,
    pub events: u64,
    /// Faults and end-to-end replays (all zero without faults).
    pub faults: FaultStats,
    /// Payload bytes of the transfers that crossed the fabric (src != dst or loopback).
    pub sent_bytes: u64,
    /// Graph fabrics: every switch output's link (empty for one switch layer,
    /// whose switch -> GPU direction is counted per switch port).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub switch_links: Vec<SwitchLinkStats>,
    /// Time-resolved counters (None unless the spec's `counters` is on).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counters: Option<super::CounterSamples>,
}

/// Statistics of a finished simulation (`gpu_ports`: ports per GPU of the
/// simulated, possibly folded, spec).
pub fn stats_of(sim: &FabricSim, gpu_ports: u32, events: u64) -> FabricStats {
    let ports = sim
        .ports_iter()
        .zip(sim.port_fault_stats())
        .enumerate()
        .map(|(i, ((sw, l), (rx_payload_bytes, lost_bytes, rx_replay)))| PortLinkStats {
            gpu: i as u32 / gpu_ports,
            port: i as u32 % gpu_ports,
            switch: sw,
            link: *l.stats(),
            vcs: l.vc_stats().to_vec(),
            rx_payload_bytes,
            lost_bytes,
            rx_replay,
        })
        .collect();
    FabricStats {
        ports,
        switches: sim.switches().map(|s| s.stats().clone()).collect(),
        switch_cycle_ps: sim.cycle_ps(),
        reorder: sim.reorder.clone(),
        packets: sim.packets_sent,
        events,
        faults: sim.fault_stats(),
        sent_bytes: sim.xfers.iter().filter(|x| x.src != x.dst || x.loopback).map(|x| x.bytes).sum(),
        switch_links: sim
            .switch_links()
            .into_iter()
            .map(|(switch, port, peer, link_index, link)| {
                let (to, peer, peer_port) = match peer {
                    super::topology::Peer::Switch { switch, port } => ("switch", switch, port),
                    super::topology::Peer::Endpoint(g) => ("endpoint", g / gpu_ports, g % gpu_ports),
                    super::topology::Peer::None => ("none", u32::MAX, u32::MAX),
                };
                SwitchLinkStats { switch, port, to, peer, peer_port, link_index, link }
            })
            .collect(),
        counters: sim.sampler.export(),
    }
}
