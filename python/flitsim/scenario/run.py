"""Running a scenario: every (case, schedule) simulated on its network (the
cycle-level fabric or the analytic network parametrised from it), each LLM
distribution at its representative lengths, with the 1-GPU baseline, then
metrics, critical paths, scorecards and the conclusion gathered into a
:class:`~flitsim.scenario.result.ScenarioResult`."""

from __future__ import annotations

import inspect
import os
import sys
import time
from typing import Any

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

import flitsim.schedules as S
from flitsim.errors import config_error
from flitsim.hardware import fabric_gpu, gpu_preset
from flitsim.schedules.builder import DEFAULT_GPU
from flitsim.networks import AnalyticNetwork, FabricNetwork
from flitsim.report.critical_path import critical_path
from flitsim.report.metrics import dit_latency, fabric_metrics, llm_latency_table, schedule_metrics, token_times_s
from flitsim.report.scorecard import scorecard
from flitsim.scenario.cases import info_kind, load_workload
from flitsim.scenario.result import RunRecord, ScenarioResult, conclusion
from flitsim.scenario.spec import CaseSection, Scenario, ScheduleEntry, fabric_spec, load_scenario

__all__ = ["run_scenario"]


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
    t_all = time.perf_counter()
    sc = scenario if isinstance(scenario, Scenario) else load_scenario(scenario)
    fabric = fabric_spec(sc)
    fab_net = FabricNetwork(fabric)
    ana_net = AnalyticNetwork.from_fabric(fabric)
    bw_GBps, alpha_ps = ana_net.bandwidth_GBps, ana_net.alpha_ps
    gpu_name = sc.hardware.gpu or fabric_gpu(fabric) or DEFAULT_GPU
    gpu = gpu_preset(gpu_name)
    breakeven = gpu.peak_flop_per_s(sc.hardware.dtype) / (bw_GBps * 1e9)
    notes = [f"analytic network: alpha {alpha_ps / 1e3:.1f} ns (one packet GPU 0 -> 1 on the fabric), "
             f"{bw_GBps:.1f} GB/s per GPU (calibrated injection rate of the fabric network)"]
    workloads: dict[str, dict[str, Any]] = {}
    plan: list[tuple[CaseSection, ScheduleEntry, Any]] = []
    for case in sc.cases:
        wl, info = load_workload(case, sc)
        workloads[case.name] = info
        for e in case.schedules:
            if e.name not in S.SCHEDULES:
                raise config_error(f"cases.{case.name}.schedules.name", e.name, f"one of {sorted(S.SCHEDULES)}")
            # Unknown options fail here, before any simulation runs.
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
        bar = tqdm(total=total, desc="simulating", unit="run", file=sys.stderr, leave=True)
    # no [hardware] gpu: the builders take the fabric's GPU and record it (options["gpu_source"])
    hw: dict[str, Any] = {"gpu": sc.hardware.gpu} if sc.hardware.gpu else {"fabric": fabric}
    hw.update(dtype=sc.hardware.dtype, execution=sc.hardware.execution)
    if sc.hardware.profile:
        from pathlib import Path

        from flitsim.cost import read_profile

        pp = Path(sc.hardware.profile)
        hw["profile"] = read_profile(pp if pp.is_absolute() else Path(sc.base_dir) / pp)  # read once, errors early
    common = {**hw, "fabric_devices": fabric.gpus}
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
                b = S.build("tensor_parallel", None, wl, degree=1, **hw)
            else:
                b = S.build("layer_pipeline", case.model, tokens, stages=1, batch=1, **hw)
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
    p = inspect.signature(S.SCHEDULES[name]).parameters.get("batch")
    return int(opts.get("batch", p.default if p is not None else 1))
