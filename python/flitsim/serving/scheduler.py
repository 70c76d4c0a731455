"""Batching policies: which requests run in the next iteration, and how many
tokens each.

Every policy allocates K/V blocks for the tokens it schedules before the
iteration runs (a prefill chunk of q tokens after k held: blocks for k + q;
a decode: blocks for k + 1), so blocks in use never exceed the capacity.

- ``static`` (the baseline; FasterTransformer / HF ``generate``): when the
  batch is empty, admit up to ``max_num_seqs`` waiting requests whose full
  K/V (input + output - 1 tokens) fits, reserved at admission; prefill them
  in one iteration, then decode until the *last* one finishes. Finished
  requests keep their slot (padding: they are charged as decode tokens) and
  no request joins a running batch. Never preempts.
- ``continuous`` (Orca / vLLM V0 default scheduler): iteration-level
  batching. When requests wait and fit, the iteration is a prefill of whole
  prompts up to ``max_num_batched_tokens`` (a prompt longer than the budget
  runs alone), decodes stall meanwhile; otherwise all running requests
  decode one token.
- ``chunked`` (Sarathi-Serve stall-free batching; vLLM V1): each iteration
  first takes one token for every running decode, then continues partial
  prefills, then admits new requests, cutting prompts into chunks so that
  the iteration holds at most ``max_num_batched_tokens`` tokens.

With ``reserve_kv`` the continuous and chunked policies admit a request only
when its whole K/V (input + output - 1 tokens) can be reserved, as
TensorRT-LLM's default capacity scheduler (GUARANTEED_NO_EVICT) does; running
requests then never lack a block and nothing is preempted.

Preemption is **recompute** (vLLM's default): when a request cannot get the
block it needs, the most recently admitted running request (vLLM pops the
tail of its running queue) loses all its blocks and goes back to the front
of the waiting queue; when readmitted it prefills its prompt plus the tokens
it had generated, then continues. (Swap to host memory is not modelled.)
Defaults ``max_num_batched_tokens`` 2048 and ``max_num_seqs`` 128 are
vLLM's SchedulerConfig defaults.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from flitsim.serving.kv_cache import BlockManager

__all__ = ["POLICIES", "Req", "Batch", "schedule"]

POLICIES = ("static", "continuous", "chunked")
"""Batching policies of :func:`schedule`."""


class Req:
    """A request in flight (finished requests leave only their metrics).

    ``target``: tokens to prefill (prompt, plus generated tokens after a
    recompute preemption); ``done``: of them computed; ``kv``: K/V tokens held;
    ``gen``: tokens emitted; ``blocks``: K/V blocks held."""

    __slots__ = ("i", "arrival", "n_in", "n_out", "target", "done", "kv", "gen", "blocks", "first_t", "last_t",
                 "preempted", "reserve")

    def __init__(self, i: int, arrival: float, n_in: int, n_out: int, prefilled: bool = False) -> None:
        self.i, self.arrival, self.n_in, self.n_out = i, arrival, n_in, n_out
        self.target = n_in
        self.done = n_in if prefilled else 0
        self.kv = n_in if prefilled else 0
        self.gen = 1 if prefilled else 0
        self.blocks = 0
        self.first_t = -1.0
        self.last_t = arrival if prefilled else -1.0  # the first token came with the K/V
        self.preempted = 0
        self.reserve = 0  # static batching: blocks reserved up front

    @property
    def decoding(self) -> bool:
        return self.done >= self.target


class Batch:
    """One iteration: ``chunks`` [(req, new tokens)], ``decodes`` [req],
    ``padded`` (static: finished requests still in the batch), ``preempted``
    (requests preempted while forming it)."""

    __slots__ = ("chunks", "decodes", "padded", "preempted", "decode_context", "partial")

    def __init__(self) -> None:
        self.chunks: list[tuple[Req, int]] = []
        self.decodes: list[Req] = []
        self.padded: list[Req] = []
        self.preempted = 0
        self.decode_context = 0  # K/V tokens summed over decodes and padded slots
        self.partial: list[Req] = []  # running requests still prefilling (seen by the decode pass)

    def __bool__(self) -> bool:
        return bool(self.chunks or self.decodes)


def _preempt(victim: Req, running: list[Req], waiting: deque, bm: BlockManager) -> None:
    """Recompute preemption: free every block; prefill prompt + generated tokens again.

    Raises:
        StalledError: the victim is the only running request and holds every
            block in use: it alone fills the cache and still needs more, so it
            can never finish (with several micro-batches, others may hold blocks:
            the victim then waits for them).
    """
    if len(running) == 1 and victim.blocks >= bm.used:
        from flitsim.errors import StalledError

        raise StalledError(f"serving stalled: request {victim.i} (input {victim.n_in}, output {victim.n_out} tokens, "
                           f"{victim.gen} generated) alone holds all {bm.used} of {bm.capacity} K/V blocks of "
                           f"{bm.block_tokens} tokens and needs more; every attempt would end in its own preemption")
    running.remove(victim)
    bm.give(victim.blocks)
    victim.blocks = 0
    victim.kv = 0
    victim.done = 0
    victim.target = victim.n_in + victim.gen
    victim.preempted += 1
    waiting.appendleft(victim)


def _grow(r: Req, tokens: int, bm: BlockManager) -> bool:
    need = bm.blocks_for(tokens) - r.blocks
    if need <= 0:
        return True
    if not bm.can(need):
        return False
    bm.take(need)
    r.blocks += need
    return True


def _decodes(b: Batch, running: list[Req], waiting: deque, bm: BlockManager, budget: int) -> int:
    """One token for every running decode, preempting from the tail when a block is missing."""
    bt = bm.block_tokens
    dec = b.decodes
    ctx = 0
    i = 0
    partial = b.partial
    while i < len(running):
        r = running[i]
        if r.done < r.target:
            partial.append(r)
            i += 1
            continue
        if budget <= 0:
            break
        if r.kv + 1 > r.blocks * bt:  # the next token opens a block
            gone = False
            while bm.used >= bm.capacity:
                victim = running[-1]
                _preempt(victim, running, waiting, bm)
                b.preempted += 1
                if victim is r:
                    gone = True
                    break
            if gone:
                continue
            bm.take(1)
            r.blocks += 1
        dec.append(r)
        ctx += r.kv
        budget -= 1
        i += 1
    b.decode_context += ctx
    return budget


def _reserve(r: Req, bm: BlockManager) -> bool:
    """Admission with the full K/V reserved (input + output - 1 tokens), as
    TensorRT-LLM's GUARANTEED_NO_EVICT capacity scheduler admits: False if it does not fit."""
    need = bm.blocks_for(r.n_in + r.n_out - 1) - r.blocks
    if need > 0:
        if not bm.can(need):
            return False
        bm.take(need)
        r.blocks += need
    return True


def schedule(policy: str, running: list[Req], waiting: deque, bm: BlockManager, *, max_num_batched_tokens: int,
             max_num_seqs: int, reserve_kv: bool = False) -> Batch:
    """The next iteration under ``policy`` (:data:`POLICIES`); mutates
    ``running`` / ``waiting`` (admissions, preemptions) and the block manager.
    ``reserve_kv`` (continuous, chunked): admit a request only with its whole
    K/V reserved, so running requests never run out of blocks (no preemption)."""
    b = Batch()
    budget = max_num_batched_tokens
    if policy == "static":
        if running:
            for r in running:
                (b.decodes if r.gen < r.n_out else b.padded).append(r)  # blocks reserved at admission
                b.decode_context += r.kv
            return b
        while waiting and len(running) < max_num_seqs:
            r = waiting[0]
            need = bm.blocks_for(r.n_in + r.n_out - 1)
            if not bm.can(need):
                break
            waiting.popleft()
            bm.take(need)
            r.reserve = need
            r.blocks = need
            running.append(r)
            if r.decoding:
                b.decodes.append(r)
                b.decode_context += r.kv
            else:
                b.chunks.append((r, r.target - r.done))
        return b
    if policy == "continuous":
        tokens = 0
        new: list[Req] = []
        while waiting and len(running) < max_num_seqs:
            r = waiting[0]
            q = r.target - r.done
            if q == 0:  # arrives with its K/V (disaggregated decode): joins the decodes
                if not _grow(r, r.kv, bm):
                    break
                waiting.popleft()
                running.append(r)
                continue
            if new and tokens + q > budget:
                break
            if reserve_kv and not _reserve(r, bm):
                break
            if not _grow(r, r.kv + q, bm):
                break
            waiting.popleft()
            running.append(r)
            new.append(r)
            b.chunks.append((r, q))
            tokens += q
        if b.chunks:
            return b
        _decodes(b, running, waiting, bm, budget)
        return b
    # chunked prefill, stall-free (decodes first, then partial prefills, then new requests)
    budget = _decodes(b, running, waiting, bm, budget)
    for r in b.partial:
        if budget <= 0:
            break
        if r not in running:  # preempted by a later decode in the same pass
            continue
        q = min(r.target - r.done, budget)
        room = (r.blocks + bm.free) * bm.block_tokens - r.kv
        q = min(q, room)
        if q <= 0:
            continue
        _grow(r, r.kv + q, bm)
        b.chunks.append((r, q))
        budget -= q
    while waiting and budget > 0 and len(running) < max_num_seqs:
        r = waiting[0]
        q = min(r.target - r.done, budget)
        if reserve_kv and not _reserve(r, bm):
            break
        if q == 0:
            if not _grow(r, r.kv + 1, bm):
                break
            waiting.popleft()
            running.append(r)
            b.decodes.append(r)
            b.decode_context += r.kv
            budget -= 1
            continue
        if not _grow(r, r.kv + q, bm):
            room = bm.free * bm.block_tokens
            if room <= 0:
                break
            q = room
            _grow(r, r.kv + q, bm)
        waiting.popleft()
        running.append(r)
        b.chunks.append((r, q))
        budget -= q
    return b
