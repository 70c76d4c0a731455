"""``flitsim validate``: every comparison with theory and measurement, rerun."""

from __future__ import annotations

import sys

import click

from flitsim.cli._common import echo_json, friendly_errors


@click.command("validate")
@click.option("--tag", "tags", multiple=True, help="theory | calibration | transfer (repeatable).")
@click.option("--case", "case_ids", multiple=True,
              help="A case id, or an area prefix ending in '.' or '*' (repeatable); --list prints them.")
@click.option("--area", "areas", multiple=True, help="An area (switch, ledger, collectives, ...; repeatable).")
@click.option("--fabric", "fabric", default=None,
              help="Run every fabric case on this fabric (preset name or fabric TOML) instead of its own.")
@click.option("--calibration", "calibration", default=None, type=click.Path(dir_okay=False),
              help="A `flitsim calibrate nccl-tests` parameter file; applies on the fabric it was fitted on.")
@click.option("--fast", is_flag=True, help="Only the CI subset (under 60 s on 2 cores).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
@click.option("--format", "out_format", type=click.Choice(["table", "markdown", "json"]), default="table",
              show_default=True, help="Output format.")
@click.option("--list", "list_only", is_flag=True, help="List the selected cases without running them.")
@click.option("--write-docs", is_flag=True,
              help="Run every case and rewrite docs/validation.json and the marked sections of README.md, "
                   "docs/validation.md, docs/collectives.md and docs/compute.md.")
@click.option("--check-docs", is_flag=True, help="Exit 1 if the generated docs are stale (no simulation).")
@friendly_errors
def validate_cmd(tags: tuple[str, ...], case_ids: tuple[str, ...], areas: tuple[str, ...], fabric: str | None,
                 calibration: str | None, fast: bool, as_json: bool, out_format: str, list_only: bool,
                 write_docs: bool, check_docs: bool) -> None:
    """Run the validation cases: measured vs simulated, error, tolerance and
    verdict per case; MAPE per tag and system, transfer error (data no
    parameter was fitted on) apart from calibration error. Exit status 1 if
    a case fails (known misses and skipped cases do not fail a run)."""
    from flitsim.validation import docs, format as fmt
    from flitsim.validation.registry import select
    from flitsim.validation.runner import run

    if check_docs:
        probs = docs.check()
        for p in probs:
            click.echo(p)
        click.echo("docs are current" if not probs else f"{len(probs)} stale")
        sys.exit(1 if probs else 0)
    if list_only:
        if fabric is not None:  # a typo in --fabric listed the cases as if it were fine
            from flitsim.hardware.fabric import as_fabric

            as_fabric(fabric)
        click.echo(fmt.case_list(select(case_ids, tags, areas, fast)))
        return
    fmt_ = "json" if as_json else out_format
    progress = None
    if fmt_ == "table" and sys.stderr.isatty():
        def progress(o):  # type: ignore[no-untyped-def]
            click.echo(f"  {o.case.id}: {o.verdict} ({o.wall_s:.1f} s)", err=True)
    rep = run(case_ids, tags, areas=areas, fabric=fabric, calibration=calibration, fast=fast, progress=progress)
    if write_docs:
        changed = docs.write(rep)
        click.echo("rewrote: " + (", ".join(changed) if changed else "nothing (already current)"), err=True)
    if fmt_ == "json":
        echo_json(fmt.to_jsonable(rep))
    elif fmt_ == "markdown":
        click.echo(fmt.report_markdown(rep), nl=False)
    else:
        click.echo(fmt.report_text(rep), nl=False)
    sys.exit(0 if rep.ok else 1)
