//! Whole fabrics: GPUs, switch chips and the links between them; transfers
//! packet by packet through cycle-level switches.

mod run;
mod sim;
mod spec;
mod topology;

pub(crate) use run::fold_spec;
pub use crate::collective::FabricNetwork;
pub(crate) use run::validate_batch;
pub use run::{run_batch, stats_of, BatchResult, PortLinkStats, TransferBatch};
pub use sim::{FEv, FabricSim, FaultStats, ReorderStats};
pub use spec::{FabricSpec, Fault, Fidelity, GpuInjection, Spray, SwitchParams, Wire, MAX_FAULT_PS};
pub use topology::Topology;
