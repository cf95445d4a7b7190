"""History as a series on the dashboard and in the trend report, cut where check --history cut it (judge.series, one
segmentation): the nights it FAILed are the regression, named by its commit range in the trend, on the dashboard and
by `history bisect`; a planted 8% step no night FAILed is no regression but shows as the level against the
reference; a config change is marked; pure noise marks nothing (checked in a real browser)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from ampbench.report.publish import publish
from ampbench.report.trend import series_text
from ampbench.results.history import RunSummary
from tests.browser import load_page


def _lines(levels: list[float], seed: int, config_at: int | None = None, failed_from: int | None = None) -> list[dict]:
    rng = np.random.default_rng(seed)
    out = []
    for i, lv in enumerate(levels):
        modes = {}
        for m, base, amp in (("fp32", 1000.0, False), ("amp-o1-fp16", 1700.0, True)):
            v = base * math.exp(lv + rng.normal(0, 0.015))
            failed = failed_from is not None and i >= failed_from
            modes[m] = {"mode": m, "amp_requested": amp, "amp_active": amp, "trials": 3, "ok": 3,
                        "samples_per_s": v, "samples_per_s_ci": [v * 0.99, v * 1.01], "verdict": "PASS",
                        **({"history_status": "FAIL", "history_hold": "fail", "history_change": lv} if failed else
                           {"history_status": "PASS"}),
                        "speedup": 1.7 * math.exp(rng.normal(0, 0.01)) if amp else None,
                        "speedup_ci": [1.65, 1.75] if amp else None, "peak_bytes": 1 << 30, "metric_mean": 0.9}
        cfg = "sha256:bbbb" if config_at is not None and i >= config_at else "sha256:aaaa"
        doc = RunSummary.model_validate({"suite": "toy", "run_id": f"night-{i:02d}", "started": f"2026-10-{i + 1:02d}T02:00:00Z",
                                         "config_hash": cfg, "git_sha": f"{i:02d}" + "c" * 38, "verdict": "PASS",
                                         "metric": "accuracy", "modes": modes})
        out.append(doc.to_json())
    return out


def _history(tmp: Path, lines: list[dict]) -> Path:
    hist = tmp / "history"
    hist.mkdir()
    (hist / "toy.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return hist


def _section(page: str, name: str) -> str:
    return page.split(f"<h2>{name}</h2>", 1)[1].split("<h2>", 1)[0]


def test_a_regression_is_cut_at_the_same_nights_by_the_dashboard_the_trend_and_history_bisect(tmp_path):
    """Nights 12 on FAILed by check --history (recorded in the lines): the one regression, open, named by the commit
    range night-11..night-12 on the dashboard (shaded from there), in the trend and by history bisect."""
    from ampbench.commands.history_bisect import last_regression

    lines = _lines([0.0] * 12 + [math.log(0.92)] * 10, seed=1, failed_from=12)
    hist = _history(tmp_path, lines)
    index = publish(hist, tmp_path / "site", repo_url="https://github.com/o/r")
    page = (index.parent / "toy.html").read_text()
    regs = _section(page, "Regressions")
    assert "open regression" in regs and "10 night(s) from run night-12" in regs and "before it night-11" in regs
    assert 'compare/11' + "c" * 38 + "...12" + "c" * 38 in regs
    assert "No mode went from passing to FAIL/ERROR" in page  # no verdict flipped
    trend = series_text(lines)
    assert "open regression" in trend and "from run `night-12`" in trend and "11cccccccc" in trend
    found = last_regression(hist / "toy.jsonl", "toy")
    assert (found.run_before, found.run_after, found.open) == ("night-11", "night-12", True)
    assert set(found.modes) == {"fp32", "amp-o1-fp16"}
    shot = tmp_path / "dashboard.png"
    got = load_page(index.parent / "toy.html", screenshot=shot)
    assert got.errors == [] and got.info["images"] == got.info["decoded"] == 1
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000


def test_a_step_no_night_failed_is_the_drift_not_a_regression(tmp_path):
    """A planted 8% step in lines appended without check --history: no regression anywhere (one meaning), but the
    level against the reference level says -8% on the dashboard and in the trend."""
    lines = _lines([0.0] * 12 + [math.log(0.92)] * 10, seed=1)
    page = (publish(_history(tmp_path, lines), tmp_path / "site").parent / "toy.html").read_text()
    assert "No regression" in _section(page, "Regressions")
    series = _section(page, "The series")
    assert "level against the reference" in series and ("-8." in series or "-7." in series), series
    trend = series_text(lines)
    assert "No regression" in trend and "level against the reference" in trend


def test_noise_marks_nothing_and_a_config_change_is_marked_not_a_regression(tmp_path):
    lines = _lines([0.0] * 10 + [math.log(0.6)] * 10, seed=2, config_at=10)
    index = publish(_history(tmp_path, lines), tmp_path / "site")
    page = (index.parent / "toy.html").read_text()
    assert "config changed at run night-10" in _section(page, "The series")
    assert "No regression" in _section(page, "Regressions")
    noise = _lines([0.0] * 25, seed=3)
    assert "No regression" in series_text(noise) and "improvement" not in series_text(noise)


def test_report_with_history_puts_the_verdict_before_the_trend(tmp_path):
    from ampbench.report.markdown import write_report
    from tests.test_report import copy_run

    run = copy_run(tmp_path, "a", run_id="night-x", started="2026-10-30T02:00:00+00:00")
    lines = _lines([0.0] * 12 + [math.log(0.92)] * 10, seed=1, failed_from=12)
    for x in lines:
        x["suite"] = "ocr"
    hist = _history(tmp_path, lines)
    (hist / "toy.jsonl").rename(hist / "ocr.jsonl")
    text = write_report([run], output=tmp_path / "r.md", history=hist).read_text()
    assert text.index("**Verdict") < text.index("## Trend") < text.index("**The series**")
    assert "11cccccccc..12cccccccc" in text
