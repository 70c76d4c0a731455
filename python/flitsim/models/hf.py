"""Hugging Face / diffusers ``config.json`` files -> :class:`ModelConfig`
(read from disk only, never from the network)."""

from __future__ import annotations

import json
import os
from typing import Any

from flitsim.errors import config_error
from flitsim.models.config import ModelConfig

__all__ = ["from_hf_config"]


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
