"""A pipeline stage run tensor parallel (Megatron-LM, Shoeybi et al. 2019): the
stage's layers on ``tp`` devices, each layer's attention and MLP column/row
split (:meth:`flitsim.models.Kernels.shard_heads`) and each ended by an
all-reduce of the full activations (nccl-tests size tokens x hidden x bytes),
as :mod:`flitsim.schedules.tensor_parallel` does per layer. Hand-offs between
TP stages go rank to rank, 1/tp of the activations each (Megatron's
scatter-gather of pipeline sends, Narayanan et al., "Efficient Large-Scale
Language Model Training on GPU Clusters Using Megatron-LM", SC 2021, Sec. 4.1;
the receiving stage's first all-reduce makes them whole again).
"""

from __future__ import annotations

from typing import Any, Sequence

from flitsim.models.kernels import Kernels
from flitsim.schedules.builder import GraphBuilder

__all__ = ["tp_stage", "tp_handoff"]


def tp_stage(gb: GraphBuilder, ids: Sequence[int], layer: Kernels, n_layers: int, pre: Kernels | None,
             post: Kernels | None, act_bytes: int, after: Sequence[int], *, stage: int, item: int, step: int,
             phase: str, label: str) -> list[int]:
    """Tasks of one stage pass (one slice / micro-batch) on the TP group ``ids``.

    ``layer``: the kernels of one (representative) layer, unsharded; ``pre`` /
    ``post``: embedding / head kernels (None: not on this stage); ``after``: one
    task per device (< 0: none). Returns the tails (one per device).
    """
    tp = len(ids)
    attn = layer.shard_heads(tp).parts("pre_attn", "attn", "post_attn")
    mlp = layer.shard_heads(tp).parts("mlp")
    kw: dict[str, Any] = dict(stage=stage, item=item, step=step, phase=phase)
    tail = list(after)
    if pre is not None:
        tail = gb.compute_on(ids, pre.shard_heads(tp), after=tail, label=f"{label}.pre", **kw)
    for l_ in range(n_layers):
        for part, tag in ((attn, "attn"), (mlp, "mlp")):
            comp = gb.compute_on(ids, part, after=tail, layer=l_, label=f"{label}.L{l_}.{tag}", **kw)
            ar = gb.collective(list(ids), "all_reduce", act_bytes, layer=l_, label=f"{label}.L{l_}.{tag}.allreduce",
                               **kw)
            gb.edges(comp, ar)
            tail = [ar] * tp
    if post is not None:
        tail = gb.compute_on(ids, post.shard_heads(tp), after=tail, label=f"{label}.post", **kw)
    return tail


def tp_handoff(gb: GraphBuilder, src: Sequence[int], dst: Sequence[int], nbytes: int, tail: Sequence[int], *,
               stage: int, item: int, step: int, phase: str, label: str) -> list[int]:
    """Rank-to-rank hand-off of ``nbytes`` activations between two TP stages
    (1/tp each); returns one transfer per receiving rank."""
    tp = len(src)
    out = []
    for r, (a, b) in enumerate(zip(src, dst)):
        x = gb.transfer(a, b, -(-nbytes // tp), stage=stage, item=item, step=step, phase=phase, label=f"{label}.r{r}")
        if tail[r] >= 0:
            gb.edge(tail[r], x)
        out.append(x)
    return out
