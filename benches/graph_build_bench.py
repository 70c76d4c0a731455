"""Time building the main job's task graphs (no simulation): every schedule of
every case of a scenario, plus the 1-GPU baselines, as ``flitsim run`` builds
them. Used to check the compute model's cost (issue 12: at most 20 % slower).

    PYTHONPATH=python python3 benches/graph_build_bench.py [examples/nvl72.toml] [--repeat 3]
    PYTHONPATH=python python3 benches/graph_build_bench.py examples/main.toml --map [--top 10]

Prints the best-of-N wall time and the task count. ``--map``: every candidate
of the scenario's ``[map]`` (as :func:`flitsim.scenario.map.run_map` builds
them, with the memory check, no simulation), the CPU seconds in all and the
``--top`` most expensive candidates.
"""

from __future__ import annotations

import argparse
import sys
import time


def _scenario_helpers():
    """(load_scenario, fabric_spec, load_workload) from the scenario package (or its old home)."""
    try:
        from flitsim.scenario.cases import load_workload
        from flitsim.scenario.spec import fabric_spec, load_scenario
        return load_scenario, fabric_spec, load_workload
    except ImportError:
        import flitsim.report.scenario as R  # type: ignore[no-redef]
        return R.load_scenario, R._fabric_spec, R._load_workload


def build_all(path: str) -> int:
    import flitsim.schedules as S

    load_scenario, fabric_spec, load_workload = _scenario_helpers()
    sc = load_scenario(path)
    fabric = fabric_spec(sc)
    try:
        from flitsim.hardware import fabric_gpu
        gpu = sc.hardware.gpu or fabric_gpu(fabric) or "h100"
    except ImportError:  # before the kernel-level model
        gpu = sc.hardware.gpu
    common = {"gpu": gpu, "dtype": sc.hardware.dtype, "fabric_devices": fabric.gpus}
    tasks = 0
    for case in sc.cases:
        wl, info = load_workload(case, sc)
        for e in case.schedules:
            opts = {**common, **e.options}
            if e.name == "decode":
                built = [S.build("decode", case.model, info["workload"], **opts)]
            elif info["kind"] == "dit":
                built = [S.build(e.name, None, wl, **opts),
                         S.build("tensor_parallel", None, wl, degree=1, gpu=gpu, dtype=sc.hardware.dtype)]
            else:
                built = []
                for tok in info["reps"]:
                    built.append(S.build(e.name, case.model, tok, **opts))
                    built.append(S.build("layer_pipeline", case.model, tok, stages=1, batch=1, gpu=gpu,
                                         dtype=sc.hardware.dtype))
            tasks += sum(len(b.graph) for b in built)
    return tasks


def build_map(path: str, top: int) -> int:
    """Build every map candidate once; print CPU s in all and the ``top`` slowest. Returns tasks."""
    import flitsim.scenario.map as M
    import flitsim.schedules as S
    from flitsim.errors import ConfigError
    from flitsim.scenario.spec import load_scenario

    sc = load_scenario(path)
    cols, rows = M._columns(sc.map), M._rows(sc.map, sc)
    plan = []
    for row in rows:
        w = sc.map.workloads[row.index]
        for col in cols:
            model = row.model if row.kind != "dit" else row.workload.model
            cfgw = row.kind == "dit" and bool(getattr(row.workload, "uses_cfg", False))
            for cand in M.candidates(row.kind, model, col.devices, restrict=w.schedules, requests=M._requests(row),
                                     cfg_workload=cfgw):
                plan.append((row, col, cand))
    times, tasks, c_all = [], 0, time.process_time()
    for row, col, cand in plan:
        c0 = time.process_time()
        opts = {**cand.options, "gpu": col.gpu, "fabric_devices": col.fabric.gpus}
        for tok in (row.info["reps"] if row.kind == "prefill" else [None]):
            o = dict(opts)
            if cand.name == "terapipe" and o.get("slicing") == "dp":
                o["grid_tokens"] = M._grid_tokens(int(tok))
            try:
                if row.kind == "dit":
                    b = S.build(cand.name, None, row.workload, **o)
                elif row.kind == "decode":
                    b = S.build(cand.name, row.model, row.info["workload"], **o)
                else:
                    b = S.build(cand.name, row.model, int(tok), **o)
            except ConfigError:
                break  # the map records it as infeasible
            b.footprint()
            tasks += len(b.graph)
        times.append((time.process_time() - c0, f"{row.name} | {col.label} | {cand.label}"))
    print(f"map: {len(plan)} candidates, {tasks} tasks, {time.process_time() - c_all:.1f} CPU s building")
    for t, what in sorted(times, reverse=True)[:top]:
        print(f"  {t:6.2f} CPU s  {what}")
    return tasks


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("scenario", nargs="?", default="examples/nvl72.toml")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--map", action="store_true", help="build every candidate of the scenario's [map] once")
    ap.add_argument("--top", type=int, default=10)
    a = ap.parse_args(argv)
    if a.map:
        build_map(a.scenario, a.top)
        return 0
    best = float("inf")
    n = 0
    for _ in range(a.repeat):
        t0 = time.perf_counter()
        n = build_all(a.scenario)
        best = min(best, time.perf_counter() - t0)
    print(f"built {n} tasks in {best:.2f} s (best of {a.repeat})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
