"""Per-layer work shared by the data / sequence / tensor-parallel baselines.

:class:`LayerWork` describes one forward pass (a DiT denoising step over the
full image, or a causal prefill of T tokens) layer by layer: the kernels of
every block (:mod:`flitsim.models.kernels`), of the embedders ("pre") and of
the output entries ("post"), the sequence length p (joint image + text tokens
for SD3 / Flux), the batch, hidden size, K/V width and dtype bytes. Baselines
shard the kernels per device with :meth:`~flitsim.models.Kernels.shard_tokens`
(sequence parallel), :meth:`~flitsim.models.Kernels.shard_heads` (tensor
parallel) and :meth:`~flitsim.models.Kernels.attention_as`, and cut blocks
into their parts (pre-attention, attention, post-attention, MLP).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flitsim.errors import config_error
from flitsim.models.config import ModelConfig, dtype_bytes
from flitsim.models.kernels import Kernels, slice_kernels, step_kernels
from flitsim.models.zoo import as_model
from flitsim.schedules.builder import GraphBuilder, Hardware, check_int, new_builder, resolve_devices, split_layers


def is_joint(cfg: ModelConfig) -> bool:
    """Joint attention over image + text tokens (SD3 MMDiT, Flux)."""
    return cfg.dit_block in ("mmdit", "flux")


def spread(total: int, parts: int) -> list[int]:
    """``total`` split into ``parts`` near-equal integers (the first ``total % parts`` one more)."""
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def block_kind(cfg: ModelConfig, i: int) -> str:
    """Which identical-kernel family block i belongs to (blocks of one family are
    lowered once): Flux double / single stream, HunyuanDiT blocks with and
    without the long-skip merge."""
    kind = "double" if i < cfg.n_layers else "single"
    if cfg.dit_block == "hunyuan" and i > cfg.n_layers // 2:
        kind += "+skip"
    return kind


def dit_model(model: Any, workload: Any) -> tuple[ModelConfig, Any]:
    """(the DiT config, the DiT workload); ``model`` None takes ``workload.model``.

    Raises:
        ConfigError: ``workload`` is not a DitWorkload, the model is not a DiT.
    """
    from flitsim.workloads import DitWorkload

    if not isinstance(workload, DitWorkload):
        raise config_error("workload", type(workload).__name__, "a DitWorkload (flitsim.workloads.dit_workload)")
    cfg = as_model(workload.model if model is None else model)
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


@dataclass(frozen=True)
class LayerWork:
    """One forward pass, layer by layer (see the module docstring).

    Attributes:
        cfg: the model; kind: ``"dit"`` or ``"causal"``.
        blocks: kernels per block, length L.
        pre, post: kernels of the embedding and output entries (None if excluded).
        tokens: p, tokens in the attention sequence (image + text for joint DiTs).
        batch: samples per pass (CFG doubling included).
        steps: denoising steps (1 for a prefill).
        hidden, kv_width: hs and the K+V width per token (elements).
        bytes_per_element: activation dtype bytes.
        decode: kernels of the VAE decode after the last step (None: none;
            ``DitWorkload.decode``).
    """

    cfg: ModelConfig
    kind: str
    blocks: list[Kernels]
    pre: Kernels | None
    post: Kernels | None
    tokens: int
    batch: int
    steps: int
    hidden: int
    kv_width: int
    bytes_per_element: int
    decode: Kernels | None = None

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
        T, B, P = w.text_tokens_, w.step_batch, w.image_tokens
        kinds: dict[str, Kernels] = {}
        blocks = []
        for i in range(cfg.n_blocks):  # blocks of one kind are identical: lower each kind once
            kind = block_kind(cfg, i)
            if kind not in kinds:
                kinds[kind] = step_kernels(cfg, P, layers=i, batch=B, text_tokens=T, dtype=dtype)
            blocks.append(kinds[kind])
        pre = step_kernels(cfg, P, layers=["patch_embed", "cond_embed"], batch=B, text_tokens=T,
                           dtype=dtype) if include_embed_head else None
        post = step_kernels(cfg, P, layers=["final"], batch=B, text_tokens=T, dtype=dtype) if include_embed_head else None
        p = P + (T if is_joint(cfg) else 0)
        S = w.steps if steps is None else steps
        dec = w.decode_kernels(dtype) if include_embed_head else None
        return LayerWork(cfg, "dit", blocks, pre, post, p, B, S, cfg.hidden, cfg.kv_width, b,
                         dec if dec is not None and len(dec) else None)
    from flitsim.schedules.terapipe import causal_seq_tokens

    cfg = as_model(model)
    if cfg.kind != "causal":
        raise config_error("workload", workload, "a DitWorkload for a DiT (an int prefill length is for causal LLMs)")
    T = causal_seq_tokens(workload)
    layer = slice_kernels(cfg, T, 0, layers=0, batch=batch, dtype=dtype)
    blocks = [layer] * cfg.n_layers
    pre = slice_kernels(cfg, T, 0, layers="embed", batch=batch, dtype=dtype) if include_embed_head else None
    post = slice_kernels(cfg, T, 0, layers="head", batch=batch, dtype=dtype, logits_tokens=1) if include_embed_head else None
    return LayerWork(cfg, "causal", blocks, pre, post, T, batch, 1, cfg.hidden, cfg.kv_width, b)


def parallel_setup(model: Any, workload: Any, *, devices: Any, degree: int, steps: int | None, batch: int,
                   gpu: Any, efficiency: Any, dtype: str, include_embed_head: bool, fabric_devices: int | None,
                   comm_streams: int, execution: Any = None, profile: Any = None, interference: Any = None,
                   fabric: Any = None) -> tuple[LayerWork, list[int], GraphBuilder, int]:
    """Common set-up of the parallel baselines: (work, device ids, builder, N).

    Raises:
        ConfigError: bad degree / devices, mismatched model and workload.
    """
    from flitsim.limits import MAX_PARALLEL_DEGREE

    N = check_int("degree", degree)
    if N > MAX_PARALLEL_DEGREE:
        from flitsim.errors import config_error

        raise config_error("degree", N, f"1..={MAX_PARALLEL_DEGREE}")
    work = layer_work(model, workload, steps=None if steps is None else check_int("steps", steps),
                      batch=check_int("batch", batch), dtype=dtype, include_embed_head=include_embed_head)
    ids, size = resolve_devices(N if devices is None else devices, N, fabric_devices)
    gb = new_builder(size, Hardware(gpu, efficiency, dtype, execution, profile, interference, fabric), comm_streams)
    return work, ids, gb, N


def require_token_split(tokens: int, N: int, what: str, field: str = "degree") -> None:
    """Refuse a degree above the tokens it splits (each device needs at least
    one: ``what`` names them, e.g. "image tokens (DistriFusion patches)";
    ``field`` names the degree, e.g. "ulysses x ring" for USP).

    Raises:
        ConfigError: naming ``field``, the token count and what they are.
    """
    if tokens < N:
        raise config_error(field, N, f"at most the {tokens} {what} it splits over the devices "
                                        "(each device needs at least one token)")


def require_head_split(work: LayerWork, N: int, why: str) -> None:
    """Refuse a degree that does not divide the model's attention heads
    (``why`` says which scheme splits them: Megatron TP, DeepSpeed-Ulysses).

    Raises:
        ConfigError: naming ``degree`` and the head count.
    """
    heads = work.cfg.n_heads
    if heads % N:
        raise config_error("degree", N, f"must divide the model's n_heads = {heads} ({why} splits attention "
                                        f"heads evenly over the devices)")


def step_ends(gb: GraphBuilder, work: LayerWork, ids: list[int], N: int, s: int, prev: list[int], which: str) -> list[int]:
    """Add the per-device ``pre`` (embedders) or ``post`` (output) task of step s
    (1/N of the tokens each), chained after ``prev``; returns the new tails."""
    k = work.pre if which == "pre" else work.post
    if k is None:
        return prev
    return gb.compute_on(ids, k.shard_tokens(N), after=prev, step=s, label=f"step{s}.{which}")


def decode_tail(gb: GraphBuilder, work: LayerWork, ids: list[int], prev: list[int]) -> list[int]:
    """Add the VAE decode (``work.decode``) after the last step: the whole
    output on every device of ``ids`` (xDiT gathers the latent to every rank
    and each rank's pipeline decodes it; no parallel VAE for these models),
    each after all of ``prev`` (< 0: none). Returns the new tails (``prev`` if
    there is no decode)."""
    if work.decode is None:
        return prev
    deps = [int(t) for t in prev if t >= 0]
    return gb.compute_on(ids, work.decode, after=[deps] if deps else None, label="vae_decode")
