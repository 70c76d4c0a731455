"""Shared CLI helpers: byte-size parsing, JSON output, error reporting."""

from __future__ import annotations

import functools
import json
import re
from typing import Any, Callable, TypeVar

import click
import numpy as np

from flitsim.errors import ConfigError

F = TypeVar("F", bound=Callable[..., Any])

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1000, "kib": 1 << 10, "m": 1 << 20, "mb": 10**6, "mib": 1 << 20,
          "g": 1 << 30, "gb": 10**9, "gib": 1 << 30, "t": 1 << 40, "tb": 10**12, "tib": 1 << 40}


def parse_bytes(text: str) -> int:
    """Parse a size: ``4096``, ``64K``/``64KiB`` (1024), ``64KB`` (1000), ``8G``.

    Bare K/M/G/T are powers of 1024 as in nccl-tests' ``-b``/``-e``.

    Raises:
        ConfigError: if the text is not a size.
    """
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", str(text))
    if not m or m.group(2).lower() not in _UNITS:
        raise ConfigError(f"size = {text!r}: expected a byte count like 4096, 64K, 64KiB, 64KB, 8G")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


class ByteSize(click.ParamType):
    """click type for :func:`parse_bytes`."""

    name = "size"

    def convert(self, value: Any, param: Any, ctx: Any) -> int:
        if isinstance(value, int):
            return value
        try:
            return parse_bytes(value)
        except ConfigError as e:
            self.fail(str(e), param, ctx)


def _jsonable(o: Any) -> Any:
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, np.generic):
        return o.item()
    raise TypeError(f"not JSON serializable: {type(o)}")


def echo_json(obj: Any) -> None:
    """Print ``obj`` as indented JSON (numpy arrays become lists)."""
    click.echo(json.dumps(obj, indent=2, default=_jsonable))


def friendly_errors(fn: F) -> F:
    """Turn ConfigError/StalledError into a one-line message and exit code 2."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from flitsim.errors import StalledError

        try:
            return fn(*args, **kwargs)
        except (ConfigError, StalledError) as e:
            raise click.UsageError(f"{type(e).__name__}: {e}") from None

    return wrapper  # type: ignore[return-value]


def check_plot_path(path: str) -> None:
    """Fail early (before a long simulation) if a figure cannot be written to ``path``.

    Raises:
        ConfigError: missing directory or a format matplotlib cannot write.
    """
    import os

    d = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(d):
        raise ConfigError(f"plot = {path!r}: directory {d!r} does not exist")
    ext = os.path.splitext(path)[1].lstrip(".").lower()
    ok = ("png", "pdf", "svg", "jpg", "jpeg", "eps", "ps", "tif", "tiff", "webp")
    if ext not in ok:
        raise ConfigError(f"plot = {path!r}: the file extension must be one of {list(ok)}")
