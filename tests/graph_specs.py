"""Small graph fabrics for the graph tests (built here, not presets).

Links (one direction each; made-up round numbers so closed forms are easy):
- ``PCIE``: 16 lanes x 16 Gb/s NRZ, 128b/130b (PCIe Gen4 x16 signalling:
  PCI-SIG base spec 4.0), packet = 4-byte flits with 6 header flits (24 B of
  TLP header/framing/LCRC per TLP, the usual Gen4 figure), max payload 256 B.
- ``ETH``: 4 lanes x 25 Gb/s NRZ, no coding (a 100G-class port, rounded),
  64-byte flits with one header flit per protocol packet, max payload 4096 B.
"""

from __future__ import annotations

from flitsim.hardware.fabric import FabricSpec, SwitchKind, SwitchParams, Trunk, Wire
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
