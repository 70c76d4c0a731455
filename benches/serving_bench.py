"""Serving speed bench (issue 18): 10,000 requests of the Azure conversation
trace 2023 served by Llama-3-70B on an 8-GPU tensor-parallel instance
(HGX H100, FP8), TP all-reduces on the fabric at its fastest validated
fidelity (``auto``: flow level where validated). Prints wall time, peak RSS,
and the run's headline numbers. Target: < 30 s on 2 cores; memory bounded by
the requests in flight (the run keeps per-request rows and a fixed gap
histogram, no per-token or per-iteration storage).

    PYTHONPATH=python python3 benches/serving_bench.py [--n 10000]
    PYTHONPATH=python python3 benches/serving_bench.py --fabric ib-4xhgx-h100 --tp 16 --n 1   # TP across two nodes
"""

from __future__ import annotations

import argparse
import json
import resource
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--policy", default="chunked")
    ap.add_argument("--fabric", default="hgx-h100")
    ap.add_argument("--tp", type=int, default=8)
    a = ap.parse_args()
    from flitsim.serving import serve

    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    c0 = time.process_time()
    r = serve("llama-3-70b", "azure-conv-2023", fabric=a.fabric, layout={"tp": a.tp}, dtype="fp8", kv_dtype="fp8",
              n=a.n, policy=a.policy, fidelity="auto")
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0  # single-threaded: what a free core takes
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    inst = r.instances[0]
    print(json.dumps({"requests": a.n, "policy": a.policy, "fabric": a.fabric, "tp": a.tp, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "target_wall_s": 30,
                      "peak_rss_MB": round(rss / 1024, 1), "rss_before_run_MB": round(rss0 / 1024, 1),
                      "iterations": inst["iterations"], "tokens_decoded": inst["tokens_decoded"],
                      "simulated_s": round(r.duration_s, 1),
                      **{k: r.summary()[k] for k in ("output_tokens_per_s", "mean_ttft_s", "mean_tpot_s")}}, indent=2))


if __name__ == "__main__":
    main()
