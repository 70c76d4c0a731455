"""GPU presets (peak dense FLOP/s, HBM capacity and bandwidth) and a roofline
compute-time model.

Peaks are the datasheet dense (no 2:4 sparsity) tensor-core figures listed in
../shared/REFERENCE.md ("GPUs (dense)"); each preset names its datasheet.
Achieved efficiencies are not public per kernel: :class:`Efficiency` holds them
as named parameters whose defaults are **assumed** (see its docstring).
"""

from __future__ import annotations

from typing import Any, Callable

from pydantic import Field

from flitsim._spec import Spec
from flitsim.errors import config_error

__all__ = ["GpuSpec", "Efficiency", "GPU_PRESETS", "gpu_preset", "roofline_time_s", "a100", "h100", "h200",
           "b200", "gb200"]


class GpuSpec(Spec):
    """One GPU: peak dense tensor FLOP/s per dtype, HBM capacity and bandwidth.

    Attributes:
        peak_bf16_flop_per_s: dense BF16 (and FP16) FLOP/s, multiply-add = 2.
        peak_fp8_flop_per_s: dense FP8 FLOP/s; None where the GPU has no FP8 tensor cores.
        hbm_capacity_bytes: HBM bytes (decimal GB x 1e9).
        hbm_bytes_per_s: HBM bandwidth, bytes/s (decimal TB/s x 1e12).
        sources: where each number comes from.
    """

    name: str
    peak_bf16_flop_per_s: float = Field(gt=0)
    peak_fp8_flop_per_s: float | None = Field(default=None, gt=0)
    hbm_capacity_bytes: float = Field(gt=0)
    hbm_bytes_per_s: float = Field(gt=0)
    sources: tuple[str, ...] = ()

    def peak_flop_per_s(self, dtype: str = "bf16") -> float:
        """Peak dense FLOP/s for ``dtype`` (``bf16``/``fp16`` or ``fp8``; ``fp32``
        is not modelled).

        Raises:
            ConfigError: unknown dtype, or FP8 on a GPU without FP8 tensor cores.
        """
        key = dtype.lower() if isinstance(dtype, str) else dtype
        if key in ("bf16", "fp16"):
            return self.peak_bf16_flop_per_s
        if key == "fp8":
            if self.peak_fp8_flop_per_s is None:
                raise config_error("dtype", dtype, f"{self.name} has no FP8 tensor cores; use 'bf16'")
            return self.peak_fp8_flop_per_s
        raise config_error("dtype", dtype, "one of 'bf16', 'fp16', 'fp8'")


class Efficiency(Spec):
    """Achieved fraction of peak, per kind of work. All defaults are **assumed**
    (no public per-kernel figure for these GPUs; typical of large well-tuned
    kernels): ``matmul`` 0.70 of peak FLOP/s for weight GEMMs, ``attention``
    0.50 of peak FLOP/s for fused attention (FlashAttention-class kernels reach
    roughly 35-75 % depending on GPU and shape), ``memory`` 0.80 of HBM bandwidth
    (streaming kernels typically reach 75-90 %). Override them for calibration.
    """

    matmul: float = Field(default=0.70, gt=0, le=1)
    attention: float = Field(default=0.50, gt=0, le=1)
    memory: float = Field(default=0.80, gt=0, le=1)


def a100() -> GpuSpec:
    """A100 SXM 80 GB: 312 TFLOP/s dense BF16, no FP8, 80 GB HBM2e at 2.039 TB/s.

    Source: NVIDIA A100 datasheet.
    """
    return GpuSpec(name="A100", peak_bf16_flop_per_s=312e12, hbm_capacity_bytes=80e9, hbm_bytes_per_s=2.039e12,
                   sources=("NVIDIA A100 datasheet",))


def h100() -> GpuSpec:
    """H100 SXM: 989 TFLOP/s dense BF16, 1979 dense FP8, 80 GB HBM3 at 3.35 TB/s.

    Source: NVIDIA H100 datasheet (the 1979/3958 figures with sparsity halved).
    """
    return GpuSpec(name="H100", peak_bf16_flop_per_s=989e12, peak_fp8_flop_per_s=1979e12,
                   hbm_capacity_bytes=80e9, hbm_bytes_per_s=3.35e12, sources=("NVIDIA H100 datasheet",))


def h200() -> GpuSpec:
    """H200 SXM: 989 TFLOP/s dense BF16, 1979 dense FP8, 141 GB HBM3e at 4.8 TB/s.

    Source: NVIDIA H200 datasheet.
    """
    return GpuSpec(name="H200", peak_bf16_flop_per_s=989e12, peak_fp8_flop_per_s=1979e12,
                   hbm_capacity_bytes=141e9, hbm_bytes_per_s=4.8e12, sources=("NVIDIA H200 datasheet",))


def b200() -> GpuSpec:
    """B200 (HGX/DGX B200): 2250 TFLOP/s dense BF16, 4500 dense FP8, 180 GB HBM3e at 8 TB/s.

    Source: NVIDIA DGX B200 datasheet (per GPU = system / 8).
    """
    return GpuSpec(name="B200", peak_bf16_flop_per_s=2250e12, peak_fp8_flop_per_s=4500e12,
                   hbm_capacity_bytes=180e9, hbm_bytes_per_s=8e12, sources=("NVIDIA DGX B200 datasheet",))


def gb200() -> GpuSpec:
    """GB200 (one Blackwell GPU of an NVL72): 2500 TFLOP/s dense BF16, 5000 dense
    FP8, 186 GB HBM3e at 8 TB/s.

    Source: NVIDIA GB200 NVL72 datasheet (per GPU = rack / 72).
    """
    return GpuSpec(name="GB200", peak_bf16_flop_per_s=2500e12, peak_fp8_flop_per_s=5000e12,
                   hbm_capacity_bytes=186e9, hbm_bytes_per_s=8e12, sources=("NVIDIA GB200 NVL72 datasheet",))


GPU_PRESETS: dict[str, Callable[[], GpuSpec]] = {"a100": a100, "h100": h100, "h200": h200, "b200": b200,
                                                 "gb200": gb200}


def gpu_preset(name: str) -> GpuSpec:
    """Look up a GPU preset: ``a100``, ``h100``, ``h200``, ``b200``, ``gb200`` (case-insensitive).

    Raises:
        ConfigError: unknown name (the message lists the known ones).
    """
    key = name.strip().lower() if isinstance(name, str) else name
    if key not in GPU_PRESETS:
        raise config_error("gpu", name, f"one of {sorted(GPU_PRESETS)}")
    return GPU_PRESETS[key]()


def _roofline(flops: float, mem_bytes: float, peak: float, eff: float, gpu: GpuSpec, mem_eff: float) -> float:
    return max(flops / (peak * eff), mem_bytes / (gpu.hbm_bytes_per_s * mem_eff))


def roofline_time_s(cost: Any, gpu: GpuSpec | str, *, dtype: str = "bf16",
                    efficiency: Efficiency | None = None) -> float:
    """Roofline time of one op, layer or group of layers on one GPU, seconds.

    ``cost`` is a :class:`flitsim.models.OpCost` (or anything with
    ``matmul_flops``, ``attention_flops``, ``matmul_mem_bytes``,
    ``attention_mem_bytes``). The matmul part and the attention part are two ops
    run one after the other, each bounded by compute or memory::

        t = max(matmul_flops / (peak x eff.matmul),  matmul_mem_bytes / (hbm x eff.memory))
          + max(attention_flops / (peak x eff.attention), attention_mem_bytes / (hbm x eff.memory))

    so a decode step is memory-bound on weights and on K/V separately, a long
    prefill compute-bound. ``peak`` is the dense peak for ``dtype``.

    Raises:
        ConfigError: unknown GPU or dtype, FP8 on A100.
    """
    g = gpu_preset(gpu) if isinstance(gpu, str) else gpu
    eff = efficiency or Efficiency()
    peak = g.peak_flop_per_s(dtype)
    return (_roofline(cost.matmul_flops, cost.matmul_mem_bytes, peak, eff.matmul, g, eff.memory)
            + _roofline(cost.attention_flops, cost.attention_mem_bytes, peak, eff.attention, g, eff.memory))
