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
        output_flits: shape (T, switches, switch_ports): flits that left each
            switch port since the previous sample (0 at the first); they sum to
            the run's ``switch_ports.output_flits`` (the last sample is the
            first instant at or after the end). A packet counts when its tail
            leaves, so one interval may show up to a packet more than its share.
        interval_ps, max_samples: the final interval and the buffer size.
        switch_cycle_ps: the switch clock period (element 0's on a graph).
    """

    time_ps: np.ndarray
    queue_flits: np.ndarray
    credits_in_use_flits: np.ndarray
    endpoint_credits_in_use_flits: np.ndarray
    output_flits: np.ndarray
    interval_ps: int
    max_samples: int
    switch_cycle_ps: float

    @classmethod
    def from_core(cls, c: Mapping[str, Any], gpu_ports: int, switch_cycle_ps: float) -> "CounterSamples":
        """From the engine's ``counters`` dict (row-major [sample][series])."""
        t = int(c["samples"])
        sp = max(int(c["switch_ports"]), 1)
        q = np.asarray(c["queue_flits"]).reshape(t, -1, sp)
        cr = np.asarray(c["credits_in_use_flits"]).reshape(t, -1, sp)
        ep = np.asarray(c["endpoint_credits_in_use_flits"]).reshape(t, -1, max(gpu_ports, 1))
        out = np.asarray(c["output_flits"]).reshape(t, -1, sp)
        return cls(np.asarray(c["time_ps"]), q, cr, ep, out, int(c["interval_ps"]), int(c["max_samples"]),
                   float(switch_cycle_ps))

    def output_utilization(self) -> np.ndarray:
        """Shape (T, switches, switch_ports): each switch output's busy share
        over the interval ending at each sample (flits out x cycle / interval;
        0 at the first sample)."""
        dt = np.diff(self.time_ps, prepend=self.time_ps[:1]).astype(float)
        with np.errstate(divide="ignore", invalid="ignore"):
            u = self.output_flits * self.switch_cycle_ps / dt[:, None, None]
        return np.where(dt[:, None, None] > 0, u, 0.0)

    @property
    def samples(self) -> int:
        return int(self.time_ps.size)

    def to_pandas(self) -> "pd.DataFrame":
        """Long format, one row per (sample, switch, port): time_ps, switch,
        port, queue_flits, credits_in_use_flits, output_utilization."""
        import pandas as pd

        t, s, p = self.queue_flits.shape
        return pd.DataFrame({
            "time_ps": np.repeat(self.time_ps, s * p),
            "switch": np.tile(np.repeat(np.arange(s), p), t),
            "port": np.tile(np.arange(p), t * s),
            "queue_flits": self.queue_flits.reshape(-1),
            "credits_in_use_flits": self.credits_in_use_flits.reshape(-1),
            "output_utilization": self.output_utilization().reshape(-1),
        })

    def __repr__(self) -> str:
        t, s, p = self.queue_flits.shape
        return (f"CounterSamples({t} samples every {self.interval_ps} ps (cap {self.max_samples}), "
                f"{s} switches x {p} ports)")
