"""flitsim: GPU fabrics (NVLink/NVSwitch, PCIe, Ethernet/InfiniBand, user graphs)
simulated at packet level (cycle-level switches) and flow level, driven by
inference workloads and parallel schedules.

Entry points, one per job: :func:`ledger` (the bandwidth ledger of a link or
system), :func:`link_transfer` (the link lab), :mod:`flitsim.switchlab` (the
switch lab), :func:`transfers` (traffic on a whole fabric), :func:`collective`
and :func:`nccl_tests` (collectives, nccl-tests style), :mod:`flitsim.networks`
(what a task graph runs over: :class:`AnalyticNetwork`, :class:`FabricNetwork`),
:mod:`flitsim.schedules`
(TeraPipe, PipeFusion and baselines as task graphs), :mod:`flitsim.scenario`
(``flitsim run``: scenario files, the main job's runner, writing the report),
:mod:`flitsim.serving` (``flitsim serve``: arrival-driven LLM serving on a fabric),
:mod:`flitsim.report` (metrics, critical path, scorecard, plots, traces), :func:`sweep`,
and faults: :func:`goodput_vs_ber`, :func:`fec_error_model`, :class:`Fault`
(dead links and planes, ``FabricSpec.with_faults``).
Presets live in :mod:`flitsim.hardware`, models in :mod:`flitsim.models`,
workloads in :mod:`flitsim.workloads`.
Errors: :class:`ConfigError` (a ValueError), :class:`StalledError` (a RuntimeError),
:class:`WorkerCrashedError` (a RuntimeError: a `-j N` worker died, even rerun alone).
"""

from flitsim._core import __version__
from flitsim.errors import ConfigError, StalledError, WorkerCrashedError
from flitsim.hardware import LinkSpec, PacketFormat, SerdesSpec, SystemPreset, link_preset, system_preset
from flitsim.ledger import Ledger, ledger
from flitsim.linklab import LinkTransferResult, link_transfer
from flitsim import switchlab
from flitsim.transfers import TransferResult, transfers
from flitsim.collectives import CollectiveResult, collective, nccl_tests
from flitsim.faults import fec_error_model, goodput_vs_ber
from flitsim.hardware.fabric import CounterSpec, Fault, SwitchKind, Trunk
from flitsim.hardware.torus import kary_ncube
from flitsim.routing import Route, RouteHop, route
from flitsim.networks import AnalyticNetwork, FabricNetwork, IdealNetwork
from flitsim.sweeps import sweep
from flitsim import report
from flitsim.interrupt import cancel_all, install_sigint_handler

install_sigint_handler()  # Ctrl-C also stops simulations on worker threads

__all__ = [
    "__version__", "ConfigError", "StalledError", "WorkerCrashedError", "LinkSpec", "PacketFormat", "SerdesSpec",
    "SystemPreset", "link_preset", "system_preset", "Ledger", "ledger", "LinkTransferResult",
    "link_transfer", "switchlab", "AnalyticNetwork", "IdealNetwork", "FabricNetwork", "TransferResult", "transfers",
    "CollectiveResult", "collective", "nccl_tests", "sweep", "report", "scenario", "serving", "Fault",
    "fec_error_model", "goodput_vs_ber", "cancel_all", "SwitchKind", "Trunk", "CounterSpec", "kary_ncube", "Route", "RouteHop", "route",
    "plan",
]


def __getattr__(name: str) -> object:
    # flitsim.scenario loads on first use: it pulls in schedules, models and
    # pandas, which ``import flitsim`` alone does not need.
    if name in ("scenario", "serving"):
        import importlib

        return importlib.import_module(f"flitsim.{name}")
    if name == "plan":  # flitsim.plan(model, workload, fabric=..., gpus=...): loads schedules on first use
        from flitsim.planner import plan

        return plan
    raise AttributeError(f"module 'flitsim' has no attribute {name!r}")
