"""Expert parallelism for mixture-of-experts LLMs (GShard, Lepikhin et al. 2020;
DeepSpeed-MoE; the dispatch / combine all-to-alls of Mixtral serving).

Inside a sequence-parallel group of n devices (:mod:`flitsim.schedules.hybrid`),
``ep = n`` puts n_experts / n experts on each device. Every MoE layer, after the
router: a **dispatch** all_to_all sends each token's hidden state to the devices
owning its top-k experts, the local experts run on what they received, and a
**combine** all_to_all returns the expert outputs. With balanced routing each
device holds q / n tokens, so each all_to_all's nccl-tests size per rank is
``q / n x k x hidden x bytes x batch`` (each rank sends (n-1)/n of it), and each
local expert runs ``q / n x k x n / n_experts`` rows... per device: ``q x k /
n_experts`` rows per expert (the balanced share). Without ``ep`` (ep = 1) every
device holds every expert and runs its own tokens through them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from flitsim.errors import config_error
from flitsim.models.kernels import OPS, Kernels

__all__ = ["ExpertParallel"]

_UP, _DOWN, _ACT = OPS.index("expert_up"), OPS.index("expert_down"), OPS.index("silu_mul")


@dataclass(frozen=True)
class ExpertParallel:
    """Expert placement of one MoE model over an ep group (see the module docstring)."""

    ep: int
    n_experts: int
    top_k: int
    hidden: int
    bytes_per_element: int
    tokens: int
    batch: int

    @staticmethod
    def make(cfg: Any, ep: int, group: int, work: Any) -> "ExpertParallel | None":
        """The EP plan, or None for ep = 1 (experts replicated).

        Raises:
            ConfigError: ``ep`` > 1 on a dense model, ``ep`` not equal to the
                sequence-parallel group (``group`` = ulysses x ring) or not
                dividing the experts.
        """
        if ep > 1 and not cfg.n_experts:
            raise config_error("ep", ep, f"1: {cfg.name} is a dense model (no experts to distribute)")
        if ep == 1:
            return None
        if ep != group:
            raise config_error("ep", ep, f"the sequence-parallel group size ulysses x ring = {group} "
                               "(expert parallelism runs over the devices that shard the tokens)")
        if cfg.n_experts % ep:
            raise config_error("ep", ep, f"a divisor of the model's {cfg.n_experts} experts")
        return ExpertParallel(ep, cfg.n_experts, cfg.experts_per_token, cfg.hidden, work.bytes_per_element,
                              work.tokens, work.batch)

    def a2a_bytes(self) -> int:
        """nccl-tests size of one dispatch (or combine) all_to_all per rank, bytes."""
        return int(round(self.tokens / self.ep * self.top_k * self.hidden * self.bytes_per_element * self.batch))

    def local_mlp(self, kt: Kernels) -> Kernels:
        """The MLP part of token-sharded kernels ``kt`` with only the local experts:
        n_experts / ep experts, each running the balanced share q x k / n_experts
        of the group's rows (the sharded rows x ep)."""
        mlp = kt.parts("mlp")
        c = mlp.cols
        exp = np.isin(c["op"], [_UP, _DOWN]) | ((c["op"] == _ACT) & (c["part"] == 3))
        n_rows = int((c["op"] == _UP).sum())
        keep_experts = max(1, n_rows // self.ep)
        rank = np.cumsum(c["op"] == _UP) - 1  # which expert a row belongs to
        keep = ~exp | (rank < keep_experts)
        m = np.where(exp & (c["kind"] == 0), c["m"] * self.ep, c["m"])
        numel = np.where(exp & (c["kind"] == 2), c["numel"] * self.ep, c["numel"])
        out = Kernels({**c, "m": m, "numel": numel})
        return Kernels({k: v[keep] for k, v in out.cols.items()})

    def lower(self, gb: Any, ids: list[int], post: list[int], mlp: Kernels, *, item: int, label: str,
              **kw: Any) -> list[int]:
        """Dispatch all_to_all after ``post`` (the attention block's tails), the
        local experts, the combine all_to_all. Returns the tails (the combine,
        once per device)."""
        d = gb.collective(ids, "all_to_all", self.a2a_bytes(), item=item, label=f"{label}.ep_dispatch", **kw)
        gb.edges(post, d)
        ex = gb.compute_on(ids, mlp, after=d, item=item, label=f"{label}.experts", **kw)
        comb = gb.collective(ids, "all_to_all", self.a2a_bytes(), item=item, label=f"{label}.ep_combine", **kw)
        gb.edges(ex, comb)
        return [comb] * len(ids)
