"""`ampbench summary RUN...`: runs compared per mode as a pandas DataFrame, written as md, csv or parquet."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from ampbench.report.compare import compare_frame, write_summary
from ampbench.results import ResultsError
from tests.test_report import ROOT, copy_run, edit_trials, load_trials


@pytest.fixture
def two_runs(tmp_path):
    a = copy_run(tmp_path, "a", run_id="night-1")
    b = copy_run(tmp_path, "b", run_id="night-2")

    def slower(t):
        for s in t["steps"]:
            s["time_s"] *= 1.25
    edit_trials(b, slower)
    return a, b


def expected_rate(run, mode) -> float:
    per_trial = [np.median([s["samples"] / s["time_s"] for s in t["steps"] if not s["warmup"]])
                 for t in load_trials(run) if t["mode"] == mode and t["status"] == "ok"]
    return float(np.exp(np.mean(np.log(per_trial))))  # judge/measure.py: geometric mean of trial medians


def test_frame_numbers(two_runs):
    a, b = two_runs
    df = compare_frame([a, b])
    assert list(df["run_id"].unique()) == ["night-1", "night-2"]
    row = df[(df.run_id == "night-2") & (df["mode"] == "amp-o1-fp16")].iloc[0]
    assert row.samples_per_s == pytest.approx(expected_rate(b, "amp-o1-fp16"))
    assert row.samples_per_s_vs_first == pytest.approx(1 / 1.25 - 1)
    bf16 = df[(df.run_id == "night-1") & (df["mode"] == "amp-o2-bf16")].iloc[0]
    assert (bf16.trials, bf16.ok) == (3, 2)
    hmean = [t["metrics"]["hmean"] for t in load_trials(a) if t["mode"] == "fp32"]
    fp32 = df[(df.run_id == "night-1") & (df["mode"] == "fp32")].iloc[0]
    assert fp32.metric_mean == pytest.approx(np.mean(hmean)) and fp32.metric_sd == pytest.approx(np.std(hmean, ddof=1))


def test_md_csv_parquet(two_runs, tmp_path):
    a, b = two_runs
    md = write_summary([a, b], "md")
    line = next(ln for ln in md.splitlines() if ln.startswith("| `night-2` | `ocr` | `amp-o1-fp16` |"))
    assert "| -20.0% |" in line
    # the mode's figures as report.md's summary table heads and shows them (the field catalog's columns)
    header = [c.strip() for c in md.splitlines()[0].strip("|").split("|")]
    cells = dict(zip(header, (c.strip() for c in line.strip("|").split("|"))))
    assert cells["Samples/s [95% CI]"].startswith("576 [") and cells["Peak memory"] == "9.10 GiB (cuda)"
    assert cells["hmean (mean ± sd)"] == "80.20% ± 0.26 (n=3)" and cells["Skipped steps"] == "3 / 180"
    csv = pd.read_csv(io.StringIO(write_summary([a, b], "csv")))
    assert len(csv) == 8 and set(csv["mode"]) == {"fp32", "amp-o1-fp16", "amp-o2-fp16", "amp-o2-bf16"}
    pytest.importorskip("pyarrow")
    out = write_summary([a, b], "parquet", tmp_path / "s.parquet")
    back = pd.read_parquet(out)
    pd.testing.assert_frame_equal(back, compare_frame([a, b]), check_dtype=False)


@pytest.mark.slow
def test_bad_input_exit_2(two_runs, tmp_path):
    a, _ = two_runs
    with pytest.raises(ResultsError, match="give an output file"):
        write_summary([a], "parquet")
    r = subprocess.run([sys.executable, "-m", "ampbench.cli", "compare", str(a), "--format", "xlsx"],
                       capture_output=True, text=True, cwd=ROOT, check=False)
    assert r.returncode == 2 and "unknown" in r.stderr
    p = min((a / "trials").glob("*.json"))
    t = json.loads(p.read_text())
    t["suite"] = "other"
    p.write_text(json.dumps(t))
    with pytest.raises(ResultsError, match="a trial of suite 'other'"):   # open_run refuses it, as check does
        compare_frame([a])
