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


def flit_rate_ghz(link: LinkSpec, base: LinkSpec, payload_bytes: int = 256) -> float:
    """Base-format flits per ns one direction of ``link`` carries, as the
    packet engine re-frames it (``fabric::sim::reframed``): packets are counted
    in ``base``'s format and the link's rate scaled so each takes the time its
    payload takes in the link's own framing at its own max payload."""
    pl = link.packet.max_payload_bytes
    own = link.packet.flits_per_packet(pl) * link.packet.flit_bytes / pl
    b = base.packet.flits_per_packet(payload_bytes) * base.packet.flit_bytes / payload_bytes
    return link.payload_GBps() * b / own / base.packet.flit_bytes


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
    _latency_ns: list[float] = field(default_factory=list)
    _by_name: dict[str, int] = field(default_factory=dict)
    #: Human-readable label per link index (``"PCIe Gen4 x16"``) for ledgers.
    link_labels: dict[int, str] = field(default_factory=dict)

    def kind(self, name: str, kind: str, *, latency_ns: float = 0.0, allow_p2p: bool = True,
             nvls: bool = False, **params: Any) -> int:
        """Register an element kind (``kind`` as in FabricSpec.switch_kinds);
        ``latency_ns`` its port-to-port pipeline latency; ``params`` other
        SwitchParams fields. Returns its index.

        The clock is set explicitly to what the engine would derive (one base
        flit per cycle on the kind's fastest re-framed link, see
        :func:`flit_rate_ghz`), so the latency becomes a whole number of
        cycles of it."""
        self.kinds.append({"name": name, "kind": kind, "params": dict(params), "allow_p2p": allow_p2p,
                           "nvls": nvls})
        self._latency_ns.append(latency_ns)
        return len(self.kinds) - 1

    def element(self, kind: int) -> int:
        """Add one switching element of kind index ``kind``; returns its id."""
        self.switch_kind.append(kind)
        self._sw_ports.append(0)
        return len(self.switch_kind) - 1

    def link(self, link: LinkSpec | str, label: str | None = None) -> int:
        """Index of ``link`` (a spec or a link preset name) in the links table.
        The first link registered is the fabric's base packet format (the
        packet engine counts every packet in ``links[0]``'s flits): register
        the GPUs' own link first."""
        if isinstance(link, str) and link in self._by_name:
            return self._by_name[link]
        spec = link_preset(link) if isinstance(link, str) else link
        if isinstance(link, str):
            for i, l in enumerate(self.links):
                if l == spec:
                    self._by_name[link] = i
                    return i
            self.links.append(spec)
            self.link_labels[len(self.links) - 1] = label or link
            self._by_name[link] = len(self.links) - 1
            return len(self.links) - 1
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

    def _resolve_clocks(self) -> list[dict[str, Any]]:
        ghz = [0.0] * len(self.kinds)
        rate = [flit_rate_ghz(l, self.links[0]) for l in self.links]
        for w in self.wires:
            k = self.switch_kind[w["switch"]]
            ghz[k] = max(ghz[k], rate[w["link"]])
        for t in self.trunks:
            for e in (t["a"], t["b"]):
                k = self.switch_kind[e]
                ghz[k] = max(ghz[k], rate[t["link"]])
        kinds = []
        for k, g, ns in zip(self.kinds, ghz, self._latency_ns):
            params = dict(k["params"])
            if g > 0 and "clock_ghz" not in params:
                params["clock_ghz"] = g
            if ns and "pipeline_latency_cycles" not in params:
                params["pipeline_latency_cycles"] = max(0, round(ns * params.get("clock_ghz", g)))
            kinds.append({**k, "params": params})
        return kinds

    def spec_dict(self, name: str) -> dict[str, Any]:
        """The FabricSpec fields (``name`` included). Wires and trunks are
        built without per-item pydantic checks (the builder makes only
        in-range integers; the engine validates the whole spec)."""
        from flitsim.hardware.fabric import Trunk, Wire

        return {
            "name": name, "gpus": self.gpus, "hosts": self.hosts,
            "gpu_ports": max(self._ep_ports.values()), "switches": len(self.switch_kind),
            "switch_ports": max(self._sw_ports), "links": tuple(self.links),
            "wires": tuple(Wire.model_construct(**w) for w in self.wires),
            "switch_kinds": tuple(self._resolve_clocks()), "switch_kind": tuple(self.switch_kind),
            "trunks": tuple(Trunk.model_construct(**t) for t in self.trunks),
        }
