"""The PMF map heatmap: rows = workloads, columns = fabrics.

Colour: log2 of T(best non-pipelined) / T(best token-level pipeline) per cell
(blue: pipelining faster, red: slower, white: equal; clipped at 4x either
way); grey: no feasible pipeline (out of memory or not buildable). Text in each
cell: the winner, its margin over the best non-pipelined schedule, and the
PMF verdict of the pipeline.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

__all__ = ["map_heatmap", "SHORT_VERDICT"]

SHORT_VERDICT = {
    "fits": "FITS", "fits structurally, loses": "fits struct., loses", "no structural match": "no struct. match",
    "does not fit": "does not fit", "oom": "OOM", "infeasible": "infeasible", "failed": "run failed",
    "no feasible schedule": "no feasible schedule",
}
"""Verdict -> the words printed in a heatmap cell."""


def map_heatmap(cells: Any, rows: Sequence[str], columns: Sequence[str], *, title: str = "PMF map") -> Any:
    """Figure of the map.

    Args:
        cells: :meth:`flitsim.scenario.map.MapResult.table` (one row per cell:
            ``workload``, ``fabric``, ``winner``, ``margin_over_nonpipelined``,
            ``pipelining``, ``pipelining_ratio``, ``verdict``).
        rows, columns: axis order (workload and fabric labels).

    Returns:
        matplotlib Figure (save as PNG or SVG).
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    from matplotlib.colors import TwoSlopeNorm

    nr, nc = len(rows), len(columns)
    val = np.full((nr, nc), np.nan)
    text = [["" for _ in range(nc)] for _ in range(nr)]
    idx = {(str(r.workload), str(r.fabric)): r for r in cells.itertuples()}
    for i, w in enumerate(rows):
        for j, f in enumerate(columns):
            r = idx.get((w, f))
            if r is None:
                text[i][j] = "not run"
                continue
            ratio = r.pipelining_ratio
            if ratio == ratio and ratio > 0:
                val[i, j] = float(np.clip(np.log2(ratio), -2.0, 2.0))
            v = SHORT_VERDICT.get(str(r.verdict), str(r.verdict))
            if r.winner is None or r.winner != r.winner:
                text[i][j] = v
                continue
            m = r.margin_over_nonpipelined
            win = f"{r.winner}" + (f" x{m:.2f}" if m == m and m > 1.0005 else "")
            pipe = f"pipe {r.pipelining} {ratio:.2f}x" if ratio == ratio else f"pipe {r.pipelining}"
            text[i][j] = f"{win}\n{pipe}\n{v}"
    fig, ax = plt.subplots(figsize=(2.3 * nc + 3.2, 0.62 * nr + 1.8), dpi=110)
    cmap = matplotlib.colormaps["RdBu"].with_extremes(bad="#cccccc")
    im = ax.imshow(np.ma.masked_invalid(val), cmap=cmap, norm=TwoSlopeNorm(vmin=-2.0, vcenter=0.0, vmax=2.0),
                   aspect="auto")
    for i in range(nr):
        for j in range(nc):
            dark = val[i, j] == val[i, j] and abs(val[i, j]) > 1.3
            ax.text(j, i, text[i][j], ha="center", va="center", fontsize=6.5, color="white" if dark else "black")
    ax.set_xticks(range(nc), labels=list(columns), fontsize=8)
    ax.set_yticks(range(nr), labels=list(rows), fontsize=8)
    ax.xaxis.tick_top()
    ax.set_title(f"{title}\ncolour: T(best non-pipelined) / T(best token-level pipeline); grey: no feasible pipeline",
                 fontsize=9, pad=22)
    cb = fig.colorbar(im, ax=ax, fraction=0.03, pad=0.02)
    cb.set_ticks([-2, -1, 0, 1, 2], labels=["pipe 4x slower", "2x slower", "equal", "2x faster", "4x faster"])
    cb.ax.tick_params(labelsize=7)
    cb.set_label("token-level pipeline vs best non-pipelined (log2)", fontsize=7)
    fig.tight_layout()
    return fig
