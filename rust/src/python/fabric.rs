//! Bindings for fabric transfers: spec dict + numpy columns in, numpy columns out.

use super::convert::from_py;
use super::taskgraph::col;
use super::{signal_check, ConfigError};
use crate::fabric::{BatchResult, FabricSpec, TransferBatch};
use numpy::IntoPyArray;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Columns of a batch result (shared with the task-graph binding).
pub(crate) fn result_dict<'py>(py: Python<'py>, r: BatchResult) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("start_ps", r.start_ps.into_pyarray(py))?;
    d.set_item("end_ps", r.end_ps.into_pyarray(py))?;
    d.set_item("makespan_ps", r.makespan_ps)?;
    d.set_item("folded_planes", r.folded_planes)?;
    d.set_item("fold_reason", r.fold_reason)?;
    d.set_item("switch_cycle_ps", r.stats.switch_cycle_ps)?;
    d.set_item("packets", r.stats.packets)?;
    d.set_item("events", r.stats.events)?;
    d.set_item("fidelity", &r.fidelity)?;
    d.set_item("fidelity_reason", &r.fidelity_reason)?;
    // GPU -> switch links, one row per GPU port.
    let l = PyDict::new(py);
    let p = &r.stats.ports;
    let u = |f: &dyn Fn(&crate::fabric::PortLinkStats) -> u64| p.iter().map(f).collect::<Vec<u64>>();
    l.set_item("gpu", u(&|x| x.gpu as u64).into_pyarray(py))?;
    l.set_item("port", u(&|x| x.port as u64).into_pyarray(py))?;
    l.set_item("switch", u(&|x| x.switch as u64).into_pyarray(py))?;
    l.set_item("busy_ps", u(&|x| x.link.busy_ps).into_pyarray(py))?;
    l.set_item("payload_bytes", u(&|x| x.link.payload_bytes).into_pyarray(py))?;
    l.set_item("wire_bytes", u(&|x| x.link.wire_bytes).into_pyarray(py))?;
    l.set_item("packets", u(&|x| x.link.packets).into_pyarray(py))?;
    l.set_item("credit_exhaustion_episodes", u(&|x| x.vcs.iter().map(|v| v.exhaustion_episodes).sum()).into_pyarray(py))?;
    l.set_item("credit_exhaustion_ps", u(&|x| x.vcs.iter().map(|v| v.exhaustion_ps).sum()).into_pyarray(py))?;
    // Link-level retry (GPU -> switch and switch -> GPU) and fault accounting.
    l.set_item("replays", u(&|x| x.link.replay.replays).into_pyarray(py))?;
    l.set_item("replayed_wire_bytes", u(&|x| x.link.replay.replayed_wire_bytes).into_pyarray(py))?;
    l.set_item("replay_ps", u(&|x| x.link.replay.replay_ps).into_pyarray(py))?;
    l.set_item("replay_buffer_wait_ps", u(&|x| x.link.replay.buffer_wait_ps).into_pyarray(py))?;
    l.set_item("rx_payload_bytes", u(&|x| x.rx_payload_bytes).into_pyarray(py))?;
    l.set_item("lost_bytes", u(&|x| x.lost_bytes).into_pyarray(py))?;
    l.set_item("rx_replays", u(&|x| x.rx_replay.replays).into_pyarray(py))?;
    l.set_item("rx_replayed_wire_bytes", u(&|x| x.rx_replay.replayed_wire_bytes).into_pyarray(py))?;
    l.set_item("rx_replay_ps", u(&|x| x.rx_replay.replay_ps).into_pyarray(py))?;
    d.set_item("links", l)?;
    let f = super::convert::to_py(py, &r.stats.faults)?;
    f.set_item("sent_bytes", r.stats.sent_bytes)?;
    d.set_item("faults", f)?;
    // Switch ports, one row per (switch, port).
    let s = PyDict::new(py);
    let (mut sw, mut port, mut inc, mut outc, mut qsum, mut granted, mut flits_out, mut ex_ep, mut ex_cyc, mut occ_max) =
        (vec![], vec![], vec![], vec![], vec![], vec![], vec![], vec![], vec![], vec![]);
    for (k, st) in r.stats.switches.iter().enumerate() {
        let n = st.ports.len();
        let v = if n == 0 { 1 } else { st.inputs.len() / n };
        for i in 0..n {
            sw.push(k as u64);
            port.push(i as u64);
            inc.push(st.ports[i].input_conflicts);
            outc.push(st.ports[i].output_conflicts);
            let ins = &st.inputs[i * v..(i + 1) * v];
            let outs = &st.outputs[i * v..(i + 1) * v];
            qsum.push(ins.iter().map(|x| x.queueing_cycles_sum).sum::<u64>());
            granted.push(ins.iter().map(|x| x.packets_granted).sum::<u64>());
            occ_max.push(ins.iter().map(|x| x.occupancy_max_flits).max().unwrap_or(0));
            flits_out.push(outs.iter().map(|x| x.flits_out).sum::<u64>());
            ex_ep.push(outs.iter().map(|x| x.credit_exhaustion_episodes).sum::<u64>());
            ex_cyc.push(outs.iter().map(|x| x.credit_exhaustion_cycles).sum::<u64>());
        }
    }
    s.set_item("switch", sw.into_pyarray(py))?;
    s.set_item("port", port.into_pyarray(py))?;
    s.set_item("input_conflicts", inc.into_pyarray(py))?;
    s.set_item("output_conflicts", outc.into_pyarray(py))?;
    s.set_item("queueing_cycles_sum", qsum.into_pyarray(py))?;
    s.set_item("packets_granted", granted.into_pyarray(py))?;
    s.set_item("input_occupancy_max_flits", occ_max.into_pyarray(py))?;
    s.set_item("output_flits", flits_out.into_pyarray(py))?;
    s.set_item("output_credit_exhaustion_episodes", ex_ep.into_pyarray(py))?;
    s.set_item("output_credit_exhaustion_cycles", ex_cyc.into_pyarray(py))?;
    d.set_item("switch_ports", s)?;
    let ro = PyDict::new(py);
    ro.set_item("max_packets", r.stats.reorder.iter().map(|x| x.max_packets).collect::<Vec<u64>>().into_pyarray(py))?;
    ro.set_item("mean_packets", r.stats.reorder.iter().map(|x| if x.deliveries == 0 { 0.0 } else { x.held_sum as f64 / x.deliveries as f64 }).collect::<Vec<f64>>().into_pyarray(py))?;
    ro.set_item("window_overflows", r.stats.reorder.iter().map(|x| x.window_overflows).collect::<Vec<u64>>().into_pyarray(py))?;
    d.set_item("reorder", ro)?;
    Ok(d)
}

/// Run a batch of transfers on a fabric spec dict; see `flitsim.transfers`.
#[pyfunction]
pub fn fabric_transfers<'py>(py: Python<'py>, spec: &Bound<'py, PyAny>, batch: &Bound<'py, PyDict>) -> PyResult<Bound<'py, PyDict>> {
    let spec: FabricSpec = from_py(spec, "fabric")?;
    let b = TransferBatch {
        src: col(batch, "src")?,
        dst: col(batch, "dst")?,
        bytes: col(batch, "bytes")?,
        start_ps: col(batch, "start_ps")?,
        after: col(batch, "after")?,
    };
    if b.src.is_empty() {
        return Err(ConfigError::new_err("transfers: at least one transfer"));
    }
    let r = py.detach(|| crate::flow::run_batch_at(&spec, &b, &mut signal_check))?;
    result_dict(py, r)
}

/// Run one collective (request dict mirrors `CollectiveRequest`) on a fabric spec dict; see `flitsim.collective`.
#[pyfunction]
pub fn collective_run<'py>(py: Python<'py>, spec: &Bound<'py, PyAny>, request: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyDict>> {
    let spec: FabricSpec = from_py(spec, "fabric")?;
    let req: crate::collective::CollectiveRequest = from_py(request, "collective")?;
    let r = py.detach(|| crate::collective::run_collective_at(&spec, &req, &mut signal_check))?;
    let d = PyDict::new(py);
    d.set_item("time_ps", r.time_ps)?;
    d.set_item("algorithm", super::convert::to_py(py, &r.algorithm)?)?;
    d.set_item("protocol", super::convert::to_py(py, &r.protocol)?)?;
    d.set_item("channels", r.channels)?;
    d.set_item("chunk_bytes", r.chunk_bytes)?;
    d.set_item("transfers", r.transfers)?;
    d.set_item("bytes_sent", r.bytes_sent.into_pyarray(py))?;
    d.set_item("bytes_received", r.bytes_received.into_pyarray(py))?;
    d.set_item("link_bytes_sent", r.link_bytes_sent.into_pyarray(py))?;
    d.set_item("link_bytes_received", r.link_bytes_received.into_pyarray(py))?;
    d.set_item("sim_packet_bytes", r.sim_packet_bytes)?;
    d.set_item("folded_planes", r.folded_planes)?;
    d.set_item("fold_reason", r.fold_reason)?;
    d.set_item("sim_packet_note", r.sim_packet_note)?;
    d.set_item("packets", r.packets)?;
    d.set_item("events", r.events)?;
    d.set_item("max_link_utilization", r.max_link_utilization)?;
    d.set_item("credit_exhaustion_episodes", r.credit_exhaustion_episodes)?;
    d.set_item("arbitration_conflicts", r.arbitration_conflicts)?;
    d.set_item("estimate_ps", r.estimate_ps)?;
    d.set_item("auto_candidates", r.auto_candidates)?;
    let f = super::convert::to_py(py, &r.faults)?;
    f.set_item("sent_bytes", r.sent_bytes_on_fabric)?;
    d.set_item("faults", f)?;
    d.set_item("rx_payload_bytes", r.rx_payload_bytes.into_pyarray(py))?;
    d.set_item("fidelity", r.fidelity)?;
    d.set_item("fidelity_reason", r.fidelity_reason)?;
    Ok(d)
}

/// Codeword and packet error probabilities of a SerDes spec dict at a raw
/// bit error rate (RS binomial closed form; see `FecErrorModel` in _core.pyi).
#[pyfunction]
pub fn fec_error_model<'py>(py: Python<'py>, serdes: &Bound<'py, PyAny>, ber: f64) -> PyResult<Bound<'py, PyAny>> {
    let s: crate::phy::SerdesSpec = from_py(serdes, "serdes")?;
    super::convert::to_py(py, &crate::phy::FecErrorModel::new(&s, ber)?)
}

/// Completion time (ps) of a collective on the ideal alpha-beta port model.
#[pyfunction]
pub fn collective_ideal(gpus: u32, alpha_ps: u64, bandwidth_bytes_per_s: f64, nvls: bool, request: &Bound<'_, PyAny>) -> PyResult<u64> {
    let req: crate::collective::CollectiveRequest = from_py(request, "collective")?;
    Ok(crate::collective::run_collective_ideal(gpus, alpha_ps, bandwidth_bytes_per_s, nvls, &req)?)
}

/// The default (calibrated) collective parameters, as a dict.
#[pyfunction]
pub fn collective_defaults(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    super::convert::to_py(py, &crate::collective::CollectiveParams::default())
}
