"""Scenarios: the main job (``flitsim run``). A TOML file names a fabric, a
GPU, cases (model + workload) and the schedules to compare; running it
simulates them all and writes the report.

Modules, in the order the data flows: :mod:`~flitsim.scenario.spec` (the
file's schema, :func:`load_scenario`, the fabric it names),
:mod:`~flitsim.scenario.cases` (each case's workload and representative
lengths), :mod:`~flitsim.scenario.run` (:func:`run_scenario`),
:mod:`~flitsim.scenario.result` (:class:`ScenarioResult`, the conclusion) and
:mod:`~flitsim.scenario.write` (tables, traces, figures, ``report.html``,
``results.json``). Metrics, critical paths, scorecards, plots and traces live in
:mod:`flitsim.report`.
"""

from flitsim.scenario.result import RunRecord, ScenarioResult
from flitsim.scenario.run import run_scenario
from flitsim.scenario.spec import Scenario, load_scenario
from flitsim.scenario.write import prepare_out_dir, scenario_json, write_report

__all__ = ["Scenario", "load_scenario", "run_scenario", "RunRecord", "ScenarioResult", "prepare_out_dir",
           "scenario_json", "write_report"]
