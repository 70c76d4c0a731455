"""Docs a clone has: every docs/*.md the code and docs cite exists, nothing
points at files outside the repository (a steering repo's reference sheets),
and docs/presets.md lists every shipped preset."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = ("../shared", "/work/shared", "REFERENCE.md", "DESIGN.md", "STYLE.md")


def _tracked_text_files() -> list[Path]:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "ls-files"], capture_output=True, text=True, timeout=30,
                             check=True).stdout.split()
        files = [ROOT / f for f in out]
    except (OSError, subprocess.SubprocessError):  # not a git checkout (an sdist): walk the tree
        files = [p for p in ROOT.rglob("*") if "target" not in p.parts and ".git" not in p.parts]
    return [f for f in files if f.is_file() and f.suffix in (".py", ".pyi", ".rs", ".md", ".toml", ".ipynb", ".j2")
            and f.name != "test_docs.py"]


def test_no_reference_outside_the_repository():
    bad = []
    for f in _tracked_text_files():
        text = f.read_text(errors="replace")
        for s in FORBIDDEN:
            if s in text:
                bad.append(f"{f.relative_to(ROOT)}: {s}")
    assert not bad, "files cite paths a clone does not have:\n" + "\n".join(bad)


def test_cited_docs_exist():
    missing = set()
    for f in _tracked_text_files():
        for line in f.read_text(errors="replace").splitlines():
            for m in re.finditer(r"(?<![\w/])docs/([A-Za-z_/-]+\.md)", line):
                if m.group(1).startswith("performance/"):  # xDiT's own docs/performance/flux.md, cited as a source
                    continue
                if not (ROOT / "docs" / m.group(1)).exists():
                    missing.add(f"{f.relative_to(ROOT)}: docs/{m.group(1)}")
    assert not missing, sorted(missing)


def test_presets_doc_lists_every_preset():
    from flitsim.catalog import preset_catalog

    doc = (ROOT / "docs" / "presets.md").read_text()
    absent = [f"{r.kind} {r.name}" for r in preset_catalog().itertuples() if f"| {r.name} |" not in doc]
    assert not absent, ("docs/presets.md is missing presets; regenerate it with "
                        "`flitsim presets --format markdown` (see its header): " + ", ".join(absent))
