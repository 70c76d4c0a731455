"""Flow level against packet level on every preset (docs/fidelity.md).

Expected values come from the packet level (the reference) and the closed
forms it is itself tested against; bounds: bandwidth-bound within 2 %."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import flitsim
from flitsim.errors import ConfigError, FidelityWarning
from flitsim.hardware import fabric_preset

PRESETS = ["gb200-nvl72", "hgx-b200", "hgx-h100", "dgx-a100"]


def pairwise(n: int) -> tuple[np.ndarray, np.ndarray]:
    """NCCL's staggered all-to-all order: source s lists s+1, s+2, ... (mod n)."""
    s = np.tile(np.arange(n), n - 1)
    return s, (s + np.repeat(np.arange(1, n), n)) % n


def both(name: str, s, d, nbytes, **kw):  # type: ignore[no-untyped-def]
    p = flitsim.transfers(fabric_preset(name, **kw), s, d, nbytes, fidelity="packet")
    f = flitsim.transfers(fabric_preset(name, **kw), s, d, nbytes, fidelity="flow")
    return p, f


@pytest.mark.parametrize("name", PRESETS)
def test_point_to_point_bandwidth_within_2_percent(name: str) -> None:
    p, f = both(name, [0], [1], 4 << 20)
    assert f.fidelity == "flow" and p.fidelity == "packet"
    assert abs(f.makespan_ps / p.makespan_ps - 1) < 0.02
    # Physics: what the flow level's links carried sums to the bytes moved, and
    # no link ran above its own rate.
    assert abs(f.links.payload_bytes.sum() - (4 << 20)) <= f.links.shape[0]
    assert f.links.utilization.max() <= 1.0 + 1e-9


@pytest.mark.parametrize("name", PRESETS)
def test_pairwise_all_to_all_within_2_percent(name: str) -> None:
    n = fabric_preset(name).gpus
    s, d = pairwise(n)
    size = 18 * 256 * (4 if n > 8 else 64)
    p, f = both(name, s, d, size)
    assert abs(f.makespan_ps / p.makespan_ps - 1) < 0.02, (p.makespan_ps, f.makespan_ps)
    assert not f.fidelity_reason.startswith("warning"), f.fidelity_reason


@pytest.mark.parametrize("name", ["hgx-b200", "hgx-h100"])
def test_nvls_all_reduce_within_2_percent(name: str) -> None:
    p = flitsim.collective(name, "all_reduce", 64 << 20, algorithm="nvls", fidelity="packet")
    f = flitsim.collective(name, "all_reduce", 64 << 20, algorithm="nvls", fidelity="flow")
    assert abs(f.time_us / p.time_us - 1) < 0.02
    assert f.stats["fidelity"] == "flow"


def test_synchronized_all_to_all_warns_and_auto_runs_packet() -> None:
    # Every source lists destinations 0, 1, 2, ...: a rolling incast that the
    # packet level's switch outputs arbitrate; fluid sharing is too optimistic.
    n = 8
    s, d = np.nonzero(~np.eye(n, dtype=bool))
    with pytest.warns(FidelityWarning, match="arbitration-bound"):
        flitsim.transfers("hgx-b200", s, d, 1 << 20, fidelity="flow")
    a = flitsim.transfers("hgx-b200", s, d, 1 << 20, fidelity="auto")
    assert a.fidelity == "packet" and a.fidelity_reason.startswith("auto chose packet: arbitration-bound")


def test_credit_bound_fabric_is_named() -> None:
    # 1 VC of a tiny buffer with a long credit return: one lane's window is
    # below the link rate, so auto runs packet level and says why.
    f = fabric_preset("hgx-b200")
    link = f.links[0].replace(credits_per_vc_flits=34, credit_return_ps=200_000, vcs=1)
    f = f.replace(links=(link,))
    a = flitsim.transfers(f, [0], [1], 1 << 20, fidelity="auto")
    assert a.fidelity == "packet" and "credit-bound" in a.fidelity_reason
    with pytest.warns(FidelityWarning, match="credit-bound"):
        flitsim.transfers(f, [0], [1], 1 << 20, fidelity="flow")


def test_auto_runs_flow_where_validated() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a = flitsim.transfers("hgx-b200", [0], [1], 1 << 20, fidelity="auto")
    assert a.fidelity == "flow" and a.fidelity_reason.startswith("auto chose flow")


def test_unknown_fidelity_is_config_error() -> None:
    with pytest.raises(ConfigError, match="fidelity"):
        flitsim.transfers("hgx-b200", [0], [1], 1024, fidelity="fluid")
    with pytest.raises(ConfigError, match="fidelity"):
        fabric_preset("hgx-b200", fidelity="exact")
    with pytest.raises(ConfigError, match="fidelity"):
        flitsim.collective("hgx-b200", "all_reduce", 1 << 20, fidelity="fast")


def test_task_graph_at_flow_level_labels_fidelity() -> None:
    from flitsim.taskgraph import TaskGraphBuilder, execute

    b = TaskGraphBuilder(devices=4)
    t0 = b.add_transfer(0, 1, 1 << 20)
    c = b.add_collective([0, 1, 2, 3], "all_to_all", 4 << 20)
    b.add_edge(t0, c)
    g = b.build()
    p = execute(g, flitsim.FabricNetwork(fabric_preset("hgx-b200"), fidelity="packet"))
    f = execute(g, flitsim.FabricNetwork(fabric_preset("hgx-b200"), fidelity="flow"))
    assert p.network["fidelity"] == "packet" and f.network["fidelity"] == "flow"
    assert abs(f.makespan_ps / p.makespan_ps - 1) < 0.03
    assert (f.tasks.end_ps >= f.tasks.start_ps).all()


def test_flow_is_deterministic() -> None:
    s, d = pairwise(8)
    a = flitsim.transfers("hgx-h100", s, d, 1 << 20, fidelity="flow")
    b = flitsim.transfers("hgx-h100", s, d, 1 << 20, fidelity="flow")
    assert np.array_equal(a.transfers.end_ps.values, b.transfers.end_ps.values)


def test_scenario_runs_identical_at_any_job_count(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from pathlib import Path

    from flitsim.scenario import run_scenario

    src = (Path(__file__).resolve().parents[1] / "examples" / "tiny.toml").read_text()
    p = tmp_path / "tiny_flow.toml"
    p.write_text(src.replace("overrides = { sim_packet_bytes = 4096 }",
                             'overrides = { sim_packet_bytes = 4096, fidelity = "auto" }'))
    a = run_scenario(p, progress=False, jobs=1).summary_frame().drop(columns=["wall_s"])
    b = run_scenario(p, progress=False, jobs=2).summary_frame().drop(columns=["wall_s"])
    assert a.equals(b)
    assert set(a.fidelity) <= {"flow", "packet"} and a.fidelity_reason.str.startswith("auto chose").all()


def test_jobs_must_be_positive(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from pathlib import Path

    from click.testing import CliRunner

    from flitsim.cli import cli
    from flitsim.parallel import check_jobs

    tiny = Path(__file__).resolve().parents[1] / "examples" / "tiny.toml"
    r = CliRunner().invoke(cli, ["run", str(tiny), "--out", str(tmp_path / "o"), "-j", "0"])
    assert r.exit_code != 0 and "jobs = 0" in r.output
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ConfigError, match="jobs"):
            check_jobs(bad)


def test_faults_run_at_packet_level_under_auto() -> None:
    from flitsim import Fault

    a = flitsim.transfers("hgx-b200", [0], [1], 1 << 20, fidelity="auto",
                          faults=[Fault(kind="plane", switch=0, at_ps=0)])
    assert a.fidelity == "packet" and "faults" in a.fidelity_reason
