"""Time-resolved fabric counters (issue 19 point 4): the packet engine
samples per-port queue depth and credits in use at a bounded rate
(``FabricSpec.counters``, rust/src/fabric/sampler.rs), Python gets them as
arrays, Perfetto traces get them as counter tracks.

Checks: the sampled mean queue depth equals the engine's own run-mean
statistic (the time integral of input-buffer occupancy) within sampling
error; credits in use upstream are never below the downstream buffer they
cover (the buffer is part of what the credits cover); memory stays at the cap
however long the run; results are bit-identical with counters on or off.
"""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

import flitsim
from flitsim import ConfigError
from flitsim.hardware.fabric import CounterSpec
from flitsim.hardware.torus import kary_ncube
from flitsim.networks import FabricNetwork
from flitsim.report.trace import MAX_SAMPLED_TRACKS, to_perfetto
from flitsim.taskgraph import TaskGraphBuilder, execute


def _uniform(nodes: int, seed: int = 7) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    src, dst = [], []
    for s in range(nodes):
        d = np.array([x for x in range(nodes) if x != s])
        rng.shuffle(d)
        src += [s] * d.size
        dst += d.tolist()
    return np.array(src), np.array(dst)


@pytest.fixture(scope="module")
def torus_runs():
    src, dst = _uniform(16)
    spec = kary_ncube(4, 2, endpoint_ports=4)
    off = flitsim.transfers(spec, src, dst, 1 << 15)
    on = flitsim.transfers(spec.replace(counters=CounterSpec(interval_ps=10_000, max_samples=512)), src, dst, 1 << 15)
    return off, on


def test_sampled_mean_queue_depth_equals_the_run_mean(torus_runs) -> None:
    _, r = torus_runs
    c = r.counters
    assert c is not None and c.samples <= 512
    # Equally spaced from t = 0 (the interval doubled while the buffer filled).
    assert c.time_ps[0] == 0 and (np.diff(c.time_ps) == c.interval_ps).all()
    assert c.interval_ps % 10_000 == 0 and c.time_ps[-1] + c.interval_ps > r.makespan_ps
    keep = c.time_ps < r.makespan_ps
    n = int(keep.sum())
    sampled = c.queue_flits[keep].mean(axis=0).reshape(-1)
    sd = c.queue_flits[keep].std(axis=0).reshape(-1)
    run_mean = r.switch_ports.input_occupancy_mean_flits.to_numpy()
    assert run_mean.max() > 100  # the network is loaded
    # Within sampling error (3 standard errors of n samples) plus one flit of
    # clock quantization (the switch integrates per cycle, samples are in ps).
    assert (np.abs(sampled - run_mean) <= 3 * sd / np.sqrt(n) + 1.0).all()


def test_credits_in_use_cover_the_downstream_buffer(torus_runs) -> None:
    _, r = torus_runs
    c = r.counters
    sl = r.switch_links
    trunks = sl[sl.to_switch.astype(bool)]
    for s, p, s2, p2 in zip(trunks.switch, trunks.port, trunks.peer, trunks.peer_port):
        up = c.credits_in_use_flits[:, s, p]
        down = c.queue_flits[:, s2, p2]
        assert (up >= down).all()
    assert c.credits_in_use_flits.max() > 0 and c.endpoint_credits_in_use_flits.max() > 0
    # Never more in use than the downstream holds: 8 VCs x the input buffer.
    buf = 8 * 512
    assert c.credits_in_use_flits.max() <= buf and c.queue_flits.max() <= buf


def test_counters_change_nothing_else(torus_runs) -> None:
    off, on = torus_runs
    assert off.counters is None
    assert on.makespan_ps == off.makespan_ps and on.events == off.events
    assert (on.transfers.end_ps == off.transfers.end_ps).all()
    assert on.switch_links.equals(off.switch_links)


def test_memory_is_bounded_by_the_cap() -> None:
    # A 1 ns interval over a run of ~5.8 us: 5,800 instants into 16 slots.
    spec = kary_ncube(3, 1, endpoint_ports=1, counters=CounterSpec(interval_ps=1000, max_samples=16))
    r = flitsim.transfers(spec, [0, 1, 2], [1, 2, 0], 1 << 17)
    c = r.counters
    assert 8 <= c.samples <= 16 and c.max_samples == 16
    assert c.interval_ps >= r.makespan_ps // 16 and (np.diff(c.time_ps) == c.interval_ps).all()
    assert c.queue_flits.shape == (c.samples, 3, 3)
    with pytest.raises(ConfigError, match="max_samples"):
        CounterSpec(interval_ps=1000, max_samples=1)
    with pytest.raises(ConfigError, match="interval_ps"):
        CounterSpec(interval_ps=0)
    with pytest.raises(ConfigError, match="counters.max_samples"):
        flitsim.transfers(kary_ncube(8, 2, counters=CounterSpec(interval_ps=1000, max_samples=1 << 25)), [0], [1], 1024)


def test_perfetto_gets_sampled_counter_tracks(tmp_path) -> None:
    spec = kary_ncube(3, 1, endpoint_ports=1, counters=CounterSpec(interval_ps=20_000, max_samples=64))
    b = TaskGraphBuilder(3)
    for s in range(3):
        b.add_transfer(s, (s + 1) % 3, 1 << 17, label=f"x{s}")
    run = execute(b.build(), FabricNetwork(spec))
    c = run.network["counters"]
    assert c is not None and c.samples <= 64
    path = to_perfetto(run, tmp_path / "t.json.gz")
    obj = json.loads(gzip.decompress(open(path, "rb").read()))
    ev = [e for e in obj["traceEvents"] if e["ph"] == "C" and "queue_flits" in e.get("args", {})]
    names = {e["name"] for e in ev}
    assert names and all(n.startswith("switch ") for n in names)
    # One event per sample per track, at the engine's instants.
    per = {n: [e["ts"] for e in ev if e["name"] == n] for n in names}
    assert all(len(v) == c.samples for v in per.values())
    od = obj["otherData"]
    assert od["sampled_max_samples"] == 64 and od["sampled_tracks"] <= MAX_SAMPLED_TRACKS
    procs = [e["args"]["name"] for e in obj["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"]
    assert any("at most 64 samples per track" in p for p in procs)


def test_sampled_output_flits_sum_to_the_run_total(torus_runs) -> None:
    # Exact: the per-interval deltas of each output add up to every flit it
    # sent (the last sample is the first instant at or after the end), and
    # their busy share stays within one flit per cycle plus one packet per
    # interval (a packet counts when its tail leaves: 17 flits of 16 B).
    _, r = torus_runs
    c = r.counters
    total = c.output_flits.sum(axis=0).reshape(-1)
    assert (total == r.switch_ports.output_flits.to_numpy()).all()
    assert c.time_ps[-1] >= r.makespan_ps
    u = c.output_utilization()
    pkt = 17 * c.switch_cycle_ps / np.diff(c.time_ps).min()
    assert u.max() <= 1.0 + pkt + 1e-9 and u.max() > 0.5
    # The sampled utilization's time mean is the run's output utilization.
    dt = np.diff(c.time_ps)
    mean_u = (u[1:] * dt[:, None, None]).sum(axis=0).reshape(-1) / r.makespan_ps
    assert np.allclose(mean_u, r.switch_ports.output_utilization.to_numpy(), rtol=1e-9, atol=1e-12)
