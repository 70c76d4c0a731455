"""CPU seconds of single map runs with and without the executor's exact
periodic skip (rust/src/taskgraph/exec.rs); results must be identical.

    PYTHONPATH=python python3 benches/periodic_bench.py [--list] [--match SUBSTR ...] [--off]

``--list`` prints every run of examples/main.toml's map (workload | fabric |
schedule); ``--match`` runs those whose label contains every substring (once
with the skip, once with FLITSIM_PERIODIC=0 unless ``--on-only``) and prints
CPU s, latency and the skip's report. Prints only (no timed assertions).
The flow tier's other levers follow the environment as in any run:
``FLITSIM_FLOW_SOLVE_MEMO=0`` (memoized solves off), ``FLITSIM_FLOW_PORT_SET_DRAIN=1``
(the opt-in port-set drain grouping, docs/fidelity.md "Rotation-invariant paths").
"""
from __future__ import annotations

import argparse
import os
import time

from flitsim.scenario import map as M
from flitsim.scenario.spec import load_scenario


def plan(path: str):
    sc = load_scenario(path)
    m = sc.map
    cols = M._columns(m)
    rows = M._rows(m, sc)
    out = []
    for row in rows:
        w = m.workloads[row.index]
        for col in cols:
            model = row.model if row.kind != "dit" else row.workload.model
            cfgw = row.kind == "dit" and bool(getattr(row.workload, "uses_cfg", False))
            for cand in M.candidates(row.kind, model, col.devices, restrict=w.schedules,
                                     requests=M._requests(row), cfg_workload=cfgw):
                out.append((f"{w.name} | {col.fabric.name if hasattr(col.fabric, 'name') else col.index} | {cand.label}", row, col, cand))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", default="examples/main.toml")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--match", nargs="*", default=[])
    ap.add_argument("--on-only", action="store_true")
    a = ap.parse_args()
    runs = plan(a.scenario)
    if a.list:
        for lab, *_ in runs:
            print(lab)
        return
    for lab, row, col, cand in runs:
        if not all(s in lab for s in a.match):
            continue
        res = {}
        for mode in (["on"] if a.on_only else ["on", "off"]):
            os.environ["FLITSIM_PERIODIC"] = "1" if mode == "on" else "0"
            c0 = time.process_time()
            r = M._run_one(row, col, cand)
            res[mode] = r
            print(f"{lab} [{mode}]: {time.process_time() - c0:.1f} CPU s, latency {r.latency_s!r} s, {r.status} {r.reason} | {r.periodic}", flush=True)
        if "off" in res:
            same = res["on"].latency_s == res["off"].latency_s and res["on"].metrics == res["off"].metrics
            print(f"  identical: {same}", flush=True)


if __name__ == "__main__":
    main()
