"""Lowering of model entries to the kernels a real implementation launches.

Each entry of :mod:`flitsim.models.cost` (a Llama layer, a DiT / PixArt / MMDiT
/ Flux block, embedders, the LM head) becomes an ordered list of kernels with
their shapes, as an eager PyTorch implementation (HF transformers / diffusers,
FlashAttention through SDPA) launches them:

- ``gemm`` (M, N, K): fused QKV, attention output, MLP up / down, adaLN
  modulation linears, patch embedding, caption / context projection, LM head;
- ``attention`` (batch, heads, q, kv, head_dim, causal with a context offset):
  the FlashAttention-style forward;
- ``elementwise`` (numel, full-size tensors read and written): LayerNorm /
  RMSNorm, adaLN modulation (scale, then shift: two kernels in eager mode),
  gate multiply, residual add, GELU / SiLU-and-multiply, RoPE, Q/K norms,
  the concat of Flux single-stream blocks, embedding gathers.

DiT blocks follow diffusers: separate ``to_q`` / ``to_k`` / ``to_v``
projections (diffusers' ``Attention``; fusing them is an opt-in,
``fuse_qkv_projections``), and where diffusers runs an op as a chain of
eager kernels that a compiler fuses, the row carries a ``variant``:
``UNFUSED`` rows exist only when kernels are not fused (eager, CUDA graph),
``FUSED`` rows only under ``compiled``, ``BOTH`` rows always. The chains
(diffusers ``RMSNorm`` and ``apply_rotary_emb``; :func:`_rmsnorm_eager`,
:func:`_rope_eager`) are read off the diffusers source: each PyTorch op is
one kernel over the tensor, fp32 intermediates counted as two bf16 tensors.

The table is columnar (numpy, one row per kernel) so the cost model
(:mod:`flitsim.cost`) evaluates it vectorised, and schedules can shard it:
:meth:`Kernels.shard_tokens` (sequence parallel: every token-proportional row
/ N), :meth:`Kernels.shard_heads` (tensor parallel: column-parallel GEMMs
split N, row-parallel K, attention heads, the MLP activation), and
:meth:`Kernels.parts` (the pre-attention / attention / post-attention / MLP
pieces of a block). GEMM FLOPs of the lowering equal the entry's
``matmul_flops`` and attention FLOPs its ``attention_flops`` (tests check it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from flitsim.models.config import ModelConfig
from flitsim.models.cost import _Call, _causal_call, _dit_call, _select
from flitsim.models.entries import _Entry
from flitsim.models.zoo import as_model

__all__ = ["tokens_per_rank", "Kernels", "KINDS", "PARTS", "OPS", "EW_READS", "HOST_OPS", "COMM_CALLS", "P2P_OPS", "host_counts", "has_p2p", "entry_kernels", "slice_kernels", "patch_kernels",
           "step_kernels", "decode_kernels", "ring_merge_kernels", "RING_IMPLS", "ring_step_kernels"]

def tokens_per_rank(tokens: Any, n: int) -> Any:
    """Tokens each of ``n`` sequence-parallel ranks holds of a sequence of
    ``tokens`` (an int or an int array): ``ceil(tokens / n)``, exact ``tokens / n``
    when ``n`` divides it. A sequence that ``n`` does not divide is padded with
    at most ``n - 1`` zero tokens to a multiple of ``n`` before it is chunked,
    because every all-to-all of a Ulysses group (and every K/V block of a ring)
    needs the same whole number of tokens per rank: yunchang's ``all_to_all_4D``
    reshapes the shard into ``(world, seq / world, ...)`` with no remainder, and
    xDiT pads the image sequence to a multiple of its sequence-parallel size
    (``pad_to_sp_divisible`` in xDiT's Flux transformer wrapper) and cuts the
    padding off the gathered output. The one home of this rule:
    :meth:`Kernels.shard_tokens`, :meth:`Kernels.attention_as`, the Ulysses,
    ring and USP / hybrid builders use it.

    Raises:
        ConfigError: ``n`` not an integer >= 1 (a bool, a float, a string), or
            ``tokens`` negative.
    """
    from flitsim.errors import check_int, config_error

    n = check_int("n", n, 1, what="a rank count")
    if isinstance(tokens, np.ndarray) or isinstance(tokens, (list, tuple)):
        arr = np.asarray(tokens)
        if arr.dtype.kind not in "iu" or (arr.size and int(arr.min()) < 0):
            raise config_error("tokens", tokens, "integers >= 0")
        return -(-arr // n)
    return -(-check_int("tokens", tokens, 0) // n)


KINDS = ("gemm", "attention", "elementwise")
"""Kernel kinds (``Kernels.kind`` codes)."""
PARTS = ("pre_attn", "attn", "post_attn", "mlp", "other")
"""Where a kernel sits in its block (``Kernels.part`` codes)."""
OPS = ("qkv", "attn_out", "mlp_up", "mlp_down", "adaln", "patch_embed", "text_proj", "cond_mlp", "lm_head",
       "cross_q", "cross_kv", "cross_out", "final_linear",
       "attention", "cross_attention",
       "layernorm", "rmsnorm", "scale", "shift", "gate_mul", "residual_add", "gelu", "silu_mul", "silu",
       "rope", "qk_norm", "concat", "embedding", "pos_add", "reshape",
       "router", "expert_up", "expert_down", "skip_linear", "linear_attn", "dwconv", "relu",
       "cast_up", "cast_down", "pow_f32", "mean_f32", "add_eps", "rsqrt_f32", "mul_mixed", "mul_weight",
       "mul_f32", "add_f32", "neg", "stack", "ring_merge", "ring_init", "ring_merge_lse", "ring_merge_last",
       "vae_conv", "group_norm", "upsample", "pad", "cp_kv_cat", "cp_lse", "cp_merge", "cp_merge_lse")
"""Kernel names (``Kernels.op`` codes); profiles match on kind and shape, not name."""
_OP = {n: i for i, n in enumerate(OPS)}
EW_READS = {"residual_add": 2, "pos_add": 2, "silu_mul": 2}
HOST_OPS = {
    # nn.Linear call (+ the q/k/v ``view(b, -1, H, D).transpose(1, 2)``)
    "qkv": 3, "cross_q": 3, "cross_kv": 3,
    "attn_out": 2, "cross_out": 2,               # Linear + to_out[1] Dropout module call
    "mlp_up": 2,                                 # GELU module call + its Linear
    "mlp_down": 3,                               # Linear + Dropout + FeedForward module calls
    # Linear + AdaLayerNormZero call + chunk + the broadcasting [:, None] / unsqueeze(1) of
    # shift / scale / gate (double stream: 6 views, single: 3; 8 for both)
    "adaln": 8,
    "patch_embed": 1, "text_proj": 1, "cond_mlp": 1, "lm_head": 1, "final_linear": 1, "expert_up": 1,
    "expert_down": 1, "skip_linear": 1, "linear_attn": 1, "dwconv": 1, "router": 1, "embedding": 1,
    "silu": 1, "relu": 1, "layernorm": 1, "rmsnorm": 1,  # module calls
    "mul_weight": 1,                             # the RMSNorm module call (last op of its eager chain)
    # apply_rotary_emb: cos[None, None], sin[None, None], two .to(device), reshape + unbind, flatten
    "neg": 7,
    # Attention module + processor calls, SDPA, output transpose, reshape, .to(dtype)
    "attention": 6, "cross_attention": 6,
    # yunchang SeqAllToAll4D around one all_to_all_single: autograd Function apply, reshape,
    # transpose, the reshape / transpose / reshape back (one ``reshape`` row per call)
    "reshape": 6,
    # one ring step (zhuzilin/ring-flash-attention ring_flash_attn_forward + RingComm): 2
    # empty_like, 4 P2POp, get_default_args().copy() and .update(), flash_attn's 3 maybe_contiguous
    # and its op wrapper, the update_out_and_lse call, 4 req.wait()
    "ring_init": 16, "ring_merge": 16,
    # one sending step of PyTorch's context-parallel ring (``_templated_ring_attention``): key / value
    # ``flatten`` (2), the ``permute_tensor`` functional collective's AsyncCollectiveTensor, the next
    # step's ``_maybe_wait`` and its two slices + two reshapes of the received buffer (5)
    "cp_kv_cat": 8,
}
"""Host-side ops that launch no kernel (views, reshapes, chunk, nn.Module calls, P2POp
objects, work waits), per kernel row of an op, as diffusers (FluxAttnProcessor2_0,
FluxTransformerBlock, AdaLayerNormZero, FeedForward), yunchang and ring-flash-attention run
them eagerly; counted off that source, one count per op for every model (ops not listed: 0).
Charged ``ExecutionMode.cpu_host_op_s`` each (eager only: compiled code and CUDA graphs run
none of them)."""
COMM_CALLS = {"reshape": 1, "ring_init": 1, "ring_merge": 1, "cp_kv_cat": 1}
"""torch.distributed calls that launch communication, per kernel row: one
``all_to_all_single`` per Ulysses ``reshape`` row (4 rows and 4 calls per layer: q, k, v,
out), one ``batch_isend_irecv`` per ring step that passes K / V on (ring-flash-attention
``RingComm.commit``), one ``permute_tensor`` (a functional ``all_to_all_single``) per step
of PyTorch's context-parallel ring that passes them on (``cp_kv_cat``). Charged ``ExecutionMode.cpu_comm_call_s`` each in every mode but
CUDA graphs."""
"""Full-size tensors an elementwise kernel reads (others read one); each writes one."""
# tensor-parallel role: 0 replicated, 1 column-parallel (N / tp), 2 row-parallel (K / tp),
# 3 heads (attention), 4 split elementwise (numel / tp)
_REP, _COL, _ROW, _HEADS, _SPLIT = range(5)
BOTH, UNFUSED, FUSED = range(3)
"""Row variants (``Kernels.variant``): launched in every execution mode, only
without fusion (eager / CUDA graph: the eager kernel chains), only with it (compiled)."""
_COLS = ("kind", "op", "part", "tp", "seq", "m", "n", "k", "batch", "heads", "kv_heads", "q", "kv", "ctx",
         "head_dim", "causal", "numel", "reads", "writes", "elem_bytes", "variant", "taps")


@dataclass(frozen=True, eq=False)
class Kernels:
    """An ordered kernel table, columns of equal length (int64 arrays):

    ``kind`` (:data:`KINDS`), ``op`` (:data:`OPS`), ``part`` (:data:`PARTS`),
    ``tp`` (tensor-parallel role), ``seq`` (1 if the row scales with tokens);
    GEMM ``m, n, k``; attention ``batch, heads, kv_heads, q, kv, ctx, head_dim,
    causal`` (causal rows: query i at absolute position ctx + i sees keys
    0 .. ctx + i; ``kv`` = ctx + q); elementwise ``numel`` (elements of one
    full-size tensor), ``reads`` and ``writes`` (full-size tensors read and
    written); ``elem_bytes`` (bytes per element of the row's dtype);
    ``taps`` (a convolution lowered to an implicit GEMM: kernel taps, K = C_in x
    taps, its input read once, M C_in elements, not the M K of an unrolled im2col;
    0 for every other row); ``variant`` (:data:`BOTH`, :data:`UNFUSED`, :data:`FUSED`: which execution
    modes launch the row; :meth:`launched`).
    """

    cols: dict[str, np.ndarray]

    def __len__(self) -> int:
        return len(self.cols["kind"])

    def __getattr__(self, name: str) -> np.ndarray:
        try:
            return self.__dict__["cols"][name]
        except KeyError:
            raise AttributeError(name) from None

    @staticmethod
    def empty() -> "Kernels":
        return Kernels({c: np.zeros(0, np.int64) for c in _COLS})

    @staticmethod
    def elementwise(op: str, numel: int, elem_bytes: int, *, part: str = "other", reads: int = 1,
                    writes: int = 1) -> "Kernels":
        """One elementwise kernel (e.g. the ``reshape`` copies around Ulysses'
        all-to-alls: a head-major layout made contiguous)."""
        r = _Rows(elem_bytes)
        r.ew(op, PARTS.index(part), int(numel), reads, writes)
        return r.build()

    @staticmethod
    def concat(parts: list["Kernels"]) -> "Kernels":
        """Rows of ``parts`` in order."""
        parts = [p for p in parts if len(p)]
        if not parts:
            return Kernels.empty()
        if len(parts) == 1:
            return parts[0]
        return Kernels({c: np.concatenate([p.cols[c] for p in parts]) for c in _COLS})

    def __add__(self, other: "Kernels") -> "Kernels":
        return Kernels.concat([self, other])

    def _where(self, mask: np.ndarray) -> "Kernels":
        return Kernels({c: v[mask] for c, v in self.cols.items()})

    def parts(self, *names: str) -> "Kernels":
        """Rows whose part is one of ``names`` (:data:`PARTS`)."""
        codes = [PARTS.index(n) for n in names]
        return self._where(np.isin(self.cols["part"], codes))

    def launched(self, fused: bool) -> "Kernels":
        """The rows an execution mode launches: without ``FUSED`` rows when
        kernels are not fused (eager, CUDA graph), without ``UNFUSED`` rows
        when they are (compiled); the table itself when it has neither."""
        v = self.cols["variant"]
        drop = FUSED if not fused else UNFUSED
        name = "_launched_fused" if fused else "_launched_unfused"
        return self._memo(name, lambda: self._where(v != drop) if (v == drop).any() else self)

    def _with(self, **changes: np.ndarray) -> "Kernels":
        return Kernels({**self.cols, **changes})

    def shard_tokens(self, n: int) -> "Kernels":
        """Sequence parallelism over ``n`` devices: token-proportional GEMM rows
        get ``ceil(M / n)`` rows, attention ``ceil(q / n)`` queries against all
        keys, elementwise rows ``ceil(numel / n)``; per-sample rows unchanged."""
        if n == 1:
            return self
        c = self.cols
        s = c["seq"] == 1
        g, a, e = s & (c["kind"] == 0), s & (c["kind"] == 1), s & (c["kind"] == 2)
        return self._with(m=np.where(g, tokens_per_rank(c["m"], n), c["m"]), q=np.where(a, tokens_per_rank(c["q"], n), c["q"]),
                          numel=np.where(e, tokens_per_rank(c["numel"], n), c["numel"]))

    def shard_heads(self, n: int) -> "Kernels":
        """Tensor parallelism over ``n`` devices (Megatron): column-parallel GEMMs
        ``N / n``, row-parallel ``K / n``, attention ``heads / n`` (and K/V heads,
        at least 1), split elementwise rows (RoPE, the MLP activation) ``numel / n``;
        norms, modulation and residual adds stay whole."""
        if n == 1:
            return self
        c = self.cols
        tp = c["tp"]
        return self._with(n=np.where(tp == _COL, -(-c["n"] // n), c["n"]),
                          k=np.where(tp == _ROW, -(-c["k"] // n), c["k"]),
                          heads=np.where(tp == _HEADS, -(-c["heads"] // n), c["heads"]),
                          kv_heads=np.where(tp == _HEADS, np.maximum(1, c["kv_heads"] // n), c["kv_heads"]),
                          numel=np.where(tp == _SPLIT, -(-c["numel"] // n), c["numel"]))

    def attention_as(self, *, q_div: int = 1, kv_div: int = 1, heads_div: int = 1) -> "Kernels":
        """Attention rows with ``q / q_div`` queries, ``kv / kv_div`` keys and
        ``heads / heads_div`` heads (ring attention's block of a block, Ulysses'
        heads shard); other rows unchanged. Causal rows keep their context."""
        c = self.cols
        a = c["kind"] == 1
        lin = (c["kind"] == 0) & (c["op"] == _OP["linear_attn"])  # linear attention (SANA): M tokens, K heads x hd
        return self._with(q=np.where(a, tokens_per_rank(c["q"], q_div), c["q"]),
                          kv=np.where(a, tokens_per_rank(c["kv"], kv_div), c["kv"]),
                          m=np.where(lin, tokens_per_rank(c["m"], q_div), c["m"]), k=np.where(lin, -(-c["k"] // heads_div), c["k"]),
                          heads=np.where(a, -(-c["heads"] // heads_div), c["heads"]),
                          kv_heads=np.where(a, np.maximum(1, c["kv_heads"] // heads_div), c["kv_heads"]))

    # ------------------------------------------------------------------ accounting
    def attention_pairs(self) -> np.ndarray:
        """Query-key pairs per attention row (per sample and head): causal
        ``q ctx + q (q + 1) / 2``, else ``q kv``; 0 for other rows."""
        c = self.cols
        causal = c["q"] * c["ctx"] + c["q"] * (c["q"] + 1) // 2
        return np.where(c["kind"] == 1, np.where(c["causal"] == 1, causal, c["q"] * c["kv"]), 0)

    def flops(self) -> np.ndarray:
        """FLOPs per row (multiply-add = 2): GEMM ``2 M N K``, attention
        ``4 batch heads head_dim pairs`` (QK^T and PV), elementwise 0."""
        c = self.cols
        g = 2 * c["m"] * c["n"] * c["k"]
        a = 4 * c["batch"] * c["heads"] * c["head_dim"] * self.attention_pairs()
        return np.where(c["kind"] == 0, g, np.where(c["kind"] == 1, a, 0))

    def bytes(self) -> np.ndarray:
        """Device-memory bytes per row if nothing stays in cache: GEMM
        ``(M K + K N + M N) b``; attention Q + O (``2 batch heads q hd``) and K + V
        (``2 batch kv_heads kv hd``); elementwise ``numel (reads + writes) b``."""
        c = self.cols
        b = c["elem_bytes"]
        g = (c["m"] * c["k"] // np.maximum(c["taps"], 1) + c["k"] * c["n"] + c["m"] * c["n"]) * b
        a = (2 * c["batch"] * c["heads"] * c["q"] + 2 * c["batch"] * c["kv_heads"] * c["kv"]) * c["head_dim"] * b
        e = c["numel"] * (c["reads"] + c["writes"]) * b
        return np.where(c["kind"] == 0, g, np.where(c["kind"] == 1, a, e))

    def _memo(self, name: str, fn: Any) -> Any:
        # tables are immutable once built: derived totals are computed once per table
        d = self.__dict__
        if name not in d:
            object.__setattr__(self, name, fn())
        return d[name]

    def total_flops(self) -> float:
        """Sum of :meth:`flops` (the eager rows: ``FUSED`` rows left out; they
        carry no FLOPs)."""
        return self._memo("_flops", lambda: float(self.launched(False).flops().sum()))

    def total_bytes(self) -> float:
        """Sum of :meth:`bytes` over the rows eager execution launches
        (``FUSED`` rows left out, so a byte is not counted twice)."""
        return self._memo("_bytes", lambda: float(self.launched(False).bytes().sum()))

    def key(self) -> bytes:
        """A hashable fingerprint of the table (for caching times)."""
        return self._memo("_key", lambda: np.stack([self.cols[c] for c in _COLS]).tobytes() if len(self) else b"")

    def to_pandas(self) -> Any:
        """One row per kernel with names instead of codes, plus flops and bytes."""
        import pandas as pd

        df = pd.DataFrame({c: v for c, v in self.cols.items()})
        df["kind"] = np.array(KINDS, dtype=object)[df["kind"]] if len(df) else df["kind"]
        df["op"] = np.array(OPS, dtype=object)[df["op"]] if len(df) else df["op"]
        df["part"] = np.array(PARTS, dtype=object)[df["part"]] if len(df) else df["part"]
        df["variant"] = np.array(("both", "unfused", "fused"), dtype=object)[df["variant"]] if len(df) else df["variant"]
        df["flops"], df["bytes"] = self.flops(), self.bytes()
        return df


class _Rows:
    """Accumulates kernel rows for one entry."""

    def __init__(self, b: int) -> None:
        self.rows: list[tuple[int, ...]] = []
        self.b = b

    def _row(self, kind: int, op: str, part: int, tp: int, seq: int, variant: int = BOTH, taps: int = 0,
             **v: int) -> None:
        vals = dict(m=0, n=0, k=0, batch=0, heads=0, kv_heads=0, q=0, kv=0, ctx=0, head_dim=0, causal=0,
                    numel=0, reads=0, writes=0)
        vals.update(v)
        self.rows.append((kind, _OP[op], part, tp, seq, *vals.values(), self.b, variant, taps))

    def gemm(self, op: str, part: int, tp: int, m: int, n: int, k: int, seq: int = 1, taps: int = 0) -> None:
        if m > 0 and n > 0 and k > 0:
            self._row(0, op, part, tp, seq, taps=taps, m=m, n=n, k=k)

    def attn(self, op: str, part: int, batch: int, heads: int, kv_heads: int, q: int, kv: int, hd: int,
             causal: bool = False, ctx: int = 0) -> None:
        if q > 0 and kv > 0:
            self._row(1, op, part, _HEADS, 1, batch=batch, heads=heads, kv_heads=kv_heads, q=q, kv=kv, ctx=ctx,
                      head_dim=hd, causal=int(causal))

    def ew(self, op: str, part: int, numel: int, reads: int = 1, writes: int = 1, tp: int = _REP, seq: int = 1,
           variant: int = BOTH) -> None:
        if numel > 0:
            self._row(2, op, part, tp, seq, variant, numel=numel, reads=reads, writes=writes)

    def build(self) -> Kernels:
        if not self.rows:
            return Kernels.empty()
        a = np.array(self.rows, dtype=np.int64).T
        return Kernels({c: a[i] for i, c in enumerate(_COLS)})


P2P_OPS = ("ring_init", "ring_merge")
"""Rows whose torch.distributed call is point-to-point (ring-flash-attention's
``batch_isend_irecv`` of ``P2POp`` ops), at which torch.compile breaks its graph."""
_P2P_CODES = np.array([_OP[n] for n in P2P_OPS], np.int64)
_HOST_BY_CODE = np.array([HOST_OPS.get(n, 0) for n in OPS], np.int64)
_COMM_BY_CODE = np.array([COMM_CALLS.get(n, 0) for n in OPS], np.int64)


def host_counts(op: np.ndarray) -> tuple[int, int]:
    """(non-kernel host ops, torch.distributed calls) the rows with op codes
    ``op`` run on the host (:data:`HOST_OPS`, :data:`COMM_CALLS`)."""
    op = np.asarray(op, dtype=np.int64)
    return int(_HOST_BY_CODE[op].sum()), int(_COMM_BY_CODE[op].sum())


def has_p2p(op: np.ndarray) -> bool:
    """Whether any row with op codes ``op`` issues a point-to-point call (:data:`P2P_OPS`)."""
    return bool(np.isin(np.asarray(op), _P2P_CODES).any())


def ring_merge_kernels(att: Kernels, first: bool, last: bool) -> Kernels:
    """The elementwise kernels ring attention runs around one step's attention
    call to merge its block output into the running output (online softmax
    across blocks), as xDiT's ring attention (zhuzilin/ring-flash-attention
    ``utils.py``, vendored by yunchang) does per (sample, head, query) of the
    self-attention rows of ``att``; sizes in bf16 elements, fp32 tensors
    counting twice:

    - first step: ``out = block_out.to(fp32)`` (reads 1, writes 2);
    - later steps: ``_update_out_and_lse`` (``block_out.to(fp32)``, ``out -
      sigmoid(block_lse - lse) * (out - block_out)``, ``lse - logsigmoid(lse -
      block_lse)``) is a ``@torch.jit.script`` function, whose fuser compiles
      each output's elementwise ops into one kernel in every execution mode: one
      ``ring_merge`` kernel reading ``out`` (fp32) and ``block_out`` (3) and
      writing ``out`` (2), and one over the per-row LSE (``numel / head_dim``
      fp32 values: reads 4, writes 2);
    - after the last step: ``out.to(bf16)`` (2 / 1).
    """
    c = att.cols
    sel = (c["kind"] == 1) & (c["op"] == _OP["attention"])
    numel = int((c["batch"] * c["heads"] * c["q"] * c["head_dim"])[sel].sum())
    rows_lse = int((c["batch"] * c["heads"] * c["q"])[sel].sum())
    r = _Rows(2)
    a = PARTS.index("attn")
    # ``ring_init`` / ``ring_merge`` rows carry the host work of a step that passes K / V on
    # (:data:`HOST_OPS`, :data:`COMM_CALLS`); the last step sends nothing (``cast_up`` /
    # ``ring_merge_last`` rows: kernels only), nor do the per-row LSE merges (``ring_merge_lse``)
    if first:
        r.ew("cast_up" if last else "ring_init", a, numel, 1, 2)
    else:
        r.ew("ring_merge_last" if last else "ring_merge", a, numel, 3, 2)
        r.ew("ring_merge_lse", a, rows_lse, 4, 2)
    if last:
        r.ew("cast_down", a, numel, 2, 1)
    return r.build()


RING_IMPLS = ("ring_flash_attn", "torch_cp")
"""Ring attention implementations (``ring_impl`` of the ring and USP builders):

- ``"ring_flash_attn"``: zhuzilin/ring-flash-attention as yunchang vendors it, what xDiT's
  ``xFuserLongContextAttention`` runs (PixArt, SD3, and every model with PipeFusion or a text
  the sequence-parallel degree does not divide): ``batch_isend_irecv`` of K and V, the
  TorchScript-fused merge (:func:`ring_merge_kernels`);
- ``"torch_cp"``: PyTorch's context-parallel ring (``torch.distributed.tensor.experimental.
  _attention._templated_ring_attention`` with ``aten._scaled_dot_product_flash_attention``),
  what xDiT's ``USP()`` (``xfuser/model_executor/layers/usp.py``, added 2024-11-28 with the
  Flux.1 4 x H100 figures) runs for Flux and HunyuanVideo when PipeFusion is off, the text splits
  evenly and torch >= 2.5: an eager merge and a ``torch.cat`` of K and V per send
  (:func:`torch_cp_merge_kernels`)."""


def torch_cp_merge_kernels(att: Kernels, first: bool, last: bool) -> Kernels:
    """The kernels PyTorch's context-parallel ring attention runs around one
    step's attention call (the ``_templated_ring_attention`` / ``_SDPAMerger``
    whose signature xDiT's ``ring_attn`` calls: ``(group, op, query, key,
    value)``, no ``seq_dim``), per (sample, head, query) of the self-attention
    rows of ``att``; sizes in bf16 elements, fp32 tensors counting twice. Plain
    eager PyTorch ops (no TorchScript), each one kernel in eager / CUDA graph
    mode (``UNFUSED`` rows); Inductor traces the functional collectives and
    fuses the merge under ``compiled`` (``FUSED`` rows, as the fused merge of
    :func:`ring_merge_kernels`):

    - every step that passes K / V on (not the last): ``torch.cat([key.flatten(),
      value.flatten()])``, one copy of the block's K and V (reads 1, writes 1),
      handed to ``ft_c.permute_tensor`` (``cp_kv_cat``: carries the collective call);
    - every step: ``_SDPAMerger.step`` casts the block output to fp32 (reads 1,
      writes 2; the LSE is fp32 already: no kernel);
    - later steps, ``_merge_one``: ``new_lse = lse + log(1 + exp(block_lse - lse))``
      (5 kernels over the per-row LSE), ``exp(lse - new_lse)`` and
      ``exp(block_lse - new_lse)`` (4 per-row kernels), then over the output
      ``exp(..) * out`` (reads 2, writes 2), ``exp(..) * block_out`` (2 / 2) and
      their sum (4 / 2): 13 kernels, 17 tensor-passes over the output with the
      cast (3 + 4 + 4 + 6), where the fused merge makes 5;
    - after the last step: ``out.to(bf16)`` (reads 2, writes 1).

    Not counted: ``key.contiguous()`` / ``value.contiguous()`` once per layer
    (copies only where the caller's K / V are strided views, e.g. Flux single
    blocks); the merge's ``unsqueeze`` and no-op ``lse.to(fp32)`` host calls.
    """
    c = att.cols
    sel = (c["kind"] == 1) & (c["op"] == _OP["attention"])
    numel = int((c["batch"] * c["heads"] * c["q"] * c["head_dim"])[sel].sum())
    rows_lse = int((c["batch"] * c["heads"] * c["q"])[sel].sum())
    kv_numel = int((2 * c["batch"] * c["kv_heads"] * c["kv"] * c["head_dim"])[sel].sum())
    r = _Rows(2)
    a = PARTS.index("attn")
    if not last:
        r.ew("cp_kv_cat", a, kv_numel, 1, 1)
    if first:
        r.ew("cast_up", a, numel, 1, 2)
    else:
        r.ew("cast_up", a, numel, 1, 2, variant=UNFUSED)
        for reads in (4, 2, 2, 2, 4, 4, 2, 4, 2):  # sub, exp, +1, log, add; sub, exp; sub, exp (fp32 rows)
            r.ew("cp_lse", a, rows_lse, reads, 2, variant=UNFUSED)
        r.ew("mul_f32", a, numel, 2, 2, variant=UNFUSED)
        r.ew("mul_f32", a, numel, 2, 2, variant=UNFUSED)
        r.ew("add_f32", a, numel, 4, 2, variant=UNFUSED)
        r.ew("cp_merge", a, numel, 3, 2, variant=FUSED)
        r.ew("cp_merge_lse", a, rows_lse, 4, 2, variant=FUSED)
    if last:
        r.ew("cast_down", a, numel, 2, 1)
    return r.build()


def ring_step_kernels(att: Kernels, first: bool, last: bool, impl: str = "ring_flash_attn") -> Kernels:
    """The merge (and send-side) kernels of one ring step for the ring
    implementation ``impl`` (:data:`RING_IMPLS`).

    Raises:
        ConfigError: ``impl`` not in :data:`RING_IMPLS`, naming ``ring_impl``.
    """
    if impl == "ring_flash_attn":
        return ring_merge_kernels(att, first, last)
    if impl == "torch_cp":
        return torch_cp_merge_kernels(att, first, last)
    from flitsim.errors import config_error

    raise config_error("ring_impl", impl, f"one of {', '.join(RING_IMPLS)}")


def _rmsnorm_eager(r: _Rows, part: int, numel: int, hd: int) -> None:
    """diffusers ``RMSNorm`` (bf16 weight) in eager mode, over ``numel`` elements
    normalised in rows of ``hd``: ``x.to(fp32)``, ``.pow(2)``, ``.mean(-1)``,
    ``+ eps``, ``rsqrt``, ``x * rsqrt`` (promotes to fp32), ``.to(bf16)``,
    ``* weight``: 8 kernels, 34 bytes per element where a fused kernel moves 4
    (reads / writes in bf16 tensors: an fp32 tensor counts 2). Each op name
    has one (reads, writes) pattern, so a profile row keyed on (op, numel) is unambiguous."""
    u, rows = UNFUSED, max(1, numel // hd)
    r.ew("cast_up", part, numel, 1, 2, tp=_SPLIT, variant=u)
    r.ew("pow_f32", part, numel, 2, 2, tp=_SPLIT, variant=u)
    r.ew("mean_f32", part, numel, 2, 0, tp=_SPLIT, variant=u)
    r.ew("add_eps", part, rows, 2, 2, tp=_SPLIT, variant=u)
    r.ew("rsqrt_f32", part, rows, 2, 2, tp=_SPLIT, variant=u)
    r.ew("mul_mixed", part, numel, 1, 2, tp=_SPLIT, variant=u)
    r.ew("cast_down", part, numel, 2, 1, tp=_SPLIT, variant=u)
    r.ew("mul_weight", part, numel, 1, 1, tp=_SPLIT, variant=u)


def _rope_eager(r: _Rows, part: int, numel: int) -> None:
    """diffusers ``apply_rotary_emb`` (``use_real``, interleaved pairs) in eager
    mode over ``numel`` elements: ``-x_imag`` (a stride-2 read moves whole
    lines: the full tensor), ``stack``, ``x.float()``, ``* cos``,
    ``x_rot.float()``, ``* sin``, ``+``, ``.to(bf16)``: 8 kernels, 54 bytes per
    element (cos / sin are per position, L2-resident across heads: not counted)."""
    u, half = UNFUSED, numel // 2
    r.ew("neg", part, half, 2, 1, tp=_SPLIT, variant=u)
    r.ew("stack", part, half, 3, 2, tp=_SPLIT, variant=u)
    r.ew("cast_up", part, numel, 1, 2, tp=_SPLIT, variant=u)
    r.ew("mul_f32", part, numel, 2, 2, tp=_SPLIT, variant=u)
    r.ew("cast_up", part, numel, 1, 2, tp=_SPLIT, variant=u)
    r.ew("mul_f32", part, numel, 2, 2, tp=_SPLIT, variant=u)
    r.ew("add_f32", part, numel, 4, 2, tp=_SPLIT, variant=u)
    r.ew("cast_down", part, numel, 2, 1, tp=_SPLIT, variant=u)


def _qkv(r: _Rows, cfg: ModelConfig, t: int, op: str = "qkv") -> None:
    """diffusers ``Attention``'s separate ``to_q`` / ``to_k`` / ``to_v`` GEMMs
    (column-parallel; FLOPs equal one fused QKV GEMM)."""
    d, aw, kw = cfg.hidden, cfg.attn_width, cfg.kv_width
    r.gemm(op, 0, _COL, t, aw, d)
    r.gemm(op, 0, _COL, t, kw // 2, d)
    r.gemm(op, 0, _COL, t, kw - kw // 2, d)


def _qk_norm(r: _Rows, cfg: ModelConfig, t: int) -> None:
    """Q and K RMSNorm of ``t`` tokens: one fused kernel each when compiled
    (Inductor keeps the per-head reduction in registers), diffusers' eager chain otherwise."""
    aw, kw, hd = cfg.attn_width, cfg.kv_width, cfg.head_width
    for n in (t * aw, t * kw // 2):
        r.ew("qk_norm", 0, n, tp=_SPLIT, variant=FUSED)
        _rmsnorm_eager(r, 0, n, hd)


def _rope(r: _Rows, part: int, numel: int) -> None:
    """RoPE over ``numel`` elements (q and k): one kernel when fused, diffusers' eager chain otherwise."""
    r.ew("rope", part, numel, tp=_SPLIT, variant=FUSED)
    _rope_eager(r, part, numel)


def _adaln_stream(r: _Rows, cfg: ModelConfig, t: int, B: int, mod: bool, qk_norm: bool, rope: bool) -> None:
    """Norm (+ modulation) and the Q / K / V projections of one stream (pre-attention part)."""
    d, aw, kw = cfg.hidden, cfg.attn_width, cfg.kv_width
    r.ew("layernorm", 0, t * d)
    if mod:
        r.ew("scale", 0, t * d)
        r.ew("shift", 0, t * d)
    _qkv(r, cfg, t)
    if qk_norm:
        _qk_norm(r, cfg, t)
    if rope:
        _rope(r, 0, t * (aw + kw // 2))


def _stream_post(r: _Rows, cfg: ModelConfig, t: int, gated: bool) -> None:
    """Attention output projection and residual, then the (modulated, gated) GELU MLP."""
    d, aw, f = cfg.hidden, cfg.attn_width, cfg.ffn_hidden
    r.gemm("attn_out", 2, _ROW, t, d, aw)
    if gated:
        r.ew("gate_mul", 2, t * d)
    r.ew("residual_add", 2, t * d, reads=2)


def _mlp(r: _Rows, cfg: ModelConfig, t: int, mod: bool, gated: bool) -> None:
    d, f = cfg.hidden, cfg.ffn_hidden
    r.ew("layernorm", 3, t * d)
    if mod:
        r.ew("scale", 3, t * d)
        r.ew("shift", 3, t * d)
    r.gemm("mlp_up", 3, _COL, t, f, d)
    r.ew("gelu", 3, t * f, tp=_SPLIT)
    r.gemm("mlp_down", 3, _ROW, t, d, f)
    if gated:
        r.ew("gate_mul", 3, t * d)
    r.ew("residual_add", 3, t * d, reads=2)


def _lower(cfg: ModelConfig, e: _Entry, c: _Call) -> Kernels:
    d, B = cfg.hidden, c.batch
    r = _Rows(c.b)
    H, KVH, hd = cfg.n_heads, cfg.kv_heads, cfg.head_width
    aw, kw, f = cfg.attn_width, cfg.kv_width, cfg.ffn_hidden
    if e.kind == "embed":
        r.ew("embedding", 4, B * c.q * d, reads=1, writes=1)
        return r.build()
    if e.kind == "head":
        t = B * c.logits
        r.ew("rmsnorm", 4, t * d)
        r.gemm("lm_head", 4, _COL, t, cfg.vocab_size, d)
        return r.build()
    if e.kind == "layer":
        t = B * c.q
        r.ew("rmsnorm", 0, t * d)
        r.gemm("qkv", 0, _COL, t, aw + kw, d)
        if cfg.qk_norm:
            r.ew("qk_norm", 0, t * (aw + kw // 2), tp=_SPLIT)
        r.ew("rope", 0, t * (aw + kw // 2), tp=_SPLIT)
        r.attn("attention", 1, B, H, KVH, c.q, c.ctx + c.q, hd, causal=True, ctx=c.ctx)
        r.gemm("attn_out", 2, _ROW, t, d, aw)
        r.ew("residual_add", 2, t * d, reads=2)
        r.ew("rmsnorm", 3, t * d)
        swiglu = cfg.ffn_act == "swiglu"
        if cfg.n_experts:
            # router, then the experts the t x k assignments hit (balanced routing: an equal
            # share of rows each, grouped-GEMM style), SwiGLU each
            E, k = cfg.n_experts, cfg.experts_per_token
            r.gemm("router", 3, _REP, t, E, d)
            hit = min(E, t * k)
            rows = -(-t * k // hit)
            for _ in range(hit):
                r.gemm("expert_up", 3, _COL, rows, (2 if swiglu else 1) * f, d)
                r.ew("silu_mul" if swiglu else "gelu", 3, rows * f, reads=2 if swiglu else 1, tp=_SPLIT)
                r.gemm("expert_down", 3, _ROW, rows, d, f)
        else:
            r.gemm("mlp_up", 3, _COL, t, (2 if swiglu else 1) * f, d)
            r.ew("silu_mul" if swiglu else "gelu", 3, t * f, reads=2 if swiglu else 1, tp=_SPLIT)
            r.gemm("mlp_down", 3, _ROW, t, d, f)
        r.ew("residual_add", 3, t * d, reads=2)
        return r.build()
    # DiTs
    t, tt = B * c.q, B * c.q_txt
    if e.kind == "patch_embed":
        pin = cfg.patch_size ** 2 * cfg.latent_channels
        r.gemm("patch_embed", 4, _REP, t, d, pin)
        r.ew("pos_add", 4, t * d, reads=2)
        return r.build()
    if e.kind == "cond_embed":
        # per-sample MLPs (timestep, class / pooled, guidance, adaLN-single), then text projections
        fe = cfg.freq_embed_dim
        r.gemm("cond_mlp", 4, _REP, B, d, fe, seq=0)
        r.ew("silu", 4, B * d, seq=0)
        r.gemm("cond_mlp", 4, _REP, B, d, d, seq=0)
        if cfg.dit_block in ("adaln_single_cross", "sana"):
            r.gemm("adaln", 4, _REP, B, 6 * d, d, seq=0)
            r.gemm("text_proj", 4, _REP, tt, d, cfg.text_embed_dim)
            r.ew("gelu", 4, tt * d)
            r.gemm("text_proj", 4, _REP, tt, d, d)
        elif cfg.dit_block == "hunyuan":
            ctx_dim = cfg.cross_attention_dim or d
            fe7 = cfg.pooled_dim + 7 * fe
            r.gemm("cond_mlp", 4, _REP, B, 4 * d, fe7, seq=0)
            r.gemm("cond_mlp", 4, _REP, B, d, 4 * d, seq=0)
            r.gemm("text_proj", 4, _REP, tt, 4 * ctx_dim, cfg.text_embed_dim)
            r.ew("silu", 4, tt * 4 * ctx_dim)
            r.gemm("text_proj", 4, _REP, tt, ctx_dim, 4 * ctx_dim)
        elif cfg.dit_block in ("mmdit", "flux"):
            r.gemm("cond_mlp", 4, _REP, B, d, cfg.pooled_dim, seq=0)
            r.gemm("cond_mlp", 4, _REP, B, d, d, seq=0)
            if cfg.guidance_embed:
                r.gemm("cond_mlp", 4, _REP, B, d, fe, seq=0)
                r.gemm("cond_mlp", 4, _REP, B, d, d, seq=0)
            r.gemm("text_proj", 4, _REP, tt, d, cfg.text_embed_dim)
        return r.build()
    if e.kind == "final":
        pout = cfg.patch_size ** 2 * cfg.out_channels
        r.ew("layernorm", 4, t * d)
        if cfg.dit_block not in ("adaln_single_cross", "sana"):
            r.gemm("adaln", 4, _REP, B, 2 * d, d, seq=0)
        r.ew("scale", 4, t * d)
        r.ew("shift", 4, t * d)
        r.gemm("final_linear", 4, _REP, t, pout, d)
        return r.build()
    blk = e.block
    if blk in ("dit", "pixart"):
        if blk == "dit":
            r.ew("silu", 0, B * d, seq=0)
            r.gemm("adaln", 0, _REP, B, 6 * d, d, seq=0)
        _adaln_stream(r, cfg, t, B, True, False, False)
        r.attn("attention", 1, B, H, KVH, c.q, c.keys, hd)
        _stream_post(r, cfg, t, gated=True)
        if blk == "pixart":
            r.gemm("cross_q", 2, _COL, t, d, d)
            r.gemm("cross_kv", 2, _COL, tt, 2 * d, d)  # text K/V: charged with the text query tokens, as OpCost
            r.attn("cross_attention", 2, B, H, H, c.q, c.txt_keys, hd)
            r.gemm("cross_out", 2, _ROW, t, d, d)
            r.ew("residual_add", 2, t * d, reads=2)
        _mlp(r, cfg, t, True, True)
        return r.build()
    if blk == "hunyuan":
        # HunyuanDiT block: (long-skip merge), shift-modulated norm, self-attention with
        # qk LayerNorm and 2-D RoPE, cross-attention to the text states, GELU MLP
        ctx_dim = cfg.cross_attention_dim or d
        if e.index is not None and e.index > cfg.n_layers // 2:
            r.ew("concat", 0, 2 * t * d)
            r.ew("layernorm", 0, 2 * t * d)
            r.gemm("skip_linear", 0, _REP, t, d, 2 * d)
        r.ew("silu", 0, B * d, seq=0)
        r.gemm("adaln", 0, _REP, B, d, d, seq=0)
        r.ew("layernorm", 0, t * d)
        r.ew("shift", 0, t * d)
        _qkv(r, cfg, t)
        r.ew("qk_norm", 0, t * (aw + kw // 2), tp=_SPLIT)  # LayerNorm: one kernel eager too
        _rope(r, 0, t * (aw + kw // 2))
        r.attn("attention", 1, B, H, KVH, c.q, c.keys, hd)
        r.gemm("attn_out", 2, _ROW, t, d, aw)
        r.ew("residual_add", 2, t * d, reads=2)
        r.ew("layernorm", 2, t * d)
        r.gemm("cross_q", 2, _COL, t, d, d)
        r.gemm("cross_kv", 2, _COL, tt, 2 * d, ctx_dim)
        r.ew("qk_norm", 2, (t + tt) * d, tp=_SPLIT)
        r.attn("cross_attention", 2, B, H, H, c.q, c.txt_keys, hd)
        r.gemm("cross_out", 2, _ROW, t, d, d)
        r.ew("residual_add", 2, t * d, reads=2)
        _mlp(r, cfg, t, False, False)
        return r.build()
    if blk == "sana":
        # SANA block: adaLN-single, ReLU linear attention (Katharopoulos et al. 2020: per head the
        # state K^T [V 1] over the tokens, then Q x state), cross-attention, GLUMBConv FFN
        r.ew("layernorm", 0, t * d)
        r.ew("scale", 0, t * d)
        r.ew("shift", 0, t * d)
        for _ in range(3):
            r.gemm("qkv", 0, _COL, t, aw, d)
        r.ew("relu", 0, t * 2 * aw, tp=_SPLIT)
        r.gemm("linear_attn", 1, _ROW, t, hd + 1, aw)  # state: tokens x (hd + 1) x heads x hd MACs
        r.gemm("linear_attn", 1, _ROW, t, hd + 1, aw)  # apply: the same per query token
        r.gemm("attn_out", 2, _ROW, t, d, aw)
        r.ew("gate_mul", 2, t * d)
        r.ew("residual_add", 2, t * d, reads=2)
        r.gemm("cross_q", 2, _COL, t, d, d)
        r.gemm("cross_kv", 2, _COL, tt, 2 * d, d)
        r.attn("cross_attention", 2, B, cfg.cross_heads, cfg.cross_heads, c.q, c.txt_keys, d // cfg.cross_heads)
        r.gemm("cross_out", 2, _ROW, t, d, d)
        r.ew("residual_add", 2, t * d, reads=2)
        r.ew("layernorm", 3, t * d)
        r.ew("scale", 3, t * d)
        r.ew("shift", 3, t * d)
        r.gemm("mlp_up", 3, _COL, t, 2 * f, d)
        r.ew("silu", 3, t * 2 * f, tp=_SPLIT)
        r.ew("dwconv", 3, t * 2 * f, tp=_SPLIT)
        r.ew("silu_mul", 3, t * f, reads=2, tp=_SPLIT)
        r.gemm("mlp_down", 3, _ROW, t, d, f)
        r.ew("gate_mul", 3, t * d)
        r.ew("residual_add", 3, t * d, reads=2)
        return r.build()
    qt, kt = c.q + c.q_txt, c.keys + c.txt_keys
    if blk in ("mmdit", "flux_double"):
        flux = blk == "flux_double"
        r.ew("silu", 0, B * d, seq=0)
        r.gemm("adaln", 0, _REP, B, 12 * d, d, seq=0)  # both streams' 6 d modulations
        for n in (t, tt):
            _adaln_stream(r, cfg, n, B, True, qk_norm=flux, rope=False)
        # the joint attention's torch.cat of text and image q, k, v (a copy each in eager mode;
        # compiled, the normalised q / k are written straight into the joint buffer, v is copied)
        qk = UNFUSED if flux else BOTH  # SD3: q / k come straight from GEMMs, a copy either way
        r.ew("concat", 0, (t + tt) * aw, tp=_SPLIT, variant=qk)
        r.ew("concat", 0, (t + tt) * kw // 2, tp=_SPLIT, variant=qk)
        r.ew("concat", 0, (t + tt) * (kw - kw // 2), tp=_SPLIT)
        if flux:
            _rope(r, 0, (t + tt) * (aw + kw // 2))
        r.attn("attention", 1, B, H, KVH, qt, kt, hd)
        for n in (t, tt):
            _stream_post(r, cfg, n, gated=True)
        for n in (t, tt):
            _mlp(r, cfg, n, True, True)
        return r.build()
    # flux single-stream block: MLP-in and Q / K / V GEMMs, attention, concat, fused linear2 (proj_out)
    n = t + tt
    r.ew("silu", 0, B * d, seq=0)
    r.gemm("adaln", 0, _REP, B, 3 * d, d, seq=0)
    r.ew("layernorm", 0, n * d)
    r.ew("scale", 0, n * d)
    r.ew("shift", 0, n * d)
    # diffusers FluxSingleTransformerBlock: proj_mlp and the attention's to_q / to_k / to_v
    r.gemm("mlp_up", 0, _COL, n, f, d)
    _qkv(r, cfg, n)
    _qk_norm(r, cfg, n)
    _rope(r, 0, n * (aw + kw // 2))
    r.attn("attention", 1, B, H, KVH, qt, kt, hd)
    r.ew("gelu", 2, n * f, tp=_SPLIT)
    r.ew("concat", 2, n * (aw + f), tp=_SPLIT)
    r.gemm("attn_out", 2, _ROW, n, d, aw + f)
    r.ew("gate_mul", 2, n * d)
    r.ew("residual_add", 2, n * d, reads=2)
    return r.build()


def entry_kernels(cfg: ModelConfig, entries: list[_Entry], call: _Call) -> Kernels:
    """Kernels of ``entries`` (in order) for one call; identical blocks are lowered once."""
    cache: dict[tuple[str, str | None], Kernels] = {}
    out = []
    for e in entries:
        key = (e.kind, e.block, e.block == "hunyuan" and e.index is not None and e.index > cfg.n_layers // 2)
        if key not in cache:
            cache[key] = _lower(cfg, e, call)
        out.append(cache[key])
    return Kernels.concat(out)


def slice_kernels(model: ModelConfig | str, new_tokens: int, context_tokens: int = 0, *, layers: Any = None,
                  batch: int = 1, dtype: str = "bf16", kv_dtype: str | None = None,
                  logits_tokens: int | None = None) -> Kernels:
    """Kernels of a causal model's ``layers`` for a slice of ``new_tokens`` after
    ``context_tokens`` (arguments as :func:`flitsim.models.slice_cost`).

    Raises:
        ConfigError: as :func:`flitsim.models.slice_cost`.
    """
    cfg = as_model(model)
    call = _causal_call(cfg, batch, new_tokens, context_tokens, dtype, kv_dtype, logits_tokens)
    return entry_kernels(cfg, _select(cfg, layers), call)


def decode_kernels(model: ModelConfig | str, context_tokens: int, *, layers: Any = None, batch: int = 1,
                   dtype: str = "bf16", kv_dtype: str | None = None) -> Kernels:
    """One decode step (``slice_kernels`` with one new token).

    Raises:
        ConfigError: as :func:`flitsim.models.decode_cost`.
    """
    return slice_kernels(model, 1, context_tokens, layers=layers, batch=batch, dtype=dtype, kv_dtype=kv_dtype)


def patch_kernels(model: ModelConfig | str, patch_tokens: int, seq_tokens: int, *, layers: Any = None,
                  batch: int = 1, text_query_tokens: int = 0, text_tokens: int | None = None,
                  dtype: str = "bf16", kv_dtype: str | None = None) -> Kernels:
    """Kernels of a DiT's ``layers`` for one patch (arguments as
    :func:`flitsim.models.patch_cost`).

    Raises:
        ConfigError: as :func:`flitsim.models.patch_cost`.
    """
    cfg = as_model(model)
    call = _dit_call(cfg, batch, patch_tokens, seq_tokens, text_query_tokens, text_tokens, dtype, kv_dtype)
    return entry_kernels(cfg, _select(cfg, layers), call)


def step_kernels(model: ModelConfig | str, seq_tokens: int, *, layers: Any = None, batch: int = 1,
                 text_tokens: int | None = None, dtype: str = "bf16") -> Kernels:
    """One full denoising step (``patch_kernels`` with p = P and all text tokens).

    Raises:
        ConfigError: as :func:`flitsim.models.dit_step_cost`.
    """
    cfg = as_model(model)
    T = cfg.text_tokens if text_tokens is None else text_tokens
    return patch_kernels(cfg, seq_tokens, seq_tokens, layers=layers, batch=batch, text_query_tokens=T,
                         text_tokens=T, dtype=dtype)
