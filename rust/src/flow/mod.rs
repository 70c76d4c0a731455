//! Flow level: transfers as fluid flows on the same fabric graph the packet
//! level runs (GPU ports, switch outputs, round-robin spraying over planes),
//! sharing links max-min fairly by progressive filling, recomputed when a flow
//! starts or drains. Credit windows are rate caps per lane (credits x flit
//! bytes / round trip), switch output contention is shared capacity, header
//! flits and the per-hop latency are charged as the packet level charges them.
//!
//! What it leaves out, and so where [`Fidelity::Auto`] runs packet level
//! instead: credit-bound hops (a VC's window below the link rate), FIFO
//! head-of-line blocking, and rolling incast (sources that cycle over the same
//! destinations in the same round-robin order, so at packet level their
//! packets meet at one switch output per round and credits throttle them).
//! Validation against packet level: tests/flow.rs and docs/fidelity.md.

mod batch;
mod graph;
mod memo;
mod paths;
mod share;
mod sim;
mod stats;

pub use crate::fabric::Fidelity;
pub use batch::{run_batch_at, run_batch_flow, run_batch_flow_filling};
pub use graph::{Bundle, GraphModel};
pub use memo::SolveMemo;
pub use paths::{FlowFabric, Resource};
pub use share::{Filler, Flows};
pub use sim::{Filling, FlowDiagnosis, FlowEv, FlowMark, FlowReplay, FlowSim, FlowXfer};
pub use stats::flow_stats;

/// Why a finished flow run is outside the flow level's validation, if it is:
/// the fabric's static reason (credit- or arbitration-bound) or an incast
/// seen while running.
pub fn outside_validation(sim: &FlowSim) -> Option<String> {
    sim.fab.packet_bound.clone().or_else(|| sim.diagnosis.outside.clone())
}

/// The reason line of a run that stayed at flow level.
pub const FLOW_VALID: &str = "bandwidth-bound: no credit-bound hop, no FIFO head-of-line blocking, no synchronized (rolling) incast, no parallel transfers on one GPU pair (flow level validated against packet level within 2 % here; docs/fidelity.md)";
