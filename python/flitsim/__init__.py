"""flitsim: cycle-level simulation of GPU scale-up fabrics (NVLink/NVSwitch
class) driven by inference workloads.

Entry points, one per job: :func:`ledger` (the bandwidth ledger of a link or
system), :func:`link_transfer` (the link lab), :mod:`flitsim.switchlab` (the
switch lab), :func:`transfers` (traffic on a whole fabric), :func:`collective`
and :func:`nccl_tests` (collectives, nccl-tests style), :mod:`flitsim.schedules`
(TeraPipe, PipeFusion and baselines as task graphs), :mod:`flitsim.report`
(``flitsim run``: metrics, critical path, scorecard, report) and :func:`sweep`.
Presets live in :mod:`flitsim.hardware`, models in :mod:`flitsim.models`,
workloads in :mod:`flitsim.workloads`.
Errors: :class:`ConfigError` (a ValueError), :class:`StalledError` (a RuntimeError).
"""

from flitsim._core import __version__
from flitsim.errors import ConfigError, StalledError
from flitsim.hardware import LinkSpec, PacketFormat, SerdesSpec, SystemPreset, link_preset, system_preset
from flitsim.ledger import Ledger, ledger
from flitsim.linklab import LinkTransferResult, link_transfer
from flitsim import switchlab
from flitsim.transfers import FabricNetwork, TransferResult, transfers
from flitsim.collectives import CollectiveResult, collective, nccl_tests
from flitsim.sweeps import sweep
from flitsim import report
from flitsim.interrupt import cancel_all, install_sigint_handler

install_sigint_handler()  # Ctrl-C also stops simulations on worker threads

__all__ = [
    "__version__", "ConfigError", "StalledError", "LinkSpec", "PacketFormat", "SerdesSpec",
    "SystemPreset", "link_preset", "system_preset", "Ledger", "ledger", "LinkTransferResult",
    "link_transfer", "switchlab", "FabricNetwork", "TransferResult", "transfers",
    "CollectiveResult", "collective", "nccl_tests", "sweep", "report", "cancel_all",
]
