"""Tensor parallelism (Megatron-LM, Shoeybi et al. 2019) for a DiT denoising
step or a causal LLM prefill: every block's heads and FFN columns are split
over N devices (column-parallel QKV / MLP-up GEMMs, row-parallel output / MLP-
down GEMMs, heads of the attention); each block ends its attention and its MLP
with an all-reduce of the full activations (p x hs x bytes x batch, nccl-tests
size), so two all-reduces per layer. Per device per step that is
``2 x L x 2(N-1)/N x p x hs x bytes`` sent (ring all-reduce bus bytes), the
xDiT README's ``4 O(p x hs) L``. Norms, modulation and residual adds run on
the full activations on every device (they are not split).
"""

from __future__ import annotations


from typing import Any

from flitsim.memory import parallel_memory
from flitsim.schedules._work import parallel_setup, require_head_split, step_ends, decode_tail
from flitsim.schedules.schedule import Schedule

__all__ = ["build_tensor_parallel"]


def build_tensor_parallel(model: Any, workload: Any, *, devices: Any = None, degree: int = 4,
                          steps: int | None = None, batch: int = 1, gpu: Any = None, efficiency: Any = None,
                          dtype: str = "bf16", include_embed_head: bool = True, fabric_devices: int | None = None,
                          comm_streams: int = 1, execution: Any = None, profile: Any = None,
                          interference: Any = None, fabric: Any = None) -> Schedule:
    """Lower N-way tensor parallelism.

    Args:
        model: DiT (None: ``workload.model``) or causal LLM.
        workload: :class:`~flitsim.workloads.DitWorkload` (``steps`` steps, default
            the workload's) or an int prefill length (one step, ``batch`` sequences).
        degree: N; devices: N ids or a count.
        gpu: GPU preset or GpuSpec (default: the fabric's GPU, else H100;
            ``options["gpu_source"]`` says which); efficiency: overrides of its
            efficiency tops; execution: ``eager`` | ``cuda_graph`` | ``compiled``;
            profile: a measured kernel profile (path or Profile); interference:
            communication's SM share (:class:`flitsim.cost.CommInterference`);
            fabric: the fabric preset / FabricSpec the graph will run on (its GPU
            and device count are the defaults).

    Raises:
        ConfigError: bad degree / devices (a degree must divide the model's heads),
            mismatched model and workload.
    """
    work, ids, gb, N = parallel_setup(model, workload, devices=devices, degree=degree, steps=steps, batch=batch,
                                      gpu=gpu, efficiency=efficiency, dtype=dtype,
                                      include_embed_head=include_embed_head, fabric_devices=fabric_devices,
                                      comm_streams=comm_streams, execution=execution, profile=profile,
                                      interference=interference, fabric=fabric)
    require_head_split(work, N, "Megatron-style tensor parallelism")
    shards = {}
    for k in work.blocks:
        if id(k) not in shards:
            sh = k.shard_heads(N)
            shards[id(k)] = (sh.parts("pre_attn", "attn", "post_attn"), sh.parts("mlp"))
    tail = [-1] * N
    for s in range(work.steps):
        tail = step_ends(gb, work, ids, N, s, tail, "pre")
        for l_, blk in enumerate(work.blocks):
            for part, tag in zip(shards[id(blk)], ("attn", "mlp")):
                comp = gb.compute_on(ids, part, after=tail, step=s, layer=l_, label=f"step{s}.L{l_}.{tag}")
                ar = gb.collective(ids, "all_reduce", work.act_bytes, step=s, layer=l_, phase="step",
                                   label=f"step{s}.L{l_}.{tag}.allreduce")
                gb.edges(comp, ar)
                tail = [ar] * N
        tail = step_ends(gb, work, ids, N, s, tail, "post")
    tail = decode_tail(gb, work, ids, tail)
    mem = parallel_memory("tensor_parallel", work.cfg, n=N, dtype=dtype, tokens=work.tokens, batch=work.batch,
                          causal=work.kind == "causal")
    return gb.freeze("tensor_parallel", ids, 1, work.steps,
                     {"model": work.cfg.name, "degree": N, "tokens": work.tokens, "batch": work.batch,
                      "memory_static": mem})
