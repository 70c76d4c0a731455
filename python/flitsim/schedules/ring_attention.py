"""Ring attention (Liu et al., "Ring Attention with Blockwise Transformers",
2023; xDiT USP ring degree): every device holds p / N tokens and their K/V;
per layer the K/V blocks travel around a ring of N devices in N - 1 steps.
At step k device d computes attention of its queries against the block it
holds (from device d - k) on its compute stream while it forwards that block
to device d + 1 on a comm stream (transfers overlap compute). Each device
sends N - 1 blocks of (p / N) x kv_width x bytes x batch per layer: per step
``L x (N-1)/N x p x kv_width x bytes``, = ``2 (N-1)/N p hs L`` bytes for
multi-head attention (kv_width = 2 hs), the xDiT README's ``2 O(p x hs) L``.
Projections, norms and the MLP run on the device's p / N tokens before and
after the ring. A sequence N does not divide is padded to ceil(p / N) tokens
per rank (:func:`flitsim.models.kernels.tokens_per_rank`), blocks included.

Around each step's attention call the device merges the block's output into
its running output (online softmax across blocks: fp32 rescale kernels); the
first step casts the output up, the last casts it back. ``ring_impl`` says
whose kernels (:data:`flitsim.models.kernels.RING_IMPLS`):
ring-flash-attention's TorchScript-fused merge
(:func:`~flitsim.models.kernels.ring_merge_kernels`, the default) or PyTorch's
context-parallel ring, an eager merge plus a ``torch.cat`` of K and V per send
(:func:`~flitsim.models.kernels.torch_cp_merge_kernels`), which xDiT's ``USP()``
runs for Flux and HunyuanVideo.

Causal LLMs: the diagonal block is causal, blocks after the queries are
skipped, earlier blocks are full, so the ring is unbalanced across devices, as
in the paper (no striping).
"""

from __future__ import annotations

from typing import Any

from flitsim.models.kernels import Kernels, ring_step_kernels, tokens_per_rank
from flitsim.memory import parallel_memory
from flitsim.schedules._work import parallel_setup, require_token_split, step_ends, decode_tail
from flitsim.schedules.schedule import Schedule

__all__ = ["build_ring_attention"]


def _block(att: Kernels, kind: str, N: int, q_block: int, k_block: int) -> Kernels | None:
    """Attention of query block ``q_block`` against key block ``k_block`` (None: nothing to do)."""
    if kind == "dit":
        return att.attention_as(q_div=N, kv_div=N)
    if k_block > q_block:
        return None
    c = att.cols
    q = tokens_per_rank(c["q"], N)
    diag = k_block == q_block
    return Kernels({**c, "q": q, "kv": q, "ctx": 0 * q, "causal": c["causal"] * int(diag)})


def _ring_steps(gb: Any, ids: Any, N: int, blocks: dict[tuple[int, int], Kernels], block_bytes: int,
                proj: list[int], s: int, l_: int, prefix: str) -> list[int]:
    """The N ring steps of one layer after its projections ``proj`` (one per
    device): K/V block sends and block attentions. Returns each device's last
    attention task."""
    X = [[-1] * N for _ in range(N)]  # X[d][k]: d sends the block it holds at step k-1 to d+1
    A = [[-1] * N for _ in range(N)]
    for k in range(N):
        for d in range(N):
            if k >= 1:
                x = gb.transfer(ids[d], ids[(d + 1) % N], block_bytes, item=d, step=s, layer=l_, phase="step",
                                label=f"{prefix}kv{k}.d{d}")
                gb.edge(proj[d] if k == 1 else X[(d - 1) % N][k - 1], x)
                X[d][k] = x
        for d in range(N):
            a = gb.compute(ids[d], blocks[(d, k)], item=d, step=s, layer=l_, phase="step",
                           label=f"{prefix}attn{k}.d{d}")
            gb.edge(proj[d] if k == 0 else A[d][k - 1], a)
            if k >= 1:
                gb.edge(X[(d - 1) % N][k], a)
            A[d][k] = a
    return [A[d][N - 1] for d in range(N)]


def build_ring_attention(model: Any, workload: Any, *, devices: Any = None, degree: int = 4,
                         steps: int | None = None, batch: int = 1, gpu: Any = None, efficiency: Any = None,
                         dtype: str = "bf16", include_embed_head: bool = True, fabric_devices: int | None = None,
                         comm_streams: int = 1, execution: Any = None, profile: Any = None,
                         interference: Any = None, fabric: Any = None,
                         ring_impl: str = "ring_flash_attn") -> Schedule:
    """Lower N-way ring attention (arguments as
    :func:`~flitsim.schedules.tensor_parallel.build_tensor_parallel`;
    ``ring_impl``: which ring implementation's per-step kernels run,
    :data:`flitsim.models.kernels.RING_IMPLS`).

    Raises:
        ConfigError: bad degree / devices, mismatched model and workload, an
            unknown ``ring_impl``.
    """
    work, ids, gb, N = parallel_setup(model, workload, devices=devices, degree=degree, steps=steps, batch=batch,
                                      gpu=gpu, efficiency=efficiency, dtype=dtype,
                                      include_embed_head=include_embed_head, fabric_devices=fabric_devices,
                                      comm_streams=comm_streams, execution=execution, profile=profile,
                                      interference=interference, fabric=fabric)
    if work.cfg.attention_kind != "softmax":
        from flitsim.errors import config_error

        raise config_error("model", work.cfg.name, "a model with softmax attention (ring attention passes K/V blocks around a ring; this one's "
                           "self-attention is linear)")
    require_token_split(work.tokens, N, "tokens of the attention sequence (Ring's blocks)")
    ring_step_kernels(Kernels.empty(), True, True, ring_impl)  # ConfigError for an unknown ring_impl
    # one block: the K/V of a rank's (padded) shard of the sequence
    block_bytes = tokens_per_rank(work.tokens, N) * work.kv_width * work.bytes_per_element * work.batch
    parts = {}
    for k in work.blocks:
        if id(k) not in parts:
            kt = k.shard_tokens(N)
            att = k.parts("attn")
            blocks = {(qd, kd): _block(att, work.kind, N, qd, kd) for qd in range(N) for kd in range(N)}
            # step kk of device qd: its block's attention (None: skipped) and the merge kernels around it
            merges: dict[tuple[int, bool, bool], Kernels] = {}
            steps_k: dict[tuple[int, int], Kernels] = {}
            for qd in range(N):
                for kk in range(N):
                    kb = blocks[(qd, (qd - kk) % N)]
                    mk = (id(kb), kk == 0, kk == N - 1)
                    if mk not in merges:
                        runs = kb is not None or kk == N - 1
                        m = (ring_step_kernels(blocks[(qd, qd)], kk == 0, kk == N - 1, ring_impl) if runs
                             else Kernels.empty())
                        merges[mk] = m if kb is None else Kernels.concat([kb, m])
                    steps_k[(qd, kk)] = merges[mk]
            parts[id(k)] = (kt.parts("pre_attn"), steps_k, kt.parts("post_attn", "mlp"))
    tail = [-1] * N
    for s in range(work.steps):
        tail = step_ends(gb, work, ids, N, s, tail, "pre")
        for l_, blk in enumerate(work.blocks):
            pre, blocks, post = parts[id(blk)]
            proj = gb.compute_on(ids, pre, after=tail, step=s, layer=l_, label=f"step{s}.L{l_}.proj")
            # every layer with this block's kernels adds the same ring steps: recorded once, appended as columns
            last = gb.repeat(id(blk), lambda g, pj, st, ly, px, b=blocks: _ring_steps(g, ids, N, b, block_bytes, pj,
                                                                                      st, ly, px),
                             proj, step=s, layer=l_, prefix=f"step{s}.L{l_}.")
            tail = gb.compute_on(ids, post, after=last, step=s, layer=l_,
                                 label=f"step{s}.L{l_}.post")
        tail = step_ends(gb, work, ids, N, s, tail, "post")
    tail = decode_tail(gb, work, ids, tail)
    mem = parallel_memory("ring_attention", work.cfg, n=N, dtype=dtype, tokens=work.tokens, batch=work.batch,
                          causal=work.kind == "causal")
    return gb.freeze("ring_attention", ids, 1, work.steps,
                     {"model": work.cfg.name, "degree": N, "tokens": work.tokens, "batch": work.batch,
                      "ring_impl": ring_impl, "memory_static": mem})
