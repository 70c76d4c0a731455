"""Every schedule builds and runs on every fabric preset (issue 14 point 5).

Small cases on the fabric itself (flow level where validated, packet level
where ``auto`` says the flow run is outside its validation), with devices
spread over the whole fabric so that multi-node presets carry traffic across
their NICs and PCIe presets across their root complexes. What is checked is
physics, not a number the code produced: every task ran, the makespan is at
least the compute on the busiest device (communication can only add), and the
fabric's links carried at least the bytes the schedule's transfers name (a
transfer may cross several links, never fewer than one).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import flitsim.schedules as S
from flitsim.hardware.fabric import FABRIC_PRESETS, fabric_preset
from flitsim.networks import FabricNetwork
from flitsim.workloads import dit_workload, llmperf_workload

DIT = dit_workload("dit-xl/2", 256, steps=2, cfg=False)
DIT1 = dit_workload("dit-xl/2", 256, steps=1, cfg=False)
# classifier-free guidance on: the two branches of cfg_parallel
DIT_CFG = dit_workload("dit-xl/2", 256, steps=2, cfg=True)
DIT1_CFG = dit_workload("dit-xl/2", 256, steps=1, cfg=True)


def _spread(gpus: int, k: int) -> list[int]:
    """k device ids spread evenly over 0..gpus-1 (distinct, ascending)."""
    return sorted({int(i * gpus // k) for i in range(k)})


def _cases(gpus: int, graph: bool):
    # graph fabrics (packet level, multi-hop): 2 devices in the two halves of
    # the fabric (across the NICs / the socket link) and one denoising step,
    # to keep the packet-level runs small
    k = 2 if gpus < 4 or graph else 4
    DIT = DIT1 if graph else globals()["DIT"]
    cfg_dit = DIT1_CFG if graph else DIT_CFG
    dev = _spread(gpus, k)
    return {
        "layer_pipeline": dict(model="llama-3-8b", workload=256, stages=k, batch=2, micro_batches=2),
        "terapipe": dict(model="llama-3-8b", workload=512, stages=k, slices=2),
        "pipefusion": dict(model=None, workload=DIT, stages=k, patches=k, warmup_steps=1),
        "tensor_parallel": dict(model=None, workload=DIT, degree=k),
        "ulysses": dict(model=None, workload=DIT, degree=k),
        "ring_attention": dict(model=None, workload=DIT, degree=k),
        "distrifusion": dict(model=None, workload=DIT, degree=k, warmup_steps=1),
        # hybrids: Ulysses x Ring over the k devices; the two CFG branches on k/2 each
        "usp": dict(model=None, workload=DIT, ulysses=2, ring=k // 2),
        "cfg_parallel": dict(model=None, workload=cfg_dit, ulysses=k // 2, ring=1),
        "decode": dict(model="llama-3-8b", workload=llmperf_workload(n_requests=2, seed=1), stages=k,
                       requests=2, micro_batches=2),
    }, dev


@pytest.mark.parametrize("preset", sorted(FABRIC_PRESETS))
@pytest.mark.parametrize("name", sorted(S.SCHEDULES))
def test_every_schedule_runs_on_every_preset(preset, name):
    fab = fabric_preset(preset)
    graph = bool(fab.hosts or fab.switch_kinds or fab.trunks)
    cases, dev = _cases(fab.gpus, graph)
    if graph:
        # packet level only on graph fabrics: coalesce 16 KiB simulated packets
        # (the bounded speed lever, docs/fidelity.md) to keep the case small
        fab = fab.replace(sim_packet_bytes=16384)
    c = dict(cases[name])
    model, workload = c.pop("model"), c.pop("workload")
    sched = S.build(name, model, workload, devices=dev, fabric=fab, **c)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s = S.simulate(sched, FabricNetwork(fab, fidelity="auto"))
    run = s.require_run()
    t = run.tasks
    assert len(t) == len(s.graph.columns["kind"]) and run.makespan_ps > 0
    assert (t.end_ps >= t.start_ps).all() and int(t.end_ps.max()) == run.makespan_ps
    # compute alone on the busiest device bounds the makespan from below
    assert run.makespan_ps >= int(run.busy_ps().max())
    # the fabric carried at least what the transfers name (each crosses >= 1 link)
    xfer = t[(t.kind == "transfer") & (t.device != t.peer)]
    named = int(xfer.bytes.sum())
    if named:
        links = run.network["links"]
        # flow level reports each port's fluid share rounded to a byte
        slack = len(links) if run.network.get("fidelity") == "flow" else 0
        assert int(links.payload_bytes.sum()) + slack >= named
