"""The link lab against closed forms (expected values derived here by hand,
never read back from the engine)."""

import math

import numpy as np
import pytest

import flitsim
from flitsim.hardware import nvlink3, nvlink4, nvlink5

FLIT = 16


def payload_GBps_from_lanes(baud_gbd, bits_per_symbol, lanes, fec_k_over_n, line_code_eff):
    """Closed form of the rate chain: baud x bits x lanes x k/n x line-code, in GB/s."""
    return baud_gbd * bits_per_symbol * lanes * fec_k_over_n * line_code_eff / 8.0


def test_nvlink5_is_50_GBps_per_direction_from_lane_parameters():
    # 106.25 GBd PAM4 x 2 lanes x 514/544 x 256/257 (IEEE 802.3 cl. 91, Intel AN 846).
    expect = payload_GBps_from_lanes(106.25, 2, 2, 514 / 544, 256 / 257)
    assert expect == pytest.approx(50.0, rel=1e-12)
    assert nvlink5().payload_GBps() == pytest.approx(50.0, rel=1e-12)


def test_nvlink4_is_25_GBps_per_direction_and_raw_26_5625():
    assert payload_GBps_from_lanes(53.125, 2, 2, 514 / 544, 256 / 257) == pytest.approx(25.0, rel=1e-12)
    assert nvlink4().payload_GBps() == pytest.approx(25.0, rel=1e-12)
    # NVIDIA SGX H100 docs: raw 26.5625 GB/s per NVLink4 port.
    assert nvlink4().rates()["line_rate_gbps"] / 8 == pytest.approx(26.5625, rel=1e-12)


def test_nvlink3_is_25_GBps_per_direction():
    # 4 pairs x 50 Gb/s NRZ (nccl-tests issue 149).
    assert nvlink3().payload_GBps() == pytest.approx(4 * 50 / 8)


@pytest.mark.parametrize("payload", [256, 128, 64])
def test_large_transfer_runs_at_payload_rate_times_protocol_efficiency(payload):
    # Efficiency = payload / ((1 header + payload/16) flits x 16 B) (Hot Chips 28 format).
    eff = payload / ((1 + math.ceil(payload / FLIT)) * FLIT)
    expect = 50.0 * eff
    r = flitsim.link_transfer("nvlink5", 32 << 20, payload, max_recorded_packets=0)
    assert r.throughput_GBps == pytest.approx(expect, rel=5e-3)
    assert r.credit_wait_ps == 0  # preset credits cover the round trip


def test_credit_bound_throughput_is_credits_times_flit_over_round_trip():
    # C = 2 packets of 17 flits on one VC; R = serialization + latency + credit return.
    link = nvlink5()
    ser_ps = 17 * FLIT * 8 / 400e9 * 1e12           # 5440 ps at 400 Gb/s
    fec_ps = math.ceil(544 * 10 / 212.5e9 * 1e12)    # codeword accumulation, 25600 ps
    latency_ps = link.propagation_ps + link.serdes.phy_latency_ps + fec_ps
    credit_return_ps = 200_000
    rtt_ps = ser_ps + latency_ps + credit_return_ps
    credits = 34
    wire_GBps = credits * FLIT / rtt_ps * 1e3
    assert wire_GBps < 50.0 * 272 / 256  # really credit-bound
    expect_payload_GBps = wire_GBps * 256 / 272
    r = flitsim.link_transfer(link, 16 << 20, 256, credits_per_vc_flits=credits,
                              credit_return_ps=credit_return_ps, vcs=1, max_recorded_packets=0)
    assert r.credit_rtt_ps == pytest.approx(rtt_ps, abs=1)
    assert r.throughput_GBps == pytest.approx(expect_payload_GBps, rel=5e-3)
    # The waiting shows up as credit exhaustion. The window slides one packet at a
    # time: packet 2 empties the VC, and every later packet re-empties it as soon
    # as one packet's 17 credits return, so episodes = packets - 1.
    packets = (16 << 20) // 256
    assert r.vcs[0]["exhaustion_episodes"] == packets - 1
    # ... and, the sender being always ready, returned credits are spent the same
    # picosecond: the VC sits at zero from the second send (t = ser) until the
    # last round trip drains, i.e. all but at most ser + 2R of the run.
    zero_share = r.vcs[0]["exhaustion_ps"] / r.run_end_ps
    assert 1 - (ser_ps + 2 * rtt_ps) / r.run_end_ps <= zero_share <= 1
    assert r.credit_wait_ps > 0


def test_credit_bound_scales_with_vcs():
    # Credits are per VC: 4 VCs give 4x the in-flight window.
    kw = dict(credits_per_vc_flits=17, credit_return_ps=400_000, max_recorded_packets=0)
    one = flitsim.link_transfer("nvlink5", 4 << 20, 256, vcs=1, **kw)
    four = flitsim.link_transfer("nvlink5", 4 << 20, 256, vcs=4, **kw)
    assert four.throughput_GBps / one.throughput_GBps == pytest.approx(4.0, rel=1e-2)


def test_one_packet_latency_is_sum_of_parts_to_the_picosecond():
    link = nvlink5()
    r = flitsim.link_transfer(link, 256, 256)
    ser_ps = 17 * 16 * 8 * 1000 // 400  # 2176 bits at 400 Gb/s = 5440 ps exactly
    fec_ps = 5440 * 1000 * 10 // 2125   # 5440 bits / 212.5 Gb/s = 25600 ps exactly
    expect = ser_ps + link.propagation_ps + link.serdes.phy_latency_ps + fec_ps
    assert int(r.arrival_ps[0] - r.start_ps[0]) == expect
    assert r.completion_ps == expect


def test_per_packet_arrays_are_capped_and_complete():
    r = flitsim.link_transfer("nvlink4", 1 << 20, 256, max_recorded_packets=100)
    assert r.packets == (1 << 20) // 256
    assert r.start_ps.shape == (100,) and r.arrival_ps.shape == (100,)
    assert np.all(np.diff(r.start_ps.astype(np.int64)) > 0)
    assert r.latency_ps["count"] == r.packets
    df = r.to_pandas()
    assert list(df.columns) == ["start_ps", "arrival_ps", "latency_ps"]


def test_remainder_packet_and_odd_sizes():
    # 1000 B = 3 x 256 + 232: wire flits 3 x 17 + (1 + 15) = 67.
    r = flitsim.link_transfer("nvlink5", 1000, 256)
    assert r.packets == 4
    assert r.link["wire_bytes"] == 67 * 16
    assert r.link["payload_bytes"] == 1000


def test_determinism_bit_identical():
    a = flitsim.link_transfer("nvlink5", 3 << 20, 192, credits_per_vc_flits=40, vcs=2)
    b = flitsim.link_transfer("nvlink5", 3 << 20, 192, credits_per_vc_flits=40, vcs=2)
    assert a.summary() == b.summary()
    assert np.array_equal(a.arrival_ps, b.arrival_ps)
