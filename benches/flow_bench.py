"""Flow level vs packet level: wall time, peak RSS and the answer's
difference, on the NVL72 all-to-all and all_reduce, and how cost grows with
GPUs (8, 72, 576), bytes and requests (transfers).

Every measurement runs in a fresh subprocess so peak RSS is its own.
Usage: python benches/flow_bench.py [--quick] [--skip-packet-scaling] [--a2a-ratio]

Targets (issue 16): flow >= 100x faster than packet on the NVL72 all-to-all at
<= 2 % bandwidth difference; memory bounded by the model.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CHILD = r'''
import json, resource, sys, time
import numpy as np
import flitsim
from flitsim.hardware import fabric_preset, uniform_fabric
a = json.loads(sys.argv[1])
def fabric(gpus, **kw):
    if gpus == 72:
        return fabric_preset("gb200-nvl72", **kw)
    if gpus == 8:
        return fabric_preset("hgx-b200", **kw)
    return uniform_fabric(gpus, [1] * 18, "nvlink5", name=f"planar-{gpus}", **kw)
f = fabric(a["gpus"], fidelity=a["fidelity"], **a.get("kw", {}))
n = f.gpus
t0 = time.perf_counter()
if a["what"] == "all_to_all":
    k = a.get("rounds", n - 1)
    s = np.tile(np.arange(n), k)
    d = (s + np.repeat(np.arange(1, k + 1), n)) % n
    r = flitsim.transfers(f, s, d, a["bytes"])
    t = r.makespan_ps
    extra = {"per_gpu_GBps": k * a["bytes"] / t * 1e3, "transfers": int(len(s))}
else:
    r = flitsim.collective(f, a["what"], a["bytes"])
    t = int(r.time_us * 1e6)
    extra = {"busbw_GBps": r.busbw_GBps, "algorithm": r.algorithm, "transfers": int(r.stats["transfers"])}
w = time.perf_counter() - t0
print(json.dumps({"wall_s": w, "time_ps": int(t), "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, **extra}))
'''


def measure(**a: object) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(a)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def row(label: str, p: dict | None, f: dict) -> None:
    if p is None:
        print(f"{label:44s} {'-':>9s} {f['wall_s']:9.3f} {'-':>8s} {'-':>8s} {f['rss_mib']:9.0f} {f['time_ps'] / 1e6:12.1f}")
        return
    diff = f["time_ps"] / p["time_ps"] - 1
    print(f"{label:44s} {p['wall_s']:9.2f} {f['wall_s']:9.3f} {p['wall_s'] / f['wall_s']:7.0f}x {diff:+8.2%} "
          f"{p['rss_mib']:5.0f}/{f['rss_mib']:<5.0f} {p['time_ps'] / 1e6:12.1f}")


RATIO = r'''
import json, statistics, sys, time, warnings
warnings.simplefilter("ignore")
import flitsim
from flitsim.hardware.fabric import fabric_preset
b, fid = int(sys.argv[1]), sys.argv[2]
cpu = []
for _ in range(1 + (3 if fid == "packet" else 9)):
    f = fabric_preset("gb200-nvl72", fidelity=fid)  # a fresh spec per call (its construction is not timed)
    c0 = time.process_time()
    r = flitsim.collective(f, "all_to_all", b, algorithm="direct", protocol="simple")
    cpu.append(time.process_time() - c0)
# the first call of a process (lazy imports, first allocations) apart: the rest is what a sweep pays per call
print(json.dumps({"cpu_s": statistics.median(cpu[1:]), "first_cpu_s": cpu[0], "busbw_GBps": r.busbw_GBps}))
'''


def a2a_ratio() -> None:
    """Issue 16's ratio: the NVL72 all_to_all (Simple) at 64 MiB, 256 MiB and 1 GiB, flow vs packet
    level, CPU s of the whole collective() call: median of 3 (packet) / 9 (flow) calls after a first
    call of the process (shown apart), one process per fidelity and size."""
    print("| bytes | packet CPU s | flow CPU s | CPU ratio | flow first call CPU s | bw difference |")
    print("|---:|---:|---:|---:|---:|---:|")
    for b in (64 << 20, 256 << 20, 1 << 30):
        b = b // (72 * 72 * 4) * (72 * 72 * 4)
        p, f = (json.loads(subprocess.run([sys.executable, "-c", RATIO, str(b), fid], capture_output=True, text=True,
                                          check=True).stdout.strip().splitlines()[-1]) for fid in ("packet", "flow"))
        print(f"| {b} | {p['cpu_s']:.3f} | {f['cpu_s']:.4f} | {p['cpu_s'] / f['cpu_s']:.0f}x | {f['first_cpu_s']:.4f} | "
              f"{100 * (f['busbw_GBps'] / p['busbw_GBps'] - 1):+.2f} % |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smaller sizes (a minute or two)")
    ap.add_argument("--skip-packet-scaling", action="store_true", help="flow level only in the scaling curves")
    ap.add_argument("--a2a-ratio", action="store_true", help="only issue 16's flow/packet CPU ratio on the NVL72 all_to_all")
    a = ap.parse_args()
    if a.a2a_ratio:
        return a2a_ratio()
    print(f"{'case':44s} {'packet s':>9s} {'flow s':>9s} {'speedup':>8s} {'diff':>8s} {'RSS MiB p/f':>11s} {'sim us':>12s}")
    # Headline: NVL72 all-to-all (NCCL's staggered order), packet folded x18.
    size = 18 * 256 * (16 if a.quick else 3640)  # 16 MiB rounded to 18 planes x 256 B, as benches/fabric_bench.py
    p = measure(gpus=72, what="all_to_all", bytes=size, fidelity="packet")
    f = measure(gpus=72, what="all_to_all", bytes=size, fidelity="flow")
    row(f"NVL72 all-to-all 72x71x{size // 1024} KiB", p, f)
    print(f"  per-GPU GB/s: packet {p['per_gpu_GBps']:.1f}, flow {f['per_gpu_GBps']:.1f}")
    ar = (64 if a.quick else 1024) << 20
    p = measure(gpus=72, what="all_reduce", bytes=ar, fidelity="packet")
    f = measure(gpus=72, what="all_reduce", bytes=ar, fidelity="flow")
    row(f"NVL72 all_reduce {ar >> 20} MiB ({f['algorithm']})", p, f)
    f2 = measure(gpus=72, what="all_reduce", bytes=ar, fidelity="auto")
    print(f"  auto: {f2['wall_s']:.2f} s")
    print("\nscaling (all-to-all, staggered order; packet level folded where exact)")
    for g in (8, 72, 576):
        rounds = min(g - 1, 8 if g == 576 else g - 1)
        sz = 18 * 256 * 16
        pk = None if (a.skip_packet_scaling or g == 576) else measure(gpus=g, what="all_to_all", bytes=sz, fidelity="packet", rounds=rounds)
        fl = measure(gpus=g, what="all_to_all", bytes=sz, fidelity="flow", rounds=rounds)
        row(f"GPUs {g:4d}: {g}x{rounds} transfers of {sz // 1024} KiB", pk, fl)
    for b in ([1 << 20, 64 << 20] if a.quick else [1 << 20, 64 << 20, 1 << 30, 64 << 30]):
        b = b // 4608 * 4608
        pk = None if (a.skip_packet_scaling or b > (64 << 20)) else measure(gpus=72, what="all_to_all", bytes=b, fidelity="packet", rounds=4)
        fl = measure(gpus=72, what="all_to_all", bytes=b, fidelity="flow", rounds=4)
        row(f"bytes {b / 2**20:9.0f} MiB per transfer, 72x4", pk, fl)
    for rounds in (1, 8, 71):
        fl = measure(gpus=72, what="all_to_all", bytes=18 * 256 * 16, fidelity="flow", rounds=rounds)
        row(f"requests {72 * rounds:5d} transfers (72 GPUs)", None, fl)


if __name__ == "__main__":
    main()
