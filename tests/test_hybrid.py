"""Hybrid schedules (issue 15 points 2-4, issue 14 point 5 placement): closed
forms of the xDiT communication / memory table, checked on the task graph and
on the bytes the fabric carried; bad input names the option."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import flitsim.schedules as S
from flitsim import ConfigError
from flitsim.collectives import busbw_factor
from flitsim.models import ModelConfig, param_count
from flitsim.hardware import fabric_preset
from flitsim.networks import AnalyticNetwork, FabricNetwork
from flitsim.schedules import Parallel
from flitsim.schedules.placement import fabric_domains, place
from flitsim.workloads import dit_workload

TINY = ModelConfig(name="tiny", kind="causal", n_layers=4, hidden=256, n_heads=8, n_kv_heads=8, ffn_hidden=512,
                   vocab_size=1000)
TINY_MOE = ModelConfig(name="tiny-moe", kind="causal", n_layers=2, hidden=256, n_heads=8, n_kv_heads=8,
                       ffn_hidden=512, vocab_size=1000, n_experts=4, experts_per_token=2)


def _labelled(s, pattern: str, kind: int) -> np.ndarray:
    lab = np.asarray(s.graph.meta["label"], dtype=object)
    return np.array([pattern in x for x in lab]) & (s.graph.columns["kind"] == kind)


# ---------------------------------------------------------------------------- USP: u x r = N (xDiT table)
@pytest.mark.parametrize("u,r", [(2, 2), (4, 2), (2, 4)])
def test_usp_moves_ulysses_bytes_over_u_and_ring_bytes_over_r(u, r):
    # 4096 tokens, MHA: kv_width = 2 hs. Every all-to-all buffer is >= 2 MiB, where NCCL's simple
    # protocol carries payload only (LL / LL128 below ~1 MiB add their flag bytes on the wire)
    w = dit_workload("dit-xl/2", 1024, steps=1)
    s = S.build("usp", None, w, ulysses=u, ring=r, include_embed_head=False)
    N, p, hs, b, B, L = u * r, 4096, 1152, 2, 2, 28
    c = s.graph.columns
    # Ulysses: 4 all-to-alls per layer inside each group of u, each rank's buffer p/N x hs:
    # per device 4 L (u-1)/u p/N hs b B = the pure-Ulysses bytes of degree u on p / r tokens
    a2a = _labelled(s, "a2a", 2)
    per_dev = sum(busbw_factor("all_to_all", u) * float(x) for x in c["bytes"][a2a]) * u / N
    want_u = 4 * L * (u - 1) / u * (p / r) / u * hs * b * B
    assert per_dev == pytest.approx(want_u, rel=1e-9)
    # Ring: r - 1 blocks of p/r tokens x kv_width/u per layer: (r-1)/r p 2hs/u L b B = pure ring of degree r, / u
    kv = _labelled(s, ".kv", 1)
    want_r = L * (r - 1) / r * p * 2 * hs / u * b * B
    assert float(c["bytes"][kv].sum()) / N == pytest.approx(want_r, rel=1e-9)
    # and the fabric carried exactly that much per GPU (flow level, link statistics)
    with warnings.catch_warnings():  # concurrent ring hops on one pair: flow level outside its validation
        warnings.simplefilter("ignore")
        run = s.simulate(FabricNetwork("hgx-h100", fidelity="flow"))
    links = run.run.network["links"]
    carried = links.groupby("gpu").payload_bytes.sum().reindex(range(N)).to_numpy()
    np.testing.assert_allclose(carried, want_u + want_r, rtol=1e-6)


def test_usp_degenerates_to_the_pure_schedules_exactly():
    w = dit_workload("dit-xl/2", 512, steps=2)
    net = AnalyticNetwork.from_fabric(fabric_preset("hgx-h100"))
    for name, opt in (("ulysses", "ulysses"), ("ring_attention", "ring")):
        a = S.simulate(S.build(name, None, w, degree=4), net)
        h = S.simulate(S.build("usp", None, w, **{opt: 4}), net)
        assert a.makespan_ps == h.makespan_ps and a.comm_bytes() == h.comm_bytes(), name


# ---------------------------------------------------------------------------- CFG parallel
def test_cfg_parallel_halves_per_step_compute_and_adds_one_exchange_per_step():
    steps = 3
    w = dit_workload("pixart-alpha-xl/2", 512, steps=steps, decode="none")  # CFG on: step batch 2; per-step work only
    one = S.build("usp", None, w)  # one GPU, both branches
    two = S.build("cfg_parallel", None, w)
    fl1 = one.graph.meta["flops"][one.graph.columns["kind"] == 0].sum()
    dev = two.graph.columns["device"]
    comp = two.graph.columns["kind"] == 0
    for d in (0, 1):
        assert two.graph.meta["flops"][comp & (dev == d)].sum() == pytest.approx(fl1 / 2, rel=1e-12)
    g = _labelled(two, "cfg_gather", 2)
    assert g.sum() == steps  # one exchange per step
    # its size: both branches' predictions, 1024 tokens x 2^2 x 8 channels (learned sigma) x bf16
    assert (two.graph.columns["bytes"][g] == 2 * 1024 * 4 * 8 * 2).all()
    assert one.options["cfg"] == 1 and two.options["cfg"] == 2


def test_pipefusion_x_usp_x_cfg_builds_runs_and_keeps_the_pipeline():
    w = dit_workload("dit-xl/2", 256, steps=3)
    s = S.build("pipefusion", None, w, stages=2, ulysses=2, ring=2, cfg=2, fabric="gb200-nvl72")
    assert len(s.devices) == 16 and s.stages == 2 and s.name == "pipefusion"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = S.simulate(s, FabricNetwork("gb200-nvl72", fidelity="flow"))
    assert r.makespan_ps > 0 and 0 < r.fill_drain_share() < 1
    # Parallel is the same composition
    p = Parallel(pp=2, ulysses=2, ring=2, cfg=2).build(None, w, fabric="gb200-nvl72")
    assert len(p.graph) == len(s.graph)
    # pure PipeFusion through the hybrid builder's memory: same components as the pure builder
    pure = S.build("pipefusion", None, w, stages=2)
    hyb = S.build("pipefusion", None, w, stages=2, placement="linear")
    for k in ("weights", "stale_kv"):
        np.testing.assert_allclose(pure.memory[k].to_numpy(), hyb.memory[k].to_numpy())


# ---------------------------------------------------------------------------- memory closed forms
def test_weights_per_device_are_params_over_the_pipeline_or_tp_degree_exactly():
    w = dit_workload("dit-xl/2", 256, steps=1)
    s = S.build("pipefusion", None, w, stages=2, ulysses=2, ring=1, cfg=2)
    groups = s.options["stage_layers"]
    wts = s.memory.weights.to_numpy().reshape(2, 4)  # (stage, cfg x ulysses)
    for j in range(2):
        assert (wts[j] == param_count("dit-xl/2", groups[j]) * 2).all()
    assert wts[:, 0].sum() == param_count("dit-xl/2") * 2
    t = S.build("terapipe", TINY, 256, stages=2, tp=2)
    for j, g in enumerate(t.options["stage_layers"]):
        assert (t.memory.weights.to_numpy()[2 * j:2 * j + 2] == param_count(TINY, g) * 2 / 2).all()
    # expert parallelism: the experts / ep, the rest whole
    m = S.build("usp", TINY_MOE, 256, ulysses=4, ep=4)
    experts = 2 * 4 * 3 * 256 * 512 * 2
    assert (m.memory.weights == param_count(TINY_MOE) * 2 - experts * 3 / 4).all()


def test_pipefusion_sp_stale_kv_closed_form():
    w = dit_workload("dit-xl/2", 512, steps=2)
    for u, r in ((1, 1), (2, 1), (2, 2)):
        s = S.build("pipefusion", None, w, stages=2, ulysses=u, ring=r, placement="linear")
        per_stage = [sum(1 for x in g if isinstance(x, int)) for g in s.options["stage_layers"]]
        # 2 x layers-per-stage x tokens x hidden x bytes (x step batch 2), each rank 1 / (u r) of it
        want = np.repeat([2 * Ls * 1024 * 1152 * 2 * 2 / (u * r) for Ls in per_stage], u * r)
        np.testing.assert_allclose(s.memory.stale_kv.to_numpy(), want)


def test_hunyuan_dit_pipefusion_pays_the_skip_hand_offs():
    w = dit_workload("hunyuan-dit", 512, steps=2)
    s = S.build("pipefusion", None, w, stages=2, patches=2, warmup_steps=0)
    # 40 blocks on 2 stages (0-19, 20-39): skips 18->21 ... 0->39 all cross the cut
    assert s.options["cross_stage_skips"] == 19
    sk = _labelled(s, "skip", 1)
    assert sk.sum() == 19 * 2 * 2  # per skip, per patch, per step
    # each is the patch's hidden states: 512 tokens of a 1024-token image x 1408 x bf16 x CFG batch 2
    assert (s.graph.columns["bytes"][sk] == 512 * 1408 * 2 * 2).all()
    assert S.simulate(s, AnalyticNetwork.from_fabric(fabric_preset("hgx-h100"))).makespan_ps > 0


# ---------------------------------------------------------------------------- models
def test_new_models_parameter_counts_match_their_published_sizes():
    for name, billions, tol in (("qwen3-32b", 32.8, 0.01), ("mixtral-8x7b", 46.7, 0.01), ("hunyuan-dit", 1.5, 0.03),
                                ("sana-1600m", 1.6, 0.03), ("hunyuan-video", 13.0, 0.05)):
        assert abs(param_count(name) / 1e9 - billions) / billions < tol, name
    v = dit_workload("hunyuan-video", (720, 1280), frames=129, steps=2)
    assert v.image_tokens == 33 * 45 * 80  # (129 - 1) / 4 + 1 latent frames x 45 x 80
    assert dit_workload("sana-1600m", 1024).image_tokens == 32 * 32  # DC-AE f32, patch 1


def test_expert_parallel_all_to_all_closed_form():
    s = S.build("usp", TINY_MOE, 256, ulysses=4, ep=4, include_embed_head=False)
    ep = _labelled(s, "ep_", 2)
    assert ep.sum() == 2 * 2  # dispatch + combine per layer
    # each rank's buffer: its 256/4 tokens x top-2 x hidden x bf16
    assert (s.graph.columns["bytes"][ep] == 64 * 2 * 256 * 2).all()
    assert S.simulate(s, FabricNetwork("hgx-h100", fidelity="flow")).makespan_ps > 0


# ---------------------------------------------------------------------------- placement
def test_placement_domains_default_and_explicit():
    assert fabric_domains("hgx-h100") == [list(range(8))]
    pl, size = place((("pp", 2), ("ulysses", 4)), fabric="hgx-h100")
    assert pl.groups("ulysses") == [[0, 1, 2, 3], [4, 5, 6, 7]] and size == 8 and not pl.crosses["ulysses"]
    pl, _ = place((("pp", 2), ("tp", 2)), devices=[7, 6, 5, 4], fabric="hgx-h100")
    assert pl.groups("tp") == [[7, 6], [5, 4]]
    pl, _ = place((("cfg", 2), ("ulysses", 2)), placement=[[0, 2], [1, 3]], fabric="hgx-h100")
    assert pl.groups("ulysses") == [[0, 2], [1, 3]]
    s = S.build("usp", None, dit_workload("dit-xl/2", 256, steps=1), ulysses=2, ring=2, placement=[[3, 2], [1, 0]])
    assert s.devices == (3, 2, 1, 0)


def test_placement_reads_domains_from_a_fabric_that_names_them():
    class Fab:
        gpus, name, domains = 8, "two-nodes", [[4, 5, 6, 7], [0, 1, 2, 3]]

    pl, _ = place((("pp", 2), ("tp", 4)), fabric=Fab())
    assert pl.groups("tp") == [[0, 1, 2, 3], [4, 5, 6, 7]]
    pl, _ = place((("tp", 8),), fabric=Fab())
    assert pl.crosses["tp"]


# ---------------------------------------------------------------------------- bad input
def test_bad_input_names_the_option():
    w = dit_workload("dit-xl/2", 256, steps=1)
    cases = [
        (lambda: S.build("usp", None, w, ulysses=2, ring=2, devices=3), "devices"),
        (lambda: S.build("pipefusion", None, w, stages=2, ulysses=2, ring=2, cfg=2, fabric="hgx-h100"), "devices"),
        (lambda: S.build("cfg_parallel", None, dit_workload("flux.1-dev", 256, steps=1)), "cfg"),
        (lambda: S.build("usp", None, w, cfg=3), "cfg"),
        (lambda: S.build("usp", TINY, 256, ulysses=2, ep=2), "ep"),
        (lambda: S.build("usp", TINY_MOE, 256, ulysses=2, ep=4), "ep"),
        (lambda: S.build("usp", None, w, ulysses=3), "ulysses"),
        (lambda: S.build("usp", TINY, 256, cfg=2), "cfg"),
        (lambda: S.build("terapipe", TINY, 256, stages=2, tp=3), "tp"),
        (lambda: S.build("usp", None, w, ulysses=2, placement=[[0, 0]]), "devices"),
        (lambda: S.build("usp", None, w, ulysses=2, placement="round-robin"), "placement"),
        (lambda: S.build("pipefusion", None, w, stages=2, ulysses=2, inflight_patches=2), "inflight_patches"),
    ]
    for fn, name in cases:
        with pytest.raises(ConfigError) as e:
            fn()
        assert name in str(e.value), (name, str(e.value))


# ---------------------------------------------------------------------------- flitsim plan
def test_plan_prunes_only_what_cannot_win_and_counts_add_up():
    import warnings as _w

    from flitsim.planner import enumerate_configs, parse_workload, plan

    with _w.catch_warnings():
        _w.simplefilter("ignore")
        fast = plan("dit-xl/2", "256", fabric="hgx-h100", gpus=4, steps=2, fidelity="flow")
        full = plan("dit-xl/2", "256", fabric="hgx-h100", gpus=4, steps=2, fidelity="flow", prune_factor=1e9)
    t, f = fast.table, full.table
    # every factorisation pp x cfg x r x u = 4 (u | 16 heads, cfg 2 with CFG) + tp + distrifusion
    w = parse_workload("dit-xl/2", "256", steps=2)
    assert fast.enumerated == len(enumerate_configs("dit-xl/2", w, 4)) == len(t) == 11
    assert fast.enumerated == fast.simulated + fast.pruned + fast.infeasible + int((t.status == "infeasible").sum())
    assert full.pruned == 0 and full.simulated == 11
    # pruning keeps the winner, and a compute-only bound never exceeds the simulated latency
    assert t.iloc[0].config == f.iloc[0].config and t.iloc[0].latency_s == f.iloc[0].latency_s
    ok = f[f.status == "ok"]
    assert (ok.latency_s >= ok.lower_bound_s * (1 - 1e-9)).all()
    # the pruned ones' bounds are at least the best latency
    assert (t[t.status == "pruned"].lower_bound_s >= t.iloc[0].latency_s).all()
    assert list(f.latency_s) == sorted(f.latency_s)


def test_plan_marks_oom_and_refuses_bad_input():
    from flitsim.planner import plan

    r = plan("flux.1-dev", "4096", fabric="hgx-h100", gpus=2, steps=1, gpu="l40", fidelity="flow")
    oom = r.table[r.table.status == "oom"]
    assert len(oom) and set(oom.memory_broken_by) <= {"stale_kv", "weights", "activations", "kv_cache"}
    assert "stale_kv" in set(oom.memory_broken_by)  # DistriFusion's K/V of all layers
    with pytest.raises(ConfigError, match="gpus"):
        plan("dit-xl/2", "256", fabric="hgx-h100", gpus=16)
    with pytest.raises(ConfigError, match="workload"):
        plan("dit-xl/2", "big", fabric="hgx-h100", gpus=2)


def test_plan_cli_prints_the_ranked_table():
    from click.testing import CliRunner

    from flitsim.cli import cli

    res = CliRunner().invoke(cli, ["plan", "dit-xl/2", "256", "--fabric", "hgx-h100", "--gpus", "2", "--steps", "1",
                                   "--fidelity", "flow"])
    assert res.exit_code == 0, res.output
    assert "configurations enumerated" in res.output and "simulated" in res.output
    res = CliRunner().invoke(cli, ["plan", "llama-3-8b", "2048", "--fabric", "hgx-h100", "--gpus", "2", "--json",
                                   "--fidelity", "flow"])
    assert res.exit_code == 0, res.output
    import json

    d = json.loads(res.output)
    names = {c["schedule"] for c in d["configurations"]}
    assert {"tensor_parallel", "terapipe", "ulysses", "ring_attention"} <= names


def test_new_models_run_through_their_schedules():
    net = AnalyticNetwork.from_fabric(fabric_preset("hgx-h100"))
    sana = dit_workload("sana-1600m", 512, steps=2)
    s = S.simulate(S.build("pipefusion", None, sana, stages=2, ulysses=2), net)
    assert s.makespan_ps > 0 and (s.memory.stale_kv > 0).all()
    # linear attention: the stale state is per head hd x (hd + 1) fp32, not per token
    assert s.memory.stale_kv.iloc[0] == 10 * 2 * 70 * 32 * 33 * 4 * 2 / 2  # layers x patches x H hd (hd+1) x 4 B x batch / u
    for bad in (lambda: S.build("ring_attention", None, sana, degree=2),
                lambda: S.build("usp", None, sana, ring=2)):
        with pytest.raises(ConfigError, match="linear"):
            bad()
    video = dit_workload("hunyuan-video", (256, 256), frames=9, steps=1)  # 3 latent frames x 16 x 16
    assert video.image_tokens == 3 * 256
    assert S.simulate(S.build("usp", None, video, ulysses=4, ring=2), net).makespan_ps > 0
    assert S.simulate(S.build("terapipe", "qwen3-32b", 1024, stages=2, tp=4), net).memory_status == "ok"
    m = S.simulate(S.build("usp", "mixtral-8x7b", 1024, ulysses=8, ep=8), net)
    assert m.makespan_ps > 0 and m.memory_status == "ok"


def test_domains_stop_at_network_elements():
    from flitsim.hardware.fabric import FabricSpec, SwitchKind, Trunk, Wire
    from flitsim.hardware.links import link_preset

    # two "nodes" of 2 GPUs, each on a PCIe switch (0, 1) with a NIC (2, 3) trunked to one Ethernet switch (4)
    # (a real spec: the domains come from the engine's routes)
    kinds = (SwitchKind(name="plx", kind="pcie_switch"), SwitchKind(name="nic", kind="nic"),
             SwitchKind(name="tor", kind="ethernet"))
    wires = tuple(Wire(gpu=g, gpu_port=0, switch=g // 2, switch_port=g % 2) for g in range(4))
    trunks = (Trunk(a=0, a_port=2, b=2, b_port=0), Trunk(a=1, a_port=2, b=3, b_port=0),
              Trunk(a=2, a_port=1, b=4, b_port=0, link=1), Trunk(a=3, a_port=1, b=4, b_port=1, link=1))
    fab = FabricSpec(name="2x2", gpus=4, gpu_ports=1, switches=5, switch_ports=3,
                     links=(link_preset("pcie4x16"), link_preset("eth400g")), wires=wires, trunks=trunks,
                     switch_kinds=kinds, switch_kind=(0, 0, 1, 1, 2))
    assert fabric_domains(fab) == [[0, 1], [2, 3]]
    pl, _ = place((("pp", 2), ("tp", 2)), fabric=fab)
    assert pl.groups("tp") == [[0, 1], [2, 3]] and not pl.crosses["tp"] and pl.crosses["pp"]


def test_plan_is_the_same_at_any_worker_count():
    import warnings as _w

    from flitsim.planner import plan

    with _w.catch_warnings():
        _w.simplefilter("ignore")
        a = plan("dit-xl/2", "256", fabric="hgx-h100", gpus=2, steps=1, fidelity="flow")
        b = plan("dit-xl/2", "256", fabric="hgx-h100", gpus=2, steps=1, fidelity="flow", jobs=2)
    assert a.table.equals(b.table)
