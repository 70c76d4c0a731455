"""GPipe-style layer pipeline for causal LLM prefill (Huang et al., "GPipe",
NeurIPS 2019), the baseline of token-level pipelines.

K stages of contiguous layers (balanced by layer count, embed on stage 0, head
on the last); a batch of B sequences of T tokens is cut into M micro-batches
of B / M whole sequences (so M must divide B). Micro-batch m at stage j waits
for micro-batch m at stage j-1 (a transfer of its hidden states). With zero
communication cost and equal stages of time t per micro-batch the makespan is
(M + K - 1) t and each device idles (K - 1) / (M + K - 1) of it.
"""

from __future__ import annotations

from typing import Any

from flitsim.errors import config_error
from flitsim.memory import pipeline_memory
from flitsim.models import handoff_bytes
from flitsim.models.kernels import slice_kernels
from flitsim.models.zoo import as_model
from flitsim.schedules.builder import Hardware, check_int, new_builder
from flitsim.schedules.schedule import Schedule
from flitsim.schedules.terapipe import causal_seq_tokens, credit_edges, pipeline_devices, stage_layers

__all__ = ["build_layer_pipeline"]


def build_layer_pipeline(model: Any, workload: Any, *, devices: Any = None, stages: int = 4, batch: int = 8,
                         micro_batches: int | None = None, gpu: Any = None, efficiency: Any = None,
                         dtype: str = "bf16", include_embed_head: bool = True, inflight_micro_batches: int | None = None,
                         fabric_devices: int | None = None, comm_streams: int = 1, execution: Any = None, profile: Any = None, interference: Any = None, fabric: Any = None,
                         tp: int = 1, placement: Any = "domain") -> Schedule:
    """Lower a GPipe prefill of ``batch`` sequences of ``workload`` tokens.

    Args:
        model: causal model; workload: prefill length T, tokens.
        stages: K; batch: B sequences; micro_batches: M (default K), dividing B.
        inflight_micro_batches: credit bound per stage hand-off (None = unbounded).
        tp: tensor-parallel degree per stage (layer pipeline x TP, K x tp devices,
            stage-major; :mod:`flitsim.schedules.tp_stage`); placement: as terapipe.
        Others as :func:`~flitsim.schedules.terapipe.build_terapipe`.

    Raises:
        ConfigError: not a causal model, more stages than layers, M not dividing
            B, device ids outside the fabric.
    """
    cfg = as_model(model)
    if cfg.kind != "causal":
        raise config_error("model", cfg.name, "a causal LLM for the layer pipeline")
    T = causal_seq_tokens(workload)
    K = check_int("stages", stages)
    B = check_int("batch", batch)
    M = K if micro_batches is None else check_int("micro_batches", micro_batches)
    if B % M:
        raise config_error("micro_batches", M, f"a divisor of batch = {B} (micro-batches hold whole sequences)")
    groups = stage_layers(cfg, K, include_embed_head)
    TP, ids, size = pipeline_devices(cfg, K, tp, devices, fabric, fabric_devices, placement)
    hw = Hardware(gpu, efficiency, dtype, execution, profile, interference, fabric)
    gb = new_builder(size, hw, comm_streams)
    mb = B // M
    hand = handoff_bytes(cfg, T, batch=mb, dtype=dtype)
    credit0 = None if inflight_micro_batches is None else check_int("inflight_micro_batches", inflight_micro_batches)
    if TP > 1:
        from flitsim.schedules.tp_stage import tp_handoff, tp_stage

        dev = [ids[j * TP:(j + 1) * TP] for j in range(K)]
        layer = slice_kernels(cfg, T, 0, layers=0, batch=mb, dtype=dtype)
        pre = slice_kernels(cfg, T, 0, layers="embed", batch=mb, dtype=dtype) if include_embed_head else None
        post = slice_kernels(cfg, T, 0, layers="head", batch=mb, dtype=dtype, logits_tokens=1) if include_embed_head else None
        first = [[-1] * K for _ in range(M)]
        for m in range(M):
            tail = [-1] * TP
            for j in range(K):
                n_l = sum(1 for x in groups[j] if not isinstance(x, str))
                first[m][j] = len(gb.phase)
                tail = tp_stage(gb, dev[j], layer, n_l, pre if j == 0 else None, post if j == K - 1 else None,
                                hand, tail, stage=j, item=m, step=0, phase="pipeline", label=f"mb{m}.stage{j}")
                if credit0 is not None and m >= credit0 and j > 0:
                    credit_edges(gb, first, m, j, credit0, TP)
                if j + 1 < K:
                    tail = tp_handoff(gb, dev[j], dev[j + 1], hand, tail, stage=j, item=m, step=0, phase="pipeline",
                                      label=f"mb{m}.{j}->{j + 1}")
        opts = {"model": cfg.name, "seq_tokens": T, "batch": B, "micro_batches": M, "stage_layers": groups, "tp": TP,
                "memory_static": pipeline_memory(cfg, groups, dtype=dtype, act_tokens=T * mb, batch=mb,
                                                 kv_tokens=T * B, tp=TP)}
        return gb.freeze("layer_pipeline", ids, K, 1, opts)
    costs = [slice_kernels(cfg, T, 0, layers=g, batch=mb, dtype=dtype, logits_tokens=1 if include_embed_head else 0)
             for g in groups]
    credit = None if inflight_micro_batches is None else check_int("inflight_micro_batches", inflight_micro_batches)
    C = [[-1] * K for _ in range(M)]
    for m in range(M):
        prev = -1
        for j in range(K):
            C[m][j] = gb.compute(ids[j], costs[j], stage=j, item=m, step=0, label=f"mb{m}.stage{j}")
            if prev >= 0:
                gb.edge(prev, C[m][j])
            if j + 1 < K:
                prev = gb.transfer(ids[j], ids[j + 1], hand, stage=j, item=m, step=0, label=f"mb{m}.{j}->{j + 1}")
                gb.edge(C[m][j], prev)
        if credit is not None and m >= credit:
            for j in range(K - 1):
                gb.edge(C[m - credit][j + 1], C[m][j], "credit")
    opts = {"model": cfg.name, "seq_tokens": T, "batch": B, "micro_batches": M, "stage_layers": groups,
            "memory_static": pipeline_memory(cfg, groups, dtype=dtype, act_tokens=T * mb, batch=mb, kv_tokens=T * B)}
    return gb.freeze("layer_pipeline", ids, K, 1, opts)
