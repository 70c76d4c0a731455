"""LLM request workloads: the LLMPerf-style synthetic generator, arrival processes
(closed loop with fixed concurrency; open loop with Poisson or gamma arrivals),
and the :class:`LlmWorkload` table every LLM workload is expressed in.

A workload is defined by its input/output token-length distributions **and the
tokenizer that counted them** (docs/models_workloads.md), so :class:`LlmWorkload` carries
a ``tokenizer`` label.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pandas as pd
from pydantic import Field

from flitsim._spec import Spec
from flitsim.errors import config_error

__all__ = ["LlmWorkload", "LLMPerfSpec", "sample_positive_int_lengths", "llmperf_workload", "arrival_times_s"]

_COLUMNS = ("arrival_s", "input_tokens", "output_tokens")


@dataclass(frozen=True)
class LlmWorkload:
    """A list of LLM requests.

    Attributes:
        requests: DataFrame with one row per request and columns ``arrival_s``
            (float seconds from the first request; NaN under a closed loop, where
            a request is issued when a previous one finishes), ``input_tokens``,
            ``output_tokens`` (int64 >= 1).
        tokenizer: name of the tokenizer that counted the tokens (e.g.
            ``"llama-2"`` for LLMPerf, ``"serving-model"`` for the Azure trace).
        concurrency: closed-loop concurrency (requests in flight), or None for open loop.
        source: where the requests came from (generator spec, trace name/path).
    """

    requests: pd.DataFrame
    tokenizer: str
    concurrency: int | None = None
    source: str = ""
    meta: dict[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        missing = [c for c in _COLUMNS if c not in self.requests.columns]
        if missing:
            raise config_error("requests.columns", list(self.requests.columns), f"must include {list(_COLUMNS)}")
        for c in ("input_tokens", "output_tokens"):
            col = self.requests[c]
            if not pd.api.types.is_integer_dtype(col):
                raise config_error(c, str(col.dtype), "integer token counts")
            if len(col) and int(col.min()) < 0:
                raise config_error(c, int(col.min()), "token counts >= 0")

    def __len__(self) -> int:
        return len(self.requests)

    @property
    def is_closed_loop(self) -> bool:
        """True when requests have no arrival times (fixed concurrency)."""
        return self.concurrency is not None

    def with_tokens(self, input_tokens: np.ndarray, output_tokens: np.ndarray, tokenizer: str) -> "LlmWorkload":
        """A copy with new token counts, counted by ``tokenizer``."""
        df = self.requests.copy()
        df["input_tokens"] = np.asarray(input_tokens, dtype=np.int64)
        df["output_tokens"] = np.asarray(output_tokens, dtype=np.int64)
        return LlmWorkload(df, tokenizer, self.concurrency, self.source, dict(self.meta))


class LLMPerfSpec(Spec):
    """LLMPerf-style synthetic workload (ray-project/llmperf, token_benchmark_ray.py).

    Each length is ``int(gauss(mean, stddev))`` (truncation toward zero),
    redrawn until positive (>= 1), as llmperf's ``sample_random_positive_int``.
    Defaults are llmperf's: input N(550, 150), output N(150, 80); its README
    examples use output stddev 10. llmperf counts tokens with the Llama-2
    tokenizer (hf-internal-testing/llama-tokenizer) whatever model is served,
    hence ``tokenizer = "llama-2"``.

    Arrivals: ``closed`` (``concurrency`` requests in flight, llmperf's mode),
    ``poisson`` (rate ``rate_per_s``) or ``gamma`` (rate ``rate_per_s``,
    coefficient of variation ``cv`` of the inter-arrival times; cv = 1 is
    Poisson, as vLLM benchmark_serving's ``burstiness = 1 / cv^2``).

    Raises:
        ConfigError: negative means, non-positive stddev/rate/cv, missing
            ``rate_per_s`` for open loop, wrong types.
    """

    # Bounds keep the sampler finite: lengths beyond 1e7 tokens are not a
    # workload any model serves, and redrawing a huge-sigma normal until
    # positive would never end in int64.
    n_requests: int = Field(default=1000, ge=1, le=10_000_000)
    mean_input_tokens: float = Field(default=550, gt=0, le=1e7, allow_inf_nan=False)
    stddev_input_tokens: float = Field(default=150, ge=0, le=1e7, allow_inf_nan=False)
    mean_output_tokens: float = Field(default=150, gt=0, le=1e7, allow_inf_nan=False)
    stddev_output_tokens: float = Field(default=80, ge=0, le=1e7, allow_inf_nan=False)
    arrival: Literal["closed", "poisson", "gamma"] = "closed"
    concurrency: int = Field(default=1, ge=1)
    rate_per_s: float | None = Field(default=None, gt=0, le=1e9, allow_inf_nan=False)
    cv: float = Field(default=1.0, ge=1e-3, le=1e3, allow_inf_nan=False)
    seed: int = Field(default=0, ge=0, lt=2**63)
    tokenizer: str = "llama-2"

    def __init__(self, **data: object) -> None:
        super().__init__(**data)
        if self.arrival != "closed" and self.rate_per_s is None:
            raise config_error("LLMPerfSpec.rate_per_s", None, f"a rate > 0 for arrival = {self.arrival!r}")


def sample_positive_int_lengths(rng: np.random.Generator, n: int, mean: float, stddev: float) -> np.ndarray:
    """``n`` draws of llmperf's ``sample_random_positive_int``: ``int(gauss(mean,
    stddev))`` (truncating toward zero) redrawn until >= 1, vectorized.

    Returns:
        int64 array of shape ``(n,)``, every value >= 1.

    Raises:
        ConfigError: ``n < 0``, ``stddev < 0``, or a mean/stddev so low that
            positive draws are too rare to sample (P(X >= 1) < 1e-6).
    """
    if n < 0 or stddev < 0:
        raise config_error("n" if n < 0 else "stddev", n if n < 0 else stddev, ">= 0")
    if stddev == 0:
        if int(mean) < 1:
            raise config_error("mean", mean, "int(mean) >= 1 when stddev = 0")
        return np.full(n, int(mean), dtype=np.int64)
    if (1 - mean) / stddev > 4.75:
        raise config_error("mean", mean, f"a mean that gives positive lengths with stddev {stddev}")
    out = np.empty(n, dtype=np.int64)
    todo = np.arange(n)
    while todo.size:
        x = np.trunc(rng.normal(mean, stddev, size=todo.size)).astype(np.int64)
        ok = x > 0
        out[todo[ok]] = x[ok]
        todo = todo[~ok]
    return out


def arrival_times_s(rng: np.random.Generator, n: int, rate_per_s: float, cv: float = 1.0,
                    process: Literal["poisson", "gamma"] = "poisson") -> np.ndarray:
    """Open-loop arrival times, seconds from 0 (first request at its first gap).

    Inter-arrival gaps: exponential with mean ``1/rate_per_s`` (``poisson``), or
    gamma with shape ``k = 1/cv^2`` and scale ``1/(rate_per_s k)`` (``gamma``:
    same mean, coefficient of variation ``cv``).

    Returns:
        float64 array of shape ``(n,)``, non-decreasing.

    Raises:
        ConfigError: non-positive rate or cv, unknown process.
    """
    if not rate_per_s or not (0 < rate_per_s <= 1e9):
        raise config_error("rate_per_s", rate_per_s, "a finite rate in (0, 1e9] requests/s")
    if not (1e-3 <= cv <= 1e3):
        raise config_error("cv", cv, "a coefficient of variation in [0.001, 1000]")
    if process == "poisson":
        gaps = rng.exponential(1.0 / rate_per_s, size=n)
    elif process == "gamma":
        k = 1.0 / cv ** 2
        gaps = rng.gamma(k, 1.0 / (rate_per_s * k), size=n)
    else:
        raise config_error("process", process, "'poisson' or 'gamma'")
    return np.cumsum(gaps)


def llmperf_workload(spec: LLMPerfSpec | None = None, **overrides: object) -> LlmWorkload:
    """Generate an LLMPerf-style workload from ``spec`` (or keyword overrides of
    the defaults). Seeded with ``numpy.random.default_rng(spec.seed)``: same seed,
    same workload. Input lengths are drawn first, then output lengths, then arrivals.

    Returns:
        :class:`LlmWorkload` with ``spec.n_requests`` rows, ``tokenizer = spec.tokenizer``.

    Raises:
        ConfigError: invalid spec fields.
    """
    spec = spec.replace(**overrides) if spec is not None else LLMPerfSpec(**overrides)  # type: ignore[assignment]
    assert isinstance(spec, LLMPerfSpec)
    rng = np.random.default_rng(spec.seed)
    n = spec.n_requests
    inp = sample_positive_int_lengths(rng, n, spec.mean_input_tokens, spec.stddev_input_tokens)
    out = sample_positive_int_lengths(rng, n, spec.mean_output_tokens, spec.stddev_output_tokens)
    if spec.arrival == "closed":
        arr = np.full(n, np.nan)
        conc: int | None = spec.concurrency
    else:
        assert spec.rate_per_s is not None
        arr = arrival_times_s(rng, n, spec.rate_per_s, spec.cv, spec.arrival)
        conc = None
    df = pd.DataFrame({"arrival_s": arr, "input_tokens": inp, "output_tokens": out})
    return LlmWorkload(df, spec.tokenizer, conc, f"llmperf({spec.to_dict()})", {"spec": spec.to_dict()})
