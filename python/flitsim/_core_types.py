"""Keys and types of the dicts the Rust bindings (``flitsim._core``) return,
as TypedDicts for type checkers and readers (rust/src/python/*.rs builds
them). Arrays are numpy, one entry per element (transfer, task, port, ...).
Units are in the key names (``_ps``, ``_bytes``, ``_gbps``, ``_cycles``)."""

from __future__ import annotations

from typing import TypedDict

from typing_extensions import NotRequired

import numpy as np
import numpy.typing as npt

class SerdesRates(TypedDict):
    bits_per_symbol: int
    line_rate_per_lane_gbps: float
    post_fec_rate_per_lane_gbps: float
    payload_rate_per_lane_gbps: float
    line_rate_gbps: float
    payload_rate_gbps: float
    payload_rate_bps: int
    fec_efficiency: float
    line_code_efficiency: float
    bit_time_ps: float
    unit_interval_ps: float
    fec_accumulation_ps: int
    phy_latency_ps: int

class LinkTiming(TypedDict):
    rate_bps: int
    flit_bytes: int
    flit_ps: int
    latency_ps: int
    propagation_ps: int
    phy_latency_ps: int
    fec_accumulation_ps: int
    vcs: int
    credits_per_vc_flits: int
    credit_return_ps: int
    exhaustion_below_flits: int

class LinkTimingResult(TypedDict):
    rates: SerdesRates
    timing: LinkTiming

class Histogram(TypedDict):
    """A histogram summary: count, mean, min, max and percentiles (bucket resolution 6.25 %)."""
    count: int
    mean: float
    min: int
    max: int
    p25: int
    p50: int
    p75: int
    p90: int
    p95: int
    p99: int

class LinkStats(TypedDict):
    busy_ps: int
    payload_bytes: int
    wire_bytes: int
    packets: int

class VcStats(TypedDict):
    exhaustion_episodes: int
    exhaustion_ps: int
    packets: int
    flits: int

class LinkTransferResult(TypedDict):
    rates: SerdesRates
    completion_ps: int
    run_end_ps: int
    throughput_gBps: float
    credit_rtt_ps: int
    packets: int
    credit_wait_ps: int
    events: int
    start_ps: npt.NDArray[np.uint64]
    arrival_ps: npt.NDArray[np.uint64]
    latency_ps: Histogram
    link: LinkStats
    vcs: list[VcStats]

class SwitchLabInputs(TypedDict):
    packets_in: npt.NDArray[np.uint64]
    flits_in: npt.NDArray[np.uint64]
    packets_granted: npt.NDArray[np.uint64]
    queueing_cycles_sum: npt.NDArray[np.uint64]
    occupancy_flit_cycles: npt.NDArray[np.uint64]
    occupancy_max_flits: npt.NDArray[np.uint64]

class SwitchLabOutputs(TypedDict):
    packets_out: npt.NDArray[np.uint64]
    flits_out: npt.NDArray[np.uint64]
    credit_exhaustion_episodes: npt.NDArray[np.uint64]
    credit_exhaustion_cycles: npt.NDArray[np.uint64]

class SwitchLabPorts(TypedDict):
    input_conflicts: npt.NDArray[np.uint64]
    output_conflicts: npt.NDArray[np.uint64]
    latency_mean_cycles: npt.NDArray[np.float64]
    latency_p99_cycles: npt.NDArray[np.uint64]

class SwitchLabResult(TypedDict):
    ports: int
    vcs: int
    measure_cycles: int
    cycle_ps: float
    active_sources: int
    offered_load: float
    accepted_throughput: float
    delivered_flits: int
    source_dropped_packets: int
    source_backlog_packets: int
    mean_occupancy_flits: float
    throughput_flits_per_cycle: float
    mean_sojourn_cycles: float
    cycles_processed: int
    allocation_rounds: int
    slots_processed: int
    latency_cycles: Histogram
    network_latency_cycles: Histogram
    queueing_cycles: Histogram
    inputs: SwitchLabInputs
    outputs: SwitchLabOutputs
    ports_stats: SwitchLabPorts

class FabricLinkColumns(TypedDict):
    gpu: npt.NDArray[np.uint64]
    port: npt.NDArray[np.uint64]
    switch: npt.NDArray[np.uint64]
    busy_ps: npt.NDArray[np.uint64]
    payload_bytes: npt.NDArray[np.uint64]
    wire_bytes: npt.NDArray[np.uint64]
    packets: npt.NDArray[np.uint64]
    credit_exhaustion_episodes: npt.NDArray[np.uint64]
    credit_exhaustion_ps: npt.NDArray[np.uint64]
    replays: npt.NDArray[np.uint64]
    replayed_wire_bytes: npt.NDArray[np.uint64]
    replay_ps: npt.NDArray[np.uint64]
    replay_buffer_wait_ps: npt.NDArray[np.uint64]
    rx_payload_bytes: npt.NDArray[np.uint64]
    lost_bytes: npt.NDArray[np.uint64]
    rx_replays: npt.NDArray[np.uint64]
    rx_replayed_wire_bytes: npt.NDArray[np.uint64]
    rx_replay_ps: npt.NDArray[np.uint64]

class SwitchPortColumns(TypedDict):
    switch: npt.NDArray[np.uint64]
    port: npt.NDArray[np.uint64]
    input_conflicts: npt.NDArray[np.uint64]
    output_conflicts: npt.NDArray[np.uint64]
    queueing_cycles_sum: npt.NDArray[np.uint64]
    packets_granted: npt.NDArray[np.uint64]
    input_occupancy_max_flits: npt.NDArray[np.uint64]
    #: Time integral of input-buffer occupancy, summed over VCs, flit-cycles.
    input_occupancy_flit_cycles: npt.NDArray[np.uint64]
    output_flits: npt.NDArray[np.uint64]
    output_credit_exhaustion_episodes: npt.NDArray[np.uint64]
    output_credit_exhaustion_cycles: npt.NDArray[np.uint64]

class CounterColumns(TypedDict):
    """Time-resolved counters (``FabricSpec.counters``; fabric/sampler.rs):
    ``samples`` instants ``time_ps``; row-major [sample][series] uint32 arrays:
    ``queue_flits`` / ``credits_in_use_flits`` per switch port
    (``switch * switch_ports + port``), ``endpoint_credits_in_use_flits`` per
    endpoint port. ``interval_ps`` is the final interval (it doubles when the
    ``max_samples`` buffer fills)."""

    interval_ps: int
    max_samples: int
    switch_ports: int
    samples: int
    time_ps: npt.NDArray[np.uint64]
    queue_flits: npt.NDArray[np.uint32]
    credits_in_use_flits: npt.NDArray[np.uint32]
    endpoint_credits_in_use_flits: npt.NDArray[np.uint32]
    #: Per switch port, flits out since the previous sample.
    output_flits: npt.NDArray[np.uint32]

class ReorderColumns(TypedDict):
    max_packets: npt.NDArray[np.uint64]
    mean_packets: npt.NDArray[np.float64]
    window_overflows: npt.NDArray[np.uint64]

class FaultAccounting(TypedDict):
    """Bytes sent = delivered + lost (replayed copies counted once when delivered)."""
    faults_applied: int
    lost_packets: int
    lost_bytes: int
    delivered_bytes: int
    replayed_delivered_bytes: int
    sent_bytes: int

class BatchResult(TypedDict):
    start_ps: npt.NDArray[np.uint64]
    end_ps: npt.NDArray[np.uint64]
    makespan_ps: int
    folded_planes: int
    fold_reason: str
    switch_cycle_ps: float
    packets: int
    events: int
    links: FabricLinkColumns
    faults: FaultAccounting
    switch_ports: SwitchPortColumns
    reorder: ReorderColumns
    #: Graph fabrics only: one row per wired switch output link (trunks and
    #: links to endpoints): switch, port, to_switch, peer, peer_port,
    #: link_index, busy_ps, payload_bytes, wire_bytes, packets (uint64 columns).
    switch_links: NotRequired[dict[str, npt.NDArray[np.uint64]]]
    #: Packet-level runs with ``counters`` on: the sampled counters.
    counters: NotRequired[CounterColumns]

class CollectiveResult(TypedDict):
    time_ps: int
    algorithm: str
    protocol: str
    channels: int
    chunk_bytes: int
    transfers: int
    bytes_sent: npt.NDArray[np.uint64]
    bytes_received: npt.NDArray[np.uint64]
    sim_packet_bytes: int
    folded_planes: int
    fold_reason: str
    packets: int
    events: int
    max_link_utilization: float
    credit_exhaustion_episodes: int
    arbitration_conflicts: int
    estimate_ps: float
    faults: FaultAccounting
    rx_payload_bytes: npt.NDArray[np.uint64]
    link_class_payload_bytes: npt.NDArray[np.uint64]

class CollectiveParams(TypedDict):
    algorithm: str
    protocol: str
    channels: int
    chunk_bytes: int
    root: int
    dtype_bytes: int
    link_efficiency: float
    launch_ps: int
    step_latency_ps: int
    nvls_efficiency: float
    nvls_base_ps: int
    nvls_per_rank_ps: int
    reduce_bytes_per_s: int
    sim_packet_bytes: int
    transport: str
    host_chunk_bytes: int
    p2p_chunk_bytes: int
    host_slots: int
    #: flow level: staged copies of 8+ buffers as chunk trains (off by default; docs/fidelity.md)
    chunk_trains: bool
    pxn: bool
    pcie_extra_latency_ps: int
    net_extra_latency_ps: int

class ReplayStats(TypedDict):
    """Collectives recorded and replayed at flow level (exact; docs/fidelity.md
    "Replayed collectives", "Isolated collectives")."""
    recorded: int
    replayed: int
    #: of ``replayed``, those replayed while compute ran beside them
    replayed_isolated: int
    #: the run was repeated without isolated replays (an end shared its picosecond)
    isolated_retried: bool

class TaskGraphNetworkStats(TypedDict, total=False):
    """``kind`` "analytic" (with ``bytes_moved``) or "fabric" (with the rest)."""
    bytes_moved: int
    kind: str
    packets: int
    fabric: BatchResult
    task_credit_wait_ps: npt.NDArray[np.uint64]
    replays: ReplayStats
    #: plain staged transfers run as chunk trains at flow level (docs/fidelity.md "Chunk trains";
    #: only with collective parameter ``chunk_trains = True`` or ``FLITSIM_CHUNK_TRAINS=1``)
    chunk_trains: int

class TaskGraphResult(TypedDict):
    start_ps: npt.NDArray[np.uint64]
    end_ps: npt.NDArray[np.uint64]
    data_ready_ps: npt.NDArray[np.uint64]
    credit_ready_ps: npt.NDArray[np.uint64]
    makespan_ps: int
    events: int
    #: the executor's exact periodic skip: "periodic: skipped ..." (steps, then layers; the part not
    #: skipped says why) or "not periodic: <why>"
    periodic: str
    network: TaskGraphNetworkStats
