"""Shared pieces of every schedule: the :class:`Schedule` result, the graph
builder that keeps per-task schedule metadata, layer partitioning, roofline
times in picoseconds, and per-device communication accounting.

Communication accounting (used by :meth:`Schedule.comm_bytes_per_device`):

- a transfer of S bytes: S sent by its source, S received by its destination;
- a collective of nccl-tests size S over n ranks: every member sends and
  receives ``busbw_factor(n) x S`` bytes (the nccl-tests bus bytes: 2(n-1)/n
  all_reduce, (n-1)/n all_gather / reduce_scatter / all_to_all, 1 broadcast /
  reduce), i.e. what a bandwidth-optimal ring moves through each rank's port.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from flitsim.errors import check_int as _check_int, config_error
from flitsim.hardware import Efficiency, gpu_preset, roofline_time_s
from flitsim.models import OpCost
from flitsim.taskgraph import COLLECTIVES, TaskGraph, TaskGraphBuilder, TaskGraphRun, execute

if TYPE_CHECKING:
    import pandas as pd

PHASES = ("pipeline", "warmup", "prefill", "decode", "step")
"""Phase codes kept per task (``Schedule.task_phase``)."""


def busbw_factor(kind: str, n: int) -> float:
    """nccl-tests bus-bandwidth factor of collective ``kind`` over ``n`` ranks
    (nccl-tests doc/PERFORMANCE.md): bytes each rank sends per byte of "size"."""
    if n <= 1:
        return 0.0
    if kind == "all_reduce":
        return 2.0 * (n - 1) / n
    if kind in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    return 1.0


def check_int(name: str, v: Any, minimum: int = 1) -> int:
    """An integer >= ``minimum`` (numpy integers accepted), else ConfigError
    (see :func:`flitsim.errors.check_int`)."""
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


def scale_cost(cost: OpCost, f: float) -> OpCost:
    """Every additive field of ``cost`` times ``f`` (e.g. 1/N for a tensor-parallel shard)."""
    vals = {k.name: int(round(getattr(cost, k.name) * f)) for k in dataclasses.fields(cost) if k.name != "name"}
    return OpCost(name=cost.name, **vals)


def matmul_part(cost: OpCost) -> OpCost:
    """Only the weight-matmul part of ``cost`` (attention FLOPs and K/V bytes zeroed)."""
    return dataclasses.replace(cost, attention_flops=0, kv_read_bytes=0, kv_write_bytes=0)


def attention_part(cost: OpCost) -> OpCost:
    """Only the attention part of ``cost`` (matmul FLOPs and weight/activation bytes zeroed)."""
    return dataclasses.replace(cost, matmul_flops=0, weight_bytes=0, act_in_bytes=0, act_out_bytes=0)


@dataclass(frozen=True)
class Hardware:
    """GPU and roofline efficiencies used to turn an :class:`OpCost` into a duration."""

    gpu: Any = "h100"
    efficiency: Efficiency | None = None
    dtype: str = "bf16"

    def __post_init__(self) -> None:
        object.__setattr__(self, "gpu", gpu_preset(self.gpu) if isinstance(self.gpu, str) else self.gpu)
        if isinstance(self.efficiency, dict):
            object.__setattr__(self, "efficiency", Efficiency(**self.efficiency))
        elif self.efficiency is not None and not isinstance(self.efficiency, Efficiency):
            raise config_error("efficiency", self.efficiency, "None, an Efficiency or a dict of its fields "
                               "(matmul, attention, memory)")

    def time_ps(self, cost: OpCost) -> int:
        """Roofline time of ``cost`` (:func:`flitsim.hardware.roofline_time_s`), integer ps."""
        return int(round(roofline_time_s(cost, self.gpu, dtype=self.dtype, efficiency=self.efficiency) * 1e12))


@dataclass
class GraphBuilder:
    """A :class:`TaskGraphBuilder` plus per-task schedule metadata: phase,
    item (slice / patch / micro-batch index), step (denoising or decode step),
    layer (-1 when a task spans several)."""

    tg: TaskGraphBuilder
    hw: Hardware
    phase: list[int] = field(default_factory=list)
    item: list[int] = field(default_factory=list)
    step: list[int] = field(default_factory=list)
    layer: list[int] = field(default_factory=list)

    def _meta(self, phase: str, item: int, step: int, layer: int) -> None:
        self.phase.append(PHASES.index(phase))
        self.item.append(item)
        self.step.append(step)
        self.layer.append(layer)

    def compute(self, device: int, cost: OpCost | None, *, stage: int = -1, item: int = -1, step: int = -1,
                layer: int = -1, phase: str = "pipeline", label: str = "", duration_ps: int | None = None) -> int:
        """A compute task whose duration is the roofline time of ``cost``
        (or ``duration_ps`` when given)."""
        dur = self.hw.time_ps(cost) if duration_ps is None else duration_ps
        flops = float(cost.flops) if cost is not None else 0.0
        mem = float(cost.mem_bytes) if cost is not None else 0.0
        t = self.tg.add_compute(device, dur, label=label, stage=stage, flops=flops, mem_bytes=mem)
        self._meta(phase, item, step, layer)
        return t

    def transfer(self, src: int, dst: int, nbytes: int, *, stage: int = -1, item: int = -1, step: int = -1,
                 layer: int = -1, phase: str = "pipeline", label: str = "") -> int:
        t = self.tg.add_transfer(src, dst, int(nbytes), label=label, stage=stage)
        self._meta(phase, item, step, layer)
        return t

    def collective(self, group: Sequence[int], kind: str, nbytes: int, *, stage: int = -1, item: int = -1,
                   step: int = -1, layer: int = -1, phase: str = "pipeline", label: str = "") -> int:
        t = self.tg.add_collective(group, kind, int(nbytes), label=label, stage=stage)
        self._meta(phase, item, step, layer)
        return t

    def edge(self, before: int, after: int, kind: str = "data") -> None:
        self.tg.add_edge(before, after, kind)  # type: ignore[arg-type]

    def edges(self, befores: Sequence[int], after: int) -> None:
        for b in befores:
            self.tg.add_edge(b, after)


@dataclass(frozen=True)
class Schedule:
    """A lowered schedule: the task graph, what each task is, and (after
    :meth:`simulate`) the run.

    Attributes:
        name: schedule name (``"terapipe"``, ``"pipefusion"``, ...).
        graph: the :class:`~flitsim.taskgraph.TaskGraph` (engine arrays + labels, stage, FLOPs).
        devices: device ids used, in stage-major order (stage j, then rank in stage).
        stages: number of pipeline stages (1 for non-pipelined schedules).
        task_phase, task_item, task_step, task_layer: int arrays, shape (tasks,):
            phase code (index into :data:`PHASES`), slice / patch / micro-batch
            index, denoising or decode step, layer (-1: several or none).
        steps: denoising / decode steps covered (1 for a prefill).
        options: the options the schedule was built with, plus derived facts
            (slice boundaries, patch tokens, ...).
        run: the :class:`~flitsim.taskgraph.TaskGraphRun`, or None before simulating.
    """

    name: str
    graph: TaskGraph
    devices: tuple[int, ...]
    stages: int
    task_phase: np.ndarray
    task_item: np.ndarray
    task_step: np.ndarray
    task_layer: np.ndarray
    steps: int = 1
    options: dict[str, Any] = field(default_factory=dict)
    run: TaskGraphRun | None = None

    # ------------------------------------------------------------------ running
    def simulate(self, network: Any = None) -> "Schedule":
        """Execute the graph over ``network`` (anything with ``to_core(devices)``,
        default :class:`~flitsim.taskgraph.IdealNetwork` with zero cost) and
        return a copy holding the run.

        Raises:
            ConfigError: the graph's devices do not fit the network, or a cycle.
            StalledError: work pending that can never finish.
        """
        return dataclasses.replace(self, run=execute(self.graph, network))

    def _need_run(self) -> TaskGraphRun:
        if self.run is None:
            raise config_error("run", None, "call simulate() first (flitsim.schedules.simulate(schedule, network))")
        return self.run

    @property
    def makespan_ps(self) -> int:
        """End of the last task, ps."""
        return self._need_run().makespan_ps

    # ------------------------------------------------------------------ static metrics
    def _pipeline_compute(self) -> np.ndarray:
        c = self.graph.columns
        return (c["kind"] == 0) & (self.task_phase == 0) & (self.graph.meta["stage"] >= 0)

    def stage_task_times_ps(self) -> dict[int, np.ndarray]:
        """Durations (ps) of the pipelined compute tasks of each stage, in task
        order: {stage: array}. A stage's task is one slice / patch / micro-batch
        passing through all of the stage's layers (the pipeline's beat)."""
        sel = self._pipeline_compute()
        st = self.graph.meta["stage"][sel]
        dur = self.graph.columns["duration_ps"][sel].astype(np.float64)
        return {int(s): dur[st == s] for s in np.unique(st)}

    def stage_times_ps(self) -> np.ndarray:
        """Mean pipelined task time per stage, ps, shape (stages,)."""
        d = self.stage_task_times_ps()
        return np.array([d[s].mean() for s in sorted(d)]) if d else np.zeros(0)

    def stage_time_cv(self) -> float:
        """Coefficient of variation (std / mean, population std) of the
        pipeline's stage times: over every (stage, slice-or-patch) compute task
        of the pipelined phase. 0 when every stage takes the same time for every
        item (PipeFusion with balanced stages); it grows when items differ (causal
        slices: later slices see more context) or stages differ."""
        d = self.stage_task_times_ps()
        if not d:
            return 0.0
        x = np.concatenate(list(d.values()))
        return float(x.std() / x.mean()) if x.mean() > 0 else 0.0

    def comm_bytes_per_device(self, step: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(sent, received) bytes per device of the fabric, shape (fabric devices,)
        each, counted as the module docstring says; ``step`` restricts to the
        tasks of one denoising / decode step."""
        c = self.graph.columns
        n = self.graph.devices
        sent = np.zeros(n)
        recv = np.zeros(n)
        sel = np.ones(len(self.graph), bool) if step is None else (self.task_step == step)
        tr = sel & (c["kind"] == 1) & (c["device"] != c["peer"])
        np.add.at(sent, c["device"][tr].astype(np.int64), c["bytes"][tr].astype(np.float64))
        np.add.at(recv, c["peer"][tr].astype(np.int64), c["bytes"][tr].astype(np.float64))
        offs, mem = c["group_offsets"], c["group_members"]
        for t in np.nonzero(sel & (c["kind"] == 2))[0]:
            g = int(c["group"][t])
            members = mem[offs[g]:offs[g + 1]].astype(np.int64)
            b = busbw_factor(COLLECTIVES[int(c["collective"][t])], len(members)) * float(c["bytes"][t])
            sent[members] += b
            recv[members] += b
        return sent, recv

    def comm_bytes(self) -> float:
        """Total bytes sent over the fabric (sum over devices)."""
        return float(self.comm_bytes_per_device()[0].sum())

    def flops(self) -> float:
        """Total FLOPs of all compute tasks (multiply-add = 2)."""
        return float(self.graph.meta["flops"].sum())

    # ------------------------------------------------------------------ run metrics
    def bubble_fraction(self) -> np.ndarray:
        """Idle share of each used device over the makespan, shape (len(devices),)."""
        return self._need_run().idle_fraction()[list(self.devices)]

    def fill_drain_share(self) -> float:
        """Share of the makespan during which the pipeline is not full: from the
        first pipelined task's start until the last stage starts its first
        pipelined task (fill), and from the first stage's last pipelined task's
        end until the last stage's end (drain), as a union. For K stages and M
        equal items: 2(K-1)/(M+K-1). 0 for non-pipelined schedules."""
        run = self._need_run()
        if self.stages < 2 or not run.makespan_ps:
            return 0.0
        sel = self._pipeline_compute()
        st = self.graph.meta["stage"][sel]
        s = run.tasks.start_ps.to_numpy()[sel]
        e = run.tasks.end_ps.to_numpy()[sel]
        last = self.stages - 1
        if not (st == 0).any() or not (st == last).any():
            return 0.0
        t0, t_end = s.min(), e.max()
        fill_end = s[st == last].min()
        drain_start = e[st == 0].max()
        fill = max(0, fill_end - t0)
        drain = max(0, t_end - drain_start)
        union = min(fill + drain, t_end - t0)
        return float(union / run.makespan_ps)

    def credit_wait_ps(self) -> int:
        """Sum of credit waits over all tasks, ps (bounded in-flight hand-off)."""
        return int(self._need_run().tasks.credit_wait_ps.sum())

    def summary(self) -> dict[str, Any]:
        """Plain dict of the headline numbers: makespan (s), stage times (s),
        stage-time CV, fill/drain share, bubble fraction (mean, max), bytes
        sent, FLOPs, FLOP per communicated byte, credit waits, task count."""
        sent = self.comm_bytes()
        out: dict[str, Any] = {
            "schedule": self.name, "devices": len(self.devices), "stages": self.stages, "tasks": len(self.graph),
            "stage_time_s": [float(x) * 1e-12 for x in self.stage_times_ps()],
            "stage_time_cv": self.stage_time_cv(), "comm_bytes": sent, "flops": self.flops(),
            "flop_per_comm_byte": self.flops() / sent if sent else float("inf"),
        }
        if self.run is not None:
            bub = self.bubble_fraction()
            out.update(makespan_s=self.makespan_ps * 1e-12, fill_drain_share=self.fill_drain_share(),
                       bubble_fraction_mean=float(bub.mean()), bubble_fraction_max=float(bub.max()),
                       credit_wait_s=self.credit_wait_ps() * 1e-12)
        return out

    def tasks(self) -> "pd.DataFrame":
        """One row per task: the run's columns (if simulated) plus phase, item,
        step, layer and duration_ps."""
        import pandas as pd

        c = self.graph.columns
        base = self.run.tasks.copy() if self.run is not None else pd.DataFrame({
            "device": c["device"].astype(np.int64), "bytes": c["bytes"].astype(np.int64),
            "label": self.graph.meta["label"], "stage": self.graph.meta["stage"]})
        base["phase"] = np.array(PHASES, dtype=object)[self.task_phase]
        base["item"], base["step"], base["layer"] = self.task_item, self.task_step, self.task_layer
        base["duration_ps"] = c["duration_ps"].astype(np.int64)
        return base


def finish(name: str, gb: GraphBuilder, devices: Sequence[int], stages: int, steps: int,
           options: dict[str, Any]) -> Schedule:
    """Freeze a :class:`GraphBuilder` into a :class:`Schedule`."""
    return Schedule(name, gb.tg.build(), tuple(devices), stages,
                    np.array(gb.phase, np.int64), np.array(gb.item, np.int64), np.array(gb.step, np.int64),
                    np.array(gb.layer, np.int64), steps, options)


def new_builder(fabric_devices: int, hw: Hardware, comm_streams: int = 1) -> GraphBuilder:
    """A :class:`GraphBuilder` over ``fabric_devices`` devices, one compute stream each."""
    return GraphBuilder(TaskGraphBuilder(fabric_devices, 1, check_int("comm_streams", comm_streams)), hw)
