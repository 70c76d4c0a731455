"""Issue 19 point 5: results behave in notebooks, and examples/quickstart.ipynb
runs top to bottom (nbclient, a real Jupyter kernel)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_quickstart_notebook_runs(monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    from nbclient import NotebookClient

    nb = nbformat.read(ROOT / "examples" / "quickstart.ipynb", as_version=4)
    import flitsim

    # the kernel imports the flitsim these tests import (this tree's, or the installed one in CI)
    here = str(Path(flitsim.__file__).resolve().parents[1])
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([here, os.environ.get("PYTHONPATH", "")]))
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}).execute()
    outs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outs if o.get("output_type") == "error"]
    html = [o for o in outs if "text/html" in o.get("data", {})]
    assert any("Ledger" in o["data"]["text/html"] for o in html)  # _repr_html_ used
    assert any("Schedule" in o["data"]["text/html"] for o in html)
    assert any("image/png" in o.get("data", {}) for o in outs)  # the plot rendered


def test_short_reprs_html_pandas_plot():
    import flitsim
    import flitsim.schedules as S
    from flitsim.collectives import collective
    from flitsim.ledger import ledger
    from flitsim.linklab import link_transfer
    from flitsim.report import critical_path
    from flitsim.transfers import transfers

    sched = S.simulate(S.build("terapipe", "llama-3-8b", 256, stages=2, slices=2, fabric="hgx-h100"),
                       flitsim.FabricNetwork("hgx-h100"))
    objs = [ledger("hgx-h100"), collective("hgx-h100", "all_gather", 1 << 16, list(range(4))),
            link_transfer("nvlink4", 1 << 16, 256), transfers("hgx-h100", [0], [1], [1 << 16]),
            sched, sched.run, critical_path(sched), sched.footprint()]
    for o in objs:
        r = repr(o)
        assert r.startswith(type(o).__name__ + "(") and len(r) < 200, r  # short, no frame dumps
        h = o._repr_html_()
        assert type(o).__name__ in h and "<table" in h
        df = o.to_pandas()
        assert len(df) > 0
        fig = o.plot()
        assert fig.axes and (fig.axes[0].patches or fig.axes[0].collections or fig.axes[0].lines), type(o)
