"""Type stubs for the Rust extension ``flitsim._core`` (checked with
``python -m mypy.stubtest flitsim._core``). Specs are plain dicts mirroring the
Rust serde structs; per-element results are numpy arrays."""

from typing import Any, final

import numpy as np
import numpy.typing as npt

__version__: str
__all__ = [
    "CompiledFabric", "ConfigError", "StalledError", "__version__", "cancel_all", "collective_defaults", "collective_ideal", "collective_run",
    "execute_taskgraph", "fabric_check", "fabric_compile", "fabric_domains", "fabric_route", "fabric_transfers", "fabric_transfers_transport", "fec_error_model", "hold_model_events_per_s", "link_timing",
    "link_transfer", "serdes_rates", "switch_lab",
]

from flitsim._core_types import (
    BatchResult, CollectiveParams, CollectiveResult, LinkTimingResult, LinkTransferResult, SerdesRates,
    SwitchLabResult, TaskGraphResult,
)

# ---------------------------------------------------------------- functions and errors

class ConfigError(ValueError):
    """A configuration value is invalid; the message names the field, the value and what is allowed."""

class StalledError(RuntimeError):
    """The simulation stopped making progress with work pending; the message says what is blocked."""

def cancel_all() -> None:
    """Cancel every simulation running in this process, on any thread."""

def serdes_rates(spec: Any) -> SerdesRates:
    """Rate chain of a SerDes spec dict: line/post-FEC/payload rates (Gb/s), bit time and FEC accumulation (ps)."""

def link_timing(spec: Any) -> LinkTimingResult:
    """Validate a link spec dict; returns ``{"rates": ..., "timing": ...}`` (integer ps timing)."""

def link_transfer(spec: Any) -> LinkTransferResult:
    """Run the two-endpoint link experiment; arrays ``start_ps``/``arrival_ps`` are uint64."""

def switch_lab(spec: Any) -> SwitchLabResult:
    """Run one switch-lab experiment (spec dict mirrors ``SwitchLabSpec``); per
    (port, VC) arrays in ``inputs``/``outputs`` are flat uint64, index ``port * vcs + vc``."""

def hold_model_events_per_s(pending: int, operations: int, seed: int) -> float:
    """Events per wall-second of the hold model with ``pending`` events queued."""

def execute_taskgraph(graph: dict[str, Any], network: Any) -> TaskGraphResult:
    """Execute a columnar task graph (numpy arrays) over a network spec dict; per-task uint64 arrays out
    (on a fabric, ``network["fidelity"]`` and ``network["fidelity_reason"]`` say which fidelity ran and why).
    An optional ``period_tasks`` column (uint32, shape (1 + k,): tasks per identical denoising step,
    then up to k tasks-per-layer periods inside a step) declares the periods; the executor verifies
    each task by task and skips repeated steps and layers exactly; ``periodic`` says what it skipped
    or why not."""

def fabric_check(spec: Any) -> None:
    """Validate a fabric spec dict; raises ConfigError naming the wire or GPU at fault."""

@final
class CompiledFabric:
    """A fabric spec dict converted and validated once (immutable); every binding that
    takes a fabric spec (``spec`` arguments) takes this in place of the dict."""
    @property
    def gpus(self) -> int: ...

def fabric_compile(spec: Any) -> CompiledFabric:
    """Convert and validate a fabric spec dict once (as :func:`fabric_check`); ConfigError as there."""

def fabric_domains(spec: Any) -> list[list[int]]:
    """The fabric's domains: lists of GPU ids joined without a route through a NIC or an Ethernet /
    InfiniBand switch (one node of a scale-out fabric; one list for a one-layer fabric), ordered by
    their lowest id; ConfigError for an invalid spec."""

def fabric_route(spec: Any, src: int, dst: int) -> dict[str, Any]:
    """One representative route from endpoint ``src`` to ``dst``: ``hops`` (dicts: element, kind, name,
    index, in_port, out_port, link, link_GBps, link_payload_GBps, ecmp, dateline: the torus dimension
    whose dateline the outgoing trunk is, or None), ``dst_name``, ``vc_class`` (bit d: the route crosses
    a dateline of dimension d) and ``p2p_blocker`` (the element forbidding GPU peer-to-peer on it, or
    None); ConfigError for bad ids."""

def fabric_transfers(spec: Any, batch: dict[str, Any]) -> BatchResult:
    """Run a batch of transfers (numpy columns src, dst, bytes, start_ps, after) on a fabric spec dict;
    ``links`` holds per-GPU-port uint64 columns (including link-level retry ``replays``, ``replay_ps``,
    ``rx_replays``, ``rx_payload_bytes``, ``lost_bytes``), ``faults`` the fault accounting
    (``faults_applied``, ``lost_packets``, ``lost_bytes``, ``delivered_bytes``,
    ``replayed_delivered_bytes``, ``sent_bytes``); it runs at the spec's ``fidelity`` (packet, flow
    or auto) and says which ran in ``fidelity`` and why in ``fidelity_reason``."""

def fabric_transfers_transport(spec: Any, batch: dict[str, Any], transports: list[str], params: Any) -> BatchResult:
    """As :func:`fabric_transfers`, each transfer by its transport (``transports``: one name or one per
    transfer: auto, p2p, host, rdma) with transport parameters ``params`` (CollectiveParams fields);
    ConfigError naming the element where a forced transport's route forbids it."""

def fec_error_model(serdes: Any, ber: float) -> dict[str, Any]:
    """Closed-form error probabilities of a SerDes spec dict at raw bit error rate ``ber``:
    ``symbol_error_prob``, ``correctable_symbols`` (t), ``codeword_clean_prob``,
    ``codeword_corrected_prob``, ``codeword_uncorrectable_prob``, ``codeword_flit_bits``,
    ``hazard_per_flit_bit``; ConfigError if ``ber`` is outside [0, 1)."""

def collective_run(spec: Any, request: Any) -> CollectiveResult:
    """Run one collective (request dict mirrors ``CollectiveRequest``: op, members, bytes, params) on a fabric spec dict;
    ``bytes_sent``/``bytes_received`` (the lowering's count), ``link_bytes_sent``/``link_bytes_received``
    (what the fabric's links carried and delivered) and ``rx_payload_bytes`` are uint64 arrays per GPU,
    ``faults`` the fault accounting (as in :func:`fabric_transfers`), ``auto_candidates`` the pairs ``auto`` simulated.; ``fidelity`` and
    ``fidelity_reason`` as in :func:`fabric_transfers`."""

def collective_ideal(gpus: int, alpha_ps: int, bandwidth_bytes_per_s: float, nvls: bool, request: Any) -> int:
    """Completion time (ps) of a collective's DAG on the ideal alpha-beta port model."""

def collective_defaults() -> CollectiveParams:
    """The default, calibrated collective parameters (link_efficiency, nvls_efficiency, latencies ...)."""
