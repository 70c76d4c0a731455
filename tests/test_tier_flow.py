"""Flow level against packet level on every multi-tier preset (small cases).

Bandwidth-bound (MiB-sized transfers, shared links, a ring all_reduce):
within 2 % (docs/fidelity.md, the flow tier's stated bound). Latency-bound
(one 256 B packet): within 15 % -- the packet engine's output serializers add
up to one packet time per element that the fluid's head-flit latency does not
(docs/fabrics.md, "The flow tier on graphs").
"""

import pytest

import flitsim
from flitsim.hardware import fabric_preset
from flitsim.hardware.tier_presets import gb200_nvl576
from flitsim.transfers import transfers

CASES = {
    # name: [(src list, dst list)] crossing each kind of tier the preset has
    "pcie-8xl20": [([0], [1]), ([1], [2]), ([3], [4]), ([0, 1], [4, 5]), ([0, 3], [5, 4])],
    "pcie-8xl40": [([0, 2, 4, 6], [7, 5, 3, 1])],
    "pcie-4xa100": [([0], [1]), ([0, 1], [2, 3])],
    "pcie-2xh100-nvbridge": [([0], [1]), ([0, 1], [1, 0])],
    "eth-2x8xl40": [([0], [8]), (list(range(8)), list(range(8, 16)))],
    "ib-4xhgx-h100": [([0], [1]), ([0], [9]), ([0, 1, 2, 3], [8, 17, 26, 11])],
}


def _both(fabric, src, dst, nbytes, **kw):
    out = []
    for fid in ("flow", "packet"):
        with _quiet():
            r = transfers(fabric, src, dst, nbytes, fidelity=fid, **kw)
        out.append(r.transfers["duration_ps"].to_numpy().astype(float))
    return out


class _quiet:
    def __enter__(self):
        import warnings

        self._w = warnings.catch_warnings()
        self._w.__enter__()
        warnings.simplefilter("ignore")

    def __exit__(self, *a):
        self._w.__exit__(*a)


def _raw(name):
    """The preset with P2P allowed through the CPU (NCCL_P2P_LEVEL=SYS), so
    raw GPU -> GPU transfers cross every tier the preset has (these tests
    compare the fidelities on the fabric, not the transports)."""
    return fabric_preset(name, p2p_through_cpu=True) if name.startswith(("pcie", "eth")) else fabric_preset(name)


@pytest.mark.parametrize("name", sorted(CASES))
def test_flow_matches_packet_bandwidth_bound(name):
    fabric = _raw(name)
    # ~0.1 ms of traffic per case: latency < 1 % of it, packet level still quick.
    nbytes = (1 << 20) if name.startswith("eth") else (4 << 20)
    for src, dst in CASES[name]:
        flow, packet = _both(fabric, src, dst, nbytes)
        for f, p in zip(flow, packet):
            assert f == pytest.approx(p, rel=0.02), (name, src, dst)


@pytest.mark.parametrize("name", sorted(CASES))
def test_flow_matches_packet_latency_bound(name):
    fabric = _raw(name)
    src, dst = CASES[name][0]
    flow, packet = _both(fabric, src, dst, 256)
    assert flow[0] == pytest.approx(packet[0], rel=0.15)
    assert flow[0] <= packet[0] * 1.001  # the fluid leaves out per-element serializer time, never adds


def test_flow_matches_packet_on_two_nvswitch_tiers():
    fabric = gb200_nvl576(racks=2)  # 144 GPUs: the NVL576 wiring rule, small enough for packet level
    flow, packet = _both(fabric, [0, 1, 72], [72, 100, 5], 2 << 20)
    for f, p in zip(flow, packet):
        assert f == pytest.approx(p, rel=0.02)


@pytest.mark.parametrize("name", ["pcie-8xl20"])
def test_ring_all_reduce_flow_matches_packet(name):
    res = []
    for fid in ("flow", "packet"):
        with _quiet():
            r = flitsim.collective(name, "all_reduce", 32 << 20, algorithm="ring", fidelity=fid, link_efficiency=1.0)
        res.append(r.time_us)
    assert res[0] == pytest.approx(res[1], rel=0.02)


def test_auto_runs_flow_on_graph_presets():
    with _quiet():
        r = transfers("pcie-8xl20", [0], [5], 1 << 20, fidelity="auto")
    assert r.summary()["fidelity"] == "flow"


def test_three_leg_staged_cross_node_copy_flow_matches_packet():
    # No GPUDirect RDMA on eth-2x8xl40 (NIC on a root port): GPU -> host -> host -> GPU,
    # pipelined in 512 KiB chunks, one chunk in flight per leg. With two in flight per
    # leg this ran 5.5 % slower at flow level (two chunks sharing one leg's route).
    flow, packet = _both("eth-2x8xl40", [0], [8], 4 << 20, transport="auto")
    assert flow[0] == pytest.approx(packet[0], rel=0.02)


def test_cross_node_ring_is_outside_flow_validation_so_auto_runs_packet():
    # The eth-2x8xl40 32 MiB ring (link_efficiency 1) is flow 3313 us vs packet
    # 3039 us with NCCL's transports (+9 %; flow -12.6 % with P2P through the CPU;
    # packet costs ~15 min on 2 cores, so the pair is recorded in docs/fabrics.md,
    # not run here). Its ring channels run concurrent transfers between one pair,
    # which the flow tier declares outside its validation: auto never uses that number.
    with _quiet():
        r = flitsim.collective("eth-2x8xl40", "all_reduce", 32 << 20, algorithm="ring", fidelity="flow",
                               link_efficiency=1.0)
    assert "outside its validation" in r.stats["fidelity_reason"]
    assert "pipeline-bound" in r.stats["fidelity_reason"]
