"""A real headless browser for the tests: Debian's chromium driven over the DevTools protocol.

`load_page(path)` opens a file, waits for the load event, and returns the console errors, uncaught
exceptions and failed loads the page produced, plus what a script in the page can see (images decoded)
and the requests it made.  `Browser` keeps one chromium for several pages and drives them: scripts in
the page (`evaluate`) and real mouse input (`mouse`, Input.dispatchMouseEvent).
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
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


@dataclass
class PageLoad:
    errors: list[str] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)  # besides the page itself and data: URIs


def browser_exe() -> str:
    exe = next((shutil.which(b) for b in BROWSERS if shutil.which(b)), None)
    if exe is None:
        pytest.skip("no chromium on PATH (Debian package chromium; scripts/setup.sh --test installs it)")
    pytest.importorskip("websocket", reason="websocket-client not installed (test extra)")
    return exe


def _start(exe: str, profile: str) -> tuple[subprocess.Popen, int]:
    """Chromium with its DevTools endpoint; a start that fails (it exited, or said nothing usable within
    60 s: seen once with three test workers on two cores) is tried once more, then raised with what
    chromium printed."""
    said: list[str] = []
    for attempt in range(2):   # each attempt its own profile: a killed chromium may leave its lock behind
        proc = subprocess.Popen([exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                                 "--no-first-run", "--remote-debugging-port=0", f"--user-data-dir={profile}/{attempt}",
                                 "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 60
        assert proc.stderr is not None
        while time.time() < deadline:
            line = proc.stderr.readline()
            m = re.search(r"DevTools listening on ws://[\d.]+:(\d+)/", line)
            if m:
                return proc, int(m.group(1))
            said.append(line.rstrip())
            if not line and proc.poll() is not None:
                break
        proc.kill()
        proc.wait()
    raise RuntimeError("chromium did not start its DevTools endpoint: " + " | ".join(x for x in said if x)[-1500:])


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


class Browser:
    """One headless chromium and its page, reused across loads (a module-scoped fixture shares it: one
    start instead of one per page).  `load` clears what the previous page left (events, requests)."""

    def __init__(self) -> None:
        exe = browser_exe()
        # chromium's helper processes can still write the profile after the browser exits: a leftover file
        # in a temporary folder is no test failure
        self._profile = tempfile.TemporaryDirectory(ignore_cleanup_errors=True)
        self.proc, port = _start(exe, self._profile.name)
        try:
            targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10))
            page = next(t for t in targets if t.get("type") == "page")
            self.s = _Session(page["webSocketDebuggerUrl"])
            for domain in ("Runtime", "Log", "Page", "Network"):
                self.s.call(f"{domain}.enable")
        except BaseException:
            self.close()
            raise

    def load(self, path: Path, settle_s: float = 0.5, screenshot: Path | None = None) -> PageLoad:
        """Open a file, wait for its load event; errors, the probe's view, and every request it made."""
        self.s.events.clear()
        url = Path(path).resolve().as_uri()
        self.s.call("Page.navigate", url=url)
        self.s.wait_for("Page.loadEventFired")
        time.sleep(settle_s)
        info = self.evaluate(_PROBE)
        if screenshot is not None:
            import base64

            shot = self.s.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
            Path(screenshot).write_bytes(base64.b64decode(shot["data"]))
        return PageLoad(errors=_errors(self.s.events), info=json.loads(info), requests=self.requests(url))

    def requests(self, own: str = "") -> list[str]:
        """URLs the page asked for so far, besides itself and data: URIs (which never leave the page)."""
        return [u for e in self.s.events if e.get("method") == "Network.requestWillBeSent"
                and (u := str(e["params"]["request"]["url"])) != own and not u.startswith("data:")]

    def evaluate(self, expression: str, await_promise: bool = False) -> Any:
        res = self.s.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=await_promise)
        if "exceptionDetails" in res:
            raise RuntimeError(f"page script failed: {res['exceptionDetails']}")
        return res["result"].get("value")

    def mouse(self, kind: str, x: float, y: float, button: str = "none", buttons: int = 0) -> None:
        """A real input event (Input.dispatchMouseEvent): mouseMoved, mousePressed or mouseReleased."""
        self.s.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button=button, buttons=buttons,
                    clickCount=1 if kind != "mouseMoved" else 0)

    def errors(self) -> list[str]:
        return _errors(self.s.events)

    def close(self) -> None:
        if getattr(self, "s", None) is not None:
            self.s.ws.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._profile.cleanup()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One chromium for a test module's pages (import this fixture into the module): its CPU is charged
    when it is reaped, at the teardown of the module's last test that uses it, so mark those tests slow."""
    b = Browser()
    yield b
    b.close()


def load_page(path: Path, settle_s: float = 0.5, screenshot: Path | None = None) -> PageLoad:
    """`screenshot`: also write a PNG of the full page there (Page.captureScreenshot). A chromium of its own."""
    b = Browser()
    try:
        return b.load(path, settle_s, screenshot)
    finally:
        b.close()
