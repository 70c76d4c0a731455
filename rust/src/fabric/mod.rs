//! Whole fabrics: GPUs, switch chips and the links between them.

mod spec;

pub use spec::{FabricSpec, GpuInjection, Spray, SwitchParams, Wire};
