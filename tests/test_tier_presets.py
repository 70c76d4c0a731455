"""Multi-tier presets (PCIe boxes, NVLink bridge, Ethernet / InfiniBand
nodes, two NVSwitch tiers) and the flow tier on them, against closed forms.

Expected values come from the link rate chains (PCIe Base Spec 128b/130b and
TLP framing, UPI 20 lanes x 16 GT/s x 64/80, IB NDR 400 Gb/s, RoCEv2 framing;
flitsim/hardware/io_links.py cites each), never from a run of the code.
"""

import pytest

import flitsim
from flitsim.hardware import fabric_preset
from flitsim.hardware.gpus import fabric_gpu
from flitsim.hardware.tier_presets import TIER_PRESETS, pcie_box
from flitsim.transfers import transfers

PCIE4_X16_GBPS = 16 * 16 * 128 / 130 / 8 * 256 / (256 + 28)  # 28.40 GB/s after TLP + DLLP share
UPI2_GBPS = 20 * 16 * 64 / 80 / 8 * 256 / 288  # 28.44 GB/s: 4 cache-line headers per 256 B
NDR_GBPS = 400 / 8 * 4096 / (4096 + 26)  # 49.68 GB/s at a 4096 B MTU
ETH100_GBPS = 100 / 8 * 4096 / (4096 + 82)  # 12.25 GB/s RoCEv2

SMALL = ["pcie-8xl20", "pcie-8xl40", "pcie-4xa100", "pcie-2xh100-nvbridge", "eth-2x8xl40", "ib-4xhgx-h100"]


@pytest.mark.parametrize("name", SMALL)
def test_preset_builds_names_its_gpu_and_routes(name):
    spec = fabric_preset(name)
    p = TIER_PRESETS[name]
    assert spec.gpus == p.gpus and spec.name == name
    assert fabric_gpu(spec) == p.gpu and fabric_gpu(name) == p.gpu
    assert p.sources and p.assumed
    r = flitsim.route(spec, 0, spec.gpus - 1)
    assert r.hops and r.hops[0].kind == "gpu"


def _rates(name, src, dst, nbytes=32 << 20, **opts):
    r = transfers(fabric_preset(name, **opts) if isinstance(name, str) else name, src, dst, nbytes, fidelity="flow")
    t = r.transfers
    return [b / ((e - s) * 1e-12) / 1e9 for b, s, e in zip(t["bytes"], t["start_ps"], t["end_ps"])]


def test_single_pcie_transfer_runs_at_the_tlp_payload_rate():
    # One GPU -> GPU copy across both sockets: every hop is x16 Gen4 or wider, so
    # the TLP payload rate of one x16 Gen4 link bounds it (latency < 0.1 % at 32 MiB).
    (rate,) = _rates("pcie-8xl20", [0], [5])
    assert rate == pytest.approx(PCIE4_X16_GBPS, rel=2e-3)
    assert rate <= PCIE4_X16_GBPS * (1 + 1e-9)


def test_two_flows_sharing_one_socket_link_get_half_each():
    # One UPI link between the sockets; GPUs 0 and 2 sit behind different PCIe
    # switches of socket 0, so only the UPI link is shared: half of it each.
    spec = pcie_box("pcie-8xl20-1upi", 8, "pcie4x16", 2, upi_links=1)
    a, b = _rates(spec, [0, 2], [4, 6])
    assert a == pytest.approx(UPI2_GBPS / 2, rel=2e-3) and b == pytest.approx(UPI2_GBPS / 2, rel=2e-3)


def test_two_flows_sharing_a_pcie_switch_uplink_get_half_each():
    # GPUs 0 and 1 share PCIe switch 0's x16 uplink (4 UPI links leave room).
    a, b = _rates("pcie-8xl20", [0, 1], [4, 5])
    assert a == pytest.approx(PCIE4_X16_GBPS / 2, rel=2e-3) and b == pytest.approx(PCIE4_X16_GBPS / 2, rel=2e-3)


@pytest.mark.parametrize("order,share", [(None, 1), ([0, 2, 4, 6, 1, 3, 5, 7], 2)])
def test_pcie_ring_all_reduce_is_bounded_by_the_slowest_shared_uplink(order, share):
    # Ring 0..7: each direction of every switch uplink carries one ring edge, so
    # busbw -> one x16 link's payload rate; ring 0,2,4,...: two edges per
    # direction share each uplink, so busbw -> half of it.
    # link_efficiency=1: the fabric side alone (the collective's default caps GPU
    # injection at NCCL's NVLink-calibrated 0.849 of the port rate).
    r = flitsim.collective("pcie-8xl20", "all_reduce", 256 << 20, group=order, algorithm="ring", fidelity="flow",
                           link_efficiency=1.0)
    bound = PCIE4_X16_GBPS / share
    assert r.busbw_GBps <= bound * (1 + 1e-6)
    assert r.busbw_GBps >= 0.97 * bound


def test_nic_is_the_bottleneck_between_ib_nodes():
    # Rail-optimized: GPU g of node 0 -> GPU g of node 1 uses NIC g and leaf g:
    # 8 parallel copies each at one NDR port's payload rate, far below NVLink.
    # (Within 0.5 %: ~1.5 us of NIC, switch and link latency on a 0.7 ms copy.)
    rates = _rates("ib-4xhgx-h100", list(range(8)), list(range(8, 16)))
    for x in rates:
        assert NDR_GBPS * 0.995 <= x <= NDR_GBPS * (1 + 1e-9)


def test_ethernet_nodes_share_their_nics():
    # 8 copies node 0 -> node 1 over 2 x 100 GbE NICs per node (one per socket).
    rates = _rates("eth-2x8xl40", list(range(8)), list(range(8, 16)))
    assert sum(rates) == pytest.approx(2 * ETH100_GBPS, rel=5e-3)


def test_nvlink_bridge_carries_the_peer_copy():
    # The peer copy takes only the 12 bridged NVLink 4 links (the bridge is
    # preferred over the PCIe root port): 12 x 25 GB/s x 256/272 (NVLink packet).
    (rate,) = _rates("pcie-2xh100-nvbridge", [0], [1])
    bound = 12 * 25.0 * 256 / 272
    assert bound * 0.995 <= rate <= bound * (1 + 1e-9)


def test_ledger_of_an_ib_cluster_shows_nic_next_to_nvlink():
    led = flitsim.ledger("ib-4xhgx-h100")
    rows = {(r.scope, r.stage): r for r in led.rows}
    assert rows[("gpu", "nvlink4 payload")].per_direction_GBps == pytest.approx(18 * 25.0, rel=1e-9)
    assert rows[("nic", "network payload per GPU")].per_direction_GBps == pytest.approx(50.0, rel=1e-9)
    assert rows[("link ibndr", "effective @ 4096 B")].per_direction_GBps == pytest.approx(NDR_GBPS, rel=1e-9)


def test_ledger_of_a_pcie_box_shows_uplinks_and_sockets():
    led = flitsim.ledger("pcie-8xl20")
    rows = {(r.scope, r.stage): r for r in led.rows}
    assert rows[("gpu", "pcie4x16 effective @ 256 B")].per_direction_GBps == pytest.approx(PCIE4_X16_GBPS, rel=1e-9)
    assert rows[("socket link", "payload")].per_direction_GBps == pytest.approx(4 * 32.0, rel=1e-9)
    up = rows[("pcie_switch -> root_complex", "payload")]
    assert up.per_direction_GBps == pytest.approx(16 * 16 * 128 / 130 / 8, rel=1e-9)
    assert "2.00:1" in up.derivation  # 2 GPUs behind one x16 uplink
    eth = {(r.scope, r.stage): r for r in flitsim.ledger("eth-2x8xl40").rows}
    assert eth[("nic", "network payload per GPU")].per_direction_GBps == pytest.approx(4 * 12.5 / 16, rel=1e-9)


def test_bad_preset_options_are_config_errors():
    with pytest.raises(flitsim.ConfigError, match="upi_links"):
        pcie_box("x", 8, "pcie4x16", 2, upi_links=0)
    with pytest.raises(flitsim.ConfigError, match="nics_per_node"):
        fabric_preset("eth-2x8xl40", nics_per_node=3)
    with pytest.raises(flitsim.ConfigError, match="gpus"):
        fabric_preset("pcie-8xl20", gpus=4)


def test_nvlink_bridge_ledger_is_the_datasheet_600_GBps():
    # NVIDIA H100 PCIe datasheet: NVLink bridge 600 GB/s bidirectional across the pair.
    rows = {(r.scope, r.stage): r for r in flitsim.ledger("pcie-2xh100-nvbridge").rows}
    assert rows[("gpu", "nvlink4 payload")].bidirectional_GBps == pytest.approx(600.0, rel=1e-12)
