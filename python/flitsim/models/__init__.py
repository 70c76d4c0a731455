"""Transformer configs, their per-layer work and the kernels they launch.

- :class:`ModelConfig`; :func:`model_preset` / :func:`as_model` (zoo: Llama-3-8B/70B,
  Llama-3.1-405B, DiT-XL/2, PixArt-alpha XL/2, SD3-medium, Flux.1-dev);
  :func:`from_hf_config` (a config.json on disk, :mod:`flitsim.models.hf`).
- :func:`layer_costs` (a DataFrame per entry), :func:`slice_cost` (TeraPipe slice /
  prefill chunk), :func:`decode_cost`, :func:`patch_cost` (PipeFusion patch),
  :func:`dit_step_cost`, :func:`handoff_bytes`, :func:`kv_cache_bytes`,
  :func:`param_count`; conventions in :mod:`flitsim.models.cost`.
- :class:`Kernels` and :func:`slice_kernels`, :func:`decode_kernels`,
  :func:`patch_kernels`, :func:`step_kernels`: the same calls lowered to GEMM,
  attention and elementwise kernels with shapes (:mod:`flitsim.models.kernels`),
  which :mod:`flitsim.cost` turns into time.

Import order (no cycles): config -> zoo, hf, entries -> cost -> kernels.
"""

from flitsim.models.config import DTYPE_BYTES, ModelConfig, dtype_bytes
from flitsim.models.cost import (
    OpCost,
    decode_cost,
    dit_step_cost,
    entry_names,
    handoff_bytes,
    kv_cache_bytes,
    layer_costs,
    param_count,
    patch_cost,
    slice_cost,
)
from flitsim.models.hf import from_hf_config
from flitsim.models.kernels import Kernels, decode_kernels, patch_kernels, slice_kernels, step_kernels
from flitsim.models.zoo import MODEL_PRESETS, as_model, model_preset

__all__ = [
    "DTYPE_BYTES", "ModelConfig", "dtype_bytes", "from_hf_config", "OpCost", "decode_cost", "dit_step_cost",
    "entry_names", "handoff_bytes", "kv_cache_bytes", "layer_costs", "param_count", "patch_cost", "slice_cost",
    "MODEL_PRESETS", "model_preset", "as_model", "Kernels", "decode_kernels", "patch_kernels", "slice_kernels",
    "step_kernels",
]
