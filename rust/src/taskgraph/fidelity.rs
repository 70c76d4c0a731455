//! Task graphs on a fabric at the fidelity its spec names: `packet`, `flow`,
//! or `auto` (flow level; the whole graph again at packet level when the flow
//! run is outside its validation). The outcome says which ran and why.

use super::exec::{execute, TaskGraphResult};
use super::graph::TaskGraph;
use super::fabric_network::FabricNetwork;
use crate::collective::CollectiveParams;
use crate::engine::Interrupt;
use crate::error::{FlitsimError, Result};
use crate::fabric::{FabricSpec, Fidelity};
use crate::flow::{FlowFabric, FLOW_VALID};

/// A task graph run on a fabric: the result, the network (statistics), the
/// fidelity that ran and the reason.
pub struct FabricRun {
    pub result: TaskGraphResult,
    pub network: FabricNetwork,
    pub fidelity: &'static str,
    pub reason: String,
}

/// Execute `graph` on `spec` at `spec.fidelity`.
///
/// # Errors
/// As [`execute`] and [`FabricNetwork::with_params`].
pub fn execute_on_fabric(graph: &TaskGraph, spec: &FabricSpec, params: CollectiveParams, calibrate: bool, interrupt: &mut dyn Interrupt) -> Result<FabricRun> {
    let run = |s: &FabricSpec, interrupt: &mut dyn Interrupt| -> Result<(TaskGraphResult, FabricNetwork)> {
        let mut net = FabricNetwork::with_params(s, params.clone(), calibrate)?;
        match execute(graph, &mut net, interrupt) {
            // an isolated replay whose end shared its picosecond: the same
            // run again without isolated replays (the plain answer, exactly)
            Err(FlitsimError::Retry { .. }) => {
                let mut net = FabricNetwork::with_params(s, params.clone(), calibrate)?;
                net.set_isolated_replay(false);
                net.isolated_retried = true;
                let r = execute(graph, &mut net, interrupt)?;
                Ok((r, net))
            }
            r => Ok((r?, net)),
        }
    };
    let mut s = spec.clone();
    let why = match spec.fidelity {
        Fidelity::Packet => {
            let (result, network) = run(spec, interrupt)?;
            return Ok(FabricRun { result, network, fidelity: "packet", reason: String::new() });
        }
        Fidelity::Flow => {
            let (result, network) = run(spec, interrupt)?;
            let reason = match network.flow_outside_validation() {
                Some(w) => format!("warning: flow level asked for outside its validation: {w}"),
                None => FLOW_VALID.into(),
            };
            return Ok(FabricRun { result, network, fidelity: "flow", reason });
        }
        Fidelity::Auto => {
            s.fidelity = Fidelity::Flow;
            match FlowFabric::new(&s)?.packet_bound {
                Some(w) => w,
                None => {
                    let (result, network) = run(&s, interrupt)?;
                    match network.flow_outside_validation() {
                        None => return Ok(FabricRun { result, network, fidelity: "flow", reason: format!("auto chose flow: {FLOW_VALID}") }),
                        Some(w) => w,
                    }
                }
            }
        }
    };
    s.fidelity = Fidelity::Packet;
    let (result, network) = run(&s, interrupt)?;
    Ok(FabricRun { result, network, fidelity: "packet", reason: format!("auto chose packet: {why}") })
}
