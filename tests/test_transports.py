"""Transports and collectives across tiers (issue 14 points 2 and 4) on the
graph presets, checked from link statistics and closed forms.

Sources of the expected values: NCCL src/graph/tuning.cc hwLat (extra latency
of a PCIe path over NVLink, Simple: 5.7 - 3.4 = 2.3 us); the closed forms of
docs/collectives.md "Across tiers" (unpipelined staged copy = two serialized
hops; ring across D domains: every ring crosses each boundary once, the NICs
carry D x 2(n-1)/n x S; hierarchical all_reduce: 2 (D-1) S across domains);
nccl-tests busbw definitions. Link payload rates come from the presets' own
link specs (`route(...).hops[*].link_payload_GBps`).
"""

from __future__ import annotations


import numpy as np
import pytest

import flitsim
from flitsim.errors import ConfigError
from flitsim.hardware.fabric import fabric_preset

S = 4 << 20
EXTRA_PCIE_PS = 2_300_000


def _path_rate_GBps(fab, src, dst):
    return min(h.link_payload_GBps for h in flitsim.route(fab, src, dst).hops)


def test_unpipelined_host_staged_copy_is_two_serialized_hops():
    fab = fabric_preset("pcie-8xl40")
    one = flitsim.transfers(fab, [0], [7], S, transport="host", transport_params={"host_chunk_bytes": 0})
    # the staging host is the one nearest the receiver: its two hops, each S at its path's rate
    host = fab.gpus + next(h for h in range(fab.hosts)
                           if not flitsim.route(fab, 7, fab.gpus + h).p2p_blocker and
                           len(flitsim.route(fab, 7, fab.gpus + h).hops) == min(
                               len(flitsim.route(fab, 7, fab.gpus + k).hops) for k in range(fab.hosts)))
    hop1 = S / _path_rate_GBps(fab, 0, host) * 1e3
    hop2 = S / _path_rate_GBps(fab, host, 7) * 1e3
    want = EXTRA_PCIE_PS + hop1 + hop2
    assert one.makespan_ps == pytest.approx(want, rel=0.03)
    # the link statistics carried the copy twice (once into host memory, once out)
    assert int(one.links.payload_bytes.sum()) >= 2 * S
    # pipelined (512 KiB chunks) overlaps the hops: faster, but never faster than one hop
    piped = flitsim.transfers(fab, [0], [7], S, transport="host")
    assert max(hop1, hop2) < piped.makespan_ps < one.makespan_ps


def test_p2p_forced_across_a_blocking_root_complex_names_it():
    # The preset follows NCCL's default P2P level (PXB: no P2P through a root
    # complex); p2p_through_cpu=True is NCCL_P2P_LEVEL=SYS.
    fab = fabric_preset("pcie-8xl40", p2p_through_cpu=True)
    shut = fabric_preset("pcie-8xl40")
    assert all(not k.allow_p2p for k in shut.switch_kinds if k.kind == "root_complex")
    assert all(k.allow_p2p for k in fab.switch_kinds)
    with pytest.raises(ConfigError, match="root_complex"):
        flitsim.transfers(shut, [0], [7], S, transport="p2p")
    # auto falls back to host staging: the same time as forcing it
    auto = flitsim.transfers(shut, [0], [7], S, transport="auto")
    host = flitsim.transfers(shut, [0], [7], S, transport="host")
    assert auto.makespan_ps == host.makespan_ps
    # where P2P is allowed, auto is P2P plus the PCIe extra latency
    plain = flitsim.transfers(fab, [0], [7], S)
    assert flitsim.transfers(fab, [0], [7], S, transport="auto").makespan_ps == plain.makespan_ps + EXTRA_PCIE_PS
    with pytest.raises(ConfigError, match="one domain"):
        flitsim.transfers(fab, [0], [7], S, transport="rdma")
    with pytest.raises(ConfigError, match="transport"):
        flitsim.transfers(fab, [0], [7], S, transport="carrier-pigeon")


def _eth_class(fab):
    """Index of the Ethernet link spec (the network side of the NICs)."""
    r = flitsim.route(fab, 0, fab.gpus - 1)
    kinds = [h.kind for h in r.hops]
    return r.hops[kinds.index("ethernet")].link, r.hops[kinds.index("ethernet")].link_payload_GBps


@pytest.mark.parametrize("algorithm", ["ring", "hierarchical"])
def test_two_node_all_reduce_nic_bytes_and_bound(algorithm):
    fab = fabric_preset("eth-2x8xl40")
    group, D, n = [0, 1, 8, 9], 2, 4
    r = flitsim.collective(fab, "all_reduce", 2 * S, group=group, algorithm=algorithm)
    eth, nic_GBps = _eth_class(fab)
    carried = int(r.stats["link_class_payload_bytes"][eth])
    # every network crossing is two Ethernet links (NIC -> switch -> NIC); the
    # protocol's wire share on top (LL128: 128 B lines carry 120 B, NCCL device.h)
    crossing = D * 2 * (n - 1) / n * 2 * S if algorithm == "ring" else 2 * (D - 1) * 2 * S
    wire = {"simple": 1.0, "ll128": 128 / 120, "ll": 2.0}[r.protocol]
    assert carried == pytest.approx(2 * crossing * wire, rel=1e-6)
    # busbw never above the path bound: the NIC carries busbw's bytes each way
    assert r.busbw_GBps <= nic_GBps * 1.0001


def test_hierarchical_all_reduce_is_intra_plus_inter_with_the_nic_as_bottleneck():
    # GPUDirect RDMA allowed through the root complex (p2p_through_cpu=True:
    # NCCL_P2P_LEVEL / NCCL_NET_GDR_LEVEL = SYS), so the inter phase is one hop
    fab = fabric_preset("eth-2x8xl40", p2p_through_cpu=True)
    h = flitsim.collective(fab, "all_reduce", 2 * S, group=[0, 1, 8, 9], algorithm="hierarchical")
    rs = flitsim.collective(fab, "reduce_scatter", 2 * S, group=[0, 1])
    ag = flitsim.collective(fab, "all_gather", 2 * S, group=[0, 1])
    _, nic_GBps = _eth_class(fab)
    # inter phase: each node's NIC sends (D-1)/D x 2 x (S_total / L) x L = S_total each way
    inter_us = 2 * S / nic_GBps / 1e3
    lower = rs.time_us + ag.time_us + inter_us
    assert lower * 0.97 <= h.time_us <= lower * 1.15


def test_default_gdr_rule_stages_cross_node_data_through_host_memory():
    # NCCL's default NCCL_NET_GDR_LEVEL is PXB (paths.cc ncclTopoCheckGdr): a NIC on
    # a root port is too far from GPUs behind PCIe switches for GPUDirect RDMA, so
    # each side stages through its host memory. Same Ethernet bytes; the host
    # memory links carry the staged copies (into host memory and out, both nodes).
    staged = fabric_preset("eth-2x8xl40")
    gdr = fabric_preset("eth-2x8xl40", p2p_through_cpu=True)
    kw = dict(group=[0, 8], algorithm="ring", protocol="simple")
    a = flitsim.collective(staged, "all_reduce", 2 * S, **kw)
    b = flitsim.collective(gdr, "all_reduce", 2 * S, **kw)
    eth, _ = _eth_class(staged)
    assert int(a.stats["link_class_payload_bytes"][eth]) == int(b.stats["link_class_payload_bytes"][eth])
    ddr = [i for i, l in enumerate(staged.links) if l.serdes.lanes == 64]  # the DDR5 channels
    assert ddr and sum(int(b.stats["link_class_payload_bytes"][i]) for i in ddr) == 0
    # ring of 2: each GPU sends 2 (n-1)/n x S_total = S_total; link classes count what
    # switch outputs drive, i.e. the writes into host memory: once per side per byte
    staged_bytes = sum(int(a.stats["link_class_payload_bytes"][i]) for i in ddr)
    assert staged_bytes == pytest.approx(2 * 2 * (2 * S), rel=1e-9)
    assert a.time_us > b.time_us


def test_nccl_tests_table_and_cli_on_a_multi_node_preset():
    df = flitsim.nccl_tests("eth-2x8xl40", "all_reduce", minbytes="1M", maxbytes="1M")
    assert list(df["size"]) == [1 << 20] and (df.busbw_GBps > 0).all()
    # 16 GPUs over two nodes: busbw below one NIC's payload rate (the ring's path bound)
    assert float(df.busbw_GBps.iloc[0]) <= _eth_class(fabric_preset("eth-2x8xl40"))[1]
    import os
    import subprocess
    import sys

    code = ("import sys; from flitsim.cli import main; sys.argv = ['flitsim', 'nccl-tests', 'all_reduce', '-F', 'pcie-8xl40', "
            "'-b', '1M', '-e', '1M', '--format', 'nccl-tests']; main()")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "busbw" in out.stdout and "1048576" in out.stdout


def test_pxn_relays_to_the_gpu_on_the_receivers_rail():
    # ib-4xhgx-h100: GPU 0 (rail 0) -> GPU 9 (node 1, rail 1). PXN: over the node's
    # fabric to GPU 1 (rail 1) first, then over rail 1's leaf; without PXN the
    # fabric's own route. Either way the InfiniBand links carry S twice (NIC ->
    # leaf -> NIC, no spine); PXN adds one relay of S to the GPU-side links.
    fab = fabric_preset("ib-4xhgx-h100")
    on = flitsim.transfers(fab, [0], [9], S, transport="auto", transport_params={"pxn": True})
    off = flitsim.transfers(fab, [0], [9], S, transport="auto", transport_params={"pxn": False})
    assert int(on.links.payload_bytes.sum()) == 2 * S
    assert int(off.links.payload_bytes.sum()) == S
    ib = flitsim.route(fab, 0, 9).hops[3]
    assert ib.kind == "infiniband"
    for t in (on, off):
        assert int(t.switch_links[t.switch_links.link_index == ib.link].payload_bytes.sum()) == 2 * S


def _ib_class(fab):
    r = flitsim.route(fab, 0, 8)
    kinds = [h.kind for h in r.hops]
    return r.hops[kinds.index("infiniband")].link, r.hops[kinds.index("infiniband")].link_payload_GBps


@pytest.mark.parametrize("algorithm", ["tree", "nvls"])
def test_tree_and_nvls_tree_across_nodes_carry_the_closed_form_network_bytes(algorithm):
    # NCCL's inter-node double binary tree (tree: chains inside the nodes) and NVLS-tree (NVLS inside, the
    # tree across the rails) over 4 HGX nodes x 2 GPUs: every node but a tree's root sends each element up
    # once and receives it down once, so the network carries 2 (D-1) S; each crossing is two IB links
    # (NIC -> rail leaf -> NIC: a tree's heads share a rail). Link statistics, packet level.
    fab = fabric_preset("ib-4xhgx-h100")
    group, D, size = [0, 1, 8, 9, 16, 17, 24, 25], 4, 2 << 20
    r = flitsim.collective(fab, "all_reduce", size, group=group, algorithm=algorithm, protocol="simple",
                           fidelity="packet")
    assert r.algorithm == algorithm
    ib, nic_GBps = _ib_class(fab)
    assert int(r.stats["link_class_payload_bytes"][ib]) == 2 * 2 * (D - 1) * size
    # busbw below the 2 NICs per node the group's GPUs bring (each node's data leaves over them)
    assert r.busbw_GBps <= 2 * nic_GBps


def test_small_sizes_across_nodes_are_monotone_and_errors_name_the_repeat():
    # hierarchical used to need a multiple of 32 B on 8-GPU domains, so 8 B fell back to a slower ring
    fab = fabric_preset("eth-2x8xl40")
    t = [flitsim.collective(fab, "all_reduce", b, fidelity="flow").time_us for b in (8, 16, 32, 64)]
    assert all(a <= b * 1.001 for a, b in zip(t, t[1:])), t
    with pytest.raises(ConfigError, match="appears twice"):
        flitsim.collective(fab, "all_reduce", 1 << 20, group=[0, 1, 8, 8], algorithm="hierarchical")


def test_pcie_all_to_all_stages_in_nccls_p2p_chunk_within_the_uplink_bound():
    # NCCL src/init.cc: p2p operations use p2pChunkSize, 128 KiB off NVLink
    # (NCCL_P2P_PCI_CHUNKSIZE). On pcie-8xl20 every part leaving a PCIe switch
    # crosses its uplink once each way: 2 GPUs x 6 outside peers x S/8 = 1.5 S
    # per uplink direction, so busbw <= 7/8 x uplink payload / 1.5.
    fab = fabric_preset("pcie-8xl20")
    s = 4 << 20
    auto = flitsim.collective(fab, "all_to_all", s, fidelity="flow")
    big = flitsim.collective(fab, "all_to_all", s, fidelity="flow", params={"p2p_chunk_bytes": 512 << 10})
    one = flitsim.collective(fab, "all_to_all", s, fidelity="flow", params={"host_chunk_bytes": 0})
    uplink = _path_rate_GBps(fab, 0, 2)  # GPU link and switch uplink: the same Gen4 x16 payload rate
    bound = 7 / 8 * uplink / 1.5
    for r in (auto, big, one):
        assert r.busbw_GBps <= bound * 1.001
        # bytes on the GPUs' links: each rank sends (n-1)/n of its buffer, staged or not
        np.testing.assert_array_equal(r.bytes_sent[:8], 7 * s // 8)
    # 512 KiB parts: the 128 KiB chunk pipelines the two legs, 512 KiB does not
    assert auto.time_us < big.time_us <= one.time_us * 1.001
    with pytest.raises(ConfigError, match="p2p_chunk_bytes"):
        flitsim.collective(fab, "all_to_all", s, fidelity="flow", params={"p2p_chunk_bytes": 100})
