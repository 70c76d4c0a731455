"""Slowdown when one of GB200 NVL72's 18 switch planes dies (docs/faults.md).

Packet-level fabric, unfolded (clean and faulted runs take the same path),
4 KiB simulated packets (the coalescing speed lever; see docs/fabric.md).
Each workload runs clean, with plane 7 dead from the start, and with plane 7
dying at half the clean run's time (packets in flight are lost and replayed
end to end). Every faulted run's accounting is checked: delivered +
replayed-and-delivered = sent, and the bytes the GPU links delivered (link
statistics) = sent. Prints Markdown tables.

    PYTHONPATH=python python3 benches/plane_failure.py
"""

from __future__ import annotations

import time

import numpy as np

import flitsim
import flitsim.schedules as S
from flitsim.hardware import fabric_preset

NVL72 = fabric_preset("gb200-nvl72", sim_packet_bytes=4096).replace(fold_planes=False)


def dead(at_ps: int) -> list[dict]:
    return [{"kind": "plane", "switch": 7, "at_ps": at_ps}]


def check(f: dict, link_rx: int) -> str:
    assert f["delivered_bytes"] + f["replayed_delivered_bytes"] == f["sent_bytes"] == link_rx, f
    return f"lost {f['lost_packets']} pkts ({f['lost_bytes'] / 2**20:.2f} MiB), all replayed; none dropped"


def row(name: str, clean: float, d0: float, mid: float, acc: str, wall: float, unit: str) -> None:
    print(f"| {name} | {clean:.2f} {unit} | {d0:.2f} ({d0 / clean:.4f}) | {mid:.2f} ({mid / clean:.4f}) | {acc} | {wall:.0f} |",
          flush=True)


def main() -> None:
    print("| workload | clean | plane dead from t=0 (x clean) | plane dies at half time (x clean) | accounting (mid-run fault) | wall s |")
    print("|---|---|---|---|---|---|")
    # All-to-all: every GPU sends 18 x 17 simulated packets to every other
    # (a multiple of 17 and 18 ports, so no port carries a packet more).
    s = np.tile(np.arange(72), 71)
    d = (s + np.repeat(np.arange(1, 72), 72)) % 72
    nb = 18 * 17 * 4096
    t0 = time.time()
    c = flitsim.transfers(NVL72, s, d, nb)
    a = flitsim.transfers(NVL72, s, d, nb, faults=dead(0))
    m = flitsim.transfers(NVL72, s, d, nb, faults=dead(c.makespan_ps // 2))
    check(a.faults, int(a.links.rx_payload_bytes.sum()))
    acc = check(m.faults, int(m.links.rx_payload_bytes.sum()))
    row(f"all-to-all, 72 x 71 transfers of {nb / 2**20:.2f} MiB (flitsim.transfers)", c.makespan_ps / 1e6,
        a.makespan_ps / 1e6, m.makespan_ps / 1e6, acc, time.time() - t0, "us")
    for op, nb in (("all_reduce", 256 << 20), ("all_gather", (256 << 20) - (256 << 20) % 288)):
        t0 = time.time()
        c = flitsim.collective(NVL72, op, nb)
        a = flitsim.collective(NVL72, op, nb, faults=dead(0))
        m = flitsim.collective(NVL72, op, nb, faults=dead(int(c.time_us * 1e6 / 2)))
        check(a.stats["faults"], a.stats["faults"]["link_rx_payload_bytes"])
        acc = check(m.stats["faults"], m.stats["faults"]["link_rx_payload_bytes"])
        row(f"{op} 256 MiB ({c.algorithm}/{c.protocol}, calibrated; flitsim.collective)", c.time_us, a.time_us,
            m.time_us, acc, time.time() - t0, "us")
    for name, mk in (("tensor_parallel llama-3-8b, 2048-token prefill, TP 8 (FabricNetwork)",
                      lambda: S.build("tensor_parallel", "llama-3-8b", 2048, degree=8)),
                     ("terapipe llama-3-70b, 16k tokens, 8 stages (FabricNetwork)",
                      lambda: S.build("terapipe", "llama-3-70b", 16384, stages=8, slicing="dp"))):
        t0 = time.time()
        c = S.simulate(mk(), flitsim.FabricNetwork(NVL72))
        a = S.simulate(mk(), flitsim.FabricNetwork(NVL72, faults=dead(0)))
        m = S.simulate(mk(), flitsim.FabricNetwork(NVL72, faults=dead(c.run.makespan_ps // 2)))
        for x in (a, m):
            acc = check(x.run.network["faults"], int(x.run.network["links"].rx_payload_bytes.sum()))
        row(name, c.run.makespan_ps / 1e9, a.run.makespan_ps / 1e9, m.run.makespan_ps / 1e9, acc, time.time() - t0, "ms")


if __name__ == "__main__":
    main()
