"""Collective benchmark and the error table of docs/collectives.md.

    python benches/collective_bench.py --table    # every measured point of the sources vs simulated, MAPE
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


def points():
    """(system, test, size label, size bytes, measured, metric, kwargs)."""
    c = lambda **k: k  # noqa: E731
    P = []
    for src, meas in (("issue 212", 370), ("issue 2140, NVLS off", 370)):
        P.append(("8xH100", f"all_reduce ring ({src})", "2 GiB", 2 * G, meas, "busbw", c(algorithm="ring")))
    for src, meas in (("issue 212", 480), ("issue 2140, NVLS on", 480)):
        P.append(("8xH100", f"all_reduce NVLS ({src})", "2 GiB", 2 * G, meas, "busbw", c(algorithm="nvls")))
    P.append(("8xH100", "all_gather ring (issue 326; 16 GB run at 4 GiB)", "4 GiB", 4 * G, 360, "busbw",
              c(op="all_gather", algorithm="ring")))
    P.append(("8xH100", "all_gather ring (issue 1506)", "1 GB", 10**9 // 32 * 32, 350, "busbw", c(op="all_gather", algorithm="ring")))
    P.append(("8xH100", "all_gather NVLS (issue 1506)", "1 GB", 10**9 // 32 * 32, 300, "busbw", c(op="all_gather", algorithm="nvls")))
    P.append(("8xH100", "all_reduce NVLS (issue 1506)", "1 GB", 10**9, 470, "busbw", c(algorithm="nvls")))
    nv = {5: 420, 6: 440, 7: 460, 8: 480}
    for n in range(2, 9):
        P.append((f"{n}xH100", "all_reduce ring (issue 1455)", "2 GiB", 2 * G, 367.5, "busbw", c(algorithm="ring", n=n)))
        if n >= 2:
            P.append((f"{n}xH100", "all_reduce NVLS (issue 1455)", "2 GiB", 2 * G, nv.get(n, 370), "busbw",
                      c(algorithm="nvls", n=n)))
    P.append(("2xH100", "sendrecv copy engine (issue 1264)", "256 MiB", 256 * M, 374, "busbw", c(op="sendrecv")))
    P.append(("2xH100", "all_reduce NVLS 128 B, CUDA graph (issue 1259)", "128 B", 128, 5.56, "time_us",
              c(algorithm="nvls", n=2, host_launch_ps=0)))
    for size, label, meas in ((8 * G, "8 GB", 479.98), (G, "1 GB", 467.58), (M, "1 MB", 52.96), (1024, "1 KB", 0.06)):
        P.append(("8xH200", "all_reduce NVLS in-place (Azure)", label, size, meas, "busbw", c(algorithm="nvls")))
    P.append(("8xH200", "all_reduce ring (ProtoBridge)", "1 MiB", M, 37.24, "time_us", c(algorithm="ring")))
    P.append(("8xH200", "all_reduce ring (ProtoBridge)", "256 MiB", 256 * M, 1347.65, "time_us", c(algorithm="ring")))
    P.append(("8xH200", "all_reduce half, NCCL's choice (aiconfigurator)", "512 MiB", 512 * M, 2040, "time_us", c(dtype="half")))
    P.append(("8xH100", "all_reduce half, NCCL's choice (aiconfigurator)", "512 MiB", 512 * M, 2111, "time_us", c(dtype="half")))
    P.append(("8xH200", "all_reduce half, NCCL's choice (aiconfigurator)", "2 KiB", 2048, 16.0, "time_us", c(dtype="half")))
    return P


def band(size):
    return "< 1 MiB" if size < M else ("1 MiB .. 256 MiB" if size < 256 * M else ">= 256 MiB")


def err_table():
    rows = []
    for system, test, label, size, meas, metric, kw in points():
        kw = dict(kw)
        op = kw.pop("op", "all_reduce")
        n = kw.pop("n", 8)
        group = [0, 1] if op == "sendrecv" else list(range(n))
        r = flitsim.collective("hgx-h100", op, size, group, **kw)
        sim = r.time_us if metric == "time_us" else r.busbw_GBps
        # errors on time (busbw ~ 1/time): error = simulated time / measured time - 1
        err = (sim / meas - 1) * 100 if metric == "time_us" else (meas / sim - 1) * 100
        rows.append((system, test, label, size, meas, sim, metric, err, f"{r.algorithm}/{r.protocol}"))
        print(f"| {system} | {test} | {label} | {metric} | {meas:g} | {sim:.2f} | {r.algorithm}/{r.protocol} | {err:+.1f} |",
              flush=True)
    print("\nMAPE of time (|simulated / measured - 1|):\n\n| system | size band | points | MAPE % | worst % |\n|---|---|---:|---:|---:|")
    keys = sorted({(s[0].split("x")[1], band(s[3])) for s in rows})
    for sys_, b in keys:
        e = [abs(x[7]) for x in rows if x[0].split("x")[1] == sys_ and band(x[3]) == b]
        print(f"| {sys_} | {b} | {len(e)} | {sum(e) / len(e):.1f} | {max(e):.1f} |")
    e = [abs(x[7]) for x in rows]
    print(f"| all | all | {len(e)} | {sum(e) / len(e):.1f} | {max(e):.1f} |")


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
        print("| system | test | size | metric | measured | simulated | algo/proto | time error % |\n"
              "|---|---|---|---|---:|---:|---|---:|")
        err_table()
    if "--sweep" in args:
        sweep()
    if "--nvl72" in args:
        nvl72()
