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
from flitsim.schedules.compose import Parallel


def build_usp(model: Any, workload: Any, *, devices: Any = None, **options: Any) -> Schedule:
    """USP: Ulysses (``ulysses``) x Ring (``ring``) sequence parallelism, optionally
    x CFG parallel (``cfg``) and, for MoE LLMs, x expert parallelism (``ep``);
    :func:`flitsim.schedules.hybrid.build_hybrid` with ``stages=1``."""
    if "stages" in options:
        from flitsim.errors import config_error

        raise config_error("usp option", "stages", "not an option of usp (use build('pipefusion', ..., ulysses=, ring=))")
    return build_hybrid(model, workload, devices=devices, name="usp", **options)


def build_cfg_parallel(model: Any, workload: Any, *, devices: Any = None, cfg: int = 2, **options: Any) -> Schedule:
    """CFG parallel: the two classifier-free-guidance branches on two device groups
    (``cfg=2``), each group optionally sequence parallel (``ulysses``, ``ring``)."""
    if "stages" in options:
        from flitsim.errors import config_error

        raise config_error("cfg_parallel option", "stages", "not an option (use build('pipefusion', ..., cfg=2))")
    return build_hybrid(model, workload, devices=devices, cfg=cfg, name="cfg_parallel", **options)


SCHEDULES: dict[str, Callable[..., Schedule]] = {
    "layer_pipeline": build_layer_pipeline, "terapipe": build_terapipe, "pipefusion": build_pipefusion,
    "tensor_parallel": build_tensor_parallel, "ulysses": build_ulysses, "ring_attention": build_ring_attention,
    "distrifusion": build_distrifusion, "decode": build_decode, "usp": build_usp, "cfg_parallel": build_cfg_parallel,
}

HYBRID_OPTIONS = ("ulysses", "ring", "cfg", "ep", "placement")
"""Options that turn ``pipefusion`` into PipeFusion x USP x CFG (:mod:`flitsim.schedules.hybrid`)."""

_HYBRID_PARAMS = ("stages", "patches", "warmup_steps", "ulysses", "ring", "cfg", "ep", "steps", "batch", "gpu",
                  "efficiency", "dtype", "include_embed_head", "fabric_devices", "comm_streams", "execution",
                  "profile", "interference", "fabric", "placement")
"""Schedule name -> builder ``(model, workload, *, devices=None, **options) -> Schedule``."""

__all__ = ["SCHEDULES", "Schedule", "Parallel", "HYBRID_OPTIONS", "build", "simulate", "request_metrics",
           "pipeline_latency", "terapipe_plan", "build_hybrid", *[f.__name__ for f in SCHEDULES.values()]]


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

    builder = SCHEDULES[name]
    if name in ("usp", "cfg_parallel"):
        allowed = sorted(set(_HYBRID_PARAMS) - {"stages", "patches", "warmup_steps"})
    else:
        params = inspect.signature(builder).parameters
        allowed = sorted(k for k, p in params.items() if p.kind is p.KEYWORD_ONLY and k != "devices")
    if name == "pipefusion":
        from flitsim.models.zoo import as_model
        from flitsim.schedules.hybrid import skip_pairs

        mdl = model if model is not None else getattr(workload, "model", None)
        hybrid = any(options.get(k, 1) not in (1, None) for k in ("ulysses", "ring", "cfg", "ep")) or \
            "placement" in options or (mdl is not None and bool(skip_pairs(as_model(mdl))))
        if hybrid:
            # PipeFusion x USP x CFG (and models with long skips, whose hand-offs it pays)
            if options.get("inflight_patches") is not None:
                raise config_error("pipefusion option", "inflight_patches",
                                   "not with ulysses / ring / cfg / placement or long-skip models (hybrid pipeline)")
            options.pop("inflight_patches", None)
            allowed = sorted(_HYBRID_PARAMS)
            builder = _pipefusion_hybrid
        else:
            allowed = sorted(set(allowed) | set(HYBRID_OPTIONS))
            for k in ("ulysses", "ring", "cfg", "ep"):
                options.pop(k, None)
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise config_error(f"{name} option", unknown[0], f"one of {allowed}")
    sched = builder(model, workload, devices=devices, **options)
    if workspace is not None:
        sched.options["workspace_bytes"] = workspace
    return sched


def _pipefusion_hybrid(model: Any, workload: Any, *, devices: Any = None, **options: Any) -> Schedule:
    options.setdefault("stages", 4)
    return build_hybrid(model, workload, devices=devices, name="pipefusion", **options)


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
