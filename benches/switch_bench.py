"""Delivered flits per CPU-second of the BookSim2 comparison run (issues 3, 16).

One 72-port input-queued switch, 4 VCs x 16-flit buffers, 8-flit packets,
iSLIP with one iteration, uniform Bernoulli traffic at 0.5 flits/port/cycle.
BookSim2 on the same configuration (benches/booksim/switch72.cfg; how to build
and run it: docs/switch.md "Speed") delivered 0.417 M flits per CPU-second on
the 2-core development machine, measured side by side (median of 3); the
figure recorded for issue 3 was 0.66 M flits per wall-second on a quieter
machine. Target (issue 16): >= 100x BookSim2 per CPU-second.

Usage: python benches/switch_bench.py [--cycles 300000] [--repeat 5] [--booksim2 RATE]
                                      [--booksim-binary PATH]

With --booksim-binary (a BookSim2 build, docs/switch.md "Speed"), BookSim2 runs
benches/booksim/switch72.cfg once before each repeat (interleaved, so both see
the same machine load) and the ratio is to the median of those runs: delivered
flits = its final "Accepted flit rate average" x 72 ports x "Time taken" cycles,
per CPU-second of the child process.

Prints the best and median wall-clock rate, the median and best CPU-time rate
(robust when the machine is shared: wall = CPU on an idle core), the ratios to
BookSim2, and the peak RSS of the process. Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import time

from flitsim import _core

# BookSim2 (github.com/booksim/booksim2, HEAD of the public repository), same
# configuration, same machine, run side by side: delivered flits per CPU-second,
# median of 3 runs of 50,196 cycles, interleaved with this bench (docs/switch.md "Speed").
BOOKSIM2_FLITS_PER_CPU_S = 417_000.0
# The figure recorded for issue 3 (wall-clock, quieter machine; not rerun).
BOOKSIM2_FLITS_PER_S = 660_000.0


def booksim_spec(measure_cycles: int) -> dict:
    """The same spec as benches/common/switch_spec.rs."""
    return {
        "switch": {
            "ports": 72, "vcs": 4, "buffer_per_vc_flits": 16, "max_packet_flits": 8, "queueing": "voq",
            "speedup": 1, "pipeline_latency_cycles": 0, "output_buffer_per_vc_flits": 0,
            "downstream_credits_per_vc_flits": 16, "allocator": "islip", "iterations": 1, "clock_ghz": 1.0,
            "seed": 1,
        },
        "traffic": {"pattern": "uniform", "process": "bernoulli", "load": 0.5, "packet_flits": 8, "seed": 1},
        "warmup_cycles": 0,
        "measure_cycles": measure_cycles,
        "credit_return_cycles": 0,
        "source_queue_packets": 1024,
    }


CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "booksim", "switch72.cfg")


def booksim_run(binary: str) -> tuple[float, float]:
    """One BookSim2 run of switch72.cfg: (delivered flits, CPU seconds of the child)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run([binary, CONFIG], capture_output=True, text=True, check=False).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    rate = re.findall(r"Accepted flit rate average = ([0-9.]+)", out)
    cycles = re.findall(r"Time taken is ([0-9]+) cycles", out)
    if not rate or not cycles:
        raise SystemExit(f"{binary} {CONFIG}: no 'Accepted flit rate average =' / 'Time taken' in its output")
    return float(rate[-1]) * 72 * int(cycles[-1]), cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cycles", type=int, default=300_000, help="switch cycles per run")
    ap.add_argument("--repeat", type=int, default=5, help="runs (best and median reported)")
    ap.add_argument("--booksim2", type=float, default=BOOKSIM2_FLITS_PER_CPU_S,
                    help="BookSim2 delivered flits per CPU-second to compare with (default: measured side by side)")
    ap.add_argument("--booksim-binary", default=None,
                    help="run this BookSim2 binary on benches/booksim/switch72.cfg before each repeat and compare with it")
    args = ap.parse_args()
    booksim = []
    spec = booksim_spec(args.cycles)
    _core.switch_lab(booksim_spec(10_000))  # warm caches and the allocator
    wall, cpu, flits = [], [], 0
    for _ in range(args.repeat):
        if args.booksim_binary:
            booksim.append(booksim_run(args.booksim_binary))
        t0, c0 = time.perf_counter(), time.process_time()
        r = _core.switch_lab(spec)
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        flits = r["delivered_flits"]
    best = flits / min(wall)
    median = flits / statistics.median(wall)
    per_cpu = flits / min(cpu)
    per_cpu_median = flits / statistics.median(cpu)
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if booksim:
        cpus = [c for _, c in booksim]
        args.booksim2 = booksim[0][0] / statistics.median(cpus)
    print("switch bench: 72 ports, 4 VCs x 16 flits, 8-flit packets, iSLIP x1, uniform 0.5 flits/port/cycle")
    print(f"  cycles per run            {args.cycles:,}  (delivered {flits:,} flits, accepted {r['accepted_throughput']:.4f})")
    print(f"  delivered flits / wall-s  best {best / 1e6:.2f} M, median {median / 1e6:.2f} M")
    print(f"  delivered flits / CPU-s   median {per_cpu_median / 1e6:.2f} M, best {per_cpu / 1e6:.2f} M")
    if booksim:
        print(f"  BookSim2 side by side     {len(booksim)} runs, {booksim[0][0]:,.0f} flits, CPU-s "
              + ", ".join(f"{c:.2f}" for c in cpus))
    print(f"  vs BookSim2 {args.booksim2 / 1e6:.3f} M/CPU-s  {per_cpu_median / args.booksim2:.1f}x CPU (median)  (target >= 100x)")
    print(f"  vs recorded 0.66 M/s      {per_cpu_median / BOOKSIM2_FLITS_PER_S:.1f}x CPU (median), "
          f"{best / BOOKSIM2_FLITS_PER_S:.1f}x wall (best)")
    print(f"  peak RSS                  {rss_mib:.1f} MiB")


if __name__ == "__main__":
    main()
