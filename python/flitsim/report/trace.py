"""Perfetto / Chrome Trace Event JSON of a task-graph run.

Format: the Trace Event Format (Google, "Trace Event Format" document; read
by https://ui.perfetto.dev and chrome://tracing): a JSON object with a
``traceEvents`` list. Every task is a complete event (``ph = "X"``) with
``ts`` and ``dur`` in **microseconds** (floats; 1 ps = 1e-6 us), ``pid`` /
``tid`` numbers, ``name``, ``cat`` and ``args``. Metadata events (``ph =
"M"``) name the tracks.

Tracks: one process per device (``pid = device``) with one thread per stream
(``tid 0`` compute, ``tid 1`` communication: transfers it sends and the
collectives it takes part in); one process ``links`` (``pid = devices``) with
a thread per directed GPU pair that carried a transfer (``link s->d``).
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

__all__ = ["trace_events", "to_perfetto", "REQUIRED_KEYS"]

REQUIRED_KEYS = ("name", "ph", "ts", "pid", "tid")
"""Keys every event carries (``dur`` too for complete events)."""

MAX_TASKS = 50_000
"""Default cap on tasks written to one trace (~20 MB of JSON): traces are for
looking at, and a long run's first tasks show its rhythm; the cut is recorded in
``otherData`` (``truncated``, ``tasks_written``, ``tasks_total``)."""


def trace_events(run: Any, *, title: str = "flitsim", max_tasks: int | None = MAX_TASKS) -> dict[str, Any]:
    """Trace Event JSON object of a :class:`~flitsim.taskgraph.TaskGraphRun`
    or a simulated schedule (see the module docstring for tracks and units).
    At most ``max_tasks`` tasks (the earliest-starting ones; None = all) are
    written."""
    sched_label = ""
    if hasattr(run, "require_run"):
        sched_label = run.name
        run = run.require_run()
    t = run.tasks
    g = run.graph
    ndev = g.devices
    ev: list[dict[str, Any]] = []
    used: set[int] = set()
    links: dict[tuple[int, int], int] = {}
    offs, mem = g.columns["group_offsets"], g.columns["group_members"]
    kinds = t.kind.to_numpy()
    dev = t.device.to_numpy()
    peer = t.peer.to_numpy()
    st = t.start_ps.to_numpy()
    en = t.end_ps.to_numpy()
    lab = t.label.to_numpy()
    nb = t.bytes.to_numpy()
    stage = t.stage.to_numpy()
    order = np.argsort(st, kind="stable")
    keep = order if max_tasks is None else order[:max_tasks]
    for i in keep.tolist():
        k = kinds[i]
        name = str(lab[i]) or f"{k} {i}"
        base = {"name": name, "cat": k, "ph": "X", "ts": float(st[i]) / 1e6, "dur": float(en[i] - st[i]) / 1e6,
                "args": {"task": i, "stage": int(stage[i]), "bytes": int(nb[i])}}
        if k == "compute":
            ev.append({**base, "pid": int(dev[i]), "tid": 0})
            used.add(int(dev[i]))
        elif k == "transfer":
            ev.append({**base, "pid": int(dev[i]), "tid": 1, "args": {**base["args"], "dst": int(peer[i])}})
            used.add(int(dev[i]))
            key = (int(dev[i]), int(peer[i]))
            tid = links.setdefault(key, len(links))
            ev.append({**base, "pid": ndev, "tid": tid})
        else:
            gi = int(g.columns["group"][i])
            for d in mem[offs[gi]:offs[gi + 1]]:
                ev.append({**base, "pid": int(d), "tid": 1})
                used.add(int(d))
    meta: list[dict[str, Any]] = []
    for d in sorted(used):
        meta.append({"name": "process_name", "ph": "M", "ts": 0, "pid": d, "tid": 0, "args": {"name": f"GPU {d}"}})
        meta.append({"name": "thread_name", "ph": "M", "ts": 0, "pid": d, "tid": 0, "args": {"name": "compute"}})
        meta.append({"name": "thread_name", "ph": "M", "ts": 0, "pid": d, "tid": 1, "args": {"name": "comm"}})
    if links:
        meta.append({"name": "process_name", "ph": "M", "ts": 0, "pid": ndev, "tid": 0, "args": {"name": "links"}})
        for (s, d), tid in links.items():
            meta.append({"name": "thread_name", "ph": "M", "ts": 0, "pid": ndev, "tid": tid,
                         "args": {"name": f"link {s}->{d}"}})
    return {"traceEvents": meta + ev, "displayTimeUnit": "ns",
            "otherData": {"title": title, "schedule": sched_label, "makespan_us": run.makespan_ps / 1e6,
                          "time_unit": "us", "tasks_total": len(t), "tasks_written": len(keep),
                          "truncated": len(keep) < len(t)}}


def to_perfetto(run: Any, path: str | os.PathLike[str], *, title: str = "flitsim",
                max_tasks: int | None = MAX_TASKS) -> str:
    """Write :func:`trace_events` to ``path`` (JSON), at most ``max_tasks``
    tasks. Returns the path. Open it at https://ui.perfetto.dev or chrome://tracing."""
    obj = trace_events(run, title=title, max_tasks=max_tasks)
    with open(path, "w") as f:
        json.dump(obj, f, default=lambda o: o.item() if isinstance(o, np.generic) else str(o))
    return str(path)
