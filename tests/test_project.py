"""Project-level invariants: README and CI agree, stubs match the extension,
the CLI works as documented."""

import json
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def readme_commands():
    text = (ROOT / "README.md").read_text()
    return re.findall(r"```(?:bash|sh)\n(.*?)```", text, flags=re.S)


def test_ci_runs_the_readme_test_command():
    blocks = readme_commands()
    test_cmds = [b.strip() for b in blocks if "pytest" in b]
    assert test_cmds, "README must show the test command in a bash block"
    ci = (ROOT / ".ci" / "run").read_text()
    assert test_cmds[0] in ci


@pytest.mark.skipif(sys.version_info < (3, 10), reason="stubtest")
def test_type_stubs_match_extension():
    r = subprocess.run([sys.executable, "-m", "mypy.stubtest", "flitsim._core"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def run_cli(*args):
    return subprocess.run([sys.executable, "-c", "from flitsim.cli import main; main()", *args],
                          capture_output=True, text=True)


def test_cli_help_and_json():
    assert run_cli("--help").returncode == 0
    r = run_cli("ledger", "gb200-nvl72", "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["rows"]
    gpu = next(x for x in rows if x["scope"] == "gpu" and x["stage"] == "payload")
    assert gpu["bidirectional_GBps"] == pytest.approx(1800.0)
    r = run_cli("link", "nvlink4", "--bytes", "1MiB", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["throughput_GBps"] == pytest.approx(25 * 256 / 272, rel=5e-3)


def test_cli_bad_input_is_a_clean_error():
    r = run_cli("ledger", "nope")
    assert r.returncode == 2 and "ConfigError" in r.stderr and "Traceback" not in r.stderr
    r = run_cli("link", "nvlink5", "--bytes", "lots")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    r = run_cli("link", "nvlink5", "--credits", "2")
    assert r.returncode == 2 and "credits_per_vc_flits" in r.stderr
