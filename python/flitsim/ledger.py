"""The bandwidth ledger: every bandwidth figure of a link or system derived
from one chain, so "400 Gb/s", "50 GB/s", "1.8 TB/s" and "130 TB/s" can be told
apart (README, docs/architecture.md).

Chain: baud x bits/symbol -> line rate -> FEC -> line code -> payload rate per
lane -> x lanes per direction (link) -> x links (GPU) -> x GPUs (system); and
from payload to *effective* rate after packet headers for a given payload per
packet. Each row gives one direction and both directions.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from flitsim._notebook import notebook
from flitsim.errors import ConfigError
from flitsim.hardware.link_spec import LinkSpec
from flitsim.hardware.links import LINK_PRESETS, link_preset
from flitsim.hardware.systems import SYSTEM_PRESETS, SystemPreset, system_preset

if TYPE_CHECKING:
    import pandas as pd

DEFAULT_PAYLOADS_BYTES = (128, 256)
"""Per-packet payloads shown by default: SMs write 128 B, copy engines 256 B
(nccl-tests issue 149, NVIDIA maintainer)."""


@dataclass(frozen=True)
class LedgerRow:
    """One figure of the ledger.

    ``scope``: lane, link, gpu, switch or system. ``stage``: where in the chain
    (symbols, line, post-FEC, payload, effective @ N B). Rates in Gb/s (bits) and
    GB/s (bytes, 1e9), for one direction and for both.
    """

    scope: str
    stage: str
    per_direction_gbps: float
    per_direction_GBps: float
    bidirectional_GBps: float
    derivation: str


@notebook("name", "rows", "notes")
@dataclass(frozen=True)
class Ledger:
    """The ledger of one link or system: ``rows`` in chain order, plus notes."""

    name: str
    rows: tuple[LedgerRow, ...]
    notes: tuple[str, ...]

    def to_pandas(self) -> "pd.DataFrame":
        """Rows as a DataFrame (columns as in :class:`LedgerRow`)."""
        import pandas as pd

        return pd.DataFrame([asdict(r) for r in self.rows])

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict: name, rows (list of dicts), notes."""
        return {"name": self.name, "rows": [asdict(r) for r in self.rows], "notes": list(self.notes)}

    def row(self, scope: str, stage: str) -> LedgerRow:
        """The row with this scope and stage.

        Raises:
            ConfigError: if there is none (the message lists the rows there are).
        """
        for r in self.rows:
            if r.scope == scope and r.stage == stage:
                return r
        from flitsim.errors import config_error

        have = [(r.scope, r.stage) for r in self.rows]
        raise config_error("ledger row", (scope, stage), f"one of {have}")


def _row(scope: str, stage: str, gbps: float, how: str) -> LedgerRow:
    return LedgerRow(scope, stage, gbps, gbps / 8.0, 2.0 * gbps / 8.0, how)


def _link_rows(link: LinkSpec, payloads: tuple[int, ...]) -> tuple[list[LedgerRow], float, list[tuple[int, float]]]:
    s = link.serdes
    r = link.rates()
    rows = []
    bps = r["bits_per_symbol"]
    rows.append(_row("lane", "symbols", s.baud_gbd, f"{s.baud_gbd:g} GBd (symbols/ns; shown in Gsym/s)"))
    rows.append(_row("lane", "line", r["line_rate_per_lane_gbps"],
                     f"{s.baud_gbd:g} GBd x {bps} bit/symbol ({s.modulation.upper()})"))
    if s.fec is not None:
        rows.append(_row("lane", "post-FEC", r["post_fec_rate_per_lane_gbps"],
                         f"x {s.fec.k}/{s.fec.n} (RS({s.fec.n},{s.fec.k}), {s.fec.symbol_bits}-bit symbols)"))
    rows.append(_row("lane", "payload", r["payload_rate_per_lane_gbps"],
                     f"x line code {s.line_code} ({r['line_code_efficiency']:.6f})"))
    rows.append(_row("link", "line", r["line_rate_gbps"], f"{s.lanes} lanes per direction x line rate"))
    rows.append(_row("link", "payload", r["payload_rate_gbps"], f"{s.lanes} lanes per direction x payload rate"))
    eff = []
    for p in payloads:
        e = link.packet.efficiency(p)
        f = link.packet.flits_per_packet(p)
        eff.append((p, e))
        rows.append(_row("link", f"effective @ {p} B", r["payload_rate_gbps"] * e,
                         f"x {p} B / ({f} flits x {link.packet.flit_bytes} B) = {e:.4f} packet efficiency"))
    return rows, r["payload_rate_gbps"], eff


def ledger(preset: str | SystemPreset | LinkSpec = "gb200-nvl72",
           payloads_bytes: tuple[int, ...] = DEFAULT_PAYLOADS_BYTES) -> Ledger:
    """Derive the bandwidth ledger of a system or link.

    Args:
        preset: a system preset name (``gb200-nvl72``, ``hgx-h100``, ...), a
            multi-tier fabric preset (``pcie-8xl20``, ``ib-4xhgx-h100``, ...;
            see :func:`fabric_ledger`), a link preset name (``nvlink5``,
            ``pcie4x16``, ...), a :class:`SystemPreset`, any FabricSpec (its
            wiring read as a graph), a fabric TOML file (a path ending in
            ``.toml``, as ``flitsim route`` / ``flitsim plan`` take) or a
            :class:`LinkSpec`.
        payloads_bytes: payloads per packet for the *effective* rows.

    Returns:
        :class:`Ledger` with rows per lane, link, GPU, switch chip and system.

    Raises:
        ConfigError: unknown preset name, wrong type, an unreadable or
            invalid fabric file, or a payload outside 1..max_payload_bytes of
            the link's packet format.
    """
    system: SystemPreset | None = None
    if isinstance(preset, (str, os.PathLike)) and str(preset).lower().endswith(".toml"):
        # A fabric file, as every command that takes a fabric reads it.
        from flitsim.hardware.fabric import as_fabric

        return fabric_ledger(as_fabric(preset))
    if isinstance(preset, str) and preset.lower().replace("_", "-") in _tier_names():
        from flitsim.hardware.fabric import fabric_preset

        return fabric_ledger(fabric_preset(preset))
    if isinstance(preset, str):
        key = preset.lower().replace("_", "-")
        if key in SYSTEM_PRESETS:
            system = system_preset(key)
            link = system.link
        elif key.replace("-", "").replace("gen", "") in LINK_PRESETS:
            link = link_preset(key)
        else:
            raise ConfigError(f"preset = {preset!r}: expected a system preset {sorted(SYSTEM_PRESETS)}, "
                              f"a multi-tier fabric preset {sorted(_tier_names())} "
                              f"or a link preset {sorted(LINK_PRESETS)}")
    elif _is_fabric(preset):
        return fabric_ledger(preset)
    elif isinstance(preset, SystemPreset):
        system, link = preset, preset.link
    elif isinstance(preset, LinkSpec):
        link = preset
    else:
        raise ConfigError(f"preset = {preset!r}: expected a preset name, SystemPreset or LinkSpec")
    if not isinstance(payloads_bytes, (tuple, list)) or not payloads_bytes:
        raise ConfigError(f"payloads_bytes = {payloads_bytes!r}: expected a non-empty list of byte counts")
    for p in payloads_bytes:
        if not isinstance(p, int) or isinstance(p, bool) or not 1 <= p <= link.packet.max_payload_bytes:
            raise ConfigError(f"payloads_bytes = {p!r}: expected an integer in 1..{link.packet.max_payload_bytes} "
                              "(the link's max_payload_bytes)")
    rows, link_gbps, eff = _link_rows(link, tuple(payloads_bytes))
    notes = [
        "GB/s = 1e9 bytes/s; bidirectional = 2 x one direction.",
        "'payload' is after FEC and line coding but before packet headers: the level of NVIDIA's "
        "per-link '50 GB/s' / per-GPU '1.8 TB/s' figures.",
    ]
    name = link.__class__.__name__
    if system is not None:
        name = system.name
        n = system.nvlinks_per_gpu
        gpu_gbps = link_gbps * n
        rows.append(_row("gpu", "payload", gpu_gbps, f"{n} links x link payload"))
        for p, e in eff:
            rows.append(_row("gpu", f"effective @ {p} B", gpu_gbps * e, f"{n} links x link effective @ {p} B"))
        if system.switch_chips:
            rows.append(_row("switch", "payload", link_gbps * system.switch_ports,
                             f"{system.switch_ports} ports x link payload (one chip)"))
        rows.append(_row("system", "payload", gpu_gbps * system.gpus, f"{system.gpus} GPUs x GPU payload"))
        for p, e in eff:
            rows.append(_row("system", f"effective @ {p} B", gpu_gbps * system.gpus * e,
                             f"{system.gpus} GPUs x GPU effective @ {p} B"))
        notes.append("sources: " + "; ".join(system.sources))
    return Ledger(name=name, rows=tuple(rows), notes=tuple(notes))


def _is_fabric(x: Any) -> bool:
    from flitsim.hardware.fabric import FabricSpec

    return isinstance(x, FabricSpec)


def _tier_names() -> set[str]:
    from flitsim.hardware.tier_presets import TIER_PRESETS

    return set(TIER_PRESETS)


def fabric_ledger(spec: Any) -> Ledger:
    """The ledger of a fabric read as a graph (multi-tier preset, a TOML
    fabric, any FabricSpec; elements without ``switch_kinds`` count as plain
    switches): rows per link kind, per GPU, per element uplink, per
    socket link, per NIC (with its per-GPU share next to NVLink) and system
    (:mod:`flitsim.ledger_graph`)."""
    from flitsim.ledger_graph import graph_rows

    raw, notes = graph_rows(spec)
    rows = tuple(_row(scope, stage, gbps, how) for scope, stage, gbps, how in raw)
    return Ledger(name=spec.name, rows=rows, notes=("GB/s = 1e9 bytes/s; bidirectional = 2 x one direction.",
                                                   *notes))
