"""Tensor parallelism (Megatron-LM, Shoeybi et al. 2019) for a DiT denoising
step or a causal LLM prefill: every block's heads and FFN columns are split
over N devices; each block ends its attention and its MLP with an all-reduce of
the full activations (p x hs x bytes x batch, nccl-tests size), so two
all-reduces per layer. Per device per step that is
``2 x L x 2(N-1)/N x p x hs x bytes`` sent (ring all-reduce bus bytes), the
xDiT README's ``4 O(p x hs) L``.
"""

from __future__ import annotations

from typing import Any

from flitsim.schedules._common import Schedule, finish, scale_cost
from flitsim.schedules._work import attention_only, attn_param_share, matmul_only, parallel_setup, shard_weights, step_ends

__all__ = ["build_tensor_parallel"]


def build_tensor_parallel(model: Any, workload: Any, *, devices: Any = None, degree: int = 4,
                          steps: int | None = None, batch: int = 1, gpu: Any = "h100", efficiency: Any = None,
                          dtype: str = "bf16", include_embed_head: bool = True, fabric_devices: int | None = None,
                          comm_streams: int = 1) -> Schedule:
    """Lower N-way tensor parallelism.

    Args:
        model: DiT (None: ``workload.model``) or causal LLM.
        workload: :class:`~flitsim.workloads.DitWorkload` (``steps`` steps, default
            the workload's) or an int prefill length (one step, ``batch`` sequences).
        degree: N; devices: N ids or a count.

    Raises:
        ConfigError: bad degree / devices, mismatched model and workload.
    """
    work, ids, gb, N = parallel_setup(model, workload, devices=devices, degree=degree, steps=steps, batch=batch,
                                      gpu=gpu, efficiency=efficiency, dtype=dtype,
                                      include_embed_head=include_embed_head, fabric_devices=fabric_devices,
                                      comm_streams=comm_streams)
    fq, fo = attn_param_share(work.cfg)
    tail = [-1] * N
    for s in range(work.steps):
        tail = step_ends(gb, work, ids, N, s, tail, "pre")
        for l_, blk in enumerate(work.blocks):
            sh = shard_weights(blk, N)
            mm = matmul_only(sh)
            part_a = scale_cost(mm, fq + fo) + attention_only(sh)
            part_b = scale_cost(mm, 1.0 - fq - fo)
            for part, tag in ((part_a, "attn"), (part_b, "mlp")):
                comp = []
                for d in range(N):
                    t = gb.compute(ids[d], part, item=d, step=s, layer=l_, phase="step", label=f"step{s}.L{l_}.{tag}.d{d}")
                    if tail[d] >= 0:
                        gb.edge(tail[d], t)
                    comp.append(t)
                ar = gb.collective(ids, "all_reduce", work.act_bytes, step=s, layer=l_, phase="step",
                                   label=f"step{s}.L{l_}.{tag}.allreduce")
                gb.edges(comp, ar)
                tail = [ar] * N
        tail = step_ends(gb, work, ids, N, s, tail, "post")
    return finish("tensor_parallel", gb, ids, 1, work.steps,
                  {"model": work.cfg.name, "degree": N, "tokens": work.tokens, "batch": work.batch})
