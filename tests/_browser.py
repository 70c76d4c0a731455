"""A small Chrome DevTools Protocol client for checking HTML reports in a
real headless browser (Debian's ``chromium`` package; .ci/run installs it).

:func:`check_page` loads a file, records console errors and uncaught
exceptions, checks that every table-of-contents link resolves to an element,
opens every collapsible section and checks that every figure image decoded and
has a nonzero rendered size, and saves a screenshot of the first screen.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_browser() -> str | None:
    """Path of an installed Chromium / Chrome, or None."""
    for b in BROWSERS:
        p = shutil.which(b)
        if p:
            return p
    return None


_CHECKS_JS = r"""
(() => {
  const toc = [...document.querySelectorAll('nav#toc a[href^="#"]')].map(a => a.getAttribute('href').slice(1));
  const missing = toc.filter(id => !document.getElementById(decodeURIComponent(id)));
  document.querySelectorAll('details').forEach(d => d.open = true);
  const figs = [...document.querySelectorAll('figure img')].map(img => {
    const r = img.getBoundingClientRect();
    return {alt: img.alt, natural: [img.naturalWidth, img.naturalHeight], box: [r.width, r.height],
            complete: img.complete};
  });
  return JSON.stringify({toc: toc, missing: missing, figures: figs, title: document.title});
})()
"""


class _Cdp:
    def __init__(self, ws_url: str) -> None:
        import websocket  # websocket-client (test dependency)

        self.ws = websocket.create_connection(ws_url, timeout=30, suppress_origin=True)
        self.n = 0
        self.events: list[dict[str, Any]] = []

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.n += 1
        mid = self.n
        self.ws.send(json.dumps({"id": mid, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == mid:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self.events.append(msg)

    def wait_event(self, name: str, timeout_s: float = 30.0) -> dict[str, Any]:
        end = time.monotonic() + timeout_s
        for e in self.events:
            if e.get("method") == name:
                return e
        while time.monotonic() < end:
            msg = json.loads(self.ws.recv())
            self.events.append(msg)
            if msg.get("method") == name:
                return msg
        raise TimeoutError(name)


def check_page(path: Path, screenshot: Path | None = None, *, width: int = 1400, height: int = 1000) -> dict[str, Any]:
    """Load ``path`` in headless Chromium; returns {console_errors, toc,
    missing_toc_targets, figures, title}; writes ``screenshot`` (PNG of the
    first screen) when given.

    Raises:
        RuntimeError: no browser installed, or the browser did not start.
    """
    browser = find_browser()
    if browser is None:
        raise RuntimeError("no Chromium / Chrome installed")
    prof = Path(tempfile.mkdtemp(prefix="flitsim-chromium-"))
    proc = subprocess.Popen([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                             "--remote-debugging-port=0", "--remote-allow-origins=*", f"--user-data-dir={prof}",
                             f"--window-size={width},{height}", "--no-first-run", "about:blank"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        port_file = prof / "DevToolsActivePort"
        end = time.monotonic() + 30
        while not port_file.exists() or not port_file.read_text().strip():
            if time.monotonic() > end or proc.poll() is not None:
                raise RuntimeError(f"{browser} did not start (exit {proc.poll()})")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        pages = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10).read())
        ws = next(p["webSocketDebuggerUrl"] for p in pages if p.get("type") == "page")
        cdp = _Cdp(ws)
        cdp.call("Runtime.enable")
        cdp.call("Log.enable")
        cdp.call("Page.enable")
        cdp.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)
        cdp.call("Page.navigate", url=Path(path).resolve().as_uri())
        cdp.wait_event("Page.loadEventFired")
        time.sleep(0.2)  # let late console messages arrive
        if screenshot is not None:
            shot = cdp.call("Page.captureScreenshot", format="png")
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            screenshot.write_bytes(base64.b64decode(shot["data"]))
        res = json.loads(cdp.call("Runtime.evaluate", expression=_CHECKS_JS, returnByValue=True)["result"]["value"])
        cdp.call("Runtime.evaluate", expression="1", returnByValue=True)  # flush pending events
        errors = []
        for e in cdp.events:
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                errors.append(" ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", [])))
            elif m == "Runtime.exceptionThrown":
                d = p.get("exceptionDetails", {})
                errors.append(d.get("exception", {}).get("description") or d.get("text", "exception"))
            elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                errors.append(p["entry"].get("text", ""))
        cdp.ws.close()
        return {"console_errors": errors, "toc": res["toc"], "missing_toc_targets": res["missing"],
                "figures": res["figures"], "title": res["title"]}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(prof, ignore_errors=True)
