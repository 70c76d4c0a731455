"""Attention forward time (FlashAttention-style) from (batch, heads, q, kv,
head_dim, causal).

FlashAttention-2 (Dao 2023) runs one CTA per ``block_q`` query rows of one
(sample, head) and streams K/V in ``block_kv`` blocks, so its work is quantized
three ways: head sizes are compiled for a fixed set (32, 64, 96, 128, 160,
192, 224, 256 in flash-attention's csrc; a head of 72 runs the 96 kernel, 75 %
useful), query and key blocks are padded, and CTAs run in waves over the SMs.
The time is the larger of

    waves x (padded FLOPs per CTA) / (peak / sm x attention_efficiency(gpu))

and the bytes of Q, K, V and O once over ``memory_efficiency x`` bandwidth
(decode: K/V streamed, split over the SMs as flash-decoding does). Causal rows
(query i at absolute position ctx + i) do ``ctx + (i + 1)`` keys each, the
diagonal blocks half wasted. Each CTA also pays ``kv_overhead`` keys' worth
of work outside its main loop (loading its Q tile, the final O rescale, writing
O and the log-sum-exp: about one main-loop iteration, as GEMM's ``k_overhead``),
so short key ranges — ring attention's blocks — run at a lower share of the top.
``GpuSpec.attention_efficiency`` is fitted.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from flitsim._spec import Spec
from flitsim.hardware.gpus import GpuSpec

__all__ = ["AttentionParams", "attention_time_s", "padded_head_dim"]


class AttentionParams(Spec):
    """FlashAttention-2 forward blocking (flash-attention csrc: 128-row query
    blocks and the compiled head sizes); ``block_kv`` 128 (assumed: the
    SM80/SM90 forward kernels use 64-128); ``kv_overhead`` 128 keys per CTA
    (assumed: one main-loop iteration for the Q load and the O / LSE epilogue)."""

    block_q: int = Field(default=128, ge=1)
    block_kv: int = Field(default=128, ge=1)
    kv_overhead: float = Field(default=128.0, ge=0)
    head_dims: tuple[int, ...] = (32, 64, 96, 128, 160, 192, 224, 256)


def padded_head_dim(head_dim: np.ndarray, params: AttentionParams | None = None) -> np.ndarray:
    """The compiled head size a head of ``head_dim`` runs at (the smallest
    listed size >= it; beyond the largest, rounded up to a multiple of 32)."""
    p = params or AttentionParams()
    hd = np.asarray(head_dim, dtype=np.float64)
    sizes = np.array(sorted(p.head_dims), dtype=np.float64)
    idx = np.searchsorted(sizes, hd)
    return np.where(idx < len(sizes), sizes[np.minimum(idx, len(sizes) - 1)], np.ceil(hd / 32) * 32)


def attention_time_s(batch: np.ndarray, heads: np.ndarray, kv_heads: np.ndarray, q: np.ndarray, kv: np.ndarray,
                     ctx: np.ndarray, head_dim: np.ndarray, causal: np.ndarray, elem_bytes: np.ndarray,
                     gpu: GpuSpec, peak_flop_per_s: float, params: AttentionParams | None = None) -> np.ndarray:
    """Attention forward time, seconds, elementwise over the broadcast shape
    (rows with q or kv = 0 take 0 s)."""
    p = params or AttentionParams()
    B, H, KH, Q, KV, C, b = (np.asarray(x, dtype=np.float64) for x in (batch, heads, kv_heads, q, kv, ctx, elem_bytes))
    hd = np.asarray(head_dim, dtype=np.float64)
    causal = np.asarray(causal) == 1
    hdp = padded_head_dim(hd, p)
    qb = np.ceil(Q / p.block_q)
    q_pad = qb * p.block_q
    kv_pad = np.ceil(KV / p.block_kv) * p.block_kv
    c_pad = np.ceil(C / p.block_kv) * p.block_kv
    pairs_pad = np.where(causal, q_pad * c_pad + q_pad * (q_pad + p.block_kv) / 2.0, q_pad * kv_pad) \
        + q_pad * p.kv_overhead
    ctas = B * H * qb
    sm = float(gpu.sm_count)
    waves = np.ceil(ctas / sm)
    per_cta = 4.0 * hdp * pairs_pad * B * H / np.maximum(ctas, 1.0)
    compute = waves * per_cta / (peak_flop_per_s / sm * gpu.attention_efficiency)
    mem = (2 * B * H * Q + 2 * B * KH * KV) * hd * b / (gpu.hbm_bytes_per_s * gpu.memory_efficiency)
    return np.where((Q > 0) & (KV > 0), np.maximum(compute, mem), 0.0)
