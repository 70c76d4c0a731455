//! Small self-contained experiments built from the engine and the models.

pub mod link_transfer;
pub mod switch_lab;
