"""Time-resolved fabric counters of a packet-level run (``FabricSpec.counters``,
engine: ``rust/src/fabric/sampler.rs``): queue depth and credits in use over
time, per switch port and per endpoint port, in a bounded buffer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["CounterSamples"]


@dataclass(frozen=True)
class CounterSamples:
    """Counters sampled at ``time_ps`` (equally spaced, ``interval_ps`` apart
    at the end of the run; at most ``max_samples`` of them: the interval
    doubled each time the buffer filled).

    Attributes:
        time_ps: shape (T,), sample instants, ps.
        queue_flits: shape (T, switches, switch_ports): flits in each switch
            port's input buffer, summed over VCs (the queue the link into that
            port feeds; this switch is input-queued).
        credits_in_use_flits: shape (T, switches, switch_ports): flits sent out
            of each switch port whose credits have not come back (on the wire,
            in the next element's input buffer, or credit in flight).
        endpoint_credits_in_use_flits: shape (T, endpoints, gpu_ports): the same
            for each endpoint port's uplink into its switch.
        interval_ps, max_samples: the final interval and the buffer size.
    """

    time_ps: np.ndarray
    queue_flits: np.ndarray
    credits_in_use_flits: np.ndarray
    endpoint_credits_in_use_flits: np.ndarray
    interval_ps: int
    max_samples: int

    @classmethod
    def from_core(cls, c: Mapping[str, Any], gpu_ports: int) -> "CounterSamples":
        """From the engine's ``counters`` dict (row-major [sample][series])."""
        t = int(c["samples"])
        sp = max(int(c["switch_ports"]), 1)
        q = np.asarray(c["queue_flits"]).reshape(t, -1, sp)
        cr = np.asarray(c["credits_in_use_flits"]).reshape(t, -1, sp)
        ep = np.asarray(c["endpoint_credits_in_use_flits"]).reshape(t, -1, max(gpu_ports, 1))
        return cls(np.asarray(c["time_ps"]), q, cr, ep, int(c["interval_ps"]), int(c["max_samples"]))

    @property
    def samples(self) -> int:
        return int(self.time_ps.size)

    def to_pandas(self) -> "pd.DataFrame":
        """Long format, one row per (sample, switch, port): time_ps, switch,
        port, queue_flits, credits_in_use_flits."""
        import pandas as pd

        t, s, p = self.queue_flits.shape
        return pd.DataFrame({
            "time_ps": np.repeat(self.time_ps, s * p),
            "switch": np.tile(np.repeat(np.arange(s), p), t),
            "port": np.tile(np.arange(p), t * s),
            "queue_flits": self.queue_flits.reshape(-1),
            "credits_in_use_flits": self.credits_in_use_flits.reshape(-1),
        })

    def __repr__(self) -> str:
        t, s, p = self.queue_flits.shape
        return (f"CounterSamples({t} samples every {self.interval_ps} ps (cap {self.max_samples}), "
                f"{s} switches x {p} ports)")
