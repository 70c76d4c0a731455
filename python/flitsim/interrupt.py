"""Ctrl-C for simulations on any thread.

Python runs signal handlers on the main thread only, so a simulation running
in a worker thread (``ThreadPoolExecutor``, Dask threads, a notebook's
background thread) never sees Ctrl-C: ``KeyboardInterrupt`` lands in the main
thread, which then waits forever for the workers. flitsim therefore wraps
Python's default SIGINT handler: on Ctrl-C it first calls
:func:`cancel_all` (a process-wide flag every engine polls between chunks of
events, so each running simulation raises ``KeyboardInterrupt`` within
milliseconds on whatever thread it runs), then raises ``KeyboardInterrupt`` as
usual. A handler installed by the user is left alone.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType

from flitsim import _core

__all__ = ["cancel_all", "install_sigint_handler", "sigterm_as_sigint"]


def cancel_all() -> None:
    """Stop every simulation running in this process, on any thread (each
    raises ``KeyboardInterrupt``); simulations started afterwards run normally."""
    _core.cancel_all()


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    _core.cancel_all()
    signal.default_int_handler(signum, frame)


def install_sigint_handler() -> bool:
    """Install the cancelling SIGINT handler if Python's default one is in
    place and this is the main thread (signals can only be set there).
    Returns whether it is installed. Called on ``import flitsim``."""
    if threading.current_thread() is not threading.main_thread():
        return False
    try:
        cur = signal.getsignal(signal.SIGINT)
    except (ValueError, AttributeError):
        return False
    if cur is _on_sigint:
        return True
    if cur is not signal.default_int_handler:
        return False
    signal.signal(signal.SIGINT, _on_sigint)
    return True


class sigterm_as_sigint:
    """``with sigterm_as_sigint():`` SIGTERM behaves like Ctrl-C in the block
    (engines cancelled, ``KeyboardInterrupt`` raised, so worker pools are
    terminated and temporary files removed on the way out) instead of killing
    this process and orphaning its workers. A no-op off the main thread or
    where a handler other than the default is installed."""

    def __enter__(self) -> "sigterm_as_sigint":
        self._old = None
        if threading.current_thread() is threading.main_thread() and hasattr(signal, "SIGTERM"):
            if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
                self._old = signal.signal(signal.SIGTERM, _on_sigint)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._old is not None:
            signal.signal(signal.SIGTERM, self._old)
