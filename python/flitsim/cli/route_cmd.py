"""``flitsim route FABRIC SRC DST``: the hops packets take between two endpoints."""

from __future__ import annotations

import click
from flitsim.cli._common import echo_json, format_option, friendly_errors
from flitsim.cli._table import Printer, Table


@click.command("route")
@click.argument("fabric")
@click.argument("src", type=int)
@click.argument("dst", type=int)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@format_option()
@friendly_errors
def route_cmd(fabric: str, src: int, dst: int, as_json: bool, fmt: str | None) -> None:
    """Print the route from endpoint SRC to DST on FABRIC (a preset name or a
    fabric TOML file): element kind/index/port at each hop, the link it leaves
    over and its payload rate, and the ECMP width (ports packets spread over)."""
    from flitsim.hardware.fabric import as_fabric
    from flitsim.routing import route

    f = as_fabric(fabric)
    r = route(f, src, dst)
    if as_json or fmt == "json":
        echo_json(r.to_dict())
        return
    if src == dst:
        Printer(fmt).print(f"route {src} -> {dst} ({r.dst_name}): same endpoint, no hops")
        return
    t = Table(title=f"route {src} -> {dst} ({r.dst_name})")
    for c in ("hop", "element", "kind", "name", "in port", "out port", "link", "link GB/s", "payload GB/s", "ECMP"):
        t.add_column(c)
    for i, h in enumerate(r.hops):
        t.add_row(str(i), f"{h.element} {h.index}", h.kind, h.name, "-" if h.in_port is None else str(h.in_port),
                  str(h.out_port), str(h.link), f"{h.link_GBps:.2f}", f"{h.link_payload_GBps:.2f}", str(h.ecmp))
    c = Printer(fmt)
    c.print(t)
    if r.p2p_blocker:
        c.print(f"GPU peer-to-peer refused on this route: {r.p2p_blocker} forbids P2P (allow_p2p = false)")
    dl = [f"element {h.index} port {h.out_port} (dimension {h.dateline})" for h in r.hops if h.dateline is not None]
    if dl:
        c.print(f"dateline VC class {r.vc_class}: crosses " + ", ".join(dl))
