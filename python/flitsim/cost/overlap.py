"""Communication steals compute: while a communication kernel runs on a
device, the compute running beside it slows down.

NCCL runs collectives and its point-to-point send/recv as CUDA kernels: each
channel is one thread block resident on one SM for the whole operation (NCCL
docs, "NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS": "each channel uses one CUDA
block"), so a compute kernel overlapped with it has ``sm_count - channels``
SMs. Copy engines (``cudaMemcpyPeerAsync``) use no SMs. The share of a
device's compute rate a communication task takes is

    steal = channels / sm_count

per transport (:class:`CommInterference`): ``collective_channels`` for NCCL
collectives (default 16: NCCL's NVLS collectives run ``NCCL_NVLS_NCHANNELS``
channels, 16 by default (NCCL source, src/transport/nvls.cc); its ring / tree
channels are capped at ``MAXCHANNELS`` = 32 (src/include/device.h, NCCL 2.18)
and NCCL_DEBUG=INFO init logs of 8-GPU NVSwitch boxes show 16 collective
channels on H800 ("16 coll channels ... 16 p2p channels per peer",
NVIDIA/nccl#892) and rings on channels 0-23 on H100 (NVIDIA/nccl#1259); NCCL's
documentation of NCCL_MIN/MAX_NCHANNELS: fewer channels = fewer CUDA blocks =
less impact on compute. 16 of H100's 132 SMs = 12 %, 24 = 18 %; the default
is the low end of what the logs show), ``p2p_channels`` for NCCL send/recv
hand-offs (default 8, **assumed**: a hand-off of one PipeFusion patch is one
peer; the H800 log allows up to 16 per peer), ``copy_engine`` transfers 0. HBM bandwidth the communication
kernels take is not modelled (a documented underestimate for memory-bound compute).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from flitsim._spec import Spec

__all__ = ["CommInterference"]


class CommInterference(Spec):
    """Per-transport SM use of communication kernels (see the module docstring).

    Attributes:
        collective_channels: SMs an NCCL collective occupies on each member (assumed 16).
        p2p_channels: SMs an NCCL send/recv occupies on its source (assumed 8).
        transfer_transport: how schedules move point-to-point data: ``nccl`` (SM
            kernels, as torch.distributed send/recv) or ``copy_engine`` (no SMs).
        enabled: False turns the effect off (overlap is free, the old behaviour).
    """

    collective_channels: int = Field(default=16, ge=0)
    p2p_channels: int = Field(default=8, ge=0)
    transfer_transport: Literal["nccl", "copy_engine"] = "nccl"
    enabled: bool = True

    def collective_steal(self, sm_count: int) -> float:
        """Share of a member's compute rate an NCCL collective takes, in [0, 0.95]."""
        return min(0.95, self.collective_channels / sm_count) if self.enabled else 0.0

    def transfer_steal(self, sm_count: int) -> float:
        """Share of the source's compute rate a point-to-point transfer takes."""
        if not self.enabled or self.transfer_transport == "copy_engine":
            return 0.0
        return min(0.95, self.p2p_channels / sm_count)
