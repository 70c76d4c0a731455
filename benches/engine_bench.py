"""Packet-engine speed, one case per process: wall time, CPU time and peak RSS
(issue 16 point 3, issue 11's speed target). Not a test: nothing is asserted.

    python benches/engine_bench.py                 # every case below, median of 3
    python benches/engine_bench.py --case ring-1g  # one case
    python benches/engine_bench.py --repeat 1 --case nvls-1g

Cases (packet fidelity, protocol Simple, default speed levers):
  ring-1g / nvls-1g   GB200 NVL72 all_reduce 1 GiB, ring / NVLS
  ring-64m            GB200 NVL72 all_reduce 64 MiB, ring
  ring-4m             GB200 NVL72 all_reduce 4 MiB, ring (transfers too small to fold: all 18 planes)
  h100-ring-8m        HGX H100 all_reduce 8 MiB, ring
  hold-1e5            engine hold model, 1e5 pending events (events/s)
  switch              the switch lab's BookSim2 configuration (benches/switch_bench.py)

Each case runs in a fresh interpreter (peak RSS is per case). To compare two
builds, point PYTHONPATH at each tree's python/ and run the same command."""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

CASES = {
    "ring-1g": ("gb200-nvl72", 1 << 30, "ring"),
    "nvls-1g": ("gb200-nvl72", 1 << 30, "nvls"),
    "ring-64m": ("gb200-nvl72", 64 << 20, "ring"),
    "ring-4m": ("gb200-nvl72", 4 << 20, "ring"),
    "h100-ring-8m": ("hgx-h100", 8 << 20, "ring"),
}

CHILD = r"""
import json, resource, sys, time
case = sys.argv[1]
t0, c0 = time.perf_counter(), time.process_time()
if case == "hold-1e5":
    from flitsim import _core
    t0, c0 = time.perf_counter(), time.process_time()
    v = _core.hold_model_events_per_s(100_000, 2_000_000, 1)
    out = {"value": v, "unit": "events/s"}
elif case == "switch":
    sys.path.insert(0, "benches")
    import switch_bench
    from flitsim import _core
    _core.switch_lab(switch_bench.booksim_spec(10_000))  # warm caches and the allocator
    t0, c0 = time.perf_counter(), time.process_time()
    r = _core.switch_lab(switch_bench.booksim_spec(300_000))
    cpu = time.process_time() - c0
    out = {"value": r["delivered_flits"] / cpu, "unit": "delivered flits per CPU-s",
           "vs_booksim2": r["delivered_flits"] / cpu / switch_bench.BOOKSIM2_FLITS_PER_S}
else:
    import flitsim
    fab, size, algo = json.loads(sys.argv[2])
    t0, c0 = time.perf_counter(), time.process_time()
    r = flitsim.collective(fab, "all_reduce", size, algorithm=algo, protocol="simple")
    out = {"value": r.time_us, "unit": "us simulated", "busbw_GBps": r.busbw_GBps, "packets": r.stats["packets"],
           "folded_planes": r.stats["folded_planes"]}
out["wall_s"] = time.perf_counter() - t0
out["cpu_s"] = time.process_time() - c0
out["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(out))
"""


def run_case(case: str) -> dict:
    arg = json.dumps(CASES.get(case, ""))
    p = subprocess.run([sys.executable, "-c", CHILD, case, arg], capture_output=True, text=True, check=True)
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", action="append", choices=[*CASES, "hold-1e5", "switch"])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    for case in args.case or [*CASES, "hold-1e5", "switch"]:
        runs = [run_case(case) for _ in range(args.repeat)]
        med = {k: statistics.median(r[k] for r in runs) for k in ("wall_s", "cpu_s", "peak_rss_mib", "value")}
        extra = {k: v for k, v in runs[0].items() if k not in med}
        print(f"{case:14s} wall {med['wall_s']:8.2f} s  cpu {med['cpu_s']:8.2f} s  peak RSS {med['peak_rss_mib']:6.0f} MiB  "
              f"{med['value']:.6g} {extra.pop('unit')}  {json.dumps(extra)}  (median of {args.repeat})", flush=True)


if __name__ == "__main__":
    main()
