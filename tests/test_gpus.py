"""GPU presets (NVIDIA datasheet numbers) and the roofline time model."""

from __future__ import annotations

import pytest

from flitsim import ConfigError
from flitsim.hardware import Efficiency, gpu_preset, roofline_time_s
from flitsim.models import OpCost, decode_cost, slice_cost


@pytest.mark.parametrize("name,bf16_tflops,fp8_tflops,hbm_tBps", [
    ("a100", 312, None, 2.039),   # NVIDIA A100 datasheet
    ("h100", 989, 1979, 3.35),    # NVIDIA H100 datasheet
    ("h200", 989, 1979, 4.8),     # NVIDIA H200 datasheet
    ("b200", 2250, 4500, 8.0),    # NVIDIA DGX B200 datasheet
    ("gb200", 2500, 5000, 8.0),   # NVIDIA GB200 NVL72 datasheet
])
def test_gpu_presets_match_datasheets(name, bf16_tflops, fp8_tflops, hbm_tBps):
    g = gpu_preset(name)
    assert g.peak_flop_per_s("bf16") == bf16_tflops * 1e12
    assert g.hbm_bytes_per_s == pytest.approx(hbm_tBps * 1e12)
    if fp8_tflops is None:
        with pytest.raises(ConfigError, match="dtype = 'fp8'"):
            g.peak_flop_per_s("fp8")
    else:
        assert g.peak_flop_per_s("fp8") == fp8_tflops * 1e12
    assert g.sources


def test_roofline_is_max_of_compute_and_memory_per_part():
    ideal = Efficiency(matmul=1.0, attention=1.0, memory=1.0)
    h100 = gpu_preset("h100")
    compute_bound = OpCost("x", matmul_flops=int(989e12), weight_bytes=1)
    assert roofline_time_s(compute_bound, h100, efficiency=ideal) == pytest.approx(1.0)
    memory_bound = OpCost("y", matmul_flops=1, weight_bytes=int(3.35e12))
    assert roofline_time_s(memory_bound, h100, efficiency=ideal) == pytest.approx(1.0)
    # efficiencies divide the peaks
    eff = Efficiency(matmul=0.5, attention=0.25, memory=0.8)
    both = OpCost("z", matmul_flops=int(989e12), attention_flops=int(989e12))
    assert roofline_time_s(both, "h100", efficiency=eff) == pytest.approx(1 / 0.5 + 1 / 0.25)


def test_llama70b_decode_is_weight_bandwidth_bound():
    # batch 1 decode reads every weight once: about 2 B x 70.6e9 / HBM bandwidth.
    # 141 GB / (3.35 TB/s x 0.8) ~ 52.7 ms on H100 (ideal-ish memory efficiency 0.8 assumed)
    t = roofline_time_s(decode_cost("llama-3-70b", 0), "h100")
    assert t == pytest.approx(2 * 70.6e9 / (3.35e12 * 0.8), rel=0.02)
    # fp8 halves the bytes; same bound
    t8 = roofline_time_s(decode_cost("llama-3-70b", 0, dtype="fp8"), "h100", dtype="fp8")
    assert t8 == pytest.approx(t / 2, rel=0.01)


def test_long_prefill_is_compute_bound():
    # 8192-token prefill of Llama-3-8B on H100: ~2 x 8e9 x 8192 FLOPs of matmul dominate.
    cost = slice_cost("llama-3-8b", 8192)
    t = roofline_time_s(cost, "h100")
    mm = cost.matmul_flops / (989e12 * 0.7)
    attn = cost.attention_flops / (989e12 * 0.5)
    assert t == pytest.approx(mm + attn)


def test_unknown_gpu():
    with pytest.raises(ConfigError, match="gpu = 'v100'"):
        gpu_preset("v100")
    with pytest.raises(ConfigError, match="matmul"):
        Efficiency(matmul=1.5)
