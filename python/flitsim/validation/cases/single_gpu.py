"""Single-GPU diffusion latencies (the compute model's calibration data:
only ``gemm_efficiency`` and ``attention_efficiency`` per GPU were fitted, on
these rows; docs/compute.md section 5). Multi-GPU tables are kept out of the
fit on purpose. A 1-GPU run is ``tensor_parallel`` at degree 1 (no fabric).
The measured numbers are end to end (text encoder and VAE included); the
model counts the transformer and the VAE decode (``DitWorkload.decode =
"vae"``), not the text encoders (< 1 %)."""

from __future__ import annotations

from typing import Any, Callable

from flitsim.validation.case import Case

README = "xDiT README 2024 latency charts (xdit-project/xDiT history, assets/latency-{gpu}.jpg)"
PAPER = "xDiT paper (Fang et al., arXiv 2411.01738), scalability figures"
FLUX_MD = "xDiT docs/performance/flux.md"
TOL = 0.10
WHY = ("end-to-end times include the text encoders the model leaves out (< 1 %), and are read "
       "off charts (~2 %); 10 % as in tests/test_cost.py")
FIT = "gemm_efficiency, attention_efficiency ({gpu})"


# Text tokens as xDiT's benchmark script runs Flux (examples/flux_example.py: max_sequence_length=256;
# diffusers' default is 512); other models run their config's default.
XDIT_TEXT_TOKENS = {"flux.1-dev": 256}


def _workload_call(model: str, px: Any, steps: int, frames: int = 1) -> str:
    tt = XDIT_TEXT_TOKENS.get(model)
    extra = (f", text_tokens={tt}" if tt else "") + (f", frames={frames}" if frames > 1 else "")
    return f'dit_workload("{model}", {px!r}, steps={steps}{extra})'


def _latency(model: str, px: Any, steps: int, gpu: str, execution: str, frames: int = 1) -> Callable[[Any], float]:
    def compute(ctx: Any) -> float:
        import flitsim.schedules as S
        from flitsim.workloads import dit_workload

        w = dit_workload(model, px, steps=steps, text_tokens=XDIT_TEXT_TOKENS.get(model), frames=frames)
        s = S.build("tensor_parallel", None, w, degree=1, gpu=gpu, execution=execution)
        return S.simulate(s).makespan_ps * 1e-12
    return compute


def _case(model: str, px: Any, steps: int, gpu: str, measured: float, source: str, execution: str = "eager", *,
          tag: str = "calibration", known_miss: str = "", fast: bool = True, fitted: str | None = None,
          frames: int = 1) -> Case:
    short = model.replace(".1-dev", "").replace("-alpha", "").replace("-medium", "").replace("-video", "video")
    size = f"{px[1]}x{px[0]}" if isinstance(px, tuple) else f"{px}"
    cid = f"single_gpu.{short}_{size}_{gpu}" + ("" if execution == "eager" else f"_{execution}")
    what = f"{size} px" + (f" x {frames} frames" if frames > 1 else "")
    return Case(id=cid, area="single_gpu", quantity=f"{model}, {steps} steps, {what}, 1 x {gpu.upper()}, {execution}",
                unit="s", source=source.format(gpu=gpu.upper()), measured=measured, tolerance=TOL, tolerance_why=WHY,
                call=(f'S.simulate(S.build("tensor_parallel", None, {_workload_call(model, px, steps, frames)}, '
                      f'degree=1, gpu="{gpu}", execution="{execution}")).makespan_ps * 1e-12'),
                compute=_latency(model, px, steps, gpu, execution, frames), tag=tag,  # type: ignore[arg-type]
                fitted=(FIT.format(gpu=gpu.upper()) if fitted is None else fitted) if tag == "calibration" else "",
                system=gpu.upper(), size_band=what, fast=fast, known_miss=known_miss)


HV_MD = "xDiT docs/performance/hunyuanvideo.md"
CASES = [
    _case("pixart-alpha", 1024, 20, "a100", 2.085, README),
    _case("pixart-alpha", 2048, 20, "a100", 16.22, README),
    _case("pixart-alpha", 4096, 20, "a100", 183.6, README),
    _case("pixart-alpha", 8192, 20, "a100", 2728, README),
    _case("pixart-alpha", 1024, 20, "l20", 3.34, README),
    _case("pixart-alpha", 2048, 20, "l20", 26.43, README),
    _case("pixart-alpha", 4096, 20, "l20", 306.6, README),
    _case("pixart-alpha", 1024, 20, "l40", 2.8, PAPER),
    _case("pixart-alpha", 2048, 20, "l40", 21.6, PAPER),
    _case("pixart-alpha", 4096, 20, "l40", 244.89, PAPER),
    _case("flux.1-dev", 1024, 28, "l40", 18.36, PAPER),
    _case("flux.1-dev", 2048, 28, "l40", 105.7, PAPER),
    _case("flux.1-dev", 4096, 28, "l40", 855.13, PAPER),
    _case("flux.1-dev", 1024, 28, "h100", 6.71, FLUX_MD),
    _case("flux.1-dev", 1024, 28, "h100", 4.30, FLUX_MD, "compiled"),
    # Not fitted: HunyuanVideo checks the H100 fit on another model and shape, and H20 (which has no fit).
    _case("hunyuan-video", (720, 1280), 50, "h100", 1904.08, HV_MD, tag="transfer", frames=129),
    # H20 runs H100's tops: its low tensor rate per SM-clock puts its FlashAttention-2 MMAs under the mma.sync
    # ceiling H100 hits, and its softmax is a smaller share of each score (docs/compute.md section 10).
    _case("hunyuan-video", (720, 1280), 50, "h20", 6639.17, HV_MD, tag="transfer", frames=129),
    # Not fitted: SD3's step count is not stated next to its figure; 28 is diffusers' default for SD3.
    _case("sd3-medium", 1024, 28, "l40", 3.92, PAPER, tag="transfer",
          known_miss="step count not stated with the figure (28 assumed, diffusers' default; 20 steps gives -22 %)"),
    _case("sd3-medium", 2048, 28, "l40", 22.82, PAPER, tag="transfer",
          known_miss="step count not stated with the figure (28 assumed; 20 steps gives -6 %)"),
]
