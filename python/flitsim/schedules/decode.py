"""LLM serving of a batch of requests: prefill, then per-token decode steps
whose cost is dominated by reading the weights and the K/V cache
(memory-bound), on a pipeline of ``stages`` x ``tp`` devices.

Model (stated, simple): the first ``requests`` requests of an
:class:`~flitsim.workloads.LlmWorkload` are submitted together at t = 0 (an
offline batch, like vLLM's benchmark at an infinite request rate; arrival
times are not simulated). They are dealt round-robin into ``micro_batches``
micro-batches (default: one per stage, so the stages stay busy). Each
micro-batch is prefilled (one task per stage: all its prompts, 1 sampled token
each), then runs decode steps: step k (k >= 1) generates token k + 1 of every
request whose output is longer than k, at context ``input + k`` (the step's
cost uses the batch's mean context, exact for attention FLOPs and K/V bytes,
which are linear in it). A micro-batch's step k at stage 0 waits for its step
k - 1 at the last stage (the sampled token comes back: a transfer of 4 bytes
per request) — one task per (micro-batch, step, stage). With ``tp`` > 1 each
stage is ``tp`` devices running 1/tp of the heads and FFN; the 2 all-reduces
per layer of a stage step are issued as **one** all-reduce of their summed size
(so alpha is charged once per stage step, an underestimate of latency cost).

Metrics (vLLM benchmark_serving definitions, vllm-project/vllm benchmarks):
TTFT = end of the request's prefill at the last stage - arrival (0);
TPOT = (latency - TTFT) / (output tokens - 1), latency = end of its last
decode step; NaN for one-token outputs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from flitsim.errors import config_error
from flitsim.memory import pipeline_memory
from flitsim.models import handoff_bytes
from flitsim.models.kernels import Kernels, decode_kernels, slice_kernels
from flitsim.models.zoo import as_model
from flitsim.schedules.builder import Hardware, check_int, new_builder, resolve_devices
from flitsim.schedules.schedule import Schedule
from flitsim.schedules.terapipe import stage_layers

__all__ = ["build_decode", "request_metrics"]


def build_decode(model: Any, workload: Any, *, devices: Any = None, stages: int = 1, tp: int = 1,
                 requests: int | None = 32, micro_batches: int | None = None, gpu: Any = None,
                 efficiency: Any = None, dtype: str = "bf16", fabric_devices: int | None = None,
                 comm_streams: int = 1, execution: Any = None, profile: Any = None, interference: Any = None, fabric: Any = None) -> Schedule:
    """Lower prefill + decode of a batch of requests.

    Args:
        model: causal LLM; workload: :class:`~flitsim.workloads.LlmWorkload`.
        stages: pipeline stages K; tp: tensor-parallel degree per stage;
            devices: K x tp ids (stage-major) or a count.
        requests: how many of the workload's requests (None: all).
        micro_batches: default K (capped at the number of requests).

    Returns:
        :class:`~flitsim.schedules.Schedule`; ``options["request_tasks"]``
        holds per request (micro-batch, prefill-end task, last-step task); use
        :func:`request_metrics` after simulating.

    Raises:
        ConfigError: not a causal model / LlmWorkload, more stages than layers,
            bad counts, device ids outside the fabric.
    """
    from flitsim.workloads import LlmWorkload

    cfg = as_model(model)
    if cfg.kind != "causal":
        raise config_error("model", cfg.name, "a causal LLM for decode")
    if not isinstance(workload, LlmWorkload):
        raise config_error("workload", type(workload).__name__, "an LlmWorkload (flitsim.workloads)")
    K, TP = check_int("stages", stages), check_int("tp", tp)
    df = workload.requests if requests is None else workload.requests.iloc[:check_int("requests", requests)]
    if len(df) == 0:
        raise config_error("requests", requests, "at least one request")
    inp = df.input_tokens.to_numpy(np.int64)
    out = df.output_tokens.to_numpy(np.int64)
    for name, col in (("input_tokens", inp), ("output_tokens", out)):
        # No silent coercion: a request that generates 0 tokens has no decode
        # to simulate (and no TTFT); simulating it as 1 token would be a made-up request.
        if (col < 1).any():
            i = int(np.argmax(col < 1))
            raise config_error(f"workload.requests.{name}[{i}]", int(col[i]),
                               f"at least 1 token per request for decode ({int((col < 1).sum())} requests have 0; "
                               f"drop them, e.g. requests[requests.{name} > 0])")
    R = len(df)
    M = min(R, K if micro_batches is None else check_int("micro_batches", micro_batches))
    groups = stage_layers(cfg, K, True)
    ids, size = resolve_devices(K * TP if devices is None else devices, K * TP, fabric_devices)
    dev = [ids[j * TP:(j + 1) * TP] for j in range(K)]
    hw = Hardware(gpu, efficiency, dtype, execution, profile, interference, fabric)
    gb = new_builder(size, hw, comm_streams)
    members = [np.arange(R)[np.arange(R) % M == m] for m in range(M)]
    nlay = [sum(1 for x in g if isinstance(x, int)) for g in groups]
    b = int(hand_b := handoff_bytes(cfg, 1, dtype=dtype))  # bytes per token hand-off
    del hand_b

    def stage_task(j: int, cost: Any, batch: int, m: int, k: int, prev: int, phase: str) -> int:
        ts = gb.compute_on(dev[j], cost.shard_heads(TP), after=prev, stage=j, item=m, step=k, phase=phase,
                           label=f"mb{m}.{phase}{k}.stage{j}")
        if TP > 1:
            ar = gb.collective(dev[j], "all_reduce", 2 * nlay[j] * batch * b, stage=j, item=m, step=k, phase=phase,
                               label=f"mb{m}.{phase}{k}.stage{j}.allreduce")
            gb.edges(ts, ar)
            return ar
        return ts[0]

    def through(costs: list[Any], batch: int, m: int, k: int, prev: int, phase: str) -> int:
        for j in range(K):
            if j > 0:
                x = gb.transfer(dev[j - 1][0], dev[j][0], batch * b, stage=j - 1, item=m, step=k, phase=phase,
                                label=f"mb{m}.{phase}{k}.{j - 1}->{j}")
                gb.edge(prev, x)
                prev = x
            prev = stage_task(j, costs[j], batch, m, k, prev, phase)
        return prev

    last = np.full(R, -1, dtype=np.int64)
    first = np.full(R, -1, dtype=np.int64)
    tail = [-1] * M
    for m in range(M):
        rs = members[m]
        costs = [Kernels.concat([slice_kernels(cfg, int(inp[r]), 0, layers=groups[j], dtype=dtype, logits_tokens=1)
                                 for r in rs]) for j in range(K)]
        tail[m] = through(costs, int(inp[rs].sum()), m, 0, -1, "prefill")
        first[rs] = tail[m]
        last[rs] = tail[m]
    for k in range(1, int(out.max())):
        for m in range(M):
            rs = members[m][out[members[m]] > k]
            if len(rs) == 0:
                continue
            ctx = int(round(float((inp[rs] + k).mean())))
            costs = [decode_kernels(cfg, ctx, layers=groups[j], batch=len(rs), dtype=dtype) for j in range(K)]
            prev = tail[m]
            if K > 1:
                x = gb.transfer(dev[K - 1][0], dev[0][0], 4 * len(rs), stage=K - 1, item=m, step=k, phase="decode",
                                label=f"mb{m}.token{k}")
                gb.edge(prev, x)
                prev = x
            tail[m] = through(costs, len(rs), m, k, prev, "decode")
            last[rs] = tail[m]
    # K/V held at the peak: at step k every request still generating holds input + k tokens
    ks = np.arange(int(out.max()))
    live = (out[None, :] > ks[:, None]) | (ks[:, None] == 0)
    kv_peak = int(((inp[None, :] + ks[:, None]) * live).sum(axis=1).max())
    act = max(int(inp[members[m]].sum()) for m in range(M))
    opts = {"model": cfg.name, "requests": R, "micro_batches": M, "tp": TP,
            "memory_static": pipeline_memory(cfg, groups, dtype=dtype, act_tokens=act, batch=1, kv_tokens=kv_peak,
                                             tp=TP),
            "input_tokens": inp, "output_tokens": out, "first_token_task": first, "last_token_task": last}
    return gb.freeze("decode", ids, K, int(out.max()), opts)


def request_metrics(schedule: Schedule) -> Any:
    """Per-request TTFT, TPOT and latency of a simulated decode schedule
    (vLLM definitions; see the module docstring).

    Returns:
        DataFrame, one row per request: input_tokens, output_tokens, ttft_s,
        latency_s, tpot_s (NaN for one output token).

    Raises:
        ConfigError: not a decode schedule, or not simulated.
    """
    import pandas as pd

    if schedule.name != "decode":
        raise config_error("schedule", schedule.name, "a decode schedule")
    run = schedule.require_run()
    end = run.tasks.end_ps.to_numpy()
    o = schedule.options
    ttft = end[o["first_token_task"]] * 1e-12
    lat = end[o["last_token_task"]] * 1e-12
    out = o["output_tokens"]
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(out > 1, (lat - ttft) / np.maximum(out - 1, 1), np.nan)
    return pd.DataFrame({"input_tokens": o["input_tokens"], "output_tokens": out, "ttft_s": ttft,
                         "latency_s": lat, "tpot_s": tpot})
