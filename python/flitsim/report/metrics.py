"""Metrics of a simulated schedule: per device, per schedule, per link/VC and
switch port (when the run used the cycle-level fabric), LLM request latencies
under both the LLMPerf and the vLLM definitions, and DiT latencies.

Definitions:

- **LLMPerf** (ray-project/llmperf ``token_benchmark_ray.py``): TTFT; end-to-end
  latency; "inter-token latency" = end-to-end latency / output tokens (TTFT
  *included*); output tokens/s = output tokens / (latency - TTFT) per request.
  Summary: p25, p50, p75, p90, p95, p99, mean, min, max, std.
- **vLLM** (``benchmark_serving.py``): TTFT; TPOT = (latency - TTFT) / (output
  tokens - 1) per request, then averaged; ITL = every gap between consecutive
  streamed *chunks* (a chunk = the tokens that arrive together; vLLM appends
  ``timestamp - most_recent_timestamp`` once per streamed chunk after the first,
  sglang's ``bench_serving.py`` does the same), pooled over all requests; so a
  chunk of 10 tokens every 10 s gives ITL 10 s, not 1 s; E2EL; output
  throughput = total output tokens / benchmark duration.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from flitsim.errors import config_error

if TYPE_CHECKING:
    import pandas as pd

PERCENTILES = (25, 50, 75, 90, 95, 99)
"""Percentiles of every latency summary (LLMPerf's set)."""

__all__ = ["PERCENTILES", "summarize", "bubble_fraction", "schedule_metrics", "token_times_s",
           "chunk_gaps_s", "llm_request_latencies", "llm_latency_table", "dit_latency", "fabric_metrics"]


def summarize(values: Sequence[float] | np.ndarray) -> dict[str, float]:
    """p25/p50/p75/p90/p95/p99, mean, std (population), min, max and count of
    ``values`` (NaNs dropped; NaN everywhere when nothing is left).
    Percentiles use numpy's linear interpolation (as LLMPerf and vLLM do)."""
    x = np.asarray(values, dtype=np.float64)
    x = x[np.isfinite(x)]
    out: dict[str, float] = {}
    for p in PERCENTILES:
        out[f"p{p}"] = float(np.percentile(x, p)) if x.size else float("nan")
    out["mean"] = float(x.mean()) if x.size else float("nan")
    out["std"] = float(x.std()) if x.size else float("nan")
    out["min"] = float(x.min()) if x.size else float("nan")
    out["max"] = float(x.max()) if x.size else float("nan")
    out["count"] = float(x.size)
    return out


def bubble_fraction(busy_intervals: dict[int, list[tuple[int, int]]], makespan_ps: int) -> dict[int, float]:
    """Idle share of each device: 1 - (merged busy time) / makespan.

    Args:
        busy_intervals: {device: [(start_ps, end_ps), ...]} compute intervals
            (may overlap; they are merged).
        makespan_ps: the run's makespan, ps (> 0).

    Returns:
        {device: bubble fraction in [0, 1]}. For K equal stages and M equal
        micro-batches of a GPipe pipeline: (K - 1) / (M + K - 1) on every device.
    """
    if makespan_ps <= 0:
        raise config_error("makespan_ps", makespan_ps, "> 0")
    out = {}
    for dev, iv in busy_intervals.items():
        busy, cur_s, cur_e = 0, None, None
        for s, e in sorted(iv):
            if cur_e is None or s > cur_e:
                if cur_e is not None:
                    busy += cur_e - cur_s
                cur_s, cur_e = s, e
            else:
                cur_e = max(cur_e, e)
        if cur_e is not None:
            busy += cur_e - cur_s
        out[int(dev)] = 1.0 - busy / makespan_ps
    return out


def schedule_metrics(schedule: Any) -> dict[str, Any]:
    """Per-schedule structure figures of a simulated
    :class:`~flitsim.schedules.Schedule`.

    Returns:
        dict: makespan_s, bubble_fraction (list per used device, same order as
        ``schedule.devices``), bubble_fraction_mean, fill_drain_share,
        stage_time_cv, stage_time_s (list per stage), flops, comm_bytes (sent,
        nccl-tests bus bytes for collectives), flop_per_comm_byte (inf without
        communication), dependency_density (edges per task),
        cross_device_edge_share (edges whose ends are on different devices),
        credit_wait_s (sum over tasks), credit_wait_share (credit waits / (tasks'
        devices x makespan)), mean_stage_compute_s (mean pipelined compute task),
        mean_comm_task_s (mean duration of transfer / collective tasks, 0 when
        none), compute_to_comm_ratio, compute_measured_share (share of compute
        time from a measured kernel profile, 0 when modelled).
    """
    s = schedule
    run = s.require_run()
    t = run.tasks
    c = s.graph.columns
    n = len(s.graph)
    esrc, edst = c["edge_src"].astype(np.int64), c["edge_dst"].astype(np.int64)
    dev = c["device"].astype(np.int64)
    kinds = c["kind"]
    cross = ((kinds[esrc] != 0) | (kinds[edst] != 0) | (dev[esrc] != dev[edst])) if len(esrc) else np.zeros(0, bool)
    bub = s.bubble_fraction()
    comm = t[t.kind != "compute"]
    dur = (comm.end_ps - comm.start_ps).to_numpy()
    mean_comm = float(dur.mean()) * 1e-12 if len(dur) else 0.0
    st = s.stage_times_ps()
    comp = t[(t.kind == "compute")]
    mean_stage = float(st.mean()) * 1e-12 if len(st) else float((comp.end_ps - comp.start_ps).mean()) * 1e-12
    sent = s.comm_bytes()
    cw = float(t.credit_wait_ps.sum()) * 1e-12
    mk = run.makespan_ps * 1e-12
    return {
        "makespan_s": mk, "bubble_fraction": [float(x) for x in bub], "bubble_fraction_mean": float(bub.mean()),
        "fill_drain_share": s.fill_drain_share(), "stage_time_cv": s.stage_time_cv(),
        "stage_time_s": [float(x) * 1e-12 for x in st], "flops": s.flops(), "comm_bytes": sent,
        "flop_per_comm_byte": s.flops() / sent if sent else float("inf"),
        "dependency_density": len(esrc) / n if n else 0.0,
        "cross_device_edge_share": float(cross.mean()) if len(cross) else 0.0,
        "credit_wait_s": cw, "credit_wait_share": cw / (mk * len(s.devices)) if mk else 0.0,
        "mean_stage_compute_s": mean_stage, "mean_comm_task_s": mean_comm,
        "compute_to_comm_ratio": mean_stage / mean_comm if mean_comm > 0 else float("inf"),
        "compute_measured_share": s.measured_compute_share() if hasattr(s, "measured_compute_share") else 0.0,
    }


# ---------------------------------------------------------------------- LLM requests
def token_times_s(schedule: Any) -> list[np.ndarray]:
    """Completion time of every output token of every request of a simulated
    ``decode`` schedule, seconds, one array per request (length = output
    tokens; token 1 is the prefill's sampled token).

    A micro-batch's step k ends when its last-stage task (compute, or the
    stage's all-reduce under TP) of step k ends; every request of the
    micro-batch with more than k output tokens receives token k + 1 then.

    Raises:
        ConfigError: not a decode schedule, or not simulated.
    """
    if getattr(schedule, "name", None) != "decode":
        raise config_error("schedule", getattr(schedule, "name", schedule), "a decode schedule")
    run = schedule.require_run()
    t = run.tasks
    last_stage = schedule.stages - 1
    sel = (t.kind != "transfer").to_numpy() & (schedule.graph.meta["stage"] == last_stage) & \
        np.isin(schedule.task_phase, [2, 3])
    end = t.end_ps.to_numpy()[sel]
    item, step = schedule.task_item[sel], schedule.task_step[sel]
    step_end: dict[tuple[int, int], int] = {}
    for i, k, e in zip(item, step, end):
        key = (int(i), int(k))
        step_end[key] = max(step_end.get(key, 0), int(e))
    o = schedule.options
    out = np.asarray(o["output_tokens"])
    M = int(o["micro_batches"])
    res = []
    for r in range(len(out)):
        m = r % M
        res.append(np.array([step_end[(m, k)] for k in range(int(out[r]))], dtype=np.float64) * 1e-12)
    return res


def llm_request_latencies(token_times: Sequence[np.ndarray], arrival_s: Sequence[float] | None = None) -> "pd.DataFrame":
    """Per-request latencies under both definitions.

    Args:
        token_times: per request, the completion time of each output token, s
            (increasing; at least one token).
        arrival_s: per request arrival, s (default 0).

    Returns:
        DataFrame, one row per request: output_tokens, ttft_s, e2e_latency_s,
        llmperf_itl_s (= e2e / output tokens, TTFT included),
        llmperf_output_tokens_per_s (= output tokens / (e2e - TTFT); NaN for one
        token), vllm_tpot_s (= (e2e - TTFT) / (out - 1); NaN for one token).
    """
    import pandas as pd

    n = len(token_times)
    arr = np.zeros(n) if arrival_s is None else np.asarray(arrival_s, dtype=np.float64)
    out = np.array([len(x) for x in token_times], dtype=np.int64)
    if (out < 1).any():
        raise config_error("token_times", "a request with no tokens", "at least one output token per request")
    ttft = np.array([x[0] for x in token_times]) - arr
    e2e = np.array([x[-1] for x in token_times]) - arr
    with np.errstate(invalid="ignore", divide="ignore"):
        decode = e2e - ttft
        tpot = np.where(out > 1, decode / np.maximum(out - 1, 1), np.nan)
        tps = np.where((out > 1) & (decode > 0), out / np.where(decode > 0, decode, 1), np.nan)
    return pd.DataFrame({"output_tokens": out, "ttft_s": ttft, "e2e_latency_s": e2e, "llmperf_itl_s": e2e / out,
                         "llmperf_output_tokens_per_s": tps, "vllm_tpot_s": tpot})


def chunk_gaps_s(token_times: Sequence[np.ndarray]) -> np.ndarray:
    """vLLM / sglang ITL samples: per request, the gaps between consecutive
    streamed chunks, pooled, s. Tokens with the same completion time form one
    chunk (they arrive in one streamed message), so a request's samples are
    ``diff(unique(times))``; one chunk gives no sample."""
    gaps = [np.diff(np.unique(np.asarray(x, dtype=np.float64))) for x in token_times]
    return np.concatenate(gaps) if gaps else np.zeros(0)


def llm_latency_table(token_times: Sequence[np.ndarray], arrival_s: Sequence[float] | None = None) -> "pd.DataFrame":
    """Summary table of LLM latencies, labelled by definition.

    Rows: (definition, metric) for LLMPerf TTFT, E2E latency, ITL (= E2E /
    output tokens), output tokens/s (per request), and vLLM TTFT, TPOT (per
    request), ITL (pooled gaps between consecutive streamed chunks of every
    request, :func:`chunk_gaps_s`), E2EL,
    output throughput (total output tokens / (last token - first arrival), a
    single value). Columns: p25 p50 p75 p90 p95 p99 mean std min max count.
    Times in seconds, rates in tokens/s.
    """
    import pandas as pd

    df = llm_request_latencies(token_times, arrival_s)
    gaps = chunk_gaps_s(token_times)
    arr = np.zeros(len(token_times)) if arrival_s is None else np.asarray(arrival_s, dtype=np.float64)
    dur = max(x[-1] for x in token_times) - arr.min() if len(token_times) else 0.0
    rows = {
        ("LLMPerf", "ttft_s"): summarize(df.ttft_s),
        ("LLMPerf", "e2e_latency_s"): summarize(df.e2e_latency_s),
        ("LLMPerf", "inter_token_latency_s (E2E/out, TTFT incl.)"): summarize(df.llmperf_itl_s),
        ("LLMPerf", "output_tokens_per_s (per request)"): summarize(df.llmperf_output_tokens_per_s),
        ("vLLM", "ttft_s"): summarize(df.ttft_s),
        ("vLLM", "tpot_s ((E2E-TTFT)/(out-1), per request)"): summarize(df.vllm_tpot_s),
        ("vLLM", "itl_s (pooled gaps between streamed chunks)"): summarize(gaps),
        ("vLLM", "e2el_s"): summarize(df.e2e_latency_s),
        ("vLLM", "output_throughput_tokens_per_s"): summarize([df.output_tokens.sum() / dur] if dur > 0 else []),
    }
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index = pd.MultiIndex.from_tuples(out.index, names=["definition", "metric"])
    return out


def dit_latency(schedule: Any, images: int = 1) -> dict[str, float]:
    """DiT latencies of a simulated DiT schedule: ``latency_per_image_s`` =
    makespan / images, ``latency_per_step_s`` = makespan / steps / images
    (steps = the schedule's denoising steps), and the per-step spread:
    ``step_time_s`` summary over the steps' spans (first start to last end of
    each step's tasks).

    ``images`` is the workload's batch (``DitWorkload.batch``), given by the
    caller: the schedules' own ``batch`` option is the step batch, which
    classifier-free guidance doubles (it was read as images, halving the
    per-image latency of every CFG model's baselines).

    Raises:
        ConfigError: ``images`` not an integer >= 1.
    """
    from flitsim.errors import check_int

    images = check_int("images", images, 1)
    run = schedule.require_run()
    mk = run.makespan_ps * 1e-12
    steps = max(int(schedule.steps), 1)
    t = run.tasks
    spans = []
    for k in np.unique(schedule.task_step):
        if k < 0:
            continue
        sel = schedule.task_step == k
        spans.append((t.end_ps.to_numpy()[sel].max() - t.start_ps.to_numpy()[sel].min()) * 1e-12)
    return {"images": images, "steps": steps, "latency_per_image_s": mk / images,
            "latency_per_step_s": mk / steps / images, "step_span_mean_s": float(np.mean(spans)) if spans else mk,
            "step_span_max_s": float(np.max(spans)) if spans else mk}


# ---------------------------------------------------------------------- fabric
def fabric_metrics(links: "pd.DataFrame", switch_ports: "pd.DataFrame", makespan_ps: int) -> dict[str, Any]:
    """Link/VC and switch-port figures from fabric statistics
    (:class:`flitsim.TransferResult` ``links`` / ``switch_ports``).

    Returns:
        dict with ``links`` (DataFrame per GPU port: utilization,
        credit_exhaustion_episodes, credit_exhaustion_ps, credit_exhaustion_per_us
        = episodes per microsecond of makespan, credit_exhaustion_share =
        exhausted time / makespan), ``switch_ports`` (DataFrame per (switch,
        port): output_utilization, conflicts, arbitration_conflict_rate =
        (input + output conflicts) / packets granted, mean_queueing_ns), and
        headline figures: max/mean link utilization, total credit-exhaustion
        episodes, max credit-exhaustion share, max conflict rate, max mean
        queueing (ns).
    """
    mk_us = max(makespan_ps, 1) / 1e6
    lk = links.copy()
    lk["credit_exhaustion_per_us"] = lk.credit_exhaustion_episodes / mk_us
    lk["credit_exhaustion_share"] = lk.credit_exhaustion_ps / max(makespan_ps, 1)
    sp = switch_ports.copy()
    granted = sp.packets_granted.clip(lower=1) if "packets_granted" in sp else 1
    sp["arbitration_conflict_rate"] = (sp.input_conflicts + sp.output_conflicts) / granted
    used = lk[lk.payload_bytes > 0] if "payload_bytes" in lk else lk
    return {
        "links": lk, "switch_ports": sp,
        "link_utilization_max": float(lk.utilization.max()) if len(lk) else 0.0,
        "link_utilization_mean_used": float(used.utilization.mean()) if len(used) else 0.0,
        "credit_exhaustion_episodes": int(lk.credit_exhaustion_episodes.sum()),
        "credit_exhaustion_share_max": float(lk.credit_exhaustion_share.max()) if len(lk) else 0.0,
        "arbitration_conflict_rate_max": float(sp.arbitration_conflict_rate.max()) if len(sp) else 0.0,
        "arbitration_conflicts": int((sp.input_conflicts + sp.output_conflicts).sum()),
        "mean_queueing_ns_max": float(sp.mean_queueing_ns.max()) if len(sp) else 0.0,
    }
