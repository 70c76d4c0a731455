"""Device placement: which GPUs of a fabric form a pipeline stage, a CFG
branch, a ring or an Ulysses / tensor-parallel group.

A hybrid schedule is a grid of parallel dimensions, outermost first, e.g.
``(("pp", K), ("cfg", c), ("ring", r), ("ulysses", u))``. Placement maps the
grid onto device ids. The default (``placement="domain"``) keeps the innermost
dimensions, which communicate most (Ulysses' four all-to-alls and tensor
parallel's two all-reduces per layer), inside the fabric's fastest domain:

- the domains are read from the fabric (:func:`fabric_domains`, computed by
  the engine from the routes): GPUs whose routes to each other cross no
  network element (NIC, Ethernet / InfiniBand switch) form one domain (an
  NVSwitch node, an NVL72 rack or a two-tier NVLink system, a PCIe box);
  network elements separate domains (nodes). A one-tier fabric (every preset of one
  NVSwitch layer) is one domain. A fabric may also name its
  domains itself (a ``domains`` attribute: lists of GPU ids).
- device ids are ordered domain by domain and the grid is filled with its
  innermost dimension fastest, so a group of the innermost dimension(s) whose
  size divides a domain's never straddles two domains.

``placement="linear"`` fills the grid with ids 0, 1, 2, ... (no domain
reordering); explicit ``devices=[...]`` fill it in the order given (grid
order, outermost dimension slowest), whatever the rule; ``placement=[[...], ...]`` (nested lists, grid shape)
gives every id explicitly. :func:`place` says, per dimension, whether any of
its groups crosses domains (``crosses``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from flitsim.errors import config_error

__all__ = ["Placement", "fabric_domains", "place", "PLACEMENTS", "NETWORK_KINDS"]

PLACEMENTS = ("domain", "linear")
"""Named placement rules (or an explicit nested list of ids)."""


NETWORK_KINDS = ("nic", "ethernet", "infiniband")
"""Switching-element kinds that join domains over a network (scale-out); the
fastest domain stops at them."""


def fabric_domains(fabric: Any) -> list[list[int]]:
    """The fabric's fastest domains as lists of GPU ids (see the module
    docstring), sorted by their first id; ``[[0 .. gpus-1]]`` for a one-tier fabric.

    Rule (computed by the engine, its one home: ``Topology::gpu_domains`` in
    rust/src/fabric/topology.rs): GPUs whose routes to each other cross no
    element of a network kind (:data:`NETWORK_KINDS`: NICs, Ethernet /
    InfiniBand switches) share a domain, transitively. A fabric may name its
    domains itself (a ``domains`` attribute).

    ``fabric``: a FabricSpec, a preset name, or None (returns ``[]``).

    Raises:
        ConfigError: an invalid fabric.
    """
    if fabric is None:
        return []
    given = getattr(fabric, "domains", None)
    if given:
        return sorted([sorted(int(g) for g in d) for d in given], key=lambda d: d[0])
    from flitsim import _core
    from flitsim.hardware.fabric import as_fabric

    f = as_fabric(fabric)
    kinds = {k.kind for k in f.switch_kinds}
    if not kinds & set(NETWORK_KINDS):
        # No network element: every route stays inside (validation makes every GPU reach every other).
        return [list(range(f.gpus))]
    return [list(d) for d in _core.fabric_domains(f.core_dict())]


@dataclass(frozen=True)
class Placement:
    """A placed grid of parallel dimensions.

    Attributes:
        dims: (name, degree) outermost first.
        grid: int array of shape (degrees...), device ids.
        rule: ``"domain"``, ``"linear"`` or ``"explicit"``.
        domains: the fabric's domains used (lists of GPU ids; [] without a fabric).
        crosses: per dimension name, True when some group along it spans two domains.
    """

    dims: tuple[tuple[str, int], ...]
    grid: np.ndarray
    rule: str
    domains: tuple[tuple[int, ...], ...]
    crosses: dict[str, bool]

    @property
    def devices(self) -> list[int]:
        """Device ids in grid order (outermost dimension slowest)."""
        return [int(x) for x in self.grid.reshape(-1)]

    def groups(self, dim: str) -> list[list[int]]:
        """Every group along ``dim`` (the other coordinates fixed), in grid order."""
        names = [d for d, _ in self.dims]
        ax = names.index(dim)
        g = np.moveaxis(self.grid, ax, -1).reshape(-1, self.grid.shape[ax])
        return [[int(x) for x in row] for row in g]

    def sub(self, **fixed: int) -> np.ndarray:
        """The sub-grid with the named dimensions fixed to an index."""
        idx = tuple(fixed.get(d, slice(None)) for d, _ in self.dims)
        return self.grid[idx]

    def to_dict(self) -> dict[str, Any]:
        return {"dims": [list(d) for d in self.dims], "rule": self.rule, "grid": self.grid.tolist(),
                "crosses_domains": dict(self.crosses)}


def place(dims: Sequence[tuple[str, int]], *, devices: Any = None, fabric: Any = None,
          fabric_devices: int | None = None, placement: Any = "domain") -> tuple[Placement, int]:
    """Place the grid ``dims`` (outermost first) on devices.

    Args:
        devices: None (ids 0..n-1, or the fabric's ids in domain order), a
            count, or a sequence of device ids (exactly the grid's size).
        fabric: FabricSpec / preset name (its domains; its GPU count bounds ids).
        fabric_devices: endpoints of the fabric (default: the fabric's GPUs, else max id + 1).
        placement: ``"domain"`` (default), ``"linear"``, or nested lists of ids of the grid's shape.

    Returns:
        (Placement, fabric size).

    Raises:
        ConfigError: a degree < 1; wrong device count (naming the degrees and
            their product), repeated ids, ids outside the fabric; a fabric with
            fewer GPUs than the grid needs; an unknown placement rule or an
            explicit grid of the wrong shape.
    """
    from flitsim.schedules.builder import check_int, resolve_devices

    dims = tuple((str(n), check_int(n, d)) for n, d in dims)
    need = int(np.prod([d for _, d in dims])) if dims else 1
    desc = " x ".join(f"{n}={d}" for n, d in dims) or "1"
    if fabric is not None and isinstance(fabric, str):
        from flitsim.hardware.fabric import as_fabric

        fabric = as_fabric(fabric)
    if fabric is not None and fabric_devices is None:
        fabric_devices = int(fabric.gpus)
    if fabric_devices is not None and need > int(fabric_devices):
        fname = getattr(fabric, "name", "the fabric")
        raise config_error("devices", need, f"a fabric with at least {need} GPUs for {desc}; {fname} has {fabric_devices}")
    doms = fabric_domains(fabric)
    shape = tuple(d for _, d in dims)
    if isinstance(placement, str) or placement is None:
        rule = placement or "domain"
        if rule not in PLACEMENTS:
            raise config_error("placement", placement, f"one of {list(PLACEMENTS)} or nested lists of device ids")
        if devices is None:
            ids = list(range(need))
            if rule == "domain" and doms:
                order = [g for d in doms for g in d]
                ids = order[:need]
        elif isinstance(devices, (int, np.integer)) and not isinstance(devices, bool):
            if int(devices) != need:
                raise config_error("devices", devices, f"{need} devices = {desc} (the product of the degrees)")
            ids = list(range(need))
            if rule == "domain" and doms:
                ids = [g for d in doms for g in d][:need]
        else:
            try:
                ids = list(devices)
            except TypeError:
                raise config_error("devices", devices, "a device count or a sequence of device ids") from None
            if len(ids) != need:
                raise config_error("devices", devices, f"{need} devices = {desc} (the product of the degrees)")
            # explicit ids are the placement, in grid order: never reordered
        ids, size = resolve_devices(ids, need, fabric_devices)
        grid = np.array(ids, np.int64).reshape(shape)
    else:
        rule = "explicit"
        try:
            grid = np.array(placement, dtype=object)
            squeeze = lambda sh: tuple(x for x in sh if x != 1)  # noqa: E731  (degree-1 dimensions may be left out)
            if squeeze(grid.shape) != squeeze(shape):
                raise ValueError
            grid = grid.reshape(shape)
            flat = [int(x) if isinstance(x, (int, np.integer)) and not isinstance(x, bool) else x
                    for x in grid.reshape(-1)]
        except (ValueError, TypeError):
            raise config_error("placement", placement, f"nested lists of device ids of shape {list(shape)} ({desc})") from None
        ids, size = resolve_devices(flat, need, fabric_devices)
        grid = np.array(ids, np.int64).reshape(shape)
    dom_of = {g: i for i, d in enumerate(doms) for g in d}
    crosses = {}
    for ax, (name, deg) in enumerate(dims):
        rows = np.moveaxis(grid, ax, -1).reshape(-1, deg)
        crosses[name] = bool(any(len({dom_of.get(int(x), -1) for x in r}) > 1 for r in rows)) if doms else False
    return Placement(dims, grid, rule, tuple(tuple(d) for d in doms), crosses), size
