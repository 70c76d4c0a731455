"""Fabric specs: GPUs with NVLink ports, switch chips and the wires between
them, plus the presets people buy. Validated on construction by the engine
(ports wired at most once, every GPU reachable, link specs equal at both ends).

Presets (each names its public sources):

- ``gb200-nvl72``: 72 GPUs x 18 NVLink 5 ports; 18 switch chips x 72 ports;
  GPU g port k <-> chip k port g ("each GPU has exactly one link to each of the
  18 chips": DGX GB200 user guide, Mission Control docs).
- ``hgx-b200``: 8 GPUs x 18 NVLink 5 ports; 2 chips (STH HGX B200 report);
  assumed: 9 links from every GPU to each chip (8 x 18 = 144 = 2 x 72 ports).
- ``hgx-h100``: 8 GPUs x 18 NVLink 4 ports; 4 NVSwitch gen3 chips with 5, 4, 4, 5
  links from every GPU (Fabric Manager user guide); 64 ports per chip (LS10 manual).
- ``dgx-a100``: 8 GPUs x 12 NVLink 3 ports; 6 NVSwitch gen2 chips, 2 links from
  every GPU to each (Fabric Manager user guide); assumed 36 ports per chip.
"""

from __future__ import annotations

import os
import weakref
from pathlib import Path
from typing import Annotated, Any, Callable, Literal, Sequence

import numpy as np
from pydantic import Field, field_validator, model_validator

from flitsim import _core
from flitsim._spec import Spec
from flitsim.errors import ConfigError
from flitsim.hardware.link_spec import LinkSpec, ReplaySpec
from flitsim.hardware.links import link_preset

#: id(spec) -> (weak reference to the spec, its field values when compiled,
#: the CompiledFabric): one converted and validated engine copy per FabricSpec
#: object (FabricSpec._core_fabric). Outside the model so that equality,
#: pickling and copying of specs are untouched.
_COMPILED: dict[int, tuple[Any, tuple[Any, ...], Any]] = {}


class GpuInjection(Spec):
    """How a GPU makes and injects packets.

    Fields: ``payload_bytes`` per protocol packet (256 copy engine, 128 SM
    stores: nccl-tests issue 149); ``max_outstanding_packets`` per GPU (0 =
    unlimited), ``injection_bytes_per_s`` and ``ejection_bytes_per_s`` (0 = link
    limited / unlimited), ``injection_packet_overhead_bytes`` (per protocol
    packet, charged at the injection rate: smaller payloads inject slower). GPU-wide limits are split evenly over the GPU's ports
    (each port's DMA queue gets its share), which keeps the planes independent.
    ``link_injection_bytes_per_s`` (default empty): one injection cap per
    entry of the fabric's ``links``, applied to every GPU port wired with that
    link, unsplit (0 = link-limited); it replaces the split GPU-wide cap, so
    a GPU's NVLink and PCIe ports can have different DMA limits (the
    collective runner fills it on graph fabrics: docs/fabrics.md). Host
    endpoints are never capped by it.
    NVIDIA does not publish these limits; the defaults are assumed.
    """

    payload_bytes: int = Field(default=256, ge=1)
    max_outstanding_packets: int = Field(default=0, ge=0)
    injection_bytes_per_s: int = Field(default=0, ge=0)
    injection_packet_overhead_bytes: int = Field(default=0, ge=0, le=1 << 16)
    ejection_bytes_per_s: int = Field(default=0, ge=0)
    link_injection_bytes_per_s: tuple[Annotated[int, Field(ge=0, lt=1 << 63)], ...] = ()


class SwitchParams(Spec):
    """Parameters shared by a fabric's switch chips (NVSwitch internals are not
    public; all assumed). Ports come from the wiring; ``clock_ghz = 0`` derives
    the clock so that one flit per port per cycle equals the link rate;
    ``buffer_per_vc_flits = 0`` uses the link's ``credits_per_vc_flits``."""

    allocator: str = "islip"
    iterations: int = Field(default=1, ge=1)
    queueing: Literal["voq", "fifo"] = "voq"
    speedup: int = Field(default=1, ge=1)
    pipeline_latency_cycles: int = Field(default=0, ge=0)
    buffer_per_vc_flits: int = Field(default=0, ge=0)
    output_buffer_per_vc_flits: int = Field(default=0, ge=0)
    clock_ghz: float = Field(default=0.0, ge=0.0)
    #: The chips reduce and multicast (NVLink SHARP, "NVLS"): NVSwitch gen3 and
    #: later (Hopper+; NVIDIA Hopper architecture page). Set by the H100, B200
    #: and NVL72 presets; the NVLS collective algorithm needs it.
    nvls: bool = False


class Wire(Spec):
    """GPU ``gpu`` port ``gpu_port`` <-> switch ``switch`` port ``switch_port``,
    using ``links[link]`` (and ``links[switch_link]`` at the switch end, which
    must be the same spec)."""

    gpu: int = Field(ge=0)
    gpu_port: int = Field(ge=0)
    switch: int = Field(ge=0)
    switch_port: int = Field(ge=0)
    link: int = Field(default=0, ge=0)
    switch_link: int | None = None


ElementKind = Literal["nvswitch", "pcie_switch", "root_complex", "nic", "ethernet", "infiniband", "bridge"]
"""What a switching element is (docs/graph.md): every kind runs the same
cycle-level switch core with its own :class:`SwitchParams`."""


class SwitchKind(Spec):
    """One kind of switching element of a graph fabric (mirrors ``SwitchKind``
    in ``rust/src/fabric/spec.rs``).

    ``kind``: :data:`ElementKind`. ``params``: its switch-core parameters
    (``clock_ghz = 0`` derives the clock from its fastest link; buffers 0 =
    the links' credits). ``allow_p2p = False``: GPU -> GPU (peer-to-peer)
    packets may not cross it (a P2P transfer routed across it is refused with a
    ConfigError naming it; host traffic may cross). ``nvls``: the element can
    reduce and multicast. A NIC has a PCIe side (wires/trunks to GPUs, PCIe
    switches, root complexes) and a network side (trunks to an Ethernet or
    InfiniBand switch); an NVLink ``bridge`` joins two GPU ports.
    """

    name: str
    kind: ElementKind
    params: SwitchParams = SwitchParams()
    allow_p2p: bool = True
    nvls: bool = False


class Trunk(Spec):
    """A cable between two switching elements, both directions: element ``a``
    port ``a_port`` <-> element ``b`` port ``b_port``, using ``links[link]``
    (and ``links[b_link]`` at end b, which must be the same spec)."""

    a: int = Field(ge=0)
    a_port: int = Field(ge=0)
    b: int = Field(ge=0)
    b_port: int = Field(ge=0)
    link: int = Field(default=0, ge=0)
    b_link: int | None = None
    dateline: int | None = Field(default=None, ge=0)
    """Torus dimension whose dateline this trunk is (both directions), or
    None. A packet's VC class has bit ``d`` set iff its route crosses a
    dateline of dimension ``d``; that keeps dimension-order routing on a torus
    deadlock-free (docs/graph.md, "Tori"). Needs links with at least
    ``2**dims`` VCs, one route per (element, destination), and no faults."""


class StaticRoute(Spec):
    """A routing-table entry fixed by the user: at element ``switch``,
    packets for endpoint ``dst`` leave by ``ports`` (spread round-robin),
    replacing the shortest-path ECMP set. For deadlock-free routing on meshes
    and tori (dimension order): shortest-path ECMP there has cyclic channel
    dependencies and, credit-based like any lossless network, can deadlock
    under load. Validated: wired ports, no route loop, no dead end."""

    switch: int = Field(ge=0)
    dst: int = Field(ge=0)
    ports: tuple[int, ...]


Spray = Literal["round_robin", "hash", "adaptive"]

Fidelity = Literal["packet", "flow", "auto"]
"""How finely a fabric is simulated: ``packet`` (cycle-level switches, the
reference), ``flow`` (fluid max-min sharing on the same graph, validated
against packet level: docs/fidelity.md) or ``auto`` (flow level where that
validation holds, packet level where the run is credit- or arbitration-bound;
every result says which ran and why)."""
MAX_FAULT_PS = 1 << 62
"""Latest fault time accepted, ps (the bound on transfer start times)."""


class CounterSpec(Spec):
    """Time-resolved counters of a packet-level run (``FabricSpec.counters``):
    every ``interval_ps`` the engine records, per switch port, the flits in
    its input buffer (queue depth), the downstream credits its output has
    in use and the flits it sent since the last sample, and per endpoint
    port the credits its uplink has in use.

    At most ``max_samples`` samples are kept: when the buffer is full every
    other sample is dropped and the interval doubles, so any run is covered
    end to end by equally spaced samples in a buffer allocated once
    (``max_samples x (3 x switch ports + endpoint ports) x 4`` bytes, at most
    2^25 values). Sampling is exact (state is constant between events). Flow
    level has no queues or credits: its results carry no counters.
    """

    interval_ps: int = Field(ge=1)
    max_samples: int = Field(default=512, ge=2, le=1 << 25)


class Fault(Spec):
    """A component that dies at ``at_ps`` (ps from the start of the run) and
    stays dead (mirrors ``Fault`` in ``rust/src/fabric/spec.rs``).

    ``kind``: ``"link"`` (the wire of GPU ``gpu`` port ``port``, both
    directions), ``"plane"`` (switch chip ``switch`` and all its wires: one of
    NVL72's 18 planes), or ``"nic"`` (switching element ``nic`` of kind
    ``nic`` in a graph fabric, with its wires and trunks). Traffic started
    later avoids the dead part (ECMP and spraying skip it);
    packets inside it at that moment are replayed end to end by their source
    after its replay timer (``ReplaySpec.timeout_ps``, default 1 us).

    Raises:
        ConfigError: a missing or extra id for the kind, a negative time or one
            beyond 2^62 ps; unknown ids and faults that leave two GPUs without
            a live switch are rejected by the fabric that holds them.
    """

    kind: Literal["link", "plane", "nic"]
    at_ps: int = Field(ge=0, le=MAX_FAULT_PS, strict=True)
    gpu: int | None = Field(default=None, ge=0, strict=True)
    port: int | None = Field(default=None, ge=0, strict=True)
    switch: int | None = Field(default=None, ge=0, strict=True)
    nic: int | None = Field(default=None, ge=0, strict=True)

    @field_validator("at_ps", "gpu", "port", "switch", "nic", mode="before")
    @classmethod
    def _numpy_ints(cls, v: Any) -> Any:
        # Strict ints (no bools, strings or floats), but numpy integers are ints.
        return int(v) if isinstance(v, np.integer) else v

    @model_validator(mode="after")
    def _ids_for_kind(self) -> "Fault":
        need = {"link": ("gpu", "port"), "plane": ("switch",), "nic": ("nic",)}[self.kind]
        for name in ("gpu", "port", "switch", "nic"):
            v = getattr(self, name)
            if name in need and v is None:
                raise ConfigError(f"Fault.{name} = None: a {self.kind!r} fault needs {' and '.join(need)}")
            if name not in need and v is not None:
                raise ConfigError(f"Fault.{name} = {v!r}: not a field of a {self.kind!r} fault (it takes {', '.join(need)})")
        return self


class FabricSpec(Spec):
    """A fabric: endpoints (GPUs, then ``hosts`` host-memory endpoints) wired
    to switching elements, elements joined by ``trunks``. Without trunks,
    kinds or hosts it is one switch layer (the NVSwitch presets); with them a
    graph routed by destination over shortest paths with ECMP
    (docs/graph.md): ``switch_kinds`` lists kinds of element
    (:class:`SwitchKind`) and ``switch_kind`` gives each switch's kind index.

    Speed levers: ``sim_packet_bytes`` coalesces protocol packets into one
    simulated packet (header flits still charged per protocol packet);
    ``sim_packets_per_lane`` > 0 sizes each transfer's simulated packets so
    every port it uses carries about that many (between ``sim_packet_bytes``
    and ``max_sim_packet_bytes``), so cost grows with transfers, not bytes;
    ``fold_planes`` simulates one of P identical planes when that is exact;
    ``fidelity`` = ``"flow"`` or ``"auto"`` runs fluid flows instead of
    packets (:data:`Fidelity`).

    Raises:
        ConfigError: a GPU or switch port wired twice, a disconnected GPU, a
            pair of GPUs with no common switch (graph: no path), ids out of
            range, link specs that differ at the two ends of a wire or trunk,
            a port used twice, a NIC with no switch on its network side, bad
            sizes. The message names the element.
    """

    name: str = "custom"
    gpus: int = Field(ge=1)
    gpu_ports: int = Field(ge=1)
    switches: int = Field(ge=0)
    switch_ports: int = Field(ge=0)
    links: tuple[LinkSpec, ...]
    wires: tuple[Wire, ...]
    gpu: GpuInjection = GpuInjection()
    switch: SwitchParams = SwitchParams()
    spray: Spray = "round_robin"
    sim_packet_bytes: int = Field(default=0, ge=0)
    sim_packets_per_lane: int = Field(default=0, ge=0)
    max_sim_packet_bytes: int = Field(default=256 << 10, ge=1)
    fold_planes: bool = True
    fidelity: Fidelity = "packet"
    #: Components that die during the run (:class:`Fault`); none by default.
    faults: tuple[Fault, ...] = ()
    #: Host-memory endpoints (ids gpus..gpus+hosts); ``Wire.gpu`` indexes endpoints.
    hosts: int = Field(default=0, ge=0)
    switch_kinds: tuple[SwitchKind, ...] = ()
    #: One index into ``switch_kinds`` per switch (empty iff switch_kinds is).
    switch_kind: tuple[int, ...] = ()
    trunks: tuple[Trunk, ...] = ()
    static_routes: tuple[StaticRoute, ...] = ()
    #: Time-resolved queue-depth / credit counters (:class:`CounterSpec`); None: off.
    counters: CounterSpec | None = None

    @property
    def endpoints(self) -> int:
        """GPUs plus hosts: the ids transfers may use."""
        return self.gpus + self.hosts

    @property
    def is_graph(self) -> bool:
        """True for a graph fabric (trunks, kinds or hosts), False for one switch layer."""
        return bool(self.hosts or self.switch_kinds or self.trunks or self.static_routes)

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form; graph fields left out when unused (so one-layer
        fabrics keep the dict they always had)."""
        d = super().to_dict()
        for k in ("hosts", "switch_kinds", "switch_kind", "trunks", "static_routes"):
            if not d.get(k):
                d.pop(k, None)
        return d

    @model_validator(mode="after")
    def _check_in_engine(self) -> "FabricSpec":
        self._core_fabric()
        return self

    def _core_fabric(self) -> Any:
        """The engine's converted and validated copy of this spec
        (``_core.CompiledFabric``; what the bindings take in place of
        :meth:`core_dict`), made on construction and reused by every run.
        Reused only while every field is the very object it was made from
        (fields are immutable: frozen specs and tuples), so a copy with any
        field changed (``replace``, ``model_copy(update=...)``,
        ``with_faults``) gets its own; so does a top-level field swapped with
        ``object.__setattr__``. Not detected: a nested spec mutated in place
        through ``object.__setattr__`` (``spec.links[0]``'s ``propagation_ps``,
        say), which bypasses the frozen model; build a new spec instead.

        Raises:
            ConfigError: as the constructor (the engine's checks).
        """
        key = id(self)
        vals = tuple(self.__dict__.values())
        e = _COMPILED.get(key)
        if e is not None and e[0]() is self and len(e[1]) == len(vals) and all(a is b for a, b in zip(e[1], vals)):
            return e[2]
        c = _core.fabric_compile(self.core_dict())
        _COMPILED[key] = (weakref.ref(self, lambda _r, k=key: _COMPILED.pop(k, None)), vals, c)
        return c

    def core_dict(self) -> dict[str, Any]:
        """The dict the engine takes (no ``name``; no ``faults`` key when there are none)."""
        d = self.to_dict()
        d.pop("name", None)
        if not d.get("faults"):
            d.pop("faults", None)
        return d

    def with_faults(self, faults: Sequence["Fault | dict[str, Any]"] = (), *, ber: float | None = None,
                    **replay: Any) -> "FabricSpec":
        """A copy with ``faults`` added and, if ``ber`` (or other
        :class:`ReplaySpec` fields such as ``replay_buffer_bytes``, ``seed``)
        is given, every link spec's ``replay`` set (fields not given keep the
        link's own values).

        Raises:
            ConfigError: invalid faults or replay fields (see :class:`Fault`,
                :class:`ReplaySpec`), unknown ids, every plane dead.
        """
        if isinstance(faults, (dict, Fault)):
            faults = [faults]
        fs = tuple(f if isinstance(f, Fault) else Fault.from_dict(f) for f in faults)  # type: ignore[misc]
        links = self.links
        if ber is not None or replay:
            if ber is not None:
                replay["ber"] = ber
            links = tuple(l.replace(replay=ReplaySpec(**{**(l.replay.to_dict() if l.replay else {}),  # type: ignore[misc]
                                                          **replay})) for l in links)
        return self.replace(faults=self.faults + fs, links=links)  # type: ignore[return-value]

    @classmethod
    def from_toml(cls, path: str | Path) -> "FabricSpec":
        """Read a fabric from TOML: either a full spec (``gpus``, ``gpu_ports``,
        ``switches``, ``switch_ports``, ``links``, ``wires``) or the compact form
        of :func:`uniform_fabric` (``gpus``, ``links_per_switch``, ``link``).

        Raises:
            ConfigError: unreadable file or invalid content.
        """
        from flitsim._toml import read_toml

        data = read_toml(path, "fabric file")
        return fabric_from_dict(data)


def uniform_fabric(gpus: int, links_per_switch: int | Sequence[int], link: LinkSpec | str = "nvlink5",
                   *, switch_ports: int | None = None, name: str = "custom", **options: Any) -> FabricSpec:
    """A fabric where every GPU has ``links_per_switch[s]`` links to switch s.

    GPU ports are numbered switch by switch (ports of switch 0 first); switch
    ports GPU by GPU. ``links_per_switch`` may be an int (same for every
    switch; then the switch count is ``gpu_ports / int``... give a list to be
    explicit). Other keyword options are FabricSpec fields (``gpu``, ``switch``,
    ``spray``, ``sim_packet_bytes``, ``fold_planes``).

    Raises:
        ConfigError: non-positive counts or a switch with too few ports.
    """
    if isinstance(links_per_switch, int):
        raise ConfigError(f"links_per_switch = {links_per_switch!r}: give a list, one count per switch "
                          "(e.g. [1] * 18 for NVL72, [5, 4, 4, 5] for HGX H100)")
    lps = list(links_per_switch)
    if not lps or any(isinstance(x, bool) or not isinstance(x, int) or x < 1 for x in lps):
        raise ConfigError(f"links_per_switch = {lps!r}: expected a non-empty list of integers >= 1")
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise ConfigError(f"gpus = {gpus!r}: expected an integer >= 1")
    need = gpus * max(lps)
    ports = need if switch_ports is None else switch_ports
    if ports < need:
        raise ConfigError(f"switch_ports = {ports}: at least {need} (gpus x max(links_per_switch))")
    # the engine's bounds (rust/src/fabric/spec.rs), checked before gpus x sum(lps) wires are built in Python
    if ports > 4096:
        raise ConfigError(f"switch_ports = {ports}: 0..=4096 ports per switch (gpus x max(links_per_switch) = {need})")
    if sum(lps) > 256:
        raise ConfigError(f"gpu_ports = {sum(lps)}: 1..=256 ports per GPU (sum(links_per_switch))")
    if isinstance(link, str):
        link = link_preset(link)
    wires = []
    for g in range(gpus):
        port = 0
        for s, n in enumerate(lps):
            for j in range(n):
                wires.append(Wire(gpu=g, gpu_port=port, switch=s, switch_port=g * n + j))
                port += 1
    return FabricSpec(name=name, gpus=gpus, gpu_ports=sum(lps), switches=len(lps), switch_ports=ports,
                      links=(link,), wires=tuple(wires), **options)


def fabric_from_dict(data: Any) -> FabricSpec:
    """Build a fabric from a plain dict (full or compact form; see
    :meth:`FabricSpec.from_toml`). A ``link`` given as a string names a preset.

    Raises:
        ConfigError: invalid content (the message names the key).
    """
    if not isinstance(data, dict):
        raise ConfigError(f"fabric = {data!r}: expected a table/dict")
    d = dict(data)
    if "links_per_switch" in d:
        link = d.pop("link", "nvlink5")
        if isinstance(link, dict):
            link = LinkSpec.from_dict(link)
        try:
            return uniform_fabric(d.pop("gpus", 0), d.pop("links_per_switch"), link, **d)
        except TypeError as e:
            raise ConfigError(f"fabric: {e}") from None
    if "links" in d:
        d["links"] = tuple(link_preset(x) if isinstance(x, str) else x for x in d["links"])
    return FabricSpec(**d)


def _with_nvls(options: dict[str, Any]) -> dict[str, Any]:
    """NVSwitch gen3+ presets: switch.nvls defaults to True (a user's switch
    options are kept; nvls only filled in when not given)."""
    sw = options.get("switch")
    if sw is None:
        options["switch"] = SwitchParams(nvls=True)
    elif isinstance(sw, dict) and "nvls" not in sw:
        options["switch"] = {**sw, "nvls": True}
    return options


def gb200_nvl72(**options: Any) -> FabricSpec:
    """GB200 NVL72 (see module docstring for sources); NVLS-capable switches."""
    return uniform_fabric(72, [1] * 18, "nvlink5", switch_ports=72, name="gb200-nvl72", **_with_nvls(options))


def hgx_b200(**options: Any) -> FabricSpec:
    """HGX B200: 8 GPUs, 2 chips, 9 links per GPU per chip (assumed split); NVLS."""
    return uniform_fabric(8, [9, 9], "nvlink5", switch_ports=72, name="hgx-b200", **_with_nvls(options))


def hgx_h100(**options: Any) -> FabricSpec:
    """HGX/DGX H100: 8 GPUs, 4 NVSwitch gen3 chips, 5/4/4/5 links per GPU; NVLS."""
    return uniform_fabric(8, [5, 4, 4, 5], "nvlink4", switch_ports=64, name="hgx-h100", **_with_nvls(options))


def dgx_a100(**options: Any) -> FabricSpec:
    """DGX/HGX A100: 8 GPUs, 6 NVSwitch gen2 chips, 2 links per GPU per chip."""
    return uniform_fabric(8, [2] * 6, "nvlink3", switch_ports=36, name="dgx-a100", **options)


FABRIC_PRESETS: dict[str, Callable[..., FabricSpec]] = {
    "gb200-nvl72": gb200_nvl72, "nvl72": gb200_nvl72, "hgx-b200": hgx_b200, "hgx-h100": hgx_h100,
    "dgx-h100": hgx_h100, "dgx-a100": dgx_a100, "hgx-a100": dgx_a100,
}


def fabric_preset(name: str, **options: Any) -> FabricSpec:
    """A fabric preset by name (``gb200-nvl72``, ``hgx-b200``, ``hgx-h100``,
    ``dgx-a100``; multi-tier, :mod:`flitsim.hardware.tier_presets` and
    docs/fabrics.md: ``pcie-8xl20``, ``pcie-8xl40``, ``pcie-4xa100``,
    ``pcie-2xh100-nvbridge``, ``eth-2x8xl40``, ``ib-4xhgx-h100``,
    ``gb200-nvl576``); ``options`` override FabricSpec fields (multi-tier
    presets also take their own: ``upi_links``, ``p2p_through_cpu`` (default
    False: NCCL's P2P level PXB, no P2P through a root complex; True =
    NCCL_P2P_LEVEL=SYS), ``gpu_p2p`` (default True: the GPU supports PCIe
    P2P), ``nics_per_node``, ``nic_gbps``).

    Raises:
        ConfigError: unknown name (the message lists the known ones).
    """
    key = str(name).lower().replace("_", "-")
    if key not in FABRIC_PRESETS:
        raise ConfigError(f"fabric preset = {name!r}: expected one of {sorted(FABRIC_PRESETS)}")
    fixed = {"gpus", "name", "switch_ports", "wires", "switches", "gpu_ports"} & set(options)
    if fixed:
        # The preset's wiring depends on these; overriding one would not rewire it.
        raise ConfigError(f"fabric preset {key!r} option = {sorted(fixed)[0]!r}: fixed by the preset "
                          "(build a FabricSpec with uniform_fabric(...) for another size)")
    return FABRIC_PRESETS[key](**options)


def as_fabric(fabric: "FabricSpec | str | os.PathLike[str]") -> FabricSpec:
    """A FabricSpec from a spec, a preset name or a fabric TOML file (a path ending in ``.toml``).

    The one place names and files become specs, so every command and function that takes a
    fabric accepts the same three forms.

    Raises:
        ConfigError: an unknown preset name, an invalid or missing TOML file, or any other type.
    """
    if isinstance(fabric, os.PathLike) or (isinstance(fabric, str) and fabric.lower().endswith(".toml")):
        return FabricSpec.from_toml(os.fspath(fabric))
    if isinstance(fabric, str):
        return fabric_preset(fabric)
    if not isinstance(fabric, FabricSpec):
        shown = repr(fabric)
        if len(shown) > 80:  # a whole fabric dict would bury the rule under thousands of characters
            shown = f"<{type(fabric).__name__}, {len(shown)} characters>"
        hint = " (a dict: flitsim.hardware.fabric_from_dict(d))" if isinstance(fabric, dict) else ""
        raise ConfigError(f"fabric = {shown}: expected a FabricSpec, a preset name or a fabric TOML path{hint}")
    return fabric

