"""Time building the main job's task graphs (no simulation): every schedule of
every case of a scenario, plus the 1-GPU baselines, as ``flitsim run`` builds
them. Used to check the compute model's cost (issue 12: at most 20 % slower).

    PYTHONPATH=python python3 benches/graph_build_bench.py [examples/nvl72.toml] [--repeat 3]

Prints the best-of-N wall time and the task count.
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("scenario", nargs="?", default="examples/nvl72.toml")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args(argv)
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
