"""``flitsim presets``: every fabric, link, GPU, model and workload preset with its sources."""

from __future__ import annotations

import click

from flitsim.cli._common import echo_json, format_option, friendly_errors
from flitsim.cli._table import Printer, Table

KINDS = ("fabric", "link", "gpu", "model", "workload")


@click.command("presets")
@click.argument("kind", required=False, type=click.Choice(KINDS))
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@format_option()
@friendly_errors
def presets_cmd(kind: str | None, as_json: bool, fmt: str | None) -> None:
    """List the shipped presets (optionally only one KIND) with what each is
    and the public sources of its numbers (flitsim.catalog.preset_catalog)."""
    from flitsim.catalog import preset_catalog

    df = preset_catalog()
    if kind:
        df = df[df.kind == kind]
    if as_json or fmt == "json":
        echo_json(df.to_dict(orient="records"))
        return
    t = Table(title=f"flitsim presets ({len(df)})")
    for c in df.columns:
        t.add_column(c)
    for r in df.itertuples(index=False):
        t.add_row(*r)
    Printer(fmt).print(t)
