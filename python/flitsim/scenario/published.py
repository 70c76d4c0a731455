"""Published multi-GPU measurements the map's claims are checked against
(issue 17, point 3): the cells where a measured system exists, with the
measured and simulated winner and the simulated / measured latency ratio.

Sources (each value copied from the figure or text named):

- xDiT README (2024), latency chart ``assets/latency-L20.jpg``: PixArt-alpha,
  20 DPM-Solver steps, 8x NVIDIA L20 (PCIe), seconds per image, for tensor
  parallel, PipeFusion, DistriFusion, Ulysses and Ring at 1024 / 2048 / 4096 px
  (DistriFusion out of memory at 4096 px). https://github.com/xdit-project/xDiT
- xDiT's own summary of the same charts (README): PipeFusion gives the lowest
  latency on PCIe clusters; "on NVLink, the power of PipeFusion is
  weakened"; only PipeFusion and tensor parallel reach the highest
  resolutions, DistriFusion and sequence parallel run out of memory there.

A measurement is compared only with a map column of the same system (preset
``pcie-8xl20`` for the L20 table, 8 GPUs); when the map has none, the row says
so instead of comparing with another machine.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

__all__ = ["L20_PIXART", "STATEMENTS", "reference_checks"]

L20_PIXART: dict[int, dict[str, float | None]] = {
    1024: {"tensor parallel": 8.422, "PipeFusion": 1.356, "DistriFusion": 4.428, "Ulysses": 5.99, "Ring": 2.0},
    2048: {"tensor parallel": 14.3, "PipeFusion": 6.345, "DistriFusion": 6.317, "Ulysses": 10.03, "Ring": 6.941},
    4096: {"tensor parallel": 82.49, "PipeFusion": 71.13, "DistriFusion": None, "Ulysses": 93.43, "Ring": 313.3},
}
"""xDiT README 2024 (assets/latency-L20.jpg): PixArt-alpha, 20 steps, 8x L20 PCIe,
s per image; None = out of memory. Keys: resolution px -> map schedule label."""

L20_SOURCE = "xDiT README 2024, assets/latency-L20.jpg (PixArt-alpha, 20 steps, 8x L20 PCIe)"

STATEMENTS = {
    "pcie_pipefusion_fastest": "xDiT README: PipeFusion gives the lowest latency on PCIe clusters",
    "nvlink_weakens_pipefusion": "xDiT README: on NVLink, the power of PipeFusion is weakened",
    "highest_res_oom": ("xDiT README: only PipeFusion and tensor parallel reach the highest resolutions; "
                        "DistriFusion and sequence parallel run out of memory there"),
}
"""xDiT's qualitative statements checked on the map."""

_PCIE_PREFIXES = ("pcie", "eth-")
_NVLINK = ("gb200-nvl72", "hgx-h100", "hgx-b200", "dgx-a100")


def _dit_row(rows: list[tuple[str, str, Any]], model: str, px: int, steps: int) -> str | None:
    for name, kind, wl in rows:
        if kind == "dit" and wl.model == model and wl.height_px == px and wl.steps == steps:
            return name
    return None


def reference_checks(res: Any, *, rows: list[tuple[str, str, Any]], columns: list[tuple[str, str]]) -> pd.DataFrame:
    """The published-measurement table for a :class:`~flitsim.scenario.map.MapResult`.

    Args:
        res: the map (its :meth:`cells` and :meth:`candidates_table`).
        rows: (row name, kind, workload) per map row; columns: (label, preset).

    Returns:
        DataFrame: ``claim`` (source), ``workload``, ``fabric``, ``schedule``,
        ``measured_s``, ``simulated_s``, ``ratio`` (simulated / measured),
        ``measured_winner``, ``simulated_winner`` (among the measured
        schedules: the published table has no hybrids; the map's own winner is
        in ``note``), ``agrees`` (bool or None), ``note``.
    """
    cand = res.candidates_table()
    cells = {(c["workload"], c["fabric"]): c for c in res.cells}
    out: list[dict[str, Any]] = []
    l20 = [label for label, preset in columns if preset == "pcie-8xl20"]
    for px, meas in L20_PIXART.items():
        row = _dit_row(rows, "pixart-alpha-xl/2", px, 20)
        mw = min((k for k, v in meas.items() if v is not None), key=lambda k: meas[k] or 0.0)
        base = {"claim": L20_SOURCE, "measured_winner": mw}
        if row is None or not l20:
            out.append({**base, "workload": f"PixArt-alpha {px} px, 20 steps", "fabric": "pcie-8xl20",
                        "schedule": "(all)", "note": "not in this map: " + (
                            "no pcie-8xl20 column" if not l20 else f"no PixArt-alpha {px} px 20-step row")})
            continue
        cell = cells.get((row, l20[0]))
        if cell is None:
            continue
        # the simulated winner among the schedules that were measured (the map's hybrids were not)
        same = cand[(cand.workload == row) & (cand.fabric == l20[0]) & cand.schedule.isin(list(meas))
                    & (cand.status == "ok")].sort_values(["latency_s", "schedule"])
        sw = str(same.schedule.iloc[0]) if len(same) else None
        for sched, m in meas.items():
            sel = cand[(cand.workload == row) & (cand.fabric == l20[0]) & (cand.schedule == sched)]
            sim = float(sel.latency_s.iloc[0]) if len(sel) and sel.status.iloc[0] == "ok" else float("nan")
            status = str(sel.status.iloc[0]) if len(sel) else "not run"
            note = ("measured out of memory; simulated " + status) if m is None else (
                "" if status == "ok" else f"simulated {status}")
            note = "; ".join(x for x in (note, f"map winner with hybrids: {cell['winner']}") if x)
            out.append({**base, "workload": row, "fabric": l20[0], "schedule": sched,
                        "measured_s": m, "simulated_s": sim, "ratio": sim / m if (m and sim == sim) else float("nan"),
                        "simulated_winner": sw, "agrees": sw == mw if sw else None, "note": note})
    # statement 1: PipeFusion fastest on PCIe columns (every DiT row)
    pcie = [label for label, preset in columns if preset.startswith(_PCIE_PREFIXES)]
    nvl = [label for label, preset in columns if preset in _NVLINK]
    dit_rows = [name for name, kind, _ in rows if kind == "dit"]
    for f in pcie:
        for w in dit_rows:
            c = cells.get((w, f))
            if c is None:  # a cell not run (a map assembled from parts)
                continue
            out.append({"claim": STATEMENTS["pcie_pipefusion_fastest"], "workload": w, "fabric": f,
                        "schedule": "PipeFusion", "measured_winner": "PipeFusion", "simulated_winner": c["winner"],
                        "agrees": str(c["winner"]).startswith("PipeFusion") if c["winner"] else None,
                        "note": f"pipelining {c['pipelining']} ({c['pipelining_ratio']:.2f}x vs best non-pipelined)"})
    if not pcie:
        out.append({"claim": STATEMENTS["pcie_pipefusion_fastest"], "note": "not in this map: no PCIe fabric column"})
    # statement 2: PipeFusion's advantage smaller on NVLink than on PCIe, per DiT row
    for w in dit_rows:
        rp = [cells[(w, f)]["pipelining_ratio"] for f in pcie if (w, f) in cells]
        rn = [cells[(w, f)]["pipelining_ratio"] for f in nvl if (w, f) in cells]
        rp = [x for x in rp if x == x]
        rn = [x for x in rn if x == x]
        if rp and rn:
            out.append({"claim": STATEMENTS["nvlink_weakens_pipefusion"], "workload": w,
                        "fabric": f"NVLink {max(rn):.2f}x vs PCIe {min(rp):.2f}x", "schedule": "PipeFusion",
                        "agrees": max(rn) < min(rp),
                        "note": "PipeFusion's ratio to the best non-pipelined schedule, best NVLink vs worst PCIe column"})
    if not (pcie and nvl):
        out.append({"claim": STATEMENTS["nvlink_weakens_pipefusion"],
                    "note": "not in this map: needs both an NVLink and a PCIe fabric column"})
    # statement 3: at the highest resolution run of each DiT model on each PCIe column,
    # DistriFusion / Ulysses / Ring out of memory while PipeFusion and tensor parallel run
    for f in pcie:
        ran = set(cand.workload[cand.fabric == f])
        by_model: dict[str, tuple[int, str]] = {}
        for name, kind, wl in rows:
            if kind == "dit" and name in ran and (wl.model not in by_model or wl.height_px > by_model[wl.model][0]):
                by_model[wl.model] = (wl.height_px, name)
        for _, (px, w) in by_model.items():
            sel = cand[(cand.workload == w) & (cand.fabric == f)]
            st = {str(r.schedule): str(r.status) for r in sel.itertuples()}
            seq = [k for k in ("DistriFusion", "Ulysses", "Ring") if k in st]
            agrees = all(st[k] == "oom" for k in seq) and all(st.get(k) == "ok" for k in ("PipeFusion", "tensor parallel"))
            out.append({"claim": STATEMENTS["highest_res_oom"], "workload": w, "fabric": f, "schedule": "(all)",
                        "agrees": agrees, "note": "; ".join(f"{k} {v}" for k, v in st.items())})
    cols = ["claim", "workload", "fabric", "schedule", "measured_s", "simulated_s", "ratio", "measured_winner",
            "simulated_winner", "agrees", "note"]
    return pd.DataFrame(out, columns=cols)
