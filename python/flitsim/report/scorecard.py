"""The PMF scorecard and the map's verdicts.

**PMF** (problem-method fit): whether a method (a parallel schedule) fits a
problem (a workload on a fabric). It is judged by three matches, each a few
measured figures against stated limits (:data:`THRESHOLDS`, judgement calls
printed next to every verdict so readers can disagree with them):

- **task match** — does the task's dependency structure let work overlap?
  *dependency density* = edges per task of the lowered task graph (how many
  tasks each task waits on; a pipeline's slice waits on its predecessor in
  the stage and the previous stage, 2).
- **metric match** — does the arithmetic buy the communication?
  *FLOP per communicated byte* (total FLOPs / bytes sent, nccl-tests bus bytes
  for collectives) against the GPU's break-even (peak FLOP/s over the
  fabric's per-GPU payload B/s: above it a transfer can hide under compute),
  and *compute per stage vs communication latency* (mean pipelined compute
  task / mean transfer-or-collective task time).
- **structure match** — does the pipeline stay full? *stage-time CV*
  (std / mean of the pipeline's beats), *fill/drain share* (makespan share
  with the pipeline not full), *credit exhaustion* (share of time a link had
  no credit, and task-graph hand-off credit waits).

A match passes when every figure of it is on the right side of its limit
(``threshold``, the "fair" limit). The scorecard also carries facts that are
stated, not judged: speedup over one GPU (what it compares: latency of one
request at the same sizes), which tokens / tokenizer / length distribution the
times are counted in (LLMs) or image tokens and steps (DiT).

Map verdicts (:func:`map_verdict`), for the fastest feasible token-level
pipeline of a cell (TeraPipe for LLM prefill, PipeFusion for DiTs):

- ``fits``: all three matches pass AND within ``margin`` of the fastest
  feasible schedule of the cell;
- ``fits structurally, loses``: all three pass, but the fastest schedule X is
  more than ``margin`` faster ("fits structurally but loses to X by Y");
- ``no structural match``: within the margin but a match fails;
- ``does not fit``: a match fails and it is more than ``margin`` slower;
- ``oom``: every feasible pipeline needs more memory than the GPU has;
- ``infeasible``: no pipeline can be built on this cell (e.g. more stages than blocks).

And, separately, pipelining vs the best non-pipelined schedule
(:func:`pipelining_outcome`): ``wins`` / ``ties`` / ``loses`` with the
latency ratio; within ``tie`` (default 2 %, the flow tier's validated
accuracy) it is a tie.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["THRESHOLDS", "MATCHES", "scorecard", "TOKEN_PIPELINES", "match_results",
           "map_verdict", "pipelining_outcome", "VERDICTS"]

THRESHOLDS = {
    "efficiency": (0.6, 0.3), "stage_time_cv": (0.05, 0.15), "fill_drain_share": (0.10, 0.30),
    "bubble_fraction": (0.10, 0.30), "credit_exhaustion_share": (0.01, 0.10), "compute_to_comm": (10.0, 1.0),
    "flop_per_byte_vs_breakeven": (10.0, 1.0), "dependency_density": (2.0, 4.0),
}
"""(good, fair) limits per figure; lower is better except efficiency, compute_to_comm and FLOP/byte.
A PMF match passes on the fair limit."""

MATCHES = {
    "task": ("dependency_density",),
    "metric": ("flop_per_byte_vs_breakeven", "compute_to_comm"),
    "structure": ("stage_time_cv", "fill_drain_share", "credit_exhaustion_share"),
}
"""The figures (keys of :data:`THRESHOLDS`) each PMF match is judged on."""

_HIGHER_BETTER = {"efficiency", "compute_to_comm", "flop_per_byte_vs_breakeven"}

TOKEN_PIPELINES = ("terapipe", "pipefusion")
"""Token-level (slice / patch) pipeline schedules."""

VERDICTS = ("fits", "fits structurally, loses", "no structural match", "does not fit", "oom", "infeasible",
            "failed", "no feasible schedule")
"""Every map verdict, in the order the heatmap legend lists them."""


def _word(v: float, key: str, words: tuple[str, str, str]) -> str:
    g, f = THRESHOLDS[key]
    if key in _HIGHER_BETTER:
        return words[0] if v >= g else words[1] if v >= f else words[2]
    return words[0] if v <= g else words[1] if v <= f else words[2]


def _passes(v: float, key: str) -> bool:
    f = THRESHOLDS[key][1]
    return bool(v >= f) if key in _HIGHER_BETTER else bool(v <= f)


def scorecard(*, schedule: str, devices: int, metrics: dict[str, Any], single_gpu_s: float | None,
              workload: dict[str, Any], breakeven_flop_per_byte: float | None = None,
              fabric: dict[str, Any] | None = None, stages: int = 1) -> "pd.DataFrame":
    """The scorecard of one (workload, schedule, fabric) triple.

    Args:
        schedule: schedule label; devices: GPUs it uses; stages: pipeline stages.
        metrics: :func:`~flitsim.report.metrics.schedule_metrics` (aggregated
            over representative sequences when a distribution was run).
        single_gpu_s: the one-GPU time at the same sizes, s (None: skipped).
        workload: facts for the metric match: ``kind`` (``llm`` / ``dit``),
            ``tokens`` (which tokens), ``tokenizer``, ``served_tokenizer``,
            ``distribution`` (one line).
        breakeven_flop_per_byte: peak FLOP/s over per-GPU payload B/s.
        fabric: :func:`~flitsim.report.metrics.fabric_metrics` headline
            figures, when the run used the cycle-level fabric.

    Returns:
        DataFrame, one row per figure: ``schedule``, ``group`` (task / metric
        / structure), ``figure``, ``key`` (the :data:`THRESHOLDS` key, "" for
        stated facts), ``value`` (float, NaN for text-only facts), ``unit``,
        ``threshold`` (the fair limit the match passes on, NaN when not
        judged), ``threshold_good``, ``better`` (``higher`` / ``lower`` / ""),
        ``passes`` (bool, or None when not judged), ``in_match`` (counts for
        its group's PMF match), ``text``, ``meaning``, ``verdict``.
    """
    import pandas as pd

    rows: list[dict[str, Any]] = []
    nan = float("nan")

    def add(group: str, figure: str, key: str, value: float, unit: str, text: str, meaning: str, verdict: str,
            in_match: bool = False) -> None:
        judged = bool(key) and not np.isnan(value)
        g, f = THRESHOLDS[key] if key else (nan, nan)
        rows.append({"group": group, "figure": figure, "key": key, "value": float(value), "unit": unit,
                     "threshold": f if key else nan, "threshold_good": g if key else nan,
                     "better": ("higher" if key in _HIGHER_BETTER else "lower") if key else "",
                     "passes": _passes(value, key) if judged else None, "in_match": bool(in_match and judged),
                     "text": text, "meaning": meaning, "verdict": verdict})

    mk = metrics["makespan_s"]
    dd = metrics["dependency_density"]
    add("task", "dependency density", "dependency_density", dd, "edges/task",
        f"{dd:.2f} edges/task ({metrics['cross_device_edge_share']:.0%} cross-device)",
        "how many tasks each task waits on", _word(dd, "dependency_density", ("loose", "moderate", "dense")), True)
    if single_gpu_s:
        sp = single_gpu_s / mk if mk else nan
        eff = sp / devices
        add("task", "parallel efficiency", "efficiency", eff, "speedup/GPU",
            f"{sp:.2f}x latency speedup on {devices} GPUs ({eff:.0%} efficiency)",
            "1-GPU latency / this schedule's latency of the same request, real sizes, same roofline",
            _word(eff, "efficiency", ("holds", "partly", "fails")))
    if workload.get("kind") == "llm":
        tok = workload.get("tokenizer", "?")
        served = workload.get("served_tokenizer", "?")
        same = tok in (served, "serving-model")
        add("metric", "tokens", "", nan, "", str(workload.get("tokens", "prefill input tokens")),
            "which tokens the times are per", "stated")
        add("metric", "tokenizer", "", nan, "", f"{tok} (model: {served})",
            "who counted the tokens; Llama-2 counts ~20% more than Llama-3 for the same text",
            "comparable" if same else "convert")
        add("metric", "length distribution", "", nan, "", str(workload.get("distribution", "?")),
            "the input lengths the schedule was run at", "stated")
    else:
        add("metric", "image tokens / steps", "", nan, "", str(workload.get("tokens", "?")),
            "tokens per denoising step (image + text) and steps", "exact")
    fpb = metrics["flop_per_comm_byte"]
    if breakeven_flop_per_byte:
        r = fpb / breakeven_flop_per_byte
        txt = ("inf (no communication)" if not np.isfinite(fpb) else
               f"{fpb:,.0f} FLOP/B ({r:.1f}x the GPU's {breakeven_flop_per_byte:,.0f} break-even)")
        add("metric", "FLOP per communicated byte", "flop_per_byte_vs_breakeven", r, "x break-even", txt,
            "work bought by each byte moved; above break-even a transfer can hide under compute",
            _word(r, "flop_per_byte_vs_breakeven", ("compute-bound", "balanced", "comm-bound")), True)
    else:
        add("metric", "FLOP per communicated byte", "", fpb, "FLOP/B",
            "inf (no communication)" if not np.isfinite(fpb) else f"{fpb:,.0f}",
            "work bought by each byte moved (no break-even given)", "n/a")
    ratio = metrics["compute_to_comm_ratio"]
    add("metric", "compute per stage vs comm latency", "compute_to_comm", ratio, "x",
        f"{metrics['mean_stage_compute_s'] * 1e3:.3f} ms vs {metrics['mean_comm_task_s'] * 1e3:.3f} ms"
        + (f" ({ratio:.1f}x)" if np.isfinite(ratio) else " (no communication)"),
        "a stage's compute task against one communication task",
        _word(ratio, "compute_to_comm", ("comm hidden", "comparable", "comm-dominated")), True)
    if stages >= 2 and not metrics.get("stage_time_s"):
        add("structure", "stage-time CV / fill-drain", "", nan, "", "not measured",
            "no task is tagged as a pipeline beat (e.g. decode steps), so pipeline fullness is not measured", "n/a")
    elif stages >= 2:
        cv = metrics["stage_time_cv"]
        add("structure", "stage-time CV", "stage_time_cv", cv, "std/mean", f"{cv:.3f}",
            "std/mean of the pipeline's beats: rhythm stability",
            _word(cv, "stage_time_cv", ("steady", "uneven", "unbalanced")), True)
        fd = metrics["fill_drain_share"]
        add("structure", "fill/drain share", "fill_drain_share", fd, "share of makespan", f"{fd:.1%}",
            "makespan share with the pipeline not full", _word(fd, "fill_drain_share", ("small", "costly", "dominant")),
            True)
    else:
        add("structure", "stage-time CV / fill-drain", "", nan, "", "n/a", "not a pipeline (one stage)", "n/a")
    bub = metrics["bubble_fraction_mean"]
    add("structure", "bubble fraction (mean)", "bubble_fraction", bub, "share of makespan", f"{bub:.1%}",
        "idle share of each GPU", _word(bub, "bubble_fraction", ("small", "costly", "dominant")))
    cx = metrics.get("credit_wait_share", 0.0)
    if fabric:
        ce = fabric.get("credit_exhaustion_share_max", 0.0)
        worst = max(ce, cx)
        add("structure", "credit exhaustion", "credit_exhaustion_share", worst, "share of time",
            f"links {ce:.1%} of time max ({fabric.get('credit_exhaustion_episodes', 0)} episodes); "
            f"hand-off credit waits {cx:.1%}", "how long senders had no credit (link VCs; pipeline buffers)",
            _word(worst, "credit_exhaustion_share", ("rare", "noticeable", "limiting")), True)
    else:
        add("structure", "credit exhaustion", "credit_exhaustion_share", cx, "share of time",
            f"hand-off credit waits {cx:.1%} (link credits not simulated: analytic network)",
            "how long senders waited for buffer credit",
            _word(cx, "credit_exhaustion_share", ("rare", "noticeable", "limiting")), True)
    df = pd.DataFrame(rows)
    df.insert(0, "schedule", schedule)
    return df


#: Default "fits" margin: a token-level pipeline fits only within 5 % of the
#: fastest feasible schedule (the map's and the conclusion lines' rule, docs/map.md).
FIT_MARGIN = 0.05


def match_results(card: "pd.DataFrame") -> dict[str, dict[str, Any]]:
    """The three PMF matches of one scorecard: {match: {"passes": bool,
    "failed": [figure, ...], "figures": {figure: value}}}. A match passes
    only when every figure of :data:`MATCHES` was measured and passes (so the
    structure of a one-stage schedule, or of decode steps, fails as "not measured")."""
    out: dict[str, dict[str, Any]] = {}
    for m, keys in MATCHES.items():
        rows = card[(card["group"] == m) & card["in_match"]]
        failed = [str(r.figure) for r in rows.itertuples() if not r.passes]
        failed += [f"{k} (not measured)" for k in keys if k not in set(rows["key"])]
        out[m] = {"passes": not failed, "failed": failed,
                  "figures": {str(r.figure): float(r.value) for r in rows.itertuples()}}
    return out


def pipelining_outcome(pipe_s: float | None, nonpipe_s: float | None, tie: float) -> tuple[str, float]:
    """``wins`` / ``ties`` / ``loses`` and the ratio T(best non-pipelined) /
    T(best pipelined) (> 1: pipelining is faster), or ``n/a`` and NaN when
    either side has no feasible schedule. Within ``tie`` of 1 it is a tie."""
    if not pipe_s or not nonpipe_s:
        return "n/a", float("nan")
    r = nonpipe_s / pipe_s
    if abs(pipe_s / nonpipe_s - 1.0) <= tie:
        return "ties", r
    return ("wins" if r > 1 else "loses"), r


def map_verdict(*, matches: dict[str, dict[str, Any]] | None, pipe_s: float | None, pipe_label: str | None,
                fastest_s: float | None, fastest_label: str | None, margin: float,
                pipe_oom: str | None = None, pipe_infeasible: str | None = None,
                pipe_failed: str | None = None) -> tuple[str, str]:
    """(verdict, sentence) for a cell's token-level pipeline (see the module
    docstring). ``matches``: :func:`match_results` of the fastest feasible
    pipeline (None when there is none); ``pipe_s`` / ``fastest_s``: its
    latency and the cell's fastest feasible latency (s); ``pipe_oom``: why
    the pipelines ran out of memory when none fits in memory;
    ``pipe_infeasible``: why none could be built; ``pipe_failed``: the
    pipelines whose run did not finish (their worker process died, even alone),
    so the cell cannot say how they would have done."""
    if pipe_failed and (matches is None or pipe_s is None):
        return "failed", f"the token-level pipeline's run did not finish: {pipe_failed}"
    if fastest_s is None:
        return "no feasible schedule", "no schedule is feasible on this cell" + (
            f" (pipeline: {pipe_oom or pipe_infeasible})" if (pipe_oom or pipe_infeasible) else "")
    if matches is None or pipe_s is None:
        if pipe_oom:
            return "oom", f"out of memory: {pipe_oom}"
        return "infeasible", f"no token-level pipeline can run here: {pipe_infeasible or 'none applies'}"
    structural = all(m["passes"] for m in matches.values())
    rel = pipe_s / fastest_s
    within = rel <= 1.0 + margin
    failed = "; ".join(f"{k}: {', '.join(m['failed'])}" for k, m in matches.items() if not m["passes"])
    if structural and within:
        where = ("it is the fastest" if pipe_label == fastest_label else
                 f"it is {rel:.2f}x the fastest ({fastest_label}), within the {margin:.0%} margin")
        return "fits", f"{pipe_label} fits: all three matches pass and {where}"
    if structural:
        return "fits structurally, loses", (f"{pipe_label} fits structurally but loses to {fastest_label} "
                                             f"by {rel:.2f}x on this fabric")
    if within:
        where = ("is the fastest" if pipe_label == fastest_label else
                 f"is {rel:.2f}x the fastest ({fastest_label}), within the {margin:.0%} margin")
        return "no structural match", f"{pipe_label} {where}, but fails {failed}"
    return "does not fit", f"{pipe_label} does not fit: fails {failed}; {rel:.2f}x the fastest ({fastest_label})"
