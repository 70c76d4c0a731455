"""Critical path of a task-graph run: the chain of tasks that sets the makespan.

Walk back from the task that ends last. At each task, the predecessor that
*released* it is the one whose end is its binding constraint:

- if the task waited for its stream (``stream_wait_ps > 0``), the task that
  held the stream: on the same device and stream class (compute vs
  communication), the one that ended last at or before this task's start;
- else, if its credit predecessor was later than its data (``credit_wait_ps >
  0``), the credit-edge predecessor that ended last;
- else the data-edge predecessor that ended last (none: the chain starts; the
  gap before the task is a release wait, e.g. a request's arrival).

The makespan [0, makespan] is then labelled moment by moment: the time of each
path task is ``compute`` or ``communication`` (split into ``serialization`` at
the ideal rate — bytes over the per-GPU payload rate, when known — and the
excess: ``link credit wait``, the part the fabric measured with the task's
packets held at source ports blocked on link credits (the task's
``fabric_credit_wait_ps``, runs on :class:`flitsim.FabricNetwork` only), and
``switch queueing`` for the rest: switch queueing and arbitration, sharing a
port with other traffic); gaps between path tasks are ``release wait``. Moments when the next path task was
data-ready but held by a credit (bounded hand-off buffer) or by its stream,
while the chain was otherwise idle, are labelled ``credit wait`` / ``stream
queueing``; the labels sum to the makespan. The ``waiting`` table also lists
*held* time: how long path tasks sat data-ready behind a credit or their
stream while the chain's predecessor was still working (the reason the path
took a credit or stream edge).
"""

from __future__ import annotations

from flitsim._notebook import notebook
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["CriticalPath", "critical_path"]

CATEGORIES = ("compute", "serialization", "switch queueing", "link credit wait", "credit wait", "stream queueing",
              "release wait")


@notebook("makespan_ps", "slowest_loop", "tasks", frame="tasks")
@dataclass(frozen=True)
class CriticalPath:
    """Result of :func:`critical_path`.

    Attributes:
        tasks: DataFrame, one row per path task in time order: task, kind,
            device, peer, stage, label, start_ps, end_ps, via (``data``,
            ``credit``, ``stream`` or ``start``: how the task was released).
        breakdown_ps: {category: ps}, categories of :data:`CATEGORIES`; sums to
            the makespan.
        makespan_ps: the run's makespan.
        waiting: DataFrame of where the waiting happens: one row per (category,
            place) with ps, place = ``device d`` / ``link s->d`` / ``stage j``.
        slowest_loop: one line naming the slowest repeating unit on the path
            (the (stage, kind) group with the most path time, its task count
            and mean time per task).
    """

    tasks: "pd.DataFrame"
    breakdown_ps: dict[str, int]
    makespan_ps: int
    waiting: "pd.DataFrame"
    slowest_loop: str

    def breakdown_share(self) -> dict[str, float]:
        """Each category's share of the makespan."""
        mk = max(self.makespan_ps, 1)
        return {k: v / mk for k, v in self.breakdown_ps.items()}

    def summary(self) -> dict[str, Any]:
        """JSON-safe headline: path length, breakdown (s and share), slowest loop, top waiting place."""
        top = self.waiting.iloc[0].to_dict() if len(self.waiting) else {}
        return {"path_tasks": len(self.tasks), "makespan_s": self.makespan_ps * 1e-12,
                "breakdown_s": {k: v * 1e-12 for k, v in self.breakdown_ps.items()},
                "breakdown_share": self.breakdown_share(), "slowest_loop": self.slowest_loop,
                "top_waiting": {k: (v.item() if hasattr(v, "item") else v) for k, v in top.items()}}


def critical_path(run: Any, *, bytes_per_ps: float | None = None, alpha_ps: int = 0) -> CriticalPath:
    """The critical path of a :class:`~flitsim.taskgraph.TaskGraphRun` (or a
    simulated :class:`~flitsim.schedules.Schedule`).

    Args:
        run: the run or schedule.
        bytes_per_ps: per-device payload rate used to split a transfer's time
            into serialization (bytes / rate + ``alpha_ps``) and network queueing
            (the rest); None: all communication time counts as serialization.
        alpha_ps: fixed latency counted as serialization per transfer.

    Returns:
        :class:`CriticalPath`.
    """
    import pandas as pd

    if hasattr(run, "require_run"):
        run = run.require_run()
    t = run.tasks
    g = run.graph
    n = len(t)
    mk = int(run.makespan_ps)
    if n == 0:
        return CriticalPath(pd.DataFrame(), {c: 0 for c in CATEGORIES}, mk, pd.DataFrame(), "")
    start = t.start_ps.to_numpy(np.int64)
    end = t.end_ps.to_numpy(np.int64)
    dready = t.data_ready_ps.to_numpy(np.int64)
    cwait = t.credit_wait_ps.to_numpy(np.int64)
    swait = t.stream_wait_ps.to_numpy(np.int64)
    fcredit = (t.fabric_credit_wait_ps.to_numpy(np.int64) if "fabric_credit_wait_ps" in t
               else np.zeros(n, dtype=np.int64))
    kind = g.columns["kind"]
    dev = g.columns["device"].astype(np.int64)
    esrc = g.columns["edge_src"].astype(np.int64)
    edst = g.columns["edge_dst"].astype(np.int64)
    ekind = g.columns["edge_kind"]
    # predecessors in CSR form, by destination, in edge order (stable sort: ties
    # below pick the first-listed edge, as a per-task list would)
    e_order = np.argsort(edst, kind="stable")
    e_ptr = np.searchsorted(edst[e_order], np.arange(n + 1))
    e_src_sorted = esrc[e_order]
    e_kind_sorted = np.asarray(ekind)[e_order]

    def pred(i: int, k: int) -> int:
        """The latest-ending predecessor of ``i`` over edges of kind ``k`` (-1: none)."""
        a, b = e_ptr[i], e_ptr[i + 1]
        if a == b:
            return -1
        src = e_src_sorted[a:b][e_kind_sorted[a:b] == k]
        return int(src[np.argmax(end[src])]) if len(src) else -1

    # stream predecessors: per (device, class) the tasks holding that stream
    # class, sorted by end then id (a collective holds a comm stream of every member)
    cls = np.where(kind == 0, 0, 1).astype(np.int64)
    offs, mem = g.columns["group_offsets"], g.columns["group_members"]
    coll_members: dict[int, np.ndarray] = {}
    ids_all = np.arange(n, dtype=np.int64)
    single = kind != 2
    k_task = [ids_all[single]]
    k_key = [dev[single] * 2 + cls[single]]
    coll = np.flatnonzero(~single)
    if len(coll):
        grp = g.columns["group"].astype(np.int64)[coll]
        lo, hi = offs[grp].astype(np.int64), offs[grp + 1].astype(np.int64)
        for i, a, b in zip(coll.tolist(), lo.tolist(), hi.tolist()):
            coll_members[i] = mem[a:b].astype(np.int64)
        reps = hi - lo
        k_task.append(np.repeat(coll, reps))
        k_key.append(np.concatenate([mem[a:b] for a, b in zip(lo.tolist(), hi.tolist())]).astype(np.int64) * 2 + 1)
    tk, kk = np.concatenate(k_task), np.concatenate(k_key)
    srt = np.lexsort((tk, end[tk], kk))
    tk, kk = tk[srt], kk[srt]
    bounds = np.flatnonzero(np.diff(kk)) + 1
    by_stream: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
    for a, b in zip(np.r_[0, bounds].tolist(), np.r_[bounds, len(kk)].tolist()):
        key = int(kk[a])
        order = tk[a:b]
        by_stream[(key // 2, key % 2)] = (order, end[order])

    def stream_pred(i: int) -> int:
        devs = coll_members.get(i, np.array([dev[i]]))
        best, best_end = -1, -1
        for d in devs:
            key = (int(d), int(cls[i]))
            if key not in by_stream:
                continue
            order, ends = by_stream[key]
            j = int(np.searchsorted(ends, start[i], side="right")) - 1
            while j >= 0 and order[j] == i:
                j -= 1
            if j >= 0 and ends[j] > best_end:
                best, best_end = int(order[j]), int(ends[j])
        return best

    cur = int(np.argmax(end))
    path: list[tuple[int, str]] = []
    seen = set()
    while cur >= 0 and cur not in seen:
        seen.add(cur)
        nxt, via = -1, "start"
        if swait[cur] > 0:
            nxt, via = stream_pred(cur), "stream"
        if nxt < 0 and cwait[cur] > 0:
            p_ = pred(cur, 1)
            if p_ >= 0:
                nxt, via = p_, "credit"
        if nxt < 0:
            p_ = pred(cur, 0)
            if p_ >= 0:
                nxt, via = p_, "data"
        if nxt < 0 and via != "stream" and swait[cur] == 0 and start[cur] > dready[cur]:
            nxt, via = stream_pred(cur), "stream"
        path.append((cur, via if nxt >= 0 else "start"))
        cur = nxt
    path.reverse()
    ids = np.array([p[0] for p in path], dtype=np.int64)

    # label the timeline: breakpoints of every path interval
    segs: list[tuple[int, int, str, str]] = []  # (from, to, category, place)
    prev_end = 0
    for i in ids:
        place = f"device {dev[i]}" if kind[i] == 0 else (f"link {dev[i]}->{int(g.columns['peer'][i])}"
                                                         if kind[i] == 1 else "collective")
        if start[i] > prev_end:
            segs.append((prev_end, int(start[i]), "release wait", place))
        s0 = max(int(start[i]), prev_end)
        if kind[i] == 0:
            segs.append((s0, int(end[i]), "compute", place))
        else:
            nbytes = float(g.columns["bytes"][i])
            ideal = (nbytes / bytes_per_ps + alpha_ps) if bytes_per_ps else float("inf")
            cut = int(min(end[i], s0 + ideal))
            segs.append((s0, cut, "serialization", place))
            if cut < end[i]:
                mid = int(min(end[i], cut + fcredit[i]))
                if mid > cut:
                    segs.append((cut, mid, "link credit wait", place))
                if mid < end[i]:
                    segs.append((mid, int(end[i]), "switch queueing", place))
        prev_end = max(prev_end, int(end[i]))
    waits: list[tuple[int, int, str, str]] = []
    for i, via in path:
        if via in ("credit", "stream"):
            lo = int(max(dready[i], 0))
            hi = int(start[i])
            if hi > lo:
                stg = int(g.meta["stage"][i])
                waits.append((lo, hi, "credit wait" if via == "credit" else "stream queueing",
                              f"stage {stg} (device {dev[i]})" if stg >= 0 else f"device {dev[i]}"))
    pts = np.unique(np.clip(np.array([0, mk, *[x for a, b, _, _ in segs + waits for x in (a, b)]],
                                     dtype=np.int64), 0, mk))
    m = max(len(pts) - 1, 0)
    lab = np.full(m, CATEGORIES.index("release wait"), dtype=np.int64)
    places: list[str] = ["start"]
    plc = np.zeros(m, dtype=np.int64)

    def paint(a: int, b: int, cat: str, place: str, only_gaps: bool = False) -> None:
        i0, i1 = np.searchsorted(pts, [max(a, 0), min(b, mk)])
        if i1 > i0:
            places.append(place)
            sel = slice(i0, i1)
            mask = lab[sel] == CATEGORIES.index("release wait") if only_gaps else np.ones(i1 - i0, bool)
            lab[sel] = np.where(mask, CATEGORIES.index(cat), lab[sel])
            plc[sel] = np.where(mask, len(places) - 1, plc[sel])

    for s_ in segs:
        paint(*s_)
    for w in sorted(waits, key=lambda w: w[2] == "credit wait"):  # idle chain time held by credit / stream
        paint(*w, only_gaps=True)
    width = np.diff(pts)
    acc = {c: int(width[lab == k].sum()) for k, c in enumerate(CATEGORIES)}
    place_acc: dict[tuple[str, str], int] = {}
    nz = (lab != CATEGORIES.index("compute")) & (lab != CATEGORIES.index("credit wait")) & \
        (lab != CATEGORIES.index("stream queueing"))
    for k, p_, w_ in zip(lab[nz], plc[nz], width[nz]):
        key = (CATEGORIES[int(k)], places[int(p_)])
        place_acc[key] = place_acc.get(key, 0) + int(w_)
    for a_, b_, cat, place in waits:  # held time: data-ready path tasks waiting for a credit or their stream
        key = (f"{cat} (held)", place)
        place_acc[key] = place_acc.get(key, 0) + (b_ - a_)
    tasks = pd.DataFrame({
        "task": ids, "kind": t.kind.to_numpy()[ids], "device": dev[ids], "peer": t.peer.to_numpy()[ids],
        "stage": g.meta["stage"][ids], "label": g.meta["label"][ids], "start_ps": start[ids], "end_ps": end[ids],
        "via": [p[1] for p in path]})
    waiting = pd.DataFrame([{"category": k[0], "place": k[1], "ps": v} for k, v in place_acc.items()],
                           columns=["category", "place", "ps"]).sort_values("ps", ascending=False, ignore_index=True)
    dur = tasks.end_ps - tasks.start_ps
    grp = pd.DataFrame({"stage": tasks.stage, "kind": tasks.kind, "dur": dur}).groupby(["stage", "kind"]).dur
    agg = grp.agg(["sum", "count", "mean"]).sort_values("sum", ascending=False)
    if len(agg):
        (stg, kd), row = agg.index[0], agg.iloc[0]
        where = f"stage {stg}" if stg >= 0 else "non-pipelined"
        slowest = (f"{where} {kd}: {int(row['count'])} tasks on the path, {row['sum'] / 1e6:.1f} us total, "
                   f"{row['mean'] / 1e6:.1f} us each ({row['sum'] / max(mk, 1):.0%} of the makespan)")
    else:
        slowest = ""
    return CriticalPath(tasks, acc, mk, waiting, slowest)
