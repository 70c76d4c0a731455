"""PyTorch's context-parallel ring (``ring_impl="torch_cp"``, what xDiT's USP() runs for Flux):
kernel counts and bytes from the eager source's shapes (closed forms), host work, no graph break,
bad input."""

import numpy as np
import pytest

import flitsim.schedules as S
from flitsim.cost import CostModel
from flitsim.errors import ConfigError
from flitsim.models import step_kernels
from flitsim.models.kernels import OPS, has_p2p, host_counts, ring_merge_kernels, ring_step_kernels
from flitsim.workloads import dit_workload

# one PixArt-alpha block at 1024 px (4096 tokens, CFG batch 2, 16 heads x 72) on a ring of 4: 1024 local queries
# against 1024 keys per step
ATT = step_kernels("pixart-alpha", 4096, batch=2, layers=0).parts("attn").attention_as(q_div=4, kv_div=4)
NUMEL = 2 * 16 * 1024 * 72         # output elements: batch x heads x queries x head_dim
ROWS = 2 * 16 * 1024               # LSE rows
KV = 2 * 2 * 16 * 1024 * 72        # K and V of the block
B = 2                              # bf16 bytes


def _names(k):
    return [OPS[i] for i in k.op]


def test_middle_step_eager_kernels_and_bytes():
    # cat(K, V) + cast + 9 per-row LSE ops + exp*out, exp*block_out, their sum (fp32: 2 units per element)
    k = ring_step_kernels(ATT, False, False, "torch_cp").launched(False)
    assert len(k) == 14 and (k.kind == 2).all()
    out_units = 3 + 4 + 4 + 6                       # reads + writes over the output, bf16 units
    lse_units = (4 + 2 + 2 + 2 + 4 + 4 + 2 + 4 + 2) + 9 * 2
    assert k.bytes().sum() == (NUMEL * out_units + ROWS * lse_units + KV * 2) * B
    # the fused merge of ring-flash-attention moves 5 units over the output; eager torch_cp 17
    rfa = ring_merge_kernels(ATT, False, False).launched(False)
    assert rfa.bytes().sum() == (NUMEL * 5 + ROWS * 6) * B


def test_compiled_fuses_the_merge_but_keeps_the_cat():
    k = ring_step_kernels(ATT, False, False, "torch_cp").launched(True)
    assert sorted(_names(k)) == ["cp_kv_cat", "cp_merge", "cp_merge_lse"]
    assert k.bytes().sum() == (KV * 2 + NUMEL * 5 + ROWS * 6) * B


def test_first_and_last_steps():
    first = ring_step_kernels(ATT, True, False, "torch_cp")
    assert _names(first) == ["cp_kv_cat", "cast_up"] and first.bytes().sum() == (KV * 2 + NUMEL * 3) * B
    last = ring_step_kernels(ATT, False, True, "torch_cp").launched(False)
    assert "cp_kv_cat" not in _names(last) and _names(last)[-1] == "cast_down"   # the last step sends nothing
    alone = ring_step_kernels(ATT, True, True, "torch_cp")
    assert _names(alone) == ["cast_up", "cast_down"]


def test_host_work_and_no_graph_break():
    # a sending step: 2 flatten, the AsyncCollectiveTensor, _maybe_wait, 2 slices + 2 reshapes; one
    # permute_tensor call; functional collectives are traced by torch.compile: no point-to-point graph break
    k = ring_step_kernels(ATT, False, False, "torch_cp")
    assert host_counts(k.op) == (8, 1) and not has_p2p(k.op)
    assert host_counts(ring_step_kernels(ATT, False, True, "torch_cp").op) == (0, 0)
    comp = CostModel("h100", execution="compiled")
    step = ATT + k
    assert comp.host_time_s(step) == pytest.approx(len(comp.kernel_times_s(step)[1]) * 4e-6 + 20e-6)
    eager = CostModel("h100")
    launched = len(eager.kernel_times_s(step)[1])
    assert launched == 15
    assert eager.host_time_s(step) == pytest.approx(launched * 10e-6 + (8 + 6) * 3.3e-6 + 20e-6)


def test_builders_take_ring_impl_and_default_is_unchanged():
    w = dit_workload("pixart-alpha", 1024, steps=1, decode="none")
    ring = S.build("ring_attention", None, w, degree=4, gpu="h100")
    cp = S.build("ring_attention", None, w, degree=4, gpu="h100", ring_impl="torch_cp")
    usp = S.build("usp", None, w, ring=4, gpu="h100", ring_impl="torch_cp")
    assert ring.options["ring_impl"] == "ring_flash_attn" and cp.options["ring_impl"] == "torch_cp"
    # same graph, same transfers; only the ring steps' compute differs (more eager kernels: slower)
    tr = lambda s: s.tasks().query("kind == 'transfer'")["bytes"].to_numpy()  # noqa: E731
    np.testing.assert_array_equal(tr(ring), tr(cp))
    assert cp.tasks()["compute_ps"].sum() > ring.tasks()["compute_ps"].sum()
    np.testing.assert_array_equal(np.sort(cp.tasks()["compute_ps"].dropna().to_numpy(dtype=np.int64)),
                                  np.sort(usp.tasks()["compute_ps"].dropna().to_numpy(dtype=np.int64)))


@pytest.mark.parametrize("name,kw", [("ring_attention", dict(degree=2)), ("usp", dict(ring=2))])
def test_unknown_ring_impl_is_a_config_error(name, kw):
    w = dit_workload("pixart-alpha", 1024, steps=1, decode="none")
    with pytest.raises(ConfigError, match="ring_impl"):
        S.build(name, None, w, gpu="h100", ring_impl="nccl_magic", **kw)
