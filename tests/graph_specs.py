"""Small graph fabrics for the graph tests (built here, not presets).

Links (one direction each; made-up round numbers so closed forms are easy):
- ``PCIE``: 16 lanes x 16 Gb/s NRZ, 128b/130b (PCIe Gen4 x16 signalling:
  PCI-SIG base spec 4.0), packet = 4-byte flits with 6 header flits (24 B of
  TLP header/framing/LCRC per TLP, the usual Gen4 figure), max payload 256 B.
- ``ETH``: 4 lanes x 25 Gb/s NRZ, no coding (a 100G-class port, rounded),
  64-byte flits with one header flit per protocol packet, max payload 4096 B.
"""

from __future__ import annotations

from flitsim.hardware.fabric import FabricSpec, StaticRoute, SwitchKind, Trunk, Wire
from flitsim.hardware.link_spec import LinkSpec, PacketFormat, SerdesSpec

PCIE = LinkSpec(serdes=SerdesSpec(baud_gbd=16.0, modulation="nrz", lanes=16, line_code="128b/130b"),
                packet=PacketFormat(flit_bytes=4, header_flits=6, max_payload_bytes=256),
                propagation_ps=5000, vcs=1, credits_per_vc_flits=4096, credit_return_ps=10000)
ETH = LinkSpec(serdes=SerdesSpec(baud_gbd=25.0, modulation="nrz", lanes=4),
               packet=PacketFormat(flit_bytes=64, header_flits=1, max_payload_bytes=4096),
               propagation_ps=50000, vcs=1, credits_per_vc_flits=8192, credit_return_ps=100000)


def two_node(faults=(), **kw) -> FabricSpec:
    """Two nodes x two GPUs; one NIC per GPU (GPU g port 0 <-> NIC g port 0
    over PCIe); every NIC's port 1 <-> Ethernet switch port g. Elements:
    NICs 0..3, Ethernet switch 4."""
    kinds = (SwitchKind(name="cx7", kind="nic"), SwitchKind(name="tor", kind="ethernet"))
    wires = tuple(Wire(gpu=g, gpu_port=0, switch=g, switch_port=0, link=0) for g in range(4))
    trunks = tuple(Trunk(a=g, a_port=1, b=4, b_port=g, link=1) for g in range(4))
    return FabricSpec(name="two-node", gpus=4, gpu_ports=1, switches=5, switch_ports=4, links=(PCIE, ETH),
                      wires=wires, switch_kinds=kinds, switch_kind=(0, 0, 0, 0, 1), trunks=trunks,
                      faults=tuple(faults), **kw)


def two_node_shared(faults=(), **kw) -> FabricSpec:
    """Two nodes; node n: a PCIe switch (element n) with GPUs 2n, 2n+1 on
    ports 0, 1 and NICs 2+2n, 3+2n on ports 2, 3 (PCIe trunks, NIC port 0);
    each NIC's port 1 <-> Ethernet switch (element 6) port (NIC - 2). One NIC
    per GPU, and either GPU may use either NIC of its node (ECMP)."""
    kinds = (SwitchKind(name="plx", kind="pcie_switch"), SwitchKind(name="cx7", kind="nic"),
             SwitchKind(name="tor", kind="ethernet"))
    wires = tuple(Wire(gpu=g, gpu_port=0, switch=g // 2, switch_port=g % 2, link=0) for g in range(4))
    trunks = []
    for nic in range(2, 6):
        node = (nic - 2) // 2
        trunks.append(Trunk(a=node, a_port=2 + (nic - 2) % 2, b=nic, b_port=0, link=0))
        trunks.append(Trunk(a=nic, a_port=1, b=6, b_port=nic - 2, link=1))
    return FabricSpec(name="two-node-shared", gpus=4, gpu_ports=1, switches=7, switch_ports=4, links=(PCIE, ETH),
                      wires=wires, switch_kinds=kinds, switch_kind=(0, 0, 1, 1, 1, 1, 2), trunks=tuple(trunks),
                      faults=tuple(faults), **kw)


def mesh(k: int, endpoint_ports: int = 2, torus: bool = False, dimension_order: bool = True, **kw) -> FabricSpec:
    """A k x k 2D mesh (or torus) of switches, one GPU per switch with
    ``endpoint_ports`` links to it; all links NVLink-4 like (links[0] = ``PCIE``
    is not used: one link spec, ``ETH``-free). Switch (x, y) = x + k*y; ports
    0..3 = +x, -x, +y, -y, then the GPU's."""
    from flitsim.hardware.links import nvlink4

    link = nvlink4()
    n = k * k
    wires = tuple(Wire(gpu=s, gpu_port=j, switch=s, switch_port=4 + j) for s in range(n) for j in range(endpoint_ports))
    trunks = []
    for y in range(k):
        for x in range(k):
            s = x + k * y
            if x + 1 < k or (torus and k > 2):
                trunks.append(Trunk(a=s, a_port=0, b=(x + 1) % k + k * y, b_port=1))
            if y + 1 < k or (torus and k > 2):
                trunks.append(Trunk(a=s, a_port=2, b=x + k * ((y + 1) % k), b_port=3))
    kinds = (SwitchKind(name="router", kind="nvswitch"),)
    routes = []
    if dimension_order:
        # XY routing (x first, then y; on a torus the shorter way round, ties +):
        # deadlock-free on a mesh (Dally & Seitz 1987); on a torus it needs
        # dateline VCs, so tori here are for routing tests, not saturation.
        for s in range(n):
            x, y = s % k, s // k
            for d in range(n):
                dx, dy = d % k, d // k
                if d == s:
                    routes.append(StaticRoute(switch=s, dst=d, ports=tuple(4 + j for j in range(endpoint_ports))))
                elif dx != x:
                    fwd = (dx - x) % k if torus else dx - x
                    plus = fwd > 0 and (not torus or fwd <= k - fwd)
                    routes.append(StaticRoute(switch=s, dst=d, ports=(0 if plus else 1,)))
                else:
                    fwd = (dy - y) % k if torus else dy - y
                    plus = fwd > 0 and (not torus or fwd <= k - fwd)
                    routes.append(StaticRoute(switch=s, dst=d, ports=(2 if plus else 3,)))
    return FabricSpec(name=f"mesh{k}", gpus=n, gpu_ports=endpoint_ports, switches=n, switch_ports=4 + endpoint_ports,
                      links=(link,), wires=wires, switch_kinds=kinds, switch_kind=(0,) * n, trunks=tuple(trunks),
                      static_routes=tuple(routes), **kw)
