"""``flitsim plan MODEL WORKLOAD --fabric F --gpus N``: enumerate the pure and
hybrid parallel configurations that fit in memory, prune the dominated ones,
simulate the rest on the fabric and print them ranked (:mod:`flitsim.planner`)."""

from __future__ import annotations

import math

import click

from flitsim.cli._common import echo_json, format_option, friendly_errors
from flitsim.cli._table import Printer, Table, resolve_format


def _f(v: float, fmt: str) -> str:
    return "" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, fmt)


@click.command("plan")
@click.argument("model")
@click.argument("workload")
@click.option("--fabric", "-F", required=True, help="Fabric preset name or TOML file.")
@click.option("--gpus", "-g", type=int, default=None, help="GPUs to use (default: all of the fabric's).")
@click.option("--steps", type=int, default=None, help="Denoising steps (DiT; default the workload's 50).")
@click.option("--fidelity", type=click.Choice(["auto", "flow", "packet"]), default="auto", show_default=True,
              help="Fabric fidelity of the simulations (auto: flow level where validated against packet level).")
@click.option("--prune-factor", type=float, default=1.0, show_default=True,
              help="Simulate every configuration whose compute-only bound is below best x this factor.")
@click.option("-j", "--jobs", type=int, default=1, show_default=True,
              help="Worker processes for building the configurations (same result at any count).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@format_option()
@friendly_errors
def plan_cmd(model: str, workload: str, fabric: str, gpus: int | None, steps: int | None, fidelity: str,
             prune_factor: float, jobs: int, as_json: bool, fmt: str | None) -> None:
    """Rank parallel configurations of MODEL for WORKLOAD (a DiT resolution such
    as 1024 or 720x1280, or an LLM prefill length such as 8192) on N GPUs of a
    fabric: memory per GPU, latency and the scorecard's structure figures."""
    from flitsim.hardware.fabric import as_fabric
    from flitsim.planner import plan

    fab = as_fabric(fabric)
    r = plan(model, workload, fabric=fab, gpus=gpus, fidelity=fidelity, prune_factor=prune_factor, steps=steps,
             jobs=jobs)
    fmt = resolve_format(fmt, as_json)
    if fmt == "json":
        echo_json({"meta": r.meta, "enumerated": r.enumerated, "infeasible": r.infeasible, "pruned": r.pruned,
                   "simulated": r.simulated, "wall_s": r.wall_s,
                   "configurations": r.table.reset_index().to_dict(orient="records")})
        return
    m = r.meta
    t = Table(title=f"{m['model']} on {m['gpus']} GPUs of {m['fabric']} (fidelity {m['fidelity']})")
    for c in ("rank", "config", "schedule", "status", "latency s", "bound s", "speedup", "mem GB/GPU",
              "bubble", "stage CV", "fill/drain", "FLOP/B", "comm GB"):
        t.add_column(c, justify="left" if c in ("config", "schedule", "status") else "right")
    for rank, row in r.table.iterrows():
        status = row.status + (f" ({row.memory_broken_by})" if row.memory_broken_by else "")
        t.add_row(str(rank), row.config, row.schedule, status, _f(row.latency_s, ".4g"), _f(row.lower_bound_s, ".4g"),
                  _f(row.speedup, ".2f"), _f(row.memory_peak_GB, ".2f"), _f(row.bubble_fraction, ".1%"),
                  _f(row.stage_time_cv, ".3f"), _f(row.fill_drain_share, ".1%"), _f(row.flop_per_comm_byte, ",.0f"),
                  _f(row.comm_GB, ".2f"))
    out = Printer(fmt)
    out.print(t)
    out.print(r.summary_line())
    refused = r.table[r.table.status == "infeasible"]
    for rank, row in refused.iterrows():  # why each was refused (only the JSON had it)
        out.print(f"infeasible {rank} {row.config}: {row.note}")
    out.print("pruned: compute-only lower bound (zero-cost network) >= the best simulated latency; "
               "oom: the static memory footprint exceeds the GPU's HBM")
