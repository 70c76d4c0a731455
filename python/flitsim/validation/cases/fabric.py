"""Links and whole fabrics against closed forms: the link lab's rate and
credit bound, one packet's latency across a switch, point-to-point and
all-to-all bandwidth against the physical bound of the path. The values are
derived from the presets' public parameters (docs/fabric.md), never read back
from the engine."""

from __future__ import annotations

import math
from typing import Any

from flitsim.validation.case import Case

FLIT = 16
EFF_256 = 256 / 272  # 16 data flits + 1 header flit (Hot Chips 28 NVLink packet format)
HC28 = "Hot Chips 28 NVLink talk / Pascal whitepaper: 256 B payload in 17 x 16 B flits"


def _link_rate(ctx: Any) -> float:
    from flitsim.linklab import link_transfer

    return float(link_transfer("nvlink5", 32 << 20, 256, max_recorded_packets=0).throughput_GBps)


_CREDITS, _CREDIT_RETURN_PS = 34, 200_000


def _credit_bound_expect() -> float:
    """C x 16 B / RTT x 256/272, RTT = serialization + link latency + credit return
    (NVLink 5 preset: 5 ns propagation + 20 ns PHY + one RS(544,514) codeword at 212.5 Gb/s)."""
    from flitsim.hardware import nvlink5

    link = nvlink5()
    ser_ps = 17 * FLIT * 8 / 400e9 * 1e12
    fec_ps = math.ceil(544 * 10 / 212.5e9 * 1e12)
    rtt_ps = ser_ps + link.propagation_ps + link.serdes.phy_latency_ps + fec_ps + _CREDIT_RETURN_PS
    return _CREDITS * FLIT / rtt_ps * 1e3 * EFF_256


def _credit_bound(ctx: Any) -> float:
    from flitsim.linklab import link_transfer

    return float(link_transfer("nvlink5", 16 << 20, 256, credits_per_vc_flits=_CREDITS,
                               credit_return_ps=_CREDIT_RETURN_PS, vcs=1, max_recorded_packets=0).throughput_GBps)


def _packet_latency(ctx: Any) -> float:
    from flitsim.transfers import transfers

    return float(transfers("hgx-h100", [0], [1], 256).transfers.end_ps[0])


# NVLink 4: one flit per 640 ps; link latency 5 ns + 20 ns PHY + one codeword (5440 bits / 106.25 Gb/s);
# the switch registers the head at its next clock edge (clock = one flit time) and drives 17 flits.
_LAT_PS = 5_000 + 20_000 + 51_200
_PACKET_PS = -(-(640 + _LAT_PS) // 640) * 640 + 17 * 640 + _LAT_PS


def _p2p(ctx: Any) -> float:
    from flitsim.transfers import transfers

    return float(transfers("hgx-h100", [0], [1], 256 << 20).transfers.GBps[0])


_A2A_PER = (16 << 20) // (18 * 256) * (18 * 256)


def _a2a(ctx: Any) -> float:
    import numpy as np

    from flitsim.transfers import transfers

    # staggered rounds (round k: every GPU sends to GPU + k), as benches/fabric_bench.py posts them
    s = np.tile(np.arange(72), 71)
    d = (s + np.repeat(np.arange(1, 72), 72)) % 72
    r = transfers("gb200-nvl72", s, d, _A2A_PER)
    return 71 * _A2A_PER / r.makespan_ps * 1e3


CASES = [
    Case(id="fabric.link_nvlink5_256b", area="fabric", quantity="NVLink 5 link lab, 32 MiB at 256 B payload",
         unit="GB/s", source=HC28 + "; NVLink product page (50 GB/s per direction)", measured=50 * EFF_256,
         tolerance=0.005, tolerance_why="the first packet's latency over a 32 MiB run (< 0.1 %) plus FEC "
         "codeword granularity", call='flitsim.link_transfer("nvlink5", 32 << 20, 256).throughput_GBps',
         compute=_link_rate, tag="theory", system="NVLink 5", fast=True),
    Case(id="fabric.link_credit_bound", area="fabric",
         quantity="NVLink 5 link lab, credit-bound: 34 credits, 200 ns credit return", unit="GB/s",
         source="Dally & Towles, Principles and Practices of Interconnection Networks, ch. 13 (rate = C x flit / RTT); "
                "Kung et al., SIGCOMM 94", measured=_credit_bound_expect(), tolerance=0.005,
         tolerance_why="the window's ramp-up and drain over 16 MiB (< 0.5 %)",
         call=('flitsim.link_transfer("nvlink5", 16 << 20, 256, credits_per_vc_flits=34, '
               'credit_return_ps=200_000, vcs=1).throughput_GBps'),
         compute=_credit_bound, tag="theory", system="NVLink 5", fast=True),
    Case(id="fabric.packet_latency_h100", area="fabric",
         quantity="One 256 B packet GPU -> NVSwitch -> GPU on HGX H100: sum of its parts", unit="ps",
         source="NVLink 4 preset parameters (NVIDIA SGX H100 docs: 2 lanes x 106.25 Gb/s; Intel AN 846 RS(544,514) "
                "codeword) and the switch's clock registration; docs/fabric.md",
         measured=float(_PACKET_PS), tolerance=0.0, tolerance_why="exact to the picosecond: one packet waits for nothing",
         call='flitsim.transfers("hgx-h100", [0], [1], 256).transfers.end_ps[0]', compute=_packet_latency,
         tag="theory", system="H100", fast=True),
    Case(id="fabric.p2p_h100_raw", area="fabric",
         quantity="HGX H100 point-to-point 256 MiB, raw fabric: 18 x 25 GB/s x 256/272", unit="GB/s",
         source="NVIDIA SGX H100 docs (18 NVLink 4 links x 25 GB/s); " + HC28, measured=18 * 25 * EFF_256,
         tolerance=0.005, tolerance_why="start-up latency over 256 MiB (< 0.1 %)",
         call='flitsim.transfers("hgx-h100", [0], [1], 256 << 20).transfers.GBps[0]', compute=_p2p, tag="theory",
         system="H100", fast=True),
    Case(id="fabric.a2a_nvl72_bound", area="fabric",
         quantity="NVL72 all-to-all 72 x 71 x 16 MiB, per-GPU rate against 18 x 50 GB/s x 256/272", unit="GB/s",
         source="NVLink product page (18 links x 50 GB/s per direction); " + HC28, measured=18 * 50 * EFF_256,
         tolerance=0.01, tolerance_why="the bound cannot be exceeded; start-up and the staggered tail cost < 1 %",
         call='flitsim.transfers("gb200-nvl72", s, d, 16 << 20)  # s = tile(arange(72), 71), d = (s + k) % 72, k = 1..71',
         compute=_a2a, tag="theory", system="GB200 NVL72", size_band=">= 256 MiB"),
]
