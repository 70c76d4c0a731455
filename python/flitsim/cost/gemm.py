"""GEMM time from (M, N, K) on a GPU: tile and wave quantization over the SM
count, a per-shape efficiency curve, a memory-bound floor.

A cuBLAS-class kernel covers C (M x N) with output tiles of ``tm x tn``; each
CTA computes one tile on one SM, so ``tiles = ceil(M / tm) ceil(N / tn)`` run in
``waves = ceil(tiles / sm_count)`` waves, and a partly filled last wave costs as
much as a full one. One tile's main loop does ``2 tm tn K`` FLOPs at the SM's
share of the peak times the efficiency curve

    eff(K, tile) = gemm_efficiency(gpu) x tile_efficiency[tile] x K / (K + k_overhead)

(``k_overhead``: prologue / epilogue and pipeline fill, in units of K; small
tiles reuse operands less: ``tile_efficiency``). The memory floor is the bytes
of A, B and C once at ``memory_efficiency x`` device bandwidth. The kernel
takes the best tile for the shape (cuBLAS's heuristic does the same, roughly):

    t = min over tiles of max(waves x 2 tm tn K / (peak / sm x eff), bytes / bw)

Defaults of :class:`GemmParams` are **assumed** (typical CUTLASS / cuBLAS tile
shapes; docs/compute.md); the per-GPU top is fitted (``GpuSpec.gemm_efficiency``).
"""

from __future__ import annotations

import numpy as np
from pydantic import Field, model_validator

from flitsim._spec import Spec
from flitsim.errors import config_error
from flitsim.hardware.gpus import GpuSpec

__all__ = ["GemmParams", "gemm_time_s"]


class GemmParams(Spec):
    """Tile shapes a GEMM may use and their relative efficiency (**assumed**:
    CUTLASS's default SM80/SM90 tile set; 128x256 and 256x128 reuse operands
    best), and ``k_overhead``, the K-equivalent cost of a tile's prologue and
    epilogue (assumed 64: one main-loop stage of a 64-deep K tile)."""

    tiles: tuple[tuple[int, int], ...] = ((128, 256), (256, 128), (128, 128), (128, 64), (64, 128), (64, 64))
    tile_efficiency: tuple[float, ...] = (1.0, 1.0, 0.92, 0.80, 0.80, 0.65)
    k_overhead: float = Field(default=64.0, ge=0)

    @model_validator(mode="after")
    def _same_length(self) -> "GemmParams":
        if len(self.tiles) != len(self.tile_efficiency) or not self.tiles:
            raise config_error("tile_efficiency", self.tile_efficiency, f"one value per tile ({len(self.tiles)})")
        for e in self.tile_efficiency:
            if not 0 < e <= 1:
                raise config_error("tile_efficiency", e, "each in (0, 1]")
        for t in self.tiles:
            if len(t) != 2 or min(t) < 1:
                raise config_error("tiles", t, "(tm, tn) pairs of positive integers")
        return self


def gemm_time_s(m: np.ndarray, n: np.ndarray, k: np.ndarray, elem_bytes: np.ndarray, gpu: GpuSpec,
                peak_flop_per_s: float, params: GemmParams | None = None, taps: np.ndarray | None = None) -> np.ndarray:
    """Time of GEMMs C[m, n] = A[m, k] B[k, n], seconds, elementwise over the
    broadcast shape of the arguments (integers >= 1; rows with a zero dimension
    take 0 s). ``peak_flop_per_s`` is the GPU's dense peak for the dtype.
    ``taps`` (> 0: an implicit-GEMM convolution with K = C_in x taps) makes the
    memory floor read A as its ``m k / taps`` input elements, once."""
    p = params or GemmParams()
    m, n, k = (np.asarray(x, dtype=np.float64) for x in (m, n, k))
    b = np.asarray(elem_bytes, dtype=np.float64)
    sm = float(gpu.sm_count)
    per_sm = peak_flop_per_s / sm * gpu.gemm_efficiency
    kf = k + p.k_overhead
    best = None
    for (tm, tn), te in zip(p.tiles, p.tile_efficiency):
        tiles = np.ceil(m / tm) * np.ceil(n / tn)
        waves = np.ceil(tiles / sm)
        t = waves * (2.0 * tm * tn * kf) / (per_sm * te)
        best = t if best is None else np.minimum(best, t)
    a_elems = m * k if taps is None else m * k / np.maximum(np.asarray(taps, dtype=np.float64), 1.0)
    mem = (a_elems + k * n + m * n) * b / (gpu.hbm_bytes_per_s * gpu.memory_efficiency)
    assert best is not None
    return np.where((m > 0) & (n > 0) & (k > 0), np.maximum(best, mem), 0.0)
