"""Issue 19 point 3: the per-task table says what happened, for every kind."""

from __future__ import annotations

import numpy as np
import pandas as pd

import flitsim.schedules as S
from flitsim.networks import AnalyticNetwork


def _tp_run():
    b = S.build("tensor_parallel", "llama-3-8b", 128, degree=2)
    # alpha-beta network: an all-reduce of S bytes over 2 ranks takes alpha + busbw bytes / rate > 0
    return b, S.simulate(b, AnalyticNetwork(bandwidth_GBps=100.0, alpha_ps=1_000_000))


def test_duration_is_end_minus_start_for_every_kind():
    _, s = _tp_run()
    t = s.tasks()
    assert (t.duration_ps == t.end_ps - t.start_ps).all()
    coll = t[t.kind == "collective"]
    assert len(coll) and (coll.duration_ps > 0).all()  # communication is not hidden as 0
    # an all-reduce of S bytes on 2 ranks at 100 GB/s moves busbw = S bytes per rank: >= alpha + S / rate
    b0 = int(coll.bytes.iloc[0])
    assert int(coll.duration_ps.iloc[0]) >= 1_000_000 + b0 * 1e12 / 100e9 * 0.999
    # summing by kind now counts communication
    by = t.groupby("kind").duration_ps.sum()
    assert by["collective"] == int((coll.end_ps - coll.start_ps).sum())


def test_inputs_in_own_columns_and_nulls_where_they_do_not_apply():
    b, s = _tp_run()
    t = s.tasks()
    comp, coll = t[t.kind == "compute"], t[t.kind == "collective"]
    assert comp.peer.isna().all() and comp.bytes.isna().all() and comp.collective.isna().all()
    assert comp.compute_ps.notna().all()
    # the input compute time is what the graph was built with
    assert (comp.compute_ps.to_numpy(np.int64) == b.graph.columns["duration_ps"][b.graph.columns["kind"] == 0]).all()
    assert coll.compute_ps.isna().all() and coll.device.isna().all() and coll.flops.isna().all()
    assert coll.peer.isna().all() and (coll.collective == "all_reduce").all()
    assert all(g == [0, 1] for g in coll.group)
    # not simulated: no duration yet (null, not the input)
    assert b.tasks().duration_ps.isna().all()


def test_task_table_roundtrips_parquet(tmp_path):
    _, s = _tp_run()
    p = tmp_path / "t.parquet"
    s.tasks().to_parquet(p, index=False)
    back = pd.read_parquet(p)
    assert back.peer[back.kind == "compute"].isna().all()
    assert (back.duration_ps == back.end_ps - back.start_ps).all()
