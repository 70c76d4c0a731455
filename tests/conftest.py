"""Shared fixtures: one run of examples/tiny.toml and its written report,
reused by the report tests (it takes ~10-25 s on a loaded machine)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def tiny_result():
    from flitsim.scenario import run_scenario

    return run_scenario(ROOT / "examples" / "tiny.toml", progress=False)


@pytest.fixture(scope="session")
def tiny_report(tiny_result, tmp_path_factory):
    """(folder, paths) of the tiny scenario's written report."""
    out = tmp_path_factory.mktemp("tiny") / "rep"
    paths = tiny_result.write(out)
    return out, paths
