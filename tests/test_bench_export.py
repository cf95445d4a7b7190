"""`ampbench compare RUN --format pytest-benchmark`: a run's step times as pytest-benchmark JSON that `pytest-benchmark compare` loads."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ampbench.report.benchmark_export import export_document, export_run
from ampbench.results import ResultsError
from tests.factories import CPU_ENV, make_run, make_suite, make_trial

FP32_TIMES = [0.9, 0.8] + [0.10, 0.12, 0.11, 0.13, 0.10, 0.30]   # two warm-up steps, then measured
AMP_TIMES = [0.9, 0.7] + [0.05, 0.06, 0.05, 0.07, 0.05, 0.20]


def _run(tmp_path: Path, run_id: str = "r1", amp_scale: float = 1.0, **kw) -> Path:
    suite = make_suite(seeds=(0,))
    trials = [make_trial("fp32", 0, times=FP32_TIMES, warmup=2, samples=8, **kw),
              make_trial("amp-o1-fp16", 0, times=[t * amp_scale for t in AMP_TIMES], warmup=2, samples=16, **kw),
              make_trial("amp-o1-fp16", 1, status="crashed", times=[1.0] * 8, warmup=2)]  # not exported
    return make_run(tmp_path, suite, trials, run_id=run_id)


def test_stats_come_from_the_measured_steps_only(tmp_path: Path) -> None:
    doc = export_document(_run(tmp_path))
    by = {(b["group"], b["param"]): b for b in doc["benchmarks"]}
    assert set(by) == {("toy: seconds per step", "fp32"), ("toy: seconds per step", "amp-o1-fp16"),
                       ("toy: seconds per sample", "fp32"), ("toy: seconds per sample", "amp-o1-fp16")}
    step = by[("toy: seconds per step", "amp-o1-fp16")]["stats"]
    assert step["data"] == AMP_TIMES[2:] and step["rounds"] == 6       # warm-up and the crashed trial left out
    assert step["median"] == pytest.approx(float(np.median(AMP_TIMES[2:])))
    assert step["mean"] == pytest.approx(float(np.mean(AMP_TIMES[2:])))
    per_sample = by[("toy: seconds per sample", "amp-o1-fp16")]["stats"]
    assert per_sample["ops"] == pytest.approx(16 / float(np.mean(AMP_TIMES[2:])))  # OPS column = samples/s
    assert by[("toy: seconds per step", "fp32")]["extra_info"]["batch_size"] == [8]
    assert "note" not in by[("toy: seconds per step", "amp-o1-fp16")]["extra_info"]  # GPU-like trials: AMP active


def test_inactive_amp_is_labelled(tmp_path: Path) -> None:
    doc = export_document(_run(tmp_path, amp_active=False, env=CPU_ENV))
    amp = next(b for b in doc["benchmarks"] if b["param"] == "amp-o1-fp16")
    assert amp["extra_info"]["amp_active"] is False and "AMP inactive" in amp["extra_info"]["note"]


def test_emulated_amp_is_labelled_not_an_amp_timing(tmp_path: Path) -> None:
    amp = make_trial("amp-o1-fp16", 0, times=AMP_TIMES, warmup=2, samples=16, amp_active=False, env=CPU_ENV)
    amp.amp.emulated = True
    run = make_run(tmp_path, make_suite(seeds=(0,)), [make_trial("fp32", 0, times=FP32_TIMES, warmup=2, env=CPU_ENV), amp])
    b = next(b for b in export_document(run)["benchmarks"] if b["param"] == "amp-o1-fp16")
    assert b["extra_info"]["amp_emulated"] is True and "emulated AMP" in b["extra_info"]["note"]


def test_a_run_without_ok_trials_is_an_error(tmp_path: Path) -> None:
    suite = make_suite(seeds=(0,))
    run = make_run(tmp_path, suite, [make_trial("fp32", 0, status="crashed")])
    with pytest.raises(ResultsError, match="no ok trial"):
        export_run(run, tmp_path / "out.json")


def test_export_loads_in_pytest_benchmark_compare(tmp_path: Path) -> None:
    folder = tmp_path / "exports"
    folder.mkdir()
    a = export_run(_run(tmp_path / "a", run_id="before"), folder)
    b = export_run(_run(tmp_path / "b", run_id="after", amp_scale=0.5), folder)
    assert (a.name, b.name) == ("before.json", "after.json")  # a folder gets <run_id>.json
    proc = subprocess.run([sys.executable, "-m", "pytest_benchmark", "compare", str(a), str(b), "--group-by=group",
                           f"--csv={tmp_path / 'cmp'}"], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "Failed to load" not in proc.stdout + proc.stderr  # compare only warns on a bad file
    assert "toy[amp-o1-fp16]" in proc.stdout and "toy: seconds per sample" in proc.stdout
    with open(tmp_path / "cmp.csv") as fh:
        rows = list(csv.DictReader(fh))
    means = sorted(float(r["mean"]) for r in rows if r["name"] == "ampbench/toy::step[amp-o1-fp16]")
    m = float(np.mean(AMP_TIMES[2:]))
    assert means == pytest.approx([m * 0.5, m])  # the faster "after" run and the "before" run, side by side
