"""``flitsim workload``: a trace's token-length distribution next to LLMPerf's."""

from __future__ import annotations

import click
from flitsim.cli._table import Printer, Table

from flitsim.cli._common import echo_json, friendly_errors, format_option
from flitsim.workloads import length_summary, llmperf_workload, load_trace


@click.command("workload")
@click.option("--trace", "trace", default="azure-conv-2023", show_default=True,
              help="Shipped trace name or CSV path (columns TIMESTAMP/ContextTokens/GeneratedTokens "
                   "for the shipped one; timestamp/input_tokens/output_tokens for others).")
@click.option("--n", "n_requests", type=int, default=20000, show_default=True, help="LLMPerf requests to draw.")
@click.option("--seed", type=int, default=0, show_default=True, help="LLMPerf generator seed.")
@click.option("--mean-input", type=float, default=550, show_default=True, help="LLMPerf mean input tokens.")
@click.option("--stddev-input", type=float, default=150, show_default=True, help="LLMPerf input stddev.")
@click.option("--mean-output", type=float, default=150, show_default=True, help="LLMPerf mean output tokens.")
@click.option("--stddev-output", type=float, default=80, show_default=True,
              help="LLMPerf output stddev (llmperf default 80; its README examples use 10).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@format_option()
@friendly_errors
def workload_cmd(trace: str, n_requests: int, seed: int, mean_input: float, stddev_input: float,
                 mean_output: float, stddev_output: float, as_json: bool, fmt: str | None) -> None:
    """Token-length distributions (input and output tokens per request) of a
    trace next to an LLMPerf-style synthetic workload, with the tokenizer that
    counted each."""
    df = length_summary({
        trace: load_trace(trace),
        "llmperf": llmperf_workload(n_requests=n_requests, seed=seed, mean_input_tokens=mean_input,
                                    stddev_input_tokens=stddev_input, mean_output_tokens=mean_output,
                                    stddev_output_tokens=stddev_output),
    })
    if as_json or fmt == "json":
        echo_json([{"workload": w, "field": f, **row} for (w, f), row in df.to_dict(orient="index").items()])
        return
    # one column per (workload, field): fits an 80-column terminal
    t = Table(title="Token lengths per request")
    t.add_column("stat")
    for w, f in df.index:
        t.add_column(f"{w}\n{f}", justify="right")
    for stat in df.columns:
        cells = []
        for v in df[stat]:
            cells.append(str(v) if isinstance(v, str) else (f"{v:,.0f}" if stat in ("count", "min", "max")
                                                            else f"{v:,.1f}"))
        t.add_row(stat, *cells)
    Printer(fmt).print(t)
