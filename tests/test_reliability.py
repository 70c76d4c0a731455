"""Regression tests for issue 13's defects (reliability): errors that pickle,
simulated time that never wraps, sizes refused before allocation, Ctrl-C on
worker threads, sweeps and report folders that never lose data, strict types.
Expected values are the closed forms stated next to each check."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest

from flitsim.errors import ConfigError

import flitsim
from flitsim import ConfigError, StalledError
from flitsim.taskgraph import IdealNetwork, TaskGraphBuilder, execute

MAX_TIME_PS = 2**63 - 1  # engine::MAX_TIME_PS: every time fits int64


# ---------------------------------------------------------------- 1. errors pickle
@pytest.mark.parametrize("cls", [ConfigError, StalledError])
def test_errors_pickle_and_keep_their_class(cls):
    e = pickle.loads(pickle.dumps(cls("field = 1: at least 2")))
    assert type(e) is cls and str(e) == "field = 1: at least 2"
    assert cls.__module__ == "flitsim._core"


def test_raised_engine_error_pickles():
    with pytest.raises(ConfigError) as ei:
        TaskGraphBuilder(0)
    assert str(pickle.loads(pickle.dumps(ei.value))) == str(ei.value)


# ---------------------------------------------------------------- 2. time never wraps
def test_compute_chain_beyond_time_range_is_an_error_not_a_wrap():
    b = TaskGraphBuilder(1)
    prev = None
    for _ in range(5):
        t = b.add_compute(0, 2**62 - 1)
        if prev is not None:
            b.add_edge(prev, t)
        prev = t
    with pytest.raises(ConfigError, match="simulated time"):
        execute(b.build(), IdealNetwork())


def test_compute_chain_inside_range_is_exact():
    # Two tasks of 2^62-1 ps in series end at exactly 2^63-2 (< 2^63-1).
    b = TaskGraphBuilder(1)
    a = b.add_compute(0, 2**62 - 1)
    c = b.add_compute(0, 2**62 - 1)
    b.add_edge(a, c)
    r = execute(b.build(), IdealNetwork())
    assert r.makespan_ps == 2 * (2**62 - 1)
    assert (r.tasks.end_ps >= 0).all()


def test_huge_transfer_on_slow_ideal_network_is_an_error_not_minus_one():
    # 2^62 B at 1 B/s = 2^62 s = 2^62 * 1e12 ps, far beyond the range.
    b = TaskGraphBuilder(2)
    b.add_transfer(0, 1, 2**62 - 1)
    with pytest.raises(ConfigError, match="simulated time"):
        execute(b.build(), IdealNetwork(0, 1e-9))


def test_tiny_switch_clock_is_refused():
    from flitsim.hardware import fabric_preset

    with pytest.raises(ConfigError, match="clock_ghz"):
        flitsim.transfers(fabric_preset("hgx-h100", switch={"clock_ghz": 1e-300}), [0], [1], 1 << 16)


# ---------------------------------------------------------------- 3. sizes before allocation
def test_sizes_refused_before_allocation():
    from flitsim.hardware import fabric_preset

    with pytest.raises(ConfigError, match="devices"):
        TaskGraphBuilder(2**31)
    with pytest.raises(ConfigError, match="gpus"):
        fabric_preset("hgx-h100").replace(gpus=2**32 - 1)
    # raw _core: the engine checks the same bounds itself
    with pytest.raises(ConfigError, match="devices"):
        flitsim._core.execute_taskgraph(
            {"devices": 2**32 - 1, "compute_streams": 1, "comm_streams": 1,
             **{k: np.zeros(0, dtype=d) for k, d in [("kind", np.uint8), ("device", np.uint32), ("peer", np.uint32),
                                                     ("duration_ps", np.uint64), ("bytes", np.uint64),
                                                     ("collective", np.uint8), ("group", np.uint32),
                                                     ("group_offsets", np.uint32), ("group_members", np.uint32),
                                                     ("edge_src", np.uint32), ("edge_dst", np.uint32),
                                                     ("edge_kind", np.uint8)]}},
            {"kind": "ideal", "devices": 2**32 - 1})


# ---------------------------------------------------------------- 9. absurd work refused up front
def test_absurd_transfer_is_refused_before_simulating():
    # hgx-h100 simulates 256 B packets: 2^40 B = 2^32 packets > the 2^30 budget.
    with pytest.raises(ConfigError, match="simulated packets"):
        flitsim.transfers("hgx-h100", [0], [1], 2**40)
    # the link lab: 1 PiB in 256 B packets = 2^42 packets
    with pytest.raises(ConfigError, match="packets"):
        flitsim.link_transfer("nvlink5", 2**50, 256)


# ---------------------------------------------------------------- 7. Ctrl-C on worker threads
def test_cancel_all_stops_runs_on_worker_threads():
    import concurrent.futures as cf
    import threading
    import time

    with cf.ThreadPoolExecutor(2) as ex:
        # 2^36 B at 256 B per packet: minutes of simulation if not cancelled.
        fs = [ex.submit(flitsim.transfers, "hgx-h100", [0], [1], 2**36) for _ in range(2)]
        time.sleep(0.5)
        t0 = time.perf_counter()
        flitsim.cancel_all()
        for f in fs:
            with pytest.raises(KeyboardInterrupt):
                f.result(timeout=30)
        assert time.perf_counter() - t0 < 10
    # runs started after the cancel are unaffected
    assert flitsim.transfers("hgx-h100", [0], [1], 4096).makespan_ps > 0
    del threading


def test_sigint_stops_simulations_in_a_thread_pool(tmp_path):
    script = textwrap.dedent("""
        import concurrent.futures as cf, os, signal, threading, time
        import flitsim
        ex = cf.ThreadPoolExecutor(2)
        fs = [ex.submit(flitsim.transfers, "hgx-h100", [0], [1], 2**36) for _ in range(2)]
        threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        try:
            cf.wait(fs)
        except KeyboardInterrupt:
            pass
        n = 0
        for f in fs:
            try:
                f.result(timeout=30)
            except KeyboardInterrupt:
                n += 1
        ex.shutdown()
        print("interrupted", n)
    """)
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                       env={**os.environ})
    assert "interrupted 2" in p.stdout, p.stdout + p.stderr


# ---------------------------------------------------------------- 5. sweeps never lose data
_FIXED = {"schedule": "terapipe", "model": "llama-3-8b", "fabric": "hgx-b200", "tokens": 256}


def test_sweep_records_failed_points_and_crosses_processes(tmp_path):
    out = tmp_path / "s.parquet"
    df = flitsim.sweep("flitsim.sweeps:schedule_point", {"stages": [2, 999, 4]}, fixed=_FIXED, workers=2,
                       progress=False, out=out)
    assert list(df.stages) == [2, 999, 4]
    assert df.error[0] == "" and df.error[2] == ""
    assert df.error[1].startswith("ConfigError") and "stages" in df.error[1]
    assert np.isnan(df.makespan_s[1]) and df.makespan_s[0] > 0
    assert pd.read_parquet(out).equals(df)


def test_sweep_keeps_rows_of_other_grids_and_refuses_foreign_files(tmp_path):
    out = tmp_path / "s.parquet"
    a = flitsim.sweep("flitsim.sweeps:schedule_point", {"stages": [1, 2]}, fixed=_FIXED, workers=1,
                      progress=False, out=out)
    b = flitsim.sweep("flitsim.sweeps:schedule_point", {"stages": [4]}, fixed=_FIXED, workers=1,
                      progress=False, out=out)
    assert len(b) == 1
    on_disk = pd.read_parquet(out)
    assert set(on_disk.point_id) == set(a.point_id) | set(b.point_id)
    # a Parquet that is not a sweep's (even with a point_id column) is never overwritten
    foreign = tmp_path / "mine.parquet"
    pd.DataFrame({"point_id": ["x"], "v": [1]}).to_parquet(foreign)
    before = foreign.read_bytes()
    with pytest.raises(ConfigError, match="not one"):
        flitsim.sweep("flitsim.sweeps:schedule_point", {"stages": [1]}, fixed=_FIXED, workers=1,
                      progress=False, out=foreign)
    assert foreign.read_bytes() == before


def _never(**kw):
    raise AssertionError("called")


def test_sweep_checks_out_and_workers_first(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        flitsim.sweep(_never, {"x": [1]}, workers=1, progress=False, out=tmp_path / "nope" / "s.parquet")
    for w in (0, -1, True, 1.5):
        with pytest.raises(ConfigError, match="workers"):
            flitsim.sweep(_never, {"x": [1]}, workers=w, progress=False)


def _double(x):
    return {"y": 2 * x}


def _triple(x):
    return {"y": 3 * x}


def test_sweep_key_includes_the_target(tmp_path):
    out = tmp_path / "s.parquet"
    a = flitsim.sweep(_double, {"x": [1, 2]}, workers=1, progress=False, out=out)
    b = flitsim.sweep(_triple, {"x": [1, 2]}, workers=1, progress=False, out=out)
    assert list(a.y) == [2, 4] and list(b.y) == [3, 6]  # no stale rows from the other target
    assert flitsim.sweeps.point_id({"x": 1}, _double) != flitsim.sweeps.point_id({"x": 1}, _triple)
    assert flitsim.sweeps.point_id({"x": 1}, "m:f", "0.1") != flitsim.sweeps.point_id({"x": 1}, "m:f", "0.2")


def test_sweep_fixed_matches_explicit_points():
    a = flitsim.sweep(_double, {"x": [1, 2]}, workers=1, progress=False)
    b = flitsim.sweep(lambda x, k: {"y": 2 * x, "k": k}, {"x": [1, 2]}, workers=1, progress=False, fixed={"k": 7})
    assert list(b.k) == [7, 7] and list(b.y) == list(a.y)


# ---------------------------------------------------------------- 10. strict types
@pytest.mark.parametrize("bad", [True, "8", 8.0, 1.5])
def test_switch_spec_ports_must_be_an_integer(bad):
    from flitsim.switchlab import SwitchSpec

    with pytest.raises(ConfigError, match="ports"):
        SwitchSpec(ports=bad)


def test_check_int_is_the_one_integer_rule():
    from flitsim.errors import check_int

    assert check_int("n", np.int64(3), 1) == 3
    for bad in (True, "3", 3.0, None, 2**70):
        with pytest.raises(ConfigError, match="n = "):
            check_int("n", bad, 0, 2**64 - 1)


# ---------------------------------------------------------------- 6. flitsim run --out safety
def test_run_out_refuses_user_files_before_simulating(tmp_path, monkeypatch):
    from click.testing import CliRunner

    import flitsim.scenario as sc
    from flitsim.cli import cli

    out = tmp_path / "rep"
    out.mkdir()
    (out / "thesis.tex").write_text("mine")

    def never(*a, **k):
        raise AssertionError("simulated before checking --out")

    monkeypatch.setattr(sc, "run_scenario", never)
    scenario = os.path.join(os.path.dirname(__file__), "..", "examples", "tiny.toml")
    r = CliRunner().invoke(cli, ["run", scenario, "--out", str(out)])
    assert r.exit_code == 2 and "--force" in r.output
    assert (out / "thesis.tex").read_text() == "mine"
    (tmp_path / "afile").write_text("x")
    r = CliRunner().invoke(cli, ["run", scenario, "--out", str(tmp_path / "afile")])
    assert r.exit_code == 2 and "file" in r.output
    assert not [p for p in tmp_path.iterdir() if "flitsim-tmp" in p.name]  # no temp folder left behind


def test_report_folder_is_replaced_whole_or_not_at_all(tmp_path):
    from flitsim.cli.run_cmd import check_out_dir, write_atomically

    out = tmp_path / "rep"
    out.mkdir()
    (out / "old_trace.json").write_text("old")
    with pytest.raises(ConfigError, match="earlier flitsim report"):  # --force never replaces the user's own files
        check_out_dir(str(out), force=True)
    assert [p.name for p in out.iterdir()] == ["old_trace.json"]
    (out / "results.json").write_text("{}")  # now it is an earlier report

    def failing(d):
        (d / "summary.json").write_text('{"trunc')
        raise OSError(28, "No space left on device")

    tmp = check_out_dir(str(out), force=True)
    with pytest.raises(OSError):
        write_atomically(str(out), tmp, failing)
    assert sorted(p.name for p in out.iterdir()) == ["old_trace.json", "results.json"]  # untouched
    assert [p.name for p in tmp_path.iterdir()] == ["rep"]  # temp folder removed

    def ok(d):
        (d / "summary.json").write_text("{}")
        return {"summary": str(d / "summary.json")}

    tmp = check_out_dir(str(out), force=True)
    paths = write_atomically(str(out), tmp, ok)
    assert [p.name for p in out.iterdir()] == ["summary.json"]  # the old run's files are gone
    assert paths == {"summary": str(out / "summary.json")}


# ---------------------------------------------------------------- one size parser (issue 19)
@pytest.mark.parametrize("text,expected", [("4096", 4096), ("64K", 65536), ("64KB", 65536), ("64KiB", 65536),
                                           ("64kb", 65536), ("8G", 8 << 30), ("1.5K", 1536), (" 2 M ", 2 << 20)])
def test_one_size_parser_binary_prefixes(text, expected):
    from flitsim.cli._common import parse_bytes as cli_parse
    from flitsim.collectives import parse_size
    from flitsim.sizes import parse_bytes

    # nccl-tests' parsesize: K/M/G multiply by 1024 (src/common.cu)
    assert parse_bytes(text) == cli_parse(text) == parse_size(text) == expected


@pytest.mark.parametrize("bad", ["1.5", "0.1K", "-1", "64X", "", "KiB", True, 1.5, "1e3"])
def test_size_parser_refuses_fractions_and_junk(bad):
    from flitsim.sizes import parse_bytes

    with pytest.raises(ConfigError, match="size"):
        parse_bytes(bad)


def test_link_cli_refuses_fractional_bytes():
    from click.testing import CliRunner

    from flitsim.cli import cli

    r = CliRunner().invoke(cli, ["link", "--bytes", "1.5"])
    assert r.exit_code == 2 and "whole number of bytes" in r.output


# ---------------------------------------------------------------- 8. errors name the field
def test_raw_core_spec_errors_name_the_path():
    import copy

    from flitsim.hardware import fabric_preset

    d = fabric_preset("hgx-h100").core_dict()
    e = copy.deepcopy(d)
    e["links"][0]["vcs"] = 2**70
    with pytest.raises(ConfigError, match=r"fabric\.links\[0\]\.vcs"):
        flitsim._core.fabric_check(e)
    e = copy.deepcopy(d)
    e["wires"][3]["gpu"] = "8"
    with pytest.raises(ConfigError, match=r"fabric\.wires\[3\]\.gpu"):
        flitsim._core.fabric_check(e)


def test_schedule_errors_blame_the_input():
    import flitsim.schedules as S

    with pytest.raises(ConfigError, match="prefill tokens"):
        S.build("terapipe", "llama-3-8b", 2**40, stages=2)
    with pytest.raises(ConfigError, match="summing to the 1024"):
        S.build("terapipe", "llama-3-8b", 1024, stages=2, slices=[500, 500])
    with pytest.raises(ConfigError, match="summing to 1024"):
        S.build("terapipe", "llama-3-8b", 1024, stages=2, slicing="given", slice_tokens=[500, 500])
    with pytest.raises(ConfigError, match="bogus"):
        S.build("terapipe", "llama-3-8b", 1024, stages=2, bogus=1)
    with pytest.raises(ConfigError, match="degree"):
        S.build("tensor_parallel", "llama-3-8b", 1024, degree=10**6)
    with pytest.raises(ConfigError, match="ledger row"):
        flitsim.ledger("gb200-nvl72").row("rack", "nope")


def test_task_graph_size_is_bounded():
    from flitsim.limits import MAX_TASKS

    b = TaskGraphBuilder(1)
    b._kind.extend([0] * MAX_TASKS)  # as if MAX_TASKS tasks were added
    with pytest.raises(ConfigError, match="tasks"):
        b.add_compute(0, 1)


def test_decode_refuses_requests_with_zero_output_tokens():
    import flitsim.schedules as S
    from flitsim.workloads import LlmWorkload

    req = pd.DataFrame({"arrival_s": [0.0, 0.1], "input_tokens": [16, 16], "output_tokens": [4, 0]})
    wl = LlmWorkload(req, tokenizer="llama-3")
    with pytest.raises(ConfigError, match=r"output_tokens\[1\]"):
        S.build("decode", "llama-3-8b", wl, stages=1)


def test_values_beyond_u64_name_the_field():
    with pytest.raises(ConfigError, match=r"nbytes\[1\] = 1180591620717411303424"):
        flitsim.transfers("hgx-h100", [0, 0], [1, 1], [1, 2**70])
    with pytest.raises(ConfigError, match="total_bytes"):
        flitsim.link_transfer("nvlink5", 2**64)
    with pytest.raises(ConfigError, match="duration_ps"):
        TaskGraphBuilder(1).add_compute(0, 2**64)


def test_raw_core_refuses_a_bool_for_a_number():
    import copy

    from flitsim.hardware import fabric_preset

    d = fabric_preset("hgx-h100").core_dict()
    e = copy.deepcopy(d)
    e["links"][0]["vcs"] = True
    with pytest.raises(ConfigError, match=r"fabric\.links\[0\]\.vcs"):
        flitsim._core.fabric_check(e)
    e = copy.deepcopy(d)
    e["switch"]["nvls"] = True  # a real bool field stays fine
    flitsim._core.fabric_check(e)


def test_one_byte_per_second_injection_is_a_range_error_not_a_wrap():
    # 1 GiB at 1 B/s = 1.07e21 ps > 2^63-1 ps.
    from flitsim.hardware import fabric_preset

    f = fabric_preset("hgx-h100")
    f = f.replace(gpu=f.gpu.replace(injection_bytes_per_s=1))
    with pytest.raises(ConfigError, match="simulated time"):
        flitsim.transfers(f, [0], [1], 1 << 30)
