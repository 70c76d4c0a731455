"""``serve``: a model, a layout on a fabric, a batching policy and a workload
in; per-request timelines and the metrics of every definition out. Also the
rate sweep behind ``flitsim serve --rate 1:64`` and its plot."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from flitsim.errors import ConfigError, check_int, config_error, number_list
from flitsim.serving.arrivals import RequestTable, request_table
from flitsim.serving.engine import GapHistogram, InstanceRun, run_instance
from flitsim.serving.iteration_cost import ModelIterationCost
from flitsim.serving.kv_cache import DEFAULT_BLOCK_TOKENS, kv_capacity
from flitsim.serving import metrics as M

__all__ = ["Layout", "ServeResult", "serve", "parse_rates", "sweep_rates", "plot_sweep", "resolve_workload"]


@dataclass(frozen=True)
class Layout:
    """Model-parallel layout of a deployment: ``replicas`` instances of
    ``tp`` x ``pp`` GPUs each, on consecutive GPU ids from ``first_gpu``
    (instance r, stage s, rank k: ``first_gpu + r tp pp + s tp + k``; a TP
    group stays inside consecutive ids, i.e. inside a node / NVLink domain on
    every preset). Requests are dispatched round-robin over the replicas."""

    tp: int = 1
    pp: int = 1
    replicas: int = 1
    first_gpu: int = 0

    def __post_init__(self) -> None:
        check_int("layout.tp", self.tp, 1, 1024)
        check_int("layout.pp", self.pp, 1, 1024)
        check_int("layout.replicas", self.replicas, 1, 4096)
        check_int("layout.first_gpu", self.first_gpu, 0)

    @classmethod
    def of(cls, x: Any, field_name: str = "layout") -> "Layout":
        """A Layout from itself, a dict of its fields, or None (1 GPU)."""
        if x is None:
            return cls()
        if isinstance(x, Layout):
            return x
        if isinstance(x, dict):
            bad = set(x) - {"tp", "pp", "replicas", "first_gpu"}
            if bad:
                raise config_error(field_name, x, f"keys among tp, pp, replicas, first_gpu (unknown {sorted(bad)})")
            return cls(**x)
        raise config_error(field_name, x, "a Layout or a dict with tp, pp, replicas")

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.replicas

    def devices(self, replica: int) -> list[int]:
        """GPU ids of instance ``replica``, stage-major."""
        n = self.tp * self.pp
        return list(range(self.first_gpu + replica * n, self.first_gpu + (replica + 1) * n))

    def label(self) -> str:
        return f"TP{self.tp}" + (f"xPP{self.pp}" if self.pp > 1 else "") + (f" x{self.replicas}" if self.replicas > 1 else "")


@dataclass
class ServeResult:
    """Outcome of :func:`serve`.

    Attributes:
        arrival_s, first_token_s, finish_s: per request (table order), s.
        input_tokens, output_tokens, preemptions, instance: per request.
        transfer_s: per request K/V transfer time (disaggregated), else NaN.
        gaps: pooled inter-token gaps (:class:`~flitsim.serving.engine.GapHistogram`).
        config: what ran (model, fabric, layout, policy, budgets, capacity...).
        instances: per instance statistics (iterations, busy_s, peak blocks...).
    """

    arrival_s: np.ndarray
    first_token_s: np.ndarray
    finish_s: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    preemptions: np.ndarray
    instance: np.ndarray
    transfer_s: np.ndarray
    gaps: GapHistogram
    config: dict[str, Any] = field(default_factory=dict)
    instances: list[dict[str, Any]] = field(default_factory=list)

    def per_request(self) -> dict[str, np.ndarray]:
        """:func:`flitsim.serving.metrics.per_request` arrays."""
        return M.per_request(self.arrival_s, self.first_token_s, self.finish_s, self.output_tokens)

    @property
    def duration_s(self) -> float:
        """Benchmark duration: t = 0 to the last completion, s."""
        return float(np.nanmax(self.finish_s))

    @property
    def saturated_tokens_per_s(self) -> float:
        """Output tokens/s while every instance had requests waiting, summed over
        instances (:attr:`InstanceRun.saturated_s`): the throughput of an
        Offline run long enough that its drain does not count (MLPerf Offline
        runs >= 2,400 s). NaN when an instance's queue never emptied early."""
        rates = [s["saturated_tokens"] / s["saturated_s"] for s in self.instances
                 if s.get("saturated_s", 0.0) > 0]
        if len(rates) != len(self.instances) or not rates:
            return float("nan")
        return float(sum(rates))

    def metrics(self) -> Any:
        """All metrics side by side (:func:`flitsim.serving.metrics.side_by_side`)."""
        return M.side_by_side(self.per_request(), self.gaps, self.input_tokens, self.output_tokens,
                              self.arrival_s, self.finish_s)

    def goodput_rps(self, **slo: float | None) -> float:
        """vLLM goodput at ``slo_ttft_s`` / ``slo_tpot_s`` / ``slo_e2e_s``."""
        r = self.per_request()
        return M.goodput_rps(r["ttft_s"], r["tpot_s"], r["e2e_s"], self.duration_s, **slo)

    def mlperf_server(self, limits: dict[str, float] | None = None) -> dict[str, Any]:
        """MLPerf Server pass/fail (:func:`flitsim.serving.metrics.mlperf_server`)."""
        r = self.per_request()
        return M.mlperf_server(r["ttft_s"], r["tpot_s"], limits)

    def summary(self) -> dict[str, Any]:
        """JSON-safe headline numbers (vLLM definitions unless named)."""
        r = self.per_request()
        d = self.duration_s
        out = {"requests": int(len(self.arrival_s)), "duration_s": d,
               "request_throughput_rps": len(self.arrival_s) / d,
               "output_tokens_per_s": float(self.output_tokens.sum()) / d,
               "mean_ttft_s": float(np.nanmean(r["ttft_s"])), "p99_ttft_s": float(np.nanpercentile(r["ttft_s"], 99)),
               "mean_tpot_s": float(np.nanmean(r["tpot_s"])) if np.isfinite(r["tpot_s"]).any() else float("nan"),
               "p99_tpot_s": float(np.nanpercentile(r["tpot_s"], 99)) if np.isfinite(r["tpot_s"]).any() else float("nan"),
               "mean_itl_s": self.gaps.mean_s, "p99_itl_s": self.gaps.percentile_s(99),
               "mean_e2e_s": float(np.nanmean(r["e2e_s"])),
               "normalized_latency_s_per_token": float(np.nanmean(r["normalized_latency_s"])),
               "preemptions": int(self.preemptions.sum()), "mlperf_server_passed": self.mlperf_server()["passed"]}
        if np.isfinite(self.transfer_s).any():
            share = self.transfer_s / r["ttft_s"]
            out.update(mean_kv_transfer_s=float(np.nanmean(self.transfer_s)),
                       mean_kv_transfer_share_of_ttft=float(np.nanmean(share)),
                       p99_kv_transfer_s=float(np.nanpercentile(self.transfer_s, 99)))
        return out


LLMPERF_WORKLOAD = {"mean_input_tokens": 550, "stddev_input_tokens": 150, "mean_output_tokens": 150,
                    "stddev_output_tokens": 10}
"""``workload="llmperf"`` (the CLI's default): LLMPerf's example lengths
(ray-project/llmperf README: input N(550, 150), output N(150, 10))."""


def resolve_workload(workload: Any, columns: Any = None, n: int | None = None) -> Any:
    """An LlmWorkload from itself, ``"llmperf"`` (:data:`LLMPERF_WORKLOAD`), a
    shipped trace name / CSV path (with ``columns``: the CSV's names for
    timestamp, input_tokens, output_tokens), or a dict of
    :class:`~flitsim.workloads.LLMPerfSpec` fields.

    Raises:
        ConfigError: anything else; what load_trace / LLMPerfSpec raise.
    """
    from flitsim.errors import check_int
    from flitsim.workloads import LLMPerfSpec, LlmWorkload, llmperf_workload, load_trace

    if n is not None:
        # named here: load_trace would blame the trace for a bad row count
        n = check_int("n", n, 1, what="a request count")
    if isinstance(workload, LlmWorkload):
        return workload
    if workload == "llmperf":
        workload = dict(LLMPERF_WORKLOAD)
    if isinstance(workload, str):
        return load_trace(workload, columns, limit=n)
    if isinstance(workload, dict):
        d = dict(workload)
        if n is not None:
            d["n_requests"] = n
        return llmperf_workload(LLMPerfSpec(**d))
    raise config_error("workload", workload, "an LlmWorkload, a trace name or CSV path, or a dict of LLMPerfSpec fields")


def _gpu_of(fabric: Any, gpu: Any) -> Any:
    from flitsim.hardware.gpus import fabric_gpu

    if gpu is not None:
        return gpu
    g = fabric_gpu(fabric) if fabric is not None else None
    if g is None:
        raise config_error("gpu", None, "a GPU preset name (the fabric does not name one)")
    return g


def serve(model: Any, workload: Any, *, fabric: Any = "hgx-h100", gpu: Any = None, layout: Any = None,
          policy: str = "chunked", dtype: str = "bf16", kv_dtype: str | None = None,
          max_num_batched_tokens: int = 2048, max_num_seqs: int = 128, block_tokens: int = DEFAULT_BLOCK_TOKENS,
          memory_utilization: float = 0.9, kv_blocks: int | None = None, arrival: str | None = None,
          rate: Any = None, cv: float = 1.0, seed: int = 0, n: int | None = None, time_scale: float = 1.0,
          columns: Any = None, network: str = "fabric", fidelity: str | None = "auto",
          execution: Any = "cuda_graph", disaggregated: Any = None, kv_fidelity: str | None = "packet",
          contention: bool = True, cost: Any = None, micro_batches: int | None = None,
          pipeline_prefill: bool = False, reserve_kv: bool = False) -> ServeResult:
    """Serve a workload on a fabric.

    Args:
        model: causal model preset name or ModelConfig.
        workload: LlmWorkload, ``"llmperf"`` (as the CLI), trace name / CSV
            path (``columns`` maps its columns), or a dict of LLMPerfSpec fields.
        fabric: fabric preset name or FabricSpec (the GPUs and the network).
        gpu: GPU preset (default: the fabric's).
        layout: :class:`Layout` (or dict) of a colocated deployment.
        policy: ``static``, ``continuous``, ``chunked`` (:mod:`.scheduler`).
        dtype, kv_dtype: weights/GEMM and K/V dtypes.
        max_num_batched_tokens, max_num_seqs, block_tokens: scheduler budgets (vLLM names).
        memory_utilization, kv_blocks: K/V capacity from the memory model
            (:func:`kv_capacity`), or ``kv_blocks`` per instance to override it.
        arrival, rate, cv, seed, n, time_scale: the arrival process (:func:`request_table`).
        network: ``fabric`` (TP collectives on the fabric) or ``ideal`` (free).
        fidelity: fabric fidelity of the TP collectives (``auto``: flow where validated).
        disaggregated: ``{"prefill": Layout/dict, "decode": Layout/dict}``:
            prefill and decode instances on different GPUs of the fabric
            (``layout`` is then unused); K/V moved per request (:mod:`.disagg`)
            at ``kv_fidelity``, with the instances' TP traffic if ``contention``.
        cost: an iteration cost model to use instead of the kernel model (tests).
        micro_batches: batches in flight through a pipeline-parallel instance
            (default ``pp``: every stage busy, TensorRT-LLM's in-flight batching
            with pipeline parallelism; 1: one batch at a time).
        pipeline_prefill: chunked pipeline prefill across the stages (a
            prompt's chunks in successive micro-batches; :func:`run_instance`).
        reserve_kv: admit requests only with their whole K/V reserved
            (TensorRT-LLM's default GUARANTEED_NO_EVICT; vLLM admits greedily and preempts).

    Raises:
        ConfigError: bad workload, rate, policy, budgets; a layout that does
            not fit the fabric (``layout`` / ``disaggregated``); a K/V capacity
            below the largest request (``kv_blocks``).
        StalledError: a run that cannot make progress.
    """
    from flitsim.hardware.fabric import as_fabric
    from flitsim.models.zoo import as_model

    cfg = as_model(model)
    if network not in ("fabric", "ideal"):
        raise config_error("network", network, "'fabric' or 'ideal'")
    fab = as_fabric(fabric)
    g = _gpu_of(fab, gpu)
    wl = resolve_workload(workload, columns, n if isinstance(workload, (str, dict)) else None)
    table = request_table(wl, arrival=arrival, rate=rate, cv=cv, seed=seed, n=n, time_scale=time_scale)
    common = dict(policy=policy, max_num_batched_tokens=max_num_batched_tokens, max_num_seqs=max_num_seqs,
                  block_tokens=block_tokens, micro_batches=micro_batches, pipeline_prefill=pipeline_prefill,
                  reserve_kv=reserve_kv)
    base = {"model": cfg.name, "fabric": fab.name, "gpu": g if isinstance(g, str) else g.name, "policy": policy,
            "dtype": dtype, "kv_dtype": kv_dtype or dtype, "max_num_batched_tokens": max_num_batched_tokens,
            "max_num_seqs": max_num_seqs, "block_tokens": block_tokens, "arrival": table.arrival, "rate": rate,
            "tokenizer": table.tokenizer, "network": network, "fidelity": fidelity, "preemption": "none (K/V reserved)" if reserve_kv else "recompute",
            "micro_batches": micro_batches, "pipeline_prefill": pipeline_prefill, "reserve_kv": reserve_kv}

    def instance_cost(lay: Layout, budget_tokens: int) -> Any:
        if cost is not None:
            return cost
        return ModelIterationCost(cfg, g, tp=lay.tp, pp=lay.pp, dtype=dtype, kv_dtype=kv_dtype,
                                  network=None if network == "ideal" else fab, devices=lay.devices(0),
                                  fidelity=fidelity, execution=execution, max_tokens=budget_tokens)

    def capacity(lay: Layout, field_name: str) -> int:
        if kv_blocks is not None:
            return check_int("kv_blocks", kv_blocks, 1)
        try:
            return kv_capacity(cfg, g, tp=lay.tp, pp=lay.pp, dtype=dtype, kv_dtype=kv_dtype,
                               token_budget=max_num_batched_tokens, block_tokens=block_tokens,
                               memory_utilization=memory_utilization).blocks
        except ConfigError as e:
            raise ConfigError(f"{field_name}: {e}") from None

    def fits(lay: Layout, field_name: str) -> None:
        if lay.first_gpu + lay.gpus > fab.gpus:
            raise config_error(field_name, lay.label(), f"a layout within {fab.name}'s {fab.gpus} GPUs "
                               f"(needs GPUs {lay.first_gpu}..{lay.first_gpu + lay.gpus - 1})")

    if disaggregated is None:
        lay = Layout.of(layout)
        fits(lay, "layout")
        blocks = capacity(lay, "layout")
        c = instance_cost(lay, max_num_batched_tokens)
        runs = _run_replicas(table, lay.replicas, c, blocks, common)
        res = _assemble(table, runs, lay.replicas, np.full(len(table), np.nan))
        res.config = {**base, "layout": lay.label(), "tp": lay.tp, "pp": lay.pp, "replicas": lay.replicas,
                      "kv_blocks_per_instance": blocks,
                      "iteration_time_s": dict(getattr(c, "totals", {}))}
        return res
    return _serve_disaggregated(cfg, fab, g, table, disaggregated, common, base, instance_cost, capacity, fits,
                                kv_dtype or dtype, kv_fidelity, contention, max_num_batched_tokens, max_num_seqs)


def _split(table: RequestTable, replicas: int) -> list[np.ndarray]:
    idx = np.arange(len(table))
    return [idx[idx % replicas == r] for r in range(replicas)]


def _sub(table: RequestTable, ix: np.ndarray, arrival: np.ndarray | None = None,
         out: np.ndarray | None = None) -> tuple[RequestTable, np.ndarray]:
    """The requests ``ix`` (with new arrival times / outputs), sorted by arrival, and their indices in that order."""
    a = table.arrival_s[ix] if arrival is None else arrival
    o = table.output_tokens[ix] if out is None else out
    order = np.argsort(a, kind="stable")
    return RequestTable(a[order], table.input_tokens[ix][order], o[order], table.tokenizer, table.source,
                        table.arrival), ix[order]


def _run_replicas(table: RequestTable, replicas: int, cost: Any, blocks: int, common: dict,
                  **kw: Any) -> list[tuple[np.ndarray, InstanceRun]]:
    runs = []
    for ix in _split(table, replicas):
        if len(ix) == 0:
            continue
        sub, order = _sub(table, ix)
        runs.append((order, run_instance(sub, cost, kv_blocks=blocks, **common, **kw)))
    return runs


def _assemble(table: RequestTable, runs: list[tuple[np.ndarray, InstanceRun]], replicas: int,
              transfer: np.ndarray) -> ServeResult:
    n = len(table)
    first, fin = np.full(n, np.nan), np.full(n, np.nan)
    pre = np.zeros(n, np.int64)
    inst = np.zeros(n, np.int64)
    gaps = GapHistogram()
    stats = []
    for k, (ix, r) in enumerate(runs):
        first[ix], fin[ix], pre[ix], inst[ix] = r.first_token_s, r.finish_s, r.preemptions, k
        gaps.merge(r.gaps)
        stats.append({"requests": len(ix), "iterations": r.iterations, "busy_s": r.busy_s,
                      "makespan_s": r.makespan_s, "kv_blocks": r.kv_blocks, "kv_peak_blocks": r.kv_peak_blocks,
                      "preemptions": r.preemptions_total, "tokens_prefilled": r.tokens_prefilled,
                      "tokens_decoded": r.tokens_decoded, "in_system_request_s": r.in_system_s,
                      "saturated_s": r.saturated_s, "saturated_tokens": r.saturated_tokens})
    return ServeResult(table.arrival_s.copy(), first, fin, table.input_tokens.copy(), table.output_tokens.copy(),
                       pre, inst, transfer, gaps, instances=stats)


def _serve_disaggregated(cfg: Any, fab: Any, g: Any, table: RequestTable, spec: Any, common: dict, base: dict,
                         instance_cost: Any, capacity: Any, fits: Any, kv_dtype: str, kv_fidelity: Any,
                         contention: bool, budget: int, max_seqs: int) -> ServeResult:
    from flitsim.serving.disagg import KvTransfer

    if not isinstance(spec, dict) or set(spec) - {"prefill", "decode"} or not {"prefill", "decode"} <= set(spec):
        raise config_error("disaggregated", spec, "a dict with 'prefill' and 'decode' layouts")
    P = Layout.of(spec["prefill"], "disaggregated.prefill")
    D0 = Layout.of(spec["decode"], "disaggregated.decode")
    D = Layout(D0.tp, D0.pp, D0.replicas, D0.first_gpu or P.first_gpu + P.gpus)
    fits(P, "disaggregated.prefill")
    fits(D, "disaggregated.decode")
    if D.first_gpu < P.first_gpu + P.gpus and P.first_gpu < D.first_gpu + D.gpus:
        raise config_error("disaggregated.decode.first_gpu", D.first_gpu, "GPUs after the prefill instances")
    # 1) prefill instances: each request leaves after its first token
    n = len(table)
    one = np.ones(n, np.int64)
    pre_table = RequestTable(table.arrival_s, table.input_tokens, one, table.tokenizer, table.source, table.arrival)
    pc = instance_cost(P, budget)
    pruns = _run_replicas(pre_table, P.replicas, pc, capacity(P, "disaggregated.prefill"), common)
    pfirst = np.full(n, np.nan)
    for ix, r in pruns:
        pfirst[ix] = r.first_token_s
    # 2) K/V transfer, prefill replica i % P -> decode replica i % D
    hidden_b = cfg.hidden * 2
    kvt = KvTransfer(fab, cfg, kv_dtype, P.devices(0)[: P.tp], D.devices(0)[: D.tp], fidelity=kv_fidelity,
                     contention=contention, prefill_tp_bytes=budget * hidden_b if P.tp > 1 else 0,
                     decode_tp_bytes=max_seqs * hidden_b if D.tp > 1 else 0)
    transfer = np.array([kvt.time_s(int(x)) for x in table.input_tokens])
    ready = pfirst + transfer
    # 3) decode instances: requests arrive with their K/V and first token
    needs = table.output_tokens > 1
    dc = instance_cost(D, max(budget, max_seqs))
    dblocks = capacity(D, "disaggregated.decode")
    first, fin = ready.copy(), ready.copy()
    pre = np.zeros(n, np.int64)
    inst = np.zeros(n, np.int64)
    gaps = GapHistogram()
    stats = [{"role": "prefill", "iterations": r.iterations, "busy_s": r.busy_s, "makespan_s": r.makespan_s,
              "kv_peak_blocks": r.kv_peak_blocks, "preemptions": r.preemptions_total} for _, r in pruns]
    ids = np.nonzero(needs)[0]
    for k in range(D.replicas):
        ix = ids[np.arange(len(ids)) % D.replicas == k]
        if len(ix) == 0:
            continue
        sub, order = _sub(table, ix, arrival=ready[ix])
        r = run_instance(sub, dc, kv_blocks=dblocks, prefilled=True, **common)
        fin[order], pre[order], inst[order] = r.finish_s, r.preemptions, P.replicas + k
        gaps.merge(r.gaps)
        stats.append({"role": "decode", "iterations": r.iterations, "busy_s": r.busy_s, "makespan_s": r.makespan_s,
                      "kv_peak_blocks": r.kv_peak_blocks, "preemptions": r.preemptions_total})
    res = ServeResult(table.arrival_s.copy(), first, fin, table.input_tokens.copy(), table.output_tokens.copy(), pre,
                      inst, transfer, gaps, instances=stats)
    res.config = {**base, "layout": f"prefill {P.label()} | decode {D.label()}", "disaggregated": True,
                  "kv_fidelity": kv_fidelity, "contention": contention, "kv_transfer_runs": kvt.runs}
    return res


def parse_rates(text: str) -> list[float]:
    """Request rates from ``"1:64"`` (doubling: 1, 2, 4, ..., 64), ``"1:64:7"``
    (7 log-spaced points) or ``"1,2,5"``.

    Raises:
        ConfigError: anything else, or a rate <= 0.
    """
    try:
        if ":" in text:
            parts = [float(p) for p in text.split(":")]
            if not all(math.isfinite(p) for p in parts):  # '1:inf' raised OverflowError from the point count
                raise ValueError(text)
            if len(parts) == 2:
                lo, hi = parts
                k = int(math.floor(math.log2(hi / lo) + 1e-9)) if lo > 0 and hi >= lo else -1
                rates = [lo * 2 ** i for i in range(k + 1)]
                if rates and rates[-1] < hi:
                    rates.append(hi)
            elif len(parts) == 3:
                lo, hi, m = parts
                if m != int(m) or m > MAX_RATE_POINTS:  # 2.5 points were 2; 1e9 points allocated 8 GB
                    raise config_error("rate", text, f"'lo:hi:n' with a whole n in 1..={MAX_RATE_POINTS}")
                rates = list(np.geomspace(lo, hi, int(m))) if lo > 0 and hi >= lo and m >= 1 else []
            else:
                rates = []
        else:
            rates = number_list("rate", text, "'lo:hi' (doubling), 'lo:hi:n' (n log-spaced) or 'r1,r2,...', each > 0")
    except ConfigError:
        raise
    except (ValueError, ZeroDivisionError, OverflowError):
        rates = []
    if not rates or any(not (r > 0 and math.isfinite(r)) for r in rates):
        raise config_error("rate", text, "'lo:hi' (doubling), 'lo:hi:n' (n log-spaced) or 'r1,r2,...', each > 0")
    if len(rates) > MAX_RATE_POINTS:  # '1e-300:1' doubled into 997 serving runs
        raise config_error("rate", text, f"at most {MAX_RATE_POINTS} rates (this is {len(rates)})")
    return [float(r) for r in rates]


MAX_RATE_POINTS = 256
"""Most request rates one ``rate`` string may give (each is a whole serving run)."""


def sweep_rates(model: Any, workload: Any, rates: Sequence[float], *, slo_ttft_s: float | None = None,
                slo_tpot_s: float | None = None, **kwargs: Any) -> Any:
    """:func:`serve` at every rate (same seed, so the same lengths): one row
    per rate with the headline metrics, goodput at the SLO (vLLM definition)
    and the MLPerf Server verdict.

    Returns:
        DataFrame indexed by ``rate_rps``.
    """
    import pandas as pd

    rows = []
    for r in rates:
        res = serve(model, workload, rate=r, **kwargs)
        s = res.summary()
        if slo_ttft_s is not None or slo_tpot_s is not None:
            s["goodput_rps"] = res.goodput_rps(slo_ttft_s=slo_ttft_s, slo_tpot_s=slo_tpot_s)
        rows.append({"rate_rps": r, **s})
    return pd.DataFrame(rows).set_index("rate_rps")


def plot_sweep(curves: dict[str, Any], path: str | None = None) -> Any:
    """Throughput-latency curves: output tokens/s against p99 TPOT and mean
    TTFT, one line per label of ``curves`` (label -> :func:`sweep_rates`
    frame). Saves a PNG to ``path`` when given; returns the figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for label, df in curves.items():
        axes[0].plot(df["output_tokens_per_s"], df["p99_tpot_s"] * 1e3, marker="o", label=label)
        axes[1].plot(df["output_tokens_per_s"], df["mean_ttft_s"] * 1e3, marker="o", label=label)
    axes[0].set_ylabel("p99 TPOT (ms, vLLM definition)")
    axes[1].set_ylabel("mean TTFT (ms)")
    for ax in axes:
        ax.set_xlabel("output tokens/s")
        ax.set_yscale("log")
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    if path:
        fig.savefig(path, dpi=120)
    return fig
