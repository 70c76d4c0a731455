"""Task graphs: Python builds them, the Rust engine executes them.

A :class:`TaskGraphBuilder` collects compute, transfer and collective tasks and
their dependency edges; :func:`execute` runs the graph over a network and
returns a :class:`TaskGraphRun` with the start and end of every task, the
per-device busy/idle intervals and the credit waits.

Edges are finish-to-start. ``kind="data"``: the successor consumes the
predecessor's output. ``kind="credit"``: a bounded hand-off buffer (a stage
holds at most B in-flight slices), so the wait it causes is reported as a
credit wait (:attr:`TaskGraphRun.tasks` column ``credit_wait_ps``).

Streams: each device has ``compute_streams`` compute streams and
``comm_streams`` communication streams; a compute task holds one compute stream
of its device, a transfer one comm stream of its source, a collective one comm
stream of every member (acquired atomically). Among ready tasks competing for a
stream, the lowest task index starts first.
"""

from __future__ import annotations

import array
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Sequence

import numpy as np

from flitsim._notebook import notebook
from flitsim import _core
from flitsim.errors import ConfigError, check_int
from flitsim.networks import AnalyticNetwork, FabricNetwork, IdealNetwork, resolve_network
from flitsim.transfers import counters_of, fabric_frames, warn_fidelity

if TYPE_CHECKING:
    import pandas as pd

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce")
"""Collective kinds, in engine code order."""

KINDS = ("compute", "transfer", "collective")

from flitsim.limits import MAX_DEVICES, MAX_TASKS  # noqa: E402

__all__ = ["COLLECTIVES", "KINDS", "TaskGraphBuilder", "TaskGraph", "TaskGraphRun", "execute",
           # networks live in flitsim.networks; re-exported under their old import path
           "AnalyticNetwork", "IdealNetwork", "FabricNetwork", "resolve_network"]


_ARRAY_CODES = {np.dtype(np.uint8): "B", np.dtype(np.uint32): "I", np.dtype(np.uint64): "Q",
                np.dtype(np.int64): "q", np.dtype(np.float64): "d"}
"""numpy dtype -> :mod:`array` type code of the same width (checked at import below)."""
assert all(array.array(c).itemsize == d.itemsize for d, c in _ARRAY_CODES.items())

_BUFFER_COLUMNS = True
"""Freeze integer and float columns through :class:`array.array` (about 3x
faster than ``np.array`` on a list of Python ints; the same values and
dtype, ``np.array`` itself on anything it refuses). Off: ``np.array``
(``tests/test_build_speed.py`` compares)."""


def column(values: list[Any], dtype: Any) -> np.ndarray:
    """``np.array(values, dtype)`` for a list of ints / floats, shape (len(values),)."""
    dt = np.dtype(dtype)
    code = _ARRAY_CODES.get(dt)
    if _BUFFER_COLUMNS and code is not None:
        try:
            return np.frombuffer(array.array(code, values), dt)
        except (TypeError, OverflowError, ValueError):
            pass  # np.array says what is wrong (or converts what array.array will not)
    return np.array(values, dt)


@dataclass
class TaskGraphBuilder:
    """Accumulates tasks and edges; :meth:`build` freezes them into arrays.

    Args:
        devices: number of devices (ids 0..devices-1).
        compute_streams, comm_streams: streams per device (>= 1).

    Every ``add_*`` returns the new task's index. Optional metadata per task
    (``label``, ``stage``, ``flops``, ``mem_bytes``) is kept for reports.
    """

    devices: int
    compute_streams: int = 1
    comm_streams: int = 1
    _kind: list[int] = field(default_factory=list)
    _device: list[int] = field(default_factory=list)
    _peer: list[int] = field(default_factory=list)
    _dur: list[int] = field(default_factory=list)
    _bytes: list[int] = field(default_factory=list)
    _coll: list[int] = field(default_factory=list)
    _group: list[int] = field(default_factory=list)
    _groups: dict[tuple[int, ...], int] = field(default_factory=dict)
    _esrc: list[int] = field(default_factory=list)
    _edst: list[int] = field(default_factory=list)
    _ekind: list[int] = field(default_factory=list)
    _release: list[int] = field(default_factory=list)
    _label: list[str] = field(default_factory=list)
    _stage: list[int] = field(default_factory=list)
    _flops: list[float] = field(default_factory=list)
    _mem: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        # Same bounds as the engine (MAX_ENDPOINTS GPUs; streams per device).
        check_int("devices", self.devices, 1, MAX_DEVICES)
        check_int("compute_streams", self.compute_streams, 1, 1024)
        check_int("comm_streams", self.comm_streams, 1, 1024)

    def __len__(self) -> int:
        return len(self._kind)

    def _add(self, kind: int, device: int, peer: int, dur: int, nbytes: int, coll: int, group: int,
             label: str, stage: int, flops: float, mem: float, release_ps: int = 0) -> int:
        if len(self._kind) >= MAX_TASKS:
            # Work estimate as the graph grows: refuse before hours of building and simulating.
            raise ConfigError(f"tasks = {len(self._kind) + 1}: at most {MAX_TASKS} tasks in one task graph "
                              "(fewer steps, layers, slices or a smaller parallel degree)")
        self._kind.append(kind)
        self._release.append(release_ps)
        self._device.append(device)
        self._peer.append(peer)
        self._dur.append(dur)
        self._bytes.append(nbytes)
        self._coll.append(coll)
        self._group.append(group)
        self._label.append(label)
        self._stage.append(stage)
        self._flops.append(flops)
        self._mem.append(mem)
        return len(self._kind) - 1

    def _check_device(self, name: str, d: int) -> int:
        return check_int(name, d, 0, self.devices - 1, what="a device id")

    @staticmethod
    def _nonneg(name: str, v: Any) -> int:
        # Below 2^62 so sums of times and sizes stay exact in u64/int64.
        return check_int(name, v, 0, 2**62 - 1)

    def add_compute(self, device: int, duration_ps: int, *, label: str = "", stage: int = -1,
                    flops: float = 0.0, mem_bytes: float = 0.0, release_ps: int = 0) -> int:
        """A compute task on ``device`` lasting ``duration_ps`` (FLOPs and
        memory bytes kept for reports); it starts no earlier than ``release_ps``
        (e.g. a request's arrival)."""
        return self._add(0, self._check_device("device", device), 0, self._nonneg("duration_ps", duration_ps),
                         0, 0, 0, label, stage, float(flops), float(mem_bytes),
                         self._nonneg("release_ps", release_ps))

    def add_transfer(self, src: int, dst: int, nbytes: int, *, label: str = "", stage: int = -1) -> int:
        """Move ``nbytes`` from ``src`` to ``dst`` (0 bytes or src == dst: done at once)."""
        return self._add(1, self._check_device("src", src), self._check_device("dst", dst), 0,
                         self._nonneg("nbytes", nbytes), 0, 0, label, stage, 0.0, 0.0)

    def add_collective(self, group: Sequence[int], kind: str, nbytes: int, *, label: str = "",
                       stage: int = -1) -> int:
        """A collective of nccl-tests size ``nbytes`` over ``group``.

        Raises:
            ConfigError: unknown ``kind`` (one of :data:`COLLECTIVES`), an empty
                group, a device repeated in the group or outside the fabric.
        """
        if kind not in COLLECTIVES:
            raise ConfigError(f"kind = {kind!r}: expected one of {list(COLLECTIVES)}")
        members = tuple(self._check_device("group member", d) for d in group)
        if not members:
            raise ConfigError("group = []: expected at least one device")
        if len(set(members)) != len(members):
            raise ConfigError(f"group = {list(members)}: a device appears twice")
        gid = self._groups.setdefault(members, len(self._groups))
        return self._add(2, 0, 0, 0, self._nonneg("nbytes", nbytes), COLLECTIVES.index(kind), gid,
                         label, stage, 0.0, 0.0)

    def add_edge(self, before: int, after: int, kind: Literal["data", "credit"] = "data") -> None:
        """``after`` may start only when ``before`` has finished."""
        n = len(self._kind)
        if type(before) is int and type(after) is int and 0 <= before < n and 0 <= after < n and kind == "data":
            self._esrc.append(before)  # fast path: plain in-range ids (builders add one edge per dependency)
            self._edst.append(after)
            self._ekind.append(0)
            return
        for name, t in (("before", before), ("after", after)):
            if isinstance(t, bool) or not isinstance(t, (int, np.integer)) or not 0 <= t < n:
                raise ConfigError(f"{name} = {t!r}: expected a task index in 0..{n - 1}")
        if kind not in ("data", "credit"):
            raise ConfigError(f"kind = {kind!r}: expected 'data' or 'credit'")
        self._esrc.append(int(before))
        self._edst.append(int(after))
        self._ekind.append(0 if kind == "data" else 1)

    def build(self) -> "TaskGraph":
        """Freeze into a :class:`TaskGraph` (columnar numpy arrays)."""
        offsets = [0]
        members: list[int] = []
        for g in sorted(self._groups, key=self._groups.__getitem__):
            members.extend(g)
            offsets.append(len(members))
        u32, u64, u8, c = np.uint32, np.uint64, np.uint8, column
        cols = {
            "kind": c(self._kind, u8), "device": c(self._device, u32),
            "peer": c(self._peer, u32), "duration_ps": c(self._dur, u64),
            "bytes": c(self._bytes, u64), "collective": c(self._coll, u8),
            "group": c(self._group, u32), "group_offsets": c(offsets, u32),
            "group_members": c(members, u32), "edge_src": c(self._esrc, u32),
            "edge_dst": c(self._edst, u32), "edge_kind": c(self._ekind, u8),
            "release_ps": c(self._release, u64),
        }
        meta = {"label": np.array(self._label, dtype=object), "stage": c(self._stage, np.int64),
                "flops": c(self._flops, np.float64), "mem_bytes": c(self._mem, np.float64)}
        return TaskGraph(self.devices, self.compute_streams, self.comm_streams, cols, meta)


@dataclass(frozen=True)
class TaskGraph:
    """A built task graph: ``columns`` (engine arrays) and ``meta`` (labels, stage,
    FLOPs, bytes) indexed by task."""

    devices: int
    compute_streams: int
    comm_streams: int
    columns: dict[str, np.ndarray]
    meta: dict[str, np.ndarray]

    def __len__(self) -> int:
        return int(self.columns["kind"].shape[0])

    def comm_bytes(self) -> int:
        """Bytes of all transfer tasks (collectives excluded)."""
        c = self.columns
        return int(c["bytes"][c["kind"] == 1].sum())


@notebook("makespan_ps", "events", "tasks", frame="tasks")
@dataclass(frozen=True)
class TaskGraphRun:
    """Outcome of :func:`execute`.

    ``tasks``: DataFrame, one row per task: kind, device, peer, bytes, label,
    stage, flops, start_ps, end_ps, data_ready_ps, credit_ready_ps,
    credit_wait_ps (= max(0, credit_ready - data_ready)), stream_wait_ps
    (= start - max(data_ready, credit_ready)); on a fabric also
    fabric_credit_wait_ps (time the task's packets waited at source ports
    blocked on link credits, per lane; see ``FabricNetwork.task_credit_wait_ps``
    in rust/src/taskgraph/fabric_network.rs). ``makespan_ps``; ``network``:
    the network's statistics (for a fabric: ``links``, ``switch_ports`` and
    ``reorder`` DataFrames as in :class:`flitsim.TransferResult`, and ``packets``).
    """

    graph: TaskGraph
    tasks: "pd.DataFrame"
    makespan_ps: int
    network: dict[str, Any]
    events: int

    def busy_ps(self) -> np.ndarray:
        """Compute-busy time per device, ps, shape (devices,) (intervals merged,
        so overlapping compute streams are not double counted)."""
        out = np.zeros(self.graph.devices, dtype=np.int64)
        for dev, iv in self.busy_intervals().items():
            out[dev] = int(sum(e - s for s, e in iv))
        return out

    def busy_intervals(self) -> dict[int, list[tuple[int, int]]]:
        """Merged compute-busy intervals per device: {device: [(start_ps, end_ps), ...]}."""
        t = self.tasks
        out: dict[int, list[tuple[int, int]]] = {d: [] for d in range(self.graph.devices)}
        compute = (t.kind == "compute").to_numpy()
        dev = t.device.to_numpy()
        s = t.start_ps.to_numpy()
        e = t.end_ps.to_numpy()
        # compute tasks of nonzero length (an empty one adds nothing: it is inside a
        # busy interval or touches none), by device then start
        keep = np.flatnonzero(compute & (e > s))
        order = keep[np.lexsort((s[keep], dev[keep]))]
        dev, s, e = dev[order], s[order], e[order]
        bounds = np.flatnonzero(np.diff(dev)) + 1
        for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, len(dev)]):
            if hi <= lo:
                continue
            sd, ed = s[lo:hi], e[lo:hi]
            # an interval starts where a task starts after every earlier one ended
            # (touching intervals merge); it ends at its tasks' latest end
            first = np.r_[True, sd[1:] > np.maximum.accumulate(ed)[:-1]]
            idx = np.flatnonzero(first)
            out[int(dev[lo])] = list(zip(sd[idx].tolist(), np.maximum.reduceat(ed, idx).tolist()))
        return out

    def idle_fraction(self) -> np.ndarray:
        """Per device: 1 - busy / makespan (the bubble fraction), shape (devices,)."""
        return 1.0 - self.busy_ps() / self.makespan_ps if self.makespan_ps else np.zeros(self.graph.devices)


def execute(graph: TaskGraph, network: Any = None) -> TaskGraphRun:
    """Run ``graph`` over ``network``: an :class:`~flitsim.networks.AnalyticNetwork`
    (default: zero cost) or a :class:`~flitsim.networks.FabricNetwork` (the
    cycle-level fabric); a fabric preset name or FabricSpec also works (see
    :func:`flitsim.networks.resolve_network`).

    Returns:
        :class:`TaskGraphRun`.

    Raises:
        ConfigError: invalid graph, device ids outside the network, or a
            dependency cycle (the message lists the tasks on it).
        StalledError: work pending that can never finish.
    """
    import pandas as pd

    network = resolve_network(network)
    g = {"devices": graph.devices, "compute_streams": graph.compute_streams,
         "comm_streams": graph.comm_streams, **graph.columns}
    r = _core.execute_taskgraph(g, network.to_core(graph.devices))
    c = graph.columns
    # int64 is exact: the engine keeps every time <= 2^63-1 ps (engine::MAX_TIME_PS)
    start = r["start_ps"].astype(np.int64)
    end = r["end_ps"].astype(np.int64)
    dready = r["data_ready_ps"].astype(np.int64)
    cready = r["credit_ready_ps"].astype(np.int64)
    df = pd.DataFrame({
        "kind": np.array(KINDS, dtype=object)[c["kind"]], "device": c["device"].astype(np.int64),
        "peer": c["peer"].astype(np.int64), "bytes": c["bytes"].astype(np.int64),
        "label": graph.meta["label"], "stage": graph.meta["stage"], "flops": graph.meta["flops"],
        "start_ps": start, "end_ps": end, "data_ready_ps": dready, "credit_ready_ps": cready,
        "credit_wait_ps": np.maximum(0, cready - dready),
        "stream_wait_ps": start - np.maximum(dready, cready),
    })
    net: dict[str, Any] = dict(r["network"])
    net["periodic"] = str(r.get("periodic", ""))  # the executor's exact periodic skip: applied, or why not
    if net.get("kind") == "fabric":
        fab = net.pop("fabric")
        net["links"], net["switch_ports"], net["reorder"] = fabric_frames(fab, network.fabric)
        net["counters"] = counters_of(fab, network.fabric)
        net["faults"] = {k: int(v) for k, v in fab["faults"].items()}
        warn_fidelity(str(net.get("fidelity_reason", "")))
        df["fabric_credit_wait_ps"] = net.pop("task_credit_wait_ps").astype(np.int64)
    return TaskGraphRun(graph, df, int(r["makespan_ps"]), net, int(r["events"]))
