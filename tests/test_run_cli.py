"""`ampbench run` end to end on the toy workload: exit codes, run folder, faults and --resume."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from ampbench.cli import app
from ampbench.results import RunDir

cli = CliRunner()


def run_cli(*args: str, env: dict[str, str] | None = None):
    return cli.invoke(app, list(args), env={"COLUMNS": "200", **(env or {})})


def only_run(out: Path) -> Path:
    runs = [p for p in (out / "toy").iterdir() if p.is_dir()]
    assert len(runs) == 1
    return runs[0]


def test_bad_suite_exits_2_with_one_line(toy_suite, tmp_path):
    p = toy_suite(body=toy_suite().read_text().replace('level = "O1"', 'level = "O9"'))
    r = run_cli("run", str(p), "--out", str(tmp_path / "runs"))
    assert r.exit_code == 2
    assert "modes[1] (amp-o1-fp16).level" in r.output and str(p) in r.output
    assert "Traceback" not in r.output
    assert not (tmp_path / "runs").exists()  # nothing half-created


def test_missing_suite_file_exits_2(tmp_path):
    r = run_cli("run", str(tmp_path / "nope.toml"))
    assert r.exit_code == 2 and "suite file not found" in r.output


@pytest.mark.slow
def test_run_crash_then_resume(toy_suite, tmp_path, cache_env):
    """An injected crash is recorded, other trials are intact, --resume completes the run."""
    suite = toy_suite("", body=toy_suite().read_text().replace("seeds = [0]", "seeds = [0, 1]"))
    out = tmp_path / "runs"
    r = run_cli("run", str(suite), "--out", str(out), "--no-report",
                env={"AMPBENCH_FAULT": "amp-o1-fp16:1:crash"})
    assert r.exit_code == 2, r.output                  # a crashed trial -> ERROR -> 2
    # the AMP mode's unknown list name, from its workers as they start (the runner imports no paddle): once
    assert r.output.count("mode amp-o1-fp16: Paddle does not know op name(s) embedding") == 1, r.output
    run = RunDir(only_run(out))
    trials = {t.key: t for t in run.load_trials()}
    assert trials["amp-o1-fp16__seed1"].status == "crashed"
    assert "injected crash" in trials["amp-o1-fp16__seed1"].error
    assert {k for k, t in trials.items() if t.status == "ok"} == {"fp32__seed0", "amp-o1-fp16__seed0", "fp32__seed1"}
    before = run.trial_path(["fp32", "seed0"][0], 0).read_text()
    check = json.loads((run.path / "check.json").read_text())
    assert {v["mode"]: v["verdict"] for v in check["verdicts"]}["amp-o1-fp16"] == "ERROR"

    r = run_cli("run", str(suite), "--resume", str(run.path), "--no-report")
    assert r.exit_code == 3, r.output                  # complete now; AMP inactive on CPU -> 3
    assert "3 finished trial(s) kept, 1 to run" in r.output
    assert run.trial_path("fp32", 0).read_text() == before  # finished trials not redone
    df = pd.read_csv(run.path / "summary.csv")
    assert len(df) == 4 and set(df["status"]) == {"ok"}
    assert (df["amp_active"] == False).all()
    assert "inactive" in r.output.lower()
    info = json.loads((run.path / "run.json").read_text())
    assert info["profile"] == "default" and len(info["plan"]) == 4 and info["finished"]
