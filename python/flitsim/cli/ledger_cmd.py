"""``flitsim ledger``: the bandwidth ledger of a system or link preset."""

from __future__ import annotations

import click
from flitsim.cli._table import Printer, Table

from flitsim.cli._common import echo_json, friendly_errors, format_option
from flitsim.ledger import ledger


@click.command("ledger")
@click.argument("preset", default="gb200-nvl72")
@click.option("--payload", "payloads", type=int, multiple=True, default=(128, 256), show_default=True,
              help="Payload per packet (bytes) for the effective-rate rows; repeatable.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@format_option()
@friendly_errors
def ledger_cmd(preset: str, payloads: tuple[int, ...], as_json: bool, fmt: str | None) -> None:
    """Bandwidth ledger of PRESET or a fabric TOML file (system: gb200-nvl72, hgx-b200, hgx-h100, dgx-a100;
    multi-tier: pcie-8xl20, pcie-8xl40, pcie-4xa100, pcie-2xh100-nvbridge, eth-2x8xl40,
    ib-4xhgx-h100, gb200-nvl576; link: nvlink3-5, pcie4x16 (pcie{3,4,5}x{1..16}), upi2,
    xgmi3, eth100g-eth800g, ib-ndr), from symbol rate to payload and per-packet
    effective rate, per lane, link, GPU, uplink, socket link, NIC and system."""
    led = ledger(preset, payloads_bytes=tuple(payloads))
    if as_json or fmt == "json":
        echo_json(led.to_dict())
        return
    t = Table(title=f"Bandwidth ledger: {led.name}")
    for col, just in (("scope", "left"), ("stage", "left"), ("Gb/s (1 dir)", "right"),
                      ("GB/s (1 dir)", "right"), ("GB/s (both)", "right"), ("derivation", "left")):
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    for r in led.rows:
        t.add_row(r.scope, r.stage, f"{r.per_direction_gbps:,.3f}", f"{r.per_direction_GBps:,.3f}",
                  f"{r.bidirectional_GBps:,.3f}", r.derivation)
    con = Printer(fmt)
    con.print(t)
    for n in led.notes:
        con.print(f"  {n}")
