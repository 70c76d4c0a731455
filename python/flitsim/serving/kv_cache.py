"""Paged K/V cache: fixed-size blocks per device, as vLLM's block manager
(PagedAttention, Kwon et al., SOSP 2023) allocates them.

A request holding ``k`` K/V tokens holds ``ceil(k / block_tokens)`` blocks
on every device of its instance (tensor-parallel ranks hold the same token
positions for their share of the K/V heads; pipeline stages for their
layers), so one block count describes the whole instance.

Capacity (:func:`kv_capacity`) follows :mod:`flitsim.memory`'s per-device
model: HBM x ``memory_utilization`` (vLLM's ``gpu_memory_utilization``,
default 0.9) minus weights, the activation peak of one iteration at the
token budget and the framework workspace; what is left, divided by the
bytes of one block on one device, is the block count.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flitsim.errors import check_int, config_error
from flitsim.memory import DEFAULT_WORKSPACE_BYTES, block_activation_bytes, check_workspace
from flitsim.models.config import ModelConfig, dtype_bytes
from flitsim.models.cost import param_count

__all__ = ["KvCapacity", "kv_capacity", "kv_bytes_per_token", "BlockManager", "DEFAULT_BLOCK_TOKENS"]

DEFAULT_BLOCK_TOKENS = 16
"""Tokens per K/V block: vLLM's default ``block_size`` (16)."""


def kv_bytes_per_token(cfg: ModelConfig, kv_dtype: str, *, layers: int | None = None) -> int:
    """K/V bytes of one token over ``layers`` (default all):
    ``layers x 2 x kv_heads x head_dim x bytes`` (the whole model, before any split)."""
    return (cfg.n_layers if layers is None else layers) * cfg.kv_width * dtype_bytes(kv_dtype)


@dataclass(frozen=True)
class KvCapacity:
    """K/V capacity of one serving instance.

    Attributes:
        blocks: K/V blocks the instance can hold (same on every device).
        block_tokens: tokens per block.
        block_bytes_per_device: bytes of one block on one device.
        hbm_bytes, weights_bytes, activations_bytes, workspace_bytes,
        free_bytes: per device (free = HBM x utilization - the others).
    """

    blocks: int
    block_tokens: int
    block_bytes_per_device: float
    hbm_bytes: float
    weights_bytes: float
    activations_bytes: float
    workspace_bytes: float
    free_bytes: float

    @property
    def tokens(self) -> int:
        """K/V tokens the instance holds: ``blocks x block_tokens``."""
        return self.blocks * self.block_tokens


def kv_capacity(cfg: ModelConfig, gpu: Any, *, tp: int = 1, pp: int = 1, dtype: str = "bf16",
                kv_dtype: str | None = None, token_budget: int = 8192, block_tokens: int = DEFAULT_BLOCK_TOKENS,
                memory_utilization: float = 0.9, workspace_bytes: Any = None) -> KvCapacity:
    """Blocks of K/V one instance (``tp`` x ``pp`` GPUs) holds (module docstring).

    Weights per device: parameters x bytes(``dtype``) / (tp x pp) (Megatron
    tensor parallelism splits every matmul; stages split layers evenly, the
    embedding and head are charged evenly too: an approximation of at most
    one embedding table per device). K/V per token per device: ``layers / pp x
    kv_width x bytes / min(tp, kv_heads)`` (K/V heads are replicated when tp >
    kv_heads, as :func:`flitsim.memory.pipeline_memory`).

    Raises:
        ConfigError: bad counts or utilization; a GPU whose memory after weights,
            activations and workspace holds no block (the field named is
            ``memory_utilization``, with the numbers).
    """
    from flitsim.hardware.gpus import GpuSpec, gpu_preset

    g = gpu_preset(gpu) if isinstance(gpu, str) else gpu
    if not isinstance(g, GpuSpec):
        raise config_error("gpu", gpu, "a GPU preset name or a GpuSpec")
    tp, pp = check_int("tp", tp, 1, 1024), check_int("pp", pp, 1, cfg.n_layers)
    bt = check_int("block_tokens", block_tokens, 1, 1 << 20)
    budget = check_int("token_budget", token_budget, 1)
    if isinstance(memory_utilization, bool) or not isinstance(memory_utilization, (int, float)) \
            or not 0 < memory_utilization <= 1:
        raise config_error("memory_utilization", memory_utilization, "a fraction in (0, 1]")
    ws = check_workspace(DEFAULT_WORKSPACE_BYTES if workspace_bytes is None else workspace_bytes)
    kvd = kv_dtype or dtype
    weights = param_count(cfg) * dtype_bytes(dtype) / (tp * pp)
    act = block_activation_bytes(cfg, budget, batch=1, dtype=dtype, heads_div=tp)
    hbm = float(g.hbm_capacity_bytes)
    free = hbm * float(memory_utilization) - weights - act - ws
    per_tok = kv_bytes_per_token(cfg, kvd) / pp / min(tp, cfg.kv_heads)
    block_bytes = per_tok * bt
    blocks = int(free // block_bytes) if free > 0 else 0
    if blocks < 1:
        raise config_error("memory_utilization", memory_utilization,
                           f"room for K/V: {g.name} x {tp * pp} holds {hbm / 1e9:.1f} GB per GPU, weights take "
                           f"{weights / 1e9:.1f} GB, activations {act / 1e9:.2f} GB, workspace {ws / 1e9:.1f} GB; "
                           "no K/V block fits (more tensor/pipeline parallelism, a smaller dtype or model)")
    return KvCapacity(blocks, bt, block_bytes, hbm, weights, act, ws, free)


class BlockManager:
    """Blocks in use on one instance: allocation never exceeds ``capacity``.

    Raises (constructor):
        ConfigError: capacity or block size < 1.
    """

    __slots__ = ("capacity", "block_tokens", "used", "peak")

    def __init__(self, capacity: int, block_tokens: int = DEFAULT_BLOCK_TOKENS) -> None:
        self.capacity = check_int("kv_blocks", capacity, 1)
        self.block_tokens = check_int("block_tokens", block_tokens, 1)
        self.used = 0
        self.peak = 0

    def blocks_for(self, tokens: int) -> int:
        """Blocks holding ``tokens`` K/V tokens: ``ceil(tokens / block_tokens)``."""
        return -(-tokens // self.block_tokens)

    @property
    def free(self) -> int:
        """Blocks not in use."""
        return self.capacity - self.used

    def can(self, blocks: int) -> bool:
        """True if ``blocks`` more blocks fit."""
        return self.used + blocks <= self.capacity

    def take(self, blocks: int) -> None:
        """Allocate ``blocks``; the caller checked :meth:`can` (an assertion
        guards the invariant: blocks in use never exceed capacity)."""
        assert self.used + blocks <= self.capacity, "K/V blocks over capacity"
        self.used += blocks
        if self.used > self.peak:
            self.peak = self.used

    def give(self, blocks: int) -> None:
        """Free ``blocks``."""
        self.used -= blocks
        assert self.used >= 0
