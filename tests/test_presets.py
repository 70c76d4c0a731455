"""Issue 19 point 5: `flitsim presets` lists every shipped preset with sources."""

from __future__ import annotations

import json

from click.testing import CliRunner

from flitsim.catalog import preset_catalog
from flitsim.cli import cli
from flitsim.hardware import FABRIC_PRESETS, GPU_PRESETS, LINK_PRESETS
from flitsim.models.zoo import MODEL_PRESETS
from flitsim.workloads import TRACES


def test_every_registered_preset_is_listed_with_sources():
    df = preset_catalog()
    listed = {(r.kind, n) for r in df.itertuples() for n in [r.name, *filter(None, r.aliases.split(", "))]}
    for kind, reg in (("fabric", FABRIC_PRESETS), ("gpu", GPU_PRESETS), ("link", LINK_PRESETS),
                      ("model", MODEL_PRESETS), ("workload", TRACES)):
        for name in reg:
            assert (kind, name) in listed, (kind, name)
    assert {"llmperf", "dit"} <= set(df[df.kind == "workload"].name)
    assert (df.sources.str.len() > 10).all() and not (df.sources == "(none stated)").any()


def test_presets_cli_filters_and_prints_json():
    r = CliRunner().invoke(cli, ["presets", "gpu", "--json"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.output)
    assert rows and {x["kind"] for x in rows} == {"gpu"}
    assert any(x["name"] == "h100" and "datasheet" in x["sources"] for x in rows)
