"""Issue 19 point 7: the HTML report checked in a real headless browser:
no console errors, every table-of-contents link resolves, every figure has a
nonzero size; a screenshot of the first screen is kept as an artifact
(``$FLITSIM_ARTIFACTS`` or ``.ci/artifacts/``). Skips only where no
Chromium / Chrome is installed (``.ci/run`` installs Debian's ``chromium``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from _browser import check_page, find_browser

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = Path(os.environ.get("FLITSIM_ARTIFACTS", ROOT / ".ci" / "artifacts"))

needs_browser = pytest.mark.skipif(find_browser() is None, reason="no Chromium/Chrome installed "
                                   "(install Debian's chromium: apt-get install chromium; .ci/run does)")


@pytest.fixture(scope="module")
def report(tiny_report):
    return tiny_report[0] / "report.html"


@needs_browser
def test_report_in_headless_browser(report):
    shot = ARTIFACTS / "report_first_screen.png"
    r = check_page(report, shot)
    assert r["console_errors"] == []
    assert len(r["toc"]) >= 5 and r["missing_toc_targets"] == []
    assert r["figures"], "the report has figures"
    for f in r["figures"]:
        assert f["complete"] and min(f["natural"]) > 0, f  # decoded
        assert min(f["box"]) > 0, f  # laid out with a nonzero size (sections opened)
    # the first screen is a real PNG of the requested size
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    w, h = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (w, h) == (1400, 1000)


@needs_browser
def test_browser_check_catches_broken_pages(tmp_path):
    # the check can fail: a console error, a dead TOC link and a broken image are all reported
    bad = tmp_path / "bad.html"
    bad.write_text("<!DOCTYPE html><html><head><title>bad</title></head><body>"
                   "<nav id='toc'><a href='#here'>ok</a><a href='#nowhere'>dead</a></nav><h2 id='here'>x</h2>"
                   "<figure><img alt='broken' src='data:image/png;base64,AAAA'></figure>"
                   "<script>console.error('boom'); undefinedFunction();</script></body></html>")
    r = check_page(bad)
    assert any("boom" in e for e in r["console_errors"])
    assert any("undefinedFunction" in e for e in r["console_errors"])
    assert r["missing_toc_targets"] == ["nowhere"]
    assert min(r["figures"][0]["natural"]) == 0
