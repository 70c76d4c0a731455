"""xDiT's communication formulas per diffusion step, checked on the bytes the
fabric carried (link statistics of a task-graph run on the cycle-level
fabric), not on the schedule's own count.

xDiT README (xdit-project/xDiT, "communication and memory costs ... of
intra-image parallelism"), per device per step, p tokens, hs hidden, L layers,
N devices, in elements of the activation dtype: tensor parallel 4 p hs L,
DistriFusion and Ring attention 2 p hs L, Ulysses (4/N) p hs L, PipeFusion
2 p hs. The O() forms drop the nccl-tests (N-1)/N factor of a ring / all-to-all
over N ranks (nccl-tests PERFORMANCE.md), kept here; collectives run as ring
(all_to_all direct), Simple protocol, so the wire carries exactly the data."""

from __future__ import annotations

from typing import Any, Callable

from flitsim.validation.case import Case

MODEL, PX = "dit-xl/2", 256  # 256 image tokens, hs 1152, 28 blocks (DiT-XL/2 config, Peebles & Xie 2023)
P, HS, L, B = 256, 1152, 28, 2  # bf16
N = 8
SRC = ("xDiT README (xdit-project/xDiT), communication cost table of intra-image parallelism; nccl-tests "
       "PERFORMANCE.md for the (N-1)/N factor")
WHY = "bytes are exact: only rounding of ring chunks to whole elements could move them (< 0.1 %)"


def _carried(schedule: str, device: int, kw: dict[str, Any], algorithm: str) -> Callable[[Any], Any]:
    def compute(ctx: Any) -> Any:
        import flitsim.schedules as S
        from flitsim.networks import FabricNetwork
        from flitsim.workloads import dit_workload

        w = dit_workload(MODEL, PX, steps=1, cfg=False)
        net = FabricNetwork(ctx.fabric(), collective_params={"algorithm": algorithm, "protocol": "simple"})
        run = S.build(schedule, None, w, **kw).simulate(net).require_run()
        links = run.network["links"]
        links = links[links.gpu == device]
        sent, recv = int(links.payload_bytes.sum()), int(links.rx_payload_bytes.sum())
        return float(sent + recv if schedule == "pipefusion" else sent), f"sent {sent} B, received {recv} B"
    return compute


def _case(schedule: str, quantity: str, expect: float, algorithm: str, kw: dict[str, Any], device: int = 0,
          fast: bool = True) -> Case:
    args = ", ".join(f"{k}={v!r}" for k, v in kw.items())
    return Case(id=f"xdit.{schedule}_n{N}_bytes", area="xdit", quantity=quantity, unit="bytes", source=SRC,
                measured=expect, tolerance=0.001, tolerance_why=WHY,
                call=(f'S.build("{schedule}", None, dit_workload("{MODEL}", {PX}, steps=1, cfg=False), {args})'
                      f'.simulate(FabricNetwork("hgx-h100", collective_params={{"algorithm": "{algorithm}", '
                      f'"protocol": "simple"}})).run.network["links"]  # payload bytes of GPU {device}'),
                compute=_carried(schedule, device, kw, algorithm), tag="theory", system="any fabric",
                size_band=f"{P} tokens", fabric="hgx-h100", min_gpus=N, fast=fast)


F = (N - 1) / N
CASES = [
    _case("tensor_parallel", f"Tensor parallel x{N}, bytes GPU 0 sent per step: 4 p hs L x (N-1)/N",
          4 * F * P * HS * L * B, "ring", {"degree": N}),
    _case("distrifusion", f"DistriFusion x{N}, bytes GPU 0 sent per step: 2 p hs L x (N-1)/N",
          2 * F * P * HS * L * B, "ring", {"degree": N}),
    _case("ring_attention", f"Ring attention x{N}, bytes GPU 0 sent per step: 2 p hs L x (N-1)/N",
          2 * F * P * HS * L * B, "ring", {"degree": N}),
    _case("ulysses", f"Ulysses x{N}, bytes GPU 0 sent per step: (4/N) p hs L x (N-1)/N",
          4 / N * F * P * HS * L * B, "direct", {"degree": N}, fast=True),
    _case("pipefusion", f"PipeFusion x{N} stages, bytes a middle stage (GPU 1) sent + received per step: 2 p hs",
          2 * P * HS * B, "ring", {"stages": N, "patches": N, "warmup_steps": 0}, device=1, fast=True),
]


# ---------------------------------------------------------------------------------------------------------
# HunyuanVideo, Ulysses on 1-8 GPUs: xDiT's published end-to-end latencies (seconds). Nothing is fitted on
# them: H100's tops come from the Flux rows (single_gpu.), H20 runs H100's. The timed region of the measured
# script (xDiT examples/hunyuan_video_usp_example.py) is the whole pipeline call: text encoders, 50 steps,
# and the VAE decode, which that script runs on every rank, whole ("parallel VAE not implemented for
# HunyuanVideo"), with diffusers' default tiles (--enable_tiling): DitWorkload.decode = "vae" models it.
HV_SRC = "xDiT docs/performance/hunyuanvideo.md (1280x720 and 960x960, 129 frames, 50 steps, Ulysses)"
HV_MEASURED: dict[tuple[str, tuple[int, int]], dict[int, float]] = {
    ("h100", (720, 1280)): {1: 1904.08, 2: 925.04, 4: 514.08, 8: 337.58},
    ("h20", (720, 1280)): {1: 6639.17, 2: 3400.55, 4: 1762.86, 8: 940.97},
    ("h100", (960, 960)): {1: 1735.01, 2: 934.09, 3: 645.45, 6: 367.02},
    ("h20", (960, 960)): {1: 6621.46, 3: 2310.48, 6: 1214.67},
}
"""Row left out: H20 960x960 on 2 GPUs (its entry, 3400.55 s, is the 1280x720 one repeated: a copy in the
table). 960x960 on 3 and 6 GPUs: 118,800 + 256 tokens do not split evenly, so the Ulysses builder pads each
rank's share to ceil(p / N) tokens (at most N - 1 tokens; the measured code shards the image tokens and treats
the text apart)."""
HV_TOL = 0.20
HV_WHY = ("multi-GPU end to end: the compute model holds 10 % on single-GPU rows, the text encoders are not "
          "modelled, the H20 runs H100's tops; 20 % as issue 12 checks multi-GPU tables")
_HV_CACHE: dict[tuple[Any, ...], float] = {}
# 8 x H100 runs 29 % too fast (5.64x measured, 7.3x simulated): the serial tail the 2- and 8-GPU points imply
# (a + b / n: a = 142 s on H100, 121 s on H20) is ~12 s of modelled VAE decode on H100 (60 s on H20); what is
# left on H100 is not identified (docs/compute.md section 11).
HV_MISS = ("8 x H100 simulated 29 % too fast: the measured 2- and 8-GPU points imply a ~140 s serial tail on H100; "
           "the modelled VAE decode (diffusers tiles, every rank) is ~12 s of it; the rest is not identified "
           "(docs/compute.md section 11)")


def _hv_latency(gpu: str, px: tuple[int, int], n: int) -> Callable[[Any], float]:
    def compute(ctx: Any) -> float:
        import flitsim.schedules as S
        from flitsim.networks import FabricNetwork
        from flitsim.workloads import dit_workload

        key = (gpu, px, n)
        if key not in _HV_CACHE:
            w = dit_workload("hunyuan-video", px, steps=50, frames=129)
            if n == 1:
                r = S.simulate(S.build("tensor_parallel", None, w, degree=1, gpu=gpu))
            else:
                s = S.build("ulysses", None, w, degree=n, gpu=gpu)
                r = s.simulate(FabricNetwork("hgx-h100", fidelity="flow"))
            _HV_CACHE[key] = r.makespan_ps * 1e-12
        return _HV_CACHE[key]
    return compute


def _hv_case(gpu: str, px: tuple[int, int], n: int, known_miss: str = "") -> Case:
    size = f"{px[1]}x{px[0]}"
    return Case(id=f"xdit.hunyuanvideo_ulysses{n}_{size}_{gpu}", area="xdit",
                quantity=f"HunyuanVideo {size} x 129 frames, 50 steps, Ulysses x{n}, {n} x {gpu.upper()}, end to end",
                unit="s", source=HV_SRC, measured=HV_MEASURED[(gpu, px)][n], tolerance=HV_TOL, tolerance_why=HV_WHY,
                call=(f'S.build("ulysses", None, dit_workload("hunyuan-video", {px!r}, steps=50, frames=129), '
                      f'degree={n}, gpu="{gpu}").simulate(FabricNetwork("hgx-h100", fidelity="flow"))'
                      '.makespan_ps * 1e-12'),
                compute=_hv_latency(gpu, px, n), tag="transfer", system=f"HGX {gpu.upper()}", size_band=f"{size} x 129",
                fabric="hgx-h100", min_gpus=n, fast=True, known_miss=known_miss)


def _hv_speedup(gpu: str, px: tuple[int, int], n: int, known_miss: str = "") -> Case:
    size = f"{px[1]}x{px[0]}"
    m = HV_MEASURED[(gpu, px)]
    one, par = _hv_latency(gpu, px, 1), _hv_latency(gpu, px, n)
    return Case(id=f"xdit.hunyuanvideo_speedup{n}_{size}_{gpu}", area="xdit",
                quantity=f"HunyuanVideo {size} x 129 frames, Ulysses x{n} speedup over 1 x {gpu.upper()}",
                unit="x", source=HV_SRC, measured=round(m[1] / m[n], 3), tolerance=HV_TOL, tolerance_why=HV_WHY,
                call=f"latency(1 GPU) / latency(Ulysses x{n}), as xdit.hunyuanvideo_ulysses{n}_{size}_{gpu}",
                compute=lambda ctx: one(ctx) / par(ctx), tag="transfer", system=f"HGX {gpu.upper()}",
                size_band=f"{size} x 129", fabric="hgx-h100", min_gpus=n, fast=True, known_miss=known_miss)


CASES += [
    _hv_case("h100", (720, 1280), 2), _hv_case("h100", (720, 1280), 4), _hv_case("h100", (720, 1280), 8, HV_MISS),
    _hv_case("h20", (720, 1280), 2), _hv_case("h20", (720, 1280), 4), _hv_case("h20", (720, 1280), 8),
    _hv_case("h100", (960, 960), 2), _hv_case("h100", (960, 960), 3), _hv_case("h100", (960, 960), 6),
    _hv_case("h20", (960, 960), 3), _hv_case("h20", (960, 960), 6),
    _hv_speedup("h100", (720, 1280), 8, HV_MISS), _hv_speedup("h20", (720, 1280), 8),
]


# ---------------------------------------------------------------------------------------------------------
# Flux.1-dev 1024 px, 28 steps, on 4 x H100: xDiT docs/performance/flux.md (added in xDiT 8275240,
# 2024-11-28, with examples/flux_usp_example.py and xfuser/model_executor/layers/usp.py: the USP() path,
# whose ring is PyTorch's context-parallel ring, hence ring_impl="torch_cp"). 256 text tokens as the
# single-GPU calibration rows of the same table (single_gpu.XDIT_TEXT_TOKENS; flux_usp_example.py itself
# passes no max_sequence_length, i.e. diffusers' 512: docs/compute.md section 12). Nothing fitted on them.
FLUX_SRC = "xDiT docs/performance/flux.md (Flux.1-dev, 28 steps, 1024 px, 4 x H100, PyTorch and torch.compile)"
FLUX_MEASURED: dict[str, tuple[dict[str, int], float, float]] = {
    # name: (degrees, eager s, compiled s)
    "ulysses2": ({"ulysses": 2}, 4.38, 2.68), "ring2": ({"ring": 2}, 5.31, 2.60),
    "ulysses2_ring2": ({"ulysses": 2, "ring": 2}, 5.19, 1.80), "ulysses4": ({"ulysses": 4}, 4.24, 1.63),
    "ring4": ({"ring": 4}, 5.11, 1.98),
}
FLUX_MISS = ("eager multi-GPU Flux runs 1.2-2.3x too fast: the measured eager steps take ~150-190 ms whatever the "
             "degree, a floor the sourced per-op host costs (10 us per launch, 3.3 us per host op) do not produce; "
             "the eager PyTorch ring merge (ring_impl torch_cp) narrows it, no value is fitted (docs/compute.md "
             "sections 8, 9, 12)")


def _flux_latency(degrees: dict[str, int], execution: str) -> Callable[[Any], float]:
    def compute(ctx: Any) -> float:
        import flitsim.schedules as S
        from flitsim.networks import FabricNetwork
        from flitsim.workloads import dit_workload

        w = dit_workload("flux.1-dev", 1024, steps=28, text_tokens=256)
        extra = {"ring_impl": "torch_cp"} if degrees.get("ring", 1) > 1 else {}
        s = S.build("usp", None, w, gpu="h100", execution=execution, **degrees, **extra)
        return s.simulate(FabricNetwork("hgx-h100", fidelity="flow")).makespan_ps * 1e-12
    return compute


def _flux_case(name: str, execution: str) -> Case:
    degrees, eager, compiled = FLUX_MEASURED[name]
    n = 1
    for v in degrees.values():
        n *= v
    args = ", ".join(f"{k}={v}" for k, v in degrees.items())
    ring = ', ring_impl="torch_cp"' if degrees.get("ring", 1) > 1 else ""
    measured = eager if execution == "eager" else compiled
    miss = FLUX_MISS if execution == "eager" and name != "ulysses2" else ""
    return Case(id=f"xdit.flux_{name}_1024_h100_{execution}", area="xdit",
                quantity=f"Flux.1-dev 1024 px, 28 steps, {args}, {n} x H100, {execution}, end to end",
                unit="s", source=FLUX_SRC, measured=measured, tolerance=HV_TOL, tolerance_why=HV_WHY,
                call=(f'S.build("usp", None, dit_workload("flux.1-dev", 1024, steps=28, text_tokens=256), '
                      f'gpu="h100", execution="{execution}", {args}{ring})'
                      '.simulate(FabricNetwork("hgx-h100", fidelity="flow")).makespan_ps * 1e-12'),
                compute=_flux_latency(degrees, execution), tag="transfer", system="HGX H100", size_band="1024 px",
                fabric="hgx-h100", min_gpus=n, fast=True, known_miss=miss)


CASES += [_flux_case(name, ex) for name in FLUX_MEASURED for ex in ("eager", "compiled")]
