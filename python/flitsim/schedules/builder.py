"""Building a schedule's task graph: the hardware a schedule is timed on,
the graph builder with per-task schedule metadata, and the device / layer
helpers every schedule uses.

- :class:`Hardware`: the GPU (given, or the one the fabric is built from, or
  the H100 default — ``gpu_source`` says which), its :class:`~flitsim.cost.CostModel`
  (execution mode, measured profile) and the communication interference
  (:class:`~flitsim.cost.CommInterference`).
- :class:`GraphBuilder`: ``compute`` / ``compute_on(devices, kernels, after=...)``
  time kernels with the cost model; ``transfer`` / ``collective`` carry the
  share of compute they steal; :meth:`GraphBuilder.freeze` makes the
  :class:`~flitsim.schedules.schedule.Schedule`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from flitsim.cost import CommInterference, CostModel
from flitsim.errors import config_error
from flitsim.hardware import Efficiency, GpuSpec, fabric_gpu, gpu_preset
from flitsim.models.kernels import Kernels
from flitsim.schedules.schedule import PHASES, Schedule
from flitsim.limits import MAX_TASKS
from flitsim.taskgraph import TaskGraphBuilder

__all__ = ["Hardware", "GraphBuilder", "new_builder", "check_int", "resolve_devices", "split_layers",
           "DEFAULT_GPU"]

DEFAULT_GPU = "h100"
"""GPU a schedule is timed on when neither ``gpu`` nor a fabric naming one is given."""


def check_int(name: str, v: Any, minimum: int = 1) -> int:
    """An integer >= ``minimum`` (numpy integers accepted), else ConfigError
    (see :func:`flitsim.errors.check_int`, the one integer rule)."""
    from flitsim.errors import check_int as _check_int

    return _check_int(name, v, minimum)


def resolve_devices(devices: Any, needed: int, fabric_devices: int | None) -> tuple[list[int], int]:
    """Device ids for a schedule that needs ``needed`` devices.

    ``devices``: a count (ids 0..count-1) or a sequence of device ids of the
    fabric. ``fabric_devices``: endpoints of the fabric the graph runs on
    (default: max id + 1). Returns (ids, fabric size).

    Raises:
        ConfigError: wrong count, repeated ids, ids outside ``0..fabric_devices-1``.
    """
    if isinstance(devices, (int, np.integer)) and not isinstance(devices, bool):
        ids = list(range(int(devices)))
    else:
        try:
            ids = [int(d) if isinstance(d, (int, np.integer)) and not isinstance(d, bool) else d for d in devices]
        except TypeError:
            raise config_error("devices", devices, "a device count or a sequence of device ids") from None
        for d in ids:
            if not isinstance(d, int) or d < 0:
                raise config_error("devices", devices, "device ids are integers >= 0")
    if len(ids) != needed:
        raise config_error("devices", devices, f"{needed} devices for this schedule's options")
    if len(set(ids)) != len(ids):
        raise config_error("devices", devices, "distinct device ids")
    size = max(ids) + 1 if fabric_devices is None else check_int("fabric_devices", fabric_devices)
    if isinstance(devices, (int, np.integer)) and len(ids) > size:
        # a count (often the product of degree / stages options), not ids: say so rather than list ids
        raise config_error("devices", len(ids), f"at most the fabric's {size} devices (this schedule's options "
                           f"need {needed})")
    bad = [d for d in ids if d >= size]
    if bad:
        raise config_error("devices", bad, f"device ids in 0..{size - 1} (the fabric has {size} devices)")
    return ids, size


def split_layers(n_layers: int, stages: int, field_name: str = "stages") -> list[range]:
    """Contiguous layer groups balanced by layer count: the first ``n % K``
    stages get one layer more. Returns K ranges.

    Raises:
        ConfigError: ``stages`` < 1 or more stages than layers.
    """
    k = check_int(field_name, stages)
    if k > n_layers:
        raise config_error(field_name, k, f"at most the model's {n_layers} layers (blocks)")
    base, extra = divmod(n_layers, k)
    out, start = [], 0
    for j in range(k):
        n = base + (1 if j < extra else 0)
        out.append(range(start, start + n))
        start += n
    return out


_EFF_KEYS = {"matmul": "gemm_efficiency", "gemm": "gemm_efficiency", "attention": "attention_efficiency",
             "memory": "memory_efficiency"}


def _with_efficiency(gpu: GpuSpec, efficiency: Any) -> GpuSpec:
    """``gpu`` with its efficiency tops overridden (``matmul``/``gemm``, ``attention``, ``memory``)."""
    if efficiency is None:
        return gpu
    if isinstance(efficiency, Efficiency):
        efficiency = efficiency.model_dump()
    if not isinstance(efficiency, dict):
        raise config_error("efficiency", efficiency, "None, an Efficiency or a dict of efficiency tops "
                           "(matmul / gemm, attention, memory), each in (0, 1]")
    changes = {}
    for k, v in efficiency.items():
        if k not in _EFF_KEYS:
            raise config_error(f"efficiency.{k}", v, f"one of {sorted(_EFF_KEYS)}")
        changes[_EFF_KEYS[k]] = v
    return gpu.replace(**changes, efficiency_source="given")  # type: ignore[return-value]


class Hardware:
    """The compute side a schedule is timed on.

    Args:
        gpu: a preset name or :class:`~flitsim.hardware.GpuSpec`; None: the GPU
            ``fabric`` is built from (:func:`flitsim.hardware.fabric_gpu`), else
            :data:`DEFAULT_GPU`. ``gpu_source`` records which.
        efficiency: overrides of the GPU's efficiency tops (dict or Efficiency).
        dtype: compute dtype; execution: ``eager`` | ``cuda_graph`` |
            ``compiled`` (or an ExecutionMode); profile: a measured profile (path
            or Profile); interference: :class:`~flitsim.cost.CommInterference`
            or a dict of its fields; fabric: a fabric preset name / FabricSpec.

    Raises:
        ConfigError: unknown GPU, dtype, execution mode, bad efficiency, invalid profile.
    """

    def __init__(self, gpu: Any = None, efficiency: Any = None, dtype: str = "bf16", execution: Any = None,
                 profile: Any = None, interference: Any = None, fabric: Any = None) -> None:
        if gpu is None:
            named = fabric_gpu(fabric)
            if named:
                gpu, self.gpu_source = named, f"fabric {getattr(fabric, 'name', fabric)}"
            else:
                gpu, self.gpu_source = DEFAULT_GPU, "default (no gpu given and no fabric naming one)"
        else:
            self.gpu_source = "given"
        spec = gpu_preset(gpu) if isinstance(gpu, str) else gpu
        if not isinstance(spec, GpuSpec):
            raise config_error("gpu", gpu, "a GPU preset name or a GpuSpec")
        self.gpu: GpuSpec = _with_efficiency(spec, efficiency)
        self.dtype = dtype
        self.cost = CostModel(self.gpu, dtype, execution, profile)
        if interference is None:
            interference = CommInterference()
        elif isinstance(interference, dict):
            interference = CommInterference(**interference)
        elif not isinstance(interference, CommInterference):
            raise config_error("interference", interference, "None, a CommInterference or a dict of its fields")
        self.interference: CommInterference = interference

    def time_ps(self, kernels: Kernels) -> tuple[int, int]:
        """(duration, measured part) of a task running ``kernels``, integer ps."""
        return self.cost.time_ps(kernels)

    def steal_ppm(self, kind: str) -> int:
        """Share of compute a ``collective`` or ``transfer`` takes, parts per million."""
        key = (kind, id(self.interference), self.gpu.sm_count)  # memo per model: one lookup per task
        hit = self.__dict__.setdefault("_steal_memo", {}).get(key)
        if hit is not None:
            return hit
        sm = self.gpu.sm_count
        share = self.interference.collective_steal(sm) if kind == "collective" else self.interference.transfer_steal(sm)
        self._steal_memo[key] = out = int(round(share * 1e6))
        return out

    def options(self) -> dict[str, Any]:
        """What the schedule records about its compute side."""
        return {"gpu": self.gpu.name, "gpu_source": self.gpu_source, "execution": self.cost.execution.name,
                "dtype": self.dtype, "hbm_capacity_bytes": self.gpu.hbm_capacity_bytes}


_PHASE_CODE = {p: i for i, p in enumerate(PHASES)}
"""Phase name -> code (index into PHASES), looked up once per task."""


_FAST_APPEND = True
"""Append plain in-range tasks and edges straight to the builder's columns
(same rows as :meth:`TaskGraphBuilder.add_compute` / ``add_transfer`` /
``add_edge``; ``tests/test_build_speed.py`` builds with it off and compares)."""

_MAX_VALUE = 2**62
"""Durations and sizes stay below this (TaskGraphBuilder's bound, exact in u64/int64)."""


def _append_meta(gb: "GraphBuilder", code: int, item: int, step: int, layer: int, steal: int, measured: int) -> None:
    gb.phase.append(code)
    gb.item.append(item)
    gb.step.append(step)
    gb.layer.append(layer)
    gb.steal.append(steal)
    gb.measured.append(measured)


@dataclass
class GraphBuilder:
    """A :class:`TaskGraphBuilder` plus per-task schedule metadata: phase,
    item (slice / patch / micro-batch index), step (denoising or decode step),
    layer (-1 when a task spans several), compute steal and measured time."""

    tg: TaskGraphBuilder
    hw: Hardware
    phase: list[int] = field(default_factory=list)
    item: list[int] = field(default_factory=list)
    step: list[int] = field(default_factory=list)
    layer: list[int] = field(default_factory=list)
    steal: list[int] = field(default_factory=list)
    measured: list[int] = field(default_factory=list)
    _kernel_memo: dict[int, tuple[Kernels, tuple[int, int, float, float]]] = field(default_factory=dict, repr=False)

    def _timed(self, kernels: Kernels) -> tuple[int, int, float, float]:
        """(duration ps, measured ps, FLOPs, bytes) of ``kernels``, once per
        kernel table object: builders reuse one table for every layer and
        step (the entry holds the table, so its id is not reused)."""
        hit = self._kernel_memo.get(id(kernels))
        if hit is not None and hit[0] is kernels:
            return hit[1]
        dur, meas = self.hw.time_ps(kernels)
        val = (dur, meas, kernels.total_flops(), kernels.total_bytes())
        self._kernel_memo[id(kernels)] = (kernels, val)
        return val

    def _meta(self, phase: str, item: int, step: int, layer: int, steal: int = 0, measured: int = 0) -> None:
        _append_meta(self, _PHASE_CODE[phase] if phase in _PHASE_CODE else PHASES.index(phase), item, step, layer,
                     steal, measured)

    def compute(self, device: int, kernels: Kernels | None, *, stage: int = -1, item: int = -1, step: int = -1,
                layer: int = -1, phase: str = "pipeline", label: str = "", duration_ps: int | None = None) -> int:
        """A compute task running ``kernels`` (duration from the cost model, or
        ``duration_ps`` when given)."""
        if duration_ps is None and kernels is not None:
            dur, meas, flops, mem = self._timed(kernels)
        else:
            dur, meas = int(duration_ps or 0), 0
            flops = kernels.total_flops() if kernels is not None else 0.0
            mem = kernels.total_bytes() if kernels is not None else 0.0
        tg = self.tg
        code = _PHASE_CODE.get(phase)
        if (_FAST_APPEND and code is not None and type(device) is int and 0 <= device < tg.devices
                and type(dur) is int and 0 <= dur < _MAX_VALUE and len(tg._kind) < MAX_TASKS):
            # the same rows add_compute + _meta append, without their per-call checks (all hold here)
            t = tg._add(0, device, 0, dur, 0, 0, 0, label, stage, float(flops), float(mem))
            _append_meta(self, code, item, step, layer, 0, meas)
            return t
        t = self.tg.add_compute(device, dur, label=label, stage=stage, flops=flops, mem_bytes=mem)
        self._meta(phase, item, step, layer, 0, meas)
        return t

    def compute_on(self, devices: Sequence[int], kernels: Kernels, *, after: Any = None, label: str = "",
                   stage: int = -1, item: int | None = None, step: int = -1, layer: int = -1,
                   phase: str = "step") -> list[int]:
        """The same ``kernels`` as one compute task on each of ``devices`` (item =
        the device's rank unless given, label ``{label}.d{rank}``), timed once. ``after``:
        None, one task id every task waits for, or one id per device (< 0: none),
        or a list of ids every task waits for (``after=[[...]]``).
        Returns the task ids in device order."""
        dur, meas, flops, mem = self._timed(kernels)
        out = []
        tg = self.tg
        code = _PHASE_CODE.get(phase)
        fast = (_FAST_APPEND and code is not None and type(dur) is int and 0 <= dur < _MAX_VALUE)
        flops_f, mem_f = float(flops), float(mem)
        for r, d in enumerate(devices):
            if fast and type(d) is int and 0 <= d < tg.devices and len(tg._kind) < MAX_TASKS:
                t = tg._add(0, d, 0, dur, 0, 0, 0, f"{label}.d{r}", stage, flops_f, mem_f)
                _append_meta(self, code, r if item is None else item, step, layer, 0, meas)
            else:
                t = self.tg.add_compute(d, dur, label=f"{label}.d{r}", stage=stage, flops=flops, mem_bytes=mem)
                self._meta(phase, r if item is None else item, step, layer, 0, meas)
            if after is not None:
                if isinstance(after, (int, np.integer)):
                    deps: Sequence[int] = [int(after)]
                elif len(after) == 1 and isinstance(after[0], (list, tuple)):
                    deps = after[0]
                else:
                    deps = [after[r]]
                for b in deps:
                    if b >= 0:
                        self.edge(int(b), t)
            out.append(t)
        return out

    def transfer(self, src: int, dst: int, nbytes: int, *, stage: int = -1, item: int = -1, step: int = -1,
                 layer: int = -1, phase: str = "pipeline", label: str = "") -> int:
        tg = self.tg
        code = _PHASE_CODE.get(phase)
        n = tg.devices
        if (_FAST_APPEND and code is not None and type(src) is int and type(dst) is int and 0 <= src < n
                and 0 <= dst < n and type(nbytes) is int and 0 <= nbytes < _MAX_VALUE
                and len(tg._kind) < MAX_TASKS):
            # the same rows add_transfer + _meta append, without their per-call checks (all hold here)
            t = tg._add(1, src, dst, 0, nbytes, 0, 0, label, stage, 0.0, 0.0)
            _append_meta(self, code, item, step, layer, self.hw.steal_ppm("transfer") if nbytes and src != dst else 0, 0)
            return t
        t = self.tg.add_transfer(src, dst, int(nbytes), label=label, stage=stage)
        self._meta(phase, item, step, layer, self.hw.steal_ppm("transfer") if nbytes and src != dst else 0)
        return t

    def collective(self, group: Sequence[int], kind: str, nbytes: int, *, stage: int = -1, item: int = -1,
                   step: int = -1, layer: int = -1, phase: str = "pipeline", label: str = "") -> int:
        t = self.tg.add_collective(group, kind, int(nbytes), label=label, stage=stage)
        self._meta(phase, item, step, layer, self.hw.steal_ppm("collective") if len(group) > 1 and nbytes else 0)
        return t

    def edge(self, before: int, after: int, kind: str = "data") -> None:
        tg = self.tg
        n = len(tg._kind)
        if _FAST_APPEND and type(before) is int and type(after) is int and 0 <= before < n and 0 <= after < n \
                and kind == "data":
            tg._esrc.append(before)  # add_edge's own fast path, without the call
            tg._edst.append(after)
            tg._ekind.append(0)
            return
        tg.add_edge(before, after, kind)  # type: ignore[arg-type]

    def edges(self, befores: Sequence[int], after: int) -> None:
        for b in befores:
            self.edge(b, after)

    def repeat(self, key: Any, fn: Any, ext: Sequence[int], *, step: int, layer: int, prefix: str,
               item: int | None = None, stage: int | None = None) -> list[int]:
        """``fn(gb, ext, step, layer, prefix)`` (adds tasks and edges through
        :meth:`compute` / :meth:`transfer` / :meth:`edge` only, labels
        ``prefix + ...``, and returns a list of its task ids), recorded once
        per ``key`` and then appended as whole columns: the same rows, edges
        and labels as calling ``fn`` itself, when what ``fn`` adds depends on
        ``step``, ``layer`` and ``prefix`` only through the tasks' step and
        layer columns and the label prefix, and on ``ext`` (ids of earlier
        tasks) only through edges from them. ``item`` / ``stage`` given: every
        task of ``fn`` has that item / stage (``fn`` is then called with
        ``item=..., stage=...`` too). Collectives get the group ids
        ``add_collective`` would give them. Returns ``fn``'s task ids."""
        tg = self.tg
        base = len(tg._kind)
        ok = _FAST_APPEND and all(type(e) is int and 0 <= e < base for e in ext)
        blk = self.__dict__.setdefault("_blocks", {}).get(key) if ok else None
        over = {} if item is None and stage is None else {"item": item, "stage": stage}
        if ok and blk is None:
            blk = self.__dict__["_blocks"][key] = _record_block(self, fn, len(ext), over)
        if blk is None or base + blk.n > MAX_TASKS:
            return fn(self, ext, step, layer, prefix, **over)
        for name, vals in blk.rows.items():
            getattr(tg, name).extend(vals if name != "_stage" or stage is None else [stage] * blk.n)
        for r, members in blk.colls:
            tg._group[base + r] = tg._groups.setdefault(members, len(tg._groups))
        tg._label.extend([prefix + x for x in blk.labels])
        self.phase.extend(blk.phase)
        self.item.extend(blk.item if item is None else [item] * blk.n)
        self.step.extend([step] * blk.n)
        self.layer.extend([layer] * blk.n)
        self.steal.extend(blk.steal)
        self.measured.extend(blk.measured)
        ext_l = list(ext)
        tg._esrc.extend([base + r if r >= 0 else ext_l[-1 - r] for r in blk.esrc])
        tg._edst.extend([base + r for r in blk.edst])
        tg._ekind.extend(blk.ekind)
        return [base + r for r in blk.out]

    def freeze(self, name: str, devices: Sequence[int], stages: int, steps: int, options: dict[str, Any]) -> Schedule:
        """The finished :class:`Schedule` (the hardware's options merged into ``options``)."""
        graph = self.tg.build()
        graph.columns["steal_ppm"] = np.array(self.steal, np.uint32)
        # steps repeat (DiT denoising, decode); else layers may (LLM prefill).
        # With steps, the runs of identical layers inside them are declared
        # too (skipped where the steps themselves never repeat, or before they do).
        outer = step_period(self.step)
        periods = [outer, *layer_periods(self.layer, exclude=outer)] if outer else [step_period(self.layer)]
        graph.columns["period_tasks"] = np.array(periods, np.uint32)
        return Schedule(name, graph, tuple(devices), stages,
                        np.array(self.phase, np.int64), np.array(self.item, np.int64), np.array(self.step, np.int64),
                        np.array(self.layer, np.int64), steps, {**self.hw.options(), **options},
                        task_measured_ps=np.array(self.measured, np.int64))


def step_period(step: Sequence[int]) -> int:
    """Tasks per denoising / decode step (or per layer, given the layer column)
    where they repeat (0: none): the
    distance between the first tasks of consecutive middle steps, when the two
    middle distances agree. A declaration only: the executor verifies task by
    task that task i + P is task i one step later and refuses otherwise
    (rust/src/taskgraph/periodic.rs), so a wrong value costs nothing but the
    check."""
    st = np.asarray(step, np.int64)
    steps, first = np.unique(st, return_index=True)
    keep = steps >= 0
    steps, first = steps[keep], np.sort(first[keep])
    if len(steps) < 4:
        return 0
    mid = len(first) // 2
    p = int(first[mid + 1] - first[mid]) if mid + 1 < len(first) else 0
    return p if p > 0 and p == int(first[mid] - first[mid - 1]) else 0


def layer_periods(layer: Sequence[int], exclude: int = 0, most: int = 4) -> list[int]:
    """Tasks per layer where runs of at least 3 consecutive layers have the
    same size (the distance between the first tasks of consecutive layers,
    ``layer`` the per-task layer column, -1 outside layers), most common
    first, at most ``most`` of them, ``exclude`` left out. A declaration only,
    like :func:`step_period`: the executor verifies every run task by task."""
    la = np.asarray(layer, np.int64)
    if len(la) < 2:
        return []
    starts = np.concatenate([[0], np.flatnonzero(la[1:] != la[:-1]) + 1])
    starts = starts[la[starts] >= 0]
    d = np.diff(starts)
    cover: dict[int, int] = {}
    i = 0
    while i < len(d):
        j = i
        while j < len(d) and d[j] == d[i]:
            j += 1
        if j - i >= 3 and int(d[i]) != exclude:
            cover[int(d[i])] = cover.get(int(d[i]), 0) + (j - i) * int(d[i])
        i = j
    return [p for p, _ in sorted(cover.items(), key=lambda kv: (-kv[1], kv[0]))][:most]


@dataclass(frozen=True)
class _Block:
    """Tasks and edges of :meth:`GraphBuilder.repeat`, relative to the block's
    first task; an edge source < 0 is ``ext[-1 - src]``."""

    n: int
    rows: dict[str, list[Any]]
    labels: list[str]
    phase: list[int]
    item: list[int]
    steal: list[int]
    measured: list[int]
    esrc: list[int]
    edst: list[int]
    ekind: list[int]
    out: list[int]
    colls: list[tuple[int, tuple[int, ...]]]  # (task, group members) of each collective


def _record_block(gb: GraphBuilder, fn: Any, n_ext: int, over: dict[str, Any]) -> "_Block | None":
    """Run ``fn`` once on a scratch builder (same hardware and kernel timings)
    after ``n_ext`` placeholder tasks; None if it adds edges into earlier tasks."""
    tg = gb.tg
    sb = GraphBuilder(TaskGraphBuilder(tg.devices, tg.compute_streams, tg.comm_streams), gb.hw)
    sb._kernel_memo = gb._kernel_memo
    ext = [sb.tg._add(0, 0, 0, 0, 0, 0, 0, "", -1, 0.0, 0.0) for _ in range(n_ext)]
    sb.phase.extend([0] * n_ext)
    sb.item.extend([0] * n_ext)
    sb.step.extend([0] * n_ext)
    sb.layer.extend([0] * n_ext)
    sb.steal.extend([0] * n_ext)
    sb.measured.extend([0] * n_ext)
    out = fn(sb, ext, 0, 0, "", **over)
    st = sb.tg
    if not all(d >= n_ext for d in st._edst):
        return None
    k = n_ext
    members_of = {g: m for m, g in st._groups.items()}
    colls = [(i - k, members_of[st._group[i]]) for i in range(k, len(st._kind)) if st._kind[i] == 2]
    rows = {name: getattr(st, name)[k:] for name in ("_kind", "_release", "_device", "_peer", "_dur", "_bytes",
                                                      "_coll", "_group", "_stage", "_flops", "_mem")}
    return _Block(len(st._kind) - k, rows, st._label[k:], sb.phase[k:], sb.item[k:], sb.steal[k:], sb.measured[k:],
                  [s_ - k if s_ >= k else -1 - s_ for s_ in st._esrc], [d - k for d in st._edst], list(st._ekind),
                  [t - k for t in out], colls)


def new_builder(fabric_devices: int, hw: Hardware, comm_streams: int = 1) -> GraphBuilder:
    """A :class:`GraphBuilder` over ``fabric_devices`` devices, one compute stream each."""
    return GraphBuilder(TaskGraphBuilder(fabric_devices, 1, check_int("comm_streams", comm_streams)), hw)
