//! Whole fabrics: GPUs, switch chips and the links between them; transfers
//! packet by packet through cycle-level switches.

mod fold;
mod run;
mod sampler;
mod sim;
mod spec;
mod stats;
mod topology;
mod validate;

pub(crate) use fold::fold_spec;
pub use fold::{gpu_symmetry, FoldPlan, BALANCED_MIN_PACKETS};
pub(crate) use run::validate_batch;
pub use run::{run_batch, BatchResult, TransferBatch};
pub use stats::{stats_of, FabricStats, PortLinkStats, SwitchLinkStats};
pub use sim::{FEv, FabricSim, FaultStats, ReorderStats, MAX_SIM_PACKETS};
pub(crate) use sim::reframed;
pub use spec::{port_injection_caps, ElementKind, FabricSpec, Fault, Fidelity, GpuInjection, Spray, NCCL_PCIE_FRACTION_OF_LANE_RATE, StaticRoute, SwitchKind, SwitchParams, Trunk, Wire, MAX_DATELINE_DIMS, MAX_ENDPOINTS, MAX_FAULT_PS, MAX_HOSTS, MAX_PORTS};
pub use sampler::{CounterSamples, CounterSpec, MAX_COUNTER_VALUES};
pub use topology::{Hop, Peer, Topology};
