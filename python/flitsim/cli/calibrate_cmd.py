"""``flitsim calibrate nccl-tests LOG...``: fit the non-public collective
parameters of a fabric to measured nccl-tests logs and write a parameter file."""

from __future__ import annotations

import click
from flitsim.cli._table import Printer, Table

from flitsim.cli._common import check_out_dir, echo_json, friendly_errors, format_option


@click.group("calibrate")
def calibrate_cmd() -> None:
    """Fit simulator parameters to measurements."""


@calibrate_cmd.command("nccl-tests")
@click.argument("logs", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("-F", "--fabric", default="hgx-h100", show_default=True, help="Fabric preset the logs come from.")
@click.option("--op", default=None, help="Collective, when the file names do not say (all_reduce_perf.log ...).")
@click.option("--placement", type=click.Choice(["oop", "ip", "best"]), default="oop", show_default=True,
              help="Which time columns to fit: out-of-place, in-place, or the faster.")
@click.option("--fit", "fit_names", default="host_launch_ps,nvls_base_ps,nvls_efficiency", show_default=True,
              help="Comma-separated parameters to fit (non-public ones only).")
@click.option("--max-bytes", default="1G", show_default=True, help="Leave out larger rows (simulation cost).")
@click.option("-o", "--out", "out", default=None, type=click.Path(dir_okay=False),
              help="Write the parameter file here (TOML).")
@click.option("--json", "as_json", is_flag=True, help="Print parameters and residuals as JSON.")
@format_option()
@friendly_errors
def calibrate_nccl(logs: tuple[str, ...], fabric: str, op: str | None, placement: str, fit_names: str,
                   max_bytes: str, out: str | None, as_json: bool, fmt: str | None) -> None:
    """Read nccl-tests text output (both placement columns, #wrong, the
    average line), fit the non-public parameters on FABRIC, print residuals
    per size and write a parameter file for collective(), nccl_tests(),
    FabricNetwork and scenario files."""
    from flitsim.calibrate import fit
    from flitsim.collectives import parse_size

    if out:
        from flitsim.calibrate import check_params_out

        check_out_dir("out", out)  # before minutes of fitting
        check_params_out(out, logs)  # never one of the logs, nor another file of the user's
    names = [x.strip() for x in fit_names.split(",") if x.strip()]
    cal = fit(list(logs), fabric, op=op, placement=placement, fit_params=names, max_bytes=parse_size(max_bytes),
              progress=None if as_json or fmt == "json" else (lambda m: click.echo(f"# {m}", err=True)))
    if out:
        cal.write(out)
    if as_json or fmt == "json":
        echo_json({"fabric": cal.fabric, "params": cal.params, "mape_pct": cal.mape_pct, "notes": list(cal.notes),
                   "residuals": cal.residuals})
        return
    t = Table(title=f"nccl-tests logs vs flitsim on {cal.fabric} (MAPE {cal.mape_pct:.1f} % over fitted rows)")
    for c in ("log:line", "size", "measured (us)", "simulated (us)", "error", "algo/proto"):
        t.add_column(c, justify="left" if c in ("log:line", "algo/proto") else "right", no_wrap=True)
    for r in cal.residuals:
        t.add_row(f"{r['log']}:{r['line']}", str(r["size"]), f"{r['measured_us']:.2f}", f"{r['simulated_us']:.2f}",
                  f"{r['error_pct']:+.1f} %" + ("" if r["used"] else " (not fitted)"),
                  f"{r['algorithm']}/{r['protocol']}")
    Printer(fmt).print(t)
    for n in cal.notes:
        Printer(fmt).print(n)
    Printer(fmt).print("fitted: " + ", ".join(f"{k} = {v:.6g}" for k, v in cal.params.items())
                    + (f"; written to {out}" if out else ""))
