"""Per-layer work of a transformer: FLOPs, weight bytes, activation bytes in and
out, KV-cache bytes, as functions of batch, new tokens and context.

Conventions (stated once, used everywhere):

- ``*_flops`` count a multiply-add as **2** FLOPs (matmuls only: the elementwise
  work of norms, softmax, RoPE, activations and residual adds is left out; it is
  a fraction of a percent for these shapes). :attr:`OpCost.macs` gives the same
  work with a multiply-add counted **once**, the convention of the DiT paper's
  "Gflops" (Peebles & Xie 2023, Table 4; fvcore-style counting).
- Causal attention (Llama): a slice of ``s`` new tokens after ``c`` context
  tokens computes ``s*c + s*(s+1)/2`` query-key pairs (each new token sees the
  context and the new tokens up to itself), so its cost grows with ``c``
  (TeraPipe). Each pair costs ``2 x n_heads x head_dim`` multiply-adds (QK^T and AV).
- DiT attention is full (non-causal): ``q`` query tokens attend to all ``K`` key
  tokens, ``q*K`` pairs; joint models (SD3, Flux) attend over image + text.
- Bytes: ``weight_bytes`` are the weights one call reads (each weight once per
  call, whatever the batch; an embedding table reads only the gathered rows);
  ``act_in_bytes``/``act_out_bytes`` are the hidden states entering/leaving the
  entry; ``kv_read_bytes`` is cached K/V read (context for causal models, the
  other patches' stale K/V in PipeFusion), ``kv_write_bytes`` the K/V of the new
  tokens, ``kv_cache_bytes`` the K/V held after the call. Intermediate activations
  inside a block are assumed to stay on chip (assumed: fused kernels).

Entry names: causal models ``embed``, ``layer.0`` ... ``layer.{L-1}``, ``head``
(final norm + LM head); DiTs ``patch_embed``, ``cond_embed`` (timestep / class /
text / pooled embedders, adaLN-single), ``block.0`` ... ``block.{N-1}`` (Flux:
double-stream blocks first, then single-stream), ``final`` (adaLN + linear to
patches). Selections (``layers=``) take block indices (ints) and/or entry names.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from flitsim.errors import check_int, config_error
from flitsim.models.config import ModelConfig, dtype_bytes
from flitsim.models.entries import _Entry, _entries
from flitsim.models.zoo import as_model

__all__ = ["OpCost", "entry_names", "param_count", "layer_costs", "slice_cost", "decode_cost", "patch_cost", "dit_step_cost",
           "handoff_bytes", "kv_cache_bytes"]


@dataclass(frozen=True)
class OpCost:
    """Work of one entry (layer, block, embedding, head) or the sum of several.

    Attributes:
        name: entry name, or ``"a..b"`` / ``"sum"`` for a sum.
        params: parameters of the entries (count).
        matmul_flops: FLOPs of the weight matmuls (multiply-add = 2).
        attention_flops: FLOPs of QK^T and AV (multiply-add = 2).
        weight_bytes: weight bytes read by the call.
        act_in_bytes, act_out_bytes: hidden-state bytes entering / leaving
            (summed over entries for a sum: memory traffic, not hand-off).
        kv_read_bytes, kv_write_bytes: cached K/V read, new K/V written.
        kv_cache_bytes: K/V held after the call.
    """

    name: str
    params: int = 0
    matmul_flops: int = 0
    attention_flops: int = 0
    weight_bytes: int = 0
    act_in_bytes: int = 0
    act_out_bytes: int = 0
    kv_read_bytes: int = 0
    kv_write_bytes: int = 0
    kv_cache_bytes: int = 0

    @property
    def flops(self) -> int:
        """Total FLOPs, multiply-add counted as 2."""
        return self.matmul_flops + self.attention_flops

    @property
    def macs(self) -> int:
        """Multiply-adds (the DiT paper's "flops": a multiply-add counted once)."""
        return self.flops // 2

    @property
    def matmul_mem_bytes(self) -> int:
        """HBM bytes of the matmul part: weights + activations in and out."""
        return self.weight_bytes + self.act_in_bytes + self.act_out_bytes

    @property
    def attention_mem_bytes(self) -> int:
        """HBM bytes of the attention part: K/V read and written."""
        return self.kv_read_bytes + self.kv_write_bytes

    @property
    def mem_bytes(self) -> int:
        """All HBM bytes moved: :attr:`matmul_mem_bytes` + :attr:`attention_mem_bytes`."""
        return self.matmul_mem_bytes + self.attention_mem_bytes

    @property
    def flop_per_byte(self) -> float:
        """Arithmetic intensity, FLOP per HBM byte."""
        return self.flops / self.mem_bytes if self.mem_bytes else float("inf")

    def __add__(self, other: "OpCost") -> "OpCost":
        if not isinstance(other, OpCost):
            return NotImplemented
        vals = {f.name: getattr(self, f.name) + getattr(other, f.name)
                for f in dataclasses.fields(self) if f.name != "name"}
        return OpCost(name="sum", **vals)

    def to_dict(self) -> dict[str, Any]:
        """Fields plus ``flops``, ``macs`` and ``mem_bytes``."""
        d = dataclasses.asdict(self)
        d.update(flops=self.flops, macs=self.macs, mem_bytes=self.mem_bytes)
        return d


def _sum(costs: list[OpCost]) -> OpCost:
    if not costs:
        raise config_error("layers", [], "a non-empty selection of entries")
    total = costs[0]
    for c in costs[1:]:
        total = total + c
    name = costs[0].name if len(costs) == 1 else f"{costs[0].name}..{costs[-1].name}"
    return dataclasses.replace(total, name=name)


def param_count(model: ModelConfig | str, layers: Any = None) -> int:
    """Parameters of ``model``: every entry of :func:`layer_costs`, or only the
    ``layers`` selection (block indices / entry names, as :func:`slice_cost`).

    Raises:
        ConfigError: unknown model, bad selection.
    """
    cfg = as_model(model)
    return sum(e.params for e in (_entries(cfg) if layers is None else _select(cfg, layers)))


def entry_names(model: ModelConfig | str) -> list[str]:
    """Entry names of ``model`` in execution order (see the module docstring)."""
    return [e.name for e in _entries(as_model(model))]


def _select(cfg: ModelConfig, layers: Any) -> list[_Entry]:
    entries = _entries(cfg)
    if layers is None:
        return entries
    by_name = {e.name: e for e in entries}
    blocks = [e for e in entries if e.index is not None]
    items = [layers] if isinstance(layers, (int, np.integer, str)) else layers
    try:
        items = list(items)
    except TypeError:
        raise config_error("layers", layers, "None, a block index, an entry name, or an iterable of them") from None
    chosen: list[_Entry] = []
    for it in items:
        if isinstance(it, bool) or not isinstance(it, (int, np.integer, str)):
            raise config_error("layers", it, "a block index (int) or an entry name (str)")
        if not isinstance(it, str):
            it = int(it)
            if not 0 <= it < len(blocks):
                raise config_error("layers", it, f"a block index in [0, {len(blocks) - 1}]")
            chosen.append(blocks[it])
        else:
            if it not in by_name:
                raise config_error("layers", it, f"an entry name: {', '.join(by_name)}")
            chosen.append(by_name[it])
    if not chosen:
        raise config_error("layers", layers, "a non-empty selection")
    return chosen


def _int(field: str, v: Any, minimum: int = 0) -> int:
    # numpy integers are accepted (a schedule's DP hands them over); floats, str and bool are not
    return check_int(field, v, minimum)


@dataclass(frozen=True)
class _Call:
    batch: int
    q: int           # query tokens: new LM tokens / image (patch) tokens
    ctx: int         # causal: context tokens before the slice
    keys: int        # DiT: image key tokens (full sequence P)
    q_txt: int       # DiT: text query tokens in this call (joint/text stream, caption projection)
    txt_keys: int    # DiT: text key tokens (joint or cross-attention)
    logits: int      # causal: tokens whose logits are computed
    b: int           # bytes per element, weights and activations
    kvb: int         # bytes per element, K/V


def _cost(cfg: ModelConfig, e: _Entry, c: _Call) -> OpCost:
    d, B, b = cfg.hidden, c.batch, c.b
    w_bytes = e.params * b
    attn = 0
    kv_r = kv_w = kv_c = 0
    mm = e.macs_sample * B
    if e.kind == "embed":
        rows = min(B * c.q, cfg.vocab_size)
        return OpCost(e.name, e.params, 0, 0, rows * d * b, B * c.q * 4, B * c.q * d * b)
    if e.kind == "head":
        mm = e.macs_q * B * c.logits
        return OpCost(e.name, e.params, 2 * mm, 0, w_bytes, B * c.q * d * b, B * c.logits * cfg.vocab_size * b)
    if e.kind == "layer":
        mm = e.macs_q * B * c.q
        pairs = c.q * c.ctx + c.q * (c.q + 1) // 2
        attn = 2 * cfg.attn_width * B * pairs
        kv_r, kv_w, kv_c = (B * n * cfg.kv_width * c.kvb for n in (c.ctx, c.q, c.ctx + c.q))
        act = B * c.q * d * b
        return OpCost(e.name, e.params, 2 * mm, 2 * attn, w_bytes, act, act, kv_r, kv_w, kv_c)
    # DiT entries
    mm += e.macs_q * B * c.q + e.macs_txt * B * c.q_txt
    if e.kind == "patch_embed":
        pin = cfg.patch_size ** 2 * cfg.latent_channels
        return OpCost(e.name, e.params, 2 * mm, 0, w_bytes, B * c.q * pin * b, B * c.q * d * b)
    if e.kind == "cond_embed":
        w_bytes -= cfg.num_classes * d * b  # class table: one row gathered per sample (already in params once)
        return OpCost(e.name, e.params, 2 * mm, 0, w_bytes, B * c.q_txt * cfg.text_embed_dim * b,
                      B * (c.q_txt + 1) * d * b)
    if e.kind == "final":
        pout = cfg.patch_size ** 2 * cfg.out_channels
        return OpCost(e.name, e.params, 2 * mm, 0, w_bytes, B * c.q * d * b, B * c.q * pout * b)
    joint = e.block in ("mmdit", "flux_double", "flux_single")
    if joint:
        qt, kt = c.q + c.q_txt, c.keys + c.txt_keys
        pairs = qt * kt
    else:
        qt, kt = c.q, c.keys
        cross = c.q * c.txt_keys if e.block in ("pixart", "hunyuan", "sana") else 0
        # SANA's self-attention is linear (its work is in macs_q); only the cross-attention has pairs
        pairs = (0 if e.block == "sana" else c.q * c.keys) + cross
    attn = 2 * cfg.attn_width * B * pairs
    kv_r, kv_w, kv_c = (B * n * cfg.kv_width * c.kvb for n in (kt - qt, qt, kt))
    act = B * qt * d * b
    return OpCost(e.name, e.params, 2 * mm, 2 * attn, w_bytes, act, act, kv_r, kv_w, kv_c)


def _causal_call(cfg: ModelConfig, batch: Any, new_tokens: Any, context_tokens: Any, dtype: str,
                 kv_dtype: str | None, logits_tokens: Any) -> _Call:
    if cfg.kind != "causal":
        raise config_error("model", cfg.name, "a causal model here (use patch_cost / dit_step_cost for DiTs)")
    B, s, c = _int("batch", batch, 1), _int("new_tokens", new_tokens, 1), _int("context_tokens", context_tokens)
    lg = s if logits_tokens is None else _int("logits_tokens", logits_tokens)
    if lg > s:
        raise config_error("logits_tokens", lg, f"at most new_tokens = {s}")
    return _Call(B, s, c, 0, 0, 0, lg, dtype_bytes(dtype), dtype_bytes(kv_dtype or dtype))


def _dit_call(cfg: ModelConfig, batch: Any, patch_tokens: Any, seq_tokens: Any, text_query_tokens: Any,
              text_tokens: Any, dtype: str, kv_dtype: str | None) -> _Call:
    if cfg.kind != "dit":
        raise config_error("model", cfg.name, "a DiT here (use slice_cost / decode_cost for causal models)")
    B, P = _int("batch", batch, 1), _int("seq_tokens", seq_tokens, 1)
    p = _int("patch_tokens", patch_tokens, 1)
    if p > P:
        raise config_error("patch_tokens", p, f"at most seq_tokens = {P}")
    T = cfg.text_tokens if text_tokens is None else _int("text_tokens", text_tokens)
    tq = _int("text_query_tokens", text_query_tokens)
    if tq > T:
        raise config_error("text_query_tokens", tq, f"at most text_tokens = {T}")
    return _Call(B, p, 0, P, tq, T, 0, dtype_bytes(dtype), dtype_bytes(kv_dtype or dtype))


# --------------------------------------------------------------------------- public API
def layer_costs(model: ModelConfig | str, *, batch: int = 1, new_tokens: int | None = None,
                context_tokens: int = 0, seq_tokens: int | None = None, patch_tokens: int | None = None,
                text_tokens: int | None = None, text_query_tokens: int | None = None, dtype: str = "bf16",
                kv_dtype: str | None = None, logits_tokens: int | None = None) -> pd.DataFrame:
    """Per-entry cost table of one forward call, one row per entry in execution order.

    Causal models: ``new_tokens`` (s) after ``context_tokens`` (c) per sample
    (prefill: c = 0; decode: s = 1). DiTs: ``patch_tokens`` (default all)
    image tokens of a ``seq_tokens``-token image, with ``text_query_tokens``
    (default: all text tokens when the whole image is computed, else 0) text tokens.

    Returns:
        DataFrame indexed by entry name with the :class:`OpCost` fields plus
        ``flops``, ``macs``, ``mem_bytes``, ``kind`` and ``block`` columns.

    Raises:
        ConfigError: unknown model, wrong kind of model for the arguments,
            negative / non-integer lengths, unknown dtype.
    """
    cfg = as_model(model)
    if cfg.kind == "causal":
        if new_tokens is None:
            raise config_error("new_tokens", None, "an integer >= 1 for a causal model")
        call = _causal_call(cfg, batch, new_tokens, context_tokens, dtype, kv_dtype, logits_tokens)
    else:
        if seq_tokens is None:
            raise config_error("seq_tokens", None, "an integer >= 1 (image tokens) for a DiT")
        p = seq_tokens if patch_tokens is None else patch_tokens
        T = cfg.text_tokens if text_tokens is None else text_tokens
        tq = (T if p == seq_tokens else 0) if text_query_tokens is None else text_query_tokens
        call = _dit_call(cfg, batch, p, seq_tokens, tq, T, dtype, kv_dtype)
    entries = _entries(cfg)
    rows = []
    for e in entries:
        d = _cost(cfg, e, call).to_dict()
        d.update(kind=e.kind, block=e.block)
        rows.append(d)
    return pd.DataFrame(rows).set_index("name")


def slice_cost(model: ModelConfig | str, new_tokens: int, context_tokens: int = 0, *, layers: Any = None,
               batch: int = 1, dtype: str = "bf16", kv_dtype: str | None = None,
               logits_tokens: int | None = None) -> OpCost:
    """Cost of a causal model's ``layers`` for a slice of ``new_tokens`` (s) new
    tokens after ``context_tokens`` (c) tokens, per sample x ``batch`` (TeraPipe
    slice, prefill chunk, or a decode step with s = 1).

    Attention grows with c: ``2 x n_heads x head_dim x (s*c + s(s+1)/2)`` MACs per layer.

    Args:
        layers: None (the whole model: embed, all layers, head), a layer index,
            an entry name (``"embed"``, ``"head"``, ``"layer.3"``), or an
            iterable of them (e.g. ``range(0, 40)`` for a pipeline stage).
        logits_tokens: tokens whose logits the head computes (default s; 1 for
            inference prefill that only samples the last token).

    Raises:
        ConfigError: not a causal model, bad selection, negative / non-int lengths, unknown dtype.
    """
    cfg = as_model(model)
    call = _causal_call(cfg, batch, new_tokens, context_tokens, dtype, kv_dtype, logits_tokens)
    return _sum([_cost(cfg, e, call) for e in _select(cfg, layers)])


def decode_cost(model: ModelConfig | str, context_tokens: int, *, layers: Any = None, batch: int = 1,
                dtype: str = "bf16", kv_dtype: str | None = None) -> OpCost:
    """One decode step: ``slice_cost(model, 1, context_tokens, ...)`` with every
    sample of the batch at the same context length.

    Raises:
        ConfigError: as :func:`slice_cost`.
    """
    return slice_cost(model, 1, context_tokens, layers=layers, batch=batch, dtype=dtype, kv_dtype=kv_dtype)


def patch_cost(model: ModelConfig | str, patch_tokens: int, seq_tokens: int, *, layers: Any = None,
               batch: int = 1, text_query_tokens: int = 0, text_tokens: int | None = None, dtype: str = "bf16",
               kv_dtype: str | None = None) -> OpCost:
    """Cost of a DiT's ``layers`` for a patch of ``patch_tokens`` (p) image tokens
    attending to the full sequence of ``seq_tokens`` (P) image tokens (plus the
    model's text tokens for joint models; cross-attention to them for PixArt):
    one PipeFusion patch (the other patches' K/V are the stale ones read from
    the cache). Full (non-causal) attention: p x P pairs, the same for every patch.

    Per-sample conditioning work (adaLN modulation linears) is charged in full
    to every call (it is < 0.2 % of a block at 256 tokens). The text stream of
    joint models (SD3, Flux) is charged for ``text_query_tokens`` tokens
    (default 0): pass ``text_tokens`` on one patch per step so that the patches
    sum to the full step.

    Args:
        layers: as :func:`slice_cost`; entry names ``patch_embed``, ``cond_embed``,
            ``block.N``, ``final``.
        text_tokens: text key tokens (default the model's ``text_tokens``).

    Raises:
        ConfigError: not a DiT, p > P, negative / non-int lengths, unknown dtype.
    """
    cfg = as_model(model)
    call = _dit_call(cfg, batch, patch_tokens, seq_tokens, text_query_tokens, text_tokens, dtype, kv_dtype)
    return _sum([_cost(cfg, e, call) for e in _select(cfg, layers)])


def dit_step_cost(model: ModelConfig | str, seq_tokens: int, *, layers: Any = None, batch: int = 1,
                  text_tokens: int | None = None, dtype: str = "bf16") -> OpCost:
    """One full denoising step of a DiT over ``seq_tokens`` image tokens (and
    all text tokens) for ``batch`` samples (classifier-free guidance: pass the
    doubled batch). Equals :func:`patch_cost` with p = P.

    Raises:
        ConfigError: as :func:`patch_cost`.
    """
    cfg = as_model(model)
    T = cfg.text_tokens if text_tokens is None else text_tokens
    return patch_cost(cfg, seq_tokens, seq_tokens, layers=layers, batch=batch, text_query_tokens=T,
                      text_tokens=T, dtype=dtype)


def handoff_bytes(model: ModelConfig | str, tokens: int, *, batch: int = 1, text_tokens: int = 0,
                  dtype: str = "bf16") -> int:
    """Bytes one pipeline stage sends the next: the hidden states of ``tokens``
    tokens (plus ``text_tokens`` text-stream tokens for joint DiTs), i.e.
    ``batch x (tokens + text_tokens) x hidden x bytes(dtype)``. For PipeFusion
    this is the xDiT README's ``p x hs`` per patch per hop.

    Raises:
        ConfigError: unknown model, negative / non-int counts, unknown dtype.
    """
    cfg = as_model(model)
    n = _int("tokens", tokens) + _int("text_tokens", text_tokens)
    return _int("batch", batch, 1) * n * cfg.hidden * dtype_bytes(dtype)


def kv_cache_bytes(model: ModelConfig | str, tokens: int, *, layers: Any = None, batch: int = 1,
                   dtype: str = "bf16") -> int:
    """K/V bytes held for ``tokens`` tokens per sample over ``layers`` (default
    all blocks): ``batch x tokens x 2 x n_kv_heads x head_dim x bytes`` per
    layer (Llama-3-70B bf16: 320 KiB per token over 80 layers). For a DiT under
    PipeFusion this is the stale K/V buffer of the full sequence.

    Raises:
        ConfigError: unknown model, bad selection, negative / non-int counts, unknown dtype.
    """
    cfg = as_model(model)
    n = _int("tokens", tokens)
    B = _int("batch", batch, 1)
    sel = _select(cfg, layers) if layers is not None else [e for e in _entries(cfg) if e.index is not None]
    nblocks = sum(1 for e in sel if e.index is not None)
    return nblocks * B * n * cfg.kv_width * dtype_bytes(dtype)
