"""Disaggregated prefill/decode: the K/V cache of each request moves from a
prefill instance to a decode instance over the fabric.

Bytes of one request: ``layers x 2 x kv_heads x head_dim x prompt tokens x
bytes(kv_dtype)`` (:func:`kv_transfer_bytes`). Tensor-parallel rank i of
the prefill instance sends its share of the K/V heads to rank i of the
decode instance (``max(tp_p, tp_d)`` transfers in parallel, rank ids taken
modulo each side's degree; ``total / min(tp, kv_heads)`` bytes each, so
replicated K/V heads are sent to each rank that holds them).

:class:`KvTransfer` times it on the fabric:

- ``contention=False``: the transfers alone (:func:`flitsim.transfers`, at
  the fidelity asked for: ``packet``, ``flow`` or ``auto``);
- ``contention=True``: a task graph on the same fabric holding the K/V
  transfers *and* the two instances' tensor-parallel all-reduces running
  meanwhile (a chain of all-reduces of one prefill iteration's size on the
  prefill group and of one decode iteration's size on the decode group, long
  enough to cover the transfer), so K/V packets and TP packets share links,
  credits and switch ports. Transfers and all-reduces use separate
  communication streams (the K/V moves by copy engine / NIXL-style RDMA
  while NCCL runs). Run uncalibrated (raw fabric rates) for both kinds.

Times are memoized on a token grid (four points per octave, linear in
between; exact at grid points).

Timeline of a request: prefill on its prefill instance (the first token is
sampled there), K/V transfer, then decode on a decode instance. TTFT is
counted to the end of the transfer (the decode instance streams the first
token, as vLLM's disaggregated proxy does), so ``transfer_s / TTFT`` is the
transfer's share. The prefill instance frees the request's blocks when the
transfer starts; the decode instance admits it when it has blocks (no back
pressure on the prefill side: stated simplification).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from flitsim.errors import config_error
from flitsim.models.config import ModelConfig, dtype_bytes

__all__ = ["kv_transfer_bytes", "KvTransfer"]


def kv_transfer_bytes(cfg: ModelConfig, tokens: int, kv_dtype: str) -> int:
    """K/V bytes of ``tokens`` tokens of ``cfg``:
    ``n_layers x 2 x kv_heads x head_dim x tokens x bytes(kv_dtype)``."""
    return cfg.n_layers * 2 * cfg.kv_heads * cfg.head_width * int(tokens) * dtype_bytes(kv_dtype)


class KvTransfer:
    """K/V transfer times between one prefill and one decode instance.

    Args:
        fabric: FabricSpec or preset name.
        cfg: the model; kv_dtype: K/V dtype.
        prefill_devices, decode_devices: the instances' TP groups (GPU ids).
        fidelity: ``packet`` (default), ``flow`` or ``auto``.
        contention: run the instances' TP all-reduces alongside (module docstring).
        prefill_tp_bytes, decode_tp_bytes: all-reduce size of one prefill /
            decode iteration (tokens x hidden x 2 bytes).

    Raises:
        ConfigError: overlapping instances, ids outside the fabric.
    """

    POINTS_PER_OCTAVE = 4

    def __init__(self, fabric: Any, cfg: ModelConfig, kv_dtype: str, prefill_devices: Sequence[int],
                 decode_devices: Sequence[int], *, fidelity: str | None = "packet", contention: bool = True,
                 prefill_tp_bytes: int = 0, decode_tp_bytes: int = 0) -> None:
        from flitsim.hardware.fabric import as_fabric

        self.fabric = as_fabric(fabric)
        self.cfg, self.kv_dtype = cfg, kv_dtype
        self.p, self.d = [int(x) for x in prefill_devices], [int(x) for x in decode_devices]
        if set(self.p) & set(self.d):
            raise config_error("disaggregated.devices", sorted(set(self.p) & set(self.d)),
                               "prefill and decode instances on different GPUs")
        for g in self.p + self.d:
            if not 0 <= g < self.fabric.gpus:
                raise config_error("disaggregated.devices", g, f"GPU ids of {self.fabric.name!r} (0..{self.fabric.gpus - 1})")
        self.fidelity, self.contention = fidelity, bool(contention)
        self.p_bytes, self.d_bytes = int(prefill_tp_bytes), int(decode_tp_bytes)
        self._memo: dict[int, float] = {}
        self.runs = 0

    def pairs(self, tokens: int) -> tuple[list[int], list[int], list[int]]:
        """(src GPUs, dst GPUs, bytes each) of one request's K/V."""
        n = max(len(self.p), len(self.d))
        total = kv_transfer_bytes(self.cfg, tokens, self.kv_dtype)
        each = -(-total // min(n, self.cfg.kv_heads))
        return [self.p[i % len(self.p)] for i in range(n)], [self.d[i % len(self.d)] for i in range(n)], [each] * n

    def exact_s(self, tokens: int) -> float:
        """Transfer time of ``tokens`` tokens' K/V on the fabric, s (memoized)."""
        hit = self._memo.get(tokens)
        if hit is not None:
            return hit
        src, dst, nb = self.pairs(tokens)
        import warnings

        from flitsim.transfers import transfers
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            alone = transfers(self.fabric, src, dst, nb, fidelity=self.fidelity).makespan_ps * 1e-12
            t = alone
            if self.contention and (self.p_bytes or self.d_bytes):
                t = self._contended(src, dst, nb, alone)
        self._memo[tokens] = t
        self.runs += 1
        return t

    def _contended(self, src: list[int], dst: list[int], nb: list[int], alone_s: float) -> float:
        from flitsim.collectives import collective
        from flitsim.networks import FabricNetwork
        from flitsim.taskgraph import TaskGraphBuilder, execute

        g = TaskGraphBuilder(self.fabric.gpus, comm_streams=2)
        ids = [g.add_transfer(s, d, b, label="kv") for s, d, b in zip(src, dst, nb)]
        for grp, nbytes in ((self.p, self.p_bytes), (self.d, self.d_bytes)):
            if nbytes <= 0 or len(grp) < 2:
                continue
            one = collective(self.fabric, "all_reduce", nbytes, grp, dtype="half", fidelity="auto",
                             link_efficiency=1.0).time_us * 1e-6
            reps = min(64, max(1, math.ceil(alone_s / max(one, 1e-9)) + 1))
            prev = -1
            for _ in range(reps):
                c = g.add_collective(grp, "all_reduce", nbytes, label="tp")
                if prev >= 0:
                    g.add_edge(prev, c)
                prev = c
        run = execute(g.build(), FabricNetwork(self.fabric, calibrated=False, fidelity=self.fidelity))
        end = run.tasks.end_ps.to_numpy()[ids].max()
        start = run.tasks.start_ps.to_numpy()[ids].min()
        return float(end - start) * 1e-12

    def time_s(self, tokens: int) -> float:
        """Transfer time of a ``tokens``-token prompt's K/V, s: exact at grid
        points (4 per octave), linear in between."""
        if tokens <= 0:
            return 0.0
        x = math.log2(tokens) * self.POINTS_PER_OCTAVE
        lo = max(1, int(round(2 ** (math.floor(x) / self.POINTS_PER_OCTAVE))))
        hi = max(lo, int(round(2 ** (math.ceil(x) / self.POINTS_PER_OCTAVE))))
        if tokens <= lo or hi == lo:
            return self.exact_s(lo) * tokens / lo if tokens != lo else self.exact_s(lo)
        t_lo, t_hi = self.exact_s(lo), self.exact_s(hi)
        return t_lo + (t_hi - t_lo) * (tokens - lo) / (hi - lo)
