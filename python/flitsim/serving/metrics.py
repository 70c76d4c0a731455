"""Serving metrics under their published definitions, side by side.

Per request (``first`` = time the first token is emitted, ``finish`` = the
last token, ``out`` = output tokens):

- TTFT = first - arrival (all four tools; queueing included).
- E2E latency = finish - arrival (vLLM "E2EL", LLMPerf
  "end_to_end_latency_s", GenAI-Perf "request latency", MLPerf "latency").
- vLLM benchmark_serving TPOT = (E2E - TTFT) / (out - 1) per request (requests
  with out = 1 excluded), then statistics over requests; vLLM ITL = every
  gap between consecutive tokens, pooled over all requests (token-weighted,
  so ITL mean < TPOT mean is normal); throughput = completed requests,
  output tokens, input + output tokens over the benchmark duration (t = 0 to
  the last completion). vLLM goodput (``--goodput``): requests meeting every
  given SLO per second of duration.
- LLMPerf (ray-project/llmperf token_benchmark_ray.py) "inter_token_latency_s"
  = E2E / out per request (TTFT *included*); "request_output_throughput" =
  out / E2E per request; overall output throughput = output tokens / duration;
  summaries p25, p50, p75, p90, p95, p99, mean, min, max, std.
- GenAI-Perf (NVIDIA, now AIPerf) "inter token latency" = (E2E - TTFT) /
  (out - 1) per request (vLLM's TPOT by another name); output token and
  request throughput over the time from the first request to the last response.
- MLPerf Inference (loadgen): Offline = output tokens / duration; Server
  passes when the 99th percentile of TTFT and of TPOT = (latency - TTFT) /
  (out - 1) are within the benchmark's limits (Llama 2 70B: 2 s and 200 ms).
- Normalized latency (Orca, Yu et al. OSDI 2022; vLLM paper, Kwon et al.
  SOSP 2023) = mean over requests of E2E / out.

Percentiles: linear interpolation (numpy / pandas default, as vLLM and
LLMPerf compute them); the pooled ITL percentiles come from a log-binned
histogram (1.2 % bins; :class:`~flitsim.serving.engine.GapHistogram`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from flitsim.errors import config_error

__all__ = ["DEFINITIONS", "MLPERF_LLAMA2_70B_SERVER", "per_request", "summary", "side_by_side", "goodput_rps",
           "mlperf_server", "STATS"]

STATS = ("mean", "min", "p25", "p50", "p75", "p90", "p95", "p99", "max", "std")
"""Statistics of :func:`summary` (LLMPerf's set)."""

DEFINITIONS = ("vllm", "llmperf", "genai-perf", "mlperf")
"""Metric definitions of :func:`side_by_side`."""

MLPERF_LLAMA2_70B_SERVER = {"ttft_s": 2.0, "tpot_s": 0.2}
"""MLPerf Inference Llama 2 70B Server latency limits (99th percentile): TTFT 2 s, TPOT 200 ms."""


def per_request(arrival_s: np.ndarray, first_s: np.ndarray, finish_s: np.ndarray, output_tokens: np.ndarray) -> dict:
    """Per-request arrays: ``ttft_s``, ``e2e_s``, ``tpot_s`` (vLLM / GenAI-Perf
    / MLPerf: NaN where out = 1), ``llmperf_itl_s`` (E2E / out),
    ``normalized_latency_s`` (E2E / out), ``llmperf_output_tps`` (out / E2E)."""
    out = np.asarray(output_tokens, np.float64)
    ttft = first_s - arrival_s
    e2e = finish_s - arrival_s
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(out > 1, (e2e - ttft) / np.maximum(out - 1, 1), np.nan)
        per_tok = e2e / out
        tps = np.where(e2e > 0, out / e2e, np.nan)
    return {"ttft_s": ttft, "e2e_s": e2e, "tpot_s": tpot, "llmperf_itl_s": per_tok, "normalized_latency_s": per_tok,
            "llmperf_output_tps": tps}


def summary(x: np.ndarray) -> dict[str, float]:
    """:data:`STATS` of ``x`` (NaNs dropped; std with ddof = 1 as pandas)."""
    x = np.asarray(x, np.float64)
    x = x[~np.isnan(x)]
    if x.size == 0:
        return {k: float("nan") for k in STATS}
    q = np.percentile(x, [25, 50, 75, 90, 95, 99])
    return {"mean": float(x.mean()), "min": float(x.min()), **{f"p{p}": float(v) for p, v in
            zip((25, 50, 75, 90, 95, 99), q)}, "max": float(x.max()),
            "std": float(x.std(ddof=1)) if x.size > 1 else float("nan")}


def goodput_rps(ttft_s: np.ndarray, tpot_s: np.ndarray, e2e_s: np.ndarray, duration_s: float, *,
                slo_ttft_s: float | None = None, slo_tpot_s: float | None = None,
                slo_e2e_s: float | None = None) -> float:
    """vLLM benchmark_serving goodput: requests meeting every given SLO
    (TTFT, TPOT, E2E; a one-token request meets any TPOT SLO) per second.

    Raises:
        ConfigError: no SLO given, or an SLO <= 0.
    """
    slos = {"slo_ttft_s": slo_ttft_s, "slo_tpot_s": slo_tpot_s, "slo_e2e_s": slo_e2e_s}
    if all(v is None for v in slos.values()):
        raise config_error("slo", None, "at least one of slo_ttft_s, slo_tpot_s, slo_e2e_s")
    for k, v in slos.items():
        if v is not None and not (isinstance(v, (int, float)) and np.isfinite(v) and v > 0):
            raise config_error(k, v, "a latency > 0 s")
    ok = np.ones(len(ttft_s), bool)
    if slo_ttft_s is not None:
        ok &= ttft_s <= slo_ttft_s
    if slo_tpot_s is not None:
        ok &= np.isnan(tpot_s) | (tpot_s <= slo_tpot_s)
    if slo_e2e_s is not None:
        ok &= e2e_s <= slo_e2e_s
    return float(ok.sum() / duration_s) if duration_s > 0 else float("nan")


def mlperf_server(ttft_s: np.ndarray, tpot_s: np.ndarray, limits: dict[str, float] | None = None) -> dict[str, Any]:
    """MLPerf Server constraints: p99 TTFT and p99 TPOT against ``limits``
    (default :data:`MLPERF_LLAMA2_70B_SERVER`); returns both percentiles,
    the limits and ``passed``."""
    lim = dict(MLPERF_LLAMA2_70B_SERVER if limits is None else limits)
    p99_ttft = float(np.nanpercentile(ttft_s, 99))
    p99_tpot = float(np.nanpercentile(tpot_s, 99)) if np.isfinite(tpot_s).any() else 0.0
    return {"p99_ttft_s": p99_ttft, "p99_tpot_s": p99_tpot, "limit_ttft_s": lim["ttft_s"],
            "limit_tpot_s": lim["tpot_s"], "passed": bool(p99_ttft <= lim["ttft_s"] and p99_tpot <= lim["tpot_s"])}


def side_by_side(r: dict, gaps: Any, input_tokens: np.ndarray, output_tokens: np.ndarray, arrival_s: np.ndarray,
                 finish_s: np.ndarray) -> "Any":
    """One DataFrame: a row per (definition, metric), columns :data:`STATS`
    (scalars in ``mean``), with the unit and the definition in words.

    ``r``: :func:`per_request` arrays; ``gaps``: the pooled gap histogram.
    """
    import pandas as pd

    dur = float(np.nanmax(finish_s)) if len(finish_s) else float("nan")  # from t = 0 (benchmark start)
    span = dur - float(np.min(arrival_s))  # GenAI-Perf: first request to last response
    n = len(output_tokens)
    tot_out, tot_in = float(np.sum(output_tokens)), float(np.sum(input_tokens))
    rows = []

    def dist(defn: str, name: str, x: np.ndarray, unit: str, what: str) -> None:
        rows.append({"definition": defn, "metric": name, "unit": unit, **summary(x), "defined_as": what})

    def scalar(defn: str, name: str, v: float, unit: str, what: str) -> None:
        rows.append({"definition": defn, "metric": name, "unit": unit, "mean": v, "defined_as": what})

    dist("vllm", "ttft", r["ttft_s"], "s", "first token - arrival")
    dist("vllm", "tpot", r["tpot_s"], "s", "(E2E - TTFT) / (out - 1) per request, then over requests")
    itl = {k: float("nan") for k in STATS}
    itl.update(mean=gaps.mean_s, min=gaps.min_s if gaps.n else float("nan"),
               max=gaps.max_s if gaps.n else float("nan"),
               **{f"p{p}": gaps.percentile_s(p) for p in (25, 50, 75, 90, 95, 99)})
    rows.append({"definition": "vllm", "metric": "itl", "unit": "s", **itl,
                 "defined_as": "every inter-token gap, pooled over requests (token-weighted)"})
    dist("vllm", "e2el", r["e2e_s"], "s", "last token - arrival")
    scalar("vllm", "request_throughput", n / dur, "req/s", "completed requests / duration (t = 0 to last completion)")
    scalar("vllm", "output_throughput", tot_out / dur, "tok/s", "output tokens / duration")
    scalar("vllm", "total_token_throughput", (tot_in + tot_out) / dur, "tok/s", "(input + output tokens) / duration")
    dist("llmperf", "ttft_s", r["ttft_s"], "s", "first token - arrival")
    dist("llmperf", "inter_token_latency_s", r["llmperf_itl_s"], "s", "E2E / out per request (TTFT included)")
    dist("llmperf", "end_to_end_latency_s", r["e2e_s"], "s", "last token - arrival")
    dist("llmperf", "request_output_throughput_token_per_s", r["llmperf_output_tps"], "tok/s", "out / E2E per request")
    scalar("llmperf", "overall_output_throughput", tot_out / dur, "tok/s", "output tokens / duration")
    scalar("llmperf", "completed_requests_per_min", 60 * n / dur, "req/min", "completed requests / duration")
    dist("genai-perf", "time_to_first_token", r["ttft_s"], "s", "first token - request sent")
    dist("genai-perf", "inter_token_latency", r["tpot_s"], "s", "(E2E - TTFT) / (out - 1) per request")
    dist("genai-perf", "request_latency", r["e2e_s"], "s", "last response - request sent")
    scalar("genai-perf", "output_token_throughput", tot_out / span, "tok/s", "output tokens / (last response - first request)")
    scalar("genai-perf", "request_throughput", n / span, "req/s", "requests / (last response - first request)")
    m = mlperf_server(r["ttft_s"], r["tpot_s"])
    scalar("mlperf", "offline_tokens_per_s", tot_out / dur, "tok/s", "output tokens / duration (Offline scenario)")
    scalar("mlperf", "p99_ttft", m["p99_ttft_s"], "s", f"Server limit {m['limit_ttft_s']} s")
    scalar("mlperf", "p99_tpot", m["p99_tpot_s"], "s", f"Server limit {m['limit_tpot_s']} s")
    scalar("mlperf", "server_constraints_passed", float(m["passed"]), "bool", "p99 TTFT and p99 TPOT within limits")
    scalar("orca/vllm-paper", "normalized_latency", float(np.nanmean(r["normalized_latency_s"])), "s/token",
           "mean over requests of E2E / out")
    return pd.DataFrame(rows).set_index(["definition", "metric"])
