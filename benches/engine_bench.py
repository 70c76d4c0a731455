"""Packet-engine speed, one case per process: wall time, CPU time and peak RSS
(issue 16 point 3, issue 11's speed target). Not a test: nothing is asserted.

    python benches/engine_bench.py                 # every case below, median of 3
    python benches/engine_bench.py --case ring-1g  # one case
    python benches/engine_bench.py --repeat 1 --case nvls-1g

Cases (packet fidelity, protocol Simple, default speed levers):
  ring-1g / nvls-1g   GB200 NVL72 all_reduce 1 GiB, ring / NVLS
  ring-64m            GB200 NVL72 all_reduce 64 MiB, ring
  ring-8g / nvls-8g   GB200 NVL72 all_reduce 8 GiB, ring / NVLS (NVLS: one rank simulated for all 72,
                      the rank fold of collective/run.rs, exact)
  ring-16m / ring-4m  GB200 NVL72 all_reduce 16 / 4 MiB, ring (transfers under 128 packets per lane:
                      folded only by the collective-wide chain bound, fabric/fold.rs)
  h100-ring-8m        HGX H100 all_reduce 8 MiB, ring
  hold-1e5            engine hold model, 1e5 pending events (events/s)
  switch              the switch lab's BookSim2 configuration (benches/switch_bench.py)

Scaling curves (issue 16 point 5): `--scaling` prints wall, CPU and peak RSS of a ring
all_reduce at packet and at flow fidelity against bytes (1 MiB .. 8 GiB on NVL72) and
against GPUs (8: HGX B200, 72: NVL72, 576: GB200 NVL576, two tiers; packet level at 576 is
skipped above --max-packet-s estimated seconds).

`--fold-check`: the balanced fold against full fidelity (every plane, 256-byte packets) where only the
collective-wide chain bound folds (transfers under 128 packets per lane).

`--rank-fold-check`: NVLS with one rank simulated for all 72 / 8 (the exact rank fold) against every rank
simulated, 4 KiB .. 37 MiB on HGX H100, HGX B200 and NVL72 (identical time and link bytes expected).

`--a2a`: the NVL72 all_to_all at packet and flow level, 16 MiB .. 1 GiB (issue 16's flow-vs-packet
target: >= 100x faster at <= 2 % bandwidth difference).

Each case runs in a fresh interpreter (peak RSS is per case). To compare two
builds, point PYTHONPATH at each tree's python/ and run the same command.
That a speed change left every answer and statistic bit-identical is checked by
benches/engine_exact.py against a record made with the build before it
(tests/test_engine_exact.py runs its fast cases)."""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

CASES = {
    "ring-1g": ("gb200-nvl72", 1 << 30, "ring"),
    "nvls-1g": ("gb200-nvl72", 1 << 30, "nvls"),
    "ring-64m": ("gb200-nvl72", 64 << 20, "ring"),
    "ring-8g": ("gb200-nvl72", 8 << 30, "ring"),
    "nvls-8g": ("gb200-nvl72", 8 << 30, "nvls"),
    "ring-16m": ("gb200-nvl72", 16 << 20, "ring"),
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
    from flitsim.hardware.fabric import fabric_preset
    fab, size, algo, *fid = json.loads(sys.argv[2])
    f = fabric_preset(fab, fidelity=fid[0]) if fid else fab
    t0, c0 = time.perf_counter(), time.process_time()
    op = "all_to_all" if algo == "direct" else "all_reduce"
    r = flitsim.collective(f, op, size, algorithm=algo, protocol="simple")
    out = {"value": r.time_us, "unit": "us simulated", "busbw_GBps": r.busbw_GBps, "packets": r.stats["packets"],
           "folded_planes": r.stats["folded_planes"]}
out["wall_s"] = time.perf_counter() - t0
out["cpu_s"] = time.process_time() - c0
out["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(out))
"""


def run_case(case: str, arg: object = None) -> dict:
    arg = json.dumps(CASES.get(case, "") if arg is None else arg)
    p = subprocess.run([sys.executable, "-c", CHILD, case, arg], capture_output=True, text=True, check=True)
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", action="append", choices=[*CASES, "hold-1e5", "switch"])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--scaling", action="store_true", help="the scaling curves instead of the cases")
    ap.add_argument("--a2a", action="store_true", help="flow vs packet level on the NVL72 all_to_all (issue 16)")
    ap.add_argument("--fold-check", action="store_true", help="balanced fold vs full fidelity where only the chain bound folds")
    ap.add_argument("--rank-fold-check", action="store_true", help="NVLS rank fold vs every rank simulated (must be identical)")
    args = ap.parse_args()
    if args.scaling:
        return scaling()
    if args.a2a:
        return a2a()
    if args.rank_fold_check:
        return rank_fold_check()
    if args.fold_check:
        return fold_check()
    for case in args.case or [*CASES, "hold-1e5", "switch"]:
        runs = [run_case(case) for _ in range(args.repeat)]
        med = {k: statistics.median(r[k] for r in runs) for k in ("wall_s", "cpu_s", "peak_rss_mib", "value")}
        extra = {k: v for k, v in runs[0].items() if k not in med}
        print(f"{case:14s} wall {med['wall_s']:8.2f} s  cpu {med['cpu_s']:8.2f} s  peak RSS {med['peak_rss_mib']:6.0f} MiB  "
              f"{med['value']:.6g} {extra.pop('unit')}  {json.dumps(extra)}  (median of {args.repeat})", flush=True)


def scaling() -> None:
    """Ring all_reduce (Simple), one run per point, both fidelities."""
    print("| sweep | fabric | bytes | fidelity | wall s | CPU s | peak RSS MiB | simulated us | packets | folded |")
    print("|---|---|---:|---|---:|---:|---:|---:|---:|---:|")
    points = [("bytes", "gb200-nvl72", b) for b in (1 << 20, 16 << 20, 256 << 20, 1 << 30, 8 << 30)]
    points += [("GPUs", f, 256 << 20) for f in ("hgx-b200", "gb200-nvl72", "gb200-nvl576")]
    for sweep, fab, b in points:
        for fid in ("packet", "flow"):
            if fid == "packet" and fab == "gb200-nvl576":
                print(f"| {sweep} | {fab} | {b >> 20} MiB | packet | not run: graph fabric, no folding, hours |  |  |  |  |  |", flush=True)
                continue
            r = run_case("x", [fab, b, "ring", fid])
            print(f"| {sweep} | {fab} | {b >> 20} MiB | {fid} | {r['wall_s']:.2f} | {r['cpu_s']:.2f} | {r['peak_rss_mib']:.0f} | "
                  f"{r['value']:.1f} | {r['packets']} | {r['folded_planes']} |", flush=True)


FOLD = r"""
import json, sys, time, warnings, flitsim
from flitsim.hardware.fabric import fabric_preset, uniform_fabric
fab, op, size, algo, proto = json.loads(sys.argv[1])
def mk(**o):
    if fab == "8x18":  # 8 GPUs x 18 NVLink 5 planes (the NVL72 structure, small)
        return uniform_fabric(8, [1] * 18, "nvlink5", switch={"nvls": True}, **o)
    return fabric_preset(fab, **o)
warnings.simplefilter("ignore")
out = {}
for name, f in (("fold", mk()), ("full", mk(fold_planes=False, sim_packet_bytes=256))):
    c = time.process_time()
    r = flitsim.collective(f, op, size, algorithm=algo, protocol=proto)
    out[name] = [r.busbw_GBps, time.process_time() - c, r.stats["folded_planes"]]
print(json.dumps(out))
"""


def fold_check() -> None:
    """Balanced fold (default levers) against full fidelity (every plane, 256-byte packets) on cases
    whose transfers are under 128 packets per lane, so only the chain bound folds them."""
    cases = [("gb200-nvl72", "all_reduce", s, "ring", "simple") for s in (1 << 20, 4 << 20, 16 << 20)]
    cases += [("gb200-nvl72", "all_reduce", 4 << 20, "nvls", "simple"), ("gb200-nvl72", "all_to_all", 16775424, "direct", "simple")]
    for size in (16 << 10, 256 << 10, 1 << 20, 4 << 20):
        cases += [("8x18", op, size, a, "simple") for op, a in (("all_reduce", "ring"), ("all_reduce", "tree"),
                                                                 ("all_reduce", "nvls"), ("all_to_all", "direct"))]
        cases += [("8x18", "all_reduce", size, "ring", p) for p in ("ll", "ll128")]
    print("| fabric | collective | size | protocol | full fidelity GB/s (CPU s) | folded GB/s (CPU s) | difference |")
    print("|---|---|---:|---|---:|---:|---:|")
    for c in cases:
        p = subprocess.run([sys.executable, "-c", FOLD, json.dumps(c)], capture_output=True, text=True, check=True)
        o = json.loads(p.stdout.strip().splitlines()[-1])
        (fb, fc, fp), (ub, uc, _) = o["fold"], o["full"]
        print(f"| {c[0]} | {c[1]} {c[3]} | {c[2]} | {c[4]} | {ub:.3f} ({uc:.2f}) | {fb:.3f} ({fc:.2f}, x{fp}) | "
              f"{100 * (fb / ub - 1):+.3f} % |", flush=True)


def rank_fold_check() -> None:
    """NVLS with one rank simulated for all (the default) against every rank simulated: time-resolved
    counters refuse the rank fold and leave the timing alone. Prints both times and whether time and
    every GPU's link bytes are identical (they must be: the fold is exact, not bounded)."""
    import flitsim
    from flitsim.hardware.fabric import CounterSpec, fabric_preset
    print("| fabric | op | bytes | rank-folded us (CPU s) | every rank us (CPU s) | identical |")
    print("|---|---|---:|---:|---:|---|")
    for fab in ("hgx-h100", "hgx-b200", "gb200-nvl72"):
        for s in (4096, 65536 + 768, (1 << 20) + 768, (3 << 20) + 4, 37 << 20):
            for op in ("all_reduce", "all_gather"):
                q = 8 * 72 * 4 if op == "all_gather" else (288 if fab == "gb200-nvl72" else 4)
                s = (s // q + 1) * q
                runs = []
                for f in (fabric_preset(fab), fabric_preset(fab, counters=CounterSpec(interval_ps=10**9))):
                    c0 = time.process_time()
                    runs.append((flitsim.collective(f, op, s, algorithm="nvls", protocol="simple"), time.process_time() - c0))
                (a, ca), (b, cb) = runs
                same = (a.time_us == b.time_us and (a.link_bytes_sent == b.link_bytes_sent).all()
                        and (a.link_bytes_received == b.link_bytes_received).all() and "rank fold:" in a.stats["fold_reason"])
                print(f"| {fab} | {op} | {s} | {a.time_us:.6f} ({ca:.2f}) | {b.time_us:.6f} ({cb:.2f}) | {'yes' if same else 'NO'} |")


def a2a() -> None:
    """NVL72 all_to_all (Simple) at packet and flow level: busbw difference and CPU-time ratio
    (issue 16's target: flow >= 100x faster at <= 2 % bandwidth difference)."""
    print("| bytes | packet busbw GB/s | packet CPU s | flow busbw GB/s | flow CPU s | bw diff | CPU ratio |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for b in (16 << 20, 64 << 20, 256 << 20, 1 << 30):
        b = b // (72 * 72 * 4) * (72 * 72 * 4)  # a whole number of elements per peer
        p, f = (run_case("x", ["gb200-nvl72", b, "direct", fid]) for fid in ("packet", "flow"))
        print(f"| {b} | {p['busbw_GBps']:.2f} | {p['cpu_s']:.3f} | {f['busbw_GBps']:.2f} | {f['cpu_s']:.4f} | "
              f"{100 * (f['busbw_GBps'] / p['busbw_GBps'] - 1):+.2f} % | {p['cpu_s'] / max(f['cpu_s'], 1e-9):.0f}x |", flush=True)


if __name__ == "__main__":
    main()
