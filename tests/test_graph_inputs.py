"""Graph fabrics as users give them (issue 14 leftovers): the ledger reads
the TOML fabrics ``route`` and ``plan`` read; transfers take host-memory
endpoints; "domain" (GPUs joined without a NIC or network switch) has one
home, the engine."""

from __future__ import annotations

import pytest

import flitsim
from flitsim import ConfigError
from flitsim.hardware.torus import kary_ncube


def test_ledger_takes_the_fabrics_route_and_plan_take(tmp_path) -> None:
    # A TOML fabric (graph or one switch layer) and a FabricSpec without
    # element kinds get a ledger, from the CLI too (it was refused).
    from click.testing import CliRunner

    from flitsim.cli import cli

    p = tmp_path / "box.toml"
    p.write_text('gpus = 4\nlinks_per_switch = [2, 2]\nlink = "nvlink4"\n')
    led = flitsim.ledger(str(p))
    gpu = {r.stage: r.per_direction_GBps for r in led.rows if r.scope == "gpu"}
    assert gpu["nvlink4 payload"] == pytest.approx(4 * 25.0)  # 2 switches x 2 links x 25 GB/s
    r = CliRunner().invoke(cli, ["ledger", str(p), "--format", "csv"])
    assert r.exit_code == 0, r.output
    assert "nvlink4 payload" in r.output
    torus = flitsim.ledger(kary_ncube(4, 2, endpoint_ports=2))
    assert {r.stage: r.per_direction_GBps for r in torus.rows if r.scope == "system"}["GPU ports payload"] == \
        pytest.approx(16 * 2 * 25.0)
    bad = tmp_path / "bad.toml"
    bad.write_text("gpus = 0\n")
    r = CliRunner().invoke(cli, ["ledger", str(bad)])
    assert r.exit_code != 0 and "gpus" in r.output


def test_transfers_take_host_endpoints_and_say_when_a_transport_does_not() -> None:
    f = flitsim.hardware.fabric_preset("pcie-8xl20")
    host = f.gpus  # host 0: endpoint 8
    r = flitsim.transfers(f, [0, host], [host, 1], [1 << 20, 1 << 20])
    assert (r.transfers.end_ps > 0).all()
    # The bytes arrived at the host endpoint's port (delivered through it).
    assert int(r.links[r.links.gpu == host].rx_payload_bytes.sum()) == 1 << 20
    with pytest.raises(ConfigError, match=r"dst\[0\] = 8: a GPU id in 0..8 with transport=.*transport=None"):
        flitsim.transfers(f, [0], [host], [1 << 20], transport="auto")


def test_domains_have_one_home_the_engine() -> None:
    # Placement reads the engine's domains (routes that cross no NIC or
    # network switch): one per node on the scale-out presets.
    from flitsim import _core
    from flitsim.hardware.fabric import fabric_preset
    from flitsim.schedules.placement import fabric_domains

    for name, nodes, per in (("eth-2x8xl40", 2, 8), ("ib-4xhgx-h100", 4, 8)):
        f = fabric_preset(name)
        d = _core.fabric_domains(f.core_dict())
        assert d == [list(range(n * per, (n + 1) * per)) for n in range(nodes)]
        assert fabric_domains(f) == d
    # One domain without network elements (a torus, a PCIe box, one NVSwitch layer).
    for f in (kary_ncube(3, 2), fabric_preset("pcie-8xl20"), fabric_preset("hgx-h100")):
        assert _core.fabric_domains(f.core_dict()) == [list(range(f.gpus))] == fabric_domains(f)
    with pytest.raises(ConfigError):
        _core.fabric_domains({"gpus": 0})
