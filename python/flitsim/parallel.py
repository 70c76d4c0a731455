"""Independent runs on a process pool: results in submission order, so the
outcome is bit-identical at any worker count (every run is deterministic and
shares no state with the others). Engines release the GIL, so threads scale
too; processes also parallelize the Python around them (graph building,
metrics)."""

from __future__ import annotations

from typing import Any, Callable, Sequence, TypeVar

from flitsim.errors import ConfigError

T = TypeVar("T")

MAX_JOBS = 1024
"""Largest worker count accepted (far above any machine's cores)."""


def check_jobs(jobs: Any) -> int:
    """``jobs`` as a worker count.

    Raises:
        ConfigError: not an integer in 1..1024.
    """
    if isinstance(jobs, bool) or not isinstance(jobs, int) or not 1 <= jobs <= MAX_JOBS:
        raise ConfigError(f"jobs = {jobs!r}: expected an integer worker count in 1..{MAX_JOBS} (1 = no pool)")
    return jobs


def _worker_init() -> None:
    # Ctrl-C goes to the whole process group: workers ignore it and are
    # terminated by the parent (which alone decides to stop), and SIGTERM
    # kills them outright (a forked worker inherits the parent's handlers).
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if hasattr(signal, "pthread_sigmask"):  # forked inside _sigint_deferred: the mask is inherited
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})


class _sigint_deferred:
    """``with _sigint_deferred():`` SIGINT (and SIGTERM) stay pending in the block and
    are delivered when it ends (``pthread_sigmask``; a no-op where it does not exist or
    off the main thread, where Python handles no signals)."""

    def __enter__(self) -> "_sigint_deferred":
        import signal
        import threading

        self._old = None
        if hasattr(signal, "pthread_sigmask") and threading.current_thread() is threading.main_thread():
            self._old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        return self

    def __exit__(self, *exc: object) -> None:
        if self._old is not None:
            import signal

            signal.pthread_sigmask(signal.SIG_SETMASK, self._old)


def _terminate(pool: Any) -> None:
    """Kill ``pool``'s workers now (Ctrl-C, SIGTERM, an error): pending runs
    are cancelled, running ones are not waited for."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
    for p in procs:
        if p.is_alive():
            p.terminate()
    pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        p.join(5.0)
        if p.is_alive():
            p.kill()


def _call(args: tuple[Callable[..., Any], tuple[Any, ...]]) -> Any:
    fn, a = args
    return fn(*a)


def map_ordered(fn: Callable[..., T], items: Sequence[tuple[Any, ...]], jobs: int,
                done: Callable[[int, T], None] | None = None) -> list[T]:
    """``[fn(*item) for item in items]`` on ``jobs`` worker processes (1: in
    this process). ``done(i, result)`` is called as each finishes (any order);
    the list is in item order. ``fn`` and the items must pickle; an exception
    in a worker is raised here (flitsim errors pickle). On any exception here
    (Ctrl-C included) the workers are terminated before it propagates.
    """
    jobs = check_jobs(jobs)
    if jobs == 1 or len(items) <= 1:
        out = []
        for i, it in enumerate(items):
            r = fn(*it)
            if done:
                done(i, r)
            out.append(r)
        return out
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed

    # fork where the platform has it: workers start at once and need no
    # `if __name__ == "__main__"` guard in the caller's script (the engine
    # keeps no threads of its own, so forking is safe); spawn elsewhere.
    method = "fork" if "fork" in mp.get_all_start_methods() else "spawn"
    pool = ProcessPoolExecutor(max_workers=min(jobs, len(items)), mp_context=mp.get_context(method),
                               initializer=_worker_init)
    try:
        with _sigint_deferred():
            # the first submit forks the workers: a Ctrl-C landing inside os.fork's at-fork handlers
            # (logging's lock release) was "ignored" there and the run went on to finish; blocked
            # here, it is delivered right after, as a KeyboardInterrupt in this try block
            futs = {pool.submit(_call, (fn, tuple(it))): i for i, it in enumerate(items)}
        res: list[Any] = [None] * len(items)
        for f in as_completed(futs):
            i = futs[f]
            res[i] = f.result()
            if done:
                done(i, res[i])
    except BaseException:
        _terminate(pool)
        raise
    pool.shutdown(wait=True)
    return res
