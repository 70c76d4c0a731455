"""A -j N worker that dies mid-run (the out-of-memory killer, a segfault) loses
nothing else (flitsim.parallel.map_ordered): the results already in are kept,
the dead worker's items are rerun alone, and an item that dies even alone is
reported (``crashed``) or raised as a WorkerCrashedError that pickles."""

from __future__ import annotations

import faulthandler
import os
import pickle
import signal
import time

import pytest

from flitsim.errors import WorkerCrashedError
from flitsim.parallel import map_ordered

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX signals and fork")


def _work(i: int, mode: str, flag: str = "") -> int:
    time.sleep(0.02)
    if mode == "die":
        os.kill(os.getpid(), signal.SIGKILL)
    if mode == "segv":
        faulthandler.disable()  # pytest's handler, inherited by the fork, would print a traceback into the log
        os.kill(os.getpid(), signal.SIGSEGV)
    if mode == "busy":  # a heavy run: holds the flag for a while
        open(flag, "w").close()
        time.sleep(0.5)
        os.remove(flag)
    if mode == "dies_beside_busy" and os.path.exists(flag):  # dies only when not alone (two runs > RAM)
        os.kill(os.getpid(), signal.SIGKILL)
    return i * i


def test_a_dead_worker_costs_only_its_own_item():
    items = [(i, "ok") for i in range(8)] + [(8, "die")] + [(i, "ok") for i in range(9, 16)]
    seen = []
    out = map_ordered(_work, items, 2, done=lambda i, r: seen.append(i), crashed=lambda i, why: ("dead", i, why))
    assert out[:8] == [i * i for i in range(8)] and out[9:] == [i * i for i in range(9, 16)]
    assert out[8][:2] == ("dead", 8) and "SIGKILL" in out[8][2]
    assert sorted(seen) == list(range(16))  # done once per item, the dead one included


def test_a_segfault_is_named():
    out = map_ordered(_work, [(0, "ok"), (1, "segv"), (2, "ok")], 2, crashed=lambda i, why: why)
    assert out[0] == 0 and out[2] == 4 and "SIGSEGV" in out[1] and "out-of-memory" not in out[1]


def test_without_crashed_the_error_names_the_item_and_pickles():
    with pytest.raises(WorkerCrashedError, match=r"item 1 of 3 \(_work\(1, 'die'\)\).*SIGKILL") as e:
        map_ordered(_work, [(0, "ok"), (1, "die"), (2, "ok")], 2)
    back = pickle.loads(pickle.dumps(e.value))
    assert isinstance(back, RuntimeError) and str(back) == str(e.value)


def test_an_item_that_fits_alone_is_rerun_alone_and_succeeds(tmp_path):
    flag = str(tmp_path / "busy")
    items = [(0, "busy", flag), (1, "dies_beside_busy", flag)] + [(i, "ok", flag) for i in range(2, 6)]
    # item 1 starts while item 0 holds the flag, dies; rerun alone it finishes: nothing is marked crashed
    out = map_ordered(_work, items, 2, crashed=lambda i, why: f"crashed {i}")
    assert out == [i * i for i in range(6)]


def test_ordinary_exceptions_still_propagate():
    with pytest.raises(ZeroDivisionError):
        map_ordered(divmod, [(1, 1), (1, 0), (2, 1)], 2, crashed=lambda i, why: None)
