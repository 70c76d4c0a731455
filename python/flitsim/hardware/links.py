"""Link presets: NVLink here, PCIe / socket / network links in
flitsim.hardware.io_links. Every value carries its public source or is
marked *assumed* with the reason.

Rate chain shared by NVLink 4 and 5 (inference, no source states it): PAM4 lanes at
1.0625 x the payload rate, i.e. RS(544,514) "KP4" FEC with 256b/257b transcoding
(IEEE 802.3 cl. 91 / Intel AN 846): line x 514/544 x 256/257 = line x 16/17.

Not public, so parameters with labelled defaults:
propagation, PHY latency, credits per VC, VC count, credit return delay.
"""

from __future__ import annotations

from typing import Callable

from flitsim.errors import ConfigError
from flitsim.hardware.io_links import IO_LINK_PRESETS
from flitsim.hardware.link_spec import KP4, LinkSpec, PacketFormat, SerdesSpec

NVLINK_PACKET = PacketFormat(flit_bytes=16, header_flits=1, max_payload_bytes=256)
"""16 B flits (NVIDIA apex peer_memory comment), one header flit and up to 256 B
of data per packet (NVLink 1/2, Hot Chips 28). Assumed unchanged for NVLink 3-5."""

# assumed: ~1 m of copper (NVL72 spine cables / HGX board traces) at ~5 ns/m.
_PROPAGATION_PS = 5_000
# assumed: SerDes (de)serialization, CDR and FEC decode; ~20 ns is typical of
# 100G/200G-class Ethernet PHYs and is not published for NVLink.
_PHY_LATENCY_PS = 20_000
# assumed: credit message serialization + flight + processing at the sender.
_CREDIT_RETURN_PS = 30_000
# VC0-VC7 registers exist on NVLink 2 endpoints (Tegra t19x driver); how many
# carry data is not public. assumed: 8.
_VCS = 8
# assumed: 512 flits (8 KiB) per VC, about 2x the credit round trip x 50 GB/s
# bandwidth product (~86 ns x 50 GB/s / 16 B = 269 flits), so one VC alone can
# run at full rate (Dally & Towles ch. 13 sizing rule).
_CREDITS = 512


def nvlink5() -> LinkSpec:
    """NVLink 5 (Blackwell) link, one direction: 2 lanes of 106.25 GBd PAM4
    (212.5 Gb/s line, 200 Gb/s payload each) = 50 GB/s per direction.

    Sources: 18 links x 50 GB/s per direction per GPU (NVLink product page);
    2 pairs per direction, 200 Gb/s payload per lane (Blackwell whitepaper);
    212.5 Gb/s / 106.25 GBd line rate is inference (200 x 1.0625, as NVLink 4, KP4).
    """
    return LinkSpec(
        serdes=SerdesSpec(baud_gbd=106.25, modulation="pam4", lanes=2, fec=KP4,
                          line_code="256b/257b", phy_latency_ps=_PHY_LATENCY_PS),
        packet=NVLINK_PACKET, propagation_ps=_PROPAGATION_PS, vcs=_VCS,
        credits_per_vc_flits=_CREDITS, credit_return_ps=_CREDIT_RETURN_PS,
    )


def nvlink4() -> LinkSpec:
    """NVLink 4 (Hopper) link, one direction: 2 lanes of 53.125 GBd PAM4
    (106.25 Gb/s line, 100 Gb/s payload) = 25 GB/s per direction, raw
    26.5625 GB/s.

    Sources: NVIDIA SGX H100 docs ("Each NVLink4 port consists of 2 lanes ...
    raw BW of 26.5625GB/s"); driver line rates 100.0 / 106.25 Gb/s (open-gpu-
    kernel-modules, nvswitch ls10). FEC/line code as KP4 + 256b/257b is
    inference from the 1.0625 ratio.
    """
    return LinkSpec(
        serdes=SerdesSpec(baud_gbd=53.125, modulation="pam4", lanes=2, fec=KP4,
                          line_code="256b/257b", phy_latency_ps=_PHY_LATENCY_PS),
        packet=NVLINK_PACKET, propagation_ps=_PROPAGATION_PS, vcs=_VCS,
        credits_per_vc_flits=_CREDITS, credit_return_ps=_CREDIT_RETURN_PS,
    )


def nvlink3() -> LinkSpec:
    """NVLink 3 (Ampere) link, one direction: 4 pairs of 50 Gb/s NRZ = 25 GB/s.

    Sources: nccl-tests issue 149 (NVIDIA maintainer); Ampere whitepaper.
    assumed: no FEC and no line-code overhead on top of the 50 Gb/s signalling
    rate (none is published; the 25 GB/s figure equals 4 x 50 Gb/s exactly).
    """
    return LinkSpec(
        serdes=SerdesSpec(baud_gbd=50.0, modulation="nrz", lanes=4, fec=None,
                          line_code="none", phy_latency_ps=_PHY_LATENCY_PS),
        packet=NVLINK_PACKET, propagation_ps=_PROPAGATION_PS, vcs=_VCS,
        credits_per_vc_flits=_CREDITS, credit_return_ps=_CREDIT_RETURN_PS,
    )


LINK_PRESETS: dict[str, Callable[[], LinkSpec]] = {
    "nvlink3": nvlink3,
    "nvlink4": nvlink4,
    "nvlink5": nvlink5,
    **IO_LINK_PRESETS,
}


def link_preset(name: str) -> LinkSpec:
    """Look up a link preset by name: ``nvlink3``, ``nvlink4``, ``nvlink5``, PCIe
    ``pcie{3,4,5}x{1,2,4,8,16}`` (also spelled ``pcie-gen4-x16``), socket links
    ``upi2``, ``xgmi3``, Ethernet ``eth{100,200,400,800}g`` and InfiniBand
    ``ib-ndr`` (flitsim.hardware.io_links documents each).

    Raises:
        ConfigError: for an unknown name (the message lists the known ones).
    """
    key = str(name).lower().replace("-", "").replace("_", "").replace("gen", "")
    if key not in LINK_PRESETS:
        raise ConfigError(f"link preset = {name!r}: expected one of {sorted(LINK_PRESETS)}")
    return LINK_PRESETS[key]()
