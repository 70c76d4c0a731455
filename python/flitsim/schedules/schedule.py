"""The lowered schedule: a task graph plus what each task is, and the
metrics read from it (stage-time CV, fill/drain share, bubble fraction, bytes
per device, FLOPs, measured-compute share).

Communication accounting (:meth:`Schedule.comm_bytes_per_device`):

- a transfer of S bytes: S sent by its source, S received by its destination;
- a collective of nccl-tests size S over n ranks: every member sends and
  receives ``busbw_factor(n) x S`` bytes (:func:`flitsim.collectives.busbw_factor`,
  the nccl-tests bus bytes), i.e. what a bandwidth-optimal ring moves through
  each rank's port.
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from flitsim.collectives import busbw_factor
from flitsim.errors import config_error
from flitsim.taskgraph import COLLECTIVES, TaskGraph, TaskGraphRun, execute

if TYPE_CHECKING:
    import pandas as pd

    from flitsim.memory import Footprint

__all__ = ["Schedule", "PHASES"]

PHASES = ("pipeline", "warmup", "prefill", "decode", "step")
"""Phase codes kept per task (``Schedule.task_phase``)."""


def _warn_gpu_mismatch(schedule: "Schedule", network: Any) -> None:
    """Say so when a schedule timed on a default GPU runs on a fabric built from another."""
    from flitsim.hardware import fabric_gpu, gpu_preset

    fab = getattr(network, "fabric", network)
    want = fabric_gpu(fab) if fab is not None else None
    src = str(schedule.options.get("gpu_source", ""))
    if want and src.startswith("default") and gpu_preset(want).name != schedule.options.get("gpu"):
        warnings.warn(f"schedule {schedule.name!r} was timed on {schedule.options.get('gpu')} compute ({src}); "
                      f"the fabric is built from {gpu_preset(want).name}: pass gpu={want!r} (or fabric=...) "
                      "to build", stacklevel=3)


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
        task_measured_ps: per task, the part of its compute time that came from
            a measured profile (ps; 0 when modelled).
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
    task_measured_ps: np.ndarray | None = None

    # ------------------------------------------------------------------ running
    def simulate(self, network: Any = None) -> "Schedule":
        """Execute the graph over ``network`` (anything with ``to_core(devices)``,
        default :class:`~flitsim.networks.AnalyticNetwork` with zero cost) and
        return a copy holding the run.

        Raises:
            ConfigError: the graph's devices do not fit the network, or a cycle.
            StalledError: work pending that can never finish.
        """
        _warn_gpu_mismatch(self, network)
        return dataclasses.replace(self, run=execute(self.graph, network))

    def require_run(self) -> TaskGraphRun:
        """The run, or ConfigError if :meth:`simulate` was not called."""
        if self.run is None:
            raise config_error("run", None, "call simulate() first (flitsim.schedules.simulate(schedule, network))")
        return self.run

    @property
    def makespan_ps(self) -> int:
        """End of the last task, ps."""
        return self.require_run().makespan_ps

    # ------------------------------------------------------------------ static metrics
    def _pipeline_compute(self) -> np.ndarray:
        c = self.graph.columns
        return (c["kind"] == 0) & (self.task_phase == 0) & (self.graph.meta["stage"] >= 0)

    def stage_task_times_ps(self) -> dict[int, np.ndarray]:
        """Durations (ps) of the pipelined compute tasks of each stage, in task
        order: {stage: array}. A stage's task is one slice / patch / micro-batch
        passing through all of the stage's layers (the pipeline's beat)."""
        sel = np.nonzero(self._pipeline_compute())[0]
        st = self.graph.meta["stage"][sel]
        dur = self.graph.columns["duration_ps"][sel].astype(np.float64)
        # a stage's beat may be several tasks per device (hybrids: one per layer part): sum them
        # per (stage, item, step, device), in order of first task
        key = np.stack([st, self.task_item[sel], self.task_step[sel], self.graph.columns["device"][sel].astype(np.int64)])
        if len(sel) and len(np.unique(key, axis=1)[0]) < len(sel):
            _, first, inv = np.unique(key, axis=1, return_index=True, return_inverse=True)
            inv = inv.reshape(-1)
            sums = np.zeros(len(first))
            np.add.at(sums, inv, dur)
            order = np.argsort(first, kind="stable")
            st, dur = st[first[order]], sums[order]
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

    def measured_compute_share(self) -> float:
        """Share of all compute time that came from measured kernel profiles (0..1)."""
        c = self.graph.columns
        comp = c["kind"] == 0
        total = float(c["duration_ps"][comp].astype(np.float64).sum())
        if self.task_measured_ps is None or total == 0:
            return 0.0
        return float(self.task_measured_ps[comp].sum()) / total

    def flops(self) -> float:
        """Total FLOPs of all compute tasks (multiply-add = 2)."""
        return float(self.graph.meta["flops"].sum())

    # ------------------------------------------------------------------ run metrics
    def bubble_fraction(self) -> np.ndarray:
        """Idle share of each used device over the makespan, shape (len(devices),)."""
        return self.require_run().idle_fraction()[list(self.devices)]

    def fill_drain_share(self) -> float:
        """Share of the makespan during which the pipeline is not full: from the
        first pipelined task's start until the last stage starts its first
        pipelined task (fill), and from the first stage's last pipelined task's
        end until the last stage's end (drain), as a union. For K stages and M
        equal items: 2(K-1)/(M+K-1). 0 for non-pipelined schedules."""
        run = self.require_run()
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
        return int(self.require_run().tasks.credit_wait_ps.sum())

    def summary(self) -> dict[str, Any]:
        """Plain dict of the headline numbers: makespan (s), stage times (s),
        stage-time CV, fill/drain share, bubble fraction (mean, max), bytes
        sent, FLOPs, FLOP per communicated byte, credit waits, task count, and
        memory: ``memory_status`` (``"ok"`` / ``"oom"``; ``"unknown"`` for a
        schedule built without a memory model), ``peak_memory_bytes``
        (the fullest device), ``memory_broken_by`` (component, or None),
        ``hbm_capacity_bytes``."""
        sent = self.comm_bytes()
        out: dict[str, Any] = {
            "schedule": self.name, "devices": len(self.devices), "stages": self.stages, "tasks": len(self.graph),
            "stage_time_s": [float(x) * 1e-12 for x in self.stage_times_ps()],
            "stage_time_cv": self.stage_time_cv(), "comm_bytes": sent, "flops": self.flops(),
            "flop_per_comm_byte": self.flops() / sent if sent else float("inf"),
            "gpu": self.options.get("gpu"), "gpu_source": self.options.get("gpu_source"),
            "execution": self.options.get("execution"), "compute_measured_share": self.measured_compute_share(),
        }
        if "memory_static" in self.options:
            fp = self.footprint()
            out.update(memory_status=fp.status, peak_memory_bytes=fp.peak_bytes, memory_broken_by=fp.broken_by,
                       hbm_capacity_bytes=fp.capacity_bytes)
        else:  # a graph lowered outside flitsim.schedules: no memory model
            out.update(memory_status="unknown", peak_memory_bytes=float("nan"), memory_broken_by=None,
                       hbm_capacity_bytes=float(self.options.get("hbm_capacity_bytes", float("nan"))))
        if self.run is not None:
            bub = self.bubble_fraction()
            out.update(makespan_s=self.makespan_ps * 1e-12, fill_drain_share=self.fill_drain_share(),
                       bubble_fraction_mean=float(bub.mean()), bubble_fraction_max=float(bub.max()),
                       credit_wait_s=self.credit_wait_ps() * 1e-12)
        return out

    # ------------------------------------------------------------------ memory
    def footprint(self, workspace_bytes: Any = None) -> "Footprint":
        """Per-device memory (:class:`flitsim.memory.Footprint`): weights,
        activations, K/V caches, stale K/V, communication buffers (the run's
        timeline peak once simulated) and workspace (default the build option
        ``workspace_bytes``, else :data:`flitsim.memory.DEFAULT_WORKSPACE_BYTES`)
        against the GPU's HBM capacity.

        Raises:
            ConfigError: bad ``workspace_bytes``.
        """
        from flitsim.memory import footprint

        return footprint(self, workspace_bytes)

    @property
    def memory(self) -> "pd.DataFrame":
        """The memory table: one row per device, bytes per component plus
        ``total_bytes``, ``capacity_bytes`` and ``fits`` (see :meth:`footprint`)."""
        return self.footprint().table()

    @property
    def memory_status(self) -> str:
        """``"ok"`` or ``"oom"`` (some device needs more than its HBM)."""
        return self.footprint().status

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
