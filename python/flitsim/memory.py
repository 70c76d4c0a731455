"""Device-memory footprint of a schedule: what each device holds at its peak,
by component, against the GPU's HBM capacity (see docs/memory.md).

Components (bytes per device):

- ``weights``: parameters x dtype bytes of the entries the device runs,
  divided by the tensor-parallel degree where the layout shards them
  (pipeline stages hold their stage's entries; Ulysses, ring attention and
  DistriFusion hold the whole model — xDiT README, "communication and memory
  costs" table: P for sequence parallel and DistriFusion, P/N for tensor
  parallel and PipeFusion).
- ``activations``: the live working set of one block's forward on the
  device's tokens at the widest point (no backward: nothing is saved), the
  larger of the attention phase (residual stream + Q, K, V and the attention
  output) and the MLP phase (residual, normed input, FFN intermediate, x2 for
  SwiGLU's gate and up). Flash attention: no p x p score matrix.
- ``kv_cache``: causal K/V kept for later tokens (decode, prefill):
  layers x tokens x kv_width x bytes per sequence.
- ``stale_kv``: the previous step's K/V that PipeFusion and DistriFusion
  attend to: PipeFusion ``layers-per-stage x p x kv_width x bytes`` (= 2 x
  layers-per-stage x p x hs x bytes for multi-head attention, the xDiT
  README's (2L/N) A), DistriFusion the K/V of all L layers (2 A L).
- ``comm_buffers``: buffers of communication in flight. Before a run, the
  largest receive buffer of one hand-off plus the largest group of
  collectives of one (step, layer, item); after a run, the peak over the
  run's timeline (a hand-off's buffer lives from its start until the last task
  on the receiving device that depends on it ends; a collective's for its
  duration). Per member, S the nccl-tests size: all_to_all 2 S (send +
  receive), the others S (all_gather's output, reduce_scatter's input,
  all_reduce / broadcast / reduce in place).
- ``workspace``: framework workspace (CUDA context, cuBLAS / NCCL workspaces,
  allocator slack) — not public: a parameter, default
  :data:`DEFAULT_WORKSPACE_BYTES`.

A device whose total exceeds ``hbm_capacity_bytes`` makes the run ``"oom"``
(a status, never an exception); :attr:`Footprint.broken_by` names the
component that broke it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from flitsim.errors import config_error
from flitsim.models.config import ModelConfig, dtype_bytes
from flitsim.models.cost import param_count

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["COMPONENTS", "DEFAULT_WORKSPACE_BYTES", "Footprint", "block_activation_bytes", "check_workspace",
           "stage_weight_bytes", "pipeline_memory", "pipefusion_memory", "parallel_memory", "hybrid_memory",
           "expert_param_bytes", "stale_kv_bytes", "footprint"]

COMPONENTS = ("weights", "activations", "kv_cache", "stale_kv", "comm_buffers", "workspace")
"""Columns of the memory table, in order."""

DEFAULT_WORKSPACE_BYTES = 1.0e9
"""Framework workspace per device, bytes. Assumed (not public): CUDA context
(~0.3-0.5 GB), cuBLAS / NCCL workspaces and caching-allocator slack. Measure
yours with ``torch.cuda.mem_get_info`` and pass ``workspace_bytes``."""


def check_workspace(v: Any) -> float:
    """``workspace_bytes``: a finite number >= 0, else ConfigError naming the field."""
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not np.isfinite(v) or v < 0:
        raise config_error("workspace_bytes", v, "a finite number of bytes >= 0")
    return float(v)


def block_activation_bytes(cfg: ModelConfig, tokens: float, *, batch: int, dtype: str, attn_tokens: float | None = None,
                           heads_div: int = 1, ffn_div: int | None = None) -> float:
    """Peak live activations of one block's forward, bytes (module docstring).

    Args:
        tokens: tokens of the residual stream on the device (per sample).
        attn_tokens: tokens whose Q, K, V and output the device holds (default
            ``tokens``; Ulysses: all p for 1/N of the heads).
        heads_div: heads split this many ways (tensor parallel, Ulysses).
        ffn_div: FFN columns split this many ways (default ``heads_div``: tensor
            parallel; Ulysses splits heads but not the FFN, 1).
    """
    b = dtype_bytes(dtype)
    t_att = tokens if attn_tokens is None else attn_tokens
    hs, aw, kw, f = cfg.hidden, cfg.attn_width, cfg.kv_width, cfg.ffn_hidden
    gate = 2 if cfg.ffn_act == "swiglu" else 1
    attn = tokens * hs + t_att * (2 * aw + kw) / heads_div
    mlp = tokens * 2 * hs + tokens * gate * f / (heads_div if ffn_div is None else ffn_div)
    return float(batch * b * max(attn, mlp))


def _blocks(cfg: ModelConfig, group: Sequence[Any]) -> int:
    return sum(1 for x in group if not isinstance(x, str))


def stage_weight_bytes(cfg: ModelConfig, group: Sequence[Any], dtype: str, tp: int = 1) -> float:
    """Weights of one stage (its entry selection), bytes, split ``tp`` ways."""
    return param_count(cfg, list(group)) * dtype_bytes(dtype) / tp


def _zeros(n: int) -> dict[str, np.ndarray]:
    return {c: np.zeros(n) for c in COMPONENTS if c not in ("comm_buffers", "workspace")}


def pipeline_memory(cfg: ModelConfig, groups: Sequence[Sequence[Any]], *, dtype: str, act_tokens: float, batch: int,
                    kv_tokens: float, tp: int = 1) -> dict[str, np.ndarray]:
    """Static components of a causal pipeline (TeraPipe, layer pipeline, decode):
    per device in stage-major order (stage j's ``tp`` devices).

    Args:
        groups: entry selection per stage.
        act_tokens: tokens x sequences of the largest pass (slice, micro-batch, prefill batch).
        kv_tokens: K/V tokens held at the peak, summed over sequences.
        tp: tensor-parallel degree per stage (weights, heads and K/V heads split).
    """
    K = len(groups)
    out = _zeros(K * tp)
    kv_div = min(tp, cfg.kv_heads)
    for j, g in enumerate(groups):
        sl = slice(j * tp, (j + 1) * tp)
        out["weights"][sl] = stage_weight_bytes(cfg, g, dtype, tp)
        out["activations"][sl] = block_activation_bytes(cfg, act_tokens, batch=1, dtype=dtype, heads_div=tp)
        out["kv_cache"][sl] = _blocks(cfg, g) * kv_tokens * cfg.kv_width * dtype_bytes(dtype) / kv_div
    return out


def pipefusion_memory(cfg: ModelConfig, groups: Sequence[Sequence[Any]], *, dtype: str, seq_tokens: int,
                      patch_tokens: float, batch: int, warmup_steps: int, patches: int = 1) -> dict[str, np.ndarray]:
    """Static components of PipeFusion, one device per stage.

    ``stale_kv`` = layers-in-stage x seq_tokens x kv_width x bytes x batch
    (``seq_tokens``: image + joint text tokens). Activations: a patch of
    ``patch_tokens`` tokens, or the full sequence when there are warmup steps
    (they run the whole image through each stage).
    """
    out = _zeros(len(groups))
    b = dtype_bytes(dtype)
    act_t = seq_tokens if warmup_steps > 0 else patch_tokens
    for j, g in enumerate(groups):
        out["weights"][j] = stage_weight_bytes(cfg, g, dtype)
        out["activations"][j] = block_activation_bytes(cfg, act_t, batch=batch, dtype=dtype)
        out["stale_kv"][j] = stale_kv_bytes(cfg, _blocks(cfg, g), seq_tokens, batch=batch, dtype=dtype, patches=patches)
    return out


def parallel_memory(name: str, cfg: ModelConfig, *, n: int, dtype: str, tokens: int, batch: int,
                    causal: bool) -> dict[str, np.ndarray]:
    """Static components of the one-stage parallel baselines over ``n`` devices:
    ``tensor_parallel`` (weights / n, heads / n), ``ulysses`` (p / n tokens, all p
    tokens for heads / n inside attention), ``ring_attention`` (p / n tokens),
    ``distrifusion`` (p / n queries; stale K/V of every layer, full sequence).
    Causal prefills keep their K/V (their shard of it) as ``kv_cache``.
    """
    out = _zeros(n)
    b = dtype_bytes(dtype)
    P = param_count(cfg) * b
    L, kw, p = cfg.n_blocks, cfg.kv_width, tokens
    if name == "tensor_parallel":
        out["weights"][:] = P / n
        out["activations"][:] = block_activation_bytes(cfg, p, batch=batch, dtype=dtype, heads_div=n)
        kv = L * p * kw * b * batch / min(n, cfg.kv_heads)
    elif name == "ulysses":
        out["weights"][:] = P
        out["activations"][:] = block_activation_bytes(cfg, p / n, batch=batch, dtype=dtype, attn_tokens=p, heads_div=n,
                                                       ffn_div=1)
        kv = L * p * kw * b * batch / n
    elif name in ("ring_attention", "distrifusion"):
        out["weights"][:] = P
        out["activations"][:] = block_activation_bytes(cfg, p / n, batch=batch, dtype=dtype)
        kv = L * p * kw * b * batch / n
        if name == "distrifusion":
            out["stale_kv"][:] = L * p * kw * b * batch
    else:
        raise config_error("schedule", name, "tensor_parallel, ulysses, ring_attention or distrifusion")
    if causal:
        out["kv_cache"][:] = kv
    return out


def expert_param_bytes(cfg: ModelConfig, group: Sequence[Any], dtype: str) -> float:
    """Bytes of the MoE experts' weights in a stage's blocks (0 for a dense model):
    blocks x n_experts x (3 if SwiGLU else 2) x hidden x ffn_hidden x bytes."""
    if not cfg.n_experts:
        return 0.0
    mats = 3 if cfg.ffn_act == "swiglu" else 2
    return float(_blocks(cfg, group) * cfg.n_experts * mats * cfg.hidden * cfg.ffn_hidden * dtype_bytes(dtype))


def stale_kv_bytes(cfg: ModelConfig, layers: int, seq_tokens: float, *, batch: int, dtype: str, patches: int = 1) -> float:
    """Stale K/V a PipeFusion stage keeps for ``layers`` blocks, bytes:
    ``layers x seq_tokens x kv_width x bytes x batch`` (= 2 x layers x tokens x
    hidden x bytes for multi-head attention). Linear attention (SANA) keeps no
    per-token K/V but a per-head state of hd x (hd + 1) fp32 values per patch
    (``patches`` of them: each patch's contribution is replaced when it is recomputed)."""
    if cfg.attention_kind == "linear":
        return float(layers * patches * cfg.n_heads * cfg.head_width * (cfg.head_width + 1) * 4 * batch)
    return float(layers * seq_tokens * cfg.kv_width * dtype_bytes(dtype) * batch)


def hybrid_memory(cfg: ModelConfig, groups: Sequence[Sequence[Any]], *, dtype: str, pp: int, cfg_par: int = 1,
                  ulysses: int = 1, ring: int = 1, ep: int = 1, seq_tokens: float, pass_tokens: float, batch: int,
                  causal: bool, stale: bool, patches: int = 1) -> dict[str, np.ndarray]:
    """Static components of a hybrid (:mod:`flitsim.schedules.hybrid`), per device
    in grid order (pp, cfg, ring, ulysses):

    - weights: the stage's entries (PipeFusion: P / pp), the experts / ep (MoE);
    - activations: one block on ``pass_tokens / (u r)`` residual tokens, Q, K,
      V and the output of ``pass_tokens / r`` tokens for heads / u (Ulysses),
      the FFN unsplit; ``batch`` is the branch's batch (CFG parallel halves it);
    - stale_kv (PipeFusion): the stage's layers x ``seq_tokens`` x kv_width /
      (u r) (each rank keeps heads / u of its ring share of the sequence);
    - kv_cache (causal prefill): L x tokens x kv_width / (u r).
    """
    c = cfg_par
    n = ulysses * ring
    per_stage = c * n
    out = _zeros(pp * per_stage)
    b = dtype_bytes(dtype)
    for j, g in enumerate(groups):
        sl = slice(j * per_stage, (j + 1) * per_stage)
        w = stage_weight_bytes(cfg, g, dtype)
        out["weights"][sl] = w - expert_param_bytes(cfg, g, dtype) * (1 - 1 / ep)
        out["activations"][sl] = block_activation_bytes(cfg, pass_tokens / n, batch=batch, dtype=dtype,
                                                        attn_tokens=pass_tokens / ring, heads_div=ulysses, ffn_div=1)
        if stale:
            out["stale_kv"][sl] = stale_kv_bytes(cfg, _blocks(cfg, g), seq_tokens, batch=batch, dtype=dtype,
                                                 patches=patches) / n
        if causal:
            out["kv_cache"][sl] = _blocks(cfg, g) * seq_tokens * cfg.kv_width * b * batch / n
    return out


def _collective_members(c: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every (collective task, member) pair: (task ids, member devices, buffer bytes per member).
    Per member, S the nccl-tests size: all_to_all 2 S (send + receive), the others S (all_gather's
    output, reduce_scatter's input; all_reduce, broadcast and reduce in place)."""
    from flitsim.taskgraph import COLLECTIVES

    tasks = np.nonzero(c["kind"] == 2)[0]
    offs, mem = c["group_offsets"].astype(np.int64), c["group_members"].astype(np.int64)
    g = c["group"][tasks].astype(np.int64)
    counts = offs[g + 1] - offs[g]
    rep = np.repeat(np.arange(len(tasks)), counts)
    pos = np.repeat(offs[g], counts) + np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    kind = c["collective"][tasks].astype(np.int64)
    factor = np.ones(len(tasks))
    factor[kind == COLLECTIVES.index("all_to_all")] = 2.0
    per = c["bytes"][tasks].astype(np.float64) * factor
    return tasks[rep], mem[pos], per[rep]


def _comm_static(schedule: Any) -> np.ndarray:
    """Largest hand-off receive buffer + largest (step, layer, item) group of collectives, per fabric device."""
    c = schedule.graph.columns
    n = schedule.graph.devices
    recv = np.zeros(n)
    tr = (c["kind"] == 1) & (c["device"] != c["peer"])
    np.maximum.at(recv, c["peer"][tr].astype(np.int64), c["bytes"][tr].astype(np.float64))
    coll = np.zeros(n)
    t, m, b = _collective_members(c)
    if len(t):
        key = np.stack([schedule.task_step[t], schedule.task_layer[t], schedule.task_item[t], m])
        _, inv = np.unique(key, axis=1, return_inverse=True)
        inv = inv.reshape(-1)
        sums = np.zeros(int(inv.max()) + 1)
        np.add.at(sums, inv, b)
        dev_of = np.zeros(len(sums), np.int64)
        dev_of[inv] = m
        np.maximum.at(coll, dev_of, sums)
    return recv + coll


def _comm_timeline(schedule: Any) -> np.ndarray:
    """Peak over the run's timeline of communication buffers live on each fabric device."""
    g = schedule.graph
    c = g.columns
    n = g.devices
    tasks = schedule.run.tasks
    start = tasks.start_ps.to_numpy().astype(np.float64)
    end = tasks.end_ps.to_numpy().astype(np.float64)
    dev, peer, kind = c["device"].astype(np.int64), c["peer"].astype(np.int64), c["kind"]
    nbytes = c["bytes"].astype(np.float64)
    # a hand-off's buffer is freed when the last task on its receiver that depends on it ends
    free = end.copy()
    es, ed = c["edge_src"].astype(np.int64), c["edge_dst"].astype(np.int64)
    on_recv = (kind[es] == 1) & (dev[ed] == peer[es])
    np.maximum.at(free, es[on_recv], end[ed[on_recv]])
    tr = np.nonzero((kind == 1) & (dev != peer))[0]
    ev_dev = [peer[tr], peer[tr]]
    ev_t = [start[tr], free[tr]]
    ev_d = [nbytes[tr], -nbytes[tr]]
    ev_o = [np.ones(len(tr)), np.where(free[tr] > start[tr], 0.0, 2.0)]
    ct, cm, cb = _collective_members(c)
    zero = end[ct] <= start[ct]
    ev_dev += [cm, cm]
    ev_t += [start[ct], end[ct]]
    ev_d += [cb, -cb]
    ev_o += [np.ones(len(ct)), np.where(zero, 2.0, 0.0)]
    d, t_, delta, rank = (np.concatenate(x) for x in (ev_dev, ev_t, ev_d, ev_o))
    peak = np.zeros(n)
    if len(d) == 0:
        return peak
    # per device, by time; at equal times frees of earlier buffers, then allocations, then
    # frees of zero-length ones (a buffer is live for its own instant, not across a hand-over)
    order = np.lexsort((rank, t_, d))
    d, delta = d[order], delta[order]
    level = np.cumsum(delta)
    first = np.r_[0, np.nonzero(np.diff(d))[0] + 1]
    base = np.repeat(np.r_[0.0, level[first[1:] - 1]], np.diff(np.r_[first, len(d)]))
    np.maximum.at(peak, d, level - base)
    return peak


@dataclass(frozen=True)
class Footprint:
    """Per-device memory of a schedule.

    Attributes:
        devices: device ids (the schedule's order).
        components: component name -> bytes per device, shape (len(devices),).
        capacity_bytes: the GPU's HBM capacity, bytes (decimal GB x 1e9).
        gpu: the GPU's name.
        comm_source: ``"timeline"`` (from the run) or ``"static"`` (before a run).
    """

    devices: tuple[int, ...]
    components: dict[str, np.ndarray]
    capacity_bytes: float
    gpu: str
    comm_source: str

    @property
    def total_bytes(self) -> np.ndarray:
        """Sum of the components per device, shape (len(devices),)."""
        return np.sum([self.components[k] for k in COMPONENTS], axis=0)

    @property
    def peak_bytes(self) -> float:
        """Largest device total, bytes."""
        return float(self.total_bytes.max())

    @property
    def status(self) -> str:
        """``"ok"`` when every device fits its HBM, else ``"oom"``."""
        return "oom" if self.peak_bytes > self.capacity_bytes else "ok"

    @property
    def broken_by(self) -> str | None:
        """On the fullest device: the largest component whose removal alone
        would make it fit (else its largest component); None when it fits."""
        if self.status == "ok":
            return None
        d = int(np.argmax(self.total_bytes))
        sizes = {k: float(self.components[k][d]) for k in COMPONENTS}
        over = self.peak_bytes - self.capacity_bytes
        enough = [k for k, v in sizes.items() if v >= over]
        return max(enough or list(sizes), key=lambda k: sizes[k])

    def table(self) -> "pd.DataFrame":
        """DataFrame, one row per device (index ``device``): the components,
        ``total_bytes``, ``capacity_bytes`` and ``fits`` (bool)."""
        import pandas as pd

        df = pd.DataFrame({k: self.components[k] for k in COMPONENTS},
                          index=pd.Index(list(self.devices), name="device"))
        df["total_bytes"] = self.total_bytes
        df["capacity_bytes"] = self.capacity_bytes
        df["fits"] = df["total_bytes"] <= self.capacity_bytes
        return df


def footprint(schedule: Any, workspace_bytes: Any = None) -> Footprint:
    """The :class:`Footprint` of a built (optionally simulated) schedule.

    ``workspace_bytes``: per device (default the schedule's option, else
    :data:`DEFAULT_WORKSPACE_BYTES`).

    Raises:
        ConfigError: bad ``workspace_bytes``; a schedule built without a memory model.
    """
    o = schedule.options
    static = o.get("memory_static")
    if static is None:
        raise config_error("schedule", schedule.name, "a schedule built by flitsim.schedules (with a memory model)")
    ws = check_workspace(o.get("workspace_bytes", DEFAULT_WORKSPACE_BYTES) if workspace_bytes is None
                         else workspace_bytes)
    ids = np.array(schedule.devices, np.int64)
    if schedule.run is not None:
        comm, src = _comm_timeline(schedule)[ids], "timeline"
    else:
        comm, src = _comm_static(schedule)[ids], "static"
    comps = {k: np.asarray(static[k], np.float64) for k in static}
    comps["comm_buffers"] = comm
    comps["workspace"] = np.full(len(ids), ws)
    return Footprint(tuple(schedule.devices), comps, float(o["hbm_capacity_bytes"]), str(o.get("gpu")), src)
