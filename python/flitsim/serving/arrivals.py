"""Requests as the serving engine sees them: arrival time, prompt tokens,
output tokens, from any :class:`~flitsim.workloads.LlmWorkload`.

Arrival processes (:func:`request_table`):

- ``offline``: every request at t = 0 (MLPerf Inference's Offline scenario,
  vLLM benchmark_serving's ``--request-rate inf``);
- ``poisson`` / ``gamma`` at ``rate`` requests/s (vLLM benchmark_serving:
  exponential gaps, or gamma gaps with ``burstiness = 1 / cv^2``);
- ``trace``: the workload's own timestamps (the shipped Azure trace, or any
  CSV loaded with :func:`flitsim.workloads.load_trace` and its column mapping),
  optionally compressed by ``time_scale``.

Lengths always come from the workload (so a rate sweep over the Azure trace
keeps its length distribution and redraws only the arrival times).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from flitsim.errors import check_int, config_error

__all__ = ["RequestTable", "request_table", "ARRIVALS"]

ARRIVALS = ("offline", "poisson", "gamma", "trace")
"""Arrival processes of :func:`request_table`."""


@dataclass(frozen=True)
class RequestTable:
    """Requests sorted by arrival.

    Attributes:
        arrival_s: float64 seconds from the start, shape (n,), non-decreasing.
        input_tokens, output_tokens: int64 >= 1, shape (n,).
        tokenizer: label of the tokenizer that counted the tokens.
        source: where the requests came from.
        arrival: the arrival process (:data:`ARRIVALS`).
    """

    arrival_s: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    tokenizer: str = "unknown"
    source: str = ""
    arrival: str = "offline"

    def __len__(self) -> int:
        return int(self.arrival_s.shape[0])

    @property
    def max_kv_tokens(self) -> np.ndarray:
        """K/V tokens each request holds at its end: ``input + output - 1``
        (the last sampled token is never fed back), shape (n,)."""
        return self.input_tokens + self.output_tokens - 1


MAX_ARRIVAL_S = 1e9
"""Latest arrival a request table may have, seconds (~32 years): the serving
simulation keeps time in float seconds, whose resolution there is 0.12 us; at
rate 1e-300 (arrivals ~1e301 s) every TTFT and TPOT rounded to 0."""


def _rate(rate: Any) -> float:
    if isinstance(rate, bool) or not isinstance(rate, (int, float, np.integer, np.floating)) \
            or not np.isfinite(rate) or not 0 < rate <= 1e9:
        raise config_error("rate", rate, "a request rate in (0, 1e9] requests/s")
    return float(rate)


def request_table(workload: Any, *, arrival: str | None = None, rate: Any = None, cv: float = 1.0,
                  seed: int = 0, n: int | None = None, time_scale: float = 1.0) -> RequestTable:
    """The requests of ``workload`` with an arrival process.

    Args:
        workload: :class:`~flitsim.workloads.LlmWorkload`.
        arrival: one of :data:`ARRIVALS`; default ``poisson`` when ``rate`` is
            given, else ``trace`` for an open-loop workload with timestamps,
            else ``offline``.
        rate: requests/s for ``poisson`` / ``gamma``.
        cv: coefficient of variation of gamma gaps (1 = Poisson).
        seed: seed of the arrival draw (the lengths are the workload's).
        n: keep the first ``n`` requests (default all).
        time_scale: ``trace`` only: arrival times divided by this (2 = twice the load).

    Raises:
        ConfigError: not an LlmWorkload; ``rate`` <= 0, not finite or missing
            for poisson/gamma; unknown ``arrival``; ``trace`` on a workload
            without timestamps; requests with 0 input or output tokens
            (drop them first: a request that generates nothing has no TTFT).
    """
    from flitsim.workloads import LlmWorkload
    from flitsim.workloads.llm import arrival_times_s

    if not isinstance(workload, LlmWorkload):
        raise config_error("workload", type(workload).__name__, "an LlmWorkload (flitsim.workloads)")
    df = workload.requests
    if n is not None:
        df = df.iloc[:check_int("n", n, 1)]
    if len(df) == 0:
        raise config_error("workload.requests", 0, "at least one request")
    inp = df["input_tokens"].to_numpy(np.int64)
    out = df["output_tokens"].to_numpy(np.int64)
    for name, col in (("input_tokens", inp), ("output_tokens", out)):
        if (col < 1).any():
            i = int(np.argmax(col < 1))
            raise config_error(f"workload.requests.{name}[{i}]", int(col[i]),
                               f">= 1 token ({int((col < 1).sum())} requests have 0; drop them, "
                               f"e.g. requests[requests.{name} > 0])")
    ts = df["arrival_s"].to_numpy(np.float64)
    has_ts = not np.isnan(ts).any()
    if arrival is None:
        arrival = "poisson" if rate is not None else ("trace" if has_ts and not workload.is_closed_loop else "offline")
    if arrival not in ARRIVALS:
        raise config_error("arrival", arrival, f"one of {list(ARRIVALS)}")
    if arrival in ("poisson", "gamma"):
        if rate is None:
            raise config_error("rate", None, f"a request rate > 0 for arrival = {arrival!r}")
        rng = np.random.default_rng(check_int("seed", seed, 0))
        t = arrival_times_s(rng, len(inp), _rate(rate), cv, arrival)  # type: ignore[arg-type]
    elif arrival == "trace":
        if not has_ts:
            raise config_error("arrival", "trace", "a workload with arrival timestamps (this one has none: "
                               "closed loop); use 'offline' or a rate")
        if not (isinstance(time_scale, (int, float)) and np.isfinite(time_scale) and time_scale > 0):
            raise config_error("time_scale", time_scale, "a finite factor > 0")
        t = (ts - ts.min()) / float(time_scale)
    else:
        if rate is not None:
            raise config_error("rate", rate, "no rate for arrival = 'offline' (every request at t = 0)")
        t = np.zeros(len(inp))
    if len(t) and not float(np.max(t)) <= MAX_ARRIVAL_S:
        field, value = ("time_scale", time_scale) if arrival == "trace" else ("rate", rate)
        raise config_error(field, value, f"arrivals within {MAX_ARRIVAL_S:.0e} s (the last of {len(t)} requests "
                                         f"arrives at {float(np.max(t)):.3g} s; serving times are float seconds, "
                                         "which keep microseconds only below that)")
    order = np.argsort(t, kind="stable")
    return RequestTable(np.ascontiguousarray(t[order]), inp[order], out[order], workload.tokenizer,
                        workload.source, arrival)
