"""Reports: metrics, critical path, PMF scorecard, figures and Perfetto traces
of simulated schedules. Scenario files and ``flitsim run`` live in
:mod:`flitsim.scenario`, which uses this package.

Entry points: :func:`schedule_metrics`,
:func:`critical_path`, :func:`scorecard`, :func:`llm_latency_table`,
:func:`dit_latency`, :func:`trace_events` / :func:`to_perfetto`, and the plots
in :mod:`flitsim.report.plots`.
"""

from flitsim.report.critical_path import CriticalPath, critical_path
from flitsim.report.metrics import (
    PERCENTILES,
    bubble_fraction,
    dit_latency,
    fabric_metrics,
    llm_latency_table,
    llm_request_latencies,
    schedule_metrics,
    summarize,
    token_times_s,
)
from flitsim.report.scorecard import THRESHOLDS, scorecard
from flitsim.report.trace import to_perfetto, trace_events

__all__ = ["CriticalPath", "critical_path", "PERCENTILES", "bubble_fraction", "dit_latency", "fabric_metrics",
           "llm_latency_table", "llm_request_latencies", "schedule_metrics", "summarize", "token_times_s",
           "THRESHOLDS", "scorecard",
           "to_perfetto", "trace_events"]


_MOVED = {"Scenario", "ScenarioResult", "load_scenario", "run_scenario"}


def __getattr__(name: str) -> object:
    # The scenario runner moved up a layer; say where instead of a bare AttributeError
    # (importing it from here would point an import up a layer).
    if name in _MOVED:
        raise AttributeError(f"flitsim.report.{name} moved to flitsim.scenario.{name}")
    raise AttributeError(f"module 'flitsim.report' has no attribute {name!r}")
