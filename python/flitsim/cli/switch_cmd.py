"""``flitsim switch``: the switch lab (latency versus offered load of one
cycle-level input-queued switch)."""

from __future__ import annotations

import click
from flitsim.cli._table import Printer, Table

from flitsim.cli._common import check_plot_path, echo_json, friendly_errors, format_option
from flitsim.switchlab import ALLOCATORS, SwitchSpec, TrafficSpec, latency_curve, parse_loads


@click.command("switch")
@click.option("--ports", type=int, default=72, show_default=True, help="Switch ports.")
@click.option("--allocator", default="islip", show_default=True, help=f"One of: {', '.join(ALLOCATORS)}.")
@click.option("--iterations", type=int, default=1, show_default=True, help="Iterations (islip, pim).")
@click.option("--load", "load_text", default="0.1:1.0:0.1", show_default=True,
              help="Offered loads, flits/port/cycle: start:stop:step, a comma list, or one value.")
@click.option("--queueing", type=click.Choice(["voq", "fifo"]), default="voq", show_default=True)
@click.option("--vcs", type=int, default=4, show_default=True, help="Virtual channels per port.")
@click.option("--buffer", "buffer_flits", type=int, default=16, show_default=True, help="Input buffer per VC, flits.")
@click.option("--packet", "packet_flits", type=int, default=8, show_default=True, help="Packet length, flits.")
@click.option("--speedup", type=int, default=1, show_default=True, help="Crossbar speedup.")
@click.option("--output-buffer", "output_buffer_flits", type=int, default=None,
              help="Output buffer per VC, flits (default: 0, or 4 packets when speedup > 1).")
@click.option("--pipeline", "pipeline_cycles", type=int, default=0, show_default=True,
              help="Head arrival to first request, cycles.")
@click.option("--pattern", type=click.Choice(["uniform", "permutation", "hotspot", "incast"]), default="uniform",
              show_default=True)
@click.option("--hotspot-fraction", type=float, default=0.2, show_default=True,
              help="Share of packets sent to port 0 (pattern hotspot).")
@click.option("--process", type=click.Choice(["bernoulli", "bursty"]), default="bernoulli", show_default=True)
@click.option("--burst", "mean_burst_packets", type=float, default=4.0, show_default=True,
              help="Mean burst length, packets (bursty).")
@click.option("--clock-ghz", type=float, default=1.0, show_default=True, help="Switch clock, GHz.")
@click.option("--warmup", "warmup_cycles", type=int, default=5_000, show_default=True)
@click.option("--cycles", "measure_cycles", type=int, default=20_000, show_default=True,
              help="Measurement window per load, cycles.")
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None,
              help="Save a latency-versus-load plot here (png, pdf, svg).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@format_option()
@friendly_errors
def switch_cmd(ports: int, allocator: str, iterations: int, load_text: str, queueing: str, vcs: int,
               buffer_flits: int, packet_flits: int, speedup: int, output_buffer_flits: int | None,
               pipeline_cycles: int, pattern: str, hotspot_fraction: float, process: str, mean_burst_packets: float,
               clock_ghz: float,
               warmup_cycles: int, measure_cycles: int, seed: int, plot_path: str | None, as_json: bool, fmt: str | None) -> None:
    """Latency versus offered load of one PORTS-port input-queued switch under
    synthetic traffic; saturated points (sources overflowing) are flagged."""
    if output_buffer_flits is None:
        output_buffer_flits = 4 * packet_flits if speedup > 1 else 0
    sw = SwitchSpec(ports=ports, vcs=vcs, buffer_per_vc_flits=buffer_flits, max_packet_flits=packet_flits,
                    queueing=queueing,  # type: ignore[arg-type]  # click.Choice checked it
                    speedup=speedup, pipeline_latency_cycles=pipeline_cycles,
                    output_buffer_per_vc_flits=output_buffer_flits, allocator=allocator, iterations=iterations,
                    clock_ghz=clock_ghz, seed=seed)
    tr = TrafficSpec(pattern=pattern, process=process,  # type: ignore[arg-type]  # click.Choice checked them
                     packet_flits=packet_flits, hotspot_fraction=hotspot_fraction,
                     mean_burst_packets=mean_burst_packets, seed=seed)
    if plot_path:
        check_plot_path(plot_path)
    curve = latency_curve(sw, parse_loads(load_text), tr, warmup_cycles=warmup_cycles, measure_cycles=measure_cycles)
    if plot_path:
        curve.plot(plot_path)
    if as_json or fmt == "json":
        echo_json(curve.to_dict())
        return
    df = curve.to_pandas()
    t = Table(title=f"Switch lab: {ports} ports, {queueing.upper()}, {allocator} x{iterations}, {vcs} VCs x "
                    f"{buffer_flits} flits, {packet_flits}-flit packets, speedup {speedup}, {pattern}/{process}")
    for col in ("offered", "accepted", "latency mean", "p50", "p99", "queueing mean", "mean (ns)"):
        t.add_column(col, justify="right")
    t.add_column("", no_wrap=True, min_width=9)
    for r in df.itertuples():
        t.add_row(f"{r.offered_load:.3f}", f"{r.accepted_throughput:.3f}", f"{r.latency_mean_cycles:.1f}",
                  f"{r.latency_p50_cycles:.0f}", f"{r.latency_p99_cycles:.0f}", f"{r.queueing_mean_cycles:.1f}",
                  f"{r.latency_mean_ns:.1f}", "saturated" if r.saturated else "")
    con = Printer(fmt)
    con.print(t)
    con.print("  latencies in switch cycles, creation to tail out (source queueing included)")
    if plot_path:
        con.print(f"  plot written to {plot_path}")
