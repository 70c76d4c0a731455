"""Sweeps: many simulations over a grid, on any executor, streamed to Parquet.

``flitsim.sweep(target, grid, executor=None, out=..., fixed=...)`` evaluates
``target(**fixed, **point)`` for every point of ``grid`` and returns a
DataFrame (one row per point: ``point_id``, the point's parameters, the
target's result fields, and ``error``).

Executors: ``None`` -> a local :class:`concurrent.futures.ProcessPoolExecutor`
(``workers`` processes; 1 = in this process); any object with
``submit(fn, *args)`` returning futures (``concurrent.futures`` executors, a
Dask ``distributed.Client`` or its ``get_executor()``); or a map-like callable
``executor(fn, iterable)`` returning results in order (e.g. a Ray
``ray.util.multiprocessing.Pool().map`` or ``multiprocessing.Pool().map``).

Nothing is lost:

- A point whose target raises is recorded with the exception in the
  ``error`` column (type and message; empty for points that succeeded) and
  the sweep goes on; a rerun retries only the failed points.
- Results are written to ``out`` (Parquet) as they arrive, atomically (a
  temporary file in the same folder, then a rename), so the file is always
  complete, also after Ctrl-C or a crash.
- A point is keyed (``point_id``) by the target, the parameters (fixed ones
  included) and the flitsim version, so a rerun resumes only what was
  computed by the same target and version; rows of other grids or targets in
  the same file are kept, not deleted.
- ``out`` is checked before the first point: its folder must exist, and an
  existing file must be a flitsim sweep file (Parquet metadata key
  ``flitsim.sweep``); anything else is refused, never overwritten.

Rows are ordered by grid position, so the result does not depend on the
number of workers or on completion order.
"""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import importlib
import itertools
import json
import os
import sys
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from flitsim.errors import ConfigError, check_int, config_error

__all__ = ["sweep", "grid_points", "point_id", "schedule_point", "SweepSpec", "load_sweep"]

_META_KEY = b"flitsim.sweep"
"""Parquet schema-metadata key that marks a file as a flitsim sweep's."""


def grid_points(grid: Mapping[str, Sequence[Any]] | Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Points of ``grid``: a mapping of name -> values (cartesian product, in
    key order then value order) or an explicit list of dicts.

    Raises:
        ConfigError: a value list that is empty or not a list; a list of
            points that is empty or holds something other than mappings.
    """
    if isinstance(grid, Mapping):
        keys = list(grid)
        for k in keys:
            if not isinstance(k, str) or not k.isidentifier():
                # the name is passed as a keyword argument: "" or "a b" failed once per point
                raise config_error("grid key", k, "a parameter name (a Python identifier)")
            if isinstance(grid[k], (str, bytes)) or not isinstance(grid[k], Sequence) or len(grid[k]) == 0:
                raise config_error(f"grid.{k}", grid[k], "a non-empty list of values")
        return [dict(zip(keys, vals)) for vals in itertools.product(*(grid[k] for k in keys))]
    if isinstance(grid, (str, bytes)) or not isinstance(grid, Sequence):
        raise config_error("grid", grid, "a mapping name -> list of values, or a list of point dicts")
    pts = []
    for i, p in enumerate(grid):
        if not isinstance(p, Mapping) or not all(isinstance(k, str) and k.isidentifier() for k in p):
            raise config_error(f"grid[{i}]", p, "a dict of parameters (names are Python identifiers)")
        pts.append(dict(p))
    if not pts:
        raise config_error("grid", grid, "at least one point")
    return pts


def _target_name(target: Any) -> str:
    if isinstance(target, str):
        return target
    return f"{getattr(target, '__module__', '?')}:{getattr(target, '__qualname__', type(target).__name__)}"


def point_id(point: Mapping[str, Any], target: Any = "", version: str | None = None) -> str:
    """Stable 16-hex-digit id of a point: SHA-256 of the target's name, the
    sorted parameters (JSON) and the flitsim version (default: this one)."""
    from flitsim._core import __version__

    key = {"target": _target_name(target), "params": dict(point), "flitsim": version or __version__}
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=repr).encode()).hexdigest()[:16]


def _resolve(target: Callable[..., Any] | str) -> Callable[..., Any]:
    if callable(target):
        return target
    mod, _, name = str(target).partition(":")
    try:
        fn = getattr(importlib.import_module(mod), name)
    except (ImportError, AttributeError, ValueError):
        raise config_error("target", target, "a callable or 'module:function'") from None
    if not callable(fn):
        raise config_error("target", target, "a callable or 'module:function'")
    return fn


def _call(target: Any, point: dict[str, Any]) -> dict[str, Any]:
    """Run one point; any exception becomes the row's ``error`` (Ctrl-C and
    exits propagate)."""
    try:
        res = _resolve(target)(**point)
    except Exception as e:  # noqa: BLE001 - recorded, not swallowed: the row says what failed
        return {"error": f"{type(e).__name__}: {e}"}
    if not isinstance(res, Mapping):
        res = {"result": res}
    return {**dict(res), "error": ""}


def _call_tuple(args: tuple[Any, dict[str, Any]]) -> dict[str, Any]:
    return _call(*args)


def _read_existing(out: Path) -> dict[str, dict[str, Any]]:
    """Rows of an existing sweep file by point_id; refuses foreign files."""
    if not out.exists():
        return {}
    if out.is_dir():
        raise config_error("out", str(out), "a Parquet file path (this is a folder)")
    import pyarrow.parquet as pq

    try:
        meta = pq.read_schema(out).metadata or {}
    except Exception:
        meta = {}
    if _META_KEY not in meta:
        raise config_error("out", str(out), "a new path or a flitsim sweep file; this file exists and is not one "
                           "(refusing to overwrite it: move it away or choose another out)")
    df = pq.read_table(out).to_pandas()
    return {str(r["point_id"]): r for r in df.to_dict(orient="records")}


def _check_writable(out: Path) -> None:
    d = out.parent if str(out.parent) else Path(".")
    if not d.is_dir():
        raise config_error("out", str(out), f"a path in an existing folder ({str(d)!r} does not exist)")
    if not os.access(d, os.W_OK):
        raise config_error("out", str(out), f"a path in a writable folder ({str(d)!r} is not writable)")


def _merge_fixed(fixed: Mapping[str, Any], points: list[dict[str, Any]], where: str) -> list[dict[str, Any]]:
    """``points`` each merged with ``fixed``; a name in both is refused (one of
    the two values would be silently ignored).

    Raises:
        ConfigError: naming the parameter, its fixed value and the grid's.
    """
    for i, p in enumerate(points):
        both = sorted(set(fixed) & set(p))
        if both:
            k = both[0]
            raise config_error(f"{where}.{k}", fixed[k],
                               f"a parameter either fixed or in the grid, not both (grid point {i} has {k} = {p[k]!r})")
    return [{**fixed, **p} for p in points]


def sweep(target: Callable[..., Mapping[str, Any]] | str, grid: Any, executor: Any = None, *,
          out: str | os.PathLike[str] | None = None, workers: int | None = None, progress: bool = True,
          fixed: Mapping[str, Any] | None = None) -> Any:
    """Evaluate ``target(**fixed, **point)`` over ``grid`` (see the module docstring).

    Args:
        target: a picklable top-level callable returning a mapping of scalars,
            or ``"module:function"``.
        grid: mapping name -> list of values, or a list of point dicts.
        executor: None (local process pool), an object with ``submit``, or a
            map-like callable.
        out: Parquet path for streaming results and resuming (None: not written).
        workers: processes of the default pool (default: CPU count; 1 runs
            in this process).
        progress: progress on stderr (a bar on a terminal, periodic lines otherwise).
        fixed: keyword arguments passed to every point (like a sweep file's
            ``[fixed]`` table); a name may not be both fixed and in the grid.

    Returns:
        pandas DataFrame: ``point_id``, the parameters, the result fields and
        ``error`` (empty string when the point succeeded); ordered by grid position.

    Raises:
        ConfigError: bad grid, target, workers, fixed or out, or a name both
            in ``fixed`` and in the grid (checked before the first point). Exceptions raised by the target are recorded in
            ``error``, not raised.
    """
    if workers is not None:
        workers = check_int("workers", workers, 1, 4096)
    if fixed is None:
        fixed = {}
    if not isinstance(fixed, Mapping) or not all(isinstance(k, str) and k.isidentifier() for k in fixed):
        raise config_error("fixed", fixed, "a mapping of parameter name (a Python identifier) -> value")
    pts = _merge_fixed(fixed, grid_points(grid), "fixed")
    if not callable(target):
        _resolve(target)  # a typo fails now, not once per point
    tname = _target_name(target)
    ids = [point_id(p, tname) for p in pts]
    out_path = Path(out) if out is not None else None
    done: dict[str, dict[str, Any]] = {}
    if out_path is not None:
        _check_writable(out_path)
        done = _read_existing(out_path)
    todo = [i for i, pid in enumerate(ids) if pid not in done or done[pid].get("error")]
    todo = list(dict.fromkeys(todo))
    bar = None
    if progress:
        from flitsim._progress import progress_bar

        bar = progress_bar(len(pts), "sweep", "pt", sys.stderr, initial=len(pts) - len(todo))
    tgt: Any = target if callable(target) else str(target)
    meta = json.dumps({"target": tname}).encode()

    mine = list(dict.fromkeys(ids))  # this grid's ids in grid order (computed once: a sweep has 1e4 points)
    mine_set = set(mine)
    rest = [k for k in done if k not in mine_set]  # earlier rows of other grids in the same file

    def record(i: int, res: dict[str, Any]) -> None:
        done[ids[i]] = {"point_id": ids[i], **pts[i], **res}
        if out_path is not None:
            # This grid's rows in grid order, then earlier rows of other grids.
            _write([done[k] for k in mine if k in done] + [done[k] for k in rest], out_path, meta)
        if bar:
            bar.update(1)

    own = None
    try:
        if executor is None and (workers or os.cpu_count() or 1) == 1:
            for i in todo:
                record(i, _call(tgt, pts[i]))
        elif executor is None or hasattr(executor, "submit"):
            if executor is None:
                own = executor = cf.ProcessPoolExecutor(max_workers=workers)
            futs = {executor.submit(_call, tgt, pts[i]): i for i in todo}
            for f in cf.as_completed(futs) if isinstance(next(iter(futs), None), cf.Future) else futs:
                try:
                    res = f.result()
                except Exception as e:  # noqa: BLE001 - the worker died or the result did not come back
                    res = {"error": f"{type(e).__name__}: {e}"}
                record(futs[f], res)
        elif callable(executor):
            for i, res in zip(todo, executor(_call_tuple, [(tgt, pts[i]) for i in todo])):
                record(i, res)
        else:
            raise config_error("executor", type(executor).__name__, "None, an object with submit(), or a map-like callable")
    finally:
        if own is not None:
            own.shutdown(cancel_futures=True)
        if bar:
            bar.close()
    return _frame([done[i] for i in ids if i in done])  # one row per grid position, repeats included


def _frame(rows: list[dict[str, Any]]) -> Any:
    import pandas as pd

    df = pd.DataFrame(rows)
    if "error" in df.columns:
        df["error"] = df["error"].fillna("").astype(str)
        df = df[[c for c in df.columns if c != "error"] + ["error"]]
    return df


def _write(rows: list[dict[str, Any]], out: Path, meta: bytes) -> None:
    """Every row of the file (this grid's and earlier ones'), written to a
    temporary file beside ``out`` and renamed over it (atomic on POSIX)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    df = _frame(rows)
    try:
        table = pa.Table.from_pandas(df, preserve_index=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        # A column holding mixed types across points (e.g. 4 and "auto"): keep it as text.
        for c in df.columns:
            if df[c].dtype == object:
                df[c] = df[c].map(lambda v: v if v is None or isinstance(v, str) else repr(v))
        table = pa.Table.from_pandas(df, preserve_index=False)
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), _META_KEY: meta})
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, out)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise ConfigError(f"out = {str(out)!r}: cannot write ({e.strerror or e})") from None


# ---------------------------------------------------------------------- a ready-made target
def schedule_point(schedule: str, *, model: str | None = None, tokens: int | None = None,
                   dit_model: str | None = None, resolution_px: int | None = None, steps: int = 4,
                   fabric: str = "hgx-b200", network: str = "analytic", sim_packet_bytes: int = 4096,
                   **options: Any) -> dict[str, Any]:
    """Build and simulate one schedule; the default sweep target.

    Args:
        schedule: builder name; model + tokens (causal prefill) or dit_model +
            resolution_px + steps (DiT); fabric: preset; network: ``analytic``
            (:meth:`flitsim.networks.AnalyticNetwork.from_fabric`) or ``fabric``
            (cycle-level); options: builder options (stages, degree, ...).

    Returns:
        :meth:`flitsim.schedules.Schedule.summary` scalars (makespan_s,
        stage_time_cv, fill_drain_share, bubble fractions, bytes, FLOPs,
        memory_status ("ok" | "oom"), peak_memory_bytes, memory_broken_by, ...).
    """
    import flitsim.schedules as S
    from flitsim.hardware import fabric_preset
    from flitsim.networks import AnalyticNetwork, FabricNetwork
    from flitsim.workloads import dit_workload

    fab = fabric_preset(fabric, sim_packet_bytes=sim_packet_bytes)
    if dit_model is not None:
        if resolution_px is None:
            raise config_error("resolution_px", None, "a side in pixels with dit_model")
        wl: Any = dit_workload(dit_model, resolution_px, steps=steps)
        sched = S.build(schedule, None, wl, fabric=fab, **options)  # compute on the fabric's GPU unless gpu= given
    else:
        sched = S.build(schedule, model, tokens, fabric=fab, **options)
    net = FabricNetwork(fab) if network == "fabric" else AnalyticNetwork.from_fabric(fab)
    res = S.simulate(sched, net)
    return {k: v for k, v in res.summary().items() if isinstance(v, (int, float, str)) or k == "memory_broken_by"}


def load_sweep(path: str | os.PathLike[str]) -> "SweepSpec":
    """Parse a sweep TOML file (``target``, ``out``, ``[fixed]``, ``[grid]``).

    Raises:
        ConfigError: unknown keys, wrong types, unreadable TOML, a bad grid, a
            name both in ``[fixed]`` and in ``[grid]``.
    """
    from flitsim._toml import read_toml

    data = read_toml(path, "sweep")
    spec = SweepSpec.from_dict(data)
    spec.points()  # a bad grid or a name both fixed and in the grid fails on loading
    if spec.out and not Path(spec.out).is_absolute():
        spec = spec.replace(out=str(Path(path).resolve().parent / spec.out))  # type: ignore[assignment]
    return spec  # type: ignore[return-value]


from flitsim._spec import Spec  # noqa: E402


class SweepSpec(Spec):
    """A sweep file: ``target`` ("module:function"), ``out`` (Parquet, relative
    to the file), ``fixed`` keyword arguments, ``grid`` (name -> list)."""

    target: str = "flitsim.sweeps:schedule_point"
    out: str = "sweep.parquet"
    fixed: dict[str, Any] = {}
    grid: dict[str, list[Any]]

    def points(self) -> list[dict[str, Any]]:
        """Grid points merged with the fixed arguments."""
        return _merge_fixed(self.fixed, grid_points(self.grid), "[fixed]")
