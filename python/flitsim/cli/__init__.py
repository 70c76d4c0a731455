"""The ``flitsim`` command: a thin shell over the Python API. Every subcommand
prints a human table by default (boxed on a terminal, plain aligned text when
piped), ``--format text|markdown|csv|json`` to choose, and JSON with ``--json``."""

from __future__ import annotations

import click

from flitsim import __version__
from flitsim.cli.calibrate_cmd import calibrate_cmd
from flitsim.cli.ber_cmd import ber_cmd
from flitsim.cli.ledger_cmd import ledger_cmd
from flitsim.cli.link_cmd import link_cmd
from flitsim.cli.nccl_cmd import nccl_cmd
from flitsim.cli.presets_cmd import presets_cmd
from flitsim.cli.profile_cmd import profile_cmd
from flitsim.cli.workload_cmd import workload_cmd
from flitsim.cli.switch_cmd import switch_cmd
from flitsim.cli.run_cmd import run_cmd
from flitsim.cli.route_cmd import route_cmd
from flitsim.cli.sweep_cmd import sweep_cmd
from flitsim.cli.serve_cmd import serve_cmd
from flitsim.cli.plan_cmd import plan_cmd
from flitsim.cli.validate_cmd import validate_cmd


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="flitsim")
def cli() -> None:
    """flitsim: GPU fabrics (NVLink/NVSwitch, PCIe, Ethernet/InfiniBand) simulated
    at packet and flow level, driven by inference workloads and parallel schedules."""


cli.add_command(ledger_cmd)
cli.add_command(link_cmd)
cli.add_command(workload_cmd)
cli.add_command(switch_cmd)
cli.add_command(nccl_cmd)
cli.add_command(run_cmd)
cli.add_command(sweep_cmd)
cli.add_command(calibrate_cmd)
cli.add_command(profile_cmd)
cli.add_command(ber_cmd)
cli.add_command(serve_cmd)
cli.add_command(presets_cmd)
cli.add_command(plan_cmd)
cli.add_command(route_cmd)
cli.add_command(validate_cmd)


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="flitsim")
