//! Bindings for transfers with transports (`flitsim.transfers(..., transport=...)`).

use super::convert::{batch_result_dict, col, fabric_of, from_py};
use super::{signal_check, ConfigError};
use crate::collective::{CollectiveParams, Transport};
use crate::fabric::TransferBatch;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Run a batch of transfers, each by its transport (`transports`: one name
/// or one per transfer: auto, p2p, host, rdma), with transport parameters
/// `params` (CollectiveParams fields); see `flitsim.transfers`.
#[pyfunction]
pub fn fabric_transfers_transport<'py>(py: Python<'py>, spec: &Bound<'py, PyAny>, batch: &Bound<'py, PyDict>, transports: Vec<String>, params: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyDict>> {
    let spec = fabric_of(spec)?;
    let params: CollectiveParams = from_py(params, "params")?;
    let b = TransferBatch { src: col(batch, "src")?, dst: col(batch, "dst")?, bytes: col(batch, "bytes")?, start_ps: col(batch, "start_ps")?, after: col(batch, "after")? };
    if b.src.is_empty() {
        return Err(ConfigError::new_err("transfers: at least one transfer"));
    }
    let mut ts = Vec::with_capacity(transports.len());
    for (i, t) in transports.iter().enumerate() {
        ts.push(match t.as_str() {
            "auto" => Transport::Auto,
            "p2p" => Transport::P2p,
            "host" => Transport::Host,
            "rdma" => Transport::Rdma,
            other => return Err(ConfigError::new_err(format!("transport[{i}] = {other:?}: expected 'auto', 'p2p', 'host' or 'rdma'"))),
        });
    }
    let r = py.detach(|| crate::collective::run_batch_with_transports(&spec, &b, &ts, &params, &mut signal_check))?;
    batch_result_dict(py, r)
}
