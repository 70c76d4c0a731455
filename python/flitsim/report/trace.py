"""Perfetto / Chrome Trace Event JSON of a task-graph run.

Format: the Trace Event Format (Google, "Trace Event Format" document; read
by https://ui.perfetto.dev and chrome://tracing): a JSON object with a
``traceEvents`` list; times ``ts`` / ``dur`` in **microseconds** (floats;
1 ps = 1e-6 us). Written gzip-compressed when the path ends in ``.gz``
(``.json.gz``: the Perfetto UI opens it as is).

What is in it:

- **Slices** (``ph = "X"``): one process per GPU (``pid = device``) with a
  compute thread (``tid 0``) and a communication thread (``tid 1``: transfers
  it sends, collectives it takes part in). Names are **stable** (``attn``,
  ``mlp``, ``allreduce``, ``a2a_q``: the task label without its index parts)
  so Perfetto can aggregate them; the indices (``step``, ``L`` = layer, ``d``
  = device, ...), the full label, stage, item, bytes and task id are in ``args``.
- **Critical path**: its tasks are copied onto a ``critical path`` track
  (process ``critical path``) and ``args.critical = true`` on the originals.
- **Flows** (``ph = "s"`` / ``"f"``, category ``dependency``; ``critical`` for
  the critical path's edges): arrows along dependency edges between written
  tasks, at most :data:`MAX_FLOWS` (critical-path edges first).
- **Counters** (``ph = "C"``), for runs on the cycle-level fabric, one track
  per physical link direction: ``GPU g port p -> switch s`` (the GPU's
  egress wire) and ``switch s port p -> GPU g`` (the switch's egress port),
  ``utilization`` sampled in at most :data:`COUNTER_SAMPLES` bins. The
  fabric measures each port's busy time over the whole run, not over time, so
  a track's *level* is the measured utilization and its *shape* is the
  run's communication activity at that GPU (the tasks sending from / to it);
  switch ports with credit exhaustion or queueing carry ``queueing_ns
  (run mean)`` and ``credit_exhausted (run share)`` counters as constants.
- **Sampled counters**, when the fabric was run with ``counters`` on
  (:class:`~flitsim.hardware.fabric.CounterSpec`; packet level): per switch
  port (process ``switch ports: queue depth, credits in use``) the flits in
  its input buffer (``queue_flits``), the downstream credits its output
  has in use (``credits_in_use_flits``, both at the sample instant) and its
  output's busy share over the interval that starts there
  (``output_utilization``, from the flits it sent), and per GPU port (process ``GPU
  ports: credits in use``) its uplink's credits in use, at the engine's own
  sample instants: at most ``CounterSpec.max_samples`` per track (the engine
  halves its samples and doubles the interval when its buffer fills), on at
  most :data:`MAX_SAMPLED_TRACKS` tracks (the busiest ports; the cut is in
  ``otherData`` and in the process name).
- The event cap (``max_tasks``) is stated in ``otherData`` and, when tasks
  were cut, on a ``NOTE`` track at t = 0 that the UI shows.
"""

from __future__ import annotations

import gzip
import os
import re
from typing import Any

import numpy as np
import orjson

from flitsim.errors import check_int
from flitsim.report.activity import comm_activity

__all__ = ["trace_events", "to_perfetto", "stable_name", "REQUIRED_KEYS", "MAX_TASKS", "MAX_FLOWS",
           "COUNTER_SAMPLES", "MAX_SAMPLED_TRACKS"]

REQUIRED_KEYS = ("name", "ph", "ts", "pid", "tid")
"""Keys every event carries (``dur`` too for complete events)."""

MAX_TASKS = 50_000
"""Default cap on tasks written to one trace: traces are for looking at, and a
long run's first tasks show its rhythm; the cut is recorded in ``otherData``
(``truncated``, ``tasks_written``, ``tasks_total``) and on a NOTE track."""

MAX_FLOWS = 20_000
"""At most this many dependency arrows (critical-path edges first)."""

COUNTER_SAMPLES = 100
"""Bins per counter track (bounded rate: the sample count does not grow with the run)."""

MAX_COUNTER_TRACKS = 1024
"""At most this many link / port counter tracks (busiest first)."""

MAX_SAMPLED_TRACKS = 256
"""At most this many sampled (queue depth / credits) port tracks, busiest
first: with the engine's ``max_samples`` per track that bounds the events."""

_INDEX = re.compile(r"^([A-Za-z_]*?)(\d+)$")
_HOP = re.compile(r"^(\d+)->(\d+)$")


def stable_name(label: str, kind: str) -> tuple[str, dict[str, int]]:
    """Split a task label into a stable slice name and its indices:
    ``"step0.L3.attn.d1"`` -> ``("attn", {"step": 0, "L": 3, "d": 1})``. A
    dot-separated part that ends in digits after letters (or is all digits) is an
    index, and so is ``a->b`` (``from`` / ``to``); the rest joined by dots is the
    name (``kind`` when nothing is left)."""
    name_parts: list[str] = []
    idx: dict[str, int] = {}
    for part in str(label).split("."):
        h = _HOP.match(part)
        if h:  # "0->1": a stage-to-stage hand-off
            idx["from"], idx["to"] = int(h.group(1)), int(h.group(2))
            continue
        m = _INDEX.match(part)
        if m and (m.group(1) == "" or not m.group(1).endswith("_")):
            key = m.group(1) or "i"
            while key in idx:
                key += "'"
            idx[key] = int(m.group(2))
        elif part:
            name_parts.append(part)
    return (".".join(name_parts) or kind), idx


_DIGITS = re.compile(r"\d+")
_NAME_MEMO: dict[tuple[str, str], tuple[str, tuple[str, ...]] | None] = {}
"""(label with its digit runs as ``#``, kind) -> (slice name, index key per
digit run), or None where the name itself holds digits (not memoizable)."""


def _stable_name_memo(label: str, kind: str) -> tuple[str, dict[str, int]]:
    """:func:`stable_name` memoized on the label's shape: labels of one
    schedule differ only in their indices (``step3.L5.attn2.d1``), so the
    split is done once per shape and the digits are read off in order (same
    result: each index part holds one digit run, a hop two, and a shape whose
    name keeps digits is split every time)."""
    if "#" in label:  # '#' marks digit runs in the shape
        return stable_name(label, kind)
    shape = (_DIGITS.sub("#", label), kind)
    hit = _NAME_MEMO.get(shape, False)
    if hit is False:
        name, _ = stable_name(label, kind)
        # replay stable_name's key assignment (dedup with ') on the shape
        keys: list[str] = []
        seen: set[str] = set()
        for part in label.split("."):
            if _HOP.match(part):
                keys += ["from", "to"]
                seen |= {"from", "to"}
                continue
            m = _INDEX.match(part)
            if m and (m.group(1) == "" or not m.group(1).endswith("_")):
                key = m.group(1) or "i"
                while key in seen:
                    key += "'"
                seen.add(key)
                keys.append(key)
        ok = not _DIGITS.search(name) and len(keys) == len(_DIGITS.findall(label))
        hit = (name, tuple(keys)) if ok else None
        if len(_NAME_MEMO) < 65_536:
            _NAME_MEMO[shape] = hit
    if hit is None:
        return stable_name(label, kind)
    d: dict[str, int] = {}
    for k, v in zip(hit[1], _DIGITS.findall(label)):
        d[k] = int(v)
    return hit[0], d


def _counters(run: Any, pid0: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Counter events and their process metadata (fabric runs only)."""
    net = run.network
    if net.get("kind") != "fabric" or "links" not in net:
        return [], []
    mk = max(int(run.makespan_ps), 1)
    g = run.graph
    bins = COUNTER_SAMPLES
    tx, rx = comm_activity(run.tasks, g, mk, bins)
    ts = np.linspace(0, mk, bins + 1)[:-1] / 1e6
    ev: list[dict[str, Any]] = []
    tracks: list[tuple[float, int, str, np.ndarray, dict[str, float]]] = []

    def shaped(level: float, act: np.ndarray) -> np.ndarray:
        # time shape from activity, level = the measured run-mean utilization
        if act.sum() > 0:
            return np.clip(act / act.mean() * level, 0.0, 1.0)
        return np.full(bins, level)

    lk = net["links"]
    for r in lk.itertuples():
        if r.utilization <= 0 or r.gpu >= g.devices:
            continue
        tracks.append((float(r.utilization), pid0, f"GPU {r.gpu} port {r.port} -> switch {r.switch}",
                       shaped(float(r.utilization), tx[r.gpu]), {}))
    sp = net["switch_ports"]
    for r in sp.itertuples():
        if r.output_utilization <= 0 or not 0 <= r.gpu < g.devices:
            continue
        extra: dict[str, float] = {}
        if r.mean_queueing_ns > 0:
            extra["queueing_ns (run mean)"] = float(r.mean_queueing_ns)
        if r.output_credit_exhaustion_cycles > 0:
            extra["credit_exhausted (run share)"] = float(r.output_credit_exhaustion_ns * 1e3 / mk)
        tracks.append((float(r.output_utilization), pid0 + 1, f"switch {r.switch} port {r.port} -> GPU {r.gpu}",
                       shaped(float(r.output_utilization), rx[r.gpu]), extra))
    tracks.sort(key=lambda x: -x[0])
    for _, pid, name, vals, extra in tracks[:MAX_COUNTER_TRACKS]:
        for x, v in zip(ts.tolist(), vals.tolist()):
            ev.append({"name": name, "ph": "C", "ts": x, "pid": pid, "tid": 0, "args": {"utilization": round(v, 6)}})
        for k, v in extra.items():
            ev.append({"name": f"{name}: {k}", "ph": "C", "ts": 0.0, "pid": pid, "tid": 0, "args": {"value": v}})
            ev.append({"name": f"{name}: {k}", "ph": "C", "ts": mk / 1e6, "pid": pid, "tid": 0, "args": {"value": v}})
    if not ev:
        return [], []
    meta = [{"name": "process_name", "ph": "M", "ts": 0, "pid": pid0, "tid": 0,
             "args": {"name": "fabric links (GPU -> switch), utilization"}},
            {"name": "process_name", "ph": "M", "ts": 0, "pid": pid0 + 1, "tid": 0,
             "args": {"name": "switch ports (switch -> GPU), utilization"}}]
    return ev, meta


def _sampled(run: Any, pid0: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """Counter events of the engine's sampled queue depth / credits in use
    (runs with ``FabricSpec.counters`` on), their process metadata and a
    summary for ``otherData``."""
    c = run.network.get("counters") if isinstance(run.network, dict) else None
    if c is None or c.samples == 0:
        return [], [], {}
    ts = (c.time_ps / 1e6).tolist()
    q, cr, ep = c.queue_flits, c.credits_in_use_flits, c.endpoint_credits_in_use_flits
    util = c.output_utilization()
    _, ns, npt = q.shape
    gpu_of: dict[tuple[int, int], int] = {}
    sp = run.network.get("switch_ports")
    if sp is not None and "gpu" in sp:
        gpu_of = {(int(a), int(b)): int(g) for a, b, g in zip(sp.switch, sp.port, sp.gpu) if g >= 0}
    load = (q.mean(axis=0) + cr.mean(axis=0) + util.mean(axis=0)).reshape(-1)
    ports = [i for i in np.argsort(-load, kind="stable").tolist() if load[i] > 0]
    eload = ep.mean(axis=0).reshape(-1)
    eports = [i for i in np.argsort(-eload, kind="stable").tolist() if eload[i] > 0]
    total = len(ports) + len(eports)
    keep_sw = ports[:MAX_SAMPLED_TRACKS]
    keep_ep = eports[:max(0, MAX_SAMPLED_TRACKS - len(keep_sw))]
    ev: list[dict[str, Any]] = []
    for i in keep_sw:
        s, p = divmod(i, npt)
        name = f"switch {s} port {p}" + (f" (GPU {gpu_of[(s, p)]})" if (s, p) in gpu_of else "")
        # A counter holds from its ts to the next: state at ts, utilization over the interval after it.
        qs, cs, us = q[:, s, p].tolist(), cr[:, s, p].tolist(), np.r_[util[1:, s, p], 0.0].tolist()
        for x, a, b, u in zip(ts, qs, cs, us):
            ev.append({"name": name, "ph": "C", "ts": x, "pid": pid0, "tid": 0,
                       "args": {"queue_flits": a, "credits_in_use_flits": b, "output_utilization": round(u, 6)}})
    gp = ep.shape[2]
    for i in keep_ep:
        g, k = divmod(i, gp)
        for x, a in zip(ts, ep[:, g, k].tolist()):
            ev.append({"name": f"GPU {g} port {k}", "ph": "C", "ts": x, "pid": pid0 + 1, "tid": 0,
                       "args": {"credits_in_use_flits": a}})
    shown = len(keep_sw) + len(keep_ep)
    cut = f"; busiest {shown} of {total} ports" if shown < total else ""
    every = f"every {c.interval_ps / 1e3:g} ns, at most {c.max_samples} samples per track{cut}"
    meta = [{"name": "process_name", "ph": "M", "ts": 0, "pid": pid0, "tid": 0,
             "args": {"name": f"switch ports: queue depth, credits in use (flits), output utilization (sampled {every})"}},
            {"name": "process_name", "ph": "M", "ts": 0, "pid": pid0 + 1, "tid": 0,
             "args": {"name": f"GPU ports: credits in use (flits; sampled {every})"}}]
    info = {"sampled_interval_ps": c.interval_ps, "sampled_max_samples": c.max_samples,
            "sampled_samples": c.samples, "sampled_tracks": shown, "sampled_ports_total": total,
            "sampled_track_cap": MAX_SAMPLED_TRACKS}
    return ev, meta, info


def trace_events(run: Any, *, title: str = "flitsim", max_tasks: int | None = MAX_TASKS,
                 critical: Any = None, flows: bool = True, counters: bool = True) -> dict[str, Any]:
    """Trace Event JSON object of a :class:`~flitsim.taskgraph.TaskGraphRun`
    or a simulated schedule (see the module docstring for tracks and units).

    Args:
        max_tasks: at most this many tasks (the earliest-starting ones; None =
            all), >= 1.
        critical: the run's :class:`~flitsim.report.CriticalPath` (computed
            when None and the run is small enough to write whole).
        flows, counters: write dependency arrows / link counters.

    Raises:
        ConfigError: ``max_tasks`` below 1.
    """
    if max_tasks is not None:
        check_int("max_tasks", max_tasks, 1, 2**62)
    sched = None
    sched_label = ""
    if hasattr(run, "require_run"):
        sched = run
        sched_label = run.name
        run = run.require_run()
    t = run.tasks
    g = run.graph
    ndev = g.devices
    if critical is None:
        from flitsim.report.critical_path import critical_path

        critical = critical_path(sched if sched is not None else run)
    crit_ids = [int(x) for x in critical.tasks.task] if critical is not None and len(critical.tasks) else []
    crit = set(crit_ids)
    ev: list[dict[str, Any]] = []
    used: set[int] = set()
    offs, mem = g.columns["group_offsets"], g.columns["group_members"]
    # Python lists: the loop below reads one element per field per task
    kinds = t.kind.to_numpy().tolist()
    dev = t.device.to_numpy().tolist()
    peer = t.peer.to_numpy().tolist()
    st_np = t.start_ps.to_numpy()
    st = st_np.tolist()
    en = t.end_ps.to_numpy().tolist()
    lab = t.label.to_numpy().tolist()
    nb = t.bytes.to_numpy().tolist()
    stage = t.stage.to_numpy().tolist()
    item = sched.task_item.tolist() if sched is not None else None
    step = sched.task_step.tolist() if sched is not None else None
    group_col = g.columns["group"]
    order = np.argsort(st_np, kind="stable")
    keep = order if max_tasks is None else order[:max_tasks]
    where: dict[int, tuple[int, int]] = {}  # task -> (pid, tid) of its first slice, for flows
    pid_crit = ndev + 2
    for i in keep.tolist():
        k = kinds[i]
        name, idx = _stable_name_memo(str(lab[i]), k)
        args: dict[str, Any] = {"task": i, "label": str(lab[i]), "stage": int(stage[i]), **idx}
        if k != "compute":
            args["bytes"] = int(nb[i])
        if item is not None:
            args["item"], args["step"] = int(item[i]), int(step[i])
        if i in crit:
            args["critical"] = True
        base = {"name": name, "cat": k, "ph": "X", "ts": float(st[i]) / 1e6, "dur": float(en[i] - st[i]) / 1e6,
                "args": args}
        if k == "compute":
            ev.append({**base, "pid": int(dev[i]), "tid": 0})
            used.add(int(dev[i]))
            where[i] = (int(dev[i]), 0)
        elif k == "transfer":
            args["dst"] = int(peer[i])
            ev.append({**base, "pid": int(dev[i]), "tid": 1})
            used.add(int(dev[i]))
            where[i] = (int(dev[i]), 1)
        else:
            gi = int(group_col[i])
            members = [int(d) for d in mem[offs[gi]:offs[gi + 1]]]
            args["group"] = members
            for d in members:
                ev.append({**base, "pid": d, "tid": 1})
                used.add(d)
            where[i] = (members[0], 1)
        if i in crit:
            ev.append({**base, "pid": pid_crit, "tid": 0, "cname": "terrible"})
    # flows: critical-path edges first, then the other edges among written tasks
    nflows = 0
    if flows:
        es, ed = g.columns["edge_src"], g.columns["edge_dst"]
        pairs: list[tuple[int, int, bool]] = [(a, b, True) for a, b in zip(crit_ids, crit_ids[1:])
                                              if a in where and b in where]
        seen = {(a, b) for a, b, _ in pairs}
        for a, b in zip(es.tolist(), ed.tolist()):
            if len(pairs) >= MAX_FLOWS:
                break
            if a in where and b in where and (a, b) not in seen:
                pairs.append((a, b, False))
        for a, b, is_crit in pairs[:MAX_FLOWS]:
            pa, ta = where[a]
            pb, tb = where[b]
            cat = "critical" if is_crit else "dependency"
            ev.append({"name": cat, "cat": cat, "ph": "s", "id": nflows, "pid": pa, "tid": ta,
                       "ts": (float(st[a]) + float(en[a])) / 2e6})
            ev.append({"name": cat, "cat": cat, "ph": "f", "bp": "e", "id": nflows, "pid": pb, "tid": tb,
                       "ts": (float(st[b]) + float(en[b])) / 2e6})
            nflows += 1
    meta: list[dict[str, Any]] = []
    for d in sorted(used):
        meta.append({"name": "process_name", "ph": "M", "ts": 0, "pid": d, "tid": 0, "args": {"name": f"GPU {d}"}})
        meta.append({"name": "process_sort_index", "ph": "M", "ts": 0, "pid": d, "tid": 0, "args": {"sort_index": d + 1}})
        meta.append({"name": "thread_name", "ph": "M", "ts": 0, "pid": d, "tid": 0, "args": {"name": "compute"}})
        meta.append({"name": "thread_name", "ph": "M", "ts": 0, "pid": d, "tid": 1, "args": {"name": "comm"}})
    if crit:
        meta.append({"name": "process_name", "ph": "M", "ts": 0, "pid": pid_crit, "tid": 0,
                     "args": {"name": "critical path"}})
        meta.append({"name": "process_sort_index", "ph": "M", "ts": 0, "pid": pid_crit, "tid": 0,
                     "args": {"sort_index": 0}})
    cev, cmeta = _counters(run, ndev + 3) if counters else ([], [])
    sev, smeta, sinfo = _sampled(run, ndev + 5) if counters else ([], [], {})
    cev, cmeta = cev + sev, cmeta + smeta
    truncated = len(keep) < len(t)
    note = []
    cap = "all" if max_tasks is None else f"{max_tasks:,}"
    if truncated:
        # A slice the UI shows: the cap is not only in metadata nobody opens.
        msg = f"trace cut: first {len(keep):,} of {len(t):,} tasks by start time (cap {cap})"
        note = [{"name": "process_name", "ph": "M", "ts": 0, "pid": ndev + 1, "tid": 0, "args": {"name": "NOTE"}},
                {"name": "process_sort_index", "ph": "M", "ts": 0, "pid": ndev + 1, "tid": 0, "args": {"sort_index": -1}},
                {"name": msg, "cat": "note", "ph": "X", "ts": 0.0, "dur": run.makespan_ps / 1e6, "pid": ndev + 1,
                 "tid": 0, "args": {"tasks_total": len(t), "tasks_written": len(keep)}}]
    return {"traceEvents": note + meta + cmeta + ev + cev, "displayTimeUnit": "ns",
            "otherData": {"title": title, "schedule": sched_label, "makespan_us": run.makespan_ps / 1e6,
                          "time_unit": "us", "tasks_total": len(t), "tasks_written": len(keep),
                          "truncated": truncated, "task_cap": cap, "flows": nflows,
                          "counter_events": len(cev), "counter_samples_per_track": COUNTER_SAMPLES, **sinfo}}


def to_perfetto(run: Any, path: str | os.PathLike[str], *, title: str = "flitsim",
                max_tasks: int | None = MAX_TASKS, critical: Any = None, flows: bool = True,
                counters: bool = True) -> str:
    """Write :func:`trace_events` to ``path``: gzip-compressed when it ends in
    ``.gz`` (``trace.json.gz``, which ui.perfetto.dev opens directly), plain
    JSON otherwise. Returns the path.

    Raises:
        ConfigError: ``max_tasks`` below 1; ``path`` not a str / path (an int
            was opened as a file descriptor), a folder, or in a folder that
            does not exist (checked before the events are built).
    """
    from flitsim.errors import config_error

    if not isinstance(path, (str, os.PathLike)) or not str(path).strip():
        raise config_error("path", path, "a file path (str or os.PathLike), e.g. 'trace.json.gz'")
    if os.path.isdir(path):
        raise config_error("path", str(path), "a file path, not a folder (e.g. 'trace.json.gz' inside it)")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise config_error("path", str(path), f"a file in an existing folder ({parent!r} does not exist)")
    obj = trace_events(run, title=title, max_tasks=max_tasks, critical=critical, flows=flows, counters=counters)
    # orjson: ~10x faster than json.dumps on 10^5 events; numpy scalars as numbers,
    # non-finite floats as null (valid JSON), anything else as its str()
    data = orjson.dumps(obj, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS, default=str)
    if str(path).endswith(".gz"):
        # mtime=0: the same run gives the same bytes
        with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, compresslevel=1) as f:
            f.write(data)
    else:
        with open(path, "wb") as f:
            f.write(data)
    return str(path)
