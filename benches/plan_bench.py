"""Time ``flitsim plan`` over every feasible 8-GPU configuration of one DiT
workload (issue 15: under a minute on 2 cores): PixArt-alpha XL/2, 1024 px, 20
steps, on hgx-h100 at fidelity "auto" (flow level where validated against
packet level).

    PYTHONPATH=python python3 benches/plan_bench.py [--model pixart-alpha] [--res 1024] [--steps 20]
        [--fabric hgx-h100] [--gpus 8] [--fidelity auto] [--prune-factor 1] [-j 2]

Prints wall time, peak RSS and the enumerated / infeasible / pruned / simulated counts.
"""

from __future__ import annotations

import argparse
import resource
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="pixart-alpha")
    ap.add_argument("--res", default="1024")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--fabric", default="hgx-h100")
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--fidelity", default="auto")
    ap.add_argument("--prune-factor", type=float, default=1.0)
    ap.add_argument("-j", "--jobs", type=int, default=2, help="worker processes (2: the 2-core target)")
    a = ap.parse_args()
    from flitsim.planner import plan

    t0 = time.perf_counter()
    r = plan(a.model, a.res, fabric=a.fabric, gpus=a.gpus, steps=a.steps, fidelity=a.fidelity,
             prune_factor=a.prune_factor, jobs=a.jobs)
    wall = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(r.table[["config", "schedule", "status", "latency_s", "lower_bound_s", "memory_peak_GB",
                   "fidelity"]].to_string())
    print(r.summary_line())
    print(f"plan_bench: {a.model} {a.res} px {a.steps} steps on {a.gpus} GPUs of {a.fabric}: "
          f"{wall:.1f} s wall, peak RSS {rss:.0f} MiB")


if __name__ == "__main__":
    main()
