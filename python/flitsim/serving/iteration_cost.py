"""Time of one serving iteration (one forward pass over a mixed batch of
prefill chunks and decode tokens) on one instance.

:class:`ModelIterationCost` builds it from flitsim's kernel cost model
(:mod:`flitsim.cost`, shapes from :mod:`flitsim.models.kernels`) and the
collectives on the chosen network (:func:`flitsim.collective` on a fabric):

    t = L x (linear(T) + attention + 2 x all_reduce(T x hidden x b))
        + embed(T) + head(S) + (pp - 1) x p2p(T x hidden x b)

- ``T``: tokens in the iteration (prefill chunk tokens + one per decode),
  ``S``: sequences sampling a token (decodes + prefills that finish);
- ``linear(T)``: one layer's GEMMs and elementwise kernels at M = T, sharded
  ``tp`` ways (Megatron), as :meth:`flitsim.cost.CostModel.slice_grid_times_s`
  evaluates them (launch gaps of the execution mode included);
- attention: one kernel per prefill chunk (q = chunk, causal after its
  context; :func:`flitsim.cost.attention_time_s`, FlashAttention tiling) and
  one batched decode kernel over all decodes, modelled as the decode kernels
  of serving engines work (paged / flash-decoding, TensorRT-LLM XQA): the
  query heads of a GQA group share each K/V read and no 128-row query tile
  is padded, so its time is ``max(K/V + Q/O bytes / (HBM x
  memory_efficiency), FLOPs / (peak x attention_efficiency))`` plus one
  launch gap; bytes and FLOPs are linear in the summed context, so one
  kernel over all decodes is exact for them; heads / tp;
- TP all-reduces: two per layer (after attention and after the MLP), each of
  ``T x hidden x bytes(comm_dtype)``, on the fabric with
  :func:`flitsim.collective` (algorithm ``auto``), serialized with compute
  (as TensorRT-LLM and vLLM run them on the compute stream);
- pipeline stages: layers split evenly, so a stage runs ``1 / pp`` of the
  iteration's compute and TP collectives (:meth:`ModelIterationCost.stage_s`)
  and hands ``T x hidden x b`` activations to the next stage over the fabric
  (``sendrecv``). With one batch in flight (``micro_batches=1``) an iteration
  takes ``pp`` stage times plus ``pp - 1`` hops (:meth:`~ModelIterationCost.time_s`);
  with ``pp`` micro-batches in flight (TensorRT-LLM's pipeline-parallel
  in-flight batching) the engine overlaps them stage by stage
  (:func:`flitsim.serving.engine.run_instance`).

Memoization (the speed lever): the linear and head tables are computed once
for every token count up to the budget (one vectorized call); attention per
(shape); collectives on a geometric grid of sizes, four points per octave,
linearly interpolated in between (a collective's time is piecewise affine
in its size; :data:`COMM_GRID_POINTS_PER_OCTAVE`; ``comm_grid=False``
memoizes every exact size instead). tests/test_serving.py holds the grid
within 3 % of the exact collective times.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from flitsim.cost.attention import attention_time_s
from flitsim.cost.model import CostModel
from flitsim.errors import ConfigError, check_int, config_error
from flitsim.models.config import ModelConfig, dtype_bytes
from flitsim.models.kernels import slice_kernels

__all__ = ["AffineIterationCost", "ModelIterationCost", "CommModel", "COMM_GRID_POINTS_PER_OCTAVE",
           "COMM_PACKET_ANCHOR_BYTES"]

COMM_GRID_POINTS_PER_OCTAVE = 4
"""Grid points per factor of two in collective size (interpolated between)."""

COMM_EXACT_MAX_BYTES = 64 << 20
"""Largest collective simulated (64 MiB); beyond it the time is extrapolated
along the line through the 32 MiB and 64 MiB points (bandwidth-bound:
a collective's time is affine in its size there)."""

COMM_PACKET_ANCHOR_BYTES = 1 << 20
"""At ``fidelity="auto"``, a collective above this size whose flow-level run
is outside the flow level's validation (so ``auto`` would run packet level)
is taken as its flow-level time x the packet / flow ratio at this size
(one packet-level run per op, not one per grid point). Measured on
ib-4xhgx-h100, all_reduce over 16 GPUs of two nodes: packet / flow = 1.0075
at 1 MiB, 1.010 at 2 MiB, 1.027 at 8.6 MiB, so the anchored time is within
2 % of the packet level's there (tests/test_serving.py checks a small case
against the packet level). Without it one 9 MB all-reduce took 26 CPU-s."""

_MEMO: dict[tuple[Any, ...], float] = {}
# process-wide: (fabric, group, fidelity, op, bytes) -> s, so a study's many
# serve() calls on one fabric simulate each collective once


class AffineIterationCost:
    """A closed-form iteration cost for tests and what-ifs:
    ``fixed_s + per_token_s x T + per_context_token_s x (summed decode context)``,
    split into ``pp`` equal pipeline stages with a hand-off of ``hop_s`` between them.

    Raises:
        ConfigError: a negative or non-finite coefficient.
    """

    def __init__(self, fixed_s: float = 1e-3, per_token_s: float = 1e-5, per_context_token_s: float = 0.0,
                 pp: int = 1, hop_s: float = 0.0) -> None:
        for name, v in (("fixed_s", fixed_s), ("per_token_s", per_token_s),
                        ("per_context_token_s", per_context_token_s), ("hop_s", hop_s)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise config_error(name, v, "a finite time >= 0 s")
        self.fixed_s, self.per_token_s, self.per_context_token_s = float(fixed_s), float(per_token_s), \
            float(per_context_token_s)
        self.pp = check_int("pp", pp, 1, 1024)
        self.hop_s = float(hop_s)

    def time_s(self, chunks: Sequence[tuple[int, int]], n_decode: int, decode_context: int, n_sample: int) -> float:
        """Iteration time, s. ``chunks``: (new tokens, context) per prefill chunk;
        ``n_decode`` decode tokens whose contexts sum to ``decode_context``."""
        T = sum(c[0] for c in chunks) + n_decode
        return self.fixed_s + self.per_token_s * T + self.per_context_token_s * decode_context

    def comm_s(self, tokens: int) -> float:
        """Communication time inside an iteration of ``tokens`` tokens, s (none here)."""
        return 0.0

    def stage_s(self, chunks: Sequence[tuple[int, int]], n_decode: int, decode_context: int,
                n_sample: int) -> tuple[float, float]:
        """(one of ``pp`` equal stages: ``time_s / pp``, s; hand-off ``hop_s``, s)."""
        return self.time_s(chunks, n_decode, decode_context, n_sample) / self.pp, self.hop_s


class CommModel:
    """TP collective times of one instance on a network, memoized.

    Args:
        network: None / ``"ideal"`` (free), a fabric preset name or a
            :class:`~flitsim.hardware.FabricSpec` (collectives run on it).
        group: GPU ids of the tensor-parallel group.
        fidelity: the fabric's fidelity (``auto`` default: flow level where it
            is validated, else packet level; docs/fidelity.md).
        grid: interpolate on a geometric size grid (True) or memoize exact sizes.
    """

    def __init__(self, network: Any, group: Sequence[int], *, fidelity: str | None = "auto", grid: bool = True) -> None:
        from flitsim.hardware.fabric import FabricSpec, as_fabric

        self.group = [int(g) for g in group]
        self.fabric: FabricSpec | None = None
        if not (network is None or (isinstance(network, str) and network.lower() == "ideal")):
            self.fabric = as_fabric(network)
            for g in self.group:
                if not 0 <= g < self.fabric.gpus:
                    raise config_error("layout.devices", self.group,
                                       f"GPU ids of the fabric {self.fabric.name!r} (0..{self.fabric.gpus - 1})")
        self.fidelity = fidelity
        self.grid = bool(grid)
        self._memo: dict[tuple[str, Any], float] = {}
        self._interp: dict[tuple[str, int], float] = {}
        self.calls = 0

    def _exact(self, op: str, nbytes: int) -> float:
        if nbytes > COMM_EXACT_MAX_BYTES:
            a, b = COMM_EXACT_MAX_BYTES // 2, COMM_EXACT_MAX_BYTES
            ta, tb = self._exact(op, a), self._exact(op, b)
            return tb + (tb - ta) * (nbytes - b) / (b - a)
        key = (op, nbytes)
        hit = self._memo.get(key)
        gkey = (self.fabric, tuple(self.group), self.fidelity, op, nbytes)
        if hit is None:
            hit = _MEMO.get(gkey)
            if hit is not None:
                self._memo[key] = hit
        if hit is None:
            hit = self._run(op, nbytes)
            self._memo[key] = hit
            if len(_MEMO) < 100_000:
                _MEMO[gkey] = hit
            self.calls += 1
        return hit

    def _run(self, op: str, nbytes: int) -> float:
        import warnings

        from flitsim.collectives import collective
        from flitsim.errors import FidelityWarning

        assert self.fabric is not None
        grp = self.group
        auto = self.fidelity == "auto" or (self.fidelity is None and self.fabric.fidelity == "auto")
        anchored = auto and nbytes > COMM_PACKET_ANCHOR_BYTES
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")  # fidelity notes: the memo hides repeats anyway
            if anchored:
                flow = collective(self.fabric, op, nbytes, grp, dtype="half", fidelity="flow").time_us
                if any(issubclass(w.category, FidelityWarning) for w in caught):
                    unit = 2 * (len(grp) if op in ("all_gather", "reduce_scatter") else 1)
                    a = -(-COMM_PACKET_ANCHOR_BYTES // unit) * unit
                    key = (op, "anchor")
                    ratio = self._memo.get(key)
                    if ratio is None:
                        ratio = self._memo[key] = (
                            collective(self.fabric, op, a, grp, dtype="half", fidelity="packet").time_us
                            / collective(self.fabric, op, a, grp, dtype="half", fidelity="flow").time_us)
                    return flow * 1e-6 * ratio
                return flow * 1e-6  # within the flow level's validation: what auto runs
            r = collective(self.fabric, op, nbytes, grp, dtype="half", fidelity=self.fidelity)
        return r.time_us * 1e-6

    def time_s(self, op: str, nbytes: int) -> float:
        """Time of collective ``op`` (``all_reduce``, ``sendrecv``) of nccl-tests size ``nbytes``, s."""
        if self.fabric is None or nbytes <= 0 or (len(self.group) < 2):
            return 0.0
        unit = 2 * (len(self.group) if op in ("all_gather", "reduce_scatter") else 1)
        if not self.grid:
            return self._exact(op, -(-nbytes // unit) * unit)
        hit = self._interp.get((op, nbytes))
        if hit is None:
            hit = self._interp[(op, nbytes)] = self._grid_s(op, nbytes, unit)
        return hit

    def _grid_s(self, op: str, nbytes: int, unit: int) -> float:
        x = math.log2(nbytes) * COMM_GRID_POINTS_PER_OCTAVE
        lo_k, hi_k = math.floor(x), math.ceil(x)
        lo = max(unit, int(round(2 ** (lo_k / COMM_GRID_POINTS_PER_OCTAVE) / unit)) * unit)
        hi = max(unit, int(round(2 ** (hi_k / COMM_GRID_POINTS_PER_OCTAVE) / unit)) * unit)
        t_lo = self._exact(op, lo)
        if hi <= lo:
            return t_lo
        t_hi = self._exact(op, hi)
        return t_lo + (t_hi - t_lo) * (nbytes - lo) / (hi - lo)


class ModelIterationCost:
    """Iteration time of ``model`` on one instance of ``tp`` x ``pp`` GPUs
    (module docstring).

    Args:
        model: a causal :class:`~flitsim.models.ModelConfig` or preset name.
        gpu: GPU preset name or GpuSpec.
        tp, pp: tensor-parallel degree, pipeline stages.
        dtype: weights / GEMM dtype (``fp8`` for FP8 submissions); kv_dtype:
            K/V cache dtype (default ``dtype``); comm_dtype: activations on
            the wire (bf16: FP8 engines keep activations in 16 bit between GEMMs).
        execution: kernel launch mode (default ``cuda_graph``: serving engines
            capture decode steps in CUDA graphs).
        network, devices, fidelity, comm_grid: where the TP collectives run
            (:class:`CommModel`); devices: the instance's GPU ids, stage-major
            (default 0 .. tp x pp - 1).
        max_tokens: largest iteration (tokens) tabulated up front (grows on demand).

    Raises:
        ConfigError: a non-causal model, bad degrees, heads not divisible by
            tp, devices outside the fabric or of the wrong count.
    """

    def __init__(self, model: Any, gpu: Any, *, tp: int = 1, pp: int = 1, dtype: str = "bf16",
                 kv_dtype: str | None = None, comm_dtype: str = "bf16", execution: Any = "cuda_graph",
                 network: Any = None, devices: Sequence[int] | None = None, fidelity: str | None = "auto",
                 comm_grid: bool = True, max_tokens: int = 8192, profile: Any = None) -> None:
        from flitsim.models.zoo import as_model

        cfg: ModelConfig = as_model(model)
        if cfg.kind != "causal":
            raise config_error("model", cfg.name, "a causal LLM to serve")
        self.cfg = cfg
        self.tp = check_int("layout.tp", tp, 1, 1024)
        self.pp = check_int("layout.pp", pp, 1, cfg.n_layers)
        if cfg.n_heads % self.tp:
            raise config_error("layout.tp", tp, f"a divisor of {cfg.name}'s {cfg.n_heads} attention heads")
        self.dtype, self.kv_dtype = dtype, kv_dtype or dtype
        self.comm_bytes = dtype_bytes(comm_dtype)
        n = self.tp * self.pp
        ids = list(range(n)) if devices is None else [check_int("layout.devices", d, 0) for d in devices]
        if len(ids) != n or len(set(ids)) != n:
            raise config_error("layout.devices", list(ids), f"{n} distinct GPU ids (tp x pp)")
        self.devices = ids
        self.cm = CostModel(gpu=gpu, dtype=dtype, execution=execution, profile=profile)
        self.comm = CommModel(network, ids[: self.tp], fidelity=fidelity, grid=comm_grid)
        self.p2p = CommModel(network, [ids[0], ids[self.tp]], fidelity=fidelity, grid=comm_grid) \
            if self.pp > 1 else None
        if self.comm.fabric is not None and max(ids) >= self.comm.fabric.gpus:
            raise config_error("layout.devices", ids, f"GPU ids of {self.comm.fabric.name!r} "
                               f"(0..{self.comm.fabric.gpus - 1}); the layout needs {n} GPUs")
        kd = kv_dtype or dtype
        layer = slice_kernels(cfg, 1, 0, layers=[0], dtype=dtype, kv_dtype=kd).shard_heads(self.tp)
        attn = layer.cols["kind"] == 1
        self._lin_tpl = layer._where(~attn)
        a = {c: int(v[attn][0]) for c, v in layer.cols.items()}
        self._heads, self._kvh, self._hd, self._eb = a["heads"], a["kv_heads"], a["head_dim"], a["elem_bytes"]
        self._head_tpl = slice_kernels(cfg, 1, 0, layers=["head"], dtype=dtype, logits_tokens=1).shard_heads(self.tp)
        self._embed_tpl = slice_kernels(cfg, 1, 0, layers=["embed"], dtype=dtype, logits_tokens=0)
        self._gap = float(self.cm.execution.launch_gap_s)
        self._lin = np.zeros(1)
        self._head = np.zeros(1)
        self._embed = np.zeros(1)
        self._grow(check_int("max_tokens", max_tokens, 1))
        self._attn_memo: dict[tuple[int, int, int], float] = {}
        self.totals = {"linear_s": 0.0, "attention_s": 0.0, "comm_s": 0.0, "embed_head_s": 0.0}
        """Where the iteration time went, summed over every iteration costed (all replicas sharing this model)."""

    def _grow(self, n: int) -> None:
        T = np.arange(1, n + 1)
        z = np.zeros_like(T)
        self._lin = np.r_[0.0, self.cm.slice_grid_times_s(self._lin_tpl, T, z)]
        self._head = np.r_[0.0, self.cm.slice_grid_times_s(self._head_tpl, T, z)]
        self._embed = np.r_[0.0, self.cm.slice_grid_times_s(self._embed_tpl, T, z)]

    def _attn(self, batch: int, q: int, ctx: int) -> float:
        key = (batch, q, ctx)
        hit = self._attn_memo.get(key)
        if hit is None:
            cm = self.cm
            hit = float(attention_time_s(batch, self._heads, self._kvh, q, ctx + q, ctx, self._hd, 1, self._eb,
                                         cm.gpu, cm.peak, cm.attention)) + self._gap
            self._attn_memo[key] = hit
        return hit

    def _decode_attn(self, n: int, context: int) -> float:
        """One batched decode-attention kernel per layer: ``n`` queries (one per
        request) over ``context`` K/V tokens in total (module docstring)."""
        g = self.cm.gpu
        kv_b = dtype_bytes(self.kv_dtype)
        ctx = context + n  # each decode also attends to its own new token
        nbytes = ctx * 2 * self._kvh * self._hd * kv_b + n * 2 * self._heads * self._hd * self._eb
        flops = 4.0 * self._heads * self._hd * ctx
        return max(nbytes / (g.hbm_bytes_per_s * g.memory_efficiency),
                   flops / (self.cm.peak * g.attention_efficiency)) + self._gap

    def tp_comm_s(self, tokens: int) -> float:
        """TP all-reduces of the whole model (all stages) in an iteration of ``tokens`` tokens, s."""
        if self.tp == 1:
            return 0.0
        return 2 * self.cfg.n_layers * self.comm.time_s("all_reduce", tokens * self.cfg.hidden * self.comm_bytes)

    def hop_s(self, tokens: int) -> float:
        """One pipeline hand-off (stage -> next stage) of ``tokens`` tokens' activations, s (0 without stages)."""
        if self.p2p is None:
            return 0.0
        return self.p2p.time_s("sendrecv", tokens * self.cfg.hidden * self.comm_bytes)

    def comm_s(self, tokens: int) -> float:
        """TP all-reduce (+ pipeline hand-off) time inside an iteration of ``tokens`` tokens, s."""
        return self.tp_comm_s(tokens) + (self.pp - 1) * self.hop_s(tokens)

    def stage_s(self, chunks: Sequence[tuple[int, int]], n_decode: int, decode_context: int,
                n_sample: int) -> tuple[float, float]:
        """(time of one pipeline stage on this iteration, s; one hand-off to the
        next stage, s). Stages hold ``1 / pp`` of the layers, so a stage's
        compute and TP collectives are ``1 / pp`` of the model's (embedding and
        head spread evenly: at most one layer's worth of imbalance, not modelled);
        ``time_s = pp x stage + (pp - 1) x hop``."""
        T = n_decode + sum(c[0] for c in chunks)
        hop = self.hop_s(T)
        full = self.time_s(chunks, n_decode, decode_context, n_sample)
        return (full - (self.pp - 1) * hop) / self.pp, hop

    def time_s(self, chunks: Sequence[tuple[int, int]], n_decode: int, decode_context: int, n_sample: int) -> float:
        """Iteration time, s.

        Args:
            chunks: (new tokens, context tokens before them) per prefill chunk.
            n_decode: decode tokens (one per running request);
            decode_context: their K/V contexts summed.
            n_sample: sequences that sample a token (logits computed).
        """
        T = n_decode
        attn = 0.0
        for q, c in chunks:
            T += q
            attn += self._attn(1, q, c)
        if n_decode:
            attn += self._decode_attn(n_decode, decode_context)
        if T == 0:
            return 0.0
        if T >= len(self._lin):
            self._grow(max(T, 2 * (len(self._lin) - 1)))
        s = min(max(n_sample, 1), len(self._head) - 1)
        L = self.cfg.n_layers
        lin, eh, comm = L * float(self._lin[T]), float(self._embed[T]) + float(self._head[s]), self.comm_s(T)
        tot = self.totals
        tot["linear_s"] += lin
        tot["attention_s"] += L * attn
        tot["comm_s"] += comm
        tot["embed_head_s"] += eh
        return lin + L * attn + eh + comm
