"""DistriFusion: displaced patch parallelism for diffusion models (Li et al.,
"DistriFusion: Distributed Parallel Inference for High-Resolution Diffusion
Models", CVPR 2024).

Each of N devices computes one patch of p / N image tokens through all
layers. After ``warmup_steps`` synchronous steps (attention of layer l waits
for the fresh all-gather of layer l's K/V), attention uses the other patches'
K/V from the previous step: the all-gather of layer l's fresh K/V (nccl-tests
size p x kv_width x bytes x batch) is issued as soon as every device has
projected it and runs on the comm streams, overlapped with the rest of the
step; layer l of the next step waits for it. Each device sends
``(N-1)/N x p x kv_width x bytes`` per layer: per step
``2 (N-1)/N p hs L`` bytes for multi-head attention, the xDiT README's
``2 O(p x hs) L``. The attention runs the patch's queries against all p keys.
"""

from __future__ import annotations

from typing import Any

from flitsim.errors import config_error
from flitsim.memory import parallel_memory
from flitsim.schedules._work import parallel_setup, require_token_split, step_ends, decode_tail
from flitsim.schedules.builder import check_int
from flitsim.schedules.schedule import Schedule

__all__ = ["build_distrifusion"]


def build_distrifusion(model: Any, workload: Any, *, devices: Any = None, degree: int = 4, steps: int | None = None,
                       warmup_steps: int = 1, gpu: Any = None, efficiency: Any = None, dtype: str = "bf16",
                       include_embed_head: bool = True, fabric_devices: int | None = None,
                       comm_streams: int = 1, execution: Any = None, profile: Any = None,
                       interference: Any = None, fabric: Any = None) -> Schedule:
    """Lower N-way DistriFusion for one image request.

    Args:
        model: the DiT (None: ``workload.model``); workload: DitWorkload.
        degree: N; warmup_steps: synchronous steps first (default 1).
        Others as :func:`~flitsim.schedules.tensor_parallel.build_tensor_parallel`.

    Raises:
        ConfigError: not a DiT workload, bad degree / devices, warmup_steps > steps.
    """
    from flitsim.workloads import DitWorkload

    if not isinstance(workload, DitWorkload):
        raise config_error("workload", type(workload).__name__, "a DitWorkload (DistriFusion is for diffusion models)")
    work, ids, gb, N = parallel_setup(model, workload, devices=devices, degree=degree, steps=steps, batch=1,
                                      gpu=gpu, efficiency=efficiency, dtype=dtype,
                                      include_embed_head=include_embed_head, fabric_devices=fabric_devices,
                                      comm_streams=comm_streams, execution=execution, profile=profile,
                                      interference=interference, fabric=fabric)
    if work.cfg.attention_kind != "softmax":

        raise config_error("model", work.cfg.name, "a model with softmax attention (DistriFusion all-gathers per-token K/V; this one's "
                           "self-attention is linear)")
    require_token_split(int(workload.image_tokens), N, "image tokens (DistriFusion's patches)")
    W = check_int("warmup_steps", warmup_steps, 0)
    if W > work.steps:
        raise config_error("warmup_steps", W, f"at most steps = {work.steps}")
    parts = {}
    for k in work.blocks:
        if id(k) not in parts:
            kt = k.shard_tokens(N)
            parts[id(k)] = (kt.parts("pre_attn"), k.parts("attn").attention_as(q_div=N),
                            kt.parts("post_attn", "mlp"))
    tail = [-1] * N
    ag_prev: list[int] = [-1] * len(work.blocks)
    for s in range(work.steps):
        tail = step_ends(gb, work, ids, N, s, tail, "pre")
        ag_now = []
        for l_, blk in enumerate(work.blocks):
            pre, att_k, post = parts[id(blk)]
            proj = gb.compute_on(ids, pre, after=tail, step=s, layer=l_, label=f"step{s}.L{l_}.mm")
            ag = gb.collective(ids, "all_gather", work.kv_bytes, step=s, layer=l_, phase="step",
                               label=f"step{s}.L{l_}.allgather_kv")
            gb.edges(proj, ag)
            ag_now.append(ag)
            wait = ag if s < W else ag_prev[l_]
            att = gb.compute_on(ids, att_k, after=proj, step=s, layer=l_, label=f"step{s}.L{l_}.attn")
            if wait >= 0:
                for a in att:
                    gb.edge(wait, a)
            tail = gb.compute_on(ids, post, after=att, step=s, layer=l_, label=f"step{s}.L{l_}.post")
        ag_prev = ag_now
        tail = step_ends(gb, work, ids, N, s, tail, "post")
    tail = decode_tail(gb, work, ids, tail)
    mem = parallel_memory("distrifusion", work.cfg, n=N, dtype=dtype, tokens=work.tokens, batch=work.batch,
                          causal=work.kind == "causal")
    return gb.freeze("distrifusion", ids, 1, work.steps,
                     {"model": work.cfg.name, "degree": N, "tokens": work.tokens, "batch": work.batch,
                      "warmup_steps": W, "memory_static": mem})
