"""The packet engine's balanced plane fold (rust/src/fabric/fold.rs) against
full packet fidelity: every plane simulated, 256-byte packets. A fabric of P
identical one-link planes whose transfers are not a whole number of
P x packet units folds to one plane carrying ceil(bytes / P) of each
transfer; the stated bound is one payload packet per lane per transfer (< 1 %
with >= 128 packets per lane, or where every dependency chain of the
collective lasts >= 128 packet times per transfer on it), and busbw must stay
within 1 % of full fidelity."""

import warnings

import pytest

import flitsim
from flitsim.hardware.fabric import uniform_fabric

M = 1 << 20


def planes4(**o):
    # 4 GPUs x 4 identical NVLink 5 planes (the NVL72 structure, small)
    return uniform_fabric(4, [1] * 4, "nvlink5", switch={"nvls": True}, **o)


@pytest.mark.parametrize("op,algo", [("all_reduce", "ring"), ("all_to_all", "direct"), ("all_reduce", "nvls")])
def test_balanced_fold_stays_within_1_percent_of_full_fidelity(op, algo):
    size = 2 * M + 768  # not a multiple of planes x packet: exact folding cannot apply
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = flitsim.collective(planes4(fold_planes=False, sim_packet_bytes=256), op, size, algorithm=algo,
                                  protocol="simple")
        fold = flitsim.collective(planes4(), op, size, algorithm=algo, protocol="simple")
    assert full.stats["folded_planes"] == 1
    assert fold.stats["folded_planes"] == 4 and "balanced" in fold.stats["fold_reason"]
    assert fold.busbw_GBps == pytest.approx(full.busbw_GBps, rel=0.01)
    # each plane carries ceil(bytes / 4): at most 3 bytes per transfer more than the fabric was given
    extra = fold.link_bytes_sent.sum() - full.link_bytes_sent.sum()
    assert 0 <= extra <= 3 * fold.stats["transfers"]
    assert fold.link_bytes_sent.sum() == fold.link_bytes_received.sum()


@pytest.mark.parametrize("op,algo,proto", [("all_reduce", "ring", "simple"), ("all_to_all", "direct", "simple"),
                                           ("all_reduce", "nvls", "simple"), ("all_reduce", "ring", "ll")])
def test_chain_bound_folds_small_transfers_within_1_percent(op, algo, proto):
    # 64 KiB + 768 B: every transfer is below 128 packets per lane, so only the
    # collective-wide bound (each dependency chain lasts >= 128 packet times per
    # transfer on it: step latencies and launch count) can accept the fold
    size = 64 * 1024 + 768
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = flitsim.collective(planes4(fold_planes=False, sim_packet_bytes=256), op, size, algorithm=algo,
                                  protocol=proto)
        fold = flitsim.collective(planes4(), op, size, algorithm=algo, protocol=proto)
    assert fold.stats["folded_planes"] == 4 and "every dependency chain" in fold.stats["fold_reason"]
    assert fold.busbw_GBps == pytest.approx(full.busbw_GBps, rel=0.01)
    assert fold.link_bytes_sent.sum() == fold.link_bytes_received.sum()


def test_balanced_fold_is_refused_where_the_chain_bound_fails():
    # no launch or step latency: a chain of 6 transfers of ~4 packets per lane
    # lasts far less than 128 packet times per transfer
    r = flitsim.collective(planes4(), "all_reduce", 64 * 1024 + 768, algorithm="ring", protocol="simple",
                           host_launch_ps=0, launch_ps=1, step_latency_ps=1)
    assert r.stats["folded_planes"] == 1 and "fewer than 128" in r.stats["fold_reason"]
    assert "short of 128 packet times" in r.stats["fold_reason"]


def test_chain_bound_fold_is_refused_after_the_run_where_many_transfers_share_a_lane():
    # NVL72 all_to_all, 14.4 KB per pair: every GPU has 71 transfers in flight at once, which can leave up to
    # 71 packets of imbalance on one plane; the chain bound's one packet per transfer does not cover that, so
    # the folded run is checked afterwards and the collective is run on all 18 planes
    r = flitsim.collective("gb200-nvl72", "all_to_all", 72 * 72 * 4 * 50, protocol="simple")
    assert r.stats["folded_planes"] == 1
    assert "refused after the run: up to 71 transfers" in r.stats["fold_reason"]
    assert r.link_bytes_sent.sum() == r.link_bytes_received.sum() == 72 * (72 * 72 * 4 * 50) * 71 // 72  # (n-1)/n S leaves each of the 72 ranks


@pytest.mark.parametrize("op,size", [("all_reduce", 288 * 14563), ("all_gather", 288 * 14563), ("reduce_scatter", 288 * 14563),
                                     ("all_reduce", 288 * 233017)])
def test_nvls_rank_fold_is_exact_on_nvl72(op, size):
    # NVLS lowers to loopbacks: every rank's chain is the same and its packets
    # enter and leave the switches by its own ports, so one simulated rank
    # stands for all 72. Time-resolved counters are sampled per port, which
    # refuses the rank fold (and leaves the timing alone): the reference runs
    # every rank. Same time to the picosecond and the same bytes on every link.
    from flitsim.hardware.fabric import CounterSpec, fabric_preset
    one = flitsim.collective(fabric_preset("gb200-nvl72"), op, size, algorithm="nvls", protocol="simple")
    every = flitsim.collective(fabric_preset("gb200-nvl72", counters=CounterSpec(interval_ps=10**9)), op, size,
                               algorithm="nvls", protocol="simple")
    assert "rank fold: 72 ranks" in one.stats["fold_reason"]
    assert "no rank fold: the ranks are identical loopbacks, but time-resolved counters" in every.stats["fold_reason"]
    assert one.stats["packets"] * 72 == every.stats["packets"]
    assert one.time_us == every.time_us
    assert (one.link_bytes_sent == every.link_bytes_sent).all()
    assert (one.link_bytes_received == every.link_bytes_received).all()
    # each GPU's links carried the NVLS volume: (n+1)/n x S each way for
    # all_reduce, (n-1)/n x S for all_gather / reduce_scatter (within one
    # rounded-up byte per plane and chunk)
    n = 72
    want = size * ((n + 1) if op == "all_reduce" else (n - 1)) / n
    assert one.link_bytes_sent.min() == one.link_bytes_sent.max()
    assert want <= one.link_bytes_sent[0] <= want + 18 * one.stats["transfers"] / n * 2


def test_nvls_rank_fold_is_off_with_folding_off():
    from flitsim.hardware.fabric import fabric_preset
    r = flitsim.collective(fabric_preset("hgx-h100", fold_planes=False), "all_reduce", 1 << 20, algorithm="nvls",
                           protocol="simple")
    assert "no rank fold: the ranks are identical loopbacks, but folding disabled" in r.stats["fold_reason"]


@pytest.mark.parametrize("fab", ["hgx-h100", "hgx-b200"])
def test_nvls_rank_fold_is_exact_on_multi_switch_boxes(fab):
    # several links per GPU per switch: no plane fold, the rank fold alone
    from flitsim.hardware.fabric import CounterSpec, fabric_preset
    one = flitsim.collective(fabric_preset(fab), "all_reduce", 16 << 20, algorithm="nvls", protocol="simple")
    every = flitsim.collective(fabric_preset(fab, counters=CounterSpec(interval_ps=10**9)), "all_reduce", 16 << 20,
                               algorithm="nvls", protocol="simple")
    assert "rank fold: 8 ranks" in one.stats["fold_reason"] and "no rank fold" in every.stats["fold_reason"]
    assert one.time_us == every.time_us
    assert (one.link_bytes_sent == every.link_bytes_sent).all()
    assert (one.link_bytes_received == every.link_bytes_received).all()
