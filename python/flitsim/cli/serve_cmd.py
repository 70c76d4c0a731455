"""``flitsim serve``: LLM serving on a fabric over a sweep of request rates,
or a whole study from a TOML file (docs/serving.md)."""

from __future__ import annotations

import click

from flitsim.cli._common import check_plot_path, echo_json, format_option, friendly_errors
from flitsim.cli._table import Printer, Table, resolve_format


@click.command("serve")
@click.argument("study", required=False)
@click.option("--model", default="llama-3-70b", show_default=True, help="Causal model preset.")
@click.option("--fabric", default="hgx-h100", show_default=True, help="Fabric preset (GPUs and network).")
@click.option("--tp", type=int, default=8, show_default=True, help="Tensor-parallel degree per instance.")
@click.option("--pp", type=int, default=1, show_default=True, help="Pipeline stages per instance.")
@click.option("--replicas", type=int, default=1, show_default=True, help="Instances (round-robin dispatch).")
@click.option("--policy", type=click.Choice(["static", "continuous", "chunked"]), default="chunked", show_default=True)
@click.option("--workload", default="llmperf", show_default=True,
              help="'llmperf' (550/150, Llama-2 tokens), a shipped trace name or a CSV path.")
@click.option("--columns", default=None,
              help="CSV column mapping, e.g. 'timestamp=TS,input_tokens=In,output_tokens=Out'.")
@click.option("--rate", "rates", default="1:64", show_default=True,
              help="Request rates: 'lo:hi' doubling, 'lo:hi:n' log-spaced, or 'r1,r2'.")
@click.option("--n", "n", type=int, default=300, show_default=True, help="Requests per rate.")
@click.option("--dtype", default="bf16", show_default=True, help="Weights / GEMM dtype (fp8 for FP8 engines).")
@click.option("--max-num-batched-tokens", type=int, default=2048, show_default=True)
@click.option("--max-num-seqs", type=int, default=128, show_default=True)
@click.option("--slo-ttft", type=float, default=None, help="TTFT SLO, s (goodput).")
@click.option("--slo-tpot", type=float, default=None, help="TPOT SLO, s (goodput).")
@click.option("--plot", default=None, help="Write the throughput-latency plot (PNG/PDF/SVG) here.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
@format_option()
@friendly_errors
def serve_cmd(study: str | None, model: str, fabric: str, tp: int, pp: int, replicas: int, policy: str,
              workload: str, columns: str | None, rates: str, n: int, dtype: str, max_num_batched_tokens: int, max_num_seqs: int,
              slo_ttft: float | None, slo_tpot: float | None, plot: str | None, as_json: bool, fmt: str | None) -> None:
    """Serve a workload at each request rate: TTFT, TPOT, ITL, throughput and
    goodput (vLLM definitions; ``metrics()`` in Python gives LLMPerf,
    GenAI-Perf and MLPerf too). With STUDY (a TOML file such as
    examples/serving.toml) runs every workload x fabric x layout x policy and
    prints the best layout and policy at the SLO per workload."""
    from flitsim.serving.serve import parse_rates, plot_sweep, sweep_rates

    if plot:
        check_plot_path(plot)
    fmt = resolve_format(fmt, as_json)
    as_json = fmt == "json"
    con = Printer(fmt)
    if study:
        from flitsim.serving.study import best_at_slo, read_study, run_study

        cfg = read_study(study)
        ctx = click.get_current_context()
        over_r = rates if ctx.get_parameter_source("rates") == click.core.ParameterSource.COMMANDLINE else None
        over_n = n if ctx.get_parameter_source("n") == click.core.ParameterSource.COMMANDLINE else None
        df = run_study(cfg, rates=over_r, n=over_n)
        best = best_at_slo(df) if "goodput_share" in df else None
        if as_json:
            echo_json({"points": df.to_dict(orient="records"),
                       "best": None if best is None else best.to_dict(orient="records")})
        else:
            _table(con, df)
            if best is not None:
                t = Table(title="Best at the SLO (>= 90 % of requests within it)")
                for c in best.columns:
                    t.add_column(c)
                for _, row in best.iterrows():
                    t.add_row(*[f"{v:,.3g}" if isinstance(v, float) else str(v) for v in row])
                con.print(t)
        if plot:
            ok = df[~df.get("error", False).astype(bool)] if "error" in df else df
            curves = {f"{w} | {f} {l} {p}": g.set_index("rate_rps")
                      for (w, f, l, p), g in ok.groupby(["workload", "fabric", "layout", "policy"], sort=False)}
            plot_sweep(curves, plot)
        return
    cols = None
    if columns:
        from flitsim.errors import config_error

        try:
            cols = dict(kv.split("=", 1) for kv in columns.split(","))
        except ValueError:
            raise config_error("columns", columns, "'field=CSV column' pairs separated by commas") from None
    wl = workload  # "llmperf": serving.serve.LLMPERF_WORKLOAD, the same lengths as in Python
    df = sweep_rates(model, wl, parse_rates(rates), fabric=fabric, layout={"tp": tp, "pp": pp, "replicas": replicas},
                     policy=policy, n=n, dtype=dtype, max_num_batched_tokens=max_num_batched_tokens,
                     max_num_seqs=max_num_seqs, slo_ttft_s=slo_ttft, slo_tpot_s=slo_tpot, columns=cols)
    if as_json:
        echo_json(df.reset_index().to_dict(orient="records"))
    else:
        _table(con, df.reset_index())
    if plot:
        plot_sweep({f"{model} {fabric} TP{tp} {policy}": df}, plot)


_COLS = (("workload", "workload", 1), ("fabric", "fabric", 1), ("layout", "layout", 1), ("policy", "policy", 1),
         ("rate_rps", "rate/s", 1), ("request_throughput_rps", "req/s", 1), ("output_tokens_per_s", "out tok/s", 1),
         ("mean_ttft_s", "TTFT ms", 1e3), ("p99_ttft_s", "p99 TTFT", 1e3), ("mean_tpot_s", "TPOT ms", 1e3),
         ("p99_tpot_s", "p99 TPOT", 1e3), ("mean_itl_s", "ITL ms", 1e3), ("goodput_rps", "goodput/s", 1),
         ("mean_kv_transfer_share_of_ttft", "KV/TTFT", 1), ("preemptions", "preempt", 1), ("error", "error", 1))


def _table(con: Printer, df: object) -> None:
    """The sweep as a table: times in ms (vLLM definitions: TPOT per request, ITL pooled)."""
    cols = [c for c in _COLS if c[0] in df]  # type: ignore[operator]
    t = Table(title="Serving sweep (vLLM benchmark_serving definitions; ms)")
    for _, head, _ in cols:
        t.add_column(head)
    for _, row in df.iterrows():  # type: ignore[attr-defined]
        cells = []
        for c, _, scale in cols:
            v = row[c]
            cells.append(("" if v != v else f"{v * scale:,.4g}") if isinstance(v, float) else str(v))
        t.add_row(*cells)
    con.print(t)
