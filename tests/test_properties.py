"""Property tests on the public API (issue 13), each with a bounded example
count: for hostile but well-formed inputs the answer is a ConfigError or a
result whose times are inside the engine's range and obey the closed forms
checked here (a task lasts at least its duration; start <= end <= makespan)
— never an abort, a wrapped time, another exception type or a hang."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import flitsim
from flitsim import ConfigError, StalledError
from flitsim.taskgraph import COLLECTIVES, IdealNetwork, TaskGraphBuilder, execute

MAX_TIME_PS = 2**63 - 1
FEW = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])

hostile_ints = st.sampled_from([0, 1, -1, 2**31, 2**32 - 1, 2**32, 2**62 - 1, 2**63, 2**64 - 1, 2**64, 2**70])
hostile = st.one_of(hostile_ints, st.integers(0, 10_000), st.sampled_from(
    [True, False, "8", 1.5, 8.0, 1e-300, 1e300, float("nan"), float("inf"), None, [], {}]))


@st.composite
def graphs(draw):
    devices = draw(st.integers(1, 4))
    ops = draw(st.lists(st.tuples(st.sampled_from(["compute", "transfer", "collective"]),
                                  st.one_of(st.integers(0, 2**20), hostile_ints, hostile),
                                  st.integers(0, devices - 1), st.integers(0, devices - 1)), min_size=1, max_size=12))
    edges = draw(st.lists(st.tuples(st.integers(0, 11), st.integers(0, 11)), max_size=12))
    return devices, ops, edges


@FEW
@given(graphs(), st.sampled_from([0, 1000, 2**40, 2**62 - 1]), st.sampled_from([0.0, 1e-9, 1.0, 450.0, 1e9]))
def test_task_graphs_give_config_error_or_times_in_range(g, alpha_ps, bw):
    devices, ops, edges = g
    try:
        b = TaskGraphBuilder(devices)
        for kind, v, a, c in ops:
            if kind == "compute":
                b.add_compute(a, v)
            elif kind == "transfer":
                b.add_transfer(a, c, v)
            else:
                b.add_collective(sorted({a, c}), COLLECTIVES[a % len(COLLECTIVES)], v)
        n = len(b)
        for s, d in edges:
            if s < d < n:  # forward edges only: acyclic
                b.add_edge(s, d)
        r = execute(b.build(), IdealNetwork(alpha_ps, bw))
    except ConfigError:
        return
    t = r.tasks
    assert 0 <= r.makespan_ps <= MAX_TIME_PS
    assert (t.start_ps >= 0).all() and (t.start_ps <= t.end_ps).all() and (t.end_ps <= r.makespan_ps).all()
    dur = b.build().columns["duration_ps"].astype(object)
    comp = (t.kind == "compute").to_numpy()
    assert all(int(e) - int(s) == int(d) for s, e, d in zip(t.start_ps[comp], t.end_ps[comp], dur[comp]))


SWITCH_FIELDS = ["ports", "vcs", "buffer_per_vc_flits", "max_packet_flits", "speedup", "pipeline_latency_cycles",
                 "iterations", "clock_ghz"]


@FEW
@given(st.dictionaries(st.sampled_from(SWITCH_FIELDS), hostile, min_size=1, max_size=3))
def test_switch_specs_give_config_error_or_a_spec(kw):
    from flitsim.switchlab import SwitchSpec

    try:
        s = SwitchSpec(**kw)
    except ConfigError:
        return
    for k, v in kw.items():  # no silent coercion: what was accepted is what was given
        assert getattr(s, k) == (float(v) if k == "clock_ghz" else v)
        assert type(v) is not bool and not isinstance(v, str)


FABRIC_FIELDS = ["gpus", "sim_packet_bytes", "max_sim_packet_bytes", "sim_packets_per_lane"]


@FEW
@given(st.dictionaries(st.sampled_from(FABRIC_FIELDS), hostile, min_size=1, max_size=2),
       st.sampled_from([1, 4096, 1 << 20]))
def test_fabric_overrides_give_config_error_or_a_bounded_run(kw, nbytes):
    from flitsim.hardware import fabric_preset

    try:
        f = fabric_preset("hgx-h100", **kw)
        r = flitsim.transfers(f, [0], [1], nbytes)
    except (ConfigError, StalledError):
        return
    assert 0 < r.makespan_ps <= MAX_TIME_PS
    # physics: no faster than the GPU's ports at the link payload rate allow
    assert r.makespan_ps >= nbytes / (f.gpu_ports * f.links[0].payload_GBps()) * 1e3 * (1 - 1e-9)


@FEW
@given(st.sampled_from(["terapipe", "layer_pipeline", "tensor_parallel", "nope"]),
       st.one_of(st.integers(1, 4096), hostile), st.one_of(st.integers(1, 4), hostile),
       st.sampled_from([{}, {"slices": 3}, {"slices": [500, 500]}, {"bogus": 1}, {"batch": True}]))
def test_schedules_give_config_error_or_a_schedule(name, tokens, stages, extra):
    import flitsim.schedules as S

    opts = {"degree": stages} if name == "tensor_parallel" else {"stages": stages}
    try:
        s = S.build(name, "llama-3-8b", tokens, **opts, **extra)
    except ConfigError:
        return
    assert len(s.graph) >= 1


def _echo(**kw):
    return {"n": len(kw)}


@settings(max_examples=15, deadline=None)
@given(st.dictionaries(st.text(min_size=1, max_size=4), st.lists(hostile, min_size=0, max_size=3), max_size=3))
def test_sweeps_give_config_error_or_one_row_per_point(grid):
    try:
        df = flitsim.sweep(_echo, grid, workers=1, progress=False)
    except ConfigError:
        return
    n = int(np.prod([len(v) for v in grid.values()]))
    assert len(df) == n and (df.error == "").all()
