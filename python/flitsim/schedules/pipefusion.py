"""PipeFusion: patch-level pipeline parallelism for diffusion transformers
(Fang et al., "PipeFusion: Patch-level Pipeline Parallelism for Diffusion
Transformers Inference", 2024; xDiT).

The DiT's blocks are split into N contiguous stages (balanced by block count;
patch/conditioning embedders on stage 0, the final layer on the last stage);
the image's P tokens into M patches of p = P / M tokens.

1. ``warmup_steps`` (default 1) synchronous full-image steps: each stage runs
   the whole image, hands the full hidden state to the next stage, and the last
   stage returns it to stage 0 for the next step.
2. The continuous patch pipeline: patch m of step s at stage j waits only for
   patch m of step s at stage j-1 (a transfer of the patch's activations,
   :func:`flitsim.models.handoff_bytes` of p tokens) — attention to the other
   patches uses their one-step-stale K/V, already on the device, so there is
   no dependency between patches. The last stage sends each patch back to
   stage 0, where the same patch of step s+1 waits for it. Stage tasks follow
   (step, patch) order, so the pipeline fills once and drains once per image,
   not per step: with zero communication cost, equal stages of time t per
   patch and M >= N, the pipelined phase of S steps takes (S M + N - 1) t.

Patches: **P must be divisible by M** (``patches``), else ConfigError — every
patch then costs the same (full attention: p x P query-key pairs each). With
M < N the return hop makes stage 0 wait each step (allowed, not recommended).
Text tokens of joint models (SD3, Flux) are spread evenly over the patches:
their text-stream work and hidden states go with the patches.

Hand-offs as xDiT runs them (``handoff_sync``, default on): xDiT's
``PipelineGroupCoordinator`` (``xfuser/core/distributed/group_coordinator.py``,
from 2024-08 on) checks shapes before every ``pipeline_isend`` / ``recv_next``
in ``_communicate_shapes``, which calls ``torch.cuda.synchronize()`` twice
even when no shape is exchanged; a device-wide synchronize waits for the NCCL
streams too. So after patch m a stage issues its send, then blocks in
``recv_next`` until that send has completed, and only then posts the receive
of patch m + 1 (xDiT ``pipeline_pixart_alpha.py`` ``_async_pipeline``): a
stage's next patch waits for its previous send, and a send completes only
once the receiver, done with its own previous send, has posted the receive.
Communication no longer hides behind compute at each hop.

Communication per diffusion step (xDiT README: PipeFusion ``2 O(p x hs)``):
each device sends its stage's output for all M patches (p x hs x bytes per
image token, over the P (+ text) tokens) once and receives the same amount,
so sends + receives per device = 2 x P x hs x dtype bytes x step batch; the
send-only count is P x hs x bytes. See docs/schedules.md.
"""

from __future__ import annotations

from typing import Any

from flitsim.errors import check_bool, config_error
from flitsim.memory import pipefusion_memory
from flitsim.models import handoff_bytes
from flitsim.models.kernels import patch_kernels
from flitsim.schedules.builder import Hardware, check_int, new_builder, resolve_devices
from flitsim.schedules.schedule import Schedule
from flitsim.schedules._work import dit_model, dit_stage_layers, is_joint, spread

__all__ = ["build_pipefusion"]


def build_pipefusion(model: Any, workload: Any, *, devices: Any = None, stages: int = 4, patches: int | None = None,
                     warmup_steps: int = 1, steps: int | None = None, gpu: Any = None, efficiency: Any = None,
                     dtype: str = "bf16", inflight_patches: int | None = None, fabric_devices: int | None = None,
                     comm_streams: int = 1, execution: Any = None, profile: Any = None, interference: Any = None, fabric: Any = None,
                     handoff_sync: bool = True) -> Schedule:
    """Lower PipeFusion for one image request to a task graph.

    Args:
        model: the DiT (None: ``workload.model``).
        workload: :class:`~flitsim.workloads.DitWorkload` (image tokens P,
            text tokens, steps, step batch with CFG).
        devices: N device ids (stage j on ``devices[j]``) or a count; default N.
        stages: N (<= the model's blocks); patches: M (default N), dividing P.
        warmup_steps: synchronous full-image steps first (default 1, as xDiT).
        steps: denoising steps (default ``workload.steps``), >= warmup_steps.
        inflight_patches: credit bound per stage hand-off (None = unbounded).
        handoff_sync: hand-offs as xDiT's ``PipelineGroupCoordinator`` runs
            them (default True; see the module docstring): a stage's next
            patch waits for its previous send to complete, and a send waits
            for the receiver to have completed its own previous send (it posts
            the matching receive only then). False: sends overlap compute freely.
        gpu, efficiency, dtype, execution, profile, interference, fabric: the
            compute model (:class:`~flitsim.schedules.builder.Hardware`; the GPU
            defaults to the fabric's, else H100, and ``options["gpu_source"]`` says which).

    Returns:
        :class:`~flitsim.schedules.Schedule` (``steps`` steps; task_step per task).

    Raises:
        ConfigError: not a DiT, more stages than blocks, M not dividing P,
            warmup_steps > steps, device ids outside the fabric.
    """
    cfg, w = dit_model(model, workload)
    N = check_int("stages", stages)
    groups = dit_stage_layers(cfg, N)
    M = N if patches is None else check_int("patches", patches)
    P, B = w.image_tokens, w.step_batch
    if P % M:
        raise config_error("patches", M, f"a divisor of the image's {P} tokens (equal patches)")
    S = w.steps if steps is None else check_int("steps", steps)
    W = check_int("warmup_steps", warmup_steps, 0)
    if W > S:
        raise config_error("warmup_steps", W, f"at most steps = {S}")
    ids, size = resolve_devices(N if devices is None else devices, N, fabric_devices)
    hw = Hardware(gpu, efficiency, dtype, execution, profile, interference, fabric)
    gb = new_builder(size, hw, comm_streams)
    T = w.text_tokens_
    joint = is_joint(cfg)
    p = P // M
    tq = spread(T, M)
    full = [patch_kernels(cfg, P, P, layers=g, batch=B, text_query_tokens=T, text_tokens=T, dtype=dtype) for g in groups]
    full_bytes = handoff_bytes(cfg, P, batch=B, text_tokens=T if joint else 0, dtype=dtype)
    pc = [[patch_kernels(cfg, p, P, layers=g, batch=B, text_query_tokens=tq[m], text_tokens=T, dtype=dtype)
           for g in groups] for m in range(M)]
    pbytes = [handoff_bytes(cfg, p, batch=B, text_tokens=tq[m] if joint else 0, dtype=dtype) for m in range(M)]

    sync = check_bool("handoff_sync", handoff_sync)
    sent = [-1] * N  # per stage: its last send (handoff_sync: what its next compute and the sender into it wait for)

    def send(j: int, c: int, nbytes: int, **kw: Any) -> int:
        nxt = (j + 1) % N
        x = gb.transfer(ids[j], ids[nxt], nbytes, stage=j, **kw)
        gb.edge(c, x)
        if sync and sent[nxt] >= 0:
            gb.edge(sent[nxt], x)  # the receiver posts this receive after its own previous send completed
        sent[j] = x
        return x

    def stage_task(j: int, c: int) -> None:
        if sync and sent[j] >= 0:
            gb.edge(sent[j], c)  # torch.cuda.synchronize() before the next receive: the previous send is done

    ret_prev: list[int] = []  # per patch (or one, after a warmup step): the return hop into stage 0
    for s in range(W):
        prev = ret_prev[0] if ret_prev else -1
        for j in range(N):
            c = gb.compute(ids[j], full[j], stage=j, item=-1, step=s, phase="warmup", label=f"warmup{s}.stage{j}")
            stage_task(j, c)
            if prev >= 0:
                gb.edge(prev, c)
            nxt = (j + 1) % N
            if j + 1 < N or s + 1 < S:
                prev = send(j, c, full_bytes, step=s, phase="warmup", label=f"warmup{s}.{j}->{nxt}")
        ret_prev = [prev]
    credit = None if inflight_patches is None else check_int("inflight_patches", inflight_patches)
    C: list[list[int]] = []
    for s in range(W, S):
        rets = []
        for m in range(M):
            k = (s - W) * M + m
            row = []
            prev = ret_prev[m] if len(ret_prev) == M else (ret_prev[0] if ret_prev else -1)
            for j in range(N):
                c = gb.compute(ids[j], pc[m][j], stage=j, item=m, step=s, label=f"step{s}.patch{m}.stage{j}")
                stage_task(j, c)
                row.append(c)
                if prev >= 0:
                    gb.edge(prev, c)
                if credit is not None and k >= credit and j + 1 < N:
                    gb.edge(C[k - credit][j + 1], c, "credit")
                nxt = (j + 1) % N
                if j + 1 < N or s + 1 < S:
                    prev = send(j, c, pbytes[m], item=m, step=s, label=f"step{s}.patch{m}.{j}->{nxt}")
            C.append(row)
            rets.append(prev)
        ret_prev = rets
    dec = w.decode_kernels(dtype)  # the VAE decode after the last step, the whole output on every device
    if len(dec):
        last = [t for t in (C[-1] if C else ret_prev) if t >= 0]
        gb.compute_on(ids, dec, after=[last] if last else None, label="vae_decode")
    opts = {"model": cfg.name, "image_tokens": P, "patches": M, "patch_tokens": p, "text_tokens": T,
            "step_batch": B, "warmup_steps": W, "stage_layers": groups, "handoff_sync": sync,
            "memory_static": pipefusion_memory(cfg, groups, dtype=dtype, seq_tokens=P + (T if joint else 0),
                                               patch_tokens=p + (max(tq) if joint else 0), batch=B, warmup_steps=W,
                                               patches=M)}
    return gb.freeze("pipefusion", ids, N, S, opts)
