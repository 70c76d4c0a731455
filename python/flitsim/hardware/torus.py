"""k-ary n-cubes (tori) and meshes built from the fabric graph, with
dimension-order routing and, on a torus, dateline virtual channels.

Node ``i`` has coordinates ``c_d = (i // k**d) % k`` for ``d = 0..n-1``; it is
one routing element (element ``i``) with one endpoint (GPU ``i``) on
``endpoint_ports`` links. Element ports ``2d`` / ``2d + 1`` go to the ``+`` /
``-`` neighbour in dimension ``d``; ports ``2n ..`` to the GPU.

Routing is dimension order (dimension 0 first), minimal: on a torus the
shorter way round each ring; a tie (offset ``k/2``) goes ``+`` from even and
``-`` from odd coordinates, which splits tie traffic evenly between the two
directions (BookSim's ``dim_order_torus`` breaks it at random). On a mesh
dimension-order routing is deadlock-free (Dally & Seitz, IEEE Trans.
Computers 1987). On a torus the wrap-around trunk of every ring (coordinate
``k-1`` <-> ``0``) is a dateline (:attr:`Trunk.dateline` = the dimension),
which puts dateline-crossing routes on their own VC class and breaks the
cyclic dependency around each ring (docs/graph.md, "Tori").
"""

from __future__ import annotations

from flitsim.errors import config_error
from flitsim.hardware.fabric import FabricSpec, StaticRoute, SwitchKind, Trunk, Wire
from flitsim.hardware.link_spec import LinkSpec

__all__ = ["kary_ncube"]


def _next_port(cur: int, dst: int, k: int, n: int, torus: bool) -> int | None:
    """Output port (2d: +, 2d+1: -) of the first dimension in which ``cur``
    and ``dst`` differ, or None when they are the same node."""
    for d in range(n):
        a, b = (cur // k ** d) % k, (dst // k ** d) % k
        if a == b:
            continue
        if not torus:
            return 2 * d if b > a else 2 * d + 1
        fwd = (b - a) % k
        if fwd * 2 == k:
            return 2 * d if a % 2 == 0 else 2 * d + 1
        return 2 * d if fwd * 2 < k else 2 * d + 1
    return None


def kary_ncube(k: int, n: int, *, torus: bool = True, link: LinkSpec | str | None = None,
               endpoint_ports: int = 1, name: str | None = None, **spec: object) -> FabricSpec:
    """A k-ary n-cube (``torus=True``) or k x ... x k mesh as a graph fabric.

    Args:
        k: nodes per dimension (>= 2; a torus needs >= 3, with k = 2 its
            wrap-around link would double the one link between the two nodes).
        n: dimensions (1..6: a torus needs ``2**n`` VC classes, at most 64 VCs).
        torus: wrap-around links with datelines (else a mesh).
        link: the spec (or link preset name) of every link (default NVLink 4, 8 VCs, one direction
            25 GB/s payload); a torus needs ``link.vcs >= 2**n``.
        endpoint_ports: links from each GPU to its node (its injection and
            ejection bandwidth in links).
        name: spec name (default ``torus-{k}ary{n}`` / ``mesh-{k}ary{n}``).
        **spec: other :class:`FabricSpec` fields (``gpu``, ``switch``, ...).

    Returns:
        A :class:`FabricSpec` with ``k**n`` GPUs and elements, ``2n +
        endpoint_ports`` ports per element, dimension-order ``static_routes``.

    Raises:
        ConfigError: ``k``, ``n`` or ``endpoint_ports`` out of range, or a
            link with fewer than ``2**n`` VCs on a torus (names the field).
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 2 or (torus and k < 3):
        raise config_error("k", k, "an integer >= 2 (>= 3 for a torus)")
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 6:
        raise config_error("n", n, "an integer in 1..=6 (dimensions)")
    if isinstance(endpoint_ports, bool) or not isinstance(endpoint_ports, int) or endpoint_ports < 1:
        raise config_error("endpoint_ports", endpoint_ports, "an integer >= 1")
    nodes = k ** n
    if nodes > 4096:
        raise config_error("k**n", nodes, "at most 4096 nodes (the routing table has nodes^2 entries)")
    if link is None:
        from flitsim.hardware.links import nvlink4

        link = nvlink4()
    elif isinstance(link, str):
        from flitsim.hardware.links import link_preset

        link = link_preset(link)
    elif not isinstance(link, LinkSpec):
        raise config_error("link", link, "a LinkSpec or a link preset name (nvlink4, pcie4x16, ...)")
    if torus and link.vcs < 2 ** n:
        raise config_error("link.vcs", link.vcs, f"at least 2**n = {2 ** n} VCs on a {n}-dimensional torus (one per dateline class)")
    ep0 = 2 * n
    wires = tuple(Wire(gpu=s, gpu_port=j, switch=s, switch_port=ep0 + j) for s in range(nodes) for j in range(endpoint_ports))
    trunks = []
    for s in range(nodes):
        for d in range(n):
            c = (s // k ** d) % k
            if c + 1 < k:
                trunks.append(Trunk(a=s, a_port=2 * d, b=s + k ** d, b_port=2 * d + 1))
            elif torus:
                trunks.append(Trunk(a=s, a_port=2 * d, b=s - (k - 1) * k ** d, b_port=2 * d + 1, dateline=d))
    eject = tuple(range(ep0, ep0 + endpoint_ports))
    routes = []
    for s in range(nodes):
        for dst in range(nodes):
            o = _next_port(s, dst, k, n, torus)
            routes.append(StaticRoute(switch=s, dst=dst, ports=eject if o is None else (o,)))
    kind = "torus" if torus else "mesh"
    return FabricSpec(name=name or f"{kind}-{k}ary{n}", gpus=nodes, gpu_ports=endpoint_ports, switches=nodes,
                      switch_ports=ep0 + endpoint_ports, links=(link,), wires=wires,
                      switch_kinds=(SwitchKind(name="router", kind="nvswitch"),), switch_kind=(0,) * nodes,
                      trunks=tuple(trunks), static_routes=tuple(routes), **spec)  # type: ignore[arg-type]
