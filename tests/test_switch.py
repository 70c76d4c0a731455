"""The switch lab from Python: classic results, Little's law, traffic rates,
bad input and stalls. Expected values come from theory (cited per test), never
from the code's own output. Windows are sized so each run takes well under a
second; tolerances follow from the sampling error stated per test."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

import flitsim
from flitsim import ConfigError, StalledError
from flitsim.cli import cli
from flitsim.switchlab import SwitchSpec, TrafficSpec, latency_curve, parse_loads, run, saturation


def cells(n: int, queueing: str = "voq", allocator: str = "islip", **kw) -> SwitchSpec:
    """A cell switch (one-flit packets), the setting of the classic papers."""
    base = dict(ports=n, vcs=1, buffer_per_vc_flits=256, max_packet_flits=1, queueing=queueing,
                allocator=allocator, downstream_credits_per_vc_flits=64)
    base.update(kw)
    return SwitchSpec(**base)


def test_fifo_two_port_saturation_is_three_quarters():
    # Karol, Hluchyj, Morgan, IEEE Trans. Commun. 1987: N = 2, FIFO inputs,
    # uniform i.i.d. destinations: both HOL cells collide with probability 1/2,
    # so throughput = (1/2 x 1 + 1/2 x 2) / 2 ... with blocking memory the exact
    # value is 0.75. s.e. ~ sqrt(0.19 / (2 x 100k)) x 10 = 0.01 -> tolerance 0.015.
    r = saturation(cells(2, "fifo", "pim"), TrafficSpec(seed=3), warmup_cycles=2_000, measure_cycles=100_000)
    assert r.throughput == pytest.approx(0.75, abs=0.015)
    assert r.run.saturated


def test_voq_pim_single_iteration_matches_anderson_closed_form():
    # Anderson et al., ACM TOCS 1993: backlogged VOQs, one PIM iteration:
    # 1 - (1 - 1/N)^N (N = 8: 0.6564). s.e. ~0.003; tolerance 0.012.
    n = 8
    r = saturation(cells(n, "voq", "pim"), TrafficSpec(seed=5), warmup_cycles=5_000, measure_cycles=60_000)
    assert r.throughput == pytest.approx(1 - (1 - 1 / n) ** n, abs=0.012)


@pytest.mark.parametrize("allocator,iterations", [("islip", 1), ("pim", 2), ("wavefront", 1), ("oldest_first", 1),
                                                   ("separable_input_first", 1), ("separable_output_first", 1)])
def test_littles_law_holds_for_every_allocator(allocator, iterations):
    # Little's law L = lambda W (Little 1961) over the window; the finite-window
    # residual is bounded by the packets present at the window's ends,
    # ~2 W / T relative (W ~ 20 cycles, T = 20k: 0.2 %); tolerance 2 %.
    sw = SwitchSpec(ports=16, vcs=2, buffer_per_vc_flits=32, max_packet_flits=4, allocator=allocator,
                    iterations=iterations)
    r = run(sw, TrafficSpec(load=0.6, seed=7), warmup_cycles=2_000, measure_cycles=20_000)
    assert abs(r.little_residual) < 0.02
    # Below saturation the switch carries what is offered (s.e. ~0.004).
    assert r.accepted_throughput == pytest.approx(r.offered_load, abs=0.02)


def test_incast_delivers_one_flit_per_cycle_to_the_target():
    # N-1 saturated senders to one output: the output link is the bottleneck,
    # 1 flit/cycle, so accepted throughput per port = 1 / N exactly in the limit
    # (credits return the cycle after each tail, 16 credits >= 2 packets: no
    # credit bubble, Dally & Towles ch. 13). Tolerance 1 %.
    n = 8
    sw = SwitchSpec(ports=n, vcs=1, buffer_per_vc_flits=16, max_packet_flits=8)
    r = run(sw, TrafficSpec(load=1.0, pattern="incast", incast_target=3), warmup_cycles=1_000, measure_cycles=20_000)
    assert r.accepted_throughput * n == pytest.approx(1.0, rel=0.01)
    df = r.to_pandas()
    assert df.loc[df.port == 3, "throughput_flits_per_cycle"].sum() == pytest.approx(1.0, rel=0.01)
    # Every other sender's packets conflict at the one output.
    assert df.loc[df.port == 3, "output_conflicts"].iloc[0] > 0


def test_permutation_traffic_has_no_contention():
    # A permutation gives every output exactly one input: no output conflict
    # ever, so any allocator carries whatever is offered, even at 0.95
    # (above every uniform-traffic limit of single-iteration PIM, 0.656 at N=16).
    sw = SwitchSpec(ports=16, vcs=1, buffer_per_vc_flits=16, max_packet_flits=8, allocator="pim")
    r = run(sw, TrafficSpec(load=0.95, pattern="permutation", seed=9), warmup_cycles=1_000, measure_cycles=20_000)
    assert r.accepted_throughput == pytest.approx(r.offered_load, abs=0.005)
    assert r.offered_load == pytest.approx(0.95, abs=0.02)
    assert r.ports_stats["output_conflicts"].sum() == 0


def test_bursty_source_offers_the_requested_load():
    # On/off source: bursts of mean b packets at line rate, gaps of mean
    # b F (1 - rho) / rho cycles, so the long-run rate is rho. Burst-level
    # sampling: ~16 x 20k / (4 x 8 / 0.3) = 3000 bursts per port x 16 ports; s.e.
    # of the mean rate ~1 %; tolerance 4 %.
    sw = SwitchSpec(ports=16, vcs=2, buffer_per_vc_flits=64, max_packet_flits=8)
    tr = TrafficSpec(load=0.3, process="bursty", mean_burst_packets=4, seed=11)
    r = run(sw, tr, warmup_cycles=2_000, measure_cycles=40_000)
    assert r.offered_load == pytest.approx(0.3, rel=0.04)
    # Bernoulli at the same load waits less than bursty (burstiness only adds queueing).
    rb = run(sw, tr.replace(process="bernoulli"), warmup_cycles=2_000, measure_cycles=40_000)
    assert rb.latency_cycles["mean"] < r.latency_cycles["mean"]


def test_result_frames_have_one_row_per_port_and_vc():
    sw = SwitchSpec(ports=8, vcs=3, buffer_per_vc_flits=16, max_packet_flits=4)
    r = run(sw, TrafficSpec(load=0.4), warmup_cycles=500, measure_cycles=5_000)
    df = r.to_pandas()
    assert len(df) == 8 * 3
    assert set(df.vc) == {0, 1, 2}
    # Per-(port, VC) outputs add up to the switch total.
    assert int(df.flits_out.sum()) == r.delivered_flits
    assert r.inputs["flits_in"].shape == (24,)


def test_latency_curve_rises_with_load_and_plots(tmp_path):
    curve = latency_curve(SwitchSpec(ports=8), [0.2, 0.5, 0.8], warmup_cycles=1_000, measure_cycles=10_000)
    df = curve.to_pandas()
    assert list(df.load) == [0.2, 0.5, 0.8]
    assert df.latency_mean_cycles.is_monotonic_increasing
    # Zero-load floor: an 8-flit packet needs at least 8 cycles to leave.
    assert (df.latency_p50_cycles >= 8).all()
    out = tmp_path / "curve.png"
    curve.plot(str(out))
    assert out.stat().st_size > 1000


def test_parse_loads():
    assert parse_loads("0.1:1.0:0.1") == pytest.approx([0.1 * k for k in range(1, 11)])
    assert parse_loads("0.2,0.4") == [0.2, 0.4]
    with pytest.raises(ConfigError):
        parse_loads("a:b")


@pytest.mark.parametrize("switch_kw,traffic_kw,needle", [
    ({"ports": 0}, {}, "ports"),
    ({}, {"load": 0.0}, "load"),
    ({}, {"load": 1.5}, "load"),
    ({}, {"load": -0.1}, "load"),
    ({"buffer_per_vc_flits": 4, "max_packet_flits": 8}, {}, "buffer_per_vc_flits"),
    ({"allocator": "fastest"}, {}, "allocator"),
    ({"allocator": "wavefront", "iterations": 3}, {}, "iterations"),
    ({"speedup": 2}, {}, "output_buffer"),
    ({"ports": -3}, {}, "ports"),
    ({}, {"pattern": "tornado"}, "pattern"),
    ({"ports": 4096, "vcs": 64, "buffer_per_vc_flits": 1024}, {}, "switch"),
    ({"clock_ghz": 0.0}, {}, "clock_ghz"),
    ({}, {"hotspot_port": 99}, "hotspot_port"),
])
def test_bad_input_raises_config_error(switch_kw, traffic_kw, needle):
    with pytest.raises(ConfigError, match=needle):
        run(SwitchSpec(**switch_kw), TrafficSpec(**traffic_kw), measure_cycles=100)


def test_config_error_is_a_value_error_not_a_panic():
    with pytest.raises(ValueError):
        run(SwitchSpec(ports=0))
    with pytest.raises(ConfigError):
        SwitchSpec(ports="many")  # type: ignore[arg-type]


def test_tiny_load_neither_hangs_nor_panics():
    # p = 1e-300 per cycle: essentially no packet in the window; the run
    # skips idle time, so it returns at once with nothing delivered.
    r = run(SwitchSpec(ports=4), TrafficSpec(load=1e-300), warmup_cycles=0, measure_cycles=10**12)
    assert r.delivered_flits == 0
    assert r.cycles_processed < 10


def test_credits_that_never_return_raise_stalled_error():
    # FIFO inputs and a dead downstream on output 0: once every input's head
    # is bound for output 0 and its credits are gone, nothing can move. The
    # run is 10^7 cycles long; the stall must be reported long before.
    sw = SwitchSpec(ports=4, vcs=1, buffer_per_vc_flits=16, max_packet_flits=8, queueing="fifo")
    with pytest.raises(StalledError, match=r"output 0") as e:
        run(sw, TrafficSpec(load=0.5), dead_outputs=[0], warmup_cycles=0, measure_cycles=10_000_000)
    assert "credits" in str(e.value)
    assert isinstance(e.value, RuntimeError)


def test_voq_all_outputs_dead_stalls():
    sw = SwitchSpec(ports=4, vcs=2, buffer_per_vc_flits=16, max_packet_flits=8)
    with pytest.raises(StalledError):
        run(sw, TrafficSpec(load=0.3), dead_outputs=[0, 1, 2, 3], warmup_cycles=0, measure_cycles=10_000_000)


def test_cli_prints_curve_as_json(tmp_path):
    plot = tmp_path / "c.png"
    res = CliRunner().invoke(cli, ["switch", "--ports", "8", "--allocator", "islip", "--iterations", "1",
                                   "--load", "0.2:0.6:0.2", "--warmup", "500", "--cycles", "5000",
                                   "--json", "--plot", str(plot)])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    loads = [row["load"] for row in d["curve"]]
    assert loads == pytest.approx([0.2, 0.4, 0.6])
    # Offered load per point within sampling error of the request (s.e. ~1 %).
    for row in d["curve"]:
        assert row["offered_load"] == pytest.approx(row["load"], rel=0.05)
    assert plot.exists()


def test_cli_table_and_errors():
    res = CliRunner().invoke(cli, ["switch", "--ports", "4", "--load", "0.5", "--cycles", "2000", "--warmup", "100"])
    assert res.exit_code == 0, res.output
    assert "Switch lab" in res.output
    bad = CliRunner().invoke(cli, ["switch", "--ports", "4", "--allocator", "nope", "--load", "0.5"])
    assert bad.exit_code == 2
    assert "ConfigError" in bad.output


def test_package_exports_switchlab():
    assert flitsim.switchlab.ALLOCATORS[0] == "islip"
    assert math.isclose(SwitchSpec(clock_ghz=2.0).clock_ghz, 2.0)
    assert np.all(np.asarray(flitsim.switchlab.ALLOCATORS) != "")


def test_hotspot_port_receives_its_share():
    # Each of N sources sends a packet to the hot port with probability
    # f + (1 - f)/N, so the hot output carries N rho (f + (1 - f)/N) flits per
    # cycle when that is below 1: N=8, rho=0.1, f=0.5 -> 0.45. s.e. of a
    # 20k-cycle mean ~0.45 x sqrt(8 / (0.45 x 20k)) x 3 (bursts of 4 flits)
    # ~ 1.3 %; tolerance 5 %.
    sw = SwitchSpec(ports=8, vcs=2, buffer_per_vc_flits=16, max_packet_flits=4)
    tr = TrafficSpec(load=0.1, pattern="hotspot", hotspot_port=5, hotspot_fraction=0.5, seed=4)
    r = run(sw, tr, warmup_cycles=1_000, measure_cycles=20_000)
    df = r.to_pandas()
    hot = df.loc[df.port == 5, "throughput_flits_per_cycle"].sum()
    assert hot == pytest.approx(8 * 0.1 * (0.5 + 0.5 / 8), rel=0.05)


@pytest.mark.parametrize("args", [["--speedup", "2"], ["--queueing", "fifo"], ["--process", "bursty", "--pattern", "permutation"]])
def test_cli_variants_run(args):
    res = CliRunner().invoke(cli, ["switch", "--ports", "8", "--load", "0.3", "--cycles", "2000", "--warmup", "200",
                                   "--json", *args])
    assert res.exit_code == 0, res.output
    row = json.loads(res.output)["curve"][0]
    assert row["accepted_throughput"] == pytest.approx(row["offered_load"], rel=0.05)


@pytest.mark.parametrize("field,value", [("iterations", 10**11), ("ports", 2**40), ("vcs", 2**33)])
def test_an_integer_beyond_its_field_range_names_field_and_value(field, value):
    # The core reads these counts as u32: a larger value is refused
    # with the field and the value named, not pyo3's OverflowError text.
    spec = SwitchSpec(**{field: value})
    with pytest.raises(ConfigError) as e:
        run(spec, TrafficSpec(load=0.1), warmup_cycles=10, measure_cycles=10)
    msg = str(e.value)
    assert f"switch.{field} = {value}" in msg and "integer range" in msg and "Overflow" not in msg
