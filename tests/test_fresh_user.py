"""Regressions from a fresh-user hostile-input pass (each case once failed with a raw
Python exception, a silent answer or a wrong coercion)."""

from pathlib import Path

import numpy as np
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


# Second fresh-user pass (stop 11): plan's GPU count and steps, strict JSON.
def test_plan_refuses_zero_gpus_and_blames_steps():
    from flitsim.planner import plan

    with pytest.raises(flitsim.ConfigError, match="gpus"):
        plan("pixart-alpha", "256", fabric="hgx-h100", gpus=0)
    with pytest.raises(flitsim.ConfigError, match="steps"):
        plan("pixart-alpha", "256", fabric="hgx-h100", gpus=2, steps=0)


def test_cli_json_is_strict_json_without_nan(capsys):
    import json

    from flitsim.cli._common import echo_json

    echo_json({"a": float("nan"), "b": [1.0, float("inf")], "c": np.float64("nan")})
    out = json.loads(capsys.readouterr().out)
    assert out == {"a": None, "b": [1.0, None], "c": None}


def test_gpu_to_gpu_inside_an_hgx_node_uses_nvlink_only():
    # CUDA peer access goes over NVLink when the GPUs have it: GPU 0 -> 1 inside
    # one HGX node of ib-4xhgx-h100 must not add the PCIe port to its NVLink ports
    # (the one-node hgx-h100's 18 ports bound it).
    one = flitsim.transfers("hgx-h100", [0], [1], 16 << 20, fidelity="flow").transfers.GBps.iloc[0]
    multi = flitsim.transfers("ib-4xhgx-h100", [0], [1], 16 << 20, fidelity="flow").transfers.GBps.iloc[0]
    assert multi <= one * 1.001


def test_flow_fidelity_with_faults_is_refused_not_ignored():
    # the flow level cannot reroute or replay: an explicit flow run with a dead
    # component would ignore it (delivered 0 of sent); auto goes to packet level
    fault = [{"kind": "nic", "nic": 13, "at_ps": 0}]
    with pytest.raises(flitsim.ConfigError, match="fidelity"):
        flitsim.transfers("eth-2x8xl40", [0], [1], 1 << 16, fidelity="flow", faults=fault)
    r = flitsim.transfers("eth-2x8xl40", [0], [1], 1 << 16, fidelity="auto", faults=fault)
    assert r.summary()["fidelity"] == "packet"


def _group_pids(pgid):
    import os

    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                out.append(int(d))
    return out


@pytest.mark.skipif(not __import__("os").path.isdir("/proc"), reason="needs /proc and POSIX signals")
@pytest.mark.parametrize("how", ["sigint_group", "sigterm_parent"])
def test_run_with_jobs_stops_on_ctrl_c_and_sigterm(tmp_path, how):
    """Ctrl-C to the process group (or SIGTERM to the parent) stops `flitsim
    run -j 2` within seconds: exit 130, no worker left, no temporary folder."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    # The child imports flitsim as this interpreter does (installed in CI, PYTHONPATH in a checkout):
    # the source tree has no built extension in a clean clone.
    env = dict(os.environ)
    p = subprocess.Popen([sys.executable, "-c", "from flitsim.cli import main; main()", "run",
                          str(root / "examples" / "tiny.toml"), "--out", str(tmp_path / "out"), "-j", "2"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
                         start_new_session=True)
    try:
        line = p.stderr.readline()  # the first progress line: the pool is starting
        assert line, "no progress line"
        # wait for the workers (tiny.toml's runs take about a second: a fixed sleep could miss them)
        deadline = time.monotonic() + 10.0
        while len(_group_pids(p.pid)) < 2 and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert p.poll() is None, "the run finished before it could be interrupted"
        assert len(_group_pids(p.pid)) >= 2, "no workers running"
        t0 = time.monotonic()
        if how == "sigint_group":
            os.killpg(p.pid, signal.SIGINT)
        else:
            p.send_signal(signal.SIGTERM)
        rc = p.wait(timeout=60)
        waited = time.monotonic() - t0
        err = p.stderr.read()
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert rc == 130, err
    assert "KeyboardInterrupt" in err
    assert waited < 30.0
    deadline = time.monotonic() + 10.0
    while _group_pids(p.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _group_pids(p.pid) == [], "orphaned workers"
    assert not [q for q in tmp_path.iterdir() if "flitsim-tmp" in q.name]
    assert not (tmp_path / "out").exists()


_RING_LOG = __import__("pathlib").Path(__file__).parent / "data" / "nccl" / "h200_all_reduce_perf_ring.log"


def test_calibrate_ring_only_log_does_not_fit_nvls_parameters():
    from flitsim.calibrate import fit

    cal = fit([_RING_LOG], "hgx-h100")
    assert "nvls_base_ps" not in cal.params and "nvls_efficiency" not in cal.params
    assert "nvls_base_ps: not fitted (no NVLS rows)" in cal.notes
    assert "nvls_efficiency: not fitted (no NVLS rows)" in cal.notes


def test_calibrate_blames_zero_and_nan_times_header_gpus_and_redop():
    from flitsim.calibrate import fit
    from flitsim.nccl_log import parse

    text = _RING_LOG.read_text()
    rows = [ln for ln in text.splitlines() if ln.strip()[:1].isdigit()]
    bad = text.replace(rows[0], rows[0].replace("37.24", "0"))
    bad = bad.replace(rows[1], rows[1].replace("1347.65", "nan"))
    with pytest.raises(flitsim.ConfigError, match=r"ring\.log:20: time 0\.0 us.*ring\.log:21: time nan us"):
        fit([parse(str(_RING_LOG), text=bad)], "hgx-h100")
    with pytest.raises(flitsim.ConfigError, match="nGpus.*64.*8 GPUs"):
        fit([parse(str(_RING_LOG), text=text.replace("nGpus 8", "nGpus 64"))], "hgx-h100")
    with pytest.raises(flitsim.ConfigError, match="redop = 'foo'"):
        parse(str(_RING_LOG), text=text.replace("     sum   ", "     foo   "))


@pytest.mark.parametrize("length", [0, "0", -3])
def test_plan_refuses_a_zero_token_prompt_naming_the_field(length):
    with pytest.raises(flitsim.ConfigError, match=r"prefill length.*prompt length in 1\.\.="):
        flitsim.plan("llama-3-8b", length, fabric="hgx-h100", gpus=2)


def test_nccl_tests_cli_honours_redop_and_names_nccl_algo(monkeypatch):
    import json

    from click.testing import CliRunner

    from flitsim.cli import cli

    run = lambda *a: CliRunner().invoke(cli, ["nccl-tests", "all_reduce", "-b", "1M", "-e", "1M", *a])  # noqa: E731
    r = run("-d", "double", "-o", "prod", "--json")
    assert r.exit_code == 0, r.output
    assert [(x["type"], x["redop"]) for x in json.loads(r.output)] == [("double", "prod")]
    r = run("-o", "all", "--json")
    rows = json.loads(r.output)
    assert [x["redop"] for x in rows] == ["sum", "prod", "max", "min", "avg"]  # nccl-tests' test_opNames order
    assert len({x["time_us"] for x in rows}) == 1  # the redop does not change the simulated cost
    monkeypatch.setenv("NCCL_ALGO", "foo")
    r = run()
    assert r.exit_code == 2 and "NCCL_ALGO" in r.output and "'foo'" in r.output


def test_trace_csv_with_the_azure_header_loads_without_columns_and_empty_csv_says_no_rows(tmp_path):
    from flitsim.workloads import load_trace, trace_path

    lines = open(trace_path("azure-conv-2023")).read().splitlines()
    p = tmp_path / "azure_copy.csv"
    p.write_text("\n".join(lines[:4]) + "\n")
    wl = load_trace(str(p))
    assert list(wl.requests["input_tokens"]) == [int(x.split(",")[1]) for x in lines[1:4]]
    assert list(wl.requests["output_tokens"]) == [int(x.split(",")[2]) for x in lines[1:4]]
    e = tmp_path / "empty.csv"
    e.write_text(lines[0] + "\n")
    with pytest.raises(flitsim.ConfigError, match="no rows"):
        load_trace(str(e))


def test_serve_accepts_the_cli_workload_name_llmperf():
    from flitsim.serving.serve import LLMPERF_WORKLOAD, resolve_workload
    from flitsim.workloads import LLMPerfSpec, llmperf_workload

    wl = resolve_workload("llmperf", n=50)
    ref = llmperf_workload(LLMPerfSpec(n_requests=50, **LLMPERF_WORKLOAD))
    assert wl.requests.equals(ref.requests)
    assert LLMPERF_WORKLOAD == {"mean_input_tokens": 550, "stddev_input_tokens": 150, "mean_output_tokens": 150,
                                "stddev_output_tokens": 10}  # ray-project/llmperf README example


def test_kv_budget_below_the_largest_request_is_refused_up_front():
    from flitsim.serving import RequestTable
    from flitsim.serving.engine import run_instance
    from flitsim.serving.iteration_cost import AffineIterationCost

    t = RequestTable(np.array([0.0, 0.0, 0.0]), np.array([10, 10, 500], np.int64), np.array([2, 2, 20], np.int64))
    with pytest.raises(flitsim.ConfigError, match=r"kv_blocks = 20: at least 33 blocks.*request 2"):  # ceil(519/16)
        run_instance(t, AffineIterationCost(fixed_s=1e-3, per_token_s=1e-5), kv_blocks=20)


def test_presets_name_gddr_on_ada_parts_and_route_messages():
    from click.testing import CliRunner

    from flitsim.catalog import preset_catalog
    from flitsim.cli import cli

    what = preset_catalog().set_index("name").what
    for g in ("l20", "l40"):  # GDDR6 parts (NVIDIA L20 / L40 datasheets)
        assert "48 GB GDDR6 at" in what[g] and "HBM" not in what[g]
    assert "HBM3" in what["h100"]
    r = CliRunner().invoke(cli, ["route", "hgx-h100", "0", "0"])
    assert r.exit_code == 0 and "same endpoint" in r.output
    with pytest.raises(flitsim.ConfigError, match=r"GPUs 0\.\.8, no host endpoints"):
        __import__("flitsim.routing").routing.route("hgx-h100", 0, 8)


@pytest.mark.parametrize("bad", ["yes", 1, "false"])
def test_transport_params_bool_fields_are_strict(bad):
    from flitsim.transfers import transfers

    with pytest.raises(flitsim.ConfigError, match=r"pxn = .*expected a bool"):
        transfers("ib-4xhgx-h100", [0], [8], 1 << 20, transport="auto", transport_params={"pxn": bad})


def test_run_out_dir_removes_temp_folders_of_dead_runs(tmp_path):
    import os
    import subprocess
    import sys

    from flitsim.cli.run_cmd import check_out_dir

    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()  # a pid that no longer runs
    stale = tmp_path / f".out.flitsim-tmp-{p.pid}"
    stale.mkdir()
    alive = tmp_path / f".out.flitsim-tmp-{os.getppid()}"  # a live process: its run may still be going
    alive.mkdir()
    tmp = check_out_dir(str(tmp_path / "out"), False)
    assert tmp.is_dir() and not stale.exists() and alive.exists()
    tmp.rmdir()


def test_flow_level_accepts_host_endpoints_like_packet_level() -> None:
    """Fresh user: flow level refused host endpoint ids that packet level and `route` accept.

    A GPU -> host-memory copy crosses the same links at both fidelities; a single bandwidth-bound
    copy must agree within the flow tier's 2 % bandwidth-bound bound.
    """
    from flitsim.hardware.fabric import fabric_preset

    spec = fabric_preset("pcie-8xl40")
    host = spec.gpus  # first host endpoint
    flow = flitsim.transfers(spec, [0], [host], 4 << 20, fidelity="flow").makespan_ps
    packet = flitsim.transfers(spec, [0], [host], 4 << 20, fidelity="packet").makespan_ps
    assert abs(flow - packet) / packet < 0.02


def test_scenario_builder_errors_name_the_case_and_schedule(tmp_path) -> None:
    """Fresh user: `stages = 0` in a scenario failed with `stages = 0: ...` and no hint of which
    case or schedule of the file held it."""
    from flitsim.scenario.run import run_scenario

    text = (Path(__file__).resolve().parents[1] / "examples" / "tiny.toml").read_text()
    text = text.replace("options = { stages = 4, slices = 4 }", "options = { stages = 0, slices = 4 }")
    p = tmp_path / "bad.toml"
    p.write_text(text)
    with pytest.raises(flitsim.ConfigError, match=r"cases\.Llama-3-8B prefill, LLMPerf\.schedules\.TeraPipe uniform: .*stages = 0"):
        run_scenario(p, progress=False)


def test_every_fabric_argument_takes_a_toml_file(tmp_path) -> None:
    """Fresh user: `flitsim nccl-tests -F g2.toml` (and Python `collective("g2.toml", ...)`) refused a
    fabric file that `route`, `ledger` and `plan` accept; `as_fabric` is now the one place that reads it."""
    from click.testing import CliRunner

    from flitsim.cli import cli

    p = tmp_path / "two.toml"
    p.write_text('gpus = 2\nlinks_per_switch = [1, 1]\nlink = "nvlink4"\n')
    out = CliRunner().invoke(cli, ["nccl-tests", "all_gather", "-F", str(p), "-b", "64K", "-e", "64K", "--format", "csv"])
    assert out.exit_code == 0, out.output
    r = flitsim.collective(str(p), "all_gather", 1 << 16)
    assert r.n == 2
    with pytest.raises(flitsim.ConfigError, match="fabric file"):
        flitsim.collective(str(tmp_path / "missing.toml"), "all_gather", 1 << 16)


# Third fresh-user pass (stop 13).
_MAP = '''title = "m"
[map]
devices = 2
[[map.fabrics]]
preset = "hgx-h100"
overrides = { fidelity = "flow" }
{more_fabrics}
[[map.workloads]]
name = "w"
model = "llama-3-8b"
workload = { kind = "tokens", tokens = 256 }
{schedules}
{more_workloads}
'''


def _map_file(tmp_path, schedules='schedules = ["tensor_parallel"]', more_fabrics="", more_workloads=""):
    p = tmp_path / "m.toml"
    p.write_text(_MAP.replace("{schedules}", schedules).replace("{more_fabrics}", more_fabrics)
                 .replace("{more_workloads}", more_workloads))
    return p


@pytest.mark.parametrize("schedules", ['schedules = ["tensor_paralel"]', "schedules = []",
                                       'schedules = ["pipefusion"]'])
def test_map_row_schedules_must_name_builders_of_the_row(tmp_path, schedules):
    """A typo (or a DiT builder on an LLM row, or an empty list) in a map row's `schedules` ran
    nothing and reported the cell as 'no feasible schedule' (exit 0): a silent wrong verdict."""
    from flitsim.scenario import run_scenario

    with pytest.raises(flitsim.ConfigError, match=r"map\.workloads\.0\.schedules = .*tensor_parallel"):
        run_scenario(_map_file(tmp_path, schedules), progress=False)


def test_map_rows_and_columns_must_have_distinct_names(tmp_path):
    """Two map columns of one preset (flow vs a coarser packet size) or two rows of one name were
    keyed together: each candidate's `vs_winner` was computed against the other cell's winner
    (0.11x). docs/map.md: a cell is (workload, fabric); equal keys are now refused."""
    from flitsim.scenario.spec import load_scenario

    col = '[[map.fabrics]]\npreset = "hgx-h100"\noverrides = { sim_packet_bytes = 65536 }'
    with pytest.raises(flitsim.ConfigError, match=r"map\.fabrics\.1\.label = 'hgx-h100'"):
        load_scenario(_map_file(tmp_path, more_fabrics=col))
    row = '[[map.workloads]]\nname = "w"\nmodel = "llama-3-8b"\nworkload = { kind = "tokens", tokens = 4096 }'
    with pytest.raises(flitsim.ConfigError, match=r"map\.workloads\.1\.name = 'w'"):
        load_scenario(_map_file(tmp_path, more_workloads=row))
    # labelled columns of one preset are fine
    ok = load_scenario(_map_file(tmp_path, more_fabrics=col + '\nlabel = "H100 64K packets"'))
    assert [f.label or f.preset for f in ok.map.fabrics] == ["hgx-h100", "H100 64K packets"]


def test_cases_and_schedule_labels_must_not_share_report_files(tmp_path):
    """Two cases named alike (or two runs of one builder without labels) wrote one
    tasks/<case>__<label>.parquet and one trace: the second overwrote the first."""
    from flitsim.scenario.spec import load_scenario

    case = ('[[cases]]\nname = "{name}"\nmodel = "llama-3-8b"\nworkload = {{ kind = "tokens", tokens = 512 }}\n'
            '[[cases.schedules]]\nname = "tensor_parallel"\noptions = {{ degree = 2 }}\n')
    p = tmp_path / "s.toml"
    p.write_text('title = "t"\n' + case.format(name="c 1") + case.format(name="C-1"))
    with pytest.raises(flitsim.ConfigError, match=r"cases\.1\.name = 'C-1': distinct from entry 0"):
        load_scenario(p)
    p.write_text('title = "t"\n' + case.format(name="c") + '[[cases.schedules]]\nname = "tensor_parallel"\n'
                 'options = { degree = 4 }\n')
    with pytest.raises(flitsim.ConfigError, match=r"cases\.0\.schedules\.1\.label = 'tensor_parallel'"):
        load_scenario(p)


def test_run_prints_the_map_table_as_text_when_piped(tmp_path):
    """`flitsim run main.toml | tee log` printed `<rich.table.Table object at 0x...>` instead of the
    PMF map table (the map used rich's Table, which the plain-text printer cannot render)."""
    from click.testing import CliRunner

    from flitsim.cli import cli

    out = CliRunner().invoke(cli, ["run", str(_map_file(tmp_path)), "--out", str(tmp_path / "o"), "--no-progress"])
    assert out.exit_code == 0, out.output
    assert "rich.table" not in out.output and "object at 0x" not in out.output
    assert "PMF map" in out.output and "tensor parallel" in out.output


def test_ber_list_refuses_empty_items():
    """`flitsim ber --ber ''` printed an empty table with exit 0; `--ber 1e-3,,2e-3` dropped an item."""
    from click.testing import CliRunner

    from flitsim.cli import cli

    for text in ["", "1e-3,,2e-3", " "]:
        out = CliRunner().invoke(cli, ["ber", "nvlink5", "--ber", text])
        assert out.exit_code == 2 and "--ber" in out.output, (text, out.output)


def test_uniform_fabric_refuses_oversized_fabrics_before_building_wires():
    """A fabric TOML with `gpus = 100000000` hung (> 60 s building 2e8 wires in Python) before the
    engine's own bound (4096 ports per switch, 256 per GPU; rust/src/fabric/spec.rs) refused it."""
    from flitsim.hardware.fabric import uniform_fabric

    # the message is uniform_fabric's own (gpus x links), raised before any Wire exists
    with pytest.raises(flitsim.ConfigError, match=r"switch_ports = 200000000: 0..=4096 .*gpus x max"):
        uniform_fabric(100_000_000, [2])
    with pytest.raises(flitsim.ConfigError, match=r"gpu_ports = 1000000: 1..=256 .*sum\(links_per_switch\)"):
        uniform_fabric(1, [1] * 1_000_000)


def test_kary_ncube_takes_a_link_preset_name():
    """`kary_ncube(4, 2, link="nope")` raised AttributeError ('str' object has no attribute 'vcs')."""
    t = flitsim.kary_ncube(4, 2, link="nvlink5")
    assert t.links[0].vcs >= 4
    with pytest.raises(flitsim.ConfigError, match="link"):
        flitsim.kary_ncube(4, 2, link="nope")
    with pytest.raises(flitsim.ConfigError, match="link = 5"):
        flitsim.kary_ncube(4, 2, link=5)  # type: ignore[arg-type]


def test_profile_rows_bound_shapes_and_refuse_booleans(tmp_path):
    """`flitsim profile validate` passed a GEMM row with m = 99999999999999999999999 and `profile
    show` then died with OverflowError (int64 columns); a Parquet boolean m / time_us was read as 1.
    docs/compute.md: shapes are positive integers, times > 0 us."""
    import pandas as pd
    from click.testing import CliRunner

    from flitsim.cli import cli
    from flitsim.cost import read_profile

    head = "kernel,gpu,dtype,m,n,k,time_us\n"
    huge = tmp_path / "huge.csv"
    huge.write_text(head + "gemm,h100,bf16,99999999999999999999999,3456,1152,186.1\n")
    for cmd in ("validate", "show"):
        out = CliRunner().invoke(cli, ["profile", cmd, str(huge)])
        assert out.exit_code == 2 and "profile row 0: m" in out.output, out.output
    ok = pd.DataFrame({"kernel": ["gemm"], "gpu": ["h100"], "dtype": ["bf16"], "m": [8192], "n": [3456],
                       "k": [1152], "time_us": [186.1]})
    assert len(read_profile(_parquet(ok, tmp_path / "ok.parquet")).table) == 1
    for col, val in (("m", True), ("time_us", True)):
        bad = ok.assign(**{col: [val]})
        with pytest.raises(flitsim.ConfigError, match=f"profile row 0: {col} = True"):
            read_profile(_parquet(bad, tmp_path / f"{col}.parquet"))


def _parquet(df, path):
    df.to_parquet(path)
    return str(path)


_RING_LOG = Path(__file__).parent / "data" / "nccl" / "h200_all_reduce_perf_ring.log"


def test_calibrate_never_overwrites_a_log_or_a_users_file(tmp_path):
    """`flitsim calibrate nccl-tests x.log -o x.log` replaced the measured log with the parameter
    file, and `-o notes.toml` replaced any existing file; both are refused before the fit now, and an
    earlier parameter file may still be replaced."""
    from click.testing import CliRunner

    from flitsim.cli import cli

    log = tmp_path / "all_reduce_perf.log"
    log.write_text(_RING_LOG.read_text())
    before = log.read_text()
    r = CliRunner().invoke(cli, ["calibrate", "nccl-tests", str(log), "-F", "hgx-h100", "-o", str(log)])
    assert r.exit_code == 2 and "input logs" in r.output and log.read_text() == before
    mine = tmp_path / "mine.toml"
    mine.write_text("# my notes\n")
    r = CliRunner().invoke(cli, ["calibrate", "nccl-tests", str(log), "-F", "hgx-h100", "-o", str(mine)])
    assert r.exit_code == 2 and "not a flitsim parameter file" in r.output and mine.read_text() == "# my notes\n"
    params = tmp_path / "params.toml"
    for _ in range(2):  # new, then a rewrite of its own output
        r = CliRunner().invoke(cli, ["calibrate", "nccl-tests", str(log), "-F", "hgx-h100", "-o", str(params),
                                     "--fit", "host_launch_ps"])
        assert r.exit_code == 0, r.output
    assert params.read_text().startswith("# flitsim collective parameters fitted by")


def test_calibrate_says_which_rows_it_left_out_and_why(tmp_path):
    """A size-0 row and a row above --max-bytes were dropped without a note, and a time of 1e30 us
    (past the simulator's 2^63 - 1 ps bound) was kept in the residual table as a fitted row."""
    from flitsim.calibrate import fit

    text = _RING_LOG.read_text()
    row = next(ln for ln in text.splitlines() if ln.strip().startswith("1048576"))
    lines = text.splitlines()
    zero = row.replace("     1048576        262144", "           0             0")
    slow = row.replace("37.24   28.16", "1e30   28.16", 1)
    i = lines.index(row)
    log = tmp_path / "all_reduce_perf.log"
    log.write_text("\n".join(lines[:i] + [zero, slow] + lines[i:]) + "\n")
    cal = fit([str(log)], "hgx-h100", fit_params=["host_launch_ps"], max_bytes=1 << 20)
    notes = "\n".join(cal.notes)
    assert f":{i + 1}: size 0 B" in notes, notes
    assert f":{i + 2}: time 1e+30 us" in notes, notes
    assert "size 268435456 B" in notes, notes  # above --max-bytes 1M
    assert [r["size"] for r in cal.residuals if r["used"]] == [1 << 20]


def test_distrifusion_on_an_llm_is_a_config_error():
    """`build("distrifusion", "llama-3-8b", 1024)` raised UnboundLocalError (a local import of
    config_error later in the function shadowed the module's)."""
    with pytest.raises(flitsim.ConfigError, match="workload = 'int': a DitWorkload"):
        S.build("distrifusion", "llama-3-8b", 1024, degree=2)


def test_plan_reads_an_int_like_the_cli_and_checks_shared_arguments_once():
    """Python `plan("pixart-alpha", 1024, ...)` (the docstring's "a DitWorkload / prefill length") passed
    the int through as an LLM prefill length: every configuration came back 'infeasible' (no error).
    A bad `gpu` or `workspace_bytes` did the same; a 1000 px image lost dit_workload's reason."""
    from flitsim.planner import plan

    r = plan("pixart-alpha", 1024, fabric="hgx-h100", gpus=2, steps=1)
    assert (r.table["status"] == "ok").any()
    with pytest.raises(flitsim.ConfigError, match="gpu = 'nope'"):
        plan("pixart-alpha", 1024, fabric="hgx-h100", gpus=2, steps=1, gpu="nope")
    with pytest.raises(flitsim.ConfigError, match="workspace_bytes = -1"):
        plan("pixart-alpha", 1024, fabric="hgx-h100", gpus=2, steps=1, workspace_bytes=-1)
    with pytest.raises(flitsim.ConfigError, match="height_px = 1000: a positive multiple of"):
        plan("pixart-alpha", 1000, fabric="hgx-h100", gpus=2, steps=1)
    with pytest.raises(flitsim.ConfigError, match="steps = 5: only for a DiT"):  # was ignored for an LLM
        plan("llama-3-8b", 1024, fabric="hgx-h100", gpus=2, steps=5)


def test_map_svg_is_the_same_bytes_on_every_run(tmp_path):
    """figures/map.svg carried the write time and random clip-path ids, so two runs (or -j 1 vs
    -j 2) of one scenario never gave the same report files (docs/map.md: identical at any N)."""
    from click.testing import CliRunner

    from flitsim.cli import cli

    p = _map_file(tmp_path)
    outs = []
    for j in ("1", "2"):
        r = CliRunner().invoke(cli, ["run", str(p), "--out", str(tmp_path / j), "-j", j, "--no-progress"])
        assert r.exit_code == 0, r.output
        outs.append((tmp_path / j / "figures" / "map.svg").read_bytes())
    assert outs[0] == outs[1] and b"<dc:date>" not in outs[0]


def test_a_parameter_file_fitted_on_another_fabric_is_refused(tmp_path):
    """`flitsim nccl-tests -F hgx-h100 --params nvl72_params.toml` (and collective(params=...),
    FabricNetwork(collective_params=...)) applied host launch costs fitted on GB200 NVL72 to HGX H100
    without a word, though the file records its fabric and `validate --calibration` refuses it."""
    from flitsim.hardware import fabric_preset

    p = tmp_path / "p.toml"
    p.write_text('# flitsim collective parameters fitted by `flitsim calibrate nccl-tests`\n'
                 'fabric = "gb200-nvl72"\n\n[collective]\nhost_launch_ps = 1000\n')
    with pytest.raises(flitsim.ConfigError, match="fitted on fabric 'gb200-nvl72', but used on fabric 'hgx-h100'"):
        flitsim.collective("hgx-h100", "all_reduce", 1 << 20, params=p)
    with pytest.raises(flitsim.ConfigError, match="fitted on fabric 'gb200-nvl72'"):
        flitsim.FabricNetwork(fabric_preset("hgx-h100"), collective_params=str(p)).to_core(8)
    ok = flitsim.collective("gb200-nvl72", "all_reduce", 1 << 20, group=list(range(8)), params=p, fidelity="flow")
    assert ok.time_us > 0


def test_trace_rows_need_a_time(tmp_path):
    """A trace CSV row with an empty / NaN timestamp became a NaN arrival and was served (exit 0)."""
    from flitsim.workloads import load_trace

    p = tmp_path / "t.csv"
    p.write_text("timestamp,input_tokens,output_tokens\n0,100,10\n,100,10\n")
    with pytest.raises(flitsim.ConfigError, match=r"timestamp \(row 1, column 'timestamp'\) = 'nan'"):
        load_trace(p)
    p.write_text("timestamp,input_tokens,output_tokens\n2024-01-01 00:00:00,100,10\nnot a date,100,10\n")
    with pytest.raises(flitsim.ConfigError, match="timestamp"):
        load_trace(p)


def test_run_force_never_replaces_the_scenarios_folder_or_the_current_one(tmp_path, monkeypatch):
    """`flitsim run proj/s.toml --out proj --force` deleted the scenario file (and everything beside
    it) with the folder; `--out . --force` died with OSError [Errno 16] and a traceback."""
    from click.testing import CliRunner

    from flitsim.cli import cli

    proj = tmp_path / "proj"
    proj.mkdir()
    scen = _map_file(proj)
    (proj / "notes.txt").write_text("mine")
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(cli, ["run", str(scen), "--out", str(proj), "--force", "--no-progress"])
    assert r.exit_code == 2 and "does not hold the scenario file" in r.output, r.output
    monkeypatch.chdir(proj)
    for out in (".", "./", ".."):
        r = CliRunner().invoke(cli, ["run", "m.toml", "--out", out, "--force", "--no-progress"])
        assert r.exit_code == 2 and "not the current folder" in r.output, (out, r.output)
    assert sorted(x.name for x in proj.iterdir()) == ["m.toml", "notes.txt"]
    r = CliRunner().invoke(cli, ["run", "m.toml", "--out", "report", "--no-progress"])
    assert r.exit_code == 0 and (proj / "report" / "map.json").exists(), r.output


def _double(x: int) -> dict:
    return {"v": 2 * x}


def test_sweep_rewrite_keeps_this_grids_order_then_other_grids_rows(tmp_path):
    """The per-point rewrite rebuilt a set of every id for every row (cubic: 2,000 points took
    89 CPU-s, now 5.7; measured in the report); the file must still hold this grid's rows in grid
    order followed by the rows of an earlier grid (docs/reliability.md)."""
    import pandas as pd

    from flitsim.sweeps import sweep

    out = tmp_path / "s.parquet"
    sweep(_double, {"x": [10, 11]}, workers=1, out=out, progress=False)
    sweep(_double, {"x": [3, 1, 2]}, workers=1, out=out, progress=False)
    df = pd.read_parquet(out)
    assert df["x"].tolist() == [3, 1, 2, 10, 11] and df["v"].tolist() == [6, 2, 4, 20, 22]


_STUDY = '''[serve]
model = "llama-3-8b"
n = 4
policies = ["chunked"]
[[fabric]]
name = "hgx-h100"
rates = "1"
layouts = [{ tp = 2 }]
[[workload]]
name = "llmperf"
llmperf = { seed = 0 }
'''


@pytest.mark.parametrize("old,new,field", [
    ('["chunked"]', '["fifo"]', "serve.policies"), ('["chunked"]', "[]", "serve.policies"),
    ('"hgx-h100"', '"hgx-h999"', r"\[\[fabric\]\] 0 fabric"), ("[{ tp = 2 }]", "[]", "layouts"),
    ('"llama-3-8b"', '"llama-9"', "model"),
    ('llmperf = { seed = 0 }', 'llmperf = { seed = 0 }\n[[workload]]\nname = "llmperf"\nllmperf = { seed = 1 }',
     r"\[\[workload\]\]\.name")])
def test_serving_study_checks_shared_settings_before_the_first_point(tmp_path, old, new, field):
    """A typo in a study's policy, fabric or model gave one 'error' row per point with exit 0, and an
    empty `policies` / `layouts` ran nothing at all (exit 0, empty table)."""
    from flitsim.serving.study import read_study, run_study

    p = tmp_path / "study.toml"
    p.write_text(_STUDY.replace(old, new))
    with pytest.raises(flitsim.ConfigError, match=field):
        run_study(read_study(str(p)))


def test_frames_on_an_image_dit_is_refused():
    """`workload = { kind = "dit", model = "dit-xl/2", frames = 9 }` ran 9 x the image tokens as if
    DiT-XL/2 were a video model (docs: frames are for a video DiT, 1 = an image)."""
    with pytest.raises(flitsim.ConfigError, match="DitWorkload.frames = 9: 1 for"):
        dit_workload("dit-xl/2", 512, steps=1, frames=9)
    video = dit_workload("hunyuan-video", (544, 960), steps=1, frames=33)
    one = dit_workload("hunyuan-video", (544, 960), steps=1)
    assert video.image_tokens == 9 * one.image_tokens  # (33 - 1) / 4 + 1 latent frames


def test_ber_help_states_the_upper_limit_it_enforces():
    """`flitsim ber --help` said each BER may be anything in [0, 1); 0.3 is refused (the link would
    only replay: rust/src/link/replay.rs MAX_PACKET_ERROR_PROB = 0.99), so the help now says so."""
    from click.testing import CliRunner

    from flitsim.cli import cli

    h = CliRunner().invoke(cli, ["ber", "--help"]).output
    assert "99 %" in h and "refused" in h
    r = CliRunner().invoke(cli, ["ber", "nvlink5", "--ber", "0.3", "--bytes", "64K"])
    assert r.exit_code == 2 and "FEC can live with" in r.output
    ok = CliRunner().invoke(cli, ["ber", "nvlink5", "--ber", "5e-3", "--bytes", "64K"])  # below the ~7e-3 stated
    assert ok.exit_code == 0, ok.output


def test_switch_lab_with_less_than_two_packets_of_buffer_runs_at_saturation():
    """`flitsim switch --ports 8 --vcs 1 --buffer 8 --packet 8` (one packet of input buffer per VC, a
    legal virtual cut-through configuration) raised StalledError at load 1.0, as did buffers 9..15:
    a credit returned "due now" leaves allocation work with no event behind it, which the stall check
    read as a deadlock and the lab did not step for. With one VC the switch is an input-queued FIFO
    switch, so its saturation cannot exceed Karol et al.'s HOL bound for N = 8 (0.6184)."""
    from flitsim.switchlab import SwitchSpec, saturation

    assert saturation(SwitchSpec(ports=8, vcs=1, buffer_per_vc_flits=16, max_packet_flits=8)).throughput > 0
    assert saturation(SwitchSpec(ports=8, vcs=2, buffer_per_vc_flits=8, max_packet_flits=8)).throughput > 0
    for buf in (8, 12):
        r = saturation(SwitchSpec(ports=8, vcs=1, buffer_per_vc_flits=buf, max_packet_flits=8))
        assert 0.3 < r.throughput <= 0.6184 + 0.01


def test_bursty_source_with_a_huge_mean_burst_still_goes_idle():
    """`flitsim switch --process bursty --burst 1e18 --load 0.1` offered 1.04 flits/port/cycle: the
    idle gap's geometric draw divided by ln(q) = 0 (q = mean / (1 + mean) rounds to 1.0) and the
    -inf cast to 0 cycles, so sources never went idle. The gaps are sized so the mean rate is `load`
    (switch_lab.rs Process::Bursty): the offered load can no longer exceed it by 10x."""
    from flitsim.switchlab import SwitchSpec, TrafficSpec, run

    spec = SwitchSpec(ports=8, vcs=1, buffer_per_vc_flits=16, max_packet_flits=8)
    r = run(spec, TrafficSpec(load=0.1, process="bursty", mean_burst_packets=1e18), warmup_cycles=0,
            measure_cycles=2000)
    assert r.offered_load < 0.5


def test_comma_lists_refuse_empty_items_everywhere():
    """`--ber 1e-3,,2e-3` dropped an item; the switch lab's `--load` and serve's `--rate` comma lists
    did the same (`0.1,,0.5` ran two loads). One parser (`flitsim.errors.number_list`) serves all three."""
    from flitsim.errors import number_list
    from flitsim.serving.serve import parse_rates
    from flitsim.switchlab import parse_loads

    assert number_list("x", "0, 1e-3,2e-3", "numbers") == [0.0, 1e-3, 2e-3]
    assert parse_loads("0.1,0.5") == [0.1, 0.5] and parse_rates("1,2,5") == [1.0, 2.0, 5.0]
    for parse, field in ((parse_loads, "load"), (parse_rates, "rate")):
        for text in ("0.1,,0.5", "", "0.5,"):
            with pytest.raises(flitsim.ConfigError, match=f"^{field} = "):
                parse(text)


def test_sweep_refuses_a_name_both_fixed_and_in_the_grid(tmp_path):
    """`stages = 4` in [fixed] and `stages = [2, 4]` in [grid] ran the grid silently (the fixed
    value was dropped); the file and the API now refuse it before the first point."""
    from flitsim.sweeps import load_sweep

    f = tmp_path / "s.toml"
    f.write_text('[fixed]\nschedule = "terapipe"\nstages = 4\n[grid]\nstages = [2, 4]\n')
    with pytest.raises(flitsim.ConfigError, match=r"^\[fixed\]\.stages = 4: .*not both.*stages = 2"):
        load_sweep(f)
    calls = []
    with pytest.raises(flitsim.ConfigError, match=r"^fixed\.k = 1: .*grid point 1 has k = 3"):
        flitsim.sweep(lambda x, k=0: calls.append(x) or {"y": x}, [{"x": 1}, {"x": 2, "k": 3}], workers=1,
                      progress=False, fixed={"k": 1})
    assert calls == []


def _nccl_log_text(op_file: str, rows: list[tuple[int, int, str]], ranks: int = 8) -> str:
    head = [f"#  Rank {r:2d} Group  0 Pid 1 on node device {r:2d} [0x00] NVIDIA H100" for r in range(ranks)]
    head.append("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw"
                "   busbw #wrong")
    body = [f"{s:12d}  {c:12d}  {t:>8s}  {'sum' if 'reduce' in op_file else 'none':>6s}      -1  100.00    0.50"
            f"    0.50    N/A  100.00    0.50    0.50    N/A" for s, c, t in rows]
    return "\n".join(head + body) + "\n"


def test_nccl_log_count_must_agree_with_size_and_type():
    """A row's count column is checked against size / element bytes (per rank for all_gather,
    reduce_scatter, alltoall: nccl-tests prints paramcount); a mismatch was accepted and the
    simulator silently ran `size` bytes."""
    from flitsim.nccl_log import parse

    ok = parse("all_reduce_perf.log", text=_nccl_log_text("all_reduce", [(1 << 20, 1 << 18, "float"),
                                                                          (1 << 20, 1 << 19, "half")]))
    assert [r["count"] for r in ok.rows] == [262144, 524288]
    # all_gather over 8 ranks: 1 MiB of float is 32768 elements per rank (nccl-tests' all_gather_perf)
    assert parse("all_gather_perf.log", text=_nccl_log_text("all_gather", [(1 << 20, 32768, "float")])).rows
    with pytest.raises(flitsim.ConfigError, match=r"all_reduce_perf\.log:11: count = 131072 elements: expected "
                                                  r"size / \(4 B per float\) = 262144"):
        parse("all_reduce_perf.log", text=_nccl_log_text("all_reduce", [(1 << 20, 1 << 18, "float"),
                                                                        (1 << 20, 1 << 17, "float")]))
    with pytest.raises(flitsim.ConfigError, match=r"count = 262144 elements: expected size / \(4 B per float x 8 "
                                                  r"ranks\) = 32768"):
        parse("all_gather_perf.log", text=_nccl_log_text("all_gather", [(1 << 20, 1 << 18, "float")]))
    with pytest.raises(flitsim.ConfigError, match=r"type = 'float33': expected one of \["):
        parse("all_reduce_perf.log", text=_nccl_log_text("all_reduce", [(1 << 20, 1 << 18, "float33")]))
    # op unknown (a plain name, no ranks): count must still divide size into whole elements of the type
    with pytest.raises(flitsim.ConfigError, match="count = 300000 elements"):
        parse("log.txt", text=_nccl_log_text("x", [(1 << 20, 300000, "float")], ranks=0))


@pytest.mark.parametrize("op", ["all_reduce", "all_gather", "all_to_all"])
def test_simulated_nccl_tests_table_reads_back_with_nccl_tests_counts(op):
    """`flitsim nccl-tests --format nccl-tests` printed all_to_all's count 8x too large (not per
    rank) and dtype aliases (float16) under their own name; its output must parse as a log."""
    from flitsim.collectives import nccl_tests
    from flitsim.nccl_log import format_table, parse

    df = nccl_tests("hgx-h100", op, minbytes="1M", maxbytes="1M", dtype="float16", fidelity="flow")
    per_rank = 8 if op != "all_reduce" else 1
    assert df["type"].tolist() == ["half"] and df["count"].tolist() == [(1 << 20) // 2 // per_rank]
    text = format_table(df, op=op, ngpus=8, fabric="hgx-h100", minbytes=1 << 20, maxbytes=1 << 20, stepfactor=2)
    assert parse(f"{op}_perf.log", text=text).rows[0]["count"] == df["count"][0]
    with pytest.raises(flitsim.ConfigError, match=r"^stepfactor = 2\.5: an integer >= 2 \(got float\)"):
        nccl_tests("hgx-h100", op, minbytes="1M", maxbytes="4M", stepfactor=2.5, fidelity="flow")


def test_dit_latency_per_image_is_not_halved_by_cfg(tmp_path):
    """The report's "DiT latency" table read the schedules' `batch` option (the step batch, doubled
    by classifier-free guidance) as images: DiT-XL/2 tensor parallel showed half its makespan per
    image, PipeFusion (no `batch` option) the whole. One image: per image = makespan for both."""
    from flitsim.scenario import load_scenario, run_scenario

    f = tmp_path / "dit.toml"
    f.write_text('title = "t"\n[fabric]\npreset = "hgx-b200"\nnetwork = "analytic"\n[[cases]]\nname = "d"\nbaseline = false\n'
                 'workload = { kind = "dit", model = "dit-xl/2", resolution_px = 256, steps = 1, batch = 2 }\n'
                 '[[cases.schedules]]\nname = "tensor_parallel"\noptions = { degree = 2 }\n'
                 '[[cases.schedules]]\nname = "pipefusion"\noptions = { stages = 2, patches = 2 }\n')
    res = run_scenario(load_scenario(f))
    for r in res.runs:
        assert r.dit["images"] == 2
        assert r.dit["latency_per_image_s"] == pytest.approx(r.metrics["makespan_s"] / 2, rel=1e-12)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_every_spec_refuses_nan_and_inf_as_not_finite(bad):
    """`flitsim switch --clock-ghz nan` said "should be less than or equal to 1000" (NaN fails every
    comparison); every spec now refuses a non-finite float as such (Spec's allow_inf_nan=False)."""
    from flitsim.hardware.link_spec import SerdesSpec
    from flitsim.switchlab import SwitchSpec

    with pytest.raises(flitsim.ConfigError, match=r"^SwitchSpec\.clock_ghz = .*: Input should be a finite number"):
        SwitchSpec(clock_ghz=bad)
    with pytest.raises(flitsim.ConfigError, match=r"SerdesSpec\.baud_gbd = .*finite number"):
        SerdesSpec(baud_gbd=bad, modulation="pam4", lanes=2)


def test_plot_flags_never_overwrite_a_file_that_is_not_a_figure(tmp_path):
    """`flitsim switch --plot notes.png` replaced whatever was at that path; now only an earlier
    figure (matplotlib names itself in it, or the image's magic bytes) is replaced."""
    from click.testing import CliRunner

    from flitsim.cli import cli

    args = ["switch", "--ports", "4", "--load", "0.1", "--warmup", "10", "--cycles", "200", "--plot"]
    notes = tmp_path / "curve.png"
    notes.write_text("my notes\n")
    r = CliRunner().invoke(cli, args + [str(notes)])
    assert r.exit_code != 0 and "not a matplotlib figure" in r.output and notes.read_text() == "my notes\n"
    fig = tmp_path / "fig.svg"
    r = CliRunner().invoke(cli, args + [str(fig)])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(cli, args + [str(fig)])  # an earlier plot is replaced
    assert r.exit_code == 0, r.output


def test_conclusion_lines_do_not_repeat_the_schedule_and_verdict():
    """`TeraPipe uniform: does not fit (TeraPipe uniform does not fit: fails ...)`: the README had to
    shorten the printed lines by hand; the reason no longer repeats what precedes it."""
    from types import SimpleNamespace

    import pandas as pd

    from flitsim.report.scorecard import MATCHES
    from flitsim.scenario.result import conclusion

    def rec(label, name, s):
        return SimpleNamespace(case="c", label=label, name=name, metrics={"makespan_s": s}, devices=8,
                               memory={"memory_status": "ok"})

    # every figure of the three matches measured and passing, except fill/drain (structure)
    rows = [{"case": "c", "schedule": "TeraPipe", "group": m, "key": k, "figure": k, "value": 1.0, "in_match": True,
             "passes": k != "fill_drain_share"} for m, keys in MATCHES.items() for k in keys]
    [line] = conclusion([rec("TP", "tensor_parallel", 1.0), rec("TeraPipe", "terapipe", 2.0)], pd.DataFrame(rows))
    assert line == ("c: fastest TP (1000.0 ms on 8 GPUs); TeraPipe: does not fit (fails structure: fill_drain_share; "
                    "2.00x the fastest (TP))"), line
    rows = [{**r, "passes": True} for r in rows]  # every match passes, 2x slower: fits structurally, loses
    [line] = conclusion([rec("TP", "tensor_parallel", 1.0), rec("TeraPipe", "terapipe", 2.0)], pd.DataFrame(rows))
    assert line == ("c: fastest TP (1000.0 ms on 8 GPUs); TeraPipe: fits structurally, loses (loses to TP by 2.00x "
                    "on this fabric)"), line


@pytest.mark.parametrize("kw, field", [(dict(resolution_px=2**64), "height_px"),
                                       (dict(resolution_px=(16, 2**40)), "width_px"),
                                       (dict(resolution_px=1024, batch=2**40), "batch"),
                                       (dict(resolution_px=1024, text_tokens=2**40), "text_tokens")])
def test_dit_workload_bounds_the_tokens_of_a_step(kw, field):
    """`resolution_px = 18446744073709551616` in a scenario raised OverflowError from numpy inside
    the kernel lowering; a step's tokens are bounded like a prefill's (MAX_SEQ_TOKENS)."""
    with pytest.raises(flitsim.ConfigError, match=rf"^DitWorkload\.{field} = \d+: .*16777216"):
        dit_workload("pixart-alpha", **kw)
    assert dit_workload("pixart-alpha", 4096, batch=8).image_tokens == 65536  # far below the bound


def test_scenario_without_cases_and_oversized_degree_get_short_messages(tmp_path):
    """A scenario with no [[cases]] printed the whole parsed file (~900 characters) before the rule;
    `degree = 64` on an 8-GPU fabric listed the 56 out-of-range ids instead of the count."""
    from flitsim.scenario import load_scenario, run_scenario

    f = tmp_path / "s.toml"
    f.write_text('title = "t"\n[fabric]\npreset = "hgx-b200"\n')
    with pytest.raises(flitsim.ConfigError, match=r"Scenario\.cases = \[\]: at least one \[\[cases\]\] entry") as ei:
        load_scenario(f)
    assert len(str(ei.value)) < 120
    with pytest.raises(flitsim.ConfigError, match=r"^devices = 64: at most the fabric's 8 devices"):
        S.build("tensor_parallel", "llama-3-8b", 128, degree=64, fabric="hgx-b200")


def test_api_refuses_zero_degrees_bad_network_fidelity_and_no_bers():
    """`Parallel(pp=0, tp=4).build(...)` built tensor parallel on 4 GPUs; `FabricNetwork(...,
    fidelity="nope")` was accepted until a schedule ran on it; `goodput_vs_ber(link, [])` returned
    an empty table with no columns."""
    with pytest.raises(flitsim.ConfigError, match=r"^Parallel\.pp = 0: a degree in 1\.\.=4096"):
        S.Parallel(pp=0, tp=4)
    with pytest.raises(flitsim.ConfigError, match=r"^Parallel\.tp = 2\.0: .*\(got float\)"):
        S.Parallel(tp=2.0)
    assert S.Parallel(pp=2, tp=4).devices == 8
    with pytest.raises(flitsim.ConfigError, match=r"^FabricNetwork\.fidelity = 'nope': .*'packet', 'flow' or 'auto'"):
        flitsim.FabricNetwork("hgx-h100", fidelity="nope")
    with pytest.raises(flitsim.ConfigError, match=r"^FabricNetwork\.transport = 'nvlink': expected one of"):
        flitsim.FabricNetwork("hgx-h100", transport="nvlink")
    assert flitsim.FabricNetwork("hgx-h100", fidelity="flow").fidelity == "flow"
    with pytest.raises(flitsim.ConfigError, match=r"^bers = \[\]: at least one BER"):
        flitsim.goodput_vs_ber("nvlink5", [])


def test_run_prints_scorecard_figures_as_worded_not_raw_floats(tmp_path):
    """The printed PMF scorecard showed `0.8547430951858761` and `nan` (text-only facts such as the
    tokenizer); it now prints the scorecard's own wording (`85.5%`, `llama-2 (model: llama-3)`)."""
    from click.testing import CliRunner

    from flitsim.cli import cli

    f = tmp_path / "s.toml"
    f.write_text('title = "t"\n[fabric]\npreset = "hgx-b200"\nnetwork = "analytic"\n[[cases]]\nname = "p"\n'
                 'model = "llama-3-8b"\nbaseline = false\nworkload = { kind = "tokens", tokens = 256 }\n'
                 '[[cases.schedules]]\nname = "terapipe"\noptions = { stages = 2, slices = 2 }\n')
    out = CliRunner().invoke(cli, ["run", str(f), "--out", str(tmp_path / "o"), "--no-progress"])
    assert out.exit_code == 0, out.output
    card = out.output.split("PMF scorecard", 1)[1].split("Where token-level", 1)[0]
    assert "fill/drain share" in card and "%" in card, card
    assert " nan " not in card and not __import__("re").search(r"\d\.\d{8,}", card), card


def test_main_help_names_more_than_nvswitch():
    """`flitsim --help` still said "GPU scale-up fabrics (NVLink/NVSwitch)" although PCIe, Ethernet and
    InfiniBand fabrics and flow level are half of the package."""
    from click.testing import CliRunner

    from flitsim.cli import cli

    out = CliRunner().invoke(cli, ["--help"]).output
    assert "PCIe" in out and "InfiniBand" in out and "flow level" in out


def test_sweep_parameter_names_are_identifiers(tmp_path):
    """`"" = [1]` in [grid] ran every point into a TypeError recorded in the error column; a
    parameter name is checked once, up front."""
    from flitsim.sweeps import load_sweep

    f = tmp_path / "s.toml"
    f.write_text('[grid]\n"" = [1]\n')
    with pytest.raises(flitsim.ConfigError, match=r"^grid key = '': a parameter name \(a Python identifier\)"):
        load_sweep(f)
    with pytest.raises(flitsim.ConfigError, match=r"^grid\[0\] = .*identifiers"):
        flitsim.sweep(lambda **k: {}, [{"a b": 1}], workers=1, progress=False)
    with pytest.raises(flitsim.ConfigError, match=r"^fixed = .*identifier"):
        flitsim.sweep(lambda **k: {}, {"x": [1]}, workers=1, progress=False, fixed={"1x": 2})


_STUDY2 = ('[serve]\nmodel = "llama-3-8b"\nn = 4\npolicies = ["chunked"]\n[[fabric]]\nname = "hgx-h100"\nrates = "1"\n'
          'layouts = [{ tp = 2 }]\n[[workload]]\nname = "w"\nllmperf = { mean_input_tokens = 100, '
          'mean_output_tokens = 5, seed = 0 }\n')


@pytest.mark.parametrize("old, new, match", [
    ("n = 4", "n = 4.5", r"^serve\.n = 4\.5: an integer >= 1 \(got float\)"),
    ('rates = "1"', "rates = 1", r"^\[\[fabric\]\] 0 rates = 1: a string"),
    ('rates = "1"', 'rates = "1"\nratez = "2"', r"^\[\[fabric\]\] 0 = \['ratez'\]: keys among"),
    ("seed = 0 }", 'seed = 0 }\ntrace = "azure-conv-2023"', r"either 'trace' or 'llmperf', not both"),
    ('model = "llama-3-8b"', 'model = "pixart-alpha"', r"^serve\.model = 'pixart-alpha': a causal LLM"),
    ("[{ tp = 2 }]", "[{ tp = 2 }, { tp = 4, replicas = 4 }]", r"^fabric 'hgx-h100'\.layouts\.1 = .*8 GPUs"),
])
def test_serving_study_refuses_typos_and_wrong_types_up_front(tmp_path, old, new, match):
    """A serving study ran `n = 4.5` as 4, ignored an unknown `ratez` key and the llmperf table next to
    a trace, raised TypeError for `rates = 1`, and made a non-causal model an error row per point."""
    from flitsim.serving.study import read_study, run_study

    f = tmp_path / "s.toml"
    f.write_text(_STUDY2.replace(old, new, 1))
    with pytest.raises(flitsim.ConfigError, match=match):
        run_study(read_study(str(f)))


def test_plan_bounds_the_prefill_and_says_why_configurations_were_refused():
    """`flitsim plan llama-3-8b 99999999999` listed 8 rows 'infeasible' with no reason and a summary of
    '0 do not fit ... 0 simulated'; the length is refused up front, and a refused row's reason printed."""
    from click.testing import CliRunner

    from flitsim.cli import cli
    from flitsim.planner import plan

    with pytest.raises(flitsim.ConfigError, match=r"prefill length, tokens\) = '99999999999': .*1\.\.=16777216"):
        plan("llama-3-8b", "99999999999", fabric="hgx-h100")
    out = CliRunner().invoke(cli, ["plan", "llama-3-8b", "8", "-F", "hgx-h100", "--format", "text"]).output
    assert "1 refused by their builder (infeasible)" in out and "infeasible 8 pp8: slices = 16" in out, out


@pytest.mark.parametrize("cell, ok", [("nan", False), ("100.5", False), ("1e30", False), ("-5", False),
                                      ("100.0", True)])
def test_trace_token_cells_are_named_when_bad(tmp_path, cell, ok):
    """A trace cell `nan` was reported as `input_tokens = 'float64'` (the column's dtype), `1e30` the
    same way; the first bad cell is named with its row, and whole numbers written as 100.0 load."""
    from flitsim.workloads import load_trace

    f = tmp_path / "t.csv"
    f.write_text(f"timestamp,input_tokens,output_tokens\n0,100,10\n1,{cell},10\n")
    if ok:
        assert load_trace(str(f)).requests.input_tokens.tolist() == [100, 100]
    else:
        with pytest.raises(flitsim.ConfigError, match=rf"^input_tokens \(row 1, column 'input_tokens'\) = "):
            load_trace(str(f))


def test_nccl_tests_accepts_every_nccl_tests_type_name():
    """`-d uint8` (or int64, f8e4m3: names nccl-tests prints) was refused by the simulator, so a real
    log of those types could not be calibrated on; the help now lists them."""
    from flitsim.collectives import nccl_tests
    from flitsim.nccl_log import TYPE_BYTES

    for t in ("uint8", "int64", "f8e4m3"):
        df = nccl_tests("hgx-h100", "all_reduce", minbytes="64K", maxbytes="64K", dtype=t, fidelity="flow")
        assert df["type"].tolist() == [t] and df["count"].tolist() == [65536 // TYPE_BYTES[t]]


@pytest.mark.parametrize("bad, match", [(123, "a file path"), ("{tmp}", "not a folder"),
                                        ("{tmp}/no/such/t.json", "does not exist")])
def test_to_perfetto_checks_its_path_before_writing(tmp_path, bad, match):
    """`to_perfetto(run, 123)` opened file descriptor 123 and wrote the trace into it (OSError when it
    was closed); a folder or a missing folder raised IsADirectoryError / FileNotFoundError."""
    from flitsim.taskgraph import IdealNetwork

    s = S.simulate(S.build("tensor_parallel", "llama-3-8b", 64, degree=2), IdealNetwork(1000, 450))
    path = bad.format(tmp=tmp_path) if isinstance(bad, str) else bad
    with pytest.raises(flitsim.ConfigError, match=rf"^path = .*{match}"):
        flitsim.report.to_perfetto(s, path)
    assert flitsim.report.to_perfetto(s, tmp_path / "t.json") == str(tmp_path / "t.json")


def test_default_plot_refuses_unknown_keywords_and_a_non_axes():
    """`result.plot(kind="nope")` was accepted and ignored (any keyword was); `plot(ax=5)` raised
    AttributeError from inside."""
    from flitsim.taskgraph import IdealNetwork

    s = S.simulate(S.build("tensor_parallel", "llama-3-8b", 64, degree=2), IdealNetwork(1000, 450))
    with pytest.raises(TypeError, match="kind"):
        s.plot(kind="nope")
    with pytest.raises(flitsim.ConfigError, match=r"^ax = 5: a matplotlib Axes"):
        s.plot(ax=5)
    fig = s.plot(title="mine")
    assert fig.axes[0].get_title() == "mine"


@pytest.mark.parametrize("name", ["", "///"])
def test_case_names_and_labels_need_a_letter_or_digit(tmp_path, name):
    """`name = ""` ran and wrote `tasks/__terapipe-uniform.parquet` and a conclusion line `: fastest ...`;
    a label of `///` wrote `llama...__.parquet`."""
    from flitsim.scenario import load_scenario

    f = tmp_path / "s.toml"
    body = ('title = "t"\n[fabric]\npreset = "hgx-b200"\n[[cases]]\nname = "{c}"\nmodel = "llama-3-8b"\n'
            'workload = {{ kind = "tokens", tokens = 64 }}\n[[cases.schedules]]\nname = "tensor_parallel"\n'
            'label = "{l}"\noptions = {{ degree = 2 }}\n')
    f.write_text(body.format(c=name, l="tp"))
    with pytest.raises(flitsim.ConfigError, match=r"cases\.0\.name = .*at least one letter or digit"):
        load_scenario(f)
    f.write_text(body.format(c="c", l=name))
    if name:  # an empty label falls back to the builder's name
        with pytest.raises(flitsim.ConfigError, match=r"cases\.0\.schedules\.0\.label = .*at least one letter or digit"):
            load_scenario(f)
    else:
        assert load_scenario(f).cases[0].schedules[0].label == ""


def test_validate_list_checks_the_fabric_it_was_given():
    """`flitsim validate --fabric nope --list` listed the cases (exit 0) as if the fabric existed."""
    from click.testing import CliRunner

    from flitsim.cli import cli

    r = CliRunner().invoke(cli, ["validate", "--fabric", "nope", "--list", "--area", "ledger"])
    assert r.exit_code != 0 and "fabric preset = 'nope'" in r.output
    assert CliRunner().invoke(cli, ["validate", "--fabric", "hgx-h100", "--list", "--area", "ledger"]).exit_code == 0


@pytest.mark.skipif(not hasattr(__import__("signal"), "pthread_sigmask"), reason="needs POSIX signal masks")
def test_ctrl_c_during_the_workers_fork_is_not_lost():
    """A Ctrl-C that landed while `-j N` forked its workers (inside os.fork's at-fork handlers, e.g.
    logging's) was printed as "Exception ignored" and the run went on to finish (the Ctrl-C test
    failed one run in a few when the signal hit the report writers' fork). SIGINT is now held
    during the fork and delivered right after, as a KeyboardInterrupt."""
    import subprocess
    import sys

    code = ("import os, signal, flitsim\nfrom flitsim.parallel import map_ordered\n"
            "os.register_at_fork(after_in_parent=lambda: os.kill(os.getpid(), signal.SIGINT))\n"
            "try:\n    map_ordered(pow, [(2, 3), (2, 4), (2, 5)], 2)\n    print('finished')\n"
            "except KeyboardInterrupt:\n    print('interrupted')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == "interrupted", r.stdout + r.stderr


# --- stop 15 fresh-user pass (handoff_sync / ring_impl / sequence-parallel padding) ---

_PIX = dit_workload("pixart-alpha-xl/2", 256, steps=1)


@pytest.mark.parametrize("value", ["false", "yes", 0, 1, None, 2.0])
@pytest.mark.parametrize("extra", [{}, {"ulysses": 2}])
def test_handoff_sync_is_a_flag_not_a_truthy_value(value, extra):
    # 'false' is truthy: bool('false') silently turned the synchronised hand-offs on.
    with pytest.raises(flitsim.ConfigError, match="handoff_sync.*true or false"):
        S.build("pipefusion", None, _PIX, stages=2, handoff_sync=value, **extra)


def test_handoff_sync_accepts_numpy_bools():
    s = S.build("pipefusion", None, _PIX, stages=2, handoff_sync=np.bool_(False))
    assert s.options["handoff_sync"] is False


def test_include_embed_head_is_a_flag():
    with pytest.raises(flitsim.ConfigError, match="include_embed_head.*true or false"):
        S.build("ulysses", None, _PIX, degree=2, include_embed_head="no")


def test_ring_impl_refused_on_plain_pipefusion_too():
    # Without a ring the option changes nothing, but a misspelt value was dropped silently.
    with pytest.raises(flitsim.ConfigError, match="ring_impl.*ring_flash_attn, torch_cp"):
        S.build("pipefusion", None, _PIX, stages=2, ring_impl="torch-cp")


@pytest.mark.parametrize("kind,kw", [("usp", {"ulysses": 4, "ring": 2}), ("usp", {"ulysses": 8})])
def test_usp_degree_above_the_sequence_is_refused_as_pure_ulysses_is(kind, kw):
    # 5 tokens over 8 ranks: pure Ulysses / Ring refuse it (each rank needs a token); USP built it.
    with pytest.raises(flitsim.ConfigError, match="ulysses x ring = 8: at most the 5 tokens"):
        S.build(kind, "llama-3-8b", 5, **kw)
    assert S.build(kind, "llama-3-8b", 8, **kw).options["ulysses"] * S.build(kind, "llama-3-8b", 8, **kw).options["ring"] == 8


def test_tokens_per_rank_refuses_bad_rank_counts():
    from flitsim.models.kernels import tokens_per_rank

    assert tokens_per_rank(10, 3) == 4 and tokens_per_rank(12, 3) == 4 and tokens_per_rank(0, 4) == 0
    assert list(tokens_per_rank(np.array([10, 12, 1]), 4)) == [3, 3, 1]
    for n in (0, -1, True, 2.5, "2"):
        with pytest.raises(flitsim.ConfigError, match="n = "):
            tokens_per_rank(10, n)
    with pytest.raises(flitsim.ConfigError, match="tokens = "):
        tokens_per_rank(-5, 2)


def test_a_fabric_dict_is_refused_in_a_short_message_that_points_at_fabric_from_dict():
    from flitsim.hardware import fabric_from_dict, fabric_preset

    d = fabric_preset("hgx-h100").to_dict()
    with pytest.raises(flitsim.ConfigError, match="fabric_from_dict") as e:
        flitsim.transfers(d, [0], [1], 1 << 20)
    assert len(str(e.value)) < 200  # it printed the whole 11,000-character dict
    assert flitsim.transfers(fabric_from_dict(d), [0], [1], 1 << 20).makespan_ps > 0


def test_64_vcs_and_2048_switch_ports_run_as_the_small_fabric_does():
    # The packet engine packs output port and VC into 16 bits each: the bounds of the
    # spec (ports <= 4096, VCs <= 64) must run, and give the 2-GPU fabric's time for
    # transfers that share nothing (one switch, one link per GPU).
    from flitsim.hardware.fabric import uniform_fabric
    from flitsim.hardware.links import link_preset

    l1 = link_preset("nvlink5").replace(vcs=1)
    small = flitsim.transfers(uniform_fabric(2, [1], link=l1), [0, 1], [1, 0], 1 << 16).makespan_ps
    wide = flitsim.transfers(uniform_fabric(2048, [1], link=l1), [0, 2047], [2047, 0], 1 << 16).makespan_ps
    assert wide == small
    l64 = link_preset("nvlink5").replace(vcs=64, credits_per_vc_flits=17)
    assert flitsim.transfers(uniform_fabric(8, [1], link=l64), [0, 7], [7, 0], 1 << 16).makespan_ps > 0
    with pytest.raises(flitsim.ConfigError, match="vcs = 65: 1..=64"):
        link_preset("nvlink5").replace(vcs=65)
    with pytest.raises(flitsim.ConfigError, match="switch_ports = 4097: 0..=4096"):
        uniform_fabric(2, [1], switch_ports=4097)


@pytest.mark.parametrize("t", ["1e308", "1e13"])
def test_profile_time_beyond_a_task_duration_is_refused_at_validation(tmp_path, t):
    # 1e308 us passed `flitsim profile validate` and then raised OverflowError (int(inf)) in the builder.
    from flitsim.cost.profile import read_profile

    src = Path(flitsim.__file__).parent / "data" / "example_profile_h100.csv"
    rows = [l for l in src.read_text().splitlines() if not l.startswith("#")]
    col = rows[0].split(",").index("time_us")
    first = rows[1].split(",")
    first[col] = t
    p = tmp_path / "big.csv"
    p.write_text("\n".join([rows[0], ",".join(first)]) + "\n")
    with pytest.raises(flitsim.ConfigError, match=r"row 0: time_us = .*at most 4\.61e\+12"):
        read_profile(p)
    first[col] = "1e9"  # 1000 s: large but a valid duration
    p.write_text("\n".join([rows[0], ",".join(first)]) + "\n")
    assert len(read_profile(p).frame) == 1


@pytest.mark.parametrize("name,opts", [("usp", "ulysses = 2, ring = 2"), ("pipefusion", "stages = 2, patches = 2, ulysses = 2"),
                                       ("pipefusion", 'stages = 4, patches = 4, ring_impl = "torch_cp"')])
def test_scenario_cases_take_the_hybrid_options_build_takes(tmp_path, name, opts):
    # A [[cases]] entry checked its options against the builder's signature: usp took
    # nothing but `devices`, pipefusion refused ulysses / ring / cfg / ring_impl,
    # though S.build (and the [map] section) take them.
    from click.testing import CliRunner

    from flitsim.cli import cli

    text = (Path(__file__).parents[1] / "examples" / "tiny.toml").read_text()
    text = text.replace('name = "pipefusion"', f'name = "{name}"').replace(
        "options = { stages = 4, patches = 4 }", "options = { " + opts + " }")
    (tmp_path / "s.toml").write_text(text)
    r = CliRunner().invoke(cli, ["run", str(tmp_path / "s.toml"), "--out", str(tmp_path / "out")])
    assert r.exit_code == 0, r.output
    bad = text.replace(opts, opts + ", ulysess = 2")
    (tmp_path / "bad.toml").write_text(bad)
    r = CliRunner().invoke(cli, ["run", str(tmp_path / "bad.toml"), "--out", str(tmp_path / "out2")])
    assert r.exit_code != 0 and "ulysess" in r.output and "an option of" in r.output


def test_serving_arrivals_beyond_float_resolution_are_refused():
    # rate 1e-300: arrivals ~1e301 s apart, every TTFT / TPOT rounded to 0 s and was reported as such.
    from flitsim.serving import serve

    with pytest.raises(flitsim.ConfigError, match=r"rate = 1e-300: arrivals within 1e\+09 s"):
        serve("llama-3-8b", "llmperf", rate=1e-300, n=10)
    s = serve("llama-3-8b", "llmperf", rate=1e-6, n=4).summary()  # 4 arrivals over ~days: still resolved
    assert s["mean_ttft_s"] > 0 and s["mean_tpot_s"] > 0


def test_compiled_fabric_follows_a_top_level_field_swapped_behind_the_frozen_model():
    # A user hack: object.__setattr__ on the frozen spec. The compiled copy must not be reused.
    import warnings

    from flitsim.hardware import fabric_preset

    f = fabric_preset("hgx-h100").replace(fidelity="flow")
    slow = f.links[0].replace(propagation_ps=f.links[0].propagation_ps * 100)
    before = flitsim.transfers(f, [0], [1], 1 << 20).makespan_ps
    object.__setattr__(f, "links", (slow,) + f.links[1:])
    fresh = type(f).model_validate(f.to_dict())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert flitsim.transfers(f, [0], [1], 1 << 20).makespan_ps == flitsim.transfers(fresh, [0], [1], 1 << 20).makespan_ps
    assert flitsim.transfers(fresh, [0], [1], 1 << 20).makespan_ps > before


@pytest.mark.parametrize("line,match", [('kv_fidelity = "fluid"', "serve.kv_fidelity = 'fluid': one of"),
                                        ('fidelity = "fast"', "serve.fidelity = 'fast': one of"),
                                        ("max_num_seqs = 0", "serve.max_num_seqs = 0: an integer >= 1"),
                                        ("max_num_batched_tokens = 1.5", "serve.max_num_batched_tokens = 1.5")])
def test_serving_study_checks_shared_serve_values_before_the_first_point(tmp_path, line, match):
    # Each was an error row per point and exit 0 (the whole study ran to report the same typo).
    from flitsim.serving.study import read_study, run_study
    from test_serving import STUDY

    f = tmp_path / "s.toml"
    f.write_text(STUDY.replace("[serve]\n", "[serve]\n" + line + "\n", 1))
    with pytest.raises(flitsim.ConfigError, match=match):
        run_study(read_study(str(f)))


def test_rate_strings_are_bounded_and_whole():
    # '1e-300:1' doubled into 998 serving runs; '1:64:1e9' allocated 1e9 rates; '1:64:2.5' ran 2.
    from flitsim.serving.serve import parse_rates

    assert parse_rates("1:64") == [1, 2, 4, 8, 16, 32, 64] and len(parse_rates("1:64:256")) == 256
    with pytest.raises(flitsim.ConfigError, match="at most 256 rates"):
        parse_rates("1e-300:1")
    for text in ("1:64:1e9", "1:64:2.5"):
        with pytest.raises(flitsim.ConfigError, match="whole n in 1..=256"):
            parse_rates(text)
    for text in ("1:inf", "1:64:inf", "1e-308:1e308"):  # OverflowError from the point count
        with pytest.raises(flitsim.ConfigError, match="rate = "):
            parse_rates(text)


def test_fabric_network_checks_faults_on_construction_and_compiles_its_fabric_once():
    # Bad faults were accepted until the first simulation; a network with a fidelity or
    # faults built (and compiled) a new spec on every run.
    import flitsim.hardware.fabric as F

    with pytest.raises(flitsim.ConfigError, match=r"faults\[0\].switch = 9"):
        flitsim.FabricNetwork("hgx-h100", faults=[{"kind": "plane", "switch": 9, "at_ps": 0}])
    s = S.build("tensor_parallel", "llama-3-8b", 64, degree=2, include_embed_head=False)
    calls = []
    orig = F._core.fabric_compile
    net = flitsim.FabricNetwork("hgx-h100", fidelity="auto", faults=[{"kind": "plane", "switch": 1, "at_ps": 10**12}])
    try:
        F._core.fabric_compile = lambda d: calls.append(1) or orig(d)
        times = {S.simulate(s, net).makespan_ps for _ in range(2)}
    finally:
        F._core.fabric_compile = orig
    assert len(calls) == 0 and len(times) == 1  # compiled on construction; main compiled once per run
    fresh = flitsim.FabricNetwork("hgx-h100", fidelity="auto", faults=[{"kind": "plane", "switch": 1, "at_ps": 10**12}])
    assert S.simulate(s, fresh).makespan_ps in times


def test_transfers_take_size_text_like_every_other_size():
    """README: sizes like 64K mean 65,536 bytes everywhere; transfers() refused them (dtype <U3)."""
    import flitsim
    from flitsim.errors import ConfigError

    a = flitsim.transfers("hgx-h100", [0, 1], [1, 2], "64K")
    b = flitsim.transfers("hgx-h100", [0, 1], [1, 2], [65536, "64KiB"])
    c = flitsim.transfers("hgx-h100", [0, 1], [1, 2], 65536)
    assert a.makespan_ps == b.makespan_ps == c.makespan_ps
    with pytest.raises(ConfigError, match=r"nbytes\[1\] = '1.5'"):
        flitsim.transfers("hgx-h100", [0, 1], [1, 2], ["64K", "1.5"])
