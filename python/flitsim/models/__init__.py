"""Transformer configs and their per-layer work.

- :class:`ModelConfig`, :func:`from_hf_config` (a config.json on disk), :func:`model_preset`
  (zoo: Llama-3-8B/70B, Llama-3.1-405B, DiT-XL/2, PixArt-alpha XL/2, SD3-medium, Flux.1-dev).
- :func:`layer_costs` (a DataFrame per entry), :func:`slice_cost` (TeraPipe slice /
  prefill chunk), :func:`decode_cost`, :func:`patch_cost` (PipeFusion patch),
  :func:`dit_step_cost`, :func:`handoff_bytes`, :func:`kv_cache_bytes`; all return
  :class:`OpCost` or integers. Conventions in :mod:`flitsim.models.cost`.
"""

from flitsim.models.config import DTYPE_BYTES, ModelConfig, dtype_bytes, from_hf_config
from flitsim.models.cost import (
    OpCost,
    decode_cost,
    dit_step_cost,
    entry_names,
    handoff_bytes,
    kv_cache_bytes,
    layer_costs,
    patch_cost,
    slice_cost,
)
from flitsim.models.zoo import MODEL_PRESETS, model_preset

__all__ = [
    "DTYPE_BYTES", "ModelConfig", "dtype_bytes", "from_hf_config", "OpCost", "decode_cost", "dit_step_cost",
    "entry_names", "handoff_bytes", "kv_cache_bytes", "layer_costs", "patch_cost", "slice_cost",
    "MODEL_PRESETS", "model_preset",
]
