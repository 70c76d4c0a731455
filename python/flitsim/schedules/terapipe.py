"""TeraPipe: token-level pipeline parallelism for causal LLM prefill
(Li et al., "TeraPipe: Token-Level Pipeline Parallelism for Training
Large-Scale Language Models", ICML 2021).

The model's layers are split into K contiguous stages balanced by layer count
(stage 0 also runs the embedding, the last stage the LM head); one sequence of
T tokens is cut into slices. Slice i at stage j waits for slice i at stage j-1
(data: a transfer of the slice's hidden states, :func:`flitsim.models.handoff_bytes`,
between the stage devices) and for slice i-1 at stage j (same device: its K/V
are the slice's context). Under causal attention slice i's cost grows with its
context (the tokens before it), so equal slices make later pipeline beats
longer.

Slicing:

- ``slicing="uniform"``: ``slices`` slices of (nearly) equal length
  (``T // M`` tokens, the first ``T % M`` slices one more).
- ``slicing="dp"``: the TeraPipe dynamic program. For a pipeline of K stages
  whose per-stage time of slice i is t_i, the latency is
  ``sum(t_i) + (K - 1) max(t_i)``; the paper (Sec. 3.3, Algorithm 1)
  enumerates the maximum ``t_max`` over the candidate slice times in increasing
  order and, for each, solves a 1-D DP minimising ``sum(t_i)`` over slice
  boundaries on a token grid subject to ``t_i <= t_max``; it stops once
  ``(K - 1) t_max`` alone reaches the best latency found. Here the candidates
  are every slice time on the grid, the enumeration starts at the largest
  single-grid-cell time (no plan can do better, since a slice's time never
  decreases when it grows) and stops when ``min_sum + (K - 1) t_max`` reaches
  the best, with ``min_sum`` the unconstrained minimum of the sum; the inner DPs
  run in numpy, a batch of candidates at a time. ``t_i`` is the slowest
  stage's roofline time for the slice (stages differ only by embed / head).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from flitsim.errors import config_error
from flitsim.memory import pipeline_memory
from flitsim.models import handoff_bytes
from flitsim.models.kernels import slice_kernels
from flitsim.models.zoo import as_model
from flitsim.schedules.builder import Hardware, check_int, new_builder, resolve_devices, split_layers
from flitsim.schedules.schedule import Schedule

__all__ = ["build_terapipe", "terapipe_plan", "uniform_slices", "pipeline_latency", "slice_time_matrix_s"]



def causal_seq_tokens(workload: Any) -> int:
    """Tokens of the one sequence a prefill schedule pipelines: ``workload`` is an int.

    Raises:
        ConfigError: anything else.
    """
    from flitsim.limits import MAX_SEQ_TOKENS

    if isinstance(workload, bool) or not isinstance(workload, (int, np.integer)) or not 1 <= workload <= MAX_SEQ_TOKENS:
        raise config_error("workload (prefill tokens)", workload, f"the prefill length in tokens, 1..={MAX_SEQ_TOKENS}")
    return int(workload)


def stage_layers(cfg: Any, stages: int, include_embed_head: bool) -> list[list[Any]]:
    """Entry selections per stage: balanced layer ranges, plus embed on stage 0
    and head on the last when ``include_embed_head``."""
    groups = [list(r) for r in split_layers(cfg.n_layers, stages)]
    if include_embed_head:
        groups[0] = ["embed", *groups[0]]
        groups[-1] = [*groups[-1], "head"]
    return groups


MAX_GRID_CELLS = 1024
"""Most grid cells (sequence / grid_tokens) the TeraPipe DP accepts."""


def slice_time_matrix_s(model: Any, seq_tokens: int, stages: int, *, grid_tokens: int = 128, batch: int = 1,
                        hw: Hardware | None = None, include_embed_head: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Per-stage slice times on a token grid, vectorised.

    Boundaries are ``0, g, 2g, ..., T`` (the last cell may be shorter). Each
    stage's slice kernels are lowered once at s = 1, c = 0 and scaled to every
    (s, c) of the grid (:meth:`flitsim.cost.CostModel.slice_grid_times_s`: GEMM
    rows M x s, attention q = s after c context tokens); the kernel model then
    runs elementwise over the grid. The LM head's single sampled token is left out.

    Returns:
        (boundaries, t): ``boundaries`` int array of shape (n + 1,), tokens;
        ``t`` shape (n + 1, n + 1), seconds, ``t[a, b]`` = the slowest stage's
        time for the slice from boundary a to boundary b (a < b), +inf elsewhere.
    """
    hw = hw or Hardware()
    cfg = as_model(model)
    g = check_int("grid_tokens", grid_tokens)
    cells = -(-int(seq_tokens) // g)
    if cells > MAX_GRID_CELLS:
        raise config_error("grid_tokens", grid_tokens,
                           f"a grid of at most {MAX_GRID_CELLS} cells: >= {-(-int(seq_tokens) // MAX_GRID_CELLS)} "
                           f"for {seq_tokens} tokens (the DP is quadratic in cells)")
    bounds = np.unique(np.r_[np.arange(0, seq_tokens, g), seq_tokens]).astype(np.int64)
    a, b = np.meshgrid(bounds, bounds, indexing="ij")
    valid = b > a
    s, c = (b - a)[valid], a[valid]
    t_valid = np.zeros(len(s))
    for layers in stage_layers(cfg, stages, include_embed_head):
        template = slice_kernels(cfg, 1, 0, layers=layers, batch=batch, dtype=hw.dtype, logits_tokens=0)
        t_valid = np.maximum(t_valid, hw.cost.slice_grid_times_s(template, s, c))
    t = np.full(a.shape, np.inf)
    t[valid] = t_valid
    return bounds, t


def pipeline_latency(times: Sequence[float], stages: int) -> float:
    """TeraPipe's pipeline latency of slices with per-stage times ``times``
    through ``stages`` identical stages: ``sum(t) + (K - 1) max(t)`` (Li et al. 2021, Eq. 1)."""
    t = np.asarray(times, dtype=np.float64)
    return float(t.sum() + (stages - 1) * t.max())


def _dp_batch(t: np.ndarray, tmax: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Min-sum DPs for a batch of caps: f[c, b] = min_a f[c, a] + t[a, b], t[a, b] <= tmax[c]."""
    n = t.shape[0] - 1
    C = tmax.shape[0]
    f = np.full((C, n + 1), np.inf)
    f[:, 0] = 0.0
    arg = np.zeros((C, n + 1), dtype=np.int64)
    for b in range(1, n + 1):
        col = t[:b, b]
        vals = f[:, :b] + np.where(col[None, :] <= tmax[:, None], col[None, :], np.inf)
        k = vals.argmin(axis=1)
        arg[:, b] = k
        f[:, b] = vals[np.arange(C), k]
    return f, arg


def _backtrack(arg: np.ndarray, n: int) -> list[int]:
    out = [n]
    while out[-1] > 0:
        out.append(int(arg[out[-1]]))
    return out[::-1]


def terapipe_plan(t: np.ndarray, stages: int, *, batch_candidates: int = 256) -> tuple[list[int], float]:
    """The TeraPipe DP over a slice-time matrix (see the module docstring).

    Args:
        t: shape (n + 1, n + 1), seconds, from :func:`slice_time_matrix_s`.
        stages: K.

    Returns:
        (cut indices into the grid boundaries, increasing from 0 to n; the
        optimal latency ``sum(t_i) + (K - 1) max(t_i)`` in seconds).
    """
    K = check_int("stages", stages)
    n = t.shape[0] - 1
    finite = t[np.isfinite(t)]
    lower = max(t[b - 1, b] for b in range(1, n + 1))
    cand = np.unique(finite[finite >= lower])
    f0, _ = _dp_batch(t, np.array([np.inf]))
    min_sum = f0[0, n]
    best, best_cuts = np.inf, [0, n]
    for i in range(0, len(cand), batch_candidates):
        chunk = cand[i:i + batch_candidates]
        if min_sum + (K - 1) * chunk[0] >= best:
            break
        f, arg = _dp_batch(t, chunk)
        total = f[:, n] + (K - 1) * chunk
        k = int(np.argmin(total))
        if total[k] < best:
            best, best_cuts = float(total[k]), _backtrack(arg[k], n)
    return best_cuts, best


def uniform_slices(seq_tokens: int, slices: int) -> np.ndarray:
    """Slice lengths of ``slices`` nearly equal slices: ``T // M`` tokens each,
    the first ``T % M`` one more. Shape (M,).

    Raises:
        ConfigError: slices < 1 or more slices than tokens.
    """
    m = check_int("slices", slices)
    if m > seq_tokens:
        raise config_error("slices", m, f"at most the sequence's {seq_tokens} tokens")
    base, extra = divmod(seq_tokens, m)
    return np.array([base + (1 if i < extra else 0) for i in range(m)], dtype=np.int64)


def build_terapipe(model: Any, workload: Any, *, devices: Any = None, stages: int = 4, slicing: str = "uniform",
                   slices: int | None = None, slice_tokens: Sequence[int] | None = None, grid_tokens: int = 128,
                   batch: int = 1, gpu: Any = None, efficiency: Any = None, dtype: str = "bf16",
                   include_embed_head: bool = True, inflight_slices: int | None = None,
                   fabric_devices: int | None = None, comm_streams: int = 1, execution: Any = None,
                   profile: Any = None, interference: Any = None, fabric: Any = None, tp: int = 1,
                   placement: Any = "domain") -> Schedule:
    """Lower a TeraPipe prefill of one ``workload``-token sequence to a task graph.

    Args:
        model: a causal model (zoo name or :class:`~flitsim.models.ModelConfig`).
        workload: prefill length T, tokens (int).
        devices: K device ids (stage j on ``devices[j]``) or a count; default K.
        stages: K, pipeline stages (<= layers).
        slicing: ``"uniform"`` (``slices`` equal slices, default K), ``"dp"``
            (TeraPipe DP on a ``grid_tokens`` grid) or ``"given"``
            (``slice_tokens``, summing to T).
        batch: sequences processed together (each slice covers all of them).
        gpu, efficiency, dtype, execution, profile, interference, fabric: the
            compute model (:class:`~flitsim.schedules.builder.Hardware`; the GPU
            defaults to the fabric's, else H100; ``options["gpu_source"]`` says which).
        include_embed_head: charge the embedding to stage 0 and the LM head
            (one sampled token) to the last stage.
        inflight_slices: a stage holds at most this many slices not yet taken
            by the next stage (credit edges); None = unbounded.
        fabric_devices: devices of the fabric (default max id + 1).
        tp: tensor-parallel degree per stage (TeraPipe / chunked pipeline prefill
            x TP, :mod:`flitsim.schedules.tp_stage`); devices are then K x tp ids,
            stage-major; placement: how the K x tp grid meets the fabric
            (:func:`flitsim.schedules.placement.place`; TP innermost).

    Returns:
        :class:`~flitsim.schedules.Schedule`; ``options["slice_tokens"]`` the
        slice lengths, ``options["dp_latency_s"]`` the DP objective when
        ``slicing="dp"``.

    Raises:
        ConfigError: not a causal model, more stages than layers, bad slicing or
            slice lengths, device ids outside the fabric.
    """
    cfg = as_model(model)
    if cfg.kind != "causal":
        raise config_error("model", cfg.name, "a causal LLM for TeraPipe (use pipefusion for DiTs)")
    T = causal_seq_tokens(workload)
    K = check_int("stages", stages)
    groups = stage_layers(cfg, K, include_embed_head)
    TP, ids, size = pipeline_devices(cfg, K, tp, devices, fabric, fabric_devices, placement)
    hw = Hardware(gpu, efficiency, dtype, execution, profile, interference, fabric)
    opts: dict[str, Any] = {"model": cfg.name, "seq_tokens": T, "slicing": slicing, "batch": batch, "tp": TP,
                            "stage_layers": [[x for x in g_] for g_ in groups]}
    if slice_tokens is not None and slicing != "given":
        raise config_error("slice_tokens", slice_tokens, f"only with slicing='given' (lengths summing to {T})")
    if slices is not None and not isinstance(slices, (int, np.integer)):
        raise config_error("slices", slices, f"a slice count; for explicit lengths pass slicing='given', "
                           f"slice_tokens=[...] summing to the {T} tokens")
    if slicing == "uniform":
        lens = uniform_slices(T, K if slices is None else slices)
    elif slicing == "dp":
        bounds, tm = slice_time_matrix_s(cfg, T, K, grid_tokens=grid_tokens, batch=batch, hw=hw,
                                         include_embed_head=include_embed_head)
        cuts, lat = terapipe_plan(tm, K)
        lens = np.diff(bounds[cuts])
        opts.update(dp_latency_s=lat, grid_tokens=grid_tokens)
    elif slicing == "given":
        if slice_tokens is None:
            raise config_error("slice_tokens", None, "slice lengths summing to the sequence length")
        lens = np.array([check_int("slice_tokens", x) for x in slice_tokens], dtype=np.int64)
        if lens.sum() != T:
            raise config_error("slice_tokens", list(lens), f"lengths summing to {T}")
    else:
        raise config_error("slicing", slicing, "'uniform', 'dp' or 'given'")
    opts["slice_tokens"] = [int(x) for x in lens]
    credit = None if inflight_slices is None else check_int("inflight_slices", inflight_slices)

    gb = new_builder(size, hw, comm_streams)
    ctx = np.r_[0, np.cumsum(lens)[:-1]]
    if TP > 1:
        _terapipe_tp(gb, cfg, ids, K, TP, groups, lens, ctx, batch, dtype, include_embed_head, credit)
        opts["memory_static"] = pipeline_memory(cfg, groups, dtype=dtype, act_tokens=int(lens.max()) * batch,
                                                batch=batch, kv_tokens=T * batch, tp=TP)
        return gb.freeze("terapipe", ids, K, 1, opts)
    C = np.zeros((len(lens), K), dtype=np.int64)
    for i, (s, c) in enumerate(zip(lens, ctx)):
        hand = handoff_bytes(cfg, int(s), batch=batch, dtype=dtype)
        prev_x = -1
        for j in range(K):
            cost = slice_kernels(cfg, int(s), int(c), layers=groups[j], batch=batch, dtype=dtype,
                              logits_tokens=1 if (i == len(lens) - 1 and include_embed_head) else 0)
            C[i, j] = gb.compute(ids[j], cost, stage=j, item=i, step=0, label=f"slice{i}.stage{j}")
            if prev_x >= 0:
                gb.edge(prev_x, C[i, j])
            if i > 0:
                gb.edge(C[i - 1, j], C[i, j])
            if j + 1 < K:
                prev_x = gb.transfer(ids[j], ids[j + 1], hand, stage=j, item=i, step=0, label=f"slice{i}.{j}->{j + 1}")
                gb.edge(C[i, j], prev_x)
        if credit is not None and i >= credit:
            for j in range(K - 1):
                # stage j may start slice i only once stage j+1 has taken slice i - credit
                gb.edge(C[i - credit, j + 1], C[i, j], "credit")
    opts["memory_static"] = pipeline_memory(cfg, groups, dtype=dtype, act_tokens=int(lens.max()) * batch, batch=batch,
                                            kv_tokens=T * batch)
    return gb.freeze("terapipe", ids, K, 1, opts)


def _terapipe_tp(gb: Any, cfg: Any, ids: list[int], K: int, TP: int, groups: list[list[Any]], lens: np.ndarray,
                 ctx: np.ndarray, batch: int, dtype: str, include_embed_head: bool, credit: int | None) -> None:
    """TeraPipe x TP: every (slice, stage) is a TP stage pass (:func:`flitsim.schedules.tp_stage.tp_stage`);
    slice i at stage j waits for slice i at stage j - 1 (rank-to-rank hand-offs)
    and for slice i - 1 at stage j (its K/V)."""
    from flitsim.schedules.tp_stage import tp_handoff, tp_stage

    dev = [ids[j * TP:(j + 1) * TP] for j in range(K)]
    first: list[list[int]] = [[-1] * K for _ in range(len(lens))]
    last: list[list[list[int]]] = [[[-1] * TP for _ in range(K)] for _ in range(len(lens))]
    for i, (s, c) in enumerate(zip(lens, ctx)):
        s, c = int(s), int(c)
        hand = handoff_bytes(cfg, s, batch=batch, dtype=dtype)
        layer = slice_kernels(cfg, s, c, layers=0, batch=batch, dtype=dtype)
        lg = 1 if (i == len(lens) - 1 and include_embed_head) else 0
        tail = [-1] * TP
        for j in range(K):
            g = groups[j]
            pre = slice_kernels(cfg, s, c, layers="embed", batch=batch, dtype=dtype) if "embed" in g else None
            post = slice_kernels(cfg, s, c, layers="head", batch=batch, dtype=dtype, logits_tokens=lg) \
                if "head" in g else None
            n_layers = sum(1 for x in g if not isinstance(x, str))
            start = len(gb.phase)
            tail = tp_stage(gb, dev[j], layer, n_layers, pre, post, hand, tail, stage=j, item=i, step=0,
                            phase="pipeline", label=f"slice{i}.stage{j}")
            first[i][j] = start
            if i > 0:  # slice i - 1's K/V on this stage
                for r in range(TP):
                    for t in set(last[i - 1][j]):
                        gb.edge(t, start + r)
            last[i][j] = list(tail)
            if credit is not None and i >= credit and j > 0:
                credit_edges(gb, first, i, j, credit, TP)
            if j + 1 < K:
                tail = tp_handoff(gb, dev[j], dev[j + 1], hand, tail, stage=j, item=i, step=0, phase="pipeline",
                                  label=f"slice{i}.{j}->{j + 1}")


def credit_edges(gb: Any, first: Any, item: int, stage: int, credit: int, tp: int) -> None:
    """Stage ``stage - 1`` may start ``item`` only once stage ``stage`` has taken ``item - credit``:
    an edge from that start to each of the ``tp`` ranks' first task (``first[item][stage]`` is the
    first task id of an item on a stage; its ``tp`` ranks are consecutive ids)."""
    for r in range(tp):
        gb.edge(first[item - credit][stage], first[item][stage - 1] + r, "credit")


def pipeline_devices(cfg: Any, K: int, tp: Any, devices: Any, fabric: Any, fabric_devices: Any,
                     placement: Any) -> tuple[int, Any, int]:
    """(tp degree, device ids, graph size) of a K-stage pipeline whose stages
    are ``tp``-way tensor parallel (placed on the fabric's domains,
    :func:`flitsim.schedules.placement.place`), or one device per stage.

    Raises:
        ConfigError: naming ``tp`` when it does not divide the heads, or the
            device / placement option at fault.
    """
    TP = check_int("tp", tp)
    if TP <= 1:
        ids, size = resolve_devices(K if devices is None else devices, K, fabric_devices)
        return TP, ids, size
    from flitsim.schedules.placement import place

    if cfg.n_heads % TP:
        raise config_error("tp", TP, f"a divisor of the model's n_heads = {cfg.n_heads}")
    pl, size = place((("pp", K), ("tp", TP)), devices=devices, fabric=fabric, fabric_devices=fabric_devices,
                     placement=placement)
    return TP, pl.devices, size
