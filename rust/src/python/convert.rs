//! Conversions between Python objects and the crate's serde types.

use super::ConfigError;
use crate::stats::Histogram;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde::{de::DeserializeOwned, Serialize};

/// Depythonize a spec; any mismatch (missing field, wrong type, unknown key,
/// an integer out of its field's range) becomes a `ConfigError` that names
/// the path of the offending field under `what` (`fabric.links[0].vcs`) and
/// serde's description. Types are strict: a bool, a string or a float is not
/// an integer.
pub fn from_py<T: DeserializeOwned>(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<T> {
    let mut de = pythonize::Depythonizer::from_object(obj);
    serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let msg = e.inner().to_string();
        let hint = if msg.contains("Overflow") || msg.contains("out of range") {
            " (a number exceeds its field's integer range: counts and ids up to 2^32-1, bytes and ps up to 2^64-1)"
        } else {
            ""
        };
        let at = if path == "." || path.is_empty() { what.to_string() } else { format!("{what}.{path}") };
        ConfigError::new_err(format!("{at}: {msg}{hint}"))
    })
}

/// Pythonize a result struct into plain dicts/lists/numbers.
pub fn to_py<'py, T: Serialize>(py: Python<'py>, v: &T) -> PyResult<Bound<'py, PyAny>> {
    pythonize::pythonize(py, v).map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(e.to_string()))
}

/// A histogram summarized as count, mean, min, max and the percentiles
/// p25/p50/p75/p90/p95/p99 (bucket resolution 6.25 %).
pub fn hist_dict<'py>(py: Python<'py>, h: &Histogram) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("count", h.count())?;
    d.set_item("mean", h.mean())?;
    d.set_item("min", h.min())?;
    d.set_item("max", h.max())?;
    for (name, q) in [("p25", 0.25), ("p50", 0.5), ("p75", 0.75), ("p90", 0.9), ("p95", 0.95), ("p99", 0.99)] {
        d.set_item(name, h.quantile(q))?;
    }
    Ok(d)
}
