"""The one byte-size parser (CLI options, nccl-tests sweeps, sweep files).

``64K``, ``64KB`` and ``64KiB`` all mean 65,536 bytes: K, M, G, T are powers
of 1024 with or without ``B`` / ``iB``, as in nccl-tests' ``-b 64K -e 8G``
(``parsesize`` in nccl-tests src/common.cu), NCCL's own size variables and the
GPU datasheets' memory sizes, so a size copied from an nccl-tests command line
or log means the same here. A plain number is bytes. Fractions are accepted
only when they give a whole number of bytes (``1.5K`` = 1536; ``1.5`` and
``0.1K`` are errors, never rounded).
"""

from __future__ import annotations

import numbers
import re
from fractions import Fraction
from typing import Any

from flitsim.errors import check_int, config_error

__all__ = ["parse_bytes", "UNITS"]

UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}
"""Multiplier per prefix letter (binary)."""

_RE = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([KMGTP]?)(I?B)?\s*", re.IGNORECASE)


def parse_bytes(value: Any, field: str = "size", maximum: int = 2**64 - 1) -> int:
    """Bytes from ``value``: an integer, or text like ``4096``, ``64K``,
    ``64KB``, ``64KiB``, ``8G`` (binary prefixes; see the module docstring).

    Raises:
        ConfigError: not a size, not a whole number of bytes, negative, or
            above ``maximum``; the message names ``field``.
    """
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return check_int(field, value, 0, maximum)
    if not isinstance(value, str):
        raise config_error(field, value, "a byte count like 4096, 64K, 64KiB, 8G (K = 1024)")
    m = _RE.fullmatch(value)
    if not m or (m.group(3) and m.group(3).lower() == "ib" and not m.group(2)):
        raise config_error(field, value, "a byte count like 4096, 64K, 64KiB, 8G (K = 1024)")
    n = Fraction(m.group(1)) * UNITS[m.group(2).upper()]
    if n.denominator != 1:
        raise config_error(field, value, f"a whole number of bytes (this is {float(n):g} bytes)")
    return check_int(field, int(n), 0, maximum)
