"""Execution modes: how kernels are launched, as real frameworks run them.

The host (one CPU thread per GPU) pays, per task:

    host = launched kernels x cpu_dispatch_s + host ops x cpu_host_op_s + comm calls x cpu_comm_call_s

- ``cpu_dispatch_s``: a kernel-launching eager op (Python, the dispatcher, the CUDA
  launch): about 10 us (H. He, "Making Deep Learning Go Brrrr From First Principles",
  2022: eager PyTorch's per-op overhead is on the order of 10 us; exact value assumed).
- ``cpu_host_op_s``: an op that launches no kernel (view, reshape, transpose, chunk,
  unsqueeze, an nn.Module call, a P2POp, a work ``wait()``; counted per kernel row by
  :data:`flitsim.models.kernels.HOST_OPS`): 3.3 us, PyTorch's operator micro-benchmark
  of ``split`` (a view-only op) on CUDA tensors in eager mode (pytorch/pytorch PR #32194:
  3.33-3.47 us per call on master at the time, 2.26 us with that PR).
- ``cpu_comm_call_s``: a torch.distributed call that launches communication
  (``all_to_all_single``, ``batch_isend_irecv``; counted by
  :data:`flitsim.models.kernels.COMM_CALLS`): ProcessGroupNCCL work object, events,
  stream waits, the NCCL group call: 20 us, assumed (no published per-call figure found).

Modes:

- ``eager`` (PyTorch eager): all three; back-to-back kernels leave a
  ``launch_gap_s`` gap on the GPU (assumed 2 us).
- ``cuda_graph``: one graph launch per step, so no host time per kernel, op or
  call (communication captured in the graph); the GPU-side gap shrinks (assumed 1 us).
- ``compiled`` (torch.compile / Inductor): consecutive elementwise kernels
  fused (:func:`flitsim.cost.elementwise.fuse_elementwise`), launched from
  generated wrapper code (assumed 4 us CPU per kernel, 2 us gap); views are
  compiled away (no host-op cost); collectives stay host calls. A task that issues
  point-to-point calls (a ring attention step) runs eagerly: torch.compile breaks its
  graph at ``batch_isend_irecv`` / ``P2POp`` (pytorch/pytorch issue #121386, "torch.compile
  + ring attention", graph breaks logged in the ring loop; PR #161213 "Enabling
  batch_isend_irecv to compile" was still open in 2026), so such a task's host time uses
  ``break_dispatch_s`` / ``break_host_op_s`` (the eager 10 us / 3.3 us) instead
  (``graph_break_on_p2p``).

A task's kernels queue on one stream while the CPU runs ahead, so its time is

    max(sum(t_gpu + launch_gap_s), host)

(GPU-bound when kernels are long, host-bound when they are short). Sync points that
stop the CPU from running ahead (``.item()``, CPU-side scheduler work) are not modelled.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from flitsim._spec import Spec
from flitsim.errors import config_error

__all__ = ["ExecutionMode", "execution_mode", "EXECUTION_MODES", "host_time_s"]


class ExecutionMode(Spec):
    """How kernels launch (see the module docstring); all times assumed defaults."""

    name: Literal["eager", "cuda_graph", "compiled"] = "eager"
    cpu_dispatch_s: float = Field(default=10e-6, ge=0)
    cpu_host_op_s: float = Field(default=3.3e-6, ge=0)
    cpu_comm_call_s: float = Field(default=20e-6, ge=0)
    launch_gap_s: float = Field(default=2e-6, ge=0)
    fuse_elementwise: bool = False
    graph_break_on_p2p: bool = False
    break_dispatch_s: float = Field(default=10e-6, ge=0)
    break_host_op_s: float = Field(default=3.3e-6, ge=0)


EXECUTION_MODES = {
    "eager": dict(name="eager", cpu_dispatch_s=10e-6, cpu_host_op_s=3.3e-6, cpu_comm_call_s=20e-6, launch_gap_s=2e-6,
                  fuse_elementwise=False),
    "cuda_graph": dict(name="cuda_graph", cpu_dispatch_s=0.0, cpu_host_op_s=0.0, cpu_comm_call_s=0.0,
                       launch_gap_s=1e-6, fuse_elementwise=False),
    "compiled": dict(name="compiled", cpu_dispatch_s=4e-6, cpu_host_op_s=0.0, cpu_comm_call_s=20e-6,
                     launch_gap_s=2e-6, fuse_elementwise=True, graph_break_on_p2p=True),
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


def host_time_s(ex: ExecutionMode, launched: int, host_ops: int, comm_calls: int, p2p: bool = False) -> float:
    """Host time of a task, seconds: ``launched x cpu_dispatch_s + host_ops x
    cpu_host_op_s + comm_calls x cpu_comm_call_s``; with ``p2p`` (the task issues
    point-to-point calls) and ``graph_break_on_p2p``, the eager-running
    ``break_dispatch_s`` / ``break_host_op_s`` replace the first two (module docstring)."""
    if p2p and ex.graph_break_on_p2p:
        return launched * ex.break_dispatch_s + host_ops * ex.break_host_op_s + comm_calls * ex.cpu_comm_call_s
    return launched * ex.cpu_dispatch_s + host_ops * ex.cpu_host_op_s + comm_calls * ex.cpu_comm_call_s
