"""The dashboard's series split where the config or device changed (static PNG, report trend, interactive
view), the interactive plotly view (offline, hover with run id / commit / verdict, zoom, per-mode step-time
histograms, user text escaped) checked in a real headless chromium, and the view chosen without plotly.

Histories are made from tests/factories' trials through the real summary (judge.summary.summarize_run),
no training: 12 nights, the config changes at night 6 (another threshold: a new config hash) and the device
at night 9; one amp mode is renamed to carry HTML, one commit too.
"""

from __future__ import annotations

import importlib.util
import json
import math
import re
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ampbench.core.errors import UserError
from ampbench.judge.summary import summarize_run
from ampbench.record.models import Env, RunInfo
from ampbench.report import dashboard_interactive as DI
from ampbench.report import dashboard_plots as D
from ampbench.report import plots as P
from ampbench.report.dashboard_series import Break, breaks, gapped, segments
from ampbench.report.publish import load_suites, publish
from ampbench.results.history import RunSummary, StepTimeHist
from tests.browser import browser  # noqa: F401  # reason: the module's shared chromium (a fixture)
from tests.factories import GPU_ENV, make_suite, make_trials, plan_of

NIGHTS, CONFIG_AT, DEVICE_AT = 12, 6, 9
HOSTILE_MODE = "amp-<b>o1</b>&fp16"       # a mode name in a hand-edited history: HTML, must show as text
HOSTILE_SHA = "<img src=x onerror=alert(1)>"
OTHER_GPU = Env(paddle="3.3.1", device="gpu:0", device_name="NVIDIA Other GPU 80GB", cuda="12.6", python="3.11")


def _lines(nights: int = NIGHTS) -> list[dict[str, Any]]:
    rng = np.random.default_rng(7)
    out = []
    for i in range(nights):
        suite = make_suite(seeds=(0, 1)) if i < CONFIG_AT else make_suite(seeds=(0, 1), min_speedup=1.3)
        env = GPU_ENV if i < DEVICE_AT else OTHER_GPU
        trials = make_trials(suite, rng=rng, n_steps=25, base_time={"fp32": 0.05, "amp-o1-fp16": 0.03},
                             config_hash=suite.config_hash(), env=env)
        info = RunInfo(suite="toy", suite_file="suites/toy.toml", profile="default", run_id=f"night-{i:02d}",
                       config_hash=suite.config_hash(), plan=[{"mode": m, "seed": s} for m, s in plan_of(suite)],
                       config=suite.model_dump(mode="json"), env=env, started=f"2026-10-{i + 1:02d}T02:00:00Z")
        doc = summarize_run(info, suite, trials, None).model_dump(mode="json", by_alias=True)
        doc["git_sha"] = HOSTILE_SHA if i == 4 else f"{i:02d}" + "c" * 38
        amp = doc["modes"].pop("amp-o1-fp16")
        amp["mode"], amp["verdict"] = HOSTILE_MODE, "FAIL" if i == 3 else "PASS"
        doc["modes"][HOSTILE_MODE] = amp
        doc["modes"]["fp32"]["verdict"] = "PASS"
        out.append(RunSummary.model_validate(doc).model_dump(mode="json", by_alias=True))
    return out


def _history(tmp: Path, lines: list[dict[str, Any]]) -> Path:
    hist = tmp / "history"
    hist.mkdir()
    (hist / "toy.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return hist


def _crossings(xs: list[Any], ys: list[Any], cut_at: list[int]) -> list[tuple[float, float]]:
    """Pairs of neighbouring drawn points (no gap between them) with a change between them."""
    out = []
    for (x0, y0), (x1, y1) in zip(zip(xs, ys), zip(xs[1:], ys[1:])):
        if y0 is None or y1 is None or (isinstance(y0, float) and math.isnan(y0)) or \
                (isinstance(y1, float) and math.isnan(y1)):
            continue
        if any(x0 < c <= x1 for c in cut_at):
            out.append((x0, x1))
    return out


@pytest.fixture(scope="module")
def lines() -> list[dict[str, Any]]:
    return _lines()


# ---------------------------------------------------------------- where series break (pure Python)


def test_breaks_at_config_and_device_changes(lines):
    found = breaks(lines)
    assert [(b.index, b.what) for b in found] == [(CONFIG_AT, "config"), (DEVICE_AT, "device")]
    assert found[0].before == lines[0]["config_hash"] and found[0].after == lines[CONFIG_AT]["config_hash"]
    assert found[1].before == "nvidia-test-gpu-24gb" and found[1].label == "device changed"
    assert [list(r) for r in segments(5, [Break(2, "config", "a", "b")])] == [[0, 1], [2, 3, 4]]
    x, y = gapped([0, 1, 3, 4], [1.0, 2.0, 3.0, 4.0], [Break(2, "config", "a", "b")])
    assert x == [0, 1, 1.5, 3, 4] and y == [1.0, 2.0, None, 3.0, 4.0]


def test_step_time_histogram_kept_on_the_history_line(lines):
    h = StepTimeHist.model_validate(lines[-1]["modes"]["fp32"]["step_time_hist"])
    assert sum(h.counts) == 2 * (25 - 5)        # 2 seeds x 25 steps, 5 of them warm-up
    assert 0.03 < h.lo_s < 0.05 < h.lo_s + h.width_s * len(h.counts)
    with pytest.raises(ValueError):
        StepTimeHist(lo_s=0.0, width_s=0.001, counts=[1] * 41)


def test_static_dashboard_and_trend_lines_stop_at_a_change(lines, monkeypatch, tmp_path):
    """Every Line2D matplotlib draws on the dashboard PNG and the report's trend plot: no two neighbouring
    points on either side of a change (the old figure joined night 5 to night 6)."""
    figs = []
    real = P._figure

    def keep(*a, **kw):
        fig, axes = real(*a, **kw)
        figs.append(fig)
        return fig, axes

    monkeypatch.setattr(P, "_figure", keep)
    cuts = breaks(lines)
    D.suite_figure(lines, "accuracy", True, [], None, [], cuts)
    P.trend(lines, tmp_path / "t.png", P.mode_colors(list(lines[0]["modes"])), "accuracy", True)
    drawn = [ln for f in figs for ax in f.axes for ln in ax.get_lines() if len(ln.get_xdata()) > 1]
    assert len(drawn) >= 3 + 3 + 1                       # 3 panels x 2 modes on the PNG (+ speedup), 3 x 2 trend
    for ln in drawn:
        assert _crossings(list(ln.get_xdata()), list(ln.get_ydata()), [CONFIG_AT, DEVICE_AT]) == [], ln.get_label()


def test_static_bins_of_a_long_history_never_span_a_change():
    cuts = [Break(1000, "config", "a", "b"), Break(1001, "device", "x", "y"), Break(2500, "config", "b", "c")]
    bins = D._bins(4000, cuts)
    assert 350 <= len(bins) <= 450 and sum(len(b) for b in bins) == 4000
    assert all(not any(b[0] < c.index <= b[-1] for c in cuts) for b in bins)


def test_interactive_traces_never_cross_a_change_and_escape_user_text(lines):
    fig = DI.history_figure(lines, "accuracy", True, breaks(lines), None)
    series = [t for t in fig.data if t.mode and "lines" in t.mode]
    assert len(series) == 3 * 2 + 1                          # 3 panels x 2 modes + the amp mode's speedup
    for t in series:
        assert _crossings(list(t.x), list(t.y), [CONFIG_AT, DEVICE_AT]) == [], t.name
    assert sorted(s.x0 for s in fig.layout.shapes) == [CONFIG_AT - 0.5, DEVICE_AT - 0.5]
    names = {t.name for t in fig.data}
    assert "amp-&lt;b&gt;o1&lt;/b&gt;&amp;fp16" in names and HOSTILE_MODE not in names
    commits = {row[1] for t in series for row in t.customdata}
    assert "&lt;img src=x" in commits and not any("<" in c for c in commits)


def test_publish_interactive_site_loads_one_shared_plotly_and_nothing_else(lines, tmp_path):
    """The suite page loads plotly.js from the site's own folder (one copy a site, not 4.6 MB inline per page:
    the page was 4.8 MB for 3 runs) and nothing from anywhere else; its size is its figures' data."""
    index = publish(_history(tmp_path, lines), tmp_path / "site", interactive=True)
    page = (index.parent / "toy.html").read_text()
    # a figure per device kind (issue 55: another kind is another level); the step-time histogram of the newest run
    assert page.count('class="plotly-graph-div"') == 3 and "<img" not in page.split("<h2>", 1)[0]
    assert page.count("<h3>Device kind") == 2
    assert re.findall(r"<script[^>]*\bsrc=\"([^\"]+)\"", page) == [DI.PLOTLY_JS]   # the one file beside it
    assert re.search(r"<link\b|<iframe\b", page) is None
    bundle = (index.parent / DI.PLOTLY_JS).read_text()
    assert len(bundle) > 3_000_000 and "plotly" in bundle[:2000].lower()
    assert len(page) < 400_000, len(page)                                   # 12 nights: the data, not the bundle
    assert HOSTILE_MODE not in page and HOSTILE_SHA not in page
    series = page.split("<h2>The series</h2>", 1)[1].split("<h2>", 1)[0]
    assert "config changed at run night-06" in series and "nvidia-other-gpu-80gb" in series


def test_load_suites_keeps_only_the_newest_histogram(lines, tmp_path):
    (_, entries), = load_suites(_history(tmp_path, lines))
    have = [i for i, e in enumerate(entries) if any("step_time_hist" in m for m in e["modes"].values())]
    assert have == [NIGHTS - 1]


def test_view_without_plotly_falls_back_or_exits_2(lines, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from ampbench.cli import app

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "plotly" else real(n, *a))
    interactive, note = DI.resolve_view("auto")
    assert not interactive and note is not None and "ampbench[dashboard]" in note and "\n" not in note
    with pytest.raises(UserError, match=r"plotly is not installed; bash scripts/setup.sh --dashboard \(or pip install "
                                        r"'ampbench\[dashboard\]'\)"):
        DI.resolve_view("interactive")
    hist = _history(tmp_path, lines[:3])
    r = CliRunner().invoke(app, ["publish", str(hist), "-o", str(tmp_path / "s"), "--view", "interactive"])
    errors = [ln for ln in r.output.splitlines() if ln.strip()]
    assert r.exit_code == 2 and len(errors) == 1 and "ampbench[dashboard]" in errors[0], r.output
    r = CliRunner().invoke(app, ["publish", str(hist), "-o", str(tmp_path / "s")])
    assert r.exit_code == 0 and r.output.startswith("note: plotly not installed"), r.output
    assert "plotly-graph-div" not in (tmp_path / "s" / "toy.html").read_text()


# ---------------------------------------------------------------- in a real headless browser

_POINT = """(function(){var g=document.getElementById('plot-history');g.scrollIntoView({block:'start'});
var t=g.data.find(function(d){return d.meta && d.meta.key==='samples_per_s';});var i=t.x.indexOf(%d);
var xa=g._fullLayout.xaxis, ya=g._fullLayout.yaxis, r=g.getBoundingClientRect();
return JSON.stringify({x: r.left + xa._offset + xa.l2p(t.x[i]), y: r.top + ya._offset + ya.l2p(t.y[i]),
 top: r.top + ya._offset, left: r.left + xa._offset, w: xa._length, h: ya._length});})()"""

_LISTEN = """(function(){var g=document.getElementById('plot-history');window.__hover=null;window.__relayout=null;
g.on('plotly_hover',function(d){window.__hover=d.points.map(function(p){return p.customdata;});});
g.on('plotly_relayout',function(d){window.__relayout=d;});return 1;})()"""

_TRACES = """JSON.stringify(Array.from(document.querySelectorAll('.js-plotly-plot')).map(function(g){
 return {id: g.id, traces: g.data.map(function(t){return {mode: t.mode || '', type: t.type || 'scatter',
 x: Array.from(t.x || []), y: Array.from(t.y || []), name: t.name};}),
 shapes: (g.layout.shapes || []).map(function(s){return s.x0;})};}))"""


def _wait(b: Any, expr: str, timeout: float = 10.0) -> Any:
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = b.evaluate(expr)
        if v:
            return v
        time.sleep(0.1)
    raise TimeoutError(expr)


# Not slow: chromium's whole life (start, the page and its 4.6 MB plotly.js, hover, drag, exit) measured 1.24 CPU s
# of children
@pytest.mark.skipif(importlib.util.find_spec("plotly") is None, reason="plotly not installed (dashboard extra)")
def test_interactive_dashboard_in_chromium(lines, tmp_path, browser):  # noqa: F811  # reason: the fixture
    """Opens offline with no console error and no request; a real mouse hover shows the run id, commit and
    verdict; a real drag zooms (plotly_relayout with a narrower x range); no drawn series crosses a change."""
    index = publish(_history(tmp_path, lines), tmp_path / "site", interactive=True)
    got = browser.load(index.parent / "toy.html", settle_s=0.3)
    # the one request: the site's own plotly.js beside the page (file://, offline)
    assert got.errors == [] and got.requests == [(index.parent / DI.PLOTLY_JS).as_uri()], (got.errors, got.requests)
    buttons = json.loads(browser.evaluate("JSON.stringify(Array.from(document.querySelectorAll("
                                          "'.modebar-btn')).map(function(e){return e.getAttribute('data-title');}))"))
    assert "Zoom" in buttons and not any("Share" in t or "Cloud" in t for t in buttons), buttons
    plots = json.loads(browser.evaluate(_TRACES))
    assert [p["id"] for p in plots] == ["plot-history", "plot-history-1", "plot-steps-1"]  # a figure per device kind
    hist, _, steps = plots
    drawn = [t for t in hist["traces"] if "lines" in t["mode"]]
    assert len(drawn) == 7 and sorted(hist["shapes"]) == [CONFIG_AT - 0.5]
    for t in drawn:
        assert _crossings(t["x"], t["y"], [CONFIG_AT]) == [] and max(t["x"]) < DEVICE_AT, t["name"]
    assert [t["type"] for t in steps["traces"]] == ["bar", "bar"] and all(sum(t["y"]) == 40 for t in steps["traces"])

    browser.evaluate(_LISTEN)
    pt = json.loads(browser.evaluate(_POINT % 4))
    browser.mouse("mouseMoved", pt["x"], pt["y"])
    hovered = json.loads(_wait(browser, "JSON.stringify(window.__hover)"))
    assert any(h[0] == "night-04" and h[1].startswith("&lt;img src") and h[2] == "PASS" for h in hovered), hovered
    label = _wait(browser, "(document.querySelector('#plot-history .hoverlayer')||{}).textContent")
    assert "night-04" in label and "<img src" in label and "verdict" in label, label  # escaped: shown as text
    legend = browser.evaluate("document.querySelector('#plot-history .legend').textContent")
    assert HOSTILE_MODE in legend, legend          # its <b> shown as text, not made bold (that would drop it)

    y = pt["top"] + pt["h"] / 2
    browser.mouse("mouseMoved", pt["left"] + pt["w"] * 0.2, y)
    browser.mouse("mousePressed", pt["left"] + pt["w"] * 0.2, y, button="left", buttons=1)
    for k in range(1, 6):
        browser.mouse("mouseMoved", pt["left"] + pt["w"] * (0.2 + 0.06 * k), y, button="left", buttons=1)
    browser.mouse("mouseReleased", pt["left"] + pt["w"] * 0.5, y, button="left", buttons=0)
    zoom = json.loads(_wait(browser, "window.__relayout && JSON.stringify(window.__relayout)"))
    lo, hi = zoom["xaxis.range[0]"], zoom["xaxis.range[1]"]
    assert 0 < lo < hi < NIGHTS - 1 and hi - lo < (NIGHTS - 1) / 2, zoom
    assert browser.errors() == []
