//! Conversions between Python objects and the crate's serde types.

use super::ConfigError;
use crate::fabric::BatchResult;
use crate::stats::Histogram;
use numpy::{IntoPyArray, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde::{de::DeserializeOwned, Serialize};

/// Depythonize a spec; any mismatch (missing field, wrong type, unknown key,
/// an integer out of its field's range) becomes a `ConfigError` that names
/// the path of the offending field under `what` (`fabric.links[0].vcs`) and
/// serde's description. Types are strict: a bool, a string or a float is not
/// an integer.
pub fn from_py<T: DeserializeOwned + Serialize>(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<T> {
    let mut de = pythonize::Depythonizer::from_object(obj);
    let v: T = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let msg = e.inner().to_string();
        let at = if path == "." || path.is_empty() { what.to_string() } else { format!("{what}.{path}") };
        if msg.contains("Overflow") || msg.contains("out of range") || msg.contains("too big") {
            // Name the value, not pyo3's conversion text.
            let got = value_at(obj, e.path()).unwrap_or_else(|| "the value".to_string());
            return ConfigError::new_err(format!(
                "{at} = {got}: exceeds the field's integer range (counts and ids up to 2^32-1, bytes and ps up to 2^64-1; no negative values)"
            ));
        }
        ConfigError::new_err(format!("{at}: {msg}"))
    })?;
    // pythonize reads integers with `__index__`, which takes True as 1: compare
    // the input with the value read back and refuse a bool that became a number.
    let back = pythonize::pythonize(obj.py(), &v).map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(e.to_string()))?;
    // (The walks build the path of a finding only on the way back up: no
    // string work per element of a large spec.)
    let mut at = String::new();
    if bool_read_as_number(obj, &back, &mut at)? {
        return Err(ConfigError::new_err(format!("{what}{at}: expected a number, got a bool (True is not 1)")));
    }
    // ... and reads bools by truthiness ("yes", 1, "false" all pass): refuse a non-bool read as a bool.
    let mut at = String::new();
    if let Some(got) = non_bool_read_as_bool(obj, &back, &mut at)? {
        return Err(ConfigError::new_err(format!("{what}{at} = {got}: expected a bool (true or false)")));
    }
    Ok(v)
}

/// The repr of the value at `path` below `obj` (dict keys and list indices), if it can be found.
fn value_at(obj: &Bound<'_, PyAny>, path: &serde_path_to_error::Path) -> Option<String> {
    use serde_path_to_error::Segment;
    let mut cur = obj.clone();
    for seg in path.iter() {
        cur = match seg {
            Segment::Map { key } => cur.get_item(key.as_str()).ok()?,
            Segment::Seq { index } => cur.get_item(*index).ok()?,
            _ => return None,
        };
    }
    cur.repr().ok().map(|r| r.to_string())
}

/// The repr of a value in `input` (with `path` set to where, below `input`) that is not a bool
/// where `back` has a bool; numpy bools count as bools.
fn non_bool_read_as_bool(input: &Bound<'_, PyAny>, back: &Bound<'_, PyAny>, path: &mut String) -> PyResult<Option<String>> {
    use pyo3::types::{PyBool, PyList, PyTuple};
    if back.is_instance_of::<PyBool>() {
        let numpy_bool = input.get_type().name().map(|n| n.to_string() == "bool_" || n.to_string() == "bool").unwrap_or(false);
        return Ok(if input.is_instance_of::<PyBool>() || numpy_bool { None } else { Some(input.repr()?.to_string()) });
    }
    if let (Ok(d), Ok(b)) = (input.cast::<PyDict>(), back.cast::<PyDict>()) {
        for (k, x) in d.iter() {
            if let Some(y) = b.get_item(&k)? {
                if let Some(r) = non_bool_read_as_bool(&x, &y, path)? {
                    path.insert_str(0, &format!(".{k}"));
                    return Ok(Some(r));
                }
            }
        }
    } else if (input.is_instance_of::<PyList>() || input.is_instance_of::<PyTuple>()) && back.is_instance_of::<PyList>() {
        for (i, (x, y)) in input.try_iter()?.zip(back.try_iter()?).enumerate() {
            if let Some(r) = non_bool_read_as_bool(&x?, &y?, path)? {
                path.insert_str(0, &format!("[{i}]"));
                return Ok(Some(r));
            }
        }
    }
    Ok(None)
}

/// True (with `path` set to where, below `input`) if `input` holds a bool where `back` has no bool.
fn bool_read_as_number(input: &Bound<'_, PyAny>, back: &Bound<'_, PyAny>, path: &mut String) -> PyResult<bool> {
    use pyo3::types::{PyBool, PyList, PyTuple};
    if input.is_instance_of::<PyBool>() {
        return Ok(!back.is_instance_of::<PyBool>());
    }
    if let (Ok(d), Ok(b)) = (input.cast::<PyDict>(), back.cast::<PyDict>()) {
        for (k, x) in d.iter() {
            if let Some(y) = b.get_item(&k)? {
                if bool_read_as_number(&x, &y, path)? {
                    path.insert_str(0, &format!(".{k}"));
                    return Ok(true);
                }
            }
        }
    } else if (input.is_instance_of::<PyList>() || input.is_instance_of::<PyTuple>()) && back.is_instance_of::<PyList>() {
        for (i, (x, y)) in input.try_iter()?.zip(back.try_iter()?).enumerate() {
            if bool_read_as_number(&x?, &y?, path)? {
                path.insert_str(0, &format!("[{i}]"));
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// A fabric spec converted from its dict and validated once
/// (`flitsim._core.fabric_compile`); immutable. Every binding that takes a
/// fabric spec takes this or the dict ([`fabric_of`]). The Python side keeps
/// one per `FabricSpec` object and drops it when any field is replaced
/// (`FabricSpec._core_fabric`).
#[pyclass(frozen, module = "flitsim._core", name = "CompiledFabric")]
pub struct CompiledFabric {
    pub(crate) spec: std::sync::Arc<crate::fabric::FabricSpec>,
}

#[pymethods]
impl CompiledFabric {
    /// GPUs of the fabric (for reprs and checks).
    #[getter]
    fn gpus(&self) -> u32 {
        self.spec.gpus
    }
    fn __repr__(&self) -> String {
        format!("CompiledFabric(gpus={}, switches={}, fidelity={:?})", self.spec.gpus, self.spec.switches, self.spec.fidelity)
    }
}

/// The fabric spec behind `obj`: a [`CompiledFabric`] as it is (already
/// converted and validated), a dict converted by [`from_py`] (not validated
/// here: the runs validate it).
pub fn fabric_of(obj: &Bound<'_, PyAny>) -> PyResult<std::sync::Arc<crate::fabric::FabricSpec>> {
    if let Ok(c) = obj.cast::<CompiledFabric>() {
        return Ok(c.get().spec.clone());
    }
    Ok(std::sync::Arc::new(from_py(obj, "fabric")?))
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

/// A 1-D numpy column `key` of `d` as a Vec (dtype must match exactly).
pub(crate) fn col<'py, T: numpy::Element + Copy>(d: &Bound<'py, PyDict>, key: &str) -> PyResult<Vec<T>> {
    let v = d.get_item(key)?.ok_or_else(|| ConfigError::new_err(format!("graph.{key}: missing column")))?;
    let a: PyReadonlyArray1<T> = v.extract().map_err(|_| {
        // what was given: its dtype and dimensions, or its Python type
        let got = match (v.getattr("dtype"), v.getattr("ndim")) {
            (Ok(dt), Ok(nd)) => format!("an array of dtype {dt} with {nd} dimension(s)"),
            _ => format!("a value of type {}", v.get_type().name().map_or_else(|_| "?".to_string(), |n| n.to_string())),
        };
        let want = numpy::dtype::<T>(v.py()).to_string();
        ConfigError::new_err(format!("graph.{key}: got {got}: expected a 1-D numpy array of dtype {want} (e.g. np.asarray(x, np.{want}))"))
    })?;
    Ok(a.as_array().iter().copied().collect())
}

/// An integer scalar `key` of `d` in 0..2^32.
pub(crate) fn scalar(d: &Bound<'_, PyDict>, key: &str) -> PyResult<u32> {
    let v = d.get_item(key)?.ok_or_else(|| ConfigError::new_err(format!("graph.{key}: missing")))?;
    let bad = || ConfigError::new_err(format!("graph.{key} = {v}: expected an integer in 0..2^32"));
    if v.is_instance_of::<pyo3::types::PyBool>() {
        return Err(bad()); // True is not 1 device
    }
    v.extract().map_err(|_| bad())
}

/// Columns of a fabric batch result: per-transfer times, per GPU-port link
/// statistics (with link-level retry and fault accounting), per switch-port
/// statistics and reorder statistics (used by `fabric_transfers` and by the
/// task graph over a fabric).
pub(crate) fn batch_result_dict<'py>(py: Python<'py>, r: BatchResult) -> PyResult<Bound<'py, PyDict>> {
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
    // Graph fabrics: every switch output's link (trunks and links to endpoints).
    let sl = &r.stats.switch_links;
    if !sl.is_empty() {
        let t = PyDict::new(py);
        let u = |f: &dyn Fn(&crate::fabric::SwitchLinkStats) -> u64| sl.iter().map(f).collect::<Vec<u64>>();
        t.set_item("switch", u(&|x| x.switch as u64).into_pyarray(py))?;
        t.set_item("port", u(&|x| x.port as u64).into_pyarray(py))?;
        t.set_item("to_switch", u(&|x| (x.to == "switch") as u64).into_pyarray(py))?;
        t.set_item("peer", u(&|x| x.peer as u64).into_pyarray(py))?;
        t.set_item("peer_port", u(&|x| x.peer_port as u64).into_pyarray(py))?;
        t.set_item("link_index", u(&|x| x.link_index as u64).into_pyarray(py))?;
        t.set_item("busy_ps", u(&|x| x.link.busy_ps).into_pyarray(py))?;
        t.set_item("payload_bytes", u(&|x| x.link.payload_bytes).into_pyarray(py))?;
        t.set_item("wire_bytes", u(&|x| x.link.wire_bytes).into_pyarray(py))?;
        t.set_item("packets", u(&|x| x.link.packets).into_pyarray(py))?;
        d.set_item("switch_links", t)?;
    }
    let f = to_py(py, &r.stats.faults)?;
    f.set_item("sent_bytes", r.stats.sent_bytes)?;
    d.set_item("faults", f)?;
    // Switch ports, one row per (switch, port).
    let s = PyDict::new(py);
    let (mut sw, mut port, mut inc, mut outc, mut qsum, mut granted, mut flits_out, mut ex_ep, mut ex_cyc, mut occ_max) =
        (vec![], vec![], vec![], vec![], vec![], vec![], vec![], vec![], vec![], vec![]);
    let mut occ_int: Vec<u64> = vec![];
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
            occ_int.push(ins.iter().map(|x| x.occupancy_flit_cycles).sum::<u64>());
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
    s.set_item("input_occupancy_flit_cycles", occ_int.into_pyarray(py))?;
    s.set_item("output_flits", flits_out.into_pyarray(py))?;
    s.set_item("output_credit_exhaustion_episodes", ex_ep.into_pyarray(py))?;
    s.set_item("output_credit_exhaustion_cycles", ex_cyc.into_pyarray(py))?;
    d.set_item("switch_ports", s)?;
    let ro = PyDict::new(py);
    ro.set_item("max_packets", r.stats.reorder.iter().map(|x| x.max_packets).collect::<Vec<u64>>().into_pyarray(py))?;
    ro.set_item("mean_packets", r.stats.reorder.iter().map(|x| if x.deliveries == 0 { 0.0 } else { x.held_sum as f64 / x.deliveries as f64 }).collect::<Vec<f64>>().into_pyarray(py))?;
    ro.set_item("window_overflows", r.stats.reorder.iter().map(|x| x.window_overflows).collect::<Vec<u64>>().into_pyarray(py))?;
    d.set_item("reorder", ro)?;
    // Time-resolved counters (fabric/sampler.rs), row-major [sample][series].
    if let Some(c) = r.stats.counters {
        let k = PyDict::new(py);
        let t = c.time_ps.len();
        k.set_item("interval_ps", c.interval_ps)?;
        k.set_item("max_samples", c.max_samples)?;
        k.set_item("switch_ports", c.switch_ports)?;
        k.set_item("time_ps", c.time_ps.into_pyarray(py))?;
        k.set_item("samples", t)?;
        k.set_item("queue_flits", c.queue_flits.into_pyarray(py))?;
        k.set_item("credits_in_use_flits", c.credits_in_use_flits.into_pyarray(py))?;
        k.set_item("endpoint_credits_in_use_flits", c.endpoint_credits_in_use_flits.into_pyarray(py))?;
        k.set_item("output_flits", c.output_flits.into_pyarray(py))?;
        d.set_item("counters", k)?;
    }
    Ok(d)
}
