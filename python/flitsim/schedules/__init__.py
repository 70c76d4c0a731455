"""Schedules: lower (model, workload, devices, options) to a task graph.

One module per schedule:

====================  ==========================================================
``layer_pipeline``    GPipe layer pipeline with micro-batches (causal prefill)
``terapipe``          TeraPipe token-level pipeline, uniform or DP slicing (causal prefill)
``pipefusion``        PipeFusion patch pipeline across denoising steps (DiT)
``tensor_parallel``   Megatron tensor parallel, 2 all-reduces per layer (DiT, prefill)
``ulysses``           Ulysses sequence parallel, 4 all-to-alls per layer (DiT, prefill)
``ring_attention``    ring attention, K/V around a ring overlapping compute (DiT, prefill)
``distrifusion``      DistriFusion displaced patch parallelism (DiT)
``decode``            prefill + per-token decode of a batch of requests (TTFT, TPOT)
====================  ==========================================================

Entry points: :func:`build` (by name) and :func:`simulate` (run over a
network); the result is a :class:`Schedule` with the metrics (stage-time CV,
fill/drain share, bubble fraction, bytes, FLOPs, :meth:`Schedule.summary`) and
the memory per device (:attr:`Schedule.memory`, ``"ok"`` / ``"oom"``: :mod:`flitsim.memory`).
Compute times come from the kernel-level model (:mod:`flitsim.cost`) of the
model's kernels (:mod:`flitsim.models.kernels`) on the schedule's GPU: given,
else the one the ``fabric`` is built from, else H100 (``options["gpu_source"]``).
Building blocks: :mod:`flitsim.schedules.schedule` (the result) and
:mod:`flitsim.schedules.builder` (Hardware, GraphBuilder, device / layer helpers).
"""

from __future__ import annotations

from typing import Any, Callable

from flitsim.errors import config_error
from flitsim.schedules.schedule import Schedule
from flitsim.schedules.decode import build_decode, request_metrics
from flitsim.schedules.distrifusion import build_distrifusion
from flitsim.schedules.layer_pipeline import build_layer_pipeline
from flitsim.schedules.pipefusion import build_pipefusion
from flitsim.schedules.ring_attention import build_ring_attention
from flitsim.schedules.tensor_parallel import build_tensor_parallel
from flitsim.schedules.terapipe import build_terapipe, pipeline_latency, terapipe_plan
from flitsim.schedules.ulysses import build_ulysses

SCHEDULES: dict[str, Callable[..., Schedule]] = {
    "layer_pipeline": build_layer_pipeline, "terapipe": build_terapipe, "pipefusion": build_pipefusion,
    "tensor_parallel": build_tensor_parallel, "ulysses": build_ulysses, "ring_attention": build_ring_attention,
    "distrifusion": build_distrifusion, "decode": build_decode,
}
"""Schedule name -> builder ``(model, workload, *, devices=None, **options) -> Schedule``."""

__all__ = ["SCHEDULES", "Schedule", "build", "simulate", "request_metrics", "pipeline_latency", "terapipe_plan",
           *[f.__name__ for f in SCHEDULES.values()]]


def build(name: str, model: Any, workload: Any, *, devices: Any = None, **options: Any) -> Schedule:
    """Lower schedule ``name`` (a key of :data:`SCHEDULES`) for ``model`` and
    ``workload`` on ``devices`` (a count or device ids of the fabric).
    ``fabric=`` (a preset name or FabricSpec) sets ``fabric_devices`` and, when
    ``gpu`` is not given, the GPU the fabric is built from.
    ``workspace_bytes=`` sets the framework workspace per device of the
    memory model (:mod:`flitsim.memory`; :meth:`Schedule.footprint`).

    Raises:
        ConfigError: unknown name, or whatever the builder rejects.
    """
    if name not in SCHEDULES:
        raise config_error("schedule", name, f"one of {sorted(SCHEDULES)}")
    workspace = options.pop("workspace_bytes", None)
    if workspace is not None:
        from flitsim.memory import check_workspace

        workspace = check_workspace(workspace)
    fabric = options.get("fabric")
    if fabric is not None and options.get("fabric_devices") is None:
        from flitsim.hardware.fabric import as_fabric

        options["fabric"] = fabric = as_fabric(fabric)
        options["fabric_devices"] = fabric.gpus
    import inspect

    params = inspect.signature(SCHEDULES[name]).parameters
    allowed = sorted(k for k, p in params.items() if p.kind is p.KEYWORD_ONLY and k != "devices")
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise config_error(f"{name} option", unknown[0], f"one of {allowed}")
    sched = SCHEDULES[name](model, workload, devices=devices, **options)
    if workspace is not None:
        sched.options["workspace_bytes"] = workspace
    return sched


def simulate(schedule: Schedule, network: Any = None) -> Schedule:
    """Run ``schedule``'s task graph over ``network`` and return the schedule
    with its run. ``network``: :class:`flitsim.networks.AnalyticNetwork`
    (alpha-beta; default zero cost), :class:`flitsim.networks.FabricNetwork`
    (the cycle-level fabric), a fabric preset name or a FabricSpec (see
    :func:`flitsim.networks.resolve_network`).

    Raises:
        ConfigError: the graph's devices do not fit the network, a cycle.
        StalledError: work pending that can never finish.
    """
    if not isinstance(schedule, Schedule):
        from flitsim.errors import config_error

        raise config_error("schedule", schedule, "a Schedule from flitsim.schedules.build(...)")
    return schedule.simulate(network)
