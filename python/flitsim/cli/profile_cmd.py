"""``flitsim profile``: inspect, validate and compare measured kernel profiles
(the CSV / Parquet format of :mod:`flitsim.cost.profile`)."""

from __future__ import annotations

import os

import click
from flitsim.cli._table import Printer, Table

from flitsim.cli._common import echo_json, friendly_errors, format_option


def example_profile_path() -> str:
    """Path of the shipped example profile (synthetic, labelled: not a measurement)."""
    return os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "example_profile_h100.csv")


@click.group("profile")
def profile_cmd() -> None:
    """Measured kernel profiles: a profile's rows replace the compute model's
    time for the kernels it has (record one with benches/profile_kernels.py)."""


@profile_cmd.command("validate")
@click.argument("path", type=click.Path(dir_okay=False))
@friendly_errors
def validate_cmd(path: str) -> None:
    """Check a profile: columns, kinds, GPUs, dtypes, shapes, times > 0 (exit 2 on the first bad row)."""
    from flitsim.cost import read_profile

    p = read_profile(path)
    click.echo(f"{path}: {len(p)} rows OK ({', '.join(p.gpus)})")


@profile_cmd.command("show")
@click.argument("path", type=click.Path(dir_okay=False), required=False)
@click.option("--execution", default="eager", show_default=True, help="eager | cuda_graph | compiled")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@format_option()
@friendly_errors
def show_cmd(path: str | None, execution: str, as_json: bool, fmt: str | None) -> None:
    """Each row's measured time next to the model's time for the same kernel
    on the same GPU (model / measured). Without PATH: the shipped example."""
    import numpy as np

    from flitsim.cost import CostModel, read_profile
    from flitsim.cost.model import row_times_s
    from flitsim.hardware import GPU_PRESETS, gpu_preset
    from flitsim.models.kernels import EW_READS, OPS

    path = path or example_profile_path()
    p = read_profile(path)
    rows = []
    for key, t_s in p.table.items():
        kind, gpu_name, dtype, *shape = key
        preset = next(k for k in GPU_PRESETS if gpu_preset(k).name == gpu_name)
        cm = CostModel(preset, dtype if dtype != "fp32" else "bf16", execution)
        cols = {c: np.zeros(1, np.int64) for c in ("kind", "op", "part", "tp", "seq", "m", "n", "k", "batch", "heads",
                                                   "kv_heads", "q", "kv", "ctx", "head_dim", "causal", "numel",
                                                   "reads", "writes", "elem_bytes")}
        cols["elem_bytes"][:] = {"bf16": 2, "fp16": 2, "fp8": 1, "fp32": 4}[dtype]
        if kind == "gemm":
            cols["m"][:], cols["n"][:], cols["k"][:] = shape
            desc = "m={} n={} k={}".format(*shape)
        elif kind == "attention":
            cols["kind"][:] = 1
            for f, v in zip(("batch", "heads", "kv_heads", "q", "kv", "head_dim", "causal"), shape):
                cols[f][:] = v
            cols["ctx"][:] = shape[4] - shape[3] if shape[6] else 0
            desc = "b={} h={} kvh={} q={} kv={} hd={} causal={}".format(*shape)
        else:
            cols["kind"][:] = 2
            cols["op"][:] = OPS.index(shape[0])
            cols["numel"][:] = shape[1]
            cols["reads"][:] = EW_READS.get(shape[0], 1)
            cols["writes"][:] = 1
            desc = f"{shape[0]} numel={shape[1]}"
        model_s = float(row_times_s(cols, cm.gpu, cm.peak, cm.gemm, cm.attention)[0])
        rows.append({"kernel": kind, "gpu": gpu_name, "dtype": dtype, "shape": desc, "measured_us": t_s * 1e6,
                     "model_us": model_s * 1e6, "model_over_measured": model_s / t_s})
    if as_json or fmt == "json":
        echo_json({**p.summary(), "rows": rows})
        return
    t = Table(title=f"{path} ({len(p)} rows)")
    for c in ("kernel", "gpu", "dtype", "shape", "measured us", "model us", "model / measured"):
        t.add_column(c, justify="right" if c.endswith(("us", "measured")) else "left")
    for r in rows:
        t.add_row(r["kernel"], r["gpu"], r["dtype"], r["shape"], f"{r['measured_us']:.2f}", f"{r['model_us']:.2f}",
                  f"{r['model_over_measured']:.3f}")
    out = Printer(fmt)
    out.print(t)
    src = sorted(set(p.frame["source"].dropna().astype(str))) if "source" in p.frame.columns else []
    if src:
        out.print("source: " + "; ".join(src))


@profile_cmd.command("example")
def example_cmd() -> None:
    """Print the path of the shipped example profile (synthetic, NOT a measurement)."""
    click.echo(example_profile_path())
