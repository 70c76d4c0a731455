"""Shared fixtures: one run of examples/tiny.toml and its written report,
reused by the report tests (it takes ~10-25 s on a loaded machine)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


_PROGRESS: dict[str, str] = {}


@pytest.fixture(scope="session")
def tiny_result():
    """The tiny scenario's result, run with progress on and stderr captured
    (a StringIO: not a terminal, like a CI log)."""
    import contextlib
    import io

    from flitsim.scenario import run_scenario

    buf = io.StringIO()
    with contextlib.redirect_stderr(buf):
        res = run_scenario(ROOT / "examples" / "tiny.toml", progress=True)
    _PROGRESS["tiny"] = buf.getvalue()
    return res


@pytest.fixture(scope="session")
def tiny_progress(tiny_result):
    """What the tiny run wrote to stderr as progress."""
    return _PROGRESS["tiny"]


@pytest.fixture(scope="session")
def tiny_report(tiny_result, tmp_path_factory):
    """(folder, paths) of the tiny scenario's written report."""
    out = tmp_path_factory.mktemp("tiny") / "rep"
    paths = tiny_result.write(out)
    return out, paths
