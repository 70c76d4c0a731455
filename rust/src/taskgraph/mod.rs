//! Task-graph execution: compute, transfer and collective tasks with
//! dependencies, on per-device streams, over a pluggable [`Network`].
//!
//! Python builds the graph (schedules lower to it); Rust executes it. Every
//! edge is finish-to-start. Edges are either *data* edges (a task needs its
//! predecessor's output) or *credit* edges (a bounded hand-off buffer: a stage
//! may hold only so many in-flight slices), so the waits each kind causes can
//! be reported apart.
//!
//! Resources: each device has `compute_streams` compute streams and
//! `comm_streams` communication streams. A compute task holds one compute
//! stream of its device; a transfer holds one comm stream of its source; a
//! collective holds one comm stream of every member, all at once (atomic
//! acquisition, so collectives issued in different orders cannot deadlock).
//! Among ready tasks waiting for the same stream, the lowest task index goes
//! first (issue order, as a CUDA stream would run them).

mod exec;
mod fabric_network;
mod fidelity;
mod graph;
mod network;
mod periodic;

pub use exec::{execute, TaskGraphResult};
pub use fabric_network::FabricNetwork;
pub use fidelity::{execute_on_fabric, FabricRun};
pub use graph::{CollectiveKind, EdgeKind, TaskGraph, TaskKind};
pub use network::{AnalyticNetwork, Network, NetworkDone};
