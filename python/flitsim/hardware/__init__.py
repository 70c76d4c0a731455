"""Hardware presets and specs: SerDes lanes, links, systems. Every preset value
carries its public source or is marked *assumed* with a reason."""

from flitsim.hardware.gpus import GPU_PRESETS, Efficiency, GpuSpec, fabric_gpu, gpu_preset, roofline_time_s
from flitsim.hardware.fabric import (
    FABRIC_PRESETS,
    CounterSpec,
    FabricSpec,
    Fault,
    GpuInjection,
    StaticRoute,
    SwitchKind,
    SwitchParams,
    Trunk,
    Wire,
    fabric_from_dict,
    fabric_preset,
    uniform_fabric,
)
from flitsim.hardware.link_spec import FecCode, LinkSpec, PacketFormat, ReplaySpec, SerdesSpec
from flitsim.hardware.links import KP4, LINK_PRESETS, link_preset, nvlink3, nvlink4, nvlink5
from flitsim.hardware.systems import (
    SYSTEM_PRESETS,
    SystemPreset,
    dgx_a100,
    gb200_nvl72,
    hgx_b200,
    hgx_h100,
    system_preset,
)

__all__ = [
    "FABRIC_PRESETS", "CounterSpec", "FabricSpec", "Fault", "GpuInjection", "StaticRoute", "SwitchKind", "SwitchParams", "Trunk", "Wire", "fabric_from_dict",
    "fabric_preset", "uniform_fabric",
    "FecCode", "LinkSpec", "PacketFormat", "ReplaySpec", "SerdesSpec", "KP4", "LINK_PRESETS", "link_preset",
    "nvlink3", "nvlink4", "nvlink5", "SYSTEM_PRESETS", "SystemPreset", "dgx_a100", "gb200_nvl72",
    "hgx_b200", "hgx_h100", "system_preset",
    "GPU_PRESETS", "Efficiency", "GpuSpec", "fabric_gpu", "gpu_preset", "roofline_time_s",
]

# Multi-tier presets (PCIe boxes, scale-out nodes, two NVLink tiers) live in
# their own module (it builds FabricSpecs) and register with fabric_preset here.
from flitsim.hardware.tier_presets import TIER_PRESETS  # noqa: E402

FABRIC_PRESETS.update({_name: _p.build for _name, _p in TIER_PRESETS.items()})
__all__ += ["TIER_PRESETS"]

from flitsim.hardware.torus import kary_ncube  # noqa: E402

__all__ += ["kary_ncube"]
