"""``flitsim nccl-tests``: nccl-tests-style sweeps of a collective on a fabric."""

from __future__ import annotations

import click
from rich.console import Console
from rich.table import Table

from flitsim.cli._common import echo_json, friendly_errors
from flitsim.collectives import OPS, nccl_tests


@click.command("nccl-tests")
@click.argument("op", type=click.Choice(list(OPS) + ["alltoall", "allreduce", "allgather", "reducescatter"]))
@click.option("-g", "--fabric", "fabric", default="hgx-h100", show_default=True,
              help="Fabric preset (here -g names the fabric, not GPUs per thread).")
@click.option("-n", "--ngpus", type=int, default=None, help="Group size (default: every GPU of the fabric).")
@click.option("-b", "--minbytes", default="8", show_default=True, help="Smallest size (8, 64K, 8M, 8G).")
@click.option("-e", "--maxbytes", default="8G", show_default=True, help="Largest size.")
@click.option("-f", "--stepfactor", type=int, default=2, show_default=True, help="Size multiplier between points.")
@click.option("-a", "--algorithm", default="auto", show_default=True, help="auto, ring, tree, direct, nvls.")
@click.option("-p", "--protocol", default="auto", show_default=True, help="auto, simple, ll128, ll.")
@click.option("-d", "--dtype", default="float", show_default=True, help="Element type.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON rows instead of the table.")
@friendly_errors
def nccl_cmd(op: str, fabric: str, ngpus: int | None, minbytes: str, maxbytes: str, stepfactor: int,
             algorithm: str, protocol: str, dtype: str, as_json: bool) -> None:
    """Sweep OP (all_reduce, all_gather, ...) over sizes like nccl-tests'
    ``OP_perf -b 8 -e 8G -f 2`` and print size, count, type, redop, time,
    algbw and busbw (nccl-tests' busbw factors)."""
    df = nccl_tests(fabric, op, minbytes=minbytes, maxbytes=maxbytes, stepfactor=stepfactor, ngpus=ngpus,
                    dtype=dtype, algorithm=algorithm, protocol=protocol)
    if as_json:
        echo_json(df.to_dict(orient="records"))
        return
    t = Table(title=f"{op} on {fabric} (simulated; nccl-tests columns, out-of-place)")
    for c in ("size", "count", "type", "redop", "time (us)", "algbw (GB/s)", "busbw (GB/s)", "algo", "proto"):
        t.add_column(c, justify="left" if c in ("type", "redop", "algo", "proto") else "right", no_wrap=True)
    for r in df.itertuples():
        t.add_row(f"{r.size}", f"{r.count}", r.type, r.redop, f"{r.time_us:.2f}", f"{r.algbw_GBps:.2f}",
                  f"{r.busbw_GBps:.2f}", r.algorithm, r.protocol)
    Console().print(t)
