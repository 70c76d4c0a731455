"""Scenarios: a TOML file naming a fabric, a GPU, cases (model + workload) and
the schedules to compare; :func:`run_scenario` simulates them all and
returns a :class:`ScenarioResult` that writes the report.

TOML layout (every table is validated; unknown keys and wrong types raise
``ConfigError`` naming the key, e.g. ``Scenario.cases.0.schedules.1.optionz``)::

    title = "..."
    [fabric]                      # preset (+ overrides), or file = "fabric.toml", or [fabric.inline]
    preset = "gb200-nvl72"
    overrides = { sim_packet_bytes = 8192 }
    network = "auto"              # auto | fabric | analytic
    [hardware]
    gpu = "gb200"
    dtype = "bf16"
    [[cases]]
    name = "Llama-3-70B prefill, LLMPerf 550/150"
    model = "llama-3-70b"
    workload = { kind = "llmperf", n_requests = 2000, seed = 0, sequences = 3 }
    [[cases.schedules]]
    name = "terapipe"
    label = "TeraPipe uniform"
    options = { stages = 8, slices = 8 }

Workload kinds: ``llmperf`` (fields of :class:`flitsim.workloads.LLMPerfSpec`
in ``llmperf``), ``trace`` (``trace`` name or CSV path, ``limit``), ``tokens``
(one prefill of ``tokens``), ``dit`` (``model``, ``resolution_px``,
``steps``, ``batch``). An LLM length distribution is run at ``sequences``
representative prefill lengths: the input-length quantiles at the bin
midpoints (i + 0.5) / n, each standing for an equal share of requests, so the
mean over them estimates the mean over the distribution. The schedule
``decode`` receives the whole LLM workload (its first ``requests``) instead.

Networks: ``fabric`` (and ``auto``, the default, which is the same) runs
every schedule on the cycle-level fabric (:class:`flitsim.FabricNetwork`:
transfers packet by packet, collectives lowered to transfer DAGs, calibrated
injection); ``analytic`` on :class:`flitsim.taskgraph.IdealNetwork`
parametrised from the fabric (alpha = the simulated latency of one packet
between two GPUs, bandwidth = the calibrated per-GPU injection rate). Each
run is labelled with the network it used.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field

from flitsim._spec import Spec
from flitsim.errors import config_error

__all__ = ["Scenario", "FabricSection", "HardwareSection", "WorkloadSection", "ScheduleEntry", "CaseSection",
           "OutputSection", "load_scenario", "run_scenario", "ScenarioResult", "RunRecord"]

Scalar = int | float | str | bool
Option = Scalar | list[Scalar]


class FabricSection(Spec):
    """The fabric: a ``preset`` with ``overrides`` of FabricSpec fields, a
    ``file`` (FabricSpec TOML, relative to the scenario), or ``inline``
    (a FabricSpec table). ``network``: auto | fabric | analytic.
    ``collective_params``: a ``flitsim calibrate`` parameter file (relative
    to the scenario) for the collectives on the fabric."""

    preset: str | None = "gb200-nvl72"
    overrides: dict[str, Any] = Field(default_factory=dict)
    file: str | None = None
    inline: dict[str, Any] | None = None
    network: Literal["auto", "fabric", "analytic"] = "auto"
    collective_params: str | None = None


class HardwareSection(Spec):
    """GPU preset name and activation dtype of every schedule."""

    gpu: str = "gb200"
    dtype: str = "bf16"


class WorkloadSection(Spec):
    """One case's workload (see the module docstring)."""

    kind: Literal["llmperf", "trace", "tokens", "dit"]
    llmperf: dict[str, Any] = Field(default_factory=dict)
    trace: str = "azure-conv-2023"
    limit: int | None = Field(default=None, ge=1)
    tokens: int | None = Field(default=None, ge=1)
    sequences: int = Field(default=3, ge=1, le=64)
    model: str | None = None
    resolution_px: int | None = Field(default=None, ge=16)
    steps: int = Field(default=28, ge=1)
    batch: int = Field(default=1, ge=1)


class ScheduleEntry(Spec):
    """A schedule to run: builder ``name`` (``flitsim.schedules.SCHEDULES``),
    display ``label``, builder ``options`` (stages, slices, degree, ...)."""

    name: str
    label: str | None = None
    options: dict[str, Option] = Field(default_factory=dict)
    network: Literal["auto", "fabric", "analytic"] | None = None


class CaseSection(Spec):
    """A model + workload and the schedules compared on it; ``baseline``:
    also simulate one GPU (the task-match speedup)."""

    name: str
    model: str | None = None
    workload: WorkloadSection
    schedules: list[ScheduleEntry] = Field(min_length=1)
    baseline: bool = True


class OutputSection(Spec):
    """What the report writes besides tables: figures (PNG + HTML), one
    Perfetto trace per run, task tables as Parquet."""

    figures: bool = True
    traces: bool = True
    task_tables: bool = True


class Scenario(Spec):
    """A whole scenario file."""

    title: str
    description: str = ""
    fabric: FabricSection = FabricSection()
    hardware: HardwareSection = HardwareSection()
    cases: list[CaseSection] = Field(min_length=1)
    output: OutputSection = OutputSection()
    base_dir: str = "."


def load_scenario(path: str | os.PathLike[str]) -> Scenario:
    """Parse and validate a scenario TOML file.

    Raises:
        ConfigError: unreadable TOML, unknown keys, wrong types (naming the key).
    """
    from flitsim._toml import read_toml

    p = Path(path) if isinstance(path, (str, os.PathLike)) else path
    data = read_toml(p, "scenario")
    data.setdefault("base_dir", str(p.resolve().parent))
    return Scenario.from_dict(data)  # type: ignore[return-value]


# ---------------------------------------------------------------------- running
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
    ``dit``: DiT latencies.
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


@dataclasses.dataclass
class ScenarioResult:
    """Everything a scenario produced: :attr:`runs`, per-case workload facts,
    the scorecards, the conclusion lines and the wall time."""

    scenario: Scenario
    runs: list[RunRecord]
    workloads: dict[str, dict[str, Any]]
    scorecards: Any
    conclusion: list[str]
    wall_s: float
    network_notes: list[str]

    def summary_frame(self) -> Any:
        """One row per (case, schedule): devices, network, makespan, speedup,
        efficiency, stage CV, fill/drain, bubble, FLOP/byte, credit waits,
        critical-path shares."""
        import pandas as pd

        rows = []
        for r in self.runs:
            m = r.metrics
            sp = r.single_gpu_s / m["makespan_s"] if r.single_gpu_s else float("nan")
            cp = r.critical.breakdown_share() if r.critical is not None else {}
            rows.append({"case": r.case, "schedule": r.label, "builder": r.name, "devices": r.devices,
                         "stages": r.stages, "network": r.network, "makespan_s": m["makespan_s"],
                         "single_gpu_s": r.single_gpu_s, "speedup": sp, "efficiency": sp / r.devices,
                         "stage_time_cv": m["stage_time_cv"], "fill_drain_share": m["fill_drain_share"],
                         "bubble_fraction_mean": m["bubble_fraction_mean"], "flop_per_comm_byte": m["flop_per_comm_byte"],
                         "comm_bytes": m["comm_bytes"], "credit_wait_s": m["credit_wait_s"],
                         **{f"cp_{k.replace(' ', '_')}": v for k, v in cp.items()},
                         "sequences": len(r.per_sequence), "wall_s": r.wall_s})
        return pd.DataFrame(rows)

    def write(self, out_dir: str | os.PathLike[str]) -> dict[str, str]:
        """Write the report into ``out_dir``: summary/scorecard/critical-path
        Parquet + CSV, per-run task Parquet, Perfetto traces, PNG figures,
        ``report.html`` and ``results.json``. Returns {artifact: path}."""
        from flitsim.report.writer import write_report

        return write_report(self, out_dir)


def _fabric_spec(sc: Scenario) -> Any:
    from flitsim.hardware import fabric_preset
    from flitsim.hardware.fabric import FabricSpec, fabric_from_dict

    f = sc.fabric
    if f.inline is not None:
        spec = fabric_from_dict(f.inline)
    elif f.file is not None:
        p = Path(f.file)
        spec = FabricSpec.from_toml(p if p.is_absolute() else Path(sc.base_dir) / p)
    elif f.preset is not None:
        return fabric_preset(f.preset, **f.overrides)
    else:
        raise config_error("fabric", None, "one of preset, file or inline")
    return spec.replace(**f.overrides) if f.overrides else spec


def analytic_network(fabric: Any) -> tuple[Any, float, int]:
    """IdealNetwork parametrised from ``fabric``: alpha = simulated latency of
    one protocol packet between GPU 0 and 1, bandwidth = the per-GPU rate the
    fabric network injects at: the calibrated ``link_efficiency`` x link payload
    rate x GPU ports (as :class:`flitsim.FabricNetwork` applies it), or the
    fabric's own ``gpu.injection_bytes_per_s`` when set.
    Returns (network, bandwidth_GBps, alpha_ps)."""
    import flitsim
    from flitsim.collectives import default_params
    from flitsim.taskgraph import IdealNetwork

    payload = int(fabric.gpu.payload_bytes)
    if fabric.gpu.injection_bytes_per_s:
        bw = fabric.gpu.injection_bytes_per_s / 1e9
    else:
        bw = fabric.links[0].payload_GBps() * fabric.gpu_ports * float(default_params()["link_efficiency"])
    one = flitsim.transfers(fabric.replace(sim_packet_bytes=0), [0], [1], payload)
    alpha = int(one.makespan_ps)
    return IdealNetwork(alpha_ps=alpha, bandwidth_GBps=bw), bw, alpha


def _representatives(wl: Any, n: int) -> tuple[list[int], str]:
    inp = wl.requests.input_tokens.to_numpy()
    qs = (np.arange(n) + 0.5) / n
    reps = [max(1, int(round(float(np.quantile(inp, q))))) for q in qs]
    desc = (f"{wl.source.split('(')[0] or 'workload'}: {len(inp)} requests, input mean {inp.mean():.0f}, p50 "
            f"{np.median(inp):.0f}, p99 {np.quantile(inp, 0.99):.0f}; run at {n} midpoint quantiles "
            f"{[round(float(q), 3) for q in qs]} = {reps} tokens")
    return reps, desc


def _load_workload(case: CaseSection, sc: Scenario) -> tuple[Any, dict[str, Any]]:
    from flitsim.workloads import dit_workload, llmperf_workload, load_trace

    w = case.workload
    if w.kind == "dit":
        if w.model is None or w.resolution_px is None:
            raise config_error(f"cases.{case.name}.workload", w.kind, "model and resolution_px for kind = 'dit'")
        d = dit_workload(w.model, w.resolution_px, steps=w.steps, batch=w.batch)
        info = {"kind": "dit", "model": w.model, "tokens": f"{d.image_tokens} image + {d.text_tokens_} text tokens, "
                f"{w.steps} steps, batch {d.step_batch}", "workload": d}
        return d, info
    if case.model is None:
        raise config_error(f"cases.{case.name}.model", None, "a causal LLM for an LLM workload")
    from flitsim.models import model_preset

    served = "llama-3" if "llama-3" in case.model.lower() else case.model
    if w.kind == "tokens":
        if w.tokens is None:
            raise config_error(f"cases.{case.name}.workload.tokens", None, "an integer >= 1 for kind = 'tokens'")
        return None, {"kind": "llm", "reps": [w.tokens], "tokens": "prefill input tokens", "tokenizer": served,
                      "served_tokenizer": served, "distribution": f"one prefill of {w.tokens} tokens"}
    if w.kind == "llmperf":
        wl = llmperf_workload(**w.llmperf)
    else:
        wl = load_trace(w.trace, limit=w.limit)
    model_preset(case.model)
    reps, desc = _representatives(wl, w.sequences)
    return wl, {"kind": "llm", "reps": reps, "tokens": "prefill input tokens (one request per prefill)",
                "tokenizer": wl.tokenizer, "served_tokenizer": served, "distribution": desc, "workload": wl}


def _aggregate(per_seq: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean of every scalar metric over sequences (equal weights: midpoint
    quantiles), except FLOP/byte = total FLOPs / total bytes."""
    if len(per_seq) == 1:
        return dict(per_seq[0])
    out: dict[str, Any] = {}
    for k, v in per_seq[0].items():
        if isinstance(v, (int, float)):
            out[k] = float(np.mean([m[k] for m in per_seq]))
        else:
            out[k] = v
    fl = sum(m["flops"] for m in per_seq)
    by = sum(m["comm_bytes"] for m in per_seq)
    out["flop_per_comm_byte"] = fl / by if by else float("inf")
    out["flops"], out["comm_bytes"] = fl / len(per_seq), by / len(per_seq)
    return out


def run_scenario(scenario: Scenario | str | os.PathLike[str], *, progress: bool = True) -> ScenarioResult:
    """Simulate every (case, schedule) of a scenario.

    Args:
        scenario: a :class:`Scenario` or a TOML path.
        progress: show a tqdm progress bar on stderr.

    Returns:
        :class:`ScenarioResult` (call ``.write(out_dir)`` for the report).

    Raises:
        ConfigError: invalid scenario, unknown schedule / model / option.
        StalledError: a simulation that can never finish.
    """
    import flitsim
    import flitsim.schedules as S
    from flitsim.hardware import gpu_preset
    from flitsim.report.critical_path import critical_path
    from flitsim.report.metrics import dit_latency, fabric_metrics, llm_latency_table, schedule_metrics, token_times_s
    from flitsim.report.scorecard import scorecard

    t_all = time.perf_counter()
    sc = scenario if isinstance(scenario, Scenario) else load_scenario(scenario)
    fabric = _fabric_spec(sc)
    cp = sc.fabric.collective_params
    if cp is not None and not Path(cp).is_absolute():
        cp = str(Path(sc.base_dir) / cp)
    fab_net = flitsim.FabricNetwork(fabric, collective_params=cp)
    ana_net, bw_GBps, alpha_ps = analytic_network(fabric)
    gpu = gpu_preset(sc.hardware.gpu)
    breakeven = gpu.peak_flop_per_s(sc.hardware.dtype) / (bw_GBps * 1e9)
    notes = [f"analytic network: alpha {alpha_ps / 1e3:.1f} ns (one packet GPU 0 -> 1 on the fabric), "
             f"{bw_GBps:.1f} GB/s per GPU (calibrated injection rate of the fabric network)"]
    workloads: dict[str, dict[str, Any]] = {}
    plan: list[tuple[CaseSection, ScheduleEntry, Any]] = []
    for case in sc.cases:
        wl, info = _load_workload(case, sc)
        workloads[case.name] = info
        for e in case.schedules:
            if e.name not in S.SCHEDULES:
                raise config_error(f"cases.{case.name}.schedules.name", e.name, f"one of {sorted(S.SCHEDULES)}")
            # Unknown options fail here, before any simulation runs.
            import inspect

            params = inspect.signature(S.SCHEDULES[e.name]).parameters
            allowed = sorted(k for k, v in params.items() if v.kind == v.KEYWORD_ONLY)
            for key in e.options:
                if key not in allowed:
                    raise config_error(f"cases.{case.name}.schedules.{e.label or e.name}.options.{key}",
                                       e.options[key], f"an option of {e.name}: one of {allowed}")
            plan.append((case, e, wl))
    total = sum(1 if (e.name == "decode" or info_kind(workloads[c.name]) == "dit") else len(workloads[c.name]["reps"])
                for c, e, _ in plan)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=total, desc="simulating", unit="run", file=sys.stderr, leave=True)
    common = {"gpu": sc.hardware.gpu, "dtype": sc.hardware.dtype, "fabric_devices": fabric.gpus}
    runs: list[RunRecord] = []
    baseline_cache: dict[tuple[str, Any], float] = {}

    def simulate(sched: Any, mode: str | None = None) -> tuple[Any, str]:
        mode = mode or sc.fabric.network
        if mode == "analytic":
            return S.simulate(sched, ana_net), "analytic"
        return S.simulate(sched, fab_net), "fabric"

    def one_gpu(case: CaseSection, wl: Any, tokens: int | None) -> float:
        key = (case.name, tokens)
        if key not in baseline_cache:
            if info_kind(workloads[case.name]) == "dit":
                b = S.build("tensor_parallel", None, wl, degree=1, gpu=sc.hardware.gpu, dtype=sc.hardware.dtype)
            else:
                b = S.build("layer_pipeline", case.model, tokens, stages=1, batch=1, gpu=sc.hardware.gpu,
                            dtype=sc.hardware.dtype)
            baseline_cache[key] = S.simulate(b, None).makespan_ps * 1e-12
        return baseline_cache[key]

    for case, e, wl in plan:
        info = workloads[case.name]
        label = e.label or e.name
        opts = {**common, **e.options}
        t0 = time.perf_counter()
        per: list[tuple[Any, dict[str, Any]]] = []
        scheds = []
        nets = set()
        if e.name == "decode":
            sched, net = simulate(S.build("decode", case.model, info["workload"], **opts), e.network)
            per.append((None, schedule_metrics(sched)))
            scheds.append(sched)
            nets.add(net)
            base = None
            if bar:
                bar.update(1)
        elif info["kind"] == "dit":
            sched, net = simulate(S.build(e.name, None, wl, **opts), e.network)
            per.append((None, schedule_metrics(sched)))
            scheds.append(sched)
            nets.add(net)
            base = one_gpu(case, wl, None) if case.baseline else None
            if bar:
                bar.update(1)
        else:
            base = 0.0 if case.baseline else None
            for tok in info["reps"]:
                sched, net = simulate(S.build(e.name, case.model, tok, **opts), e.network)
                per.append((tok, schedule_metrics(sched)))
                scheds.append(sched)
                nets.add(net)
                if base is not None:
                    base += one_gpu(case, wl, tok)
                if bar:
                    bar.update(1)
            if base is not None:
                base *= _work_multiple(e.name, opts) / len(info["reps"])
        rep = scheds[len(scheds) // 2]
        net_label = " + ".join(sorted(nets))
        fab = None
        if net_label == "fabric":
            fab = fabric_metrics(rep.run.network["links"], rep.run.network["switch_ports"], rep.run.makespan_ps)
        is_ana = net_label != "fabric"
        bpp = (bw_GBps * 1e9 / 1e12)
        cp = critical_path(rep, bytes_per_ps=bpp, alpha_ps=alpha_ps if is_ana else 0)
        rec = RunRecord(case.name, label, e.name, len(rep.devices), rep.stages, rep, _aggregate([m for _, m in per]),
                        per, net_label, fab, cp, base, time.perf_counter() - t0)
        if e.name == "decode":
            tt = token_times_s(rep)
            rec.token_times = tt
            rec.llm_latency = llm_latency_table(tt)
        if info["kind"] == "dit":
            rec.dit = dit_latency(rep)
        runs.append(rec)
        if bar:
            bar.set_postfix_str(f"{case.name[:24]} / {label[:20]}")
    if bar:
        bar.close()
    import pandas as pd

    cards = []
    for r in runs:
        info = workloads[r.case]
        cards.append(scorecard(schedule=r.label, devices=r.devices, metrics=r.metrics,
                               single_gpu_s=r.single_gpu_s if r.name != "decode" else None, workload=info,
                               breakeven_flop_per_byte=breakeven,
                               fabric={k: v for k, v in r.fabric.items() if not hasattr(v, "columns")} if r.fabric else None,
                               stages=r.stages).assign(case=r.case))
    cards_df = pd.concat(cards, ignore_index=True) if cards else pd.DataFrame()
    concl = conclusion(runs)
    return ScenarioResult(sc, runs, workloads, cards_df, concl, time.perf_counter() - t_all, notes)


def _work_multiple(name: str, opts: dict[str, Any]) -> int:
    """Sequences one prefill schedule processes (its ``batch`` option or the
    builder's default), so the 1-GPU baseline does the same work."""
    import inspect

    import flitsim.schedules as S

    p = inspect.signature(S.SCHEDULES[name]).parameters.get("batch")
    return int(opts.get("batch", p.default if p is not None else 1))


def info_kind(info: dict[str, Any]) -> str:
    return str(info.get("kind"))


def conclusion(runs: list[RunRecord]) -> list[str]:
    """One line per case: the fastest schedule, and for each token-level
    pipeline (TeraPipe, PipeFusion) whether it fits and why."""
    from flitsim.report.scorecard import TOKEN_PIPELINES, pipeline_fit

    lines = []
    cases: dict[str, list[RunRecord]] = {}
    for r in runs:
        if r.name != "decode":
            cases.setdefault(r.case, []).append(r)
    for case, rs in cases.items():
        best = min(rs, key=lambda r: r.metrics["makespan_s"])
        parts = [f"{case}: fastest {best.label} ({best.metrics['makespan_s'] * 1e3:.1f} ms on {best.devices} GPUs)"]
        for r in rs:
            if r.name in TOKEN_PIPELINES:
                sp = r.single_gpu_s / r.metrics["makespan_s"] if r.single_gpu_s else None
                v, why = pipeline_fit(r.metrics, sp, r.devices)
                rel = r.metrics["makespan_s"] / best.metrics["makespan_s"]
                parts.append(f"{r.label} {v} ({why}; {rel:.2f}x the fastest)")
        lines.append("; ".join(parts))
    return lines


def scenario_json(res: ScenarioResult) -> dict[str, Any]:
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
    return clean(json.loads(json.dumps(out, default=lambda o: o.item() if isinstance(o, np.generic) else str(o))))
