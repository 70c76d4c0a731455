"""Sequence-parallel padding: a sequence the Ulysses / ring group does not divide
is padded to ceil(q / n) tokens per rank in every builder that shards it
(flitsim.models.kernels.tokens_per_rank, the one home of the rule); expected
bytes from the closed form, nothing from the code's own output."""

import math

import numpy as np
import pytest

import flitsim.schedules as S
from flitsim.models.kernels import tokens_per_rank
from flitsim.workloads import dit_workload

# PixArt-alpha at 1040 x 1040 px: (1040 / 8 / 2)^2 = 65^2 = 4225 image tokens (odd: no degree > 1 divides it
# but 5, 13, ...), 16 heads of 72 (attention width 1152), K + V width 2304, hidden 1152, CFG step batch 2.
ODD = dit_workload("pixart-alpha", (1040, 1040), steps=2, decode="none")
EVEN = dit_workload("pixart-alpha", 1024, steps=2, decode="none")  # 4096 tokens
P_ODD, P_EVEN, AW, KVW, HID, B, BF16 = 4225, 4096, 1152, 2304, 1152, 2, 2


def _bytes(s, pattern):
    t = s.tasks()
    sel = t[t.label.str.contains(pattern, regex=True)]
    assert len(sel), pattern
    return set(int(x) for x in sel["bytes"])


def test_tokens_per_rank_closed_form():
    assert tokens_per_rank(118_800 + 256, 3) == 39_686  # HunyuanVideo 960x960: 119,056 = 3 x 39,685 + 1
    assert tokens_per_rank(4096, 4) == 1024  # divides: exact p / n, no padding
    assert tokens_per_rank(4225, 8) == 529  # 8 x 529 = 4232: 7 tokens of padding, the most n - 1 allows
    np.testing.assert_array_equal(tokens_per_rank(np.array([7, 8, 9]), 4), [2, 2, 3])
    for p in range(1, 60):
        for n in range(1, 9):
            t = tokens_per_rank(p, n)
            assert t == math.ceil(p / n) and 0 <= n * t - p <= n - 1
    with pytest.raises(ValueError):
        tokens_per_rank(10, 0)


def test_usp_ulysses_x_ring_pads_alltoall_and_ring_blocks():
    s = S.build("usp", None, ODD, ulysses=2, ring=2, gpu="h100")
    t = math.ceil(P_ODD / 4)  # 1057 tokens per rank (4228 = 4225 + 3 padding)
    assert _bytes(s, r"L0\.r\d\.a2a_q$") == {t * AW * BF16 * B}
    assert _bytes(s, r"L0\.r\d\.a2a_out$") == {t * AW * BF16 * B}
    assert _bytes(s, r"L0\.r\d\.a2a_k$") == {t * KVW // 2 * BF16 * B}
    # a ring block: the u = 2 shards an all-to-all gathers (2 t tokens) at kv_width / u = t x kv_width
    assert _bytes(s, r"L0\.u\d\.kv1\.d\d$") == {t * KVW * BF16 * B}


def test_pipefusion_x_ulysses_pads_the_patch_shard_and_hand_offs():
    s = S.build("pipefusion", None, ODD, stages=2, patches=5, ulysses=2, gpu="h100")
    t = math.ceil(P_ODD // 5 / 2)  # a patch of 845 tokens over 2 ranks: 423 each (1 token of padding)
    assert t == 423
    assert _bytes(s, r"^s1\.m\d\.st\d\.c0\.L\d+\.r0\.a2a_q$") == {t * AW * BF16 * B}
    assert _bytes(s, r"^s1\.m\d\.0->1\.c0\.d\d$") == {t * HID * BF16 * B}  # rank-to-rank hand-off of the shard
    tw = math.ceil(P_ODD / 2)  # warm-up step: the full image, 2113 per rank
    assert _bytes(s, r"^warmup0\.0->1\.c0\.d\d$") == {tw * HID * BF16 * B}


def test_cfg_x_ulysses_pads_the_branch_shard_and_the_gather():
    s = S.build("cfg_parallel", None, ODD, ulysses=2, gpu="h100")
    t = math.ceil(P_ODD / 2)  # 2113; each branch runs one sample
    assert _bytes(s, r"L0\.r0\.a2a_q$") == {t * AW * BF16 * 1}
    pout = 2 * 2 * 8  # patch 2 x 2 x 8 output channels (PixArt-alpha learns sigma)
    assert _bytes(s, r"cfg_gather\.d\d$") == {B * t * pout * BF16}  # both branches' predictions of the shard


def test_pure_ring_pads_its_blocks_and_hybrid_degenerates_to_it():
    ring = S.build("ring_attention", None, ODD, degree=4, gpu="h100")
    t = math.ceil(P_ODD / 4)
    assert _bytes(ring, r"L0\.kv1\.d\d$") == {t * KVW * BF16 * B}
    usp = S.build("usp", None, ODD, ulysses=1, ring=4, gpu="h100")
    assert _bytes(usp, r"L0\.u0\.kv1\.d\d$") == {t * KVW * BF16 * B}
    np.testing.assert_array_equal(np.sort(ring.tasks()["compute_ps"].dropna().to_numpy(dtype=np.int64)),
                                  np.sort(usp.tasks()["compute_ps"].dropna().to_numpy(dtype=np.int64)))


@pytest.mark.parametrize("kw", [dict(ulysses=2, ring=2), dict(ulysses=4), dict(ring=4)])
def test_no_padding_when_the_degree_divides_the_sequence(kw):
    s = S.build("usp", None, EVEN, gpu="h100", **kw)
    q = P_EVEN // 4  # exact p / n
    u = kw.get("ulysses", 1)
    if u > 1:
        assert _bytes(s, r"L0\.r\d\.a2a_q$") == {q * AW * BF16 * B}
    if kw.get("ring", 1) > 1:
        assert _bytes(s, r"L0\.u\d\.kv1\.d\d$") == {P_EVEN // 4 * KVW * BF16 * B}
