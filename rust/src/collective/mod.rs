//! Collectives lowered to transfer DAGs and executed on the fabric.
//!
//! A collective (all_reduce, all_gather, reduce_scatter, all_to_all,
//! broadcast, reduce, send/recv) over a group of GPUs becomes a DAG of nodes:
//! transfers (GPU -> GPU through the switches, or GPU -> switch -> GPU
//! "loopback" for NVLS) and delays (launch latency, the NVLS engine). Edges
//! carry a delay (per-step synchronisation latency, reduction compute), so a
//! node starts at max over predecessors of (end + edge delay). The whole DAG
//! runs inside the engine: no step crosses into Python.
//!
//! Algorithms (NCCL's): ring (channels x chunks, pipelined), double binary
//! tree (all_reduce), direct/pairwise (all_to_all in staggered order: rank r
//! sends to r+k at step k; send/recv), and NVLS (all_reduce; each GPU sends its
//! contributions into the switch, which reduces and multicasts the result:
//! S (n+1)/n bytes each way per GPU instead of the ring's 2(n-1)/n S).
//! Protocols Simple, LL128 (120 of 128 B useful) and LL (50 %) scale the bytes
//! on the wire.

mod batch;
mod dag;
mod flow_run;
mod lower;
mod params;
mod run;
pub mod tiers;
pub mod transport;

pub use dag::{CEv, DagExec};
pub(crate) use dag::Backend;
pub(crate) use run::{calibrated_spec, fabric_info, reach_of, transported};
pub use flow_run::run_collective_at;
pub use run::{run_collective, run_collective_ideal, CollectiveResult, AUTO_PRUNE_FACTOR};
pub use lower::{candidates, estimate, lower, lower_as, Dag, FabricInfo, Lowered, NodeKind, MAX_DAG_NODES};
pub use batch::run_batch_with_transports;
pub use tiers::{lower_best, lower_in, plan};
pub use transport::{expand, expand_each, expand_train, route, PathClass, Reach, Route, TRAIN_MIN_PIECES};
pub use params::{Transport, TransportParams, Algorithm, CollectiveParams, CollectiveRequest, Op, Protocol};
