"""What a scenario produced: one :class:`RunRecord` per (case, schedule), the
:class:`ScenarioResult` holding them with the scorecards, and the conclusion
lines (the fastest schedule per case and whether each token-level pipeline fits)."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import pandas as pd

from flitsim._notebook import notebook
from flitsim.report.scorecard import FIT_MARGIN, TOKEN_PIPELINES, map_verdict, match_results
from flitsim.scenario.spec import Scenario
from flitsim.scenario.write import write_report

__all__ = ["RunRecord", "ScenarioResult", "conclusion"]


@notebook("case", "label", "devices", "network", "fidelity", "wall_s", frame=lambda r: r.schedule.tasks())
@dataclasses.dataclass
class RunRecord:
    """One (case, schedule) run, aggregated over its representative sequences.

    ``schedule``: the representative simulated Schedule (median sequence) kept
    for figures, trace and critical path; ``metrics``: aggregated
    :func:`~flitsim.report.metrics.schedule_metrics`; ``per_sequence``: list of
    (prefill tokens or None, metrics); ``network``: label of the network used;
    ``fabric``: fabric figures (when on the fabric); ``critical``: the
    representative's CriticalPath; ``single_gpu_s``: the 1-GPU time summed
    like the makespan; ``llm_latency``: LLM latency table (decode only);
    ``dit``: DiT latencies; ``memory``: :func:`memory_columns` (status
    ``"ok"`` / ``"oom"``, peak bytes of the fullest device over the sequences).
    """

    case: str
    label: str
    name: str
    devices: int
    stages: int
    schedule: Any
    metrics: dict[str, Any]
    per_sequence: list[tuple[Any, dict[str, Any]]]
    network: str
    fabric: dict[str, Any] | None
    critical: Any
    single_gpu_s: float | None
    wall_s: float
    llm_latency: Any = None
    dit: dict[str, Any] | None = None
    token_times: Any = None
    memory: dict[str, Any] = dataclasses.field(default_factory=dict)

    #: ``packet``, ``flow`` (fabric runs) or ``analytic``, and why (auto's
    #: choice or a flow-level warning; docs/fidelity.md).
    fidelity: str = ""
    fidelity_reason: str = ""


def memory_columns(schedules: list[Any]) -> dict[str, Any]:
    """``memory_status``, ``peak_memory_bytes``, ``memory_broken_by``,
    ``hbm_capacity_bytes`` of the fullest of ``schedules`` (the run's sequences)."""
    fps = [s.footprint() for s in schedules if "memory_static" in s.options]
    if not fps:
        return {"memory_status": "unknown", "peak_memory_bytes": float("nan"), "memory_broken_by": None,
                "hbm_capacity_bytes": float("nan")}
    worst = max(fps, key=lambda f: f.peak_bytes)
    return {"memory_status": worst.status, "peak_memory_bytes": worst.peak_bytes,
            "memory_broken_by": worst.broken_by, "hbm_capacity_bytes": worst.capacity_bytes}


@notebook("runs", "wall_s", "conclusion", frame="summary_frame")
@dataclasses.dataclass
class ScenarioResult:
    """Everything a scenario produced: :attr:`runs`, per-case workload facts,
    the scorecards, the conclusion lines, the wall time and the :attr:`map`."""

    scenario: Scenario
    runs: list[RunRecord]
    workloads: dict[str, dict[str, Any]]
    scorecards: Any
    conclusion: list[str]
    wall_s: float
    network_notes: list[str]
    #: The PMF map (:class:`flitsim.scenario.map.MapResult`) when the scenario has a ``[map]``.
    map: Any = None

    def summary_frame(self) -> Any:
        """One row per (case, schedule): devices, network, makespan, speedup,
        efficiency, stage CV, fill/drain, bubble, FLOP/byte, credit waits,
        critical-path shares, memory status and peak memory per device."""
        rows = []
        for r in self.runs:
            m = r.metrics
            sp = r.single_gpu_s / m["makespan_s"] if r.single_gpu_s else float("nan")
            cp = r.critical.breakdown_share() if r.critical is not None else {}
            rows.append({"case": r.case, "schedule": r.label, "builder": r.name, "devices": r.devices,
                         "stages": r.stages, "network": r.network, "fidelity": r.fidelity,
                         "fidelity_reason": r.fidelity_reason, "makespan_s": m["makespan_s"],
                         "single_gpu_s": r.single_gpu_s, "speedup": sp, "efficiency": sp / r.devices,
                         "stage_time_cv": m["stage_time_cv"], "fill_drain_share": m["fill_drain_share"],
                         "bubble_fraction_mean": m["bubble_fraction_mean"], "flop_per_comm_byte": m["flop_per_comm_byte"],
                         "comm_bytes": m["comm_bytes"], "credit_wait_s": m["credit_wait_s"],
                         **r.memory,
                         **{f"cp_{k.replace(' ', '_')}": v for k, v in cp.items()},
                         "sequences": len(r.per_sequence), "wall_s": r.wall_s})
        return pd.DataFrame(rows)

    def write(self, out_dir: str | os.PathLike[str], *, jobs: int = 1) -> dict[str, str]:
        """Write the report into ``out_dir``: summary/scorecard/critical-path
        Parquet + CSV, per-run task Parquet, Perfetto traces, PNG figures,
        ``report.html`` and ``results.json`` (``jobs``: processes for the
        per-run files; the same files at any count). Returns {artifact: path}."""
        return write_report(self, out_dir, jobs=jobs)


def conclusion(runs: list[RunRecord], cards: Any, margin: float = FIT_MARGIN) -> list[str]:
    """One line per case: the fastest schedule, and for each token-level
    pipeline (TeraPipe, PipeFusion) its verdict (:func:`~flitsim.report.scorecard.map_verdict`:
    "fits" needs all three PMF matches AND being within ``margin`` of the
    fastest schedule of the case). ``cards``: the scenario's scorecards
    (column ``case``). Latencies compared are one request's (prefill) or one
    image's (DiT); a batched schedule's row says so in its label."""
    lines = []
    cases: dict[str, list[RunRecord]] = {}
    for r in runs:
        if r.name != "decode":
            cases.setdefault(r.case, []).append(r)
    for case, rs in cases.items():
        ok = [r for r in rs if r.memory.get("memory_status") != "oom"] or rs
        best = min(ok, key=lambda r: r.metrics["makespan_s"])
        parts = [f"{case}: fastest {best.label} ({best.metrics['makespan_s'] * 1e3:.1f} ms on {best.devices} GPUs)"]
        for r in rs:
            if r.name in TOKEN_PIPELINES:
                card = cards[(cards["case"] == case) & (cards["schedule"] == r.label)]
                oom = r.memory.get("memory_status") == "oom"
                v, why = map_verdict(matches=None if oom else match_results(card), pipe_s=None if oom else r.metrics["makespan_s"],
                                     pipe_label=r.label, fastest_s=best.metrics["makespan_s"], fastest_label=best.label,
                                     margin=margin, pipe_oom=f"{r.label} ({r.memory.get('memory_broken_by')})" if oom else None)
                # the reason is written to stand alone (the map's cells); here the label and the
                # verdict precede it, so its own "<label> does not fit: " is dropped, not repeated
                why = why.removeprefix(f"{r.label} ").removeprefix(f"{v}: ").removeprefix("fits structurally but ")
                parts.append(f"{r.label}: {v} ({why})")
        lines.append("; ".join(parts))
    return lines
