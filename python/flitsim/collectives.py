"""Collectives on a fabric, reported the way nccl-tests reports them.

:func:`collective` runs one collective (lowered to a transfer DAG inside the
engine: no step crosses into Python); :func:`nccl_tests` sweeps sizes like
``all_reduce_perf -b 8 -e 8G -f 2`` and returns the familiar table.

nccl-tests definitions (nccl-tests PERFORMANCE.md): algbw = size / time;
busbw = algbw x factor, factor = 2(n-1)/n all_reduce, (n-1)/n all_gather,
reduce_scatter, all_to_all, 1 broadcast, reduce, send/recv. For all_gather
and reduce_scatter, size is the whole gathered buffer (n x per-rank part).

Calibrated defaults (docs/collectives.md): GPU injection 0.849 x link rate
with 8 bytes of overhead per protocol packet (NCCL topo.h SM90 20.6 GB/s per
link at 256 B, ~20 GB/s at 128 B), NVLS engine 0.672 x link rate, NVLS latency
3.07 us x n, host launch 2.89 us; NCCL tuning.cc latencies and protocol rates.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from flitsim._notebook import notebook
from flitsim import _core
from flitsim.errors import ConfigError, check_int
from flitsim.hardware.fabric import FabricSpec, as_fabric
from flitsim.hardware.gpus import GPU_PRESETS, fabric_gpu

if TYPE_CHECKING:
    import pandas as pd

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce", "sendrecv")
ALGORITHMS = ("auto", "ring", "tree", "direct", "nvls", "hierarchical")
PROTOCOLS = ("auto", "simple", "ll128", "ll")
_DTYPES = {"float": 4, "float32": 4, "half": 2, "float16": 2, "bfloat16": 2, "double": 8, "int8": 1, "int32": 4,
           "uint8": 1, "uint32": 4, "int64": 8, "uint64": 8, "f8e4m3": 1, "f8e5m2": 1}
# every name of nccl-tests' type column is accepted (a log's rows are simulated with their type); the
# two aliases are printed under nccl-tests' names
_NCCL_TYPE = {"float32": "float", "float16": "half"}

NCCL_TYPE_BYTES = {k: v for k, v in _DTYPES.items() if k not in _NCCL_TYPE}
"""Bytes per element of the names nccl-tests prints in its type column
(``test_typeNames`` in nccl-tests' src/common.cu)."""

PER_RANK_COUNT_OPS = ("all_gather", "reduce_scatter", "all_to_all")
"""Ops whose nccl-tests count column is per rank: nccl-tests prints
``paramcount``, which its ``*GetCollByteCount`` functions set to size /
(element bytes x ranks) for all_gather, reduce_scatter and alltoall and to
size / element bytes otherwise."""
_REDOP = {"all_reduce": "sum", "reduce_scatter": "sum", "reduce": "sum"}


def default_params() -> dict[str, Any]:
    """The calibrated collective parameters the engine uses by default
    (``link_efficiency``, ``nvls_efficiency``, latencies; docs/collectives.md)."""
    return dict(_core.collective_defaults())


def load_params(params: "str | os.PathLike[str] | dict[str, Any] | None", fabric: str | None = None) -> dict[str, Any]:
    """Collective parameters from a ``flitsim calibrate`` file (TOML with a
    ``[collective]`` table of CollectiveParams fields), a dict of them, or None
    (empty: the calibrated defaults). With ``fabric`` (the name of the fabric
    they are used on), a file that records another fabric (its top-level
    ``fabric = "..."``, written by ``flitsim calibrate``) is refused.

    Raises:
        ConfigError: an unreadable file, no ``[collective]`` table, an unknown
            field (the message lists the known ones), a file fitted on another fabric.
    """
    if params is None:
        return {}
    if isinstance(params, dict):
        d = dict(params)
    else:
        from flitsim._toml import read_toml

        t = read_toml(params, "params")
        if not isinstance(t.get("collective"), dict):
            raise ConfigError(f"params = {str(params)!r}: expected a [collective] table of collective parameters")
        d = dict(t["collective"])
        fitted = t.get("fabric")
        if fabric is not None and isinstance(fitted, str) and fitted != fabric:
            raise ConfigError(f"params = {str(params)!r}: fitted on fabric {fitted!r}, but used on fabric {fabric!r}; "
                              "calibrate on logs of that fabric (flitsim calibrate nccl-tests LOG -F <its preset or TOML file>)")
    known = set(default_params())
    bad = sorted(set(d) - known)
    if bad:
        raise ConfigError(f"params: unknown collective parameter(s) {bad}; known: {sorted(known)}")
    return d


def busbw_factor(op: str, n: int) -> float:
    """nccl-tests bus-bandwidth factor for ``op`` over ``n`` ranks."""
    op = _op(op)
    if op == "all_reduce":
        return 2 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    return 1.0


def _op(op: str) -> str:
    k = str(op).lower().replace("-", "_")
    k = {"allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter",
         "alltoall": "all_to_all", "send_recv": "sendrecv"}.get(k, k)
    if k not in OPS:
        raise ConfigError(f"kind = {op!r}: expected one of {list(OPS)}")
    return k


def _per_gpu_frame(r: "CollectiveResult") -> "pd.DataFrame":
    """Per fabric GPU: bytes the lowering sent / received and the bytes its links carried."""
    import pandas as pd

    return pd.DataFrame({"gpu": np.arange(len(r.bytes_sent)), "bytes_sent": r.bytes_sent,
                         "bytes_received": r.bytes_received, "link_bytes_sent": r.link_bytes_sent,
                         "link_bytes_received": r.link_bytes_received})


@notebook("op", "n", "nbytes", "time_us", "busbw_GBps", "algorithm", "protocol", frame=_per_gpu_frame)
@dataclass(frozen=True)
class CollectiveResult:
    """One collective.

    Attributes:
        op, n, nbytes: operation, group size, nccl-tests size in bytes.
        time_us: completion time; algbw_GBps = nbytes / time (1e9 B/s);
            busbw_GBps = algbw x nccl-tests factor.
        algorithm, protocol, channels, chunk_bytes: what ran (``auto`` resolved).
        bytes_sent, bytes_received: per GPU of the fabric, payload bytes over
            its links as the lowering counts them (protocol expansion
            included; NVLS loopback counted).
        link_bytes_sent, link_bytes_received: per GPU, payload bytes the
            fabric's GPU -> switch links actually carried (link statistics)
            and the bytes delivered to the GPU: the physics check of the above.
        stats: fabric statistics (packets, events: what was simulated, i.e.
            one plane / one rank when folded, see fold_reason; sim_packet_bytes,
            folded_planes, fold_reason, max_link_utilization,
            credit_exhaustion_episodes, arbitration_conflicts, transfers;
            ``link_class_payload_bytes``: on graph fabrics, payload bytes the
            switch-output links carried per link spec index, from link
            statistics: what each link class carried).
    """

    op: str
    n: int
    nbytes: int
    time_us: float
    algbw_GBps: float
    busbw_GBps: float
    algorithm: str
    protocol: str
    channels: int
    chunk_bytes: int
    bytes_sent: np.ndarray
    bytes_received: np.ndarray
    link_bytes_sent: np.ndarray
    link_bytes_received: np.ndarray
    stats: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """JSON-safe figures."""
        return {"op": self.op, "n": self.n, "nbytes": self.nbytes, "time_us": self.time_us,
                "algbw_GBps": self.algbw_GBps, "busbw_GBps": self.busbw_GBps, "algorithm": self.algorithm,
                "protocol": self.protocol, "channels": self.channels, "chunk_bytes": self.chunk_bytes,
                "max_bytes_sent_per_gpu": int(self.bytes_sent.max()) if self.bytes_sent.size else 0,
                **self.stats}


INJECTION_PACKET_OVERHEAD_BYTES = 8
"""Injection cost of a protocol packet beyond its payload, bytes (mirrors the
engine's ``collective::INJECTION_PACKET_OVERHEAD_BYTES``; docs/collectives.md)."""

MAX_BYTES = 1 << 36
"""Largest collective size accepted, bytes (64 GiB: beyond nccl-tests' usual
sweeps; the transfer DAG grows with the size)."""


def _params(fabric: FabricSpec, algorithm: str, protocol: str, channels: int | None, chunk_bytes: int | None,
            root: int, dtype: str, options: dict[str, Any]) -> dict[str, Any]:
    if algorithm not in ALGORITHMS:
        raise ConfigError(f"algorithm = {algorithm!r}: expected one of {list(ALGORITHMS)}")
    if protocol not in PROTOCOLS:
        raise ConfigError(f"protocol = {protocol!r}: expected one of {list(PROTOCOLS)}")
    if dtype not in _DTYPES:
        raise ConfigError(f"dtype = {dtype!r}: expected one of {sorted(_DTYPES)}")
    p: dict[str, Any] = {"algorithm": algorithm, "protocol": protocol, "root": int(root), "dtype_bytes": _DTYPES[dtype]}
    if channels is not None:
        p["channels"] = int(channels)
    if chunk_bytes is not None:
        p["chunk_bytes"] = int(chunk_bytes)
    p.update(fabric_params(fabric))
    p.update(options)
    return p


def fabric_params(fabric: FabricSpec) -> dict[str, Any]:
    """The collective parameters that come from the fabric itself, the same
    for ``collective()`` and task-graph collectives (``FabricNetwork``):
    ``reduce_bytes_per_s`` = HBM bandwidth / 3 of the fabric's GPU preset (a
    reduction reads two operands and writes one; assumed), none when the
    fabric names no known GPU."""
    from flitsim.hardware.systems import SYSTEM_PRESETS

    name = str(fabric.name)
    # Memoized per (fabric name, the system preset and GPU preset functions it
    # resolves through): building the presets cost ~0.3 ms per call; a preset
    # table entry replaced at run time (a test's monkeypatch) misses.
    key = (name, SYSTEM_PRESETS.get(name.lower().replace("_", "-")))
    gpu = _FABRIC_GPU[key] if key in _FABRIC_GPU else _FABRIC_GPU.setdefault(key, fabric_gpu(fabric))
    if gpu is None:
        return {}
    fn = GPU_PRESETS[gpu]
    hbm = _GPU_HBM.get(fn)
    if hbm is None:
        hbm = _GPU_HBM[fn] = GPU_PRESETS[gpu]().hbm_bytes_per_s
    return {"reduce_bytes_per_s": int(hbm / 3)}


_FABRIC_GPU: dict[tuple[str, Any], str | None] = {}
_GPU_HBM: dict[Any, float] = {}


def collective(fabric: FabricSpec | str, kind: str, nbytes: int, group: Sequence[int] | None = None, *,
               algorithm: str = "auto", protocol: str = "auto", channels: int | None = None,
               chunk_bytes: int | None = None, root: int = 0, dtype: str = "float", faults: Any = None,
               fidelity: str | None = None,
               params: "str | os.PathLike[str] | dict[str, Any] | None" = None, **options: Any) -> CollectiveResult:
    """Run one collective on a fabric.

    Args:
        fabric: a :class:`FabricSpec` or preset name.
        kind: ``all_reduce``, ``all_gather``, ``reduce_scatter``, ``all_to_all``,
            ``broadcast``, ``reduce`` or ``sendrecv`` (group = [src, dst]).
        nbytes: nccl-tests size in bytes (all_gather/reduce_scatter: the whole
            gathered buffer; all_to_all: the whole send buffer of one rank).
        group: GPU ids in rank order (default: every GPU of the fabric; 2 GPUs
            for sendrecv).
        algorithm: ``auto`` (the fastest simulated among the candidates whose
            closed-form estimate is within 2x of the best; at packet level
            one whose wire lower bound exceeds the best simulated time is
            skipped, which cannot change the choice; ``stats
            ["auto_candidates"]`` lists those simulated), ``ring``, ``tree`` (all_reduce; across
            domains NCCL's double binary tree), ``direct`` (all_to_all,
            sendrecv), ``nvls`` (all_reduce, all_gather, reduce_scatter on
            NVLS-capable switches; across domains all_reduce as NCCL's
            NVLS-tree), ``hierarchical`` (all_reduce over a group spanning
            several domains: reduce-scatter inside each domain, all_reduce per
            rail across domains, all-gather inside; docs/collectives.md
            "Across tiers"). A group spanning domains
            (GPUs joined only through NICs) runs ring, tree, hierarchical or
            NVLS-tree (all_reduce), ring (other reductions and gathers) or
            direct (all_to_all).
        protocol: ``auto``, ``simple``, ``ll128`` (120/128 useful), ``ll`` (50 %).
        channels, chunk_bytes: ring channels (default auto, <= 8) and pipeline
            chunk (default 1 MiB).
        root: root rank for broadcast/reduce. dtype: element type (sizes must be
            whole elements).
        params: a ``flitsim calibrate`` parameter file (or dict) of
            collective parameters; ``options`` override it.
        fidelity: ``packet``, ``flow`` or ``auto`` (default: the fabric's own);
            ``stats["fidelity"]`` and ``stats["fidelity_reason"]`` say which ran and why.
        faults: :class:`flitsim.Fault` entries (or dicts) added to the fabric's
            (dead links/planes at given times; see ``FabricSpec.with_faults``).
            ``stats["faults"]`` then holds the accounting (lost, replayed and
            delivered bytes; ``link_rx_payload_bytes``: bytes the GPU links
            delivered, from link statistics).
        options: further CollectiveParams fields (``link_efficiency``,
            ``nvls_efficiency``, ``nvls_base_ps``, ``nvls_per_rank_ps``,
            ``launch_ps``, ``step_latency_ps``, ``reduce_bytes_per_s``,
            ``sim_packet_bytes``) and the transport fields: ``transport``
            (``auto``: P2P where the route allows it, else host-staged; RDMA
            across nodes; or forced ``p2p`` / ``host`` / ``rdma``),
            ``host_chunk_bytes`` (512 KiB; 0 = unpipelined), ``p2p_chunk_bytes``
            (staging chunk of send/recv and all_to_all; 0 = NCCL's p2p chunk
            by path: 128 KiB off NVLink, 512 KiB all-NVLink), ``host_slots``
            (8), ``pxn`` (True), ``pcie_extra_latency_ps`` and
            ``net_extra_latency_ps`` (0 = NCCL tuning.cc hwLat by protocol).

    Raises:
        ConfigError: a repeated GPU, a GPU outside the fabric, a size that is not
            whole elements (or not n x elements for all_gather/reduce_scatter/
            all_to_all: NCCL takes per-rank counts; pad the buffer), NVLS on a
            fabric without it, an algorithm the operation lacks, a transport
            the route forbids (forced P2P across an element with
            ``allow_p2p = False`` names it), tree / NVLS across domains.
    """
    from flitsim.transfers import warn_fidelity, with_fidelity

    fab = with_fidelity(as_fabric(fabric), fidelity)
    if faults is not None:
        fab = fab.with_faults(faults)
    op = _op(kind)
    if isinstance(nbytes, bool) or not isinstance(nbytes, (int, np.integer)) or not 0 <= nbytes <= MAX_BYTES:
        raise ConfigError(f"nbytes = {nbytes!r}: expected an integer in 0..{MAX_BYTES} (64 GiB; the lowering "
                          "holds one DAG node per chunk, so memory grows with the size)")
    if group is None:
        members = [0, 1] if op == "sendrecv" else list(range(fab.gpus))
    else:
        if isinstance(group, (str, bytes)) or not hasattr(group, "__iter__"):
            raise ConfigError(f"group = {group!r}: expected a list of GPU ids")
        members = []
        for g in group:
            if isinstance(g, bool) or not isinstance(g, (int, np.integer)) or not 0 <= g < fab.gpus:
                raise ConfigError(f"group = {list(group)!r}: GPU ids must be integers in 0..{fab.gpus - 1} "
                                  f"(got {g!r})")
            members.append(int(g))
    for name, v in (("root", root), ("channels", channels), ("chunk_bytes", chunk_bytes)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 <= v < 2**63):
            raise ConfigError(f"{name} = {v!r}: expected a non-negative integer")
    for name, v in options.items():
        if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) and not (v >= 0):
            raise ConfigError(f"{name} = {v!r}: expected a non-negative number")
    n = len(members)
    p = _params(fab, algorithm, protocol, channels, chunk_bytes, root, dtype, {**load_params(params, fab.name), **options})
    r = _core.collective_run(fab._core_fabric(), {"op": op.replace("sendrecv", "send_recv"), "members": members,
                                               "bytes": int(nbytes), "params": p})
    warn_fidelity(str(r["fidelity_reason"]))
    t_ps = max(int(r["time_ps"]), 1)
    algbw = nbytes / t_ps * 1e3
    if "lowered" in str(r["sim_packet_note"]) or "(warning)" in str(r["sim_packet_note"]):
        warnings.warn(str(r["sim_packet_note"]), stacklevel=2)
    stats = {k: r[k] for k in ("transfers", "sim_packet_bytes", "folded_planes", "fold_reason", "sim_packet_note",
                               "packets", "events",
                               "max_link_utilization", "credit_exhaustion_episodes", "arbitration_conflicts", "fidelity", "fidelity_reason")}
    stats["link_class_payload_bytes"] = np.asarray(r["link_class_payload_bytes"])
    stats["auto_candidates"] = [(str(a), str(b), int(t)) for a, b, t in r["auto_candidates"]]
    stats["faults"] = {**{k: int(v) for k, v in r["faults"].items()},
                       "link_rx_payload_bytes": int(np.asarray(r["rx_payload_bytes"]).sum())}
    return CollectiveResult(op, n, int(nbytes), t_ps / 1e6, algbw, algbw * busbw_factor(op, n), str(r["algorithm"]),
                            str(r["protocol"]), int(r["channels"]), int(r["chunk_bytes"]),
                            np.asarray(r["bytes_sent"]), np.asarray(r["bytes_received"]),
                            np.asarray(r["link_bytes_sent"]), np.asarray(r["link_bytes_received"]), stats)


def collective_ideal(kind: str, nbytes: int, n: int, *, alpha_ps: int, bandwidth_bytes_per_s: float,
                     algorithm: str = "ring", protocol: str = "simple", channels: int = 1,
                     chunk_bytes: int | None = None, **options: Any) -> float:
    """Completion time (us) of a collective's DAG on the ideal alpha-beta
    model: one port per GPU of ``bandwidth_bytes_per_s``, ``alpha_ps`` per
    transfer, no receiver contention (the closed-form reference)."""
    op = _op(kind)
    p: dict[str, Any] = {"algorithm": algorithm, "protocol": protocol, "channels": channels, **options}
    if chunk_bytes is not None:
        p["chunk_bytes"] = chunk_bytes
    t = _core.collective_ideal(n, int(alpha_ps), float(bandwidth_bytes_per_s), algorithm == "nvls",
                               {"op": op.replace("sendrecv", "send_recv"), "members": list(range(n)),
                                "bytes": int(nbytes), "params": p})
    return t / 1e6


def parse_size(s: str | int) -> int:
    """nccl-tests size syntax: ``8``, ``64K``, ``8M``, ``8G`` (powers of 1024;
    the one parser, :func:`flitsim.sizes.parse_bytes`)."""
    from flitsim.sizes import parse_bytes

    return parse_bytes(s)


def nccl_tests(fabric: FabricSpec | str, kind: str = "all_reduce", *, minbytes: int | str = 8,
               maxbytes: int | str = "8G", stepfactor: int = 2, ngpus: int | None = None,
               dtype: str = "float", progress: bool = False, **kwargs: Any) -> "pd.DataFrame":
    """Sweep sizes like nccl-tests (``-b minbytes -e maxbytes -f stepfactor``).

    Sizes are rounded down to a whole number of elements per rank, as
    nccl-tests does. Returns a DataFrame with columns size, count, type,
    redop, root, time_us, algbw_GBps, busbw_GBps, algorithm, protocol, wall_s.
    """
    import time

    import pandas as pd

    fab = as_fabric(fabric)
    op = _op(kind)
    lo, hi = parse_size(minbytes), parse_size(maxbytes)
    if hi > MAX_BYTES:
        raise ConfigError(f"maxbytes = {hi}: at most {MAX_BYTES} (64 GiB)")
    if lo < 1 or hi < lo:
        raise ConfigError(f"sizes = {minbytes!r}..{maxbytes!r}: expected 1 <= minbytes <= maxbytes")
    stepfactor = check_int("stepfactor", stepfactor, 2)
    n = fab.gpus if ngpus is None else check_int("ngpus", ngpus, 1, fab.gpus, "a GPU count")
    if n < 1 or n > fab.gpus:
        raise ConfigError(f"ngpus = {n}: expected 1..{fab.gpus} (GPUs of the fabric)")
    group = [0, 1] if op == "sendrecv" else list(range(n))
    if dtype not in _DTYPES:
        raise ConfigError(f"dtype = {dtype!r}: expected one of {sorted(_DTYPES)}")
    e = _DTYPES[dtype]
    unit = e * (n if op in PER_RANK_COUNT_OPS else 1)
    rows = []
    sizes = []
    s = lo
    while s <= hi:
        sizes.append(s)
        s *= stepfactor
    bar: Any = None
    if progress:
        from flitsim._progress import progress_bar

        bar = progress_bar(len(sizes), f"{op} on {fab.name}", "size")
    if not any(s // unit for s in sizes):
        raise ConfigError(f"sizes = {lo}..{hi} bytes: every size is below one unit of {unit} bytes "
                          f"({dtype} x ranks for {op}); raise maxbytes")
    for s in sizes:
        if bar is not None:
            bar.update(1)
        size = (s // unit) * unit
        if size == 0:
            continue
        t0 = time.perf_counter()
        r = collective(fab, op, size, group, dtype=dtype, **kwargs)
        wall = time.perf_counter() - t0
        rows.append({"size": size, "count": size // unit, "type": _NCCL_TYPE.get(dtype, dtype), "redop": _REDOP.get(op, "none"),
                     "root": kwargs.get("root", 0) if op in ("broadcast", "reduce") else -1,
                     "time_us": r.time_us, "algbw_GBps": r.algbw_GBps, "busbw_GBps": r.busbw_GBps,
                     "algorithm": r.algorithm, "protocol": r.protocol, "wall_s": wall})
    if bar is not None:
        bar.close()
    return pd.DataFrame(rows)
