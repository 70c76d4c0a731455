"""Progress reporting that suits where stderr goes.

On a terminal: a tqdm bar. Anywhere else (a pipe, a file, a CI log): one
plain line per update at most every :data:`LOG_INTERVAL_S` seconds, plus the
first and the last, with no carriage returns, so a log holds a few short,
readable lines instead of one line of thousands of redraws.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

__all__ = ["LOG_INTERVAL_S", "progress_bar", "LineProgress"]

LOG_INTERVAL_S = 10.0
"""Seconds between two progress lines when stderr is not a terminal."""


class LineProgress:
    """tqdm's used subset (update, set_postfix_str, close) written as plain lines:
    ``desc: done/total unit (pct) elapsed s [postfix]``."""

    def __init__(self, total: int, desc: str, unit: str, file: TextIO, initial: int = 0,
                 interval_s: float = LOG_INTERVAL_S) -> None:
        self.total, self.desc, self.unit, self.file = int(total), desc, unit, file
        self.n = int(initial)
        self.interval_s = interval_s
        self.postfix = ""
        self._t0 = time.monotonic()
        self._last: float | None = None
        self._closed = False
        self._emit()

    def _emit(self) -> None:
        pct = f" ({self.n / self.total:.0%})" if self.total else ""
        tail = f" [{self.postfix}]" if self.postfix else ""
        self.file.write(f"{self.desc}: {self.n}/{self.total} {self.unit}{pct} "
                        f"{time.monotonic() - self._t0:.1f} s{tail}\n")
        self.file.flush()
        self._last = time.monotonic()

    def update(self, n: int = 1) -> None:
        """Count ``n`` more done; print a line when the interval has passed."""
        self.n += int(n)
        if self._last is None or time.monotonic() - self._last >= self.interval_s:
            self._emit()

    def set_postfix_str(self, s: str) -> None:
        """Text shown after the count on the next line."""
        self.postfix = s

    def close(self) -> None:
        """Print the final line (once)."""
        if not self._closed:
            self._closed = True
            self._emit()


def progress_bar(total: int, desc: str, unit: str = "it", file: TextIO | None = None, initial: int = 0) -> Any:
    """A tqdm bar when ``file`` (default stderr) is a terminal, else a
    :class:`LineProgress` writing periodic plain lines."""
    f = file if file is not None else sys.stderr
    isatty = getattr(f, "isatty", None)
    if isatty is not None and isatty():
        from tqdm.auto import tqdm

        return tqdm(total=total, desc=desc, unit=unit, file=f, initial=initial, leave=True)
    return LineProgress(total, desc, unit, f, initial=initial)
