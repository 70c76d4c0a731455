"""Running a scenario: every (case, schedule) simulated on its network (the
cycle-level fabric or the analytic network parametrised from it), each LLM
distribution at its representative lengths, with the 1-GPU baseline, then
metrics, critical paths, scorecards and the conclusion gathered into a
:class:`~flitsim.scenario.result.ScenarioResult`."""

from __future__ import annotations

import dataclasses
import inspect
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import flitsim.schedules as S
from flitsim.cost import read_profile
from flitsim.errors import ConfigError, config_error
from flitsim.hardware import fabric_gpu, gpu_preset
from flitsim.schedules.builder import DEFAULT_GPU
from flitsim.schedules.registry import schedule_options
from flitsim.networks import AnalyticNetwork, FabricNetwork
from flitsim.parallel import check_jobs, map_ordered
from flitsim.report.critical_path import critical_path
from flitsim.report.metrics import dit_latency, fabric_metrics, llm_latency_table, schedule_metrics, token_times_s
from flitsim.report.scorecard import scorecard
from flitsim.scenario.cases import info_kind, load_workload
from flitsim.scenario.map import run_map
from flitsim.scenario.result import RunRecord, ScenarioResult, conclusion, memory_columns
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


def run_scenario(scenario: Scenario | str | os.PathLike[str], *, progress: bool = True, jobs: int = 1) -> ScenarioResult:
    """Simulate every (case, schedule) of a scenario.

    Args:
        scenario: a :class:`Scenario` or a TOML path.
        progress: progress on stderr (a bar on a terminal, periodic lines otherwise).
        jobs: worker processes; the (case, schedule) runs are independent and
            each is deterministic, so results are bit-identical at any count
            (``flitsim run -j N``; 1 = in this process).

    Returns:
        :class:`ScenarioResult` (call ``.write(out_dir)`` for the report).

    Raises:
        ConfigError: invalid scenario, unknown schedule / model / option,
            ``jobs`` < 1.
        StalledError: a simulation that can never finish.
    """
    t_all = time.perf_counter()
    sc = scenario if isinstance(scenario, Scenario) else load_scenario(scenario)
    jobs = check_jobs(jobs)
    if not sc.cases:  # a map-only scenario
        mres = run_map(sc, jobs=jobs, progress=progress)
        return ScenarioResult(sc, [], {}, pd.DataFrame(), [], time.perf_counter() - t_all,
                              [f"map: {len(mres.rows)} workloads x {len(mres.columns)} fabrics, {len(mres.runs)} schedule "
                               f"runs in {mres.wall_s:.1f} s"], map=mres)
    fabric = fabric_spec(sc)
    cp = sc.fabric.collective_params
    if cp is not None and not os.path.isabs(cp):
        cp = os.path.join(sc.base_dir, cp)
    fab_net = FabricNetwork(fabric, collective_params=cp)
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
            # (the options S.build takes: usp / cfg_parallel / PipeFusion hybrids included)
            allowed = schedule_options(e.name)
            for key in e.options:
                if key not in allowed:
                    raise config_error(f"cases.{case.name}.schedules.{e.label or e.name}.options.{key}",
                                       e.options[key], f"an option of {e.name}: one of {allowed}")
            plan.append((case, e, wl))
    total = sum(1 if (e.name == "decode" or info_kind(workloads[c.name]) == "dit") else len(workloads[c.name]["reps"])
                for c, e, _ in plan)
    bar = None
    if progress:
        from flitsim._progress import progress_bar

        bar = progress_bar(total, "simulating", "run", sys.stderr)
    # no [hardware] gpu: the builders take the fabric's GPU and record it (options["gpu_source"])
    hw: dict[str, Any] = {"gpu": sc.hardware.gpu} if sc.hardware.gpu else {"fabric": fabric}
    hw.update(dtype=sc.hardware.dtype, execution=sc.hardware.execution)
    if sc.hardware.profile:
        pp = Path(sc.hardware.profile)
        hw["profile"] = read_profile(pp if pp.is_absolute() else Path(sc.base_dir) / pp)  # read once, errors early
    common = {**hw, "fabric_devices": fabric.gpus}
    ctx = _Context(sc, fab_net, ana_net, workloads, common, hw)
    steps = [(1 if (e.name == "decode" or info_kind(workloads[c.name]) == "dit") else len(workloads[c.name]["reps"]))
             for c, e, _ in plan]

    def done(i: int, rec: RunRecord) -> None:
        if bar:
            bar.update(steps[i])
            bar.set_postfix_str(f"{rec.case[:24]} / {rec.label[:20]}")

    runs = map_ordered(_run_entry, [(ctx, c, e, wl) for c, e, wl in plan], jobs, done)
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
    concl = conclusion(runs, cards_df)
    mres = None
    if sc.map is not None:
        mres = run_map(sc, jobs=jobs, progress=progress)
        notes.append(f"map: {len(mres.rows)} workloads x {len(mres.columns)} fabrics, {len(mres.runs)} schedule runs "
                     f"in {mres.wall_s:.1f} s")
    return ScenarioResult(sc, runs, workloads, cards_df, concl, time.perf_counter() - t_all, notes, map=mres)


@dataclasses.dataclass(frozen=True)
class _Context:
    """What one (case, schedule) run needs (picklable: sent to worker processes)."""

    sc: Scenario
    fab_net: FabricNetwork
    ana_net: AnalyticNetwork
    workloads: dict[str, dict[str, Any]]
    common: dict[str, Any]
    hw: dict[str, Any]


_BASELINES: dict[tuple[Any, ...], float] = {}
"""1-GPU baseline times per (scenario title, case, tokens), per process: each
worker computes the ones it needs (deterministic, so every process agrees)."""


def _simulate(ctx: _Context, sched: Any, mode: str | None, fidelity: str | None) -> tuple[Any, str]:
    mode = mode or ctx.sc.fabric.network
    if mode == "analytic":
        return S.simulate(sched, ctx.ana_net), "analytic"
    net = ctx.fab_net if fidelity is None else dataclasses.replace(ctx.fab_net, fidelity=fidelity)
    return S.simulate(sched, net), "fabric"


def _one_gpu(ctx: _Context, case: CaseSection, wl: Any, tokens: int | None) -> float:
    sc = ctx.sc
    key = (sc.title, case.name, tokens)
    if key not in _BASELINES:
        if info_kind(ctx.workloads[case.name]) == "dit":
            b = S.build("tensor_parallel", None, wl, degree=1, **ctx.hw)
        else:
            b = S.build("layer_pipeline", case.model, tokens, stages=1, batch=1, **ctx.hw)
        _BASELINES[key] = S.simulate(b, None).makespan_ps * 1e-12
    return _BASELINES[key]


def _run_entry(ctx: _Context, case: CaseSection, e: ScheduleEntry, wl: Any) -> RunRecord:
    """Simulate one (case, schedule) at its representative sequences."""
    info = ctx.workloads[case.name]
    label = e.label or e.name
    opts = {**ctx.common, **e.options}
    t0 = time.perf_counter()
    per: list[tuple[Any, dict[str, Any]]] = []
    scheds = []
    nets = set()
    try:
        if e.name == "decode":
            todo: list[tuple[Any, Any]] = [(None, S.build("decode", case.model, info["workload"], **opts))]
            base = None
        elif info["kind"] == "dit":
            todo = [(None, S.build(e.name, None, wl, **opts))]
            base = _one_gpu(ctx, case, wl, None) if case.baseline else None
        else:
            todo = [(tok, S.build(e.name, case.model, tok, **opts)) for tok in info["reps"]]
            base = 0.0 if case.baseline else None
    except ConfigError as err:
        # The builder names its own field; say which case and schedule of the file it came from.
        raise ConfigError(f"cases.{case.name}.schedules.{label}: {err}") from err
    for tok, built in todo:
        sched, net = _simulate(ctx, built, e.network, e.fidelity)
        per.append((tok, schedule_metrics(sched)))
        scheds.append(sched)
        nets.add(net)
        if base is not None and info["kind"] != "dit" and e.name != "decode":
            base += _one_gpu(ctx, case, wl, tok)
    if base is not None and info["kind"] != "dit" and e.name != "decode":
        base *= _work_multiple(e.name, opts) / len(info["reps"])
    rep = scheds[len(scheds) // 2]
    net_label = " + ".join(sorted(nets))
    fab = None
    if net_label == "fabric":
        fab = fabric_metrics(rep.run.network["links"], rep.run.network["switch_ports"], rep.run.makespan_ps)
    is_ana = net_label != "fabric"
    bw_GBps, alpha_ps = ctx.ana_net.bandwidth_GBps, ctx.ana_net.alpha_ps
    cp = critical_path(rep, bytes_per_ps=bw_GBps * 1e9 / 1e12, alpha_ps=alpha_ps if is_ana else 0)
    rec = RunRecord(case.name, label, e.name, len(rep.devices), rep.stages, rep, _aggregate([m for _, m in per]),
                    per, net_label, fab, cp, base, time.perf_counter() - t0, memory=memory_columns(scheds))
    fids = sorted({str(s.run.network.get("fidelity", "analytic")) for s in scheds})
    rec.fidelity = " + ".join(fids)
    reasons = sorted({str(s.run.network.get("fidelity_reason", "")) for s in scheds} - {""})
    rec.fidelity_reason = "; ".join(reasons) if reasons else (
        "analytic network (one rate + one latency per GPU)" if is_ana else "")
    if e.name == "decode":
        tt = token_times_s(rep)
        rec.token_times = tt
        rec.llm_latency = llm_latency_table(tt)
    if info["kind"] == "dit":
        rec.dit = dit_latency(rep, images=info["workload"].batch)
    return rec


def _work_multiple(name: str, opts: dict[str, Any]) -> int:
    """Sequences one prefill schedule processes (its ``batch`` option or the
    builder's default), so the 1-GPU baseline does the same work."""
    p = inspect.signature(S.SCHEDULES[name]).parameters.get("batch")
    return int(opts.get("batch", p.default if p is not None else 1))
