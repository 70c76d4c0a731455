"""The validation registry (flitsim.validation, docs/validation.md): it loads,
every case states a source and a tolerance, the CI subset passes and
reproduces the recorded full run, a deliberately broken parameter makes the
relevant cases fail, the generated docs match the registry, bad input is a
ConfigError naming it."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from flitsim import ConfigError
from flitsim.cli import cli
from flitsim.nccl_log import parse
from flitsim.validation import TAGS, Case, all_cases, get_case, run, run_case, select
from flitsim.validation import docs
from flitsim.validation.context import Context

ROOT = Path(__file__).resolve().parents[1]
AREAS = {"switch", "ledger", "fabric", "faults", "collectives", "xdit", "single_gpu", "pcie_dit", "mlperf", "memory"}


@pytest.fixture(scope="module")
def fast_report():
    import time

    t0 = time.process_time()
    rep = run(fast=True)
    return rep, time.process_time() - t0


def test_registry_loads_with_every_area_and_unique_ids():
    cases = all_cases()
    assert {c.area for c in cases} >= AREAS
    assert len({c.id for c in cases}) == len(cases)
    assert all(c.id.startswith(c.area + ".") for c in cases)


def test_every_case_has_a_source_a_tolerance_and_a_call():
    for c in all_cases():
        assert len(c.source) > 10 and len(c.tolerance_why) > 10 and c.call, c.id
        assert 0 <= c.tolerance < 1 and c.measured > 0, c.id
        assert c.tag in TAGS, c.id
        assert bool(c.fitted) == (c.tag == "calibration"), c.id
        # cited to the original source, never to the steering repo's reference sheet
        assert "REFERENCE" not in c.source and "shared" not in c.source, c.id


def test_a_case_without_source_or_fitted_parameter_is_refused():
    kw = dict(id="x.y", area="x", quantity="q", unit="s", source="a paper", measured=1.0, tolerance=0.1,
              tolerance_why="because", call="f()", compute=lambda ctx: 1.0)
    Case(**kw)
    with pytest.raises(ConfigError, match="source"):
        Case(**{**kw, "source": " "})
    with pytest.raises(ConfigError, match="fitted"):
        Case(**{**kw, "tag": "calibration"})
    with pytest.raises(ConfigError, match="tolerance"):
        Case(**{**kw, "tolerance": float("nan")})
    with pytest.raises(ConfigError, match="tag"):
        Case(**{**kw, "tag": "vibes"})


def test_every_row_of_the_shipped_nccl_logs_is_a_case():
    # The logs in tests/data/nccl are what `flitsim calibrate` fits on: each row must be
    # in the registry with its measured value (busbw or time, as the case quotes it).
    coll = [c for c in all_cases() if c.area == "collectives" and c.system == "H200"]
    for log in sorted((ROOT / "tests" / "data" / "nccl").glob("*.log")):
        for row in parse(log).rows:
            vals = {row["busbw_GBps_ip"], row["time_us_ip"]}
            hits = [c for c in coll if any(math.isclose(c.measured, v, rel_tol=1e-9) for v in vals)]
            assert hits, (log.name, row["size"])


def test_fast_subset_passes_reproduces_the_record_and_is_fast(fast_report):
    rep, cpu_s = fast_report
    assert len(rep.outcomes) >= 40
    assert rep.ok, [(o.case.id, o.note) for o in rep.failed]
    # Every tag is exercised and transfer is reported apart from calibration.
    tags = {r.tag for r in rep.summary()}
    assert {"theory", "calibration", "transfer"} <= tags
    # CI budget: under 60 s on 2 cores; CPU time, so other jobs on the machine do not count
    assert cpu_s < 60
    # The simulator is deterministic: a fast case that moved means docs/validation.json is stale.
    rec = docs.load_record(ROOT)["cases"]
    for o in rep.outcomes:
        want = rec[o.case.id]["simulated"]
        if o.simulated is None:
            assert want is None, o.case.id
        else:
            assert want == pytest.approx(o.simulated, rel=1e-9, abs=1e-12), (
                f"{o.case.id}: {o.simulated} now, {want} recorded: rerun flitsim validate --write-docs")


def test_skipped_cases_say_why_and_never_pass():
    for cid in ("pcie_dit.pipefusion_1024", "mlperf.offline_h200x8"):
        o = run([cid]).outcomes[0]
        if o.verdict == "skipped":
            assert "missing" in o.note and o.simulated is None


def test_a_broken_parameter_makes_the_relevant_cases_fail():
    ids = ["collectives.h200_ar_half_2k_aiconfigurator", "collectives.h200_ar_nvls_1kb_azure",
           "collectives.h100_sendrecv_256m_issue1264", "ledger.h100_gpu_payload_dir"]
    good = run(ids)
    assert good.ok
    # host launch 20 us instead of 4.06 breaks the latency-bound points, not the bandwidth-bound one
    # (256 MiB: +16 us on ~720 us) or the ledger
    bad = run(ids, calibration={"fabric": "hgx-h100", "host_launch_ps": 20_000_000})
    v = {o.case.id: o.verdict for o in bad.outcomes}
    assert v["collectives.h200_ar_half_2k_aiconfigurator"] == "fail"
    assert v["collectives.h200_ar_nvls_1kb_azure"] == "fail"
    assert v["collectives.h100_sendrecv_256m_issue1264"] == "pass"
    assert v["ledger.h100_gpu_payload_dir"] == "pass"
    # injection efficiency 0.6 instead of 0.849 breaks the bandwidth-bound point
    bad = run(["collectives.h100_sendrecv_256m_issue1264"], calibration={"fabric": "hgx-h100", "link_efficiency": 0.6})
    assert bad.outcomes[0].verdict == "fail" and not bad.ok


def test_a_broken_compute_parameter_fails_the_single_gpu_cases(monkeypatch):
    import flitsim.hardware.gpus as gpus

    make = gpus.GPU_PRESETS["l40"]

    def broken():  # L40 with half its fitted GEMM efficiency top
        g = make()
        return g.model_copy(update={"gemm_efficiency": g.gemm_efficiency / 2})
    monkeypatch.setitem(gpus.GPU_PRESETS, "l40", broken)
    rep = run(["single_gpu.flux_4096_l40", "single_gpu.pixart_1024_a100"])
    v = {o.case.id: o.verdict for o in rep.outcomes}
    assert v == {"single_gpu.flux_4096_l40": "fail", "single_gpu.pixart_1024_a100": "pass"}


def test_known_miss_does_not_fail_but_is_reported():
    c = Case(id="t.miss", area="t", quantity="q", unit="s", source="a paper", measured=10.0, tolerance=0.1,
             tolerance_why="because", call="f()", compute=lambda ctx: 13.0, known_miss="reason")
    o = run_case(c, Context())
    assert o.verdict == "known miss" and o.error == pytest.approx(0.3)
    c2 = Case(**{**c.__dict__, "id": "t.fail", "known_miss": ""})
    assert run_case(c2, Context()).verdict == "fail"
    c3 = Case(**{**c.__dict__, "id": "t.raise", "compute": lambda ctx: 1 / 0})
    o3 = run_case(c3, Context())
    assert o3.verdict == "fail" and "ZeroDivisionError" in o3.note
    rate = Case(**{**c.__dict__, "id": "t.rate", "error": "time_of_rate", "known_miss": ""})
    assert run_case(rate, Context()).error == pytest.approx(10 / 13 - 1)


def test_generated_docs_match_the_registry_and_the_record():
    probs = docs.check(ROOT)
    assert not probs, "\n".join(probs) + "\n(run: flitsim validate --write-docs, or python -m flitsim.validation.docs --record)"


def test_bad_input_names_what_is_wrong(tmp_path):
    with pytest.raises(ConfigError, match="no-such-case"):
        run(["no-such-case"])
    with pytest.raises(ConfigError, match="nope"):
        run(tags=["nope"])
    with pytest.raises(ConfigError, match="zzz"):
        select(areas=["zzz"])
    with pytest.raises(ConfigError, match="nvl-9000"):
        run(["ledger.h100_gpu_payload_dir"], fabric="nvl-9000")
    p = tmp_path / "a100.toml"
    p.write_text('fabric = "dgx-a100"\n\n[collective]\nhost_launch_ps = 4000000\n')
    with pytest.raises(ConfigError, match=r"a100\.toml.*dgx-a100.*hgx-h100"):
        run(["collectives.h200_ar_half_2k_aiconfigurator"], fabric="hgx-h100", calibration=p)
    with pytest.raises(ConfigError, match=r"a100\.toml.*dgx-a100"):
        run(["collectives.h200_ar_half_2k_aiconfigurator"], calibration=p)
    q = tmp_path / "nofabric.toml"
    q.write_text("[collective]\nhost_launch_ps = 4000000\n")
    with pytest.raises(ConfigError, match="fabric"):
        run(["collectives.h200_ar_half_2k_aiconfigurator"], calibration=q)
    # a file written by `flitsim calibrate` before the fabric key: its header comment counts
    old = tmp_path / "old.toml"
    old.write_text("# flitsim collective parameters\n# fabric: hgx-h100; logs: x.log\n\n[collective]\n"
                   "host_launch_ps = 4060000\n")
    assert run(["collectives.h200_ar_half_2k_aiconfigurator"], calibration=old).ok


def test_calibration_file_from_flitsim_calibrate_records_its_fabric(tmp_path):
    from flitsim.calibrate import Calibration
    from flitsim.validation.context import load_calibration

    p = tmp_path / "p.toml"
    Calibration("hgx-h100", {"host_launch_ps": 4_060_000}, logs=("a.log",)).write(p)
    assert load_calibration(p) == ("hgx-h100", {"host_launch_ps": 4_060_000})


def test_fabric_override_runs_fabric_cases_only_and_skips_what_it_cannot():
    rep = run(["collectives.h100_ar_ring_2g_n2_issue1455", "collectives.h100_ar_nvls_128b_issue1259",
               "ledger.h100_gpu_payload_dir"], fabric="dgx-a100")
    v = {o.case.id: (o.verdict, o.fabric) for o in rep.outcomes}
    assert "ledger.h100_gpu_payload_dir" not in v  # uses no fabric
    assert v["collectives.h100_ar_nvls_128b_issue1259"][0] == "skipped"  # no NVLS on A100
    assert v["collectives.h100_ar_ring_2g_n2_issue1455"][1] == "dgx-a100"


def test_cli_json_markdown_exit_status_and_errors(tmp_path):
    r = CliRunner().invoke(cli, ["validate", "--case", "ledger.h100_gpu_payload_dir", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["ok"] and d["cases"][0]["verdict"] == "pass" and d["summary"][0]["tag"] == "theory"
    r = CliRunner().invoke(cli, ["validate", "--case", "ledger.", "--format", "markdown"])
    assert r.exit_code == 0 and "| ledger.nvl72_link_payload |" in r.output and "MAPE" in r.output
    p = tmp_path / "broken.toml"
    p.write_text('fabric = "hgx-h100"\n[collective]\nhost_launch_ps = 40600000\n')
    r = CliRunner().invoke(cli, ["validate", "--case", "collectives.h200_ar_half_2k_aiconfigurator",
                                 "--calibration", str(p)])
    assert r.exit_code == 1 and "fail" in r.output
    r = CliRunner().invoke(cli, ["validate", "--case", "nope.case"])
    assert r.exit_code == 2 and "nope.case" in r.output
    r = CliRunner().invoke(cli, ["validate", "--tag", "transfer", "--list"])
    assert r.exit_code == 0 and "collectives.h100_ar_ring_2g_issue212" in r.output
