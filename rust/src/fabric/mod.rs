//! Whole fabrics: GPUs, switch chips and the links between them; transfers
//! packet by packet through cycle-level switches.

mod run;
mod sim;
mod spec;
mod topology;

pub use run::{run_batch, BatchResult, FabricNetwork, PortLinkStats, TransferBatch};
pub use sim::{FEv, FabricSim, ReorderStats};
pub use spec::{FabricSpec, GpuInjection, Spray, SwitchParams, Wire};
pub use topology::Topology;
