"""Speed levers of graph building change no built array (issue 17 point 5).

Each schedule the map builds is built twice, with the builders' direct
appends on and off (``flitsim.schedules.builder._FAST_APPEND``; off = every
task through :meth:`TaskGraphBuilder.add_compute` / ``add_transfer`` /
``add_edge`` and their checks), and every engine column, metadata column and
schedule array must be identical, as must the simulated task table.
"""

from __future__ import annotations

import numpy as np
import pytest

import flitsim.schedules as S
import flitsim.schedules.builder as B
import flitsim.taskgraph as TG
from flitsim.workloads import dit_workload
from flitsim.scenario.map import candidates


def _arrays(s):
    out = {f"col.{k}": v for k, v in s.graph.columns.items()}
    out.update({f"meta.{k}": v for k, v in s.graph.meta.items()})
    for k in ("task_phase", "task_item", "task_step", "task_layer", "task_measured_ps"):
        out[k] = getattr(s, k)
    return out


def _same(a, b):
    A, Bb = _arrays(a), _arrays(b)
    assert A.keys() == Bb.keys()
    for k in A:
        assert A[k].dtype == Bb[k].dtype, k
        assert np.array_equal(A[k], Bb[k]), k
        assert A[k].flags.writeable and A[k].flags.c_contiguous, k
    assert (a.graph.devices, a.devices, a.stages, a.steps) == (b.graph.devices, b.devices, b.stages, b.steps)
    assert repr(a.options) == repr(b.options)


def _llm_requests(inp, out):
    import pandas as pd

    from flitsim.workloads import LlmWorkload

    df = pd.DataFrame({"arrival_s": np.zeros(len(inp)), "input_tokens": inp, "output_tokens": out})
    return LlmWorkload(df, None, None, "test", {})


def _both(monkeypatch, build):
    fast = build()
    monkeypatch.setattr(B, "_FAST_APPEND", False)
    monkeypatch.setattr(TG, "_BUFFER_COLUMNS", False)
    slow = build()
    monkeypatch.setattr(B, "_FAST_APPEND", True)
    monkeypatch.setattr(TG, "_BUFFER_COLUMNS", True)
    return fast, slow


_DIT = dit_workload("pixart-alpha", 512, steps=2)
_CASES = ([("dit", c) for c in candidates("dit", _DIT.model, 4, cfg_workload=True)]
          + [("prefill", c) for c in candidates("prefill", "llama-3-8b", 4)]
          + [("decode", c) for c in candidates("decode", "llama-3-8b", 4, requests=2)])


@pytest.mark.parametrize("kind,cand", _CASES, ids=[f"{k}-{c.label}" for k, c in _CASES])
def test_direct_appends_build_identical_graphs(monkeypatch, kind, cand):
    opts = {**cand.options, "gpu": "h100", "fabric_devices": 4}
    if cand.options.get("slicing") == "dp":
        opts["grid_tokens"] = 64

    def build():
        if kind == "dit":
            return S.build(cand.name, None, _DIT, **opts)
        if kind == "decode":
            return S.build(cand.name, "llama-3-8b", _llm_requests([100, 300], [3, 5]), **opts)
        return S.build(cand.name, "llama-3-8b", 1024, **opts)

    try:
        fast, slow = _both(monkeypatch, build)
    except Exception as e:  # noqa: BLE001 -- a candidate the builder refuses must refuse the same way both times
        monkeypatch.setattr(B, "_FAST_APPEND", False)
        monkeypatch.setattr(TG, "_BUFFER_COLUMNS", False)
        with pytest.raises(type(e)):
            build()
        return
    assert len(fast.graph) > 0
    _same(fast, slow)


def test_direct_appends_simulate_identically(monkeypatch):
    fast, slow = _both(monkeypatch, lambda: S.build("ring_attention", None, _DIT, degree=4, gpu="h100"))
    a, b = S.simulate(fast).run.tasks, S.simulate(slow).run.tasks
    assert a.equals(b)


def test_out_of_range_device_still_refused_with_direct_appends():
    from flitsim import ConfigError
    gb = B.new_builder(2, B.Hardware("h100"))
    with pytest.raises(ConfigError, match="device"):
        gb.compute(2, None, duration_ps=5)
    with pytest.raises(ConfigError, match="dst"):
        gb.transfer(0, 7, 10)
    t = gb.compute(0, None, duration_ps=5)
    with pytest.raises(ConfigError, match="after"):
        gb.edge(t, 9)


def test_entry_table_memo_returns_the_computed_table_as_a_fresh_list():
    from flitsim.models import MODEL_PRESETS, as_model
    from flitsim.models.entries import _entries, _entries_of

    for name in MODEL_PRESETS:
        cfg = as_model(name)
        first = _entries(cfg)
        first.clear()  # a caller's list is its own
        assert _entries(cfg) == _entries_of(cfg)
        changed = cfg.model_copy(update={"n_layers": cfg.n_layers + 1})
        assert len(_entries(changed)) == len(_entries_of(cfg)) + 1


@pytest.mark.parametrize("values,dtype", [([1, 2, 3], np.uint32), ([], np.uint64), ([1.5, 2], np.float64),
                                          ([-1, 5], np.int64), ([5.0], np.uint64), ([2**40], np.uint64),
                                          ([np.int64(3), True], np.uint8), (["7"], np.uint64)])
def test_buffer_columns_equal_np_array(monkeypatch, values, dtype):
    a = TG.column(values, dtype)
    monkeypatch.setattr(TG, "_BUFFER_COLUMNS", False)
    b = TG.column(values, dtype)
    assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)


@pytest.mark.parametrize("values,dtype", [([-1], np.uint32), ([2**32], np.uint32), ([None], np.uint64)])
def test_buffer_columns_refuse_like_np_array(monkeypatch, values, dtype):
    with pytest.raises(Exception) as fast:
        TG.column(values, dtype)
    monkeypatch.setattr(TG, "_BUFFER_COLUMNS", False)
    with pytest.raises(Exception) as slow:
        TG.column(values, dtype)
    assert type(fast.value) is type(slow.value)
