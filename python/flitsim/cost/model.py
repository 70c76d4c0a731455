"""The compute model: a task's kernels -> time on one GPU.

:class:`CostModel` puts the pieces together: GEMMs (:mod:`.gemm`), attention
(:mod:`.attention`), elementwise kernels (:mod:`.elementwise`), the execution
mode's fusion and launch costs (:mod:`.launch`) and, where a measured profile
has the kernel (:mod:`.profile`), the measurement instead of the model. Times
are cached per kernel table, so a schedule that repeats a layer pays once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from flitsim.cost.attention import AttentionParams, attention_time_s
from flitsim.cost.elementwise import elementwise_time_s, fuse_elementwise
from flitsim.cost.gemm import GemmParams, gemm_time_s
from flitsim.cost.launch import ExecutionMode, execution_mode, host_time_s
from flitsim.cost.profile import Profile, read_profile
from flitsim.errors import config_error
from flitsim.hardware.gpus import GpuSpec, gpu_preset
from flitsim.models.kernels import Kernels, has_p2p, host_counts

__all__ = ["CostModel", "row_times_s"]


def row_times_s(cols: dict[str, np.ndarray], gpu: GpuSpec, peak: float, gemm: GemmParams | None = None,
                attention: AttentionParams | None = None) -> np.ndarray:
    """Modelled GPU time of every kernel row, seconds (columns as
    :class:`flitsim.models.Kernels`; arrays may carry extra trailing axes that
    broadcast, e.g. a grid of slice shapes)."""
    kind = cols["kind"]
    g = gemm_time_s(cols["m"], cols["n"], cols["k"], cols["elem_bytes"], gpu, peak, gemm, cols.get("taps"))
    a = attention_time_s(cols["batch"], cols["heads"], cols["kv_heads"], cols["q"], cols["kv"], cols["ctx"],
                         cols["head_dim"], cols["causal"], cols["elem_bytes"], gpu, peak, attention)
    e = elementwise_time_s(cols["numel"], cols["reads"], cols["writes"], cols["elem_bytes"], gpu)
    return np.where(kind == 0, g, np.where(kind == 1, a, e))


@dataclass
class CostModel:
    """Kernel-level compute model of one GPU.

    Attributes:
        gpu: the GPU (:class:`~flitsim.hardware.GpuSpec`; a preset name is looked up).
        dtype: compute dtype (``bf16``, ``fp16``, ``fp8``): the tensor peak used.
        execution: :class:`~flitsim.cost.launch.ExecutionMode` or its name
            (``eager`` default, ``cuda_graph``, ``compiled``).
        profile: a :class:`~flitsim.cost.profile.Profile` or a path to one; its
            rows for this GPU and dtype replace the modelled kernel times.
        gemm, attention: shape-model parameters (assumed defaults).

    Raises:
        ConfigError: unknown GPU, dtype, execution mode; an invalid profile.
    """

    gpu: Any = "h100"
    dtype: str = "bf16"
    execution: Any = None
    profile: Any = None
    gemm: GemmParams = field(default_factory=GemmParams)
    attention: AttentionParams = field(default_factory=AttentionParams)
    _cache: dict[bytes, tuple[float, float]] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.gpu, str):
            self.gpu = gpu_preset(self.gpu)
        elif not isinstance(self.gpu, GpuSpec):
            raise config_error("gpu", self.gpu, "a GPU preset name or a GpuSpec")
        self.peak = self.gpu.peak_flop_per_s(self.dtype)
        self.execution = execution_mode(self.execution)
        if self.profile is not None:
            self.profile = read_profile(self.profile)

    def kernel_times_s(self, kernels: Any) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
        """(the kernel columns as launched — fused under ``compiled`` —, GPU time
        per launched kernel in s, measured mask)."""
        ex: ExecutionMode = self.execution
        launched = kernels.launched(ex.fuse_elementwise)
        cols = fuse_elementwise(launched.cols) if ex.fuse_elementwise else launched.cols
        t = row_times_s(cols, self.gpu, self.peak, self.gemm, self.attention)
        measured = np.zeros(len(t), bool)
        prof: Profile | None = self.profile
        if prof is not None and len(t):
            m = prof.lookup(Kernels(cols), self.gpu.name, self.dtype)
            measured = ~np.isnan(m)
            t = np.where(measured, m, t)
        return cols, t, measured

    def task_time_s(self, kernels: Any) -> tuple[float, float]:
        """(time of a task running ``kernels`` back to back on one stream, s;
        the part of it that came from measured kernels, s). Time =
        ``max(sum(t + launch_gap), host)`` (:mod:`.launch`; :meth:`host_time_s`)."""
        key = kernels.key()
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        _, t, measured = self.kernel_times_s(kernels)
        ex: ExecutionMode = self.execution
        gpu = float((t + ex.launch_gap_s).sum())
        total = max(gpu, self.host_time_s(kernels, len(t)))
        meas = float((t[measured] + ex.launch_gap_s).sum()) * (total / gpu if gpu > 0 else 0.0)
        self._cache[key] = (total, meas)
        return total, meas

    def host_time_s(self, kernels: Any, launched: int | None = None) -> float:
        """Host time of a task running ``kernels``, seconds (:func:`.launch.host_time_s`):
        launched kernels (after fusion; ``launched`` when the caller has counted them)
        plus the non-kernel host ops and torch.distributed calls of the rows the mode
        runs (:data:`~flitsim.models.kernels.HOST_OPS`, counted before fusion); a task
        with point-to-point rows at the eager rates under ``graph_break_on_p2p``."""
        ex: ExecutionMode = self.execution
        rows = kernels.launched(ex.fuse_elementwise)
        if launched is None:
            launched = len(fuse_elementwise(rows.cols)["kind"]) if ex.fuse_elementwise else len(rows)
        ops, calls = host_counts(rows.cols["op"])
        return host_time_s(ex, launched, ops, calls, has_p2p(rows.cols["op"]))

    def time_ps(self, kernels: Any) -> tuple[int, int]:
        """:meth:`task_time_s` in integer picoseconds."""
        t, m = self.task_time_s(kernels)
        tp, mp = t * 1e12, m * 1e12
        if not (np.isfinite(tp) and np.isfinite(mp)):  # e.g. an efficiency of 1e-308: int(inf) would raise OverflowError
            raise config_error("task time_ps", tp, "a finite time (the compute model's time of this task overflowed; "
                               "check the profile, efficiency and GPU figures)")
        return int(round(tp)), int(round(mp))

    def slice_grid_times_s(self, template: Any, tokens: np.ndarray, context: np.ndarray) -> np.ndarray:
        """Task times of a causal slice for many (tokens s, context c) at once,
        seconds, shape of ``tokens``. ``template`` is the slice's kernels at
        s = 1, c = 0 (:func:`flitsim.models.slice_kernels`): token-proportional
        GEMM rows get M x s, elementwise rows numel x s, attention rows q = s,
        context c, kv = c + s; identical rows are evaluated once. Modelled
        times only (a profile applies to the built tasks, not to this grid)."""
        ex: ExecutionMode = self.execution
        launched = template.launched(ex.fuse_elementwise)
        cols = fuse_elementwise(launched.cols) if ex.fuse_elementwise else launched.cols
        stacked = np.stack([cols[c] for c in cols])
        uniq, counts = np.unique(stacked, axis=1, return_counts=True)
        u = {c: uniq[i][:, None] for i, c in enumerate(cols)}
        S = np.asarray(tokens, dtype=np.int64).reshape(1, -1)
        C = np.asarray(context, dtype=np.int64).reshape(1, -1)
        seq = u["seq"] == 1
        kind = u["kind"]
        g = {**u,
             "m": np.where(seq & (kind == 0), u["m"] * S, u["m"]),
             "numel": np.where(seq & (kind == 2), u["numel"] * S, u["numel"]),
             "q": np.where(kind == 1, S, u["q"]), "ctx": np.where(kind == 1, C, u["ctx"]),
             "kv": np.where(kind == 1, C + S, u["kv"])}
        t = row_times_s(g, self.gpu, self.peak, self.gemm, self.attention)
        gpu = ((t + ex.launch_gap_s) * counts[:, None]).sum(axis=0)
        ops, calls = host_counts(launched.cols["op"])
        cpu = host_time_s(ex, int(counts.sum()), ops, calls)
        return np.maximum(gpu, cpu).reshape(np.shape(tokens))

    def describe(self) -> dict[str, Any]:
        """GPU, dtype, execution mode, efficiency tops and their source, profile summary."""
        g: GpuSpec = self.gpu
        return {"gpu": g.name, "dtype": self.dtype, "execution": self.execution.name,
                "gemm_efficiency": g.gemm_efficiency, "attention_efficiency": g.attention_efficiency,
                "memory_efficiency": g.memory_efficiency, "efficiency_source": g.efficiency_source,
                "profile": None if self.profile is None else self.profile.source}
