"""Measured makespans / CVs for docs/schedules.md (AnalyticNetwork 500 ns, 450 GB/s, H100 kernel-level model)."""
import flitsim.schedules as S
from flitsim.networks import AnalyticNetwork
from flitsim.workloads import dit_workload

net = AnalyticNetwork(alpha_ps=500_000, bandwidth_GBps=450.0)
print("| workload | schedule | devices | makespan | stage-time CV | fill/drain | bubble (mean) |")
print("|---|---|---:|---:|---:|---:|---:|")
for T in (4096, 16384):
    for K in (4, 8):
        for slicing, kw in (("uniform 16 slices", dict(slices=16)), ("dp (grid 128)", dict(slicing="dp"))):
            s = S.simulate(S.build("terapipe", "llama-3-70b", T, stages=K, **kw), net)
            r = s.summary()
            print(f"| Llama-3-70B prefill {T // 1024}k | TeraPipe {slicing} | {K} | {r['makespan_s'] * 1e3:.1f} ms "
                  f"| {r['stage_time_cv']:.3f} | {r['fill_drain_share']:.3f} | {r['bubble_fraction_mean']:.3f} |")
for px in (1024, 4096):
    w = dit_workload("flux.1-dev", px, steps=28)
    for N in (4, 8):
        s = S.simulate(S.build("pipefusion", None, w, stages=N, patches=N), net)
        r = s.summary()
        print(f"| Flux.1-dev {px} px, 28 steps | PipeFusion M=N | {N} | {r['makespan_s'] * 1e3:.1f} ms "
              f"| {r['stage_time_cv']:.3f} | {r['fill_drain_share']:.3f} | {r['bubble_fraction_mean']:.3f} |")
