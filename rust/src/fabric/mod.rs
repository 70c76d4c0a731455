//! Whole fabrics: GPUs, switch chips and the links between them; transfers
//! packet by packet through cycle-level switches.

mod run;
mod sim;
mod spec;
mod topology;

pub(crate) use run::fold_spec;
pub use crate::collective::FabricNetwork;
pub use run::{run_batch, stats_of, BatchResult, PortLinkStats, TransferBatch};
pub use sim::{FEv, FabricSim, FaultStats, ReorderStats, MAX_SIM_PACKETS};
pub use spec::{FabricSpec, Fault, GpuInjection, Spray, SwitchParams, Wire, MAX_ENDPOINTS, MAX_FAULT_PS, MAX_PORTS};
pub use topology::Topology;
