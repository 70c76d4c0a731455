"""GPU presets: the numbers a kernel-level compute model needs — SM count,
boost clock, dense tensor-core FLOP/s per dtype, device-memory (HBM / GDDR)
capacity and bandwidth, L2 size — plus the achieved-efficiency parameters that
no datasheet gives (calibrated or assumed, see :class:`GpuSpec`).

Every value carries its source: the preset's ``sources`` name the datasheet or
whitepaper; ``assumed`` lists the fields that no public document states (with
the reason in the preset docstring). Dense means no 2:4 sparsity (datasheets
often print the sparse figure first: it is halved here). Tensor rates are the
FP32-accumulate rates PyTorch uses for BF16/FP16 GEMMs (Ada's GeForce and L40
parts run FP16/BF16 at half rate with FP32 accumulate).

:func:`roofline_time_s` and :class:`Efficiency` are the older one-number-per-op
roofline, kept as an explicit idealisation (``compute_model="roofline"`` in the
schedules); the default compute model is :mod:`flitsim.cost`.
"""

from __future__ import annotations

from typing import Any, Callable

from pydantic import Field

from flitsim._spec import Spec
from flitsim.errors import config_error
from flitsim.hardware.systems import SYSTEM_PRESETS

__all__ = ["GpuSpec", "Efficiency", "GPU_PRESETS", "gpu_preset", "fabric_gpu", "roofline_time_s", "a100",
           "a100_pcie", "a800", "h100", "h100_pcie", "h20", "h200", "b200", "gb200", "l20", "l40", "l40s",
           "rtx4090"]

_MiB = 1 << 20
# L2 read bandwidth per clock: A100 whitepaper ("5120 Bytes/clk", vs V100's 2048). No later
# document gives one: the same per-clock figure at each part's boost clock is assumed.
_L2_BYTES_PER_CLK = 5120


# Non-matmul pipes the attention kernel's softmax runs on, per SM and clock (CUDA C++ Programming Guide,
# "Arithmetic Instructions" throughput table): special-function unit (exp2, log2, rsqrt, sin, cos) 16 results
# per clock on compute capability 8.0, 8.6, 8.9 and 9.0; FP32 add / multiply / FMA 64 on 8.0 (A100), 128 on
# 8.6, 8.9 (Ada) and 9.0 (Hopper). Blackwell (10.0): **assumed** as Hopper. FlashAttention-3 paper (Shah et al.,
# arXiv 2407.08608, section 3) gives the same SFU figure for H100 SXM5: 3.9 TFLOP/s of special functions against
# 989 of matmul, i.e. 132 SMs x 16 x 1.83 GHz (the clock its 989 TFLOP/s assume; this model uses the boost clock).
_SFU_PER_CLK = 16.0
_FP32_PER_CLK = {"ampere": 64.0, "hopper": 128.0, "ada": 128.0, "blackwell": 128.0}
# FlashAttention-2 issues sm80 mma.sync; on Hopper that instruction reaches about 2/3 of the tensor cores' peak
# (wgmma is needed for the rest: FlashAttention-3 paper, background section, as recalled, not re-read; the
# measured FA2 rates on H100 and B200, docs/compute.md section 10, corroborate it). A ceiling per SM-clock, 2/3 of H100
# SXM's 989 TFLOP/s / (132 SMs x 1980 MHz) = 2523 FLOP per SM-clock: an instruction-issue / operand-path limit
# of the SM, so a Hopper part whose tensor rate per SM-clock is lower (H20) runs under it (**assumed**: no
# published mma.sync figure for H20 or Blackwell; Blackwell's legacy-MMA path assumed the same).
_MMA_SYNC_HOPPER = 2.0 / 3.0 * 989e12 / (132 * 1980e6)


def _pipes(arch: str) -> dict[str, Any]:
    return dict(sfu_ops_per_clk_per_sm=_SFU_PER_CLK, fp32_ops_per_clk_per_sm=_FP32_PER_CLK[arch],
                mma_sync_flop_per_clk_per_sm=_MMA_SYNC_HOPPER if arch in ("hopper", "blackwell") else None)


def _l2(clock_mhz: float) -> float:
    return _L2_BYTES_PER_CLK * clock_mhz * 1e6


class GpuSpec(Spec):
    """One GPU.

    Attributes:
        name: display name (``"H100 SXM"``).
        arch: ``ampere`` | ``hopper`` | ``blackwell`` | ``ada``.
        sm_count: streaming multiprocessors enabled on the part.
        boost_clock_mhz: maximum boost clock, MHz.
        peak_bf16_flop_per_s: dense BF16 (= FP16) tensor FLOP/s, multiply-add = 2.
        peak_fp8_flop_per_s: dense FP8 tensor FLOP/s; None where the GPU has no FP8 tensor cores.
        hbm_capacity_bytes: device memory, bytes (decimal GB x 1e9; GDDR on Ada parts).
        hbm_bytes_per_s: device-memory bandwidth, bytes/s (decimal TB/s x 1e12).
        l2_bytes: L2 cache, bytes.
        l2_bytes_per_s: L2 read bandwidth, bytes/s: 5120 bytes per clock at the
            boost clock (the A100 whitepaper's figure for A100; **assumed** for
            the other parts, whose documents give no L2 bandwidth). Elementwise
            kernels whose tensors stay resident in L2 run at it
            (:mod:`flitsim.cost.elementwise`).
        l2_partitions: 2 where the L2 is split into two partitions, each caching
            the data its half of the SMs touches (A100 and H100 whitepapers; data
            both halves touch is held twice, so the capacity a producer -> consumer
            chain can use halves; assumed the same for H20 / H200 and for the two
            dies of B200 / GB200); 1 for Ada (one L2, Ada whitepaper).
        gemm_efficiency: top of the GEMM efficiency curve: the fraction of
            ``peak`` a large, wave-aligned BF16 GEMM sustains (clock under the
            power limit, pipeline stalls). Not public: fitted on single-GPU
            latencies (docs/compute.md) or assumed from the same architecture.
        attention_efficiency: the share of its MMA rate (the tensor peak per
            SM-clock, capped by ``mma_sync_flop_per_clk_per_sm``) the
            FlashAttention-2 forward kernel's matmul phase sustains; its softmax
            phase is timed separately on the SFU / FP32 pipes
            (:mod:`flitsim.cost.attention`). Fitted, pinned (H100) or assumed.
        sfu_ops_per_clk_per_sm: special-function results (``exp2``) per SM-clock
            (16: CUDA guide throughput table, compute capability 8.x / 9.0).
        fp32_ops_per_clk_per_sm: FP32 add / multiply / FMA results per SM-clock
            (64 on A100, 128 on Ada and Hopper: the same table).
        mma_sync_flop_per_clk_per_sm: the most FLOP per SM-clock the sm80
            ``mma.sync`` path reaches (FlashAttention-2's MMAs); None where it
            is the native path and reaches the peak (Ampere, Ada). Hopper: 2/3
            of H100's peak per SM-clock (FlashAttention-3 paper).
        memory_efficiency: fraction of ``hbm_bytes_per_s`` a streaming kernel
            reaches (assumed 0.85: STREAM-like copies reach 80-90 % on HBM parts).
        efficiency_source: where the three efficiencies come from.
        sources: documents for the datasheet values.
        assumed: fields that no public document states.
    """

    name: str
    arch: str = "hopper"
    sm_count: int = Field(default=132, ge=1)
    boost_clock_mhz: float = Field(default=1980.0, gt=0)
    peak_bf16_flop_per_s: float = Field(gt=0)
    peak_fp8_flop_per_s: float | None = Field(default=None, gt=0)
    hbm_capacity_bytes: float = Field(gt=0)
    hbm_bytes_per_s: float = Field(gt=0)
    l2_bytes: float = Field(default=50 * _MiB, gt=0)
    l2_bytes_per_s: float = Field(default=_L2_BYTES_PER_CLK * 1980e6, gt=0)
    l2_partitions: int = Field(default=2, ge=1)
    gemm_efficiency: float = Field(default=0.7, gt=0, le=1)
    attention_efficiency: float = Field(default=0.5, gt=0, le=1)
    memory_efficiency: float = Field(default=0.85, gt=0, le=1)
    sfu_ops_per_clk_per_sm: float = Field(default=_SFU_PER_CLK, gt=0)
    fp32_ops_per_clk_per_sm: float = Field(default=128.0, gt=0)
    mma_sync_flop_per_clk_per_sm: float | None = Field(default=None, gt=0)
    efficiency_source: str = "assumed"
    sources: tuple[str, ...] = ()
    assumed: tuple[str, ...] = ()

    def peak_flop_per_s(self, dtype: str = "bf16") -> float:
        """Peak dense tensor FLOP/s for ``dtype`` (``bf16``/``fp16`` or ``fp8``;
        ``fp32`` is not modelled).

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
    """Roofline efficiencies of :func:`roofline_time_s` (the idealised model):
    ``matmul`` 0.70 of peak FLOP/s, ``attention`` 0.50, ``memory`` 0.80 of HBM
    bandwidth. All **assumed**; the kernel-level model (:mod:`flitsim.cost`)
    replaces them by per-shape curves and per-GPU fitted tops.
    """

    matmul: float = Field(default=0.70, gt=0, le=1)
    attention: float = Field(default=0.50, gt=0, le=1)
    memory: float = Field(default=0.80, gt=0, le=1)


# Efficiency tops fitted by benches/calibrate_compute.py on published single-GPU latencies (xDiT)
# (docs/compute.md, "Calibration"). GPUs without a published single-GPU row take their
# architecture's fitted value (marked in efficiency_source).
_FIT = "fitted: benches/calibrate_compute.py on xDiT single-GPU latencies ({})"
_EFF: dict[str, tuple[float, float, str]] = {
    "a100": (0.575, 0.725, _FIT.format("PixArt-alpha 1024-8192 px on A100")),
    "l20": (0.95, 0.99, _FIT.format("PixArt-alpha 1024-4096 px on L20")),
    "l40": (0.83, 0.81, _FIT.format("PixArt-alpha and Flux.1-dev 1024-4096 px on L40")),
    "h100": (0.62, 0.626, _FIT.format("Flux.1-dev 1024 px eager and compiled on H100; attention top solved "
                                        "so that FlashAttention-2 reaches its published 35 % of H100 peak at head "
                                        "dim 128 (FlashAttention-3 paper, arXiv 2407.08608), the two rows being "
                                        "one shape")),
}


def _eff(own: str, family: str | None = None) -> dict[str, Any]:
    key = own if own in _EFF else family
    assert key is not None
    g, a, src = _EFF[key]
    if key != own:
        src = f"assumed: the {key.upper()} fit (same architecture; no published single-GPU row)"
    return dict(gemm_efficiency=g, attention_efficiency=a, efficiency_source=src)


def a100() -> GpuSpec:
    """A100 SXM4 80 GB: 108 SMs, 1410 MHz boost, 312 TFLOP/s dense BF16, no FP8,
    80 GB HBM2e at 2.039 TB/s, 40 MB L2.

    Sources: NVIDIA A100 datasheet; NVIDIA A100 Tensor Core GPU architecture
    whitepaper (108 SMs, 40 MB L2).
    """
    return GpuSpec(name="A100", arch="ampere",
                   **_pipes("ampere"), sm_count=108, boost_clock_mhz=1410, l2_bytes_per_s=_l2(1410),
                   peak_bf16_flop_per_s=312e12,
                   hbm_capacity_bytes=80e9, hbm_bytes_per_s=2.039e12, l2_bytes=40 * _MiB, **_eff("a100"),
                   sources=("NVIDIA A100 datasheet", "NVIDIA A100 architecture whitepaper"))


def a100_pcie() -> GpuSpec:
    """A100 PCIe 80 GB: as A100 SXM (108 SMs, 312 TFLOP/s BF16) with 1.935 TB/s
    HBM2e and a 300 W limit.

    Sources: NVIDIA A100 datasheet (PCIe column); A100 whitepaper.
    """
    return GpuSpec(name="A100 PCIe", arch="ampere",
                   **_pipes("ampere"), sm_count=108, boost_clock_mhz=1410, l2_bytes_per_s=_l2(1410),
                   peak_bf16_flop_per_s=312e12, hbm_capacity_bytes=80e9, hbm_bytes_per_s=1.935e12,
                   l2_bytes=40 * _MiB, **_eff("a100_pcie", "a100"),
                   sources=("NVIDIA A100 datasheet (PCIe 80GB)", "NVIDIA A100 architecture whitepaper"))


def a800() -> GpuSpec:
    """A800 SXM4 80 GB: the A100 with NVLink capped at 400 GB/s; 312 TFLOP/s BF16,
    80 GB HBM2e at 2.039 TB/s. SM count, clock and L2 are assumed equal to A100
    (same GA100 part; the datasheet does not list them).

    Source: NVIDIA A800 datasheet.
    """
    return GpuSpec(name="A800", arch="ampere",
                   **_pipes("ampere"), sm_count=108, boost_clock_mhz=1410, l2_bytes_per_s=_l2(1410),
                   peak_bf16_flop_per_s=312e12,
                   hbm_capacity_bytes=80e9, hbm_bytes_per_s=2.039e12, l2_bytes=40 * _MiB,
                   **_eff("a800", "a100"), sources=("NVIDIA A800 datasheet",),
                   assumed=("sm_count", "boost_clock_mhz", "l2_bytes", "l2_bytes_per_s"))


def h100() -> GpuSpec:
    """H100 SXM5 80 GB: 132 SMs, 1980 MHz boost, 989 TFLOP/s dense BF16, 1979
    dense FP8, 80 GB HBM3 at 3.35 TB/s, 50 MB L2.

    Sources: NVIDIA H100 datasheet (sparse figures halved); NVIDIA H100 Tensor
    Core GPU architecture whitepaper (132 SMs on SXM5, 50 MB L2).
    """
    return GpuSpec(name="H100", arch="hopper",
                   **_pipes("hopper"), sm_count=132, boost_clock_mhz=1980, l2_bytes_per_s=_l2(1980),
                   peak_bf16_flop_per_s=989e12,
                   peak_fp8_flop_per_s=1979e12, hbm_capacity_bytes=80e9, hbm_bytes_per_s=3.35e12,
                   l2_bytes=50 * _MiB, **_eff("h100"),
                   sources=("NVIDIA H100 datasheet", "NVIDIA H100 architecture whitepaper"),
                   assumed=("l2_bytes_per_s",))


def h100_pcie() -> GpuSpec:
    """H100 PCIe 80 GB: 114 SMs, 1755 MHz boost, 756 TFLOP/s dense BF16, 1513
    dense FP8, 80 GB HBM2e at 2.0 TB/s, 50 MB L2.

    Sources: NVIDIA H100 datasheet (PCIe column, sparse halved); H100 whitepaper (114 SMs).
    """
    return GpuSpec(name="H100 PCIe", arch="hopper",
                   **_pipes("hopper"), sm_count=114, boost_clock_mhz=1755, l2_bytes_per_s=_l2(1755),
                   peak_bf16_flop_per_s=756e12, peak_fp8_flop_per_s=1513e12, hbm_capacity_bytes=80e9,
                   hbm_bytes_per_s=2.0e12, l2_bytes=50 * _MiB, **_eff("h100_pcie", "h100"),
                   sources=("NVIDIA H100 datasheet (PCIe)", "NVIDIA H100 architecture whitepaper"),
                   assumed=("l2_bytes_per_s",))


def h20() -> GpuSpec:
    """H20 96 GB (export Hopper): 148 TFLOP/s dense BF16, 296 dense FP8, 96 GB
    HBM3 at 4.0 TB/s. SM count (78), clock and L2 (60 MB) are not in a public
    datasheet: taken from press reports of the product brief, **assumed**.

    Source: NVIDIA H20 product brief as reported (BF16 148 TFLOPS, FP8 296, 96 GB, 4.0 TB/s).
    """
    return GpuSpec(name="H20", arch="hopper",
                   **_pipes("hopper"), sm_count=78, boost_clock_mhz=1980, l2_bytes_per_s=_l2(1980),
                   peak_bf16_flop_per_s=148e12,
                   peak_fp8_flop_per_s=296e12, hbm_capacity_bytes=96e9, hbm_bytes_per_s=4.0e12,
                   l2_bytes=60 * _MiB, **_eff("h20", "h100"), sources=("NVIDIA H20 product brief (as reported)",),
                   assumed=("sm_count", "boost_clock_mhz", "l2_bytes", "l2_bytes_per_s",
                            "mma_sync_flop_per_clk_per_sm"))


def h200() -> GpuSpec:
    """H200 SXM 141 GB: the H100 SXM compute (132 SMs, 989 TFLOP/s BF16, 1979 FP8)
    with 141 GB HBM3e at 4.8 TB/s, 50 MB L2.

    Source: NVIDIA H200 datasheet; H100 whitepaper for the (same) GH100 configuration.
    """
    return GpuSpec(name="H200", arch="hopper",
                   **_pipes("hopper"), sm_count=132, boost_clock_mhz=1980, l2_bytes_per_s=_l2(1980),
                   peak_bf16_flop_per_s=989e12,
                   peak_fp8_flop_per_s=1979e12, hbm_capacity_bytes=141e9, hbm_bytes_per_s=4.8e12,
                   l2_bytes=50 * _MiB, **_eff("h200", "h100"),
                   sources=("NVIDIA H200 datasheet", "NVIDIA H100 architecture whitepaper"),
                   assumed=("l2_bytes_per_s",))


def b200() -> GpuSpec:
    """B200 (HGX/DGX B200): 2250 TFLOP/s dense BF16, 4500 dense FP8, 180 GB HBM3e
    at 8 TB/s. SM count (148 over two dies), clock and L2 (126 MB) are not in the
    datasheet: **assumed** from public architecture reports.

    Source: NVIDIA DGX B200 datasheet (per GPU = system / 8).
    """
    return GpuSpec(name="B200", arch="blackwell",
                   **_pipes("blackwell"), sm_count=148, boost_clock_mhz=1965, l2_bytes_per_s=_l2(1965),
                   peak_bf16_flop_per_s=2250e12, peak_fp8_flop_per_s=4500e12, hbm_capacity_bytes=180e9,
                   hbm_bytes_per_s=8e12, l2_bytes=126 * _MiB, **_eff("b200", "h100"),
                   sources=("NVIDIA DGX B200 datasheet",),
                   assumed=("sm_count", "boost_clock_mhz", "l2_bytes", "l2_bytes_per_s", "sfu_ops_per_clk_per_sm",
                            "fp32_ops_per_clk_per_sm", "mma_sync_flop_per_clk_per_sm"))


def gb200() -> GpuSpec:
    """GB200 (one Blackwell GPU of an NVL72): 2500 TFLOP/s dense BF16, 5000 dense
    FP8, 186 GB HBM3e at 8 TB/s. SM count, clock, L2 **assumed** as B200.

    Source: NVIDIA GB200 NVL72 datasheet (per GPU = rack / 72).
    """
    return GpuSpec(name="GB200", arch="blackwell",
                   **_pipes("blackwell"), sm_count=148, boost_clock_mhz=2062, l2_bytes_per_s=_l2(2062),
                   peak_bf16_flop_per_s=2500e12, peak_fp8_flop_per_s=5000e12, hbm_capacity_bytes=186e9,
                   hbm_bytes_per_s=8e12, l2_bytes=126 * _MiB, **_eff("gb200", "h100"),
                   sources=("NVIDIA GB200 NVL72 datasheet",),
                   assumed=("sm_count", "boost_clock_mhz", "l2_bytes", "l2_bytes_per_s", "sfu_ops_per_clk_per_sm",
                            "fp32_ops_per_clk_per_sm", "mma_sync_flop_per_clk_per_sm"))


def l20() -> GpuSpec:
    """L20 48 GB (PCIe, Ada AD102): 119.5 TFLOP/s dense FP16/BF16, 239 dense FP8,
    48 GB GDDR6 at 864 GB/s. 92 SMs = 11,776 CUDA cores / 128 per Ada SM [I];
    clock and L2 (96 MB, the AD102 maximum) **assumed**.

    Source: NVIDIA L20 datasheet (sparse figures halved).
    """
    return GpuSpec(name="L20", arch="ada",
                   **_pipes("ada"), sm_count=92, boost_clock_mhz=2520, l2_bytes_per_s=_l2(2520),
                   peak_bf16_flop_per_s=119.5e12,
                   peak_fp8_flop_per_s=239e12, hbm_capacity_bytes=48e9, hbm_bytes_per_s=864e9,
                   l2_bytes=96 * _MiB, l2_partitions=1, **_eff("l20"), sources=("NVIDIA L20 datasheet",),
                   assumed=("sm_count", "boost_clock_mhz", "l2_bytes", "l2_bytes_per_s"))


def l40() -> GpuSpec:
    """L40 48 GB (PCIe, Ada AD102): 142 SMs (18,176 CUDA cores / 128), 2490 MHz
    boost, 181 TFLOP/s dense BF16 (FP32 accumulate), 362 dense FP8, 48 GB GDDR6
    at 864 GB/s, 96 MB L2.

    Sources: NVIDIA L40 datasheet; NVIDIA Ada Lovelace architecture whitepaper (AD102 L2).
    """
    return GpuSpec(name="L40", arch="ada",
                   **_pipes("ada"), sm_count=142, boost_clock_mhz=2490, l2_bytes_per_s=_l2(2490),
                   peak_bf16_flop_per_s=181.05e12,
                   peak_fp8_flop_per_s=362e12, hbm_capacity_bytes=48e9, hbm_bytes_per_s=864e9,
                   l2_bytes=96 * _MiB, l2_partitions=1, **_eff("l40"),
                   sources=("NVIDIA L40 datasheet", "NVIDIA Ada Lovelace architecture whitepaper"),
                   assumed=("l2_bytes_per_s",))


def l40s() -> GpuSpec:
    """L40S 48 GB (PCIe, Ada AD102): 142 SMs, 2520 MHz boost, 362 TFLOP/s dense
    BF16, 733 dense FP8, 48 GB GDDR6 at 864 GB/s, 96 MB L2.

    Sources: NVIDIA L40S datasheet (sparse halved); Ada Lovelace whitepaper.
    """
    return GpuSpec(name="L40S", arch="ada",
                   **_pipes("ada"), sm_count=142, boost_clock_mhz=2520, l2_bytes_per_s=_l2(2520),
                   peak_bf16_flop_per_s=362.05e12,
                   peak_fp8_flop_per_s=733e12, hbm_capacity_bytes=48e9, hbm_bytes_per_s=864e9,
                   l2_bytes=96 * _MiB, l2_partitions=1, **_eff("l40s", "l40"),
                   sources=("NVIDIA L40S datasheet", "NVIDIA Ada Lovelace architecture whitepaper"),
                   assumed=("l2_bytes_per_s",))


def rtx4090() -> GpuSpec:
    """GeForce RTX 4090 24 GB (AD102): 128 SMs, 2520 MHz boost, 165.2 TFLOP/s
    dense FP16/BF16 with FP32 accumulate, 330.3 dense FP8 (FP32 accumulate),
    24 GB GDDR6X at 1008 GB/s, 72 MB L2.

    Source: NVIDIA Ada Lovelace architecture whitepaper, appendix table (RTX 4090).
    """
    return GpuSpec(name="RTX 4090", arch="ada",
                   **_pipes("ada"), sm_count=128, boost_clock_mhz=2520, l2_bytes_per_s=_l2(2520),
                   peak_bf16_flop_per_s=165.2e12,
                   peak_fp8_flop_per_s=330.3e12, hbm_capacity_bytes=24e9, hbm_bytes_per_s=1008e9,
                   l2_bytes=72 * _MiB, l2_partitions=1, **_eff("rtx4090", "l40"),
                   sources=("NVIDIA Ada Lovelace architecture whitepaper (RTX 4090)",), assumed=("l2_bytes_per_s",))


GPU_PRESETS: dict[str, Callable[[], GpuSpec]] = {
    "a100": a100, "a100-sxm": a100, "a100-pcie": a100_pcie, "a800": a800, "h100": h100, "h100-sxm": h100,
    "h100-pcie": h100_pcie, "h20": h20, "h200": h200, "b200": b200, "gb200": gb200, "l20": l20, "l40": l40,
    "l40s": l40s, "rtx4090": rtx4090, "rtx-4090": rtx4090,
}

def gpu_preset(name: str) -> GpuSpec:
    """Look up a GPU preset (case-insensitive; ``_`` and spaces read as ``-``):
    ``a100``, ``a100-pcie``, ``a800``, ``h100``, ``h100-pcie``, ``h20``, ``h200``,
    ``b200``, ``gb200``, ``l20``, ``l40``, ``l40s``, ``rtx4090``.

    Raises:
        ConfigError: unknown name (the message lists the known ones).
    """
    key = name.strip().lower().replace("_", "-").replace(" ", "-") if isinstance(name, str) else name
    if key not in GPU_PRESETS:
        raise config_error("gpu", name, f"one of {sorted(GPU_PRESETS)}")
    return GPU_PRESETS[key]()


def fabric_gpu(fabric: Any) -> str | None:
    """The GPU preset name a fabric is built from: the system preset of the
    same name (:mod:`flitsim.hardware.systems`: ``gb200-nvl72`` -> ``gb200``,
    ``hgx-b200`` -> ``b200``, ``hgx-h100`` -> ``h100``, ``dgx-a100`` -> ``a100``)
    or the multi-tier preset's GPU (``pcie-8xl20`` -> ``l20``, ...;
    :mod:`flitsim.hardware.tier_presets`);
    None for a fabric that names no GPU (a custom fabric)."""
    if fabric is None:
        return None
    name = fabric if isinstance(fabric, str) else getattr(fabric, "name", None)
    key = str(name).lower().replace("_", "-") if name else ""
    if key not in SYSTEM_PRESETS:
        from flitsim.hardware.tier_presets import tier_gpu

        return tier_gpu(key)
    gpu = SYSTEM_PRESETS[key]().gpu.lower()
    return gpu if gpu in GPU_PRESETS else None


def _roofline(flops: float, mem_bytes: float, peak: float, eff: float, gpu: GpuSpec, mem_eff: float) -> float:
    return max(flops / (peak * eff), mem_bytes / (gpu.hbm_bytes_per_s * mem_eff))


def roofline_time_s(cost: Any, gpu: GpuSpec | str, *, dtype: str = "bf16",
                    efficiency: Efficiency | None = None) -> float:
    """Roofline time of one op, layer or group of layers on one GPU, seconds
    (the idealised model; see the module docstring).

    ``cost`` is a :class:`flitsim.models.OpCost` (or anything with
    ``matmul_flops``, ``attention_flops``, ``matmul_mem_bytes``,
    ``attention_mem_bytes``)::

        t = max(matmul_flops / (peak x eff.matmul),  matmul_mem_bytes / (hbm x eff.memory))
          + max(attention_flops / (peak x eff.attention), attention_mem_bytes / (hbm x eff.memory))

    Raises:
        ConfigError: unknown GPU or dtype, FP8 on A100.
    """
    g = gpu_preset(gpu) if isinstance(gpu, str) else gpu
    eff = efficiency or Efficiency()
    peak = g.peak_flop_per_s(dtype)
    return (_roofline(cost.matmul_flops, cost.matmul_mem_bytes, peak, eff.matmul, g, eff.memory)
            + _roofline(cost.attention_flops, cost.attention_mem_bytes, peak, eff.attention, g, eff.memory))
