"""Trace replay from CSV, the shipped Azure LLM inference trace, and length
distribution summaries (LLMPerf-style percentiles) for side-by-side comparison."""

from __future__ import annotations

import os
from importlib import resources
from typing import Mapping

import numpy as np
import pandas as pd

from flitsim.errors import check_int, config_error
from flitsim.workloads.llm import LlmWorkload, llmperf_workload

__all__ = ["TRACES", "trace_path", "load_trace", "length_summary", "compare_length_distributions",
           "SUMMARY_STATS"]

#: Traces shipped inside the package: name -> (file in flitsim/data, column mapping, tokenizer label).
TRACES: dict[str, tuple[str, dict[str, str], str]] = {
    "azure-conv-2023": (
        "azure_llm_inference_2023_conv.csv",
        {"timestamp": "TIMESTAMP", "input_tokens": "ContextTokens", "output_tokens": "GeneratedTokens"},
        "serving-model",
    ),
}

#: Statistics of :func:`length_summary`: LLMPerf's summary set
#: (ray-project/llmperf token_benchmark_ray.py).
SUMMARY_STATS = ("count", "mean", "std", "min", "p25", "p50", "p75", "p90", "p95", "p99", "max")


def trace_path(name: str) -> str:
    """Filesystem path of a shipped trace (``azure-conv-2023``: the Azure LLM
    inference trace 2023, conversation service, CC BY 4.0; attribution in
    flitsim/data/README.md: Patel et al., "Splitwise", ISCA 2024).

    Raises:
        ConfigError: unknown trace name.
    """
    if name not in TRACES:
        raise config_error("trace", name, f"one of {sorted(TRACES)} or a CSV path")
    return str(resources.files("flitsim").joinpath("data", TRACES[name][0]))


def load_trace(source: str | os.PathLike[str], columns: Mapping[str, str] | None = None, *,
               tokenizer: str | None = None, time_unit: str = "s", limit: int | None = None) -> LlmWorkload:
    """Load a request trace from CSV for open-loop replay.

    Args:
        source: a shipped trace name (``"azure-conv-2023"``) or a CSV path.
        columns: mapping from flitsim's fields ``timestamp``, ``input_tokens``,
            ``output_tokens`` to the CSV's column names (default: the shipped
            trace's mapping, else the field names themselves, else a shipped
            trace's mapping when the CSV has its header, e.g. the Azure
            trace's ``TIMESTAMP,ContextTokens,GeneratedTokens``).
        tokenizer: label of the tokenizer that counted the tokens (default
            ``"serving-model"`` for shipped traces, else ``"unknown"``).
        time_unit: unit of numeric timestamps (``s``, ``ms``, ``us``, ``ns``);
            string timestamps are parsed as dates.
        limit: keep only the first ``limit`` requests.

    Returns:
        :class:`LlmWorkload` with ``arrival_s`` relative to the first request
        (rows sorted by time), open loop.

    Raises:
        ConfigError: missing file, unknown trace name, missing columns, a
            header without rows, non-integer or negative token counts, a
            ``limit`` that is not an integer >= 1,
            unparsable timestamps.
    """
    if not isinstance(source, (str, os.PathLike)):
        raise config_error("trace", source, f"a CSV path or one of {sorted(TRACES)}")
    src = os.fspath(source)
    if src in TRACES:
        path, default_cols, tok = trace_path(src), TRACES[src][1], TRACES[src][2]
    else:
        if not os.path.isfile(src):
            raise config_error("trace", src, f"an existing CSV file or one of {sorted(TRACES)}")
        path, default_cols, tok = src, {k: k for k in ("timestamp", "input_tokens", "output_tokens")}, "unknown"
    if limit is not None:
        limit = check_int("limit", limit, 1, what="a request count")
    cols = dict(default_cols)
    if columns is not None:
        unknown = set(columns) - set(cols)
        if unknown:
            raise config_error("columns", dict(columns), "keys among 'timestamp', 'input_tokens', 'output_tokens'")
        cols.update(columns)
    try:
        df = pd.read_csv(path, nrows=limit)
    except (OSError, ValueError) as e:
        raise config_error("trace", src, f"a readable CSV ({e})") from None
    missing = [v for v in cols.values() if v not in df.columns]
    if missing and columns is None:  # a copy of a shipped trace, under its own header
        known = [m for _, m, _ in TRACES.values() if all(v in df.columns for v in m.values())]
        if known:
            cols, missing = dict(known[0]), []
    if missing:
        raise config_error("columns", cols, f"columns present in the CSV; missing {missing}, have {list(df.columns)}")
    if not len(df):
        raise config_error("trace", src, "a CSV with at least one request: it has a header but no rows")
    ts = df[cols["timestamp"]]
    if pd.api.types.is_numeric_dtype(ts):
        scale = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}.get(time_unit)
        if scale is None:
            raise config_error("time_unit", time_unit, "one of 's', 'ms', 'us', 'ns'")
        t = ts.to_numpy(dtype=float) * scale
    else:
        try:
            t = (pd.to_datetime(ts) - pd.Timestamp(0)).dt.total_seconds().to_numpy()
        except (ValueError, TypeError) as e:
            raise config_error("timestamp", ts.iloc[0] if len(ts) else None, f"parsable times ({e})") from None
    bad = np.flatnonzero(~np.isfinite(t))
    if len(bad):  # an empty cell or NaT would become a NaN arrival time
        i = int(bad[0])
        raise config_error(f"timestamp (row {i}, column {cols['timestamp']!r})", str(ts.iloc[i]),
                           "a finite time in every row")
    out = {}
    for field in ("input_tokens", "output_tokens"):
        col = df[cols[field]]
        from flitsim.limits import MAX_SEQ_TOKENS

        # every cell a whole token count in 0..=MAX_SEQ_TOKENS ("100.0" is one; NaN, 100.5, 1e30, -5 are not);
        # the first offending cell is named (the column's dtype, 'float64', told the user nothing)
        num = pd.to_numeric(col, errors="coerce").astype("float64").to_numpy()
        badc = np.flatnonzero(~(np.isfinite(num) & (num == np.floor(num)) & (num >= 0) & (num <= MAX_SEQ_TOKENS)))
        if len(badc):
            i = int(badc[0])
            raise config_error(f"{field} (row {i}, column {cols[field]!r})", str(col.iloc[i]),
                               f"a whole token count in 0..={MAX_SEQ_TOKENS} in every row")
        col = pd.Series(num.astype(np.int64))
        out[field] = col.to_numpy(dtype=np.int64)
    order = np.argsort(t, kind="stable")
    t = t[order]
    req = pd.DataFrame({"arrival_s": t - (t[0] if len(t) else 0.0),
                        "input_tokens": out["input_tokens"][order], "output_tokens": out["output_tokens"][order]})
    return LlmWorkload(req, tokenizer or tok, None, src, {"columns": cols})


def length_summary(workloads: Mapping[str, LlmWorkload]) -> pd.DataFrame:
    """Token-length distributions side by side.

    Args:
        workloads: label -> workload.

    Returns:
        DataFrame with a (workload, field) MultiIndex (field = ``input_tokens``,
        ``output_tokens``), columns :data:`SUMMARY_STATS` (std is the sample
        std, ddof = 1; percentiles linear-interpolated) and ``tokenizer``.
    """
    rows = []
    for label, w in workloads.items():
        for field in ("input_tokens", "output_tokens"):
            x = w.requests[field].to_numpy(dtype=float)
            q = np.percentile(x, [25, 50, 75, 90, 95, 99]) if len(x) else [np.nan] * 6
            rows.append({"workload": label, "field": field, "count": len(x), "mean": x.mean() if len(x) else np.nan,
                         "std": x.std(ddof=1) if len(x) > 1 else np.nan, "min": x.min() if len(x) else np.nan,
                         **dict(zip(("p25", "p50", "p75", "p90", "p95", "p99"), q)),
                         "max": x.max() if len(x) else np.nan, "tokenizer": w.tokenizer})
    return pd.DataFrame(rows).set_index(["workload", "field"])


def compare_length_distributions(trace: str = "azure-conv-2023", n_llmperf: int = 20000,
                                 seed: int = 0, stddev_output_tokens: float = 80) -> pd.DataFrame:
    """The shipped trace's length distribution next to LLMPerf's default
    (input N(550,150), output N(150, ``stddev_output_tokens``), ``n_llmperf``
    requests, ``seed``). See :func:`length_summary` for the columns.

    Raises:
        ConfigError: unknown trace or bad generator arguments.
    """
    return length_summary({trace: load_trace(trace),
                           "llmperf": llmperf_workload(n_requests=n_llmperf, seed=seed,
                                                       stddev_output_tokens=stddev_output_tokens)})
