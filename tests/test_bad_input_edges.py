"""Edge-case bad input found by a fresh-user fuzzing pass: every one must be a
clear ConfigError (or work), never a wrap-around, a hang or a raw traceback."""

import json
import subprocess
import sys

import numpy as np
import pytest

import flitsim
import flitsim.schedules as S
from flitsim.hardware import FabricSpec
from flitsim.taskgraph import IdealNetwork, TaskGraphBuilder


def test_gpu_ids_beyond_u32_do_not_wrap():
    with pytest.raises(flitsim.ConfigError, match=r"src\[0\]"):
        flitsim.transfers("gb200-nvl72", [2**32 + 1], [0], 1024)
    with pytest.raises(flitsim.ConfigError, match=r"dst\[0\]"):
        flitsim.transfers("gb200-nvl72", [0], np.array([2**32], dtype=np.uint64), 1024)


def test_huge_start_times_and_sizes_are_rejected():
    with pytest.raises(flitsim.ConfigError, match="start_ps"):
        flitsim.transfers("gb200-nvl72", [0], [1], 1024, start_ps=2**63)
    with pytest.raises(flitsim.ConfigError, match="nbytes"):
        flitsim.transfers("gb200-nvl72", [0], [1], 2**60)


@pytest.mark.parametrize("field", ["propagation_ps", "credit_return_ps"])
def test_link_delays_are_bounded(field):
    with pytest.raises(flitsim.ConfigError, match=field):
        flitsim.link_preset("nvlink5").replace(**{field: 2**64 - 1})


def test_phy_latency_is_bounded():
    s = flitsim.link_preset("nvlink5").serdes
    with pytest.raises(flitsim.ConfigError, match="phy_latency_ps"):
        flitsim.link_preset("nvlink5").replace(serdes=s.replace(phy_latency_ps=2**64 - 1))


def test_hotspot_traffic_is_not_uniform_by_default():
    from flitsim.switchlab import TrafficSpec

    assert TrafficSpec(pattern="hotspot").hotspot_fraction > 0


def test_incast_needs_two_ports():
    from flitsim.switchlab import SwitchSpec, TrafficSpec, run

    with pytest.raises(flitsim.ConfigError, match="ports"):
        run(SwitchSpec(ports=1, vcs=1, buffer_per_vc_flits=8, max_packet_flits=1, allocator="islip"),
            TrafficSpec(pattern="incast", load=0.5))


@pytest.mark.parametrize("kw", [dict(mean_output_tokens=float("inf")), dict(mean_input_tokens=1e19),
                                dict(stddev_input_tokens=float("inf")), dict(seed=-1),
                                dict(arrival="gamma", rate_per_s=1, cv=float("inf")),
                                dict(arrival="gamma", rate_per_s=1, cv=1e-300), dict(n_requests=10**11)])
def test_llmperf_rejects_unbounded_parameters(kw):
    from flitsim.workloads import llmperf_workload

    with pytest.raises(flitsim.ConfigError):
        llmperf_workload(**kw)


def test_load_sweep_point_count_is_capped():
    from flitsim.switchlab import parse_loads

    with pytest.raises(flitsim.ConfigError, match="at most"):
        parse_loads("0.1:1:1e-12")


def test_terapipe_dp_grid_is_capped():
    with pytest.raises(flitsim.ConfigError, match="grid_tokens"):
        S.build("terapipe", "llama-3-70b", 1 << 20, slicing="dp", grid_tokens=1)
    with pytest.raises(flitsim.ConfigError, match="grid_tokens"):
        S.build("terapipe", "llama-3-70b", 1024, slicing="dp", grid_tokens=0)


def test_switch_plot_path_is_checked_before_simulating(tmp_path):
    cmd = [sys.executable, "-c", "from flitsim.cli import main; main()", "switch", "--ports", "4",
           "--load", "0.5", "--cycles", "100"]
    r = subprocess.run(cmd + ["--plot", str(tmp_path / "missing" / "x.png")], capture_output=True, text=True)
    assert r.returncode == 2 and "does not exist" in r.stderr and "Traceback" not in r.stderr
    r = subprocess.run(cmd + ["--plot", str(tmp_path / "x.weird")], capture_output=True, text=True)
    assert r.returncode == 2 and "extension" in r.stderr


def test_partial_hf_config_names_the_missing_key(tmp_path):
    from flitsim.models import from_hf_config

    p = tmp_path / "config.json"
    p.write_text(json.dumps({"num_hidden_layers": 2, "hidden_size": 64}))
    with pytest.raises(flitsim.ConfigError, match="num_attention_heads"):
        from_hf_config(p)


def test_efficiency_accepts_a_dict_and_rejects_junk():
    a = S.build("terapipe", "llama-3-8b", 1024, stages=2, efficiency={"matmul": 0.5})
    b = S.build("terapipe", "llama-3-8b", 1024, stages=2, efficiency={"matmul": 0.7})
    # Half-as-efficient matmuls take longer (compute-bound prefill).
    assert S.simulate(a).run.makespan_ps > S.simulate(b).run.makespan_ps
    with pytest.raises(flitsim.ConfigError, match="efficiency"):
        S.build("terapipe", "llama-3-8b", 1024, stages=2, efficiency=3)


def test_networks_by_name_and_bad_networks():
    sched = S.build("terapipe", "llama-3-8b", 1024, stages=2)
    assert S.simulate(sched, "ideal").run.makespan_ps == S.simulate(sched).run.makespan_ps
    assert S.simulate(sched, "hgx-h100").run.network["kind"] == "fabric"
    with pytest.raises(flitsim.ConfigError, match="network"):
        S.simulate(sched, "nvl9000")
    with pytest.raises(flitsim.ConfigError, match="schedule"):
        S.simulate("terapipe")
    with pytest.raises(flitsim.ConfigError, match="alpha_ps"):
        S.simulate(sched, IdealNetwork(float("nan"), 450))
    with pytest.raises(flitsim.ConfigError, match="bandwidth_GBps"):
        S.simulate(sched, IdealNetwork(0, 1e-30))


def test_fabric_toml_that_is_not_text(tmp_path):
    p = tmp_path / "bin.toml"
    p.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(flitsim.ConfigError, match="fabric file"):
        FabricSpec.from_toml(p)
    with pytest.raises(flitsim.ConfigError, match="fabric file"):
        FabricSpec.from_toml(None)


def test_task_durations_are_bounded():
    b = TaskGraphBuilder(2)
    with pytest.raises(flitsim.ConfigError, match="duration_ps"):
        b.add_compute(0, 2**64)


def test_trace_source_must_be_a_path_or_name():
    from flitsim.workloads import compare_length_distributions

    with pytest.raises(flitsim.ConfigError, match="trace"):
        compare_length_distributions([])


@pytest.mark.parametrize("loader", ["scenario", "sweep"])
def test_scenario_and_sweep_files_that_cannot_be_read(tmp_path, loader):
    from flitsim.scenario import load_scenario
    from flitsim.sweeps import load_sweep

    load = load_scenario if loader == "scenario" else load_sweep
    with pytest.raises(flitsim.ConfigError, match=loader):
        load(tmp_path)  # a directory
    p = tmp_path / "bin.toml"
    p.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(flitsim.ConfigError, match=loader):
        load(p)


def test_collective_rejects_huge_sizes_and_non_integer_gpu_ids():
    with pytest.raises(flitsim.ConfigError, match="nbytes"):
        flitsim.collective("hgx-h100", "all_reduce", 8 << 40)
    with pytest.raises(flitsim.ConfigError, match="group"):
        flitsim.collective("hgx-h100", "sendrecv", 1 << 20, [0, 1.9])
    with pytest.raises(flitsim.ConfigError, match="group"):
        flitsim.collective("hgx-h100", "sendrecv", 1 << 20, [True, False])
    with pytest.raises(flitsim.ConfigError, match="root"):
        flitsim.collective("hgx-h100", "broadcast", 1 << 20, root=-1)
    with pytest.raises(flitsim.ConfigError, match="maxbytes"):
        flitsim.nccl_tests("hgx-h100", "all_reduce", minbytes=8, maxbytes="1T")
    with pytest.raises(flitsim.ConfigError, match="below one unit"):
        flitsim.nccl_tests("hgx-h100", "all_reduce", minbytes=3, maxbytes=3, dtype="double")


def test_run_checks_options_and_out_before_simulating(tmp_path):
    from pathlib import Path

    from flitsim.scenario import load_scenario, prepare_out_dir

    tiny = Path(__file__).resolve().parents[1] / "examples" / "tiny.toml"
    text = tiny.read_text()
    assert "patches = " in text
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace("patches = ", "patchs = 2, patches = ", 1))
    sc = load_scenario(bad)
    with pytest.raises(flitsim.ConfigError, match="patchs"):
        flitsim.scenario.run_scenario(sc, progress=False)
    f = tmp_path / "afile"
    f.write_text("")
    for out in (str(f), str(f / "sub"), ""):
        with pytest.raises(flitsim.ConfigError, match="out"):
            prepare_out_dir(out)
