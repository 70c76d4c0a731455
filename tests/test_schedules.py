"""Schedules: expected values from closed forms and published formulas.

Sources: xDiT README communication table: per
diffusion step TP 4*p*hs*L, DistriFusion and Ring 2*p*hs*L, Ulysses
(4/N)*p*hs*L, PipeFusion 2*p*hs (elements; x dtype bytes x step batch here).
Our per-device count for collectives is the nccl-tests bus bytes a rank sends,
which carries the (N-1)/N factor the O() form drops; it is kept explicitly
below. TeraPipe latency sum(t_i) + (K-1) max(t_i) (Li et al. ICML 2021, Eq. 1);
GPipe (M + K - 1) slots (Huang et al. 2019).
"""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import flitsim.schedules as S
from flitsim.errors import ConfigError
from flitsim.cost import CostModel
from flitsim.models import model_preset, param_count, slice_cost, slice_kernels
from flitsim.taskgraph import TaskGraphBuilder, execute
from flitsim.workloads import dit_workload, llmperf_workload

DIT = dit_workload("dit-xl/2", 512, steps=3, cfg=False)  # 1024 image tokens, hs 1152, 28 blocks
HS, L, P, BYTES = 1152, 28, 1024, 2


_H100 = CostModel("h100")


def _slice_ps(model, new, ctx, layers):
    """Test-side task time of one slice on H100 (kernel model, eager), ps."""
    return _H100.time_ps(slice_kernels(model, new, ctx, layers=layers, logits_tokens=0))[0]


def per_device_sent(sched, step):
    sent, recv = sched.comm_bytes_per_device(step)
    return sent[list(sched.devices)], recv[list(sched.devices)]


@pytest.mark.parametrize("N", [2, 4, 8])
def test_dit_comm_bytes_per_step_match_xdit(N):
    f = (N - 1) / N
    expect = {  # per device per step, bytes
        "tensor_parallel": 4 * f * P * HS * L * BYTES,
        "distrifusion": 2 * f * P * HS * L * BYTES,
        "ring_attention": 2 * f * P * HS * L * BYTES,
        "ulysses": 4 / N * f * P * HS * L * BYTES,
    }
    for name, want in expect.items():
        s = S.build(name, None, DIT, degree=N)
        sent, recv = per_device_sent(s, 1)
        np.testing.assert_allclose(sent, want, rtol=1e-6, err_msg=name)
        np.testing.assert_allclose(recv, want, rtol=1e-6, err_msg=name)
    # PipeFusion: each device sends and receives the image's activations once per step:
    # sends + receives = 2 * p * hs (xDiT), sends alone = p * hs.
    s = S.build("pipefusion", None, DIT, stages=N, patches=N, warmup_steps=1)
    sent, recv = per_device_sent(s, 1)
    np.testing.assert_allclose(sent + recv, 2 * P * HS * BYTES)
    np.testing.assert_allclose(sent, P * HS * BYTES)


def test_gpipe_and_equal_slices_take_m_plus_k_minus_1_slots():
    # Zero communication, K equal stages (no embed/head), M equal micro-batches of time t:
    # makespan = (M + K - 1) t, i.e. (M + K - 1) / M of the ideal M t per stage; bubble (K-1)/(M+K-1).
    K, M = 4, 8
    s = S.simulate(S.build("layer_pipeline", "llama-3-8b", 1024, stages=K, batch=M, micro_batches=M,
                           include_embed_head=False))
    t = _slice_ps("llama-3-8b", 1024, 0, range(8))
    assert s.makespan_ps == (M + K - 1) * t
    np.testing.assert_allclose(s.bubble_fraction(), (K - 1) / (M + K - 1), rtol=1e-9)
    np.testing.assert_allclose(s.fill_drain_share(), 2 * (K - 1) / (M + K - 1), rtol=1e-9)


def test_terapipe_makespan_is_the_papers_latency():
    # Identical stages: makespan = sum(t_i) + (K-1) max(t_i) with t_i from the slice's kernels (test-side).
    K, T, M = 4, 4096, 4
    s = S.simulate(S.build("terapipe", "llama-3-8b", T, stages=K, slices=M, include_embed_head=False))
    L_ = T // M
    t = [_slice_ps("llama-3-8b", L_, i * L_, range(8)) for i in range(M)]
    assert s.makespan_ps == sum(t) + (K - 1) * max(t)


def _latency(model, T, K, lens, cm=_H100):
    groups = [range(j * 80 // K, (j + 1) * 80 // K) for j in range(K)]
    ctx = np.r_[0, np.cumsum(lens)[:-1]]
    t = [max(cm.task_time_s(slice_kernels(model, int(n), int(c), layers=g, logits_tokens=0))[0] for g in groups)
         for n, c in zip(lens, ctx)]
    return sum(t) + (K - 1) * max(t)


@settings(max_examples=6, deadline=None)
@given(T=st.sampled_from([1024, 2048, 4096, 8192]), K=st.sampled_from([2, 4, 8]))
def test_terapipe_dp_never_worse_than_uniform(T, K):
    s = S.build("terapipe", "llama-3-70b", T, stages=K, slicing="dp", grid_tokens=128, include_embed_head=False)
    dp = _latency("llama-3-70b", T, K, s.options["slice_tokens"])
    assert dp == pytest.approx(s.options["dp_latency_s"], rel=1e-9)
    for M in (1, 2, 4, 8, 16, 32):
        if T % (M * 128) == 0:
            assert dp <= _latency("llama-3-70b", T, K, [T // M] * M) * (1 + 1e-12)


def test_terapipe_dp_beats_the_default_slicing_for_long_sequence():
    # Short slices turn memory-bound (weights re-read per slice), pay launch costs and lose wave
    # quantization (a 512-token slice fills the tiles exactly), so under the kernel model the DP's
    # optimum at 32k tokens on 8 stages is the best uniform plan itself (512-token slices; the roofline
    # made the DP's uneven slices > 0.1 % better, docs/schedules.md). It never loses to a uniform plan,
    # and beats TeraPipe's default of one slice per stage-multiple (16 slices) by far.
    T, K = 32768, 8
    cg = CostModel("h100", execution="cuda_graph")
    s = S.build("terapipe", "llama-3-70b", T, stages=K, slicing="dp", include_embed_head=False,
                execution="cuda_graph")
    dp = _latency("llama-3-70b", T, K, s.options["slice_tokens"], cg)
    assert dp == pytest.approx(s.options["dp_latency_s"], rel=1e-9)
    uniform = {M: _latency("llama-3-70b", T, K, [T // M] * M, cg) for M in (16, 32, 64, 128, 256)}
    assert dp <= min(uniform.values()) * (1 + 1e-12)
    assert dp < 0.95 * uniform[16]


def test_stage_time_cv_pipefusion_flat_terapipe_grows_with_length():
    pf = S.build("pipefusion", None, dit_workload("dit-xl/2", 1024, steps=3, cfg=False), stages=4, patches=8,
                 execution="cuda_graph")
    # every patch of a stage costs exactly the same (full attention: p x P pairs each) ...
    assert all(np.ptp(v) == 0 for v in pf.stage_task_times_ps().values())
    # ... so the CV is that of the stage means alone (equal task counts), which differ only by
    # stage 0's embedders and the last stage's final layer (a few short kernels)
    m = pf.stage_times_ps()
    assert pf.stage_time_cv() == pytest.approx(m.std() / m.mean(), rel=1e-9)
    assert pf.stage_time_cv() < 1e-2
    cvs = []
    for T in (2048, 8192, 32768):
        tp = S.build("terapipe", "llama-3-70b", T, stages=4, slices=T // 1024, include_embed_head=False)
        # independent: CV of the per-slice times computed here
        t = [_slice_ps("llama-3-70b", 1024, 1024 * i, range(20)) for i in range(T // 1024)]
        assert tp.stage_time_cv() == pytest.approx(np.std(t) / np.mean(t), rel=1e-4)
        cvs.append(tp.stage_time_cv())
    assert cvs[0] < cvs[1] < cvs[2]


def test_pipefusion_one_fill_one_drain_per_image():
    # Zero comm, N stages, M >= N patches, S steps, 0 warm-up: (S M + N - 1) t with t the
    # patch time of the bottleneck stage: equal here up to stage 0's embedders and the last's final layer,
    # so the flow-shop bound sum_j t_j + (S M - 1) max_j t_j (identical jobs) applies.
    N, M, Sx = 4, 8, 3
    # the denoising pipeline only: the VAE decode tail (a serial task after it) is left out
    s = S.simulate(S.build("pipefusion", None, dit_workload("dit-xl/2", 512, steps=Sx, cfg=False, decode="none"), stages=N,
                           patches=M, warmup_steps=0))
    tj = s.stage_times_ps()
    assert s.makespan_ps == pytest.approx(tj.sum() + (Sx * M - 1) * tj.max(), abs=Sx * M * N)
    # per-step fill/drain would cost (N-1) max t per step more
    assert s.makespan_ps < tj.sum() + (Sx * M - 1) * tj.max() + (Sx - 1) * (N - 1) * tj.min()


def test_decode_ttft_tpot_definitions():
    w = llmperf_workload(n_requests=4, seed=1)
    s = S.simulate(S.build("decode", "llama-3-8b", w, stages=1, requests=4, micro_batches=1))
    m = S.request_metrics(s)
    # one micro-batch, one device: TTFT = the prefill (one task), identical for all requests
    assert m.ttft_s.nunique() == 1
    out = m.output_tokens.to_numpy()
    np.testing.assert_allclose(m.tpot_s, (m.latency_s - m.ttft_s) / (out - 1))
    # decode steps are memory bound: a step reads at least all weights (2 bytes per parameter) from HBM
    from flitsim.hardware import gpu_preset
    hbm = gpu_preset("h100").hbm_bytes_per_s
    params = param_count("llama-3-8b")
    assert m.tpot_s.min() >= 2 * (params - 128256 * 4096) / hbm


def test_bad_inputs():
    with pytest.raises(ConfigError, match="stages"):
        S.build("terapipe", "llama-3-8b", 1024, stages=33)
    with pytest.raises(ConfigError, match="stages"):
        S.build("pipefusion", None, DIT, stages=29)
    with pytest.raises(ConfigError, match="patches"):
        S.build("pipefusion", None, DIT, stages=4, patches=3)  # 1024 tokens not divisible by 3
    with pytest.raises(ConfigError, match="devices"):
        S.build("terapipe", "llama-3-8b", 1024, stages=2, devices=[0, 9], fabric_devices=8)
    with pytest.raises(ConfigError, match="schedule"):
        S.build("nope", "llama-3-8b", 1024)
    with pytest.raises(ConfigError, match="micro_batches"):
        S.build("layer_pipeline", "llama-3-8b", 1024, batch=6, micro_batches=4)
    with pytest.raises(ConfigError, match="device"):
        TaskGraphBuilder(4).add_transfer(0, 4, 10)  # device id outside a 4-device fabric
    b = TaskGraphBuilder(3)
    a, c, d = (b.add_compute(i, 1) for i in range(3))
    b.add_edge(a, c)
    b.add_edge(c, d)
    b.add_edge(d, a)
    with pytest.raises(ConfigError, match=r"cycle 0 -> 1 -> 2 -> 0"):
        execute(b.build())


def test_pipefusion_warmup_steps_each_cost_a_full_single_device_step():
    # A PipeFusion warmup step passes the whole image through the stages in order
    # (xDiT legacy pipeline, pipefusion/pipelines/pip/distri_pixartalpha.py: warmup_timesteps
    # run pip_forward on the full latent, stage after stage), so a run of warmup steps only,
    # on a free network, takes exactly the single-device time: the stages' layers are the
    # model's layers. docs/fabrics.md uses this to show that the 8 x L20 chart cannot have
    # run 5 warmup steps at 2048 px (5/20 of the measured 1-GPU 26.43 s already exceeds 6.345 s).
    one = S.simulate(S.build("tensor_parallel", None, DIT, degree=1)).makespan_ps
    all_warm = S.simulate(S.build("pipefusion", None, DIT, stages=4, patches=4, warmup_steps=DIT.steps))
    np.testing.assert_allclose(all_warm.makespan_ps, one, rtol=1e-9)
    pipelined = S.simulate(S.build("pipefusion", None, DIT, stages=4, patches=4, warmup_steps=DIT.steps - 1))
    assert pipelined.makespan_ps != all_warm.makespan_ps  # the last step is pipelined, not a full step


def test_ulysses_pads_a_sequence_the_degree_does_not_divide():
    """HunyuanVideo 960x960 x 129 frames has 118,800 + 256 tokens: over 3 ranks each all-to-all holds
    ceil(p / 3) tokens per rank (the per-peer count must be whole), and it simulates; an evenly split
    sequence keeps exactly p / N."""
    import math

    from flitsim.networks import FabricNetwork
    from flitsim.workloads import dit_workload

    w = dit_workload("hunyuan-video", (960, 960), steps=2, frames=129)
    p = 118_800 + 256
    aw = 24 * 128  # HunyuanVideo: 24 heads x 128
    s = S.build("ulysses", None, w, degree=3, gpu="h100")
    q = s.tasks().query("label == 'step0.L0.a2a_q'")["bytes"].iloc[0]
    assert q == math.ceil(p / 3) * aw * 2  # bf16
    assert s.simulate(FabricNetwork("hgx-h100", fidelity="flow")).makespan_ps > 0
    q2 = S.build("ulysses", None, w, degree=2, gpu="h100").tasks().query("label == 'step0.L0.a2a_q'")["bytes"].iloc[0]
    assert q2 == p // 2 * aw * 2
