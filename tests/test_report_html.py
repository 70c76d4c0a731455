"""Issue 19 point 2 and 4: the report page leads with the answer, has a table of
contents, collapsible cases, provenance and links that resolve; figures only
where they carry information; Perfetto traces with stable names, flows,
physical-port counters, gzip and a stated cap."""

from __future__ import annotations

import gzip
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from flitsim.errors import ConfigError
from flitsim.report.plots import link_heatmap, timeline_colour
from flitsim.report.trace import stable_name, to_perfetto, trace_events

ROOT = Path(__file__).resolve().parents[1]


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: list[str] = []
        self.hrefs: list[str] = []
        self.order: list[str] = []
        self.details = 0
        self.imgs = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.append(a["id"])
            if tag == "section":
                self.order.append(a["id"])
        if tag == "a" and a.get("href"):
            self.hrefs.append(a["href"])
        if tag == "details":
            self.details += 1
        if tag == "img":
            self.imgs += 1


def test_page_leads_with_the_answer_and_every_link_resolves(tiny_report, tiny_result):
    out, _ = tiny_report
    html = (out / "report.html").read_text()
    p = _Page()
    p.feed(html)
    # the answer first, per-case detail after, provenance last
    assert p.order[0] == "answer" and p.order[-1] == "provenance"
    assert p.order.index("relative") < p.order.index("summary") < p.order.index("cases")
    assert p.details == len({r.case for r in tiny_result.runs})  # one collapsible section per case
    for h in p.hrefs:
        if h.startswith("#"):
            assert h[1:] in p.ids, h  # TOC and in-page links resolve
        else:
            assert (out / h).exists(), h  # traces, task tables, CSVs, PNGs are there
    assert any(h.startswith("traces/") and h.endswith(".json.gz") for h in p.hrefs)
    assert any(h.startswith("tasks/") for h in p.hrefs)
    # the conclusion's words are in the answer section, before any table
    first = tiny_result.conclusion[0]
    assert html.index(first[:40]) < html.index("<table")


def test_provenance_block(tiny_report, tiny_result):
    out, _ = tiny_report
    html = (out / "report.html").read_text()
    prov = html[html.index("id=\"provenance\""):]
    import flitsim

    assert f"flitsim version</dt><dd>{flitsim.__version__}" in prov
    assert "git commit" in prov and "machine" in prov and "total wall time" in prov
    # the scenario file verbatim (HTML-escaped)
    import html as h

    pre = re.search(r"<pre class=\"src\">(.*?)</pre>", prov, re.S).group(1)
    assert h.unescape(pre) == (ROOT / "examples" / "tiny.toml").read_text()
    text = h.unescape(prov)
    for r in tiny_result.runs:  # fidelity per run
        assert r.label in text and r.fidelity in text


def test_figures_only_where_they_carry_information(tiny_report, tiny_result):
    out, _ = tiny_report
    figs = {p.name for p in (out / "figures").glob("*.png")}

    def slug(x):
        return re.sub(r"[^A-Za-z0-9]+", "-", x).strip("-").lower()

    for case in {r.case for r in tiny_result.runs}:
        rs = [r for r in tiny_result.runs if r.case == case]
        talks = [r for r in rs if r.fabric and r.fabric["link_utilization_max"] > 0]
        assert (f"{slug(case)}__utilization.png" in figs) == bool(talks)  # utilization only for runs that communicate
        for r in rs:
            has_tl = f"{slug(case)}__{slug(r.label)}__timeline.png" in figs
            assert has_tl == (r.stages >= 2 or r.name == "decode"), (case, r.label)
    # a prefill run at 2 representative lengths gets no 2-point "CDF"
    assert not any(f.endswith("__prefill_cdf.png") for f in figs)


def test_figure_gate_skips_silent_runs():
    from flitsim.scenario.write import _figures_wanted

    quiet = SimpleNamespace(metrics={"comm_bytes": 0.0}, fabric=None, stages=1, name="tensor_parallel")
    assert _figures_wanted(quiet) == {"timeline": False, "ports": False, "occupancy": False}
    even = pd.DataFrame({"utilization": [0.2, 0.2, 0.0]})
    sprayed = SimpleNamespace(metrics={"comm_bytes": 1e6}, fabric={"links": even}, stages=4, name="terapipe")
    assert _figures_wanted(sprayed) == {"timeline": True, "ports": False, "occupancy": False}
    uneven = SimpleNamespace(metrics={"comm_bytes": 1e6}, fabric={"links": pd.DataFrame({"utilization": [0.2, 0.1]})},
                             stages=1, name="tensor_parallel")
    assert _figures_wanted(uneven)["ports"] is True
    analytic = SimpleNamespace(metrics={"comm_bytes": 1e6}, fabric=None, stages=1, name="ulysses")
    assert _figures_wanted(analytic)["occupancy"] is True


def test_utilization_bars_autoscale():
    from flitsim.report.plots import utilization_bars

    fig = utilization_bars({"a": (0.007, 0.014), "b": (0.001, 0.002)})
    assert fig.axes[0].get_xlim()[1] == pytest.approx(1.4 * 1.25)  # percent, to just past the largest


def test_utilization_axis_is_autoscaled():
    links = pd.DataFrame({"gpu": [0, 0, 1, 1], "port": [0, 1, 0, 1], "utilization": [0.014, 0.0, 0.007, 0.0]})
    fig = link_heatmap(links)
    im = fig.axes[0].images[0]
    assert im.get_clim() == pytest.approx((0.0, 0.014))  # 1.4 % fills the scale, not 1.4 % of 0-1


def test_timeline_colours_by_the_schedules_unit(tiny_result):
    by = {r.name: timeline_colour(r.schedule) for r in tiny_result.runs}
    assert by["terapipe"] == "slice" and by["pipefusion"] == "patch" and by["decode"] == "step"


def test_stable_slice_names():
    assert stable_name("step0.L3.attn.d1", "compute") == ("attn", {"step": 0, "L": 3, "d": 1})
    assert stable_name("step2.L0.attn.allreduce", "collective") == ("attn.allreduce", {"step": 2, "L": 0})
    assert stable_name("a2a_q", "transfer") == ("a2a_q", {})
    assert stable_name("", "transfer") == ("transfer", {})
    assert stable_name("slice3.1->2", "transfer") == ("transfer", {"slice": 3, "from": 1, "to": 2})


def test_perfetto_trace_of_a_fabric_run(tiny_result, tmp_path):
    r = next(x for x in tiny_result.runs if x.fabric and x.name == "terapipe")
    path = to_perfetto(r.schedule, tmp_path / "t.json.gz", critical=r.critical)
    raw = Path(path).read_bytes()
    assert raw[:2] == b"\x1f\x8b"  # gzip
    obj = json.loads(gzip.decompress(raw))
    ev = obj["traceEvents"]
    slices = [e for e in ev if e["ph"] == "X"]
    names = {e["name"] for e in slices}
    # stable names: far fewer distinct names than tasks; indices in args
    assert len(names) * 5 < len(slices)
    assert all("label" in e["args"] for e in slices)
    # counters per physical port: utilization in [0, 1], bounded samples per track, level = measured
    cnt = [e for e in ev if e["ph"] == "C" and "utilization" in e["args"]]
    tracks: dict[str, list[float]] = {}
    for e in cnt:
        tracks.setdefault(e["name"], []).append(e["args"]["utilization"])
    assert tracks and all(len(v) <= obj["otherData"]["counter_samples_per_track"] for v in tracks.values())
    assert all(0 <= x <= 1 for v in tracks.values() for x in v)
    net_links = r.schedule.run.network["links"]
    row = net_links[net_links.utilization > 0].iloc[0]
    name = f"GPU {int(row.gpu)} port {int(row.port)} -> switch {int(row.switch)}"
    assert name in tracks
    assert np.mean(tracks[name]) == pytest.approx(row.utilization, rel=0.02)  # unless clipped at 1
    assert any(n.startswith("switch ") for n in tracks)
    # flows along dependencies, the critical path's first
    s = [e for e in ev if e["ph"] == "s"]
    f = [e for e in ev if e["ph"] == "f"]
    assert len(s) == len(f) == obj["otherData"]["flows"] > 0
    assert {e["id"] for e in s} == {e["id"] for e in f}
    crit = [e for e in s if e["cat"] == "critical"]
    assert len(crit) == max(len(r.critical.tasks) - 1, 0)


def test_trace_cap_is_checked():
    from flitsim.taskgraph import TaskGraphBuilder, execute

    b = TaskGraphBuilder(1)
    b.add_compute(0, 10)
    run = execute(b.build())
    with pytest.raises(ConfigError, match="max_tasks"):
        trace_events(run, max_tasks=0)


def test_trace_cap_below_one_in_a_scenario_fails_before_simulating(tmp_path):
    from click.testing import CliRunner

    from flitsim.cli import cli

    sc = tmp_path / "s.toml"
    sc.write_text((ROOT / "examples" / "tiny.toml").read_text() + "\n[output]\ntrace_max_tasks = 0\n")
    r = CliRunner().invoke(cli, ["run", str(sc), "--out", str(tmp_path / "o"), "--no-progress"])
    assert r.exit_code == 2 and "trace_max_tasks" in r.output
    assert not (tmp_path / "o").exists()


def test_comm_activity_closed_form():
    # 1 GB/s, no latency: a 1000 B all-reduce on 2 ranks moves busbw = 1000 B -> 1 us; a 3000 B
    # all-gather on 3 ranks moves 2/3 x 3000 B -> 2 us after the 5 us transfer 3 -> 0 frees GPU 3
    from flitsim.networks import AnalyticNetwork
    from flitsim.report.activity import comm_activity
    from flitsim.taskgraph import TaskGraphBuilder, execute

    b = TaskGraphBuilder(4)
    b.add_collective([0, 1], "all_reduce", 1000)
    b.add_collective([1, 2, 3], "all_gather", 3000)
    b.add_transfer(3, 0, 5000)
    r = execute(b.build(), AnalyticNetwork(bandwidth_GBps=1.0, alpha_ps=0))
    tx, rx = comm_activity(r.tasks, r.graph, r.makespan_ps, 1)
    us = 1_000_000
    assert tx.ravel().tolist() == [1 * us, 3 * us, 2 * us, 7 * us]  # GPU 3 sends the transfer too
    assert rx.ravel().tolist() == [6 * us, 3 * us, 2 * us, 2 * us]  # GPU 0 receives it
    tx2, _ = comm_activity(r.tasks, r.graph, r.makespan_ps, 7)  # 1 us bins: conserved
    assert tx2.sum() == tx.sum()


def test_map_section_slots_in_first(tiny_result, tmp_path):
    # the hook the map writer fills: res.map (table(), reference) + figures/map.png
    import copy

    from matplotlib.figure import Figure

    from flitsim.scenario.write import _map_section, html_report

    png = tmp_path / "map.png"
    fig = Figure(figsize=(2, 2))
    fig.add_subplot().imshow([[0, 1], [1, 0]])
    fig.savefig(png)
    res = copy.copy(tiny_result)
    res.map = SimpleNamespace(table=lambda: pd.DataFrame({"workload": ["w"], "fabric": ["f"], "verdict": ["fits"]}),
                              reference=None)
    sec = _map_section(res, {"map_png": str(png)})
    page = html_report(res, {}, map_section=sec)
    p = _Page()
    p.feed(page)
    assert p.order[:2] == ["answer", "map"] and "#map" in p.hrefs
    assert "fig-map" in p.ids and "class='v good'" in page
    assert _map_section(tiny_result, {}) is None  # no map: no section
