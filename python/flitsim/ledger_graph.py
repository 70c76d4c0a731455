"""The bandwidth ledger of a graph fabric (PCIe boxes, scale-out nodes, two
NVLink tiers): per link kind, per GPU (each kind of port it has), per element
uplink (a PCIe switch's x16 to its root complex against the GPUs behind it),
per socket link (UPI/xGMI between root complexes), per NIC (network side, and
its share per GPU next to the GPU's NVLink rate) and for the whole system.

Every figure is one link's payload rate (after FEC and line coding) times a
count read off the wiring, and an *effective* figure after packet framing at
the payload a packet carries on that link (``min(GPU payload, max payload)``
on buses, the MTU on network links, where the NIC segments messages).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from flitsim.hardware.link_spec import LinkSpec

NETWORK_KINDS = ("ethernet", "infiniband")


def link_label(link: LinkSpec) -> str:
    """The link preset name equal to ``link`` (``pcie4x16``, ``nvlink4``...),
    or ``custom``."""
    from flitsim.hardware.links import LINK_PRESETS

    for name, build in LINK_PRESETS.items():
        if build() == link:
            return name
    return "custom"


def _payload_rate(link: LinkSpec) -> float:
    return float(link.rates()["payload_rate_gbps"])


def _eff(link: LinkSpec, gpu_payload: int, network: bool) -> tuple[int, float]:
    p = link.packet.max_payload_bytes if network else min(gpu_payload, link.packet.max_payload_bytes)
    return p, link.packet.efficiency(p)


def graph_rows(spec: Any) -> tuple[list[tuple[str, str, float, str]], list[str]]:
    """Rows (scope, stage, Gb/s per direction, derivation) and notes of a
    fabric ``spec`` read as a graph (a :class:`~flitsim.hardware.fabric.FabricSpec`;
    elements without ``switch_kinds`` are plain ``switch``es)."""
    kinds = [k.kind for k in spec.switch_kinds]
    # Without kinds (one switch layer, or a plain graph such as a torus) every element is a switch.
    kind_of = [kinds[i] for i in spec.switch_kind] if kinds else ["switch"] * spec.switches
    # Preset links by name; others by their index (two custom links stay apart).
    labels = [lab if (lab := link_label(l)) != "custom" else f"links[{i}]" for i, l in enumerate(spec.links)]
    gpu_payload = spec.gpu.payload_bytes
    net_links = {t.link for t in spec.trunks if kind_of[t.a] in NETWORK_KINDS or kind_of[t.b] in NETWORK_KINDS}
    rows: list[tuple[str, str, float, str]] = []
    used = sorted({w.link for w in spec.wires} | {t.link for t in spec.trunks})
    for li in used:
        link = spec.links[li]
        g = _payload_rate(link)
        p, e = _eff(link, gpu_payload, li in net_links)
        rows.append((f"link {labels[li]}", "payload", g, f"{link.serdes.lanes} lanes x {link.rates()['payload_rate_per_lane_gbps']:.4f} Gb/s"))
        rows.append((f"link {labels[li]}", f"effective @ {p} B", g * e,
                     f"x {p} B / {link.packet.flits_per_packet(p) * link.packet.flit_bytes} B on the wire = {e:.4f}"))
    # Per GPU: its ports by link kind (GPU 0; presets are symmetric).
    ports = Counter(w.link for w in spec.wires if w.gpu == 0)
    gpu_total = 0.0
    for li, n in sorted(ports.items()):
        g = _payload_rate(spec.links[li]) * n
        gpu_total += g
        p, e = _eff(spec.links[li], gpu_payload, False)
        rows.append(("gpu", f"{labels[li]} payload", g, f"{n} port(s) x {labels[li]} payload"))
        rows.append(("gpu", f"{labels[li]} effective @ {p} B", g * e, f"{n} port(s) x {labels[li]} effective"))
    # Element uplinks: per element, what hangs below it (endpoint wires) against its trunks out.
    down: dict[int, float] = defaultdict(float)
    for w in spec.wires:
        if w.gpu < spec.gpus:
            down[w.switch] += _payload_rate(spec.links[w.link])
    seen_kind: set[str] = set()
    trunk_groups: dict[tuple[int, int], list[int]] = defaultdict(list)
    for t in spec.trunks:
        trunk_groups[(min(t.a, t.b), max(t.a, t.b))].append(t.link)
    for (a, b), links in sorted(trunk_groups.items()):
        # Name a group from its downstream end (PCIe switch or NIC, not the root complex / network switch).
        if kind_of[a] in ("root_complex", *NETWORK_KINDS) and kind_of[b] not in ("root_complex", *NETWORK_KINDS):
            a, b = b, a
        ka, kb = kind_of[a], kind_of[b]
        key = f"{ka}->{kb}"
        if key in seen_kind:
            continue
        seen_kind.add(key)
        g = sum(_payload_rate(spec.links[li]) for li in links)
        lab = labels[links[0]]
        if ka == kb == "root_complex":
            rows.append(("socket link", "payload", g, f"{len(links)} x {lab} between two root complexes (elements {a}, {b})"))
        elif "nic" in (ka, kb) and (ka in NETWORK_KINDS or kb in NETWORK_KINDS):
            nics = sum(1 for k in kind_of if k == "nic")
            per_gpu = g * nics / spec.gpus
            rows.append(("nic", "network payload", g, f"one NIC: {len(links)} x {lab}"))
            rows.append(("nic", "network payload per GPU", per_gpu,
                         f"{nics} NICs x {lab} / {spec.gpus} GPUs (next to the GPU's ports above)"))
        else:
            below = down.get(a, 0.0) if kb == "root_complex" else 0.0
            how = f"{len(links)} x {lab} {ka} <-> {kb}"
            if below:
                how += f"; GPUs behind it: {below / 8:.1f} GB/s ({below / g:.2f}:1)"
            scope = "leaf-spine" if ka == kb and ka in NETWORK_KINDS else f"{ka} -> {kb}"
            rows.append((scope, "payload", g, how))
    nodes = [k for k in kind_of if k == "nic"]
    rows.append(("system", "GPU ports payload", gpu_total * spec.gpus, f"{spec.gpus} GPUs x GPU payload"))
    notes = [f"elements: " + ", ".join(f"{n} {k}" for k, n in sorted(Counter(kind_of).items())),
             f"hosts (CPU memory endpoints): {spec.hosts}"]
    if nodes:
        notes.append("per-GPU NIC share assumes every GPU uses the NICs evenly (rail-optimized: one NIC each)")
    return rows, notes
