"""The PMF scorecard: does a (workload, schedule, fabric) triple fit?

Three groups, each figure with what it means and a verdict:

- **task match** — does the speedup over one GPU hold at real sizes?
  speedup = T(1 GPU) / T(N GPUs) (both simulated, same roofline, real model and
  sequence sizes); parallel efficiency = speedup / N. Verdict: ``holds`` when
  efficiency >= 0.6, ``partly`` >= 0.3, else ``fails``.
- **metric match** — which tokens, which tokenizer, which length distribution
  the figures are counted in (LLMs), or image tokens / steps (DiT). Verdict
  ``comparable`` when the tokenizer is the served model's, ``convert`` when
  another tokenizer counted them (Llama-2 counts ~20 % more tokens than Llama-3
  for the same text: tokens/s are not comparable), ``exact`` for DiT.
- **structure match** — the figures that decide whether a pipeline stays full:
  dependency density (edges per task), FLOP per communicated byte against the
  GPU's break-even (peak FLOP/s over per-GPU payload B/s: above it a transfer
  can hide under compute), stage-time CV, fill/drain share, credit exhaustion
  (share of time a link had no credits, and task-graph credit waits), and
  compute time per stage against communication latency (mean task times).

Thresholds are stated in :data:`THRESHOLDS`; they are judgement calls, printed
next to every verdict so readers can disagree with them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["THRESHOLDS", "scorecard", "pipeline_fit", "TOKEN_PIPELINES"]

THRESHOLDS = {
    "efficiency": (0.6, 0.3), "stage_time_cv": (0.05, 0.15), "fill_drain_share": (0.10, 0.30),
    "bubble_fraction": (0.10, 0.30), "credit_exhaustion_share": (0.01, 0.10), "compute_to_comm": (10.0, 1.0),
    "flop_per_byte_vs_breakeven": (10.0, 1.0), "dependency_density": (2.0, 4.0),
}
"""(good, fair) limits per figure; lower is better except efficiency, compute_to_comm and FLOP/byte."""

TOKEN_PIPELINES = ("terapipe", "pipefusion")
"""Token-level (slice / patch) pipeline schedules."""


def _lo(v: float, key: str, words: tuple[str, str, str]) -> str:
    g, f = THRESHOLDS[key]
    return words[0] if v <= g else words[1] if v <= f else words[2]


def _hi(v: float, key: str, words: tuple[str, str, str]) -> str:
    g, f = THRESHOLDS[key]
    return words[0] if v >= g else words[1] if v >= f else words[2]


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
        DataFrame with columns group, figure, value, meaning, verdict.
    """
    import pandas as pd

    rows: list[tuple[str, str, str, str, str]] = []
    mk = metrics["makespan_s"]
    if single_gpu_s:
        sp = single_gpu_s / mk if mk else float("nan")
        eff = sp / devices
        rows.append(("task", "speedup over 1 GPU", f"{sp:.2f}x on {devices} GPUs ({eff:.0%} efficiency)",
                     "1-GPU time / this schedule's time, real sizes, same roofline",
                     _hi(eff, "efficiency", ("holds", "partly", "fails"))))
    if workload.get("kind") == "llm":
        tok = workload.get("tokenizer", "?")
        served = workload.get("served_tokenizer", "?")
        same = tok in (served, "serving-model")
        rows.append(("metric", "tokens", str(workload.get("tokens", "prefill input tokens")),
                     "which tokens the times are per", "stated"))
        rows.append(("metric", "tokenizer", f"{tok} (model: {served})",
                     "who counted the tokens; Llama-2 counts ~20% more than Llama-3 for the same text",
                     "comparable" if same else "convert"))
        rows.append(("metric", "length distribution", str(workload.get("distribution", "?")),
                     "the input lengths the schedule was run at", "stated"))
    else:
        rows.append(("metric", "image tokens / steps", str(workload.get("tokens", "?")),
                     "tokens per denoising step (image + text) and steps", "exact"))
    dd = metrics["dependency_density"]
    rows.append(("structure", "dependency density", f"{dd:.2f} edges/task ({metrics['cross_device_edge_share']:.0%} cross-device)",
                 "how many tasks each task waits on", _lo(dd, "dependency_density", ("loose", "moderate", "dense"))))
    fpb = metrics["flop_per_comm_byte"]
    if breakeven_flop_per_byte and np.isfinite(fpb):
        r = fpb / breakeven_flop_per_byte
        rows.append(("structure", "FLOP per communicated byte", f"{fpb:,.0f} ({r:.1f}x the GPU's {breakeven_flop_per_byte:,.0f} break-even)",
                     "work bought by each byte moved; above break-even a transfer can hide under compute",
                     _hi(r, "flop_per_byte_vs_breakeven", ("compute-bound", "balanced", "comm-bound"))))
    else:
        rows.append(("structure", "FLOP per communicated byte", "inf (no communication)" if not np.isfinite(fpb) else f"{fpb:,.0f}",
                     "work bought by each byte moved", "compute-bound" if not np.isfinite(fpb) else "n/a"))
    if stages >= 2:
        cv = metrics["stage_time_cv"]
        rows.append(("structure", "stage-time CV", f"{cv:.3f}", "std/mean of the pipeline's beats: rhythm stability",
                     _lo(cv, "stage_time_cv", ("steady", "uneven", "unbalanced"))))
        fd = metrics["fill_drain_share"]
        rows.append(("structure", "fill/drain share", f"{fd:.1%}", "makespan share with the pipeline not full",
                     _lo(fd, "fill_drain_share", ("small", "costly", "dominant"))))
    else:
        rows.append(("structure", "stage-time CV / fill-drain", "n/a", "not a pipeline (one stage)", "n/a"))
    bub = metrics["bubble_fraction_mean"]
    rows.append(("structure", "bubble fraction (mean)", f"{bub:.1%}", "idle share of each GPU",
                 _lo(bub, "bubble_fraction", ("small", "costly", "dominant"))))
    cx = metrics.get("credit_wait_share", 0.0)
    if fabric:
        ce = fabric.get("credit_exhaustion_share_max", 0.0)
        rows.append(("structure", "credit exhaustion", f"links {ce:.1%} of time max ({fabric.get('credit_exhaustion_episodes', 0)} episodes); "
                     f"hand-off credit waits {cx:.1%}", "how long senders had no credit (link VCs; pipeline buffers)",
                     _lo(max(ce, cx), "credit_exhaustion_share", ("rare", "noticeable", "limiting"))))
    else:
        rows.append(("structure", "credit exhaustion", f"hand-off credit waits {cx:.1%} (link credits not simulated: analytic network)",
                     "how long senders waited for buffer credit", _lo(cx, "credit_exhaustion_share", ("rare", "noticeable", "limiting"))))
    ratio = metrics["compute_to_comm_ratio"]
    rows.append(("structure", "compute per stage vs comm latency",
                 f"{metrics['mean_stage_compute_s'] * 1e3:.3f} ms vs {metrics['mean_comm_task_s'] * 1e3:.3f} ms"
                 + (f" ({ratio:.1f}x)" if np.isfinite(ratio) else ""),
                 "a stage's compute task against one communication task",
                 _hi(ratio, "compute_to_comm", ("comm hidden", "comparable", "comm-dominated"))))
    df = pd.DataFrame(rows, columns=["group", "figure", "value", "meaning", "verdict"])
    df.insert(0, "schedule", schedule)
    return df


def pipeline_fit(metrics: dict[str, Any], speedup: float | None, devices: int) -> tuple[str, str]:
    """Verdict and reason for a token-level pipeline: ``fits`` when its
    fill/drain share and stage CV are small and parallel efficiency holds;
    ``partly`` when efficiency is at least fair; else ``does not fit``."""
    cv, fd = metrics["stage_time_cv"], metrics["fill_drain_share"]
    eff = (speedup or 0.0) / devices
    why = f"stage CV {cv:.3f}, fill/drain {fd:.0%}, efficiency {eff:.0%}"
    if fd <= THRESHOLDS["fill_drain_share"][0] and cv <= THRESHOLDS["stage_time_cv"][1] and eff >= THRESHOLDS["efficiency"][0]:
        return "fits", why
    if eff >= THRESHOLDS["efficiency"][1]:
        return "partly", why
    return "does not fit", why
