"""nccl-tests logs in, parameter files out: the parser against nccl-tests'
text layout (src/common.cu), line-numbered refusals, the simulated
``--format nccl-tests`` output read back by the same parser, and a fitted
parameter file accepted everywhere parameters are."""

from pathlib import Path

import pytest
from click.testing import CliRunner

import flitsim
from flitsim.calibrate import fit
from flitsim.cli import cli
from flitsim.hardware.fabric import fabric_preset
from flitsim.nccl_log import parse

DATA = Path(__file__).parent / "data" / "nccl"


def test_reference_logs_parse_with_both_placements_and_average():
    lg = parse(DATA / "h200_all_reduce_perf_nvls.log")
    assert lg.op == "all_reduce" and lg.ranks == 8 and lg.algorithm == "nvls"
    assert [r["size"] for r in lg.rows] == [1024, 1 << 20, 1 << 30, 8 << 30]
    # Azure AI-benchmarking-guide ND H200 v5 results: 479.98 GB/s busbw at 8 GB
    assert lg.rows[-1]["busbw_GBps_ip"] == pytest.approx(479.98, abs=0.01)
    assert lg.rows[0]["wrong_oop"] is None and lg.avg_busbw_GBps == pytest.approx(250.145)


def test_unparseable_lines_are_refused_with_their_line_number(tmp_path):
    text = (DATA / "h200_all_reduce_perf_ring.log").read_text().splitlines()
    text.insert(len(text) - 2, "     2097152   garbage here")
    p = tmp_path / "all_reduce_perf.log"
    p.write_text("\n".join(text))
    with pytest.raises(flitsim.ConfigError, match=rf"all_reduce_perf.log:{len(text) - 2}: cannot parse"):
        parse(p)
    p.write_text("# only comments\n")
    with pytest.raises(flitsim.ConfigError, match="no nccl-tests data rows"):
        parse(p)


def test_old_layout_without_root_and_na_wrong_columns():
    text = ("#       size         count      type   redop     time   algbw   busbw  error     time   algbw   busbw  error\n"
            "     1048576        262144     float     sum    40.00   26.21   45.88  0e+00    40.00   26.21   45.88  0e+00\n")
    lg = parse("all_reduce_perf", text=text)
    assert lg.rows[0]["root"] == -1 and lg.rows[0]["time_us_ip"] == 40.0


def test_busbw_ratio_must_match_the_op():
    text = (DATA / "h200_all_reduce_perf_ring.log").read_text()
    with pytest.raises(flitsim.ConfigError, match="busbw / algbw"):
        parse("all_gather_perf.log", text=text)


def test_log_from_another_gpu_count_is_refused():
    with pytest.raises(flitsim.ConfigError, match="measured on 8 GPUs"):
        fit([DATA / "h200_all_reduce_perf_ring.log"], "gb200-nvl72")


def test_simulated_nccl_tests_format_reads_back():
    r = CliRunner().invoke(cli, ["nccl-tests", "all_reduce", "-F", "hgx-h100", "-b", "1K", "-e", "64K", "-f", "8",
                                 "-g", "8", "-n", "20", "--format", "nccl-tests"])
    assert r.exit_code == 0, r.output
    assert "# Avg bus bandwidth" in r.output and "out-of-place" in r.output
    lg = parse("all_reduce_perf", text=r.stdout if hasattr(r, "stdout") else r.output)
    assert lg.ranks == 8 and [x["size"] for x in lg.rows] == [1024, 8192, 65536]
    df = flitsim.nccl_tests("hgx-h100", "all_reduce", minbytes="1K", maxbytes="64K", stepfactor=8)
    assert [x["time_us_oop"] for x in lg.rows] == pytest.approx(list(df["time_us"]), abs=0.006)


def test_fitted_parameter_file_is_accepted_everywhere(tmp_path):
    cal = fit([DATA / "h200_all_reduce_perf_ring.log"], "hgx-h100", fit_params=["host_launch_ps"],
              max_bytes=2 << 20)
    # one row (1 MiB ring, 37.24 us): the closed-form shift makes it exact
    assert cal.residuals[0]["error_pct"] == pytest.approx(0, abs=0.1)
    out = tmp_path / "params.toml"
    cal.write(out)
    r = flitsim.collective("hgx-h100", "all_reduce", 1 << 20, algorithm="ring", params=out)
    assert r.time_us == pytest.approx(37.24, rel=1e-3)
    df = flitsim.nccl_tests("hgx-h100", "all_reduce", minbytes="1M", maxbytes="1M", algorithm="ring", params=out)
    assert df["time_us"][0] == pytest.approx(37.24, rel=1e-3)
    net = flitsim.FabricNetwork(fabric_preset("hgx-h100"), collective_params=out)
    assert net.to_core(8)["collective_params"]["host_launch_ps"] == cal.params["host_launch_ps"]
    with pytest.raises(flitsim.ConfigError, match="unknown collective parameter"):
        flitsim.collective("hgx-h100", "all_reduce", 1 << 20, params={"bogus": 1})


def test_calibrate_cli_writes_the_file_and_residuals(tmp_path):
    out = tmp_path / "p.toml"
    r = CliRunner().invoke(cli, ["calibrate", "nccl-tests", str(DATA / "h200_all_reduce_perf_ring.log"), "-F",
                                 "hgx-h100", "--fit", "host_launch_ps", "--max-bytes", "2M", "-o", str(out), "--json"])
    assert r.exit_code == 0, r.output
    assert "[collective]" in out.read_text() and "host_launch_ps" in r.output
    r = CliRunner().invoke(cli, ["calibrate", "nccl-tests", str(tmp_path / "missing.log")])
    assert r.exit_code != 0
