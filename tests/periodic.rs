//! The task-graph executor's periodic skip (rust/src/taskgraph/exec.rs,
//! `Exec::try_skip`): a graph of identical steps declared periodic runs to
//! the same result, bit for bit, as the same graph undeclared (every task's
//! start, end, data and credit readiness, the makespan, the event count, the
//! link statistics and validation findings), on the analytic network and at
//! flow level; a false declaration is refused and says why.

mod common;

use flitsim::collective::CollectiveParams;
use flitsim::engine::NoInterrupt;
use flitsim::fabric::{FabricSpec, Fidelity};
use flitsim::presets;
use flitsim::taskgraph::{execute, AnalyticNetwork, FabricNetwork, TaskGraph, TaskGraphResult, TaskKind};

#[derive(Clone, Copy, PartialEq, Debug)]
enum Comm {
    /// A collective after each layer, the next layer waits for it (Ulysses / TP).
    Sync,
    /// The collective of layer l in step k is needed only by layer l of step
    /// k + 1 (DistriFusion's stale activations): communication overlaps the
    /// next layers and crosses the step boundary.
    Async,
    /// Device d sends to d + 1 after each layer; the receiver's next layer
    /// waits for it (Ring attention / PipeFusion stage hand-offs).
    Ring,
}

/// `steps` x `layers` x (one compute per device + communication), one step
/// after another (a per-step reduction on device 0 joins them); the first
/// `warm` steps run synchronously with longer compute (a warm-up that is
/// not periodic). Tasks of one step are contiguous: period = tasks per step.
fn dit_graph(devices: u32, steps: u32, layers: u32, warm: u32, comm: Comm, steal_ppm: u32, bytes: u64) -> (TaskGraph, u32) {
    let mut g = TaskGraph { devices, compute_streams: 1, comm_streams: 1, ..Default::default() };
    g.group_offsets = vec![0, devices];
    g.group_members = (0..devices).collect();
    let push = |g: &mut TaskGraph, kind: TaskKind, device: u32, peer: u32, dur: u64, bytes: u64| -> u32 {
        common::push_task(g, kind, device, peer, dur, bytes, if kind == TaskKind::Compute { 0 } else { steal_ppm })
    };
    let edge = common::push_edge;
    let mut step_end: Option<u32> = None;
    let mut stale: Vec<Option<u32>> = vec![None; layers as usize];
    let mut per_step = 0;
    for k in 0..steps {
        let first = g.kind.len();
        let is_warm = k < warm;
        let c = if is_warm { Comm::Sync } else { comm };
        let dur = if is_warm { 9_000_000 } else { 7_000_000 + 500_000 * (devices as u64 % 3) };
        let mut prev: Vec<Option<u32>> = vec![step_end; devices as usize];
        let mut last = Vec::new();
        for l in 0..layers as usize {
            let cs: Vec<u32> = (0..devices)
                .map(|d| {
                    let t = push(&mut g, TaskKind::Compute, d, 0, dur + 100_000 * l as u64, 0);
                    if let Some(p) = prev[d as usize] {
                        edge(&mut g, p, t, 0);
                    }
                    t
                })
                .collect();
            match c {
                Comm::Sync => {
                    let a = push(&mut g, TaskKind::Collective, 0, 0, 0, bytes);
                    for &t in &cs {
                        edge(&mut g, t, a, 0);
                    }
                    prev = vec![Some(a); devices as usize];
                }
                Comm::Async => {
                    let a = push(&mut g, TaskKind::Collective, 0, 0, 0, bytes);
                    for &t in &cs {
                        edge(&mut g, t, a, 0);
                    }
                    if let Some(s) = stale[l] {
                        for &t in &cs {
                            edge(&mut g, s, t, 0);
                        }
                    }
                    stale[l] = Some(a);
                    prev = cs.iter().map(|&t| Some(t)).collect();
                    last.push(a);
                }
                Comm::Ring => {
                    let mut next = vec![None; devices as usize];
                    for d in 0..devices {
                        let x = push(&mut g, TaskKind::Transfer, d, (d + 1) % devices, 0, bytes);
                        edge(&mut g, cs[d as usize], x, 0);
                        next[((d + 1) % devices) as usize] = Some(x);
                    }
                    for d in 0..devices as usize {
                        // the sender's next layer also waits for its own compute (stream order)
                        let _ = d;
                    }
                    prev = next;
                }
            }
            if c != Comm::Sync {
                last.extend(cs.iter().copied());
            }
        }
        // the scheduler step on device 0 joins the step (a credit edge from the
        // previous step's join: one step in flight)
        let j = push(&mut g, TaskKind::Compute, 0, 0, 1_000_000, 0);
        for p in prev.iter().flatten() {
            edge(&mut g, *p, j, 0);
        }
        if let Some(s) = step_end {
            edge(&mut g, s, j, 1);
        }
        step_end = Some(j);
        per_step = (g.kind.len() - first) as u32;
    }
    (g, per_step)
}

fn same(a: &TaskGraphResult, b: &TaskGraphResult) {
    assert_eq!(a.start_ps, b.start_ps, "start times differ");
    assert_eq!(a.end_ps, b.end_ps, "end times differ");
    assert_eq!(a.data_ready_ps, b.data_ready_ps, "data-ready times differ");
    assert_eq!(a.credit_ready_ps, b.credit_ready_ps, "credit-ready times differ");
    assert_eq!(a.makespan_ps, b.makespan_ps);
    assert_eq!(a.events, b.events, "event counts differ");
}

/// Plain (undeclared) vs declared on the analytic network; returns the declared run's report.
fn analytic(g: &TaskGraph, period: u32) -> String {
    analytic_declared(g, period, &[])
}

/// As [`analytic`], also declaring inner (layer) periods.
fn analytic_declared(g: &TaskGraph, period: u32, inner: &[u32]) -> String {
    let net = || AnalyticNetwork::new(g.devices, 2_000_000, 50_000_000_000);
    let plain = execute(g, &mut net(), &mut NoInterrupt).unwrap();
    assert_eq!(plain.periodic, "not periodic: no period declared");
    let mut d = g.clone();
    d.period_tasks = period;
    d.inner_periods = inner.to_vec();
    let mut n = net();
    let skip = execute(&d, &mut n, &mut NoInterrupt).unwrap();
    same(&plain, &skip);
    let mut n0 = net();
    execute(g, &mut n0, &mut NoInterrupt).unwrap();
    assert_eq!(n.bytes_moved, n0.bytes_moved, "bytes moved differ");
    skip.periodic
}

/// Plain vs declared at flow level on `spec`; returns the declared run's report.
fn flow(spec: &FabricSpec, g: &TaskGraph, period: u32) -> String {
    flow_with(spec, g, period, false, false)
}

/// As [`flow`], with the opt-in port-set drain grouping on or off and the
/// spray numbered per DAG (the default) or by one running counter (what the
/// multi-step stride tests need: the counter moves every step).
fn flow_with(spec: &FabricSpec, g: &TaskGraph, period: u32, port_set: bool, per_dag: bool) -> String {
    flow_declared(spec, g, period, &[], port_set, per_dag)
}

/// As [`flow_with`], also declaring inner (layer) periods.
fn flow_declared(spec: &FabricSpec, g: &TaskGraph, period: u32, inner: &[u32], port_set: bool, per_dag: bool) -> String {
    let mut spec = spec.clone();
    spec.fidelity = Fidelity::Flow;
    let run = |g: &TaskGraph| {
        let mut net = FabricNetwork::with_params(&spec, CollectiveParams::default(), true).unwrap();
        net.set_port_set_drain(port_set);
        net.set_spray_per_dag(per_dag);
        let r = execute(g, &mut net, &mut NoInterrupt).unwrap();
        let st = serde_json::to_string(&net.stats(r.makespan_ps, r.events)).unwrap();
        (r, st, net.flow_outside_validation(), net.packets_sent())
    };
    let (a, sa, wa, pa) = run(g);
    let mut d = g.clone();
    d.period_tasks = period;
    d.inner_periods = inner.to_vec();
    let (b, sb, wb, pb) = run(&d);
    same(&a, &b);
    assert_eq!(sa, sb, "link statistics differ");
    assert_eq!(wa, wb, "validation findings differ");
    assert_eq!(pa, pb, "packets differ");
    b.periodic
}

fn skipped(report: &str) -> bool {
    report.starts_with("periodic: skipped")
}

#[test]
fn analytic_every_pattern_is_bit_identical_and_skips() {
    for (comm, steal) in [(Comm::Sync, 0), (Comm::Async, 0), (Comm::Ring, 0), (Comm::Sync, 120_000), (Comm::Async, 120_000), (Comm::Ring, 120_000)] {
        let (g, p) = dit_graph(4, 20, 3, 0, comm, steal, 4 << 20);
        let rep = analytic(&g, p);
        assert!(skipped(&rep), "{rep}");
    }
}

#[test]
fn becomes_periodic_after_a_warm_up() {
    // two synchronous warm-up steps with other durations: the region starts after them
    let (g, p) = dit_graph(4, 16, 3, 2, Comm::Async, 120_000, 4 << 20);
    let rep = analytic(&g, p);
    assert!(skipped(&rep), "{rep}");
    let lo: usize = rep.split("region tasks ").nth(1).unwrap().split("..").next().unwrap().parse().unwrap();
    assert!(lo >= p as usize, "region starts at {lo}, inside the warm-up: {rep}");
}

#[test]
fn a_false_declaration_is_refused() {
    let (mut g, p) = dit_graph(4, 12, 3, 0, Comm::Sync, 0, 4 << 20);
    // every step's compute a little longer than the last: not periodic
    for (i, d) in g.duration_ps.iter_mut().enumerate() {
        *d += (i / p as usize) as u64 * 1000;
    }
    let rep = analytic(&g, p);
    assert!(rep.contains("does not hold"), "{rep}");
    // a wrong period on a periodic graph
    let (g, p) = dit_graph(4, 12, 3, 0, Comm::Sync, 0, 4 << 20);
    let rep = analytic(&g, p + 1);
    assert!(rep.contains("does not hold"), "{rep}");
}

#[test]
fn short_runs_and_off_switch_say_so() {
    let (g, p) = dit_graph(2, 2, 2, 0, Comm::Sync, 0, 1 << 20);
    let rep = analytic(&g, p);
    assert!(rep.starts_with("not periodic:"), "{rep}");
}

#[test]
fn flow_level_sync_ring_async_are_bit_identical() {
    let spec = presets::planar(8, 2, false);
    for (comm, steal) in [(Comm::Sync, 0), (Comm::Ring, 0), (Comm::Sync, 120_000), (Comm::Async, 120_000)] {
        let (g, p) = dit_graph(8, 14, 2, 1, comm, steal, 2 << 20);
        let rep = flow(&spec, &g, p);
        eprintln!("{rep}");
        assert!(skipped(&rep), "{rep}");
    }
}

/// The stride (periods) a skipped report says it jumped by at most.
fn stride(report: &str) -> usize {
    report.split("stride up to ").nth(1).and_then(|s| s.split(' ').next()).and_then(|s| s.parse().ok()).unwrap_or(0)
}

#[test]
fn rotated_spray_repeats_after_several_steps_and_skips_exactly() {
    // A one-layer HGX H100 (8 GPUs, 18 NVLink ports each on 4 NVSwitch
    // chips, 5/4/4/5: not collapsed), written from
    // flitsim.hardware.fabric_preset("hgx-h100") at flow level
    // (`core_dict()`), GPU 0's port 0 wired with a second, identical link spec
    // so the flow model keeps one resource per port (a mixed-spec fabric is
    // not collapsed): a one-layer path names its first `lanes` ports in rotated
    // order (a transfer of fewer packets than ports uses a rotation's ports), so
    // its spray rotation (its DAG node number modulo the port count, 18) is
    // part of the state; where a step's collectives use a node count that is
    // no multiple of it, the rotation moves every step and the state repeats
    // only after several steps. The skip must find that repeat (an anchor
    // compared with every earlier one) and jump whole multi-step strides, bit
    // for bit as the plain run.
    let hgx: FabricSpec = serde_json::from_str(include_str!("data/fabric_hgx_h100.json")).unwrap();
    let mut strides = Vec::new();
    for (layers, comm, steal) in [(1, Comm::Sync, 0), (2, Comm::Sync, 0), (3, Comm::Async, 0), (1, Comm::Async, 120_000), (2, Comm::Ring, 0)] {
        let (g, p) = dit_graph(8, 30, layers, 1, comm, steal, 2 << 20);
        let rep = flow(&hgx, &g, p); // bit for bit against the plain run
        eprintln!("HGX, {layers} layers: {rep}");
        strides.push(stride(&rep));
    }
    // coverage: the multi-step strides (the rotation moves every step) are
    // what this test is for; they must be exercised, not only one-step ones
    assert!(strides.iter().filter(|&&s| s >= 2).count() >= 3, "{strides:?}");
}

#[test]
fn graph_fabric_paths_are_rotation_invariant_and_repeat_every_step() {
    // Two HGX H100 nodes joined by InfiniBand (graph fabric), written from
    // flitsim.hardware.tier_presets.ib_hgx_h100(nodes=2) at flow level
    // (`core_dict()`). A round-robin transfer there spreads over all its
    // eligible ports whatever port its rotation starts on, and its flow path
    // (entries in resource order) is the same at every rotation
    // (docs/fidelity.md "Rotation-invariant paths"). By default the drain
    // group (the bundle of the port the spray starts on) keeps the rotation
    // in the state: multi-step strides, bit for bit. With the opt-in port-set
    // drain the rotation is no part of the state: one-step strides, bit for bit.
    let ib: FabricSpec = serde_json::from_str(include_str!("data/fabric_ib_2xhgx_h100.json")).unwrap();
    let mut strides = Vec::new();
    for (dev, layers, comm, steal) in [(8, 1, Comm::Sync, 0), (8, 3, Comm::Async, 0), (16, 1, Comm::Async, 120_000), (16, 2, Comm::Sync, 0), (8, 2, Comm::Ring, 0)] {
        let (g, p) = dit_graph(dev, 30, layers, 1, comm, steal, 2 << 20);
        let rep = flow(&ib, &g, p); // bit for bit against the plain run
        eprintln!("IB {dev} GPUs, {layers} layers: {rep}");
        strides.push(stride(&rep));
        let rep = flow_with(&ib, &g, p, true, false);
        eprintln!("IB {dev} GPUs, {layers} layers, port-set drain: {rep}");
        assert!(skipped(&rep), "{rep}");
        assert_eq!(stride(&rep), 1, "{rep}");
        // numbered per DAG (the default): no counter in the state either
        let rep = flow_with(&ib, &g, p, false, true);
        eprintln!("IB {dev} GPUs, {layers} layers, spray per DAG: {rep}");
        assert!(skipped(&rep), "{rep}");
        assert_eq!(stride(&rep), 1, "{rep}");
    }
    assert!(strides.iter().filter(|&&s| s >= 2).count() >= 2, "{strides:?}");
}

#[test]
fn memoized_solves_are_bit_identical() {
    // A solve whose input (paths, caps, order) equals an earlier one takes
    // its rates: the same task times, events, link statistics and findings as
    // filling every solve; on the IB graph and a one-layer fabric, with the
    // periodic skip off (every step simulated, so steps repeat their solves).
    let ib: FabricSpec = serde_json::from_str(include_str!("data/fabric_ib_2xhgx_h100.json")).unwrap();
    for (spec, dev) in [(ib, 16), (presets::planar(8, 2, false), 8)] {
        let mut spec = spec.clone();
        spec.fidelity = Fidelity::Flow;
        for (layers, comm, steal) in [(2, Comm::Sync, 0), (3, Comm::Async, 120_000), (2, Comm::Ring, 0)] {
            let (g, _) = dit_graph(dev, 12, layers, 1, comm, steal, 2 << 20);
            let run = |memo: bool| {
                let mut net = FabricNetwork::with_params(&spec, CollectiveParams::default(), true).unwrap();
                net.set_solve_memo(memo);
                let r = execute(&g, &mut net, &mut NoInterrupt).unwrap();
                let st = serde_json::to_string(&net.stats(r.makespan_ps, r.events)).unwrap();
                (r, st, net.flow_outside_validation(), net.packets_sent(), net.solve_memo_counts())
            };
            let (a, sa, wa, pa, _) = run(false);
            let (b, sb, wb, pb, (looked, hits)) = run(true);
            same(&a, &b);
            assert_eq!(sa, sb, "link statistics differ");
            assert_eq!(wa, wb, "validation findings differ");
            assert_eq!(pa, pb, "packets differ");
            // coverage: the memo answered solves (the steps repeat their flow sets)
            assert!(hits > 0 && hits <= looked, "{dev} GPUs {layers} layers {comm:?}: {hits} of {looked}");
        }
    }
}

/// Periods a skipped report says it jumped.
fn skipped_periods(report: &str) -> usize {
    report.split("skipped ").nth(1).and_then(|s| s.split(' ').next()).and_then(|s| s.parse().ok()).unwrap_or(0)
}

#[test]
fn fine_anchors_are_bit_identical_and_skip_at_least_as_far() {
    // Periods of 60+ tasks: the 64 anchors per period are finer than the 16
    // coarse ones (whose states are all kept); a fine anchor is compared with
    // the last state at its own offset. Both ways the run is the plain run bit
    // for bit (`flow_with`), and the fine anchors never skip fewer periods
    // (FLITSIM_PERIODIC_FINE=0: coarse anchors only; other tests running at
    // the same time may see it too, which only changes where they jump).
    let ib: FabricSpec = serde_json::from_str(include_str!("data/fabric_ib_2xhgx_h100.json")).unwrap();
    for (dev, layers, comm, steal) in [(16, 4, Comm::Async, 0), (16, 5, Comm::Async, 120_000), (16, 4, Comm::Ring, 0)] {
        let (g, p) = dit_graph(dev, 24, layers, 1, comm, steal, 2 << 20);
        assert!(p >= 64, "period {p} tasks: the fine anchors must differ from the coarse ones");
        let fine = flow_with(&ib, &g, p, false, true);
        std::env::set_var("FLITSIM_PERIODIC_FINE", "0");
        let coarse = flow_with(&ib, &g, p, false, true);
        std::env::remove_var("FLITSIM_PERIODIC_FINE");
        eprintln!("IB {dev} GPUs, {layers} layers: fine {fine} | coarse {coarse}");
        assert!(skipped(&fine), "{fine}");
        assert!(skipped_periods(&fine) >= skipped_periods(&coarse), "fine: {fine}; coarse: {coarse}");
    }
}

#[test]
fn compaction_is_bit_identical_and_bounds_what_is_held() {
    // Dropping finished DAGs and transfers at idle moments renumbers nodes
    // and transfers from 0; spray numbering is virtual, so every answer must
    // be the plain run's: task times, events, link statistics, findings,
    // packets, with the periodic skip off and on, the spray numbered per DAG
    // and by one counter, and the hash spray (which reads transfer numbers).
    let ib: FabricSpec = serde_json::from_str(include_str!("data/fabric_ib_2xhgx_h100.json")).unwrap();
    let mut hashed = presets::planar(8, 2, false);
    hashed.spray = flitsim::fabric::Spray::Hash;
    for (spec, dev) in [(ib, 16), (presets::planar(8, 2, false), 8), (hashed, 8)] {
        let mut spec = spec.clone();
        spec.fidelity = Fidelity::Flow;
        for (layers, comm, steal, per_dag) in [(2, Comm::Sync, 0, true), (3, Comm::Async, 120_000, true), (2, Comm::Ring, 0, true), (2, Comm::Sync, 0, false)] {
            let (g0, p) = dit_graph(dev, 12, layers, 1, comm, steal, 2 << 20);
            for period in [0, p] {
                let mut g = g0.clone();
                g.period_tasks = period;
                let run = |min_held: usize| {
                    let mut net = FabricNetwork::with_params(&spec, CollectiveParams::default(), true).unwrap();
                    net.set_compaction(min_held);
                    net.set_spray_per_dag(per_dag);
                    let r = execute(&g, &mut net, &mut NoInterrupt).unwrap();
                    let st = serde_json::to_string(&net.stats(r.makespan_ps, r.events)).unwrap();
                    (r, st, net.flow_outside_validation(), net.packets_sent(), net.compactions, net.exec.nodes_held())
                };
                let (a, sa, wa, pa, ca, held_a) = run(usize::MAX);
                let (b, sb, wb, pb, cb, held_b) = run(0);
                let what = format!("{dev} GPUs, {layers} layers, {comm:?}, per_dag {per_dag}, period {period}, spray {:?}", spec.spray);
                same(&a, &b);
                assert_eq!(sa, sb, "link statistics differ: {what}");
                assert_eq!(wa, wb, "validation findings differ: {what}");
                assert_eq!(pa, pb, "packets differ: {what}");
                assert_eq!(ca, 0, "{what}");
                // coverage: the run went idle between layers and compacted there,
                // and holds at most one layer's DAGs at the end (the whole run's without)
                assert!(cb > 0, "no compaction: {what}");
                assert!(held_b * 4 <= held_a, "held {held_b} nodes with compaction, {held_a} without: {what}");
            }
        }
    }
}

/// `steps` x `layers` identical layers (one compute per device +
/// communication, as [`dit_graph`] but every layer of a step the same), the
/// steps joined by a task on device 0 that takes `drift_ps` longer each step
/// (then no step is a copy of the last: only the layers are periodic).
/// Returns the graph, tasks per step and tasks per layer.
fn layered_steps(devices: u32, steps: u32, layers: u32, comm: Comm, steal_ppm: u32, bytes: u64, drift_ps: u64) -> (TaskGraph, u32, u32) {
    let (mut g, per_step) = dit_graph(devices, steps, layers, 0, comm, steal_ppm, bytes);
    let per_layer = (per_step - 1) / layers;
    for k in 0..steps as usize {
        let first = k * per_step as usize;
        for t in first..first + (per_layer * layers) as usize {
            if g.kind[t] == TaskKind::Compute as u8 {
                g.duration_ps[t] = 7_000_000;
            }
        }
        g.duration_ps[first + per_step as usize - 1] = 1_000_000 + drift_ps * k as u64;
    }
    (g, per_step, per_layer)
}

/// "skipped c layer periods in d of e layer regions": d.
fn layer_regions_skipped(report: &str) -> usize {
    let report = report.replace(" layer period in ", " layer periods in ");
    report.split(" layer periods in ").nth(1).and_then(|s| s.split(' ').next()).and_then(|s| s.parse().ok()).unwrap_or(0)
}

fn layer_periods_skipped(report: &str) -> usize {
    let report = report.replace(" layer period in ", " layer periods in ");
    report.split(" layer periods").next().and_then(|s| s.rsplit(' ').next()).and_then(|s| s.parse().ok()).unwrap_or(0)
}

#[test]
fn layers_skip_exactly_where_steps_do_not_repeat_and_beside_them() {
    // Inner (layer) periods: each run of identical layers is a region of its
    // own, skipped where the state repeats from one layer to the next. With
    // a step join that drifts, the step period does not hold and only the
    // layers are skipped; without, both detectors jump (the steps' jump
    // after the layers' within the first steps). Every run equals the plain
    // run bit for bit: task times, readiness, events, link statistics,
    // findings, packets (`analytic_declared`, `flow_declared`).
    //
    // Ring: simultaneous completions are handled in start order, and device
    // d's next layer waits on d - 1's transfer, so the order rotates by one
    // device a layer and the state repeats every `devices` layers (32 layers
    // give the stride room; 6 would not). Async: each layer waits on the
    // previous step's collective (stale activations), so the comm stream
    // drains the last step's work through this one and no layer repeats the
    // last one: steps only, and exact.
    let ib: FabricSpec = serde_json::from_str(include_str!("data/fabric_ib_2xhgx_h100.json")).unwrap();
    let planar = presets::planar(8, 2, false);
    for (comm, steal, layers, layers_skip) in [(Comm::Sync, 0, 6, true), (Comm::Ring, 0, 32, true), (Comm::Async, 120_000, 6, false)] {
        for drift in [0u64, 3_000] {
            let (g, per_step, per_layer) = layered_steps(8, 10, layers, comm, steal, 2 << 20, drift);
            let what = format!("{comm:?}, drift {drift} ps");
            let rep = analytic_declared(&g, per_step, &[per_layer]);
            eprintln!("analytic {what}: {rep}");
            assert_eq!(layer_periods_skipped(&rep) > 0, layers_skip, "{what}: {rep}");
            assert_eq!(rep.contains("steps not skipped"), drift > 0 && layers_skip, "{what}: {rep}");
            assert_eq!(skipped(&rep), drift == 0 || layers_skip, "{what}: {rep}");
            if drift == 0 && layers_skip {
                // layers are skipped before the steps' jump (steps 0 and 1) and after it (the
                // last steps): the layer detector follows the run past the jump
                assert!(layer_regions_skipped(&rep) >= 3, "{what}: {rep}");
            }
            for (spec, name) in [(&planar, "planar"), (&ib, "IB")] {
                let rep = flow_declared(spec, &g, per_step, &[per_layer], false, true);
                eprintln!("{name} {what}: {rep}");
                assert_eq!(layer_periods_skipped(&rep) > 0, layers_skip, "{name} {what}: {rep}");
                if drift > 0 {
                    assert!(rep.contains("declared period") && rep.contains("does not hold"), "{name} {what}: {rep}");
                }
            }
            // the inner periods alone (no step period declared)
            let rep = flow_declared(&planar, &g, 0, &[per_layer], false, true);
            assert_eq!(layer_periods_skipped(&rep) > 0 && rep.contains("steps not skipped: no step period declared"), layers_skip, "{what}: {rep}");
        }
    }
    // a false inner period is refused and said so
    let (g, per_step, per_layer) = layered_steps(8, 6, 6, Comm::Sync, 0, 2 << 20, 0);
    let rep = analytic_declared(&g, 0, &[per_layer + 1]);
    assert!(rep.starts_with("not periodic: no step period declared; layers: declared inner periods"), "{rep}");
    // an inner period of 0, or as long as the step, is no layer period: said so, and one
    // as long as the step does not hide the real layer period beside it
    let rep = analytic_declared(&g, per_step, &[0]);
    assert!(rep.contains("layers not skipped: every declared inner period ([0] tasks) is 0"), "{rep}");
    let rep = analytic_declared(&g, per_step, &[per_step]);
    assert!(rep.contains("is as long as the step period"), "{rep}");
    let rep = analytic_declared(&g, per_step, &[per_step, per_layer]);
    assert!(layer_periods_skipped(&rep) > 0, "{rep}");
}

