"""The executor's exact periodic skip on the diffusion-transformer schedules
(rust/src/taskgraph/exec.rs; Rust-side tests in tests/periodic.rs): every
builder declares its step period, and a run with the skip gives the same task
table, makespan, event count and link statistics as the run without
(FLITSIM_PERIODIC=0), at flow level and on the analytic network."""
from __future__ import annotations

import os
import warnings

import numpy as np
import pandas as pd
import pytest

import flitsim.schedules as S
from flitsim.hardware.fabric import fabric_preset
from flitsim.networks import AnalyticNetwork, FabricNetwork
from flitsim.schedules.builder import layer_periods, step_period
from flitsim.workloads import dit_workload

CASES = [
    ("distrifusion", {"degree": 4}),
    ("pipefusion", {"stages": 4, "patches": 4}),
    ("ring_attention", {"degree": 4}),
    ("ulysses", {"degree": 4}),
    ("tensor_parallel", {"degree": 4}),
    ("usp", {"ulysses": 2, "ring": 2}),
]
DRIFTING = ("pipefusion", {"stages": 2, "patches": 2, "ulysses": 2, "handoff_sync": False})
"""PipeFusion x Ulysses2 on 10 steps with free hand-off overlap (``handoff_sync=False``;
xDiT's synchronised hand-offs lock the stages into a repeating beat, which is skipped):
its pipeline lags 10 tasks further behind its step each step (FLITSIM_PERIODIC_DEBUG=1
shows it), so no state repeats at step strides and no step is skipped; layers inside a
step may still repeat and be skipped. The run must still be the plain one."""


def _run(sched, net, on: bool):
    old = os.environ.get("FLITSIM_PERIODIC")
    os.environ["FLITSIM_PERIODIC"] = "1" if on else "0"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return S.simulate(sched, net)
    finally:
        if old is None:
            del os.environ["FLITSIM_PERIODIC"]
        else:
            os.environ["FLITSIM_PERIODIC"] = old


def _same(a, b) -> None:
    ta, tb = a.run.tasks, b.run.tasks
    pd.testing.assert_frame_equal(ta, tb)
    assert a.run.makespan_ps == b.run.makespan_ps
    assert a.run.events == b.run.events
    na, nb = a.run.network, b.run.network
    for k in ("links", "switch_ports"):
        if k in na:
            pd.testing.assert_frame_equal(na[k], nb[k])
    for k in ("packets", "fidelity", "fidelity_reason", "bytes_moved"):
        assert na.get(k) == nb.get(k), k


@pytest.mark.parametrize("name,opts", CASES, ids=[f"{n}-{'-'.join(map(str, o.values()))}" for n, o in CASES])
def test_dit_schedules_skip_exactly_at_flow_level(name, opts):
    d = dit_workload("pixart-alpha-xl/2", 512, steps=10)
    fab = fabric_preset("hgx-h100", fidelity="flow")
    sched = S.build(name, None, d, fabric=fab, **opts)
    periods = sched.graph.columns["period_tasks"]
    assert periods[0] > 0
    # the builder also declares the layer period(s) inside a step (28 PixArt layers);
    # plain PipeFusion runs a stage's 7 layers as one task per patch (layer -1): none
    if (sched.task_layer >= 0).any():
        assert len(periods) > 1 and all(0 < p < periods[0] for p in periods[1:]), periods
    else:
        assert len(periods) == 1, periods
    on = _run(sched, FabricNetwork(fab), True)
    off = _run(sched, FabricNetwork(fab), False)
    assert off.run.network["periodic"] == "not periodic: turned off (FLITSIM_PERIODIC=0)"
    _same(on, off)
    assert on.run.network["periodic"].startswith("periodic: skipped"), on.run.network["periodic"]


def test_a_drifting_schedule_skips_no_step_and_is_unchanged():
    name, opts = DRIFTING
    d = dit_workload("pixart-alpha-xl/2", 512, steps=10)
    fab = fabric_preset("hgx-h100", fidelity="flow")
    sched = S.build(name, None, d, fabric=fab, **opts)
    on = _run(sched, FabricNetwork(fab), True)
    off = _run(sched, FabricNetwork(fab), False)
    _same(on, off)
    rep = on.run.network["periodic"]
    assert "steps not skipped: no state repeated" in rep or rep.startswith("not periodic: no state repeated"), rep


def test_distrifusion_skips_exactly_on_the_analytic_network():
    d = dit_workload("pixart-alpha-xl/2", 512, steps=10)
    sched = S.build("distrifusion", None, d, degree=4)
    net = AnalyticNetwork(alpha_ps=3_000_000, bandwidth_GBps=50.0)
    on = _run(sched, net, True)
    off = _run(sched, net, False)
    _same(on, off)
    assert on.run.network["periodic"].startswith("periodic: skipped"), on.run.network["periodic"]


def test_step_period_declaration():
    # four steps of 5 tasks after a 3-task prologue: 5; uneven steps or too few: 0
    assert step_period([-1, -1, -1] + [0] * 5 + [1] * 5 + [2] * 5 + [3] * 5) == 5
    assert step_period([0] * 5 + [1] * 6 + [2] * 5 + [3] * 5) == 0
    assert step_period([0, 0, 1, 1, 2, 2]) == 0


def test_layer_period_declaration():
    # a prologue, 4 layers of 3 tasks, a gap, 3 layers of 2 tasks: 3 (12 tasks) before 2 (6)
    lay = [-1, -1] + [0] * 3 + [1] * 3 + [2] * 3 + [3] * 3 + [-1] + [4] * 2 + [5] * 2 + [6] * 2 + [7] * 2
    assert layer_periods(lay) == [3, 2]
    assert layer_periods(lay, exclude=3) == [2]
    assert layer_periods(lay, most=1) == [3]
    # fewer than 3 equal distances in a row declare nothing
    assert layer_periods([0, 0, 1, 1, 1, 2, 2, 3, 3, 3]) == []
    assert layer_periods([]) == []


def test_spray_numbering_per_dag_repeats_every_step_on_infiniband():
    """Each DAG's spray numbering starts at 0 (the default since stop 15), so
    DistriFusion's steps on the rotated ib-4xhgx-h100 fabric repeat at one-step
    strides; with one running counter across the task graph
    (FLITSIM_SPRAY_PER_DAG=0, the earlier model) the counter moves 2 of 18 ports
    per step and nothing repeats within 8 steps. The answer moves only through
    which lane a transfer starts on: bound 0.5 % (measured 0.0002 % here)."""
    d = dit_workload("pixart-alpha-xl/2", 256, steps=8)
    fab = fabric_preset("ib-4xhgx-h100", fidelity="flow")
    sched = S.build("distrifusion", None, d, fabric=fab, degree=16)
    runs = {}
    for v in ("0", None):
        if v is not None:
            os.environ["FLITSIM_SPRAY_PER_DAG"] = v
        try:
            runs[v] = _run(sched, FabricNetwork(fab), True)
        finally:
            os.environ.pop("FLITSIM_SPRAY_PER_DAG", None)
    assert runs["0"].run.network["periodic"].startswith("not periodic"), runs["0"].run.network["periodic"]
    assert "stride up to 1 " in runs[None].run.network["periodic"], runs[None].run.network["periodic"]
    a, b = runs["0"].run.makespan_ps, runs[None].run.makespan_ps
    assert abs(b - a) / a < 5e-3
    # and per DAG the skip is exact
    _same(runs[None], _run(sched, FabricNetwork(fab), False))


@pytest.mark.parametrize("preset,degree", [("eth-2x8xl40", 16), ("hgx-h100", 8)])
def test_isolated_replays_change_nothing(preset, degree):
    """DistriFusion's asynchronous all-gathers queue on the one NCCL stream per
    GPU while compute runs on: each after the first of its rotation is replayed
    while isolated (rust/src/taskgraph/fabric_network.rs; docs/fidelity.md
    "Isolated collectives"). With the lever off (FLITSIM_COLLECTIVE_REPLAY_ISOLATED=0)
    every all-gather is simulated; the task table, link tables and the rest are
    the same, with the periodic skip on and off."""
    d = dit_workload("pixart-alpha-xl/2", 512, steps=6)
    fab = fabric_preset(preset, fidelity="flow")
    sched = S.build("distrifusion", None, d, fabric=fab, degree=degree)
    runs = {}
    for iso in ("1", "0"):
        os.environ["FLITSIM_COLLECTIVE_REPLAY_ISOLATED"] = iso
        try:
            runs[iso] = [_run(sched, FabricNetwork(fab), per) for per in (True, False)]
        finally:
            os.environ.pop("FLITSIM_COLLECTIVE_REPLAY_ISOLATED", None)
    for r in runs["1"] + runs["0"][1:]:
        _same(r, runs["0"][0])
    on = runs["1"][1].run.network["replays"]
    assert on["replayed_isolated"] > 0 and not on["isolated_retried"], on
    assert runs["0"][1].run.network["replays"]["replayed_isolated"] == 0


def test_a_bad_period_column_is_a_config_error_naming_it():
    """The executor's own input (``_core.execute_taskgraph``): a period column of
    the wrong dtype or shape is a ConfigError naming the column, what was given
    and the dtype allowed (found by a fresh-user trial: it named the Rust type)."""
    import pickle

    from flitsim.errors import ConfigError

    d = dit_workload("pixart-alpha-xl/2", 512, steps=10)
    sched = S.build("ulysses", None, d, degree=4)
    net = AnalyticNetwork(alpha_ps=3_000_000, bandwidth_GBps=50.0)
    for bad, got in ((np.array([570, 20]), "dtype int64 with 1 dimension"), ([570, 20], "type list"),
                     (np.zeros((2, 2), np.uint32), "dtype uint32 with 2 dimension")):
        sched.graph.columns["period_tasks"] = bad
        with pytest.raises(ConfigError) as ei:
            S.simulate(sched, net)
        msg = str(ei.value)
        assert msg.startswith("graph.period_tasks: got") and got in msg and "dtype uint32" in msg and "\n" not in msg, msg
        assert str(pickle.loads(pickle.dumps(ei.value))) == msg
    # a zero layer period is said to be one, and the run is the undeclared one
    sched.graph.columns["period_tasks"] = np.array([0, 0], np.uint32)
    zero = _run(sched, net, True)
    assert "every declared inner period ([0] tasks) is 0" in zero.run.network["periodic"], zero.run.network["periodic"]
    sched.graph.columns["period_tasks"] = np.array([], np.uint32)
    _same(zero, _run(sched, net, True))
