//! Property tests on the spec parsers (issue 13): a valid spec with one to
//! three of its numeric or boolean fields replaced by hostile values (0, -1,
//! 2^32-1, 2^64-1, 1e-300, 1e300, true, "8") must deserialize to a `Config`
//! error or a spec; a spec must validate to `Config` or Ok; a valid one must
//! run a small batch to a result whose times lie inside the engine's range,
//! or stop with `Config`/`Stalled`/`Interrupted` (a hook stops it after a
//! bounded number of events) — never panic, wrap or hang.

use flitsim::engine::MAX_TIME_PS;
use flitsim::experiments::switch_lab::{self, SwitchLabSpec};
use flitsim::fabric::{run_batch, FabricSpec, TransferBatch};
use flitsim::{presets, FlitsimError};
use proptest::prelude::*;
use serde_json::Value;

/// Paths (JSON pointers) of every number and bool in `v`.
fn leaves(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Number(_) | Value::Bool(_) => out.push(at),
        Value::Array(a) => a.iter().enumerate().for_each(|(i, x)| leaves(x, format!("{at}/{i}"), out)),
        Value::Object(m) => m.iter().for_each(|(k, x)| leaves(x, format!("{at}/{k}"), out)),
        _ => {}
    }
}

fn hostile() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::from(0u64)),
        Just(Value::from(1u64)),
        Just(Value::from(-1i64)),
        Just(Value::from(u32::MAX as u64)),
        Just(Value::from(u32::MAX as u64 + 1)),
        Just(Value::from(u64::MAX)),
        Just(Value::from(1e-300)),
        Just(Value::from(1e300)),
        Just(Value::from(1.5)),
        Just(Value::from(true)),
        Just(Value::from("8")),
        (0u64..10_000).prop_map(Value::from),
    ]
}

/// A spec as JSON with `k` leaves replaced.
fn mutated(base: Value) -> impl Strategy<Value = Value> {
    let mut paths = Vec::new();
    leaves(&base, String::new(), &mut paths);
    let n = paths.len();
    prop::collection::vec((0..n, hostile()), 1..=3).prop_map(move |muts| {
        let mut v = base.clone();
        for (i, x) in muts {
            *v.pointer_mut(&paths[i]).expect("leaf") = x;
        }
        v
    })
}

/// Stops a run after 64 interrupt checks (2^22 events): a bound, not a hang.
fn bounded() -> impl FnMut(u64) -> flitsim::Result<()> {
    let mut n = 0u32;
    move |t| {
        n += 1;
        if n > 64 {
            Err(FlitsimError::Interrupted { time_ps: t })
        } else {
            Ok(())
        }
    }
}

fn parse<T: serde::de::DeserializeOwned>(v: &Value) -> Result<T, String> {
    serde_path_to_error::deserialize(v).map_err(|e| format!("{}: {}", e.path(), e.inner()))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn fabric_specs_give_a_config_error_or_a_bounded_result(v in mutated(serde_json::to_value(presets::planar(4, 2, false)).unwrap())) {
        let Ok(spec) = parse::<FabricSpec>(&v) else { return Ok(()) };
        match spec.validate() {
            Err(FlitsimError::Config { .. }) => return Ok(()),
            Err(e) => prop_assert!(false, "validate gave {e:?}"),
            Ok(()) => {}
        }
        let b = TransferBatch { src: vec![0], dst: vec![1], bytes: vec![1 << 16], start_ps: vec![0], after: vec![-1] };
        match run_batch(&spec, &b, &mut bounded()) {
            Ok(r) => {
                prop_assert!(r.makespan_ps <= MAX_TIME_PS);
                prop_assert!(r.end_ps.iter().all(|&t| t <= r.makespan_ps));
            }
            Err(FlitsimError::Config { .. } | FlitsimError::Stalled { .. } | FlitsimError::Interrupted { .. }) => {}
            // (only the task-graph executor asks for a repeat, and its caller repeats)
            Err(e @ FlitsimError::Retry { .. }) => prop_assert!(false, "run_batch gave {e:?}"),
        }
    }

    #[test]
    fn link_specs_give_a_config_error_or_timing_in_range(v in mutated(serde_json::to_value(presets::nvlink5()).unwrap())) {
        let Ok(spec) = parse::<flitsim::link::LinkSpec>(&v) else { return Ok(()) };
        match spec.derive() {
            Ok((_, t)) => prop_assert!(t.latency_ps < MAX_TIME_PS && t.flit_ps < MAX_TIME_PS),
            Err(FlitsimError::Config { .. }) => {}
            Err(e) => prop_assert!(false, "derive gave {e:?}"),
        }
    }

    #[test]
    fn switch_lab_specs_give_a_config_error_or_a_result(v in mutated(serde_json::json!({
        "switch": {"ports": 8, "vcs": 2, "buffer_per_vc_flits": 16, "max_packet_flits": 4, "queueing": "voq",
                   "speedup": 1, "pipeline_latency_cycles": 0, "output_buffer_per_vc_flits": 0,
                   "downstream_credits_per_vc_flits": 16, "allocator": "islip", "iterations": 1,
                   "clock_ghz": 1.0, "seed": 1, "stall_timeout_cycles": 0},
        "traffic": {"pattern": "uniform", "load": 0.5, "packet_flits": 4, "process": "bernoulli", "seed": 1},
        "warmup_cycles": 100, "measure_cycles": 1000
    }))) {
        let Ok(spec) = parse::<SwitchLabSpec>(&v) else { return Ok(()) };
        match switch_lab::run(&spec, &mut bounded()) {
            Ok(r) => prop_assert!(r.accepted_throughput.is_finite()),
            Err(FlitsimError::Config { .. } | FlitsimError::Stalled { .. } | FlitsimError::Interrupted { .. }) => {}
            Err(e @ FlitsimError::Retry { .. }) => prop_assert!(false, "switch_lab gave {e:?}"),
        }
    }
}
