"""Per-GPU memory against xDiT's published Flux.1-dev figures
(docs/memory.md). The setting behind the figures is not published next to
them; ours: 4 x L40, 1024 px (4096 image + 512 T5 tokens), bf16, one warmup
step, DiT backbone only, 1 GB workspace; the fullest device is compared."""

from __future__ import annotations

from typing import Any, Callable

from flitsim.validation.case import Case

SRC = "xDiT docs/performance/flux.md (Flux.1-dev per-GPU memory: 10.89 GB with PipeFusion, 34.21 GB without)"


def _peak_gb(schedule: str, **kw: Any) -> Callable[[Any], float]:
    def compute(ctx: Any) -> float:
        import flitsim.schedules as S
        from flitsim.workloads import dit_workload

        w = dit_workload("flux.1-dev", 1024, steps=28)
        return S.build(schedule, None, w, gpu="l40", **kw).footprint().peak_bytes / 1e9
    return compute


CASES = [
    Case(id="memory.flux_pipefusion_4xl40", area="memory",
         quantity="Flux.1-dev per-GPU memory with PipeFusion (4 stages, 4 x L40, 1024 px, DiT only)", unit="GB",
         source=SRC, measured=10.89, tolerance=0.15,
         tolerance_why=("the published setting is unknown (stage count, resident encoders, workspace); the 1 GB "
                        "workspace alone is 9 % of the figure"),
         call='S.build("pipefusion", None, dit_workload("flux.1-dev", 1024, steps=28), stages=4, gpu="l40")'
              '.footprint().peak_bytes / 1e9',
         compute=_peak_gb("pipefusion", stages=4), tag="calibration",
         fitted="configuration: stage count 4 chosen after computing 1-8 stages (8 would give -34 %)",
         system="L40", size_band="1024 px", fast=True),
    Case(id="memory.flux_no_pipefusion_1xl40", area="memory",
         quantity="Flux.1-dev per-GPU memory without PipeFusion (1 x L40, 1024 px, DiT only)", unit="GB",
         source=SRC, measured=34.21, tolerance=0.15,
         tolerance_why="as for the PipeFusion figure: the published setting is unknown",
         call='S.build("tensor_parallel", None, dit_workload("flux.1-dev", 1024, steps=28), degree=1, gpu="l40")'
              '.footprint().peak_bytes / 1e9',
         compute=_peak_gb("tensor_parallel", degree=1), tag="transfer", system="L40", size_band="1024 px",
         fast=True,
         known_miss=("-26 %: the transformer's weights are 23.8 GB; 34.21 GB is close to the whole pipeline "
                     "(+ T5-XXL ~9.5 GB + CLIP-L + VAE), which flitsim does not model")),
]
