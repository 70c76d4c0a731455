"""A parallel configuration as one object: the degrees of each dimension, and
the schedule (name + options) that runs it.

``Parallel(pp=2, ulysses=2, ring=2, cfg=2)`` on a DiT is PipeFusion x USP x
CFG; ``Parallel(pp=2, tp=4)`` on an LLM prefill is TeraPipe (token slices,
chunked pipeline prefill) x tensor parallel, ``Parallel(pp=2, tp=4,
micro_batches=...)`` the layer pipeline x TP; a single non-1 dimension is the
pure schedule (``tp`` -> tensor_parallel, ``ulysses`` -> ulysses, ``ring`` ->
ring_attention, ``pp`` -> pipefusion / terapipe, ``distrifusion`` ->
distrifusion). :meth:`Parallel.build` lowers it with
:func:`flitsim.schedules.build`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Parallel"]


@dataclass(frozen=True)
class Parallel:
    """Degrees of a parallel configuration (each >= 1; their product is the device count).

    Raises:
        ConfigError: a degree that is not an integer in 1..=MAX_PARALLEL_DEGREE, options not a dict.

    Attributes:
        pp: pipeline stages (PipeFusion for DiTs, TeraPipe for LLM prefill).
        tp: tensor parallel (Megatron) degree (per stage).
        ulysses, ring: sequence-parallel degrees (USP).
        cfg: CFG-parallel branches (1 or 2; DiTs with classifier-free guidance).
        ep: expert-parallel degree (MoE LLMs; = ulysses x ring).
        distrifusion: DistriFusion degree (exclusive with the others).
        options: further schedule options (patches, slices, micro_batches, ...).
    """

    pp: int = 1
    tp: int = 1
    ulysses: int = 1
    ring: int = 1
    cfg: int = 1
    ep: int = 1
    distrifusion: int = 1
    options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # pp = 0 built a tensor-parallel schedule on tp devices (read as "no pipeline"); a degree
        # is an integer >= 1, checked here so the error names it before anything is built
        from flitsim.errors import check_int, config_error
        from flitsim.limits import MAX_PARALLEL_DEGREE

        for k in ("pp", "tp", "ulysses", "ring", "cfg", "ep", "distrifusion"):
            check_int(f"Parallel.{k}", getattr(self, k), 1, MAX_PARALLEL_DEGREE, "a degree")
        if not isinstance(self.options, dict):
            raise config_error("Parallel.options", self.options, "a dict of further schedule options")

    @property
    def devices(self) -> int:
        """The product of the degrees."""
        return self.pp * self.tp * self.ulysses * self.ring * self.cfg * self.distrifusion

    def label(self) -> str:
        """Short name, e.g. ``pp2 x u2 x r2 x cfg2`` (``1 gpu`` when every degree is 1)."""
        parts = [f"{k}{v}" for k, v in (("pp", self.pp), ("tp", self.tp), ("u", self.ulysses), ("r", self.ring),
                                        ("cfg", self.cfg), ("ep", self.ep), ("df", self.distrifusion)) if v > 1]
        return " x ".join(parts) or "1 gpu"

    def schedule(self, dit: bool) -> tuple[str, dict[str, Any]]:
        """(schedule name, options) for a DiT (``dit``) or an LLM prefill.

        Raises:
            ConfigError: a combination no schedule runs (naming the option):
                tp with sequence / CFG / pipeline degrees on a DiT, distrifusion
                with anything else, pp x (ulysses, ring, cfg) on an LLM.
        """
        from flitsim.errors import config_error

        o = dict(self.options)
        sp = (self.ulysses, self.ring, self.cfg, self.ep)
        if self.distrifusion > 1:
            if self.devices != self.distrifusion or self.ep > 1:
                raise config_error("distrifusion", self.distrifusion, "alone (DistriFusion is not combined here)")
            return "distrifusion", {**o, "degree": self.distrifusion}
        if self.tp > 1 and (self.ulysses > 1 or self.ring > 1 or self.cfg > 1 or self.ep > 1):
            raise config_error("tp", self.tp, "1 with ulysses / ring / cfg / ep (tensor parallel is combined with pp only)")
        if dit:
            if self.tp > 1:
                if self.pp > 1:
                    raise config_error("tp", self.tp, "1 with pp on a DiT (PipeFusion stages run sequence parallel)")
                return "tensor_parallel", {**o, "degree": self.tp}
            if self.pp > 1:
                return "pipefusion", {**o, "stages": self.pp, "ulysses": self.ulysses, "ring": self.ring,
                                      "cfg": self.cfg}
        else:
            if self.cfg > 1:
                raise config_error("cfg", self.cfg, "1 for an LLM (no classifier-free guidance)")
            if self.pp > 1:
                if self.ulysses > 1 or self.ring > 1 or self.ep > 1:
                    raise config_error("pp", self.pp, "1 with ulysses / ring / ep on an LLM (pipelines take tp=)")
                name = "layer_pipeline" if "micro_batches" in o else "terapipe"
                return name, {**o, "stages": self.pp, "tp": self.tp}
            if self.tp > 1:
                return "tensor_parallel", {**o, "degree": self.tp}
        if self.ep == 1 and self.cfg == 1 and (self.ulysses == 1) != (self.ring == 1):
            if self.ulysses > 1:
                return "ulysses", {**o, "degree": self.ulysses}
            return "ring_attention", {**o, "degree": self.ring}
        if any(v > 1 for v in sp):
            return ("cfg_parallel" if self.cfg > 1 else "usp"), {**o, "ulysses": self.ulysses, "ring": self.ring,
                                                                 "cfg": self.cfg, "ep": self.ep}
        return ("usp", {**o}) if dit else ("tensor_parallel", {**o, "degree": 1})

    def build(self, model: Any, workload: Any, **options: Any) -> Any:
        """Lower with :func:`flitsim.schedules.build` (``options`` added: fabric, gpu, ...)."""
        from flitsim.schedules.registry import build
        from flitsim.workloads import DitWorkload

        name, o = self.schedule(isinstance(workload, DitWorkload))
        return build(name, model, workload, **{**o, **options})
