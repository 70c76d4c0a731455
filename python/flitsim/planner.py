"""``flitsim plan``: which parallel configuration to run a model on N GPUs of a
fabric — enumerate, filter by memory, prune, simulate, rank (as xDiT and
aiconfigurator users choose configurations).

1. **Enumerate** every configuration on exactly N GPUs that a schedule runs
   (:class:`flitsim.schedules.Parallel`): DiTs — tensor parallel, Ulysses,
   ring, DistriFusion, PipeFusion (patches = stages), USP (u x r), CFG parallel
   and PipeFusion x USP x CFG over every factorisation pp x cfg x r x u = N
   (cfg = 2 only with classifier-free guidance, u dividing the heads, pp at
   most the blocks); LLM prefill — tensor parallel, Ulysses, ring, USP,
   TeraPipe x TP (pp x tp = N; uniform slices, 2 pp of them) and, for MoE
   models, USP x expert parallel (ep = u x r).
2. **Feasible**: the static memory footprint (:mod:`flitsim.memory`, before a
   run) fits the GPU's HBM; the others are listed as ``oom`` with the
   component that broke them, never simulated.
3. **Prune**: each feasible configuration gets a compute-only lower bound —
   its task graph on a zero-cost network (every transfer and collective free;
   pipeline bubbles and dependencies kept). Configurations are simulated on the
   fabric in increasing lower-bound order; once the best simulated latency is
   at most the next lower bound x ``prune_factor`` (default 1: it cannot win),
   the rest are pruned as dominated, listed with their bound.
4. **Simulate** on :class:`flitsim.networks.FabricNetwork` at ``fidelity``
   (default ``"auto"``: flow level where it is validated against packet level,
   packet level otherwise; docs/fidelity.md), then rank by latency with memory
   (timeline peak), speedup over one GPU and the scorecard's structure figures.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from flitsim.errors import ConfigError, check_int, config_error

__all__ = ["PlanResult", "enumerate_configs", "plan", "parse_workload"]


def parse_workload(model: Any, workload: Any, *, steps: int | None = None, frames: int = 1) -> Any:
    """A DitWorkload (``"1024"``, ``"1024px"``, ``"720x1280"``) for a DiT, or a
    prefill length (``"8192"``, ``"prefill:8192"``) for a causal LLM.

    Raises:
        ConfigError: anything else.
    """
    from flitsim.models.zoo import as_model
    from flitsim.workloads import DitWorkload, dit_workload

    cfg = as_model(model)
    if steps is not None and cfg.kind != "dit":  # denoising steps mean nothing to a causal prefill
        raise config_error("steps", steps, f"only for a DiT ({cfg.name} is a causal LLM: its workload is a prefill length)")
    if isinstance(workload, DitWorkload):
        return workload
    # an int is read like its text: a resolution for a DiT (1024 -> 1024 px), a prefill length for an LLM
    text = str(workload).strip().lower()
    try:
        if cfg.kind == "dit":
            text = text.removesuffix("px")
            res: Any = tuple(int(x) for x in text.split("x")) if "x" in text else int(text)
            kw: dict[str, Any] = {"frames": frames}
            if steps is not None:
                kw["steps"] = steps
            return dit_workload(cfg.name, res, **kw)
        n = int(text.removeprefix("prefill:"))
    except ConfigError:
        raise  # dit_workload's own reason (e.g. not a multiple of 16 px); a ConfigError is a ValueError
    except ValueError:
        pass
    else:
        from flitsim.limits import MAX_SEQ_TOKENS

        if not 1 <= n <= MAX_SEQ_TOKENS:  # 0 or 1e11 tokens: every configuration failed (0 silently)
            raise config_error("workload (prefill length, tokens)", workload,
                               f"a prompt length in 1..={MAX_SEQ_TOKENS} for {cfg.name}")
        return n
    want = "a resolution ('1024', '1024px', '720x1280')" if cfg.kind == "dit" else "a prefill length ('8192')"
    raise config_error("workload", workload, f"{want} for {cfg.name}")


def _factorizations(n: int, k: int) -> list[tuple[int, ...]]:
    """Ordered k-tuples of positive integers with product n."""
    if k == 1:
        return [(n,)]
    return [(d, *rest) for d in range(1, n + 1) if n % d == 0 for rest in _factorizations(n // d, k - 1)]


def enumerate_configs(model: Any, workload: Any, gpus: int) -> list[Any]:
    """Every :class:`~flitsim.schedules.Parallel` on exactly ``gpus`` GPUs that a
    schedule runs for ``model`` and ``workload`` (module docstring, step 1)."""
    from flitsim.models.zoo import as_model
    from flitsim.schedules.compose import Parallel
    from flitsim.workloads import DitWorkload

    cfg = as_model(model)
    N = check_int("gpus", gpus)
    heads = cfg.n_heads
    out: list[Parallel] = []
    if N == 1:
        return [Parallel()]
    if isinstance(workload, DitWorkload):
        out.append(Parallel(tp=N)) if heads % N == 0 else None
        if cfg.attention_kind == "softmax":
            out.append(Parallel(distrifusion=N))
        cfgs = (1, 2) if workload.uses_cfg and workload.step_batch % 2 == 0 else (1,)
        for pp, c, r, u in _factorizations(N, 4):
            if c not in cfgs or heads % u or pp > cfg.n_blocks:
                continue
            if r > 1 and cfg.attention_kind != "softmax":
                continue  # ring attention needs softmax attention blocks
            if pp > 1 and workload.image_tokens % pp:
                continue
            out.append(Parallel(pp=pp, cfg=c, ring=r, ulysses=u))
    else:
        for pp, tp in _factorizations(N, 2):
            if heads % tp or pp > cfg.n_layers:
                continue
            if pp == 1:
                out.append(Parallel(tp=tp))
            else:
                out.append(Parallel(pp=pp, tp=tp, options={"slices": 2 * pp}))
        for r, u in _factorizations(N, 2):
            if heads % u or (r == 1 and u == 1):
                continue
            out.append(Parallel(ring=r, ulysses=u))
            if cfg.n_experts and cfg.n_experts % N == 0:
                out.append(Parallel(ring=r, ulysses=u, ep=N))
    return out


@dataclass
class PlanResult:
    """What :func:`plan` found.

    Attributes:
        table: DataFrame, one row per configuration, ranked (simulated by
            latency first, then pruned by bound, then OOM and errors): config,
            schedule, status (``ok`` / ``oom`` / ``pruned`` / ``infeasible`` (the builder refused it; ``note`` says why)), latency_s,
            lower_bound_s, speedup, memory_peak_GB, memory_broken_by,
            bubble_fraction, stage_time_cv, fill_drain_share, flop_per_comm_byte,
            comm_GB, fidelity, note.
        enumerated, infeasible, pruned, simulated: counts.
        wall_s: seconds the plan took.
    """

    table: Any
    enumerated: int
    infeasible: int
    pruned: int
    simulated: int
    wall_s: float
    meta: dict[str, Any] = field(default_factory=dict)

    def summary_line(self) -> str:
        refused = int((self.table["status"] == "infeasible").sum()) if len(self.table) else 0
        return (f"{self.enumerated} configurations enumerated, {self.infeasible} do not fit in memory, "
                + (f"{refused} refused by their builder (infeasible), " if refused else "")
                + f"{self.pruned} pruned as dominated, {self.simulated} simulated ({self.wall_s:.1f} s)")


def _prepare(p: Any, cfg: Any, w: Any, dit: bool, extra: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    """Build one configuration, its static footprint and its compute-only bound:
    (table row, the schedule when it fits, else None)."""
    from flitsim.networks import AnalyticNetwork

    name = p.schedule(dit)[0]
    row: dict[str, Any] = {"config": p.label(), "schedule": name, "status": "", "latency_s": np.nan,
                           "lower_bound_s": np.nan, "speedup": np.nan, "memory_peak_GB": np.nan,
                           "memory_broken_by": "", "bubble_fraction": np.nan, "stage_time_cv": np.nan,
                           "fill_drain_share": np.nan, "flop_per_comm_byte": np.nan, "comm_GB": np.nan,
                           "fidelity": "", "note": ""}
    try:
        s = p.build(cfg, w, **extra)
    except ConfigError as e:
        row.update(status="infeasible", note=str(e))  # the builder refused it: the reason
        return row, None
    fp = s.footprint()
    row["memory_peak_GB"] = fp.peak_bytes / 1e9
    if fp.status == "oom":
        row.update(status="oom", memory_broken_by=fp.broken_by or "")
        return row, None
    row["lower_bound_s"] = s.simulate(AnalyticNetwork()).makespan_ps * 1e-12
    return row, s


def plan(model: Any, workload: Any, *, fabric: Any, gpus: int | None = None, fidelity: str = "auto",
         prune_factor: float = 1.0, steps: int | None = None, workspace_bytes: float | None = None,
         gpu: Any = None, jobs: int = 1) -> PlanResult:
    """Enumerate, filter, prune, simulate and rank (module docstring).

    Args:
        model: zoo name or ModelConfig; workload: a DitWorkload / prefill length
            or a string (:func:`parse_workload`).
        fabric: preset name or FabricSpec; gpus: GPUs to use (default all of the fabric's).
        fidelity: ``packet`` | ``flow`` | ``auto``; prune_factor: >= 1 (larger keeps more).
        steps: denoising steps (DiT, when ``workload`` is a string).
        jobs: worker processes for building and bounding the configurations
            (:func:`flitsim.parallel.map_ordered`: the result is the same at any count).

    Raises:
        ConfigError: unknown model / fabric, more GPUs than the fabric has, a bad workload,
            prune_factor < 1, no configuration at all.
    """
    import pandas as pd

    from flitsim.hardware.fabric import as_fabric
    from flitsim.models.zoo import as_model
    from flitsim.networks import AnalyticNetwork, FabricNetwork
    from flitsim.report.metrics import schedule_metrics
    from flitsim.schedules import build
    from flitsim.workloads import DitWorkload

    t0 = time.perf_counter()
    cfg = as_model(model)
    fab = as_fabric(fabric)
    N = fab.gpus if gpus is None else check_int("gpus", gpus, minimum=1)
    if steps is not None:
        check_int("steps", steps, minimum=1)
    if N > fab.gpus:
        raise config_error("gpus", N, f"at most the fabric {fab.name}'s {fab.gpus} GPUs")
    if isinstance(prune_factor, bool) or not isinstance(prune_factor, (int, float)) or not prune_factor >= 1:
        raise config_error("prune_factor", prune_factor, "a number >= 1")
    w = parse_workload(cfg, workload, steps=steps)
    dit = isinstance(w, DitWorkload)
    configs = enumerate_configs(cfg, w, N)
    extra: dict[str, Any] = {"fabric": fab, "gpu": gpu} if gpu is not None else {"fabric": fab}
    # arguments of every configuration are checked once here: a bad one would mark them all infeasible
    if gpu is not None and not hasattr(gpu, "peak_flop_per_s"):
        from flitsim.hardware import gpu_preset

        gpu_preset(gpu)
    if workspace_bytes is not None:
        from flitsim.memory import check_workspace

        extra["workspace_bytes"] = check_workspace(workspace_bytes)
    from flitsim.parallel import check_jobs, map_ordered

    prepared = map_ordered(_prepare, [(p, cfg, w, dit, extra) for p in configs], check_jobs(jobs))
    rows: list[dict[str, Any]] = [r for r, _ in prepared]
    cands = [(r["lower_bound_s"], i, s) for i, (r, s) in enumerate(prepared) if s is not None]
    single = None
    try:  # the one-GPU reference of the speedup column (compute only: no communication exists)
        from flitsim.schedules.compose import Parallel

        one = Parallel().build(cfg, w, **extra)  # the fabric's GPU, one device
        if one.footprint().status == "ok":
            single = one.simulate(AnalyticNetwork()).makespan_ps * 1e-12
    except ConfigError:
        single = None
    best = np.inf
    pruned = simulated = 0
    net = FabricNetwork(fab, fidelity=fidelity)
    import warnings

    for lb, i, s in sorted(cands, key=lambda x: (x[0], x[1])):
        row = rows[i]
        if np.isfinite(best) and lb >= best * prune_factor:
            row.update(status="pruned", note=f"compute-only bound {lb:.4g} s >= best simulated {best:.4g} s")
            pruned += 1
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = s.simulate(net)
        simulated += 1
        m = schedule_metrics(r)
        fp = r.footprint()
        run_net = r.require_run().network or {}
        row.update(status=fp.status, latency_s=m["makespan_s"], memory_peak_GB=fp.peak_bytes / 1e9,
                   memory_broken_by=fp.broken_by or "", bubble_fraction=m["bubble_fraction_mean"],
                   stage_time_cv=m["stage_time_cv"], fill_drain_share=m["fill_drain_share"],
                   flop_per_comm_byte=m["flop_per_comm_byte"], comm_GB=m["comm_bytes"] / 1e9,
                   fidelity=str(run_net.get("fidelity", fidelity)))
        if single:
            row["speedup"] = single / m["makespan_s"] if m["makespan_s"] else np.nan
        if fp.status == "ok":
            best = min(best, m["makespan_s"])
    if not rows:
        raise config_error("gpus", N, f"a GPU count some schedule runs {cfg.name} on")
    df = pd.DataFrame(rows)
    order = {"ok": 0, "pruned": 1, "oom": 2, "infeasible": 3}
    df["_o"] = df.status.map(order).fillna(4)
    df["_k"] = np.where(df.status == "ok", df.latency_s, df.lower_bound_s)
    df = df.sort_values(["_o", "_k", "memory_peak_GB"], kind="stable").drop(columns=["_o", "_k"]).reset_index(drop=True)
    df.index = pd.RangeIndex(1, len(df) + 1, name="rank")
    infeasible = int((df.status == "oom").sum()) - int(((df.status == "oom") & df.latency_s.notna()).sum())
    return PlanResult(df, len(configs), infeasible, pruned, simulated, time.perf_counter() - t0,
                      {"model": cfg.name, "fabric": fab.name, "gpus": N, "fidelity": fidelity,
                       "workload": w.summary() if dit else {"prefill_tokens": w}, "single_gpu_s": single})
