"""Workloads against values from outside the code: the truncated-normal
expectation of llmperf's sampler, the Azure trace's published means, arrival
process moments, DiT token counts (VAE factor 8, patch 2), and a BPE tokenizer trained here."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

from flitsim import ConfigError
from flitsim.cli import cli
from flitsim.workloads import (
    DitWorkload,
    LlmWorkload,
    arrival_times_s,
    chars_per_token,
    convert_tokens_per_s,
    convert_workload,
    dit_workload,
    llmperf_workload,
    load_trace,
    token_length_summary,
    token_lengths,
    tokenizer_ratio,
)


def _phi(z: float) -> float:
    return 0.5 * (1 + math.erf(z / math.sqrt(2)))


def _llmperf_moments(mu: float, sd: float) -> tuple[float, float]:
    """Mean and std of llmperf's draw Y = int(X), X ~ N(mu, sd), redrawn until Y >= 1.

    int() truncates toward zero, so Y >= 1 exactly when X >= 1, and then Y = floor(X):
    P(Y = k) = (Phi((k+1-mu)/sd) - Phi((k-mu)/sd)) / (1 - Phi((1-mu)/sd)), k >= 1.
    (For large sd/mu this is the truncated normal E[X | X >= 1] minus about 1/2.)
    """
    z = 1 - _phi((1 - mu) / sd)
    ks = range(1, int(mu + 12 * sd))
    p = [(_phi((k + 1 - mu) / sd) - _phi((k - mu) / sd)) / z for k in ks]
    m1 = sum(k * pk for k, pk in zip(ks, p))
    m2 = sum(k * k * pk for k, pk in zip(ks, p))
    return m1, math.sqrt(m2 - m1 * m1)


@pytest.mark.parametrize("mu,sd", [(550, 150), (150, 80), (150, 10)])
def test_llmperf_sampler_mean_and_std_within_sampling_error(mu, sd):
    n = 200_000
    w = llmperf_workload(n_requests=n, seed=7, mean_input_tokens=mu, stddev_input_tokens=sd,
                         mean_output_tokens=mu, stddev_output_tokens=sd)
    mean, std = _llmperf_moments(mu, sd)
    # N(150, 80): truncation at 1 moves the mean up by 80 phi(a)/(1-Phi(a)) ~ +5.8, floor moves it
    # down ~0.5: about 155.3, far outside the sampling error of 150.
    if (mu, sd) == (150, 80):
        a = (1 - mu) / sd
        trunc_mean = mu + sd * math.exp(-a * a / 2) / math.sqrt(2 * math.pi) / (1 - _phi(a))
        assert mean == pytest.approx(trunc_mean - 0.5, abs=0.05)
    for col in ("input_tokens", "output_tokens"):
        x = w.requests[col].to_numpy()
        assert x.min() >= 1
        se_mean = std / math.sqrt(n)
        assert abs(x.mean() - mean) < 4 * se_mean
        assert abs(x.std(ddof=1) - std) < 4 * std / math.sqrt(2 * n) * 1.5  # 1.5: mildly non-normal tails


def test_llmperf_is_seeded_and_closed_loop_by_default():
    a = llmperf_workload(n_requests=100, seed=3, concurrency=8)
    b = llmperf_workload(n_requests=100, seed=3, concurrency=8)
    assert a.requests.equals(b.requests)
    assert a.is_closed_loop and a.concurrency == 8 and a.requests["arrival_s"].isna().all()
    assert a.tokenizer == "llama-2"  # llmperf counts with the Llama-2 tokenizer


@pytest.mark.parametrize("process,cv", [("poisson", 1.0), ("gamma", 0.5), ("gamma", 3.0)])
def test_open_loop_arrivals_have_the_requested_rate_and_cv(process, cv):
    n, rate = 200_000, 5.0
    t = arrival_times_s(np.random.default_rng(1), n, rate, cv, process)
    gaps = np.diff(np.concatenate([[0.0], t]))
    # Gamma(k = 1/cv^2): mean 1/rate, std cv/rate; the mean's standard error is cv/(rate sqrt n)
    assert abs(gaps.mean() - 1 / rate) < 4 * cv / rate / math.sqrt(n)
    assert gaps.std() * rate == pytest.approx(cv, rel=0.03)


def test_open_loop_workload():
    w = llmperf_workload(n_requests=1000, arrival="poisson", rate_per_s=10, seed=1)
    assert not w.is_closed_loop and np.all(np.diff(w.requests["arrival_s"]) >= 0)


def test_azure_trace_matches_published_means():
    # Azure LLM inference trace 2023 (python/flitsim/data/README.md): 19,366 requests,
    # mean 1,155 context and 211 generated tokens.
    w = load_trace("azure-conv-2023")
    assert len(w) == 19_366
    assert round(w.requests["input_tokens"].mean()) == 1155
    assert round(w.requests["output_tokens"].mean()) == 211
    assert w.requests["arrival_s"].iloc[0] == 0.0 and w.requests["arrival_s"].is_monotonic_increasing


def test_trace_replay_with_column_mapping(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("t_ms,prompt,completion\n1500,10,3\n500,20,4\n")
    w = load_trace(p, {"timestamp": "t_ms", "input_tokens": "prompt", "output_tokens": "completion"},
                   time_unit="ms", tokenizer="llama-3")
    assert w.requests["arrival_s"].tolist() == [0.0, 1.0]  # sorted by time, relative to the first
    assert w.requests["input_tokens"].tolist() == [20, 10]
    assert w.tokenizer == "llama-3"


def test_cli_workload_json_shows_both_distributions():
    r = CliRunner().invoke(cli, ["workload", "--n", "2000", "--json"])
    assert r.exit_code == 0, r.output
    rows = {(x["workload"], x["field"]): x for x in json.loads(r.output)}
    assert round(rows[("azure-conv-2023", "input_tokens")]["mean"]) == 1155
    assert rows[("llmperf", "input_tokens")]["mean"] == pytest.approx(549.5, abs=4 * 150 / math.sqrt(2000))


# --- tokenizers -------------------------------------------------------------------
CORPUS = [
    "the quick brown fox jumps over the lazy dog",
    "pack my box with five dozen liquor jugs",
    "how vexingly quick daft zebras jump",
    "the five boxing wizards jump quickly",
    "sphinx of black quartz judge my vow",
] * 20


def _bpe(vocab_size: int):
    from tokenizers import Tokenizer, models, trainers

    tok = Tokenizer(models.BPE())
    tok.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[],
                                                        show_progress=False))
    return tok


def test_char_level_tokenizer_counts_characters(tmp_path):
    # A BPE with no merges (vocab = the alphabet) is one token per character: lengths = len(text).
    chars = _bpe(1)
    path = tmp_path / "tokenizer.json"
    chars.save(str(path))
    assert token_lengths(CORPUS, path).tolist() == [len(t) for t in CORPUS]
    assert chars_per_token(CORPUS, str(path)) == 1.0


def test_converting_between_tokenizers_preserves_text():
    chars, merged = _bpe(1), _bpe(120)
    n_merged = sum(len(merged.encode(t, add_special_tokens=False).ids) for t in CORPUS)
    n_chars = sum(len(t) for t in CORPUS)
    cpt_merged = n_chars / n_merged
    assert cpt_merged > 1.5  # merges pack several characters per token
    ratio = tokenizer_ratio(CORPUS, chars, merged, from_name="chars", to_name="bpe120")
    assert ratio.tokens_factor == pytest.approx(1 / cpt_merged)
    # 1000 characters/s is 1000 char-tokens/s, and 1000 / cpt BPE tokens/s
    assert convert_tokens_per_s(1000.0, ratio) == pytest.approx(1000 / cpt_merged)
    wl = LlmWorkload(llmperf_workload(n_requests=3, seed=0).requests, "chars")
    conv = convert_workload(wl, ratio)
    assert conv.tokenizer == "bpe120"
    assert conv.requests["input_tokens"].tolist() == [max(1, round(x / cpt_merged))
                                                      for x in wl.requests["input_tokens"]]
    summary = token_length_summary(CORPUS, {"chars": chars, "bpe120": merged})
    assert summary.loc["chars", "mean"] == pytest.approx(np.mean([len(t) for t in CORPUS]))
    with pytest.raises(ConfigError, match="workload.tokenizer"):
        convert_workload(llmperf_workload(n_requests=3), ratio)  # counted by llama-2, not 'chars'


# --- DiT workloads ----------------------------------------------------------------
@pytest.mark.parametrize("model", ["dit-xl/2", "pixart-alpha-xl/2", "sd3-medium", "flux.1-dev"])
@pytest.mark.parametrize("px,tokens", [(1024, 4096), (2048, 16384), (4096, 65536)])
def test_image_tokens_per_resolution(model, px, tokens):
    # Arithmetic: VAE factor 8, patch 2 (Flux: 2x2 packing): 1024 -> 4096, 2048 -> 16384, 4096 -> 65536
    assert dit_workload(model, px).image_tokens == tokens


def test_dit_text_tokens_and_cfg():
    # DiT paper: 256 px -> 32x32 latent -> 256 tokens at patch 2; class-conditional, no text
    dit = dit_workload("dit-xl/2", 256, batch=4)
    assert (dit.image_tokens, dit.text_tokens_, dit.step_batch) == (256, 0, 8)  # CFG doubles the batch
    flux = dit_workload("flux.1-dev", 1024)
    assert (flux.image_tokens, flux.text_tokens_, flux.joint_tokens) == (4096, 512, 4608)
    assert flux.step_batch == 1  # guidance-distilled: no CFG doubling by default
    sd3 = dit_workload("sd3-medium", (1024, 768), cfg=True)
    assert sd3.image_tokens == 64 * 48 and sd3.text_tokens_ == 77 + 256 and sd3.step_batch == 2
    assert dit_workload("pixart-alpha-xl/2", 512).text_tokens_ == 120


@pytest.mark.parametrize("call,field", [
    (lambda: dit_workload("sd3-medium", 1000), "height_px = 1000"),
    (lambda: dit_workload("sd3-medium", (1024, 1032)), "width_px = 1032"),
    (lambda: dit_workload("stable-cascade", 1024), "model = 'stable-cascade'"),
    (lambda: dit_workload("llama-3-8b", 1024), "model = 'llama-3-8b'"),
    (lambda: DitWorkload(model="dit-xl/2", height_px="big"), "height_px = 'big'"),
    (lambda: dit_workload("dit-xl/2", 256, steps=0), "steps = 0"),
    (lambda: llmperf_workload(mean_input_tokens=-5), "mean_input_tokens = -5"),
    (lambda: llmperf_workload(n_requests="many"), "n_requests = 'many'"),
    (lambda: llmperf_workload(arrival="gamma"), "rate_per_s = None"),
    (lambda: load_trace("no-such-trace"), "trace = 'no-such-trace'"),
    (lambda: token_lengths(["x"], "/nonexistent/tokenizer.json"), "tokenizer = '/nonexistent/tokenizer.json'"),
    (lambda: token_lengths(["x"], 42), "tokenizer = 42"),
    (lambda: token_lengths("just one string", _bpe(1)), "corpus"),
])
def test_bad_workload_input_raises_config_error_naming_field(call, field):
    with pytest.raises(ConfigError, match=field.replace("(", r"\(").replace(".", r"\.")):
        call()


def test_negative_lengths_in_a_trace_are_rejected(tmp_path):
    p = tmp_path / "bad.csv"
    p.write_text("timestamp,input_tokens,output_tokens\n0,10,-3\n")
    with pytest.raises(ConfigError, match=r"output_tokens \(row 0, column .output_tokens.\) = .-3."):
        load_trace(p)
