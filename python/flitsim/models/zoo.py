"""Model zoo: preset :class:`ModelConfig` s (each preset's docstring names the
public source of its shape) and :func:`as_model`, the one resolver of "a
model" (a config or a preset name) that every other module uses."""

from __future__ import annotations

from typing import Any, Callable

from flitsim.errors import ConfigError, config_error
from flitsim.models.config import ModelConfig

__all__ = ["MODEL_PRESETS", "model_preset", "as_model", "llama3_8b", "llama3_70b", "llama31_405b", "dit_xl_2",
           "pixart_alpha_xl_2", "sd3_medium", "flux1_dev", "qwen3_32b", "mixtral_8x7b", "hunyuan_dit", "sana_1600m",
           "hunyuan_video"]


def llama3_8b() -> ModelConfig:
    """Llama-3-8B: 32 layers, hidden 4096, 32 heads (8 KV, GQA), SwiGLU FFN 14336,
    vocab 128256, untied embeddings (about 8.03 B parameters).

    Source: Meta Llama 3 model card and config.json (meta-llama/Meta-Llama-3-8B).
    """
    return ModelConfig(name="llama-3-8b", kind="causal", n_layers=32, hidden=4096, n_heads=32, n_kv_heads=8,
                       ffn_hidden=14336, ffn_act="swiglu", vocab_size=128256,
                       sources=("Meta Llama 3 model card / config.json (meta-llama/Meta-Llama-3-8B)",))


def llama3_70b() -> ModelConfig:
    """Llama-3-70B: 80 layers, hidden 8192, 64 heads (8 KV), SwiGLU FFN 28672,
    vocab 128256, untied (about 70.6 B parameters).

    Source: Meta Llama 3 model card and config.json (meta-llama/Meta-Llama-3-70B).
    """
    return ModelConfig(name="llama-3-70b", kind="causal", n_layers=80, hidden=8192, n_heads=64, n_kv_heads=8,
                       ffn_hidden=28672, ffn_act="swiglu", vocab_size=128256,
                       sources=("Meta Llama 3 model card / config.json (meta-llama/Meta-Llama-3-70B)",))


def llama31_405b() -> ModelConfig:
    """Llama-3.1-405B: 126 layers, hidden 16384, 128 heads (8 KV), SwiGLU FFN 53248,
    vocab 128256, untied.

    Source: "The Llama 3 Herd of Models" (Dubey et al. 2024), Table 3; config.json
    (meta-llama/Llama-3.1-405B).
    """
    return ModelConfig(name="llama-3.1-405b", kind="causal", n_layers=126, hidden=16384, n_heads=128,
                       n_kv_heads=8, ffn_hidden=53248, ffn_act="swiglu", vocab_size=128256,
                       sources=("Dubey et al. 2024, The Llama 3 Herd of Models, Table 3",
                                "config.json (meta-llama/Llama-3.1-405B)"))


def dit_xl_2() -> ModelConfig:
    """DiT-XL/2: 28 blocks, hidden 1152, 16 heads, GELU MLP 4608 (ratio 4), patch 2
    on a 4-channel latent of an 8x VAE, adaLN-Zero, class-conditional (1000
    classes + 1 null class for guidance), learned sigma (8 output channels).
    118.6 Gflops at 256 px (multiply-adds counted once), 675 M parameters.

    Source: Peebles & Xie, "Scalable Diffusion Models with Transformers", ICCV 2023
    (Tables 1 and 4); facebookresearch/DiT models.py.
    """
    return ModelConfig(name="dit-xl/2", kind="dit", dit_block="adaln", n_layers=28, hidden=1152, n_heads=16,
                       ffn_hidden=4608, ffn_act="gelu", patch_size=2, latent_channels=4, vae_factor=8,
                       learn_sigma=True, num_classes=1000,
                       sources=("Peebles & Xie 2023, Scalable Diffusion Models with Transformers, Tables 1, 4",
                                "facebookresearch/DiT models.py"))


def pixart_alpha_xl_2() -> ModelConfig:
    """PixArt-alpha XL/2: the DiT-XL/2 trunk (28 blocks, 1152, 16 heads, MLP 4608,
    patch 2, 4-channel latent) plus cross-attention to 120 T5-XXL tokens (width
    4096, projected to 1152), adaLN-single, learned sigma.

    Source: Chen et al., "PixArt-alpha", ICLR 2024 (Sec. 2.3); PixArt-alpha/PixArt-alpha
    repository (PixArt_XL_2, model_max_length 120).
    """
    return ModelConfig(name="pixart-alpha-xl/2", kind="dit", dit_block="adaln_single_cross", n_layers=28,
                       hidden=1152, n_heads=16, ffn_hidden=4608, ffn_act="gelu", patch_size=2,
                       latent_channels=4, vae_factor=8, learn_sigma=True, text_tokens=120, text_embed_dim=4096,
                       sources=("Chen et al. 2024, PixArt-alpha (ICLR), Sec. 2.3",
                                "PixArt-alpha/PixArt-alpha PixArt_XL_2"))


def sd3_medium() -> ModelConfig:
    """SD3-medium (MMDiT): 24 joint blocks, hidden 1536 (24 heads x 64), MLP 6144,
    patch 2 on a 16-channel latent of an 8x VAE; joint attention over image tokens
    and 77 CLIP + 256 T5 = 333 text tokens (context width 4096, pooled 2048).

    Source: Esser et al., "Scaling Rectified Flow Transformers for High-Resolution
    Image Synthesis", ICML 2024; stabilityai/stable-diffusion-3-medium
    transformer/config.json.
    Simplification: the last block's text stream is counted in full (the real
    model stops the text stream after its QKV there: ~0.3 % of parameters).
    """
    return ModelConfig(name="sd3-medium", kind="dit", dit_block="mmdit", n_layers=24, hidden=1536, n_heads=24,
                       ffn_hidden=6144, ffn_act="gelu", patch_size=2, latent_channels=16, vae_factor=8,
                       text_tokens=333, text_embed_dim=4096, pooled_dim=2048,
                       sources=("Esser et al. 2024, Scaling Rectified Flow Transformers (SD3)",
                                "stabilityai/stable-diffusion-3-medium transformer/config.json"))


def flux1_dev() -> ModelConfig:
    """Flux.1-dev: 19 double-stream + 38 single-stream blocks, hidden 3072 (24 heads
    x 128), MLP 12288; 16-channel latent of an 8x VAE packed 2x2 into 64-channel
    tokens (equivalent to patch 2): 1024 px -> 4096 image tokens, plus up to 512
    T5 text tokens in the joint sequence; guidance-distilled (guidance embedding,
    no classifier-free-guidance batch doubling by default).

    Source: black-forest-labs/flux repository (src/flux/util.py flux-dev params:
    depth 19, depth_single_blocks 38, hidden 3072, heads 24, mlp_ratio 4,
    in_channels 64, context_in_dim 4096, vec_in_dim 768, guidance_embed).
    """
    return ModelConfig(name="flux.1-dev", kind="dit", dit_block="flux", n_layers=19, n_single_layers=38,
                       hidden=3072, n_heads=24, ffn_hidden=12288, ffn_act="gelu", patch_size=2, latent_channels=16,
                       vae_factor=8, text_tokens=512, text_embed_dim=4096, pooled_dim=768, guidance_embed=True,
                       cfg_default=False,
                       sources=("black-forest-labs/flux src/flux/util.py (flux-dev)",))


def qwen3_32b() -> ModelConfig:
    """Qwen3-32B: 64 layers, hidden 5120, 64 query heads x 128 (attention width 8192,
    wider than hidden) with 8 KV heads (GQA), RMSNorm on q and k per head, SwiGLU
    FFN 25600, vocab 151936, untied embeddings (about 32.8 B parameters).

    Source: Qwen/Qwen3-32B config.json (Hugging Face; QwenLM/Qwen3): hidden_size 5120,
    num_hidden_layers 64, num_attention_heads 64, num_key_value_heads 8, head_dim 128,
    intermediate_size 25600, vocab_size 151936, tie_word_embeddings false.
    """
    return ModelConfig(name="qwen3-32b", kind="causal", n_layers=64, hidden=5120, n_heads=64, n_kv_heads=8,
                       head_dim=128, ffn_hidden=25600, ffn_act="swiglu", vocab_size=151936, qk_norm=True,
                       sources=("Qwen/Qwen3-32B config.json (QwenLM/Qwen3)",))


def mixtral_8x7b() -> ModelConfig:
    """Mixtral-8x7B: 32 layers, hidden 4096, 32 heads (8 KV), each layer's FFN 8
    SwiGLU experts of width 14336 with top-2 routing, vocab 32000, untied (about
    46.7 B parameters, 12.9 B active per token).

    Source: Jiang et al., "Mixtral of Experts", arXiv 2401.04088 (Table 1);
    mistralai/Mixtral-8x7B-v0.1 config.json (num_local_experts 8, num_experts_per_tok 2).
    """
    return ModelConfig(name="mixtral-8x7b", kind="causal", n_layers=32, hidden=4096, n_heads=32, n_kv_heads=8,
                       ffn_hidden=14336, ffn_act="swiglu", vocab_size=32000, n_experts=8, experts_per_token=2,
                       sources=("Jiang et al. 2024, Mixtral of Experts, Table 1",
                                "mistralai/Mixtral-8x7B-v0.1 config.json"))


def hunyuan_dit() -> ModelConfig:
    """HunyuanDiT (DiT-g/2, v1.x): 40 blocks, hidden 1408 (16 heads x 88), GELU MLP
    6143 (mlp_ratio 4.3637), patch 2 on a 4-channel latent of an 8x VAE, learned
    sigma; self-attention with qk LayerNorm and 2-D RoPE, cross-attention to 77
    CLIP + 256 mT5 = 333 text tokens of width 1024 (the mT5 states, 2048 wide, are
    projected to 1024 by an MLP); **long skip connections**: block i > 20 concatenates
    the output of block 39 - i, LayerNorm(2 x 1408), Linear(2 x 1408 -> 1408).
    CFG on by default (about 1.5 B parameters).

    Source: Tencent-Hunyuan/HunyuanDiT hydit/modules/models.py (HunYuanDiT, DiT-g/2:
    depth 40, hidden_size 1408, num_heads 16, mlp_ratio 4.3637; skips pushed for
    layer < depth // 2 - 1, popped for layer > depth // 2); Li et al., "Hunyuan-DiT",
    arXiv 2405.08748. Simplification: the extra embedder (pooled mT5 + image-size and
    style embeddings) is sized from those inputs, 4 x hidden wide (assumed).
    """
    return ModelConfig(name="hunyuan-dit", kind="dit", dit_block="hunyuan", n_layers=40, hidden=1408, n_heads=16,
                       ffn_hidden=6143, ffn_act="gelu", patch_size=2, latent_channels=4, vae_factor=8,
                       learn_sigma=True, text_tokens=333, text_embed_dim=2048, cross_attention_dim=1024,
                       pooled_dim=1024,
                       sources=("Tencent-Hunyuan/HunyuanDiT hydit/modules/models.py (DiT-g/2)",
                                "Li et al. 2024, Hunyuan-DiT, arXiv 2405.08748"))


def sana_1600m() -> ModelConfig:
    """SANA-1.6B (1024 px): 20 blocks, hidden 2240; ReLU **linear** self-attention
    with 70 heads x 32; cross-attention (20 heads x 112) to 300 Gemma-2-2B tokens
    (width 2304); GLUMBConv FFN (mlp_ratio 2.5: 1x1 conv 2240 -> 2 x 5600, 3x3
    depthwise, GLU, 1x1 conv 5600 -> 2240); adaLN-single; patch 1 on the 32-channel
    latent of the 32x DC-AE: 1024 px -> 32 x 32 = 1024 tokens. CFG on by default.

    Source: NVlabs/Sana (configs/sana_config/1024ms/Sana_1600M_img1024.yaml: hidden_size
    2240, depth 20, mlp_ratio 2.5, attn_type linear, model_max_length 300, patch 1,
    in_channels 32); diffusers SanaTransformer2DModel (num_attention_heads 70,
    attention_head_dim 32, num_cross_attention_heads 20, cross_attention_head_dim 112,
    caption_channels 2304); Xie et al., "SANA", arXiv 2410.10629.
    """
    return ModelConfig(name="sana-1600m", kind="dit", dit_block="sana", n_layers=20, hidden=2240, n_heads=70,
                       head_dim=32, ffn_hidden=5600, ffn_act="gelu", patch_size=1, latent_channels=32, vae_factor=32,
                       text_tokens=300, text_embed_dim=2304, attention_kind="linear", cross_heads=20,
                       sources=("NVlabs/Sana configs Sana_1600M_img1024", "diffusers SanaTransformer2DModel",
                                "Xie et al. 2024, SANA, arXiv 2410.10629"))


def hunyuan_video() -> ModelConfig:
    """HunyuanVideo (13 B): 20 dual-stream + 40 single-stream blocks (the Flux
    layout), hidden 3072 (24 heads x 128), MLP 12288; 16-channel latent of a causal
    3-D VAE (8x spatial, 4x temporal), patch 1 x 2 x 2: a 1280 x 720, 129-frame video
    is 33 x 45 x 80 = 118800 tokens, plus 256 text tokens of the LLaVA-Llama-3 encoder
    (width 4096; CLIP-L pooled 768); guidance-distilled (no CFG batch doubling).

    Source: Tencent/HunyuanVideo hyvideo/modules/models.py (HYVideo-T/2-cfgdistill:
    mm_double_blocks_depth 20, mm_single_blocks_depth 40, hidden_size 3072, heads_num 24,
    mlp_width_ratio 4, patch_size [1, 2, 2], in_channels 16, guidance_embed) and
    Kong et al., "HunyuanVideo", arXiv 2412.03603. Simplification: the text token
    refiner (2 small blocks over the 256 text tokens) is left out.
    """
    return ModelConfig(name="hunyuan-video", kind="dit", dit_block="flux", n_layers=20, n_single_layers=40,
                       hidden=3072, n_heads=24, ffn_hidden=12288, ffn_act="gelu", patch_size=2, latent_channels=16,
                       vae_factor=8, temporal_factor=4, temporal_patch=1, text_tokens=256, text_embed_dim=4096,
                       pooled_dim=768, guidance_embed=True, cfg_default=False,
                       sources=("Tencent/HunyuanVideo hyvideo/modules/models.py (HYVideo-T/2-cfgdistill)",
                                "Kong et al. 2024, HunyuanVideo, arXiv 2412.03603"))


MODEL_PRESETS: dict[str, Callable[[], ModelConfig]] = {
    "qwen3-32b": qwen3_32b,
    "mixtral-8x7b": mixtral_8x7b,
    "hunyuan-dit": hunyuan_dit,
    "hunyuandit": hunyuan_dit,
    "sana-1600m": sana_1600m,
    "sana": sana_1600m,
    "hunyuan-video": hunyuan_video,
    "hunyuanvideo": hunyuan_video,
    "llama-3-8b": llama3_8b,
    "llama-3-70b": llama3_70b,
    "llama-3.1-405b": llama31_405b,
    "dit-xl/2": dit_xl_2,
    "dit-xl-2": dit_xl_2,
    "pixart-alpha-xl/2": pixart_alpha_xl_2,
    "pixart-alpha": pixart_alpha_xl_2,
    "sd3-medium": sd3_medium,
    "flux.1-dev": flux1_dev,
    "flux-dev": flux1_dev,
}


def model_preset(name: str) -> ModelConfig:
    """Look up a zoo model (case-insensitive; ``_`` and spaces read as ``-``):
    ``llama-3-8b``, ``llama-3-70b``, ``llama-3.1-405b``, ``dit-xl/2``,
    ``pixart-alpha-xl/2``, ``sd3-medium``, ``flux.1-dev`` (and short aliases).

    Raises:
        ConfigError: unknown name or not a string (the message lists the known ones).
    """
    if not isinstance(name, str):
        raise config_error("model", name, f"a preset name, one of {sorted(MODEL_PRESETS)}")
    key = name.strip().lower().replace("_", "-").replace(" ", "-")
    if key not in MODEL_PRESETS:
        raise config_error("model", name, f"one of {sorted(MODEL_PRESETS)}")
    return MODEL_PRESETS[key]()


def as_model(model: Any) -> ModelConfig:
    """``model`` as a :class:`ModelConfig`: a config is returned as is, a string
    is looked up in the zoo (:func:`model_preset`), like
    :func:`flitsim.hardware.as_fabric` for fabrics.

    Raises:
        ConfigError: anything else, or an unknown preset name.
    """
    if isinstance(model, ModelConfig):
        return model
    if isinstance(model, str):
        return model_preset(model)
    raise ConfigError(f"model = {model!r}: expected a ModelConfig or a preset name")
