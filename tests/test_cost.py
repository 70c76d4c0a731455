"""Kernel-level compute model: closed forms (tile / wave quantization, tensor
bytes), published single-GPU latencies (xDiT README 2024 latency charts,
xDiT paper arXiv 2411.01738, xDiT docs/performance/flux.md), measured-profile overrides and bad input."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import flitsim.schedules as S
from flitsim import ConfigError
from flitsim.cost import CostModel, GemmParams, Profile, gemm_time_s, read_profile
from flitsim.cost.elementwise import elementwise_time_s, fuse_elementwise
from flitsim.hardware import GPU_PRESETS, fabric_gpu, gpu_preset
from flitsim.models import (
    Kernels,
    dit_step_cost,
    patch_cost,
    patch_kernels,
    slice_cost,
    slice_kernels,
    step_kernels,
)
from flitsim.models.kernels import OPS, ring_merge_kernels
from flitsim.workloads import dit_workload

ONE_TILE = GemmParams(tiles=((128, 128),), tile_efficiency=(1.0,), k_overhead=64)


def test_wave_aligned_gemm_runs_at_the_curve_top_and_one_more_tile_row_costs_a_wave():
    # H100: 132 SMs = 12 x 11 tiles of 128 x 128. Curve: eff = gemm_efficiency x K / (K + k_overhead).
    g = gpu_preset("h100")
    peak = g.peak_flop_per_s("bf16")
    m, n, k = 128 * 12, 128 * 11, 8192
    t = float(gemm_time_s(m, n, k, 2, g, peak, ONE_TILE))
    top = g.gemm_efficiency * k / (k + 64)
    assert t == pytest.approx(2 * m * n * k / (peak * top), rel=1e-12)
    # one more tile row (M + 1 row -> 13 x 11 = 143 tiles > 132 SMs): a whole second wave
    assert float(gemm_time_s(m + 1, n, k, 2, g, peak, ONE_TILE)) == pytest.approx(2 * t, rel=1e-12)
    # ... and 264 tiles still fit in those two waves
    assert float(gemm_time_s(2 * m, n, k, 2, g, peak, ONE_TILE)) == pytest.approx(2 * t, rel=1e-12)


def test_skinny_gemm_is_memory_bound_at_the_weight_bytes():
    # decode-like GEMM: M = 1, the weights (K x N x 2 bytes) dominate: t = bytes / (bw x memory_efficiency)
    g = gpu_preset("h100")
    t = float(gemm_time_s(1, 8192, 8192, 2, g, g.peak_flop_per_s("bf16")))
    nbytes = (8192 + 8192 * 8192 + 8192) * 2
    assert t == pytest.approx(nbytes / (g.hbm_bytes_per_s * g.memory_efficiency), rel=1e-12)


def test_elementwise_bytes_are_tensor_bytes_read_plus_written():
    g = gpu_preset("a100")
    numel = 4096 * 1152
    t = float(elementwise_time_s(numel, 2, 1, 2, g))  # residual add: two tensors in, one out
    nbytes = numel * 3 * 2
    # 28 MB against half of one 20 MiB partition (A100 whitepaper: 40 MB L2 in two partitions)
    h = 0.5 * 40 * 2**20 / (2 * nbytes)
    assert t == pytest.approx(nbytes * (h / (5120 * 1410e6) + (1 - h) / (2.039e12 * g.memory_efficiency)),
                              rel=1e-12)
    k = slice_kernels("llama-3-8b", 512, 0, layers=0)
    ew = k.kind == 2
    np.testing.assert_array_equal(k.bytes()[ew], k.numel[ew] * (k.reads[ew] + k.writes[ew]) * 2)


def test_elementwise_runs_at_l2_bandwidth_when_it_fits_and_at_hbm_when_it_does_not():
    # L40: one 96 MB L2 (Ada whitepaper). A 3 MB residual add stays in L2: t = bytes / L2 bandwidth
    # (5120 B/clk x 2490 MHz); a 3 GB one streams from GDDR6 almost entirely (864 GB/s x memory_efficiency).
    g = gpu_preset("l40")
    small = 512 * 1024
    assert float(elementwise_time_s(small, 2, 1, 2, g)) == pytest.approx(small * 6 / (5120 * 2490e6), rel=1e-12)
    big = 512 * 2**20
    t = float(elementwise_time_s(big, 2, 1, 2, g))
    dram = big * 6 / (864e9 * g.memory_efficiency)
    assert dram * 0.98 < t < dram


def test_compiled_fuses_consecutive_elementwise_kernels():
    # DiT block pre-attention: layernorm -> scale -> shift (3 kernels) fuse into one reading 1 tensor
    # (3 reads - 2 intermediates) and writing 1.
    k = step_kernels("dit-xl/2", 256, layers=0)
    f = fuse_elementwise(k.cols)
    assert len(f["kind"]) < len(k)
    first_ew = int(np.nonzero(f["kind"] == 2)[0][1])  # [0] is the conditioning SiLU (per sample)
    assert (f["reads"][first_ew], f["writes"][first_ew]) == (1, 1)


@pytest.mark.parametrize("model", ["llama-3-8b", "pixart-alpha", "flux.1-dev", "sd3-medium", "dit-xl/2"])
def test_kernel_flops_equal_the_entry_flops(model):
    # Lowering conserves work: GEMM FLOPs = matmul_flops, attention FLOPs = attention_flops (models.cost).
    if model == "llama-3-8b":
        c, k = slice_cost(model, 384, 640, batch=2), slice_kernels(model, 384, 640, batch=2)
    else:
        c, k = dit_step_cost(model, 1024, batch=2), step_kernels(model, 1024, batch=2)
        pc, pk = patch_cost(model, 256, 1024, text_query_tokens=0), patch_kernels(model, 256, 1024)
        assert pk.flops()[pk.kind == 0].sum() == pc.matmul_flops
        assert pk.flops()[pk.kind == 1].sum() == pc.attention_flops
    f = k.flops()
    assert f[k.kind == 0].sum() == c.matmul_flops
    assert f[k.kind == 1].sum() == c.attention_flops


def test_sharding_conserves_work():
    # 8-way tensor parallel: GEMM and attention FLOPs / 8 exactly (heads and FFN divide by 8).
    k = slice_kernels("llama-3-70b", 1024, 0, layers=range(2))
    sh = k.shard_heads(8)
    sel = k.kind <= 1
    assert sh.flops()[sel].sum() * 8 == k.flops()[sel].sum()
    kt = step_kernels("pixart-alpha", 4096, batch=2, layers=0).shard_tokens(8)
    full = step_kernels("pixart-alpha", 4096, batch=2, layers=0)
    gemm = (full.kind == 0) & (full.seq == 1)
    assert kt.flops()[gemm].sum() * 8 == full.flops()[gemm].sum()


# xDiT single-GPU latencies (README 2024 charts, arXiv 2411.01738, docs/performance/flux.md): model, px, steps, GPU, execution, seconds
SINGLE_GPU = [
    ("pixart-alpha", 1024, 20, "a100", "eager", 2.085), ("pixart-alpha", 2048, 20, "a100", "eager", 16.22),
    ("pixart-alpha", 4096, 20, "a100", "eager", 183.6), ("pixart-alpha", 8192, 20, "a100", "eager", 2728),
    ("pixart-alpha", 1024, 20, "l20", "eager", 3.34), ("pixart-alpha", 2048, 20, "l20", "eager", 26.43),
    ("pixart-alpha", 4096, 20, "l20", "eager", 306.6),
    ("pixart-alpha", 1024, 20, "l40", "eager", 2.8), ("pixart-alpha", 2048, 20, "l40", "eager", 21.6),
    ("pixart-alpha", 4096, 20, "l40", "eager", 244.89),
    ("flux.1-dev", 1024, 28, "l40", "eager", 18.36), ("flux.1-dev", 2048, 28, "l40", "eager", 105.7),
    ("flux.1-dev", 4096, 28, "l40", "eager", 855.13),
    ("flux.1-dev", 1024, 28, "h100", "eager", 6.71), ("flux.1-dev", 1024, 28, "h100", "compiled", 4.30),
    # not fitted (xDiT docs/performance/hunyuanvideo.md, 1280x720, 129 frames, 50 steps): H100's fit on another
    # model; H20 runs H100's tops through the per-SM-clock attention model (its low tensor rate per SM puts it
    # under the mma.sync ceiling H100 hits; docs/compute.md section 10)
    ("hunyuan-video", (720, 1280), 50, "h100", "eager", 1904.08),
    ("hunyuan-video", (720, 1280), 50, "h20", "eager", 6639.17),
]
# xDiT's benchmark script runs Flux with max_sequence_length=256 (examples/flux_example.py)
XDIT_TEXT_TOKENS = {"flux.1-dev": 256}


@pytest.mark.parametrize("model,px,steps,gpu,execution,measured", SINGLE_GPU)
def test_single_gpu_latency_within_10_percent_of_xdit(model, px, steps, gpu, execution, measured):
    w = dit_workload(model, px, steps=steps, text_tokens=XDIT_TEXT_TOKENS.get(model),
                     frames=129 if model == "hunyuan-video" else 1)
    s = S.simulate(S.build("tensor_parallel", None, w, degree=1, gpu=gpu, execution=execution))
    assert s.makespan_ps * 1e-12 == pytest.approx(measured, rel=0.10)


def test_tensor_parallel_speedup_falls_as_resolution_drops():
    # Smaller shards fill fewer SMs and pay the same launch costs: TP8 speedup (no communication cost)
    # at 1024 px < 2048 px < 4096 px, all below 8.
    sp = []
    for px in (1024, 2048, 4096):
        w = dit_workload("pixart-alpha", px, steps=1)
        t1 = S.simulate(S.build("tensor_parallel", None, w, degree=1, gpu="h100")).makespan_ps
        t8 = S.simulate(S.build("tensor_parallel", None, w, degree=8, gpu="h100")).makespan_ps
        sp.append(t1 / t8)
    assert sp[0] < sp[1] < sp[2] < 8


def test_every_gpu_preset_has_its_numbers_and_sources():
    for name in GPU_PRESETS:
        g = gpu_preset(name)
        assert g.sm_count > 0 and g.l2_bytes > 0 and g.boost_clock_mhz > 0 and g.sources
        assert 0 < g.gemm_efficiency <= 1 and 0 < g.attention_efficiency <= 1
        assert set(g.assumed) <= set(type(g).model_fields)
    assert gpu_preset("l40").peak_flop_per_s("bf16") == 181.05e12  # NVIDIA L40 datasheet (dense)
    assert gpu_preset("h100-pcie").sm_count == 114  # H100 whitepaper


def test_fabric_names_the_gpu_and_the_schedule_says_so():
    assert fabric_gpu("gb200-nvl72") == "gb200" and fabric_gpu("hgx-h100") == "h100" and fabric_gpu(None) is None
    w = dit_workload("dit-xl/2", 256, steps=1, cfg=False)
    s = S.build("ulysses", None, w, degree=2, fabric="gb200-nvl72")
    assert s.options["gpu"] == "GB200" and s.options["gpu_source"] == "fabric gb200-nvl72"
    plain = S.build("ulysses", None, w, degree=2)
    assert plain.options["gpu"] == "H100" and plain.options["gpu_source"].startswith("default")
    given = S.build("ulysses", None, w, degree=2, gpu="a100", fabric="gb200-nvl72")
    assert given.options["gpu"] == "A100" and given.options["gpu_source"] == "given"
    with pytest.warns(UserWarning, match="GB200"):
        S.simulate(plain, "gb200-nvl72")


def _profile_row(**kw):
    row = dict(kernel="gemm", gpu="h100", dtype="bf16", m=8192, n=4608, k=1152, time_us=123.0)
    row.update(kw)
    return row


def test_a_profile_entry_replaces_the_modelled_time_exactly():
    k = step_kernels("pixart-alpha", 4096, batch=2, layers=0)
    prof = Profile.from_frame(pd.DataFrame([_profile_row()]))
    plain, with_p = CostModel("h100"), CostModel("h100", profile=prof)
    _, t0, m0 = plain.kernel_times_s(k)
    _, t1, m1 = with_p.kernel_times_s(k)
    hit = (k.kind == 0) & (k.m == 8192) & (k.n == 4608) & (k.k == 1152)
    assert hit.sum() == 1 and not m0.any()
    assert t1[hit][0] == 123e-6 and m1[hit].all() and not m1[~hit].any()
    np.testing.assert_array_equal(t1[~hit], t0[~hit])


def test_shipped_example_profile_is_labelled_and_used_by_a_schedule():
    from flitsim.cli.profile_cmd import example_profile_path

    p = read_profile(example_profile_path())
    assert (p.frame["source"].str.contains("EXAMPLE").all() and
            p.frame["source"].str.contains("not a measurement").all())
    w = dit_workload("pixart-alpha", 1024, steps=1)
    s = S.build("tensor_parallel", None, w, degree=1, gpu="h100", profile=example_profile_path())
    share = s.measured_compute_share()
    assert 0.5 < share <= 1.0  # the example covers every block kernel of this step
    assert s.summary()["compute_measured_share"] == share
    assert S.build("tensor_parallel", None, w, degree=1, gpu="h100").measured_compute_share() == 0


@pytest.mark.parametrize("row,match", [
    (_profile_row(gpu="v100"), "profile row 0: gpu = 'v100'"),
    (_profile_row(kernel="conv"), "profile row 0: kernel = 'conv'"),
    (_profile_row(time_us=-1.0), "profile row 0: time_us = -1.0"),
    (_profile_row(time_us=0.0), "profile row 0: time_us = 0.0"),
    (_profile_row(m=None), "profile row 0: m = None"),
    (_profile_row(n=12.5), "profile row 0: n = 12.5"),
    (_profile_row(dtype="int4"), "profile row 0: dtype = 'int4'"),
    (dict(kernel="attention", gpu="h100", dtype="bf16", batch=1, heads=16, kv_heads=3, q=64, kv=64, head_dim=64,
          causal=0, time_us=1.0), "profile row 0: kv_heads = 3"),
    (dict(kernel="elementwise", gpu="h100", dtype="bf16", op="softmax_xyz", numel=10, time_us=1.0),
     "profile row 0: op = 'softmax_xyz'"),
])
def test_bad_profile_rows_name_row_and_field(row, match):
    with pytest.raises(ConfigError, match=match.replace("(", r"\(").replace(".", r"\.")):
        Profile.from_frame(pd.DataFrame([row]))


def test_bad_profile_files_and_efficiencies_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="profile"):
        read_profile(tmp_path / "missing.csv")
    bad = tmp_path / "p.txt"
    bad.write_text("x")
    with pytest.raises(ConfigError, match="a .csv or .parquet file"):
        read_profile(bad)
    dup = pd.DataFrame([_profile_row(), _profile_row()])
    with pytest.raises(ConfigError, match="profile row 1: shape"):
        Profile.from_frame(dup)
    header_only = tmp_path / "empty.csv"
    header_only.write_text("kernel,gpu,dtype,m,n,k,time_us\n")
    with pytest.raises(ConfigError, match="at least one measured row"):
        read_profile(header_only)
    w = dit_workload("dit-xl/2", 256, steps=1, cfg=False)
    for eff in ({"attention": 0.0}, {"matmul": 1.5}):
        with pytest.raises(ConfigError, match="efficiency"):
            S.build("tensor_parallel", None, w, degree=1, efficiency=eff)
    with pytest.raises(ConfigError, match="execution = 'turbo'"):
        S.build("tensor_parallel", None, w, degree=1, execution="turbo")


def test_communication_steals_compute_with_a_bounded_effect():
    # Ring attention overlaps K/V transfers with attention: with NCCL p2p's SM share (8 / 132 on H100)
    # the makespan grows, by at most share / (1 - share) of the compute time that overlaps (all of it, bound).
    # 2048 px at 400 GB/s: each ring step's attention outlasts its K/V transfer, so compute is critical.
    w = dit_workload("pixart-alpha", 2048, steps=1)
    net = S.build("ring_attention", None, w, degree=4, gpu="h100")
    off = S.build("ring_attention", None, w, degree=4, gpu="h100", interference={"enabled": False})
    from flitsim.networks import AnalyticNetwork

    n = AnalyticNetwork(alpha_ps=2_000_000, bandwidth_GBps=400.0)
    t_on, t_off = S.simulate(net, n).makespan_ps, S.simulate(off, n).makespan_ps
    share = 8 / 132
    assert t_off < t_on <= t_off * (1 + share / (1 - share)) + 1
    assert (net.graph.columns["steal_ppm"][net.graph.columns["kind"] == 1] == round(share * 1e6)).all()
    assert (off.graph.columns["steal_ppm"] == 0).all()
    ce = S.build("ring_attention", None, w, degree=4, gpu="h100", interference={"transfer_transport": "copy_engine"})
    assert S.simulate(ce, n).makespan_ps == t_off  # copy engines use no SMs


from hypothesis import given, settings, strategies as st  # noqa: E402


@settings(max_examples=60, deadline=None)
@given(m=st.integers(1, 1 << 16), n=st.integers(1, 1 << 15), k=st.integers(1, 1 << 15),
       gpu=st.sampled_from(sorted(GPU_PRESETS)))
def test_a_gemm_never_beats_the_datasheet_and_grows_with_its_shape(m, n, k, gpu):
    # Physics: no kernel faster than peak FLOP/s or than HBM bandwidth moving its bytes once;
    # more rows never take less time (waves and bytes only grow).
    g = gpu_preset(gpu)
    peak = g.peak_flop_per_s("bf16")
    t = float(gemm_time_s(m, n, k, 2, g, peak))
    assert t >= 2 * m * n * k / peak * (1 - 1e-12)
    assert t >= (m * k + k * n + m * n) * 2 / g.hbm_bytes_per_s * (1 - 1e-12)
    assert float(gemm_time_s(m + 1, n, k, 2, g, peak)) >= t


@pytest.mark.parametrize("model,P", [("pixart-alpha", 4096), ("flux.1-dev", 1024), ("llama-3-8b", 0)])
def test_no_kernel_beats_the_datasheet(model, P):
    k = slice_kernels(model, 700, 300) if P == 0 else step_kernels(model, P, batch=2)
    for gpu in ("h100", "l20", "gb200"):
        g = gpu_preset(gpu)
        for ex in ("eager", "compiled"):
            cols, t, _ = CostModel(gpu, execution=ex).kernel_times_s(k)  # the rows this mode launches
            kl = Kernels(cols)
            # elementwise kernels may run out of L2 (never faster than its bandwidth); the rest stream HBM
            bw = np.where(kl.kind == 2, max(g.l2_bytes_per_s, g.hbm_bytes_per_s), g.hbm_bytes_per_s)
            bound = np.maximum(kl.flops() / g.peak_flop_per_s("bf16"), kl.bytes() / bw)
            assert (t >= bound * (1 - 1e-12)).all()


def test_profile_cli_validates_and_shows(tmp_path):
    from click.testing import CliRunner

    from flitsim.cli import cli
    from flitsim.cli.profile_cmd import example_profile_path

    r = CliRunner().invoke(cli, ["profile", "validate", example_profile_path()])
    assert r.exit_code == 0 and "16 rows OK (H100)" in r.output
    r = CliRunner().invoke(cli, ["profile", "show", "--json"])
    assert r.exit_code == 0 and '"model_over_measured"' in r.output
    bad = tmp_path / "bad.csv"
    pd.DataFrame([_profile_row(gpu="tpu-v5")]).to_csv(bad, index=False)
    r = CliRunner().invoke(cli, ["profile", "validate", str(bad)])
    assert r.exit_code == 2 and "profile row 0: gpu = 'tpu-v5'" in r.output


def test_scenario_takes_the_fabrics_gpu_and_reports_the_measured_share(tmp_path):
    from flitsim.cli.profile_cmd import example_profile_path
    from flitsim.scenario import run_scenario

    toml = tmp_path / "s.toml"
    toml.write_text(f'''title = "profile"
[fabric]
preset = "hgx-h100"
network = "analytic"
[hardware]
profile = "{example_profile_path()}"
[[cases]]
name = "PixArt 1024"
workload = {{ kind = "dit", model = "pixart-alpha", resolution_px = 1024, steps = 1 }}
[[cases.schedules]]
name = "tensor_parallel"
options = {{ degree = 2 }}
''')
    r = run_scenario(toml, progress=False).runs[0]
    assert r.schedule.options["gpu"] == "H100" and r.schedule.options["gpu_source"] == "fabric hgx-h100"
    assert 0 < r.metrics["compute_measured_share"] < 1  # the example has the 1-GPU shapes only, some match


def test_eager_flux_runs_diffusers_fp32_chains_that_compile_fuses():
    # One Flux single-stream block, 1024 px + 256 text tokens = 4352 tokens, bf16. diffusers' RMSNorm is
    # to(fp32), pow, mean, + eps, rsqrt, x * rsqrt (fp32), to(bf16), * weight: 6 + 8 + 4 + 6 + 6 + 4 = 34 bytes
    # per element (+ the per-row eps / rsqrt); apply_rotary_emb is -x_imag (stride-2: whole lines, 3 B/elt over
    # the tensor), stack (5), x.float() (6), * cos (8), x_rot.float() (6), * sin (8), + (12), to(bf16) (6) = 54.
    # Compiled (Inductor), norm and RoPE are one kernel per tensor: read 2 + write 2 bytes per element.
    n, d, hd = 4352, 3072, 128
    k = step_kernels("flux.1-dev", 4096, layers=19, text_tokens=256)  # block 19: the first single block
    eager, fused = k.launched(False), k.launched(True)
    chain = {"cast_up", "cast_down", "pow_f32", "mean_f32", "add_eps", "rsqrt_f32", "mul_mixed", "mul_weight",
             "mul_f32", "add_f32", "neg", "stack"}
    ops = np.array(OPS)
    is_chain = np.isin(ops[eager.op], list(chain))
    q_elems = n * d                                   # q and k: n x 3072 each
    rows = q_elems // hd
    norm_bytes = 2 * (34 * q_elems + 2 * 8 * rows)    # two tensors; eps-add and rsqrt on fp32 per-row stats
    rope_bytes = 54 * 2 * q_elems                     # one chain over q and k together
    assert eager.bytes()[is_chain].sum() == norm_bytes + rope_bytes
    assert (eager.kind[is_chain] == 2).all() and is_chain.sum() == 2 * 8 + 8
    assert not np.isin(ops[fused.op], list(chain)).any()
    f = fuse_elementwise(fused.cols)
    fk = Kernels(f)
    pre = (fk.kind == 2) & np.isin(ops[fk.op], ["qk_norm", "rope"])
    assert fk.bytes()[pre].sum() == 2 * 2 * 2 * q_elems   # q and k read once and written once
    # and the gap compile closes is those bytes at memory bandwidth plus the launches it saves
    g = gpu_preset("h100")
    te, tc = CostModel(g).task_time_s(k)[0], CostModel(g, execution="compiled").task_time_s(k)[0]
    assert te - tc >= (norm_bytes + rope_bytes - 8 * q_elems) / (g.hbm_bytes_per_s * g.memory_efficiency)


def test_flux_lowering_keeps_diffusers_separate_projections():
    # diffusers' Attention: to_q / to_k / to_v are three GEMMs (fuse_qkv_projections is opt-in); single blocks
    # add proj_mlp. FLOPs equal the fused form: 2 x tokens x d x (3 d + 4 d).
    k = step_kernels("flux.1-dev", 4096, layers=19, text_tokens=256)
    g = (k.kind == 0) & (k.part == 0) & (k.seq == 1)
    assert sorted(k.n[g].tolist()) == [3072, 3072, 3072, 12288]
    assert k.flops()[g].sum() == 2 * 4352 * 3072 * (3 * 3072 + 12288)


# Attention per-score constants, from their sources (not from the code): SFU exp2 16 per SM-clock (CUDA guide
# throughput table, cc 8.x / 9.0); FP32 128 per SM-clock on Hopper; sm80 mma.sync on Hopper reaches 2/3 of the
# peak (FlashAttention-3 paper), as a per-SM-clock ceiling of 2/3 x 989e12 / (132 x 1.98e9).
_H100_PER_CLK = 989e12 / (132 * 1.98e9)
_MMA_SYNC = 2 / 3 * _H100_PER_CLK


def test_attention_cta_pays_one_kv_block_outside_its_main_loop():
    # 132 (sample, head) x 1 query block = 132 CTAs = one wave on H100: 128 x (kv + 128) scores per CTA, each
    # 4 x 128 FLOP at eff x the mma.sync ceiling, then the softmax: 1 / 16 clock on the SFU (serial, FA2)
    from flitsim.cost.attention import attention_time_s

    g = gpu_preset("h100")
    peak = g.peak_flop_per_s("bf16")
    per_score = 4 * 128 / (g.attention_efficiency * _MMA_SYNC) + 1 / 16
    for kv in (1024, 4096):
        t = float(attention_time_s(1, 132, 132, 128, kv, 0, 128, 0, 2, g, peak))
        assert t == pytest.approx(128 * (kv + 128) * per_score / 1.98e9, rel=1e-12)


def test_tensor_bound_attention_runs_its_flops_at_the_top():
    # L40 (512 FLOP per SM-clock, no mma.sync ceiling), head 128, softmax fully overlapped: one wave of 142 CTAs
    # (one head, 142 query blocks: K / V read once, far from the memory floor) takes its padded FLOPs over
    # attention_efficiency x peak (the softmax's 1/16 clock per score is hidden)
    from flitsim.cost.attention import AttentionParams, attention_time_s

    g = gpu_preset("l40")
    peak = g.peak_flop_per_s("bf16")
    t = float(attention_time_s(1, 1, 1, 142 * 128, 4096, 0, 128, 0, 2, g, peak, AttentionParams(softmax_overlap=1.0)))
    flops = 4 * 128 * 142 * 128 * (4096 + 128)
    assert t == pytest.approx(flops / (g.attention_efficiency * peak), rel=1e-12)


def test_exp_bound_attention_runs_at_the_sfu_rate():
    # H100 without the mma.sync ceiling at efficiency 1, head 32, softmax overlapped: tensor 128 / 3784 = 0.034
    # clock per score < 1 / 16 (SFU) > (3.5 + 32 / 128) / 128 (FP32); one head, 132 query blocks = one wave:
    # t = scores / (SMs x clock x 16)
    from flitsim.cost.attention import AttentionParams, attention_time_s

    g = gpu_preset("h100").replace(mma_sync_flop_per_clk_per_sm=None, attention_efficiency=1.0)
    t = float(attention_time_s(1, 1, 1, 132 * 128, 4096, 0, 32, 0, 2, g, 989e12, AttentionParams(softmax_overlap=1.0)))
    scores = 132 * 128 * (4096 + 128)
    assert t == pytest.approx(scores / (132 * 1.98e9 * 16), rel=1e-12)


def test_attention_switches_from_exp_bound_to_tensor_bound_at_the_closed_form_head_dim():
    # overlapped: 4 hd / (eff x rate) = 1 / 16  <=>  hd* = eff x rate / 64 (H100: 0.626 x 2523 / 64 = 24.7)
    from flitsim.cost.attention import AttentionParams, score_clocks

    g = gpu_preset("h100")
    p = AttentionParams(softmax_overlap=1.0)
    hd_star = g.attention_efficiency * _MMA_SYNC / 64
    assert float(score_clocks(hd_star * 0.99, g, 989e12, p)) == pytest.approx(1 / 16, rel=1e-12)
    above = hd_star * 1.01
    assert float(score_clocks(above, g, 989e12, p)) == pytest.approx(4 * above / (g.attention_efficiency * _MMA_SYNC))
    # serial (FA2): the two phases add everywhere
    assert float(score_clocks(above, g, 989e12)) == pytest.approx(4 * above / (g.attention_efficiency * _MMA_SYNC)
                                                                  + 1 / 16)


def test_h100_attention_top_reproduces_fa2s_published_utilization_and_h20_runs_nearer_its_peak():
    # The H100 top is solved so that a long head-128 forward reaches 35 % of 989 TFLOP/s (FlashAttention-3 paper);
    # H20 (148 TFLOP/s over 78 SMs: 958 FLOP per SM-clock, under the 2523 mma.sync ceiling) with the same top and
    # softmax reaches 512 / 958 / (512 / (eff x 958) + 1 / 16) of its peak (about 0.58, not 0.35).
    from flitsim.cost.attention import score_clocks

    h100, h20 = gpu_preset("h100"), gpu_preset("h20")
    u100 = 512 / _H100_PER_CLK / float(score_clocks(128, h100, 989e12))
    assert u100 == pytest.approx(0.35, abs=0.002)
    per20 = 148e12 / (78 * 1.98e9)
    a = h100.attention_efficiency
    u20 = 512 / per20 / float(score_clocks(128, h20, 148e12))
    assert u20 == pytest.approx((512 / per20) / (512 / (a * per20) + 1 / 16), rel=1e-12)
    assert 0.55 < u20 < 0.62


def test_ring_merge_kernels_follow_ring_flash_attention_update_out_and_lse():
    # ring-flash-attention's update_out_and_lse (as xDiT's USP runs it): step 0 casts the block output to fp32;
    # later steps run the @torch.jit.script _update_out_and_lse, one fused kernel per output (out: reads out in
    # fp32 and block_out in bf16, writes out in fp32; lse: per row, fp32); the last step casts back to bf16.
    from flitsim.models.kernels import ring_merge_kernels

    att = step_kernels("pixart-alpha", 4096, batch=2, layers=0).parts("attn").attention_as(q_div=4, kv_div=4)
    numel = 2 * 16 * 1024 * 72                         # batch x heads x local queries x head_dim
    first = ring_merge_kernels(att, True, False)
    assert len(first) == 1 and first.bytes().sum() == numel * 3 * 2
    for fused in (False, True):
        mid = ring_merge_kernels(att, False, False).launched(fused)
        assert len(mid) == 2 and (mid.kind == 2).all()
        assert mid.bytes().sum() == numel * 5 * 2 + (numel // 72) * 6 * 2
    last = ring_merge_kernels(att, False, True)
    assert len(last) == 3 and last.bytes()[-1] == numel * 3 * 2


# ---------------------------------------------------------------- host (CPU) time per task
def _ew_rows(ops: list[str], numel: int) -> Kernels:
    return Kernels.concat([Kernels.elementwise(o, numel, 2) for o in ops])


def test_eager_task_time_is_max_of_gpu_sum_and_host_sum():
    from flitsim.cost.launch import EXECUTION_MODES
    e = EXECUTION_MODES["eager"]
    g = gpu_preset("h100")
    # host-bound: 3 one-element copies around all-to-alls (op "reshape": 6 host ops and 1 torch.distributed call
    # each); GPU time is 3 x (a few ns + the 2 us gap), host 3 x (10 + 6 x 3.3 + 20) us = 149.4 us
    small = _ew_rows(["reshape"] * 3, 1)
    host = 3 * (e["cpu_dispatch_s"] + 6 * e["cpu_host_op_s"] + 1 * e["cpu_comm_call_s"])
    assert host == pytest.approx(3 * (10e-6 + 6 * 3.3e-6 + 20e-6))
    assert CostModel(g).task_time_s(small)[0] == pytest.approx(host, rel=1e-12)
    # GPU-bound: one 1 GiB-element copy: bytes x (h / L2 + (1 - h) / HBM) + gap, far above its 10 + 19.8 + 20 us host
    big = _ew_rows(["reshape"], 1 << 30)
    nbytes = (1 << 30) * 2 * 2
    h = min(1.0, 0.5 * g.l2_bytes / (g.l2_partitions * nbytes))
    t = nbytes * (h / g.l2_bytes_per_s + (1 - h) / (g.hbm_bytes_per_s * g.memory_efficiency)) + e["launch_gap_s"]
    assert CostModel(g).task_time_s(big)[0] == pytest.approx(t, rel=1e-9)
    # both in one task: max of the sums, not a sum of per-kernel maxima
    both = big + small
    gpu_sum = t + 3 * (elementwise_time_s(1, 1, 1, 2, g) + e["launch_gap_s"])
    assert CostModel(g).task_time_s(both)[0] == pytest.approx(max(gpu_sum, host + e["cpu_dispatch_s"] + 6 * 3.3e-6 + 20e-6))


def test_host_time_counts_ops_that_launch_no_kernel():
    # Same kernels and shapes; "neg" starts diffusers' apply_rotary_emb and carries its 7 view-like ops
    # (cos[None, None], sin[None, None], two .to(device), reshape, unbind, flatten), "add_f32" none
    from flitsim.models.kernels import HOST_OPS
    assert HOST_OPS["neg"] == 7 and "add_f32" not in HOST_OPS
    cm = CostModel("h100")
    a, b = _ew_rows(["neg"] * 10, 1), _ew_rows(["add_f32"] * 10, 1)
    assert cm.host_time_s(a) - cm.host_time_s(b) == pytest.approx(10 * 7 * 3.3e-6)
    assert cm.host_time_s(b) == pytest.approx(10 * 10e-6)
    # a diffusers Linear carries its nn.Module call (+ view + transpose for q / k / v): 3 host ops
    k = step_kernels("flux.1-dev", 4096, layers=19, text_tokens=256)
    n_qkv = int((np.array(OPS)[k.op] == "qkv").sum())
    assert n_qkv == 3 and HOST_OPS["qkv"] == 3


def test_compiled_and_cuda_graph_pay_no_per_op_python_cost():
    k = step_kernels("flux.1-dev", 4096, layers=19, text_tokens=256)
    a2a = _ew_rows(["reshape"] * 2, 1)                 # 6 host ops + 1 all_to_all_single each
    comp, graph = CostModel("h100", execution="compiled"), CostModel("h100", execution="cuda_graph")
    launched = len(comp.kernel_times_s(k)[1])          # after fusion
    assert comp.host_time_s(k) == pytest.approx(launched * 4e-6)    # no views, no module calls
    # the two rows fuse into one launch; their torch.distributed calls stay host calls
    assert comp.host_time_s(a2a) == pytest.approx(1 * 4e-6 + 2 * 20e-6)
    assert graph.host_time_s(k) == 0.0 and graph.host_time_s(a2a) == 0.0
    eager = CostModel("h100")
    assert eager.host_time_s(a2a) == pytest.approx(2 * (10e-6 + 6 * 3.3e-6 + 20e-6))


def test_ring_steps_that_pass_kv_on_carry_the_p2p_host_work():
    from flitsim.models.kernels import host_counts, ring_merge_kernels
    att = step_kernels("flux.1-dev", 4096, layers=19, text_tokens=256).parts("attn")
    assert host_counts(ring_merge_kernels(att, True, False).op) == (16, 1)    # step 0 of N > 1
    assert host_counts(ring_merge_kernels(att, False, False).op) == (16, 1)   # a middle step
    assert host_counts(ring_merge_kernels(att, False, True).op) == (0, 0)     # the last step sends nothing
    assert host_counts(ring_merge_kernels(att, True, True).op) == (0, 0)      # a ring of one


def test_compiled_ring_step_runs_eagerly_at_its_graph_break():
    # torch.compile breaks its graph at ring-flash-attention's batch_isend_irecv, so a ring step that passes
    # K / V on pays eager host rates (10 us per launch, 3.3 us per host op) even under `compiled`;
    # a task without point-to-point rows keeps the compiled rates (4 us, 0)
    comp = CostModel("h100", execution="compiled")
    att = step_kernels("flux.1-dev", 4096, layers=19, text_tokens=256).parts("attn")
    step = att + ring_merge_kernels(att, False, False)   # attention + the (jit-fused) out / LSE merges
    launched = len(comp.kernel_times_s(step)[1])
    n_att = int((att.kind == 1).sum())                  # each attention call: 6 host ops (HOST_OPS)
    assert n_att == 1
    assert comp.host_time_s(step) == pytest.approx(launched * 10e-6 + (16 + 6) * 3.3e-6 + 1 * 20e-6)
    last = att + ring_merge_kernels(att, False, True)
    assert comp.host_time_s(last) == pytest.approx(len(comp.kernel_times_s(last)[1]) * 4e-6)


def test_attention_top_for_an_unreachable_utilization_is_a_config_error():
    from flitsim.cost.attention import attention_top_for_utilization
    from flitsim.errors import ConfigError

    for u in (0.0, 0.9, 3.0):   # 0.9: needs a top above 1 under the mma.sync ceiling; 3.0: beyond the softmax's limit
        with pytest.raises(ConfigError, match="utilization"):
            attention_top_for_utilization(gpu_preset("h100"), u)


@pytest.mark.parametrize("gpu,batch,heads,seq,causal,measured_tflops", [
    # FlashAttention-2 forward, BF16, head dim 128, flash-attention's benchmark (FLOPs 4 b s^2 h d, halved causal):
    ("h20", 2, 16, 2048, 0, 83.7),   # Dao-AILab/flash-attention issue #1310 (H20, "Fav2")
    ("h20", 2, 16, 2048, 1, 65.9),   # same issue, causal
    ("b200", 8, 16, 8192, 0, 361.6),  # meta-pytorch/tritonbench PR #171 (B200, flash_v2, d_head 128)
])
def test_attention_kernel_matches_published_fa2_throughput_on_gpus_it_was_not_fitted_on(gpu, batch, heads, seq,
                                                                                         causal, measured_tflops):
    # Neither GPU has a fitted value: both run H100's attention top through the per-SM-clock model (H20 under
    # the mma.sync ceiling, B200 at it). The old whole-kernel top (35 % of peak) gave at most 52 and 788 TFLOP/s.
    from flitsim.cost.attention import attention_time_s

    g = gpu_preset(gpu)
    t = float(attention_time_s(batch, heads, heads, seq, seq, 0, 128, causal, 2, g, g.peak_bf16_flop_per_s))
    flops = 4 * batch * seq * seq * heads * 128 / (2 if causal else 1)
    assert flops / t / 1e12 == pytest.approx(measured_tflops, rel=0.15)
