"""Collective benchmark and calibration error table (docs/collectives.md).

    python benches/collective_bench.py            # error table + H100 sweep + NVL72 1 GiB
    python benches/collective_bench.py --table    # error table only

Wall time per collective is measured around flitsim.collective (one process,
release build)."""

import sys
import time

import flitsim


def err_table():
    rows = []
    def add(system, test, size, measured, r, metric="busbw"):
        sim = r.busbw_GBps if metric == "busbw" else r.time_us
        rows.append((system, test, size, measured, sim, (sim - measured) / measured * 100))
    G = 1 << 30
    add("8xH100", "all_reduce ring", "1 GiB", 370, flitsim.collective("hgx-h100", "all_reduce", G, algorithm="ring", protocol="simple"))
    add("8xH100", "all_reduce NVLS", "1 GiB", 480, flitsim.collective("hgx-h100", "all_reduce", G, algorithm="nvls"))
    add("8xH100", "all_reduce NVLS (issue 1506)", "1 GB", 470, flitsim.collective("hgx-h100", "all_reduce", 10**9, algorithm="nvls"))
    add("8xH100", "all_gather ring", "1 GB", 350, flitsim.collective("hgx-h100", "all_gather", 10**9 // 32 * 32, algorithm="ring", protocol="simple"))
    add("8xH100", "all_gather ring (issue 326)", "4 GiB", 360, flitsim.collective("hgx-h100", "all_gather", 4 * G, algorithm="ring", protocol="simple"))
    nvls_1455 = {5: 420, 6: 440, 7: 460, 8: 480}
    for n in range(2, 9):
        add(f"{n}xH100", "all_reduce ring (issue 1455)", "2 GiB", 367.5, flitsim.collective("hgx-h100", "all_reduce", 2 * G, list(range(n)), algorithm="ring", protocol="simple"))
        if n >= 4:
            add(f"{n}xH100", "all_reduce NVLS (issue 1455)", "2 GiB", nvls_1455.get(n, 370), flitsim.collective("hgx-h100", "all_reduce", 2 * G, list(range(n)), algorithm="nvls"))
    for size, label, meas in [(8 * G, "8 GB", 479.98), (G, "1 GB", 467.58), (1 << 20, "1 MB", 52.96), (1024, "1 KB", 0.06)]:
        add("8xH200*", "all_reduce NVLS (Azure)", label, meas, flitsim.collective("hgx-h100", "all_reduce", size, algorithm="nvls"))
    r = flitsim.collective("hgx-h100", "all_reduce", 128, [0, 1], algorithm="nvls")
    add("2xH100", "all_reduce NVLS 128 B (issue 1259), time us", "128 B", 5.56, r, metric="time")
    print("| system | test | size | measured | simulated | error % |\n|---|---|---|---:|---:|---:|")
    for s, t, z, m, v, e in rows:
        print(f"| {s} | {t} | {z} | {m:g} | {v:.2f} | {e:+.1f} |")


def sweep():
    print("\n| size | time us | busbw GB/s | algo | proto | wall s |\n|---:|---:|---:|---|---|---:|")
    s = 8
    while s <= 8 << 30:
        t = time.perf_counter()
        r = flitsim.collective("hgx-h100", "all_reduce", s)
        w = time.perf_counter() - t
        print(f"| {s} | {r.time_us:.2f} | {r.busbw_GBps:.2f} | {r.algorithm} | {r.protocol} | {w:.3f} |", flush=True)
        s *= 4
    for algo in ("ring", "nvls"):
        t = time.perf_counter()
        r = flitsim.collective("gb200-nvl72", "all_reduce", 1 << 30, algorithm=algo, protocol="simple")
        w = time.perf_counter() - t
        print(f"\nNVL72 all_reduce 1 GiB {algo}: {r.time_us:.1f} us, busbw {r.busbw_GBps:.1f} GB/s, wall {w:.2f} s, "
              f"packets {r.stats['packets']}, sim_packet_bytes {r.stats['sim_packet_bytes']}, folded {r.stats['folded_planes']}", flush=True)


if __name__ == "__main__":
    err_table()
    if "--table" not in sys.argv:
        sweep()
