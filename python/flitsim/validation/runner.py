"""Run validation cases and summarise them: measured vs simulated, error,
tolerance and verdict per case; MAPE per tag and system, transfer error
apart from calibration error (never mixed)."""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from flitsim.errors import ConfigError
from flitsim.validation.case import TAGS, Case, Outcome
from flitsim.validation.context import Context, load_calibration, resolve_fabric
from flitsim.validation.registry import select

if TYPE_CHECKING:
    from flitsim.hardware.fabric import FabricSpec


@dataclass(frozen=True)
class SummaryRow:
    """MAPE of the cases of one (tag, system); system ``all`` for a whole tag."""

    tag: str
    system: str
    cases: int
    mape_pct: float
    worst_pct: float
    worst_id: str
    failed: int
    known_misses: int

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Report:
    """Outcome of :func:`run`: ``outcomes`` (one per case), ``fabric`` (the
    override, if any), ``calibration`` (its path, if any), ``fast``."""

    outcomes: tuple[Outcome, ...]
    fabric: str | None = None
    calibration: str | None = None
    fast: bool = False

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.verdict == "fail"]

    @property
    def ok(self) -> bool:
        """No case failed (known misses and skips do not fail a run)."""
        return not self.failed

    def summary(self) -> list[SummaryRow]:
        """Rows per (tag, system) in tag order, each tag closed by its ``all`` row."""
        rows: list[SummaryRow] = []
        for tag in TAGS:
            ran = [o for o in self.outcomes if o.case.tag == tag and o.error is not None]
            if not ran:
                continue
            for system in sorted({o.case.system for o in ran}):
                rows.append(_row(tag, system, [o for o in ran if o.case.system == system]))
            rows.append(_row(tag, "all", ran))
        return rows

    def to_dict(self) -> dict[str, Any]:
        return {"fabric": self.fabric, "calibration": self.calibration, "fast": self.fast, "ok": self.ok,
                "cases": [o.to_dict() for o in self.outcomes], "summary": [r.to_dict() for r in self.summary()]}

    def to_pandas(self) -> Any:
        import pandas as pd

        return pd.DataFrame([o.to_dict() for o in self.outcomes])


def _row(tag: str, system: str, outs: Sequence[Outcome]) -> SummaryRow:
    errs = [abs(o.error) for o in outs if o.error is not None and math.isfinite(o.error)]
    worst = max(outs, key=lambda o: abs(o.error) if o.error is not None and math.isfinite(o.error) else math.inf)
    inf = any(o.error is not None and not math.isfinite(o.error) for o in outs)
    return SummaryRow(tag, system, len(outs), 100 * sum(errs) / max(len(errs), 1) if not inf else math.inf,
                      100 * abs(worst.error) if worst.error is not None else math.nan, worst.case.id,
                      sum(o.verdict == "fail" for o in outs), sum(o.verdict == "known miss" for o in outs))


def run_case(case: Case, ctx: Context) -> Outcome:
    """Run one case under ``ctx``; never raises for the case's own failures
    (they become a ``fail`` verdict with the error in ``note``), except
    KeyboardInterrupt."""
    ctx = replace(ctx, current=case)
    fab = ctx.fabric_name()
    if case.requires is not None:
        why = case.requires()
        if why:
            return Outcome(case, None, None, "skipped", why, fab)
    if fab is not None and ctx.fabric_override is not None and ctx.fabric_override.gpus < case.min_gpus:
        return Outcome(case, None, None, "skipped",
                       f"needs {case.min_gpus} GPUs; fabric {fab!r} has {ctx.fabric_override.gpus}", fab)
    t0 = time.perf_counter()
    try:
        got = case.compute(ctx)
        detail = ""
        if isinstance(got, tuple):  # (value, what ran: e.g. "nvls/simple")
            got, detail = got
        sim = float(got)
    except ConfigError as e:
        wall = time.perf_counter() - t0
        if ctx.fabric_override is not None:  # the user's fabric cannot run this case (e.g. no NVLS)
            return Outcome(case, None, None, "skipped", f"not runnable on {fab!r}: {e}", fab, wall)
        return Outcome(case, None, None, "fail", f"ConfigError: {e}", fab, wall)
    except Exception as e:  # noqa: BLE001 - a broken case is a failed case, reported with its error
        return Outcome(case, None, None, "fail", f"{type(e).__name__}: {e}", fab, time.perf_counter() - t0)
    wall = time.perf_counter() - t0
    err = case.error_of(sim) if math.isfinite(sim) else math.inf
    ran = f"{detail}; " if detail else ""
    if case.within(err):
        note = "listed as a known miss but now within tolerance: update the case" if case.known_miss else ""
        return Outcome(case, sim, err, "pass", (ran + note).strip("; "), fab, wall)
    if case.known_miss:
        return Outcome(case, sim, err, "known miss", ran + case.known_miss, fab, wall)
    return Outcome(case, sim, err, "fail", ran + "outside tolerance", fab, wall)


def make_context(fabric: "str | os.PathLike[str] | FabricSpec | None" = None,
                 calibration: "str | os.PathLike[str] | dict[str, Any] | None" = None,
                 fast: bool = False, cases: Sequence[Case] = ()) -> Context:
    """The run's context, checked.

    Raises:
        ConfigError: an unknown fabric; a calibration file fitted on another
            fabric than ``fabric`` (or, without ``fabric``, on a fabric none of
            ``cases`` runs on), or one that does not name its fabric.
    """
    over = resolve_fabric(fabric) if fabric is not None else None
    cal_fab: str | None = None
    params: dict[str, Any] = {}
    if calibration is not None:
        cal_fab, params = load_calibration(calibration)
        where = calibration if isinstance(calibration, dict) else os.fspath(calibration)
        if over is not None and cal_fab != over.name:
            raise ConfigError(f"calibration = {where!r}: fitted on fabric {cal_fab!r}, but the run is on "
                              f"fabric {over.name!r}; calibrate on that fabric (flitsim calibrate nccl-tests "
                              f"LOG -F {over.name}) or drop --fabric")
        if over is None and cases:
            used = sorted({c.fabric for c in cases if c.fabric is not None})
            if cal_fab not in used:
                raise ConfigError(f"calibration = {where!r}: fitted on fabric {cal_fab!r}, but no selected "
                                  f"case runs on it (they run on {used or 'no fabric'}); pass --fabric "
                                  f"{cal_fab} to run the cases on it")
    return Context(over, cal_fab, params, fast)


def run(case_ids: Iterable[str] = (), tags: Iterable[str] = (), *, areas: Iterable[str] = (),
        fabric: "str | os.PathLike[str] | FabricSpec | None" = None,
        calibration: "str | os.PathLike[str] | dict[str, Any] | None" = None, fast: bool = False,
        progress: Callable[[Outcome], None] | None = None) -> Report:
    """Run the selected validation cases.

    Args:
        case_ids: case ids (or area prefixes ending in ``.``/``*``); empty: all.
        tags: ``theory`` / ``calibration`` / ``transfer``; empty: all.
        areas: area names (``collectives``, ``switch``, ...); empty: all.
        fabric: run every fabric case on this fabric (preset name, fabric TOML or
            FabricSpec) instead of its own; cases that use no fabric are left out.
        calibration: a ``flitsim calibrate nccl-tests`` parameter file (or a dict
            with ``fabric`` and the parameters); applies to cases on its fabric.
        fast: only the CI subset.
        progress: called with each outcome as it completes.

    Returns:
        :class:`Report`.

    Raises:
        ConfigError: unknown case / tag / area / fabric; a calibration for another fabric.
    """
    cases = select(case_ids, tags, areas, fast)
    if fabric is not None:
        cases = [c for c in cases if c.fabric is not None]
    ctx = make_context(fabric, calibration, fast, cases)
    outs = []
    for c in cases:
        o = run_case(c, ctx)
        outs.append(o)
        if progress is not None:
            progress(o)
    cal = None if calibration is None else ("(dict)" if isinstance(calibration, dict) else os.fspath(calibration))
    return Report(tuple(outs), None if ctx.fabric_override is None else ctx.fabric_override.name, cal, fast)
