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
