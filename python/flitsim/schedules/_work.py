"""Per-layer work shared by the data/sequence/tensor-parallel baselines.

:class:`LayerWork` describes one forward pass (a DiT denoising step over the
full image, or a causal prefill of T tokens) layer by layer, as the roofline
model sees it: the full-pass :class:`~flitsim.models.OpCost` of every block,
the embedding ("pre") and output ("post") entries, the sequence length p (joint
image + text tokens for SD3 / Flux), the batch, hidden size, K/V width and
dtype bytes. Baselines split these costs per device:

- ``shard_tokens(cost, N)``: 1/N of the tokens; weights are read in full.
- ``shard_weights(cost, N)``: 1/N of the heads and FFN columns (tensor
  parallel); activations are read in full.
- the matmul time is split between the attention projections and the MLP by
  their parameter share (``attn_param_share``), an approximation.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from flitsim.errors import config_error
from flitsim.models import OpCost, dit_step_cost, slice_cost
from flitsim.models.config import ModelConfig, _ensure_config, dtype_bytes
from flitsim.schedules._common import scale_cost, split_layers


def is_joint(cfg: ModelConfig) -> bool:
    """Joint attention over image + text tokens (SD3 MMDiT, Flux)."""
    return cfg.dit_block in ("mmdit", "flux")


def spread(total: int, parts: int) -> list[int]:
    """``total`` split into ``parts`` near-equal integers (the first ``total % parts`` one more)."""
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def dit_model(model: Any, workload: Any) -> tuple[ModelConfig, Any]:
    """(the DiT config, the DiT workload); ``model`` None takes ``workload.model``.

    Raises:
        ConfigError: ``workload`` is not a DitWorkload, the model is not a DiT.
    """
    from flitsim.workloads import DitWorkload

    if not isinstance(workload, DitWorkload):
        raise config_error("workload", type(workload).__name__, "a DitWorkload (flitsim.workloads.dit_workload)")
    cfg = _ensure_config(workload.model if model is None else model)
    if cfg.kind != "dit":
        raise config_error("model", cfg.name, "a diffusion transformer (DiT) for this schedule")
    return cfg, workload


def dit_stage_layers(cfg: ModelConfig, stages: int) -> list[list[Any]]:
    """Entry selections per pipeline stage of a DiT: balanced block ranges,
    embedders on stage 0, the final layer on the last."""
    groups: list[list[Any]] = [list(r) for r in split_layers(cfg.n_blocks, stages)]
    groups[0] = ["patch_embed", "cond_embed", *groups[0]]
    groups[-1] = [*groups[-1], "final"]
    return groups


def attn_param_share(cfg: ModelConfig) -> tuple[float, float]:
    """(QKV share, output-projection share) of a block's matmul parameters
    (the rest is the MLP): q d x aw, k+v d x kv_width, o aw x d, MLP 2 or 3 x d x ffn."""
    d, aw, kw, f = cfg.hidden, cfg.attn_width, cfg.kv_width, cfg.ffn_hidden
    mlp = (3 if cfg.ffn_act == "swiglu" else 2) * d * f
    tot = 2 * d * aw + d * kw + mlp
    return (d * aw + d * kw) / tot, (d * aw) / tot


def matmul_only(cost: OpCost) -> OpCost:
    return dataclasses.replace(cost, attention_flops=0, kv_read_bytes=0, kv_write_bytes=0)


def attention_only(cost: OpCost) -> OpCost:
    return dataclasses.replace(cost, matmul_flops=0, weight_bytes=0, act_in_bytes=0, act_out_bytes=0)


def shard_tokens(cost: OpCost, n: int) -> OpCost:
    """1/n of the tokens: every field / n except the weights (read in full)."""
    return dataclasses.replace(scale_cost(cost, 1.0 / n), weight_bytes=cost.weight_bytes, params=cost.params)


def shard_weights(cost: OpCost, n: int) -> OpCost:
    """1/n of the heads and FFN columns: every field / n except the activations."""
    return dataclasses.replace(scale_cost(cost, 1.0 / n), act_in_bytes=cost.act_in_bytes,
                               act_out_bytes=cost.act_out_bytes)


@dataclass(frozen=True)
class LayerWork:
    """One forward pass, layer by layer (see the module docstring).

    Attributes:
        cfg: the model; kind: ``"dit"`` or ``"causal"``.
        blocks: full-pass cost per block, length L.
        pre, post: embedding and output entries (None if excluded).
        tokens: p, tokens in the attention sequence (image + text for joint DiTs).
        batch: samples per pass (CFG doubling included).
        steps: denoising steps (1 for a prefill).
        hidden, kv_width: hs and the K+V width per token (elements).
        bytes_per_element: activation dtype bytes.
    """

    cfg: ModelConfig
    kind: str
    blocks: list[OpCost]
    pre: OpCost | None
    post: OpCost | None
    tokens: int
    batch: int
    steps: int
    hidden: int
    kv_width: int
    bytes_per_element: int

    @property
    def act_bytes(self) -> int:
        """p x hs x bytes x batch: one activation tensor of the whole sequence."""
        return self.tokens * self.hidden * self.bytes_per_element * self.batch

    @property
    def kv_bytes(self) -> int:
        """K and V of the whole sequence for one layer, bytes."""
        return self.tokens * self.kv_width * self.bytes_per_element * self.batch


def layer_work(model: Any, workload: Any, *, steps: int | None = None, batch: int = 1, dtype: str = "bf16",
               include_embed_head: bool = True) -> LayerWork:
    """:class:`LayerWork` for a DiT step (``workload`` a DitWorkload) or a causal
    prefill (``workload`` an int, tokens; ``batch`` sequences).

    Raises:
        ConfigError: mismatched model and workload.
    """
    from flitsim.workloads import DitWorkload

    b = dtype_bytes(dtype)
    if isinstance(workload, DitWorkload):
        cfg, w = dit_model(model, workload)
        T, B = w.text_tokens_, w.step_batch
        blocks = [dit_step_cost(cfg, w.image_tokens, layers=i, batch=B, text_tokens=T, dtype=dtype)
                  for i in range(cfg.n_blocks)]
        pre = dit_step_cost(cfg, w.image_tokens, layers=["patch_embed", "cond_embed"], batch=B, text_tokens=T,
                            dtype=dtype) if include_embed_head else None
        post = dit_step_cost(cfg, w.image_tokens, layers=["final"], batch=B, text_tokens=T,
                             dtype=dtype) if include_embed_head else None
        p = w.image_tokens + (T if is_joint(cfg) else 0)
        S = w.steps if steps is None else steps
        return LayerWork(cfg, "dit", blocks, pre, post, p, B, S, cfg.hidden, cfg.kv_width, b)
    from flitsim.schedules.terapipe import causal_seq_tokens

    cfg = _ensure_config(model)
    if cfg.kind != "causal":
        raise config_error("workload", workload, "a DitWorkload for a DiT (an int prefill length is for causal LLMs)")
    T = causal_seq_tokens(workload)
    blocks = [slice_cost(cfg, T, 0, layers=i, batch=batch, dtype=dtype) for i in range(cfg.n_layers)]
    pre = slice_cost(cfg, T, 0, layers="embed", batch=batch, dtype=dtype) if include_embed_head else None
    post = slice_cost(cfg, T, 0, layers="head", batch=batch, dtype=dtype, logits_tokens=1) if include_embed_head else None
    return LayerWork(cfg, "causal", blocks, pre, post, T, batch, 1, cfg.hidden, cfg.kv_width, b)


def parallel_setup(model: Any, workload: Any, *, devices: Any, degree: int, steps: int | None, batch: int,
                   gpu: Any, efficiency: Any, dtype: str, include_embed_head: bool, fabric_devices: int | None,
                   comm_streams: int) -> tuple[LayerWork, list[int], Any, int]:
    """Common set-up of the parallel baselines: (work, device ids, builder, N).

    Raises:
        ConfigError: bad degree / devices, mismatched model and workload.
    """
    from flitsim.schedules._common import Hardware, check_int, new_builder, resolve_devices

    from flitsim.limits import MAX_PARALLEL_DEGREE

    N = check_int("degree", degree)
    if N > MAX_PARALLEL_DEGREE:
        from flitsim.errors import config_error

        raise config_error("degree", N, f"1..={MAX_PARALLEL_DEGREE}")
    work = layer_work(model, workload, steps=None if steps is None else check_int("steps", steps),
                      batch=check_int("batch", batch), dtype=dtype, include_embed_head=include_embed_head)
    ids, size = resolve_devices(N if devices is None else devices, N, fabric_devices)
    gb = new_builder(size, Hardware(gpu, efficiency, dtype), comm_streams)
    return work, ids, gb, N


def step_ends(gb: Any, work: LayerWork, ids: list[int], N: int, s: int, prev: list[int], which: str) -> list[int]:
    """Add the per-device ``pre`` (embedders) or ``post`` (output) task of step s
    (1/N of the tokens each), chained after ``prev``; returns the new tails."""
    cost = work.pre if which == "pre" else work.post
    if cost is None:
        return prev
    out = []
    for d in range(N):
        t = gb.compute(ids[d], shard_tokens(cost, N), stage=-1, item=d, step=s, phase="step", label=f"step{s}.{which}.d{d}")
        if prev[d] >= 0:
            gb.edge(prev[d], t)
        out.append(t)
    return out
