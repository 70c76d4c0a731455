"""Ulysses sequence parallelism (Jacobs et al., "DeepSpeed Ulysses", 2023;
xDiT USP): every device holds p / N tokens; around each attention, all-to-alls
re-shard Q, K and V from tokens to heads (three all-to-alls) and the attention
output back (one): four all-to-alls per layer. The nccl-tests size of each is
one rank's buffer, (p / N) x width x bytes x batch (width aw for Q and the
output, kv_width / 2 for K and for V), so each rank sends (N-1)/N of it: per
device per step ``4 x L x (N-1)/N^2 x p x hs x bytes`` for multi-head attention,
the xDiT README's ``(4/N) O(p x hs) L``. Every kernel but the attention runs
on p / N tokens; the attention runs H / N heads over all p tokens. Each
all-to-all needs its buffer laid out by destination rank and the received one
made contiguous again: a ``reshape`` copy of the Q/K/V shard after the QKV
projection and of the attention output before the out projection, and the
same after receiving (elementwise kernels of one read and one write each).
A sequence that N does not divide (HunyuanVideo's 118,800 + 256 tokens over 3
ranks) is padded to ceil(p / N) tokens per rank for the all-to-alls and their
reshapes: at most N - 1 tokens of padding
(:func:`flitsim.models.kernels.tokens_per_rank`, the rule every builder that
shards a sequence over an Ulysses or ring group uses).
"""

from __future__ import annotations


from typing import Any

from flitsim.memory import parallel_memory
from flitsim.schedules._work import parallel_setup, require_token_split, require_head_split, step_ends, decode_tail
from flitsim.schedules.schedule import Schedule

__all__ = ["build_ulysses"]


def build_ulysses(model: Any, workload: Any, *, devices: Any = None, degree: int = 4, steps: int | None = None,
                  batch: int = 1, gpu: Any = None, efficiency: Any = None, dtype: str = "bf16",
                  include_embed_head: bool = True, fabric_devices: int | None = None, comm_streams: int = 1,
                  execution: Any = None, profile: Any = None, interference: Any = None,
                  fabric: Any = None) -> Schedule:
    """Lower N-way Ulysses sequence parallelism (arguments as
    :func:`~flitsim.schedules.tensor_parallel.build_tensor_parallel`).

    Raises:
        ConfigError: bad degree / devices (a degree must divide the model's heads),
            mismatched model and workload.
    """
    work, ids, gb, N = parallel_setup(model, workload, devices=devices, degree=degree, steps=steps, batch=batch,
                                      gpu=gpu, efficiency=efficiency, dtype=dtype,
                                      include_embed_head=include_embed_head, fabric_devices=fabric_devices,
                                      comm_streams=comm_streams, execution=execution, profile=profile,
                                      interference=interference, fabric=fabric)
    require_head_split(work, N, "DeepSpeed-Ulysses' all-to-all")
    require_token_split(work.tokens, N, "tokens of the attention sequence (Ulysses' all-to-all shards)")
    b, B, p = work.bytes_per_element, work.batch, work.tokens
    aw, kw = work.cfg.attn_width, work.kv_width
    from flitsim.models.kernels import Kernels, tokens_per_rank

    p_rank = tokens_per_rank(p, N)  # padded to a multiple of N when N does not divide p; exact p / N otherwise
    shard = lambda width: int(round(p_rank * width * b * B))  # noqa: E731

    qkv_elems, out_elems = int(round(p_rank * (aw + kw) * B)), int(round(p_rank * aw * B))
    send_qkv = Kernels.elementwise("reshape", qkv_elems, b, part="pre_attn")
    recv_out = Kernels.elementwise("reshape", out_elems, b, part="post_attn")
    parts = {}
    for k in work.blocks:
        if id(k) not in parts:
            kt = k.shard_tokens(N)
            att = Kernels.concat([Kernels.elementwise("reshape", qkv_elems, b, part="attn"),
                                  k.parts("attn").attention_as(heads_div=N),
                                  Kernels.elementwise("reshape", out_elems, b, part="attn")])
            parts[id(k)] = (kt.parts("pre_attn") + send_qkv, att, recv_out + kt.parts("post_attn", "mlp"))
    tail = [-1] * N
    for s in range(work.steps):
        tail = step_ends(gb, work, ids, N, s, tail, "pre")
        for l_, blk in enumerate(work.blocks):
            pre, att_k, post = parts[id(blk)]
            qkv = gb.compute_on(ids, pre, after=tail, step=s, layer=l_, label=f"step{s}.L{l_}.qkv")
            a2a = []
            for name, width in (("q", aw), ("k", kw // 2), ("v", kw - kw // 2)):
                x = gb.collective(ids, "all_to_all", shard(width), step=s, layer=l_, phase="step",
                                  label=f"step{s}.L{l_}.a2a_{name}")
                gb.edges(qkv, x)
                a2a.append(x)
            att = gb.compute_on(ids, att_k, after=[a2a], step=s, layer=l_, label=f"step{s}.L{l_}.attn")
            out = gb.collective(ids, "all_to_all", shard(aw), step=s, layer=l_, phase="step", label=f"step{s}.L{l_}.a2a_out")
            gb.edges(att, out)
            tail = gb.compute_on(ids, post, after=out, step=s, layer=l_, label=f"step{s}.L{l_}.post")
        tail = step_ends(gb, work, ids, N, s, tail, "post")
    tail = decode_tail(gb, work, ids, tail)
    mem = parallel_memory("ulysses", work.cfg, n=N, dtype=dtype, tokens=work.tokens, batch=work.batch,
                          causal=work.kind == "causal")
    return gb.freeze("ulysses", ids, 1, work.steps, {"model": work.cfg.name, "degree": N, "tokens": p, "batch": B,
                                                     "memory_static": mem})
