"""The link lab: two endpoints and one link direction, to see serialization,
latency and credit-based flow control in isolation.

Closed forms the results reproduce (see tests/test_link.py):
- bandwidth-bound: throughput = payload rate x packet efficiency;
- credit-bound: throughput = C x flit_bytes / R (payload share) when that is
  below the link rate, where R = serialization + latency + credit return
  (Dally & Towles, *Principles and Practices of Interconnection Networks*, ch. 13);
- one packet's latency = serialization + propagation + PHY + FEC accumulation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from flitsim._notebook import notebook
from flitsim import _core
from flitsim.errors import ConfigError, check_int
from flitsim.hardware.link_spec import LinkSpec
from flitsim.hardware.links import link_preset

if TYPE_CHECKING:
    import pandas as pd


@notebook("throughput_GBps", "completion_ps", "packets", "credit_wait_ps")
@dataclass(frozen=True)
class LinkTransferResult:
    """Outcome of :func:`link_transfer`.

    Attributes:
        completion_ps: time the last packet was received (the transfer starts at 0).
        run_end_ps: time the last credit came back to the sender; link and VC
            statistics (busy time, exhaustion time) are accounted up to it.
        throughput_GBps: payload bytes / completion time, GB/s (1e9 B/s).
        credit_rtt_ps: credit round trip of a full-size packet (serialization +
            propagation + PHY + FEC accumulation + credit return), ps.
        packets: packets sent.
        start_ps, arrival_ps: int64 arrays, shape (min(packets, max_recorded_packets),):
            serialization start and tail arrival of each recorded packet, ps.
        latency_ps: summary of per-packet latency (arrival - start) over *all*
            packets: count, mean, min, max, p25..p99 (6.25 % bucket resolution).
        credit_wait_ps: total time a ready packet waited for credits, ps.
        link: busy_ps, payload_bytes, wire_bytes, packets of the direction.
        vcs: per VC: exhaustion_episodes, exhaustion_ps (time at zero credits),
            packets, flits.
        rates: the SerDes rate chain.
    """

    completion_ps: int
    run_end_ps: int
    throughput_GBps: float
    credit_rtt_ps: int
    packets: int
    start_ps: np.ndarray
    arrival_ps: np.ndarray
    latency_ps: dict[str, float]
    credit_wait_ps: int
    link: dict[str, int]
    vcs: list[dict[str, int]]
    rates: dict[str, Any]

    @property
    def utilization(self) -> float:
        """Serializer busy time / completion time."""
        return self.link["busy_ps"] / self.completion_ps if self.completion_ps else 0.0

    def to_pandas(self) -> "pd.DataFrame":
        """Per recorded packet: start_ps, arrival_ps, latency_ps."""
        import pandas as pd

        return pd.DataFrame({"start_ps": self.start_ps, "arrival_ps": self.arrival_ps,
                             "latency_ps": self.arrival_ps - self.start_ps})

    def summary(self) -> dict[str, Any]:
        """JSON-safe summary (no per-packet arrays)."""
        return {
            "completion_ps": self.completion_ps, "run_end_ps": self.run_end_ps, "throughput_GBps": self.throughput_GBps,
            "credit_rtt_ps": self.credit_rtt_ps, "packets": self.packets,
            "utilization": self.utilization, "latency_ps": self.latency_ps,
            "credit_wait_ps": self.credit_wait_ps, "link": self.link, "vcs": self.vcs,
        }


def _int(name: str, v: Any, lo: int) -> int:
    return check_int(name, v, lo)


def link_transfer(link: LinkSpec | str, total_bytes: int, payload_bytes: int = 256,
                  *, credits_per_vc_flits: int | None = None, credit_return_ps: int | None = None,
                  vcs: int | None = None, max_recorded_packets: int = 1_000_000) -> LinkTransferResult:
    """Move ``total_bytes`` over one link direction in packets of ``payload_bytes``.

    The sender streams packets back to back, round-robin over the VCs, and
    waits when the next packet's VC lacks credits for the whole packet (virtual
    cut-through). The receiver consumes each packet on arrival and returns its
    credits ``credit_return_ps`` later. The GIL is released while it runs;
    Ctrl-C raises KeyboardInterrupt.

    Args:
        link: a :class:`LinkSpec` or a link preset name (``nvlink5``, ...).
        total_bytes: payload to move, bytes (>= 1).
        payload_bytes: payload per packet, 1..``link.packet.max_payload_bytes``.
        credits_per_vc_flits, credit_return_ps, vcs: override the link's values.
        max_recorded_packets: cap on the per-packet arrays (memory bound); the
            latency summary always covers every packet.

    Returns:
        :class:`LinkTransferResult`.

    Raises:
        ConfigError: bad sizes, credits below one maximum-size packet, unknown
            preset, wrong types.
    """
    if isinstance(link, str):
        link = link_preset(link)
    if not isinstance(link, LinkSpec):
        raise ConfigError(f"link = {link!r}: expected a LinkSpec or a link preset name")
    changes = {k: v for k, v in (("credits_per_vc_flits", credits_per_vc_flits),
                                  ("credit_return_ps", credit_return_ps), ("vcs", vcs)) if v is not None}
    if changes:
        link = link.replace(**changes)  # type: ignore[assignment]
    spec = {
        "link": link.to_dict(),
        "total_bytes": _int("total_bytes", total_bytes, 1),
        "payload_bytes": _int("payload_bytes", payload_bytes, 1),
        "max_recorded_packets": _int("max_recorded_packets", max_recorded_packets, 0),
    }
    r = _core.link_transfer(spec)
    return LinkTransferResult(
        completion_ps=r["completion_ps"], run_end_ps=r["run_end_ps"], throughput_GBps=r["throughput_gBps"],
        credit_rtt_ps=r["credit_rtt_ps"], packets=r["packets"], start_ps=r["start_ps"],
        arrival_ps=r["arrival_ps"], latency_ps=dict(r["latency_ps"]), credit_wait_ps=r["credit_wait_ps"],
        link=dict(r["link"]), vcs=[dict(v) for v in r["vcs"]], rates=dict(r["rates"]),
    )
