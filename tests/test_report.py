"""Reports: metrics on hand-built timelines, critical path, LLM latency
definitions, the Trace Event format, scenario validation, sweeps, HTML, and a
tiny end-to-end scenario. Every expected value is derived here by hand."""

from __future__ import annotations

import gzip
import json
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

import flitsim
from flitsim.errors import ConfigError
from flitsim.report import (bubble_fraction, critical_path, llm_latency_table, llm_request_latencies, summarize,
                            trace_events)
from flitsim.scenario import load_scenario
from flitsim.taskgraph import IdealNetwork, TaskGraphBuilder, execute

ROOT = Path(__file__).resolve().parents[1]
T_PS = 1_000_000  # one stage-task: 1 us


def gpipe(K: int, M: int, credit: int | None = None):
    """K equal stages (one per device), M micro-batches, zero-cost hand-off:
    task (m, k) after (m, k-1) [data] and after (m-1, k) [same stream]."""
    b = TaskGraphBuilder(K)
    ids = {}
    for m in range(M):
        for k in range(K):
            ids[m, k] = b.add_compute(k, T_PS, label=f"mb{m}.s{k}", stage=k)
            if k:
                b.add_edge(ids[m, k - 1], ids[m, k])
            if credit and k + 1 < K and m >= credit:
                b.add_edge(ids[m - credit, k + 1], ids[m, k], "credit")
    return execute(b.build(), IdealNetwork())


@pytest.mark.parametrize("K,M", [(2, 1), (4, 4), (4, 8), (8, 3)])
def test_bubble_fraction_gpipe(K, M):
    run = gpipe(K, M)
    # GPipe: makespan (M + K - 1) t, each device busy M t -> bubble (K - 1) / (M + K - 1)
    assert run.makespan_ps == (M + K - 1) * T_PS
    bub = bubble_fraction(run.busy_intervals(), run.makespan_ps)
    for d in range(K):
        assert bub[d] == pytest.approx((K - 1) / (M + K - 1), abs=1e-12)


def test_bubble_fraction_merges_overlaps():
    # busy [0,4) and [2,6) and [8,10) over 10: merged busy 8 -> 0.2 idle
    assert bubble_fraction({0: [(0, 4), (2, 6), (8, 10)]}, 10)[0] == pytest.approx(0.2)
    with pytest.raises(ConfigError):
        bubble_fraction({0: []}, 0)


def test_critical_path_gpipe_is_all_compute():
    K, M = 4, 5
    cp = critical_path(gpipe(K, M))
    # the chain: M + K - 1 tasks of t each, no waiting
    assert len(cp.tasks) == M + K - 1
    assert cp.breakdown_ps["compute"] == (M + K - 1) * T_PS
    assert sum(cp.breakdown_ps.values()) == cp.makespan_ps


def test_critical_path_transfer_split_and_stream_wait():
    # compute 1 us on GPU 0, transfer 1e6 B at 1e6 B/us (= 1 GB/s? no: 1e6 B / 1e3 GB/s = 1 us) + 500 ns alpha,
    # compute 1 us on GPU 1; a second compute on GPU 1 ready at 0 but queued behind nothing -> runs first.
    b = TaskGraphBuilder(2)
    a = b.add_compute(0, T_PS, label="a")
    x = b.add_transfer(0, 1, 1_000_000, label="x")
    c = b.add_compute(1, T_PS, label="c")
    b.add_edge(a, x)
    b.add_edge(x, c)
    run = execute(b.build(), IdealNetwork(alpha_ps=500_000, bandwidth_GBps=1000.0))
    # transfer time = 500 ns + 1e6 B / 1e12 B/s = 1.5 us; makespan 3.5 us
    assert run.makespan_ps == 3_500_000
    cp = critical_path(run, bytes_per_ps=1.0, alpha_ps=500_000)  # 1 B/ps = 1000 GB/s
    assert cp.breakdown_ps["compute"] == 2 * T_PS
    assert cp.breakdown_ps["serialization"] == 1_500_000
    assert cp.breakdown_ps["switch queueing"] == 0
    # with a slower ideal rate assumed (0.5 B/ps), the excess shows as switch queueing
    cp2 = critical_path(run, bytes_per_ps=2.0, alpha_ps=500_000)
    assert cp2.breakdown_ps["serialization"] == 1_000_000 and cp2.breakdown_ps["switch queueing"] == 500_000


def test_critical_path_credit_wait():
    # K = 2 stages, stage 1 twice as slow, hand-off buffer of 1: stage 0's
    # micro-batch m waits for stage 1 to start m - 1 ... the credit edges bind.
    b = TaskGraphBuilder(2)
    ids = {}
    for m in range(4):
        ids[m, 0] = b.add_compute(0, T_PS, stage=0)
        ids[m, 1] = b.add_compute(1, 2 * T_PS, stage=1)
        b.add_edge(ids[m, 0], ids[m, 1])
        if m >= 1:
            b.add_edge(ids[m - 1, 1], ids[m, 0], "credit")
    run = execute(b.build(), IdealNetwork())
    # stage 0 task m starts when stage 1 task m-1 ends: a strict alternation:
    # 4 x (1 + 2) us
    assert run.makespan_ps == 12 * T_PS
    cp = critical_path(run)
    assert sum(cp.breakdown_ps.values()) == run.makespan_ps
    assert cp.breakdown_ps["compute"] == 12 * T_PS  # every moment on the chain computes
    assert set(cp.tasks.via) <= {"start", "data", "credit"} and "credit" in set(cp.tasks.via)


def test_llm_latency_definitions():
    # request A: tokens at 1, 2, 4 s; request B: one token at 2 s; arrivals 0
    tt = [np.array([1.0, 2.0, 4.0]), np.array([2.0])]
    df = llm_request_latencies(tt)
    assert list(df.ttft_s) == [1.0, 2.0]
    assert list(df.e2e_latency_s) == [4.0, 2.0]
    # LLMPerf ITL = E2E / output tokens, TTFT included
    assert df.llmperf_itl_s.tolist() == pytest.approx([4 / 3, 2.0])
    # vLLM TPOT = (E2E - TTFT) / (out - 1); NaN for one token
    assert df.vllm_tpot_s[0] == pytest.approx(1.5) and np.isnan(df.vllm_tpot_s[1])
    tab = llm_latency_table(tt)
    # vLLM ITL pools gaps: [1, 2] -> mean 1.5, p50 1.5; output throughput 4 tokens / 4 s
    assert tab.loc[("vLLM", "itl_s (pooled gaps between streamed chunks)"), "mean"] == pytest.approx(1.5)
    assert tab.loc[("vLLM", "output_throughput_tokens_per_s"), "mean"] == pytest.approx(1.0)
    assert tab.loc[("vLLM", "tpot_s ((E2E-TTFT)/(out-1), per request)"), "count"] == 1
    assert set(tab.index.get_level_values(0)) == {"LLMPerf", "vLLM"}


def test_vllm_itl_counts_chunks_not_tokens():
    # vLLM / sglang benchmark_serving: one ITL sample per streamed chunk after
    # the first. A chunk of 10 tokens every 10 s (TTFT 10 s, 5 chunks) gives
    # ITL 10 s for every sample; the per-token diff would give 1 s on average.
    tt = [np.repeat(np.array([10.0, 20.0, 30.0, 40.0, 50.0]), 10)]
    tab = llm_latency_table(tt)
    itl = tab.loc[("vLLM", "itl_s (pooled gaps between streamed chunks)")]
    assert itl["count"] == 4
    assert itl["mean"] == pytest.approx(10.0) and itl["p50"] == pytest.approx(10.0) and itl["min"] == 10.0
    # TPOT stays per token: (50 - 10) / (50 - 1)
    tpot = tab.loc[("vLLM", "tpot_s ((E2E-TTFT)/(out-1), per request)"), "mean"]
    assert tpot == pytest.approx(40 / 49)


def test_summarize_percentiles():
    s = summarize(np.arange(1, 101, dtype=float))
    # numpy linear interpolation on 1..100: p25 = 25.75, p99 = 99.01
    assert s["p25"] == pytest.approx(25.75) and s["p99"] == pytest.approx(99.01)
    assert s["mean"] == pytest.approx(50.5) and s["std"] == pytest.approx(np.sqrt((100**2 - 1) / 12))


def test_trace_event_format():
    b = TaskGraphBuilder(2)
    a = b.add_compute(0, 2_500_000, label="a", stage=0)
    x = b.add_transfer(0, 1, 1000, label="x")
    g = b.add_collective([0, 1], "all_reduce", 1000, label="ar")
    b.add_edge(a, x)
    b.add_edge(x, g)
    run = execute(b.build(), IdealNetwork(alpha_ps=1000, bandwidth_GBps=100.0))
    obj = json.loads(json.dumps(trace_events(run)))
    ev = obj["traceEvents"]
    for e in ev:
        for k in ("name", "ph", "ts", "pid", "tid"):
            assert k in e
        assert e["ph"] in ("X", "M", "s", "f", "C")
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        if e["ph"] == "X":
            assert isinstance(e["ts"], (int, float)) and e["dur"] >= 0
    crit_pid = [e["pid"] for e in ev if e["ph"] == "M" and e["args"].get("name") == "critical path"][0]
    comp = [e for e in ev if e["ph"] == "X" and e["name"] == "a" and e["pid"] != crit_pid][0]
    assert comp["ts"] == 0 and comp["dur"] == pytest.approx(2.5)  # 2,500,000 ps = 2.5 us
    xs = [e for e in ev if e["ph"] == "X" and e["name"] == "x" and e["pid"] != crit_pid]
    assert len(xs) == 1 and xs[0]["pid"] == 0 and xs[0]["tid"] == 1  # the sender's comm stream
    assert xs[0]["ts"] == pytest.approx(2.5) and xs[0]["args"]["dst"] == 1
    names = {e["args"]["name"] for e in ev if e["ph"] == "M" and "name" in e["args"]}
    assert {"GPU 0", "GPU 1", "compute", "comm", "critical path"} <= names
    assert len([e for e in ev if e["ph"] == "X" and e["name"] == "ar" and e["pid"] != crit_pid]) == 2  # per member
    # the chain a -> x -> ar is the critical path: copied to its track, flows along both edges
    assert [e["name"] for e in ev if e["ph"] == "X" and e["pid"] == crit_pid] == ["a", "x", "ar"]
    assert len([e for e in ev if e["ph"] == "s" and e["cat"] == "critical"]) == 2
    assert obj["otherData"]["truncated"] is False
    # Capped traces keep the earliest-starting tasks and say so, in the UI too (a NOTE slice).
    cut = trace_events(run, max_tasks=1)
    shown = [e for e in cut["traceEvents"] if e["ph"] == "X" and e.get("cat") != "note"]
    assert {e["name"] for e in shown} == {"a"}
    assert cut["otherData"]["truncated"] is True and cut["otherData"]["tasks_total"] == 3
    note = [e for e in cut["traceEvents"] if e.get("cat") == "note"]
    assert len(note) == 1 and "1 of 3 tasks" in note[0]["name"]


def _write(tmp_path, text):
    p = tmp_path / "s.toml"
    p.write_text(text)
    return p


GOOD = """
title = "t"
[fabric]
preset = "hgx-b200"
[[cases]]
name = "c"
model = "llama-3-8b"
workload = { kind = "tokens", tokens = 256 }
[[cases.schedules]]
name = "terapipe"
options = { stages = 2, slices = 2 }
"""


def test_scenario_rejects_unknown_keys_and_types(tmp_path):
    assert load_scenario(_write(tmp_path, GOOD)).cases[0].name == "c"
    with pytest.raises(ConfigError, match="optionz"):
        load_scenario(_write(tmp_path, GOOD.replace("options =", "optionz =")))
    with pytest.raises(ConfigError, match="colour"):
        load_scenario(_write(tmp_path, GOOD + '\ncolour = "red"\n'))
    with pytest.raises(ConfigError, match="tokens"):
        load_scenario(_write(tmp_path, GOOD.replace("tokens = 256", 'tokens = "many"')))
    with pytest.raises(ConfigError, match="kind"):
        load_scenario(_write(tmp_path, GOOD.replace('kind = "tokens"', 'kind = "banana"')))
    with pytest.raises(ConfigError, match="TOML"):
        load_scenario(_write(tmp_path, "title = "))
    for ex in ("main.toml", "nvl72.toml", "tiny.toml"):
        load_scenario(ROOT / "examples" / ex)


GRID = {"tokens": [256, 512], "stages": [1, 2], "slices": [2]}
FIXED = {"schedule": "terapipe", "model": "llama-3-8b", "gpu": "b200", "fabric": "hgx-b200"}


def _points():
    from flitsim.sweeps import grid_points

    return [{**FIXED, **p} for p in grid_points(GRID)]


def test_sweep_same_with_1_and_2_workers_and_resumes(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    a = flitsim.sweep("flitsim.sweeps:schedule_point", _points(), workers=1, progress=False, out=tmp_path / "a.parquet")
    b = flitsim.sweep("flitsim.sweeps:schedule_point", _points(), workers=2, progress=False, out=tmp_path / "b.parquet")
    assert len(a) == 4
    assert a.equals(b)
    assert set(a.memory_status) <= {"ok", "oom"} and (a.peak_memory_bytes > 0).all()  # memory per point
    import pandas as pd

    assert pd.read_parquet(tmp_path / "b.parquet").equals(b)
    # resume: every point is in the file, so the (same-named) target is never called again
    import flitsim.sweeps as sw

    def boom(**kw):
        raise AssertionError("recomputed a finished point")

    orig = sw.schedule_point
    sw.schedule_point = boom
    try:
        c = flitsim.sweep("flitsim.sweeps:schedule_point", _points(), workers=1, progress=False,
                          out=tmp_path / "a.parquet")
    finally:
        sw.schedule_point = orig
    assert c.equals(a)
    # a submit-executor and a map-like callable give the same rows
    with ThreadPoolExecutor(2) as ex:
        d = flitsim.sweep("flitsim.sweeps:schedule_point", _points(), ex, progress=False)
        e = flitsim.sweep("flitsim.sweeps:schedule_point", _points(), ex.map, progress=False)
    assert d.equals(a) and e.equals(a)
    with pytest.raises(ConfigError, match="grid"):
        flitsim.sweep("flitsim.sweeps:schedule_point", {"tokens": []}, progress=False)


class _Check(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.imgs: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "img":
            self.imgs.append(dict(attrs)["src"])


def test_tiny_scenario_end_to_end(tmp_path):
    from click.testing import CliRunner

    from flitsim.cli import cli

    out = tmp_path / "rep"
    r = CliRunner().invoke(cli, ["run", str(ROOT / "examples" / "tiny.toml"), "--out", str(out), "--json"])
    assert r.exit_code == 0, r.output
    res = json.loads(r.output)
    assert {s["schedule"] for s in res["summary"]} >= {"TeraPipe uniform", "PipeFusion", "decode PP2"}
    assert res["conclusion"] and res["scorecard"]
    assert all(s["memory_status"] == "ok" and s["peak_memory_bytes"] > 0 for s in res["summary"])
    lat = res["llm_latency"]["Llama-3-8B decode, LLMPerf / decode PP2"]
    assert {x["definition"] for x in lat} == {"LLMPerf", "vLLM"}
    for f in ("summary.parquet", "scorecard.parquet", "critical_path.parquet", "report.html", "results.json"):
        assert (out / f).exists()
    traces = list((out / "traces").glob("*.json.gz"))  # gzip: the Perfetto UI opens it as is
    assert traces and all("traceEvents" in json.loads(gzip.decompress(p.read_bytes())) for p in traces)
    page = (out / "report.html").read_text()
    p = _Check()
    p.feed(page)
    assert "html" in p.tags and "table" in p.tags
    assert p.imgs and all(s.startswith("data:image/png;base64,") for s in p.imgs)  # self-contained
    # rendering in a real browser: tests/test_report_browser.py


def test_unknown_schedule_in_scenario(tmp_path):
    from flitsim.scenario import run_scenario

    with pytest.raises(ConfigError, match="schedule"):
        run_scenario(_write(tmp_path, GOOD.replace('name = "terapipe"', 'name = "warp_drive"')), progress=False)


def test_critical_path_splits_fabric_waits_into_link_credits_and_switch_queueing():
    # 7-to-1 incast on HGX H100 (raw fabric): the path's transfer needs 7x its
    # own serialization (bytes / 423.5 GB/s); the fabric measured most of the
    # excess with its packets held at credit-blocked source ports.
    import flitsim
    from flitsim.hardware import fabric_preset
    from flitsim.taskgraph import TaskGraphBuilder, execute
    from flitsim.report import critical_path

    b = TaskGraphBuilder(8)
    for s in range(1, 8):
        b.add_transfer(s, 0, 8 << 20)
    run = execute(b.build(), flitsim.FabricNetwork(fabric_preset("hgx-h100"), calibrated=False))
    rate = 18 * 25e9 * 256 / 272 / 1e12  # bytes per ps
    cp = critical_path(run, bytes_per_ps=rate)
    bd = cp.breakdown_ps
    ser = (8 << 20) / rate
    assert bd["serialization"] == pytest.approx(ser, rel=1e-3)
    excess = cp.makespan_ps - ser
    assert bd["link credit wait"] > 0.85 * excess
    assert bd["link credit wait"] + bd["switch queueing"] == pytest.approx(excess, rel=1e-3)


def _busy_intervals_loop(tasks, devices: int) -> dict[int, list[tuple[int, int]]]:
    """The merge as a plain loop over compute tasks sorted by (device, start)."""
    comp = tasks[tasks.kind == "compute"].sort_values(["device", "start_ps"])
    out: dict[int, list[tuple[int, int]]] = {d: [] for d in range(devices)}
    for dev, s, e in zip(comp.device, comp.start_ps, comp.end_ps):
        iv = out[int(dev)]
        if iv and s <= iv[-1][1]:
            iv[-1] = (iv[-1][0], max(iv[-1][1], int(e)))
        elif e > s:
            iv.append((int(s), int(e)))
    return out


def test_busy_intervals_merge_overlapping_touching_and_empty_tasks() -> None:
    """Vectorized merge = the loop, on random overlapping, touching, nested and empty tasks
    (three devices, transfers mixed in); plus a hand-checked case."""
    import dataclasses

    import pandas as pd

    b = TaskGraphBuilder(devices=3)
    b.add_compute(0, 10)
    run = execute(b.build(), IdealNetwork())
    rng = np.random.default_rng(3)
    for _ in range(200):
        n = int(rng.integers(0, 40))
        start = rng.integers(0, 100, n)
        end = start + rng.integers(0, 30, n) * (rng.random(n) < 0.8)
        tasks = pd.DataFrame({"kind": rng.choice(["compute", "compute", "transfer"], n),
                              "device": rng.integers(0, 3, n), "start_ps": start.astype(np.int64),
                              "end_ps": end.astype(np.int64)})
        r = dataclasses.replace(run, tasks=tasks)
        assert r.busy_intervals() == _busy_intervals_loop(tasks, 3)
    tasks = pd.DataFrame({"kind": ["compute"] * 5, "device": [1, 1, 1, 1, 0],
                          "start_ps": [0, 10, 10, 40, 5], "end_ps": [10, 20, 15, 40, 5]})
    # [0,10) and [10,20) touch: one interval; [10,15) nested; [40,40) and device 0's empty task add nothing
    assert dataclasses.replace(run, tasks=tasks).busy_intervals() == {0: [], 1: [(0, 20)], 2: []}
