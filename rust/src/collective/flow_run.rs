//! The automatic fidelity choice for collectives (`fidelity = "auto"`): flow
//! level (run by [`run_collective`] on a spec that says `flow`), then packet
//! level instead where the flow run is outside its validation; the result
//! says which ran and why.

use super::params::CollectiveRequest;
use super::run::{run_collective, CollectiveResult};
use crate::engine::Interrupt;
use crate::error::Result;
use crate::fabric::{FabricSpec, Fidelity};
use crate::flow::{FlowFabric, FLOW_VALID};

const WARN: &str = "warning: flow level asked for outside its validation: ";

/// Run one collective at `spec.fidelity` (`packet`, `flow` or `auto`).
///
/// # Errors
/// As [`run_collective`].
pub fn run_collective_at(spec: &FabricSpec, req: &CollectiveRequest, interrupt: &mut dyn Interrupt) -> Result<CollectiveResult> {
    if spec.fidelity != Fidelity::Auto {
        return run_collective(spec, req, interrupt);
    }
    let mut s = spec.clone();
    s.fidelity = Fidelity::Flow;
    let why = match if spec.is_graph() { Some(crate::fabric::GRAPH_FLOW_REASON.to_string()) } else { FlowFabric::new(&s)?.packet_bound } {
        Some(w) => w,
        None => {
            let mut r = run_collective(&s, req, interrupt)?;
            if r.fidelity_reason == FLOW_VALID {
                r.fidelity_reason = format!("auto chose flow: {FLOW_VALID}");
                return Ok(r);
            }
            r.fidelity_reason.trim_start_matches(WARN).to_string()
        }
    };
    s.fidelity = Fidelity::Packet;
    let mut r = run_collective(&s, req, interrupt)?;
    r.fidelity = "packet".into();
    r.fidelity_reason = format!("auto chose packet: {why}");
    Ok(r)
}
