"""Results that behave in notebooks: a short ``__repr__``, ``_repr_html_``
(headline figures + the first rows of the table), ``to_pandas()`` and
``.plot()`` on every result class, added by the :func:`notebook` decorator.

``__repr__`` names the class and a few headline fields, never a whole
DataFrame or array (a dataclass's default repr prints them all).
``plot()`` returns a matplotlib ``Figure`` (Agg, no display needed; Jupyter
shows it): a Gantt chart when the table has device/start_ps/end_ps columns,
else bars of the table's headline column (:data:`VALUE_COLUMNS`).
"""

from __future__ import annotations

import html
from typing import Any, Callable, TypeVar

import numpy as np

__all__ = ["notebook", "VALUE_COLUMNS", "short"]

T = TypeVar("T")

VALUE_COLUMNS = ("makespan_s", "busbw_GBps", "GBps", "utilization", "latency_mean_cycles", "per_direction_GBps",
                 "total_bytes", "time_us", "measured_us", "ps", "bytes", "link_bytes_sent", "payload_bytes")
"""Which column ``plot()`` draws, first present wins (else the first numeric one)."""

_HTML_ROWS = 12


def short(v: Any, width: int = 40) -> str:
    """A value in at most ``width`` characters: numbers to 4 significant
    digits, arrays / frames / sequences as their shape or length."""
    if hasattr(v, "shape") and hasattr(v, "dtype") or hasattr(v, "columns"):
        return f"<{type(v).__name__} {tuple(getattr(v, 'shape', ()))}>"
    if isinstance(v, (bool, np.bool_)):
        return str(bool(v))
    if isinstance(v, (int, np.integer)):
        return f"{int(v):,}"
    if isinstance(v, (float, np.floating)):
        return f"{float(v):.4g}"
    if isinstance(v, (list, tuple, dict, set)):
        return f"<{type(v).__name__} of {len(v)}>"
    s = str(v)
    return s if len(s) <= width else s[:width - 3] + "..."


def _value(obj: Any, key: str) -> Any:
    v = getattr(obj, key)
    return v() if callable(v) else v


def _frame(obj: Any) -> Any:
    return obj.to_pandas()


def _default_plot(self: Any, ax: Any = None, *, title: str | None = None) -> Any:
    """Draw the result (see the module docstring) on ``ax`` (a matplotlib Axes;
    None: a new Figure) with ``title`` (default: the class name); returns the Figure.

    Raises:
        ConfigError: ``ax`` not a matplotlib Axes (an unknown keyword is a
            TypeError; both were ignored or an AttributeError before).
    """
    from flitsim.errors import config_error

    if ax is not None and not hasattr(ax, "figure"):
        raise config_error("ax", ax, "a matplotlib Axes or None (a new figure)")
    df = _frame(self)
    if ax is None:
        from matplotlib.figure import Figure

        fig = Figure(figsize=(8, 3.2), dpi=90, layout="constrained")
        ax = fig.add_subplot()
    else:
        fig = ax.figure
    cols = set(df.columns)
    name = type(self).__name__
    if {"start_ps", "end_ps"} <= cols and ("device" in cols or "src" in cols) and len(df):
        dcol = "device" if "device" in cols else "src"
        d = df[df[dcol].notna()] if hasattr(df[dcol], "notna") else df
        kinds = d["kind"].astype(str).to_numpy() if "kind" in cols else np.array(["task"] * len(d))
        colours = {"compute": "#1565c0", "transfer": "black", "collective": "firebrick", "task": "#1565c0"}
        for k in np.unique(kinds):
            sel = kinds == k
            y = d[dcol].to_numpy()[sel].astype(float)
            s = d["start_ps"].to_numpy()[sel] / 1e9
            w = (d["end_ps"].to_numpy()[sel] - d["start_ps"].to_numpy()[sel]) / 1e9
            ax.barh(y, w, left=s, height=0.6, color=colours.get(k, "grey"), label=k, linewidth=0)
        ax.set_xlabel("time (ms)")
        ax.set_ylabel(dcol)
        ax.invert_yaxis()
        ax.legend(fontsize=7)
    else:
        import pandas as pd

        num = [c for c in df.columns if pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c])]
        col = next((c for c in VALUE_COLUMNS if c in cols), num[0] if num else None)
        if col is None or not len(df):
            ax.text(0.5, 0.5, "nothing to plot", ha="center", transform=ax.transAxes)
        else:
            labels = [c for c in df.columns if pd.api.types.is_string_dtype(df[c]) or df[c].dtype == object][:2]
            names = [" / ".join(str(x) for x in row) for row in df[labels].itertuples(index=False)] if labels \
                else [str(i) for i in range(len(df))]
            ax.barh(range(len(df)), df[col].to_numpy(dtype=float), color="#1565c0")
            ax.set_yticks(range(len(df)), names, fontsize=7)
            ax.invert_yaxis()
            ax.set_xlabel(col)
    ax.set_title(name if title is None else title, fontsize=10)
    return fig


def notebook(*keys: str, frame: "str | Callable[[Any], Any] | None" = None) -> Callable[[type[T]], type[T]]:
    """Class decorator (apply above ``@dataclass``): short ``__repr__`` from
    ``keys`` (attribute or zero-argument method names), ``_repr_html_``,
    ``to_pandas()`` (``frame``: an attribute / method name or a function of
    the object, when the class has none) and a default ``plot()`` (when the
    class has none)."""

    def deco(cls: type[T]) -> type[T]:
        if frame is not None and "to_pandas" not in cls.__dict__:
            def to_pandas(self: Any) -> Any:
                """The result as a pandas DataFrame."""
                if callable(frame):
                    return frame(self)
                return _value(self, frame)

            cls.to_pandas = to_pandas  # type: ignore[attr-defined]

        def __repr__(self: Any) -> str:
            parts = []
            for k in keys:
                try:
                    parts.append(f"{k}={short(_value(self, k))}")
                except Exception:  # a field that needs a run: leave it out rather than fail to print
                    continue
            return f"{cls.__name__}({', '.join(parts)})"

        def _repr_html_(self: Any) -> str:
            items = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th>"
                            f"<td>{html.escape(short(_value(self, k), 80))}</td></tr>" for k in keys
                            if _safe(self, k))
            try:
                df = _frame(self)
                n = len(df)
                tab = df.head(_HTML_ROWS).to_html(index=False, border=0, float_format=lambda x: f"{x:.4g}")
                more = f"<p><small>{min(n, _HTML_ROWS)} of {n:,} rows; .to_pandas() for all</small></p>"
            except Exception:
                tab, more = "", ""
            return f"<div><b>{html.escape(cls.__name__)}</b><table>{items}</table>{tab}{more}</div>"

        cls.__repr__ = __repr__  # type: ignore[method-assign]
        cls._repr_html_ = _repr_html_  # type: ignore[attr-defined]
        if "plot" not in cls.__dict__:
            cls.plot = _default_plot  # type: ignore[attr-defined]
        return cls

    return deco


def _safe(obj: Any, k: str) -> bool:
    try:
        _value(obj, k)
        return True
    except Exception:
        return False
