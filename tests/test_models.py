"""Model zoo and per-layer costs against numbers from outside the code:
published parameter counts, the DiT paper's Table 4, and hand-derived formulas."""

from __future__ import annotations

import json

import pytest

from flitsim import ConfigError
from flitsim.models import (
    param_count,
    decode_cost,
    dit_step_cost,
    from_hf_config,
    handoff_bytes,
    kv_cache_bytes,
    layer_costs,
    model_preset,
    patch_cost,
    slice_cost,
)

# Llama-3-70B config.json (meta-llama/Meta-Llama-3-70B): the numbers below are typed
# from the published config, not read from flitsim.
L70, D70, H70, KV70, HD70, F70, V70 = 80, 8192, 64, 8, 128, 28672, 128256


def _llama70_matmul_params() -> int:
    """Weights that multiply every new token: per layer q, o (D x H*hd), k, v
    (D x KV*hd) and SwiGLU (3 x D x F); plus the LM head (D x V). The input
    embedding is a lookup (no multiply) and norms are elementwise."""
    per_layer = 2 * D70 * H70 * HD70 + 2 * D70 * KV70 * HD70 + 3 * D70 * F70
    return L70 * per_layer + D70 * V70


def test_llama3_70b_param_count_is_70_6_billion():
    # Meta model card / Hugging Face listing: 70.6 B parameters.
    assert param_count("llama-3-70b") == pytest.approx(70.6e9, rel=0.01)


@pytest.mark.parametrize("name,published", [
    ("llama-3-8b", 8.03e9),        # Hugging Face listing for meta-llama/Meta-Llama-3-8B
    ("llama-3.1-405b", 405e9),     # Llama 3 Herd paper: 405 B
    ("dit-xl/2", 675e6),           # DiT paper / facebookresearch/DiT README: 675 M
    ("flux.1-dev", 12e9),          # Black Forest Labs model card: "12 billion parameter"
    ("pixart-alpha-xl/2", 0.611e9),  # PixArt-alpha paper Table: 0.6 B (HF listing 611 M)
    ("sd3-medium", 2.0e9),         # Stability AI model card: 2 billion parameters
])
def test_zoo_param_counts_match_published(name, published):
    # 3 %: the model cards round to 2-3 significant figures (SD3 "2 B" is 2.03 B
    # in diffusers; our count keeps the last block's full text stream).
    assert param_count(name) == pytest.approx(published, rel=0.03)


def test_llama70b_prefill_flops_are_2x_params_plus_attention():
    s, c = 512, 1024
    pairs = s * c + s * (s + 1) // 2  # causal: token i of the slice sees c + i keys
    attention = 4 * L70 * H70 * HD70 * pairs  # QK^T and AV, 2 FLOPs per multiply-add each
    expected = 2 * _llama70_matmul_params() * s + attention
    cost = slice_cost("llama-3-70b", s, c)
    assert cost.flops == expected
    assert cost.attention_flops == attention
    # and per token it is "about 2 x parameters" (within 2 % at short context)
    per_token = decode_cost("llama-3-70b", 0).flops
    assert per_token == pytest.approx(2 * 70.6e9, rel=0.02)


def test_causal_attention_grows_with_context_by_the_slice_formula():
    # TeraPipe: equal-length slices later in the sequence cost more.
    s = 256
    costs = [slice_cost("llama-3-8b", s, c, layers=0).attention_flops for c in (0, 256, 512, 768)]
    per_pair = 4 * 4096  # 4 x n_heads x head_dim for Llama-3-8B (32 x 128)
    assert costs == [per_pair * (s * c + s * (s + 1) // 2) for c in (0, 256, 512, 768)]
    assert costs[1] - costs[0] == costs[2] - costs[1] == per_pair * s * 256


def test_decode_kv_bytes_and_cache_size():
    # Llama-3-70B bf16: 80 layers x 2 (K, V) x 8 heads x 128 x 2 B = 327,680 B per token.
    assert kv_cache_bytes("llama-3-70b", 1) == 327_680
    assert kv_cache_bytes("llama-3-70b", 1000, batch=4, dtype="fp8") == 4 * 1000 * 327_680 // 2
    d = decode_cost("llama-3-70b", 4095, batch=2, layers=range(0, 40))
    assert d.kv_read_bytes == 40 * 2 * 4095 * (2 * 8 * 128) * 2
    assert d.kv_write_bytes == 40 * 2 * 1 * (2 * 8 * 128) * 2
    assert d.kv_cache_bytes == 40 * 2 * 4096 * (2 * 8 * 128) * 2


def test_weight_bytes_follow_dtype():
    bf16 = slice_cost("llama-3-8b", 8, layers=range(32))
    fp8 = slice_cost("llama-3-8b", 8, layers=range(32), dtype="fp8")
    per_layer_params = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096
    assert bf16.weight_bytes == 32 * per_layer_params * 2
    assert fp8.weight_bytes == 32 * per_layer_params


def test_handoff_bytes():
    # One stage to the next: s tokens x hidden x 2 B. 512 tokens of Llama-3-70B = 8 MiB.
    assert handoff_bytes("llama-3-70b", 512) == 8 * 2**20
    # PipeFusion (xDiT README): p x hs per patch hop; Flux 1024 px in 4 patches, bf16.
    assert handoff_bytes("flux.1-dev", 1024) == 1024 * 3072 * 2


def test_entries_cover_embedding_head_and_dit_extras():
    llama = layer_costs("llama-3-8b", new_tokens=1)
    assert list(llama.index[[0, -1]]) == ["embed", "head"]
    assert llama.loc["head", "matmul_flops"] == 2 * 4096 * 128256
    dit = layer_costs("dit-xl/2", seq_tokens=256)
    assert {"patch_embed", "cond_embed", "final"} <= set(dit.index)
    assert len(dit) == 28 + 3
    flux = layer_costs("flux.1-dev", seq_tokens=4096)
    assert (flux["block"] == "flux_double").sum() == 19 and (flux["block"] == "flux_single").sum() == 38


@pytest.mark.parametrize("px,gflops", [(256, 118.6), (512, 524.6)])
def test_dit_xl2_gflops_match_paper_table4(px, gflops):
    # Peebles & Xie 2023, Table 4: DiT-XL/2 118.6 Gflops (256 px), 524.6 (512 px),
    # a multiply-add counted once. Tolerance 0.1 %: the paper rounds to 0.1 Gflop
    # (<= 0.04 %) and its counter, like ours, skips elementwise work (norms,
    # softmax, GELU, modulation multiplies: ~0.05 % of the total here).
    tokens = (px // 8 // 2) ** 2
    cost = dit_step_cost("dit-xl/2", tokens)
    assert cost.macs / 1e9 == pytest.approx(gflops, rel=1e-3)


def test_dit_attention_is_full_and_equal_per_patch():
    # PipeFusion: every patch of p tokens attends to all P tokens: p x P pairs,
    # 2 x hidden multiply-adds per pair per block (QK^T and AV), 28 blocks.
    P, M = 4096, 4
    p = P // M
    costs = [patch_cost("dit-xl/2", p, P, layers=range(28)) for _ in range(M)]
    assert all(c == costs[0] for c in costs)
    assert costs[0].attention_flops == 28 * 2 * (2 * 1152) * p * P


def test_joint_model_patches_sum_to_full_step():
    # Flux: text stream charged once per step (on one patch): the four patches'
    # matmul FLOPs add up to the full step's.
    P, T = 4096, 512
    blocks = range(57)
    parts = [patch_cost("flux.1-dev", P // 4, P, layers=blocks, text_query_tokens=T if i == 0 else 0)
             for i in range(4)]
    full = dit_step_cost("flux.1-dev", P, layers=blocks)
    per_sample = (19 * 2 * 6 + 38 * 3) * 3072 * 3072 * 2  # modulation linears, charged per call
    assert sum(c.matmul_flops for c in parts) == full.matmul_flops + 3 * per_sample
    # joint attention: (p + t_i) x (P + T) pairs per block; sum_i (p + t_i) = P + T
    assert sum(c.attention_flops for c in parts) == full.attention_flops == 57 * 4 * 3072 * (P + T) ** 2


def test_from_hf_config_reads_local_llama_and_diffusers_configs(tmp_path):
    llama = {  # meta-llama/Meta-Llama-3-8B config.json (the fields that matter)
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
        "intermediate_size": 14336, "num_attention_heads": 32, "num_hidden_layers": 32,
        "num_key_value_heads": 8, "vocab_size": 128256, "hidden_act": "silu", "tie_word_embeddings": False,
    }
    (tmp_path / "config.json").write_text(json.dumps(llama))
    cfg = from_hf_config(tmp_path, name="my-llama")
    assert param_count(cfg) == pytest.approx(8.03e9, rel=0.005)
    dit = {"_class_name": "DiTTransformer2DModel", "num_attention_heads": 16, "attention_head_dim": 72,
           "in_channels": 4, "out_channels": 8, "num_layers": 28, "patch_size": 2,
           "num_embeds_ada_norm": 1000}  # facebook/DiT-XL-2-256 transformer/config.json
    p = tmp_path / "dit.json"
    p.write_text(json.dumps(dit))
    assert param_count(from_hf_config(p)) == pytest.approx(675e6, rel=0.005)


def test_user_config_from_dict():
    from flitsim.models import ModelConfig

    tiny = ModelConfig.from_dict({"name": "tiny", "kind": "causal", "n_layers": 2, "hidden": 64, "n_heads": 4,
                                  "ffn_hidden": 256, "vocab_size": 1000})
    # per layer: 4 x 64^2 (MHA q,k,v,o) + 3 x 64 x 256 + 2 x 64 norms; embed + head 2 x 64 x 1000; final norm 64
    assert param_count(tiny) == 2 * (4 * 64 * 64 + 3 * 64 * 256 + 128) + 2 * 64 * 1000 + 64


@pytest.mark.parametrize("call,field", [
    (lambda: model_preset("gpt-5"), "model"),
    (lambda: slice_cost("llama-3-8b", -1), "new_tokens"),
    (lambda: slice_cost("llama-3-8b", 4, -3), "context_tokens"),
    (lambda: slice_cost("llama-3-8b", 1.5), "new_tokens"),
    (lambda: slice_cost("llama-3-8b", "8"), "new_tokens"),
    (lambda: slice_cost("llama-3-8b", 8, dtype="int3"), "dtype"),
    (lambda: slice_cost("llama-3-8b", 8, layers=99), "layers"),
    (lambda: slice_cost("dit-xl/2", 8), "model"),
    (lambda: patch_cost("dit-xl/2", 300, 256), "patch_tokens"),
    (lambda: model_preset("dit-xl/2").image_tokens(1000), "height_px"),
    (lambda: from_hf_config("/nonexistent/config.json"), "config_path"),
])
def test_bad_model_input_raises_config_error_naming_field(call, field):
    with pytest.raises(ConfigError, match=field):
        call()


def test_numpy_integers_are_accepted_as_lengths_and_layers():
    import numpy as np

    a = slice_cost("llama-3-8b", np.int64(64), np.int64(128), layers=np.arange(4))
    b = slice_cost("llama-3-8b", 64, 128, layers=range(4))
    assert a == b
