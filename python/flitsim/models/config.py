"""Transformer configurations: causal decoders (Llama family) and diffusion
transformers (DiT, PixArt-alpha, SD3 MMDiT, Flux).

A :class:`ModelConfig` holds the shape of a model; :mod:`flitsim.models.cost`
turns it into per-layer FLOPs and bytes. User-defined configs come from a dict
(:meth:`ModelConfig.from_dict`) or a Hugging Face / diffusers ``config.json``
read from disk (:func:`flitsim.models.hf.from_hf_config`; never from the network).
Parameter counts: :func:`flitsim.models.param_count`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from flitsim._spec import Spec
from flitsim.errors import config_error

__all__ = ["ModelConfig", "DTYPE_BYTES", "dtype_bytes"]

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
    dit_block: Literal["adaln", "adaln_single_cross", "mmdit", "flux", "hunyuan", "sana"] | None = None
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
    # mixture of experts (causal): every layer's FFN is n_experts SwiGLU experts of width
    # ffn_hidden, each token routed to experts_per_token of them by a linear router
    n_experts: int = Field(default=0, ge=0, description="MoE experts per layer (0: dense FFN)")
    experts_per_token: int = Field(default=0, ge=0, description="MoE top-k experts per token")
    # video DiTs: latent frames = (frames - 1) / temporal_factor + 1, then temporal_patch frames per token
    temporal_factor: int = Field(default=1, ge=1, description="VAE temporal compression (video DiTs)")
    temporal_patch: int = Field(default=1, ge=1, description="latent frames per token (video DiTs)")
    attention_kind: Literal["softmax", "linear"] = "softmax"
    qk_norm: bool = False
    cross_heads: int = Field(default=0, ge=0, description="cross-attention heads when they differ (SANA: 20)")
    cross_attention_dim: int = Field(default=0, ge=0, description="width of the cross-attention context (0: hidden)")
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
        if self.n_experts and not 1 <= self.experts_per_token <= self.n_experts:
            raise config_error(f"{self.name}.experts_per_token", self.experts_per_token,
                               f"1..={self.n_experts} (top-k of the n_experts) for a mixture of experts")
        if self.n_experts and self.kind != "causal":
            raise config_error(f"{self.name}.n_experts", self.n_experts, "0: experts are modelled for causal LLMs")
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

    def latent_frames(self, frames: int) -> int:
        """Token frames of a ``frames``-frame video: ``((frames - 1) / temporal_factor + 1) / temporal_patch``
        (1 for an image).

        Raises:
            ConfigError: ``frames - 1`` not a multiple of ``temporal_factor``.
        """
        if isinstance(frames, bool) or not isinstance(frames, int) or frames < 1:
            raise config_error("frames", frames, "a positive number of video frames")
        if frames == 1:
            return 1
        if (frames - 1) % self.temporal_factor:
            raise config_error("frames", frames, f"1 + a multiple of the VAE's temporal factor {self.temporal_factor}")
        lat = (frames - 1) // self.temporal_factor + 1
        return -(-lat // self.temporal_patch)

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
