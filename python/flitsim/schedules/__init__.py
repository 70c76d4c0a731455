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
``usp``               Ulysses x Ring sequence parallelism (x CFG, x expert parallel ``ep``)
``cfg_parallel``      the two CFG branches on two device groups (x Ulysses x Ring)
====================  ==========================================================

Hybrids: ``build("pipefusion", ..., ulysses=2, ring=2, cfg=2)`` is PipeFusion x
USP x CFG (:mod:`flitsim.schedules.hybrid`); ``terapipe`` / ``layer_pipeline``
take ``tp=`` (pipeline x tensor parallel), ``decode`` has ``stages`` x ``tp``;
:class:`Parallel` is the same as a composition object. ``placement=``
(:mod:`flitsim.schedules.placement`) maps the degrees onto the fabric's GPUs.

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
from flitsim.schedules.hybrid import build_hybrid
from flitsim.schedules.registry import HYBRID_OPTIONS, SCHEDULES, build, build_cfg_parallel, build_usp, schedule_options
from flitsim.schedules.compose import Parallel

__all__ = ["SCHEDULES", "Schedule", "Parallel", "HYBRID_OPTIONS", "build", "simulate", "request_metrics",
           "pipeline_latency", "terapipe_plan", "build_hybrid", *[f.__name__ for f in SCHEDULES.values()]]


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
