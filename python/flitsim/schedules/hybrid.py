"""Hybrid schedules for DiTs and causal prefill: PipeFusion x USP x CFG
parallel (xDiT's hybrid; Fang et al., "xDiT: an Inference Engine for
Diffusion Transformers with Massive Parallelism", arXiv 2411.01738), with
pure USP (Fang & Zhao, "USP: A Unified Sequence Parallelism Approach for Long
Context Generative AI", arXiv 2405.07719) and CFG parallel as special cases.

The devices form a grid ``pp x cfg x ring x ulysses`` (outermost first;
:mod:`flitsim.schedules.placement` maps it onto the fabric, Ulysses innermost
so its all-to-alls stay in the fastest domain):

- **cfg** (1 or 2): the conditional and unconditional passes of
  classifier-free guidance on two device groups, each running half the step
  batch. After each denoising step, the two branches exchange their noise
  predictions: one all_gather per step between corresponding ranks of the
  branches (nccl-tests size: both branches' output latents of the rank's
  tokens, ``step batch x tokens / sp x out_channels x patch^2 x bytes``).
  The latent stays sharded over the sequence-parallel ranks (the sampler step
  is elementwise; xDiT gathers it over the SP group too, a latent-sized
  transfer left out here: 0.5 MB for 4096 tokens of 64 channels).
- **sequence parallel** over ``ring x ulysses`` = n devices (USP): every
  device holds q / n tokens of the residual stream; per layer, inside each
  Ulysses group of u devices, three all-to-alls re-shard Q, K, V from tokens
  to heads and one the output back (as :mod:`flitsim.schedules.ulysses` with
  the sequence shard q / n); after them each device holds q / r tokens of
  H / u heads, and inside each ring of r devices (same Ulysses rank) the K/V
  blocks of ``keys / r`` tokens x kv_width / u travel around the ring in r - 1
  steps overlapping blockwise attention (as :mod:`flitsim.schedules.ring_attention`).
  Per device per layer: Ulysses ``4 (u-1)/u x q/n x hs x bytes x batch``
  (multi-head attention) — the pure-Ulysses bytes of degree u on a sequence
  of q / r tokens — and ring ``(r-1)/r x keys x kv_width/u x bytes x batch`` —
  the pure-ring bytes of degree r divided by u.
- **padding**: a pass of q tokens that n does not divide is padded to
  ``ceil(q / n)`` tokens per rank (:func:`flitsim.models.kernels.tokens_per_rank`,
  at most n - 1 zero tokens, as xDiT pads its sequence to a multiple of the
  sequence-parallel size): the all-to-alls, their reshape copies, the ring's
  K/V blocks (``ceil(keys / n) x kv_width``), the stage hand-offs and the CFG
  gathers all carry the padded shard; exact ``q / n`` when n divides q.
- **pp** (PipeFusion stages): contiguous block ranges; each stage is a
  sequence-parallel group. ``warmup_steps`` full-image steps, then the patch
  pipeline: patch m of step s at stage j waits for patch m at stage j - 1
  (rank-to-rank hand-offs of the rank's token shard) and attends over the
  full sequence: its own fresh K/V and the other patches' one-step-stale K/V
  already on the stage (the ring then rotates the full sequence's K/V shards,
  ``keys = P (+ text)``, since every rank holds the stale K/V of its share).
  The last stage returns each patch to stage 0. Models with long skip
  connections between blocks (HunyuanDiT) pay one more hand-off per patch for
  every skip whose two ends sit on different stages.
- **ep** (expert parallelism, MoE LLMs only; see :mod:`flitsim.schedules.moe`).

Causal prefill (an int workload) runs the sequence-parallel part only
(``pp = cfg = 1``); ring blocks are causal as in ring_attention.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from flitsim.errors import check_bool, config_error
from flitsim.memory import hybrid_memory
from flitsim.models import handoff_bytes
from flitsim.models.config import dtype_bytes
from flitsim.models.kernels import Kernels, patch_kernels, ring_step_kernels, tokens_per_rank
from flitsim.schedules._work import block_kind, dit_stage_layers, is_joint, layer_work, require_token_split, spread
from flitsim.schedules.builder import GraphBuilder, Hardware, check_int, new_builder
from flitsim.schedules.placement import place
from flitsim.schedules.ring_attention import _block
from flitsim.schedules.schedule import Schedule

__all__ = ["build_hybrid", "skip_pairs"]


def skip_pairs(cfg: Any) -> list[tuple[int, int]]:
    """(source block, destination block) of the model's long skip connections
    (HunyuanDiT: block i > L // 2 takes the output of block L - 1 - i; see
    :func:`flitsim.models.zoo.hunyuan_dit`); [] for other models."""
    if getattr(cfg, "dit_block", None) != "hunyuan":
        return []
    L = cfg.n_blocks
    return [(L - 1 - i, i) for i in range(L // 2 + 1, L)]


class _SP:
    """Kernels of one block for one pass (q query tokens against ``keys`` keys)
    on a sequence-parallel group of r x u devices, prepared once."""

    def __init__(self, k: Kernels, *, u: int, r: int, q: int, keys: int, batch: int, aw: int, kw: int, b: int,
                 kind: str, ep: Any = None, ring_impl: str = "ring_flash_attn") -> None:
        n = u * r
        kt = k.shard_tokens(n)
        t = tokens_per_rank(q, n)  # the rank's shard of the pass, padded to a multiple of n (at most n - 1 tokens)
        qkv_elems = int(round(t * (aw + kw) * batch))
        out_elems = int(round(t * aw * batch))
        send = Kernels.elementwise("reshape", qkv_elems, b, part="pre_attn") if u > 1 else Kernels.empty()
        recv = Kernels.elementwise("reshape", out_elems, b, part="post_attn") if u > 1 else Kernels.empty()
        self.pre = kt.parts("pre_attn") + send
        self.post = recv + (kt.parts("post_attn") if ep is None else kt.parts("post_attn"))
        self.mlp = kt.parts("mlp") if ep is None else ep.local_mlp(kt)
        att = k.parts("attn")
        rin = Kernels.elementwise("reshape", qkv_elems, b, part="attn") if u > 1 else Kernels.empty()
        rout = Kernels.elementwise("reshape", out_elems, b, part="attn") if u > 1 else Kernels.empty()
        self.blocks: dict[tuple[int, int], Kernels | None] = {}
        if r == 1:
            self.blocks[(0, 0)] = Kernels.concat([rin, att.attention_as(heads_div=u), rout])
        else:
            for qd in range(r):
                for kd in range(r):
                    blk = _block(att, kind, r, qd, kd)
                    self.blocks[(qd, kd)] = None if blk is None else blk.attention_as(heads_div=u)
        # the kernels of every (ring position, ring step), reshapes included, built once:
        # task times are cached per kernel table
        empty = Kernels.empty()
        self.step_k: dict[tuple[int, int], Kernels] = {}
        for d in range(r):
            for st in range(r):
                kb = self.blocks[(d, (d - st) % r)] if r > 1 else self.blocks[(0, 0)]
                kb = empty if kb is None else kb
                if r > 1:  # the ring's online-softmax merge around the block (as ring_attention)
                    runs = self.blocks[(d, (d - st) % r)] is not None or st == r - 1
                    m = ring_step_kernels(self.blocks[(d, d)], st == 0, st == r - 1, ring_impl) if runs else empty
                    kb = Kernels.concat([rin if st == 0 else empty, kb, m, rout if st == r - 1 else empty])
                self.step_k[(d, st)] = kb
        self.post_mlp = self.post + self.mlp
        self.shard = lambda width: int(round(t * width * b * batch))  # noqa: E731
        # a ring block: the u shards of ceil(keys / n) tokens an Ulysses all-to-all gathers, kv_width / u each
        self.block_bytes = int(round(tokens_per_rank(keys, n) * kw * b * batch))
        self.aw, self.kw = aw, kw


def _sp_layer(gb: GraphBuilder, grid: np.ndarray, sp: _SP, after: list[int], *, u: int, r: int, stage: int,
              item: int, step: int, layer: int, phase: str, label: str, ep: Any = None) -> list[int]:
    """One block on the r x u group ``grid`` (shape (r, u)); ``after``: one task
    per device in grid order (< 0: none). Returns the tails, same order.
    Without ``ep``, recorded once per (block kernels, grid, phase) and
    appended as columns (:meth:`GraphBuilder.repeat`; the same rows)."""
    if ep is not None:
        return _sp_layer_tasks(gb, grid, sp, after, u=u, r=r, stage=stage, item=item, step=step, layer=layer,
                               phase=phase, label=label, ep=ep)
    key = ("sp", id(sp), grid.tobytes(), grid.shape, u, r, phase, len(after))
    return gb.repeat(key, lambda g, aft, st, ly, px, item, stage: _sp_layer_tasks(
        g, grid, sp, aft, u=u, r=r, stage=stage, item=item, step=st, layer=ly, phase=phase, label=px),
        after, step=step, layer=layer, prefix=label, item=item, stage=stage)


def _sp_layer_tasks(gb: GraphBuilder, grid: np.ndarray, sp: _SP, after: list[int], *, u: int, r: int, stage: int,
                    item: int, step: int, layer: int, phase: str, label: str, ep: Any = None) -> list[int]:
    """:func:`_sp_layer`, task by task."""
    ids = [int(x) for x in grid.reshape(-1)]
    kw: dict[str, Any] = dict(stage=stage, step=step, layer=layer, phase=phase)
    pre = gb.compute_on(ids, sp.pre, after=after, item=item, label=f"{label}.qkv", **kw)
    pre_at = np.array(pre, np.int64).reshape(r, u)
    ready: list[list[int]] = [[t] for t in pre]  # per device: what its attention inputs wait for
    if u > 1:
        for ri in range(r):
            grp = [int(x) for x in grid[ri]]
            xs = []
            for name, width in (("q", sp.aw), ("k", sp.kw // 2), ("v", sp.kw - sp.kw // 2)):
                x = gb.collective(grp, "all_to_all", sp.shard(width), item=item, label=f"{label}.r{ri}.a2a_{name}", **kw)
                gb.edges([int(t) for t in pre_at[ri]], x)
                xs.append(x)
            for ui in range(u):
                ready[ri * u + ui] = xs
    last: list[int] = [-1] * (r * u)
    for ui in range(u):
        X = [[-1] * r for _ in range(r)]
        A = [[-1] * r for _ in range(r)]
        for k in range(r):
            for d in range(r):
                if k >= 1:
                    x = gb.transfer(int(grid[d, ui]), int(grid[(d + 1) % r, ui]), sp.block_bytes, item=item,
                                    label=f"{label}.u{ui}.kv{k}.d{d}", **kw)
                    if k == 1:
                        gb.edges(ready[d * u + ui], x)
                    else:
                        gb.edge(X[(d - 1) % r][k - 1], x)
                    X[d][k] = x
            for d in range(r):
                a = gb.compute(int(grid[d, ui]), sp.step_k[(d, k)], item=item, label=f"{label}.u{ui}.attn{k}.d{d}",
                               **kw)
                if k == 0:
                    gb.edges(ready[d * u + ui], a)
                else:
                    gb.edge(A[d][k - 1], a)
                    gb.edge(X[(d - 1) % r][k], a)
                A[d][k] = a
        for d in range(r):
            last[d * u + ui] = A[d][r - 1]
    post_after: list[int] = list(last)
    if u > 1:
        for ri in range(r):
            grp = [int(x) for x in grid[ri]]
            o = gb.collective(grp, "all_to_all", sp.shard(sp.aw), item=item, label=f"{label}.r{ri}.a2a_out", **kw)
            gb.edges([last[ri * u + ui] for ui in range(u)], o)
            for ui in range(u):
                post_after[ri * u + ui] = o
    if ep is None:
        return gb.compute_on(ids, sp.post_mlp, after=post_after, item=item, label=f"{label}.post", **kw)
    post = gb.compute_on(ids, sp.post, after=post_after, item=item, label=f"{label}.post", **kw)
    return ep.lower(gb, ids, post, sp.mlp, item=item, label=label, **kw)


def build_hybrid(model: Any, workload: Any, *, devices: Any = None, stages: int = 1, patches: int | None = None,
                 warmup_steps: int = 1, ulysses: int = 1, ring: int = 1, cfg: int = 1, ep: int = 1,
                 steps: int | None = None, batch: int = 1, gpu: Any = None, efficiency: Any = None,
                 dtype: str = "bf16", include_embed_head: bool = True, fabric_devices: int | None = None,
                 comm_streams: int = 1, execution: Any = None, profile: Any = None, interference: Any = None,
                 fabric: Any = None, placement: Any = "domain", name: str = "usp",
                 ring_impl: str = "ring_flash_attn", handoff_sync: bool = True) -> Schedule:
    """Lower PipeFusion (``stages``) x USP (``ulysses`` x ``ring``) x CFG
    parallel (``cfg``) for a DiT request, or USP (x ``ep``) for a causal prefill.

    Args:
        model: DiT (None: ``workload.model``) or causal LLM.
        workload: :class:`~flitsim.workloads.DitWorkload` or an int prefill length.
        devices: stages x cfg x ring x ulysses ids (grid order) or a count.
        stages: PipeFusion stages (1: no pipeline); patches: M (default stages), dividing P.
        ulysses, ring: Ulysses degree u (dividing the heads), ring degree r.
        cfg: 1 or 2 (CFG branches on two device groups; needs a workload with CFG).
        ep: expert-parallel degree (MoE models; = ulysses x ring); see :mod:`flitsim.schedules.moe`.
        placement: ``"domain"`` (default), ``"linear"`` or an explicit grid
            (:func:`flitsim.schedules.placement.place`).
        name: the schedule name recorded (``usp``, ``cfg_parallel``, ``pipefusion``).
        ring_impl: the ring implementation whose per-step kernels run
            (:data:`flitsim.models.kernels.RING_IMPLS`; as ``ring_attention``).
        handoff_sync: stage hand-offs as xDiT's ``PipelineGroupCoordinator``
            runs them (as :func:`~flitsim.schedules.pipefusion.build_pipefusion`):
            each rank's next pass on a stage waits for its previous send, and a
            send for the receiving rank's previous send. Long-skip sends are not
            synchronised.
        Others as :func:`~flitsim.schedules.pipefusion.build_pipefusion`.

    Raises:
        ConfigError: naming the option: a degree < 1 or not dividing what it
            splits; ``cfg`` other than 1 or 2, or CFG parallel for a workload
            without classifier-free guidance (``cfg``); stages / cfg with a
            causal prefill; ``ep`` > 1 on a dense model or not equal to the
            sequence-parallel group; more devices than the fabric has.
    """
    from flitsim.schedules.moe import ExpertParallel
    from flitsim.workloads import DitWorkload

    K, u, r, c, E = (check_int(n, v) for n, v in (("stages", stages), ("ulysses", ulysses), ("ring", ring),
                                                     ("cfg", cfg), ("ep", ep)))
    dit = isinstance(workload, DitWorkload)
    if c > 2:
        raise config_error("cfg", c, "1 or 2 (the conditional and unconditional branches of classifier-free guidance)")
    if not dit and (K > 1 or c > 1):
        bad = "stages" if K > 1 else "cfg"
        raise config_error(bad, K if K > 1 else c, "1 for a causal prefill (PipeFusion and CFG parallel are for DiTs; "
                           "use terapipe / layer_pipeline with tp= for LLM pipelines)")
    work = layer_work(model, workload, steps=None if steps is None else check_int("steps", steps),
                      batch=check_int("batch", batch), dtype=dtype, include_embed_head=include_embed_head)
    mcfg = work.cfg
    if c == 2 and not workload.uses_cfg:
        raise config_error("cfg", c, f"1: the workload does not use classifier-free guidance ({mcfg.name} "
                           + ("is guidance-distilled, cfg_default False" if not mcfg.cfg_default else "cfg=False")
                           + "), so there is no second branch to run in parallel")
    if c == 2 and work.batch % 2:
        raise config_error("cfg", c, f"an even step batch (got {work.batch})")
    if u > 1 and mcfg.n_heads % u:
        raise config_error("ulysses", u, f"a divisor of the model's n_heads = {mcfg.n_heads}")
    ring_step_kernels(Kernels.empty(), True, True, ring_impl)  # ConfigError for an unknown ring_impl
    if r > 1 and mcfg.attention_kind != "softmax":
        raise config_error("ring", r, f"1: {mcfg.name} has linear attention (no K/V blocks to pass around a ring)")
    moe = ExpertParallel.make(mcfg, E, u * r, work) if (E > 1 or mcfg.n_experts) else None
    dims = (("pp", K), ("cfg", c), ("ring", r), ("ulysses", u))
    pl, size = place(dims, devices=devices, fabric=fabric, fabric_devices=fabric_devices, placement=placement)
    hw = Hardware(gpu, efficiency, dtype, execution, profile, interference, fabric)
    gb = new_builder(size, hw, comm_streams)
    n = u * r
    B = work.batch // c  # samples per branch
    b = work.bytes_per_element
    aw, kvw = mcfg.attn_width, mcfg.kv_width
    opts: dict[str, Any] = {"model": mcfg.name, "stages": K, "ulysses": u, "ring": r, "cfg": c, "ep": E,
                            "tokens": work.tokens, "batch": work.batch, "placement": pl.to_dict(),
                            "ring_impl": ring_impl}
    if dit:
        w = workload
        P, T = w.image_tokens, w.text_tokens_
        joint = is_joint(mcfg)
        groups = dit_stage_layers(mcfg, K)
        M = K if patches is None else check_int("patches", patches)
        if P % M:
            raise config_error("patches", M, f"a divisor of the image's {P} tokens (equal patches)")
        if K == 1:
            M = 1
        require_token_split(P // M, n, "image tokens of a patch (the shards of its sequence-parallel group)",
                            "ulysses x ring")
        S = work.steps
        W = check_int("warmup_steps", warmup_steps, 0) if K > 1 else 0
        if W > S:
            raise config_error("warmup_steps", W, f"at most steps = {S}")
        keys = P + (T if joint else 0)
        tq = spread(T, M)
        pout = mcfg.patch_size ** 2 * mcfg.out_channels
        opts.update(image_tokens=P, text_tokens=T, patches=M, patch_tokens=P // M, warmup_steps=W,
                    stage_layers=groups, step_batch=work.batch)
    else:
        groups = [["embed", *range(mcfg.n_layers), "head"]] if include_embed_head else [list(range(mcfg.n_layers))]
        M, S, W, keys, P, T, joint, tq, pout = 1, 1, 0, work.tokens, work.tokens, 0, False, [0], 0
        require_token_split(work.tokens, n, "tokens of the attention sequence (the shards of its sequence-parallel "
                            "group)", "ulysses x ring")
    blocks_of = [[x for x in g if not isinstance(x, str)] for g in groups]
    stage_of = {blk: j for j, g in enumerate(blocks_of) for blk in g}
    skips = [(a, d) for a, d in skip_pairs(mcfg) if stage_of[a] != stage_of[d]]
    opts["cross_stage_skips"] = len(skips)

    cache: dict[tuple[Any, ...], _SP] = {}

    def sp_for(block: int, q_img: int, tq_m: int) -> _SP:
        key_ = (block_kind(mcfg, block) if dit else "layer", q_img, tq_m)
        if key_ not in cache:
            if dit:
                k = patch_kernels(mcfg, q_img, P, layers=block, batch=B, text_query_tokens=tq_m, text_tokens=T,
                                  dtype=dtype)
            else:
                k = work.blocks[block]
            q = q_img + (tq_m if joint else 0)
            cache[key_] = _SP(k, u=u, r=r, q=q, keys=keys, batch=B, aw=aw, kw=kvw, b=b,
                              kind="dit" if dit else "causal", ep=moe, ring_impl=ring_impl)
        return cache[key_]

    ends_cache: dict[tuple[Any, ...], Kernels] = {}

    def ends(which: str, q_img: int, tq_m: int) -> Kernels:
        key_ = (which, q_img, tq_m)
        if key_ not in ends_cache:
            names = ["patch_embed", "cond_embed"] if which == "pre" else ["final"]
            k: Kernels | None
            if dit:
                k = patch_kernels(mcfg, q_img, P, layers=names, batch=B, text_query_tokens=tq_m, text_tokens=T,
                                  dtype=dtype)
            else:
                k = work.pre if which == "pre" else work.post
            ends_cache[key_] = k.shard_tokens(n) if k is not None else Kernels.empty()
        return ends_cache[key_]

    sync = check_bool("handoff_sync", handoff_sync) and K > 1
    sent: dict[tuple[int, int], list[int]] = {}  # (stage, branch): its last pipeline send, per rank

    def handoff(j_from: int, j_to: int, ci: int, tail: list[int], nbytes: int, s: int, m: int, phase: str,
                label: str, pipeline: bool = True) -> list[int]:
        """Rank-to-rank transfers of each rank's token shard (``nbytes`` each: :func:`hand_bytes`);
        ``pipeline``: a PipeFusion hand-off (synchronised under ``handoff_sync``), not a long skip."""
        src = [int(x) for x in pl.grid[j_from, ci].reshape(-1)]
        dst = [int(x) for x in pl.grid[j_to, ci].reshape(-1)]
        recv_prev = sent.get((j_to, ci)) if sync and pipeline else None
        out = []
        for i, (a, d) in enumerate(zip(src, dst)):
            x = gb.transfer(a, d, int(nbytes), stage=j_from, item=m, step=s, phase=phase,
                            label=f"{label}.d{i}")
            if tail[i] >= 0:
                gb.edge(tail[i], x)
            if recv_prev is not None:
                gb.edge(recv_prev[i], x)  # the receiver posts this receive after its own previous send completed
            out.append(x)
        if sync and pipeline:
            sent[(j_from, ci)] = out
        return out

    def stage_pass(j: int, cis: list[int], s: int, m: int, q_img: int, tq_m: int, afters: list[list[int]],
                   phase: str, skip_ins: list[dict[int, list[int]]]) -> list[list[int]]:
        """Stage j of branches ``cis`` over one pass (the full image, m = -1, or
        patch m), their tasks interleaved layer by layer (branch order inside a
        layer) so that a step's identical layers are consecutive runs of tasks
        the executor's layer skip can verify (rust/src/taskgraph/periodic.rs);
        ``afters``: per branch, the tails it starts after; ``skip_ins``: per
        branch and destination block, the skip transfers it waits for (filled
        here for sources on this stage). Returns the tails per branch."""
        grids = [pl.grid[j, ci] for ci in cis]
        ids = [[int(x) for x in g.reshape(-1)] for g in grids]
        labs = [f"s{s}.m{m}.st{j}.c{ci}" for ci in cis]
        tails = [list(a) for a in afters]
        prev_sent = [sent.get((j, ci)) for ci in cis]
        has_pre = include_embed_head and ("patch_embed" in groups[j] or "embed" in groups[j])
        has_post = include_embed_head and ("final" in groups[j] or "head" in groups[j])
        first_task = []  # per branch, its pass's first n tasks (one per rank): the pre, else the first block
        for b in range(len(cis)):
            first_task.append(len(gb.phase))
            if has_pre:
                tails[b] = gb.compute_on(ids[b], ends("pre", q_img, tq_m), after=tails[b], stage=j, item=max(m, 0),
                                         step=s, phase=phase, label=f"{labs[b]}.pre")
        for blk in blocks_of[j]:
            sp = sp_for(blk, q_img, tq_m)
            for b, ci in enumerate(cis):
                first = len(gb.phase)
                if blk == blocks_of[j][0] and not has_pre:
                    first_task[b] = first
                tails[b] = _sp_layer(gb, grids[b], sp, tails[b], u=u, r=r, stage=j, item=max(m, 0), step=s,
                                     layer=blk, phase=phase, label=f"{labs[b]}.L{blk}", ep=moe)
                if blk in skip_ins[b]:  # the block's first tasks (its pre-attention, one per rank) wait for the skip too
                    for i, x in enumerate(skip_ins[b].pop(blk)):
                        gb.edge(x, first + i)
                for a, d in skips:
                    if a == blk:
                        nb = handoff_bytes(mcfg, tokens_per_rank(q_img, n), batch=B, dtype=dtype)
                        skip_ins[b][d] = handoff(j, stage_of[d], ci, tails[b], nb, s, m, phase,
                                                 f"{labs[b]}.skip{a}->{d}", pipeline=False)
        for b in range(len(cis)):
            if has_post:
                tails[b] = gb.compute_on(ids[b], ends("post", q_img, tq_m), after=tails[b], stage=j,
                                         item=max(m, 0), step=s, phase=phase, label=f"{labs[b]}.post")
            if prev_sent[b] is not None:  # torch.cuda.synchronize() before the next receive: the previous send is done
                for i, x in enumerate(prev_sent[b]):
                    gb.edge(x, first_task[b] + i)
        return tails

    def gather_cfg(tails: list[list[int]], s: int, m: int, nbytes_rank: int, phase: str) -> list[list[int]]:
        """One all_gather per sequence-parallel rank between the CFG branches
        (nccl-tests size ``nbytes_rank``: both branches' predictions of the rank's tokens)."""
        if c == 1:
            return tails
        j = K - 1
        out = [list(t) for t in tails]
        for i in range(n):
            grp = [int(pl.grid[j, ci].reshape(-1)[i]) for ci in range(c)]
            g = gb.collective(grp, "all_gather", nbytes_rank, stage=j, item=max(m, 0), step=s,
                              phase=phase, label=f"s{s}.m{m}.cfg_gather.d{i}")
            for ci in range(c):
                if tails[ci][i] >= 0:
                    gb.edge(tails[ci][i], g)
                out[ci][i] = g
        return out

    def hand_bytes(q_img: int, tq_m: int) -> int:
        """One rank's hand-off: the hidden states of its (padded) shard of the pass's tokens."""
        if dit:
            return handoff_bytes(mcfg, tokens_per_rank(q_img + (tq_m if joint else 0), n), batch=B, dtype=dtype)
        return tokens_per_rank(work.tokens, n) * work.hidden * b * work.batch

    tails = [[-1] * n for _ in range(c)]  # per branch, the stage-0 inputs of the next pass
    out_bytes = lambda q_img: work.batch * tokens_per_rank(q_img, n) * pout * b  # noqa: E731  (both branches', per rank)
    # ---------------------------------------------------------------- synchronous steps (all of them when K == 1)
    sync_steps = S if K == 1 else W
    ph = "step" if K == 1 else "warmup"
    for s in range(sync_steps):
        if K == 1:  # the branches' layers interleaved (one stage, no hand-offs)
            last = stage_pass(0, list(range(c)), s, -1, P, T, [tails[ci] for ci in range(c)], ph,
                              [{} for _ in range(c)])
        else:
            last = []
            for ci in range(c):
                tail, skip_in = tails[ci], {}  # type: list[int], dict[int, list[int]]
                for j in range(K):
                    tail = stage_pass(j, [ci], s, -1, P, T, [tail], ph, [skip_in])[0]
                    if j + 1 < K:
                        tail = handoff(j, j + 1, ci, tail, hand_bytes(P, T), s, -1, ph,
                                       f"warmup{s}.{j}->{j + 1}.c{ci}")
                last.append(tail)
        if dit:
            last = gather_cfg(last, s, -1, out_bytes(P), ph)
        for ci in range(c):
            tails[ci] = last[ci]
            if K > 1 and s + 1 < S:
                tails[ci] = handoff(K - 1, 0, ci, last[ci], hand_bytes(P, T), s, -1, ph, f"warmup{s}.ret.c{ci}")
    # ---------------------------------------------------------------- the patch pipeline
    if K > 1:
        p = P // M
        ret = [[list(tails[ci]) for _ in range(M)] for ci in range(c)]
        for s in range(W, S):
            for m in range(M):
                last = []
                for ci in range(c):
                    tail, skip_in = ret[ci][m], {}
                    for j in range(K):
                        tail = stage_pass(j, [ci], s, m, p, tq[m], [tail], "pipeline", [skip_in])[0]
                        if j + 1 < K:
                            tail = handoff(j, j + 1, ci, tail, hand_bytes(p, tq[m]), s, m, "pipeline",
                                           f"s{s}.m{m}.{j}->{j + 1}.c{ci}")
                    last.append(tail)
                last = gather_cfg(last, s, m, out_bytes(p), "pipeline")
                for ci in range(c):
                    ret[ci][m] = last[ci]
                    if s + 1 < S:
                        ret[ci][m] = handoff(K - 1, 0, ci, last[ci], hand_bytes(p, tq[m]), s, m, "pipeline",
                                             f"s{s}.m{m}.ret.c{ci}")
    if work.decode is not None:  # the VAE decode after the last step: the whole output on every device
        finals = ret if K > 1 else [tails]

        def flat(x: Any) -> list[int]:
            return [int(x)] if isinstance(x, (int, np.integer)) else [t for y in x for t in flat(y)]

        deps = [t for t in flat(finals) if t >= 0]
        gb.compute_on(pl.devices, work.decode, after=[deps] if deps else None, label="vae_decode")
    opts["memory_static"] = hybrid_memory(mcfg, groups, dtype=dtype, pp=K, cfg_par=c, ulysses=u, ring=r, ep=E,
                                          seq_tokens=keys, pass_tokens=(keys if (K == 1 or W > 0) else
                                                                        (P // M + (max(tq) if joint else 0))),
                                          batch=B, causal=not dit, stale=K > 1, patches=M)
    return gb.freeze(name, pl.devices, K, S, opts)
