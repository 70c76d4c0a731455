//! flitsim: a deterministic, cycle-level simulator of GPU scale-up fabrics.
//!
//! The crate is pure Rust; the PyO3 bindings live in [`python`] behind the
//! `python` feature and only convert. Every model here is testable with
//! `cargo test` alone.
//!
//! Layers (bottom up): [`engine`] (event kernel, integer picoseconds),
//! [`phy`] (SerDes lane timing and the rate chain), [`link`] (one direction of a
//! link: serializer, propagation, per-VC credits), [`switch`] (cycle-level
//! input-queued crossbar with pluggable allocators), [`experiments`] (small,
//! self-contained experiments built from the layers above).

// `_gBps` / `_GBps` unit suffixes (README conventions) are not snake case.
#![allow(non_snake_case)]

pub mod engine;
pub mod error;
pub mod experiments;
pub mod collective;
pub mod fabric;
pub mod flow;
pub mod link;
pub mod phy;
pub mod presets;
pub mod stats;
pub mod switch;
pub mod taskgraph;

#[cfg(feature = "python")]
pub mod python;

pub use error::{FlitsimError, Result};
