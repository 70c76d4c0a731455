"""Independent runs on a process pool: results in submission order, so the
outcome is bit-identical at any worker count (every run is deterministic and
shares no state with the others). Engines release the GIL, so threads scale
too; processes also parallelize the Python around them (graph building,
metrics)."""

from __future__ import annotations

from typing import Any, Callable, Sequence, TypeVar

from flitsim.errors import ConfigError, WorkerCrashedError

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


_STARTED: Any = None
"""In a worker: the parent's shared byte per item, set to 1 when the item starts
(so a worker's death is pinned on the items it was running)."""


def _tracked_init(started: Any) -> None:
    global _STARTED
    _worker_init()
    _STARTED = started


def _call_tracked(args: tuple[int, Callable[..., Any], tuple[Any, ...]]) -> Any:
    i, fn, a = args
    _STARTED[i] = 1
    return fn(*a)


def _exitcode(p: Any) -> int | None:
    """``p.exitcode`` once the pool's manager thread and this one are done reaping it (two
    threads' waitpid race: the loser reads no status for a moment)."""
    for _ in range(100):
        p.join(0.05)
        if p.exitcode is not None:
            return int(p.exitcode)
    return None


def _why_dead(codes: list[int | None]) -> str:
    """The exit of a worker that died mid-run, in words (the others were stopped by the pool)."""
    import signal

    own = [c for c in codes if c not in (None, 0, -signal.SIGTERM)] or [c for c in codes if c not in (None, 0)]
    if not own:
        return "its worker process ended without a result"
    c = own[0]
    if c < 0:
        try:
            name = signal.Signals(-c).name
        except ValueError:
            name = f"signal {-c}"
        hint = (" (most likely the kernel's out-of-memory killer: the run needed more host memory than "
                "was free)") if -c == signal.SIGKILL else ""
        return f"its worker process was killed by {name}{hint}"
    return f"its worker process exited with status {c}"


def _run_pool(fn: Callable[..., Any], items: Sequence[tuple[Any, ...]], todo: list[int], jobs: int,
              res: list[Any], have: list[bool], done: Callable[[int, Any], None] | None) -> tuple[list[int], str]:
    """Run ``todo`` on a pool of ``jobs`` workers into ``res``. Returns ([], "") when all
    finished, else (the items that were running when a worker died, why it died); the items
    finished before that keep their results."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    # fork where the platform has it: workers start at once and need no
    # `if __name__ == "__main__"` guard in the caller's script (the engine
    # keeps no threads of its own, so forking is safe); spawn elsewhere.
    method = "fork" if "fork" in mp.get_all_start_methods() else "spawn"
    ctx = mp.get_context(method)
    started = ctx.RawArray("b", len(items))
    pool = ProcessPoolExecutor(max_workers=min(jobs, len(todo)), mp_context=ctx,
                               initializer=_tracked_init, initargs=(started,))
    procs: list[Any] = []
    try:
        with _sigint_deferred():
            # the first submit forks the workers: a Ctrl-C landing inside os.fork's at-fork handlers
            # (logging's lock release) was "ignored" there and the run went on to finish; blocked
            # here, it is delivered right after, as a KeyboardInterrupt in this try block
            futs = {pool.submit(_call_tracked, (i, fn, tuple(items[i]))): i for i in todo}
            procs = list((getattr(pool, "_processes", None) or {}).values())
        for f in as_completed(futs):
            i = futs[f]
            try:
                r = f.result()
            except BrokenProcessPool:
                procs += [p for p in (getattr(pool, "_processes", None) or {}).values() if p not in procs]
                pool.shutdown(wait=True, cancel_futures=True)  # its manager thread reaps the workers: let it finish
                why = _why_dead([_exitcode(p) for p in procs])
                # results that arrived before the break are kept (as_completed may not have yielded them yet)
                for g, k in futs.items():
                    if not have[k] and g.done() and not g.cancelled() and g.exception() is None:
                        res[k], have[k] = g.result(), True
                        if done:
                            done(k, res[k])
                running = [k for k in todo if started[k] and not have[k]]
                return (running or [k for k in todo if not have[k]][:jobs]), why
            res[i], have[i] = r, True
            if done:
                done(i, r)
    except BaseException:
        _terminate(pool)
        raise
    pool.shutdown(wait=True)
    return [], ""


def map_ordered(fn: Callable[..., T], items: Sequence[tuple[Any, ...]], jobs: int,
                done: Callable[[int, T], None] | None = None,
                crashed: Callable[[int, str], T] | None = None) -> list[T]:
    """``[fn(*item) for item in items]`` on ``jobs`` worker processes (1: in
    this process). ``done(i, result)`` is called as each finishes (any order);
    the list is in item order. ``fn`` and the items must pickle; an exception
    in a worker is raised here (flitsim errors pickle). On any exception here
    (Ctrl-C included) the workers are terminated before it propagates.

    A worker that dies mid-run (the out-of-memory killer, a segfault) loses
    nothing else: the results already in are kept, the items it may have been
    running are rerun one at a time, each alone in a fresh worker (two heavy runs
    side by side may not fit where one does), and the rest go on in a new pool.
    An item whose worker dies even alone becomes ``crashed(i, why)`` (``why``:
    the exit, in words) or, without ``crashed``, raises
    :class:`~flitsim.errors.WorkerCrashedError` naming it. At ``jobs = 1``
    nothing is isolated: a crash there ends this process.
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
    res: list[Any] = [None] * len(items)
    have = [False] * len(items)
    todo = list(range(len(items)))
    while todo:
        suspects, _ = _run_pool(fn, items, todo, jobs, res, have, done)
        for i in suspects:  # alone: a second death is this item's own
            alone, why1 = _run_pool(fn, items, [i], 1, res, have, done)
            if alone:
                if crashed is None:
                    raise WorkerCrashedError(f"item {i} of {len(items)} ({fn.__name__}{tuple(items[i])!r:.200}): "
                                             f"{why1} (rerun alone, after a worker of the pool died)")
                res[i], have[i] = crashed(i, why1), True
                if done:
                    done(i, res[i])
        todo = [i for i in todo if not have[i]]
    return res
