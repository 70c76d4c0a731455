"""Faults, simulated: FEC closed form, link-level retry against go-back-N,
dead planes and links with every byte accounted for from link statistics,
zero-fault runs bit-identical, and clear errors for bad fault specs."""

from __future__ import annotations

import math

import numpy as np
import pytest

import flitsim
from flitsim import ConfigError, Fault
from flitsim.hardware import ReplaySpec, link_preset, uniform_fabric
from flitsim.taskgraph import TaskGraphBuilder, execute


def _binomial_tail(n: int, p: float, t: int) -> float:
    """P(X > t), X ~ Binomial(n, p), summed term by term with exact binomial
    coefficients (an independent check of the engine's log-space recurrence)."""
    return math.fsum(math.comb(n, j) * p**j * (1 - p) ** (n - j) for j in range(t + 1, n + 1))


@pytest.mark.parametrize("ber", [1e-4, 5e-4, 1e-3, 2e-3, 3e-3])
def test_kp4_codeword_probabilities_match_binomial_closed_form(ber: float) -> None:
    m = flitsim.fec_error_model("nvlink5", ber)
    ps = 1 - (1 - ber) ** 10  # 10-bit symbols (KP4, Intel AN 846)
    assert m["correctable_symbols"] == 15
    assert m["symbol_error_prob"] == pytest.approx(ps, rel=1e-12)
    assert m["codeword_uncorrectable_prob"] == pytest.approx(_binomial_tail(544, ps, 15), rel=1e-9)
    assert m["codeword_clean_prob"] == pytest.approx((1 - ps) ** 544, rel=1e-12)
    total = m["codeword_clean_prob"] + m["codeword_corrected_prob"] + m["codeword_uncorrectable_prob"]
    assert total == pytest.approx(1.0, abs=1e-12)
    # RS(544,514) with 256b/257b: 514 x 10 x 256/257 = 5120 flit bits per codeword.
    assert m["codeword_flit_bits"] == pytest.approx(5120.0)


def test_replay_overhead_equals_go_back_n_closed_form_within_sampling_error() -> None:
    n = 30_000
    df = flitsim.goodput_vs_ber("nvlink5", [1.7e-3, 2.2e-3], total_bytes=256 * n, seed=3)
    lk = link_preset("nvlink5")
    t = lk.timing()
    s = -(-17 * 16 * 8 * 10**12 // t["rate_bps"])  # one 256 B packet: 17 flits
    r_ps = s + t["latency_ps"] + (t["latency_ps"] + t["flit_ps"])  # NAK: latency + one flit (default)
    for row in df.itertuples():
        m = flitsim.fec_error_model("nvlink5", row.ber)
        h = -math.log1p(-m["codeword_uncorrectable_prob"]) / 5120  # uncorrectable codewords per flit bit
        p = -math.expm1(-h * 17 * 16 * 8)
        assert row.packet_error_prob == pytest.approx(p, rel=1e-9)
        mean_f = n * p / (1 - p)
        sd_f = math.sqrt(n * p) / (1 - p)
        assert abs(row.replays - mean_f) < 4 * sd_f, (row.ber, row.replays, mean_f, sd_f)
        assert row.replay_ps == row.replays * r_ps
        eff = (1 - p) / (1 + (r_ps / s - 1) * p)
        assert row.closed_form_ratio == pytest.approx(eff, rel=1e-12)
        tol = 4 * sd_f * r_ps / (n * s / eff) + 2e-3
        assert abs(row.goodput_ratio - eff) < tol, (row.ber, row.goodput_ratio, eff, tol)


def test_ber_zero_is_bit_identical_to_no_retry_model() -> None:
    a = flitsim.link_transfer("nvlink5", 1 << 20)
    b = flitsim.link_transfer(link_preset("nvlink5").replace(replay=ReplaySpec(ber=0.0)), 1 << 20)
    assert a.completion_ps == b.completion_ps and a.link == b.link and a.latency_ps == b.latency_ps
    # Unfolded, so that per-port link statistics compare (a fault disables folding).
    fab = uniform_fabric(4, [1, 1]).replace(fold_planes=False)
    src, dst = [0, 1, 2, 3], [1, 2, 3, 0]
    r0 = flitsim.transfers(fab, src, dst, 1 << 18)
    r1 = flitsim.transfers(fab.with_faults(ber=0.0), src, dst, 1 << 18)
    r2 = flitsim.transfers(fab, src, dst, 1 << 18, faults=[{"kind": "plane", "switch": 0, "at_ps": 10**12}])
    for r in (r1, r2):
        assert r.makespan_ps == r0.makespan_ps
        assert r.transfers.equals(r0.transfers)
        assert r.links.equals(r0.links)
    assert r2.faults["faults_applied"] == 0
    c0 = flitsim.collective(fab, "all_reduce", 1 << 20)
    c1 = flitsim.collective(fab.with_faults(ber=0.0), "all_reduce", 1 << 20)
    assert c0.time_us == c1.time_us


def test_bit_error_sampling_is_seeded() -> None:
    fab = uniform_fabric(4, [1, 1])
    go = lambda seed: flitsim.transfers(fab.with_faults(ber=1.9e-3, seed=seed), [0, 1], [2, 3], 1 << 18)
    a, b, c = go(5), go(5), go(6)
    assert a.links.equals(b.links) and a.makespan_ps == b.makespan_ps
    assert a.links.replays.sum() > 0 and a.links.rx_replays.sum() > 0
    assert not a.links.replays.equals(c.links.replays)


def _accounted(faults: dict, links, once: bool = True) -> None:
    """Nothing dropped: delivered + replayed-and-delivered = sent, the GPU links
    delivered exactly the sent bytes, and each loss cost one more transmission.
    ``once``: no packet was lost twice (a later fault can catch a replayed copy)."""
    assert faults["delivered_bytes"] + faults["replayed_delivered_bytes"] == faults["sent_bytes"]
    assert int(links.rx_payload_bytes.sum()) == faults["sent_bytes"]  # from link statistics
    assert int(links.payload_bytes.sum()) == faults["sent_bytes"] + faults["lost_bytes"]
    assert int(links.lost_bytes.sum()) == faults["lost_bytes"] >= faults["replayed_delivered_bytes"]
    if once:
        assert faults["lost_bytes"] == faults["replayed_delivered_bytes"]


def test_plane_failure_mid_collective_delivers_every_byte() -> None:
    fab = uniform_fabric(8, [1, 1, 1, 1])
    clean = flitsim.collective(fab, "all_reduce", 4 << 20)
    at = int(clean.time_us * 1e6 / 2)
    r = flitsim.collective(fab, "all_reduce", 4 << 20, faults=[Fault(kind="plane", switch=1, at_ps=at)])
    f = r.stats["faults"]
    assert f["faults_applied"] == 1 and f["lost_packets"] > 0
    assert f["delivered_bytes"] + f["replayed_delivered_bytes"] == f["sent_bytes"]
    assert f["link_rx_payload_bytes"] == f["sent_bytes"]
    assert r.time_us > clean.time_us
    # The same through a task graph on FabricNetwork: link statistics per port.
    g = TaskGraphBuilder(8)
    g.add_collective(range(8), "all_reduce", 4 << 20)
    run = execute(g.build(), flitsim.FabricNetwork(fab, faults=[{"kind": "plane", "switch": 1, "at_ps": at}]))
    net = run.network
    _accounted(net["faults"], net["links"])
    assert net["faults"]["lost_packets"] > 0
    dead = net["links"][net["links"].switch == 1].payload_bytes.sum()
    live = net["links"][net["links"].switch == 0].payload_bytes.sum()
    assert dead < 0.75 * live


def test_dead_link_transfers_reroute_and_account() -> None:
    fab = uniform_fabric(4, [1, 1])
    src = [s for s in range(4) for d in range(4) if s != d]
    dst = [d for s in range(4) for d in range(4) if s != d]
    r0 = flitsim.transfers(fab, src, dst, 1 << 17)
    r = flitsim.transfers(fab, src, dst, 1 << 17, faults=[{"kind": "link", "gpu": 2, "port": 1, "at_ps": r0.makespan_ps // 3}])
    _accounted(r.faults, r.links)
    assert r.faults["lost_packets"] > 0 and r.makespan_ps > r0.makespan_ps


@pytest.mark.parametrize("fault, match", [
    ({"kind": "plane", "switch": 5, "at_ps": 0}, "faults\\[0\\].switch"),
    ({"kind": "link", "gpu": 7, "port": 0, "at_ps": 0}, "faults\\[0\\].gpu"),
    ({"kind": "link", "gpu": 0, "port": 3, "at_ps": 0}, "faults\\[0\\].port"),
    ({"kind": "plane", "switch": 0, "at_ps": -1}, "at_ps"),
    ({"kind": "plane", "switch": 0, "at_ps": 2**62 + 1}, "at_ps"),
    ({"kind": "plane", "at_ps": 0}, "switch"),
    ({"kind": "plane", "switch": 0, "gpu": 1, "at_ps": 0}, "gpu"),
    ({"kind": "nic", "nic": 0, "at_ps": 0}, 'of kind "nic"'),
    ({"kind": "cable", "at_ps": 0}, "kind"),
    ({"kind": "plane", "switch": True, "at_ps": 0}, "switch"),
    ({"kind": "plane", "switch": 0, "at_ps": 1.5}, "at_ps"),
    ({"kind": "plane", "switch": "1", "at_ps": 0}, "switch"),
])
def test_bad_faults_are_config_errors(fault: dict, match: str) -> None:
    fab = uniform_fabric(4, [1, 1])
    with pytest.raises(ConfigError, match=match):
        fab.with_faults([fault])


def test_killing_every_plane_or_cutting_a_gpu_off_is_a_clear_error() -> None:
    fab = uniform_fabric(4, [1, 1])
    with pytest.raises(ConfigError, match="every plane dead"):
        fab.with_faults([{"kind": "plane", "switch": 0, "at_ps": 0}, {"kind": "plane", "switch": 1, "at_ps": 10}])
    with pytest.raises(ConfigError, match="GPU 3"):
        fab.with_faults([{"kind": "link", "gpu": 3, "port": 0, "at_ps": 0}, {"kind": "link", "gpu": 3, "port": 1, "at_ps": 0}])
    with pytest.raises(ConfigError, match="every plane dead"):
        flitsim.transfers(fab, [0], [1], 4096, faults=[{"kind": "plane", "switch": s, "at_ps": 0} for s in (0, 1)])


@pytest.mark.parametrize("ber", [-1e-9, 1.0, 2.0, float("nan"), float("inf"), 0.3])
def test_bad_ber_is_config_error(ber: float) -> None:
    with pytest.raises(ConfigError, match="ber"):
        uniform_fabric(4, [1, 1]).with_faults(ber=ber)
    with pytest.raises(ConfigError, match="ber"):
        flitsim.fec_error_model("nvlink5", ber) if ber != 0.3 else flitsim.goodput_vs_ber("nvlink5", [ber])


def test_replay_buffer_bounds_are_checked() -> None:
    with pytest.raises(ConfigError, match="replay_buffer_bytes"):
        link_preset("nvlink5").replace(replay=ReplaySpec(replay_buffer_bytes=100))
    with pytest.raises(ConfigError, match="timeout_ps"):
        ReplaySpec(timeout_ps=0)


def test_goodput_curve_is_monotone_and_cli_prints_it() -> None:
    from click.testing import CliRunner

    from flitsim.cli import cli

    df = flitsim.goodput_vs_ber("nvlink5", [0.0, 1.5e-3, 2.5e-3], total_bytes=1 << 20)
    assert df.goodput_ratio.iloc[0] == 1.0
    assert np.all(np.diff(df.goodput_GBps.to_numpy()) < 0)
    out = CliRunner().invoke(cli, ["ber", "nvlink5", "--ber", "0,2e-3", "--bytes", "1MiB", "--json"])
    assert out.exit_code == 0, out.output
    assert '"closed_form_ratio"' in out.output


def test_collective_with_a_plane_dead_from_the_start_equals_one_plane_fewer() -> None:
    four = uniform_fabric(8, [1, 1, 1, 1])
    # Full fidelity on both sides: the balanced plane fold (within 1 %, tests/test_engine_levers.py)
    # applies to the healthy 3-plane fabric but never to a faulted one.
    three = uniform_fabric(8, [1, 1, 1]).replace(fold_planes=False)
    for op in ("all_reduce", "all_gather"):
        a = flitsim.collective(four, op, 1 << 20, faults=[{"kind": "plane", "switch": 3, "at_ps": 0}])
        b = flitsim.collective(three, op, 1 << 20)
        assert a.time_us == b.time_us, op


@pytest.mark.parametrize("spray", ["round_robin", "hash", "adaptive"])
def test_every_spray_rule_reroutes_and_loses_nothing(spray: str) -> None:
    fab = uniform_fabric(4, [1, 1, 1], spray=spray)
    src = [s for s in range(4) for d in range(4) if s != d]
    dst = [d for s in range(4) for d in range(4) if s != d]
    r0 = flitsim.transfers(fab, src, dst, 1 << 17)
    r = flitsim.transfers(fab, src, dst, 1 << 17, faults=[
        {"kind": "plane", "switch": 1, "at_ps": r0.makespan_ps // 2},
        {"kind": "link", "gpu": 2, "port": 0, "at_ps": r0.makespan_ps // 3}])
    _accounted(r.faults, r.links, once=False)
    assert r.faults["faults_applied"] == 2 and r.faults["lost_packets"] > 0
    # Nothing crosses the dead plane after it died: its links carry less than the live one.
    assert r.links[r.links.switch == 1].payload_bytes.sum() < r.links[r.links.switch == 2].payload_bytes.sum()


def test_faults_in_a_fabric_file(tmp_path) -> None:
    p = tmp_path / "f.toml"
    p.write_text('gpus = 4\nlinks_per_switch = [1, 1]\n[[faults]]\nkind = "plane"\nswitch = 1\nat_ps = 0\n')
    fab = flitsim.hardware.FabricSpec.from_toml(p)
    assert fab.faults == (Fault(kind="plane", switch=1, at_ps=0),)
    r = flitsim.transfers(fab, [0], [1], 1 << 16)
    assert r.links[r.links.switch == 1].packets.sum() == 0


def test_random_faults_either_refuse_or_deliver_every_byte() -> None:
    """Property: any fault list on a small fabric gives a ConfigError (ids out
    of range, GPUs cut off) or a finished run with nothing dropped."""
    hyp = pytest.importorskip("hypothesis")
    st = hyp.strategies
    fab = uniform_fabric(4, [1, 1, 1])
    src = [s for s in range(4) for d in range(4) if s != d]
    dst = [d for s in range(4) for d in range(4) if s != d]
    fault = st.one_of(
        st.fixed_dictionaries({"kind": st.just("plane"), "switch": st.integers(0, 3), "at_ps": st.integers(0, 4_000_000)}),
        st.fixed_dictionaries({"kind": st.just("link"), "gpu": st.integers(0, 4), "port": st.integers(0, 3),
                               "at_ps": st.integers(0, 4_000_000)}))

    @hyp.settings(max_examples=25, deadline=None, derandomize=True)
    @hyp.given(faults=st.lists(fault, max_size=3), ber=st.sampled_from([0.0, 1.9e-3]), nbytes=st.integers(1, 1 << 16))
    def check(faults: list, ber: float, nbytes: int) -> None:
        try:
            spec = fab.with_faults(faults, ber=ber)
        except ConfigError:
            return
        r = flitsim.transfers(spec, src, dst, nbytes)
        _accounted(r.faults, r.links, once=len(faults) <= 1)
        assert (r.transfers.end_ps >= r.transfers.start_ps).all()

    check()
