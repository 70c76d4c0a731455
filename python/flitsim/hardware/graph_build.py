"""A small builder for graph fabrics (endpoints, switching elements, wires and
trunks), used by the multi-tier presets so each preset reads as its wiring:
``b.wire(gpu, pcie_switch, "pcie4x16")``, ``b.trunk(nic, leaf, "ib-ndr")``.

Ports are numbered in the order wires and trunks are added (per endpoint and
per element); ``switch_ports`` of the spec is the largest element's port count.
Link specs are deduplicated by value, so every x16 Gen4 wire shares one entry
of ``FabricSpec.links``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from flitsim.hardware.link_spec import LinkSpec
from flitsim.hardware.links import link_preset


def latency_cycles(latency_ns: float, link: LinkSpec) -> int:
    """Pipeline cycles of an element whose clock is derived from ``link`` (its
    fastest link: one flit per cycle at that link's payload rate) that make
    ``latency_ns``, rounded to the nearest cycle."""
    flit_per_ns = link.payload_GBps() / link.packet.flit_bytes
    return max(0, round(latency_ns * flit_per_ns))


@dataclass
class GraphBuilder:
    """Accumulates a graph fabric; :meth:`spec` returns the FabricSpec."""

    gpus: int
    hosts: int = 0
    kinds: list[dict[str, Any]] = field(default_factory=list)
    switch_kind: list[int] = field(default_factory=list)
    links: list[LinkSpec] = field(default_factory=list)
    wires: list[dict[str, int]] = field(default_factory=list)
    trunks: list[dict[str, int]] = field(default_factory=list)
    _ep_ports: dict[int, int] = field(default_factory=dict)
    _sw_ports: list[int] = field(default_factory=list)
    #: Human-readable label per link index (``"PCIe Gen4 x16"``) for ledgers.
    link_labels: dict[int, str] = field(default_factory=dict)

    def kind(self, name: str, kind: str, *, allow_p2p: bool = True, nvls: bool = False,
             **params: Any) -> int:
        """Register an element kind (``kind`` as in FabricSpec.switch_kinds);
        ``params`` are SwitchParams fields. Returns its index."""
        self.kinds.append({"name": name, "kind": kind, "params": dict(params), "allow_p2p": allow_p2p,
                           "nvls": nvls})
        return len(self.kinds) - 1

    def element(self, kind: int) -> int:
        """Add one switching element of kind index ``kind``; returns its id."""
        self.switch_kind.append(kind)
        self._sw_ports.append(0)
        return len(self.switch_kind) - 1

    def link(self, link: LinkSpec | str, label: str | None = None) -> int:
        """Index of ``link`` (a spec or a link preset name) in the links table."""
        spec = link_preset(link) if isinstance(link, str) else link
        for i, l in enumerate(self.links):
            if l == spec:
                return i
        self.links.append(spec)
        self.link_labels[len(self.links) - 1] = label or (link if isinstance(link, str) else "custom")
        return len(self.links) - 1

    def host(self, h: int) -> int:
        """Endpoint id of host-memory endpoint ``h`` (after the GPUs)."""
        return self.gpus + h

    def wire(self, endpoint: int, element: int, link: LinkSpec | str) -> None:
        """Wire the endpoint's next free port to the element's next free port."""
        li = self.link(link)
        p = self._ep_ports.get(endpoint, 0)
        self._ep_ports[endpoint] = p + 1
        q = self._sw_ports[element]
        self._sw_ports[element] = q + 1
        self.wires.append({"gpu": endpoint, "gpu_port": p, "switch": element, "switch_port": q, "link": li})

    def trunk(self, a: int, b: int, link: LinkSpec | str) -> None:
        """A cable between elements ``a`` and ``b`` on their next free ports."""
        li = self.link(link)
        pa, pb = self._sw_ports[a], self._sw_ports[b]
        self._sw_ports[a] += 1
        self._sw_ports[b] += 1
        self.trunks.append({"a": a, "a_port": pa, "b": b, "b_port": pb, "link": li})

    def spec_dict(self, name: str) -> dict[str, Any]:
        """The FabricSpec fields (``name`` included)."""
        return {
            "name": name, "gpus": self.gpus, "hosts": self.hosts,
            "gpu_ports": max(self._ep_ports.values()), "switches": len(self.switch_kind),
            "switch_ports": max(self._sw_ports), "links": tuple(self.links), "wires": tuple(self.wires),
            "switch_kinds": tuple(self.kinds), "switch_kind": tuple(self.switch_kind),
            "trunks": tuple(self.trunks),
        }
