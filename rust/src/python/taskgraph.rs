//! Bindings for the task-graph executor: numpy columns in, numpy columns out.

use super::convert::{batch_result_dict, col, from_py, scalar, CompiledFabric};
use super::signal_check;
use crate::taskgraph::{execute, AnalyticNetwork, TaskGraph};
use numpy::IntoPyArray;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde::{Deserialize, Serialize};

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields, tag = "kind", rename_all = "snake_case")]
enum NetworkSpec {
    /// Alpha-beta network (see `AnalyticNetwork`); "ideal" is its former name.
    #[serde(alias = "ideal")]
    Analytic {
        devices: u32,
        #[serde(default)]
        alpha_ps: u64,
        /// 0 = infinite.
        #[serde(default)]
        bandwidth_bytes_per_s: u64,
    },
    /// The cycle-level fabric: a spec dict, or a `CompiledFabric` (taken
    /// out of the dict before the rest is read: `fabric` is then None here).
    Fabric {
        #[serde(default)]
        fabric: Option<crate::fabric::FabricSpec>,
        /// Apply the calibrated GPU injection limit (NCCL-level per-link
        /// efficiency) when the fabric sets none; default true.
        #[serde(default = "yes")]
        calibrated: bool,
        /// Collective parameters (a `flitsim calibrate` file's); default: the
        /// calibrated defaults.
        #[serde(default)]
        collective_params: Option<crate::collective::CollectiveParams>,
    },
}

fn yes() -> bool {
    true
}

/// Execute a columnar task graph over a network spec; returns per-task arrays.
#[pyfunction]
pub fn execute_taskgraph<'py>(py: Python<'py>, graph: &Bound<'py, PyDict>, network: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyDict>> {
    // period_tasks: [outer (steps), inner (layers)...]
    let periods: Vec<u32> = if graph.contains("period_tasks")? { col::<u32>(graph, "period_tasks")? } else { Vec::new() };
    let g = TaskGraph {
        devices: scalar(graph, "devices")?,
        compute_streams: scalar(graph, "compute_streams")?,
        comm_streams: scalar(graph, "comm_streams")?,
        kind: col(graph, "kind")?,
        device: col(graph, "device")?,
        peer: col(graph, "peer")?,
        duration_ps: col(graph, "duration_ps")?,
        bytes: col(graph, "bytes")?,
        collective: col(graph, "collective")?,
        group: col(graph, "group")?,
        group_offsets: col(graph, "group_offsets")?,
        group_members: col(graph, "group_members")?,
        release_ps: if graph.contains("release_ps")? { col(graph, "release_ps")? } else { Vec::new() },
        steal_ppm: if graph.contains("steal_ppm")? { col(graph, "steal_ppm")? } else { Vec::new() },
        period_tasks: periods.first().copied().unwrap_or(0),
        inner_periods: periods.get(1..).unwrap_or(&[]).to_vec(),
        edge_src: col(graph, "edge_src")?,
        edge_dst: col(graph, "edge_dst")?,
        edge_kind: col(graph, "edge_kind")?,
    };
    // A compiled fabric (FabricSpec._core_fabric) is used as it is; the rest of the dict is read as usual.
    let mut compiled = None;
    let spec: NetworkSpec = match network.cast::<PyDict>() {
        Ok(d) if d.get_item("fabric")?.is_some_and(|f| f.is_instance_of::<CompiledFabric>()) => {
            let rest = d.copy()?;
            compiled = Some(rest.get_item("fabric")?.expect("checked above").cast::<CompiledFabric>()?.get().spec.clone());
            rest.del_item("fabric")?;
            from_py(rest.as_any(), "network")?
        }
        _ => from_py(network, "network")?,
    };
    let (r, net_stats) = match spec {
        NetworkSpec::Analytic { devices, alpha_ps, bandwidth_bytes_per_s } => {
            let max = crate::fabric::MAX_ENDPOINTS;
            crate::error::ensure(devices >= 1 && devices <= max, "network.devices", devices, &format!("1..={max} devices"))?;
            let mut net = AnalyticNetwork::new(devices, alpha_ps, bandwidth_bytes_per_s);
            let r = py.detach(|| execute(&g, &mut net, &mut signal_check))?;
            let d = PyDict::new(py);
            d.set_item("kind", "analytic")?;
            d.set_item("bytes_moved", net.bytes_moved)?;
            (r, d)
        }
        NetworkSpec::Fabric { fabric, calibrated, collective_params } => {
            let fabric = match (fabric, compiled) {
                (Some(f), _) => std::sync::Arc::new(f),
                (None, Some(c)) => c,
                (None, None) => return Err(super::ConfigError::new_err("network.fabric: missing field `fabric` (a fabric spec dict)")),
            };
            let params = collective_params.unwrap_or_default();
            let run = py.detach(|| crate::taskgraph::execute_on_fabric(&g, &fabric, params, calibrated, &mut signal_check))?;
            let (r, net) = (run.result, run.network);
            let d = PyDict::new(py);
            d.set_item("kind", "fabric")?;
            d.set_item("fidelity", run.fidelity)?;
            d.set_item("fidelity_reason", run.reason)?;
            d.set_item("packets", net.packets_sent())?;
            d.set_item("fabric", batch_result_dict(py, net.stats(r.makespan_ps, r.events))?)?;
            d.set_item("task_credit_wait_ps", net.task_credit_wait_ps(g.len()).into_pyarray(py))?;
            // replayed collectives (exact; docs/fidelity.md "Replayed collectives")
            let rp = PyDict::new(py);
            rp.set_item("recorded", net.recorded)?;
            rp.set_item("replayed", net.replayed)?;
            rp.set_item("replayed_isolated", net.replayed_isolated)?;
            rp.set_item("isolated_retried", net.isolated_retried)?;
            d.set_item("replays", rp)?;
            // staged copies run as chunk trains (flow level; docs/fidelity.md "Chunk trains")
            d.set_item("chunk_trains", net.trains)?;
            (r, d)
        }
    };
    let d = PyDict::new(py);
    d.set_item("start_ps", r.start_ps.into_pyarray(py))?;
    d.set_item("end_ps", r.end_ps.into_pyarray(py))?;
    d.set_item("data_ready_ps", r.data_ready_ps.into_pyarray(py))?;
    d.set_item("credit_ready_ps", r.credit_ready_ps.into_pyarray(py))?;
    d.set_item("makespan_ps", r.makespan_ps)?;
    d.set_item("events", r.events)?;
    d.set_item("periodic", r.periodic)?;
    d.set_item("network", net_stats)?;
    Ok(d)
}
