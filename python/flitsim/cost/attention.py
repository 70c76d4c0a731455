"""Attention forward time (FlashAttention-style) from (batch, heads, q, kv,
head_dim, causal).

FlashAttention-2 (Dao 2023) runs one CTA per ``block_q`` query rows of one
(sample, head) and streams K/V in ``block_kv`` blocks, so its work is quantized
three ways: head sizes are compiled for a fixed set (32, 64, 96, 128, 160,
192, 224, 256 in flash-attention's csrc; a head of 72 runs the 96 kernel, 75 %
useful), query and key blocks are padded, and CTAs run in waves over the SMs.
Per score (one query x one key of a padded block) the kernel does two kinds
of work, and FlashAttention-2 runs them one after the other in the same warps
(S = QK^T, then its online softmax, then PV on the result; each step needs the
one before it, and overlapping them is what FlashAttention-3's ping-pong and
intra-warpgroup pipelining add; Shah et al. 2024, arXiv 2407.08608, section 3):

    tensor  = 4 x hd_padded / (attention_efficiency x min(peak / SM / clock, mma_sync ceiling))   clocks
    softmax = max(1 / sfu_rate, fp32_ops / fp32_rate)                                            clocks
    fp32_ops = 3.5 + hd_padded / block_kv   (row max, scale-and-subtract FFMA, row sum,
                                              half an F2F pack to bf16, the O rescale)

and ``AttentionParams.softmax_overlap`` (0: serial, FlashAttention-2;
1: fully hidden) blends them: per score ``max(tensor, softmax) + (1 - overlap) x
min(tensor, softmax)``. The exponential runs on the special-function units
(``GpuSpec.sfu_ops_per_clk_per_sm``: 16 per SM-clock on compute capability 8.x /
9.0, CUDA C++ Programming Guide, arithmetic-instruction throughput table), the
rest on the FP32 pipes (64 / 128 per SM-clock). FlashAttention-2 issues the
sm80 ``mma.sync`` on every GPU; on Hopper that instruction reaches about 2/3
of the tensor cores' peak (wgmma is needed for more: FlashAttention-3 paper),
taken as a per-SM-clock ceiling (``GpuSpec.mma_sync_flop_per_clk_per_sm``), so a
Hopper part with a low tensor rate per SM (H20: 958 FLOP per SM-clock against
H100's 3784) runs under it and spends a smaller share of its time in softmax.
Every term is per SM and per clock, times SMs x clock. The kernel's time is

    waves x (padded scores per CTA) x per-score clocks / clock

floored by the bytes of Q, K, V and O once over ``memory_efficiency x``
bandwidth (decode: K/V streamed, split over the SMs as flash-decoding does).
Causal rows (query i at absolute position ctx + i) do ``ctx + (i + 1)`` keys
each, the diagonal blocks half wasted. Each CTA also pays ``kv_overhead``
keys' worth of work outside its main loop (loading its Q tile, the final O
rescale, writing O and the log-sum-exp: about one main-loop iteration, as
GEMM's ``k_overhead``), so short key ranges — ring attention's blocks — run at
a lower share of the top. ``GpuSpec.attention_efficiency`` is fitted (or, on
H100, solved from FlashAttention-2's published 35 % of peak:
:func:`attention_top_for_utilization`).
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from flitsim._spec import Spec
from flitsim.errors import config_error
from flitsim.hardware.gpus import GpuSpec

__all__ = ["AttentionParams", "attention_time_s", "padded_head_dim", "score_clocks", "attention_top_for_utilization"]


class AttentionParams(Spec):
    """FlashAttention-2 forward blocking (flash-attention csrc: 128-row query
    blocks and the compiled head sizes); ``block_kv`` 128 (assumed: the
    SM80/SM90 forward kernels use 64-128); ``kv_overhead`` 128 keys per CTA
    (assumed: one main-loop iteration for the Q load and the O / LSE epilogue);
    ``softmax_overlap`` 0 (FlashAttention-2 runs the softmax between its two
    MMAs in the same warps: FlashAttention-3 paper, section 3); ``fp32_ops_per_score``
    3.5 plus the O rescale (flash-attention csrc ``softmax.h``: ``reduce_max``,
    ``scale_apply_exp2``'s FFMA, ``reduce_sum``, the bf16 pack of P, 2 per
    instruction; ``rescale_o`` adds ``hd / block_kv``)."""

    block_q: int = Field(default=128, ge=1)
    block_kv: int = Field(default=128, ge=1)
    kv_overhead: float = Field(default=128.0, ge=0)
    head_dims: tuple[int, ...] = (32, 64, 96, 128, 160, 192, 224, 256)
    softmax_overlap: float = Field(default=0.0, ge=0, le=1)
    fp32_ops_per_score: float = Field(default=3.5, ge=0)


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
    per_cta = pairs_pad * B * H / np.maximum(ctas, 1.0)
    compute = waves * per_cta * score_clocks(hdp, gpu, peak_flop_per_s, p) / (gpu.boost_clock_mhz * 1e6)
    mem = (2 * B * H * Q + 2 * B * KH * KV) * hd * b / (gpu.hbm_bytes_per_s * gpu.memory_efficiency)
    return np.where((Q > 0) & (KV > 0), np.maximum(compute, mem), 0.0)


def _tensor_flop_per_clk(gpu: GpuSpec, peak_flop_per_s: float) -> float:
    """FLOP per SM-clock the attention kernel's MMAs can issue at most: the
    tensor peak per SM-clock, capped by the ``mma.sync`` ceiling (scaled with
    the dtype's peak: an FP8 ``mma.sync`` does twice the FLOPs)."""
    clk = gpu.boost_clock_mhz * 1e6
    per = peak_flop_per_s / (gpu.sm_count * clk)
    if gpu.mma_sync_flop_per_clk_per_sm is None:
        return per
    return min(per, gpu.mma_sync_flop_per_clk_per_sm * peak_flop_per_s / gpu.peak_bf16_flop_per_s)


def _softmax_clocks(hdp: np.ndarray | float, gpu: GpuSpec, p: AttentionParams) -> np.ndarray:
    """SM-clocks per score of the softmax phase: the SFU's exp2 or the FP32
    pipes' row max / FFMA / row sum / bf16 pack / O rescale, whichever is longer."""
    fp32 = (p.fp32_ops_per_score + np.asarray(hdp, dtype=np.float64) / p.block_kv) / gpu.fp32_ops_per_clk_per_sm
    return np.maximum(1.0 / gpu.sfu_ops_per_clk_per_sm, fp32)


def score_clocks(hd_padded: np.ndarray | float, gpu: GpuSpec, peak_flop_per_s: float,
                 params: AttentionParams | None = None) -> np.ndarray:
    """SM-clocks per padded score (one query x one key) of the forward kernel:
    the tensor term at ``attention_efficiency`` of the MMA rate, the softmax
    term on the SFU and FP32 pipes, blended by ``softmax_overlap`` (module
    docstring)."""
    p = params or AttentionParams()
    hdp = np.asarray(hd_padded, dtype=np.float64)
    tensor = 4.0 * hdp / (gpu.attention_efficiency * _tensor_flop_per_clk(gpu, peak_flop_per_s))
    soft = _softmax_clocks(hdp, gpu, p)
    return np.maximum(tensor, soft) + (1.0 - p.softmax_overlap) * np.minimum(tensor, soft)


def attention_top_for_utilization(gpu: GpuSpec, utilization: float, head_dim: int = 128,
                                  params: AttentionParams | None = None) -> float:
    """The ``attention_efficiency`` at which a long non-causal forward of
    ``head_dim`` (steady state: no padding, waves or CTA overhead) reaches
    ``utilization`` of the GPU's BF16 peak, in closed form from
    :func:`score_clocks` (serial blend only).

    Raises:
        ConfigError: a utilization the model cannot reach (the softmax term
            alone exceeds its time, or it needs a top above 1), or
            ``softmax_overlap`` is not 0.
    """
    p = params or AttentionParams()
    if p.softmax_overlap != 0:
        raise config_error("softmax_overlap", p.softmax_overlap, "0 (the closed form is for the serial blend)")
    peak = gpu.peak_bf16_flop_per_s
    clk = gpu.boost_clock_mhz * 1e6
    hdp = float(padded_head_dim(np.array([head_dim]), p)[0])
    per_clk = peak / (gpu.sm_count * clk)
    soft = float(_softmax_clocks(hdp, gpu, p))
    limit = 4.0 * hdp / (soft * per_clk)
    if not 0 < utilization < limit:
        raise config_error("utilization", utilization,
                           f"in (0, {limit:.3g}): the softmax alone caps {gpu.name} at head_dim {head_dim}")
    top = 4.0 * hdp / ((4.0 * hdp / (utilization * per_clk) - soft) * _tensor_flop_per_clk(gpu, peak))
    if top > 1:
        raise config_error("utilization", utilization, f"one {gpu.name} reaches with attention_efficiency <= 1 "
                           f"(it needs {top:.3g})")
    return top
