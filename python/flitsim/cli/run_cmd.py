"""``flitsim run SCENARIO --out DIR``: simulate a scenario and write its report."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Callable

import click

from flitsim.cli._common import echo_json, friendly_errors, format_option


def print_result(res, fmt: str | None = None) -> None:  # type: ignore[no-untyped-def]
    """Tables of a ScenarioResult (summary, critical path, LLM latencies, DiT
    latencies, scorecard and conclusion) in ``fmt`` (see :mod:`flitsim.cli._table`)."""
    from flitsim.cli._table import Printer, Table

    c = Printer(fmt)
    for n in res.network_notes:
        c.print(f"[dim]{n}[/dim]")
    if res.map is not None:
        print_map(res.map, c)
    if not res.runs:
        return
    t = Table(title=f"{res.scenario.title}: runs")
    for col in ("case", "schedule", "GPUs", "network", "fidelity", "makespan ms", "speedup", "stage CV", "fill/drain",
                "bubble", "FLOP/B", "memory GB"):
        t.add_column(col, justify="right" if col not in ("case", "schedule", "network", "fidelity") else "left")
    for r in res.summary_frame().itertuples():
        t.add_row(r.case, r.schedule, str(r.devices), r.network, r.fidelity, f"{r.makespan_s * 1e3:.2f}",
                  "" if r.speedup != r.speedup else f"{r.speedup:.2f}x", f"{r.stage_time_cv:.3f}",
                  f"{r.fill_drain_share:.0%}", f"{r.bubble_fraction_mean:.0%}", f"{r.flop_per_comm_byte:,.0f}",
                  f"{r.peak_memory_bytes / 1e9:.1f}" + {"ok": "", "oom": f" OOM ({r.memory_broken_by})"}.get(
                      r.memory_status, f" {r.memory_status}"))
    c.print(t)
    t = Table(title="critical path (share of makespan)")
    for col in ("case", "schedule", "compute", "serial.", "switch q.", "link credit", "handoff credit", "stream q.",
                "slowest loop / top wait"):
        t.add_column(col)
    for r in res.runs:
        s = r.critical.breakdown_share()
        w = r.critical.waiting
        top = f"{w.iloc[0]['category']} at {w.iloc[0]['place']}" if len(w) else "-"
        t.add_row(r.case, r.label, f"{s['compute']:.0%}", f"{s['serialization']:.0%}", f"{s['switch queueing']:.0%}",
                  f"{s['link credit wait']:.0%}", f"{s['credit wait']:.0%}", f"{s['stream queueing']:.0%}", f"{r.critical.slowest_loop}; wait: {top}")
    c.print(t)
    for r in res.runs:
        if r.llm_latency is not None:
            t = Table(title=f"LLM latency, {r.case} / {r.label} (ms; tokens/s for rates)")
            for col in ("definition", "metric", "p25", "p50", "p75", "p90", "p95", "p99", "mean", "std"):
                t.add_column(col)
            for (d, m), row in r.llm_latency.iterrows():
                f = 1.0 if "per_s" in m else 1e3
                t.add_row(d, m, *[f"{row[k] * f:.3g}" for k in ("p25", "p50", "p75", "p90", "p95", "p99", "mean", "std")])
            c.print(t)
    dit = [r for r in res.runs if r.dit]
    if dit:
        t = Table(title="DiT latency")
        for col in ("case", "schedule", "per image ms", "per step ms"):
            t.add_column(col)
        for r in dit:
            t.add_row(r.case, r.label, f"{r.dit['latency_per_image_s'] * 1e3:.2f}", f"{r.dit['latency_per_step_s'] * 1e3:.3f}")
        c.print(t)
    t = Table(title="PMF scorecard")
    for col in ("case", "schedule", "group", "figure", "value", "verdict"):
        t.add_column(col, overflow="fold")
    for r in res.scorecards.itertuples():
        # the figure as the scorecard words it ("85.5%", "llama-2 (model: llama-3)"): the raw float
        # printed 16 digits, and "nan" for the text-only facts
        t.add_row(r.case, r.schedule, r.group, r.figure, str(r.text), r.verdict)
    c.print(t)
    c.print("[bold]Where token-level pipelining fits[/bold]")
    for line in res.conclusion:
        c.print(f"- {line}")


def print_map(m, c) -> None:  # type: ignore[no-untyped-def]
    """The PMF map: a table (winner, margin over the best non-pipelined,
    pipelining, verdict, matches, fidelity), one verdict sentence per cell,
    then the published-measurement checks as lines."""
    from rich.markup import escape

    from flitsim.cli._table import Table  # the Printer's table (rich's would print as its repr when piped)

    t = Table(title="PMF map (T/M/S = task / metric / structure match)")
    for col in ("workload", "fabric", "winner", "winner s", "margin", "pipelining", "verdict", "T/M/S", "fidelity"):
        t.add_column(col, overflow="fold")
    yn = {True: "y", False: "n", None: "-"}
    nan = lambda v: v != v  # noqa: E731
    tab = m.table()
    for r in tab.itertuples():
        t.add_row(r.workload, r.fabric, str(r.winner or "-"), "" if nan(r.winner_s) else f"{r.winner_s:.4g}",
                  "" if nan(r.margin_over_nonpipelined) else f"{r.margin_over_nonpipelined:.2f}x",
                  r.pipelining + ("" if nan(r.pipelining_ratio) else f" {r.pipelining_ratio:.2f}x"), r.verdict,
                  "/".join(yn[x] for x in (r.task_match, r.metric_match, r.structure_match)),
                  r.fidelity + (" (!)" if r.decisive_outside_flow_validation else ""))
    c.print(t)
    c.print("[dim](!): a deciding run is outside the flow tier's validation (decisive_outside_flow_validation)[/dim]")
    for r in tab.itertuples():
        c.print(escape(f"- {r.workload} / {r.fabric} ({r.compares}): {r.verdict_text}"))
    ref = m.reference
    if ref is not None and len(ref):
        c.print("[bold]Published measurements vs the map[/bold]")
        for r in ref.itertuples():
            bits = [str(x) for x in (r.workload, r.fabric, r.schedule) if isinstance(x, str)]
            if r.measured_s == r.measured_s and r.measured_s is not None:
                bits.append(f"measured {r.measured_s:.4g} s, simulated {r.simulated_s:.4g} s (x{r.ratio:.2f})")
            if isinstance(r.measured_winner, str) and isinstance(r.simulated_winner, str):
                bits.append(f"measured winner {r.measured_winner}, simulated {r.simulated_winner}")
            if r.agrees is not None and r.agrees == r.agrees:
                bits.append("agrees" if r.agrees else "DISAGREES")
            if isinstance(r.note, str) and r.note:
                bits.append(r.note)
            c.print(escape(f"- {r.claim}: " + "; ".join(bits)))


# Files every report written by `flitsim run` holds at its top level (scenario/write.py).
_REPORT_MARKERS = ("results.json", "summary.parquet")


def check_out_dir(out_dir: str, force: bool, scenario: str | None = None) -> Path:
    """Check the report folder before anything is simulated and create the
    temporary folder the report is written into (beside it, so the final
    rename stays on one file system). Returns the temporary folder.

    Raises:
        ConfigError: an empty path, a file, a non-empty folder without
            ``force`` (its files are the user's), a non-empty folder that
            holds no earlier report even with ``force``, a parent that cannot be
            written; the current folder, one above it, the home folder, or a
            folder holding ``scenario`` (``--force`` would delete them).
    """
    from flitsim.errors import config_error

    if not str(out_dir).strip():
        raise config_error("--out", out_dir, "a folder path (not empty)")
    out = Path(out_dir)
    real = out.resolve()
    cwd = Path.cwd().resolve()
    if real == cwd or real in cwd.parents or real == Path.home().resolve():
        raise config_error("--out", out_dir, "a folder of its own: not the current folder, one above it or the home "
                           "folder (the report replaces the whole folder)")
    if scenario is not None and real in Path(scenario).resolve().parents:
        raise config_error("--out", out_dir, f"a folder that does not hold the scenario file {scenario!r} (the report "
                           "replaces the whole folder)")
    if out.exists() and not out.is_dir():
        raise config_error("--out", out_dir, "a folder (this path is a file)")
    if out.is_dir() and any(out.iterdir()):
        if not force:
            raise config_error("--out", out_dir, "a new or empty folder; this one has files (pass --force to replace "
                               "the whole folder with the new report)")
        if not any((out / f).is_file() for f in _REPORT_MARKERS):
            # --force replaces an earlier report, never a folder of the user's own files
            raise config_error("--out", out_dir, "with --force, a folder holding an earlier flitsim report (it has "
                               f"none of {', '.join(_REPORT_MARKERS)}); pick a new or empty folder")
    parent = out.absolute().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        tmp = parent / f".{out.name}.flitsim-tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        _remove_stale_tmp(parent, out.name)
        tmp.mkdir()
    except OSError as e:
        raise config_error("--out", out_dir, f"a folder that can be created and written ({e.strerror or e})") from None
    return tmp


def _remove_stale_tmp(parent: Path, name: str) -> None:
    """Remove the temporary folders of earlier runs into ``name`` whose process
    is gone (killed with SIGKILL or by the OOM killer: no chance to clean up)."""
    for d in parent.glob(f".{name}.flitsim-tmp-*"):
        pid = d.name.rsplit("-", 1)[-1]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(d, ignore_errors=True)
        except OSError:
            pass  # alive (another user's) or cannot tell: leave it


def write_atomically(out_dir: str, tmp: Path, write: Callable[[Path], dict[str, Any]]) -> dict[str, Any]:
    """Run ``write(tmp)`` and move the finished report to ``out_dir`` (an old
    folder there is replaced as a whole: no stale tables, traces or figures
    beside the new ones). On failure ``tmp`` is removed and ``out_dir`` is
    left as it was. Returns ``write``'s paths, rewritten to ``out_dir``."""
    out = Path(out_dir)
    try:
        paths = write(tmp)
        old = None
        if out.exists():
            old = tmp.with_name(tmp.name.replace("-tmp-", "-old-"))
            os.replace(out, old)
        os.replace(tmp, out)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    t, o = str(tmp), str(out)
    return {k: (o + v[len(t):] if isinstance(v, str) and v.startswith(t) else v) for k, v in paths.items()}


@click.command("run")
@click.argument("scenario", type=click.Path(exists=True, dir_okay=False))
@click.option("--out", "out_dir", default="flitsim-report", show_default=True, help="report folder (new or empty)")
@click.option("--force", is_flag=True, help="replace a non-empty --out folder as a whole")
@click.option("--no-progress", is_flag=True, help="no progress bar")
@click.option("--json", "as_json", is_flag=True, help="print the results as JSON")
@format_option()
@click.option("-j", "--jobs", default=1, show_default=True, type=int,
              help="worker processes over the independent runs (results identical at any N)")
@friendly_errors
def run_cmd(scenario: str, out_dir: str, force: bool, no_progress: bool, as_json: bool, fmt: str | None, jobs: int) -> None:
    """Run a scenario TOML file (examples/main.toml is the main job) and write
    its report (tables, Parquet, Perfetto traces, figures, report.html) to --out.

    --out must be new or empty unless --force; the report is written into a
    temporary folder beside it and renamed into place when complete, so a
    failed run never leaves a half-written or mixed report."""
    from flitsim.cli._table import Printer
    from flitsim.parallel import check_jobs
    from flitsim.scenario import run_scenario, scenario_json

    check_jobs(jobs)
    tmp = check_out_dir(out_dir, force, scenario)  # fail before minutes of simulation, not after
    try:
        res = run_scenario(scenario, progress=not no_progress and not as_json and fmt != "json", jobs=jobs)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    paths = write_atomically(out_dir, tmp, lambda p: res.write(p, jobs=jobs))
    if as_json or fmt == "json":
        echo_json({**scenario_json(res), "files": paths})
        return
    print_result(res, fmt)
    Printer(fmt).print(f"report: {paths['html']}  (wall {res.wall_s:.1f} s)")
