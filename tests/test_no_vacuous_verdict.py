"""A run that judged no AMP mode compared nothing: it can never exit 0 (issue 21), whatever the suite."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ampbench.cli import app
from ampbench.config import load_suite
from ampbench.judge.check import check_trials
from ampbench.results import Trial

cli = CliRunner()

FP32_ONLY = """
[suite]
name = "toy"
workload = "toy"
metric = "accuracy"
seeds = [0]

[workload]
train_rows = 256
eval_rows = 64

[train]
batch_size = 32
steps = 6
warmup_steps = 1
timeout_s = 120

[[modes]]
name = "fp32"
"""


def _ok_trial(mode: str) -> Trial:
    steps = [{"step": i, "loss": 2.0 - 0.1 * i, "time_s": 0.01, "samples": 32} for i in range(1, 21)]
    return Trial.model_validate({"suite": "toy", "workload": "toy", "mode": mode, "seed": 0, "status": "ok",
                                 "steps": steps, "metrics": {"accuracy": 0.9}, "batch_size": 32})


def test_fp32_only_plan_is_inconclusive_and_says_nothing_was_compared(tmp_path):
    p = tmp_path / "s.toml"
    p.write_text(FP32_ONLY)
    suite = load_suite(p).suite
    [v] = check_trials(suite, [_ok_trial("fp32")], [("fp32", 0)])
    assert v.verdict == "INCONCLUSIVE"
    assert any(r.rule == "amp-compared" and "Nothing was compared" in r.message for r in v.rules)


def test_a_planned_amp_mode_does_not_trigger_the_rule(tmp_path, toy_suite):
    suite = load_suite(toy_suite()).suite
    verdicts = check_trials(suite, [_ok_trial("fp32")], [("fp32", 0), ("amp-o1-fp16", 0)])
    assert not any(r.rule == "amp-compared" for v in verdicts for r in v.rules)


@pytest.mark.slow
def test_fp32_only_suite_run_through_the_cli_exits_3(tmp_path, cache_env):
    p = tmp_path / "s.toml"
    p.write_text(FP32_ONLY)
    out = tmp_path / "runs"
    r = cli.invoke(app, ["run", str(p), "--out", str(out)], env={"COLUMNS": "200"})
    assert r.exit_code == 3, r.output
    assert "Nothing was compared" in r.output
    run = next((out / "toy").iterdir())
    check = json.loads((run / "check.json").read_text())
    assert check["exit_code"] == 3 and check["verdicts"][0]["verdict"] == "INCONCLUSIVE"
    assert "Verdict: PASS" not in (run / "report.md").read_text()
    r = cli.invoke(app, ["check", str(run), "--strict"], env={"COLUMNS": "200"})
    assert r.exit_code == 1, r.output


@pytest.mark.slow
def test_mode_fp32_of_a_suite_with_amp_modes_exits_3(tmp_path, toy_suite, cache_env):
    out = tmp_path / "runs"
    r = cli.invoke(app, ["run", str(toy_suite()), "--mode", "fp32", "--out", str(out), "--no-report"],
                   env={"COLUMNS": "200"})
    assert r.exit_code == 3, r.output
    assert "planned only fp32" in r.output
