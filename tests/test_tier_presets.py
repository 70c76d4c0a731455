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
    # (P2P through the CPU allowed: the raw fabric, not NCCL's transport choice)
    (rate,) = _rates("pcie-8xl20", [0], [5], p2p_through_cpu=True)
    assert rate == pytest.approx(PCIE4_X16_GBPS, rel=2e-3)
    assert rate <= PCIE4_X16_GBPS * (1 + 1e-9)


def test_two_flows_sharing_one_socket_link_get_half_each():
    # One UPI link between the sockets; GPUs 0 and 2 sit behind different PCIe
    # switches of socket 0, so only the UPI link is shared: half of it each.
    spec = pcie_box("pcie-8xl20-1upi", 8, "pcie4x16", 2, upi_links=1, p2p_through_cpu=True)
    a, b = _rates(spec, [0, 2], [4, 6])
    assert a == pytest.approx(UPI2_GBPS / 2, rel=2e-3) and b == pytest.approx(UPI2_GBPS / 2, rel=2e-3)


def test_two_flows_sharing_a_pcie_switch_uplink_get_half_each():
    # GPUs 0 and 1 share PCIe switch 0's x16 uplink (4 UPI links leave room).
    a, b = _rates("pcie-8xl20", [0, 1], [4, 5], p2p_through_cpu=True)
    assert a == pytest.approx(PCIE4_X16_GBPS / 2, rel=2e-3) and b == pytest.approx(PCIE4_X16_GBPS / 2, rel=2e-3)


@pytest.mark.parametrize("order,share", [(None, 1), ([0, 2, 4, 6, 1, 3, 5, 7], 2)])
def test_pcie_ring_all_reduce_is_bounded_by_the_slowest_shared_uplink(order, share):
    # Ring 0..7: each direction of every switch uplink carries one ring edge, so
    # busbw -> one x16 link's payload rate; ring 0,2,4,...: two edges per
    # direction share each uplink, so busbw -> half of it.
    # The fabric side alone: P2P through the CPU allowed (NCCL_P2P_LEVEL=SYS) and
    # a GPU injection cap far above the links (the collective's default caps each
    # PCIe port at NCCL's 24 GB/s, test_default_transports_... below).
    fab = fabric_preset("pcie-8xl20", p2p_through_cpu=True)
    fab = fab.replace(gpu=fab.gpu.replace(injection_bytes_per_s=10**15))
    r = flitsim.collective(fab, "all_reduce", 256 << 20, group=order, algorithm="ring", fidelity="flow")
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
    # (GPUDirect RDMA through the root complex allowed: the raw fabric)
    rates = _rates("eth-2x8xl40", list(range(8)), list(range(8, 16)), p2p_through_cpu=True)
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
    with pytest.raises(flitsim.ConfigError, match="p2p_through_cpu"):
        fabric_preset("pcie-8xl20", p2p_through_cpu="yes")
    with pytest.raises(flitsim.ConfigError, match="gpu_p2p"):
        fabric_preset("eth-2x8xl40", gpu_p2p=1)
    fab = fabric_preset("pcie-8xl20")
    with pytest.raises(flitsim.ConfigError, match="link_injection_bytes_per_s"):
        fab.replace(gpu=fab.gpu.replace(link_injection_bytes_per_s=(1,)))


# --- NCCL's transport rules and per-port-kind injection (docs/fabrics.md) ---

NCCL_PCIE4_X16_GBPS = 16 * 120 / 80  # NCCL topo.cc: bw = width x speed / 80, speed 120 at 16 GT/s -> 24 GB/s


def test_p2p_is_allowed_exactly_where_nccls_pxb_rule_says():
    # NCCL_P2P_LEVEL default PXB (paths.cc ncclTopoCheckP2p): P2P only between GPUs
    # under one PCIe switch (2 per switch on pcie-8xl20), never through a root complex.
    fab = fabric_preset("pcie-8xl20")
    for a in range(8):
        for b in range(8):
            if a != b:
                blocker = flitsim.route(fab, a, b).p2p_blocker
                assert (blocker is None) == (a // 2 == b // 2), (a, b, blocker)
                if blocker is not None:
                    assert "root_complex" in blocker
    sys_level = fabric_preset("pcie-8xl20", p2p_through_cpu=True)  # NCCL_P2P_LEVEL=SYS
    assert all(flitsim.route(sys_level, 0, b).p2p_blocker is None for b in range(1, 8))
    no_p2p = fabric_preset("pcie-8xl20", gpu_p2p=False)  # driver reports P2P unsupported
    assert all(flitsim.route(no_p2p, 0, b).p2p_blocker is not None for b in range(1, 8))
    # GPUDirect RDMA (NCCL_NET_GDR_LEVEL PXB): NIC under the GPU's PCIe switch on the IB
    # preset (allowed), on a root port on the Ethernet preset (refused: host-staged)
    assert flitsim.route("ib-4xhgx-h100", 0, 8).p2p_blocker is None
    assert "root_complex" in flitsim.route("eth-2x8xl40", 0, 8).p2p_blocker


def test_auto_transport_host_stages_where_p2p_is_refused():
    s = 4 << 20
    fab = fabric_preset("pcie-8xl20")
    for dst in (2, 4):  # other switch on the same socket (PHB), other socket (SYS)
        auto = transfers(fab, [0], [dst], s, transport="auto", fidelity="flow")
        host = transfers(fab, [0], [dst], s, transport="host", fidelity="flow")
        assert auto.makespan_ps == host.makespan_ps
        with pytest.raises(flitsim.ConfigError, match="root_complex"):
            transfers(fab, [0], [dst], s, transport="p2p", fidelity="flow")
    # under one switch: P2P + NCCL's PCI hardware latency over NVLink (tuning.cc hwLat, 2.3 us)
    plain = transfers(fab, [0], [1], s, fidelity="flow")
    auto = transfers(fab, [0], [1], s, transport="auto", fidelity="flow")
    assert auto.makespan_ps == plain.makespan_ps + 2_300_000


def test_pcie_ports_inject_at_nccls_pcie_rate():
    # The collective's calibrated cap on a PCIe port is NCCL's 24 GB/s for Gen4 x16,
    # not the NVLink-calibrated share: a ring (P2P under a switch, host-staged
    # elsewhere) moves busbw = one port's rate, never more.
    r = flitsim.collective("pcie-8xl20", "all_reduce", 256 << 20, algorithm="ring", fidelity="flow")
    assert r.busbw_GBps <= NCCL_PCIE4_X16_GBPS * (1 + 1e-6)
    assert r.busbw_GBps >= 0.95 * NCCL_PCIE4_X16_GBPS


def test_two_ib_nodes_all_reduce_is_nic_bound_as_nccl_measures():
    # NVIDIA (nccl-tests issue 290): NDR 400G should give 46-48 GB/s per NIC, and a
    # ring's busbw reflects what crosses the NICs (nccl-tests issue 160): 8 NICs per
    # node -> 368-384 GB/s. Never above 8 NDR ports' payload rate. Before the
    # per-port-kind cap the GPU's PCIe port got an NVLink-sized 1/19 share (~189 GB/s).
    r = flitsim.collective("ib-4xhgx-h100", "all_reduce", 256 << 20, group=list(range(16)), algorithm="ring",
                           fidelity="flow")
    assert r.busbw_GBps <= 8 * NDR_GBPS
    assert r.busbw_GBps >= 0.9 * 8 * 46


def test_nvlink_bridge_ledger_is_the_datasheet_600_GBps():
    # NVIDIA H100 PCIe datasheet: NVLink bridge 600 GB/s bidirectional across the pair.
    rows = {(r.scope, r.stage): r for r in flitsim.ledger("pcie-2xh100-nvbridge").rows}
    assert rows[("gpu", "nvlink4 payload")].bidirectional_GBps == pytest.approx(600.0, rel=1e-12)
