"""One validation case: a published or closed-form value, the flitsim call
that reproduces it, and how close it must come.

A case never holds a simulated number: ``compute`` runs the simulator each
time the case is run (``flitsim validate``), so the registry cannot drift
from the code. Errors are relative (``error = simulated / measured - 1``, or,
for a rate quoted as a time error, ``measured / simulated - 1``), so MAPE
across cases of different units is meaningful."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Literal

from flitsim.errors import ConfigError

if TYPE_CHECKING:
    from flitsim.validation.context import Context

Tag = Literal["theory", "calibration", "transfer"]
TAGS: tuple[str, ...] = ("theory", "calibration", "transfer")
"""``theory``: a closed form or a classic analytic result (no measurement).
``calibration``: measured data a flitsim parameter was fitted on (the case
names the parameter in ``fitted``): agreement there shows the fit, not the model.
``transfer``: measured data no parameter was fitted on: the figure to believe."""

ErrorKind = Literal["relative", "time_of_rate"]
"""``relative``: simulated / measured - 1. ``time_of_rate``: the quantity is a
rate (busbw, GB/s) and the error is quoted on time, measured / simulated - 1
(as docs/collectives.md's table does)."""

Verdict = Literal["pass", "fail", "known miss", "skipped"]


@dataclass(frozen=True)
class Case:
    """A validation case.

    Attributes:
        id: unique, lower-case, dotted by area (``collectives.h100.ar_ring_2g_n8``).
        area: the module it lives in (``switch``, ``ledger``, ``collectives``, ...).
        quantity: what is compared, in words ("8xH100 all_reduce ring busbw").
        unit: unit of ``measured`` and of the simulated value (``GB/s``, ``us``, ``s``,
            ``flits/port/cycle``, ``bytes``, ``GB``).
        source: citation of the measured / expected value (paper, log, datasheet).
        measured: the published (or closed-form) value, > 0.
        tolerance: allowed |error| as a fraction (0.05 = 5 %); 0 means exact (1e-9).
        tolerance_why: why this tolerance (sampling error, precision of the source, ...).
        call: the flitsim call that computes the simulated value, as a user would type it.
        compute: ``compute(ctx) -> float`` (or ``(float, str)``: the value and what ran,
            e.g. ``"nvls/simple"``) runs the simulator; ``ctx`` carries the
            fabric and calibration to use (:class:`flitsim.validation.Context`).
        tag: ``theory`` | ``calibration`` | ``transfer`` (see :data:`TAGS`).
        fitted: for ``calibration``: the parameter(s) fitted on this datum (required).
        system: hardware family the value belongs to (``H100``, ``H200``, ``L40``, ``switch lab``).
        size_band: size class (``>= 256 MiB``, ``1024 px``, ``-``).
        fabric: the fabric preset the case runs on (None: it uses no fabric). ``--fabric``
            replaces it; ``min_gpus`` is how many GPUs the case needs.
        fast: part of ``flitsim validate --fast`` (the CI subset: < 60 s in all).
        error: :data:`ErrorKind`.
        known_miss: why the case is expected to miss (said plainly); a miss then does
            not fail the run, and is listed as one.
        requires: ``requires() -> str | None``: a reason to skip (a preset or package that
            does not exist yet), checked before ``compute``; never a fake pass.

    Raises:
        ConfigError: at construction, for a missing source / tolerance / call, an
            unknown tag, a calibration case without ``fitted``, a non-positive value.
    """

    id: str
    area: str
    quantity: str
    unit: str
    source: str
    measured: float
    tolerance: float
    tolerance_why: str
    call: str
    compute: Callable[["Context"], Any] = field(repr=False, compare=False)
    tag: Tag = "transfer"
    fitted: str = ""
    system: str = "-"
    size_band: str = "-"
    fabric: str | None = None
    min_gpus: int = 0
    fast: bool = False
    error: ErrorKind = "relative"
    known_miss: str = ""
    requires: Callable[[], str | None] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        where = f"validation case {self.id!r}"
        if not self.id or self.id != self.id.strip().lower() or " " in self.id:
            raise ConfigError(f"{where}: id must be a non-empty lower-case name without spaces")
        for name in ("area", "quantity", "unit", "source", "tolerance_why", "call"):
            if not str(getattr(self, name)).strip():
                raise ConfigError(f"{where}: {name} is empty; every case states it")
        if self.tag not in TAGS:
            raise ConfigError(f"{where}: tag = {self.tag!r}: expected one of {list(TAGS)}")
        if self.tag == "calibration" and not self.fitted.strip():
            raise ConfigError(f"{where}: a calibration case must name the parameter it fitted (fitted=...)")
        if self.tag != "calibration" and self.fitted:
            raise ConfigError(f"{where}: fitted = {self.fitted!r} on a {self.tag} case; only calibration "
                              "cases fit parameters")
        m, t = float(self.measured), float(self.tolerance)
        if not (math.isfinite(m) and m > 0):
            raise ConfigError(f"{where}: measured = {self.measured!r}: expected a finite value > 0")
        if not (math.isfinite(t) and 0 <= t < 1):
            raise ConfigError(f"{where}: tolerance = {self.tolerance!r}: expected a fraction in [0, 1)")
        if self.error not in ("relative", "time_of_rate"):
            raise ConfigError(f"{where}: error = {self.error!r}: expected 'relative' or 'time_of_rate'")
        if not callable(self.compute):
            raise ConfigError(f"{where}: compute must be callable as compute(ctx) -> float")

    def error_of(self, simulated: float) -> float:
        """Relative error of ``simulated`` against ``measured`` (see :data:`ErrorKind`)."""
        if self.error == "time_of_rate":
            return self.measured / simulated - 1.0 if simulated > 0 else math.inf
        return simulated / self.measured - 1.0

    def within(self, err: float) -> bool:
        """Whether ``err`` is inside the tolerance (0 tolerance: |err| <= 1e-9)."""
        return abs(err) <= max(self.tolerance, 1e-9)


@dataclass(frozen=True)
class Outcome:
    """One case run: ``simulated`` (None when skipped), ``error`` (relative),
    ``verdict`` and ``note`` (skip reason, known-miss reason, what ran),
    ``fabric`` (what it ran on), ``wall_s``."""

    case: Case
    simulated: float | None
    error: float | None
    verdict: Verdict
    note: str = ""
    fabric: str | None = None
    wall_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        c = self.case
        return {"id": c.id, "area": c.area, "quantity": c.quantity, "unit": c.unit, "tag": c.tag,
                "fitted": c.fitted, "system": c.system, "size_band": c.size_band, "source": c.source,
                "measured": c.measured, "simulated": self.simulated,
                "error_pct": None if self.error is None else 100 * self.error,
                "tolerance_pct": 100 * c.tolerance, "tolerance_why": c.tolerance_why,
                "verdict": self.verdict, "note": self.note, "fabric": self.fabric, "call": c.call,
                "known_miss": c.known_miss, "wall_s": self.wall_s}
