"""Slowdown when one of GB200 NVL72's 18 switch planes dies (docs/faults.md).

Runs, on the packet-level fabric (unfolded, so the clean and faulted runs take
the same code path): collectives at several sizes and schedules on
FabricNetwork, clean, with plane 7 dead from the start, and with plane 7 dying
at half the clean run's time (packets in flight are lost and replayed).
Prints a Markdown table; every faulted run's byte accounting is checked
(delivered + replayed-delivered = sent, from link statistics).

    PYTHONPATH=python python3 benches/plane_failure.py [--quick]
"""

from __future__ import annotations

import sys
import time

import flitsim
import flitsim.schedules as S
from flitsim.hardware import fabric_preset

QUICK = "--quick" in sys.argv
NVL72 = fabric_preset("gb200-nvl72").replace(fold_planes=False)


def dead(at_ps: int) -> list[dict]:
    return [{"kind": "plane", "switch": 7, "at_ps": at_ps}]


def check(f: dict) -> str:
    ok = f["delivered_bytes"] + f["replayed_delivered_bytes"] == f["sent_bytes"]
    assert ok, f
    return f"lost {f['lost_packets']} pkts / {f['lost_bytes'] / 2**20:.2f} MiB, all replayed"


def collectives() -> None:
    print("| collective | size | GPU injection | clean us | busbw GB/s | dead from 0: us (x) | dies mid-run: us (x) | accounting (mid-run) | wall s |")
    print("|---|---|---|---|---|---|---|---|---|")
    sizes = [16 << 20] if QUICK else [16 << 20, 256 << 20]
    for op in ("all_reduce", "all_gather"):
        for nb in sizes:
            nb -= nb % 288  # whole 4-byte elements per rank pair over 72 ranks
            for inj, opts in (("calibrated (0.824 x links)", {}), ("raw links (link_efficiency 1)", {"link_efficiency": 1.0})):
                t0 = time.time()
                c = flitsim.collective(NVL72, op, nb, **opts)
                d0 = flitsim.collective(NVL72, op, nb, faults=dead(0), **opts)
                mid = flitsim.collective(NVL72, op, nb, faults=dead(int(c.time_us * 1e6 / 2)), **opts)
                check(d0.stats["faults"])
                acc = check(mid.stats["faults"])
                print(f"| {op} ({c.algorithm}/{c.protocol}) | {nb / 2**20:.0f} MiB | {inj} | {c.time_us:.1f} | {c.busbw_GBps:.1f} | "
                      f"{d0.time_us:.1f} ({d0.time_us / c.time_us:.4f}) | {mid.time_us:.1f} ({mid.time_us / c.time_us:.4f}) | "
                      f"{acc} | {time.time() - t0:.0f} |", flush=True)


def schedules() -> None:
    print()
    print("| schedule | clean makespan ms | dead from 0: ms (x) | dies mid-run: ms (x) | accounting (mid-run) | wall s |")
    print("|---|---|---|---|---|---|")
    cases = [("terapipe llama-3-70b 16k tokens, 8 stages", lambda: S.build("terapipe", "llama-3-70b", 16384, stages=8, slicing="dp")),
             ("tensor_parallel llama-3-8b 2k prefill, TP 8", lambda: S.build("tensor_parallel", "llama-3-8b", 2048, degree=8))]
    if QUICK:
        cases = cases[1:]
    for name, mk in cases:
        t0 = time.time()
        c = S.simulate(mk(), flitsim.FabricNetwork(NVL72))
        ms = c.run.makespan_ps / 1e9
        d0 = S.simulate(mk(), flitsim.FabricNetwork(NVL72, faults=dead(0)))
        mid = S.simulate(mk(), flitsim.FabricNetwork(NVL72, faults=dead(c.run.makespan_ps // 2)))
        check(d0.run.network["faults"])
        acc = check(mid.run.network["faults"])
        a, b = d0.run.makespan_ps / 1e9, mid.run.makespan_ps / 1e9
        print(f"| {name} | {ms:.4f} | {a:.4f} ({a / ms:.4f}) | {b:.4f} ({b / ms:.4f}) | {acc} | {time.time() - t0:.0f} |", flush=True)


if __name__ == "__main__":
    collectives()
    schedules()
