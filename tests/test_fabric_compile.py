"""The engine's compiled copy of a fabric spec (``FabricSpec._core_fabric``):
converted and validated once per spec object and reused by every run, never
reused for a spec with any field changed.

Expected values: the same call on the plain spec dict (the path every run took
before the copy was kept), which converts the spec afresh."""

from __future__ import annotations

import copy
import gc
import pickle
import warnings

import pytest

import flitsim
from flitsim import _core
from flitsim.errors import ConfigError
from flitsim.hardware import fabric_preset, uniform_fabric
from flitsim.hardware import fabric as fabric_mod


def _a2a(spec: object, nbytes: int) -> dict:
    req = {"op": "all_to_all", "members": list(range(8)), "bytes": nbytes,
           "params": {"algorithm": "direct", "protocol": "simple", "root": 0, "dtype_bytes": 4}}
    return _core.collective_run(spec, req)


@pytest.mark.parametrize("fidelity", ["packet", "flow"])
def test_compiled_fabric_gives_the_dicts_answer_bit_for_bit(fidelity: str) -> None:
    f = fabric_preset("hgx-b200", fidelity=fidelity)
    a = _a2a(f._core_fabric(), 8 * 8 * 4 * 4096)
    b = _a2a(f.core_dict(), 8 * 8 * 4 * 4096)
    assert a["fidelity"] == b["fidelity"] == fidelity
    assert a["time_ps"] == b["time_ps"]
    assert (a["link_bytes_sent"] == b["link_bytes_sent"]).all()


def test_compiled_fabric_is_reused_while_no_field_changes() -> None:
    f = fabric_preset("hgx-b200")
    assert f._core_fabric() is f._core_fabric()
    assert f._core_fabric().gpus == 8


def test_a_changed_field_never_gets_the_old_compiled_fabric() -> None:
    f = fabric_preset("hgx-b200", fidelity="flow")
    old = f._core_fabric()
    nbytes = 8 * 8 * 4 * 4096
    # every way to get a spec with a field changed: replace, model_copy(update=...), with_faults
    for g, fid in ((f.replace(fidelity="packet"), "packet"), (f.model_copy(update={"fidelity": "packet"}), "packet"),
                   (f.model_copy(update={"gpu": f.gpu.replace(payload_bytes=128)}), "flow")):
        c = g._core_fabric()
        assert c is not old
        r = _a2a(c, nbytes)
        assert r["fidelity"] == fid
        assert r["time_ps"] == _a2a(g.core_dict(), nbytes)["time_ps"]
    # 128 B packets carry less payload per flit: the same all_to_all takes longer
    slow = f.model_copy(update={"gpu": f.gpu.replace(payload_bytes=128)})
    assert _a2a(slow._core_fabric(), nbytes)["time_ps"] > _a2a(old, nbytes)["time_ps"]
    # collective() and transfers() go through the compiled copy: the copy's fidelity is what runs
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert flitsim.collective(f.model_copy(update={"fidelity": "packet"}), "all_to_all", nbytes,
                                  algorithm="direct").stats["fidelity"] == "packet"
        assert flitsim.transfers(f.model_copy(update={"fidelity": "packet"}), [0], [1], 1 << 20).fidelity == "packet"


def test_a_spec_the_engine_refuses_fails_on_construction_and_on_use() -> None:
    f = uniform_fabric(4, [1, 1])
    flitsim.collective(f, "all_reduce", 1 << 20)
    with pytest.raises(ConfigError, match="GPU 4"):
        f.replace(gpus=5)  # GPU 4 has no wire
    # an unchecked copy (model_copy skips validation) is compiled, and refused, when it runs
    bad = f.model_copy(update={"gpus": 5})
    with pytest.raises(ConfigError, match="GPU 4"):
        flitsim.collective(bad, "all_reduce", 1 << 20)


def test_equality_pickling_and_copies_are_untouched() -> None:
    f = fabric_preset("hgx-b200")
    f._core_fabric()
    g = fabric_preset("hgx-b200")
    assert f == g and hash(f) == hash(g)
    for h in (pickle.loads(pickle.dumps(f)), copy.copy(f), copy.deepcopy(f)):
        assert h == f
        assert _a2a(h._core_fabric(), 8 * 8 * 4 * 4096)["time_ps"] == _a2a(f._core_fabric(), 8 * 8 * 4 * 4096)["time_ps"]


def test_the_compiled_copy_goes_with_its_spec() -> None:
    f = uniform_fabric(4, [1, 1])
    key = id(f)
    assert key in fabric_mod._COMPILED
    del f
    gc.collect()
    assert key not in fabric_mod._COMPILED


@pytest.mark.parametrize("fidelity", ["packet", "flow"])
def test_task_graph_on_the_compiled_fabric_gives_the_dicts_answer(fidelity: str) -> None:
    from flitsim.networks import FabricNetwork
    from flitsim.taskgraph import TaskGraphBuilder

    b = TaskGraphBuilder(devices=8)
    c = b.add_compute(0, 1_000_000)
    t = b.add_transfer(0, 1, 1 << 20)
    a = b.add_collective(list(range(8)), "all_reduce", 8 << 20)
    b.add_edge(c, t)
    b.add_edge(t, a)
    g = b.build()
    net = FabricNetwork(fabric_preset("hgx-b200"), fidelity=fidelity)
    core = net.to_core(8)
    assert isinstance(core["fabric"], _core.CompiledFabric)
    cols = {"devices": g.devices, "compute_streams": g.compute_streams, "comm_streams": g.comm_streams, **g.columns}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r1 = _core.execute_taskgraph(cols, core)
        r2 = _core.execute_taskgraph(cols, {**core, "fabric": net.fabric.replace(fidelity=fidelity).core_dict()})
    assert r1["network"]["fidelity"] == fidelity
    assert r1["makespan_ps"] == r2["makespan_ps"] > 1_000_000
    assert (r1["end_ps"] == r2["end_ps"]).all()
    with pytest.raises(ConfigError, match="network.fabric"):
        _core.execute_taskgraph(cols, {k: v for k, v in core.items() if k != "fabric"})
