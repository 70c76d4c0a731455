"""``flitsim nccl-tests``: nccl-tests-style sweeps of a collective on a fabric.

Flags follow nccl-tests' own (``all_reduce_perf -b 8 -e 8G -f 2 -g 8``) with
their meaning; the fabric is ``--fabric/-F``. Flags that control a real run's
mechanics (iterations, warm-up, checking, threads) are accepted and ignored
with a note: a simulation has one deterministic answer.
"""

from __future__ import annotations

import os

import click

from flitsim.cli._common import echo_json, friendly_errors
from flitsim.cli._table import FORMATS, Printer, Table
from flitsim.collectives import ALGORITHMS, OPS, PROTOCOLS, nccl_tests, parse_size
from flitsim.errors import ConfigError

_ALIASES = ["alltoall", "allreduce", "allgather", "reducescatter"]
_REDOPS = ("sum", "prod", "max", "min", "avg")  # nccl-tests' order for -o all


@click.command("nccl-tests")
@click.argument("op", type=click.Choice(list(OPS) + _ALIASES))
@click.option("-F", "--fabric", "fabric", default="hgx-h100", show_default=True, help="Fabric preset name or fabric TOML file.")
@click.option("-g", "--ngpus", type=int, default=None, help="GPUs in the group (default: every GPU of the fabric).")
@click.option("-b", "--minbytes", default="8", show_default=True, help="Smallest size (8, 64K, 8M, 8G).")
@click.option("-e", "--maxbytes", default="8G", show_default=True, help="Largest size.")
@click.option("-f", "--stepfactor", type=int, default=2, show_default=True, help="Size multiplier between points.")
@click.option("-d", "--datatype", "dtype", default="float", show_default=True,
              help="Element type (nccl-tests names: int8, uint8, int32, uint32, int64, uint64, half, float, double, "
                   "bfloat16, f8e4m3, f8e5m2; also float16, float32).")
@click.option("-o", "--op", "redop", default="sum", show_default=True,
              help="Reduction operation: sum, prod, min, max, avg, or all (each in turn, as nccl-tests does; "
                   "they have the same cost in the simulator).")
@click.option("-r", "--root", type=int, default=0, show_default=True, help="Root rank (broadcast, reduce).")
@click.option("-n", "--iters", type=int, default=None, help="Accepted and ignored (one deterministic answer).")
@click.option("-w", "--warmup_iters", type=int, default=None, help="Accepted and ignored.")
@click.option("-c", "--check", type=int, default=None, help="Accepted and ignored (#wrong is printed as 0).")
@click.option("-t", "--nthreads", type=int, default=None, help="Accepted and ignored.")
@click.option("--algorithm", default=None, help="auto, ring, tree, direct, nvls (default: $NCCL_ALGO or auto).")
@click.option("--protocol", default=None, help="auto, simple, ll128, ll (default: $NCCL_PROTO or auto).")
@click.option("--params", "params", default=None, type=click.Path(dir_okay=False),
              help="A `flitsim calibrate` parameter file.")
@click.option("--format", "fmt", type=click.Choice(["table", *FORMATS, "nccl-tests"]), default=None,
              help="text, markdown, csv, json, or nccl-tests (the text layout nccl-tests prints); default: a boxed "
                   "table on a terminal, plain aligned text when piped (table = that default).")
@click.option("--json", "as_json", is_flag=True, help="Same as --format json.")
@friendly_errors
def nccl_cmd(op: str, fabric: str, ngpus: int | None, minbytes: str, maxbytes: str, stepfactor: int, dtype: str,
             redop: str, root: int, iters: int | None, warmup_iters: int | None, check: int | None,
             nthreads: int | None, algorithm: str | None, protocol: str | None, params: str | None, fmt: str | None,
             as_json: bool) -> None:
    """Sweep OP (all_reduce, all_gather, ...) over sizes like nccl-tests'
    ``OP_perf -b 8 -e 8G -f 2`` and print size, count, type, redop, time,
    algbw and busbw (nccl-tests' busbw factors)."""
    if as_json:
        fmt = "json"
    if fmt == "table":
        fmt = None
    if redop not in ("sum", "prod", "min", "max", "avg", "all"):
        raise click.BadParameter(f"{redop!r}: expected sum, prod, min, max, avg or all", param_hint="-o/--op")
    ignored = [f for f, v in (("-n", iters), ("-w", warmup_iters), ("-c", check), ("-t", nthreads)) if v is not None]
    if ignored and fmt != "json":
        click.echo(f"# note: {' '.join(ignored)} accepted and ignored: the simulation has one deterministic answer",
                   err=True)
    algo = algorithm or os.environ.get("NCCL_ALGO", "auto").lower()
    proto = protocol or os.environ.get("NCCL_PROTO", "auto").lower()
    for var, flag, val, ok in (("NCCL_ALGO", algorithm, algo, ALGORITHMS), ("NCCL_PROTO", protocol, proto, PROTOCOLS)):
        if flag is None and val not in ok:  # name the environment variable, not a flag the user never gave
            raise ConfigError(f"environment variable {var} = {os.environ[var]!r}: expected one of {list(ok)} "
                              f"(or pass --{'algorithm' if var == 'NCCL_ALGO' else 'protocol'})")
    df = nccl_tests(fabric, op, minbytes=minbytes, maxbytes=maxbytes, stepfactor=stepfactor, ngpus=ngpus,
                    dtype=dtype, algorithm=algo, protocol=proto, root=root, params=params)
    if len(df) and (df["redop"] != "none").any():
        # the redop does not change the simulated cost: one simulation, its rows once per
        # requested redop (op-major, as nccl-tests prints -o all)
        import pandas as pd

        ops = _REDOPS if redop == "all" else (redop,)
        df = pd.concat([df.assign(redop=[o if r != "none" else r for r in df["redop"]]) for o in ops],
                       ignore_index=True)
    if fmt == "json":
        echo_json(df.to_dict(orient="records"))
        return
    if fmt == "nccl-tests":
        from flitsim.hardware.fabric import as_fabric
        from flitsim.nccl_log import format_table

        fab = as_fabric(fabric)
        click.echo(format_table(df, op=op, ngpus=ngpus or fab.gpus, fabric=fab.name, minbytes=parse_size(minbytes),
                                maxbytes=parse_size(maxbytes), stepfactor=stepfactor))
        return
    t = Table(title=f"{op} on {fabric} (simulated; nccl-tests columns, out-of-place)")
    for c in ("size", "count", "type", "redop", "time (us)", "algbw (GB/s)", "busbw (GB/s)", "algo", "proto"):
        t.add_column(c, justify="left" if c in ("type", "redop", "algo", "proto") else "right", no_wrap=True)
    for r in df.itertuples():
        t.add_row(f"{r.size}", f"{r.count}", r.type, r.redop, f"{r.time_us:.2f}", f"{r.algbw_GBps:.2f}",
                  f"{r.busbw_GBps:.2f}", r.algorithm, r.protocol)
    Printer(fmt).print(t)
