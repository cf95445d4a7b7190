"""Issue 40: a regression never becomes the baseline by default.

Night after night through the real path (run folder -> `check --history` -> `history append`): a night
that history-throughput FAILed stays out of the pooled baseline (judge.series), so the next nights are judged
against the good level, each on its own figures; `history append` says the regression is open and since
when, the dashboard lists it;
`ampbench history accept` (the real CLI) records who accepted the new level and why, and the next night
is judged against it.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ampbench.commands.check import check_run
from ampbench.commands.history import append_history, open_after_append
from ampbench.judge import pooled
from ampbench.report.dashboard_series import views
from ampbench.results.accepts import accepts_path, load_accepts
from ampbench.results.history import history_file, iter_history_rows, load_history
from tests.factories import StepNoise, make_run, make_suite, make_trials

NOISE = StepNoise(step_sd=0.03, trial_sd=0.02)


def _night(root: Path, suite, name: str, level: float, rng: np.random.Generator) -> Path:
    lvl = level * math.exp(rng.normal(0, 0.01))
    trials = make_trials(suite, base_time={m.name: 0.05 / lvl for m in suite.modes}, rng=rng, noise=NOISE)
    return make_run(root, suite, trials, run_id=name)


def _nightly(tmp_path: Path, suite, hist: Path, name: str, level: float, rng: np.random.Generator) -> list:
    """One night as nightly.sh does it: run, check --history, history append; its history-throughput results."""
    run = _night(tmp_path / "runs", suite, name, level, rng)
    rep = check_run(run, history=hist)
    append_history(run, hist)
    return [r for v in rep.verdicts for r in v.rules if r.rule == "history-throughput"]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ampbench.cli", *args], capture_output=True, text=True, timeout=120,
                          check=False)


def test_a_regression_stays_out_of_the_baseline_until_accepted(tmp_path):
    suite = make_suite(seeds=[0, 1, 2])
    hist, rng = tmp_path / "hist", np.random.default_rng(3)
    for i in range(10):
        append_history(_night(tmp_path / "series", suite, f"a{i:02d}", 1.0, rng), hist)
    good = {f"a{i:02d}" for i in range(10)}
    for i in range(4):  # a 20% slowdown lands: every night FAILs, and none of them joins the pool
        rules = _nightly(tmp_path, suite, hist, f"b{i:02d}", 0.8, rng)
        assert {r.status for r in rules} == {"FAIL"}, [r.message for r in rules]
        assert all(set(r.details["baseline_runs"]) <= good for r in rules)
        if i:
            assert {r.details["open_regression"] for r in rules} == {"b00"}
    lines = {h.run_id: h for h in load_history(history_file(hist, "toy"))}
    assert all(m.history_status == "FAIL" and m.history_change < -0.15 for m in lines["b03"].modes.values())
    said = open_after_append(tmp_path / "runs" / "toy" / "b03", hist)
    assert len(said) == 1 and "open regression since run b00" in said[0] and "history accept" in said[0]
    rows = list(iter_history_rows(history_file(hist, "toy"), trials=False))
    (series,) = views(rows)  # what the dashboard and the trend list: the same cut as check's
    assert [(sorted(r.modes), rows[r.first]["run_id"], r.open) for r in series.regressions] == [
        (["amp-o1-fp16", "fp32"], "b00", True)]

    # the real CLI records who accepted the level and why; the next night is judged against it
    proc = _cli("history", "accept", str(hist), "--suite", "toy", "--by", "alice", "--why", "new <fused> kernel")
    assert proc.returncode == 0, proc.stderr
    assert "from run b00" in proc.stdout and "alice" in proc.stdout
    (rec,) = load_accepts(history_file(hist, "toy"), "toy")
    assert (rec.run_id, rec.by, rec.why) == ("b00", "alice", "new <fused> kernel") and rec.cleared[0] == "b00"
    assert json.loads(accepts_path(history_file(hist, "toy")).read_text())["schema"] == "ampbench.history-accepts/1"
    rules = _nightly(tmp_path, suite, hist, "c00", 0.8, rng)
    assert {r.status for r in rules} == {"PASS"}, [r.message for r in rules]
    assert all(set(r.details["baseline_runs"]) == {f"b{i:02d}" for i in range(4)} for r in rules)
    assert all("accepted from run b00 by alice" in r.message for r in rules)
    assert open_after_append(tmp_path / "runs" / "toy" / "c00", hist) == []


def test_later_nights_are_judged_on_their_own_figures_and_the_regression_stays_open(tmp_path):
    """Issue 55: after a FAILed night no later night is FAILed for it: a night whose own figures do not demonstrate
    a slowdown is not FAILed (the rule carried an earlier FAIL over before), while the regression it belongs to
    stays open as long as the newest nights are held out, and asks for an accept."""
    suite = make_suite(seeds=[0, 1, 2])
    hist, rng = tmp_path / "hist", np.random.default_rng(4)
    for i in range(10):
        append_history(_night(tmp_path / "series", suite, f"a{i:02d}", 1.0, rng), hist)
    for i in range(4):
        _nightly(tmp_path, suite, hist, f"b{i:02d}", 0.8, rng)
    rules = _nightly(tmp_path, suite, hist, "b04", 0.97, rng)
    assert not any(r.status == "FAIL" for r in rules), [r.message for r in rules]
    assert not any("open-regression" in r.details["reasons"] for r in rules)
    assert all("open regression since run b00" in r.message for r in rules)
    series = load_history(history_file(hist, "toy"))
    seg = pooled.select(series)
    assert not {"b00", "b01", "b02", "b03"} & set(seg.run_ids)  # the FAILed nights stay out
    # b04 was not held out: the regression is closed (the level recovered), its FAILed nights stay out
    if not any(m.history_hold for m in series[-1].modes.values()):
        assert seg.open_regression is None
        assert {(r.first, r.last, r.open) for r in seg.seg.regressions} == {(10, 13, False)}
    rules = _nightly(tmp_path, suite, hist, "b05", 0.8, rng)
    assert {r.status for r in rules} == {"FAIL"} and all(r.details["fail_upper"] < 0.95 for r in rules)


@pytest.mark.slow
def test_accept_refuses_without_an_open_regression_in_one_line(tmp_path):
    suite = make_suite(seeds=[0, 1, 2])
    hist, rng = tmp_path / "hist", np.random.default_rng(5)
    for i in range(4):
        append_history(_night(tmp_path / "series", suite, f"a{i:02d}", 1.0, rng), hist)
    proc = _cli("history", "accept", str(hist), "--suite", "toy", "--by", "bob", "--why", "x")
    assert proc.returncode == 2 and "no open regression" in proc.stderr and "--run" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    proc = _cli("history", "accept", str(hist), "--suite", "toy", "--run", "zz", "--by", "bob", "--why", "x")
    assert proc.returncode == 2 and "'zz' is not a run" in proc.stderr
    proc = _cli("history", "accept", str(hist), "--suite", "toy", "--run", "a01", "--by", "", "--why", "x")
    assert proc.returncode == 2 and proc.stderr.strip().startswith("error: --by:") and "Traceback" not in proc.stderr
    assert not accepts_path(history_file(hist, "toy")).exists()
    bad = accepts_path(history_file(hist, "toy"))
    bad.write_text('{"schema": "ampbench.history-accepts/1", "accepts": [{"suite": "toy"}]}')
    proc = _cli("check", str(tmp_path / "series" / "toy" / "a03"), "--history", str(hist))
    assert proc.returncode == 2 and "accepts.0.run_id" in proc.stderr and str(bad) in proc.stderr
