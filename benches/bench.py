"""Python-side benchmark: engine hold model and link lab, with peak RSS.

Usage: python benches/bench.py [--quick]

Prints medians over repeats (wall time is noisy on shared machines; compare
ratios, not absolute values).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time

import flitsim
from flitsim import _core


def peak_rss_mib() -> float:
    """Peak resident set size of this process, MiB (Linux reports KiB)."""
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r / 1024 if sys.platform != "darwin" else r / 2**20


def median_of(fn, repeats: int) -> float:
    return statistics.median(fn() for _ in range(repeats))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="fewer repeats")
    a = ap.parse_args()
    reps = 3 if a.quick else 7
    print(f"flitsim {flitsim.__version__}")
    print(f"{'benchmark':44s} {'median':>16s}")
    for pending in (1_000, 10_000, 100_000, 1_000_000):
        eps = median_of(lambda: _core.hold_model_events_per_s(pending, 2_000_000, 42), reps)
        print(f"{'hold model, ' + f'{pending:,} pending':44s} {eps / 1e6:12.1f} M events/s")

    def link_run() -> float:
        t0 = time.perf_counter()
        r = flitsim.link_transfer("nvlink5", 1 << 30, 256, max_recorded_packets=0)
        dt = time.perf_counter() - t0
        return r.packets / dt

    pps = median_of(link_run, reps)
    print(f"{'link lab, 1 GiB over NVLink 5 (256 B packets)':44s} {pps / 1e6:12.1f} M packets/s")
    print(f"peak RSS: {peak_rss_mib():.0f} MiB")


if __name__ == "__main__":
    main()
