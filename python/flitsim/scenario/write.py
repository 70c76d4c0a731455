"""Write a :class:`~flitsim.scenario.result.ScenarioResult` to a folder:
Parquet + CSV tables, gzip Perfetto traces, PNG figures and a self-contained
HTML report (figures embedded as base64 PNG, no external resources; layout in
:mod:`flitsim.report.html`), and ``results.json`` (:func:`scenario_json`)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from flitsim.errors import config_error
from flitsim.scenario.spec import file_slug
from flitsim.parallel import map_ordered
from flitsim.report.metrics import llm_request_latencies
from flitsim.report.plots import (latency_cdf, link_heatmap, relative_bars, stage_time_bars,
                                  timeline, timeline_colour, utilization_bars)
from flitsim.report.trace import to_perfetto

if TYPE_CHECKING:  # result.py imports this module; the type is only named here
    from flitsim.scenario.result import ScenarioResult

__all__ = ["prepare_out_dir", "write_report", "html_report", "scenario_json"]


_slug = file_slug  # one home: scenario.spec (the loader refuses two names with one slug)


def prepare_out_dir(out_dir: str | os.PathLike[str]) -> Path:
    """Create (if needed) and check the report folder before any simulation runs.

    Raises:
        ConfigError: an empty path, a path that is a file or lies under one,
            or a folder that cannot be created or written.
    """
    if not str(out_dir).strip():
        raise config_error("out", str(out_dir), "a folder path (not empty)")
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".flitsim-write-test"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        raise config_error("out", str(out_dir), f"a folder that can be created and written ({e.strerror or e})") from None
    return out


PORT_SPREAD = 0.25
"""A per-port map is drawn when a run's busiest used port is this much (share of
its utilization) busier than its idlest: a real imbalance (a hot port, a dead
plane), not the last packet's remainder."""


def _figures_wanted(r: Any) -> dict[str, bool]:
    """Which per-run figures carry information: a timeline for pipelines and
    decode (a non-pipelined run's GPUs all do the same thing); a port map
    only for a fabric run whose used ports differ (evenly sprayed ports are one
    number, shown in the case's utilization bars); an occupancy-over-time
    plot for a communicating run on the analytic network (no port statistics)."""
    comm = float(r.metrics.get("comm_bytes", 0.0) or 0.0) > 0
    ports = False
    if comm and r.fabric:
        lk = r.fabric["links"]
        used = lk[lk.utilization > 0].utilization
        ports = bool(len(used)) and float(used.max() - used.min()) > PORT_SPREAD * float(used.max())
    return {"timeline": r.stages >= 2 or r.name == "decode", "ports": ports,
            "occupancy": comm and not r.fabric}


_RUN_FILES_CTX: Any = None
"""What forked workers of :func:`write_report` read: (result, out folder) for the
per-run files, (result, out folder, [(case, runs)]) for the per-case figures."""


def _start_methods() -> list[str]:
    import multiprocessing as mp

    return mp.get_all_start_methods()


def _run_files(i: int) -> list[dict[str, str]]:
    """Task table and Perfetto trace of run ``i`` of the result being written
    (one independent job per run: ``-j N`` writes them on N processes, the
    same bytes at any count); returns its file entries."""
    res, out = _RUN_FILES_CTX
    o = res.scenario.output
    r = res.runs[i]
    slug = f"{_slug(r.case)}__{_slug(r.label)}"
    lst: list[dict[str, str]] = []
    if o.task_tables:
        r.schedule.tasks().to_parquet(out / "tasks" / f"{slug}.parquet", index=False)
        lst.append({"name": f"{r.label}: task table", "href": f"tasks/{slug}.parquet",
                    "note": "one row per task (Parquet)"})
    if o.traces:
        tp = to_perfetto(r.schedule, out / "traces" / f"{slug}.json.gz", title=f"{r.case} / {r.label}",
                         critical=r.critical, max_tasks=o.trace_max_tasks)
        lst.append({"name": f"{r.label}: Perfetto trace", "href": f"traces/{Path(tp).name}",
                    "note": "open at ui.perfetto.dev (gzip JSON)"})
    return lst


def _case_figures(k: int) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """Figures of case ``k`` of the result being written: (its figures, its
    relative-speed bars). One independent job per case (``-j N``: N processes)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    res, out, cases = _RUN_FILES_CTX
    case, irs = cases[k]
    lst: list[dict[str, str]] = []
    relative: list[dict[str, str]] = []

    def save(fig: Any, name: str, caption: str) -> dict[str, str]:
        import base64
        import io

        buf = io.BytesIO()
        fig.savefig(buf, format="png")  # drawn once: the file and the embedded copy are the same bytes
        (out / "figures" / f"{name}.png").write_bytes(buf.getvalue())
        return {"id": f"fig-{name}", "caption": caption, "b64": base64.b64encode(buf.getvalue()).decode("ascii"),
                "file": f"figures/{name}.png"}

    rs = [r for _, r in irs]
    cs = _slug(case)
    prefill = [r for r in rs if r.name != "decode"]
    if len(prefill) >= 2:
        relative.append(save(relative_bars({r.label: r.metrics["makespan_s"] for r in prefill},
                                           title=f"{case}: time relative to the fastest schedule"),
                             f"{cs}__relative", f"{case}: each schedule's time over the fastest one's"))
    st = {r.label: r.metrics["stage_time_s"] for r in rs
          if r.stages >= 2 and len(r.metrics["stage_time_s"]) and max(r.metrics["stage_time_s"]) > 0}
    if st:
        lst.append(save(stage_time_bars(st, title=f"{case}: mean pipelined task time per stage"),
                        f"{cs}__stages", f"{case}: stage times"))
    for r in rs:
        want = _figures_wanted(r)
        ls = _slug(r.label)
        if want["timeline"]:
            by = timeline_colour(r.schedule)
            lst.append(save(timeline(r.schedule, title=f"{case} / {r.label}: compute by {by}", max_tasks=8000),
                            f"{cs}__{ls}__timeline", f"{case} / {r.label}: timeline per GPU, compute coloured by {by}"))
        if want["ports"]:
            lst.append(save(link_heatmap(r.fabric["links"], title=f"{case} / {r.label}: link utilization (fabric)"),
                            f"{cs}__{ls}__links",
                            f"{case} / {r.label}: link utilization per GPU port (busy / makespan, autoscaled)"))
        if want["occupancy"]:
            lst.append(save(link_heatmap(None, r.schedule, title=f"{case} / {r.label}: comm occupancy"),
                            f"{cs}__{ls}__occupancy",
                            f"{case} / {r.label}: communication-stream occupancy over time (autoscaled)"))
    util = {r.label: (r.fabric["link_utilization_mean_used"], r.fabric["link_utilization_max"]) for r in rs
            if r.fabric and r.fabric.get("link_utilization_max", 0.0) > 0}
    if util:
        lst.insert(0, save(utilization_bars(util, title=f"{case}: measured link utilization (runs that communicate)"),
                           f"{cs}__utilization", f"{case}: link utilization per schedule, mean of the used GPU "
                           "ports and the busiest one (busy / makespan, measured by the fabric, autoscaled)"))
    dec = [r for r in rs if r.token_times is not None]
    if dec:
        samples = {}
        for r in dec:
            df = llm_request_latencies(r.token_times)
            samples[f"{r.label} TTFT"] = df.ttft_s
            samples[f"{r.label} E2E"] = df.e2e_latency_s
        if max(len(v) for v in samples.values()) >= MIN_CDF_POINTS:
            lst.append(save(latency_cdf(samples, title=f"{case}: latency CDFs"), f"{cs}__latency_cdf",
                            f"{case}: TTFT and end-to-end latency CDFs over requests"))
    pre = [r for r in rs if len(r.per_sequence) >= MIN_CDF_POINTS]
    if pre:
        samples = {r.label: [m["makespan_s"] for _, m in r.per_sequence] for r in pre}
        lst.append(save(latency_cdf(samples, xlabel="prefill latency (ms)",
                                    title=f"{case}: prefill latency over representative lengths"),
                        f"{cs}__prefill_cdf", f"{case}: prefill latency CDF"))
    return lst, relative


def write_report(res: "ScenarioResult", out_dir: str | os.PathLike[str], *, jobs: int = 1) -> dict[str, str]:
    """Write every artifact; returns {name: path}. See the module docstring.
    ``jobs``: worker processes for the per-run task tables and traces (forked,
    so where the platform has no fork they are written in this process).

    Files: ``summary``, ``scorecard``, ``critical_path`` (Parquet + CSV),
    ``llm_latency``, ``fabric_links`` / ``fabric_switch_ports`` (Parquet),
    ``tasks/<case>__<schedule>.parquet`` (:meth:`Schedule.tasks`),
    ``traces/<case>__<schedule>.json.gz`` (Perfetto, gzip),
    ``figures/*.png``, ``report.html``, ``results.json``."""
    global _RUN_FILES_CTX
    out = prepare_out_dir(out_dir)
    paths: dict[str, str] = {}
    summ = res.summary_frame()
    summ.to_parquet(out / "summary.parquet", index=False)
    summ.to_csv(out / "summary.csv", index=False)
    res.scorecards.to_parquet(out / "scorecard.parquet", index=False)
    res.scorecards.to_csv(out / "scorecard.csv", index=False)
    paths.update(summary=str(out / "summary.parquet"), scorecard=str(out / "scorecard.parquet"))
    if getattr(res, "map", None) is not None:  # the map's tables and heatmap (flitsim.scenario.map.write_map)
        write_map = _map_module().write_map
        (out / "figures").mkdir(exist_ok=True)
        paths.update(write_map(res.map, out, figures=res.scenario.output.figures, title=res.scenario.title))
    files: list[dict[str, str]] = [
        {"name": "summary.csv", "href": "summary.csv", "note": "one row per (case, schedule); also .parquet"},
        {"name": "scorecard.csv", "href": "scorecard.csv", "note": "every scorecard figure; also .parquet"},
        {"name": "critical_path.csv", "href": "critical_path.csv", "note": "time on the critical path by category"},
        {"name": "results.json", "href": "results.json", "note": "summary, scorecards, conclusion as JSON"}]
    cps = []
    for r in res.runs:
        bd = r.critical.breakdown_ps
        cps.append({"case": r.case, "schedule": r.label, **{f"{k.replace(' ', '_')}_s": v * 1e-12 for k, v in bd.items()},
                    "slowest_loop": r.critical.slowest_loop,
                    "top_waiting": (f"{r.critical.waiting.iloc[0]['category']} at {r.critical.waiting.iloc[0]['place']}"
                                    if len(r.critical.waiting) else "")})
    pd.DataFrame(cps).to_parquet(out / "critical_path.parquet", index=False)
    pd.DataFrame(cps).to_csv(out / "critical_path.csv", index=False)
    lat = [r.llm_latency.reset_index().assign(case=r.case, schedule=r.label) for r in res.runs if r.llm_latency is not None]
    if lat:
        pd.concat(lat).to_parquet(out / "llm_latency.parquet", index=False)
        paths["llm_latency"] = str(out / "llm_latency.parquet")
        files.append({"name": "llm_latency.parquet", "href": "llm_latency.parquet", "note": "LLMPerf and vLLM definitions"})
    fab = [r.fabric["links"].assign(case=r.case, schedule=r.label) for r in res.runs if r.fabric]
    if fab:
        pd.concat(fab).to_parquet(out / "fabric_links.parquet", index=False)
        pd.concat([r.fabric["switch_ports"].assign(case=r.case, schedule=r.label) for r in res.runs if r.fabric]
                  ).to_parquet(out / "fabric_switch_ports.parquet", index=False)
        files += [{"name": "fabric_links.parquet", "href": "fabric_links.parquet", "note": "per GPU port, fabric runs"},
                  {"name": "fabric_switch_ports.parquet", "href": "fabric_switch_ports.parquet",
                   "note": "per switch port, fabric runs"}]
    o = res.scenario.output
    if o.task_tables:
        (out / "tasks").mkdir(exist_ok=True)
    if o.traces:
        (out / "traces").mkdir(exist_ok=True)
    _RUN_FILES_CTX = (res, out)  # read by forked workers: only run indices are sent
    try:
        done = map_ordered(_run_files, [(i,) for i in range(len(res.runs))],
                           jobs if "fork" in _start_methods() else 1)
    finally:
        _RUN_FILES_CTX = None
    run_files: dict[int, list[dict[str, str]]] = dict(enumerate(done))
    case_figs: dict[str, list[dict[str, str]]] = {}
    relative: list[dict[str, str]] = []
    by_case: dict[str, list[tuple[int, Any]]] = {}
    for i, r in enumerate(res.runs):
        by_case.setdefault(r.case, []).append((i, r))
    if o.figures:
        import matplotlib

        matplotlib.use("Agg", force=False)
        (out / "figures").mkdir(exist_ok=True)

        cases = list(by_case.items())
        _RUN_FILES_CTX = (res, out, cases)
        try:
            figs = map_ordered(_case_figures, [(k,) for k in range(len(cases))],
                               jobs if "fork" in _start_methods() else 1)
        finally:
            _RUN_FILES_CTX = None
        for (case, _), (lst, rel) in zip(cases, figs):
            case_figs[case] = lst
            relative.extend(rel)
    map_section = _map_section(res, paths)
    page = html_report(res, case_figs, relative=relative, files=files, run_files=run_files, map_section=map_section)
    (out / "report.html").write_text(page, encoding="utf-8")
    paths["html"] = str(out / "report.html")
    with open(out / "results.json", "w") as f:
        json.dump(scenario_json(res), f, indent=1)
    paths["json"] = str(out / "results.json")
    return paths


MIN_CDF_POINTS = 5
"""A CDF needs at least this many samples to say more than a table row (3
representative lengths are a table, not a distribution)."""


def _map_module() -> Any:
    """flitsim.scenario.map (the PMF map's writer), imported only when a result
    has a map: by name, because a build without the map feature lacks the module."""
    import importlib

    return importlib.import_module("flitsim.scenario.map")


def _map_section(res: "ScenarioResult", paths: dict[str, str]) -> dict[str, Any] | None:
    """The map section: the heatmap the map writer saved (``paths["map_png"]``,
    :func:`flitsim.scenario.map.write_map`), the cell table and the published
    checks, when the result has a map (``res.map``); else None."""
    m = getattr(res, "map", None)
    if m is None:
        return None
    import base64

    from flitsim.report.html import table_html

    figs = []
    if "map_png" in paths:
        figs.append({"id": "fig-map", "caption": "the PMF map: one cell per (workload, fabric)",
                     "b64": base64.b64encode(Path(paths["map_png"]).read_bytes()).decode("ascii"),
                     "file": "figures/map.png"})
    t = m.table()
    html = table_html(t, verdict_col="verdict")
    ref = getattr(m, "reference", None)
    if ref is not None and len(ref):
        html += "<h3>Published measurements vs the map</h3>" + table_html(ref, verdict_col=None)
    return {"figures": figs, "html": html}


def _run_headline(r: Any, best_s: float) -> str:
    mk = r.metrics["makespan_s"]
    return f"{r.label}: {mk * 1e3:.3g} ms ({mk / best_s:.2f}x)" if best_s > 0 else f"{r.label}: {mk * 1e3:.3g} ms"


def _scorecard_pivot(cards: Any) -> Any:
    """One row per figure, one column per schedule ('value [verdict]'), the
    meaning once: the per-case scorecard without repeated text. Uses a ``text``
    column when the scorecard has one (else ``value``, with ``unit`` when numeric)
    and shows ``threshold`` when present."""
    if cards is None or not len(cards):
        return cards
    rows = []
    for (grp, fig), g in cards.groupby(["group", "figure"], sort=False):
        row = {"group": grp, "figure": fig}
        for r in g.to_dict(orient="records"):
            # text first (the value with its context); a numeric value with its unit otherwise
            txt = r.get("text") if isinstance(r.get("text"), str) and r.get("text") else r.get("value")
            if isinstance(txt, float) and r.get("unit"):
                txt = f"{txt:.4g} {r['unit']}"
            row[str(r["schedule"])] = f"{txt} [{r['verdict']}]"
        row["meaning"] = g["meaning"].iloc[0]
        if "threshold" in g.columns:
            row["threshold"] = g["threshold"].iloc[0]
        rows.append(row)
    return pd.DataFrame(rows)


def _verdict_cells_html(df: Any) -> str:
    """Like table_html, colouring each '... [verdict]' cell by its verdict."""
    import html as _h

    from flitsim.report.html import verdict_class

    if df is None or not len(df):
        return "<p class='muted'>(none)</p>"
    cols = list(df.columns)
    out = ["<div class='scroll'><table class='t'><thead><tr>", *[f"<th>{_h.escape(str(c))}</th>" for c in cols],
           "</tr></thead><tbody>"]
    for row in df.itertuples(index=False):
        out.append("<tr>")
        for v in row:
            txt = "" if v is None or (isinstance(v, float) and not np.isfinite(v)) else str(v)
            m = re.search(r"\[([^\]]+)\]$", txt)
            cls = f" class='v {verdict_class(m.group(1))}'" if m else ""
            if m and m.start() == 0:
                txt = m.group(1)  # a verdict alone: no brackets
            out.append(f"<td{cls}>{_h.escape(txt)}</td>")
        out.append("</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def _overview(res: "ScenarioResult") -> str:
    """Verdicts at a glance: (case, schedule) x scorecard figure, coloured."""
    c = res.scorecards
    if c is None or not len(c) or "case" not in c.columns:
        return ""
    piv = c.assign(cell=c["verdict"].astype(str).map(lambda v: f"[{v}]")).pivot_table(
        index=["case", "schedule"], columns="figure", values="cell", aggfunc="first", sort=False)
    piv = piv.reset_index()
    keep = [k for k in piv.columns if k in ("case", "schedule") or
            not piv[k].fillna("[n/a]").isin(["[n/a]", "[stated]"]).all()]
    return _verdict_cells_html(piv[keep].fillna(""))


def _provenance(res: "ScenarioResult") -> dict[str, Any]:
    import datetime
    import platform
    import subprocess
    import sys

    from flitsim._core import __version__

    git = ""
    try:
        here = Path(__file__).resolve().parent
        git = subprocess.run(["git", "-C", str(here), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                             text=True, timeout=5).stdout.strip()
        if git:
            dirty = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
                                   capture_output=True, text=True, timeout=5).stdout.strip()
            git += " (uncommitted changes)" if dirty else ""
    except (OSError, subprocess.SubprocessError):
        git = ""
    facts = {"flitsim version": __version__, "git commit": git or "unknown (not a git checkout)",
             "python": sys.version.split()[0], "machine": f"{platform.node()} ({platform.platform()}, "
                                                          f"{os.cpu_count()} CPUs, {platform.machine()})",
             "total wall time": f"{res.wall_s:.1f} s", "runs": str(len(res.runs))}
    runs = pd.DataFrame([{"case": r.case, "schedule": r.label, "network": r.network, "fidelity": r.fidelity,
                          "why": r.fidelity_reason, "sequences": len(r.per_sequence), "wall_s": r.wall_s}
                         for r in res.runs])
    from flitsim.report.html import table_html

    text = getattr(res.scenario, "source_text", "") or json.dumps(
        res.scenario.model_dump(exclude={"source_text"}), indent=1, default=str)
    return {"version": __version__, "git": git, "wall_s": f"{res.wall_s:.1f}",
            "generated": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "facts": facts, "runs_html": table_html(runs, verdict_col=None), "scenario_text": text}


def html_report(res: "ScenarioResult", figures: Any = None, *, relative: list[dict[str, str]] | None = None,
                files: list[dict[str, str]] | None = None, run_files: dict[int, list[dict[str, str]]] | None = None,
                map_section: dict[str, Any] | None = None) -> str:
    """Self-contained HTML page (:func:`flitsim.report.html.render_report`):
    the answer first, then per-case sections. ``figures``: {case: [figure
    dicts]} (``id``, ``caption``, ``b64``, ``file``); a list of (caption,
    base64) pairs is accepted too and shown with the first case."""
    from flitsim.report.html import render_report, table_html

    if isinstance(figures, list):
        first = res.runs[0].case if res.runs else ""
        figures = {first: [{"id": f"fig-{i}", "caption": c, "b64": b, "file": "#"} for i, (c, b) in enumerate(figures)]}
    figures = figures or {}
    run_files = run_files or {}
    by_case: dict[str, list[tuple[int, Any]]] = {}
    for i, r in enumerate(res.runs):
        by_case.setdefault(r.case, []).append((i, r))
    summ = res.summary_frame()
    cols = [c for c in ("case", "schedule", "devices", "stages", "network", "fidelity", "makespan_s", "speedup",
                        "efficiency", "stage_time_cv", "fill_drain_share", "bubble_fraction_mean",
                        "flop_per_comm_byte", "memory_status", "peak_memory_bytes") if c in summ.columns]
    answer = []
    from flitsim.report.scorecard import FIT_MARGIN, TOKEN_PIPELINES, map_verdict, match_results

    for line, (case, irs) in zip(res.conclusion, [(c, v) for c, v in by_case.items()
                                                  if any(r.name != "decode" for _, r in v)]):
        timed = [r for _, r in irs if r.name != "decode"]
        ok = [r for r in timed if r.memory.get("memory_status") != "oom"] or timed
        best = min(ok, key=lambda r: r.metrics["makespan_s"])
        verdicts = []
        for _, r in irs:
            if r.name in TOKEN_PIPELINES:  # the same rule as the conclusion line (scenario.result.conclusion)
                card = res.scorecards[(res.scorecards["case"] == case) & (res.scorecards["schedule"] == r.label)]
                oom = r.memory.get("memory_status") == "oom"
                v, _ = map_verdict(matches=None if oom else match_results(card),
                                   pipe_s=None if oom else r.metrics["makespan_s"], pipe_label=r.label,
                                   fastest_s=best.metrics["makespan_s"], fastest_label=best.label, margin=FIT_MARGIN,
                                   pipe_oom=f"{r.label} ({r.memory.get('memory_broken_by')})" if oom else None)
                verdicts.append({"label": r.label, "verdict": v})
        answer.append({"text": line, "verdicts": verdicts})
    cases = []
    for case, irs in by_case.items():
        rs = [r for _, r in irs]
        timed = [r for r in rs if r.name != "decode"] or rs
        best = min(r.metrics["makespan_s"] for r in timed)
        cards = res.scorecards[res.scorecards["case"] == case] if "case" in res.scorecards.columns else res.scorecards
        cp = pd.DataFrame([{"schedule": r.label, **{k: f"{v:.0%}" for k, v in r.critical.breakdown_share().items()},
                            "slowest loop": r.critical.slowest_loop} for r in rs])
        tables = [{"title": "Runs", "html": table_html(summ[summ["case"] == case][cols].drop(columns=["case"]),
                                                       verdict_col="memory_status")}]
        for r in rs:
            if r.llm_latency is not None:
                tables.append({"title": f"LLM latency: {r.label} (s; tokens/s for rates)",
                               "html": table_html(r.llm_latency.reset_index(), verdict_col=None)})
        dit = [{"schedule": r.label, **r.dit} for r in rs if r.dit]
        if dit:
            tables.append({"title": "DiT latency", "html": table_html(pd.DataFrame(dit), verdict_col=None)})
        links = [f for i, _ in irs for f in run_files.get(i, [])]
        cases.append({"id": f"case-{_slug(case)}", "name": case,
                      "headline": "; ".join(_run_headline(r, best) for r in timed[:6]),
                      "scorecard_html": _verdict_cells_html(_scorecard_pivot(cards)),
                      "critical_html": table_html(cp, verdict_col=None), "tables": tables,
                      "figures": figures.get(case, []), "files": links})
    return render_report({
        "title": res.scenario.title, "description": res.scenario.description, "answer": answer,
        "notes": list(res.network_notes), "map": map_section, "overview": _overview(res), "relative": relative or [],
        "summary_html": table_html(summ[cols], verdict_col="memory_status"), "cases": cases, "files": files or [],
        "provenance": _provenance(res)})


def scenario_json(res: "ScenarioResult") -> dict[str, Any]:
    """JSON-safe dict of a result (summary rows, scorecards, conclusion)."""
    def clean(o: Any) -> Any:
        if isinstance(o, float) and not np.isfinite(o):
            return None
        if isinstance(o, dict):
            return {str(k): clean(v) for k, v in o.items()}
        if isinstance(o, (list, tuple)):
            return [clean(v) for v in o]
        if isinstance(o, np.generic):
            return clean(o.item())
        return o

    out = {"title": res.scenario.title, "wall_s": res.wall_s, "notes": res.network_notes,
           "summary": res.summary_frame().to_dict(orient="records"),
           "scorecard": res.scorecards.to_dict(orient="records"), "conclusion": res.conclusion,
           "critical_path": {f"{r.case} / {r.label}": r.critical.summary() for r in res.runs},
           "llm_latency": {f"{r.case} / {r.label}": r.llm_latency.reset_index().to_dict(orient="records")
                           for r in res.runs if r.llm_latency is not None},
           "dit_latency": {f"{r.case} / {r.label}": r.dit for r in res.runs if r.dit}}
    if getattr(res, "map", None) is not None:
        out["map"] = _map_module().map_json(res.map)
    return clean(json.loads(json.dumps(out, default=lambda o: o.item() if isinstance(o, np.generic) else str(o))))
