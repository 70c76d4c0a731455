"""Scale-up system presets at the level the bandwidth ledger needs: how many
GPUs, how many NVLinks each, which link, how many switch chips with how many
ports. (The wired fabric with routing builds on these.)

Every preset's docstring names its public sources.
"""

from __future__ import annotations

from typing import Callable

from pydantic import Field

from flitsim._spec import Spec
from flitsim.errors import ConfigError
from flitsim.hardware.link_spec import LinkSpec
from flitsim.hardware.links import nvlink3, nvlink4, nvlink5


class SystemPreset(Spec):
    """A scale-up domain: ``gpus`` GPUs with ``nvlinks_per_gpu`` links each of
    spec ``link``, switched by ``switch_chips`` chips of ``switch_ports`` ports.
    ``sources`` lists where each number comes from."""

    name: str
    gpu: str
    gpus: int = Field(ge=1)
    nvlinks_per_gpu: int = Field(ge=1)
    link: LinkSpec
    switch_chips: int = Field(ge=0)
    switch_ports: int = Field(ge=0)
    sources: tuple[str, ...] = ()


def gb200_nvl72() -> SystemPreset:
    """GB200 NVL72: 72 GPUs (18 compute trays x 4), 18 NVLink switch chips
    (9 trays x 2) of 72 ports, one NVLink 5 link from every GPU to every chip:
    18 x 50 GB/s per direction = 1.8 TB/s per GPU bidirectional, 129.6 TB/s per rack.

    Sources: DGX GB200 user guide; NVIDIA Mission Control docs; NVLink product page.
    """
    return SystemPreset(
        name="gb200-nvl72", gpu="GB200", gpus=72, nvlinks_per_gpu=18, link=nvlink5(),
        switch_chips=18, switch_ports=72,
        sources=("DGX GB200 user guide", "NVIDIA Mission Control docs", "NVLink product page"),
    )


def hgx_b200() -> SystemPreset:
    """HGX B200: 8 GPUs, 18 NVLink 5 links each, 2 NVLink switch chips.

    Sources: STH HGX B200 report (2 chips); NVLink product page (18 links, 1.8 TB/s).
    assumed: 72 ports per chip, as the NVL72 switch chip (8 x 18 = 144 = 2 x 72).
    """
    return SystemPreset(
        name="hgx-b200", gpu="B200", gpus=8, nvlinks_per_gpu=18, link=nvlink5(),
        switch_chips=2, switch_ports=72,
        sources=("STH HGX B200 report", "NVLink product page"),
    )


def hgx_h100() -> SystemPreset:
    """HGX/DGX H100: 8 GPUs, 18 NVLink 4 links each (5/4/4/5 to the four
    NVSwitch gen3 chips of 64 ports): 450 GB/s per direction per GPU.

    Sources: NVIDIA Fabric Manager user guide; NVIDIA SGX LS10 manual (64 ports).
    """
    return SystemPreset(
        name="hgx-h100", gpu="H100", gpus=8, nvlinks_per_gpu=18, link=nvlink4(),
        switch_chips=4, switch_ports=64,
        sources=("NVIDIA Fabric Manager user guide", "NVIDIA SGX LS10 manual"),
    )


def dgx_a100() -> SystemPreset:
    """DGX/HGX A100: 8 GPUs, 12 NVLink 3 links each (2 to each of 6 NVSwitch
    gen2 chips): 300 GB/s per direction per GPU.

    Sources: NVIDIA Fabric Manager user guide; nccl-tests issue 149.
    assumed: 36 ports per NVSwitch gen2 chip (no source found; only 16 are
    used by the 8 GPUs here).
    """
    return SystemPreset(
        name="dgx-a100", gpu="A100", gpus=8, nvlinks_per_gpu=12, link=nvlink3(),
        switch_chips=6, switch_ports=36,
        sources=("NVIDIA Fabric Manager user guide", "nccl-tests issue 149"),
    )


SYSTEM_PRESETS: dict[str, Callable[[], SystemPreset]] = {
    "gb200-nvl72": gb200_nvl72,
    "hgx-b200": hgx_b200,
    "hgx-h100": hgx_h100,
    "dgx-h100": hgx_h100,
    "dgx-a100": dgx_a100,
    "hgx-a100": dgx_a100,
}


def system_preset(name: str) -> SystemPreset:
    """Look up a system preset (``gb200-nvl72``, ``hgx-b200``, ``hgx-h100``,
    ``dgx-a100`` and aliases).

    Raises:
        ConfigError: for an unknown name (the message lists the known ones).
    """
    key = name.lower().replace("_", "-")
    if key not in SYSTEM_PRESETS:
        raise ConfigError(f"system preset = {name!r}: expected one of {sorted(SYSTEM_PRESETS)}")
    return SYSTEM_PRESETS[key]()
