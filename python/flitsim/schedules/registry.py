"""The schedule registry: name -> builder (:data:`SCHEDULES`) and :func:`build`,
which checks options and routes ``pipefusion`` with hybrid options to
:mod:`flitsim.schedules.hybrid`."""

from __future__ import annotations

from typing import Any, Callable

from flitsim.errors import check_bool, config_error
from flitsim.models.kernels import RING_IMPLS
from flitsim.schedules.schedule import Schedule
from flitsim.schedules.decode import build_decode
from flitsim.schedules.distrifusion import build_distrifusion
from flitsim.schedules.layer_pipeline import build_layer_pipeline
from flitsim.schedules.pipefusion import build_pipefusion
from flitsim.schedules.ring_attention import build_ring_attention
from flitsim.schedules.tensor_parallel import build_tensor_parallel
from flitsim.schedules.terapipe import build_terapipe
from flitsim.schedules.ulysses import build_ulysses
from flitsim.schedules.hybrid import build_hybrid


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
                  "profile", "interference", "fabric", "placement", "ring_impl", "handoff_sync")
"""Schedule name -> builder ``(model, workload, *, devices=None, **options) -> Schedule``."""



def schedule_options(name: str) -> list[str]:
    """Every option :func:`build` may accept for schedule ``name`` (sorted): the
    builder's keyword options, the hybrid options for ``usp`` / ``cfg_parallel``
    / ``pipefusion`` (PipeFusion x USP x CFG), ``devices`` and ``workspace_bytes``.
    A superset where the choice depends on the model (``pipefusion`` is hybrid
    only with ulysses / ring / cfg / ep / placement or long skips): :func:`build`
    refuses what does not apply. Scenario files check their options with it
    before any simulation runs.

    Raises:
        ConfigError: unknown ``name``.
    """
    if name not in SCHEDULES:
        raise config_error("schedule", name, f"one of {sorted(SCHEDULES)}")
    import inspect

    params = inspect.signature(SCHEDULES[name]).parameters
    own = {k for k, p in params.items() if p.kind is p.KEYWORD_ONLY}
    if name in ("usp", "cfg_parallel"):
        own |= set(_HYBRID_PARAMS) - {"stages", "patches", "warmup_steps", "handoff_sync"}
    elif name == "pipefusion":
        own |= set(_HYBRID_PARAMS)
    return sorted(own | {"devices", "workspace_bytes"})


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
        allowed = sorted(set(_HYBRID_PARAMS) - {"stages", "patches", "warmup_steps", "handoff_sync"})
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
            allowed = sorted(set(allowed) | set(HYBRID_OPTIONS) | {"ring_impl"})
            impl = options.get("ring_impl")
            if impl is not None and impl not in RING_IMPLS:  # refused, though without a ring it changes nothing
                raise config_error("ring_impl", impl, f"one of {', '.join(RING_IMPLS)}")
            for k in ("ulysses", "ring", "cfg", "ep", "ring_impl"):  # no ring: ring_impl has nothing to change
                options.pop(k, None)
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise config_error(f"{name} option", unknown[0], f"one of {allowed}")
    for k in ("handoff_sync", "include_embed_head"):  # flags: "false" or 0 is not coerced to a bool
        if k in options:
            options[k] = check_bool(k, options[k])
    sched = builder(model, workload, devices=devices, **options)
    if workspace is not None:
        sched.options["workspace_bytes"] = workspace
    return sched


def _pipefusion_hybrid(model: Any, workload: Any, *, devices: Any = None, **options: Any) -> Schedule:
    options.setdefault("stages", 4)
    return build_hybrid(model, workload, devices=devices, name="pipefusion", **options)



__all__ = ["SCHEDULES", "HYBRID_OPTIONS", "build", "schedule_options", "build_usp", "build_cfg_parallel"]
