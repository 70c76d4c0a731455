"""Issue 19 point 1: output that survives a pipe. CliRunner's stdout is not
a terminal, as in ``flitsim ... | cat`` or a CI log: tables come out as plain
aligned text at full width, never cut; ``--format text|markdown|csv|json``
works on every command that prints a table; progress is periodic plain lines."""

from __future__ import annotations

import csv
import io
import json

import pytest
from click.testing import CliRunner

from flitsim.cli import cli

# (command, a cell that must appear whole)
COMMANDS = [
    (["ledger", "hgx-h100"], "3,600.000"),
    (["link", "nvlink4", "--bytes", "64KB"], "65,536 B"),
    (["nccl-tests", "all_reduce", "-b", "64K", "-e", "256K", "-g", "4"], "262144"),
    (["workload", "--n", "50"], "azure-conv-2023 input_tokens"),
    (["ber", "--ber", "0,1e-3", "--bytes", "64K"], "1.00e-03"),
    (["profile", "show"], "m=8192 n=3456 k=1152"),
    (["switch", "--ports", "4", "--load", "0.2", "--cycles", "500", "--warmup", "100"], "0.2"),
    (["presets"], "gb200-nvl72"),
]


def _run(args):
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 0, r.output
    return r.output


@pytest.mark.parametrize("args,cell", COMMANDS, ids=[c[0][0] for c in COMMANDS])
def test_piped_output_is_plain_full_width_text(args, cell):
    out = _run(args)
    assert "…" not in out and "\r" not in out  # nothing cut, no redraws
    assert not any(ch in out for ch in "┃━┏│─")  # no box drawing outside a terminal
    assert cell in out
    # a plain table: a header line followed by a dashes line
    lines = out.splitlines()
    assert any(set(ln.replace(" ", "")) == {"-"} for ln in lines)


@pytest.mark.parametrize("args,cell", COMMANDS, ids=[c[0][0] for c in COMMANDS])
def test_every_table_command_takes_format(args, cell):
    md = _run(args + ["--format", "markdown"])
    table = [ln for ln in md.splitlines() if ln.startswith("|")]
    assert len(table) >= 3 and set(table[1].replace("|", "").replace(":", "")) == {"-"}
    ncol = table[0].count("|")
    assert all(ln.replace("\\|", "").count("|") == ncol for ln in table if not ln.startswith("###"))
    text = _run(args + ["--format", "csv"])
    assert cell in text
    blocks = [b for b in text.split("\n\n") if b.strip()]
    for b in blocks:  # every table: a header, rows of the same width
        rows = [r for r in csv.reader(io.StringIO(b)) if r and not r[0].startswith("#")]
        if rows:
            assert len(rows) >= 2 and len({len(r) for r in rows}) == 1, b
    json.loads(_run(args + ["--format", "json"]))


def test_unknown_format_is_refused_before_anything_runs():
    r = CliRunner().invoke(cli, ["nccl-tests", "all_reduce", "--format", "yaml"])
    assert r.exit_code == 2 and "yaml" in r.output and "markdown" in r.output
    r = CliRunner().invoke(cli, ["ledger", "--format", "html"])
    assert r.exit_code == 2 and "'html' is not one of" in r.output


def test_text_table_keeps_long_cells():
    from flitsim.cli._table import Table

    t = Table(title="x")
    t.add_column("name")
    t.add_column("value", justify="right")
    long = "a" * 300
    t.add_row(long, "1,436,123.25")
    text = t.to_text()
    assert long in text and "1,436,123.25" in text
    head, dashes, row = text.splitlines()[1:]
    assert len(dashes) == len(row)  # aligned, full width


def test_progress_off_a_terminal_is_periodic_lines():
    from flitsim._progress import LineProgress, progress_bar

    buf = io.StringIO()  # not a terminal
    bar = progress_bar(1000, "simulating", "run", buf)
    assert isinstance(bar, LineProgress)
    for _ in range(1000):
        bar.update(1)
    bar.close()
    text = buf.getvalue()
    assert "\r" not in text
    lines = text.splitlines()
    # the first line, then at most one per interval (the loop takes far less than 10 s), then the last
    assert 2 <= len(lines) <= 3
    assert lines[0].startswith("simulating: 0/1000 run") and lines[-1].startswith("simulating: 1000/1000 run (100%)")


def test_scenario_progress_in_a_log(tiny_progress):
    # what `flitsim run` writes to stderr when it is a file or a CI log
    assert "\r" not in tiny_progress
    lines = [ln for ln in tiny_progress.splitlines() if ln.startswith("simulating:")]
    assert 2 <= len(lines) and "(100%)" in lines[-1]


def test_unwritable_figure_path_fails_before_simulating(tmp_path):
    base = ["switch", "--ports", "4", "--load", "0.2", "--cycles", "200", "--warmup", "10"]
    for bad, why in ((tmp_path / "missing" / "c.png", "does not exist"), (tmp_path, "is a directory"),
                     (tmp_path / "c.xyz", "extension")):
        r = CliRunner().invoke(cli, base + ["--plot", str(bad)])
        assert r.exit_code == 2 and why in r.output, r.output
    # a file in the way of the folder
    (tmp_path / "f").write_text("")
    r = CliRunner().invoke(cli, base + ["--plot", str(tmp_path / "f" / "c.png")])
    assert r.exit_code == 2 and "plot" in r.output


def _commands(group, prefix=()):
    import click

    for name, cmd in group.commands.items():
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, prefix + (name,))
        else:
            yield prefix + (name,), cmd


def test_every_command_with_json_output_takes_format():
    # a command that prints a table (it has --json for scripts) must take --format too
    missing = []
    for path, cmd in _commands(cli):
        opts = {o for p in cmd.params for o in getattr(p, "opts", [])}
        if "--json" in opts and "--format" not in opts:
            missing.append(" ".join(path))
    assert not missing, f"add format_option() (flitsim.cli._common) and print with flitsim.cli._table.Printer: {missing}"
