"""A real headless browser for the tests: Debian's chromium driven over the DevTools protocol.

`load_page(path)` opens a file, waits for the load event, and returns the console errors, uncaught
exceptions and failed loads the page produced, plus what a script in the page can see (images decoded).
Tests skip with a reason when chromium or websocket-client is missing (scripts/setup.sh --test installs both).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


@dataclass
class PageLoad:
    errors: list[str] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)


def browser_exe() -> str:
    exe = next((shutil.which(b) for b in BROWSERS if shutil.which(b)), None)
    if exe is None:
        pytest.skip("no chromium on PATH (Debian package chromium; scripts/setup.sh --test installs it)")
    pytest.importorskip("websocket", reason="websocket-client not installed (test extra)")
    return exe


def _start(exe: str, profile: str) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen([exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                             "--no-first-run", "--remote-debugging-port=0", f"--user-data-dir={profile}",
                             "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 30
    assert proc.stderr is not None
    while time.time() < deadline:
        line = proc.stderr.readline()
        m = re.search(r"DevTools listening on ws://[\d.]+:(\d+)/", line)
        if m:
            return proc, int(m.group(1))
        if not line and proc.poll() is not None:
            break
    proc.kill()
    raise RuntimeError("chromium did not start its DevTools endpoint")


class _Session:
    def __init__(self, ws_url: str):
        import websocket

        self.ws = websocket.create_connection(ws_url, timeout=30)
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                return msg.get("result", {})
            self.events.append(msg)

    def wait_for(self, method: str, timeout: float = 30) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if any(e.get("method") == method for e in self.events):
                return
            self.ws.settimeout(max(0.1, deadline - time.time()))
            self.events.append(json.loads(self.ws.recv()))
        raise TimeoutError(method)


def _errors(events: list[dict[str, Any]]) -> list[str]:
    out = []
    for e in events:
        p = e.get("params", {})
        if e.get("method") == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            out.append("console: " + " ".join(str(a.get("value", a.get("description"))) for a in p.get("args", [])))
        elif e.get("method") == "Runtime.exceptionThrown":
            out.append("exception: " + str(p.get("exceptionDetails", {}).get("text")))
        elif e.get("method") == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            out.append("log: " + str(p["entry"].get("text")) + " " + str(p["entry"].get("url", "")))
    return out


_PROBE = """JSON.stringify({title: document.title, images: document.images.length,
 decoded: Array.from(document.images).filter(i => i.complete && i.naturalWidth > 0).length,
 marked: document.body.getAttribute('data-plots-loaded'),
 links: Array.from(document.links).map(a => a.getAttribute('href'))})"""


def load_page(path: Path, settle_s: float = 0.5, screenshot: Path | None = None) -> PageLoad:
    """`screenshot`: also write a PNG of the full page there (Page.captureScreenshot)."""
    exe = browser_exe()
    # chromium's helper processes can still write the profile after the browser exits: a leftover file
    # in a temporary folder is no test failure
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as profile:
        proc, port = _start(exe, profile)
        try:
            targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10))
            page = next(t for t in targets if t.get("type") == "page")
            s = _Session(page["webSocketDebuggerUrl"])
            for domain in ("Runtime", "Log", "Page"):
                s.call(f"{domain}.enable")
            s.call("Page.navigate", url=Path(path).resolve().as_uri())
            s.wait_for("Page.loadEventFired")
            time.sleep(settle_s)
            res = s.call("Runtime.evaluate", expression=_PROBE, returnByValue=True)
            if screenshot is not None:
                import base64

                shot = s.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
                Path(screenshot).write_bytes(base64.b64decode(shot["data"]))
            s.ws.close()
            return PageLoad(errors=_errors(s.events), info=json.loads(res["result"]["value"]))
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
