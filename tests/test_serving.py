"""Serving engine (flitsim.serving): hand-computed schedules, Little's law,
continuous vs static batching, K/V blocks and preemption, disaggregated K/V
transfers on the fabric, metric definitions, bad input.

Expected values come from hand-worked schedules under a closed-form
iteration cost (t = fixed + per_token x tokens), from closed forms (K/V
bytes = layers x 2 x kv_heads x head_dim x tokens x dtype bytes; Little's
law) or from the fabric itself (flitsim.transfers), never from the engine.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import flitsim
from flitsim.serving import (AffineIterationCost, CommModel, KvTransfer, Layout, RequestTable, kv_capacity,
                             kv_transfer_bytes, parse_rates, request_table, run_instance, serve)
from flitsim.serving.metrics import goodput_rps, per_request
from flitsim.workloads import llmperf_workload

MS = 1e-3
COST = AffineIterationCost(fixed_s=1 * MS, per_token_s=0.01 * MS)  # 1 ms + 10 us per token


def _table(arr, inp, out):
    return RequestTable(np.array(arr, float), np.array(inp, np.int64), np.array(out, np.int64))


# Request A: 10 in / 4 out at t = 0; B: 100 in / 2 out at t = 1.5 ms; budget 50 tokens.
AB = _table([0.0, 1.5 * MS], [10, 100], [4, 2])
# Hand-worked schedules (docstring of each policy in flitsim.serving.scheduler); times in ms.
HAND = {
    # chunked: A prefill (1.1) | A dec (1.01) | A dec + B 49 (1.5) | A dec + B 49 (1.5) | B 2 (1.02) | B dec (1.01)
    "chunked": {"first": [1.1, 6.13], "finish": [5.11, 7.14]},
    # continuous: A prefill | A dec | B's 100-token prompt alone (2.0) | A+B dec (1.02) | A dec (1.01)
    "continuous": {"first": [1.1, 4.11], "finish": [6.14, 5.13]},
    # static: batch [A]: prefill + 3 decodes (to 4.13); then batch [B]: prefill (2.0) + 1 decode
    "static": {"first": [1.1, 6.13], "finish": [4.13, 7.14]},
}


@pytest.mark.parametrize("policy", sorted(HAND))
def test_hand_computed_ttft_tpot(policy):
    r = run_instance(AB, COST, policy=policy, kv_blocks=1000, max_num_batched_tokens=50)
    h = HAND[policy]
    np.testing.assert_allclose(r.first_token_s, np.array(h["first"]) * MS, rtol=1e-9)
    np.testing.assert_allclose(r.finish_s, np.array(h["finish"]) * MS, rtol=1e-9)
    m = per_request(r.arrival_s, r.first_token_s, r.finish_s, r.output_tokens)
    ttft = np.array(h["first"]) * MS - AB.arrival_s
    e2e = np.array(h["finish"]) * MS - AB.arrival_s
    np.testing.assert_allclose(m["ttft_s"], ttft, rtol=1e-9)
    np.testing.assert_allclose(m["tpot_s"], (e2e - ttft) / (AB.output_tokens - 1), rtol=1e-9)  # vLLM TPOT
    np.testing.assert_allclose(m["llmperf_itl_s"], e2e / AB.output_tokens, rtol=1e-9)  # LLMPerf: TTFT included
    # pooled ITL (vLLM): every gap; A has 3 gaps, B 1; their sum is the decode spans
    assert r.gaps.n == 4
    assert r.gaps.sum_s == pytest.approx(float(((e2e - ttft)).sum()), rel=1e-9)


def test_chunked_prefill_splits_a_prompt_by_the_budget():
    # one 100-token prompt, budget 64: chunks 64 + 36 -> TTFT = (1 + 0.64) + (1 + 0.36) ms
    r = run_instance(_table([0.0], [100], [3]), COST, policy="chunked", kv_blocks=100, max_num_batched_tokens=64)
    assert r.first_token_s[0] == pytest.approx(3.0 * MS, rel=1e-12)
    assert r.tokens_prefilled == 100


def _poisson(n=400, rate=30.0, seed=1, mean_in=200, mean_out=60):
    wl = llmperf_workload(n_requests=n, mean_input_tokens=mean_in, stddev_input_tokens=60, mean_output_tokens=mean_out,
                          stddev_output_tokens=30, seed=seed)
    return request_table(wl, rate=rate, seed=seed)


@pytest.mark.parametrize("policy", ["continuous", "chunked"])
def test_littles_law(policy):
    t = _poisson()
    r = run_instance(t, COST, policy=policy, kv_blocks=4000, max_num_batched_tokens=512)
    sojourn = r.finish_s - r.arrival_s
    # time-average number in system (engine's own integral) = arrival rate x mean sojourn
    T = r.makespan_s
    L = r.in_system_s / T
    lam = len(t) / T
    assert L == pytest.approx(lam * sojourn.mean(), rel=1e-9)


def test_continuous_never_worse_than_static_at_equal_memory():
    cost = AffineIterationCost(fixed_s=10 * MS, per_token_s=0.05 * MS)  # decode-heavy, batching pays
    for rate in (5.0, 20.0, 60.0):
        t = _poisson(n=300, rate=rate, seed=3)
        res = {p: run_instance(t, cost, policy=p, kv_blocks=1500, max_num_batched_tokens=2048)
               for p in ("static", "continuous", "chunked")}
        e2e = {p: float((r.finish_s - r.arrival_s).mean()) for p, r in res.items()}
        thr = {p: len(t) / r.makespan_s for p, r in res.items()}
        for p in ("continuous", "chunked"):
            assert e2e[p] <= e2e["static"] * (1 + 1e-9), (rate, e2e)
            assert thr[p] >= thr["static"] * (1 - 1e-9), (rate, thr)


def test_kv_blocks_never_exceed_capacity_and_preemption_exactly_when_needed():
    # two requests of 8 in / 10 out, 4-token blocks: demand per iteration is
    # 2 x ceil((kv + 1) / 4); with 6 blocks the 5th decode (kv 12 -> 13) needs 8
    t = _table([0.0, 0.0], [8, 8], [10, 10])
    free = run_instance(t, COST, policy="continuous", kv_blocks=1000, block_tokens=4, log_iterations=True)
    tight = run_instance(t, COST, policy="continuous", kv_blocks=6, block_tokens=4, log_iterations=True)
    demand = [row[4] for row in free.log]
    first_over = next(i for i, d in enumerate(demand) if d > 6)
    assert first_over == 5  # hand count: iteration 0 prefill (4 blocks), decodes kv 9..12 fit in 6
    pre = [row[5] for row in tight.log]
    assert pre.index(next(p for p in pre if p > 0)) == first_over
    assert all(p == 0 for p in pre[:first_over])
    assert max(row[4] for row in tight.log) <= 6 and tight.kv_peak_blocks <= 6
    assert tight.preemptions_total >= 1 and tight.preemptions.sum() >= 1
    # recompute: the preempted request prefills its prompt + generated tokens again
    assert tight.tokens_prefilled > free.tokens_prefilled
    assert np.all(np.isfinite(tight.finish_s))


def test_kv_capacity_from_memory_model():
    from flitsim.models.zoo import model_preset
    cfg = model_preset("llama-3-70b")
    cap = kv_capacity(cfg, "h100", tp=8, dtype="bf16", token_budget=2048)
    per_tok_dev = 80 * 2 * 8 * 128 * 2 / 8  # layers x 2 x kv_heads x head_dim x bytes / tp
    assert cap.block_bytes_per_device == per_tok_dev * 16
    free = 80e9 * 0.9 - cap.weights_bytes - cap.activations_bytes - cap.workspace_bytes
    assert cap.blocks == int(free // (per_tok_dev * 16))
    with pytest.raises(flitsim.ConfigError, match="memory_utilization"):
        kv_capacity(cfg, "h100", tp=1, dtype="bf16")  # 141 GB of weights on an 80 GB GPU


def test_kv_transfer_bytes_closed_form():
    from flitsim.models.zoo import model_preset
    cfg = model_preset("llama-3-70b")
    # 80 layers x 2 x 8 KV heads x 128 x 2 bytes = 320 KiB per token (bf16)
    assert kv_transfer_bytes(cfg, 1000, "bf16") == 80 * 2 * 8 * 128 * 1000 * 2 == 1000 * 320 * 1024


def test_disaggregated_transfer_time_is_the_fabrics():
    from flitsim.models.zoo import model_preset
    cfg = model_preset("llama-3-8b")
    kvt = KvTransfer("hgx-h100", cfg, "bf16", [0, 1], [4, 5], fidelity="packet", contention=False)
    tokens = 256  # a grid point: exact
    src, dst, nb = kvt.pairs(tokens)
    total = 32 * 2 * 8 * 128 * tokens * 2
    assert sum(nb) == total and src == [0, 1] and dst == [4, 5]
    ref = flitsim.transfers("hgx-h100", src, dst, nb, fidelity="packet")
    assert kvt.time_s(tokens) == pytest.approx(ref.makespan_ps * 1e-12, rel=1e-12)
    # the fabric carried exactly the K/V bytes out of the prefill GPUs (link statistics)
    sent = ref.links[ref.links.gpu.isin(src)].payload_bytes.sum()
    assert sent == total
    # bandwidth bound: no faster than the senders' links at their payload rate
    fab = flitsim.hardware.fabric.fabric_preset("hgx-h100")
    per_gpu_Bps = fab.links[0].payload_GBps() * 1e9 * fab.gpu_ports
    assert kvt.time_s(tokens) >= (total / 2) / per_gpu_Bps
    # contention with the instances' TP all-reduces can only slow it down
    busy = KvTransfer("hgx-h100", cfg, "bf16", [0, 1], [4, 5], fidelity="flow", contention=True,
                      prefill_tp_bytes=8 << 20, decode_tp_bytes=8 << 20)
    alone = KvTransfer("hgx-h100", cfg, "bf16", [0, 1], [4, 5], fidelity="flow", contention=False)
    assert busy.time_s(tokens) >= alone.time_s(tokens) * (1 - 1e-9)


def test_disaggregated_serve_reports_transfer_share():
    wl = llmperf_workload(n_requests=40, mean_input_tokens=300, stddev_input_tokens=50, mean_output_tokens=20,
                          stddev_output_tokens=5, seed=2)
    r = serve("llama-3-8b", wl, fabric="hgx-h100", rate=4.0, dtype="bf16",
              disaggregated={"prefill": {"tp": 2}, "decode": {"tp": 2}}, kv_fidelity="flow", contention=False)
    s = r.summary()
    m = r.per_request()
    assert np.all(m["ttft_s"] >= r.transfer_s)  # TTFT counts the transfer
    assert 0 < s["mean_kv_transfer_share_of_ttft"] < 1
    assert r.config["disaggregated"]


def test_comm_grid_within_bound_of_exact():
    grid = CommModel("hgx-h100", list(range(4)), fidelity="flow", grid=True)
    exact = CommModel("hgx-h100", list(range(4)), fidelity="flow", grid=False)
    for nbytes in (3 * 8192 * 2, 77 * 8192 * 2, 1000 * 8192 * 2, 3001 * 8192 * 2):
        assert grid.time_s("all_reduce", nbytes) == pytest.approx(exact.time_s("all_reduce", nbytes), rel=0.03)


def test_model_cost_serves_and_counts_on_fabric():
    wl = llmperf_workload(n_requests=60, mean_input_tokens=550, stddev_input_tokens=150, mean_output_tokens=30,
                          stddev_output_tokens=10, seed=0)
    r = serve("llama-3-8b", wl, fabric="hgx-h100", layout={"tp": 2, "replicas": 2}, rate=8.0)
    s = r.summary()
    assert s["requests"] == 60 and s["mean_ttft_s"] > 0 and s["mean_tpot_s"] > 0
    assert set(np.unique(r.instance)) == {0, 1}
    ideal = serve("llama-3-8b", wl, fabric="hgx-h100", layout={"tp": 2, "replicas": 2}, rate=8.0, network="ideal")
    assert ideal.summary()["mean_tpot_s"] < s["mean_tpot_s"]  # the TP all-reduces cost time on the fabric
    df = r.metrics()
    for d in ("vllm", "llmperf", "genai-perf", "mlperf"):
        assert d in df.index.get_level_values(0)


def test_goodput_counts_requests_meeting_every_slo():
    ttft = np.array([0.1, 0.5, 0.2])
    tpot = np.array([0.01, 0.01, np.nan])
    e2e = np.array([1.0, 1.0, 0.2])
    assert goodput_rps(ttft, tpot, e2e, 2.0, slo_ttft_s=0.3, slo_tpot_s=0.02) == pytest.approx(1.0)


def test_bad_input():
    wl = llmperf_workload(n_requests=10, seed=0)
    for rate in (0, -1.0, float("nan")):
        with pytest.raises(flitsim.ConfigError, match="rate"):
            request_table(wl, rate=rate)
    with pytest.raises(flitsim.ConfigError, match="rate"):
        parse_rates("0:64")
    assert parse_rates("1:64") == [1, 2, 4, 8, 16, 32, 64]
    with pytest.raises(flitsim.ConfigError, match="columns"):
        serve("llama-3-8b", "azure-conv-2023", columns={"input_tokens": "NoSuchColumn"}, n=5)
    # the request count is named, not blamed on the trace (a fresh user's report)
    for n in (-1, 0, 1.5, "10", True):
        with pytest.raises(flitsim.ConfigError, match=r"^n = "):
            serve("llama-3-8b", "azure-conv-2023", n=n)
        with pytest.raises(flitsim.ConfigError, match=r"^limit = "):
            flitsim.workloads.load_trace("azure-conv-2023", limit=n)
    with pytest.raises(flitsim.ConfigError, match="kv_blocks"):
        run_instance(_table([0.0], [100], [10]), COST, kv_blocks=2)  # 109 tokens need 7 blocks of 16
    with pytest.raises(flitsim.ConfigError, match="layout"):
        serve("llama-3-8b", wl, fabric="hgx-h100", layout={"tp": 8, "replicas": 2}, rate=1.0)
    with pytest.raises(flitsim.ConfigError, match="policy"):
        run_instance(_table([0.0], [10], [2]), COST, kv_blocks=10, policy="fifo")


def test_refused_up_front_when_a_request_can_never_fit_and_it_pickles():
    # the small request fits; the big one (1000 + 10 tokens) never does: refused before the run
    # (was a StalledError partway, after every attempt ended in preemption)
    t = _table([0.0, 0.0], [10, 1000], [2, 10])
    for policy in ("static", "continuous", "chunked"):
        with pytest.raises(flitsim.ConfigError, match="kv_blocks") as e:
            run_instance(t, COST, policy=policy, kv_blocks=10, max_num_batched_tokens=2048)
        assert "request 1" in str(e.value) and "at least 64 blocks" in str(e.value)  # ceil(1009 / 16)
        again = pickle.loads(pickle.dumps(e.value))
        assert isinstance(again, flitsim.ConfigError) and str(again) == str(e.value)


STUDY = """
[serve]
model = "llama-3-8b"
n = 20
slo_ttft_s = 1.0
slo_tpot_s = 0.05
policies = ["static", "chunked"]

[[fabric]]
name = "hgx-h100"
rates = "4"
layouts = [{ tp = 2 }]

[[workload]]
name = "llmperf"
llmperf = { mean_input_tokens = 550, stddev_input_tokens = 150, mean_output_tokens = 150, stddev_output_tokens = 10 }

[[workload]]
name = "llmperf in llama-3 tokens"
llmperf = { mean_input_tokens = 550, stddev_input_tokens = 150, mean_output_tokens = 150, stddev_output_tokens = 10 }
recount = "llama-3"
"""


def test_study_and_cli(tmp_path):
    from click.testing import CliRunner

    from flitsim.cli import cli
    from flitsim.serving.study import best_at_slo, read_study, run_study

    f = tmp_path / "s.toml"
    f.write_text(STUDY)
    df = run_study(read_study(str(f)))
    assert len(df) == 4 and set(df.policy) == {"static", "chunked"}
    # the recount restates Llama-2 counts in Llama-3 tokens: x 3.2 / 4.0 chars per token
    a = df[df.workload == "llmperf"].iloc[0]
    b = df[df.workload == "llmperf in llama-3 tokens"].iloc[0]
    assert b.tokenizer == "llama-3" and a.tokenizer == "llama-2"
    best = best_at_slo(df)
    assert set(best.workload) == {"llmperf", "llmperf in llama-3 tokens"}
    out = CliRunner().invoke(cli, ["serve", str(f), "--json"])
    assert out.exit_code == 0, out.output
    bad = CliRunner().invoke(cli, ["serve", "--model", "llama-3-8b", "--rate", "0:4", "--n", "5"])
    assert bad.exit_code != 0 and "rate" in bad.output


def test_recount_factor():
    from flitsim.serving.study import TOKENIZER_CHARS_PER_TOKEN as C
    from flitsim.serving.study import _workload

    _, wl, tok = _workload({"name": "x", "llmperf": {"mean_input_tokens": 550, "stddev_input_tokens": 0,
                                                      "mean_output_tokens": 150, "stddev_output_tokens": 0},
                            "recount": "llama-3"}, 5)
    assert tok == "llama-3"
    assert (wl.requests.input_tokens == round(550 * C["llama-2"] / C["llama-3"])).all()  # 440
    assert (wl.requests.output_tokens == 120).all()


def test_memory_bounded_by_requests_in_flight():
    # no per-token or per-iteration storage unless asked: the gap histogram has a fixed size
    t = _poisson(n=300, rate=50.0)
    r = run_instance(t, COST, policy="chunked", kv_blocks=4000)
    assert r.log is None
    assert len(r.gaps.counts) == 100 * 13 + 2 and r.gaps.n == int((t.output_tokens - 1).sum())


@pytest.mark.parametrize("policy", ["static", "continuous", "chunked"])
def test_blocks_within_capacity_under_pressure(policy):
    # a tight cache under Poisson load: every iteration's blocks in use stay within capacity,
    # every request finishes, and preemption (recompute) is what makes room
    t = _poisson(n=120, rate=200.0, seed=5, mean_in=120, mean_out=40)
    cap = 60  # 960 tokens: a handful of requests at a time
    r = run_instance(t, COST, policy=policy, kv_blocks=cap, block_tokens=16, log_iterations=True)
    assert max(row[4] for row in r.log) <= cap
    assert np.all(np.isfinite(r.finish_s)) and np.all(r.finish_s >= r.first_token_s)
    if policy == "static":
        assert r.preemptions_total == 0  # full reservation at admission


# ---- pipeline stages with micro-batches in flight (TensorRT-LLM PP in-flight batching) ----

def test_pipeline_micro_batches_hand_schedule():
    # two 1-in / 3-out requests at t = 0, one per micro-batch (max_num_seqs 1), cost 1 ms per iteration
    # split into 2 stages of 0.5 ms with a 0.1 ms hand-off. Hand-worked stage timeline (ms):
    #   A it1: s0 [0, .5] s1 [.6, 1.1]  | B it1: s0 [.5, 1.0] s1 [1.1, 1.6]
    #   A it2: s0 [1.1, 1.6] s1 [1.7, 2.2] | B it2: s0 [1.6, 2.1] s1 [2.2, 2.7]  ... period 1.1 per micro-batch
    cost = AffineIterationCost(fixed_s=1 * MS, per_token_s=0.0, pp=2, hop_s=0.1 * MS)
    t = _table([0.0, 0.0], [1, 1], [3, 3])
    r = run_instance(t, cost, policy="chunked", kv_blocks=100, max_num_seqs=1)
    np.testing.assert_allclose(r.first_token_s, np.array([1.1, 1.6]) * MS, rtol=1e-12)
    np.testing.assert_allclose(r.finish_s, np.array([3.3, 3.8]) * MS, rtol=1e-12)
    # one batch at a time: each iteration is 2 stages + 1 hop = 1.1 ms and B waits for A
    one = run_instance(t, cost, policy="chunked", kv_blocks=100, max_num_seqs=1, micro_batches=1)
    np.testing.assert_allclose(one.first_token_s, np.array([1.1, 4.4]) * MS, rtol=1e-12)
    np.testing.assert_allclose(one.finish_s, np.array([3.3, 6.6]) * MS, rtol=1e-12)
    # in-system time with several micro-batches is the sum of sojourns (no separate integral)
    assert r.in_system_s == pytest.approx(float((r.finish_s - r.arrival_s).sum()), rel=1e-12)


def test_pipeline_micro_batches_share_the_kv_blocks():
    # micro-batches draw on one pool: with room for one request's K/V (8 in + 10 out -> 17 tokens, 5 blocks
    # of 4; 6 blocks), the second micro-batch waits for the first request to finish instead of preempting
    cost = AffineIterationCost(fixed_s=1 * MS, per_token_s=0.0, pp=2)
    t = _table([0.0, 0.0], [8, 8], [10, 10])
    r = run_instance(t, cost, policy="static", kv_blocks=6, block_tokens=4, log_iterations=True)
    assert max(row[4] for row in r.log) <= 6
    assert r.finish_s[1] > r.finish_s[0] and r.first_token_s[1] >= r.finish_s[0]
    with pytest.raises(flitsim.ConfigError, match="micro_batches"):
        run_instance(t, cost, kv_blocks=60, micro_batches=0)


def test_saturated_throughput_hand_count():
    # 4 requests 1 in / 3 out, 2 at a time, 1 ms iterations: it1-3 serve A, B (6 tokens);
    # it4 admits C, D and empties the queue: saturated until 4 ms with 8 tokens
    t = _table([0.0] * 4, [1] * 4, [3] * 4)
    cost = AffineIterationCost(fixed_s=1 * MS, per_token_s=0.0)
    r = run_instance(t, cost, policy="chunked", kv_blocks=100, max_num_seqs=2)
    assert r.saturated_s == pytest.approx(4 * MS, rel=1e-12) and r.saturated_tokens == 8
    assert r.makespan_s == pytest.approx(6 * MS, rel=1e-12)


def test_stage_cost_splits_layers_and_hops_on_the_fabric():
    from flitsim.serving import ModelIterationCost

    c = ModelIterationCost("llama-3-8b", "h100", pp=2, network="hgx-h100", fidelity="flow", max_tokens=256)
    chunks, n_dec, ctx = [(128, 0)], 64, 64 * 300
    stage, hop = c.stage_s(chunks, n_dec, ctx, 65)
    full = c.time_s(chunks, n_dec, ctx, 65)
    assert full == pytest.approx(2 * stage + hop, rel=1e-12)
    # the hand-off is the fabric's sendrecv of T x hidden x 2 bytes (T = 192 tokens)
    ref = CommModel("hgx-h100", [0, 1], fidelity="flow").time_s("sendrecv", 192 * 4096 * 2)
    assert hop == pytest.approx(ref, rel=1e-12) and hop > 0
    solo = ModelIterationCost("llama-3-8b", "h100", pp=1, network="hgx-h100", fidelity="flow", max_tokens=256)
    assert stage == pytest.approx(solo.time_s(chunks, n_dec, ctx, 65) / 2, rel=1e-9)


def test_comm_packet_anchor_scales_flow_by_the_anchor_ratio(monkeypatch):
    # the arithmetic of the anchor (the bound itself is measured: COMM_PACKET_ANCHOR_BYTES docstring):
    # a fake collective whose flow level warns above 1 MiB and whose packet level is 1.1 x the flow level
    import warnings
    from types import SimpleNamespace

    import flitsim.collectives as C
    from flitsim.errors import FidelityWarning
    from flitsim.serving import iteration_cost as ic

    calls = []

    def fake(fabric, op, nbytes, group, dtype="half", fidelity="auto"):
        calls.append((fidelity, nbytes))
        if fidelity == "flow" and nbytes > (1 << 20):
            warnings.warn("outside validation", FidelityWarning)
        t = 10.0 + nbytes / 1e5
        return SimpleNamespace(time_us=t * (1.1 if fidelity in ("packet", "auto") and nbytes > (1 << 20) or
                                            fidelity == "packet" else 1.0))

    monkeypatch.setattr(C, "collective", fake)
    monkeypatch.setattr(ic, "_MEMO", {})
    cm = CommModel("hgx-h100", list(range(8)), fidelity="auto", grid=False)
    big = 8 << 20
    t = cm.time_s("all_reduce", big)
    assert t == pytest.approx((10.0 + big / 1e5) * 1.1 * 1e-6, rel=1e-12)  # flow x packet/flow at the anchor
    assert calls.count(("packet", 1 << 20)) == 1 and not any(f == "packet" and n == big for f, n in calls)
    cm.time_s("all_reduce", 16 << 20)
    assert calls.count(("packet", 1 << 20)) == 1  # one packet-level run per op
    small = cm.time_s("all_reduce", 1 << 19)  # below the anchor: the fidelity asked for (auto)
    assert ("auto", 1 << 19) in calls and small == pytest.approx((10.0 + (1 << 19) / 1e5) * 1e-6, rel=1e-12)


def test_chunked_pipeline_prefill_hand_schedule():
    # one 1000-token prompt, 2 out, budget 250 (4 chunks), 2 stages of 0.5 ms, 2 micro-batches.
    # Without pipelining each chunk leaves the last stage before the next enters: TTFT = 4 x 1 ms;
    # with it chunk j + 1 follows chunk j one stage behind: TTFT = (4 + 2 - 1) x 0.5 ms; the decode
    # then takes both stages (1 ms).
    cost = AffineIterationCost(fixed_s=1 * MS, per_token_s=0.0, pp=2)
    t = _table([0.0], [1000], [2])
    kw = dict(policy="chunked", kv_blocks=200, max_num_batched_tokens=250)
    plain = run_instance(t, cost, **kw)
    piped = run_instance(t, cost, pipeline_prefill=True, **kw)
    assert plain.first_token_s[0] == pytest.approx(4.0 * MS, rel=1e-12)
    assert plain.finish_s[0] == pytest.approx(5.0 * MS, rel=1e-12)
    assert piped.first_token_s[0] == pytest.approx(2.5 * MS, rel=1e-12)
    assert piped.finish_s[0] == pytest.approx(3.5 * MS, rel=1e-12)
    assert piped.tokens_prefilled == 1000
    with pytest.raises(flitsim.ConfigError, match="pipeline_prefill"):
        run_instance(t, cost, policy="continuous", kv_blocks=200, pipeline_prefill=True)
    with pytest.raises(flitsim.ConfigError, match="pipeline_prefill"):
        run_instance(t, AffineIterationCost(), policy="chunked", kv_blocks=200, pipeline_prefill=True)


def test_reserved_kv_admission_never_preempts():
    # two 8-in / 10-out requests, 6 blocks of 4 tokens: greedy admission runs both and preempts at the
    # 5th decode (test above); reserving 17 tokens (5 blocks) each admits one at a time: B's first
    # token comes after A's last, and nothing is preempted
    t = _table([0.0, 0.0], [8, 8], [10, 10])
    for policy in ("continuous", "chunked"):
        r = run_instance(t, COST, policy=policy, kv_blocks=6, block_tokens=4, reserve_kv=True, log_iterations=True)
        assert r.preemptions_total == 0 and max(row[4] for row in r.log) <= 6
        assert r.first_token_s[1] > r.finish_s[0]
        # with room for both, reservation changes nothing
        roomy = run_instance(t, COST, policy=policy, kv_blocks=10, block_tokens=4, reserve_kv=True)
        free = run_instance(t, COST, policy=policy, kv_blocks=10, block_tokens=4)
        np.testing.assert_allclose(roomy.finish_s, free.finish_s, rtol=1e-12)
