"""matplotlib figures: pipeline timeline per device, link-utilization heatmap,
stage-time bars, latency CDFs. Every function returns a ``Figure`` (Agg
backend, no display needed); :func:`figure_png_base64` embeds one in HTML."""

from __future__ import annotations

import base64
import io
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

__all__ = ["timeline", "timeline_colour", "link_heatmap", "relative_bars", "utilization_bars", "stage_time_bars", "latency_cdf",
           "figure_png_base64"]

TOKEN_PIPELINES = ("terapipe", "pipefusion")
"""Schedules whose pipeline unit is a slice (TeraPipe) or a patch (PipeFusion)."""


def timeline_colour(schedule: Any) -> str:
    """What a timeline colours by, so the schedule's unit of work shows:
    ``slice`` (TeraPipe) / ``patch`` (PipeFusion) when it has more than one,
    ``step`` for multi-step runs (decode, denoising), else ``stage``."""
    items = np.unique(schedule.task_item[schedule.task_item >= 0]) if len(schedule.task_item) else []
    if schedule.name in TOKEN_PIPELINES and len(items) > 1:
        return "slice" if schedule.name == "terapipe" else "patch"
    if int(getattr(schedule, "steps", 1)) > 1:
        return "step"
    if len(items) > 1 and schedule.stages >= 2:
        return "micro-batch"
    return "stage"


def _fig(w: float = 8.0, h: float = 3.5) -> "Figure":
    from matplotlib.figure import Figure

    return Figure(figsize=(w, h), dpi=90, layout="constrained")


def timeline(schedule: Any, *, max_tasks: int = 20000, title: str | None = None,
             colour_by: str | None = None) -> "Figure":
    """Gantt chart of a simulated schedule: one row per used device (compute
    on top, communication below, thinner), time in ms.

    Compute is coloured by ``colour_by``: ``slice`` / ``patch`` /
    ``micro-batch`` (the task's item), ``step``, or ``stage``; default
    :func:`timeline_colour`. Transfers are black, collectives red."""
    run = schedule.require_run()
    t = run.tasks
    colour_by = colour_by or timeline_colour(schedule)
    key = {"slice": schedule.task_item, "patch": schedule.task_item, "micro-batch": schedule.task_item,
           "step": schedule.task_step}.get(colour_by, np.asarray(t.stage))
    key = np.asarray(key)
    if len(t) > max_tasks:
        t = t.iloc[:max_tasks]
        key = key[:max_tasks]
    devs = list(schedule.devices)
    row = {d: i for i, d in enumerate(devs)}
    fig = _fig(9, 0.35 * len(devs) + 1.6)
    ax = fig.add_subplot()
    import matplotlib

    cmap = matplotlib.colormaps["tab10"]
    kinds = t.kind.to_numpy()
    comp = kinds == "compute"
    for d in np.unique(t.device.to_numpy()[comp]):
        if d not in row:
            continue
        sel = comp & (t.device.to_numpy() == d)
        xs = list(zip(t.start_ps.to_numpy()[sel] / 1e9, (t.end_ps.to_numpy()[sel] - t.start_ps.to_numpy()[sel]) / 1e9))
        cols = [cmap(int(k) % 10) if k >= 0 else (0.6, 0.6, 0.6, 1.0) for k in key[sel]]
        ax.broken_barh(xs, (row[d] - 0.4, 0.55), facecolors=cols, linewidth=0)
    comm = t[kinds == "transfer"]
    for d, grp in comm.groupby("device"):
        if d not in row:
            continue
        ax.broken_barh(list(zip(grp.start_ps / 1e9, (grp.end_ps - grp.start_ps) / 1e9)), (row[d] + 0.2, 0.2),
                       facecolors="black", linewidth=0)
    coll = t[kinds == "collective"]
    if len(coll):
        xs = list(zip(coll.start_ps / 1e9, (coll.end_ps - coll.start_ps) / 1e9))
        for i in range(len(devs)):
            ax.broken_barh(xs, (i + 0.2, 0.2), facecolors="firebrick", linewidth=0)
    shown = sorted({int(k) for k in key[comp] if k >= 0})
    if 1 < len(shown) <= 10:
        from matplotlib.patches import Patch

        ax.legend(handles=[Patch(color=cmap(k % 10), label=f"{colour_by} {k}") for k in shown], fontsize=7,
                  ncol=min(len(shown), 5), loc="upper center", bbox_to_anchor=(0.5, -0.25), frameon=False)
    elif len(shown) > 10:
        ax.text(1.0, -0.3, f"{len(shown)} {colour_by}s; colours repeat every 10", transform=ax.transAxes,
                ha="right", fontsize=7)
    ax.set_yticks(range(len(devs)), [f"GPU {d}" for d in devs])
    ax.invert_yaxis()
    ax.set_xlabel("time (ms)")
    ax.set_title(title or f"{schedule.name}: compute by {colour_by} / communication (black, red = collective)",
                 fontsize=10)
    return fig


def relative_bars(times_s: Mapping[str, float], *, title: str = "relative to the fastest schedule") -> "Figure":
    """Horizontal bars of each schedule's time over the fastest one's (1.00x =
    fastest, labelled with the ratio and the time in ms), fastest on top."""
    items = sorted(times_s.items(), key=lambda kv: kv[1])
    best = items[0][1] if items else 1.0
    fig = _fig(7, 0.38 * len(items) + 1.1)
    ax = fig.add_subplot()
    rel = [v / best if best > 0 else float("nan") for _, v in items]
    cols = ["#2e7d32" if r <= 1.0 + 1e-12 else "#1565c0" for r in rel]
    ax.barh(range(len(items)), rel, color=cols)
    for i, (r, (_, v)) in enumerate(zip(rel, items)):
        ax.text(r, i, f" {r:.2f}x ({v * 1e3:.3g} ms)", va="center", fontsize=8)
    ax.set_yticks(range(len(items)), [k for k, _ in items], fontsize=8)
    ax.invert_yaxis()
    ax.axvline(1.0, color="grey", lw=0.8)
    ax.set_xlim(0, max(rel) * 1.35 if rel else 1)
    ax.set_xlabel("time / fastest schedule's time")
    ax.set_title(title, fontsize=10)
    return fig


def link_heatmap(links: "pd.DataFrame | None" = None, schedule: Any = None, *, bins: int = 60,
                 title: str | None = None) -> "Figure":
    """Link utilization heatmap, colour scale from 0 to the largest value
    shown (stated on the colour bar). With fabric ``links`` statistics (one row per
    GPU port): GPU x port utilization over the run. Otherwise, from the
    schedule's communication tasks: per device, the share of each time bin its
    communication stream was busy (device x time)."""
    fig = _fig(9, 3.5)
    ax = fig.add_subplot()
    if links is not None and len(links):
        piv = links.pivot_table(index="gpu", columns="port", values="utilization", aggfunc="mean").fillna(0)
        used = piv.index[piv.sum(axis=1) > 0]
        piv = piv.loc[used] if len(used) else piv
        vmax = float(piv.to_numpy().max()) or 1.0  # autoscaled: 1.4 % busy must not look empty
        im = ax.imshow(piv.to_numpy(), aspect="auto", cmap="viridis", vmin=0, vmax=vmax, interpolation="nearest")
        ax.set_yticks(range(len(piv.index)), [f"GPU {g}" for g in piv.index], fontsize=7)
        ax.set_xlabel("GPU port (one per switch chip)")
        ax.set_title(title or "link utilization (GPU -> switch), busy / makespan")
    else:
        run = schedule.require_run()
        t = run.tasks
        devs = list(schedule.devices)
        mk = max(run.makespan_ps, 1)
        edges = np.linspace(0, mk, bins + 1)
        from flitsim.report.activity import comm_activity

        tx, _ = comm_activity(t, run.graph, mk, bins)
        grid = tx[devs]
        grid /= (edges[1] - edges[0])
        vmax = float(min(grid.max(), 1.0)) or 1.0
        im = ax.imshow(np.clip(grid, 0, 1), aspect="auto", cmap="viridis", vmin=0, vmax=vmax,
                       extent=(0, mk / 1e9, len(devs) - 0.5, -0.5), interpolation="nearest")
        ax.set_yticks(range(len(devs)), [f"GPU {d}" for d in devs], fontsize=7)
        ax.set_xlabel("time (ms)")
        ax.set_title(title or "communication-stream occupancy per device (analytic network)")
    fig.colorbar(im, ax=ax, label=f"utilization (scale 0 - {vmax:.3g})")
    return fig


def utilization_bars(util: Mapping[str, tuple[float, float]], *, title: str = "link utilization") -> "Figure":
    """Per schedule: mean utilization of its used GPU ports and the busiest
    port's (``{label: (mean, max)}``, shares 0..1), as percent bars; the axis
    ends a little past the largest value, so 1.4 % is not a sliver on 0-100 %."""
    fig = _fig(7, 0.42 * len(util) + 1.2)
    ax = fig.add_subplot()
    labels = list(util)
    mean = np.array([util[k][0] for k in labels]) * 100
    mx = np.array([util[k][1] for k in labels]) * 100
    y = np.arange(len(labels))
    ax.barh(y - 0.2, mean, 0.38, label="mean of used ports", color="#1565c0")
    ax.barh(y + 0.2, mx, 0.38, label="busiest port", color="#90caf9")
    for i, v in enumerate(mx):
        ax.text(v, i + 0.2, f" {v:.3g} %", va="center", fontsize=7)
    ax.set_yticks(y, labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, (mx.max() if len(mx) else 1) * 1.25 or 1)
    ax.set_xlabel("utilization (%), busy / makespan")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    return fig


def stage_time_bars(stage_times_s: Mapping[str, Sequence[float]], *, title: str = "mean pipelined task time per stage") -> "Figure":
    """Grouped bars of stage times (ms): one group per stage, one bar per schedule label."""
    fig = _fig(8, 3.2)
    ax = fig.add_subplot()
    labels = list(stage_times_s)
    width = 0.8 / max(len(labels), 1)
    for i, lab in enumerate(labels):
        v = np.asarray(stage_times_s[lab], dtype=float) * 1e3
        ax.bar(np.arange(len(v)) + i * width, v, width, label=lab)
    ax.set_xlabel("stage")
    ax.set_ylabel("ms")
    ax.set_title(title)
    if labels:
        ax.legend(fontsize=7)
    return fig


def latency_cdf(samples_s: Mapping[str, Sequence[float]], *, xlabel: str = "latency (ms)",
                title: str = "latency CDF") -> "Figure":
    """Empirical CDFs of latency samples (seconds in, ms on the axis), one line per label."""
    fig = _fig(6, 3.2)
    ax = fig.add_subplot()
    for lab, v in samples_s.items():
        x = np.sort(np.asarray(v, dtype=float)[np.isfinite(np.asarray(v, dtype=float))]) * 1e3
        if x.size:
            ax.step(x, np.arange(1, x.size + 1) / x.size, where="post", label=lab)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("fraction")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if samples_s:
        ax.legend(fontsize=7)
    return fig


def figure_png_base64(fig: "Figure") -> str:
    """PNG of ``fig`` as a base64 string (for ``<img src="data:image/png;base64,...">``)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return base64.b64encode(buf.getvalue()).decode("ascii")
