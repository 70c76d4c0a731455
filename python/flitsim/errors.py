"""Exceptions raised by flitsim, and the one integer check that raises them.

Both exceptions are declared once, in the Rust extension (as
``flitsim._core.ConfigError`` / ``flitsim._core.StalledError``, so they pickle
and cross process boundaries: ProcessPool, Dask, Ray), and raised from Rust and
Python alike, so ``except ValueError`` / ``except RuntimeError`` also catch them.

- :class:`ConfigError` (a ``ValueError``): a configuration value is invalid; the
  message names the field, the value and what is allowed.
- :class:`StalledError` (a ``RuntimeError``): a simulation made no progress with
  work pending; the message says what is blocked.
- :class:`WorkerCrashedError` (a ``RuntimeError``, declared here in Python; it
  pickles as any one-message exception): a worker process of a ``-j N`` pool
  died running an item, even rerun alone (:func:`flitsim.parallel.map_ordered`).
"""

from __future__ import annotations

import numbers
from typing import Any

from pydantic import ValidationError

from flitsim._core import ConfigError, StalledError

__all__ = ["ConfigError", "StalledError", "WorkerCrashedError", "config_error", "from_validation_error", "check_int", "check_bool", "number_list", "U64_MAX"]

U64_MAX = 2**64 - 1
"""Largest value of the engine's unsigned 64-bit fields (bytes, ps)."""


def config_error(field: str, value: Any, allowed: str) -> ConfigError:
    """Build a :class:`ConfigError` in the house format ``field = value: allowed``."""
    return ConfigError(f"{field} = {value!r}: {allowed}")


def number_list(field: str, text: str, allowed: str) -> list[float]:
    """The numbers of a comma-separated list (``0,1e-3,2e-3``): the one parser of
    such CLI lists, so an empty item (``''``, ``1e-3,,2e-3``) is refused rather
    than dropped.

    Raises:
        ConfigError: ``field = text: allowed`` for an empty item or one that is not a number.
    """
    items = str(text).split(",")
    try:
        if any(not x.strip() for x in items):
            raise ValueError
        return [float(x) for x in items]
    except ValueError:
        raise config_error(field, text, allowed) from None


def check_int(field: str, value: Any, minimum: int = 0, maximum: int | None = None, what: str = "an integer") -> int:
    """``value`` as a Python int if it is an integer in ``[minimum, maximum]``.

    The one integer check of the package (specs, builders, CLI options): a
    ``bool`` is not an integer (``True`` is not one port), nor is a string
    (``"8"``) or a float (``1.5`` bytes, ``8.0``); Python and numpy integers
    are accepted. ``maximum=None`` means no upper bound; ``what`` names the
    kind of value in the message ("a device id").

    Raises:
        ConfigError: naming ``field``, the value and the allowed range.
    """
    if type(value) is int and value >= minimum and (maximum is None or value <= maximum):
        return value  # fast path (task-graph builders call this per task): a plain int in range
    ok = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if ok and value >= minimum and (maximum is None or value <= maximum):
        return int(value)
    allowed = f"{what} in {minimum}..={maximum}" if maximum is not None else f"{what} >= {minimum}"
    if not ok:
        allowed += f" (got {type(value).__name__})"
    raise config_error(field, value, allowed)


def check_bool(field: str, value: Any) -> bool:
    """``value`` as a Python bool if it is one (Python or numpy bool).

    The one flag check of the builders: a string (``"false"`` is truthy), a
    number or None is not a flag, so it is refused rather than coerced.

    Raises:
        ConfigError: naming ``field``, the value and "true or false".
    """
    if type(value).__name__ in ("bool", "bool_"):
        return bool(value)
    raise config_error(field, value, f"true or false (got {type(value).__name__})")


def from_validation_error(err: ValidationError, owner: str) -> ConfigError:
    """Turn a pydantic ``ValidationError`` into a :class:`ConfigError` that names
    every offending field (dotted path under ``owner``), its value and the rule."""
    parts = []
    for e in err.errors():
        inner = (e.get("ctx") or {}).get("error")
        if isinstance(inner, ConfigError):
            # Raised by a validator (often the engine's own check): already
            # names field, value and rule; don't repeat the whole input.
            where = ".".join(str(p) for p in e["loc"])
            parts.append(f"{owner}{'.' + where if where else ''}: {inner}")
            continue
        loc = ".".join(str(p) for p in (owner, *e["loc"]))
        value = e.get("input", "<missing>") if e["type"] != "missing" else "<missing>"
        parts.append(f"{loc} = {value!r}: {e['msg']}")
    return ConfigError("; ".join(parts))


class WorkerCrashedError(RuntimeError):
    """A worker process died (killed by the out-of-memory killer, a segfault)
    while running one item of a parallel map, and again when the item was rerun
    alone; the message names the item and how the worker ended."""


class FidelityWarning(UserWarning):
    """A flow-level run outside the flow level's validation (credit- or
    arbitration-bound, rolling incast, parallel pipelined transfers): the
    message names the reason; ``fidelity="auto"`` would have run packet level."""
