"""Sweeps: many simulations over a grid, on any executor, streamed to Parquet.

``flitsim.sweep(target, grid, executor=None, out=...)`` evaluates
``target(**point)`` for every point of ``grid`` and returns a DataFrame (one
row per point: the point's parameters, then the target's result fields).

Executors: ``None`` -> a local :class:`concurrent.futures.ProcessPoolExecutor`
(``workers`` processes; 1 = in this process); any object with
``submit(fn, *args)`` returning futures (``concurrent.futures`` executors, a
Dask ``distributed.Client`` or its ``get_executor()``); or a map-like callable
``executor(fn, iterable)`` returning results in order (e.g. a Ray
``ray.util.multiprocessing.Pool().map`` or ``multiprocessing.Pool().map``).

Results are written to ``out`` (Parquet) as they arrive (the file is rewritten
atomically after each result, so it is always complete) and a rerun with the
same ``out`` resumes: points already in the file (same ``point_id``, a hash of
the parameters) are not recomputed. Rows are ordered by grid position, so the
result does not depend on the number of workers or on completion order.
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

from flitsim.errors import config_error

__all__ = ["sweep", "grid_points", "point_id", "schedule_point", "SweepSpec", "load_sweep"]


def grid_points(grid: Mapping[str, Sequence[Any]] | Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Points of ``grid``: a mapping of name -> values (cartesian product, in
    key order then value order) or an explicit list of dicts.

    Raises:
        ConfigError: a value list that is empty or not a list.
    """
    if isinstance(grid, Mapping):
        keys = list(grid)
        for k in keys:
            if isinstance(grid[k], (str, bytes)) or not isinstance(grid[k], Sequence) or len(grid[k]) == 0:
                raise config_error(f"grid.{k}", grid[k], "a non-empty list of values")
        return [dict(zip(keys, vals)) for vals in itertools.product(*(grid[k] for k in keys))]
    pts = [dict(p) for p in grid]
    if not pts:
        raise config_error("grid", grid, "at least one point")
    return pts


def point_id(point: Mapping[str, Any]) -> str:
    """Stable 16-hex-digit id of a point (SHA-256 of its sorted JSON)."""
    return hashlib.sha256(json.dumps(point, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _resolve(target: Callable[..., Any] | str) -> Callable[..., Any]:
    if callable(target):
        return target
    mod, _, name = str(target).partition(":")
    try:
        return getattr(importlib.import_module(mod), name)
    except (ImportError, AttributeError):
        raise config_error("target", target, "a callable or 'module:function'") from None


def _call(target: Any, point: dict[str, Any]) -> dict[str, Any]:
    fn = _resolve(target)
    res = fn(**point)
    if not isinstance(res, Mapping):
        res = {"result": res}
    return dict(res)


def _call_tuple(args: tuple[Any, dict[str, Any]]) -> dict[str, Any]:
    return _call(*args)


def sweep(target: Callable[..., Mapping[str, Any]] | str, grid: Any, executor: Any = None, *,
          out: str | os.PathLike[str] | None = None, workers: int | None = None, progress: bool = True) -> Any:
    """Evaluate ``target(**point)`` over ``grid`` (see the module docstring).

    Args:
        target: a picklable top-level callable returning a mapping of scalars,
            or ``"module:function"``.
        grid: mapping name -> list of values, or a list of point dicts.
        executor: None (local process pool), an object with ``submit``, or a
            map-like callable.
        out: Parquet path for streaming results and resuming (None: not written).
        workers: processes of the default pool (default: CPU count; 1 runs
            in this process).
        progress: tqdm progress bar on stderr.

    Returns:
        pandas DataFrame: ``point_id``, the grid parameters, the result fields;
        ordered by grid position.

    Raises:
        ConfigError: bad grid or target; whatever the target raises propagates.
    """
    import pandas as pd

    pts = grid_points(grid)
    ids = [point_id(p) for p in pts]
    done: dict[str, dict[str, Any]] = {}
    if out is not None and Path(out).exists():
        prev = pd.read_parquet(out)
        for rec in prev.to_dict(orient="records"):
            done[str(rec["point_id"])] = rec
    todo = [i for i, pid in enumerate(ids) if pid not in done]
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(pts), initial=len(pts) - len(todo), desc="sweep", unit="pt", file=sys.stderr)
    tgt: Any = target if callable(target) else str(target)

    def record(i: int, res: dict[str, Any]) -> None:
        done[ids[i]] = {"point_id": ids[i], **pts[i], **res}
        if out is not None:
            _write(done, ids, out)
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
                record(futs[f], f.result())
        elif callable(executor):
            for i, res in zip(todo, executor(_call_tuple, [(tgt, pts[i]) for i in todo])):
                record(i, res)
        else:
            raise config_error("executor", type(executor).__name__, "None, an object with submit(), or a map-like callable")
    finally:
        if own is not None:
            own.shutdown()
        if bar:
            bar.close()
    return _frame(done, ids)


def _frame(done: dict[str, dict[str, Any]], ids: list[str]) -> Any:
    import pandas as pd

    rows = [done[i] for i in ids if i in done]
    return pd.DataFrame(rows)


def _write(done: dict[str, dict[str, Any]], ids: list[str], out: str | os.PathLike[str]) -> None:
    df = _frame(done, ids)
    tmp = f"{out}.tmp"
    df.to_parquet(tmp, index=False)
    os.replace(tmp, out)


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
        ConfigError: unknown keys, wrong types, unreadable TOML.
    """
    from flitsim._toml import read_toml

    data = read_toml(path, "sweep")
    spec = SweepSpec.from_dict(data)
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
        return [{**self.fixed, **p} for p in grid_points(self.grid)]
