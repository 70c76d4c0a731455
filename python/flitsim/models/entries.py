"""The entry table of a model: its embedders, blocks and head in execution
order, each with its parameters and matmul multiply-adds per query token, per
text token and per sample (the shapes :mod:`flitsim.models.cost` and
:mod:`flitsim.models.kernels` are computed from)."""

from __future__ import annotations

from dataclasses import dataclass

from flitsim.models.config import ModelConfig

@dataclass(frozen=True)
class _Entry:
    name: str
    kind: str             # embed | layer | head | patch_embed | cond_embed | block | final
    block: str | None     # llama | dit | pixart | mmdit | flux_double | flux_single
    index: int | None
    params: int
    macs_q: int           # matmul MACs per query (new / image) token
    macs_txt: int         # matmul MACs per text token (text stream, caption projection)
    macs_sample: int      # matmul MACs per sample (conditioning-vector linears)


_ENTRY_MEMO: dict[int, tuple[ModelConfig, tuple[_Entry, ...]]] = {}
"""id(cfg) -> (cfg, its entries): builders look the table up once per task
(frozen configs and entries, so one table serves every call; the entry holds
the config, so its id is not reused)."""


def _entries(cfg: ModelConfig) -> list[_Entry]:
    """The entry table of ``cfg`` (a new list each call; the entries are frozen)."""
    hit = _ENTRY_MEMO.get(id(cfg))
    if hit is not None and hit[0] is cfg:
        return list(hit[1])
    out = _entries_of(cfg)
    if len(_ENTRY_MEMO) >= 256:
        _ENTRY_MEMO.clear()
    _ENTRY_MEMO[id(cfg)] = (cfg, tuple(out))
    return out


def _entries_of(cfg: ModelConfig) -> list[_Entry]:
    d, f, aw, kw = cfg.hidden, cfg.ffn_hidden, cfg.attn_width, cfg.kv_width
    mlp = (3 if cfg.ffn_act == "swiglu" else 2) * d * f
    out: list[_Entry] = []
    if cfg.kind == "causal":
        v = cfg.vocab_size
        out.append(_Entry("embed", "embed", None, None, v * d, 0, 0, 0))
        layer_macs = d * aw + d * kw + aw * d + mlp  # q, k+v, o, FFN
        layer_params = layer_macs + 2 * d
        if cfg.n_experts:  # MoE: n_experts SwiGLU experts + a router; a token runs top-k of them
            E, k = cfg.n_experts, cfg.experts_per_token
            layer_params = d * aw + d * kw + aw * d + E * mlp + d * E + 2 * d
            layer_macs = d * aw + d * kw + aw * d + k * mlp + d * E
        if cfg.qk_norm:
            layer_params += 2 * cfg.head_width  # Qwen3: RMSNorm weights on q and k heads
        for i in range(cfg.n_layers):
            out.append(_Entry(f"layer.{i}", "layer", "llama", i, layer_params, layer_macs, 0, 0))
        out.append(_Entry("head", "head", None, None, d + (0 if cfg.tie_embeddings else v * d), d * v, 0, 0))
        return out

    pin = cfg.patch_size ** 2 * cfg.latent_channels
    pout = cfg.patch_size ** 2 * cfg.out_channels
    fe, te, pd_ = cfg.freq_embed_dim, cfg.text_embed_dim, cfg.pooled_dim
    t_mlp = fe * d + d * d  # TimestepEmbedder: freq -> d -> d
    out.append(_Entry("patch_embed", "patch_embed", None, None, pin * d + d, pin * d, 0, 0))
    blk = cfg.dit_block
    if blk == "adaln":
        cond = _Entry("cond_embed", "cond_embed", None, None, t_mlp + 2 * d + (cfg.num_classes + 1) * d, 0, 0, t_mlp)
    elif blk == "hunyuan":
        # timestep MLP; mT5 projection (te -> 4 x ctx -> ctx) of the text tokens; the extra
        # embedder (pooled text + image-size and style embeddings -> d; assumed 4 d wide)
        ctx_dim = cfg.cross_attention_dim or d
        cap = te * 4 * ctx_dim + 4 * ctx_dim * ctx_dim
        extra = (pd_ + 7 * fe) * 4 * d + 4 * d * d
        cond = _Entry("cond_embed", "cond_embed", None, None, t_mlp + cap + extra, 0, cap, t_mlp + extra)
    elif blk == "sana":
        cap = te * d + d * d  # caption projection MLP (Gemma-2 2304 -> d -> d)
        cond = _Entry("cond_embed", "cond_embed", None, None, t_mlp + 6 * d * d + 6 * d + cap, 0, cap,
                      t_mlp + 6 * d * d)
    elif blk == "adaln_single_cross":
        cap = te * d + d * d  # caption projection MLP
        cond = _Entry("cond_embed", "cond_embed", None, None, t_mlp + 2 * d + 6 * d * d + 6 * d + cap + 2 * d,
                      0, cap, t_mlp + 6 * d * d)
    else:
        vec = (pd_ * d + d * d) + (t_mlp if cfg.guidance_embed else 0)
        ctx = te * d
        cond = _Entry("cond_embed", "cond_embed", None, None, t_mlp + vec + ctx + 6 * d, 0, ctx, t_mlp + vec)
    out.append(cond)
    qkvo = 2 * d * aw + d * kw  # q and o (d x aw each), k and v (d x kw together)
    biases_stream = 3 * aw + d + f + d
    for i in range(cfg.n_layers):
        if blk == "adaln":
            e = _Entry(f"block.{i}", "block", "dit", i, qkvo + mlp + 6 * d * d + biases_stream + 6 * d,
                       qkvo + mlp, 0, 6 * d * d)
        elif blk == "adaln_single_cross":
            cross_q = 2 * d * d  # cross-attn Q and output projections (per image token)
            cross_kv = 2 * d * d  # cross-attn K and V (per text token)
            e = _Entry(f"block.{i}", "block", "pixart", i,
                       qkvo + cross_q + cross_kv + mlp + biases_stream + 4 * d + 6 * d,
                       qkvo + cross_q + mlp, cross_kv, 0)
        elif blk == "hunyuan":
            ctx_dim = cfg.cross_attention_dim or d
            cross_q = 2 * d * d  # cross-attn Q and output projections (per image token)
            cross_kv = 2 * ctx_dim * d  # cross-attn K and V from the text states (per text token)
            skip = 2 * d * d + 2 * d + 2 * d if i > cfg.n_layers // 2 else 0  # LayerNorm(2d) + Linear(2d -> d)
            e = _Entry(f"block.{i}", "block", "hunyuan", i,
                       qkvo + cross_q + cross_kv + mlp + biases_stream + d * d + d + 6 * d + skip,
                       qkvo + cross_q + mlp + (skip - 4 * d if skip else 0), cross_kv, d * d)
        elif blk == "sana":
            hd1 = cfg.head_width + 1
            lin = 2 * hd1 * aw  # linear attention: K^T [V 1] state and Q x state, MACs per token
            cross_q = 2 * d * d
            cross_kv = 2 * d * d
            ffn = 3 * d * f  # GLUMBConv: 1x1 d -> 2f, depthwise 3x3 on 2f, GLU, 1x1 f -> d
            e = _Entry(f"block.{i}", "block", "sana", i,
                       qkvo + cross_q + cross_kv + ffn + 2 * f * 9 + 2 * f + 3 * aw + 4 * d + 6 * d,
                       qkvo + cross_q + ffn + lin, cross_kv, 0)
        else:  # mmdit / flux double: two streams with their own weights and adaLN
            e = _Entry(f"block.{i}", "block", "mmdit" if blk == "mmdit" else "flux_double", i,
                       2 * (qkvo + mlp + 6 * d * d + biases_stream + 6 * d), qkvo + mlp, qkvo + mlp, 2 * 6 * d * d)
        out.append(e)
    for j in range(cfg.n_single_layers):
        i = cfg.n_layers + j
        per_tok = d * (3 * aw + f) + (aw + f) * d  # fused linear1 (QKV + MLP in), linear2 (attn out + MLP out)
        out.append(_Entry(f"block.{i}", "block", "flux_single", i, per_tok + 3 * aw + f + d + 3 * d * d + 3 * d,
                          per_tok, per_tok, 3 * d * d))
    if blk in ("adaln_single_cross", "sana"):
        out.append(_Entry("final", "final", None, None, d * pout + pout + 2 * d, d * pout, 0, 0))
    else:
        out.append(_Entry("final", "final", None, None, 2 * d * d + 2 * d + d * pout + pout, d * pout, 0, 2 * d * d))
    return out
