"""`ampbench publish`: the static dashboard, checked in a real headless browser (chromium over DevTools)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ampbench.commands.history import append_history
from ampbench.report.publish import publish, verdict_changes
from ampbench.results import ResultsError
from tests.browser import browser, load_page  # noqa: F401  # reason: browser is a fixture
from tests.test_report import ROOT, copy_run

GOOD_SHA, BAD_SHA = "1111111111aaaaaaaaaa", "2222222222bbbbbbbbbb"


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("pub")
    a = copy_run(tmp, "a", run_id="night-1", started="2025-03-01T02:00:00+00:00")
    b = copy_run(tmp, "b", run_id="night-2", started="2025-03-02T02:00:00+00:00")
    hist = tmp / "history"
    for r in (a, b):
        append_history(r, hist)
    lines = [json.loads(x) for x in (hist / "ocr.jsonl").read_text().splitlines()]
    for m in lines[0]["modes"].values():   # night 1 passed everywhere; night 2 is the fixture's FAIL/ERROR
        m["verdict"], m["flagged_rules"] = ("PASS", []) if m["amp_requested"] else (m["verdict"], [])
    lines[0]["git_sha"], lines[1]["git_sha"] = GOOD_SHA, BAD_SHA
    (hist / "ocr.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    archived = hist / "reports" / "ocr" / "night-1.html"   # where nightly.sh archives a report
    archived.parent.mkdir(parents=True)
    archived.write_text("<!DOCTYPE html><html><head><title>archived</title></head><body>archived</body></html>")
    index = publish(hist, tmp / "site", repo_url="https://github.com/o/r")
    return index, tmp


def test_pages_regressions_and_links(site):
    index, _ = site
    out = index.parent
    assert (out / "ocr.html").is_file()
    assert '<a href="ocr.html">ocr</a>' in index.read_text()
    page = (out / "ocr.html").read_text()
    regs = page.split("<h2>Verdict changes</h2>", 1)[1].split("<h2>", 1)[0]
    assert "<code>amp-o2-fp16</code> (accuracy-parity, stability): last good run night-1, first bad run night-2" in regs
    assert f'href="https://github.com/o/r/compare/{GOOD_SHA}...{BAD_SHA}">1111111111..2222222222</a>' in regs
    assert "<code>amp-o2-bf16</code> (completeness)" in regs and "amp-o1-fp16" not in regs
    assert (out / "reports/ocr/night-1.html").read_text().endswith("archived</body></html>")
    made = (out / "reports/ocr/night-2.html").read_text()      # made from the run folder: self-contained
    assert 'src="data:image/png;base64,' in made and 'src="plots/' not in made
    assert 'href="reports/ocr/night-2.html"' in page


def test_verdict_changes_rule():
    def e(*verdicts):
        return [{"modes": {"m": {"verdict": v}}} for v in verdicts]
    assert [(r.good, r.bad) for r in verdict_changes(e("PASS", "FAIL", "FAIL", "PASS", "not checked", "ERROR"))] == \
        [(0, 1), (3, 5)]
    assert verdict_changes(e("PASS", "INCONCLUSIVE", "PASS")) == []


@pytest.mark.slow
def test_dashboard_loads_in_a_browser_without_errors(site, browser):  # noqa: F811  # reason: the fixture
    index, _ = site
    for page in (index, index.parent / "ocr.html"):
        got = browser.load(page)
        assert got.errors == [], (page.name, got.errors)
        assert got.info["images"] == got.info["decoded"] == int(got.info["marked"])
        assert got.requests == [], got.requests                  # every plot inline: nothing fetched
    suite = browser.load(index.parent / "ocr.html")
    assert suite.info["images"] == 1 and suite.info["title"] == "ampbench: ocr"
    assert "reports/ocr/night-2.html" in suite.info["links"]
    report = browser.load(index.parent / "reports/ocr/night-2.html")   # the run report: every plot inline
    assert report.errors == [] and report.info["images"] >= 3 and report.info["decoded"] == report.info["images"]


def test_browser_check_catches_errors(tmp_path):
    """The harness itself: a page with a console error and a missing image must not pass."""
    bad = tmp_path / "bad.html"
    bad.write_text("<!DOCTYPE html><html><body><img src='missing.png'><script>console.error('boom')</script>"
                   "</body></html>")
    got = load_page(bad)
    assert any("boom" in e for e in got.errors) and any("missing.png" in e for e in got.errors)
    assert got.info["decoded"] == 0


@pytest.mark.slow
def test_bad_history_is_exit_2(tmp_path):
    with pytest.raises(ResultsError, match="history folder not found"):
        publish(tmp_path / "nope", tmp_path / "site")
    (tmp_path / "h").mkdir()
    r = subprocess.run([sys.executable, "-m", "ampbench.cli", "publish", str(tmp_path / "h"), "-o", str(tmp_path / "s")],
                       capture_output=True, text=True, cwd=ROOT, check=False)
    assert r.returncode == 2 and "no <suite>.jsonl" in r.stderr


def test_serve_gives_the_sites_files_on_loopback_and_nothing_else(site, tmp_path):
    """`publish --serve`'s server: the site's pages over HTTP on 127.0.0.1, a path out of the folder or through
    a link inside it not found, a port in use refused in one line."""
    import threading
    import urllib.error
    import urllib.request

    from ampbench.commands.serve import HOST, site_server
    from ampbench.core.errors import UserError

    index, _ = site
    folder = tmp_path / "site"
    import shutil

    shutil.copytree(index.parent, folder)
    (tmp_path / "secret.txt").write_text("not the site's")
    (folder / "link.txt").symlink_to(tmp_path / "secret.txt")
    server = site_server(folder, 0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    base = f"http://{HOST}:{server.server_address[1]}"
    try:
        assert server.server_address[0] == "127.0.0.1"
        with urllib.request.urlopen(f"{base}/") as r:
            assert r.status == 200 and b"ampbench dashboard" in r.read()
        with urllib.request.urlopen(f"{base}/ocr.html") as r:
            assert r.status == 200
        for path in ("/link.txt", "/../secret.txt", "/%2e%2e/secret.txt"):
            with pytest.raises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(base + path)
            assert e.value.code == 404, path
        with pytest.raises(UserError, match=r"--port \d+: cannot serve on 127.0.0.1"):
            site_server(folder, server.server_address[1])   # taken
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.slow
def test_publish_serve_from_the_command_line_until_ctrl_c(site, tmp_path):
    import os
    import re
    import signal
    import urllib.request

    _, tmp = site
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "ampbench.cli", "publish", str(tmp / "history"), "-o",
                             str(tmp_path / "served"), "--view", "static", "--serve", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    assert proc.stdout is not None
    said = []
    for line in proc.stdout:
        said.append(line)
        if (m := re.search(r"at (http://127\.0\.0\.1:\d+/) \(Ctrl-C stops\)", line)):
            break
    else:
        pytest.fail("".join(said))
    with urllib.request.urlopen(m.group(1) + "index.html") as r:
        assert r.status == 200 and b"ampbench dashboard" in r.read()
    proc.send_signal(signal.SIGINT)
    rest = proc.communicate(timeout=60)[0]
    assert proc.returncode == 130 and "interrupted" in rest, rest
