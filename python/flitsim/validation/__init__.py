"""Validation: every comparison flitsim makes with theory and measurement, as
a registry of cases that anyone can rerun (``flitsim validate``).

A :class:`Case` holds the published or closed-form value, its citation, the
tolerance and why, the tag (``theory`` / ``calibration`` with the fitted
parameter / ``transfer``) and the flitsim call that computes the simulated
value; :func:`run` runs a selection and returns a :class:`Report` (per-case
verdicts, MAPE per tag and system). Cases live one module per area in
``flitsim/validation/cases/``; see docs/validation.md to add one.

    >>> from flitsim import validation
    >>> rep = validation.run(tags=["theory"], fast=True)
    >>> rep.ok, rep.summary()[0].mape_pct
"""

from flitsim.validation.case import TAGS, Case, Outcome
from flitsim.validation.context import Context, load_calibration, resolve_fabric
from flitsim.validation.registry import all_cases, get_case, select
from flitsim.validation.runner import Report, SummaryRow, run, run_case

__all__ = ["TAGS", "Case", "Outcome", "Context", "load_calibration", "resolve_fabric", "all_cases", "get_case",
           "select", "Report", "SummaryRow", "run", "run_case"]
