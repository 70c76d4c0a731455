"""Links outside the NVLink domain: PCIe Gen3/4/5 xN, CPU socket links (Intel
UPI, AMD xGMI), Ethernet 100-800G (RoCEv2 framing) and InfiniBand NDR.

Each preset derives its payload rate from the lane rate, coding and framing
with the same rate chain as NVLink (:class:`~flitsim.hardware.link_spec.SerdesSpec`,
:class:`~flitsim.hardware.link_spec.PacketFormat`); constants carry their
public source or are marked *assumed* (docs/fabrics.md lists them all).

PCIe (PCI-SIG PCI Express Base Specification 3.0 / 4.0 / 5.0):

- 8 / 16 / 32 GT/s per lane (Gen3 / Gen4 / Gen5), NRZ, 128b/130b coding.
  x16 Gen4 = 16 x 16 x 128/130 = 252.1 Gb/s = 31.5 GB/s per direction before
  TLP/DLLP overhead.
- A TLP (Gen3+ framing) is a 4-byte STP framing token that carries the 12-bit
  sequence number, a 3- or 4-DW header (4 DW for 64-bit addresses, as GPU
  memory writes use), the data (up to Max_Payload_Size) and a 4-byte LCRC:
  6 DW = 24 B of overhead without ECRC (PCIe Base Spec 3.0 sec. 4.2.2.3;
  Intel AN 708 "Understanding PCI Express Throughput": 5-7 DW per TLP).
- DLLPs (Ack/Nak, UpdateFC) are 2 DW = 8 B on the wire (Intel AN 708). How
  often they are sent is implementation-specific; *assumed*: one Ack and one
  UpdateFC per 4 TLPs, i.e. 4 B = 1 DW per TLP. They travel against the data,
  so they are charged to each direction as for bidirectional traffic (a ring
  or an all-to-all loads both directions).
- SKP ordered sets (16 B per ~370 blocks, < 0.3 %) are left out.
- The packet format counts in DW (4 B) flits: 6 TLP + 1 DLLP overhead flits,
  so a 256 B write is 71 DW: 256 / 284 = 90.1 % of 31.5 GB/s = 28.4 GB/s.

Credits and latencies of PCIe ports, UPI, xGMI, NICs are not public; the
defaults below are *assumed* and each one says so.
"""

from __future__ import annotations

from typing import Callable

from flitsim.errors import ConfigError
from flitsim.hardware.link_spec import KP4, FecCode, LinkSpec, PacketFormat, SerdesSpec

PCIE_GT_PER_LANE = {3: 8.0, 4: 16.0, 5: 32.0}
"""Transfer rate per lane, GT/s (PCI Express Base Specification 3.0, 4.0, 5.0)."""
PCIE_TLP_OVERHEAD_BYTES = 24
"""STP token with sequence number (4) + 4-DW header (16) + LCRC (4), no ECRC
(PCIe Base Spec 3.0 sec. 4.2.2.3; Intel AN 708)."""
PCIE_DLLP_BYTES = 8
"""One DLLP on the wire, Gen3+ (2 DW; Intel AN 708)."""
PCIE_TLPS_PER_DLLP_PAIR = 4
"""assumed: one Ack DLLP and one UpdateFC DLLP per 4 TLPs (the spec leaves
Ack coalescing and FC update frequency to the implementation)."""

# assumed: ~0.3 m of board trace / riser at ~5 ns/m.
_PCIE_PROPAGATION_PS = 1_500
# assumed: PCIe PHY (PIPE, elastic buffer, 128b/130b) transmit + receive ~30 ns.
_PCIE_PHY_PS = 30_000
# assumed: UpdateFC DLLP scheduling + flight; ~100 ns.
_PCIE_CREDIT_RETURN_PS = 100_000
# assumed: 32 KiB of posted-data credit per port (8192 DW): the credit round
# trip through a root complex (~290 ns with its 150 ns pipeline) x 63 GB/s
# (Gen5 x16) = 18 KB, so no x16 link up to Gen5 is credit-bound.
_PCIE_CREDITS_DW = 8192


def pcie(gen: int, lanes: int = 16, max_payload_bytes: int = 256) -> LinkSpec:
    """A PCIe GenN xL link, one direction (see the module docstring).

    Args:
        gen: 3, 4 or 5.
        lanes: 1, 2, 4, 8 or 16.
        max_payload_bytes: Max_Payload_Size, a power of two in 128..4096
            (default 256, what GPU platforms commonly set; *assumed*).

    Raises:
        ConfigError: for another generation, lane count or payload size.
    """
    if gen not in PCIE_GT_PER_LANE:
        raise ConfigError(f"pcie gen = {gen!r}: expected one of {sorted(PCIE_GT_PER_LANE)}")
    if lanes not in (1, 2, 4, 8, 16):
        raise ConfigError(f"pcie lanes = {lanes!r}: expected 1, 2, 4, 8 or 16")
    if max_payload_bytes not in (128, 256, 512, 1024, 2048, 4096):
        raise ConfigError(f"pcie max_payload_bytes = {max_payload_bytes!r}: expected a power of two in 128..4096")
    overhead_dw = (PCIE_TLP_OVERHEAD_BYTES + 2 * PCIE_DLLP_BYTES // PCIE_TLPS_PER_DLLP_PAIR) // 4
    return LinkSpec(
        serdes=SerdesSpec(baud_gbd=PCIE_GT_PER_LANE[gen], modulation="nrz", lanes=lanes, fec=None,
                          line_code="128b/130b", phy_latency_ps=_PCIE_PHY_PS),
        packet=PacketFormat(flit_bytes=4, header_flits=overhead_dw, max_payload_bytes=max_payload_bytes),
        propagation_ps=_PCIE_PROPAGATION_PS, vcs=1,
        credits_per_vc_flits=max(_PCIE_CREDITS_DW, 2 * (overhead_dw + max_payload_bytes // 4)),
        credit_return_ps=_PCIE_CREDIT_RETURN_PS,
    )


def pcie_tlp_efficiency(payload_bytes: int, max_payload_bytes: int = 256) -> float:
    """Payload / wire bytes of one TLP of ``payload_bytes`` (TLP + DLLP share):
    256 / (256 + 24 + 4) = 0.901 at 256 B."""
    return pcie(4, 16, max_payload_bytes).packet.efficiency(payload_bytes)


# Socket links -----------------------------------------------------------------

UPI2_GT_PER_LANE = 16.0
"""Intel UPI 2.0 (Sapphire / Emerald Rapids): 16 GT/s, 20 lanes per direction
(Intel Xeon Scalable 4th gen product brief; WikiChip, "Ultra Path Interconnect")."""
UPI_FLIT = FecCode(n=5, k=4, symbol_bits=16, interleave_lanes=20)
"""UPI moves 80-bit flits over 20 lanes in 4 UI, 64 bits of which are payload
(UPI 1.0: 10.4 GT/s x 20 lanes = 26 GB/s raw, quoted as 20.8 GB/s per direction:
WikiChip; 64/80 is that ratio `[I]`). Modelled as a 4/5 block code across all
20 lanes, so the receiver waits one flit (80 bits) before checking its CRC."""
_UPI_PHY_PS = 40_000  # assumed: UPI PHY + link layer ~40 ns each way.
_UPI_PROPAGATION_PS = 1_000  # assumed: ~20 cm of board trace between sockets.
_UPI_CREDIT_RETURN_PS = 100_000  # assumed.
_UPI_PACKET = PacketFormat(flit_bytes=8, header_flits=4, max_payload_bytes=256)
"""UPI carries cache lines: 64 B of data plus one header slot per line
(assumed: one 8-B header per 64-B line; Intel publishes no message format).
A fabric moves one packet format end to end (payload up to the GPU's 256 B),
so a 256-B packet is 4 lines with 4 header flits: 256 / 288 = 8/9."""


def upi2() -> LinkSpec:
    """One Intel UPI 2.0 link, one direction: 20 lanes x 16 GT/s x 64/80 = 32 GB/s
    of flit payload, 64-B cache-line messages (see :data:`UPI_FLIT`)."""
    return LinkSpec(
        serdes=SerdesSpec(baud_gbd=UPI2_GT_PER_LANE, modulation="nrz", lanes=20, fec=UPI_FLIT,
                          line_code="none", phy_latency_ps=_UPI_PHY_PS),
        packet=_UPI_PACKET, propagation_ps=_UPI_PROPAGATION_PS, vcs=1,
        credits_per_vc_flits=4096, credit_return_ps=_UPI_CREDIT_RETURN_PS,
    )


def xgmi3() -> LinkSpec:
    """One AMD xGMI3 (Infinity Fabric socket) link, one direction: x16 at
    32 Gb/s per lane (AMD EPYC 9004 "Genoa" platform: up to 4 xGMI3 links,
    32 Gbps; AMD EPYC 9004 architecture overview). assumed: 128b/130b coding
    and PCIe Gen5-like framing (AMD publishes neither; the PHY is shared with
    PCIe Gen5)."""
    base = pcie(5, 16, 256)
    return base.replace(serdes=base.serdes.replace(phy_latency_ps=_UPI_PHY_PS))  # type: ignore[return-value]


# Scale-out NICs -------------------------------------------------------------------

RS528 = FecCode(n=528, k=514, symbol_bits=10)
"""RS(528,514) "KR4" FEC, 100GBASE-CR4/SR4 (IEEE 802.3 cl. 91)."""
ROCE_V2_OVERHEAD_BYTES = 8 + 14 + 20 + 8 + 12 + 4 + 4 + 12
"""Per Ethernet frame of RoCEv2 over IPv4: preamble + SFD 8, MAC header 14,
FCS 4, minimum inter-packet gap 12 (IEEE 802.3 cl. 3/4); IPv4 header 20
(RFC 791); UDP 8 (RFC 768); InfiniBand BTH 12 and ICRC 4 (IBTA Vol. 1,
Annex A17 RoCEv2) = 82 B. No VLAN tag, no RETH (first packet only)."""
IB_OVERHEAD_BYTES = 8 + 12 + 4 + 2
"""Per InfiniBand packet: LRH 8, BTH 12, ICRC 4, VCRC 2 (IBTA Vol. 1 ch. 7) = 26 B."""
RDMA_MTU_BYTES = 4096
"""Largest RoCE / InfiniBand path MTU (IBTA Vol. 1: 256..4096 B)."""
# assumed: NIC + switch-port PHY/FEC ~100 ns; 10 m of fibre/copper ~50 ns.
_NET_PHY_PS = 100_000
_NET_PROPAGATION_PS = 50_000
# assumed: lossless fabric (PFC on Ethernet, credit-based on InfiniBand),
# modelled as credits: 1 MiB per port and a 1 us pause/credit round trip
# (well above 2 x 50 ns flight x 100 GB/s; the rate never becomes credit-bound).
_NET_CREDIT_RETURN_PS = 1_000_000
_NET_CREDITS_BYTES = 1 << 20


def _network(lanes: int, baud_gbd: float, modulation: str, fec: FecCode, overhead_bytes: int,
             mtu_bytes: int) -> LinkSpec:
    # 2-byte flits: both framing overheads (82 B, 26 B) are whole flits.
    fmt = PacketFormat(flit_bytes=2, header_flits=overhead_bytes // 2, max_payload_bytes=mtu_bytes)
    # Ethernet stripes each RS codeword over all the port's FEC lanes (IEEE
    # 802.3 cl. 91 / 119), so one codeword arrives in n x bits / port rate.
    fec = fec.replace(interleave_lanes=lanes)  # type: ignore[assignment]
    return LinkSpec(
        serdes=SerdesSpec(baud_gbd=baud_gbd, modulation=modulation, lanes=lanes,  # type: ignore[arg-type]
                          fec=fec, line_code="256b/257b", phy_latency_ps=_NET_PHY_PS),
        packet=fmt, propagation_ps=_NET_PROPAGATION_PS, vcs=1,
        credits_per_vc_flits=_NET_CREDITS_BYTES // 2, credit_return_ps=_NET_CREDIT_RETURN_PS,
    )


def ethernet(gbps: int, mtu_bytes: int = RDMA_MTU_BYTES) -> LinkSpec:
    """An Ethernet port carrying RoCEv2, one direction.

    - 100G: 100GBASE-CR4/SR4, 4 x 25.78125 GBd NRZ, RS(528,514) + 256b/257b
      (IEEE 802.3 cl. 91, 92/95).
    - 200G: 200GBASE-CR4/SR4, 4 x 26.5625 GBd PAM4, RS(544,514) (802.3bs/cd).
    - 400G: 400GBASE-CR4/DR4, 4 x 53.125 GBd PAM4, RS(544,514) (802.3ck/bs).
    - 800G: 800GBASE-CR8/DR8, 8 x 53.125 GBd PAM4, RS(544,514) (802.3df).

    Each lands on exactly its nominal rate before framing; RoCEv2 framing
    (:data:`ROCE_V2_OVERHEAD_BYTES`) at a 4096-B MTU leaves 98.0 %.

    Raises:
        ConfigError: another speed, or an MTU outside 256..4096.
    """
    table = {100: (4, 25.78125, "nrz", RS528), 200: (4, 26.5625, "pam4", KP4),
             400: (4, 53.125, "pam4", KP4), 800: (8, 53.125, "pam4", KP4)}
    if gbps not in table:
        raise ConfigError(f"ethernet gbps = {gbps!r}: expected one of {sorted(table)}")
    if not isinstance(mtu_bytes, int) or not 256 <= mtu_bytes <= 4096:
        raise ConfigError(f"ethernet mtu_bytes = {mtu_bytes!r}: expected 256..4096 (RoCE path MTU)")
    lanes, baud, mod, fec = table[gbps]
    return _network(lanes, baud, mod, fec, ROCE_V2_OVERHEAD_BYTES, mtu_bytes)


def infiniband_ndr(mtu_bytes: int = RDMA_MTU_BYTES) -> LinkSpec:
    """InfiniBand NDR 400 Gb/s port (ConnectX-7 / Quantum-2), one direction:
    4 lanes x 53.125 GBd PAM4 (100G-class lanes; NVIDIA ConnectX-7 datasheet:
    400 Gb/s NDR). assumed: RS(544,514) + 256b/257b as on 100G-per-lane
    Ethernet (the IBTA physical spec is members-only), so the data rate is
    exactly 400 Gb/s. Per-packet headers :data:`IB_OVERHEAD_BYTES`.

    Raises:
        ConfigError: an MTU outside 256..4096.
    """
    if not isinstance(mtu_bytes, int) or not 256 <= mtu_bytes <= 4096:
        raise ConfigError(f"infiniband mtu_bytes = {mtu_bytes!r}: expected 256..4096")
    return _network(4, 53.125, "pam4", KP4, IB_OVERHEAD_BYTES, mtu_bytes)


# Host memory ---------------------------------------------------------------------

# assumed: ~90 ns from a request at the root complex to data (loaded DRAM latency class).
_DDR_LATENCY_PS = 90_000


def ddr5(mts: int = 4800) -> LinkSpec:
    """One DDR5 memory channel as the link from a host-memory endpoint to its
    root complex, one direction: 64 data bits x ``mts`` MT/s (JEDEC JESD79-5:
    DDR5-4800 = 38.4 GB/s per channel), moved in 64-B bursts. assumed: no
    refresh, bank or read/write turnaround loss (a host-staged copy is rarely
    bound by DRAM; the ledger shows the peak).

    Raises:
        ConfigError: ``mts`` outside 3200..8800.
    """
    if not isinstance(mts, int) or not 3200 <= mts <= 8800:
        raise ConfigError(f"ddr5 mts = {mts!r}: expected 3200..8800 MT/s")
    return LinkSpec(
        serdes=SerdesSpec(baud_gbd=mts / 1000, modulation="nrz", lanes=64, fec=None, line_code="none",
                          phy_latency_ps=_DDR_LATENCY_PS),
        packet=PacketFormat(flit_bytes=64, header_flits=0, max_payload_bytes=4096),
        propagation_ps=0, vcs=1, credits_per_vc_flits=4096, credit_return_ps=0,
    )


IO_LINK_PRESETS: dict[str, Callable[[], LinkSpec]] = {
    **{f"pcie{g}x{n}": (lambda g=g, n=n: pcie(g, n)) for g in (3, 4, 5) for n in (1, 2, 4, 8, 16)},
    "upi2": upi2,
    "ddr54800": ddr5,
    "xgmi3": xgmi3,
    "eth100g": lambda: ethernet(100),
    "eth200g": lambda: ethernet(200),
    "eth400g": lambda: ethernet(400),
    "eth800g": lambda: ethernet(800),
    "ibndr": infiniband_ndr,
    "ndr400": infiniband_ndr,
}
"""Named presets (keys without dashes or underscores, as link_preset
normalizes them): ``pcie4x16`` (also ``pcie-gen4-x16``), ``upi2``, ``xgmi3``,
``eth400g``, ``ib-ndr`` ..."""
