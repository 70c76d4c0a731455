"""Write a :class:`~flitsim.scenario.result.ScenarioResult` to a folder:
Parquet + CSV tables, Perfetto traces, PNG figures and a self-contained HTML
report (figures embedded as base64 PNG, no external resources), and
``results.json`` (:func:`scenario_json`)."""

from __future__ import annotations

import html
import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from flitsim.errors import config_error
from flitsim.report.metrics import llm_request_latencies
from flitsim.report.plots import figure_png_base64, latency_cdf, link_heatmap, stage_time_bars, timeline
from flitsim.report.trace import to_perfetto
from flitsim.scenario.map import map_json, write_map

if TYPE_CHECKING:  # result.py imports this module; the type is only named here
    from flitsim.scenario.result import ScenarioResult

__all__ = ["prepare_out_dir", "write_report", "html_report", "scenario_json"]


def _slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", s).strip("-").lower()[:60]


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


def write_report(res: "ScenarioResult", out_dir: str | os.PathLike[str]) -> dict[str, str]:
    """Write every artifact; returns {name: path}. See the module docstring."""
    out = prepare_out_dir(out_dir)
    paths: dict[str, str] = {}
    summ = res.summary_frame()
    summ.to_parquet(out / "summary.parquet", index=False)
    summ.to_csv(out / "summary.csv", index=False)
    res.scorecards.to_parquet(out / "scorecard.parquet", index=False)
    res.scorecards.to_csv(out / "scorecard.csv", index=False)
    paths.update(summary=str(out / "summary.parquet"), scorecard=str(out / "scorecard.parquet"))
    if res.map is not None:  # the map's tables and heatmap (flitsim.scenario.map.write_map)
        paths.update(write_map(res.map, out, figures=res.scenario.output.figures, title=res.scenario.title))
    cps = []
    for r in res.runs:
        bd = r.critical.breakdown_ps
        cps.append({"case": r.case, "schedule": r.label, **{f"{k.replace(' ', '_')}_s": v * 1e-12 for k, v in bd.items()},
                    "slowest_loop": r.critical.slowest_loop,
                    "top_waiting": (f"{r.critical.waiting.iloc[0]['category']} at {r.critical.waiting.iloc[0]['place']}"
                                    if len(r.critical.waiting) else "")})
    pd.DataFrame(cps).to_parquet(out / "critical_path.parquet", index=False)
    lat = [r.llm_latency.reset_index().assign(case=r.case, schedule=r.label) for r in res.runs if r.llm_latency is not None]
    if lat:
        pd.concat(lat).to_parquet(out / "llm_latency.parquet", index=False)
        paths["llm_latency"] = str(out / "llm_latency.parquet")
    fab = [r.fabric["links"].assign(case=r.case, schedule=r.label) for r in res.runs if r.fabric]
    if fab:
        pd.concat(fab).to_parquet(out / "fabric_links.parquet", index=False)
        pd.concat([r.fabric["switch_ports"].assign(case=r.case, schedule=r.label) for r in res.runs if r.fabric]
                  ).to_parquet(out / "fabric_switch_ports.parquet", index=False)
    figs: list[tuple[str, str]] = []
    o = res.scenario.output
    for r in res.runs:
        slug = f"{_slug(r.case)}__{_slug(r.label)}"
        if o.task_tables:
            (out / "tasks").mkdir(exist_ok=True)
            r.schedule.tasks().to_parquet(out / "tasks" / f"{slug}.parquet", index=False)
        if o.traces:
            (out / "traces").mkdir(exist_ok=True)
            to_perfetto(r.schedule, out / "traces" / f"{slug}.json", title=f"{r.case} / {r.label}")
    if o.figures:
        import matplotlib

        matplotlib.use("Agg", force=False)
        (out / "figures").mkdir(exist_ok=True)

        def save(fig: Any, name: str, caption: str) -> None:
            fig.savefig(out / "figures" / f"{name}.png")
            figs.append((caption, figure_png_base64(fig)))

        by_case: dict[str, list[Any]] = {}
        for r in res.runs:
            by_case.setdefault(r.case, []).append(r)
        for case, rs in by_case.items():
            cs = _slug(case)
            st = {r.label: r.metrics["stage_time_s"] for r in rs if r.stages >= 2}
            if st:
                save(stage_time_bars(st, title=f"{case}: mean pipelined task time per stage"), f"{cs}__stages",
                     f"{case}: stage times")
            for r in rs:
                if r.stages >= 2 or r.name == "decode":
                    save(timeline(r.schedule, title=f"{case} / {r.label}"), f"{cs}__{_slug(r.label)}__timeline",
                         f"{case} / {r.label}: pipeline timeline per device")
            r0 = next((r for r in rs if r.fabric), None)
            if r0 is not None:
                save(link_heatmap(r0.fabric["links"], title=f"{case} / {r0.label}: link utilization (fabric)"),
                     f"{cs}__links", f"{case} / {r0.label}: link utilization")
            else:
                save(link_heatmap(None, rs[0].schedule, title=f"{case} / {rs[0].label}: comm occupancy"),
                     f"{cs}__links", f"{case} / {rs[0].label}: communication occupancy")
            dec = [r for r in rs if r.token_times is not None]
            if dec:
                samples = {}
                for r in dec:
                    df = llm_request_latencies(r.token_times)
                    samples[f"{r.label} TTFT"] = df.ttft_s
                    samples[f"{r.label} E2E"] = df.e2e_latency_s
                save(latency_cdf(samples, title=f"{case}: latency CDFs"), f"{cs}__latency_cdf", f"{case}: latency CDFs")
            pre = [r for r in rs if len(r.per_sequence) > 1]
            if pre:
                samples = {r.label: [m["makespan_s"] for _, m in r.per_sequence] for r in pre}
                save(latency_cdf(samples, xlabel="prefill latency (ms)",
                                 title=f"{case}: prefill latency over representative lengths"),
                     f"{cs}__prefill_cdf", f"{case}: prefill latency CDF")
    map_b64 = None
    if "map_png" in paths:
        import base64

        map_b64 = base64.b64encode(Path(paths["map_png"]).read_bytes()).decode()
    page = html_report(res, figs, map_png_base64=map_b64)
    (out / "report.html").write_text(page)
    paths["html"] = str(out / "report.html")
    with open(out / "results.json", "w") as f:
        json.dump(scenario_json(res), f, indent=1)
    paths["json"] = str(out / "results.json")
    return paths


def _table(df: Any) -> str:
    return df.to_html(index=False, float_format=lambda x: f"{x:.4g}", border=0, classes="t", escape=True)


def html_report(res: "ScenarioResult", figures: list[tuple[str, str]], map_png_base64: str | None = None) -> str:
    """Self-contained HTML page: title, notes, the map (heatmap first, then
    its table and the published checks) when there is one, conclusion,
    summary, scorecards, critical paths, LLM / DiT latencies and the embedded figures."""
    e = html.escape
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{e(res.scenario.title)}</title>",
             "<style>body{font-family:sans-serif;margin:2em;max-width:1200px}table.t{border-collapse:collapse;"
             "font-size:12px}table.t td,table.t th{border-bottom:1px solid #ddd;padding:2px 6px;text-align:left}"
             "img{max-width:100%}</style></head><body>",
             f"<h1>{e(res.scenario.title)}</h1><p>{e(res.scenario.description)}</p>",
             f"<p>wall time {res.wall_s:.1f} s</p><ul>" + "".join(f"<li>{e(n)}</li>" for n in res.network_notes) + "</ul>",
             *(_map_html(res, map_png_base64) if res.map is not None else []),
             "<h2>Conclusion: where token-level pipelining fits</h2><ul>"
             + "".join(f"<li>{e(c)}</li>" for c in res.conclusion) + "</ul>",
             "<h2>Summary</h2>", _table(res.summary_frame().drop(columns=["wall_s"], errors="ignore")),
             "<h2>Scorecards</h2>", _table(res.scorecards)]
    cp = pd.DataFrame([{"case": r.case, "schedule": r.label,
                        **{k: f"{v:.0%}" for k, v in r.critical.breakdown_share().items()},
                        "slowest loop": r.critical.slowest_loop} for r in res.runs])
    parts += ["<h2>Critical paths (share of makespan)</h2>", _table(cp)]
    for r in res.runs:
        if r.llm_latency is not None:
            parts += [f"<h2>LLM latency: {e(r.case)} / {e(r.label)}</h2>",
                      _table(r.llm_latency.reset_index())]
    dit = [{"case": r.case, "schedule": r.label, **r.dit} for r in res.runs if r.dit]
    if dit:
        parts += ["<h2>DiT latency</h2>", _table(pd.DataFrame(dit))]
    parts.append("<h2>Figures</h2>")
    for cap, b64 in figures:
        parts.append(f"<figure><img alt='{e(cap)}' src='data:image/png;base64,{b64}'><figcaption>{e(cap)}"
                     "</figcaption></figure>")
    parts.append("</body></html>")
    return "\n".join(parts)


def _map_html(res: "ScenarioResult", png_base64: str | None) -> list[str]:
    """The map first: heatmap (figures/map.png), the cell table and the published checks."""
    parts = ["<h2>PMF map: where token-level pipelining fits</h2>"]
    if png_base64:
        parts.append(f"<img alt='PMF map' src='data:image/png;base64,{png_base64}'>")
    cols = ["workload", "fabric", "compares", "winner", "winner_s", "margin_over_nonpipelined", "best_pipelined",
            "pipelining", "pipelining_ratio", "verdict", "verdict_text", "task_match", "metric_match",
            "structure_match", "fidelity", "decisive_outside_flow_validation", "oom", "infeasible"]
    parts += [_table(res.map.table()[cols])]
    if res.map.reference is not None and len(res.map.reference):
        parts += ["<h3>Published measurements vs the map</h3>", _table(res.map.reference)]
    return parts


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
           "dit_latency": {f"{r.case} / {r.label}": r.dit for r in res.runs if r.dit},
           **({"map": map_json(res.map)} if res.map is not None else {})}
    return clean(json.loads(json.dumps(out, default=lambda o: o.item() if isinstance(o, np.generic) else str(o))))
