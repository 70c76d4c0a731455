"""Transformer configurations: causal decoders (Llama family) and diffusion
transformers (DiT, PixArt-alpha, SD3 MMDiT, Flux).

A :class:`ModelConfig` holds the shape of a model; :mod:`flitsim.models.cost`
turns it into per-layer FLOPs and bytes. User-defined configs come from a dict
(:meth:`ModelConfig.from_dict`) or a Hugging Face / diffusers ``config.json``
read from disk (:func:`from_hf_config`; never from the network).
"""

from __future__ import annotations

import json
import os
from typing import Any, Literal

from pydantic import Field

from flitsim._spec import Spec
from flitsim.errors import ConfigError, config_error

__all__ = ["ModelConfig", "DTYPE_BYTES", "dtype_bytes", "from_hf_config"]

#: Bytes per element of each supported dtype.
DTYPE_BYTES: dict[str, int] = {"bf16": 2, "fp16": 2, "fp8": 1, "fp32": 4}


def dtype_bytes(dtype: str) -> int:
    """Bytes per element of ``dtype`` (``bf16``, ``fp16``, ``fp8``, ``fp32``).

    Raises:
        ConfigError: for any other dtype.
    """
    if not isinstance(dtype, str) or dtype.lower() not in DTYPE_BYTES:
        raise config_error("dtype", dtype, f"expected one of {sorted(DTYPE_BYTES)}")
    return DTYPE_BYTES[dtype.lower()]


class ModelConfig(Spec):
    """Shape of a transformer.

    ``kind = "causal"``: a decoder-only LM (Llama-style: RMSNorm, GQA attention
    with ``n_kv_heads``, SwiGLU FFN of width ``ffn_hidden``, untied LM head
    unless ``tie_embeddings``).

    ``kind = "dit"``: a diffusion transformer over ``latent_channels``-channel
    latents (``vae_factor`` x downsampled), cut into ``patch_size`` x
    ``patch_size`` patches. ``dit_block`` picks the block:

    - ``adaln``: DiT (Peebles & Xie 2023): self-attention + GELU MLP, adaLN-Zero
      modulation (a ``hidden -> 6 hidden`` linear per block on the conditioning vector).
    - ``adaln_single_cross``: PixArt-alpha: DiT block + cross-attention to
      ``text_tokens`` T5 tokens; adaLN-single (one shared ``hidden -> 6 hidden``
      linear, per-block tables).
    - ``mmdit``: SD3: two streams (image, text) with their own weights and
      adaLN, one joint attention over image + text tokens.
    - ``flux``: Flux.1: ``n_layers`` double-stream (MMDiT-like) blocks then
      ``n_single_layers`` single-stream blocks (fused QKV+MLP-in linear,
      fused out linear, ``hidden -> 3 hidden`` modulation).

    Fields are the usual config names; ``sources`` cites where the numbers come from.

    Raises:
        ConfigError: on invalid fields (non-positive sizes, heads not dividing
            hidden when ``head_dim`` is not given, KV heads not dividing heads).
    """

    name: str
    kind: Literal["causal", "dit"]
    n_layers: int = Field(ge=1, description="decoder layers / DiT blocks (Flux: double-stream blocks)")
    n_single_layers: int = Field(default=0, ge=0, description="Flux single-stream blocks")
    hidden: int = Field(ge=1)
    n_heads: int = Field(ge=1)
    n_kv_heads: int | None = Field(default=None, ge=1)
    head_dim: int | None = Field(default=None, ge=1)
    ffn_hidden: int = Field(ge=1)
    ffn_act: Literal["swiglu", "gelu"] = "swiglu"
    vocab_size: int = Field(default=0, ge=0)
    tie_embeddings: bool = False
    # diffusion transformers
    dit_block: Literal["adaln", "adaln_single_cross", "mmdit", "flux"] | None = None
    patch_size: int = Field(default=2, ge=1)
    latent_channels: int = Field(default=4, ge=1)
    vae_factor: int = Field(default=8, ge=1)
    learn_sigma: bool = False
    text_tokens: int = Field(default=0, ge=0, description="conditioning text tokens (cross-attn or joint)")
    text_embed_dim: int = Field(default=0, ge=0, description="width of the text encoder output (T5: 4096)")
    pooled_dim: int = Field(default=0, ge=0, description="pooled text embedding width (SD3 2048, Flux 768)")
    num_classes: int = Field(default=0, ge=0, description="class-conditional DiT: label classes")
    freq_embed_dim: int = Field(default=256, ge=1, description="sinusoidal timestep embedding width")
    guidance_embed: bool = False
    cfg_default: bool = True
    sources: tuple[str, ...] = ()

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        self._check()  # cross-field rules, outside pydantic so the error names one field

    def _check(self) -> None:
        if self.head_dim is None and self.hidden % self.n_heads:
            raise config_error(f"{self.name}.n_heads", self.n_heads, f"must divide hidden = {self.hidden} "
                               "(or give head_dim)")
        if self.n_heads % self.kv_heads:
            raise config_error(f"{self.name}.n_kv_heads", self.n_kv_heads, f"must divide n_heads = {self.n_heads}")
        if self.kind == "causal" and self.vocab_size < 1:
            raise config_error(f"{self.name}.vocab_size", self.vocab_size, "a causal model needs vocab_size >= 1")
        if self.kind == "dit" and self.dit_block is None:
            raise config_error(f"{self.name}.dit_block", None,
                               "a DiT needs one of 'adaln', 'adaln_single_cross', 'mmdit', 'flux'")
        if self.kind == "causal" and self.dit_block is not None:
            raise config_error(f"{self.name}.dit_block", self.dit_block, "only for kind = 'dit'")

    # derived sizes ----------------------------------------------------------
    @property
    def kv_heads(self) -> int:
        """KV heads (``n_kv_heads``, default ``n_heads``)."""
        return self.n_kv_heads or self.n_heads

    @property
    def head_width(self) -> int:
        """Per-head width (``head_dim``, default ``hidden / n_heads``)."""
        return self.head_dim or self.hidden // self.n_heads

    @property
    def attn_width(self) -> int:
        """``n_heads x head_dim``: width of Q and of the attention output."""
        return self.n_heads * self.head_width

    @property
    def kv_width(self) -> int:
        """Elements of K plus V stored per token per layer: ``2 x kv_heads x head_dim``."""
        return 2 * self.kv_heads * self.head_width

    @property
    def n_blocks(self) -> int:
        """Transformer blocks in order (Flux: double then single-stream)."""
        return self.n_layers + self.n_single_layers

    @property
    def spatial_factor(self) -> int:
        """Pixels per token side: ``vae_factor x patch_size`` (16 for all zoo DiTs)."""
        return self.vae_factor * self.patch_size

    @property
    def out_channels(self) -> int:
        """Latent channels predicted per position (x2 with learned sigma)."""
        return self.latent_channels * (2 if self.learn_sigma else 1)

    def image_tokens(self, height_px: int, width_px: int | None = None) -> int:
        """Image tokens for a ``height_px x width_px`` image:
        ``(H / (vae x patch)) x (W / (vae x patch))``.

        Raises:
            ConfigError: if the model is not a DiT, or a side is not a positive
                multiple of ``vae_factor x patch_size``.
        """
        if self.kind != "dit":
            raise config_error("model", self.name, "image tokens need a DiT model")
        width_px = height_px if width_px is None else width_px
        f = self.spatial_factor
        for field, v in (("height_px", height_px), ("width_px", width_px)):
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0 or v % f:
                raise config_error(field, v, f"a positive multiple of vae_factor x patch_size = "
                                   f"{self.vae_factor} x {self.patch_size} = {f} px")
        return (height_px // f) * (width_px // f)

    def param_count(self) -> int:
        """Total parameters (every entry of :func:`flitsim.models.layer_costs`)."""
        from flitsim.models.cost import _entries

        return sum(e.params for e in _entries(self))


def _get(d: dict[str, Any], *keys: str, default: Any = None) -> Any:
    for k in keys:
        if k in d and d[k] is not None:
            return d[k]
    return default


def from_hf_config(path: str | os.PathLike[str], name: str | None = None) -> ModelConfig:
    """Read a Hugging Face ``config.json`` (transformers causal LMs:
    Llama/Mistral/Qwen-style keys) or a diffusers transformer config
    (``_class_name`` of ``DiTTransformer2DModel``, ``PixArtTransformer2DModel``,
    ``SD3Transformer2DModel``, ``FluxTransformer2DModel``) from disk. Never
    touches the network.

    Args:
        path: a ``config.json`` file, or a directory holding one.
        name: model name (default: ``_name_or_path``, else the directory name).

    Raises:
        ConfigError: missing/unreadable file, not JSON, or an unsupported architecture.
    """
    p = os.fspath(path)
    if os.path.isdir(p):
        p = os.path.join(p, "config.json")
    if not os.path.isfile(p):
        raise config_error("config_path", os.fspath(path), "an existing config.json file (or a directory with one)")
    try:
        with open(p, encoding="utf-8") as f:
            d = json.load(f)
    except (OSError, ValueError) as e:
        raise config_error("config_path", p, f"a readable JSON file ({e})") from None
    if not isinstance(d, dict):
        raise config_error("config_path", p, "a JSON object")
    name = name or d.get("_name_or_path") or os.path.basename(os.path.dirname(os.path.abspath(p))) or "hf-model"
    try:
        return _from_hf_dict(d, name, p)
    except KeyError as e:
        raise config_error(f"config.{e.args[0]}", "<missing>", "a key this kind of config must have") from None


def _from_hf_dict(d: dict[str, Any], name: str, p: str) -> "ModelConfig":
    cls = d.get("_class_name")
    src = (f"config.json at {p}",)
    if cls is None:
        arch = d.get("model_type", "")
        if "num_hidden_layers" not in d:
            raise config_error("config.model_type", arch, "a causal LM config with num_hidden_layers, hidden_size, ...")
        act = str(d.get("hidden_act", "silu"))
        return ModelConfig(
            name=name, kind="causal", n_layers=d["num_hidden_layers"], hidden=d["hidden_size"],
            n_heads=d["num_attention_heads"], n_kv_heads=_get(d, "num_key_value_heads"),
            head_dim=_get(d, "head_dim"), ffn_hidden=d["intermediate_size"],
            ffn_act="swiglu" if act in ("silu", "swish") else "gelu", vocab_size=d["vocab_size"],
            tie_embeddings=bool(d.get("tie_word_embeddings", False)), sources=src)
    heads = d.get("num_attention_heads")
    hd = d.get("attention_head_dim")
    if heads is None or hd is None:
        raise config_error("config.attention_head_dim", hd, "diffusers config with num_attention_heads and attention_head_dim")
    hidden = heads * hd
    common: dict[str, Any] = dict(name=name, kind="dit", hidden=hidden, n_heads=heads, ffn_act="gelu",
                                  patch_size=d.get("patch_size", 2), sources=src)
    if cls in ("DiTTransformer2DModel", "PixArtTransformer2DModel"):
        cin = d.get("in_channels", 4)
        out = d.get("out_channels") or cin
        pixart = cls.startswith("PixArt")
        return ModelConfig(
            **common, n_layers=d["num_layers"], ffn_hidden=4 * hidden,
            dit_block="adaln_single_cross" if pixart else "adaln", latent_channels=cin,
            learn_sigma=out == 2 * cin, num_classes=0 if pixart else d.get("num_embeds_ada_norm", 1000),
            text_tokens=120 if pixart else 0, text_embed_dim=d.get("caption_channels", 4096) if pixart else 0)
    if cls == "SD3Transformer2DModel":
        return ModelConfig(
            **common, n_layers=d["num_layers"], ffn_hidden=4 * hidden, dit_block="mmdit",
            latent_channels=d.get("in_channels", 16), text_tokens=333,
            text_embed_dim=d.get("joint_attention_dim", 4096), pooled_dim=d.get("pooled_projection_dim", 2048))
    if cls == "FluxTransformer2DModel":
        return ModelConfig(
            **{**common, "patch_size": 2}, n_layers=d["num_layers"], n_single_layers=d["num_single_layers"],
            ffn_hidden=4 * hidden, dit_block="flux", latent_channels=d.get("in_channels", 64) // 4,
            text_tokens=512, text_embed_dim=d.get("joint_attention_dim", 4096),
            pooled_dim=d.get("pooled_projection_dim", 768), guidance_embed=bool(d.get("guidance_embeds", False)),
            cfg_default=False)
    raise config_error("config._class_name", cls, "one of DiTTransformer2DModel, PixArtTransformer2DModel, "
                       "SD3Transformer2DModel, FluxTransformer2DModel (or a transformers causal LM config)")


def _ensure_config(model: Any) -> ModelConfig:
    if isinstance(model, ModelConfig):
        return model
    if isinstance(model, str):
        from flitsim.models.zoo import model_preset

        return model_preset(model)
    raise ConfigError(f"model = {model!r}: expected a ModelConfig or a preset name")
