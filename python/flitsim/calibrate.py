"""Fit the non-public collective parameters to your own nccl-tests logs.

Only parameters that no public source gives are fitted (docs/collectives.md,
"Calibration"); NCCL's published constants (latencies, protocol rates) and the
link rates stay as they are. What each fitted parameter moves:

- ``host_launch_ps``: a constant added to every collective (host launch and
  nccl-tests' timing around it): fitted in closed form, the relative-error
  least-squares shift over every row;
- ``nvls_base_ps``: NVLS latency (changes which algorithm ``auto`` picks, so
  fitted by a bounded 1-D search on the rows below 4 MiB);
- ``nvls_efficiency``: the NVLS engine rate: fitted by a bounded 1-D search
  on the rows from 64 MiB.

The result writes a TOML parameter file (``[collective]`` table) that
:func:`flitsim.collective`, :func:`flitsim.nccl_tests`,
:class:`flitsim.FabricNetwork` and scenario files (``[fabric]
collective_params``) accept.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from flitsim._notebook import notebook
from flitsim.errors import ConfigError
from flitsim.limits import MAX_TIME_PS
from flitsim.nccl_log import NcclLog, parse

if TYPE_CHECKING:
    import pandas as pd

FITTABLE = ("host_launch_ps", "nvls_base_ps", "nvls_efficiency")
_BOUNDS = {"nvls_base_ps": (0.0, 50e6), "nvls_efficiency": (0.2, 1.5)}
_SMALL = 4 << 20
_LARGE = 64 << 20


@notebook("fabric", "mape_pct", "params")
@dataclass(frozen=True)
class Calibration:
    """Outcome of :func:`fit`.

    Attributes:
        fabric: fabric name. params: the fitted parameters (only those fitted).
        residuals: one row per log row: log, line, op, size, measured_us,
            simulated_us, error_pct (simulated / measured - 1), algorithm,
            protocol, used (whether the row took part in the fit).
        mape_pct: mean absolute error over the rows used.
        notes: what was not fitted and why (``nvls_base_ps: not fitted (no
            NVLS rows)``), rows left out and why (time 0 or NaN, #wrong).
    """

    fabric: str
    params: dict[str, Any]
    residuals: list[dict[str, Any]] = field(default_factory=list)
    mape_pct: float = 0.0
    logs: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def to_pandas(self) -> "pd.DataFrame":
        import pandas as pd

        return pd.DataFrame(self.residuals)

    def to_toml(self) -> str:
        """The parameter file's text."""
        lines = ["# flitsim collective parameters fitted by `flitsim calibrate nccl-tests`",
                 f"# fabric: {self.fabric}; logs: {', '.join(self.logs)}",
                 f"# MAPE over the fitted rows: {self.mape_pct:.1f} %",
                 # machine-readable: `flitsim validate --calibration` refuses the file on another fabric
                 f"fabric = {json.dumps(self.fabric)}", "", "[collective]"]
        for k, v in self.params.items():
            lines.append(f"{k} = {int(v) if k.endswith('_ps') else repr(float(v))}")
        return "\n".join(lines) + "\n"

    def write(self, path: str | os.PathLike[str]) -> None:
        """Write the parameter file (refuses a directory, one of its own logs, and
        an existing file that is not a parameter file: see :func:`check_params_out`)."""
        check_params_out(path, self.logs)
        Path(path).write_text(self.to_toml(), encoding="utf-8")


_PARAMS_HEADER = "# flitsim collective parameters fitted by"


def check_params_out(path: str | os.PathLike[str], logs: Sequence[str | os.PathLike[str]] = ()) -> None:
    """Check that a parameter file may be written at ``path`` (before a fit):
    not a directory, not one of the input ``logs``, and either new or an
    earlier parameter file (first line ``# flitsim collective parameters
    fitted by ...``): any other existing file is the user's and is kept.

    Raises:
        ConfigError: naming ``out``, the path and why it is refused.
    """
    p = Path(path)
    if p.is_dir():
        raise ConfigError(f"out = {str(p)!r}: is a directory; expected a file name like params.toml")
    if not p.exists():
        return
    for lg in logs:
        if Path(lg).exists() and os.path.samefile(p, lg):
            raise ConfigError(f"out = {str(p)!r}: is one of the input logs; the parameter file would overwrite it")
    try:
        with p.open(encoding="utf-8", errors="replace") as fh:
            first = fh.readline()
    except OSError as e:
        raise ConfigError(f"out = {str(p)!r}: cannot be read to check it ({e})") from None
    if not first.startswith(_PARAMS_HEADER):
        raise ConfigError(f"out = {str(p)!r}: an existing file that is not a flitsim parameter file (its first line "
                          f"is not {_PARAMS_HEADER!r}...); remove it or choose a new path")


def _rows(logs: Sequence[NcclLog], placement: str, max_bytes: int,
          skipped: list[str]) -> list[tuple[NcclLog, dict[str, Any], float]]:
    out = []
    for lg in logs:
        for r in lg.rows:
            if r["size"] == 0 or r["size"] > max_bytes:
                skipped.append(f"{lg.path}:{r['line']}: size {r['size']} B (fitted: 1..{max_bytes} B, --max-bytes)")
                continue
            wrong = [r["wrong_oop"], r["wrong_ip"]]
            if any(w for w in wrong if w):
                skipped.append(f"{lg.path}:{r['line']}: #wrong = {max(w for w in wrong if w)}")
                continue  # a row with wrong results measured nothing trustworthy
            t = {"oop": r["time_us_oop"], "ip": r["time_us_ip"],
                 "best": min(r["time_us_oop"], r["time_us_ip"])}[placement]
            if t > 0 and t <= MAX_TIME_PS / 1e6:  # also refuses inf / NaN
                out.append((lg, r, t))
            else:
                skipped.append(f"{lg.path}:{r['line']}: time {t} us ({placement}; expected > 0 and at most "
                               f"{MAX_TIME_PS / 1e6:.3g} us, the simulator's time bound)")
    return out


def fit(logs: Sequence[str | os.PathLike[str] | NcclLog], fabric: Any = "hgx-h100", *, op: str | None = None,
        placement: str = "oop", fit_params: Sequence[str] = FITTABLE, max_bytes: int = 1 << 30,
        algorithm: str = "auto", dtype: str | None = None, progress: Callable[[str], None] | None = None) -> Calibration:
    """Fit the non-public collective parameters to nccl-tests logs.

    Args:
        logs: log files (or parsed :class:`NcclLog`).
        fabric: the fabric the logs were measured on (preset name or spec).
        op: the collective, when file names do not say it.
        placement: ``oop`` (out-of-place columns), ``ip`` or ``best``.
        fit_params: which of :data:`FITTABLE` to fit.
        max_bytes: rows above this size are left out (simulation cost).
        algorithm: the algorithm to simulate (``auto``: the simulator's pick).

    Raises:
        ConfigError: an unparseable log (with its line), a log from a
            different GPU count than the fabric, a log whose op cannot be
            determined, an unknown parameter or placement, no usable rows.
    """
    from flitsim import collectives
    from flitsim.hardware.fabric import as_fabric

    fab = as_fabric(fabric)
    if placement not in ("oop", "ip", "best"):
        raise ConfigError(f"placement = {placement!r}: expected oop, ip or best")
    bad = [p for p in fit_params if p not in FITTABLE]
    if bad:
        raise ConfigError(f"fit = {bad}: expected names from {list(FITTABLE)} (the non-public parameters)")
    parsed = [lg if isinstance(lg, NcclLog) else parse(lg, op=op) for lg in logs]
    if not parsed:
        raise ConfigError("logs = []: expected at least one nccl-tests log")
    for lg in parsed:
        if lg.op is None:
            raise ConfigError(f"log = {lg.path!r}: cannot tell which collective it measured; pass --op")
        if lg.header_gpus is not None and lg.header_gpus > fab.gpus:
            raise ConfigError(f"log = {lg.path!r}: header nGpus (x nThread) = {lg.header_gpus}, but fabric "
                              f"{fab.name!r} has {fab.gpus} GPUs; calibrate on a log of this fabric")
        if lg.ranks is not None and lg.ranks != fab.gpus:
            raise ConfigError(f"log = {lg.path!r}: measured on {lg.ranks} GPUs, but fabric {fab.name!r} has "
                              f"{fab.gpus}; calibrate on a log of the whole fabric")
    skipped: list[str] = []
    rows = _rows(parsed, placement, max_bytes, skipped)
    if not rows:
        why = "; ".join(skipped[:8]) + (f"; ... {len(skipped) - 8} more" if len(skipped) > 8 else "")
        raise ConfigError(f"logs: no usable rows (sizes 1..{max_bytes} bytes, #wrong = 0, time > 0)"
                          + (f"; left out: {why}" if why else ""))
    notes = [f"left out {x}" for x in skipped]
    types = {r["type"] for _, r, _ in rows}
    params: dict[str, Any] = {"host_launch_ps": 0} if "host_launch_ps" in fit_params else {}

    def sim(lg: NcclLog, r: dict[str, Any], p: dict[str, Any]) -> Any:
        a = algorithm if algorithm != "auto" or lg.algorithm is None else lg.algorithm
        pr = lg.protocol or "auto"
        return collectives.collective(fab, lg.op or "all_reduce", int(r["size"]), algorithm=a, protocol=pr,
                                  dtype=dtype or (r["type"] if r["type"] in types else "float"), **p)

    def say(msg: str) -> None:
        if progress:
            progress(msg)

    def loss(sel: list[tuple[NcclLog, dict[str, Any], float]], p: dict[str, Any]) -> float:
        return sum(((sim(lg, r, p).time_us - m) / m) ** 2 for lg, r, m in sel)

    def shift(p: dict[str, Any]) -> float:
        # time is exactly additive in host_launch_ps: relative least squares in closed form
        base = {**p, "host_launch_ps": 0}
        num = den = 0.0
        for lg, r, m in rows:
            t0 = sim(lg, r, base).time_us
            num += (m - t0) / m**2
            den += 1 / m**2
        return max(0.0, num / den * 1e6)

    def golden(name: str, sel: list[tuple[NcclLog, dict[str, Any], float]]) -> None:
        lo, hi = _BOUNDS[name]
        cast: Callable[[float], Any] = (lambda v: int(round(v))) if name.endswith("_ps") else float
        inner = loss

        def loss_at(sel_: Any, p: dict[str, Any]) -> float:
            return inner(sel_, {**p, name: cast(p[name])})
        g = (math.sqrt(5) - 1) / 2
        a, b = lo, hi
        c, d = b - g * (b - a), a + g * (b - a)
        fc, fd = loss_at(sel, {**params, name: c}), loss_at(sel, {**params, name: d})
        for _ in range(10):
            if fc < fd:
                b, d, fd = d, c, fc
                c = b - g * (b - a)
                fc = loss_at(sel, {**params, name: c})
            else:
                a, c, fc = c, d, fd
                d = a + g * (b - a)
                fd = loss_at(sel, {**params, name: d})
        params[name] = cast((a + b) / 2)
        say(f"{name} = {params[name]:.4g}")

    nvls_ok = fab.switch.nvls if hasattr(fab, "switch") else False
    # NVLS parameters are fitted only on rows that can run NVLS: the log's
    # algorithm is NVLS, or auto picks NVLS at the most NVLS-friendly bounds
    # (an NCCL_ALGO=Ring log leaves them flat: the search would hit a bound)
    friendly = {"nvls_base_ps": int(_BOUNDS["nvls_base_ps"][0]), "nvls_efficiency": _BOUNDS["nvls_efficiency"][1]}
    nvls_rows = [x for x in rows if nvls_ok and sim(x[0], x[1], friendly).algorithm.startswith("nvls")]
    for name in ("nvls_base_ps", "nvls_efficiency"):
        if name in fit_params and not nvls_rows:
            notes.append(f"{name}: not fitted (no NVLS rows)")
            say(f"{name}: not fitted (no NVLS rows)")
    for _round in range(2):
        if "host_launch_ps" in fit_params:
            params["host_launch_ps"] = int(round(shift(params)))
            say(f"host_launch_ps = {params['host_launch_ps']}")
        if "nvls_base_ps" in fit_params and nvls_rows:
            small = [x for x in nvls_rows if x[1]["size"] <= _SMALL]
            if small:
                golden("nvls_base_ps", small)
                params["nvls_base_ps"] = int(round(params["nvls_base_ps"]))
        if "nvls_efficiency" in fit_params and nvls_rows:
            large = [x for x in nvls_rows if x[1]["size"] >= _LARGE]
            if large:
                # bandwidth-bound rows: time ~ 1 / efficiency, so a fixed-point
                # step eff x (simulated / measured) converges in a few steps
                eff = params.get("nvls_efficiency", collectives.default_params()["nvls_efficiency"])
                for _ in range(3):
                    ratio = [sim(lg, r, {**params, "nvls_efficiency": eff}).time_us / m for lg, r, m in large]
                    lo, hi = _BOUNDS["nvls_efficiency"]
                    eff = min(hi, max(lo, eff * sum(ratio) / len(ratio)))
                params["nvls_efficiency"] = eff
                say(f"nvls_efficiency = {eff:.4g}")
    res = []
    errs = []
    for lg, r in ((lg, r) for lg in parsed for r in lg.rows if 0 < r["size"] <= max_bytes):
        m = {"oop": r["time_us_oop"], "ip": r["time_us_ip"], "best": min(r["time_us_oop"], r["time_us_ip"])}[placement]
        s = sim(lg, r, params)
        used = any(r is x[1] for x in rows)
        e = (s.time_us / m - 1) * 100 if m > 0 else float("nan")
        if used:
            errs.append(abs(e))
        res.append({"log": lg.path, "line": r["line"], "op": lg.op, "size": r["size"], "measured_us": m,
                    "simulated_us": s.time_us, "error_pct": e, "algorithm": s.algorithm, "protocol": s.protocol,
                    "used": used})
    mape = sum(errs) / len(errs) if errs else float("nan")
    return Calibration(fab.name, params, res, mape, tuple(lg.path for lg in parsed), tuple(notes))
