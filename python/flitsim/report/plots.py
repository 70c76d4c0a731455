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

__all__ = ["timeline", "link_heatmap", "stage_time_bars", "latency_cdf", "figure_png_base64"]


def _fig(w: float = 8.0, h: float = 3.5) -> "Figure":
    from matplotlib.figure import Figure

    return Figure(figsize=(w, h), dpi=90, layout="constrained")


def timeline(schedule: Any, *, max_tasks: int = 20000, title: str | None = None) -> "Figure":
    """Gantt chart of a simulated schedule: one row per used device (compute
    on top, communication below, thinner), time in ms; colours by stage."""
    run = schedule.require_run()
    t = run.tasks
    if len(t) > max_tasks:
        t = t.iloc[:max_tasks]
    devs = list(schedule.devices)
    row = {d: i for i, d in enumerate(devs)}
    fig = _fig(9, 0.35 * len(devs) + 1.5)
    ax = fig.add_subplot()
    import matplotlib

    cmap = matplotlib.colormaps["tab10"]
    comp = t[t.kind == "compute"]
    for d, grp in comp.groupby("device"):
        if d not in row:
            continue
        xs = list(zip(grp.start_ps / 1e9, (grp.end_ps - grp.start_ps) / 1e9))
        cols = [cmap(int(s) % 10 if s >= 0 else 7) for s in grp.stage]
        ax.broken_barh(xs, (row[d] - 0.4, 0.55), facecolors=cols, linewidth=0)
    comm = t[t.kind == "transfer"]
    for d, grp in comm.groupby("device"):
        if d not in row:
            continue
        ax.broken_barh(list(zip(grp.start_ps / 1e9, (grp.end_ps - grp.start_ps) / 1e9)), (row[d] + 0.2, 0.2),
                       facecolors="black", linewidth=0)
    coll = t[t.kind == "collective"]
    if len(coll):
        xs = list(zip(coll.start_ps / 1e9, (coll.end_ps - coll.start_ps) / 1e9))
        for i in range(len(devs)):
            ax.broken_barh(xs, (i + 0.2, 0.2), facecolors="firebrick", linewidth=0)
    ax.set_yticks(range(len(devs)), [f"GPU {d}" for d in devs])
    ax.invert_yaxis()
    ax.set_xlabel("time (ms)")
    ax.set_title(title or f"{schedule.name}: compute (by stage) / communication (black, red = collective)")
    return fig


def link_heatmap(links: "pd.DataFrame | None" = None, schedule: Any = None, *, bins: int = 60,
                 title: str | None = None) -> "Figure":
    """Link utilization heatmap. With fabric ``links`` statistics (one row per
    GPU port): GPU x port utilization over the run. Otherwise, from the
    schedule's communication tasks: per device, the share of each time bin its
    communication stream was busy (device x time)."""
    fig = _fig(9, 3.5)
    ax = fig.add_subplot()
    if links is not None and len(links):
        piv = links.pivot_table(index="gpu", columns="port", values="utilization", aggfunc="mean").fillna(0)
        used = piv.index[piv.sum(axis=1) > 0]
        piv = piv.loc[used] if len(used) else piv
        im = ax.imshow(piv.to_numpy(), aspect="auto", cmap="viridis", vmin=0, vmax=1, interpolation="nearest")
        ax.set_yticks(range(len(piv.index)), [f"GPU {g}" for g in piv.index], fontsize=7)
        ax.set_xlabel("GPU port (one per switch chip)")
        ax.set_title(title or "link utilization (GPU -> switch), busy / makespan")
    else:
        run = schedule.require_run()
        t = run.tasks
        devs = list(schedule.devices)
        mk = max(run.makespan_ps, 1)
        edges = np.linspace(0, mk, bins + 1)
        grid = np.zeros((len(devs), bins))
        comm = t[t.kind != "compute"]
        offs, mem = run.graph.columns["group_offsets"], run.graph.columns["group_members"]
        for i, k, d, s, e in zip(comm.index, comm.kind, comm.device, comm.start_ps, comm.end_ps):
            members = [d] if k == "transfer" else list(mem[offs[run.graph.columns["group"][i]]:
                                                               offs[run.graph.columns["group"][i] + 1]])
            ov = np.clip(np.minimum(edges[1:], e) - np.maximum(edges[:-1], s), 0, None)
            for m in members:
                if m in devs:
                    grid[devs.index(m)] += ov
        grid /= (edges[1] - edges[0])
        im = ax.imshow(np.clip(grid, 0, 1), aspect="auto", cmap="viridis", vmin=0, vmax=1,
                       extent=(0, mk / 1e9, len(devs) - 0.5, -0.5), interpolation="nearest")
        ax.set_yticks(range(len(devs)), [f"GPU {d}" for d in devs], fontsize=7)
        ax.set_xlabel("time (ms)")
        ax.set_title(title or "communication-stream occupancy per device (analytic network)")
    fig.colorbar(im, ax=ax, label="utilization")
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
