"""Execution modes: how kernels are launched, as real frameworks run them.

- ``eager`` (PyTorch eager): the CPU dispatches every kernel (Python, the
  dispatcher, the CUDA launch): ``cpu_dispatch_s`` each, about 10 us
  (H. He, "Making Deep Learning Go Brrrr From First Principles", 2022: eager
  PyTorch's per-op overhead is on the order of 10 us; assumed exact value);
  back-to-back kernels leave a ``launch_gap_s`` gap on the GPU (assumed 2 us).
- ``cuda_graph``: one graph launch per step, so no CPU time per kernel; the
  GPU-side gap shrinks (assumed 1 us).
- ``compiled`` (torch.compile / Inductor): consecutive elementwise kernels
  fused (:func:`flitsim.cost.elementwise.fuse_elementwise`), launched from
  generated wrapper code (assumed 4 us CPU per kernel, 2 us gap).

A task's kernels queue on one stream while the CPU runs ahead, so its time is

    max(sum(t_gpu + launch_gap_s), sum(cpu_dispatch_s))

(GPU-bound when kernels are long, CPU-bound when they are short).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from flitsim._spec import Spec
from flitsim.errors import config_error

__all__ = ["ExecutionMode", "execution_mode", "EXECUTION_MODES"]


class ExecutionMode(Spec):
    """How kernels launch (see the module docstring); all times assumed defaults."""

    name: Literal["eager", "cuda_graph", "compiled"] = "eager"
    cpu_dispatch_s: float = Field(default=10e-6, ge=0)
    launch_gap_s: float = Field(default=2e-6, ge=0)
    fuse_elementwise: bool = False


EXECUTION_MODES = {
    "eager": dict(name="eager", cpu_dispatch_s=10e-6, launch_gap_s=2e-6, fuse_elementwise=False),
    "cuda_graph": dict(name="cuda_graph", cpu_dispatch_s=0.0, launch_gap_s=1e-6, fuse_elementwise=False),
    "compiled": dict(name="compiled", cpu_dispatch_s=4e-6, launch_gap_s=2e-6, fuse_elementwise=True),
}


def execution_mode(mode: "ExecutionMode | str | dict | None") -> ExecutionMode:
    """An :class:`ExecutionMode` from a name (``eager``, ``cuda_graph``,
    ``compiled``), a dict of its fields, or itself (None: eager).

    Raises:
        ConfigError: unknown name or bad fields.
    """
    if mode is None:
        return ExecutionMode(**EXECUTION_MODES["eager"])
    if isinstance(mode, ExecutionMode):
        return mode
    if isinstance(mode, str):
        key = mode.strip().lower().replace("-", "_")
        if key not in EXECUTION_MODES:
            raise config_error("execution", mode, f"one of {sorted(EXECUTION_MODES)}")
        return ExecutionMode(**EXECUTION_MODES[key])
    if isinstance(mode, dict):
        base = EXECUTION_MODES.get(str(mode.get("name", "eager")), EXECUTION_MODES["eager"])
        return ExecutionMode(**{**base, **mode})
    raise config_error("execution", mode, "'eager', 'cuda_graph', 'compiled' or a dict of ExecutionMode fields")
