"""Replayed collectives while isolated (rust/src/taskgraph/fabric_network.rs,
docs/fidelity.md "Replayed collectives"): single map runs with the lever on
and off (FLITSIM_COLLECTIVE_REPLAY_ISOLATED=0); every task's start / end /
readiness, the makespan, the event count, the link and switch-port tables,
packets and the fidelity fields must be identical. Prints CPU s of both and
the replay counts; exits 1 on any difference.

    PYTHONPATH=python python3 benches/isolated_replay_check.py [--scenario examples/main.toml] [--match SUBSTR ...]

Runs whose label contains every ``--match`` substring (all runs without one:
the off runs cost what the map cost before the lever, several minutes).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import pandas as pd

import flitsim.schedules as S
from flitsim.errors import ConfigError, StalledError
from flitsim.scenario import map as M

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from periodic_bench import plan  # noqa: E402


def _simulate(row, col, cand, on: bool):
    os.environ["FLITSIM_COLLECTIVE_REPLAY_ISOLATED"] = "1" if on else "0"
    reps = row.info["reps"] if row.kind == "prefill" else [None]
    out = []
    for tok in reps:
        built = M.build_candidate(row, col, cand, tok)
        if built.footprint().status == "oom":
            return None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out.append(S.simulate(built, col.network))
    return out


def _simulate_or_none(row, col, cand, on: bool):
    try:
        return _simulate(row, col, cand, on)
    except (ConfigError, StalledError):
        return None  # infeasible in the map too


def _diff(a, b) -> str:
    """'' if the two simulated schedules are identical, else what differs."""
    try:
        pd.testing.assert_frame_equal(a.run.tasks, b.run.tasks)
    except AssertionError as e:
        return f"tasks: {str(e).splitlines()[0]}"
    if a.run.makespan_ps != b.run.makespan_ps or a.run.events != b.run.events:
        return f"makespan/events {a.run.makespan_ps}/{a.run.events} vs {b.run.makespan_ps}/{b.run.events}"
    na, nb = a.run.network, b.run.network
    for k in ("links", "switch_ports"):
        if k in na:
            try:
                pd.testing.assert_frame_equal(na[k], nb[k])
            except AssertionError as e:
                return f"{k}: {str(e).splitlines()[0]}"
    for k in ("packets", "fidelity", "fidelity_reason", "bytes_moved"):
        if na.get(k) != nb.get(k):
            return f"{k}: {na.get(k)!r} vs {nb.get(k)!r}"
    return ""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", default="examples/main.toml")
    ap.add_argument("--match", nargs="*", default=[])
    a = ap.parse_args()
    bad = n = 0
    cpu = {True: 0.0, False: 0.0}
    for lab, row, col, cand in plan(a.scenario):
        if not all(s in lab for s in a.match):
            continue
        res = {}
        for on in (True, False):
            c0 = time.process_time()
            res[on] = _simulate_or_none(row, col, cand, on)
            cpu[on] += time.process_time() - c0
        if res[True] is None:
            continue
        n += 1
        d = "; ".join(x for x in (_diff(p, q) for p, q in zip(res[True], res[False])) if x)
        rp = res[True][0].run.network.get("replays", {})
        print(f"{lab}: {'IDENTICAL' if not d else 'DIFFERS: ' + d} | replays {rp}", flush=True)
        bad += bool(d)
    print(f"{n} runs, {bad} differ; CPU s with the lever {cpu[True]:.1f}, without {cpu[False]:.1f}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
