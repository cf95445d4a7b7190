"""History lines (results/history/<suite>.jsonl) and the per-mode run summary behind them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from ampbench.commands.history import append_history
from ampbench.commands.history import summarize_run_dir as summarize_run
from ampbench.results import ResultsError
from ampbench.results.history import HISTORY_SCHEMA, load_history

FIXTURE = Path(__file__).parent / "fixtures" / "gpu_run"


def copy_run(tmp_path: Path, name: str = "run", run_id: str | None = None, started: str | None = None) -> Path:
    dst = tmp_path / name
    shutil.copytree(FIXTURE, dst)
    if run_id or started:
        p = dst / "run.json"
        info = json.loads(p.read_text())
        info["run_id"] = run_id or info["run_id"]
        info["started"] = started or info["started"]
        p.write_text(json.dumps(info))
    return dst


def raw_trials(run: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((run / "trials").glob("*.json"))]


def test_summary_numbers_come_from_raw_steps(tmp_path):
    run = copy_run(tmp_path)
    s = summarize_run(run)
    trials = raw_trials(run)

    def rates(mode):
        return [st["samples"] / st["time_s"] for t in trials if t["mode"] == mode and t["status"] == "ok"
                for st in t["steps"] if not st["warmup"]]

    def per_trial(mode):  # judge/measure.py: each trial's median rate, then their geometric mean
        meds = [np.median([st["samples"] / st["time_s"] for st in t["steps"] if not st["warmup"]])
                for t in trials if t["mode"] == mode and t["status"] == "ok"]
        return float(np.exp(np.mean(np.log(meds))))

    fp32, o1 = s.modes["fp32"], s.modes["amp-o1-fp16"]
    assert rates("fp32")
    assert fp32.samples_per_s == pytest.approx(per_trial("fp32"))
    assert o1.speedup == pytest.approx(per_trial("amp-o1-fp16") / per_trial("fp32"))
    lo, hi = o1.speedup_ci
    assert lo < o1.speedup < hi and hi - lo < 0.2
    lo, hi = fp32.samples_per_s_ci
    assert lo < fp32.samples_per_s < hi
    assert o1.memory_reduction == pytest.approx(1 - 9.1 / 15.0, abs=1e-6)
    ref = [t["metrics"]["hmean"] for t in trials if t["mode"] == "fp32"]
    assert fp32.metric_mean == pytest.approx(np.mean(ref))
    assert fp32.metric_std == pytest.approx(np.std(ref, ddof=1))
    bf16 = s.modes["amp-o2-bf16"]
    assert (bf16.trials, bf16.ok, bf16.statuses) == (3, 2, {"ok": 2, "crashed": 1})
    assert bf16.metric_n == 2
    o2 = s.modes["amp-o2-fp16"]
    assert o2.skipped_steps == sum(t["skipped_steps"] for t in trials if t["mode"] == "amp-o2-fp16")
    assert (o2.verdict, o2.flagged_rules) == ("FAIL", ["accuracy-parity", "stability"])
    assert s.verdict == "ERROR" and s.exit_code == 2
    assert s.device_name == "NVIDIA A100-SXM4-40GB" and s.metric == "hmean"


def test_summary_uses_the_checkers_speedup_interval(tmp_path):
    run = copy_run(tmp_path)
    p = run / "check.json"
    check = json.loads(p.read_text())
    for v in check["verdicts"]:
        for r in v["rules"]:
            if r["rule"] == "speedup" and v["mode"] == "amp-o1-fp16":
                r["details"] = {"estimate": 1.777, "ci_low": 1.701, "ci_high": 1.802}
    p.write_text(json.dumps(check))
    s = summarize_run(run)
    assert s.modes["amp-o1-fp16"].speedup_ci == (1.701, 1.802)  # the checker's interval, as check.json has it
    assert s.modes["amp-o1-fp16"].speedup != 1.777  # the point is the one measurement definition, not copied


def test_unchecked_run(tmp_path):
    run = copy_run(tmp_path)
    (run / "check.json").unlink()
    s = summarize_run(run)
    assert s.verdict == "not checked" and s.exit_code is None
    assert all(m.verdict == "not checked" for m in s.modes.values())


def test_append_and_load(tmp_path):
    hist = tmp_path / "history"
    a = copy_run(tmp_path, "a", run_id="run-a", started="2025-03-02T02:00:00+00:00")
    b = copy_run(tmp_path, "b", run_id="run-b", started="2025-03-01T02:00:00+00:00")
    path = append_history(a, hist)
    assert path == hist / "ocr.jsonl"
    assert append_history(b, hist) == path
    append_history(a, hist)  # a re-check of the same run replaces its line
    lines = path.read_text().splitlines()
    assert len(lines) == 2
    first = json.loads(lines[0])
    # compact: no per-step data (a mode's step times are at most 40 histogram counts, step_time_hist)
    assert first["schema"] == HISTORY_SCHEMA and len(lines[0]) < 7000
    assert all(len(m.get("step_time_hist", {}).get("counts", [])) <= 40 for m in first["modes"].values())
    entries = load_history(path)
    assert [e.run_id for e in entries] == ["run-b", "run-a"]  # oldest first, typed RunSummary lines
    e = entries[-1]
    assert e.verdict == "ERROR"
    assert e.modes["amp-o2-fp16"].flagged_rules == ["accuracy-parity", "stability"]
    assert e.modes["fp32"].peak_bytes == int(15.0 * 1024**3)


def test_load_history_names_the_bad_line(tmp_path):
    hist = tmp_path / "h"
    path = append_history(copy_run(tmp_path), hist)
    with path.open("a") as f:
        f.write('{"schema": "ampbench.history/1", "suite": "ocr", "run_id": "x", "modes": {"fp32": {"mode": 3}}\n')
    with pytest.raises(ResultsError, match=r"ocr.jsonl:2: .*not valid JSON"):
        load_history(path)
    path.write_text('{"schema": "something/else", "run_id": "x"}\n')
    with pytest.raises(ResultsError, match=r"ocr.jsonl:1: not an ampbench file .*ampbench.history/1"):
        load_history(path)
    with pytest.raises(ResultsError, match="history file not found"):
        load_history(tmp_path / "missing.jsonl")


def test_append_refuses_to_extend_a_corrupt_file(tmp_path):
    hist = tmp_path / "h"
    hist.mkdir()
    (hist / "ocr.jsonl").write_text("not json\n")
    with pytest.raises(ResultsError, match="ocr.jsonl:1"):
        append_history(copy_run(tmp_path), hist)
    assert (hist / "ocr.jsonl").read_text() == "not json\n"


def test_publish_rows_leave_the_per_trial_figures_out_but_validate_them(tmp_path):
    """iter_history_rows(trials=False): what publish holds for 100,000 runs has no per_trial (it took the
    benchmark over 1 GB), and a bad per_trial value is still refused with its file:line."""
    import json as _json

    from ampbench.core.errors import ResultsError
    from ampbench.results.history import iter_history_rows

    line = {"schema": "ampbench.history/1", "suite": "s", "run_id": "r1", "modes": {"fp32": {
        "mode": "fp32", "samples_per_s": 10.0, "per_trial": [{"seed": 0, "samples_per_s": 10.0,
                                                             "floor_samples_per_s": 11.0}]}}}
    path = tmp_path / "s.jsonl"
    path.write_text(_json.dumps(line) + "\n")
    full = next(iter_history_rows(path))
    lean = next(iter_history_rows(path, trials=False))
    assert full["modes"]["fp32"]["per_trial"][0]["floor_samples_per_s"] == 11.0
    assert "per_trial" not in lean["modes"]["fp32"] and lean["modes"]["fp32"]["samples_per_s"] == 10.0
    line["modes"]["fp32"]["per_trial"][0]["floor_samples_per_s"] = 0
    path.write_text(_json.dumps(line) + "\n")
    with pytest.raises(ResultsError, match=r"s\.jsonl:1: .*floor_samples_per_s"):
        next(iter_history_rows(path, trials=False))
