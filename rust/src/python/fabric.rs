//! Bindings for fabric transfers: spec dict + numpy columns in, numpy columns out.

use super::convert::{batch_result_dict, col, fabric_of, from_py};
use super::{signal_check, ConfigError};
use crate::fabric::TransferBatch;
use numpy::IntoPyArray;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Run a batch of transfers on a fabric spec dict; see `flitsim.transfers`.
#[pyfunction]
pub fn fabric_transfers<'py>(py: Python<'py>, spec: &Bound<'py, PyAny>, batch: &Bound<'py, PyDict>) -> PyResult<Bound<'py, PyDict>> {
    let spec = fabric_of(spec)?;
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
    batch_result_dict(py, r)
}

/// Run one collective (request dict mirrors `CollectiveRequest`) on a fabric spec dict; see `flitsim.collective`.
#[pyfunction]
pub fn collective_run<'py>(py: Python<'py>, spec: &Bound<'py, PyAny>, request: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyDict>> {
    let spec = fabric_of(spec)?;
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
    d.set_item("link_class_payload_bytes", r.link_class_payload_bytes.clone().into_pyarray(py))?;
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

/// The fabric's domains (GPUs joined without a route through a NIC or a
/// network switch; `Topology::gpu_domains`) as lists of GPU ids, ordered by
/// their lowest id.
#[pyfunction]
pub fn fabric_domains(spec: &Bound<'_, PyAny>) -> PyResult<Vec<Vec<u32>>> {
    let spec = fabric_of(spec)?;
    spec.validate()?;
    let dom = crate::fabric::Topology::new(&spec).gpu_domains(&spec);
    let n = dom.iter().copied().max().map_or(0, |m| m + 1) as usize;
    let mut out = vec![Vec::new(); n];
    for (g, &d) in dom.iter().enumerate() {
        out[d as usize].push(g as u32);
    }
    Ok(out)
}

/// One representative route from endpoint `src` to `dst`: a list of hop
/// dicts (element, kind, name, index, in_port, out_port, link, link rate,
/// ECMP width) plus the P2P verdict; see `flitsim.route`.
#[pyfunction]
pub fn fabric_route<'py>(py: Python<'py>, spec: &Bound<'py, PyAny>, src: u32, dst: u32) -> PyResult<Bound<'py, PyDict>> {
    let spec = fabric_of(spec)?;
    spec.validate()?;
    let ne = spec.endpoints();
    for (name, v) in [("src", src), ("dst", dst)] {
        if v >= ne {
            return Err(crate::error::FlitsimError::config(name, v, format!("an endpoint id in 0..{ne} (GPUs 0..{}, hosts {}..{ne})", spec.gpus, spec.gpus)).into());
        }
    }
    let topo = crate::fabric::Topology::new(&spec);
    let hops = pyo3::types::PyList::empty(py);
    for h in topo.path(src, dst) {
        let d = PyDict::new(py);
        let (rates, _) = spec.links[h.link as usize].derive()?;
        match h.switch {
            None => {
                d.set_item("element", if src < spec.gpus { "gpu" } else { "host" })?;
                d.set_item("kind", if src < spec.gpus { "gpu" } else { "host" })?;
                d.set_item("name", spec.endpoint_name(src))?;
                d.set_item("index", src)?;
            }
            Some(s) => {
                d.set_item("element", "switch")?;
                let (kind, name) = spec.kind_of(s).map_or(("switch", "switch".to_string()), |k| (k.kind.name(), k.name.clone()));
                d.set_item("kind", kind)?;
                d.set_item("name", name)?;
                d.set_item("index", s)?;
            }
        }
        d.set_item("in_port", h.in_port)?;
        d.set_item("out_port", h.out_port)?;
        d.set_item("link", h.link)?;
        let fmt = spec.links[h.link as usize].packet;
        // As the engine frames it: the base format (links[0]) per protocol
        // packet of gpu.payload_bytes, any other format in packets of its
        // own max_payload_bytes (docs/graph.md).
        let pl = if fmt == spec.links[0].packet { spec.gpu.payload_bytes.min(fmt.max_payload_bytes) } else { fmt.max_payload_bytes } as u64;
        let eff = pl as f64 / (fmt.flits_per_packet(pl) * fmt.flit_bytes as u64) as f64;
        d.set_item("link_GBps", rates.payload_rate_bps as f64 / 8e9)?;
        d.set_item("link_payload_GBps", rates.payload_rate_bps as f64 / 8e9 * eff)?;
        d.set_item("ecmp", h.ecmp)?;
        d.set_item("dateline", h.switch.and_then(|s| topo.dateline(s, h.out_port)))?;
        hops.append(d)?;
    }
    let out = PyDict::new(py);
    out.set_item("hops", hops)?;
    out.set_item("dst_name", spec.endpoint_name(dst))?;
    out.set_item("vc_class", topo.route_vc_class(src, dst))?;
    out.set_item("p2p_blocker", spec.p2p_blocker(&topo, src, dst).map(|s| spec.element_name(s)))?;
    Ok(out)
}
