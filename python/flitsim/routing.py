"""Routes through a fabric graph: which elements, ports and links the packets
from one endpoint to another cross (destination-based shortest path with
ECMP, computed by the engine: ``rust/src/fabric/topology.rs``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flitsim import _core
from flitsim.errors import ConfigError
from flitsim.hardware.fabric import FabricSpec, as_fabric


@dataclass(frozen=True)
class RouteHop:
    """One element a route crosses and the link it leaves over.

    Attributes:
        element: ``gpu``, ``host`` (the source endpoint) or ``switch``.
        kind: the element's kind (``gpu``, ``host``, ``switch`` for a plain
            NVSwitch-layer chip, or a :data:`~flitsim.hardware.fabric.ElementKind`).
        name: the kind's name (``SwitchKind.name``) or ``GPU 3`` / ``host 0``.
        index: endpoint id or switch index.
        in_port: port it entered by (None at the source).
        out_port: port it leaves by.
        link: index into the fabric's ``links`` of the outgoing link.
        link_GBps: the link's payload rate after PHY coding, 1e9 B/s per direction.
        link_payload_GBps: the same after the link's packet format (one
            protocol packet of the fabric's ``gpu.payload_bytes``).
        ecmp: equal-cost ports the packets are spread over at this hop.
    """

    element: str
    kind: str
    name: str
    index: int
    in_port: int | None
    out_port: int
    link: int
    link_GBps: float
    link_payload_GBps: float
    ecmp: int


@dataclass(frozen=True)
class Route:
    """A representative route (first choice at every hop) and its facts.

    Attributes:
        src, dst: endpoint ids. hops: :class:`RouteHop` list, source first;
        the last hop's link reaches ``dst``. p2p_blocker: for a GPU -> GPU
        route, the element that forbids peer-to-peer traffic (such a transfer
        is refused; the transport host-stages it), else None.
    """

    src: int
    dst: int
    dst_name: str
    hops: tuple[RouteHop, ...]
    p2p_blocker: str | None

    def bottleneck_GBps(self) -> float:
        """Slowest link payload rate on the route (one ECMP lane), 1e9 B/s."""
        return min((h.link_payload_GBps for h in self.hops), default=0.0)

    def to_dict(self) -> dict[str, Any]:
        return {"src": self.src, "dst": self.dst, "dst_name": self.dst_name, "p2p_blocker": self.p2p_blocker,
                "hops": [h.__dict__ for h in self.hops]}


def route(fabric: FabricSpec | str, src: int, dst: int) -> Route:
    """The route packets from endpoint ``src`` to ``dst`` take.

    Args:
        fabric: a :class:`FabricSpec` or preset name.
        src, dst: endpoint ids (GPUs ``0..gpus``, hosts ``gpus..gpus+hosts``).

    Returns:
        :class:`Route` (empty ``hops`` when ``src == dst``).

    Raises:
        ConfigError: ids outside the fabric, non-integer ids, an invalid fabric.
    """
    f = as_fabric(fabric)
    for name, v in (("src", src), ("dst", dst)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise ConfigError(f"route {name} = {v!r}: expected an endpoint id (integer)")
        if not 0 <= v < f.endpoints:
            raise ConfigError(f"route {name} = {v}: expected an endpoint id in 0..{f.endpoints} "
                              f"(GPUs 0..{f.gpus}, " + (f"hosts {f.gpus}..{f.endpoints})" if f.endpoints > f.gpus
                                                        else "no host endpoints)"))
    r = _core.fabric_route(f.core_dict(), src, dst)
    hops = tuple(RouteHop(**h) for h in r["hops"])
    return Route(src=src, dst=dst, dst_name=r["dst_name"], hops=hops, p2p_blocker=r["p2p_blocker"])
