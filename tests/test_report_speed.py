"""The report's speed levers give the same answers as the plain code paths:
the memoized slice-name split (:func:`flitsim.report.trace._stable_name_memo`)
equals :func:`~flitsim.report.trace.stable_name` on every label shape, and the
vectorized critical path equals a per-task walk written from its definition."""

from __future__ import annotations

import random
import warnings

import numpy as np
import pytest

import flitsim.schedules as S
from flitsim.errors import ConfigError, check_int
from flitsim.hardware import fabric_preset
from flitsim.networks import FabricNetwork
from flitsim.report.critical_path import critical_path
from flitsim.report.trace import _stable_name_memo, stable_name
from flitsim.taskgraph import TaskGraphBuilder
from flitsim.workloads import dit_workload


def test_memoized_slice_names_equal_plain_split() -> None:
    rng = random.Random(7)
    parts = ["L", "d", "step", "kv", "attn", "a_", "x", "", "from", "to", "i", "#", "b2c", "_", "mlp"]
    for _ in range(5_000):
        label = ".".join(
            (f"{rng.randint(0, 9)}->{rng.randint(0, 9)}" if rng.random() < 0.1
             else rng.choice(parts) + (str(rng.randint(0, 300)) if rng.random() < 0.6 else ""))
            for _ in range(rng.randint(1, 5)))
        kind = rng.choice(["compute", "transfer", "collective"])
        want = stable_name(label, kind)
        got = _stable_name_memo(label, kind)
        assert got == want and list(got[1]) == list(want[1]), label
    # same shape, different digits: the memo reads each label's own indices
    assert _stable_name_memo("step3.L5.attn.d1", "compute") == ("attn", {"step": 3, "L": 5, "d": 1})
    assert _stable_name_memo("step12.L0.attn.d4", "compute") == ("attn", {"step": 12, "L": 0, "d": 4})
    assert _stable_name_memo("step1.L2.kv3.d4", "transfer") == ("transfer", {"step": 1, "L": 2, "kv": 3, "d": 4})


def _walk_reference(run) -> list[int]:
    """Critical-path task ids by the definition: from the last task to end, step
    to its stream predecessor when it waited for its stream, else its latest-ending
    credit predecessor when it waited for credits, else its latest-ending data
    predecessor (first listed on ties)."""
    t, g = run.tasks, run.graph
    end, start = t.end_ps.to_numpy(np.int64), t.start_ps.to_numpy(np.int64)
    swait, cwait, dready = (t.stream_wait_ps.to_numpy(np.int64), t.credit_wait_ps.to_numpy(np.int64),
                            t.data_ready_ps.to_numpy(np.int64))
    kind, dev = g.columns["kind"], g.columns["device"].astype(np.int64)
    offs, mem = g.columns["group_offsets"], g.columns["group_members"]
    preds: dict[int, list[tuple[int, int]]] = {}
    for a, b, k in zip(g.columns["edge_src"].tolist(), g.columns["edge_dst"].tolist(), g.columns["edge_kind"].tolist()):
        preds.setdefault(b, []).append((a, k))
    holders: dict[tuple[int, int], list[int]] = {}
    for i in range(len(t)):
        if kind[i] == 2:
            gi = int(g.columns["group"][i])
            for d in mem[offs[gi]:offs[gi + 1]]:
                holders.setdefault((int(d), 1), []).append(i)
        else:
            holders.setdefault((int(dev[i]), 0 if kind[i] == 0 else 1), []).append(i)

    def stream_pred(i: int) -> int:
        cls = 0 if kind[i] == 0 else 1
        devs = ([int(d) for d in mem[offs[int(g.columns["group"][i])]:offs[int(g.columns["group"][i]) + 1]]]
                if kind[i] == 2 else [int(dev[i])])
        best, best_end = -1, -1
        for d in devs:
            cands = sorted((j for j in holders.get((d, cls), []) if j != i and end[j] <= start[i]),
                           key=lambda j: (end[j], j))
            if cands and end[cands[-1]] > best_end:
                best, best_end = cands[-1], int(end[cands[-1]])
        return best

    cur, path, seen = int(np.argmax(end)), [], set()
    while cur >= 0 and cur not in seen:
        seen.add(cur)
        nxt, via = -1, "start"
        if swait[cur] > 0:
            nxt, via = stream_pred(cur), "stream"
        for want in ((1,) if nxt < 0 and cwait[cur] > 0 else ()) + ((0,) if True else ()):
            if nxt >= 0:
                break
            c = [a for a, k in preds.get(cur, []) if k == want]
            if c:
                nxt = max(c, key=lambda a: end[a])
                via = "credit" if want == 1 else "data"
        if nxt < 0 and via != "stream" and swait[cur] == 0 and start[cur] > dready[cur]:
            nxt = stream_pred(cur)
        path.append(cur)
        cur = nxt
    return path[::-1]


@pytest.mark.parametrize("name,opts", [("pipefusion", {"stages": 4, "patches": 4}), ("ulysses", {"degree": 4}),
                                       ("ring_attention", {"degree": 4}), ("tensor_parallel", {"degree": 4})])
def test_critical_path_matches_definition(name: str, opts: dict) -> None:
    wl = dit_workload("pixart-alpha-xl/2", 256, steps=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s = S.simulate(S.build(name, None, wl, **opts), FabricNetwork(fabric_preset("hgx-h100"), fidelity="packet"))
    cp = critical_path(s)
    assert [int(x) for x in cp.tasks.task] == _walk_reference(s.run)
    assert sum(cp.breakdown_ps.values()) == int(s.run.makespan_ps)


def test_fast_paths_keep_the_checks() -> None:
    assert check_int("x", 5, 0, 9) == 5 and type(check_int("x", np.int64(5), 0, 9)) is int
    for bad in (True, 5.0, "5", 10, -1):
        with pytest.raises(ConfigError, match="x = "):
            check_int("x", bad, 0, 9)
    b = TaskGraphBuilder(2)
    a, c = b.add_compute(0, 10), b.add_compute(1, 10)
    b.add_edge(a, c)
    b.add_edge(np.int64(a), c)
    for bad_edge in ((a, 2), (-1, c), (True, c), (a, c, "bogus")):
        with pytest.raises(ConfigError):
            b.add_edge(*bad_edge)
    assert b.build().columns["edge_src"].tolist() == [0, 0]


def test_sequence_splits_refuse_more_devices_than_tokens() -> None:
    """A 16 px PixArt image is one latent patch token (16 / 8 VAE / 2 patch): no
    8-way DistriFusion, Ulysses or Ring of it; 8 tokens are enough for 8 devices."""
    one = dit_workload("pixart-alpha-xl/2", 16, steps=1)
    assert one.image_tokens == 1
    for name in ("distrifusion", "ulysses", "ring_attention"):
        with pytest.raises(ConfigError, match="degree = 8: at most the 1 "):
            S.build(name, None, one, degree=8)
    assert len(S.build("distrifusion", None, dit_workload("pixart-alpha-xl/2", 64, steps=1), degree=8).graph) > 0
