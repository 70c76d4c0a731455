"""Reports: metrics, critical path, PMF scorecard, figures, Perfetto traces,
DataFrames/Parquet, HTML, and scenario files (``flitsim run``).

Entry points: :func:`run_scenario` / :func:`load_scenario` (a TOML scenario to
a :class:`ScenarioResult`, ``.write(out_dir)``), :func:`schedule_metrics`,
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
from flitsim.report.scenario import Scenario, ScenarioResult, load_scenario, run_scenario
from flitsim.report.scorecard import THRESHOLDS, scorecard
from flitsim.report.trace import to_perfetto, trace_events

__all__ = ["CriticalPath", "critical_path", "PERCENTILES", "bubble_fraction", "dit_latency", "fabric_metrics",
           "llm_latency_table", "llm_request_latencies", "schedule_metrics", "summarize", "token_times_s",
           "Scenario", "ScenarioResult", "load_scenario", "run_scenario", "THRESHOLDS", "scorecard",
           "to_perfetto", "trace_events"]
