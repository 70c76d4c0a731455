"""What a task graph runs over: the one home of networks.

Two networks, chosen per run (``flitsim.taskgraph.execute(graph, network)``,
``flitsim.schedules.simulate(schedule, network)``):

- :class:`AnalyticNetwork`: the alpha-beta network in closed form (one
  injection port per device, latency ``alpha_ps`` and rate ``bandwidth_GBps``;
  collectives as nccl-tests busbw factor x size / rate plus ring steps x alpha).
  ``AnalyticNetwork()`` costs nothing (the "ideal" network, the default);
  :meth:`AnalyticNetwork.from_fabric` parametrises it from a fabric (what
  ``network = "analytic"`` in a scenario or sweep runs). ``IdealNetwork`` is
  its former name and stays as an alias.
- :class:`FabricNetwork`: the cycle-level fabric (transfers packet by packet,
  collectives lowered to transfer DAGs on the same fabric).

:func:`resolve_network` turns what a user passed (None, ``"ideal"``, a fabric
preset name, a FabricSpec, a network) into one of them. Both networks hand the
engine a plain dict (``to_core(devices)``; a fabric as its compiled engine copy,
``FabricSpec._core_fabric``); the Rust side is
``rust/src/taskgraph/network.rs`` (``AnalyticNetwork``)
and ``rust/src/taskgraph/fabric_network.rs`` (``FabricNetwork``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence, cast

import numpy as np

from flitsim.collectives import INJECTION_PACKET_OVERHEAD_BYTES, default_params, fabric_params, load_params
from flitsim.errors import ConfigError
from flitsim.hardware.fabric import FABRIC_PRESETS, FabricSpec, as_fabric, fabric_preset
from flitsim.transfers import transfers

__all__ = ["AnalyticNetwork", "IdealNetwork", "FabricNetwork", "Network", "resolve_network"]


@dataclass(frozen=True)
class AnalyticNetwork:
    """Alpha-beta reference network: each device has one injection port of
    ``bandwidth_GBps`` (GB/s, 1e9 B/s; 0 = infinite) and latency ``alpha_ps``.
    A transfer of S bytes takes alpha + S/B; a collective of nccl-tests size S
    over n ranks takes steps x alpha + factor x S/B with the nccl-tests busbw
    factor and ring step counts (see the Rust ``AnalyticNetwork``).

    Raises (from :meth:`to_core`):
        ConfigError: ``alpha_ps`` not a finite latency in [0, 2^62) ps, or
            ``bandwidth_GBps`` neither 0 nor a rate in [1e-9, 1e9] GB/s.
    """

    alpha_ps: int = 0
    bandwidth_GBps: float = 0.0

    @classmethod
    def from_fabric(cls, fabric: FabricSpec) -> "AnalyticNetwork":
        """The analytic network parametrised from ``fabric``: alpha = simulated
        latency of one protocol packet between GPU 0 and 1, bandwidth = the
        per-GPU rate the fabric network injects at: the calibrated
        ``link_efficiency`` x link payload rate x GPU ports, each protocol
        packet charged its payload + ``INJECTION_PACKET_OVERHEAD_BYTES`` (as
        :class:`FabricNetwork` applies it), or the fabric's own
        ``gpu.injection_bytes_per_s`` when set."""
        payload = int(fabric.gpu.payload_bytes)
        if fabric.gpu.injection_bytes_per_s:
            bw = fabric.gpu.injection_bytes_per_s / 1e9
        else:
            bw = (fabric.links[0].payload_GBps() * fabric.gpu_ports * float(default_params()["link_efficiency"])
                  * payload / (payload + INJECTION_PACKET_OVERHEAD_BYTES))
        one = transfers(cast(FabricSpec, fabric.replace(sim_packet_bytes=0)), [0], [1], payload)
        return cls(alpha_ps=int(one.makespan_ps), bandwidth_GBps=bw)

    def to_core(self, devices: int) -> dict[str, Any]:
        a, bw = self.alpha_ps, self.bandwidth_GBps
        if not (isinstance(a, (int, float, np.integer, np.floating)) and np.isfinite(a) and 0 <= a < 2**62):
            raise ConfigError(f"AnalyticNetwork.alpha_ps = {a!r}: a finite latency in [0, 2^62) ps")
        if not (isinstance(bw, (int, float, np.integer, np.floating)) and np.isfinite(bw)
                and (bw == 0 or 1e-9 <= bw <= 1e9)):
            raise ConfigError(f"AnalyticNetwork.bandwidth_GBps = {bw!r}: 0 (infinite) or a rate in [1e-9, 1e9] GB/s")
        return {"kind": "analytic", "devices": devices, "alpha_ps": int(self.alpha_ps),
                "bandwidth_bytes_per_s": int(round(self.bandwidth_GBps * 1e9))}


IdealNetwork = AnalyticNetwork
"""Former name of :class:`AnalyticNetwork` (kept for existing code)."""


@dataclass(frozen=True)
class FabricNetwork:
    """The cycle-level fabric as the network of a task graph
    (``flitsim.taskgraph.execute(graph, FabricNetwork(spec))``): transfer tasks
    run packet by packet; collective tasks are lowered to transfer DAGs on the
    same fabric (``flitsim.collective``'s algorithms with their default, "auto"
    choice). Plane folding is not applied (work arrives over time).

    ``calibrated`` (default True): when the fabric sets no
    ``gpu.injection_bytes_per_s``, every GPU injects at most the calibrated
    NCCL-level rate (``link_efficiency`` 0.849 x link rate x ports, each
    protocol packet costing its payload + 8 bytes: NCCL's SM90 20.6 GB/s per
    link at 256 B; docs/collectives.md), as ``flitsim.collective`` does. False
    runs the fabric exactly as specified, as ``flitsim.transfers`` does.

    ``collective_params``: a ``flitsim calibrate`` parameter file (or dict)
    for the collective tasks (default: the calibrated defaults, plus the
    fabric's own ``reduce_bytes_per_s`` as ``flitsim.collective`` takes it).
    ``algorithm = "auto"`` picks, per (operation, group, size), the pair
    ``flitsim.collective(..., fidelity="flow")`` simulates as fastest
    (memoized; docs/collectives.md "Algorithms").

    ``transport``: the transport of every transfer and collective step
    (``auto``, ``p2p``, ``host``, ``rdma``; default None: the parameters'
    own, ``auto``: P2P where the route allows it, else host-staged, RDMA
    across nodes; docs/collectives.md "Transports").

    ``faults``: :class:`flitsim.Fault` entries (or dicts) added to the
    fabric's own (dead links/planes at given times, ps from the start of the
    run; docs/faults.md). The run's ``network["faults"]`` holds the accounting.

    ``fidelity``: ``"packet"``, ``"flow"`` or ``"auto"`` (default None: the
    fabric's own ``fidelity``, ``"packet"`` unless set; see
    :data:`flitsim.hardware.fabric.Fidelity` and docs/fidelity.md). The run's
    ``network["fidelity"]`` and ``network["fidelity_reason"]`` say which ran and why.

    Raises:
        ConfigError: on construction, invalid faults (unknown ids, every plane
            dead, ...) or an unknown fidelity / transport; from :meth:`to_core`,
            a task graph with more devices than the fabric has GPUs.
    """

    fabric: FabricSpec
    calibrated: bool = True
    fidelity: str | None = None
    faults: Sequence[Any] = ()
    collective_params: Any = None
    transport: str | None = None

    def __post_init__(self) -> None:
        # A preset name is accepted like everywhere else (flitsim.transfers,
        # flitsim.collective); anything but a FabricSpec is refused here,
        # not deep inside a run.
        object.__setattr__(self, "fabric", as_fabric(self.fabric))
        # fidelity and transport are checked now, not at the first simulation (a typo built a network
        # that failed only when a schedule ran on it)
        if self.fidelity is not None and self.fidelity not in ("packet", "flow", "auto"):
            raise ConfigError(f"FabricNetwork.fidelity = {self.fidelity!r}: expected None (the fabric's own), "
                              "'packet', 'flow' or 'auto'")
        if self.transport is not None:
            from flitsim.transfers import TRANSPORTS

            if self.transport not in TRANSPORTS:
                raise ConfigError(f"FabricNetwork.transport = {self.transport!r}: expected one of {list(TRANSPORTS)}")
        # The spec runs are made on, built (and so validated: faults with unknown ids, every plane dead)
        # now rather than at the first simulation, and once: a new spec per to_core recompiled it per run.
        self._run_fabric()

    def _run_fabric(self) -> FabricSpec:
        """The fabric with this network's fidelity and faults applied (memoized on the instance).

        Raises:
            ConfigError: invalid faults or fidelity.
        """
        from flitsim.transfers import with_fidelity

        key = (self.fabric, self.fidelity, tuple(self.faults))
        memo = self.__dict__.get("_run_fabric_memo")
        if memo is not None and memo[0][0] is key[0] and memo[0][1] == key[1] and memo[0][2] == key[2]:
            return memo[1]
        fab = with_fidelity(self.fabric, self.fidelity)
        fab = fab.with_faults(self.faults) if self.faults else fab
        object.__setattr__(self, "_run_fabric_memo", (key, fab))
        return fab

    def to_core(self, devices: int) -> dict[str, Any]:
        if devices > self.fabric.gpus:
            raise ConfigError(f"devices = {devices}: the task graph uses more devices than the fabric's "
                              f"{self.fabric.gpus} GPUs")
        fab = self._run_fabric()
        # (the engine's compiled copy of the spec, made once per spec object: no conversion per run)
        d: dict[str, Any] = {"kind": "fabric", "fabric": fab._core_fabric(), "calibrated": bool(self.calibrated)}
        # the fabric's own collective parameters (reduction rate), as collective() uses them
        cp = {**fabric_params(self.fabric), **load_params(self.collective_params, self.fabric.name)}
        if cp or self.transport is not None:
            if self.transport is not None:
                from flitsim.transfers import TRANSPORTS

                if self.transport not in TRANSPORTS:
                    raise ConfigError(f"FabricNetwork.transport = {self.transport!r}: expected one of {list(TRANSPORTS)}")
                cp["transport"] = self.transport
            d["collective_params"] = cp
        return d


Network = AnalyticNetwork | FabricNetwork
"""The networks a task graph runs over (anything with ``to_core(devices)`` works too)."""


def resolve_network(network: Any) -> Any:
    """A network object from what the user passed: None or ``"ideal"`` -> a
    zero-cost :class:`AnalyticNetwork`; a fabric preset name or a
    :class:`~flitsim.hardware.FabricSpec` -> :class:`FabricNetwork`;
    anything with ``to_core(devices)`` as is.

    Raises:
        ConfigError: anything else (the message lists what is accepted).
    """
    if network is None or (isinstance(network, str) and network.lower() == "ideal"):
        return AnalyticNetwork()
    if isinstance(network, str) and network.lower().replace("_", "-") in FABRIC_PRESETS:
        return FabricNetwork(fabric_preset(network))
    if isinstance(network, FabricSpec):
        return FabricNetwork(network)
    if not hasattr(network, "to_core"):
        raise ConfigError(f"network = {network!r}: expected None or 'ideal', a fabric preset name "
                          f"{sorted(FABRIC_PRESETS)}, a FabricSpec, an AnalyticNetwork (IdealNetwork) "
                          "or a FabricNetwork")
    return network
