"""Measured kernel profiles: a table of kernel shapes and times recorded on a
user's own GPU (``benches/profile_kernels.py`` records one with PyTorch) that
replaces the model's time wherever it has the kernel.

Format: CSV or Parquet, one row per kernel shape, columns

==============  ==============================================================
``kernel``      ``gemm`` | ``attention`` | ``elementwise``
``gpu``         a GPU preset name (:func:`flitsim.hardware.gpu_preset`)
``dtype``       ``bf16`` | ``fp16`` | ``fp8`` | ``fp32``
``time_us``     measured time of one launch, microseconds (> 0)
``m, n, k``     GEMM C[m, n] = A[m, k] B[k, n] (gemm rows)
``batch, heads, kv_heads, q, kv, head_dim, causal``
                attention forward (attention rows; ``kv_heads`` defaults to
                ``heads``, ``causal`` 0 or 1; causal rows: kv = context + q)
``op, numel``   elementwise kernel name (:data:`flitsim.models.kernels.OPS`)
                and elements of one full-size tensor (elementwise rows)
==============  ==============================================================

Other columns (``source``, ``std_us``, ``samples``, ...) are kept as
metadata. A row matches a kernel of a task when kind, GPU, dtype and every
shape field are equal; then the kernel's GPU time is the measured time (the
execution mode's launch gap and CPU dispatch still apply).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from flitsim.errors import ConfigError, config_error
from flitsim.hardware.gpus import GPU_PRESETS, gpu_preset
from flitsim.models.kernels import KINDS, OPS

MAX_TIME_US = 2**62 / 1e6
"""Largest measured time a profile row may give, microseconds: one launch
must fit a task's duration (TaskGraphBuilder's bound, 2^62 ps ~ 53 days);
a larger one (1e308) overflowed the picosecond conversion."""

__all__ = ["Profile", "read_profile", "PROFILE_KEYS"]

PROFILE_KEYS: dict[str, tuple[str, ...]] = {
    "gemm": ("m", "n", "k"),
    "attention": ("batch", "heads", "kv_heads", "q", "kv", "head_dim", "causal"),
    "elementwise": ("op", "numel"),
}
"""Shape fields a row of each kernel kind is matched on."""
_DTYPES = ("bf16", "fp16", "fp8", "fp32")


def _row_error(row: int, fld: str, value: Any, allowed: str) -> ConfigError:
    return config_error(f"profile row {row}: {fld}", value, allowed)


#: Largest shape value of a profile row: CSV numbers are read as floats, exact up to 2^53
#: (and so a value fits the compute model's int64 kernel columns).
MAX_SHAPE = 2**53


def _pos_int(row: int, fld: str, v: Any, minimum: int = 1) -> int:
    allowed = f"an integer in {minimum}..=2^53"
    if isinstance(v, (bool, np.bool_)):  # a Parquet boolean column is not a shape (True is not 1 row)
        raise _row_error(row, fld, v, allowed)
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise _row_error(row, fld, v, allowed) from None
    if not math.isfinite(f) or f != int(f) or f < minimum or f > MAX_SHAPE:
        raise _row_error(row, fld, v, allowed)
    return int(f)


@dataclass(frozen=True)
class Profile:
    """A validated profile (see the module docstring).

    Attributes:
        frame: the rows as a pandas DataFrame (normalised columns).
        source: the file it came from (or ``"<frame>"``).
        table: lookup ``(kernel, gpu, dtype, *shape) -> time_s``.
    """

    frame: Any
    source: str = "<frame>"
    table: dict[tuple[Any, ...], float] = field(default_factory=dict, repr=False)

    @staticmethod
    def from_frame(df: Any, source: str = "<frame>") -> "Profile":
        """Validate a DataFrame of profile rows.

        Raises:
            ConfigError: a missing column, no rows; per row (numbered from 0): an unknown
                kernel kind, GPU, dtype or elementwise op, a missing or
                non-positive shape, a time that is not > 0, a duplicate shape.
        """
        ew_ops = set(OPS[OPS.index("layernorm"):])
        for col in ("kernel", "gpu", "dtype", "time_us"):
            if col not in df.columns:
                raise config_error("profile column", col, f"present (required: kernel, gpu, dtype, time_us; {source})")
        if len(df) == 0:
            # a profile with a header and no rows replaces nothing: almost surely a failed recording
            raise config_error("profile", source, "at least one measured row (the file has a header only)")
        df = df.reset_index(drop=True)
        table: dict[tuple[Any, ...], float] = {}
        names: dict[str, str] = {}
        for i, r in enumerate(df.to_dict("records")):
            kind = str(r["kernel"]).strip().lower()
            if kind not in KINDS:
                raise _row_error(i, "kernel", r["kernel"], f"one of {list(KINDS)}")
            g = str(r["gpu"]).strip().lower().replace("_", "-").replace(" ", "-")
            if g not in GPU_PRESETS:
                raise _row_error(i, "gpu", r["gpu"], f"a GPU preset, one of {sorted(GPU_PRESETS)}")
            g = names.setdefault(g, gpu_preset(g).name)
            dt = str(r["dtype"]).strip().lower()
            if dt not in _DTYPES:
                raise _row_error(i, "dtype", r["dtype"], f"one of {list(_DTYPES)}")
            try:
                if isinstance(r["time_us"], (bool, np.bool_)):
                    raise TypeError("a boolean is not a time")
                t = float(r["time_us"])
            except (TypeError, ValueError):
                raise _row_error(i, "time_us", r["time_us"], "a measured time > 0 (microseconds)") from None
            if not math.isfinite(t) or t <= 0 or t > MAX_TIME_US:
                raise _row_error(i, "time_us", r["time_us"], "a measured time > 0 (microseconds), at most "
                                 f"{MAX_TIME_US:.3g} (2^62 ps, the task graph's duration bound)")
            shape: list[Any] = []
            if kind == "gemm":
                shape = [_pos_int(i, f, r.get(f)) for f in ("m", "n", "k")]
            elif kind == "attention":
                heads = _pos_int(i, "heads", r.get("heads"))
                kvh = r.get("kv_heads")
                kvh = heads if kvh is None or (isinstance(kvh, float) and math.isnan(kvh)) else _pos_int(i, "kv_heads", kvh)
                if heads % kvh:
                    raise _row_error(i, "kv_heads", kvh, f"a divisor of heads = {heads}")
                causal = _pos_int(i, "causal", r.get("causal", 0), 0)
                if causal > 1:
                    raise _row_error(i, "causal", causal, "0 or 1")
                q, kv = _pos_int(i, "q", r.get("q")), _pos_int(i, "kv", r.get("kv"))
                if causal and kv < q:
                    raise _row_error(i, "kv", kv, f"context + q >= q = {q} for a causal row")
                shape = [_pos_int(i, "batch", r.get("batch")), heads, kvh, q, kv,
                         _pos_int(i, "head_dim", r.get("head_dim")), causal]
            else:
                op = str(r.get("op", "")).strip().lower()
                if op not in ew_ops:
                    raise _row_error(i, "op", r.get("op"), f"an elementwise kernel, one of {sorted(ew_ops)}")
                shape = [op, _pos_int(i, "numel", r.get("numel"))]
            key = (kind, g, dt, *shape)
            if key in table:
                raise _row_error(i, "shape", shape, "one row per (kernel, gpu, dtype, shape): this one repeats")
            table[key] = t / 1e6
        return Profile(df, source, table)

    def __len__(self) -> int:
        return len(self.table)

    @property
    def gpus(self) -> list[str]:
        """GPU names the profile has rows for."""
        return sorted({k[1] for k in self.table})

    def lookup(self, kernels: Any, gpu_name: str, dtype: str) -> np.ndarray:
        """Measured time per row of ``kernels`` (a :class:`flitsim.models.Kernels`)
        on ``gpu_name`` in ``dtype``, seconds; NaN where the profile has no row."""
        c = kernels.cols
        out = np.full(len(kernels), np.nan)
        dt = dtype.lower()
        for i in range(len(kernels)):
            kind = KINDS[int(c["kind"][i])]
            if kind == "gemm":
                shape: tuple[Any, ...] = (int(c["m"][i]), int(c["n"][i]), int(c["k"][i]))
            elif kind == "attention":
                shape = tuple(int(c[f][i]) for f in PROFILE_KEYS["attention"])
            else:
                shape = (OPS[int(c["op"][i])], int(c["numel"][i]))
            t = self.table.get((kind, gpu_name, dt, *shape))
            if t is not None:
                out[i] = t
        return out

    def summary(self) -> dict[str, Any]:
        """Rows per kernel kind and GPU, and the source."""
        kinds: dict[str, int] = {}
        for k in self.table:
            kinds[f"{k[0]}@{k[1]}"] = kinds.get(f"{k[0]}@{k[1]}", 0) + 1
        return {"source": self.source, "rows": len(self.table), "gpus": self.gpus, "rows_by_kind": kinds}


def read_profile(path: "str | os.PathLike[str] | Profile") -> Profile:
    """Read and validate a profile file (``.csv`` or ``.parquet``); a
    :class:`Profile` is returned as is.

    Raises:
        ConfigError: unreadable file, unknown extension, or invalid rows (see
            :meth:`Profile.from_frame`).
    """
    if isinstance(path, Profile):
        return path
    import pandas as pd

    p = os.fspath(path)
    if not os.path.isfile(p):
        raise config_error("profile", p, "an existing .csv or .parquet file")
    try:
        if p.lower().endswith(".parquet"):
            df = pd.read_parquet(p)
        elif p.lower().endswith(".csv"):
            df = pd.read_csv(p, comment="#")
        else:
            raise config_error("profile", p, "a .csv or .parquet file")
    except ConfigError:
        raise
    except Exception as e:  # pandas / pyarrow parse errors
        raise config_error("profile", p, f"a readable CSV / Parquet profile ({type(e).__name__}: {e})") from None
    return Profile.from_frame(df, p)
