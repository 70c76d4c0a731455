"""Speed of multi-tier fabrics: wall time and peak RSS (printed, not asserted).

Cases, each in its own process so peak RSS is its own:

- all_reduce of 1 GiB over 32 GPUs (``ib-4xhgx-h100``: 4 HGX H100 nodes,
  InfiniBand NDR rails) at flow and packet fidelity;
- a 16-GPU two-node DiT schedule (PipeFusion, PixArt-alpha 1024 px, 16
  stages on ``eth-2x8xl40``) at flow and packet fidelity.

Usage: python benches/tiers_bench.py [--quick] [--case NAME]
(--quick: 64 MiB and 2 denoising steps instead of 1 GiB and 4.)
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
import warnings


def _peak_rss_mib() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r / 1024 if sys.platform != "darwin" else r / 2**20


def _all_reduce(fidelity: str, quick: bool) -> dict:
    import flitsim

    nbytes = (64 << 20) if quick else (1 << 30)
    t0 = time.perf_counter()
    # A fixed algorithm: `auto` would simulate every candidate (several packet runs).
    r = flitsim.collective("ib-4xhgx-h100", "all_reduce", nbytes, algorithm="ring", fidelity=fidelity)
    s = r.summary()
    return {"wall_s": time.perf_counter() - t0, "sim_time_us": r.time_us, "busbw_GBps": r.busbw_GBps,
            "algorithm": r.algorithm, "fidelity": s["stats"]["fidelity"] if "stats" in s else r.stats.get("fidelity"),
            "events": r.stats.get("events"), "packets": r.stats.get("packets")}


def _dit(fidelity: str, quick: bool) -> dict:
    from flitsim import schedules
    from flitsim.hardware import fabric_preset
    from flitsim.workloads.dit import dit_workload

    w = dit_workload("pixart-alpha", 1024, steps=2 if quick else 4)
    t0 = time.perf_counter()
    s = schedules.build("pipefusion", "pixart-alpha", w, devices=16, stages=16, fabric="eth-2x8xl40")
    s = schedules.simulate(s, fabric_preset("eth-2x8xl40", fidelity=fidelity))
    sm = s.summary()
    return {"wall_s": time.perf_counter() - t0, "makespan_s": sm.get("makespan_s"), "tasks": sm.get("tasks"),
            "comm_bytes": sm.get("comm_bytes")}


CASES = {
    "all_reduce_1GiB_32gpu_flow": lambda q: _all_reduce("flow", q),
    "all_reduce_1GiB_32gpu_packet": lambda q: _all_reduce("packet", q),
    "dit_pipefusion_16gpu_2node_flow": lambda q: _dit("flow", q),
    "dit_pipefusion_16gpu_2node_packet": lambda q: _dit("packet", q),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--case", choices=sorted(CASES))
    a = ap.parse_args()
    if a.case:
        warnings.simplefilter("ignore")
        out = CASES[a.case](a.quick)
        out["peak_rss_MiB"] = _peak_rss_mib()
        print(json.dumps(out))
        return
    print(f"{'case':36s} {'wall s':>9s} {'peak RSS MiB':>13s}  result")
    for name in CASES:
        cmd = [sys.executable, __file__, "--case", name] + (["--quick"] if a.quick else [])
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            print(f"{name:36s} failed: {p.stderr.strip().splitlines()[-1] if p.stderr.strip() else p.returncode}")
            continue
        r = json.loads(p.stdout.strip().splitlines()[-1])
        rest = {k: v for k, v in r.items() if k not in ("wall_s", "peak_rss_MiB")}
        print(f"{name:36s} {r['wall_s']:9.2f} {r['peak_rss_MiB']:13.0f}  {rest}")


if __name__ == "__main__":
    main()
