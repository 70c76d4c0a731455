"""PCIe, socket and network link presets: payload rates from closed forms
(lane rate x coding x framing), sources in flitsim/hardware/io_links.py."""

import pytest

from flitsim import ConfigError
from flitsim.hardware import link_preset
from flitsim.hardware.io_links import ethernet, pcie


def test_pcie_gen4_x16_payload_rate_closed_form():
    # PCIe Base Spec 4.0: 16 GT/s per lane, 128b/130b -> 31.5 GB/s per direction.
    link = link_preset("pcie-gen4-x16")
    raw_GBps = 16 * 16e9 * 128 / 130 / 8 / 1e9
    assert link.payload_GBps() == pytest.approx(raw_GBps, rel=1e-12)
    assert raw_GBps == pytest.approx(31.51, abs=0.01)
    # A 256 B memory write TLP: 4 B STP token (with sequence number) + 16 B
    # 4-DW header + 4 B LCRC (Intel AN 708: 5-7 DW per TLP), plus one Ack and
    # one UpdateFC DLLP (8 B each) per 4 TLPs (assumed) = 256 + 24 + 4 B.
    tlp_eff = 256 / (256 + 4 + 16 + 4 + 2 * 8 / 4)
    assert link.packet.efficiency(256) == pytest.approx(tlp_eff, rel=1e-12)
    assert raw_GBps * tlp_eff == pytest.approx(28.40, abs=0.01)


@pytest.mark.parametrize("gen,gts", [(3, 8), (4, 16), (5, 32)])
@pytest.mark.parametrize("lanes", [1, 4, 8, 16])
def test_pcie_scales_with_lanes_and_generation(gen, gts, lanes):
    assert pcie(gen, lanes).payload_GBps() == pytest.approx(gts * lanes * 128 / 130 / 8, rel=1e-12)


def test_pcie_max_payload_is_a_parameter():
    # Larger Max_Payload_Size amortizes the same 28 B per TLP.
    e512 = pcie(4, 16, 512).packet.efficiency(512)
    assert e512 == pytest.approx(512 / (512 + 28), rel=1e-12)
    assert e512 > pcie(4, 16, 256).packet.efficiency(256)


@pytest.mark.parametrize("gbps", [100, 200, 400, 800])
def test_ethernet_lands_on_nominal_rate_and_roce_framing(gbps):
    # IEEE 802.3: each PHY's FEC + transcoding chain gives exactly the MAC rate.
    link = ethernet(gbps)
    assert link.rates()["payload_rate_gbps"] == pytest.approx(gbps, rel=1e-12)
    # RoCEv2/IPv4 per frame: 8 preamble+SFD, 14 MAC, 20 IP, 8 UDP, 12 BTH, 4 ICRC, 4 FCS, 12 IPG.
    assert link.packet.efficiency(4096) == pytest.approx(4096 / (4096 + 82), rel=1e-12)


def test_infiniband_ndr_and_upi():
    ndr = link_preset("ib-ndr")
    assert ndr.rates()["payload_rate_gbps"] == pytest.approx(400, rel=1e-12)  # ConnectX-7 NDR
    assert ndr.packet.efficiency(4096) == pytest.approx(4096 / (4096 + 26), rel=1e-12)  # LRH+BTH+ICRC+VCRC
    upi = link_preset("upi2")
    # 20 lanes x 16 GT/s, 64 payload bits per 80-bit flit.
    assert upi.payload_GBps() == pytest.approx(20 * 16 * 64 / 80 / 8, rel=1e-12)


@pytest.mark.parametrize("bad", [dict(gen=6), dict(gen=4, lanes=3), dict(gen=4, max_payload_bytes=300)])
def test_bad_pcie_is_config_error(bad):
    with pytest.raises(ConfigError):
        pcie(**bad)


def test_ledger_of_a_pcie_link():
    from flitsim import ledger

    rows = {(r.scope, r.stage): r for r in ledger("pcie-gen4-x16", payloads_bytes=(256,)).rows}
    assert rows[("link", "payload")].per_direction_GBps == pytest.approx(31.508, abs=1e-3)
    assert rows[("link", "effective @ 256 B")].per_direction_GBps == pytest.approx(28.40, abs=0.01)
