"""The serving event loop of one instance: arrivals, iteration batches, token
emission, K/V blocks, preemption; per-request metrics out.

Time advances by iterations: the scheduler (:mod:`flitsim.serving.scheduler`)
forms a batch at time t from the requests that have arrived by t, the
iteration cost model gives its duration, and every token the iteration
produces is emitted at its end (a prefill that completes emits the first
token; each decode one token). With nothing to run the clock jumps to the
next arrival.

Memory is bounded by the requests in flight: finished requests leave only
their row of the result arrays (the same size as the request table), and
the pooled inter-token gaps go into a fixed log-spaced histogram
(:class:`GapHistogram`), not a list; the optional iteration log is off by default.

Raises :class:`flitsim.StalledError` when no progress is possible: a waiting
request whose K/V does not fit even in an empty cache (so every attempt ends
in its own preemption), or ``max_idle_iterations`` iterations without a token.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from flitsim.errors import StalledError, check_int, config_error
from flitsim.serving.arrivals import RequestTable
from flitsim.serving.kv_cache import DEFAULT_BLOCK_TOKENS, BlockManager
from flitsim.serving.scheduler import POLICIES, Req, _preempt, schedule

__all__ = ["GapHistogram", "InstanceRun", "run_instance"]


class GapHistogram:
    """Pooled inter-token gaps in log-spaced bins (100 per decade from 1 ns to
    1e4 s: a percentile is exact to 1.2 %), with exact count, sum, min, max."""

    BINS_PER_DECADE = 100
    LO_S = 1e-9
    DECADES = 13

    def __init__(self) -> None:
        self.counts = np.zeros(self.BINS_PER_DECADE * self.DECADES + 2, np.int64)
        self.n = 0
        self.sum_s = 0.0
        self.min_s = np.inf
        self.max_s = 0.0

    def add_many(self, gaps_s: Any) -> None:
        """Add an array of gaps (vectorized)."""
        g = np.asarray(gaps_s, np.float64)
        if g.size == 0:
            return
        with np.errstate(divide="ignore"):
            k = np.floor(np.log10(np.maximum(g, 0) / self.LO_S) * self.BINS_PER_DECADE) + 1
        k = np.clip(np.nan_to_num(k, neginf=0), 0, len(self.counts) - 1).astype(np.int64)
        self.counts += np.bincount(k, minlength=len(self.counts))
        self.n += int(g.size)
        self.sum_s += float(g.sum())
        self.min_s = min(self.min_s, float(g.min()))
        self.max_s = max(self.max_s, float(g.max()))

    def merge(self, other: "GapHistogram") -> None:
        self.counts += other.counts
        self.n += other.n
        self.sum_s += other.sum_s
        self.min_s = min(self.min_s, other.min_s)
        self.max_s = max(self.max_s, other.max_s)

    @property
    def mean_s(self) -> float:
        return self.sum_s / self.n if self.n else float("nan")

    def percentile_s(self, p: float) -> float:
        """The p-th percentile (0..100) of the pooled gaps: the geometric
        middle of the bin holding it, clipped to [min, max]."""
        if self.n == 0:
            return float("nan")
        rank = p / 100 * (self.n - 1)
        k = int(np.searchsorted(np.cumsum(self.counts), rank + 1))
        if k == 0:
            return 0.0
        lo = self.LO_S * 10 ** ((k - 1) / self.BINS_PER_DECADE)
        hi = self.LO_S * 10 ** (k / self.BINS_PER_DECADE)
        return float(np.clip(np.sqrt(lo * hi), self.min_s, self.max_s))


@dataclass
class InstanceRun:
    """What one instance did.

    Attributes:
        index: request indices (into the table given), shape (n,).
        arrival_s, first_token_s, finish_s: per request, s (first token: end of
            the iteration that emitted it; finish: its last token).
        input_tokens, output_tokens, preemptions: per request.
        gaps: pooled inter-token gaps (:class:`GapHistogram`).
        iterations, busy_s, makespan_s: iterations run, time spent in them,
            time of the last token.
        tokens_prefilled, tokens_decoded: prefill tokens computed (recomputation
            included) and decode tokens computed.
        kv_blocks, kv_peak_blocks, preemptions_total: capacity, peak in use, preemptions.
        in_system_s: time integral of the requests in the system (waiting or
            running), request x s (Little's law: = sum of sojourn times).
        log: per-iteration tuples (start_s, duration_s, prefill_tokens, decodes,
            blocks_in_use, preempted) when asked for.
    """

    index: np.ndarray
    arrival_s: np.ndarray
    first_token_s: np.ndarray
    finish_s: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    preemptions: np.ndarray
    gaps: GapHistogram
    iterations: int = 0
    busy_s: float = 0.0
    makespan_s: float = 0.0
    tokens_prefilled: int = 0
    tokens_decoded: int = 0
    kv_blocks: int = 0
    kv_peak_blocks: int = 0
    preemptions_total: int = 0
    in_system_s: float = 0.0
    comm_s: float = 0.0
    log: list[tuple[float, float, int, int, int, int]] | None = field(default=None, repr=False)


def run_instance(requests: RequestTable, cost: Any, *, policy: str = "chunked", kv_blocks: int,
                 block_tokens: int = DEFAULT_BLOCK_TOKENS, max_num_batched_tokens: int = 2048,
                 max_num_seqs: int = 128, prefilled: bool = False, log_iterations: bool = False,
                 max_idle_iterations: int = 100_000) -> InstanceRun:
    """Serve ``requests`` on one instance.

    Args:
        requests: :class:`~flitsim.serving.RequestTable` (sorted by arrival).
        cost: an iteration cost model (``time_s(chunks, n_decode,
            decode_context, n_sample)``, e.g. :class:`ModelIterationCost`).
        policy: ``static``, ``continuous`` or ``chunked``.
        kv_blocks, block_tokens: K/V capacity (see :func:`kv_capacity`).
        max_num_batched_tokens, max_num_seqs: the token budget and sequence
            cap per iteration (vLLM's names and defaults).
        prefilled: requests arrive with their prompt's K/V and first token
            (the decode side of a disaggregated deployment).
        log_iterations: keep a per-iteration log (memory grows with iterations).

    Raises:
        ConfigError: unknown policy; budgets < 1; a K/V capacity below the
            largest request (``kv_blocks``: that request could never run).
        StalledError: no progress possible (module docstring).
    """
    if policy not in POLICIES:
        raise config_error("policy", policy, f"one of {list(POLICIES)}")
    bm = BlockManager(kv_blocks, block_tokens)
    budget = check_int("max_num_batched_tokens", max_num_batched_tokens, 1)
    seqs = check_int("max_num_seqs", max_num_seqs, 1)
    n = len(requests)
    arr, inp, out = requests.arrival_s, requests.input_tokens, requests.output_tokens
    if n:
        # the largest request must fit alone (preemption cannot make room beyond the whole cache):
        # refused here rather than a StalledError partway through the run
        big = int(np.argmax(inp + out))
        need = int(bm.blocks_for(int(inp[big] + out[big] - 1)))
        if need > bm.capacity:
            raise config_error("kv_blocks", kv_blocks, f"at least {need} blocks of {block_tokens} tokens: request {big} "
                               f"({int(inp[big])} input + {int(out[big])} output tokens) needs its K/V (input + output "
                               "- 1 tokens) resident at once and can never run")
    first = np.full(n, np.nan)
    fin = np.full(n, np.nan)
    pre = np.zeros(n, np.int64)
    gaps = GapHistogram()
    res = InstanceRun(np.arange(n), arr, first, fin, inp, out, pre, gaps, kv_blocks=bm.capacity,
                      log=[] if log_iterations else None)
    pending: list[float] = []  # gaps not yet binned (flushed every 65536: bounded memory)
    waiting: deque = deque()
    running: list[Req] = []
    t = 0.0
    nxt = 0
    finished = 0
    idle = 0
    area = 0.0
    while finished < n:
        while nxt < n and arr[nxt] <= t:
            area += t - arr[nxt]
            waiting.append(Req(nxt, float(arr[nxt]), int(inp[nxt]), int(out[nxt]), prefilled))
            nxt += 1
        b = schedule(policy, running, waiting, bm, max_num_batched_tokens=budget, max_num_seqs=seqs)
        npre = b.preempted
        while not b and running:
            # nothing can grow: free the tail (recompute) and try again
            _preempt(running[-1], running, waiting, bm)
            npre += 1
            b = schedule(policy, running, waiting, bm, max_num_batched_tokens=budget, max_num_seqs=seqs)
            npre += b.preempted
        res.preemptions_total += npre
        if not b:
            if waiting and not running:
                # the cache is empty and the head still does not fit: no arrival can change that
                r = waiting[0]
                need = bm.blocks_for(r.n_in + r.n_out - 1)
                raise StalledError(
                    f"serving stalled at t = {t:.6f} s: request {r.i} (input {r.n_in}, output {r.n_out} tokens, "
                    f"{r.gen} generated, {r.preempted} preemptions) needs up to {need} K/V blocks of "
                    f"{bm.block_tokens} tokens and cannot run in the instance's {bm.capacity}; "
                    f"{len(waiting)} waiting, {finished} of {n} finished")
            if nxt < n:
                area += (len(waiting) + len(running)) * (arr[nxt] - t)
                t = float(arr[nxt])
                continue
            raise StalledError(f"serving stalled at t = {t:.6f} s: {len(waiting)} waiting, {len(running)} running, "
                               "no batch can be formed")
        chunks = [(q, r.kv) for r, q in b.chunks]
        n_dec = len(b.decodes) + len(b.padded)
        ctx = b.decode_context
        completing = sum(1 for r, q in b.chunks if r.done + q >= r.target)
        dt = float(cost.time_s(chunks, n_dec, ctx, completing + len(b.decodes)))
        if not dt > 0:
            dt = 1e-12  # an empty-cost model still advances time (ps resolution)
        area += (len(waiting) + len(running)) * dt
        t_end = t + dt
        res.iterations += 1
        res.busy_s += dt
        emitted = 0
        done: list[Req] = []
        for r, q in b.chunks:
            r.done += q
            r.kv += q
            res.tokens_prefilled += q
            if r.done >= r.target:
                emitted += 1
                _emit(r, t_end, first, pending)
                if r.gen >= r.n_out:
                    done.append(r)
        push = pending.append
        for r in b.decodes:  # hot loop: _emit inlined (a decode has emitted before: gen >= 1)
            r.kv += 1
            if r.last_t >= 0:
                push(t_end - r.last_t)
            r.gen += 1
            r.last_t = t_end
            if r.gen >= r.n_out:
                done.append(r)
        res.tokens_decoded += len(b.decodes)
        emitted += len(b.decodes)
        if len(pending) >= 65536:
            gaps.add_many(pending)
            pending.clear()
        if log_iterations and res.log is not None:
            res.log.append((t, dt, sum(q for _, q in b.chunks), len(b.decodes), bm.used, npre))
        if policy == "static":
            if all(r.gen >= r.n_out for r in running):
                done = list(running)
            else:
                done = []
        for r in done:
            running.remove(r)
            bm.give(r.blocks)
            r.blocks = 0
            fin[r.i] = r.last_t  # its last token (static batching holds the slot longer)
            pre[r.i] = r.preempted
            finished += 1
        t = t_end
        idle = 0 if emitted else idle + 1
        if idle > max_idle_iterations:
            raise StalledError(f"serving stalled: {idle} iterations without a token at t = {t:.6f} s "
                               f"({len(running)} running, {len(waiting)} waiting, {res.preemptions_total} preemptions)")
    gaps.add_many(pending)
    res.makespan_s = t
    res.kv_peak_blocks = bm.peak
    res.in_system_s = area
    return res


def _emit(r: Req, t: float, first: np.ndarray, gaps: list) -> None:
    if r.gen == 0:
        first[r.i] = t
    elif r.last_t >= 0:
        gaps.append(t - r.last_t)
    r.gen += 1
    r.last_t = t
