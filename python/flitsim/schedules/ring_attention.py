"""Ring attention (Liu et al., "Ring Attention with Blockwise Transformers",
2023; xDiT USP ring degree): every device holds p / N tokens and their K/V;
per layer the K/V blocks travel around a ring of N devices in N - 1 steps.
At step k device d computes attention of its queries against the block it
holds (from device d - k) on its compute stream while it forwards that block
to device d + 1 on a comm stream (transfers overlap compute). Each device
sends N - 1 blocks of (p / N) x kv_width x bytes x batch per layer: per step
``L x (N-1)/N x p x kv_width x bytes``, = ``2 (N-1)/N p hs L`` bytes for
multi-head attention (kv_width = 2 hs), the xDiT README's ``2 O(p x hs) L``.

Causal LLMs: a block's attention work is its share of the causal query-key
pairs (blocks after the queries: none; the diagonal block: a triangle), so
the ring is unbalanced across devices, as in the paper (no striping).
"""

from __future__ import annotations

from typing import Any

from flitsim.schedules._common import Schedule, finish, scale_cost
from flitsim.schedules._work import attention_only, matmul_only, parallel_setup, shard_tokens, step_ends

__all__ = ["build_ring_attention"]


def _pair_share(kind: str, N: int, p: int, q_block: int, k_block: int) -> float:
    """Share of the pass's query-key pairs between query block and key block."""
    if kind == "dit":
        return 1.0 / (N * N)
    n = p / N
    total = p * (p + 1) / 2
    if k_block < q_block:
        return n * n / total
    if k_block == q_block:
        return n * (n + 1) / 2 / total
    return 0.0


def build_ring_attention(model: Any, workload: Any, *, devices: Any = None, degree: int = 4,
                         steps: int | None = None, batch: int = 1, gpu: Any = "h100", efficiency: Any = None,
                         dtype: str = "bf16", include_embed_head: bool = True, fabric_devices: int | None = None,
                         comm_streams: int = 1) -> Schedule:
    """Lower N-way ring attention (arguments as
    :func:`~flitsim.schedules.tensor_parallel.build_tensor_parallel`).

    Raises:
        ConfigError: bad degree / devices, mismatched model and workload.
    """
    work, ids, gb, N = parallel_setup(model, workload, devices=devices, degree=degree, steps=steps, batch=batch,
                                      gpu=gpu, efficiency=efficiency, dtype=dtype,
                                      include_embed_head=include_embed_head, fabric_devices=fabric_devices,
                                      comm_streams=comm_streams)
    block_bytes = int(round(work.kv_bytes / N))
    tail = [-1] * N
    for s in range(work.steps):
        tail = step_ends(gb, work, ids, N, s, tail, "pre")
        for l_, blk in enumerate(work.blocks):
            mm = matmul_only(shard_tokens(blk, N))
            att = attention_only(blk)
            proj = []
            for d in range(N):
                t = gb.compute(ids[d], mm, item=d, step=s, layer=l_, phase="step", label=f"step{s}.L{l_}.proj.d{d}")
                if tail[d] >= 0:
                    gb.edge(tail[d], t)
                proj.append(t)
            X = [[-1] * N for _ in range(N)]  # X[d][k]: d sends the block it holds at step k-1 to d+1
            A = [[-1] * N for _ in range(N)]
            for k in range(N):
                for d in range(N):
                    if k >= 1:
                        x = gb.transfer(ids[d], ids[(d + 1) % N], block_bytes, item=d, step=s, layer=l_, phase="step",
                                        label=f"step{s}.L{l_}.kv{k}.d{d}")
                        gb.edge(proj[d] if k == 1 else X[(d - 1) % N][k - 1], x)
                        X[d][k] = x
                for d in range(N):
                    share = _pair_share(work.kind, N, work.tokens, d, (d - k) % N)
                    a = gb.compute(ids[d], scale_cost(att, share), item=d, step=s, layer=l_, phase="step",
                                   label=f"step{s}.L{l_}.attn{k}.d{d}")
                    gb.edge(proj[d] if k == 0 else A[d][k - 1], a)
                    if k >= 1:
                        gb.edge(X[(d - 1) % N][k], a)
                    A[d][k] = a
            tail = [A[d][N - 1] for d in range(N)]
        tail = step_ends(gb, work, ids, N, s, tail, "post")
    return finish("ring_attention", gb, ids, 1, work.steps,
                  {"model": work.cfg.name, "degree": N, "tokens": work.tokens, "batch": work.batch})
