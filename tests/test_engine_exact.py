"""Packet-engine speed changes leave every answer bit-identical: each fast case of
benches/engine_exact.py (collectives on NVL72, HGX H100 / B200, a PCIe graph fabric, an
8-GPU fabric losing a plane mid-run; transfer batches with counters, bit errors, faults,
host endpoints, RDMA across nodes) against the digest recorded with the engine before
the change (tests/data/engine_exact.json; how it was made is in the bench's docstring).
The expected values are the old engine's outputs, not the new one's: the test fails if
a change to the event path moves any time, byte, packet or counter."""

from __future__ import annotations

import json
import pathlib
import sys
import warnings

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benches"))
import engine_exact  # noqa: E402

RECORD = json.loads((ROOT / "tests" / "data" / "engine_exact.json").read_text())
FAST = [(name, f) for name, slow, f in engine_exact.cases() if not slow]


@pytest.mark.parametrize("name,run", FAST, ids=[n for n, _ in FAST])
def test_case_is_bit_identical_to_the_recorded_engine(name: str, run) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got, _events = run()
    want = {k: v for k, v in RECORD[name].items() if k != "events"}
    assert got == want
