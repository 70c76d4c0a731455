//! Whole fabrics: GPUs, switch chips and the links between them; transfers
//! packet by packet through cycle-level switches.

mod fold;
mod run;
mod sim;
mod spec;
mod stats;
mod topology;

pub(crate) use fold::fold_spec;
pub use fold::FoldPlan;
pub use run::{run_batch, BatchResult, TransferBatch};
pub use stats::{stats_of, FabricStats, PortLinkStats};
pub use sim::{FEv, FabricSim, ReorderStats};
pub use spec::{FabricSpec, GpuInjection, Spray, SwitchParams, Wire};
pub use topology::Topology;
