"""MLPerf Inference, closed division, Offline, Llama 2 70B, tokens/s
(MLCommons inference_results_v5.0 / v5.1, closed/NVIDIA; TensorRT-LLM, FP8 on
Hopper, FP4 on Blackwell). Served by ``flitsim.serving`` (issue 18):
:func:`flitsim.serving.mlperf.mlperf_offline` runs the configuration the
submission published (layout, batch, token budget, K/V pool; H100: TP1 x
PP2 x 4 instances with two micro-batches in flight, H200: TP1 x 8). Nothing
is fitted on these rows (transfer). The B200 row stays skipped: its
submission runs FP4 GEMMs, and flitsim's GPU model has no FP4 peak.

Until ``flitsim.serving.mlperf`` exists (and has the row) a case reports
``skipped``, never a pass."""

from __future__ import annotations

import importlib.util
from typing import Any, Callable

from flitsim.validation.case import Case

TOL = 0.15
WHY = ("the input lengths of MLPerf's processed OpenOrca set are not in our sources (assumed: mean 294, sd 150, "
       "as the output); shorter prompts mean less prefill work; 15 %")


def _requires(row: str) -> Callable[[], str | None]:
    def check() -> str | None:
        if importlib.util.find_spec("flitsim.serving") is None:
            return "serving missing: flitsim.serving (issue 18)"
        if importlib.util.find_spec("flitsim.serving.mlperf") is None:
            return "serving missing: flitsim.serving.mlperf (issue 18)"
        mlperf = importlib.import_module("flitsim.serving.mlperf")  # optional until issue 18 lands
        if row not in getattr(mlperf, "MLPERF_OFFLINE_ROWS", {}):
            return (f"row {row!r} not in flitsim.serving.mlperf.MLPERF_OFFLINE_ROWS (FP4 GEMMs: the GPU model has "
                    "no FP4 peak)" if "b200" in row else f"row {row!r} not in flitsim.serving.mlperf.MLPERF_OFFLINE_ROWS")
        return None
    return check


MISS = ("the model's H200 is H100 compute (same SMs, clocks and tensor rates) with 4.8 TB/s HBM and 141 GB, "
        "and it borrows H100's GEMM efficiency top (0.615, fitted on single-GPU Flux.1-dev; no H200 single-GPU "
        "row exists to fit its own, docs/compute.md); the row is compute-bound, so the simulated H200/H100 ratio "
        "is 1.03 against the published 1.118 (a higher sustained clock under H200's larger power limit is a "
        "likely missing term)")


def _offline(row: str) -> Callable[[Any], Any]:
    def compute(ctx: Any) -> Any:
        df = importlib.import_module("flitsim.serving.mlperf").mlperf_offline(row)
        ok = df[df.get("sim_tokens_per_s").notna()] if "sim_tokens_per_s" in df else df.iloc[0:0]
        if ok.empty:
            raise RuntimeError(f"the published layout of {row} does not fit: {df.get('error', df).tolist()}")
        best = ok.iloc[0]
        return float(best.sim_tokens_per_s), f"published layout {best.layout}"
    return compute


def _case(row: str, system: str, measured: float, source: str, known_miss: str = "") -> Case:
    return Case(id=f"mlperf.offline_{row.replace('-', '_')}", area="mlperf",
                quantity=f"MLPerf Offline Llama 2 70B, {system}, published configuration", unit="tokens/s",
                source=source, measured=measured, tolerance=TOL, tolerance_why=WHY,
                call=f'flitsim.serving.mlperf.mlperf_offline("{row}").sim_tokens_per_s[0]', compute=_offline(row),
                tag="transfer", system=system.split(" x")[0].replace("DGX ", ""), size_band="8 GPUs",
                requires=_requires(row), known_miss=known_miss)


CASES = [
    _case("dgx-h100x8", "DGX H100 x8", 31306.8, "MLCommons inference_results_v5.0, closed/NVIDIA, Llama 2 70B Offline"),
    _case("h200x8", "H200 x8", 34988.2, "MLCommons inference_results_v5.0, closed/NVIDIA, Llama 2 70B Offline", MISS),
    _case("dgx-b200x8", "DGX B200 x8", 101527.0, "MLCommons inference_results_v5.1, closed/NVIDIA, Llama 2 70B Offline"),
]

TRT_WHY = ("TensorRT-LLM's engine settings for the page's runs are mostly defaults we assume (batch cap, token "
           "budget, K/V pool; flitsim.serving.mlperf.TRTLLM_BENCH_SETTINGS); lengths are exact; 15 %")

def _trt(gpu: str, tp: int, isl: int, osl: int) -> Callable[[Any], Any]:
    def compute(ctx: Any) -> Any:
        return float(importlib.import_module("flitsim.serving.mlperf").trtllm_offline(gpu, tp, isl, osl)), ""
    return compute


def _trt_requires() -> str | None:
    if importlib.util.find_spec("flitsim.serving") is None:
        return "serving missing: flitsim.serving (issue 18)"
    return None


_TRT = {("h200", 1, 128, 128): 3803.0, ("h200", 1, 1000, 1000): 2909.0, ("h200", 1, 2048, 128): 442.0,
        ("h100", 2, 128, 128): 6378.0, ("h100", 2, 1000, 1000): 4205.0, ("h100", 2, 2048, 128): 762.0}

CASES += [
    Case(id=f"mlperf.trtllm_{g}_tp{tp}_{i}_{o}", area="mlperf",
         quantity=f"TensorRT-LLM offline Llama 3.3 70B FP8, {g.upper()} TP{tp}, {i}/{o} tokens", unit="tokens/s",
         source="NVIDIA/TensorRT-LLM/docs/source/performance/perf-overview.md (v1.0 throughput tables)",
         measured=v, tolerance=TOL, tolerance_why=TRT_WHY,
         call=f'flitsim.serving.mlperf.trtllm_offline("{g}", {tp}, {i}, {o})', compute=_trt(g, tp, i, o),
         tag="transfer", system=g.upper(), size_band=f"{tp} GPU" + ("s" if tp > 1 else ""),
         requires=_trt_requires)
    for (g, tp, i, o), v in _TRT.items()
]

