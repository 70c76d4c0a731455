"""Collective benchmark and the error table of docs/collectives.md.

    python benches/collective_bench.py --table    # = flitsim validate --area collectives --format markdown
    python benches/collective_bench.py --sweep    # 8xH100 all_reduce ramp 1 KiB .. 1 GiB (auto), wall time
    python benches/collective_bench.py --nvl72    # NVL72 all_reduce 1 GiB / 8 GiB at packet fidelity: wall, RSS

Measured values are those REFERENCE-cited sources publish (nccl-tests issues
212, 326; NCCL issues 1259, 1264, 1455, 1506, 2140; Azure AI-benchmarking-guide
ND H200 v5; Hazuyuki/ProtoBridge H200 calibration files; ai-dynamo/aiconfigurator
nccl_perf tables). H200 runs use the hgx-h100 fabric (the same NVLink 4 /
NVSwitch gen3 fabric). Wall time is measured around flitsim.collective."""

import resource
import sys
import time

import flitsim

G = 1 << 30
M = 1 << 20


def err_table():
    """The measured points live in one place, the validation registry
    (python/flitsim/validation/cases/collectives.py); this prints its table."""
    from flitsim.validation import run
    from flitsim.validation.format import report_markdown

    print(report_markdown(run(areas=["collectives"])))


def sweep():
    print("\n| size | time us | busbw GB/s | algo | proto | wall s |\n|---:|---:|---:|---|---|---:|")
    s = 1024
    while s <= G:
        t = time.perf_counter()
        r = flitsim.collective("hgx-h100", "all_reduce", s)
        w = time.perf_counter() - t
        print(f"| {s} | {r.time_us:.2f} | {r.busbw_GBps:.2f} | {r.algorithm} | {r.protocol} | {w:.3f} |", flush=True)
        s *= 4


def nvl72():
    for size in (G, 8 * G):
        for algo in ("ring", "nvls"):
            t = time.perf_counter()
            r = flitsim.collective("gb200-nvl72", "all_reduce", size, algorithm=algo, protocol="simple")
            w = time.perf_counter() - t
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            print(f"NVL72 all_reduce {size >> 30} GiB {algo}: {r.time_us:.1f} us, busbw {r.busbw_GBps:.1f} GB/s, "
                  f"wall {w:.2f} s, peak RSS {rss:.0f} MiB, packets {r.stats['packets']}, "
                  f"folded {r.stats['folded_planes']}, {r.stats['sim_packet_note']}", flush=True)


if __name__ == "__main__":
    args = set(sys.argv[1:]) or {"--table", "--sweep", "--nvl72"}
    if "--table" in args:
        err_table()
    if "--sweep" in args:
        sweep()
    if "--nvl72" in args:
        nvl72()
