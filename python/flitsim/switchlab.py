"""The switch lab: one cycle-level input-queued crossbar (the NVSwitch model)
under synthetic traffic, to see arbitration, head-of-line blocking and credits
in isolation.

Traffic generation, the switch and the statistics all run in Rust
(``flitsim._core.switch_lab``); this module builds specs, runs sweeps and
shapes results. Times are in switch cycles (``_cycles``); multiply by
``cycle_ps`` (1000 / ``clock_ghz``) for picoseconds.

Classic results the lab reproduces (tests/switch_theory.rs, tests/test_switch.py):

- FIFO inputs, uniform i.i.d. cells, saturation: 0.75 for N = 2, 0.6553 for
  N = 4, 0.6184 for N = 8, -> 2 - sqrt(2) = 0.586 (Karol, Hluchyj, Morgan,
  IEEE Trans. Commun. 1987);
- VOQ + PIM, one iteration: 1 - (1 - 1/N)^N -> 1 - 1/e (Anderson et al.,
  ACM TOCS 1993);
- VOQ + iSLIP, one iteration, uniform Bernoulli: ~100 % (McKeown, IEEE/ACM ToN 1999);
- output queueing (speedup N) and speedup 2 with a maximal matching: ~100 %;
- Little's law (occupancy = throughput x sojourn) on every run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Iterable, Literal, Sequence

import numpy as np
from pydantic import Field

from flitsim._notebook import notebook
from flitsim import _core
from flitsim._spec import Spec
from flitsim.errors import ConfigError, check_int, number_list

if TYPE_CHECKING:
    import pandas as pd

# Non-negative integers: the type check lives here, the range rules (e.g.
# ports >= 1, buffers >= one packet) in Rust, checked once per run.
NonNegInt = Annotated[int, Field(ge=0, le=2**63 - 1)]

__all__ = [
    "ALLOCATORS", "SwitchSpec", "TrafficSpec", "SwitchRunResult", "SaturationResult", "LatencyCurve",
    "run", "saturation", "latency_curve", "parse_loads",
]

#: Allocator names accepted by :class:`SwitchSpec` (one Rust file each).
ALLOCATORS = ("islip", "pim", "separable_input_first", "separable_output_first", "wavefront", "oldest_first")


class SwitchSpec(Spec):
    """One input-queued crossbar switch. NVSwitch internals are not public, so
    every field is a parameter; the defaults are ``assumed`` (BookSim2-like:
    4 VCs x 16-flit buffers, 8-flit packets, iSLIP).

    Attributes:
        ports: ports (each an input and an output), >= 1.
        vcs: virtual channels per port, 1..64.
        buffer_per_vc_flits: input buffer per (port, VC), flits; >= max_packet_flits.
        max_packet_flits: longest packet, flits (virtual cut-through reserves this much).
        queueing: ``"voq"`` (virtual output queues) or ``"fifo"`` (one FIFO per
            input and VC: head-of-line blocking).
        speedup: crossbar speedup (allocation rounds per cycle), 1..ports; > 1
            needs ``output_buffer_per_vc_flits``.
        pipeline_latency_cycles: head arrival to first request, cycles.
        output_buffer_per_vc_flits: output buffer per (port, VC), flits; 0 = none.
        downstream_credits_per_vc_flits: credits per output VC for the
            downstream receiver, flits; default = ``buffer_per_vc_flits``.
        allocator: one of :data:`ALLOCATORS`.
        iterations: iterations for ``islip`` and ``pim`` (others: 1).
        clock_ghz: switch clock, GHz (one flit per port per cycle).
        seed: seed for randomized allocators (PIM).
        stall_timeout_cycles: cycles without a moving flit, with flits inside,
            before :class:`~flitsim.StalledError`; 0 = automatic.

    Raises:
        ConfigError: wrong types here; out-of-range values when run (checked
            once, in Rust).
    """

    ports: NonNegInt = 72
    vcs: NonNegInt = 4
    buffer_per_vc_flits: NonNegInt = 16
    max_packet_flits: NonNegInt = 8
    queueing: Literal["voq", "fifo"] = "voq"
    speedup: NonNegInt = 1
    pipeline_latency_cycles: NonNegInt = 0
    output_buffer_per_vc_flits: NonNegInt = 0
    downstream_credits_per_vc_flits: NonNegInt | None = None
    allocator: str = "islip"
    iterations: NonNegInt = 1
    clock_ghz: float = Field(default=1.0, ge=0.001, le=1000.0)  # the engine's bounds (switch/spec.rs)
    seed: NonNegInt = 0
    stall_timeout_cycles: NonNegInt = 0

    def core_dict(self) -> dict[str, Any]:
        """The dict the Rust core takes (defaults resolved)."""
        d = self.model_dump()
        if d["downstream_credits_per_vc_flits"] is None:
            d["downstream_credits_per_vc_flits"] = self.buffer_per_vc_flits
        return d


class TrafficSpec(Spec):
    """Synthetic traffic, generated in Rust, seeded.

    Attributes:
        load: offered load per active source, flits per cycle, in (0, 1].
        pattern: ``uniform`` (each packet to a uniformly random output),
            ``permutation`` (fixed random permutation), ``hotspot`` (with
            probability ``hotspot_fraction`` (default 0.2) to ``hotspot_port``, else uniform),
            ``incast`` (``incast_sources`` inputs, 0 = all others, to ``incast_target``).
        process: ``bernoulli`` (a packet each cycle with probability
            load / packet_flits) or ``bursty`` (on/off: geometric bursts of mean
            ``mean_burst_packets`` back-to-back packets to one destination,
            geometric gaps sized so the mean rate is ``load``).
        packet_flits: packet length, flits; default = the switch's max_packet_flits.
        seed: traffic seed (sources use independent substreams).

    Raises:
        ConfigError: wrong types here; out-of-range values when run.
    """

    load: float = 0.5
    pattern: Literal["uniform", "permutation", "hotspot", "incast"] = "uniform"
    process: Literal["bernoulli", "bursty"] = "bernoulli"
    packet_flits: NonNegInt | None = None
    mean_burst_packets: float = 1.0
    hotspot_port: NonNegInt = 0
    hotspot_fraction: float = 0.2
    incast_target: NonNegInt = 0
    incast_sources: NonNegInt = 0
    seed: NonNegInt = 1

    def core_dict(self, switch: SwitchSpec) -> dict[str, Any]:
        """The dict the Rust core takes (packet length resolved against ``switch``)."""
        d = self.model_dump()
        if d["packet_flits"] is None:
            d["packet_flits"] = switch.max_packet_flits
        return d


def _hist(d: dict[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in d.items()}


@notebook("ports", "offered_load", "accepted_throughput", "delivered_flits", "source_dropped_packets")
@dataclass(frozen=True)
class SwitchRunResult:
    """Outcome of :func:`run` over the measurement window.

    Attributes:
        switch, traffic: the specs run.
        ports, vcs, measure_cycles, cycle_ps: shape and time base.
        offered_load: flits created / (cycles x active sources).
        accepted_throughput: flits delivered / (cycles x ports), flits/port/cycle.
        delivered_flits: flits delivered in the window.
        source_dropped_packets: packets dropped at full source queues (> 0
            means the offered load exceeds what the switch accepts: saturated).
        source_backlog_packets: packets still waiting at the sources at the end.
        latency_cycles: creation to tail-out, per packet: count, mean, min,
            max, p25..p99 (6.25 % bucket resolution), cycles.
        network_latency_cycles: head into the switch to tail out, cycles.
        queueing_cycles: ready to granted (waiting for arbitration), cycles.
        mean_occupancy_flits, throughput_flits_per_cycle, mean_sojourn_cycles:
            Little's law terms for the whole switch, L = lambda x W.
        inputs: per (port, VC), flat uint64 arrays of shape (ports * vcs,),
            index port * vcs + vc: packets_in, flits_in, packets_granted,
            queueing_cycles_sum, occupancy_flit_cycles, occupancy_max_flits.
        outputs: per (port, VC), same shape: packets_out, flits_out,
            credit_exhaustion_episodes, credit_exhaustion_cycles (downstream
            credits below one maximum-size packet).
        ports_stats: per port, shape (ports,): input_conflicts and
            output_conflicts (requests not granted, summed over allocation
            rounds), latency_mean_cycles, latency_p99_cycles (network latency).
        cycles_processed, allocation_rounds: work done (idle cycles are skipped).
        active_sources: inputs that generate traffic (all but incast).
    """

    switch: SwitchSpec
    traffic: TrafficSpec
    ports: int
    vcs: int
    measure_cycles: int
    cycle_ps: float
    offered_load: float
    accepted_throughput: float
    delivered_flits: int
    source_dropped_packets: int
    source_backlog_packets: int
    latency_cycles: dict[str, float]
    network_latency_cycles: dict[str, float]
    queueing_cycles: dict[str, float]
    mean_occupancy_flits: float
    throughput_flits_per_cycle: float
    mean_sojourn_cycles: float
    inputs: dict[str, np.ndarray] = field(repr=False)
    outputs: dict[str, np.ndarray] = field(repr=False)
    ports_stats: dict[str, np.ndarray] = field(repr=False)
    cycles_processed: int = 0
    allocation_rounds: int = 0
    active_sources: int = 0

    @property
    def saturated(self) -> bool:
        """True if the offered load exceeds what the switch accepts: sources
        overflowed, or the switch delivered under 97 % of the flits offered in
        the window (below saturation the two agree within sampling error,
        well under 3 % for windows of 10^4 cycles or more)."""
        offered_total = self.offered_load * self.active_sources
        return self.source_dropped_packets > 0 or self.accepted_throughput * self.ports < 0.97 * offered_total

    @property
    def little_residual(self) -> float:
        """(L - lambda W) / (lambda W): Little's law residual, ~0 within edge effects."""
        lw = self.throughput_flits_per_cycle * self.mean_sojourn_cycles
        return (self.mean_occupancy_flits - lw) / lw if lw else 0.0

    def to_pandas(self) -> "pd.DataFrame":
        """One row per (port, VC): port, vc, throughput and occupancy (flits
        per cycle), mean queueing delay (cycles), conflicts of the port, credit
        exhaustion episodes and cycles."""
        import pandas as pd

        n, v, t = self.ports, self.vcs, float(self.measure_cycles)
        port = np.repeat(np.arange(n), v)
        granted = self.inputs["packets_granted"].astype(float)
        return pd.DataFrame({
            "port": port,
            "vc": np.tile(np.arange(v), n),
            "flits_in": self.inputs["flits_in"],
            "flits_out": self.outputs["flits_out"],
            "throughput_flits_per_cycle": self.outputs["flits_out"] / t,
            "mean_queueing_cycles": np.divide(self.inputs["queueing_cycles_sum"], granted,
                                              out=np.zeros(n * v), where=granted > 0),
            "mean_occupancy_flits": self.inputs["occupancy_flit_cycles"] / t,
            "max_occupancy_flits": self.inputs["occupancy_max_flits"],
            "input_conflicts": self.ports_stats["input_conflicts"][port],
            "output_conflicts": self.ports_stats["output_conflicts"][port],
            "credit_exhaustion_episodes": self.outputs["credit_exhaustion_episodes"],
            "credit_exhaustion_cycles": self.outputs["credit_exhaustion_cycles"],
        })

    def summary(self) -> dict[str, Any]:
        """JSON-safe summary (no per-port arrays)."""
        return {
            "allocator": self.switch.allocator, "ports": self.ports, "vcs": self.vcs,
            "offered_load": self.offered_load, "accepted_throughput": self.accepted_throughput,
            "saturated": self.saturated, "latency_cycles": self.latency_cycles,
            "network_latency_cycles": self.network_latency_cycles, "queueing_cycles": self.queueing_cycles,
            "mean_occupancy_flits": self.mean_occupancy_flits,
            "throughput_flits_per_cycle": self.throughput_flits_per_cycle,
            "mean_sojourn_cycles": self.mean_sojourn_cycles, "delivered_flits": self.delivered_flits,
            "source_dropped_packets": self.source_dropped_packets, "cycle_ps": self.cycle_ps,
        }


def _nonneg_int(name: str, v: Any) -> int:
    return check_int(name, v, 0)


def run(switch: SwitchSpec | None = None, traffic: TrafficSpec | None = None, *,
        warmup_cycles: int = 10_000, measure_cycles: int = 100_000, credit_return_cycles: int = 0,
        dead_outputs: Sequence[int] = (), source_queue_packets: int = 4096) -> SwitchRunResult:
    """Run one switch under synthetic traffic and measure a window.

    Args:
        switch: the switch (default :class:`SwitchSpec()`: 72 ports, iSLIP).
        traffic: the traffic (default uniform Bernoulli at 0.5 flits/port/cycle).
        warmup_cycles: cycles simulated before statistics start.
        measure_cycles: length of the statistics window, cycles (>= 1).
        credit_return_cycles: delay from a tail leaving an output to its
            credits returning, cycles (the downstream sink consumes at once).
        dead_outputs: outputs whose downstream never returns credits (to
            study, or provoke, stalls).
        source_queue_packets: source queue bound per input; overflow is counted
            in ``source_dropped_packets``.

    Returns:
        :class:`SwitchRunResult`.

    Raises:
        ConfigError: zero ports, load outside (0, 1], buffers smaller than a
            packet, unknown allocator, or any other invalid value.
        StalledError: flits inside the switch and none moved for the stall
            timeout (e.g. credits that never return); the message lists the
            blocked inputs, VCs and outputs. The run never hangs.
        KeyboardInterrupt: on Ctrl-C (the GIL is released while it runs).
    """
    switch = switch if switch is not None else SwitchSpec()
    traffic = traffic if traffic is not None else TrafficSpec()
    if not isinstance(switch, SwitchSpec):
        raise ConfigError(f"switch = {switch!r}: expected a SwitchSpec")
    if not isinstance(traffic, TrafficSpec):
        raise ConfigError(f"traffic = {traffic!r}: expected a TrafficSpec")
    spec = {
        "switch": switch.core_dict(),
        "traffic": traffic.core_dict(switch),
        "warmup_cycles": _nonneg_int("warmup_cycles", warmup_cycles),
        "measure_cycles": _nonneg_int("measure_cycles", measure_cycles),
        "credit_return_cycles": _nonneg_int("credit_return_cycles", credit_return_cycles),
        "dead_outputs": [_nonneg_int("dead_outputs", d) for d in dead_outputs],
        "source_queue_packets": _nonneg_int("source_queue_packets", source_queue_packets),
    }
    r = _core.switch_lab(spec)
    return SwitchRunResult(
        switch=switch, traffic=traffic, ports=r["ports"], vcs=r["vcs"], measure_cycles=r["measure_cycles"],
        cycle_ps=r["cycle_ps"], offered_load=r["offered_load"], accepted_throughput=r["accepted_throughput"],
        delivered_flits=r["delivered_flits"], source_dropped_packets=r["source_dropped_packets"],
        source_backlog_packets=r["source_backlog_packets"], latency_cycles=_hist(r["latency_cycles"]),
        network_latency_cycles=_hist(r["network_latency_cycles"]), queueing_cycles=_hist(r["queueing_cycles"]),
        mean_occupancy_flits=r["mean_occupancy_flits"], throughput_flits_per_cycle=r["throughput_flits_per_cycle"],
        mean_sojourn_cycles=r["mean_sojourn_cycles"], inputs=dict(r["inputs"]), outputs=dict(r["outputs"]),
        ports_stats=dict(r["ports_stats"]), cycles_processed=r["cycles_processed"],
        allocation_rounds=r["allocation_rounds"], active_sources=r["active_sources"],
    )


@notebook("throughput")
@dataclass(frozen=True)
class SaturationResult:
    """Outcome of :func:`saturation`.

    Attributes:
        throughput: accepted flits per port per cycle with every source
            offering 1 flit/cycle (saturation throughput, 0..1).
        run: the underlying :class:`SwitchRunResult`.
    """

    throughput: float
    run: SwitchRunResult

    def to_pandas(self) -> "pd.DataFrame":
        """Per (port, VC) statistics of the saturated run (see :meth:`SwitchRunResult.to_pandas`)."""
        return self.run.to_pandas()


def saturation(switch: SwitchSpec | None = None, traffic: TrafficSpec | None = None, **kwargs: Any) -> SaturationResult:
    """Saturation throughput: every active source offers 1 flit per cycle, so
    inputs stay backlogged and the accepted rate is the switch's capacity for
    this traffic pattern (Karol et al. 1987's definition).

    Args:
        switch, traffic: as for :func:`run`; the traffic's ``load`` is set to 1.
        **kwargs: passed to :func:`run` (windows, credits, ...).

    Returns:
        :class:`SaturationResult`.

    Raises:
        ConfigError, StalledError: as :func:`run`.
    """
    base = traffic if traffic is not None else TrafficSpec()
    saturating = base.replace(load=1.0)
    assert isinstance(saturating, TrafficSpec)
    r = run(switch, saturating, **kwargs)
    return SaturationResult(throughput=r.accepted_throughput, run=r)


@notebook("runs")
@dataclass(frozen=True)
class LatencyCurve:
    """Latency versus offered load (:func:`latency_curve`).

    Attributes:
        runs: one :class:`SwitchRunResult` per offered load, in order.
    """

    runs: tuple[SwitchRunResult, ...]

    def to_pandas(self) -> "pd.DataFrame":
        """One row per load: offered_load, accepted_throughput, saturated,
        latency mean/p50/p99 (creation to tail out), network latency mean and
        queueing mean, all in cycles, plus latency_mean_ns."""
        import pandas as pd

        rows = []
        for r in self.runs:
            rows.append({
                "load": r.traffic.load, "offered_load": r.offered_load,
                "accepted_throughput": r.accepted_throughput, "saturated": r.saturated,
                "latency_mean_cycles": r.latency_cycles["mean"], "latency_p50_cycles": r.latency_cycles["p50"],
                "latency_p99_cycles": r.latency_cycles["p99"],
                "network_latency_mean_cycles": r.network_latency_cycles["mean"],
                "queueing_mean_cycles": r.queueing_cycles["mean"],
                "latency_mean_ns": r.latency_cycles["mean"] * r.cycle_ps / 1e3,
            })
        return pd.DataFrame(rows)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe: the specs and one record per load."""
        first = self.runs[0]
        return {"switch": first.switch.to_dict(), "traffic": first.traffic.to_dict(),
                "curve": self.to_pandas().to_dict(orient="records")}

    def plot(self, path: str | None = None, ax: Any = None) -> Any:
        """Plot mean and p99 latency (cycles, log scale) and accepted
        throughput against offered load; saturated points are hollow.

        Args:
            path: if given, save the figure there (format from the extension).
            ax: an existing matplotlib Axes to draw into.

        Returns:
            The matplotlib Axes.
        """
        import matplotlib

        if ax is None and path is not None:
            matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        df = self.to_pandas()
        if ax is None:
            _, ax = plt.subplots(figsize=(6.4, 4.2))
        ok = ~df["saturated"]
        ax.plot(df["load"][ok], df["latency_mean_cycles"][ok], "o-", label="mean latency")
        ax.plot(df["load"][ok], df["latency_p99_cycles"][ok], "s--", label="p99 latency")
        if (~ok).any():
            ax.plot(df["load"][~ok], df["latency_mean_cycles"][~ok], "o", mfc="none", label="saturated")
        ax.set_yscale("log")
        ax.set_xlabel("offered load (flits/port/cycle)")
        ax.set_ylabel("latency (cycles)")
        s = self.runs[0].switch
        ax.set_title(f"{s.ports}-port {s.queueing.upper()} switch, {s.allocator} x{s.iterations}, "
                     f"speedup {s.speedup}")
        ax2 = ax.twinx()
        ax2.plot(df["load"], df["accepted_throughput"], "k:", label="accepted")
        ax2.set_ylabel("accepted throughput (flits/port/cycle)")
        ax2.set_ylim(0, 1.05)
        ax.legend(loc="upper left")
        if path is not None:
            ax.figure.tight_layout()
            ax.figure.savefig(path)
        return ax


def latency_curve(switch: SwitchSpec | None = None, loads: Iterable[float] = (0.1, 0.3, 0.5, 0.7, 0.9),
                  traffic: TrafficSpec | None = None, **kwargs: Any) -> LatencyCurve:
    """Latency versus offered load: one :func:`run` per load.

    Args:
        switch: the switch (any allocator, buffer depth, VC count, speedup).
        loads: offered loads, flits/port/cycle, each in (0, 1].
        traffic: the traffic pattern; its ``load`` is replaced per point.
        **kwargs: passed to :func:`run`.

    Returns:
        :class:`LatencyCurve` (``.to_pandas()``, ``.plot(path)``).

    Raises:
        ConfigError: an empty load list or any invalid value; StalledError as :func:`run`.
    """
    traffic = traffic if traffic is not None else TrafficSpec()
    loads = list(loads)
    if not loads:
        raise ConfigError("loads = []: expected at least one offered load in (0, 1]")
    runs = tuple(run(switch, traffic.replace(load=float(x)), **kwargs) for x in loads)  # type: ignore[arg-type]
    return LatencyCurve(runs=runs)


MAX_LOAD_POINTS = 1000
"""Most offered-load points one curve may have (each is a full simulation)."""


def parse_loads(text: str) -> list[float]:
    """Parse ``start:stop:step`` (inclusive of stop, within rounding), a
    comma list ``0.1,0.5,0.9``, or one number.

    Raises:
        ConfigError: malformed text or a non-positive step.
    """
    bad = ConfigError(f"load = {text!r}: expected start:stop:step (e.g. 0.1:1.0:0.1), a comma list or a number")
    if ":" not in text:
        return number_list("load", text, "start:stop:step (e.g. 0.1:1.0:0.1), a comma list or a number")
    try:
        a, b, c = (float(x) for x in text.split(":"))
    except ValueError:
        raise bad from None
    if not (c > 0 and np.isfinite(a) and np.isfinite(b) and np.isfinite(c)):
        raise bad
    points = np.floor((b - a) / c + 1e-9) + 1
    if points > MAX_LOAD_POINTS:
        raise ConfigError(f"load = {text!r}: {points:.3g} points; at most {MAX_LOAD_POINTS} (use a larger step)")
    return [round(a + k * c, 10) for k in range(max(int(points), 0))]
