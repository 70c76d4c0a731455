"""Fabric presets beyond one NVSwitch tier: PCIe boxes, an NVLink-bridged
pair, Ethernet- and InfiniBand-joined nodes and a two-tier NVLink domain.

Each preset is a graph of endpoints (GPUs, host memory), switching elements
(PCIe switches, CPU root complexes, NICs, Ethernet/InfiniBand switches,
NVSwitch chips, NVLink bridges) and links, built with
:class:`~flitsim.hardware.graph_build.GraphBuilder`. :data:`TIER_PRESETS`
records for each its GPU (a :mod:`flitsim.hardware.gpus` preset, so compute
uses it), its sources and what is assumed; docs/fabrics.md repeats them.

Common assumptions (no public source gives a server's internal PCIe layout):

- Two CPU sockets per PCIe server, joined by 4 UPI 2.0 links (Intel 4th/5th
  gen Xeon platforms support up to 4: Intel Xeon Scalable product brief).
- 8-GPU PCIe servers put 2 GPUs behind each of 4 PCIe switches, 2 switches
  per socket, each switch on one x16 root port (the common 8-GPU 4U layout).
- Host memory: one endpoint per socket, 8 DDR5-4800 channels.
- GPU peer-to-peer follows NCCL's default rule (``ncclTopoCheckP2p``, NCCL
  src/graph/paths.cc): P2P only where the path stays below the CPU
  (``NCCL_P2P_LEVEL`` default PXB: through PCIe switches, never through a
  root complex / host bridge or across UPI); elsewhere NCCL uses its SHM
  transport, a copy staged through host memory. The CPUs are assumed Intel
  Xeon (NCCL relaxes the rule to SYS only on AMD hosts with at most 2 GPUs),
  so every root complex has ``allow_p2p = False``;
  ``p2p_through_cpu=True`` is ``NCCL_P2P_LEVEL=SYS``. GPU <-> NIC
  GPUDirect RDMA follows the same PXB default (``ncclTopoCheckGdr``,
  ``NCCL_NET_GDR_LEVEL``), so a NIC on a root port is reached through host
  memory. ``gpu_p2p=False`` is a GPU whose driver reports PCIe P2P
  unsupported (NVML status "GPU not supported", as GeForce cards report):
  NCCL then drops P2P even under one PCIe switch. The data-center GPUs of
  these presets (L20, L40, A100, H100) support it (an L4, the same Ada
  data-center family, reports peer access and copies at 19.9 GB/s across
  sockets: NVIDIA/cuda-samples issue 284).
- Element latencies: PCIe switch 110 ns port to port (cut-through PCIe
  switches are quoted at ~100-150 ns; Broadcom PEX88000/PEX89000 product
  briefs), root complex 150 ns, NIC 300 ns per direction, Ethernet / InfiniBand
  switch 300 / 130 ns — all *assumed*.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from flitsim.errors import ConfigError
from flitsim.hardware.fabric import FabricSpec
from flitsim.hardware.graph_build import GraphBuilder
from flitsim.hardware.links import link_preset

_PSW_NS = 110.0
_RC_NS = 150.0
_NIC_NS = 300.0
_ETH_SWITCH_NS = 300.0
_IB_SWITCH_NS = 130.0
_UPI_LINKS = 4
_DDR_CHANNELS = 8


@dataclass(frozen=True)
class TierPreset:
    """What a multi-tier preset is built from: ``gpu`` (GPU preset name),
    ``sources`` and ``assumed`` (human-readable lists), ``build``."""

    name: str
    gpu: str
    gpus: int
    sources: tuple[str, ...]
    assumed: tuple[str, ...]
    build: Callable[..., FabricSpec]


def _kinds(b: GraphBuilder, *, p2p_through_cpu: bool, gpu_p2p: bool = True) -> dict[str, int]:
    """PCIe switch and root-complex kinds under NCCL's P2P rule (module docstring)."""
    for name, v in (("p2p_through_cpu", p2p_through_cpu), ("gpu_p2p", gpu_p2p)):
        if not isinstance(v, bool):
            raise ConfigError(f"{name} = {v!r}: expected true or false")
    return {
        "psw": b.kind("pcie-switch", "pcie_switch", allow_p2p=gpu_p2p, latency_ns=_PSW_NS),
        "rc": b.kind("root-complex", "root_complex", allow_p2p=p2p_through_cpu and gpu_p2p, latency_ns=_RC_NS),
    }


def _sockets(b: GraphBuilder, k: dict[str, int], sockets: int, host_base: int, upi_links: int = _UPI_LINKS) -> list[int]:
    """Root complexes with their host memory, joined by ``upi_links`` UPI links (all pairs)."""
    rcs = [b.element(k["rc"]) for _ in range(sockets)]
    for s, rc in enumerate(rcs):
        for _ in range(_DDR_CHANNELS):
            b.wire(b.host(host_base + s), rc, "ddr5-4800")
    for i in range(sockets):
        for j in range(i + 1, sockets):
            for _ in range(upi_links):
                b.trunk(rcs[i], rcs[j], "upi2")
    return rcs


def _pcie_node(b: GraphBuilder, k: dict[str, int], gpu_base: int, gpus: int, host_base: int, *, pcie: str,
               gpus_per_switch: int, sockets: int = 2, upi_links: int = _UPI_LINKS) -> tuple[list[int], list[int]]:
    """One PCIe server: GPUs ``gpu_base..gpu_base+gpus`` split evenly over
    the sockets, behind PCIe switches of ``gpus_per_switch`` (0 = on root
    ports directly). Returns (root complexes, PCIe switches)."""
    rcs = _sockets(b, k, sockets, host_base, upi_links)
    per_socket = gpus // sockets
    switches = []
    for g in range(gpus):
        rc = rcs[g // per_socket]
        if gpus_per_switch == 0:
            b.wire(gpu_base + g, rc, pcie)
            continue
        if g % gpus_per_switch == 0:
            switches.append(b.element(k["psw"]))
            b.trunk(switches[-1], rc, pcie)
        b.wire(gpu_base + g, switches[-1], pcie)
    return rcs, switches


def _finish(b: GraphBuilder, name: str, options: dict[str, Any]) -> FabricSpec:
    fixed = {"gpus", "name", "switch_ports", "wires", "switches", "gpu_ports", "trunks", "switch_kinds",
             "switch_kind", "hosts", "links"} & set(options)
    if fixed:
        raise ConfigError(f"fabric preset {name!r} option = {sorted(fixed)[0]!r}: fixed by the preset's wiring")
    return FabricSpec(**b.spec_dict(name), **options)


def pcie_box(name: str, gpus: int, pcie: str, gpus_per_switch: int, *, p2p_through_cpu: bool = False,
             gpu_p2p: bool = True, upi_links: int = _UPI_LINKS, **options: Any) -> FabricSpec:
    """A two-socket PCIe server (see the module docstring for the layout);
    ``upi_links`` UPI 2.0 links between the sockets (default 4, assumed);
    ``p2p_through_cpu`` (NCCL_P2P_LEVEL=SYS) and ``gpu_p2p`` as in the
    module docstring.

    Raises:
        ConfigError: a GPU count not divisible by the sockets and switches,
            ``upi_links`` outside 1..4, a non-boolean ``p2p_through_cpu`` /
            ``gpu_p2p``.
    """
    if gpus % 2 or (gpus_per_switch and (gpus // 2) % gpus_per_switch):
        raise ConfigError(f"gpus = {gpus}: must split evenly over 2 sockets and switches of {gpus_per_switch}")
    if not isinstance(upi_links, int) or isinstance(upi_links, bool) or not 1 <= upi_links <= 4:
        raise ConfigError(f"upi_links = {upi_links!r}: expected 1..4 (Intel Xeon 4th/5th gen: up to 4 UPI links)")
    b = GraphBuilder(gpus=gpus, hosts=2)
    b.link(pcie)  # base packet format: the GPUs' own link
    k = _kinds(b, p2p_through_cpu=p2p_through_cpu, gpu_p2p=gpu_p2p)
    _pcie_node(b, k, 0, gpus, 0, pcie=pcie, gpus_per_switch=gpus_per_switch, upi_links=upi_links)
    return _finish(b, name, options)


def pcie_8xl20(**options: Any) -> FabricSpec:
    """8x L20 (PCIe Gen4 x16, NVIDIA L20 datasheet) in a two-socket server,
    2 GPUs per PCIe Gen4 switch, 2 switches per socket, 4 UPI 2.0 links (assumed layout)."""
    return pcie_box("pcie-8xl20", 8, "pcie4x16", 2, **options)


def pcie_8xl40(**options: Any) -> FabricSpec:
    """8x L40 (PCIe Gen4 x16, NVIDIA L40 datasheet), layout as pcie-8xl20
    (assumed; xDiT reports QPI/UPI crossings on its 8x L40 box)."""
    return pcie_box("pcie-8xl40", 8, "pcie4x16", 2, **options)


def pcie_4xa100(**options: Any) -> FabricSpec:
    """4x A100 PCIe (Gen4 x16, NVIDIA A100 datasheet), 2 per socket directly on
    CPU root ports, no PCIe switch (assumed layout)."""
    return pcie_box("pcie-4xa100", 4, "pcie4x16", 0, **options)


def pcie_2xh100_nvbridge(*, p2p_through_cpu: bool = False, **options: Any) -> FabricSpec:
    """2x H100 PCIe (Gen5 x16) on one socket's root ports, joined by NVLink
    bridges: 600 GB/s bidirectional across the pair (NVIDIA H100 PCIe
    datasheet) = 12 NVLink 4 links of 25 GB/s per direction, each modelled as
    one 2-port "bridge" element (a passive bridge: zero pipeline latency).
    assumed: one socket, GPUs on root ports."""
    b = GraphBuilder(gpus=2, hosts=1)
    b.link("nvlink4")  # base packet format
    k = _kinds(b, p2p_through_cpu=p2p_through_cpu)
    bridge = b.kind("nvlink-bridge", "bridge")
    rc = _sockets(b, k, 1, 0)[0]
    for g in range(2):
        b.wire(g, rc, "pcie5x16")
    for _ in range(12):
        e = b.element(bridge)
        b.wire(0, e, "nvlink4")
        b.wire(1, e, "nvlink4")
    return _finish(b, "pcie-2xh100-nvbridge", options)


def eth_2x8xl40(*, nics_per_node: int = 2, nic_gbps: int = 100, p2p_through_cpu: bool = False,
                gpu_p2p: bool = True, **options: Any) -> FabricSpec:
    """Two pcie-8xl40 servers joined by Ethernet (RoCEv2): ``nics_per_node``
    NICs of ``nic_gbps`` per server, one per socket on a Gen4 x16 root port,
    all on one Ethernet switch. xDiT's 2x8 L40 runs use Ethernet between the
    nodes (xDiT docs); the NIC count and speed are assumed (parameters).
    With the NIC on a root port, NCCL's GPUDirect RDMA rule (PXB) stages
    cross-node data through host memory on both sides (module docstring).

    Raises:
        ConfigError: ``nics_per_node`` not a positive multiple of the 2 sockets.
    """
    if not isinstance(nics_per_node, int) or nics_per_node < 2 or nics_per_node % 2:
        raise ConfigError(f"nics_per_node = {nics_per_node!r}: expected a positive even count (NICs split over 2 sockets)")
    eth = f"eth{nic_gbps}g"
    link_preset(eth)
    b = GraphBuilder(gpus=16, hosts=4)
    b.link("pcie4x16")  # base packet format: the GPUs' own link
    k = _kinds(b, p2p_through_cpu=p2p_through_cpu, gpu_p2p=gpu_p2p)
    nic = b.kind("nic", "nic", latency_ns=_NIC_NS)
    esw_kind = b.kind("ethernet-switch", "ethernet", latency_ns=_ETH_SWITCH_NS)
    nodes = [_pcie_node(b, k, 8 * n, 8, 2 * n, pcie="pcie4x16", gpus_per_switch=2) for n in range(2)]
    esw = b.element(esw_kind)
    for rcs, _ in nodes:
        for i in range(nics_per_node):
            e = b.element(nic)
            b.trunk(rcs[i % 2], e, "pcie4x16")
            b.trunk(e, esw, eth)
    return _finish(b, "eth-2x8xl40", options)


def ib_hgx_h100(nodes: int = 4, **options: Any) -> FabricSpec:
    """``nodes`` HGX H100 nodes joined by InfiniBand NDR, rail-optimized.

    Inside a node: 8 H100 SXM with 18 NVLink 4 links to 4 NVSwitch gen3 chips
    (5/4/4/5, Fabric Manager user guide; as ``hgx-h100``), and one PCIe Gen5
    x16 port each. 8 ConnectX-7 400G NDR NICs per node, one per GPU (NVIDIA
    DGX H100 user guide / DGX SuperPOD reference architecture). NIC r of every
    node goes to leaf (rail) switch r (rail-optimized, SuperPOD RA); each leaf
    has one uplink to each of ``nodes`` spine switches (non-blocking).
    assumed: GPU g and NIC g share PCIe Gen5 switch g // 2 (2 GPUs + 2 NICs per
    switch, 2 switches per socket), the spine count, 2 sockets with 4 UPI.

    Raises:
        ConfigError: ``nodes`` below 2.
    """
    if not isinstance(nodes, int) or isinstance(nodes, bool) or nodes < 2:
        raise ConfigError(f"nodes = {nodes!r}: expected an integer >= 2")
    b = GraphBuilder(gpus=8 * nodes, hosts=2 * nodes)
    b.link("nvlink4")  # base packet format
    k = _kinds(b, p2p_through_cpu=False)  # NCCL's PXB default; GPU and NIC share a PCIe switch (GDR)
    nvs = b.kind("nvswitch-gen3", "nvswitch", nvls=True)
    nic = b.kind("connectx-7", "nic", latency_ns=_NIC_NS)
    ib = b.kind("quantum-2", "infiniband", latency_ns=_IB_SWITCH_NS)
    leaves = [b.element(ib) for _ in range(8)]
    spines = [b.element(ib) for _ in range(nodes)]
    for n in range(nodes):
        g0 = 8 * n
        chips = [b.element(nvs) for _ in range(4)]
        for g in range(8):
            for c, count in enumerate((5, 4, 4, 5)):
                for _ in range(count):
                    b.wire(g0 + g, chips[c], "nvlink4")
        rcs = _sockets(b, k, 2, 2 * n)
        psws = []
        for g in range(8):
            if g % 2 == 0:
                psws.append(b.element(k["psw"]))
                b.trunk(psws[-1], rcs[g // 4], "pcie5x16")
            b.wire(g0 + g, psws[-1], "pcie5x16")
            e = b.element(nic)
            b.trunk(psws[-1], e, "pcie5x16")
            b.trunk(e, leaves[g], "ib-ndr")
    for leaf in leaves:
        for sp in spines:
            b.trunk(leaf, sp, "ib-ndr")
    return _finish(b, f"ib-{nodes}xhgx-h100", options)


def ib_4xhgx_h100(**options: Any) -> FabricSpec:
    """4 HGX H100 nodes, 8 x 400G NDR per node, rail-optimized (:func:`ib_hgx_h100`)."""
    return ib_hgx_h100(4, **options)


def gb200_nvl576(racks: int = 8, **options: Any) -> FabricSpec:
    """``racks`` GB200 NVL72 racks joined by a second NVSwitch tier (576 GPUs
    at 8 racks, the largest NVLink 5 domain: NVIDIA Mission Control docs).

    Inside a rack as ``gb200-nvl72``: GPU g port k <-> first-tier chip k
    (DGX GB200 user guide). NVIDIA publishes no NVL576 wiring; assumed here: a
    non-blocking folded Clos per plane. Each first-tier chip keeps its 72
    GPU-facing ports and gets 72 more up (144 ports, as one NVLink switch
    tray); plane k has 8 second-tier chips of 72 ports, and every first-tier
    chip of plane k has 72 / 8 = 9 links to each of them.

    Raises:
        ConfigError: ``racks`` outside 2..8.
    """
    if not isinstance(racks, int) or isinstance(racks, bool) or not 2 <= racks <= 8:
        raise ConfigError(f"racks = {racks!r}: expected 2..8 (576 GPUs is the largest NVLink 5 domain)")
    b = GraphBuilder(gpus=72 * racks)
    l1 = b.kind("nvlink-switch-l1", "nvswitch", nvls=True)
    l2 = b.kind("nvlink-switch-l2", "nvswitch", nvls=True)
    up = 72 // 8
    first = [[b.element(l1) for _ in range(18)] for _ in range(racks)]
    for r in range(racks):
        for g in range(72):
            for kk in range(18):
                b.wire(72 * r + g, first[r][kk], "nvlink5")
    for kk in range(18):
        second = [b.element(l2) for _ in range(8)]
        for r in range(racks):
            for j in range(8):
                for _ in range(up):
                    b.trunk(first[r][kk], second[j], "nvlink5")
    return _finish(b, "gb200-nvl576" if racks == 8 else f"gb200-nvl{72 * racks}-2tier", options)


_PCIE_SOURCES = ("PCI-SIG PCI Express Base Specification 4.0/5.0 (16/32 GT/s, 128b/130b)",
                 "Intel AN 708, Understanding PCI Express Throughput (TLP/DLLP overhead)",
                 "Intel Xeon Scalable (4th gen) product brief (UPI 2.0, 16 GT/s, up to 4 links)")
_PCIE_ASSUMED = ("2 sockets, 4 UPI links", "2 GPUs per PCIe switch, 2 switches per socket",
                 "element latencies (PCIe switch 110 ns, root complex 150 ns)",
                 "Intel CPUs: NCCL's P2P / GDR level PXB (no P2P through a root complex)")

TIER_PRESETS: dict[str, TierPreset] = {p.name: p for p in (
    TierPreset("pcie-8xl20", "l20", 8, _PCIE_SOURCES + ("NVIDIA L20 datasheet (PCIe Gen4 x16)",), _PCIE_ASSUMED,
               pcie_8xl20),
    TierPreset("pcie-8xl40", "l40", 8, _PCIE_SOURCES + ("NVIDIA L40 datasheet (PCIe Gen4 x16)",
                                                        "xDiT docs/performance/flux.md (QPI crossings on 8x L40)"),
               _PCIE_ASSUMED, pcie_8xl40),
    TierPreset("pcie-4xa100", "a100-pcie", 4, _PCIE_SOURCES + ("NVIDIA A100 PCIe datasheet (Gen4 x16)",),
               ("2 sockets, 2 GPUs per socket on root ports, no PCIe switch", "4 UPI links",
                "root complex latency 150 ns"), pcie_4xa100),
    TierPreset("pcie-2xh100-nvbridge", "h100-pcie", 2,
               _PCIE_SOURCES + ("NVIDIA H100 PCIe datasheet (Gen5 x16; NVLink bridge 600 GB/s bidirectional)",),
               ("one socket, GPUs on root ports", "bridge as 12 two-port elements with zero latency"),
               pcie_2xh100_nvbridge),
    TierPreset("eth-2x8xl40", "l40", 16, _PCIE_SOURCES + ("IEEE 802.3 (Ethernet framing, 100GBASE-R rates)",
                                                          "IBTA Vol. 1 Annex A17 (RoCEv2 headers)",
                                                          "xDiT docs (2x8 L40 over Ethernet)"),
               _PCIE_ASSUMED + ("2 x 100 GbE NICs per node, one per socket on a root port", "one Ethernet switch",
                                "NIC 300 ns, Ethernet switch 300 ns"), eth_2x8xl40),
    TierPreset("ib-4xhgx-h100", "h100", 32, ("NVIDIA Fabric Manager user guide (HGX H100 NVSwitch wiring)",
                                             "NVIDIA DGX SuperPOD reference architecture (8 x NDR per node, rails)",
                                             "NVIDIA ConnectX-7 datasheet (400 Gb/s NDR)",
                                             "IBTA Vol. 1 ch. 7 (LRH/BTH/ICRC/VCRC)"),
               ("GPU and NIC pairs share PCIe Gen5 switches (2 + 2 per switch)", "one spine per node, non-blocking",
                "NDR FEC as 802.3 100G lanes", "NIC 300 ns, IB switch 130 ns"), ib_4xhgx_h100),
    TierPreset("gb200-nvl576", "gb200", 576, ("DGX GB200 user guide (rack wiring)",
                                              "NVIDIA Mission Control docs (576-GPU NVLink domain)",
                                              "NVLink product page (144-port switch tray)"),
               ("second-tier wiring: non-blocking folded Clos, 8 L2 chips per plane, 9 links L1-L2",),
               gb200_nvl576),
)}
"""Multi-tier presets by name."""


def tier_gpu(name: str) -> str | None:
    """GPU preset name of a multi-tier preset (None if ``name`` is not one)."""
    p = TIER_PRESETS.get(str(name).lower().replace("_", "-"))
    return p.gpu if p else None
