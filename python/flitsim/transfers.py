"""Transfers on a whole fabric: (src, dst, bytes, start, dependency) arrays in,
completion times and fabric statistics out.

Every transfer is cut into packets (``gpu.payload_bytes`` each, or coalesced
into ``sim_packet_bytes`` simulated packets), sprayed over the source GPU's
ports, switched cycle by cycle and drained at the destination. Statistics
stream: memory is bounded by the fabric, not by the number of packets.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from flitsim._notebook import notebook
from flitsim import _core
from flitsim.errors import ConfigError
from flitsim.hardware.fabric import FabricSpec, as_fabric

if TYPE_CHECKING:
    import pandas as pd

    from flitsim.counters import CounterSamples


TRANSPORTS = ("auto", "p2p", "host", "rdma")
"""Transport names (docs/collectives.md "Transports")."""


def with_fidelity(fabric: FabricSpec, fidelity: str | None) -> FabricSpec:
    """``fabric`` at ``fidelity`` (None: unchanged). A flow-level run outside
    the flow level's validation warns (:class:`flitsim.errors.FidelityWarning`).

    Raises:
        ConfigError: a fidelity other than ``packet``, ``flow``, ``auto``.
    """
    if fidelity is None:
        return fabric
    if fidelity not in ("packet", "flow", "auto"):
        raise ConfigError(f"fidelity = {fidelity!r}: expected 'packet', 'flow' or 'auto'")
    return fabric if fabric.fidelity == fidelity else fabric.replace(fidelity=fidelity)  # type: ignore[return-value]


def warn_fidelity(reason: str) -> None:
    """Warn when a result says flow level ran outside its validation."""
    if reason.startswith("warning:"):
        import warnings

        from flitsim.errors import FidelityWarning

        warnings.warn(reason[len("warning: "):], FidelityWarning, stacklevel=3)


@notebook("makespan_ps", "packets", "fidelity", "folded_planes", frame="transfers")
@dataclass(frozen=True)
class TransferResult:
    """Outcome of :func:`transfers`.

    Attributes:
        transfers: one row per transfer: src, dst, bytes, start_ps, end_ps,
            duration_ps, GBps (bytes / duration, 1e9 B/s).
        links: one row per GPU port (GPU -> switch direction): gpu, port,
            switch, utilization (busy / makespan), payload_bytes, wire_bytes,
            packets, credit_exhaustion_episodes, credit_exhaustion_ps.
        switch_ports: one row per (switch, port): gpu (wired to it),
            output_utilization (switch -> GPU link), input_conflicts,
            output_conflicts (requests not granted), mean_queueing_ns (ready to
            grant), input_occupancy_max_flits, input_occupancy_mean_flits (run
            mean of the input buffer, summed over VCs; graph fabrics: in element
            0's clock), output_credit_exhaustion_episodes,
            output_credit_exhaustion_ns.
        reorder: per GPU: max_packets and mean_packets held in its reorder buffer.
        makespan_ps: last completion.
        folded_planes: identical switch planes simulated as one (1 = none);
            statistics then describe one plane. fold_reason says why or why not.
        faults: fault accounting: faults_applied, lost_packets, lost_bytes,
            delivered_bytes, replayed_delivered_bytes, sent_bytes
            (delivered + replayed_delivered = sent: nothing dropped; one plane's
            share when folded, like the other statistics). The
            ``links`` rows carry the per-port side: rx_payload_bytes (delivered
            through the port), lost_bytes, and link-level retry (replays,
            replayed_wire_bytes, replay_ps, replay_buffer_wait_ps; rx_* for the
            switch -> GPU direction).
        fidelity, fidelity_reason: ``packet`` or ``flow`` and why (auto's
            choice, or a warning). At flow level credit, arbitration, queueing
            and reorder counters are not modelled (zero).
    """

    transfers: "pd.DataFrame"
    links: "pd.DataFrame"
    switch_ports: "pd.DataFrame"
    reorder: "pd.DataFrame"
    makespan_ps: int
    folded_planes: int
    fold_reason: str
    packets: int
    events: int
    faults: dict[str, int] = field(default_factory=dict)
    fidelity: str = "packet"
    fidelity_reason: str = ""
    #: Graph fabrics: one row per wired switch output link (trunks and links
    #: to endpoints): switch, port, to_switch (1 = trunk), peer, peer_port,
    #: link_index, busy_ps, payload_bytes, wire_bytes, packets; None otherwise.
    switch_links: "pd.DataFrame | None" = None
    #: Time-resolved queue depth and credits in use
    #: (:class:`flitsim.counters.CounterSamples`) when the fabric's
    #: ``counters`` is set and the run was at packet level; else None.
    counters: "CounterSamples | None" = None

    def summary(self) -> dict[str, Any]:
        """JSON-safe headline figures."""
        t = self.transfers
        return {
            "transfers": len(t), "bytes": int(t.bytes.sum()), "makespan_us": self.makespan_ps / 1e6,
            "aggregate_GBps": float(t.bytes.sum() / self.makespan_ps * 1e3) if self.makespan_ps else 0.0,
            "max_link_utilization": float(self.links.utilization.max()),
            "credit_exhaustion_episodes": int(self.links.credit_exhaustion_episodes.sum()),
            "arbitration_conflicts": int(self.switch_ports.output_conflicts.sum()),
            "max_reorder_packets": int(self.reorder.max_packets.max()),
            "folded_planes": self.folded_planes, "fold_reason": self.fold_reason,
            "packets": self.packets, "events": self.events,
            "faults": dict(self.faults),
            # The engine's byte counters cover what it simulated: one plane when planes were folded.
            "faults_scope": ("whole fabric" if self.folded_planes <= 1 else
                             f"one simulated plane of {self.folded_planes} folded planes (x {self.folded_planes} "
                             "for the fabric)"),
            "fidelity": self.fidelity, "fidelity_reason": self.fidelity_reason,
        }


_LIMITS = {"nbytes": 1 << 50, "start_ps": 1 << 62}
"""Upper bounds (exclusive) of columns that are not ids (GPU ids are bounded by
the fabric, ``after`` by the transfer count): sizes up to 1 PiB, start times up
to 2^62 ps (~53 days) so results stay exact in int64."""


def _sizes(v: Any) -> Any:
    """Byte sizes written as text (``"64K"``: the one size parser, :mod:`flitsim.sizes`) to integers;
    anything else unchanged (checked by :func:`_col`)."""
    from flitsim.sizes import parse_bytes

    if isinstance(v, str):
        return parse_bytes(v, "nbytes")
    a = np.asarray(v) if isinstance(v, (list, tuple, np.ndarray)) else None
    if a is not None and a.dtype.kind in "UO" and a.ndim == 1 and any(isinstance(x, str) for x in a.tolist()):
        return [parse_bytes(x, f"nbytes[{i}]") if isinstance(x, str) else x for i, x in enumerate(a.tolist())]
    return v


def _col(name: str, v: Any, n: int, dtype: Any, default: int | None = None, hi: int | None = None) -> np.ndarray:
    if v is None:
        if default is None:
            raise ConfigError(f"{name} = None: required")
        return np.full(n, default, dtype=dtype)
    a = np.asarray(v)
    if a.ndim == 0:
        a = np.full(n, a)
    if a.shape != (n,):
        raise ConfigError(f"{name}: shape {a.shape}, expected ({n},) (one entry per transfer)")
    if a.dtype.kind == "O" and a.size and all(isinstance(x, int) and not isinstance(x, bool) for x in a):
        # Python ints beyond int64/uint64 make an object array: name the value, not the dtype.
        i = int(np.argmax([abs(x) for x in a]))
        raise ConfigError(f"{name}[{i}] = {a[i]}: expected integers in {-1 if name == 'after' else 0}.."
                          f"{(hi if hi is not None else _LIMITS.get(name, 2**64)) - 1}")
    if a.dtype.kind not in "iu":
        raise ConfigError(f"{name}: dtype {a.dtype}, expected integers")
    lo = -1 if name == "after" else 0
    if a.size and a.min() < lo:
        raise ConfigError(f"{name} = {int(a.min())}: expected values >= {lo}")
    hi = hi if hi is not None else _LIMITS.get(name)
    if hi is not None and a.size and a.max() >= hi:
        i = int(np.argmax(a))
        raise ConfigError(f"{name}[{i}] = {int(a[i])}: expected values < {hi}")
    return np.ascontiguousarray(a, dtype=dtype)


def transfers(fabric: FabricSpec | str, src: Sequence[int] | np.ndarray, dst: Sequence[int] | np.ndarray,
              nbytes: Sequence[int] | np.ndarray | int, *, start_ps: Any = None, after: Any = None,
              faults: Any = None, fidelity: str | None = None, transport: "str | Sequence[str] | None" = None,
              transport_params: "dict[str, Any] | None" = None) -> TransferResult:
    """Run transfers on a fabric.

    Args:
        fabric: a :class:`FabricSpec` or preset name (``gb200-nvl72``, ...).
        src, dst: endpoint ids, shape (n,): GPUs ``0..gpus``, then (graph
            fabrics) host-memory endpoints ``gpus..gpus + hosts``, so a GPU <->
            host copy is one transfer. With ``transport`` set, GPU ids only (a
            transport is a way to move GPU memory to GPU memory).
        nbytes: bytes per transfer, shape (n,) or a scalar; integers or size text
            (``"64K"`` = 65,536 bytes, as everywhere in flitsim).
        start_ps: earliest start per transfer, ps (default 0).
        after: index of a transfer that must finish first, or -1 (default -1).
        faults: :class:`flitsim.Fault` entries (or dicts) added to the fabric's
            (see ``FabricSpec.with_faults``).
        fidelity: ``packet``, ``flow`` or ``auto`` (default: the fabric's own).
        transport: None (default: every transfer straight over its route, as
            the fabric is specified), or a transport for all transfers or one
            per transfer: ``auto`` (P2P where the route allows it, else
            host-staged through the receiver's host memory; RDMA through the
            NICs across nodes, PXN rail routing), ``p2p``, ``host``, ``rdma``
            (docs/collectives.md "Transports"). Start and end times are then
            those of the whole staged copy.
        transport_params: transport fields of the collective parameters
            (``host_chunk_bytes``, ``host_slots``, ``pxn``,
            ``pcie_extra_latency_ps``, ``net_extra_latency_ps``).

    Returns:
        :class:`TransferResult`.

    Raises:
        ConfigError: endpoint ids outside the fabric (host endpoints with a
            ``transport``), mismatched shapes, negative
            sizes, a dependency cycle, an invalid fabric.
        StalledError: transfers that can never finish (the message says what
            is blocked).
    """
    fabric = with_fidelity(as_fabric(fabric), fidelity)
    if faults is not None:
        fabric = fabric.with_faults(faults)
    s = np.asarray(src)
    if s.ndim != 1 or s.size == 0:
        raise ConfigError(f"src: shape {s.shape}, expected a non-empty 1-D array of endpoint ids")
    n = s.size
    g = fabric.endpoints  # GPUs, then host-memory endpoints (graph fabrics)
    batch = {"src": _col("src", src, n, np.uint32, hi=g), "dst": _col("dst", dst, n, np.uint32, hi=g),
             "bytes": _col("nbytes", _sizes(nbytes), n, np.uint64), "start_ps": _col("start_ps", start_ps, n, np.uint64, 0),
             "after": _col("after", after, n, np.int64, -1, hi=n)}
    if transport is None:
        r = _core.fabric_transfers(fabric._core_fabric(), batch)
    else:
        names = [transport] if isinstance(transport, str) else list(transport)
        if len(names) not in (1, n):
            raise ConfigError(f"transport: {len(names)} entries, expected one or one per transfer ({n})")
        for i, t in enumerate(names):
            if t not in TRANSPORTS:
                raise ConfigError(f"transport[{i}] = {t!r}: expected one of {list(TRANSPORTS)}")
        for name in ("src", "dst"):
            ids = batch[name]
            if ids.size and int(ids.max()) >= fabric.gpus:
                i = int(np.argmax(ids))
                raise ConfigError(f"{name}[{i}] = {int(ids[i])}: a GPU id in 0..{fabric.gpus} with transport= "
                                  f"(host-memory endpoints {fabric.gpus}..{fabric.endpoints} take plain transfers: "
                                  "transport=None)")
        # unknown fields are refused by the engine's parameter parser, named
        extra = dict(transport_params or {})
        r = _core.fabric_transfers_transport(fabric._core_fabric(), batch, [str(t) for t in names], extra)
    return _result(r, batch, fabric)


def fabric_frames(r: Mapping[str, Any], fabric: FabricSpec) -> tuple["pd.DataFrame", "pd.DataFrame", "pd.DataFrame"]:
    """Fabric statistics of a run as DataFrames: (links, switch_ports, reorder),
    with the columns described in :class:`TransferResult`."""
    import pandas as pd

    mk = max(int(r["makespan_ps"]), 1)
    lk = {k: np.asarray(v).astype(np.int64) for k, v in r["links"].items()}
    links = pd.DataFrame(lk)
    links.insert(3, "utilization", links.busy_ps / mk)
    sp = {k: np.asarray(v).astype(np.int64) for k, v in r["switch_ports"].items()}
    ports = pd.DataFrame(sp)
    cyc = float(r["switch_cycle_ps"])
    gpu_of = {}
    folded = int(r["folded_planes"])
    for w in fabric.wires:
        if folded == 1 or w.switch == 0:
            gpu_of[(w.switch, w.switch_port)] = w.gpu
    ports.insert(2, "gpu", [gpu_of.get((a, b), -1) for a, b in zip(ports.switch, ports.port)])
    ports["output_utilization"] = ports.output_flits * cyc / mk
    ports["mean_queueing_ns"] = np.where(ports.packets_granted > 0,
                                         ports.queueing_cycles_sum * cyc / 1e3 / np.maximum(ports.packets_granted, 1), 0.0)
    ports["output_credit_exhaustion_ns"] = ports.output_credit_exhaustion_cycles * cyc / 1e3
    if "input_occupancy_flit_cycles" in ports:
        ports["input_occupancy_mean_flits"] = ports.input_occupancy_flit_cycles * cyc / mk
    ro = pd.DataFrame({k: np.asarray(v) for k, v in r["reorder"].items()})
    ro.insert(0, "gpu", np.arange(len(ro)))
    return links, ports, ro


def _result(r: Mapping[str, Any], batch: dict[str, np.ndarray], fabric: FabricSpec) -> TransferResult:
    import pandas as pd

    start = r["start_ps"].astype(np.int64)
    end = r["end_ps"].astype(np.int64)
    dur = end - start
    t = pd.DataFrame({"src": batch["src"], "dst": batch["dst"], "bytes": batch["bytes"].astype(np.int64),
                      "start_ps": start, "end_ps": end, "duration_ps": dur,
                      "GBps": np.where(dur > 0, batch["bytes"] / np.maximum(dur, 1) * 1e3, np.nan)})
    links, ports, ro = fabric_frames(r, fabric)
    warn_fidelity(str(r["fidelity_reason"]))
    return TransferResult(t, links, ports, ro, int(r["makespan_ps"]), int(r["folded_planes"]), str(r["fold_reason"]),
                          int(r["packets"]), int(r["events"]), {k: int(v) for k, v in r["faults"].items()},
                          str(r["fidelity"]), str(r["fidelity_reason"]),
                          pd.DataFrame({k: np.asarray(v).astype(np.int64) for k, v in r["switch_links"].items()})
                          if "switch_links" in r else None, counters_of(r, fabric))


def counters_of(r: Mapping[str, Any], fabric: FabricSpec) -> "CounterSamples | None":
    """The run's time-resolved counters, or None (off, or flow level)."""
    if "counters" not in r:
        return None
    from flitsim.counters import CounterSamples

    return CounterSamples.from_core(r["counters"], fabric.gpu_ports, float(r["switch_cycle_ps"]))
