"""Regressions from a fresh-user hostile-input pass (each case once failed with a raw
Python exception, a silent answer or a wrong coercion)."""

import pytest

import flitsim
import flitsim.schedules as S
from flitsim.workloads import dit_workload


def test_fabric_network_takes_a_preset_name_and_refuses_other_types():
    s = S.build("tensor_parallel", "llama-3-8b", 1024, degree=2)
    by_name = S.simulate(s, flitsim.FabricNetwork("hgx-h100"))
    assert by_name.summary()["makespan_s"] > 0
    with pytest.raises(flitsim.ConfigError, match="fabric"):
        flitsim.FabricNetwork(None)  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", ["tensor_parallel", "ulysses"])
def test_degree_must_divide_heads(kind):
    # Llama-3-8B has 32 heads; DiT-XL/2 has 16: 3 and 7 cannot split them evenly.
    with pytest.raises(flitsim.ConfigError, match="n_heads"):
        if kind == "tensor_parallel":
            S.build(kind, "llama-3-8b", 1024, degree=3)
        else:
            S.build(kind, None, dit_workload("dit-xl/2", 512, steps=1), degree=7)


def test_nccl_tests_ngpus_is_not_a_bool():
    with pytest.raises(flitsim.ConfigError, match="ngpus"):
        flitsim.nccl_tests("hgx-h100", "all_reduce", minbytes=8, maxbytes=64, ngpus=True)


def test_goodput_vs_ber_takes_one_ber():
    one = flitsim.goodput_vs_ber("nvlink5", 1e-3, total_bytes=1 << 20)
    assert len(one) == 1 and one["ber"].iloc[0] == 1e-3
    with pytest.raises(flitsim.ConfigError, match="bers"):
        flitsim.goodput_vs_ber("nvlink5", "1e-3")  # type: ignore[arg-type]


def test_calibrate_checks_its_output_folder_before_fitting(tmp_path):
    from click.testing import CliRunner

    from flitsim.cli import cli

    log = tmp_path / "all_reduce_perf.log"
    log.write_text("# nothing\n")
    r = CliRunner().invoke(cli, ["calibrate", "nccl-tests", str(log), "-F", "hgx-h100",
                                 "-o", str(tmp_path / "missing" / "p.toml")])
    assert r.exit_code == 2 and "does not exist" in r.output
