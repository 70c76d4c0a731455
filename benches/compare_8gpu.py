"""8-GPU speedups and rankings of the DiT schedules that come out of the
compute model (nothing here is fitted): PixArt-alpha, 20 steps, on 8 L20s,
next to the measured table of the xDiT README 2024 (assets/latency-L20.jpg, 8x L20 PCIe).

    PYTHONPATH=python python3 benches/compare_8gpu.py [--bandwidth-GBps 20] [--alpha-us 10]

flitsim has no PCIe fabric yet, so the network here is the alpha-beta
AnalyticNetwork with an assumed PCIe-like per-GPU rate (default 20 GB/s, 10 us):
the comparison is indicative only. ``--bandwidth-GBps 0`` gives the
compute-only speedups (free communication).
"""

from __future__ import annotations

import argparse
import sys

import flitsim.schedules as S
from flitsim.networks import AnalyticNetwork
from flitsim.workloads import dit_workload

MEASURED = {  # seconds, xDiT README 2024 (assets/latency-L20.jpg); None = out of memory
    1024: {"tensor_parallel": 8.422, "pipefusion": 1.356, "distrifusion": 4.428, "ulysses": 5.99, "ring_attention": 2.0},
    2048: {"tensor_parallel": 14.3, "pipefusion": 6.345, "distrifusion": 6.317, "ulysses": 10.03, "ring_attention": 6.941},
    4096: {"tensor_parallel": 82.49, "pipefusion": 71.13, "distrifusion": None, "ulysses": 93.43, "ring_attention": 313.3},
}
ONE_GPU = {1024: 3.34, 2048: 26.43, 4096: 306.6}
OPTS = {"tensor_parallel": {"degree": 8}, "pipefusion": {"stages": 8, "patches": 8}, "distrifusion": {"degree": 8},
        "ulysses": {"degree": 8}, "ring_attention": {"degree": 8}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bandwidth-GBps", type=float, default=20.0)
    ap.add_argument("--alpha-us", type=float, default=10.0)
    ap.add_argument("--resolutions", default="1024,2048,4096")
    a = ap.parse_args(argv)
    net = AnalyticNetwork(alpha_ps=int(a.alpha_us * 1e6), bandwidth_GBps=a.bandwidth_GBps)
    print(f"network: AnalyticNetwork alpha {a.alpha_us} us, {a.bandwidth_GBps} GB/s per GPU (0 = free)")
    print("| px | schedule | model s | measured s | model speedup | measured speedup |")
    print("|---|---|---|---|---|---|")
    for px in (int(x) for x in a.resolutions.split(",")):
        w = dit_workload("pixart-alpha", px, steps=20)
        t1 = S.simulate(S.build("tensor_parallel", None, w, degree=1, gpu="l20")).makespan_ps * 1e-12
        model = {}
        for name, o in OPTS.items():
            model[name] = S.simulate(S.build(name, None, w, gpu="l20", **o), net).makespan_ps * 1e-12
        for name in OPTS:
            m = MEASURED[px][name]
            ms = f"{m:g}" if m else "OOM"
            msp = f"{ONE_GPU[px] / m:.2f}" if m else "-"
            print(f"| {px} | {name} | {model[name]:.3g} | {ms} | {t1 / model[name]:.2f} | {msp} |")
        rank_m = sorted((n for n in OPTS if MEASURED[px][n]), key=lambda n: MEASURED[px][n])
        rank_s = sorted(OPTS, key=model.get)
        print(f"| {px} | ranking | {' < '.join(rank_s)} | {' < '.join(rank_m)} | 1-GPU model {t1:.3g} s | "
              f"1-GPU measured {ONE_GPU[px]} s |")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
