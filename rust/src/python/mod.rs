//! PyO3 bindings (feature `python`): conversion only, no model logic.
//!
//! Specs arrive as plain dicts (depythonized with serde), results leave as
//! dicts whose per-element data are numpy arrays. The GIL is released while
//! the engine runs; pending signals are checked between chunks of events so
//! Ctrl-C raises `KeyboardInterrupt` promptly.

mod convert;
mod fabric;
mod taskgraph;
mod transports;

use crate::error::FlitsimError;
use crate::experiments::link_transfer as lt;
use crate::experiments::switch_lab as sl;
use convert::{from_py, hist_dict, to_py};
use numpy::IntoPyArray;
use pyo3::create_exception;
use pyo3::exceptions::{PyKeyboardInterrupt, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

create_exception!(flitsim._core, ConfigError, PyValueError, "A configuration value is invalid; the message names the field, the value and what is allowed.");
create_exception!(flitsim._core, StalledError, PyRuntimeError, "The simulation stopped making progress with work pending; the message says what is blocked.");

impl From<FlitsimError> for PyErr {
    fn from(e: FlitsimError) -> PyErr {
        match e {
            FlitsimError::Config { .. } => ConfigError::new_err(e.to_string()),
            FlitsimError::Stalled { .. } => StalledError::new_err(e.to_string()),
            FlitsimError::Interrupted { .. } => PyKeyboardInterrupt::new_err(e.to_string()),
            FlitsimError::Retry { .. } => StalledError::new_err(e.to_string()),
        }
    }
}

/// Interrupt hook for runs with the GIL released: re-attach briefly and run
/// Python's signal handlers (a KeyboardInterrupt surfaces as `Interrupted`).
/// Handlers run on the main thread only, so a Ctrl-C seen here also cancels
/// the runs on every other thread ([`crate::engine::cancel_all`]).
pub(crate) fn signal_check(now_ps: u64) -> crate::Result<()> {
    Python::attach(|py| py.check_signals()).map_err(|_| {
        crate::engine::cancel_all();
        FlitsimError::Interrupted { time_ps: now_ps }
    })
}

/// Cancel every simulation running in this process, on any thread: each
/// raises KeyboardInterrupt within a few milliseconds. flitsim's SIGINT
/// handler calls it, so Ctrl-C also stops runs in worker threads.
#[pyfunction]
fn cancel_all() {
    crate::engine::cancel_all();
}

/// Derive the rate chain of a SerDes spec dict (see `SerdesSpec` in _core.pyi).
#[pyfunction]
fn serdes_rates<'py>(py: Python<'py>, spec: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let s: crate::phy::SerdesSpec = from_py(spec, "serdes")?;
    to_py(py, &s.rates()?)
}

/// Validate a link spec dict and return its rates and integer timing.
#[pyfunction]
fn link_timing<'py>(py: Python<'py>, spec: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyDict>> {
    let s: crate::link::LinkSpec = from_py(spec, "link")?;
    let (rates, timing) = s.derive()?;
    let d = PyDict::new(py);
    d.set_item("rates", to_py(py, &rates)?)?;
    d.set_item("timing", to_py(py, &timing)?)?;
    Ok(d)
}

/// Validate a fabric spec dict (ids, ports wired once, link consistency, reachability).
#[pyfunction]
fn fabric_check(spec: &Bound<'_, PyAny>) -> PyResult<()> {
    let s: crate::fabric::FabricSpec = from_py(spec, "fabric")?;
    s.validate()?;
    Ok(())
}

/// Convert and validate a fabric spec dict once (as [`fabric_check`]) and
/// return it as a [`convert::CompiledFabric`], which every fabric binding takes in place of the dict.
#[pyfunction]
fn fabric_compile(spec: &Bound<'_, PyAny>) -> PyResult<convert::CompiledFabric> {
    let s: crate::fabric::FabricSpec = from_py(spec, "fabric")?;
    s.validate()?;
    Ok(convert::CompiledFabric { spec: std::sync::Arc::new(s) })
}

/// Run the two-endpoint link experiment; see `flitsim.link_transfer`.
#[pyfunction]
fn link_transfer<'py>(py: Python<'py>, spec: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyDict>> {
    let s: lt::LinkTransferSpec = from_py(spec, "spec")?;
    let r = py.detach(|| lt::run(&s, &mut signal_check))?;
    let d = PyDict::new(py);
    d.set_item("rates", to_py(py, &r.rates)?)?;
    d.set_item("completion_ps", r.completion_ps)?;
    d.set_item("run_end_ps", r.run_end_ps)?;
    d.set_item("throughput_gBps", r.throughput_gBps)?;
    d.set_item("credit_rtt_ps", r.credit_rtt_ps)?;
    d.set_item("packets", r.packets)?;
    d.set_item("credit_wait_ps", r.credit_wait_ps)?;
    d.set_item("events", r.events)?;
    d.set_item("start_ps", r.start_ps.into_pyarray(py))?;
    d.set_item("arrival_ps", r.arrival_ps.into_pyarray(py))?;
    d.set_item("latency_ps", hist_dict(py, &r.latency_hist)?)?;
    d.set_item("link", to_py(py, &r.link)?)?;
    d.set_item("vcs", to_py(py, &r.vcs)?)?;
    Ok(d)
}

/// Run one switch-lab experiment; see `flitsim.switchlab.run`. Per (port, VC)
/// arrays are flat, index `port * vcs + vc`; per port arrays have `ports` entries.
#[pyfunction]
fn switch_lab<'py>(py: Python<'py>, spec: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyDict>> {
    let s: sl::SwitchLabSpec = from_py(spec, "spec")?;
    let r = py.detach(|| sl::run(&s, &mut signal_check))?;
    let d = PyDict::new(py);
    d.set_item("ports", r.ports)?;
    d.set_item("vcs", r.vcs)?;
    d.set_item("measure_cycles", r.measure_cycles)?;
    d.set_item("cycle_ps", r.cycle_ps)?;
    d.set_item("active_sources", r.active_sources)?;
    d.set_item("offered_load", r.offered_load)?;
    d.set_item("accepted_throughput", r.accepted_throughput)?;
    d.set_item("delivered_flits", r.delivered_flits)?;
    d.set_item("source_dropped_packets", r.source_dropped_packets)?;
    d.set_item("source_backlog_packets", r.source_backlog_packets)?;
    d.set_item("mean_occupancy_flits", r.mean_occupancy_flits)?;
    d.set_item("throughput_flits_per_cycle", r.throughput_flits_per_cycle)?;
    d.set_item("mean_sojourn_cycles", r.mean_sojourn_cycles)?;
    d.set_item("cycles_processed", r.cycles_processed)?;
    let st = &r.switch;
    d.set_item("allocation_rounds", st.allocation_rounds)?;
    d.set_item("slots_processed", st.slots_processed)?;
    d.set_item("latency_cycles", hist_dict(py, &r.latency)?)?;
    d.set_item("network_latency_cycles", hist_dict(py, &st.network_latency)?)?;
    d.set_item("queueing_cycles", hist_dict(py, &st.queueing)?)?;
    let col = |f: &dyn Fn(usize) -> u64, len: usize| (0..len).map(f).collect::<Vec<u64>>();
    let nv = st.inputs.len();
    let inp = PyDict::new(py);
    inp.set_item("packets_in", col(&|k| st.inputs[k].packets_in, nv).into_pyarray(py))?;
    inp.set_item("flits_in", col(&|k| st.inputs[k].flits_in, nv).into_pyarray(py))?;
    inp.set_item("packets_granted", col(&|k| st.inputs[k].packets_granted, nv).into_pyarray(py))?;
    inp.set_item("queueing_cycles_sum", col(&|k| st.inputs[k].queueing_cycles_sum, nv).into_pyarray(py))?;
    inp.set_item("occupancy_flit_cycles", col(&|k| st.inputs[k].occupancy_flit_cycles, nv).into_pyarray(py))?;
    inp.set_item("occupancy_max_flits", col(&|k| st.inputs[k].occupancy_max_flits, nv).into_pyarray(py))?;
    d.set_item("inputs", inp)?;
    let out = PyDict::new(py);
    out.set_item("packets_out", col(&|k| st.outputs[k].packets_out, nv).into_pyarray(py))?;
    out.set_item("flits_out", col(&|k| st.outputs[k].flits_out, nv).into_pyarray(py))?;
    out.set_item("credit_exhaustion_episodes", col(&|k| st.outputs[k].credit_exhaustion_episodes, nv).into_pyarray(py))?;
    out.set_item("credit_exhaustion_cycles", col(&|k| st.outputs[k].credit_exhaustion_cycles, nv).into_pyarray(py))?;
    d.set_item("outputs", out)?;
    let np = st.ports.len();
    let ports = PyDict::new(py);
    ports.set_item("input_conflicts", col(&|k| st.ports[k].input_conflicts, np).into_pyarray(py))?;
    ports.set_item("output_conflicts", col(&|k| st.ports[k].output_conflicts, np).into_pyarray(py))?;
    ports.set_item("latency_mean_cycles", st.output_latency.iter().map(|h| h.mean()).collect::<Vec<f64>>().into_pyarray(py))?;
    ports.set_item("latency_p99_cycles", col(&|k| st.output_latency[k].quantile(0.99), np).into_pyarray(py))?;
    d.set_item("ports_stats", ports)?;
    Ok(d)
}

/// Events per wall-second of the classic hold model with `pending` events
/// (the engine bench, callable from Python for benches/bench.py).
#[pyfunction]
fn hold_model_events_per_s(py: Python<'_>, pending: usize, operations: u64, seed: u64) -> PyResult<f64> {
    if pending == 0 {
        return Err(ConfigError::new_err(format!("pending = {pending}: at least 1 event")));
    }
    Ok(py.detach(|| {
        let mut rng = crate::engine::SimRng::new(seed);
        let mut q = crate::engine::EventQueue::with_capacity(pending + 1);
        for i in 0..pending {
            q.schedule(rng.exponential(1e6) as u64, i as u64);
        }
        let t0 = std::time::Instant::now();
        for _ in 0..operations {
            let e = q.pop().expect("non-empty");
            q.schedule(e.time_ps + rng.exponential(1e6) as u64, e.event);
        }
        operations as f64 / t0.elapsed().as_secs_f64()
    }))
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("ConfigError", py.get_type::<ConfigError>())?;
    m.add("StalledError", py.get_type::<StalledError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(cancel_all, m)?)?;
    m.add_function(wrap_pyfunction!(serdes_rates, m)?)?;
    m.add_function(wrap_pyfunction!(link_timing, m)?)?;
    m.add_function(wrap_pyfunction!(link_transfer, m)?)?;
    m.add_function(wrap_pyfunction!(fabric_check, m)?)?;
    m.add_function(wrap_pyfunction!(fabric_compile, m)?)?;
    m.add_class::<convert::CompiledFabric>()?;
    m.add_function(wrap_pyfunction!(switch_lab, m)?)?;
    m.add_function(wrap_pyfunction!(fabric::fabric_transfers, m)?)?;
    m.add_function(wrap_pyfunction!(transports::fabric_transfers_transport, m)?)?;
    m.add_function(wrap_pyfunction!(fabric::fabric_route, m)?)?;
    m.add_function(wrap_pyfunction!(fabric::fabric_domains, m)?)?;
    m.add_function(wrap_pyfunction!(fabric::collective_defaults, m)?)?;
    m.add_function(wrap_pyfunction!(fabric::collective_run, m)?)?;
    m.add_function(wrap_pyfunction!(fabric::collective_ideal, m)?)?;
    m.add_function(wrap_pyfunction!(fabric::fec_error_model, m)?)?;
    m.add_function(wrap_pyfunction!(hold_model_events_per_s, m)?)?;
    m.add_function(wrap_pyfunction!(taskgraph::execute_taskgraph, m)?)?;
    Ok(())
}
