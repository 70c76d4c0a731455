"""flitsim.networks: the one home of what a task graph runs over."""

import pytest

import flitsim
import flitsim.taskgraph as tg
from flitsim.hardware import fabric_preset
from flitsim.networks import AnalyticNetwork, FabricNetwork, IdealNetwork, resolve_network


def test_one_class_old_names_alias_it():
    # "ideal" and "analytic" are one concept; the old import paths still work.
    assert IdealNetwork is AnalyticNetwork is flitsim.IdealNetwork is flitsim.AnalyticNetwork is tg.IdealNetwork
    assert flitsim.FabricNetwork is FabricNetwork is tg.FabricNetwork
    assert tg.resolve_network is resolve_network


def test_from_fabric_rate_is_the_calibrated_injection_rate():
    # HGX H100: 18 NVLink 4 ports per GPU x 25 GB/s payload per direction (NVLink 4:
    # 900 GB/s bidirectional over 18 links) x the calibrated injection: link_efficiency
    # 0.849 with 8 B per 256-B packet (docs/collectives.md) = NCCL SM90 20.6 GB/s per link,
    # 370.8 GB/s per GPU.
    f = fabric_preset("hgx-h100")
    net = AnalyticNetwork.from_fabric(f)
    assert net.bandwidth_GBps == pytest.approx(18 * 25.0 * 0.849 * 256 / 264, rel=1e-9)
    assert net.bandwidth_GBps == pytest.approx(18 * 20.6, rel=2e-3)
    # alpha: one protocol packet GPU 0 -> 1, as the fabric simulates it.
    assert net.alpha_ps == flitsim.transfers(f.replace(sim_packet_bytes=0), [0], [1], f.gpu.payload_bytes).makespan_ps
    # A fabric that sets its own injection rate uses it.
    g = f.replace(gpu=f.gpu.replace(injection_bytes_per_s=100_000_000_000))
    assert AnalyticNetwork.from_fabric(g).bandwidth_GBps == pytest.approx(100.0)


def test_resolve_network():
    assert resolve_network(None) == AnalyticNetwork() == resolve_network("ideal")
    n = resolve_network("hgx-h100")
    assert isinstance(n, FabricNetwork) and n.fabric.gpus == 8
    assert resolve_network(AnalyticNetwork(10, 1.0)) == AnalyticNetwork(10, 1.0)
    with pytest.raises(flitsim.ConfigError, match="network"):
        resolve_network(42)
    with pytest.raises(flitsim.ConfigError, match="AnalyticNetwork.alpha_ps"):
        AnalyticNetwork(-1).to_core(2)
    with pytest.raises(flitsim.ConfigError, match="devices = 9"):
        FabricNetwork(fabric_preset("hgx-h100")).to_core(9)
