"""Scenarios: a TOML file naming a fabric, a GPU, cases (model + workload) and
the schedules to compare: the file's schema (pydantic sections), its loader
and the fabric it names. :func:`flitsim.scenario.run_scenario` simulates it.

TOML layout (every table is validated; unknown keys and wrong types raise
``ConfigError`` naming the key, e.g. ``Scenario.cases.0.schedules.1.optionz``)::

    title = "..."
    [fabric]                      # preset (+ overrides), or file = "fabric.toml", or [fabric.inline]
    preset = "gb200-nvl72"
    overrides = { sim_packet_bytes = 8192 }
    network = "auto"              # auto | fabric | analytic
    [hardware]
    gpu = "gb200"
    dtype = "bf16"
    [[cases]]
    name = "Llama-3-70B prefill, LLMPerf 550/150"
    model = "llama-3-70b"
    workload = { kind = "llmperf", n_requests = 2000, seed = 0, sequences = 3 }
    [[cases.schedules]]
    name = "terapipe"
    label = "TeraPipe uniform"
    options = { stages = 8, slices = 8 }

Workload kinds: ``llmperf`` (fields of :class:`flitsim.workloads.LLMPerfSpec`
in ``llmperf``), ``trace`` (``trace`` name or CSV path, ``limit``), ``tokens``
(one prefill of ``tokens``), ``dit`` (``model``, ``resolution_px``,
``steps``, ``batch``, and ``width_px`` / ``frames`` for a video DiT). An LLM length distribution is run at ``sequences``
representative prefill lengths: the input-length quantiles at the bin
midpoints (i + 0.5) / n, each standing for an equal share of requests, so the
mean over them estimates the mean over the distribution. The schedule
``decode`` receives the whole LLM workload (its first ``requests``) instead.

Networks: ``fabric`` (and ``auto``, the default, which is the same) runs
every schedule on the cycle-level fabric (:class:`flitsim.networks.FabricNetwork`:
transfers packet by packet, collectives lowered to transfer DAGs, calibrated
injection); ``analytic`` on :class:`flitsim.networks.AnalyticNetwork`
parametrised from the fabric (:meth:`~flitsim.networks.AnalyticNetwork.from_fabric`:
alpha = the simulated latency of one packet between two GPUs, bandwidth = the
calibrated per-GPU injection rate). Each
run is labelled with the network it used.

Fidelity of fabric runs: the fabric's ``fidelity`` (``[fabric] overrides =
{ fidelity = "auto" }``: packet, flow or auto; default packet), or a
schedule's own ``fidelity = "flow"``; every run's ``fidelity`` and
``fidelity_reason`` columns say which ran and why (docs/fidelity.md).
``flitsim run -j N`` runs the (case, schedule) entries on N processes with
identical results.

The map (``[map]``, docs/map.md): rows = workloads, columns = fabrics, each
cell = every feasible schedule of the row on ``devices`` GPUs of the column's
fabric (:mod:`flitsim.scenario.map`)::

    [map]
    devices = 8                   # GPUs per cell (a column may override)
    margin = 0.05                 # "fits" needs <= 5 % slower than the fastest feasible schedule
    tie = 0.02                    # |pipelined / non-pipelined - 1| <= 2 %: a tie
    [[map.fabrics]]
    preset = "hgx-h100"
    overrides = { fidelity = "auto" }
    [[map.workloads]]
    name = "Llama-3-70B prefill 8k"
    model = "llama-3-70b"
    workload = { kind = "tokens", tokens = 8192 }
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal, cast

from pydantic import Field, model_validator

from flitsim._spec import Spec
from flitsim._toml import read_toml
from flitsim.errors import config_error
from flitsim.hardware.fabric import FabricSpec, fabric_from_dict, fabric_preset

__all__ = ["Scenario", "FabricSection", "HardwareSection", "WorkloadSection", "ScheduleEntry", "CaseSection",
           "OutputSection", "MapFabric", "MapWorkload", "MapSection", "load_scenario", "fabric_spec", "map_fabric_spec"]

Scalar = int | float | str | bool
Option = Scalar | list[Scalar]


def file_slug(s: str) -> str:
    """The file-name form of a case name or schedule label (report files are named by it)."""
    return re.sub(r"[^A-Za-z0-9]+", "-", s).strip("-").lower()[:60]


def _distinct(where: str, names: list[str], key: str, hint: str = "") -> None:
    """Refuse two entries whose ``key`` has the same file name (:func:`file_slug`).

    Raises:
        ConfigError: naming ``where.<i>.key``, the value and the clash; a
            name without a letter or digit (its file name would be empty).
    """
    seen: dict[str, int] = {}
    for i, n in enumerate(names):
        if not file_slug(n):  # "" or "///": report files named "__.parquet", a conclusion line ": fastest ..."
            raise config_error(f"{where}.{i}.{key}", n, "a name with at least one letter or digit (report files "
                               "and the conclusion are named by it)")
        j = seen.setdefault(file_slug(n), i)
        if j != i:
            raise config_error(f"{where}.{i}.{key}", n, f"distinct from entry {j} ({names[j]!r}; compared as file names, "
                               f"{file_slug(n)!r}) {hint}".rstrip())


class FabricSection(Spec):
    """The fabric: a ``preset`` with ``overrides`` of FabricSpec fields, a
    ``file`` (FabricSpec TOML, relative to the scenario), or ``inline``
    (a FabricSpec table). ``network``: auto | fabric | analytic.
    ``collective_params``: a ``flitsim calibrate`` parameter file (relative
    to the scenario) for the collectives on the fabric."""

    preset: str | None = "gb200-nvl72"
    overrides: dict[str, Any] = Field(default_factory=dict)
    file: str | None = None
    inline: dict[str, Any] | None = None
    network: Literal["auto", "fabric", "analytic"] = "auto"
    collective_params: str | None = None


class HardwareSection(Spec):
    """Compute side of every schedule: GPU preset name (default: the GPU the
    fabric is built from, e.g. gb200-nvl72 -> gb200; else h100), activation
    dtype, execution mode (``eager``, ``cuda_graph``, ``compiled``) and an
    optional measured kernel profile (CSV / Parquet path, relative to the
    scenario file; docs/compute.md)."""

    gpu: str | None = None
    dtype: str = "bf16"
    execution: Literal["eager", "cuda_graph", "compiled"] = "eager"
    profile: str | None = None


class WorkloadSection(Spec):
    """One case's workload (see the module docstring)."""

    kind: Literal["llmperf", "trace", "tokens", "dit"]
    llmperf: dict[str, Any] = Field(default_factory=dict)
    trace: str = "azure-conv-2023"
    limit: int | None = Field(default=None, ge=1)
    tokens: int | None = Field(default=None, ge=1)
    sequences: int = Field(default=3, ge=1, le=64)
    model: str | None = None
    resolution_px: int | None = Field(default=None, ge=16)
    #: DiT image width, px (default: square, = resolution_px, the height).
    width_px: int | None = Field(default=None, ge=16)
    #: video frames for a video DiT (1: an image).
    frames: int = Field(default=1, ge=1)
    steps: int = Field(default=28, ge=1)
    batch: int = Field(default=1, ge=1)


class ScheduleEntry(Spec):
    """A schedule to run: builder ``name`` (``flitsim.schedules.SCHEDULES``),
    display ``label``, builder ``options`` (stages, slices, degree, ...)."""

    name: str
    label: str | None = None
    options: dict[str, Option] = Field(default_factory=dict)
    network: Literal["auto", "fabric", "analytic"] | None = None
    #: Fidelity of this schedule's fabric runs: packet | flow | auto (default:
    #: the fabric's own, set by ``[fabric] overrides = { fidelity = ... }``).
    fidelity: Literal["packet", "flow", "auto"] | None = None


class CaseSection(Spec):
    """A model + workload and the schedules compared on it; ``baseline``:
    also simulate one GPU (the task-match speedup)."""

    name: str
    model: str | None = None
    workload: WorkloadSection
    schedules: list[ScheduleEntry] = Field(min_length=1)
    baseline: bool = True


class OutputSection(Spec):
    """What the report writes besides tables: figures (PNG + HTML), one
    Perfetto trace per run (``trace_max_tasks``: at most this many tasks per
    trace, >= 1; the cut is stated in the trace), task tables as Parquet."""

    figures: bool = True
    traces: bool = True
    trace_max_tasks: int = Field(default=50_000, ge=1)
    task_tables: bool = True


class MapFabric(Spec):
    """One map column: a fabric ``preset`` (+ ``overrides`` of FabricSpec
    fields, e.g. ``fidelity``), shown as ``label``; ``devices``: GPUs each
    cell uses (default the map's); ``gpu``: the compute GPU (default the
    GPU the fabric is built from)."""

    preset: str
    label: str | None = None
    overrides: dict[str, Any] = Field(default_factory=dict)
    devices: int | None = Field(default=None, ge=1, le=1024)
    gpu: str | None = None


class MapWorkload(Spec):
    """One map row: a model + workload (``kind`` tokens, llmperf, trace or dit,
    as in a case). ``schedules``: restrict the cell to these builder names
    (default: every schedule that applies to the workload)."""

    name: str
    model: str | None = None
    workload: WorkloadSection
    #: ``prefill`` (one request's prefill at each representative length) or
    #: ``decode`` (prefill + decode of the workload's requests; llmperf / trace).
    phase: Literal["prefill", "decode"] = "prefill"
    schedules: list[str] | None = None


class MapSection(Spec):
    """The PMF map: ``workloads`` (rows) x ``fabrics`` (columns). ``margin``:
    a pipeline "fits" only within this share of the fastest feasible
    schedule; ``tie``: pipelined vs best non-pipelined within this share is a
    tie (the 2 % the flow tier is validated to against packet level)."""

    workloads: list[MapWorkload] = Field(min_length=1)
    fabrics: list[MapFabric] = Field(min_length=1)
    devices: int = Field(default=8, ge=1, le=1024)
    margin: float = Field(default=0.05, ge=0.0, le=10.0)
    tie: float = Field(default=0.02, ge=0.0, le=1.0)
    #: run staged copies of 8+ buffers as chunk trains at flow level (a speed lever, exact at
    #: constant leg rates but not bounded in general: docs/fidelity.md "Chunk trains";
    #: examples/main.toml turns it on, checked there by running it both ways)
    chunk_trains: bool = False

    @model_validator(mode="after")
    def _tie_within_margin(self) -> "MapSection":
        # a pipeline that ties the best non-pipelined schedule must also be within the margin of
        # "fits", or one cell would say both "ties" and "loses by more than the margin"
        if self.tie > self.margin:
            raise config_error("map.tie", self.tie, f"at most map.margin ({self.margin}): a tie must be within the margin")
        return self

    @model_validator(mode="after")
    def _distinct_names(self) -> "MapSection":
        # cells are keyed by (row name, column label): two equal ones would mix their runs
        _distinct("map.workloads", [w.name for w in self.workloads], "name")
        _distinct("map.fabrics", [f.label or f.preset for f in self.fabrics], "label",
                  "(a column's label defaults to its preset: give each column of one preset a label)")
        return self


class Scenario(Spec):
    """A whole scenario file: ``cases`` (schedules named per case) and / or a
    ``map`` (every feasible schedule per workload x fabric); at least one."""

    title: str
    description: str = ""
    fabric: FabricSection = FabricSection()
    hardware: HardwareSection = HardwareSection()
    cases: list[CaseSection] = Field(default_factory=list)
    map: MapSection | None = None
    output: OutputSection = OutputSection()
    base_dir: str = "."
    #: The scenario file's text as read (for the report's provenance block); "" when built in code.
    source_text: str = ""

    @model_validator(mode="after")
    def _something_to_run(self) -> "Scenario":
        if not self.cases and self.map is None:
            # a ConfigError naming the field (a ValueError here was reported with the whole parsed file)
            raise config_error("Scenario.cases", [], "at least one [[cases]] entry or a [map] section")
        return self

    @model_validator(mode="after")
    def _distinct_names(self) -> "Scenario":
        # report files are named by case and schedule label: equal ones would overwrite each other
        _distinct("cases", [c.name for c in self.cases], "name")
        for i, c in enumerate(self.cases):
            _distinct(f"cases.{i}.schedules", [e.label or e.name for e in c.schedules], "label",
                      "(a schedule's label defaults to its name: label each run of one builder)")
        return self


def load_scenario(path: str | os.PathLike[str]) -> Scenario:
    """Parse and validate a scenario TOML file.

    Raises:
        ConfigError: unreadable TOML, unknown keys, wrong types (naming the key).
    """
    p = Path(path) if isinstance(path, (str, os.PathLike)) else path
    data = read_toml(p, "scenario")
    data.setdefault("base_dir", str(p.resolve().parent))
    data.setdefault("source_text", p.read_text(encoding="utf-8", errors="replace"))
    return Scenario.from_dict(data)  # type: ignore[return-value]


def fabric_spec(sc: Scenario) -> FabricSpec:
    """The scenario's fabric: its preset with overrides, its TOML file
    (relative to the scenario's folder) or its inline table.

    Raises:
        ConfigError: no preset, file or inline table; an invalid fabric.
    """
    f = sc.fabric
    if f.inline is not None:
        spec = fabric_from_dict(f.inline)
    elif f.file is not None:
        p = Path(f.file)
        spec = FabricSpec.from_toml(p if p.is_absolute() else Path(sc.base_dir) / p)
    elif f.preset is not None:
        return fabric_preset(f.preset, **f.overrides)
    else:
        raise config_error("fabric", None, "one of preset, file or inline")
    return cast(FabricSpec, spec.replace(**f.overrides)) if f.overrides else spec


def map_fabric_spec(col: MapFabric, index: int) -> FabricSpec:
    """The fabric of map column ``index``: its preset with overrides.

    Raises:
        ConfigError: an unknown preset or override, naming ``map.fabrics.<index>.preset``.
    """
    from flitsim.errors import ConfigError

    try:
        return fabric_preset(col.preset, **col.overrides)
    except ConfigError as e:
        raise config_error(f"map.fabrics.{index}.preset", col.preset, str(e)) from None
