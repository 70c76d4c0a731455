"""``flitsim sweep sweep.toml --workers N``: run a sweep file, stream to Parquet."""

from __future__ import annotations

import click

from flitsim.cli._common import echo_json, friendly_errors, format_option


@click.command("sweep")
@click.argument("spec", type=click.Path(exists=True, dir_okay=False))
@click.option("--workers", "-j", type=click.IntRange(min=1), default=1, show_default=True, help="local processes")
@click.option("--out", default=None, help="Parquet output (default: the file's `out`)")
@click.option("--json", "as_json", is_flag=True, help="print the results as JSON")
@format_option()
@friendly_errors
def sweep_cmd(spec: str, workers: int, out: str | None, as_json: bool, fmt: str | None) -> None:
    """Run every point of a sweep TOML file ([grid] lists, [fixed] arguments,
    target = "module:function"), resuming from the Parquet output."""
    from flitsim.cli._table import Printer, Table

    from flitsim.sweeps import load_sweep, sweep

    s = load_sweep(spec)
    df = sweep(s.target, s.grid, None, out=out or s.out, workers=workers, progress=not as_json and fmt != "json", fixed=s.fixed)
    if as_json or fmt == "json":
        echo_json(df.to_dict(orient="records"))
        return
    failed = int((df["error"] != "").sum()) if "error" in df.columns else 0
    t = Table(title=f"sweep: {len(df)} points ({failed} failed) -> {out or s.out}")
    keys = list(s.grid) + ["makespan_s", "stage_time_cv", "fill_drain_share", "bubble_fraction_mean", "error"]
    cols = [c for c in keys if c in df.columns] or [c for c in df.columns if c != "point_id"][:10]
    for c in cols:
        t.add_column(c)
    for row in df[cols].itertuples(index=False):
        t.add_row(*[f"{v:.4g}" if isinstance(v, float) else str(v) for v in row])
    Printer(fmt).print(t)
