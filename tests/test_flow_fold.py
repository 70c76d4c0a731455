"""The flow level's rank fold (collective/flow_run.rs ``run_flow_folded``): an
all-to-all over every GPU of a fabric whose GPUs the flow model treats alike
runs rank 0 alone. It is exact, so the expected values are the whole-fabric
flow run's (``FLITSIM_FLOW_FOLD=0``), bit for bit; the physics checks are the
bytes the links carried."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import flitsim
from flitsim.hardware import fabric_preset, uniform_fabric


def _a2a(f, nbytes, monkeypatch, fold: bool, **kw):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("FLITSIM_FLOW_FOLD", "1" if fold else "0")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return flitsim.collective(f, "all_to_all", nbytes, algorithm="direct", protocol="simple", **kw)


# 1 chunk per pair; 2 and 4 chunks per pair (the window of 4 in flight: pipeline-bound warning);
# 16 MiB on the 8-GPU presets: 4 chunks per pair.
CASES = [("gb200-nvl72", 64 << 20), ("gb200-nvl72", 256 << 20), ("hgx-b200", 16 << 20),
         ("hgx-h100", 256 << 20), ("dgx-a100", 16 << 20)]


@pytest.mark.parametrize("name,nbytes", CASES)
def test_fold_is_bit_identical_to_the_whole_fabric(name: str, nbytes: int, monkeypatch: pytest.MonkeyPatch) -> None:
    f = fabric_preset(name, fidelity="flow")
    n = f.gpus
    nbytes = nbytes // (n * n * 4) * (n * n * 4)
    a, b = _a2a(f, nbytes, monkeypatch, True), _a2a(f, nbytes, monkeypatch, False)
    assert "ranks folded" in a.stats["fold_reason"] and "ranks folded" not in b.stats["fold_reason"]
    assert a.time_us == b.time_us and a.busbw_GBps == b.busbw_GBps
    for k in ("bytes_sent", "bytes_received", "link_bytes_sent", "link_bytes_received"):
        assert np.array_equal(getattr(a, k), getattr(b, k)), k
    for k in ("packets", "transfers", "max_link_utilization", "fidelity_reason", "faults", "sim_packet_bytes"):
        assert a.stats[k] == b.stats[k], k
    assert np.array_equal(a.stats["link_class_payload_bytes"], b.stats["link_class_payload_bytes"])
    # physics: every GPU's links carried what it sends to the n - 1 others, and delivered what it
    # receives (each port's share rounded to a byte: within one byte per port)
    want = (n - 1) * (nbytes // n)
    for got in (a.link_bytes_sent, a.link_bytes_received):
        assert (np.abs(got.astype(np.int64) - want) <= f.gpu_ports).all()
    assert a.stats["max_link_utilization"] <= 1.0 + 1e-9
    assert a.stats["events"] < b.stats["events"]


def test_fold_only_where_every_rank_is_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    f = fabric_preset("gb200-nvl72", fidelity="flow")
    nbytes = 72 * 72 * 4 * 256
    # a group that is not every GPU, packet level, other collectives: the whole fabric runs
    assert "ranks folded" not in _a2a(f, 8 * 8 * 4 * 256, monkeypatch, True, group=list(range(8))).stats["fold_reason"]
    assert "ranks folded" not in _a2a(f.replace(fidelity="packet"), nbytes, monkeypatch, True).stats["fold_reason"]
    monkeypatch.setenv("FLITSIM_FLOW_FOLD", "1")
    assert "ranks folded" not in flitsim.collective(f, "all_gather", nbytes).stats["fold_reason"]
    # GPUs with different port counts (4 GPUs, 2 switches; GPU 3 misses its second link):
    # uplinks differ, so the flow model does not treat the GPUs alike
    u = uniform_fabric(4, [1, 1], fidelity="flow")
    odd = u.replace(wires=tuple(w for w in u.wires if not (w.gpu == 3 and w.gpu_port == 1)))
    r = _a2a(odd, 4 * 4 * 4 * 1024, monkeypatch, True)
    assert "ranks folded" not in r.stats["fold_reason"]
    assert r.time_us == _a2a(odd, 4 * 4 * 4 * 1024, monkeypatch, False).time_us


def test_auto_fidelity_folds_too(monkeypatch: pytest.MonkeyPatch) -> None:
    f = fabric_preset("gb200-nvl72", fidelity="auto")
    nbytes = 72 * 72 * 4 * 256
    a, b = _a2a(f, nbytes, monkeypatch, True), _a2a(f, nbytes, monkeypatch, False)
    assert a.stats["fidelity"] == b.stats["fidelity"] == "flow"
    assert "ranks folded" in a.stats["fold_reason"]
    assert a.time_us == b.time_us and a.stats["fidelity_reason"] == b.stats["fidelity_reason"]


@pytest.mark.parametrize("nbytes", [1 << 20, 64 << 20])
def test_fold_makes_the_protocol_choice_the_whole_fabric_makes(nbytes: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # protocol auto: several candidates (Simple, LL / LL128) simulated, the fastest kept
    f = fabric_preset("gb200-nvl72", fidelity="flow")
    nbytes = nbytes // (72 * 72 * 4) * (72 * 72 * 4)
    res = []
    for fold in ("1", "0"):
        monkeypatch.setenv("FLITSIM_FLOW_FOLD", fold)
        res.append(flitsim.collective(f, "all_to_all", nbytes))
    a, b = res
    assert "ranks folded" in a.stats["fold_reason"] and "ranks folded" not in b.stats["fold_reason"]
    assert len(a.stats["auto_candidates"]) >= 2
    assert a.stats["auto_candidates"] == b.stats["auto_candidates"]
    assert (a.protocol, a.time_us, a.busbw_GBps) == (b.protocol, b.time_us, b.busbw_GBps)
    assert np.array_equal(a.link_bytes_received, b.link_bytes_received)
