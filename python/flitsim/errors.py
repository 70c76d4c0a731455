"""Exceptions raised by flitsim.

Both are declared once, in the Rust extension, and raised from Rust and Python
alike, so ``except ValueError`` / ``except RuntimeError`` also catch them.

- :class:`ConfigError` (a ``ValueError``): a configuration value is invalid; the
  message names the field, the value and what is allowed.
- :class:`StalledError` (a ``RuntimeError``): a simulation made no progress with
  work pending; the message says what is blocked.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from flitsim._core import ConfigError, StalledError

__all__ = ["ConfigError", "StalledError", "config_error", "from_validation_error"]


def config_error(field: str, value: Any, allowed: str) -> ConfigError:
    """Build a :class:`ConfigError` in the house format ``field = value: allowed``."""
    return ConfigError(f"{field} = {value!r}: {allowed}")


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


class FidelityWarning(UserWarning):
    """A flow-level run outside the flow level's validation (credit- or
    arbitration-bound, rolling incast, parallel pipelined transfers): the
    message names the reason; ``fidelity="auto"`` would have run packet level."""
