"""``flitsim link``: the link lab (one link direction, credits, latency)."""

from __future__ import annotations

import click
from flitsim.cli._table import Printer, Table

from flitsim.cli._common import ByteSize, echo_json, friendly_errors, format_option
from flitsim.hardware import ReplaySpec, link_preset
from flitsim.linklab import link_transfer


@click.command("link")
@click.argument("preset", default="nvlink5")
@click.option("--bytes", "total_bytes", type=ByteSize(), default="64MiB", show_default=True,
              help="Payload to move (e.g. 4096, 64MiB, 1G).")
@click.option("--payload", "payload_bytes", type=int, default=256, show_default=True,
              help="Payload per packet, bytes.")
@click.option("--credits", "credits", type=int, default=None, help="Credits per VC, flits (default: preset's).")
@click.option("--credit-return-ps", type=int, default=None, help="Credit return delay, ps (default: preset's).")
@click.option("--vcs", type=int, default=None, help="Virtual channels used round-robin (default: preset's).")
@click.option("--ber", type=float, default=None,
              help="Raw (pre-FEC) bit error rate: FEC + link-level retry (go-back-N) on; see `flitsim ber`.")
@click.option("--seed", type=int, default=0, show_default=True, help="Error-sampling seed (with --ber).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@format_option()
@friendly_errors
def link_cmd(preset: str, total_bytes: int, payload_bytes: int, credits: int | None,
             credit_return_ps: int | None, vcs: int | None, ber: float | None, seed: int, as_json: bool, fmt: str | None) -> None:
    """Move --bytes over one direction of a PRESET link (nvlink3/4/5) and report
    throughput, per-packet latency and credit exhaustion."""
    spec = link_preset(preset)
    link = spec if ber is None else spec.replace(replay=ReplaySpec(ber=ber, seed=seed))
    r = link_transfer(link, total_bytes, payload_bytes, credits_per_vc_flits=credits,  # type: ignore[arg-type]
                      credit_return_ps=credit_return_ps, vcs=vcs, max_recorded_packets=0)
    s = r.summary()
    if as_json or fmt == "json":
        echo_json(s)
        return
    con = Printer(fmt)
    t = Table(title=f"Link lab: {preset}, {total_bytes:,} B in {payload_bytes} B packets")
    t.add_column("metric")
    t.add_column("value", justify="right")
    lat = r.latency_ps
    rows = [
        ("throughput (payload)", f"{r.throughput_GBps:.3f} GB/s"),
        ("payload rate x packet efficiency", f"{spec.payload_GBps() * spec.packet.efficiency(payload_bytes):.3f} GB/s"),
        ("completion", f"{r.completion_ps / 1e6:.3f} us"),
        ("serializer utilization", f"{r.utilization:.4f}"),
        ("packets", f"{r.packets:,}"),
        ("latency p50 / p99 / max", f"{lat['p50'] / 1e3:.2f} / {lat['p99'] / 1e3:.2f} / {lat['max'] / 1e3:.2f} ns"),
        ("credit round trip (full packet)", f"{r.credit_rtt_ps / 1e3:.2f} ns"),
        ("time waiting for credits", f"{r.credit_wait_ps / 1e6:.3f} us"),
    ]
    if ber is not None:
        rp = r.link["replay"]
        rows.append((f"link-level replays at BER {ber:g}", f"{rp['replays']:,} ({rp['replay_ps'] / 1e6:.3f} us of serializer time)"))
    for i, v in enumerate(r.vcs):
        if v["packets"]:
            rows.append((f"VC{i} credit exhaustion", f"{v['exhaustion_episodes']:,} episodes, {v['exhaustion_ps'] / 1e6:.3f} us"))
    for a, b in rows:
        t.add_row(a, b)
    con.print(t)
