"""NVL72 all-to-all benchmark: every ordered GPU pair moves --size bytes
(default 16 MiB: 72 x 71 x 16 MiB = 85.8 GB, "82 GB" in GiB-ish terms),
packet fidelity, with and without exact plane folding. Prints wall time,
simulated bytes per wall-second and peak RSS.

Usage: python benches/fabric_bench.py [--size 16MiB] [--no-unfolded] [--sim-packet-bytes 0]

Exact folding needs every transfer to be a multiple of 18 planes x 256 B, so
the folded run uses the size rounded down to a multiple of 4608 B (16 MiB ->
16,773,120 B, 0.02 % less); the unfolded run uses the same size, so the two
are comparable and their completion times must agree exactly.
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np

import flitsim
from flitsim.cli._common import parse_bytes
from flitsim.hardware import fabric_preset


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def pairs(order: str) -> tuple[np.ndarray, np.ndarray]:
    """All ordered pairs. 'pairwise': GPU s lists destinations s+1, s+2, ... (mod 72),
    NCCL's staggered all-to-all order, so no two sources start on one destination;
    'sorted': every source lists 0, 1, 2, ... (synchronized: a rolling 71-to-1 incast)."""
    n = 72
    if order == "sorted":
        return np.nonzero(~np.eye(n, dtype=bool))
    s = np.tile(np.arange(n), n - 1)
    return s, (s + np.repeat(np.arange(1, n), n)) % n


def run(fold: bool, size: int, sim_packet_bytes: int, order: str) -> tuple[float, flitsim.TransferResult]:
    f = fabric_preset("gb200-nvl72", fold_planes=fold, sim_packet_bytes=sim_packet_bytes)
    s, d = pairs(order)
    t0 = time.perf_counter()
    r = flitsim.transfers(f, s, d, size)
    return time.perf_counter() - t0, r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="16MiB", help="bytes per ordered GPU pair")
    ap.add_argument("--sim-packet-bytes", type=int, default=0, help="coalesce packets (0 = protocol packets)")
    ap.add_argument("--order", choices=("pairwise", "sorted"), default="pairwise",
                    help="destination order per source (see pairs())")
    ap.add_argument("--no-unfolded", action="store_true", help="skip the (18x slower) unfolded run")
    a = ap.parse_args()
    unit = 18 * max(256, a.sim_packet_bytes)
    size = parse_bytes(a.size) // unit * unit
    total = size * 72 * 71
    print(f"NVL72 all-to-all: 72 x 71 x {size:,} B = {total / 1e9:.1f} GB, "
          f"sim packet {a.sim_packet_bytes or 256} B, {a.order} order")
    print(f"{'run':10s} {'wall s':>8s} {'sim GB/wall-s':>14s} {'makespan us':>12s} {'per-GPU GB/s':>13s} "
          f"{'packets':>12s} {'events':>12s} {'peak RSS MiB':>13s}")
    ends = {}
    for fold in ([True] if a.no_unfolded else [True, False]):
        wall, r = run(fold, size, a.sim_packet_bytes, a.order)
        ends[fold] = r.transfers.end_ps.values
        name = f"folded x{r.folded_planes}" if r.folded_planes > 1 else "unfolded"
        print(f"{name:10s} {wall:8.1f} {total / 1e9 / wall:14.1f} {r.makespan_ps / 1e6:12.1f} "
              f"{71 * size / r.makespan_ps * 1e3:13.1f} {r.packets:12,d} {r.events:12,d} {peak_rss_mib():13.0f}")
    if len(ends) == 2:
        print("folded and unfolded completion times identical:", bool(np.array_equal(ends[True], ends[False])))


if __name__ == "__main__":
    main()
